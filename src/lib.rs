#![doc = include_str!("../README.md")]
#![deny(missing_docs)]
#![warn(unreachable_pub)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Thread ids (`gettid`), the exit hooks (`atexit`, `sigaction`) and the profiler's thread
// count (`/proc/self/task`) are Linux's.
#[cfg(not(target_os = "linux"))]
compile_error!("tracing-mllog builds for Linux only");

// Diagnostics on stderr never panic: `eprintln!` does when stderr is closed (a job piped into
// `head`, a launcher that closed it), and logging must never take the training process down.
// What cannot be said is dropped; the report still counts it.
macro_rules! stderr_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
macro_rules! stderr_text {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

// The format, the rules and the results live in `mllog-core` (no `tracing`); they are
// re-exported at the paths they always had, so `tracing_mllog::keys::...` and `crate::keys`
// keep working.
pub mod barrier;
mod cache_clear;
mod clock_step;
pub mod compliance;
mod device_sync;
pub mod env;
mod error;
pub use mllog_core::{keys, results, rules_source};
/// MLLOG records (`mllog-core`'s [`record`](mllog_core::record) module), and the
/// [`TracedRecord`](record::TracedRecord) the layer hands its sinks: a record with what the
/// layer knows beyond its line.
pub mod record {
    pub use crate::layer::fields::{KEY_FIELD, NAMESPACE_FIELD, STATUS_FIELD, VALUE_FIELD};
    pub use crate::traced::{IntervalIds, OtelFields, TraceParent, TracedRecord};
    pub use mllog_core::record::*;
}
mod layer;
mod log_value;
mod os_thread;
mod pipeline;
pub mod presets;
#[cfg(feature = "profiling")]
#[cfg_attr(docsrs, doc(cfg(feature = "profiling")))]
pub mod profile;
mod redact;
mod registry;
pub mod run;
pub mod sink;
mod submission;
mod traced;

// The root holds what a program writes in its first hour with the crate: the layer and its
// builder, the macros' companions, the guard and its report, the run's handle and target, the
// submission's vocabulary. The rest stays in its module (`barrier`, `env`, `record`, `run`,
// `sink`), named there once.
pub use cache_clear::CacheClear;
pub use clock_step::WALL_CLOCK_STEP_MS;
pub use compliance::Ruleset;
pub use device_sync::SyncAt;
pub use error::Error;
pub use keys::Benchmark;
pub use layer::{filter, Builder, Interval, MllogFilter, MllogLayer, Output, Ranks};
#[doc(hidden)]
pub use log_value::__private;
pub use log_value::{log_value, Composite, LogValue};
pub use pipeline::{Guard, Overflow, Pipeline, RecordFeed, Report};
pub use record::{Record, Value};
pub use run::{RunHandle, Target};
pub use submission::{Division, Submission, SystemStatus};

/// Logs one MLLOG `POINT_IN_TIME` record through `tracing`:
/// `mllog!(key, value)` or `mllog!(key, value, meta = ..., ...)`.
///
/// It expands to `tracing::info!(mllog.key = key, value = value, meta...)`, so `file` and
/// `lineno` are the line of this macro call. The value and every `name = expr` (or shorthand
/// `name`) metadata field may be any [`LogValue`]: numbers, strings, lists (`Vec`, arrays,
/// slices, tuples), `Option` (`None` is `null`), objects, nested, logged as Python's
/// `mlperf_logging` logs the same Python value; `f32` by its shortest decimal (`0.1f32` is
/// `0.1`). Other field forms (`?x`, `%x`, `field::Empty`, any other `tracing::Value`) reach
/// `tracing` unchanged.
///
/// ```
/// use tracing_mllog::{keys, mllog};
/// mllog!(keys::GLOBAL_BATCH_SIZE, 8);
/// mllog!(keys::EVAL_ACCURACY, 0.9243, samples_count = 3072);
/// mllog!(keys::OPT_ADAMW_WEIGHT_DECAY, 0.1f32); // "value": 0.1
/// mllog!("opt_adam_betas", [0.9, 0.95], shape = (4, "x"), skip = None::<u32>);
/// ```
#[macro_export]
macro_rules! mllog {
    ($key:expr, $value:expr $(, $($meta:tt)*)?) => {
        $crate::__mllog_fields!(($key, $value) () $($($meta)*)?)
    };
}

/// `mllog!`'s metadata, field by field: `name = expr` and `name` go through [`LogValue`]
/// (when the type has it), everything else is passed on as written.
#[doc(hidden)]
#[macro_export]
macro_rules! __mllog_fields {
    (($key:expr, $value:expr) ($($done:tt)*)) => {
        $crate::__mllog_event!($key, $value, ($($done)*) ())
    };
    ($kv:tt ($($done:tt)*) $($k:ident).+ = ? $v:expr $(, $($rest:tt)*)?) => {
        $crate::__mllog_fields!($kv ($($done)*, $($k).+ = ?$v) $($($rest)*)?)
    };
    ($kv:tt ($($done:tt)*) $($k:ident).+ = % $v:expr $(, $($rest:tt)*)?) => {
        $crate::__mllog_fields!($kv ($($done)*, $($k).+ = %$v) $($($rest)*)?)
    };
    ($kv:tt ($($done:tt)*) $($k:ident).+ = $v:expr $(, $($rest:tt)*)?) => {
        $crate::__mllog_fields!(
            $kv ($($done)*, $($k).+ = (&$crate::__private::Wrap(&$v)).__mllog_field())
            $($($rest)*)?
        )
    };
    ($kv:tt ($($done:tt)*) $k:literal = ? $v:expr $(, $($rest:tt)*)?) => {
        $crate::__mllog_fields!($kv ($($done)*, $k = ?$v) $($($rest)*)?)
    };
    ($kv:tt ($($done:tt)*) $k:literal = % $v:expr $(, $($rest:tt)*)?) => {
        $crate::__mllog_fields!($kv ($($done)*, $k = %$v) $($($rest)*)?)
    };
    ($kv:tt ($($done:tt)*) $k:literal = $v:expr $(, $($rest:tt)*)?) => {
        $crate::__mllog_fields!(
            $kv ($($done)*, $k = (&$crate::__private::Wrap(&$v)).__mllog_field())
            $($($rest)*)?
        )
    };
    ($kv:tt ($($done:tt)*) ? $($k:ident).+ $(, $($rest:tt)*)?) => {
        $crate::__mllog_fields!($kv ($($done)*, ?$($k).+) $($($rest)*)?)
    };
    ($kv:tt ($($done:tt)*) % $($k:ident).+ $(, $($rest:tt)*)?) => {
        $crate::__mllog_fields!($kv ($($done)*, %$($k).+) $($($rest)*)?)
    };
    ($kv:tt ($($done:tt)*) $($k:ident).+ $(, $($rest:tt)*)?) => {
        $crate::__mllog_fields!(
            $kv ($($done)*, $($k).+ = (&$crate::__private::Wrap(&$($k).+)).__mllog_field())
            $($($rest)*)?
        )
    };
    // A message (format string and arguments): as written, last.
    (($key:expr, $value:expr) ($($done:tt)*) $($message:tt)+) => {
        $crate::__mllog_event!($key, $value, ($($done)*) (, $($message)+))
    };
}

/// `mllog!`'s event, with the key evaluated once. An `eval_accuracy` gets a callsite of its
/// own, named [`EVAL_EVENT`]: a rank that writes nothing lets only that callsite (and `run`)
/// through its filter, so its [`RunHandle`] learns of convergence while every other event of
/// that rank stays disabled at its callsite and costs nothing.
#[doc(hidden)]
#[macro_export]
macro_rules! __mllog_event {
    ($key:expr, $value:expr, ($($done:tt)*) ($($message:tt)*)) => {{
        #[allow(unused_imports)]
        use $crate::__private::{KeyText as _, OtherKey as _, ViaLogValue as _, ViaTracing as _};
        let __mllog_key = &$key;
        if (&$crate::__private::Wrap(__mllog_key)).__mllog_is_eval() {
            // `event!`: `info!(name: .., a.b = ..)` is ambiguous to tracing's own matcher.
            ::tracing::event!(
                name: $crate::EVAL_EVENT,
                ::tracing::Level::INFO,
                mllog.key = __mllog_key,
                value = (&$crate::__private::Wrap(&$value)).__mllog_field()
                $($done)* $($message)*
            )
        } else {
            ::tracing::info!(
                mllog.key = __mllog_key,
                value = (&$crate::__private::Wrap(&$value)).__mllog_field()
                $($done)* $($message)*
            )
        }
    }};
}

/// The name of the callsite that [`mllog!`] uses for an `eval_accuracy` (tracing's default
/// event name is `event file:line`). A rank that writes nothing enables this callsite alone
/// among events, so that [`RunHandle::converged`] and [`RunHandle::diverged`] answer there as
/// on the writing rank. A plain `tracing` event reaches a non-writing rank's handle only with
/// this name (`event!`: tracing's `info!` does not take a name before a dotted field):
///
/// ```
/// use tracing_mllog::{EVAL_EVENT, MllogLayer, Ranks, Target};
/// use tracing_subscriber::prelude::*;
///
/// let (layer, _guard) = MllogLayer::builder()
///     .ranks(Ranks::default().rank(1)) // a rank that writes nothing
///     .target(Target::at_least(0.75))
///     .build()?;
/// let run = layer.run_handle();
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     tracing_mllog::mllog!("tracked_stats", 1.0); // disabled at its callsite here
///     tracing::event!(name: EVAL_EVENT, tracing::Level::INFO, mllog.key = "eval_accuracy", value = 0.8);
/// });
/// assert!(run.converged() && run.evals() == 1);
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
pub const EVAL_EVENT: &str = "mllog eval_accuracy";

/// Opens a `train_step` span as a root span: `train_step!(step = i, samples = n, loss = Empty)`.
///
/// It expands to `tracing::info_span!(parent: None, "train_step", ...)`. The layer finds a
/// step's run, block and epoch on its own (its run state and a per-thread interval stack), so
/// the MLLOG log and every sink get the same records as from `info_span!("train_step", ...)`.
/// What the root saves is the `Registry`'s bookkeeping of a parent: a reference taken on the
/// enclosing span when the step opens and dropped, through a second dispatch, when it closes:
/// most of what separates the two forms' costs (docs/performance.md, "Which `train_step` to
/// write", has the figures). The
/// price: other layers of the subscriber (`fmt`, tracing-opentelemetry) see the step as a root
/// span, not as a child of its block; where that matters, use `info_span!("train_step", ...)`.
/// The name is the default one: with a renamed step span (`Builder::train_step_span`), write
/// `info_span!(parent: None, "<name>", ...)`. The attribute form, for a function that is one
/// step: `#[instrument(name = "train_step", parent = None, skip_all, fields(step = step))]`.
///
/// The first argument, unless it is a field (`name = value`, `?name`, `%name`), is the step:
/// `train_step!(step)` and `train_step!(i + 1, lr)` mean `step = step` and `step = i + 1, lr`;
/// the fields after it are `tracing`'s.
///
/// ```
/// use tracing::field::Empty;
/// use tracing_mllog::train_step;
/// for step in 0..3u64 {
///     let s = train_step!(step, samples = 8u64, loss = Empty).entered();
///     s.record("loss", 0.5);
///     let _next = train_step!(step + 1);
/// }
/// let _no_fields = train_step!().entered();
/// ```
#[macro_export]
macro_rules! train_step {
    () => {
        ::tracing::info_span!(parent: ::core::option::Option::None, "train_step")
    };
    // Fields as `tracing` writes them: `name = value`, `?name`, `%name`.
    ($($k:ident).+ = $($rest:tt)*) => {
        ::tracing::info_span!(
            parent: ::core::option::Option::None, "train_step", $($k).+ = $($rest)*
        )
    };
    (? $($rest:tt)*) => {
        ::tracing::info_span!(parent: ::core::option::Option::None, "train_step", ? $($rest)*)
    };
    (% $($rest:tt)*) => {
        ::tracing::info_span!(parent: ::core::option::Option::None, "train_step", % $($rest)*)
    };
    // Anything else first is the step: `train_step!(step)`, `train_step!(i + 1, lr)`.
    ($step:expr $(, $($rest:tt)*)?) => {
        ::tracing::info_span!(
            parent: ::core::option::Option::None, "train_step", step = $step $(, $($rest)*)?
        )
    };
}
