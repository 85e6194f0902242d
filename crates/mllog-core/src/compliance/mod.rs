//! MLPerf Training compliance, built in: the official checker's rules (mlperf-logging 4.1.68,
//! training rulesets 5.0.0, 5.1.0, 6.0.0 and 6.1.0) as Rust data, a streaming [`Checker`] with
//! the same verdicts, and diagnostics in words (text and JSON). The sink that checks the record
//! stream live (`ComplianceSink`) is the layer's, in `tracing-mllog`.
//!
//! ```
//! use mllog_core::compliance::{check_text, example_log, Division, Ruleset};
//! use mllog_core::keys::Benchmark;
//!
//! let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
//! let report = check_text(Ruleset::V6_1_0, &log);
//! assert!(report.passed(true));
//! let bad = log.replace("\"lora_rank\", \"value\": 16", "\"lora_rank\", \"value\": 8");
//! let report = check_text(Ruleset::V6_1_0, &bad);
//! assert!(!report.passed(false));
//! assert!(report.findings[0].message.contains("`lora_rank` must be 16 in the closed division"));
//! ```
//!
//! The official rule files themselves, of any ruleset an installed `mlperf-logging` ships, are
//! run by the rule engine (`engine`, feature `rules`), from the package
//! [`crate::rules_source`] locates.
//!
//! See `docs/compliance.md` for the rule model, the semantics and the known divergences.

mod checker;
#[cfg(feature = "rules")]
#[cfg_attr(docsrs, doc(cfg(feature = "rules")))]
pub mod engine;
mod example;
mod model;
mod py;
mod report;
mod rulesets;
mod submission;

pub use checker::{
    check_reader, check_reader_detect, check_reader_detect_older, check_reader_each, check_text,
    counts_at_run_start, detect_ruleset, ruleset_of, Checker, StreamCheck,
};
pub use example::{example_batch_size, example_hyperparameters, example_log};
pub use model::{
    setter_of, Bound, Check, Cmp, Custom, Division, ExecError, KeyRule, Line, Lit, Post, Req,
    RuleFile, Ruleset, Scope, State, ValueRange,
};
#[cfg(feature = "serde")]
pub use report::ComplianceReportJson;
pub use report::{ComplianceReport, Finding, FindingKind, Severity};
pub use rulesets::{required_value, rules, target, RuleTarget, RulesetFiles, DISCLOSURE_KEYS};

#[cfg(test)]
mod tests;
