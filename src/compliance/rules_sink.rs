//! The live check against the official rule files read at run time (feature `rules`): a sink
//! that keeps the MLLOG lines, and a thread of its own that runs mllog-core's rule engine on
//! them at `run_start` and at the end of the run.
//!
//! The engine runs on its own thread, not on the pipeline's worker: a check of a long log
//! takes longer than writing a line, and the MLLOG file must not wait for it. The engine is
//! loaded there too, once, when the layer is built (it is not `Send`; and finding the package
//! through Python starts an interpreter, which the training thread must not wait for).

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{unbounded, Receiver, Sender};
use mllog_core::compliance::engine::{EngineReport, LoadError, RuleEngine};
use mllog_core::rules_source::RulesSource;

use super::live_rules::LiveRulesHandle;
use super::{counts_at_run_start, ComplianceReport, Ruleset};
use crate::keys;
use crate::record::TracedRecord;
use crate::sink::{Sink, SinkError};

/// The usage the layer's logs are checked under.
const USAGE: &str = "training";

/// Where the rules are read from: a source found already, or a spec (`MLLOG_RULES`) the
/// checking thread resolves as `mllog check --rules` does.
#[derive(Clone, Debug)]
pub(crate) enum RulesSpec {
    /// Given in code ([`crate::Builder::live_rules`]).
    Source(RulesSource),
    /// `MLLOG_RULES`, with the interpreter its `python` means (`MLLOG_PYTHON`, else `python3`).
    Env { spec: String, python: String },
}

impl RulesSpec {
    /// The source, resolved now (for a spec, perhaps by starting Python), or why not.
    fn resolve(self) -> Result<RulesSource, String> {
        match self {
            RulesSpec::Source(s) => Ok(s),
            RulesSpec::Env { spec, python } => RulesSource::resolve(&spec, &python)
                .map_err(|e| format!("{}={spec}: {e}", mllog_core::rules_source::RULES_ENV)),
        }
    }

    /// The source in words before it is resolved.
    fn describe(&self) -> String {
        match self {
            RulesSpec::Source(s) => s.describe(),
            RulesSpec::Env { spec, .. } => {
                format!("{}={spec}", mllog_core::rules_source::RULES_ENV)
            }
        }
    }
}

/// A callback of [`super::LivePolicy::Callback`], shared by the built-in check and this one.
pub(crate) type SharedCallback = Arc<Mutex<Box<dyn Fn(&ComplianceReport) + Send>>>;

/// What the check does at `run_start` ([`super::LivePolicy`] less `Off`, under which no
/// check runs at all).
pub(crate) enum RulesPolicy {
    Warn,
    Callback(SharedCallback),
}

enum Job {
    /// The lines up to `run_start`.
    RunStart(Vec<u8>),
    /// The whole log; answered when checked.
    End(Vec<u8>, Sender<()>),
}

/// Keeps the MLLOG lines as the file has them and hands them to the checking thread.
pub(crate) struct RulesSink {
    log: Vec<u8>,
    line: String,
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    state: LiveRulesHandle,
    fired: bool,
}

impl std::fmt::Debug for RulesSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RulesSink")
            .field("bytes", &self.log.len())
            .field("fired", &self.fired)
            .finish_non_exhaustive()
    }
}

impl RulesSink {
    /// Starts the checking thread, which resolves `rules` and loads the rule files of `named`
    /// (else of the builder's `ruleset`) at once; the handle reads its report.
    pub(crate) fn start(
        rules: RulesSpec,
        ruleset: Ruleset,
        named: Option<String>,
        policy: RulesPolicy,
    ) -> std::io::Result<(RulesSink, LiveRulesHandle)> {
        let ruleset = Named::new(ruleset, named);
        let state = LiveRulesHandle::default();
        state.update(|r| {
            r.source = rules.describe();
            r.ruleset = format!("{USAGE} {}", ruleset.name);
        });
        let (jobs, rx) = unbounded();
        let shared = state.clone();
        let thread = std::thread::Builder::new()
            .name("tracing-mllog rules".into())
            .spawn(move || serve(rules, ruleset, policy, shared, rx))?;
        let sink = RulesSink {
            log: Vec::new(),
            line: String::new(),
            jobs: Some(jobs),
            thread: Some(thread),
            state: state.clone(),
            fired: false,
        };
        Ok((sink, state))
    }
}

impl Sink for RulesSink {
    fn name(&self) -> &str {
        "compliance-rules"
    }

    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
        if record.trace_only {
            return Ok(()); // not an MLLOG line
        }
        self.line.clear();
        record.encode(&mut self.line);
        self.log.extend_from_slice(self.line.as_bytes());
        self.log.push(b'\n');
        if !self.fired && record.key == keys::RUN_START {
            self.fired = true;
            if let Some(jobs) = &self.jobs {
                let _ = jobs.send(Job::RunStart(self.log.clone()));
            }
        }
        Ok(())
    }

    fn close(&mut self, deadline: Instant) -> Result<(), SinkError> {
        let Some(jobs) = self.jobs.take() else {
            return Ok(());
        };
        let (done, checked) = crossbeam_channel::bounded(1);
        let _ = jobs.send(Job::End(std::mem::take(&mut self.log), done));
        drop(jobs);
        if checked.recv_deadline(deadline).is_ok() {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        } else {
            // Left running: the process may end before it does, and the report says so.
            self.state.update(|r| {
                if r.error.is_none() && r.report.is_none() {
                    r.error = Some(
                        "the rules read at run time had not checked the whole log by the \
                         shutdown deadline (Pipeline::shutdown_timeout)"
                            .into(),
                    );
                }
            });
        }
        Ok(())
    }
}

