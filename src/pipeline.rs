//! The record pipeline: a bounded channel from the training threads to one worker thread that
//! fans every record out, in order, to the sinks; and the [`Guard`] that flushes it.
//!
//! The training thread only pushes typed records; formatting and I/O happen on the worker.
//! Nothing is dropped silently: every record that does not reach a sink is counted and shows
//! up in the [`Report`].

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, SendTimeoutError, Sender};
use crossbeam_queue::ArrayQueue;

use crate::compliance::ComplianceHandle;
use crate::record::Record;
use crate::sink::Sink;

/// What the layer does when the channel is full (the worker is behind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Wait until there is room: lossless. The default, because MLLOG records are few and a
    /// missing one makes the log non-compliant.
    #[default]
    Block,
    /// Wait at most this long, then drop the record and count it.
    DropAfter(Duration),
}

pub(crate) enum Msg {
    /// Boxed so the channel moves a pointer; the boxes are recycled (see [`Pipeline::record`]).
    Record(Box<Record>),
    Flush(Sender<()>),
    Shutdown(Instant),
}

thread_local! {
    /// Set on the worker thread so that anything a sink (or a crate a sink uses) logs through
    /// `tracing` never feeds back into the record stream.
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// Whether the current thread is the pipeline's worker thread.
pub(crate) fn on_worker_thread() -> bool {
    ON_WORKER.with(Cell::get)
}

#[derive(Default)]
struct SinkCounters {
    name: String,
    written: AtomicU64,
    errors: AtomicU64,
    last_error: Mutex<Option<String>>,
}

#[derive(Default)]
struct Counters {
    received: AtomicU64,
    dropped_full: AtomicU64,
    dropped_closed: AtomicU64,
    sinks: Vec<SinkCounters>,
}

/// The sending side, held by the layer. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Pipeline {
    tx: Sender<Msg>,
    overflow: Overflow,
    counters: Arc<Counters>,
    /// Emptied records the worker hands back, so the training thread reuses their memory
    /// instead of allocating: in the steady state a record costs no allocation there.
    spare: Arc<ArrayQueue<Box<Record>>>,
}

impl Pipeline {
    /// Starts the worker thread with these sinks.
    pub(crate) fn start(
        sinks: Vec<Box<dyn Sink>>,
        capacity: usize,
        overflow: Overflow,
        shutdown_timeout: Duration,
    ) -> std::io::Result<(Pipeline, Guard)> {
        let (tx, rx) = bounded(capacity.max(1));
        let counters = Arc::new(Counters {
            sinks: sinks
                .iter()
                .map(|s| SinkCounters {
                    name: s.name().to_owned(),
                    ..SinkCounters::default()
                })
                .collect(),
            ..Counters::default()
        });
        let worker_counters = counters.clone();
        // A spare record for every record that can be in flight (each channel slot, the one
        // the worker holds, the one a producer fills), allocated now: the training thread never
        // allocates a record in the steady state, and memory stays bounded.
        let spares = capacity.max(1) + 2;
        let spare = Arc::new(ArrayQueue::new(spares));
        for _ in 0..spares {
            let _ = spare.push(Box::new(Record::empty()));
        }
        let worker_spare = spare.clone();
        let worker = std::thread::Builder::new()
            .name("tracing-mllog".into())
            .spawn(move || run_worker(rx, sinks, &worker_counters, &worker_spare))?;
        let pipeline = Pipeline {
            tx: tx.clone(),
            overflow,
            counters: counters.clone(),
            spare,
        };
        let guard = Guard {
            tx,
            worker: Some(worker),
            counters,
            shutdown_timeout,
            timed_out: false,
            compliance: None,
            warn_compliance: false,
            #[cfg(feature = "rpd")]
            profiler: None,
            #[cfg(feature = "object-store")]
            upload: None,
            #[cfg(feature = "otel")]
            otel: None,
        };
        Ok((pipeline, guard))
    }

    /// An empty record to fill: a recycled one when the worker has handed one back.
    pub(crate) fn record(&self) -> Box<Record> {
        self.spare
            .pop()
            .unwrap_or_else(|| Box::new(Record::empty()))
    }

