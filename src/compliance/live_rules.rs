//! [`LiveRulesReport`]: what the live check against rules read at run time found, as the
//! guard's [`crate::Report`] carries it. Plain data, compiled with or without the `rules`
//! feature (without it, no layer fills one).

use std::sync::{Arc, Mutex};

use super::ComplianceReport;

/// The official rule files the live check runs besides the built-in rules
/// ([`crate::Builder::live_rules`]; feature `rules`): where they come from, and the ruleset
/// to run, when it is not the builder's [`crate::Builder::ruleset`]: a round that no build of
/// this crate knows yet, such as the release candidate of the next one (`6.2.0`). The built-in
/// check keeps the builder's ruleset; only this one runs the named folder.
///
/// ```no_run
/// use tracing_mllog::compliance::LiveRules;
/// use tracing_mllog::rules_source::RulesSource;
/// use tracing_mllog::MllogLayer;
///
/// let rc = RulesSource::from_python("python3")?; // the release candidate, installed
/// let builder = MllogLayer::builder().live_rules(LiveRules::new(rc).ruleset("6.2.0"));
/// # drop(builder);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "rules")]
#[cfg_attr(docsrs, doc(cfg(feature = "rules")))]
#[derive(Clone, Debug)]
pub struct LiveRules {
    pub(crate) source: crate::rules_source::RulesSource,
    pub(crate) ruleset: Option<String>,
}

#[cfg(feature = "rules")]
impl LiveRules {
    /// The rules of `source`, for the builder's ruleset.
    pub fn new(source: crate::rules_source::RulesSource) -> LiveRules {
        LiveRules {
            source,
            ruleset: None,
        }
    }

    /// Runs the folder of this ruleset (`X.Y.Z`: the source's `training_X.Y.Z`) instead of
    /// the builder's (`MLLOG_RULES_RULESET`). A ruleset the source lacks is said, as a missing
    /// folder is, and the run goes on; a name that is not `X.Y.Z`
    /// ([`Ruleset::is_well_formed`](super::Ruleset::is_well_formed)) fails the build.
    pub fn ruleset(mut self, ruleset: impl Into<String>) -> LiveRules {
        self.ruleset = Some(ruleset.into());
        self
    }
}

/// What a ruleset named for the rules read at run time must look like, for the errors that
/// refuse one ([`super::Ruleset::is_well_formed`] says the rule).
pub(crate) const RULESET_FORM: &str = "expected a ruleset X.Y.Z (e.g. 6.2.0)";

#[cfg(feature = "rules")]
impl From<crate::rules_source::RulesSource> for LiveRules {
    fn from(source: crate::rules_source::RulesSource) -> LiveRules {
        LiveRules::new(source)
    }
}

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
    /// The usage and the ruleset whose rule files ran: `training 6.1.0`. For a ruleset that
    /// is not built in ([`LiveRules::ruleset`]), the reports below carry the builder's typed
    /// ruleset, which the built-in check runs; this names the one the rules came from.
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
