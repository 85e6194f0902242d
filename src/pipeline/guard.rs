//! The [`Guard`]: what the program holds to keep the pipeline running, and what ends the run
//! and stops the pipeline once, whoever comes first (the guard, an exit path): flush, the
//! live checker's verdict before the clock starts, the report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};

use super::exit::{self, lock_until, Ending, Finish, Finishable};
use super::queue::Queue;
use super::report::Report;
use super::worker::WorkerControl;
use crate::compliance::{ComplianceHandle, LiveRulesHandle};
use crate::record::Str;
use crate::sink::plug::SpanHook;

/// Keeps the pipeline running; flushes everything and stops the worker when dropped, within
/// the shutdown deadline. Hold it for the whole run (`let _guard = ...`, not `let _ = ...`).
///
/// Because a global subscriber is never dropped, this guard is the only place where the end of
/// the run is known: it reports anything that was lost on stderr when dropped. A guard that is
/// dropped while `run` is open ends the run first (`run_stop` with status `aborted`, after
/// `block_stop` and the other open intervals). The program's other ways out end it too: see
/// docs/exit-paths.md.
///
/// A guard dropped before a single record reached the pipeline (`let (layer, _) = ..` drops
/// it at once) does not stop anything: it says so on stderr, and the pipeline runs on until
/// the process exits, when it is flushed as on `process::exit`.
///
/// [`Guard::shutdown`] ends the run now and returns the [`Report`]: records received, each
/// sink's [`SinkReport`](crate::sink::SinkReport) (written, errors, drops and why), the live checker's verdict.
///
/// ```
/// use tracing_mllog::sink::{Delivery, MemorySink};
/// use tracing_mllog::{mllog, MllogLayer, Output, Overflow, Pipeline};
/// use tracing_subscriber::prelude::*;
///
/// let (memory, lines) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .environment([("RANK", "0")])
///     .pipeline(Pipeline::default().overflow(Overflow::Block)) // the default: wait for room, lose nothing
///     .sink_with(memory, Delivery::Inline)
///     .build()?;
/// let subscriber = tracing_subscriber::registry().with(layer);
/// tracing::subscriber::with_default(subscriber, || {
///     let _run = tracing::info_span!("run").entered();
///     mllog!("eval_accuracy", 0.75, epoch_num = 1);
/// });
/// let report = guard.shutdown();
/// assert_eq!(report.dropped(), 0);
/// let memory = report.sinks.iter().find(|s| s.name == "memory").unwrap();
/// assert_eq!(memory.written, 3); // run_start, eval_accuracy, run_stop
/// assert!(lines.lines()[1].contains(r#""key": "eval_accuracy", "value": 0.75"#));
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[must_use = "dropping the guard shuts the MLLOG pipeline down; hold it until training ends"]
pub struct Guard {
    pub(super) inner: Arc<GuardInner>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("writes", &self.inner.writes)
            .field("running", &self.inner.running())
            .field("shutdown_timeout", &self.inner.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

/// What a [`Guard`] and the process's exit hooks share: everything needed to end the run and
/// stop the pipeline once, from whichever comes first.
pub(crate) struct GuardInner {
    pub(super) control: Sender<WorkerControl>,
    pub(super) queue: Arc<Queue>,
    /// The worker thread, and a channel that disconnects when it ends.
    pub(super) worker: Mutex<Option<(JoinHandle<()>, Receiver<()>)>>,
    pub(super) shutdown_timeout: Duration,
    pub(super) timed_out: AtomicBool,
    /// The report was printed (by a drop or an exit hook): print it once.
    pub(super) reported: AtomicBool,
    pub(super) compliance: Option<ComplianceHandle>,
    pub(super) live_rules: Option<LiveRulesHandle>,
    pub(super) warn_compliance: bool,
    /// Whether the layer behind this guard writes (on other ranks no record is expected).
    pub(super) writes: bool,
    /// The layer's state, to end the intervals still open when the pipeline stops.
    pub(super) layer: OnceLock<Weak<dyn EndOfRun>>,
    /// The layer's span hooks (the segment profiler): finished when the pipeline stops.
    pub(super) hooks: Vec<Arc<dyn SpanHook>>,
    /// Held by the exit path that is ending the run: another one (a signal during
    /// `process::exit`) waits for it, so it neither returns nor lets the process die while
    /// the log is still being written.
    pub(super) finishing: Mutex<()>,
}

/// What the pipeline asks of the layer: when it stops, end the intervals still open, innermost
/// first, and say which end records were written; when the set-up is checked, where the layer
/// stands in the subscriber. The layer implements it; the pipeline only knows this much of it.
pub(crate) trait EndOfRun: Send + Sync {
    /// Also seals the pipeline ([`RecordSender::seal`]); gives up waiting at `deadline`.
    fn end_open_intervals(&self, ending: Ending, deadline: Instant) -> Vec<Str>;
    /// Says on stderr, before the process may exit, what the layer's filter checks still
    /// have to say.
    fn finish_checks(&self, deadline: Instant);
    /// Whether the layer is part of a subscriber, and what that subscriber's filters hide from
    /// it, found now (not after the filter checks' delay); gives up waiting at `deadline`.
    fn placement(&self, deadline: Instant) -> Placement;
}

/// Where the layer stands in the subscriber ([`EndOfRun::placement`]).
#[derive(Debug, Default)]
pub(crate) struct Placement {
    /// The layer was put into a subscriber (`registry().with(layer)`).
    pub(crate) in_subscriber: bool,
    /// Each filter that hides MLLOG spans or events from the layer, with the fix.
    pub(crate) hidden: Vec<String>,
}

impl GuardInner {
    /// Ends the intervals still open, stops the pipeline within the deadline, and (except for
    /// an explicit shutdown, whose caller gets the report) prints the report if anything went
    /// wrong. Safe to call more than once and from several threads: each step happens once.
    pub(crate) fn finish(&self, how: Finish) {
        let deadline = crate::sink::saturating_deadline(self.shutdown_timeout);
        // Another exit path at work has until its own deadline; then this one goes on anyway.
        let wait = deadline
            .checked_add(Duration::from_secs(1))
            .unwrap_or(deadline);
        let _turn = lock_until(&self.finishing, wait);
        if let Some(shared) = self.layer.get().and_then(Weak::upgrade) {
            let ended = shared.end_open_intervals(how.ending(), deadline);
            if !ended.is_empty() {
                let aborted =
                    how.ending() == Ending::Aborted && ended.iter().any(|k| k == "run_stop");
                stderr_line!(
                    "tracing-mllog: {} with intervals open; written now: {}{}",
                    how.describe(),
                    ended.join(", "),
                    if aborted { " (status `aborted`)" } else { "" }
                );
            }
        }
        self.stop();
        self.finish_checks(deadline);
        if how != Finish::Guard {
            self.print_report();
        }
    }

    /// See [`EndOfRun::finish_checks`].
    fn finish_checks(&self, deadline: Instant) {
        if let Some(shared) = self.layer.get().and_then(Weak::upgrade) {
            shared.finish_checks(deadline);
        }
    }

    fn placement(&self, deadline: Instant) -> Placement {
        self.layer
            .get()
            .and_then(Weak::upgrade)
            .map(|shared| shared.placement(deadline))
            .unwrap_or_default()
    }

    fn print_report(&self) {
        if self.reported.swap(true, Ordering::AcqRel) {
            return;
        }
        let report = self.report();
        if !report.is_clean() || report.received_nothing() || !report.warnings.is_empty() {
            stderr_line!("tracing-mllog: {report}");
        }
        if let (true, Some(c)) = (self.warn_compliance, &report.compliance)
            && !c.passed(true)
        {
            // The report's line above said the notes that are also its warnings (that
            // nothing cleared the page cache): once is enough.
            let mut c = c.clone();
            c.findings.retain(|f| {
                f.severity != crate::compliance::Severity::Note
                    || !f
                        .key
                        .as_deref()
                        .is_some_and(|k| report.warnings.iter().any(|w| w.starts_with(k)))
            });
            stderr_text!("{}", c.render_text("MLLOG output", true));
        }
        if let (true, Some(r)) = (self.warn_compliance, &report.live_rules) {
            // Why the rules could not be run was said when it was found.
            if let Some(c) = r.report.as_ref().filter(|c| !c.passed(true)) {
                stderr_text!(
                    "mllog compliance: the rules of {}:\n{}",
                    r.source,
                    c.render_text("MLLOG output", true)
                );
            }
        }
    }

    /// Waits for the records logged so far to reach the inline sinks (the MLLOG file, the
    /// checker) and, with `every_sink`, the isolated ones too, each flushed.
    fn flush(&self, timeout: Duration, every_sink: bool) -> bool {
        let deadline = crate::sink::saturating_deadline(timeout);
        let (ack, ack_rx) = bounded(1);
        if self
            .control
            .send_deadline(WorkerControl::Flush { every_sink, ack }, deadline)
            .is_err()
        {
            return false;
        }
        self.queue.wake();
        match ack_rx.recv_deadline(deadline) {
            Ok(isolated) => isolated.iter().all(|r| r.recv_deadline(deadline).is_ok()),
            Err(_) => false,
        }
    }

    fn report(&self) -> Report {
        let c = &self.queue.counters;
        if !self.running() {
            exit::reported_drops(&self.queue, c.dropped_closed.load(Ordering::Relaxed));
        }
        Report {
            writes: self.writes,
            records: c.received.load(Ordering::Relaxed),
            dropped_queue_full: c.dropped_full.load(Ordering::Relaxed),
            dropped_after_shutdown: c.dropped_closed.load(Ordering::Relaxed),
            shutdown_timed_out: self.timed_out.load(Ordering::Relaxed)
                || c.sink_timed_out.load(Ordering::Relaxed),
            compliance: self.compliance.as_ref().map(ComplianceHandle::report),
            live_rules: self.live_rules.as_ref().map(LiveRulesHandle::report),
            sinks: c.sinks.iter().map(|s| s.report()).collect(),
            hooks: self.hooks.iter().map(|h| h.detail()).collect(),
            warnings: self
                .queue
                .warnings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    fn stop(&self) {
        let Some((worker, ended)) = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take()
        else {
            return;
        };
        // A profiled segment still open at the end is stopped and flushed now: the layer (and
        // its profiler) may live on in a global subscriber that is never dropped.
        for hook in &self.hooks {
            hook.finish();
        }
        let deadline = crate::sink::saturating_deadline(self.shutdown_timeout);
        if self
            .control
            .send_deadline(WorkerControl::Shutdown(deadline), deadline)
            .is_err()
        {
            self.timed_out.store(true, Ordering::Relaxed);
            return;
        }
        self.queue.wake();
        // One blocking wait (not a polling loop): the thread that shuts down pays the same
        // however long the sinks take to close.
        if let Err(RecvTimeoutError::Timeout) = ended.recv_deadline(deadline) {
            // The worker is stuck in a sink (e.g. a hung file system). Leave it; the process
            // must not hang at exit because of logging.
            self.timed_out.store(true, Ordering::Relaxed);
            return;
        }
        let _ = worker.join();
    }

    fn running(&self) -> bool {
        self.worker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }
}

impl Finishable for GuardInner {
    fn finish(&self, how: Finish) {
        GuardInner::finish(self, how);
    }
}

impl Guard {
    /// Registers the guard with the process's exit hooks and ties it to its layer's state;
    /// the last step of `build`.
    pub(crate) fn arm<L: EndOfRun + 'static>(&self, layer: &Arc<L>) {
        let layer: Weak<L> = Arc::downgrade(layer);
        let _ = self.inner.layer.set(layer);
        let live: Weak<dyn Finishable> = Arc::downgrade(&self.inner) as Weak<GuardInner>;
        exit::register(live);
    }

    /// The own report of the first sink (or span hook) that keeps one of type `T`, as it
    /// stands now: e.g. `guard.detail::<tracing_mllog::sink::UploadReport>()`,
    /// `::<OtelReport>()`, `::<ProfileReport>()`. [`Report::detail`] reads the same from a
    /// report taken earlier.
    pub fn detail<T: std::any::Any + Clone>(&self) -> Option<T> {
        let c = &self.inner.queue.counters;
        c.sinks
            .iter()
            .filter_map(|s| s.status.as_ref())
            .map(|s| s.detail())
            .chain(self.inner.hooks.iter().map(|h| h.detail()))
            .find_map(|d| d.get::<T>().cloned())
    }

    /// Waits until every record pushed before this call has reached every sink and the sinks
    /// have flushed, or until `timeout` passes. Returns whether it completed in time.
    ///
    /// An isolated sink (see [`crate::sink::Delivery`]) that is stalled makes this wait until
    /// `timeout` and return `false`; the MLLOG file is flushed all the same.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.inner.flush(timeout, true)
    }

    /// The live checker's verdict on everything logged so far, as it stands before the clock
    /// starts: waits (up to the shutdown timeout) until every record logged before this call
    /// has been checked, then reports what is missing or wrong, leaving out the keys that
    /// normally come after `run_start`.
    ///
    /// Call it between the end of `init` and the start of `run`: a run whose setup is not
    /// compliant can stop here, before hours of training. `None` when live checking is off or
    /// this rank does not write.
    ///
    /// ```no_run
    /// # let (_layer, guard) = tracing_mllog::MllogLayer::builder().build().unwrap();
    /// # let _: &tracing_mllog::MllogLayer<tracing_subscriber::Registry> = &_layer;
    /// // ... the init span has closed
    /// if let Some(verdict) = guard.preflight() {
    ///     if !verdict.passed(true) {
    ///         eprint!("{}", verdict.render_text("MLLOG output", true));
    ///         std::process::exit(1);
    ///     }
    /// }
    /// ```
    ///
    /// When the subscriber's filters hide the layer's spans or events (a filter on the whole
    /// subscriber below `INFO`, a callsite disabled for every layer), or the layer is part of
    /// no subscriber, the report's first findings say so, with the line to write instead:
    /// what is missing from the log then follows from that.
    pub fn preflight(&self) -> Option<crate::compliance::ComplianceReport> {
        let compliance = self.inner.compliance.as_ref()?;
        // The checker is inline: a stalled isolated sink does not hold up the verdict.
        self.inner.flush(self.inner.shutdown_timeout, false);
        let mut report = compliance.pending();
        let deadline = crate::sink::saturating_deadline(self.inner.shutdown_timeout);
        let placement = self.inner.placement(deadline);
        let received = self.inner.queue.counters.received.load(Ordering::Relaxed);
        let mut causes = placement.hidden;
        if !placement.in_subscriber {
            causes.push(NOT_IN_SUBSCRIBER.to_owned());
        } else if causes.is_empty() && received == 0 {
            causes.push(NOTHING_RECEIVED.to_owned());
        }
        report
            .findings
            .splice(0..0, causes.into_iter().map(setup_finding));
        Some(report)
    }

    /// What happened so far: records written, dropped, write errors per sink.
    pub fn report(&self) -> Report {
        self.inner.report()
    }

    /// Stops the pipeline now (ending the intervals still open, `run` as `aborted`; draining
    /// and closing every sink within the deadline) and returns the report. Dropping the guard
    /// does the same and prints the report to stderr if anything was lost. Records produced
    /// afterwards are counted as dropped (see [`Guard::report`]); calling it again only
    /// reports.
    pub fn shutdown(&mut self) -> Report {
        self.inner.finish(Finish::Guard);
        self.report()
    }
}

/// The cause when the layer is part of no subscriber.
const NOT_IN_SUBSCRIBER: &str = "the MLLOG layer is not part of any subscriber, so no span or \
    event reaches it: add it to the one you install (`tracing_subscriber::registry().with(layer)\
    .init()`)";

/// The cause when the layer is in a subscriber that shows it everything, and got nothing.
const NOTHING_RECEIVED: &str = "no span or event has reached the MLLOG layer: is the subscriber \
    it is part of the one in use (`.init()`, `set_global_default`, `with_default`), and was the \
    `init` span opened?";

/// A cause of an empty or partial log, as the first findings of the preflight's report.
fn setup_finding(message: String) -> crate::compliance::Finding {
    crate::compliance::Finding {
        severity: crate::compliance::Severity::Error,
        kind: crate::compliance::FindingKind::Missing,
        line: None,
        key: None,
        message,
        rule: "the layer sees every MLLOG span and event".into(),
        source: "tracing-mllog".into(),
    }
}

/// How long a dropped guard waits for the records already logged to reach the worker before
/// it decides that none were (then the pipeline stays up until the process exits).
const DROP_PROBE: Duration = Duration::from_millis(200);

impl Drop for Guard {
    fn drop(&mut self) {
        let inner = &self.inner;
        if inner.writes && inner.running() {
            inner.flush(DROP_PROBE, false);
            if inner.queue.counters.received.load(Ordering::Relaxed) == 0 {
                let deadline = crate::sink::saturating_deadline(DROP_PROBE);
                inner.finish_checks(deadline);
                // Only a guard dropped before its layer joined a subscriber was dropped too
                // early; otherwise the filters (said on stderr already) or the program kept
                // the records away, and the guard is not to blame.
                let placement = inner.placement(deadline);
                if !placement.in_subscriber {
                    stderr_line!(
                        "tracing-mllog: warning: the guard was dropped before any record was \
                         logged, while its layer was part of no subscriber: either the guard \
                         was dropped too early (`let (layer, _) = ..` drops it at once; bind \
                         it to a name: `let (layer, _guard) = ..`), or the layer was never \
                         added (`registry().with(layer).init()`). The MLLOG pipeline keeps \
                         running until the process exits, where it is flushed and closed."
                    );
                } else if placement.hidden.is_empty() {
                    stderr_line!("tracing-mllog: warning: {NOTHING_RECEIVED}");
                }
                exit::detach(self.inner.clone());
                return;
            }
        }
        inner.finish(Finish::Guard);
        inner.print_report();
    }
}
