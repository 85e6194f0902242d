//! [`ComplianceSink`]: checks the record stream live, inside the pipeline.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Checker, ComplianceReport, Finding, FindingKind, Ruleset, Severity};
use crate::keys;
use crate::record::{TracedRecord, Value};
use crate::run::EvalSchedule;
use crate::sink::{Sink, SinkError};

/// What to do when `run_start` reaches the checker (the end of the part of the log a submitter
/// controls before the clock starts).
///
/// The policy runs on the pipeline's worker, after `run_start` is written: it reports, it
/// cannot keep the clock from starting. To decide before `run` opens, call
/// [`crate::Guard::preflight`] between `init` and `run`.
///
/// Set it with [`crate::Builder::live_check`]. [`LivePolicy::Warn`] (the default) suits an
/// interactive run; [`LivePolicy::Callback`] lets a launcher act on the report (alert,
/// record, stop the job); [`LivePolicy::Off`] for tests and benchmarks of the layer itself.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use tracing_mllog::compliance::LivePolicy;
/// use tracing_mllog::{Benchmark, Division, MllogLayer, Output, Submission};
/// use tracing_subscriber::prelude::*;
///
/// let problems = Arc::new(Mutex::new(Vec::new()));
/// let seen = problems.clone();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .submission(Submission::default().benchmark(Benchmark::Llama2_70bLora).division(Division::Open))
///      // a closed one without an org would not even build
///     .live_check(LivePolicy::Callback(Box::new(move |report| {
///         let mut seen = seen.lock().unwrap();
///         seen.extend(report.errors().map(|f| f.message.clone()));
///     })))
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     drop(tracing::info_span!("init").entered()); // no hyperparameters logged
///     let _run = tracing::info_span!("run").entered(); // the callback fires here
/// });
/// guard.shutdown();
/// let problems = problems.lock().unwrap();
/// assert!(problems.iter().any(|m| m.contains("submission_org")), "{problems:?}");
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Default)]
pub enum LivePolicy {
    /// Nothing.
    Off,
    /// Print what is missing or wrong so far to stderr (never into the MLLOG stream).
    #[default]
    Warn,
    /// Call a function with [`Checker::pending_at_run_start`]'s report.
    Callback(Box<dyn Fn(&ComplianceReport) + Send>),
}

impl fmt::Debug for LivePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LivePolicy::Off => f.write_str("Off"),
            LivePolicy::Warn => f.write_str("Warn"),
            LivePolicy::Callback(_) => f.write_str("Callback(..)"),
        }
    }
}

/// A cloneable view of a [`ComplianceSink`]'s checker, usable from any thread (see the
/// [`ComplianceSink`] example).
///
/// The sink moves into the pipeline (or to another thread); the handle, taken first with
/// [`ComplianceSink::handle`], keeps reading its verdict. Through the layer,
/// [`crate::Guard::preflight`] and [`crate::Report::compliance`] read the same checker.
///
/// ```
/// use tracing_mllog::compliance::{ComplianceSink, LivePolicy, Ruleset};
/// use tracing_mllog::record::parse_log;
/// use tracing_mllog::sink::Sink;
///
/// let mut sink = ComplianceSink::new(Ruleset::V6_1_0).with_policy(LivePolicy::Off);
/// let handle = sink.handle();
/// let log = ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"POINT_IN_TIME\", \
///            \"key\": \"global_batch_size\", \"value\": 256, \"metadata\": {}}";
/// std::thread::spawn(move || {
///     for line in parse_log(log).0 {
///         sink.write(&line.record.into()).unwrap();
///     }
/// })
/// .join()
/// .unwrap();
/// // Before `run_start`: what is still missing, and no `seed` yet (a warning).
/// let pending = handle.pending();
/// assert!(pending.findings.iter().any(|f| f.key.as_deref() == Some("seed")));
/// assert!(!handle.report().passed(false)); // as a whole log, far from complete
/// ```
#[derive(Clone, Debug)]
pub struct ComplianceHandle {
    inner: Arc<Mutex<Checker>>,
    notes: Arc<LiveNotes>,
}

/// What live checking adds to the official rules: a submission package needs a `seed`, and
/// the benchmark's rules fix when evaluations happen. Warnings, never in the final verdict
/// (which is the official checker's).
#[derive(Debug, Default)]
struct LiveNotes {
    seed_seen: AtomicBool,
    off_schedule: Mutex<Vec<Finding>>,
    /// What the log's own records say about the run's integrity: a `cache_clear` that is
    /// `false`, a wall-clock step (`crate::clock_step`).
    integrity: Mutex<Vec<Finding>>,
}

impl LiveNotes {
    fn add_to(&self, report: &mut ComplianceReport) {
        if !self.seed_seen.load(Ordering::Relaxed) {
            report.findings.push(missing_seed());
        }
        report.findings.extend(
            self.off_schedule
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned(),
        );
        report.findings.extend(
            self.integrity
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .cloned(),
        );
    }
}

