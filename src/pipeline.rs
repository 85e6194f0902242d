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
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError, Weak};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TryRecvError};
use crossbeam_queue::ArrayQueue;

use crate::compliance::ComplianceHandle;
use crate::record::Str;
use crate::record::{EventType, Record};
use crate::sink::accounting::{mark_worker_thread, Call, SinkCounters};
use crate::sink::isolated::Isolated;
use crate::sink::plug::SpanHook;
pub use crate::sink::SinkReport;
use crate::sink::{Delivery, Sink};

/// What the layer does when the queue is full (the worker is behind).
///
/// Set it with [`crate::Builder::overflow`]. The queue fills only when a sink delivered
/// [`Delivery::Inline`](crate::sink::Delivery::Inline) (the MLLOG file, the live checker, a
/// sink added that way) stalls the worker. [`Overflow::Block`] then holds up the training
/// thread until there is room; [`Overflow::DropAfter`] bounds that wait and counts every
/// record it gives up in [`Report::dropped_queue_full`]:
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use tracing_mllog::sink::{Delivery, Sink, SinkError};
/// use tracing_mllog::{mllog, MllogLayer, Overflow, Record};
/// use tracing_subscriber::prelude::*;
///
/// /// A sink that stalls while `gate` is held (a file on a hung network mount, say).
/// struct Stalled(Arc<Mutex<()>>);
///
/// impl Sink for Stalled {
///     fn name(&self) -> &str {
///         "stalled"
///     }
///     fn write(&mut self, _: &Record) -> Result<(), SinkError> {
///         drop(self.0.lock().unwrap());
///         Ok(())
///     }
/// }
///
/// let gate = Arc::new(Mutex::new(()));
/// let (layer, mut guard) = MllogLayer::builder()
///     .no_output()
///     .sink_with(Stalled(gate.clone()), Delivery::Inline)
///     .channel_capacity(8)
///     .overflow(Overflow::DropAfter(Duration::from_millis(1)))
///     .environment(Vec::<(String, String)>::new())
///     .build()?;
/// let held = gate.lock().unwrap();
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     for step in 0..100u64 {
///         mllog!("train_loss", 0.5, step); // never waits more than 1 ms
///     }
/// });
/// drop(held);
/// let report = guard.shutdown();
/// assert!(report.dropped_queue_full > 0, "{report}");
/// assert_eq!(report.records + report.dropped_queue_full, 100, "{report}");
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Wait until there is room: lossless. The default, because MLLOG records are few and a
    /// missing one makes the log non-compliant.
    #[default]
    Block,
    /// Wait at most this long, then drop the record and count it.
    DropAfter(Duration),
}

enum WorkerControl {
    /// Drain and flush; the answer carries, when `every_sink`, one receiver per isolated sink
    /// that hears when that sink has flushed.
    Flush {
        every_sink: bool,
        ack: Sender<Vec<Receiver<()>>>,
    },
    Shutdown(Instant),
}

/// Where the worker sends records: a sink it calls itself, or an isolated sink's queue.
enum Route {
    Inline(Box<dyn Sink>, Arc<SinkCounters>),
    Isolated(Isolated),
}