/// The checking thread: loads the rules, then checks each log it is handed.
fn serve(
    rules: RulesSpec,
    ruleset: Named,
    policy: RulesPolicy,
    state: LiveRulesHandle,
    jobs: Receiver<Job>,
) {
    let engine = rules.resolve().and_then(|source| {
        state.update(|r| r.source = source.describe());
        // Every file of the ruleset loaded now, so that a file that cannot be run is said as
        // the layer is built rather than when the run ends.
        RuleEngine::load(&source.compliance_dir(), USAGE, &ruleset.name)
            .and_then(|e| e.load_all().map(|()| e))
            .map_err(|e| format!("the rules of {} cannot be run: {e}", state.report().source))
    });
    match &engine {
        Err(e) => {
            state.update(|r| r.error = Some(e.clone()));
            if matches!(policy, RulesPolicy::Warn) {
                stderr_line!(
                    "mllog compliance: {e}; the run goes on, its log is not checked against them"
                );
            }
        }
        // What the checker reads past (a misspelt field, most often) leaves a rule unchecked
        // without a word: said once, as `mllog check` says it.
        Ok(engine) if matches!(policy, RulesPolicy::Warn) => {
            for i in engine.ignored() {
                stderr_line!("mllog compliance: note: {i}");
            }
        }
        Ok(_) => {}
    }
    for job in jobs {
        match (job, &engine) {
            (Job::RunStart(log), Ok(engine)) => {
                let Some(mut pending) = checked(
                    engine.check_bytes(&log, false),
                    ruleset.typed,
                    &policy,
                    &state,
                ) else {
                    continue;
                };
                pending.findings.retain(counts_at_run_start);
                let source = state.report().source;
                match &policy {
                    RulesPolicy::Warn if !pending.findings.is_empty() => stderr_text!(
                        "mllog compliance: at run_start ({} records, ruleset {}, rules of {}):\n{}",
                        pending.records,
                        ruleset.name,
                        source,
                        pending.render_text("<mllog stream>", false)
                    ),
                    RulesPolicy::Warn => {}
                    RulesPolicy::Callback(f) => {
                        (f.lock().unwrap_or_else(|e| e.into_inner()))(&pending)
                    }
                }
                state.update(|r| r.at_run_start = Some(pending));
            }
            (Job::End(log, done), Ok(engine)) => {
                if let Some(report) = checked(
                    engine.check_bytes(&log, false),
                    ruleset.typed,
                    &policy,
                    &state,
                ) {
                    state.update(|r| r.report = Some(report));
                }
                let _ = done.send(());
            }
            (Job::End(_, done), Err(_)) => {
                let _ = done.send(());
            }
            (Job::RunStart(_), Err(_)) => {}
        }
    }
}

/// The report of a check; `None` when a rule file the log's configs reach (one outside the
/// ruleset's folder, the others being loaded up front) cannot be run, or a snippet needs, on
/// the log's values, what the engine does not have: kept as the error, and said on stderr
/// under [`RulesPolicy::Warn`] the first time.
fn checked(
    r: Result<EngineReport, LoadError>,
    ruleset: Ruleset,
    policy: &RulesPolicy,
    state: &LiveRulesHandle,
) -> Option<ComplianceReport> {
    match r {
        Ok(r) => Some(report_of(r, ruleset)),
        Err(e) => {
            let e = format!("the rules of {} cannot be run: {e}", state.report().source);
            let first = state.report().error.is_none();
            if first && matches!(policy, RulesPolicy::Warn) {
                stderr_line!("mllog compliance: {e}; the run goes on");
            }
            state.update(|r| r.error = Some(e));
            None
        }
    }
}

/// The ruleset whose rule files run, by name, and the one its reports carry: the same when it
/// is built in; for a ruleset that is not (the next round's release candidate), the builder's,
/// as the built-in check runs it ([`super::LiveRulesReport::ruleset`] names the one run).
#[derive(Clone, Debug)]
struct Named {
    name: String,
    typed: Ruleset,
}

impl Named {
    fn new(builder: Ruleset, named: Option<String>) -> Named {
        match named {
            Some(name) => Named {
                typed: Ruleset::from_name(&name).unwrap_or(builder),
                name,
            },
            None => Named {
                name: builder.as_str().to_owned(),
                typed: builder,
            },
        }
    }
}

/// The engine's verdict as the built-in check gives its own. The division and benchmark are
/// the built-in checker's reading of the log; the engine's findings say them where they
/// matter.
fn report_of(r: EngineReport, ruleset: Ruleset) -> ComplianceReport {
    ComplianceReport {
        ruleset,
        division: None,
        benchmark: None,
        rule_files: r.rule_files,
        records: r.records,
        findings: r.findings,
    }
}

/// The policy of the built-in check and that of this one: a callback is shared by both (each
/// calls it with its own report at `run_start`); `Off` is never given, as no check runs then.
pub(crate) fn split_policy(policy: super::LivePolicy) -> (super::LivePolicy, RulesPolicy) {
    match policy {
        super::LivePolicy::Callback(f) => {
            let shared: SharedCallback = Arc::new(Mutex::new(f));
            let mine = Arc::clone(&shared);
            let builtin = super::LivePolicy::Callback(Box::new(move |r: &ComplianceReport| {
                (mine.lock().unwrap_or_else(|e| e.into_inner()))(r)
            }));
            (builtin, RulesPolicy::Callback(shared))
        }
        other => (other, RulesPolicy::Warn),
    }
}