    /// Hands a record to the worker. Never panics; a record that cannot be delivered is counted.
    pub(crate) fn push(&self, record: Box<Record>) {
        let msg = Msg::Record(record);
        let result = match self.overflow {
            Overflow::Block => self.tx.send(msg).map_err(|_| false),
            Overflow::DropAfter(wait) => self.tx.send_timeout(msg, wait).map_err(|e| match e {
                SendTimeoutError::Timeout(_) => true,
                SendTimeoutError::Disconnected(_) => false,
            }),
        };
        match result {
            Ok(()) => {}
            Err(true) => {
                self.counters.dropped_full.fetch_add(1, Ordering::Relaxed);
            }
            Err(false) => {
                self.counters.dropped_closed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn run_worker(
    rx: Receiver<Msg>,
    mut sinks: Vec<Box<dyn Sink>>,
    counters: &Counters,
    spare: &ArrayQueue<Box<Record>>,
) {
    ON_WORKER.with(|w| w.set(true));
    let mut deadline = None;
    'outer: while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Record(mut record) => {
                    write_all(&mut sinks, counters, &record);
                    record.clear();
                    let _ = spare.push(record);
                }
                Msg::Flush(ack) => {
                    flush_all(&mut sinks, counters);
                    let _ = ack.send(());
                }
                Msg::Shutdown(d) => {
                    deadline = Some(d);
                    break 'outer;
                }
            }
            next = rx.try_recv().ok();
        }
        // The channel ran dry: make what we have visible (file readers, uploaders).
        flush_all(&mut sinks, counters);
    }
    // Records queued behind the shutdown message (other threads still logging) are drained
    // rather than lost; after this the receiver is dropped and later sends count as dropped.
    while let Ok(msg) = rx.try_recv() {
        match msg {
            Msg::Record(record) => write_all(&mut sinks, counters, &record),
            Msg::Flush(ack) => {
                flush_all(&mut sinks, counters);
                let _ = ack.send(());
            }
            Msg::Shutdown(_) => {}
        }
    }
    let deadline = deadline.unwrap_or_else(|| Instant::now() + Duration::from_secs(5));
    for (sink, c) in sinks.iter_mut().zip(&counters.sinks) {
        let result = catch_unwind(AssertUnwindSafe(|| sink.close(deadline)));
        note(c, result, false);
    }
}

fn write_all(sinks: &mut [Box<dyn Sink>], counters: &Counters, record: &Record) {
    counters.received.fetch_add(1, Ordering::Relaxed);
    for (sink, c) in sinks.iter_mut().zip(&counters.sinks) {
        let result = catch_unwind(AssertUnwindSafe(|| sink.write(record)));
        note(c, result, true);
    }
}

fn flush_all(sinks: &mut [Box<dyn Sink>], counters: &Counters) {
    for (sink, c) in sinks.iter_mut().zip(&counters.sinks) {
        let result = catch_unwind(AssertUnwindSafe(|| sink.flush()));
        note(c, result, false);
    }
}

