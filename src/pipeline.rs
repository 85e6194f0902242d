//! The record pipeline: a bounded lock-free queue from the training threads to one worker
//! thread that fans every record out, in order, to the sinks; and the [`Guard`] that flushes
//! it.
//!
//! The training thread only pushes typed records (a recycled box, one compare-and-swap) and
//! wakes the worker if it sleeps; formatting and I/O happen on the worker. Rare control
//! messages (flush, shutdown) take a separate channel. Nothing is dropped silently: every
//! record that does not reach a sink is counted and shows up in the [`Report`].

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender, TryRecvError};
use crossbeam_queue::ArrayQueue;

use crate::compliance::ComplianceHandle;
use crate::record::{EventType, Record};
use crate::sink::Sink;

/// What the layer does when the queue is full (the worker is behind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Wait until there is room: lossless. The default, because MLLOG records are few and a
    /// missing one makes the log non-compliant.
    #[default]
    Block,
    /// Wait at most this long, then drop the record and count it.
    DropAfter(Duration),
}

enum Control {
    Flush(Sender<()>),
    Shutdown(Instant),
}

thread_local! {
    /// Set on the worker thread so that anything a sink (or a crate a sink uses) logs through
    /// `tracing` never feeds back into the record stream.
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// Whether the current thread is the pipeline's worker thread.
#[inline]
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

/// What producers and the worker share.
struct Queue {
    records: ArrayQueue<Box<Record>>,
    /// Emptied records the worker hands back, so the training thread reuses their memory
    /// instead of allocating: in the steady state a record costs no allocation there.
    spare: ArrayQueue<Box<Record>>,
    worker: OnceLock<Thread>,
    /// The worker is about to park or parked: a producer must wake it.
    sleeping: AtomicBool,
    /// The worker has stopped taking records.
    closed: AtomicBool,
    /// Producers between their `closed` check and the end of their push: the worker waits
    /// for them before its last drain, so no record is stranded in the queue.
    pushing: AtomicUsize,
    /// How long a record may wait for a sleeping worker (zero: wake it for every record).
    max_delay: Duration,
    /// Records queued at which a producer wakes a sleeping worker before its timer does.
    wake_at: usize,
    /// The worker found nothing for a while and sleeps without its short timer: the next
    /// record wakes it (one wake-up after an idle stretch, instead of timer wake-ups all
    /// through it).
    idle: AtomicBool,
    counters: Counters,
}

impl Queue {
    /// Whether a producer that just queued a record should wake a sleeping worker. Waking
    /// costs the training thread a system call (several microseconds, more than the rest of
    /// the record), so by default only interval records (rare: `run_start` should be checked
    /// at once), a quarter-full queue and a worker that went idle do; anything else waits for
    /// the worker's timer.
    fn wake_for(&self, urgent: bool) -> bool {
        urgent
            || self.wake_at <= 1
            || self.idle.load(Ordering::Relaxed)
            || self.records.len() >= self.wake_at
    }

    fn wake(&self) {
        if let Some(t) = self.worker.get() {
            t.unpark();
        }
    }
}

/// The sending side, held by the layer. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Pipeline {
    queue: Arc<Queue>,
    overflow: Overflow,
}

