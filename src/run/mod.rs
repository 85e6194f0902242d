//! The run's lifecycle beyond single records: quality targets and convergence, the evaluation
//! schedule (both from `mllog-core`), and the throughput / train-loss accounting that
//! `train_step` spans drive.

mod stats;

pub use mllog_core::run::*;
pub(crate) use stats::{RunStats, Throughput};

use std::sync::Arc;

/// Reads the run's state from the training loop: whether the target was reached, how many
/// samples were trained. Cheap to clone; get it from [`crate::MllogLayer::run_handle`].
///
/// ```no_run
/// # let (layer, _guard) = tracing_mllog::MllogLayer::builder().build().unwrap();
/// # let _: &tracing_mllog::MllogLayer<tracing_subscriber::Registry> = &layer;
/// let run = layer.run_handle();
/// // ... after logging eval_accuracy:
/// if run.converged() {
///     // stop training; run_stop will say `success`
/// }
/// ```
#[derive(Clone)]
pub struct RunHandle {
    pub(crate) stats: Arc<RunStats>,
}

impl RunHandle {
    /// Whether an `eval_accuracy` record has reached the configured [`Target`].
    pub fn converged(&self) -> bool {
        self.stats.converged()
    }

    /// Whether the last `eval_accuracy` was NaN or infinite: the run cannot converge any more
    /// and should stop (it ends `aborted`).
    pub fn diverged(&self) -> bool {
        self.stats.diverged()
    }

    /// Samples trained inside the run so far, counted from `train_step` spans.
    pub fn samples(&self) -> u64 {
        self.stats.samples()
    }

    /// `train_step` spans completed inside the run (warmup steps excluded).
    pub fn steps(&self) -> u64 {
        self.stats.steps()
    }

    /// Number of `eval_accuracy` records so far.
    pub fn evals(&self) -> u64 {
        self.stats.evals()
    }

    /// The last `eval_accuracy` value, if any.
    pub fn last_eval(&self) -> Option<f64> {
        self.stats.last_eval()
    }

    /// Samples per second over in-step time only, for the whole run so far.
    pub fn throughput(&self) -> Option<f64> {
        self.stats.run_throughput()
    }
}