impl ComplianceHandle {
    fn lock(&self) -> MutexGuard<'_, Checker> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The report of the records seen so far, as if the log ended here.
    pub fn report(&self) -> ComplianceReport {
        self.lock().report()
    }

    /// What is missing or wrong so far, ignoring keys that normally come after `run_start`.
    /// Beyond the rules, warnings for a missing `seed` (`mllog package` rejects such a log)
    /// and for every `eval_accuracy` off the evaluation schedule.
    pub fn pending(&self) -> ComplianceReport {
        let mut report = self.lock().pending_at_run_start();
        self.notes.add_to(&mut report);
        report
    }
}

/// The warning for a log with no `seed` before `run_start`: the official checker does not
/// require one, but a submission package does.
fn missing_seed() -> Finding {
    Finding {
        severity: Severity::Warning,
        kind: FindingKind::Missing,
        line: None,
        key: Some(keys::SEED.into()),
        message: "no `seed` logged yet: `mllog package` rejects a log without one \
                  (set `Builder::seed`, or log `keys::SEED` inside `init`)"
            .into(),
        rule: "seed before run_start".into(),
        source: "tracing-mllog".into(),
    }
}

/// A [`Sink`] that feeds every record to a [`Checker`] and applies a [`LivePolicy`] at the
/// first `run_start`. Records are numbered 1, 2, ... as the lines of the MLLOG file they form.
///
/// The layer adds one on the writing rank on its own ([`crate::Builder::live_check`] sets its
/// policy; [`crate::Guard::preflight`] and the final [`crate::Report`] read it). Build one
/// yourself only to check a record stream outside the layer, e.g. records replayed from
/// another source; [`ComplianceSink::handle`] reads its verdict from any thread.
///
/// ```
/// use tracing_mllog::compliance::{ComplianceSink, LivePolicy, Ruleset};
/// use tracing_mllog::record::parse_log;
/// use tracing_mllog::sink::Sink;
///
/// let mut sink = ComplianceSink::new(Ruleset::V6_1_0).with_policy(LivePolicy::Off);
/// let handle = sink.handle();
/// let log = ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"INTERVAL_START\", \
///            \"key\": \"init_start\", \"value\": null, \"metadata\": {}}";
/// for line in parse_log(log).0 {
///     sink.write(&line.record.into())?;
/// }
/// assert!(!handle.report().passed(false)); // nearly everything is still missing
/// # Ok::<(), tracing_mllog::sink::SinkError>(())
/// ```
#[derive(Debug)]
pub struct ComplianceSink {
    inner: Arc<Mutex<Checker>>,
    notes: Arc<LiveNotes>,
    schedule: Option<EvalSchedule>,
    policy: LivePolicy,
    lines: usize,
    fired: bool,
}

impl ComplianceSink {
    /// A sink checking against `ruleset`, with the default policy ([`LivePolicy::Warn`]).
    pub fn new(ruleset: Ruleset) -> ComplianceSink {
        ComplianceSink {
            inner: Arc::new(Mutex::new(Checker::new(ruleset))),
            notes: Arc::default(),
            schedule: None,
            policy: LivePolicy::default(),
            lines: 0,
            fired: false,
        }
    }

    /// Sets the policy applied at `run_start`.
    pub fn with_policy(mut self, policy: LivePolicy) -> ComplianceSink {
        self.policy = policy;
        self
    }

    /// Warns (with the [`LivePolicy::Warn`] policy, on stderr) about every `eval_accuracy`
    /// whose `samples_count` is not one of this schedule's evaluation points.
    pub fn with_eval_schedule(mut self, schedule: EvalSchedule) -> ComplianceSink {
        self.schedule = Some(schedule);
        self
    }

    /// A handle to the checker's state.
    pub fn handle(&self) -> ComplianceHandle {
        ComplianceHandle {
            inner: Arc::clone(&self.inner),
            notes: Arc::clone(&self.notes),
        }
    }

    /// An `eval_accuracy` off the schedule: a warning in the pending report, and said on
    /// stderr when it is logged (under `Warn`).
    fn check_schedule(&self, record: &TracedRecord) {
        let Some(schedule) = self.schedule else {
            return;
        };
        let Some(samples) = record
            .metadata
            .get(keys::SAMPLES_COUNT)
            .and_then(|v| v.as_i128())
            .and_then(|v| u64::try_from(v).ok())
        else {
            return;
        };
        if schedule.is_point(samples) {
            return;
        }
        let finding = Finding {
            severity: Severity::Warning,
            kind: FindingKind::Check,
            line: Some(self.lines),
            key: Some(keys::EVAL_ACCURACY.into()),
            message: format!(
                "eval_accuracy at samples_count {samples} is off the benchmark's evaluation \
                 schedule (first at {}, then every {}; the nearest points are {} and {})",
                schedule.first,
                schedule.every,
                schedule
                    .last_at_or_before(samples)
                    .unwrap_or(schedule.first),
                schedule.next_after(samples),
            ),
            rule: "evaluation schedule".into(),
            source: "tracing-mllog".into(),
        };
        if matches!(self.policy, LivePolicy::Warn) {
            stderr_line!(
                "mllog compliance: warning: line {}: {}",
                self.lines,
                finding.message
            );
        }
        self.notes
            .off_schedule
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(finding);
    }