#[derive(Default)]
struct QueueCounters {
    received: AtomicU64,
    dropped_full: AtomicU64,
    dropped_closed: AtomicU64,
    /// An isolated sink was still busy at the shutdown deadline and was left behind.
    sink_timed_out: AtomicBool,
    sinks: Vec<Arc<SinkCounters>>,
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
    /// The worker has stopped taking records, or an exit path has sealed the queue (only the
    /// thread ending the run still pushes: see [`Pipeline::seal`]).
    closed: AtomicBool,
    /// When the exit path gives up on a full queue (a worker stuck in a sink): the process
    /// must not hang at exit because of logging.
    final_deadline: OnceLock<Instant>,
    /// Producers between their `closed` check and the end of their push: the worker waits
    /// for them before its last drain, so no record is stranded in the queue.
    pushing: AtomicUsize,
    /// How long a record may wait for a sleeping worker (zero: wake it for every record).
    max_delay: Duration,
    /// Records queued at which a producer wakes a sleeping worker before its timer does.
    wake_at: usize,
    /// Records queued since the worker last fell asleep (it sleeps only on an empty queue), for
    /// `wake_at`. Counted with a plain load and store: producers racing may undercount, which
    /// only defers the wake-up to the timer or to a full queue; `ArrayQueue::len` cost ~10
    /// instructions more per record (`examples/budgets.rs`).
    queued_asleep: AtomicUsize,
    /// The worker found nothing for a while and sleeps without its short timer: the next
    /// record wakes it (one wake-up after an idle stretch, instead of timer wake-ups all
    /// through it).
    idle: AtomicBool,
    counters: QueueCounters,
    /// The layer's warnings about the run's own figures, for the report (which may be made
    /// after the layer is gone).
    warnings: Mutex<Vec<String>>,
}

thread_local! {
    /// This thread is ending the run (it holds a [`Sealing`]): its pushes pass a sealed queue.
    static ENDING_RUN: Cell<bool> = const { Cell::new(false) };
}

/// While it lives, the thread that sealed the queue still pushes into it.
pub(crate) struct Sealing(());

impl Drop for Sealing {
    fn drop(&mut self) {
        ENDING_RUN.set(false);
    }
}