fn note(
    c: &SinkCounters,
    result: std::thread::Result<Result<(), crate::sink::SinkError>>,
    is_write: bool,
) {
    let message = match result {
        Ok(Ok(())) => {
            if is_write {
                c.written.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        Ok(Err(e)) => e.to_string(),
        Err(panic) => format!("sink panicked: {}", panic_message(&panic)),
    };
    c.errors.fetch_add(1, Ordering::Relaxed);
    *c.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(message);
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_owned()
    }
}

/// Keeps the pipeline running; flushes everything and stops the worker when dropped, within
/// the shutdown deadline. Hold it for the whole run (`let _guard = ...`, not `let _ = ...`).
///
/// Because a global subscriber is never dropped, this guard is the only place where the end of
/// the run is known: it reports anything that was lost on stderr when dropped.
#[must_use = "dropping the guard shuts the MLLOG pipeline down; hold it until training ends"]
pub struct Guard {
    tx: Sender<Msg>,
    worker: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
    shutdown_timeout: Duration,
    timed_out: bool,
    compliance: Option<ComplianceHandle>,
    warn_compliance: bool,
    #[cfg(feature = "rpd")]
    profiler: Option<Arc<crate::profile::SegmentProfiler>>,
    #[cfg(feature = "object-store")]
    upload: Option<crate::sink::UploadHandle>,
    #[cfg(feature = "otel")]
    otel: Option<crate::sink::OtelHandle>,
}

impl Guard {
    #[cfg(feature = "otel")]
    pub(crate) fn attach_otel(&mut self, handle: crate::sink::OtelHandle) {
        self.otel = Some(handle);
    }

    /// What the OpenTelemetry sink built from `MLLOG_OTEL=1` exported, dropped and failed.
    #[cfg(feature = "otel")]
    pub fn otel_report(&self) -> Option<crate::sink::OtelReport> {
        self.otel.as_ref().map(|h| h.report())
    }

    #[cfg(feature = "object-store")]
    pub(crate) fn attach_upload(&mut self, handle: crate::sink::UploadHandle) {
        self.upload = Some(handle);
    }

    /// What the object-store uploader did: uploads, retries, the latest error, and after
    /// shutdown whether the remote copy matches the local file.
    #[cfg(feature = "object-store")]
    pub fn upload_report(&self) -> Option<crate::sink::UploadReport> {
        self.upload.as_ref().map(|h| h.report())
    }

    pub(crate) fn attach_compliance(&mut self, handle: ComplianceHandle, warn: bool) {
        self.compliance = Some(handle);
        self.warn_compliance = warn;
    }

    #[cfg(feature = "rpd")]
    pub(crate) fn attach_profiler(&mut self, profiler: Arc<crate::profile::SegmentProfiler>) {
        self.profiler = Some(profiler);
    }

    /// What the segment profiler did (starts, stops, flushes, errors), when profiling is on.
    #[cfg(feature = "rpd")]
    pub fn profile_report(&self) -> Option<crate::profile::ProfileReport> {
        self.profiler.as_ref().map(|p| p.report())
    }

    /// Waits until every record pushed before this call has reached every sink and the sinks
    /// have flushed, or until `timeout` passes. Returns whether it completed in time.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (ack_tx, ack_rx) = bounded(1);
        if self.tx.send_timeout(Msg::Flush(ack_tx), timeout).is_err() {
            return false;
        }
        ack_rx.recv_timeout(timeout).is_ok()
    }

    /// What happened so far: records written, dropped, write errors per sink.
    pub fn report(&self) -> Report {
        let c = &self.counters;
        Report {
            records: c.received.load(Ordering::Relaxed),
            dropped_queue_full: c.dropped_full.load(Ordering::Relaxed),
            dropped_after_shutdown: c.dropped_closed.load(Ordering::Relaxed),
            shutdown_timed_out: self.timed_out,
            compliance: self.compliance.as_ref().map(ComplianceHandle::report),
            sinks: c
                .sinks
                .iter()
                .map(|s| SinkReport {
                    name: s.name.clone(),
                    written: s.written.load(Ordering::Relaxed),
                    errors: s.errors.load(Ordering::Relaxed),
                    last_error: s
                        .last_error
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone(),
                })
                .collect(),
        }
    }

    /// Stops the pipeline now (draining and closing every sink within the deadline) and
    /// returns the report. Dropping the guard does the same and prints the report to stderr
    /// if anything was lost. Records produced afterwards are counted as dropped (see
    /// [`Guard::report`]); calling it again only reports.
    pub fn shutdown(&mut self) -> Report {
        self.stop();
        self.report()
    }

    fn stop(&mut self) {
        let Some(worker) = self.worker.take() else {
            return;
        };
        // A profiled segment still open at the end is stopped and flushed now: the layer (and
        // its profiler) may live on in a global subscriber that is never dropped.
        #[cfg(feature = "rpd")]
        if let Some(p) = &self.profiler {
            p.finish();
        }
        let deadline = Instant::now() + self.shutdown_timeout;
        if self
            .tx
            .send_deadline(Msg::Shutdown(deadline), deadline)
            .is_err()
        {
            self.timed_out = true;
            return;
        }
        while !worker.is_finished() {
            if Instant::now() >= deadline {
                // The worker is stuck in a sink (e.g. a hung file system). Leave it; the
                // process must not hang at exit because of logging.
                self.timed_out = true;
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = worker.join();
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop();
        let report = self.report();
        if !report.is_clean() {
            eprintln!("tracing-mllog: {report}");
        }
        if let (true, Some(c)) = (self.warn_compliance, &report.compliance) {
            if !c.passed(true) {
                eprint!("{}", c.render_text("MLLOG output", true));
            }
        }
    }
}

/// What the pipeline delivered and what it lost, and the live compliance verdict.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Records that reached the worker.
    pub records: u64,
    /// Records dropped because the channel stayed full (only with [`Overflow::DropAfter`]).
    pub dropped_queue_full: u64,
    /// Records produced after the pipeline shut down (e.g. logging after the guard dropped).
    pub dropped_after_shutdown: u64,
    /// Whether shutdown gave up waiting for a sink.
    pub shutdown_timed_out: bool,
    /// Per sink.
    pub sinks: Vec<SinkReport>,
    /// The compliance checker's verdict on the records so far (the whole log after
    /// shutdown), when live checking is on.
    pub compliance: Option<crate::compliance::Report>,
}

/// One sink's share of a [`Report`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkReport {
    /// The sink's name.
    pub name: String,
    /// Records written without error.
    pub written: u64,
    /// Failed writes, flushes or closes.
    pub errors: u64,
    /// The latest error message.
    pub last_error: Option<String>,
}

impl Report {
    /// Records lost before reaching the worker.
    pub fn dropped(&self) -> u64 {
        self.dropped_queue_full + self.dropped_after_shutdown
    }

    /// Nothing dropped, no sink error, shutdown in time.
    pub fn is_clean(&self) -> bool {
        self.dropped() == 0 && !self.shutdown_timed_out && self.sinks.iter().all(|s| s.errors == 0)
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} records", self.records)?;
        if self.dropped_queue_full > 0 {
            write!(f, ", {} dropped (queue full)", self.dropped_queue_full)?;
        }
        if self.dropped_after_shutdown > 0 {
            write!(
                f,
                ", {} dropped (after shutdown)",
                self.dropped_after_shutdown
            )?;
        }
        if self.shutdown_timed_out {
            write!(f, ", shutdown timed out")?;
        }
        if let Some(c) = &self.compliance {
            let verdict = if c.passed(true) {
                "compliant"
            } else {
                "NOT compliant"
            };
            write!(f, "; compliance ({}): {verdict}", c.ruleset)?;
        }
        for s in &self.sinks {
            write!(f, "; {}: {} written", s.name, s.written)?;
            if s.errors > 0 {
                write!(f, ", {} errors", s.errors)?;
                if let Some(e) = &s.last_error {
                    write!(f, " (last: {e})")?;
                }
            }
        }
        Ok(())
    }
}
