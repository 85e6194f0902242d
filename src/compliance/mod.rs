//! MLPerf Training compliance, built in: the official checker's rules (mlperf-logging 4.1.68,
//! training rulesets 5.0.0, 5.1.0, 6.0.0 and 6.1.0) as Rust data, a streaming [`Checker`] with
//! the same verdicts, diagnostics in words (text and JSON) (all from `mllog-core`), and a
//! [`ComplianceSink`] that checks the record stream live.
//!
//! ```
//! use tracing_mllog::compliance::{check_text, example_log, Division, Ruleset};
//! use tracing_mllog::keys::Benchmark;
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
//! With the `rules` feature the live check also runs the official rule files read at run time
//! (an installed mlperf-logging, or a folder laid out as its package: the release candidate of
//! a round), through mllog-core's rule engine: `Builder::live_rules`, `MLLOG_RULES`;
//! its verdict is [`LiveRulesReport`].
//!
//! See `docs/compliance.md` for the rule model, the semantics and the known divergences.

mod live_rules;
#[cfg(feature = "rules")]
mod rules_sink;
mod sink;

#[cfg(feature = "rules")]
pub use live_rules::LiveRules;
pub use live_rules::LiveRulesReport;
pub(crate) use live_rules::{LiveRulesHandle, RULESET_FORM};
pub use mllog_core::compliance::*;
#[cfg(feature = "rules")]
pub(crate) use rules_sink::{split_policy, RulesSink, RulesSpec};
pub use sink::{ComplianceHandle, ComplianceSink, LivePolicy};