impl Pipeline {
    /// Starts the worker thread with these sinks.
    pub(crate) fn start(
        sinks: Vec<Box<dyn Sink>>,
        capacity: usize,
        overflow: Overflow,
        shutdown_timeout: Duration,
        max_delay: Duration,
    ) -> std::io::Result<(Pipeline, Guard)> {
        let capacity = capacity.max(1);
        // A spare record for every record that can be in flight (each queue slot, the one the
        // worker holds, one per producer filling one), allocated now: the training thread
        // does not allocate a record in the steady state, and memory stays bounded.
        let spares = capacity + 2;
        let queue = Arc::new(Queue {
            records: ArrayQueue::new(capacity),
            spare: ArrayQueue::new(spares),
            worker: OnceLock::new(),
            sleeping: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            pushing: AtomicUsize::new(0),
            max_delay,
            idle: AtomicBool::new(false),
            wake_at: if max_delay.is_zero() {
                1
            } else {
                (capacity / 4).max(1)
            },
            counters: Counters {
                sinks: sinks
                    .iter()
                    .map(|s| SinkCounters {
                        name: s.name().to_owned(),
                        ..SinkCounters::default()
                    })
                    .collect(),
                ..Counters::default()
            },
        });
        for _ in 0..spares {
            let _ = queue.spare.push(Box::new(Record::empty()));
        }
        let (control, control_rx) = bounded(64);
        let worker_queue = queue.clone();
        let worker = std::thread::Builder::new()
            .name("tracing-mllog".into())
            .spawn(move || run_worker(&worker_queue, control_rx, sinks))?;
        let _ = queue.worker.set(worker.thread().clone());
        let pipeline = Pipeline {
            queue: queue.clone(),
            overflow,
        };
        let guard = Guard {
            control,
            queue,
            worker: Some(worker),
            shutdown_timeout,
            timed_out: false,
            compliance: None,
            warn_compliance: false,
            writes: false,
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
        self.queue
            .spare
            .pop()
            .unwrap_or_else(|| Box::new(Record::empty()))
    }

    /// Gives back a record that will not be sent after all (cleared here, on the caller's
    /// thread: this is the rare path), so the pool keeps its size.
    pub(crate) fn recycle(&self, mut record: Box<Record>) {
        record.clear();
        let _ = self.queue.spare.push(record);
    }

    /// Hands a record to the worker. Never panics; a record that cannot be delivered is counted.
    pub(crate) fn push(&self, record: Box<Record>) {
        let q = &*self.queue;
        let urgent = record.event_type != EventType::PointInTime && !record.trace_only;
        q.pushing.fetch_add(1, Ordering::SeqCst);
        if q.closed.load(Ordering::SeqCst) {
            q.pushing.fetch_sub(1, Ordering::SeqCst);
            q.counters.dropped_closed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut record = record;
        let mut waited: Option<Instant> = None;
        let mut tries = 0u32;
        while let Err(back) = q.records.push(record) {
            // Full: the worker is behind. Wake it and wait (or give up, by policy).
            record = back;
            q.wake();
            let since = *waited.get_or_insert_with(Instant::now);
            if let Overflow::DropAfter(limit) = self.overflow {
                if since.elapsed() >= limit {
                    q.pushing.fetch_sub(1, Ordering::SeqCst);
                    q.counters.dropped_full.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
            if q.closed.load(Ordering::SeqCst) {
                q.pushing.fetch_sub(1, Ordering::SeqCst);
                q.counters.dropped_closed.fetch_add(1, Ordering::Relaxed);
                return;
            }
            tries += 1;
            if tries < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        q.pushing.fetch_sub(1, Ordering::SeqCst);
        // Pairs with the worker's fence between `sleeping = true` and its last look at the
        // queue: either it sees this record, or this thread sees it sleeping and wakes it.
        fence(Ordering::SeqCst);
        if q.sleeping.load(Ordering::Relaxed) && q.wake_for(urgent) {
            q.wake();
        }
    }
}

/// Empty timer rounds after which the worker stops polling and waits to be woken: with the
/// default 2 ms delay, 100 ms without a record.
const IDLE_ROUNDS: u32 = 50;

/// How long an idle worker sleeps if nothing wakes it (producers and the guard always do).
const IDLE_PARK: Duration = Duration::from_secs(10);

fn run_worker(q: &Queue, control: Receiver<Control>, mut sinks: Vec<Box<dyn Sink>>) {
    ON_WORKER.with(|w| w.set(true));
    let counters = &q.counters;
    let drain = |sinks: &mut Vec<Box<dyn Sink>>| -> bool {
        let mut any = false;
        while let Some(mut record) = q.records.pop() {
            write_all(sinks, counters, &record);
            record.clear();
            let _ = q.spare.push(record);
            any = true;
        }
        any
    };
    // Timer rounds in a row that found nothing; past `IDLE_ROUNDS` the worker sleeps idle.
    let mut empty_rounds = 0u32;
    let deadline = loop {
        if drain(&mut sinks) {
            // The queue ran dry: make what we have visible (file readers, uploaders).
            flush_all(&mut sinks, counters);
            empty_rounds = 0;
        } else {
            empty_rounds = empty_rounds.saturating_add(1);
        }
        let idle = q.max_delay.is_zero() || empty_rounds >= IDLE_ROUNDS;
        match control.try_recv() {
            Ok(Control::Flush(ack)) => {
                // Everything pushed before the flush request is in the queue by now.
                drain(&mut sinks);
                flush_all(&mut sinks, counters);
                let _ = ack.send(());
                continue;
            }
            Ok(Control::Shutdown(d)) => break d,
            Err(TryRecvError::Disconnected) => break Instant::now() + Duration::from_secs(5),
            Err(TryRecvError::Empty) => {}
        }
        q.idle.store(idle, Ordering::Relaxed);
        q.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if q.records.is_empty() && control.is_empty() {
            // Woken by a control message, a producer (see `Queue::wake_for`) or the timer,
            // which bounds how long a record waits. Idle, every record wakes it: the timeout
            // is only a safety net.
            std::thread::park_timeout(if idle { IDLE_PARK } else { q.max_delay });
        }
        q.sleeping.store(false, Ordering::Relaxed);
    };
    // Stop taking records; producers already past their check finish their push, and those
    // records are written too. Anything later is counted as dropped by its producer.
    q.closed.store(true, Ordering::SeqCst);
    while q.pushing.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::yield_now();
    }
    drain(&mut sinks);
    while let Ok(c) = control.try_recv() {
        if let Control::Flush(ack) = c {
            let _ = ack.send(());
        }
    }
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
    control: Sender<Control>,
    queue: Arc<Queue>,
    worker: Option<JoinHandle<()>>,
    shutdown_timeout: Duration,
    timed_out: bool,
    compliance: Option<ComplianceHandle>,
    warn_compliance: bool,
    /// Whether the layer behind this guard writes (on other ranks no record is expected).
    writes: bool,
    #[cfg(feature = "rpd")]
    profiler: Option<Arc<crate::profile::SegmentProfiler>>,
    #[cfg(feature = "object-store")]
    upload: Option<crate::sink::UploadHandle>,
    #[cfg(feature = "otel")]
    otel: Option<crate::sink::OtelHandle>,
}

impl Guard {
    /// The layer writes: a shutdown without a single record is reported (see
    /// [`Report::received_nothing`]).
    pub(crate) fn expect_records(&mut self) {
        self.writes = true;
    }

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
        if self
            .control
            .send_timeout(Control::Flush(ack_tx), timeout)
            .is_err()
        {
            return false;
        }
        self.queue.wake();
        ack_rx.recv_timeout(timeout).is_ok()
    }

    /// What happened so far: records written, dropped, write errors per sink.
    pub fn report(&self) -> Report {
        let c = &self.queue.counters;
        Report {
            writes: self.writes,
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
        let deadline = crate::sink::saturating_deadline(self.shutdown_timeout);
        if self
            .control
            .send_deadline(Control::Shutdown(deadline), deadline)
            .is_err()
        {
            self.timed_out = true;
            return;
        }
        self.queue.wake();
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
        if !report.is_clean() || report.received_nothing() {
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
    /// Whether this layer writes MLLOG records (false on the ranks that do not write, whose
    /// reports are empty by design).
    pub writes: bool,
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

    /// A writing layer that received no span or event at all: it is not in the subscriber in
    /// use, or a filter on the whole subscriber hid everything from it (see [`Display`]).
    ///
    /// [`Display`]: std::fmt::Display
    pub fn received_nothing(&self) -> bool {
        self.writes && self.records == 0
    }

    /// Nothing dropped, no sink error, shutdown in time.
    pub fn is_clean(&self) -> bool {
        self.dropped() == 0 && !self.shutdown_timed_out && self.sinks.iter().all(|s| s.errors == 0)
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} records", self.records)?;
        if self.received_nothing() {
            // The two ways a whole log goes missing without any error on the way.
            write!(
                f,
                " (no span or event reached the layer: is it part of the subscriber in use \
                 (`.init()`, `set_global_default`, `with_default`)? A filter on the whole \
                 subscriber (`EnvFilter`, `LevelFilter`, `RUST_LOG`) hides spans from every \
                 layer, this one included: filter the other layers instead \
                 (`fmt::layer().with_filter(..)`); the highest level enabled now is {})",
                tracing_core::LevelFilter::current()
            )?;
        }
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