/// Locks `mutex`, waiting no later than `deadline`: the exit paths must not hang on a lock held
/// by a thread that is stuck (or by the exit path's own thread, reentered from a panic hook).
pub(crate) fn lock_until<T>(mutex: &Mutex<T>, deadline: Instant) -> Option<MutexGuard<'_, T>> {
    loop {
        match mutex.try_lock() {
            Ok(guard) => return Some(guard),
            Err(TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

impl Queue {
    /// Whether this thread's records are refused: the worker has stopped, or an exit path has
    /// sealed the queue and this thread is not the one ending the run. The thread-local is
    /// read only once the queue is closed, so an open queue costs one load.
    fn refuses(&self) -> bool {
        self.closed.load(Ordering::SeqCst) && !ENDING_RUN.get()
    }

    /// Whether a producer that just queued a record should wake a sleeping worker. Waking
    /// costs the training thread a system call (several microseconds, more than the rest of
    /// the record), so by default only interval records (rare: `run_start` should be checked
    /// at once), a quarter-full queue and a worker that went idle do; anything else waits for
    /// the worker's timer.
    fn wake_for(&self, urgent: bool) -> bool {
        urgent || self.wake_at <= 1 || self.idle.load(Ordering::Relaxed) || {
            let queued = self.queued_asleep.load(Ordering::Relaxed) + 1;
            self.queued_asleep.store(queued, Ordering::Relaxed);
            queued >= self.wake_at
        }
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
    /// Starts the worker thread with these sinks, each delivered by its policy (an isolated
    /// sink gets its own thread here).
    pub(crate) fn start(
        sinks: Vec<(Box<dyn Sink>, Delivery)>,
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
        let mut slots = Vec::with_capacity(sinks.len());
        for (sink, delivery) in sinks {
            let counters = Arc::new(SinkCounters::new(sink.name(), delivery, sink.status()));
            slots.push(match delivery {
                Delivery::Inline => Route::Inline(sink, counters),
                Delivery::Isolated { capacity } => {
                    Route::Isolated(Isolated::spawn(sink, capacity, counters)?)
                }
            });
        }
        let queue = Arc::new(Queue {
            records: ArrayQueue::new(capacity),
            spare: ArrayQueue::new(spares),
            worker: OnceLock::new(),
            sleeping: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            final_deadline: OnceLock::new(),
            pushing: AtomicUsize::new(0),
            max_delay,
            idle: AtomicBool::new(false),
            queued_asleep: AtomicUsize::new(0),
            wake_at: if max_delay.is_zero() {
                1
            } else {
                (capacity / 4).max(1)
            },
            warnings: Mutex::new(Vec::new()),
            counters: QueueCounters {
                sinks: slots
                    .iter()
                    .map(|s| match s {
                        Route::Inline(_, c) => c.clone(),
                        Route::Isolated(i) => i.counters().clone(),
                    })
                    .collect(),
                ..QueueCounters::default()
            },
        });
        for _ in 0..spares {
            let _ = queue.spare.push(Box::new(Record::empty()));
        }
        let (control, control_rx) = bounded(64);
        // Disconnected when the worker thread ends, however it ends: shutdown waits on it.
        let (ended_tx, ended) = bounded::<()>(0);
        let worker_queue = queue.clone();
        let worker = std::thread::Builder::new()
            .name("tracing-mllog".into())
            .spawn(move || {
                let _ended = ended_tx;
                run_worker(&worker_queue, control_rx, slots)
            })?;
        let _ = queue.worker.set(worker.thread().clone());
        let pipeline = Pipeline {
            queue: queue.clone(),
            overflow,
        };
        let guard = Guard {
            inner: Arc::new(GuardInner {
                control,
                queue,
                worker: Mutex::new(Some((worker, ended))),
                shutdown_timeout,
                timed_out: AtomicBool::new(false),
                reported: AtomicBool::new(false),
                compliance: None,
                warn_compliance: false,
                writes: false,
                layer: OnceLock::new(),
                hooks: Vec::new(),
                finishing: Mutex::new(()),
            }),
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
        let urgent = record.event_type != EventType::PointInTime && !record.trace_only;
        self.push_inner(record, urgent);
    }

    /// Hands a record to the worker and wakes it at once, so that the line reaches the file
    /// without waiting for the worker's timer: for records a reader acts on at once
    /// (`eval_accuracy`: the run may stop and exit right after it).
    pub(crate) fn push_urgent(&self, record: Box<Record>) {
        self.push_inner(record, true);
    }

    /// A warning about the run's own figures, for [`Report::warnings`].
    pub(crate) fn warn(&self, warning: String) {
        let q = &*self.queue;
        q.warnings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(warning);
    }

    /// Counts a record the layer did not produce because the run has been ended (an interval
    /// opened after an exit path closed the run).
    pub(crate) fn discard_after_end(&self) {
        let q = &*self.queue;
        q.counters.dropped_closed.fetch_add(1, Ordering::Relaxed);
    }

    /// Seals the queue for an exit path: from now on only this thread's records are taken (the
    /// end records it writes while the sealing lasts), so nothing another thread logs lands
    /// after `run_stop`; theirs are counted as dropped after shutdown. Pushes waiting on a full
    /// queue give up at `deadline`.
    pub(crate) fn seal(&self, deadline: Instant) -> Sealing {
        let q = &*self.queue;
        let _ = q.final_deadline.set(deadline);
        q.closed.store(true, Ordering::SeqCst);
        // A producer past its `closed` check (perhaps descheduled there) finishes its push
        // first, or its record would land after the end records.
        while q.pushing.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::yield_now();
        }
        ENDING_RUN.set(true);
        Sealing(())
    }

    fn push_inner(&self, record: Box<Record>, urgent: bool) {
        let q = &*self.queue;
        q.pushing.fetch_add(1, Ordering::SeqCst);
        if q.refuses() {
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
            if q.refuses() {
                q.pushing.fetch_sub(1, Ordering::SeqCst);
                q.counters.dropped_closed.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if q.final_deadline.get().is_some_and(|d| Instant::now() >= *d) {
                q.pushing.fetch_sub(1, Ordering::SeqCst);
                q.counters.dropped_full.fetch_add(1, Ordering::Relaxed);
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

fn run_worker(q: &Queue, control: Receiver<WorkerControl>, mut sinks: Vec<Route>) {
    mark_worker_thread();
    let counters = &q.counters;
    let drain = |sinks: &mut Vec<Route>| -> bool {
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
            flush_all(&mut sinks);
            empty_rounds = 0;
        } else {
            empty_rounds = empty_rounds.saturating_add(1);
        }
        let idle = q.max_delay.is_zero() || empty_rounds >= IDLE_ROUNDS;
        match control.try_recv() {
            Ok(WorkerControl::Flush { every_sink, ack }) => {
                // Everything pushed before the flush request is in the queue by now.
                drain(&mut sinks);
                flush_all(&mut sinks);
                // Isolated sinks flush on their own threads; the caller waits for them, not
                // the worker (the MLLOG file must not wait for them).
                let isolated = if every_sink {
                    sinks
                        .iter_mut()
                        .filter_map(|s| match s {
                            Route::Isolated(i) => Some(i.flush_acked()),
                            Route::Inline(..) => None,
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                let _ = ack.send(isolated);
                continue;
            }
            Ok(WorkerControl::Shutdown(d)) => break d,
            Err(TryRecvError::Disconnected) => break Instant::now() + Duration::from_secs(5),
            Err(TryRecvError::Empty) => {}
        }
        q.idle.store(idle, Ordering::Relaxed);
        q.queued_asleep.store(0, Ordering::Relaxed);
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
        if let WorkerControl::Flush { ack, .. } = c {
            let _ = ack.send(Vec::new());
        }
    }
    // The inline sinks first, in order: the MLLOG file is complete and closed before a sink
    // that reads it (the uploader) is told to close. Then every isolated sink closes at once,
    // each on its thread, all by the same deadline, a little before the guard's: a sink left
    // behind is in the report the guard takes.
    for slot in &mut sinks {
        if let Route::Inline(sink, c) = slot {
            call(sink, c, Call::Close, |s| s.close(deadline));
        }
    }
    let margin =
        (deadline.saturating_duration_since(Instant::now()) / 10).min(Duration::from_millis(100));
    let isolated_deadline = deadline.checked_sub(margin).unwrap_or(deadline);
    for slot in &mut sinks {
        if let Route::Isolated(i) = slot {
            i.begin_close(isolated_deadline);
        }
    }
    for slot in &mut sinks {
        if let Route::Isolated(i) = slot {
            if !i.wait_closed(isolated_deadline) {
                counters.sink_timed_out.store(true, Ordering::Relaxed);
            }
        }
    }
}

fn write_all(sinks: &mut [Route], counters: &QueueCounters, record: &Record) {
    counters.received.fetch_add(1, Ordering::Relaxed);
    for slot in sinks {
        match slot {
            Route::Inline(sink, c) => call(sink, c, Call::Write, |s| s.write(record)),
            Route::Isolated(i) => i.write(record),
        }
    }
}

fn flush_all(sinks: &mut [Route]) {
    for slot in sinks {
        match slot {
            Route::Inline(sink, c) => call(sink, c, Call::Flush, |s| s.flush()),
            Route::Isolated(i) => i.flush_soon(),
        }
    }
}

/// One call into an inline sink, timed and accounted.
fn call(
    sink: &mut Box<dyn Sink>,
    c: &SinkCounters,
    what: Call,
    f: impl FnOnce(&mut Box<dyn Sink>) -> Result<(), crate::sink::SinkError>,
) {
    let start = Instant::now();
    let result = catch_unwind(AssertUnwindSafe(|| f(sink)));
    c.outcome(result, what, start.elapsed());
}

/// Keeps the pipeline running; flushes everything and stops the worker when dropped, within
/// the shutdown deadline. Hold it for the whole run (`let _guard = ...`, not `let _ = ...`).
///
/// Because a global subscriber is never dropped, this guard is the only place where the end of
/// the run is known: it reports anything that was lost on stderr when dropped. A guard that is
/// dropped while `run` is open ends the run first (`run_stop` with status `aborted`, after
/// `block_stop` and the other open intervals). The program's other ways out end it too: see
/// the README's "Exit paths".
///
/// A guard dropped before a single record reached the pipeline (`let (layer, _) = ..` drops
/// it at once) does not stop anything: it says so on stderr, and the pipeline runs on until
/// the process exits, when it is flushed as on `process::exit`.
///
/// [`Guard::shutdown`] ends the run now and returns the [`Report`]: records received, each
/// sink's [`SinkReport`] (written, errors, drops and why), the live checker's verdict.
///
/// ```
/// use tracing_mllog::sink::{Delivery, MemorySink};
/// use tracing_mllog::{mllog, MllogLayer, Overflow};
/// use tracing_subscriber::prelude::*;
///
/// let (memory, lines) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .no_output()
///     .environment([("RANK", "0")])
///     .overflow(Overflow::Block) // the default: wait for room, lose nothing
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
    inner: Arc<GuardInner>,
}

/// What a [`Guard`] and the process's exit hooks share: everything needed to end the run and
/// stop the pipeline once, from whichever comes first.
pub(crate) struct GuardInner {
    control: Sender<WorkerControl>,
    queue: Arc<Queue>,
    /// The worker thread, and a channel that disconnects when it ends.
    worker: Mutex<Option<(JoinHandle<()>, Receiver<()>)>>,
    shutdown_timeout: Duration,
    timed_out: AtomicBool,
    /// The report was printed (by a drop or an exit hook): print it once.
    reported: AtomicBool,
    compliance: Option<ComplianceHandle>,
    warn_compliance: bool,
    /// Whether the layer behind this guard writes (on other ranks no record is expected).
    writes: bool,
    /// The layer's state, to end the intervals still open when the pipeline stops.
    layer: OnceLock<Weak<dyn EndOfRun>>,
    /// The layer's span hooks (the segment profiler): finished when the pipeline stops.
    hooks: Vec<Arc<dyn SpanHook>>,
    /// Held by the exit path that is ending the run: another one (a signal during
    /// `process::exit`) waits for it, so it neither returns nor lets the process die while
    /// the log is still being written.
    finishing: Mutex<()>,
}

/// How an interval comes to its end.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Ending {
    /// Its span closed, or the process exits normally with it open: `run_stop`'s status
    /// follows the usual rule (an explicit `status`, else the target, else `aborted`).
    Closed,
    /// The run was cut short (a signal, the guard dropped while the run is open): `aborted`.
    Aborted,
}

/// What the pipeline asks of the layer when it stops: end the intervals still open, innermost
/// first, and say which end records were written. The layer implements it; the pipeline only
/// knows this much of it.
pub(crate) trait EndOfRun: Send + Sync {
    /// Also seals the pipeline ([`Pipeline::seal`]); gives up waiting at `deadline`.
    fn end_open_intervals(&self, ending: Ending, deadline: Instant) -> Vec<Str>;
    /// Says on stderr, before the process may exit, what the layer's filter checks still
    /// have to say.
    fn finish_checks(&self, deadline: Instant);
}

/// Why the pipeline is being stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Finish {
    /// [`Guard::shutdown`], or the guard dropped.
    Guard,
    /// `exit()` with the pipeline still running (`std::process::exit`, or `main` returned
    /// with the guard leaked).
    ProcessExit,
    /// A panic in a `panic = "abort"` build, just before the abort.
    PanicAbort,
    /// SIGTERM or SIGINT, with signal handling on.
    Signal(i32),
}

impl Finish {
    /// How the intervals still open end: a run cut short is `aborted`; at a plain exit (and
    /// in a panic, which makes the status `aborted` anyway) the usual rule decides.
    fn ending(self) -> Ending {
        match self {
            Finish::Guard | Finish::Signal(_) => Ending::Aborted,
            Finish::ProcessExit | Finish::PanicAbort => Ending::Closed,
        }
    }

    fn describe(self) -> String {
        match self {
            Finish::Guard => "the guard was dropped (or shut down)".into(),
            Finish::ProcessExit => "the process is exiting".into(),
            Finish::PanicAbort => "a panic is aborting the process".into(),
            Finish::Signal(sig) => format!("signal {} arrived", signal_name(sig)),
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "?",
    }
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
                eprintln!(
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

    fn print_report(&self) {
        if self.reported.swap(true, Ordering::AcqRel) {
            return;
        }
        let report = self.report();
        if !report.is_clean() || report.received_nothing() || !report.warnings.is_empty() {
            eprintln!("tracing-mllog: {report}");
        }
        if let (true, Some(c)) = (self.warn_compliance, &report.compliance) {
            if !c.passed(true) {
                eprint!("{}", c.render_text("MLLOG output", true));
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
            sinks: c.sinks.iter().map(|s| s.report()).collect(),
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

impl Guard {
    fn parts(&mut self) -> &mut GuardInner {
        // Only `build` attaches, before the guard is shared with the exit hooks.
        Arc::get_mut(&mut self.inner).expect("guard parts are attached before it is shared")
    }

    /// The layer writes: a shutdown without a single record is reported (see
    /// [`Report::received_nothing`]).
    pub(crate) fn expect_records(&mut self) {
        self.parts().writes = true;
    }

    /// Registers the guard with the process's exit hooks and ties it to its layer's state;
    /// the last step of `build`.
    pub(crate) fn arm<L: EndOfRun + 'static>(&mut self, layer: &Arc<L>) {
        let layer: Weak<L> = Arc::downgrade(layer);
        let _ = self.inner.layer.set(layer);
        exit::register(&self.inner);
    }

    pub(crate) fn attach_compliance(&mut self, handle: ComplianceHandle, warn: bool) {
        let parts = self.parts();
        parts.compliance = Some(handle);
        parts.warn_compliance = warn;
    }

    /// The layer's span hooks, finished when the pipeline stops.
    pub(crate) fn attach_hooks(&mut self, hooks: Vec<Arc<dyn SpanHook>>) {
        self.parts().hooks = hooks;
    }

    /// The own report of the first sink (or span hook) that keeps one of type `T`, as it
    /// stands: e.g. `guard.detail::<tracing_mllog::sink::UploadReport>()`,
    /// `::<OtelReport>()`, `::<ProfileReport>()`. The one way to read a sink's own report.
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
    pub fn preflight(&self) -> Option<crate::compliance::ComplianceReport> {
        let compliance = self.inner.compliance.as_ref()?;
        // The checker is inline: a stalled isolated sink does not hold up the verdict.
        self.inner.flush(self.inner.shutdown_timeout, false);
        Some(compliance.pending())
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

/// How long a dropped guard waits for the records already logged to reach the worker before
/// it decides that none were (then the pipeline stays up until the process exits).
const DROP_PROBE: Duration = Duration::from_millis(200);

impl Drop for Guard {
    fn drop(&mut self) {
        let inner = &self.inner;
        if inner.writes && inner.running() {
            inner.flush(DROP_PROBE, false);
            if inner.queue.counters.received.load(Ordering::Relaxed) == 0 {
                inner.finish_checks(crate::sink::saturating_deadline(DROP_PROBE));
                eprintln!(
                    "tracing-mllog: warning: the guard was dropped before any record was \
                     logged (`let (layer, _) = ..` drops it at once; bind it to a name: \
                     `let (layer, _guard) = ..`). The MLLOG pipeline keeps running until the \
                     process exits, where it is flushed and closed."
                );
                exit::detach(self.inner.clone());
                return;
            }
        }
        inner.finish(Finish::Guard);
        inner.print_report();
    }
}

/// The process's ways out, each of which ends the run and flushes every live pipeline:
/// `exit()` (an `atexit` hook), a panic in a `panic = "abort"` build (a panic hook, chained
/// to the one before it), and, when asked for, SIGTERM and SIGINT (a signal-hook thread that
/// re-raises the signal's default action afterwards).
pub(crate) mod exit {
    use super::{signal_name, Finish, GuardInner, Queue};
    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Mutex, Once, Weak};

    /// Every guard built in this process (weakly: a dropped guard has finished).
    static LIVE: Mutex<Vec<Weak<GuardInner>>> = Mutex::new(Vec::new());
    /// Guards dropped before any record: kept alive until the process exits.
    static DETACHED: Mutex<Vec<Arc<GuardInner>>> = Mutex::new(Vec::new());

    pub(super) fn register(guard: &Arc<GuardInner>) {
        static HOOKS: Once = Once::new();
        HOOKS.call_once(|| {
            // SAFETY: `at_exit` is an `extern "C" fn()` that never unwinds (it catches panics).
            unsafe { libc::atexit(at_exit) };
            if cfg!(panic = "abort") {
                let previous = std::panic::take_hook();
                std::panic::set_hook(Box::new(move |info| {
                    finish_all(Finish::PanicAbort);
                    previous(info);
                }));
            }
        });
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|g| g.strong_count() > 0);
        live.push(Arc::downgrade(guard));
    }

    pub(super) fn detach(guard: Arc<GuardInner>) {
        DETACHED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(guard);
    }

    extern "C" fn at_exit() {
        let _ = std::panic::catch_unwind(|| {
            finish_all(Finish::ProcessExit);
            say_late_drops();
        });
    }

    /// Pipelines that have stopped, with the records dropped after their shutdown that a
    /// report has told of.
    static STOPPED: Mutex<Vec<(Weak<Queue>, u64)>> = Mutex::new(Vec::new());

    /// A report of a stopped pipeline told of `dropped` records logged after its shutdown.
    pub(super) fn reported_drops(queue: &Arc<Queue>, dropped: u64) {
        let mut stopped = STOPPED.lock().unwrap_or_else(|e| e.into_inner());
        stopped.retain(|(q, _)| q.strong_count() > 0);
        match stopped
            .iter_mut()
            .find(|(q, _)| q.as_ptr() == Arc::as_ptr(queue))
        {
            Some((_, told)) => *told = dropped,
            None => stopped.push((Arc::downgrade(queue), dropped)),
        }
    }

    /// Records logged after a pipeline stopped (a thread still logging after the guard was
    /// dropped) that no report has told of: said as the process exits, so none is lost
    /// silently.
    fn say_late_drops() {
        let stopped = STOPPED.lock().unwrap_or_else(|e| e.into_inner());
        for (queue, told) in stopped.iter() {
            let Some(queue) = queue.upgrade() else {
                continue;
            };
            let dropped = queue.counters.dropped_closed.load(Ordering::Relaxed);
            if dropped > *told {
                eprintln!(
                    "tracing-mllog: {} records were logged after the MLLOG pipeline shut down \
                     (the guard was dropped, or `shutdown()` called, while threads still \
                     logged) and are not in the log",
                    dropped - told
                );
            }
        }
    }

    /// Finishes every live pipeline of the process.
    pub(crate) fn finish_all(how: Finish) {
        let mut guards: Vec<Arc<GuardInner>> = LIVE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        guards.extend(std::mem::take(
            &mut *DETACHED.lock().unwrap_or_else(|e| e.into_inner()),
        ));
        for g in guards {
            g.finish(how);
        }
    }

    /// Whether `sig` has a handler already (the program's own: `tokio::signal`, `signal-hook`,
    /// `ctrlc`); the default action and "ignore" (a shell's background job) are none.
    fn has_own_handler(sig: libc::c_int) -> bool {
        // SAFETY: sigaction(2) with a null new action only reads the current one into `old`,
        // a zeroed (valid) `sigaction`.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction != libc::SIG_DFL
                && old.sa_sigaction != libc::SIG_IGN
        }
    }

    /// Handles SIGTERM and SIGINT from now on: every live pipeline ends its run (`aborted`)
    /// and flushes, then the signal's default action (termination) happens. Once per process.
    pub(crate) fn handle_signals() -> std::io::Result<()> {
        static INSTALLED: Mutex<bool> = Mutex::new(false);
        let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
        if *installed {
            return Ok(());
        }
        for sig in [libc::SIGTERM, libc::SIGINT] {
            if has_own_handler(sig) {
                eprintln!(
                    "tracing-mllog: warning: the program handles {} itself; with signal \
                     handling on, the signal also ends the run and then the process once the \
                     log is flushed, which cuts that handler's work short (a last step, a \
                     checkpoint). Leave `handle_signals` off if the program ends its run itself.",
                    signal_name(sig)
                );
            }
        }
        let mut signals = signal_hook::iterator::Signals::new([libc::SIGTERM, libc::SIGINT])?;
        std::thread::Builder::new()
            .name("mllog-signals".into())
            .spawn(move || {
                // The handler itself only writes to a pipe (async-signal-safe); the work
                // happens here, on an ordinary thread.
                if let Some(sig) = signals.forever().next() {
                    finish_all(Finish::Signal(sig));
                    let _ = signal_hook::low_level::emulate_default_handler(sig);
                }
            })?;
        *installed = true;
        Ok(())
    }
}

/// What the pipeline delivered and what it lost, and the live compliance verdict.
///
/// [`Guard::report`] gives it as it stands, [`Guard::shutdown`] at the end; a guard that is
/// dropped prints it to stderr when something was lost. `Display` gives a one-line summary
/// for a training log:
///
/// ```
/// use tracing_mllog::sink::MemorySink;
/// use tracing_mllog::{keys, mllog, MllogLayer};
/// use tracing_subscriber::prelude::*;
///
/// let (sink, _records) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .no_output()
///     .sink(sink)
///     .environment(Vec::<(String, String)>::new())
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     mllog!(keys::SEED, 42);
///     mllog!(keys::GLOBAL_BATCH_SIZE, 256);
/// });
/// let report = guard.shutdown();
/// assert_eq!(report.records, 2);
/// assert!(report.is_clean(), "{report}");
/// let memory = report.sinks.iter().find(|s| s.name == "memory").unwrap();
/// assert_eq!((memory.written, memory.errors), (2, 0));
/// assert!(report.to_string().starts_with("2 records"), "{report}");
///
/// // A layer that never became part of the subscriber in use says so.
/// let (_unused, mut guard) = MllogLayer::builder()
///     .no_output()
///     .environment(Vec::<(String, String)>::new())
///     .build::<tracing_subscriber::Registry>()?;
/// let report = guard.shutdown();
/// assert!(report.received_nothing(), "{report}");
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
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
    pub compliance: Option<crate::compliance::ComplianceReport>,
    /// What the layer found wrong with the run's own figures, which no rule checks (steps it
    /// never saw: a count of 0 after an evaluation, an `eval_accuracy` whose `samples_count`
    /// disagrees with the count). Said on stderr when found, and again in the report.
    pub warnings: Vec<String>,
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
        self.dropped() == 0
            && !self.shutdown_timed_out
            && self.sinks.iter().all(|s| s.errors == 0 && s.dropped == 0)
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
                 layer, this one included, and a per-layer filter on this layer \
                 (`layer.with_filter(..)`) hides them from it: filter the other layers instead \
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
            if s.dropped > 0 {
                write!(f, ", {} dropped", s.dropped)?;
                if let Some(r) = &s.drop_reason {
                    write!(f, ": {r}")?;
                }
            }
            if s.errors > 0 {
                write!(f, ", {} errors", s.errors)?;
                if let Some(e) = &s.last_error {
                    write!(f, " (last: {e})")?;
                }
            }
        }
        for w in &self.warnings {
            write!(f, "\n  warning: {w}")?;
        }
        Ok(())
    }
}
