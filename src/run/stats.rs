use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use super::Target;

/// Run accounting shared by the layer (which updates it on the training thread: a few relaxed
/// atomic adds per step, no lock) and [`super::RunHandle`] (which reads it).
#[derive(Default)]
pub(crate) struct RunStats {
    pub(crate) target: Option<Target>,
    converged: AtomicBool,
    diverged: AtomicBool,
    samples: AtomicU64,
    steps: AtomicU64,
    evals: AtomicU64,
    last_eval_bits: AtomicU64,
    run_busy_ns: AtomicU64,
    /// The run's (busy ns, samples, steps) when the current block started: a block's figures
    /// are the run's minus these, so a step adds to three counters, not six (an atomic add is
    /// cheap in instructions but costs a locked cache-line update each).
    block_mark: [AtomicU64; 3],
}

/// Throughput of a stretch of steps over in-step time only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Throughput {
    pub(crate) samples_per_s: f64,
    pub(crate) mean_step_s: f64,
    pub(crate) steps: u64,
}

impl RunStats {
    pub(crate) fn new(target: Option<Target>) -> RunStats {
        RunStats {
            target,
            ..RunStats::default()
        }
    }

    /// A finished step: `busy_ns` inside the step, `samples` trained by it. Returns the run's
    /// samples after the step.
    pub(crate) fn on_step(&self, busy_ns: u64, samples: u64) -> u64 {
        self.steps.fetch_add(1, Relaxed);
        self.run_busy_ns.fetch_add(busy_ns, Relaxed);
        self.samples.fetch_add(samples, Relaxed) + samples
    }

    /// The run's (busy ns, samples, steps) so far.
    fn totals(&self) -> [u64; 3] {
        [
            self.run_busy_ns.load(Relaxed),
            self.samples.load(Relaxed),
            self.steps.load(Relaxed),
        ]
    }

    /// Marks the run's totals: the block's figures count from here.
    fn mark(&self, totals: [u64; 3]) {
        for (mark, total) in self.block_mark.iter().zip(totals) {
            mark.store(total, Relaxed);
        }
    }

    pub(crate) fn start_block(&self) {
        self.mark(self.totals());
    }

    /// The block's throughput (and a reset), if the block had steps.
    pub(crate) fn take_block(&self) -> Option<Throughput> {
        let now = self.totals();
        let [busy, samples, steps] =
            std::array::from_fn(|i| now[i].wrapping_sub(self.block_mark[i].load(Relaxed)));
        self.mark(now);
        throughput(busy, samples, steps)
    }

    pub(crate) fn run_throughput_stats(&self) -> Option<Throughput> {
        let [busy, samples, steps] = self.totals();
        throughput(busy, samples, steps)
    }

    pub(crate) fn run_throughput(&self) -> Option<f64> {
        self.run_throughput_stats().map(|t| t.samples_per_s)
    }

    /// An `eval_accuracy` value was logged.
    pub(crate) fn on_eval(&self, metric: f64) {
        self.evals.fetch_add(1, Relaxed);
        self.last_eval_bits.store(metric.to_bits(), Relaxed);
        if !metric.is_finite() {
            self.diverged.store(true, Relaxed);
        } else if self.target.is_some_and(|t| t.reached(metric)) {
            self.converged.store(true, Relaxed);
        }
    }

    pub(crate) fn converged(&self) -> bool {
        self.converged.load(Relaxed)
    }

    pub(crate) fn diverged(&self) -> bool {
        self.diverged.load(Relaxed)
    }

    pub(crate) fn samples(&self) -> u64 {
        self.samples.load(Relaxed)
    }

    pub(crate) fn steps(&self) -> u64 {
        self.steps.load(Relaxed)
    }

    pub(crate) fn evals(&self) -> u64 {
        self.evals.load(Relaxed)
    }

    pub(crate) fn last_eval(&self) -> Option<f64> {
        (self.evals() > 0).then(|| f64::from_bits(self.last_eval_bits.load(Relaxed)))
    }
}

fn throughput(busy_ns: u64, samples: u64, steps: u64) -> Option<Throughput> {
    (busy_ns > 0 && steps > 0 && samples > 0).then(|| Throughput {
        samples_per_s: samples as f64 * 1e9 / busy_ns as f64,
        mean_step_s: busy_ns as f64 / 1e9 / steps as f64,
        steps,
    })
}
