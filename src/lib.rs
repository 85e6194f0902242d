#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod compliance;
mod error;
pub mod keys;
mod layer;
mod pipeline;
pub mod presets;
#[cfg(feature = "profiling")]
pub mod profile;
pub mod record;
pub mod results;
pub mod run;
pub mod sink;
mod submission;

pub use compliance::Ruleset;
pub use error::Error;
pub use keys::Benchmark;
pub use layer::fields::{KEY_FIELD, NAMESPACE_FIELD, STATUS_FIELD, VALUE_FIELD};
pub use layer::{detect_rank, filter, Builder, Interval, MllogFilter, MllogLayer, RANK_VARIABLES};
pub use pipeline::{Guard, Overflow, Report, SinkReport};
pub use record::{EventType, Record, Value};
pub use run::{Direction, EvalSchedule, RunHandle, Target};
pub use submission::{Division, Submission, SystemStatus, SUBMISSION_VARIABLES};

/// Logs one MLLOG `POINT_IN_TIME` record through `tracing`:
/// `mllog!(key, value)` or `mllog!(key, value, meta = ..., ...)`.
///
/// It expands to `tracing::info!(mllog.key = key, value = value, meta...)`, so `file` and
/// `lineno` are the line of this macro call.
///
/// ```
/// use tracing_mllog::{keys, mllog};
/// mllog!(keys::GLOBAL_BATCH_SIZE, 8);
/// mllog!(keys::EVAL_ACCURACY, 0.9243, samples_count = 3072);
/// ```
#[macro_export]
macro_rules! mllog {
    ($key:expr, $value:expr $(, $($meta:tt)+)?) => {
        ::tracing::info!(mllog.key = $key, value = $value $(, $($meta)+)?)
    };
}

/// Opens a `train_step` span as a root span: `train_step!(step = i, samples = n, loss = Empty)`.
///
/// It expands to `tracing::info_span!(parent: None, "train_step", ...)`. The layer finds a
/// step's run, block and epoch on its own (its run state and a per-thread interval stack), so
/// the MLLOG log and every sink get the same records as from `info_span!("train_step", ...)`.
/// What the root saves is the `Registry`'s bookkeeping of a parent: a reference taken on the
/// enclosing span when the step opens and dropped, through a second dispatch, when it closes,
/// about 500 of the ~1 750 instructions a counted step costs (README, "Performance"). The
/// price: other layers of the subscriber (`fmt`, tracing-opentelemetry) see the step as a root
/// span, not as a child of its block; where that matters, use `info_span!("train_step", ...)`.
/// The name is the default one: with a renamed step span (`Builder::train_step_span`), write
/// `info_span!(parent: None, "<name>", ...)`. The attribute form, for a function that is one
/// step: `#[instrument(name = "train_step", parent = None, skip_all, fields(step = step))]`.
///
/// ```
/// use tracing::field::Empty;
/// use tracing_mllog::train_step;
/// for step in 0..3u64 {
///     let s = train_step!(step, samples = 8u64, loss = Empty).entered();
///     s.record("loss", 0.5);
/// }
/// let _no_fields = train_step!().entered();
/// ```
#[macro_export]
macro_rules! train_step {
    () => {
        ::tracing::info_span!(parent: ::core::option::Option::None, "train_step")
    };
    ($($fields:tt)+) => {
        ::tracing::info_span!(parent: ::core::option::Option::None, "train_step", $($fields)+)
    };
}