    /// A warning about the run's integrity; said on stderr at once (under `Warn`) when it
    /// comes after `run_start`, whose report would otherwise be the only place it shows.
    #[cold]
    fn note_integrity(&self, key: &str, message: String, severity: Severity) {
        // A wall-clock step is said when it happens; what the set-up says comes at run_start.
        let say_now = severity == Severity::Warning;
        if say_now && matches!(self.policy, LivePolicy::Warn) {
            stderr_line!("mllog compliance: warning: line {}: {message}", self.lines);
        }
        self.notes
            .integrity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Finding {
                severity,
                kind: FindingKind::Check,
                line: Some(self.lines),
                key: Some(key.into()),
                message,
                rule: "run integrity".into(),
                source: "tracing-mllog".into(),
            });
    }

    fn on_run_start(&self, pending: &ComplianceReport) {
        match &self.policy {
            LivePolicy::Off => {}
            LivePolicy::Warn => {
                if !pending.findings.is_empty() {
                    stderr_text!(
                        "mllog compliance: at run_start ({} records, ruleset {}):\n{}",
                        pending.records,
                        pending.ruleset,
                        pending.render_text("<mllog stream>", false)
                    );
                }
            }
            LivePolicy::Callback(f) => f(pending),
        }
    }
}

impl Sink for ComplianceSink {
    fn name(&self) -> &str {
        "compliance"
    }

    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
        if record.trace_only {
            return Ok(()); // not an MLLOG line
        }
        self.lines += 1;
        if record.key == keys::SEED {
            self.notes.seed_seen.store(true, Ordering::Relaxed);
        } else if record.key == keys::EVAL_ACCURACY {
            self.check_schedule(record);
        } else if record.key == keys::CACHE_CLEAR && matches!(record.value, Value::Bool(false)) {
            self.note_integrity(
                keys::CACHE_CLEAR,
                "cache_clear is `false`: nothing was cleared by this process \
                 (MLLOG_CACHE_CLEAR=launcher if the job script drops the page cache)"
                    .to_owned(),
                // Said plainly, but no rule is broken: the official rules need only the
                // record, so `--werror` still passes.
                Severity::Note,
            );
        }
        if let Some(ms) = record
            .metadata
            .get(crate::results::WALL_CLOCK_STEP_MS)
            .and_then(Value::as_f64)
        {
            self.note_integrity(
                &record.key,
                format!(
                    "the wall clock moved {ms:+.3} ms away from the log's clock by this \
                     `{}` (an NTP step, or a pause the log's durations do not count)",
                    record.key
                ),
                Severity::Warning,
            );
        }
        let pending = {
            let mut checker = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            checker.feed(self.lines, record);
            if !self.fired && record.key == keys::RUN_START {
                self.fired = true;
                let mut pending = checker.pending_at_run_start();
                self.notes.add_to(&mut pending);
                Some(pending)
            } else {
                None
            }
        };
        if let Some(p) = pending
            && !matches!(self.policy, LivePolicy::Off)
        {
            self.on_run_start(&p);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compliance::{example_log, Division};
    use crate::keys::Benchmark;
    use crate::record::{EventType, Metadata, Record, Value};

    fn rec(key: &'static str, value: Value) -> TracedRecord {
        Record::event(key, value)
            .at_millis(1_767_225_600_000)
            .into()
    }

    fn llama2() -> String {
        example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap()
    }

    #[test]
    fn sink_drives_checker_and_fires_callback() {
        use std::sync::{Arc, Mutex};
        let seen: Arc<Mutex<Vec<usize>>> = Arc::default();
        let s2 = Arc::clone(&seen);
        let mut sink = ComplianceSink::new(Ruleset::V6_1_0).with_policy(LivePolicy::Callback(
            Box::new(move |r: &ComplianceReport| s2.lock().unwrap().push(r.errors().count())),
        ));
        let handle = sink.handle();
        let (records, errs) = crate::record::parse_log(&llama2());
        assert!(errs.is_empty());
        for p in &records {
            sink.write(&p.record.clone().into()).unwrap();
        }
        assert_eq!(*seen.lock().unwrap(), vec![0]);
        assert!(handle.report().passed(true));
        // A sink with a bad record reports it.
        let mut sink = ComplianceSink::new(Ruleset::V6_1_0).with_policy(LivePolicy::Off);
        let h = sink.handle();
        sink.write(
            &Record::event("submission_division", Value::from("closed"))
                .with_event_type(EventType::PointInTime)
                .into(),
        )
        .unwrap();
        sink.write(
            &Record::event("submission_benchmark", Value::from("llama2_70b_lora"))
                .with_metadata(Metadata::at("a.rs", 1))
                .into(),
        )
        .unwrap();
        sink.write(&rec("lora_rank", Value::Int(4))).unwrap();
        assert!(h
            .report()
            .errors()
            .any(|f| f.line == Some(3) && f.key.as_deref() == Some("lora_rank")));
    }
}
