//! The queue between the training threads and the worker: a bounded lock-free queue of
//! recycled records ([`RecordSender`], the sending side the layer holds), what producers and the
//! worker share about it ([`Queue`]), when a producer wakes the worker, and the sealing an
//! exit path applies so that `run_stop` is the last line.

use std::cell::Cell;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;

use super::Pending;
use crate::record::EventType;
use crate::sink::accounting::SinkCounters;

/// What the layer does when the queue is full (the worker is behind).
///
/// Set it with [`crate::Pipeline::overflow`]. The queue fills only when a sink delivered
/// [`Delivery::Inline`](crate::sink::Delivery::Inline) (the MLLOG file, the live checker, a
/// sink added that way) stalls the worker. [`Overflow::Block`] then holds up the training
/// thread until there is room; [`Overflow::DropAfter`] bounds that wait and counts every
/// record it gives up in [`Report::dropped_queue_full`](crate::Report::dropped_queue_full):
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use tracing_mllog::sink::{Delivery, Sink, SinkError};
/// use tracing_mllog::{mllog, MllogLayer, Output, Overflow, Pipeline};
/// use tracing_mllog::record::TracedRecord;
/// use tracing_subscriber::prelude::*;
///
/// /// A sink that stalls while `gate` is held (a file on a hung network mount, say).
/// struct Stalled(Arc<Mutex<()>>);
///
/// impl Sink for Stalled {
///     fn name(&self) -> &str {
///         "stalled"
///     }
///     fn write(&mut self, _: &TracedRecord) -> Result<(), SinkError> {
///         drop(self.0.lock().unwrap());
///         Ok(())
///     }
/// }
///
/// let gate = Arc::new(Mutex::new(()));
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink_with(Stalled(gate.clone()), Delivery::Inline)
///     .pipeline(Pipeline::default().capacity(8).overflow(Overflow::DropAfter(Duration::from_millis(1))))
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

#[derive(Default)]
pub(super) struct QueueCounters {
    pub(super) received: AtomicU64,
    pub(super) dropped_full: AtomicU64,
    pub(super) dropped_closed: AtomicU64,
    /// An isolated sink was still busy at the shutdown deadline and was left behind.
    pub(super) sink_timed_out: AtomicBool,
    pub(super) sinks: Vec<Arc<SinkCounters>>,
}

/// What producers and the worker share.
pub(crate) struct Queue {
    pub(super) records: ArrayQueue<Box<Pending>>,
    /// Emptied records the worker hands back, so the training thread reuses their memory
    /// instead of allocating: in the steady state a record costs no allocation there.
    pub(super) spare: ArrayQueue<Box<Pending>>,
    pub(super) worker: OnceLock<Thread>,
    /// The worker is about to park or parked: a producer must wake it.
    pub(super) sleeping: AtomicBool,
    /// The worker has stopped taking records, or an exit path has sealed the queue (only the
    /// thread ending the run still pushes: see [`RecordSender::seal`]).
    pub(super) closed: AtomicBool,
    /// When the exit path gives up on a full queue (a worker stuck in a sink): the process
    /// must not hang at exit because of logging.
    pub(super) final_deadline: OnceLock<Instant>,
    /// Producers between their `closed` check and the end of their push: the worker waits
    /// for them before its last drain, so no record is stranded in the queue.
    pub(super) pushing: AtomicUsize,
    /// How long a record may wait for a sleeping worker (zero: wake it for every record).
    pub(super) max_delay: Duration,
    /// Records queued at which a producer wakes a sleeping worker before its timer does.
    pub(super) wake_at: usize,
    /// Records queued since the worker last fell asleep (it sleeps only on an empty queue), for
    /// `wake_at`. Counted with a plain load and store: producers racing may undercount, which
    /// only defers the wake-up to the timer or to a full queue; `ArrayQueue::len` cost more per
    /// record (`examples/budgets.rs` shows it).
    pub(super) queued_asleep: AtomicUsize,
    /// The worker found nothing for a while and sleeps without its short timer: the next
    /// record wakes it (one wake-up after an idle stretch, instead of timer wake-ups all
    /// through it).
    pub(super) idle: AtomicBool,
    pub(super) counters: QueueCounters,
    /// The layer's warnings about the run's own figures, for the report (which may be made
    /// after the layer is gone).
    pub(super) warnings: Mutex<Vec<String>>,
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

impl Queue {
    /// Whether this thread's records are refused: the worker has stopped, or an exit path has
    /// sealed the queue and this thread is not the one ending the run. The thread-local is
    /// read only once the queue is closed, so an open queue costs one load.
    pub(super) fn refuses(&self) -> bool {
        self.closed.load(Ordering::SeqCst) && !ENDING_RUN.get()
    }

    /// Whether a producer that just queued a record should wake a sleeping worker. Waking
    /// costs the training thread a system call (several microseconds, more than the rest of
    /// the record), so by default only interval records (rare: `run_start` should be checked
    /// at once), a quarter-full queue and a worker that went idle do; anything else waits for
    /// the worker's timer.
    pub(super) fn wake_for(&self, urgent: bool) -> bool {
        urgent || self.wake_at <= 1 || self.idle.load(Ordering::Relaxed) || {
            let queued = self.queued_asleep.load(Ordering::Relaxed) + 1;
            self.queued_asleep.store(queued, Ordering::Relaxed);
            queued >= self.wake_at
        }
    }

    pub(super) fn wake(&self) {
        if let Some(t) = self.worker.get() {
            t.unpark();
        }
    }
}

/// The sending side, held by the layer. Cheap to clone.
#[derive(Clone)]
pub(crate) struct RecordSender {
    pub(super) queue: Arc<Queue>,
    pub(super) overflow: Overflow,
}

impl RecordSender {
    /// An empty record to fill: a recycled one when the worker has handed one back.
    pub(crate) fn record(&self) -> Box<Pending> {
        self.queue
            .spare
            .pop()
            .unwrap_or_else(|| Box::new(Pending::empty()))
    }

    /// Gives back a record that will not be sent after all (cleared here, on the caller's
    /// thread: this is the rare path), so the pool keeps its size.
    pub(crate) fn recycle(&self, mut record: Box<Pending>) {
        record.clear();
        let _ = self.queue.spare.push(record);
    }

    /// Hands a record to the worker. Never panics; a record that cannot be delivered is counted.
    pub(crate) fn push(&self, record: Box<Pending>) {
        let urgent = record.event_type != EventType::PointInTime && !record.trace_only;
        self.push_inner(record, urgent);
    }

    /// Hands a record to the worker and wakes it at once, so that the line reaches the file
    /// without waiting for the worker's timer: for records a reader acts on at once
    /// (`eval_accuracy`: the run may stop and exit right after it).
    pub(crate) fn push_urgent(&self, record: Box<Pending>) {
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

    fn push_inner(&self, record: Box<Pending>, urgent: bool) {
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
            if let Overflow::DropAfter(limit) = self.overflow
                && since.elapsed() >= limit
            {
                q.pushing.fetch_sub(1, Ordering::SeqCst);
                q.counters.dropped_full.fetch_add(1, Ordering::Relaxed);
                return;
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
