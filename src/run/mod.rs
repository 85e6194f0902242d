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
/// The layer updates it on its own from what is logged: `train_step` spans count steps and
/// samples (their `samples` field, or [`crate::Builder::global_batch_size`] per step),
/// `eval_accuracy` records are compared with the [`Target`] given to
/// [`crate::Builder::target`] (or the benchmark's preset). The training loop only reads it,
/// typically to stop once [`RunHandle::converged`] (the `run` span then ends with status
/// `success`) or [`RunHandle::diverged`]. Reads are lock-free and safe from any thread.
///
/// **On every rank.** What a loop decides on, [`converged`](RunHandle::converged),
/// [`diverged`](RunHandle::diverged), [`evals`](RunHandle::evals) and
/// [`last_eval`](RunHandle::last_eval), answers the same on a rank that writes nothing as on
/// the writing rank, from the `eval_accuracy` that each rank logs with [`crate::mllog!`], so
/// `while !run.converged()` ends on every rank at the same evaluation. The step counts,
/// [`samples`](RunHandle::samples), [`steps`](RunHandle::steps) and
/// [`throughput`](RunHandle::throughput), are kept only where the layer is active (the
/// writing rank, or a rank with a sink of its own): a non-writing rank's steps never reach
/// the layer, which is what keeps them free, so there they stay 0 and `None`.
///
/// ```
/// use tracing_mllog::{keys, mllog, train_step, MllogLayer, Output, Target};
/// use tracing_subscriber::prelude::*;
///
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .global_batch_size(8)
///     .target(Target::at_least(0.75))
///     .build()?;
/// let run = layer.run_handle();
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     let _run = tracing::info_span!("run").entered();
///     for step in 0..4u64 {
///         let _s = train_step!(step).entered();
///     }
///     mllog!(keys::EVAL_ACCURACY, 0.6, samples_count = 32);
///     assert!(!run.converged());
///     mllog!(keys::EVAL_ACCURACY, 0.8, samples_count = 32);
/// });
/// guard.shutdown();
/// assert!(run.converged() && !run.diverged());
/// assert_eq!((run.steps(), run.samples(), run.evals()), (4, 32, 2));
/// assert_eq!(run.last_eval(), Some(0.8));
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Clone)]
pub struct RunHandle {
    pub(crate) stats: Arc<RunStats>,
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunHandle")
            .field("converged", &self.converged())
            .field("diverged", &self.diverged())
            .field("steps", &self.steps())
            .field("evals", &self.evals())
            .finish()
    }
}

impl RunHandle {
    /// Whether an `eval_accuracy` record has reached the configured [`Target`]. The same on
    /// every rank.
    pub fn converged(&self) -> bool {
        self.stats.converged()
    }

    /// Whether the last `eval_accuracy` was NaN or infinite: the run cannot converge any more
    /// and should stop (it ends `aborted`). The same on every rank.
    pub fn diverged(&self) -> bool {
        self.stats.diverged()
    }

    /// Samples trained inside the run so far, counted from `train_step` spans; 0 on a rank
    /// where the layer is inactive (see above).
    pub fn samples(&self) -> u64 {
        self.stats.samples()
    }

    /// `train_step` spans completed inside the run (warmup steps excluded); 0 on a rank where
    /// the layer is inactive.
    pub fn steps(&self) -> u64 {
        self.stats.steps()
    }

    /// Number of `eval_accuracy` records so far. The same on every rank.
    pub fn evals(&self) -> u64 {
        self.stats.evals()
    }

    /// The last `eval_accuracy` value, if any. The same on every rank.
    pub fn last_eval(&self) -> Option<f64> {
        self.stats.last_eval()
    }

    /// Samples per second over in-step time only, for the whole run so far; `None` on a rank
    /// where the layer is inactive.
    pub fn throughput(&self) -> Option<f64> {
        self.stats.run_throughput()
    }
}
