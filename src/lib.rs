#![doc = include_str!("../README.md")]
#![deny(missing_docs)]

pub mod compliance;
mod error;
pub mod keys;
mod layer;
mod pipeline;
pub mod presets;
#[cfg(feature = "rpd")]
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
pub use layer::{detect_rank, Builder, Interval, MllogLayer, RANK_VARIABLES};
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
