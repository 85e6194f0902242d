//! The parts of tracing-mllog that need no `tracing`: MLLOG records (values, the
//! Python-parity encoder, the parser), the MLPerf Training keys and benchmarks, submission
//! metadata, the compliance rules and the built-in checker, the benchmark presets, and the
//! results computations (run summaries, scores, submission packages).
//!
//! The `tracing-mllog` layer and the `mllog` command-line tool both build on this crate;
//! `tracing-mllog` re-exports every module at the same path (`tracing_mllog::compliance`, ...).
//! Nothing here reads the process environment but [`rules_source::RulesSource::from_env`], and
//! nothing starts a thread except `results::verify` (feature `review`), whose scoped workers
//! read a submission's files and end before it returns; the one child process is the Python
//! interpreter [`rules_source::RulesSource::from_python`] asks where its `mlperf_logging` is.
//!
//! ```
//! use mllog_core::compliance::{check_text, example_log, Division, Ruleset};
//! use mllog_core::keys::Benchmark;
//!
//! let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
//! assert!(check_text(Ruleset::V6_1_0, &log).passed(true));
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod compliance;
mod error;
pub mod keys;
pub mod presets;
pub mod record;
pub mod results;
pub mod rules_source;
pub mod run;
pub mod submission;

pub use compliance::Ruleset;
pub use error::Error;
pub use keys::Benchmark;
pub use record::{EventType, Record, Value};
pub use run::{Direction, EvalSchedule, Target};
pub use submission::{Division, Submission, SystemStatus, SUBMISSION_VARIABLES};

/// The published result logs the unit tests also read, from the corpus outside the repository
/// (`MLLOG_CORPUS`, set by `scripts/test`): their paths, or none, with a line on stderr saying
/// what `what` did not cover.
#[cfg(test)]
pub(crate) fn published_logs(what: &str) -> Vec<std::path::PathBuf> {
    use std::io::Write as _;
    let Some(root) = std::env::var_os("MLLOG_CORPUS") else {
        let line = format!("skipped: {what} (MLLOG_CORPUS not set)\n");
        let _ = std::io::stderr().write_all(line.as_bytes());
        return Vec::new();
    };
    let dir = std::path::Path::new(&root).join("real");
    let mut logs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("MLLOG_CORPUS: {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    logs.sort();
    assert!(!logs.is_empty(), "no published logs in {}", dir.display());
    logs
}
