//! [`LiveRulesReport`]: what the live check against rules read at run time found, as the
//! guard's [`crate::Report`] carries it. Plain data, compiled with or without the `rules`
//! feature (without it, no layer fills one).

use std::sync::{Arc, Mutex};

use super::ComplianceReport;

/// The live check against the official rule files read at run time
/// (`Builder::live_rules`, `MLLOG_RULES`; feature `rules`): where the rules came
/// from, what they said at `run_start` and on the whole log, or why they could not be run.
///
/// Its reports are [`ComplianceReport`]s as the built-in live check gives them, their
/// findings the rule engine's (each finding's `source` is the rule file, e.g.
/// `training_6.1.0/closed_common.yaml`); the verdict is read with `passed(true)`, as the
/// built-in one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveRulesReport {
    /// Where the rules come from, in words: `mlperf-logging 4.1.68 at PATH (imported by
    /// python3)` ([`crate::rules_source::RulesSource::describe`]), or the spec given while it
    /// is not resolved yet.
    pub source: String,
    /// The usage and the ruleset checked against: `training 6.1.0`.
    pub ruleset: String,
    /// What was missing or wrong at `run_start` (the keys that normally come later left out).
    pub at_run_start: Option<ComplianceReport>,
    /// The verdict on the whole log, once the run has ended.
    pub report: Option<ComplianceReport>,
    /// Why the rules could not be run: a source that is no package, a ruleset the folder
    /// lacks, a rule file that does not load (naming the file). The log is written all the
    /// same; only this check is missing.
    pub error: Option<String>,
}

impl LiveRulesReport {
    /// The check ran on the whole log and it complies (warnings fail it, as the official
    /// checker's `--werror`).
    pub fn passed(&self) -> bool {
        self.error.is_none() && self.report.as_ref().is_some_and(|r| r.passed(true))
    }
}

/// The shared state of the live check against rules read at run time: written by the
/// thread that runs the rules, read by the guard.
#[derive(Clone, Debug, Default)]
pub(crate) struct LiveRulesHandle(pub(crate) Arc<Mutex<LiveRulesReport>>);

impl LiveRulesHandle {
    /// The report as it stands.
    pub(crate) fn report(&self) -> LiveRulesReport {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Changes the report in place.
    #[cfg(feature = "rules")]
    pub(crate) fn update(&self, f: impl FnOnce(&mut LiveRulesReport)) {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()));
    }
}
