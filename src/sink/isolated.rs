//! Sink isolation: a sink on its own thread behind its own bounded queue, so that a sink that
//! stalls (an RPD file locked by another process, an OTel collector that stops answering, an
//! object store that hangs, a slow user sink) loses records, counted, instead of holding up
//! the pipeline's worker, the MLLOG file it writes and, through the full record queue, the
//! training thread.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{
    bounded, select, unbounded, Receiver, RecvTimeoutError, Sender, TrySendError,
};

use super::accounting::{DropCause, SinkCounters};
use super::{Sink, SinkError};
use crate::record::Record;

/// How the pipeline's worker hands records to one sink: the per-sink policy that decides
/// which sinks may hold up the MLLOG file (and, once the record queue is full, the training
/// thread) and which may lose records instead.
///
/// Defaults per sink kind: the MLLOG output and the live compliance checker are always
/// [`Delivery::Inline`] (a missing line makes the log non-compliant); the RPD, OpenTelemetry
/// and object-store sinks and every sink added with [`crate::Builder::sink`] are
/// [`Delivery::Isolated`] with [`Delivery::DEFAULT_CAPACITY`]. Choose otherwise with
/// [`crate::Builder::sink_with`] and [`crate::Builder::sink_delivery`].
///
/// An isolated sink that stalls loses records, counted with the reason, while the MLLOG
/// stream keeps every one:
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use tracing_mllog::sink::{Delivery, Sink, SinkError};
/// use tracing_mllog::{mllog, MllogLayer, Record};
/// use tracing_subscriber::prelude::*;
///
/// /// A sink that stalls while `gate` is held (a collector that stopped answering, say).
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
///     .sink_with(Stalled(gate.clone()), Delivery::Isolated { capacity: 4 })
///     .environment(Vec::<(String, String)>::new())
///     .build()?;
/// let held = gate.lock().unwrap();
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     for step in 0..50u64 {
///         mllog!("train_loss", 0.5, step);
///     }
/// });
/// drop(held);
/// let report = guard.shutdown();
/// assert_eq!(report.records, 50); // the worker (and the MLLOG file) got every record
/// let stalled = report.sinks.iter().find(|s| s.name == "stalled").unwrap();
/// assert!(stalled.dropped > 0, "{report}");
/// assert_eq!(stalled.written + stalled.dropped, 50, "{report}");
/// assert!(stalled.drop_reason.as_deref().unwrap().contains("queue full"), "{report}");
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Delivery {
    /// On the worker thread, in order with the MLLOG file: lossless, but a sink that stalls
    /// delays the MLLOG file behind it and, once the record queue is full, the training
    /// thread (with the default [`crate::Overflow::Block`]).
    Inline,
    /// On the sink's own thread, fed through a bounded queue of `capacity` records (copies).
    /// A sink that falls behind or stalls catches up later, or, once its queue is full, loses
    /// the records that do not fit: they are counted in its [`crate::SinkReport`] with the
    /// reason (e.g. how long the sink had been blocked in a write). It never delays the
    /// MLLOG file or the training thread.
    Isolated {
        /// Records the queue holds (at least 1).
        capacity: usize,
    },
}

impl Delivery {
    /// The default queue of an isolated sink, the size of the pipeline's own record queue.
    pub const DEFAULT_CAPACITY: usize = 4096;

    /// [`Delivery::Isolated`] with [`Delivery::DEFAULT_CAPACITY`].
    pub const fn isolated() -> Delivery {
        Delivery::Isolated {
            capacity: Self::DEFAULT_CAPACITY,
        }
    }
}

impl Default for Delivery {
    fn default() -> Self {
        Delivery::isolated()
    }
}

/// The call a sink is in, for drop reasons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    Write,
    Flush,
    Close,
}

impl Call {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Call::Write => "write",
            Call::Flush => "flush",
            Call::Close => "close",
        }
    }
}

enum Control {
    /// Flush once every record accepted before this request has been written.
    Flush {
        target: u64,
        ack: Option<Sender<()>>,
    },
    /// Write what is queued, then close the sink and stop.
    Close {
        target: u64,
        deadline: Instant,
        done: Sender<()>,
    },
}

/// What the sink's thread and the worker share.
struct State {
    counters: Arc<SinkCounters>,
    /// The call the sink is in and since when (`None` between calls).
    busy: Mutex<Option<(Call, Instant)>>,
    /// Records the sink's thread has handed to the sink.
    handled: AtomicU64,
    /// A periodic flush is queued and not yet done: another one would add nothing.
    flush_queued: AtomicBool,
}

impl State {
    fn busy(&self) -> Option<(Call, Duration)> {
        self.busy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map(|(call, since)| (call, since.elapsed()))
    }
}

/// A sink on its own thread: the worker's side. Writing never blocks: a record that does not
/// fit in the queue is counted as dropped.
pub(crate) struct Isolated {
    records: Sender<Record>,
    control: Sender<Control>,
    state: Arc<State>,
    capacity: usize,
    /// Records accepted into the queue.
    accepted: u64,
    done: Option<Receiver<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Isolated {
    /// Starts `sink`'s thread; the sink's accounting goes to `counters`.
    pub(crate) fn spawn(
        sink: Box<dyn Sink>,
        capacity: usize,
        counters: Arc<SinkCounters>,
    ) -> std::io::Result<Isolated> {
        let capacity = capacity.max(1);
        let (records, records_rx) = bounded(capacity);
        let (control, control_rx) = unbounded();
        let state = Arc::new(State {
            counters,
            busy: Mutex::new(None),
            handled: AtomicU64::new(0),
            flush_queued: AtomicBool::new(false),
        });
        let thread_state = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("mllog-{}", state.counters.name))
            .spawn(move || run(sink, &records_rx, &control_rx, &thread_state))?;
        Ok(Isolated {
            records,
            control,
            state,
            capacity,
            accepted: 0,
            done: None,
            thread: Some(thread),
        })
    }

    pub(crate) fn counters(&self) -> &Arc<SinkCounters> {
        &self.state.counters
    }

    /// Queues a copy of `record`, or counts it as dropped.
    pub(crate) fn write(&mut self, record: &Record) {
        if self.records.is_full() {
            self.dropped_full();
            return;
        }
        match self.records.try_send(record.clone()) {
            Ok(()) => self.accepted += 1,
            Err(TrySendError::Full(_)) => self.dropped_full(),
            Err(TrySendError::Disconnected(_)) => self.state.counters.dropped(DropCause::Stopped),
        }
    }

    fn dropped_full(&self) {
        self.state.counters.dropped(DropCause::QueueFull {
            capacity: self.capacity,
            busy: self.state.busy(),
        });
    }

    /// Asks for a flush after the records queued so far, unless one is already waiting.
    pub(crate) fn flush_soon(&mut self) {
        if !self.state.flush_queued.swap(true, Ordering::AcqRel) {
            let _ = self.control.send(Control::Flush {
                target: self.accepted,
                ack: None,
            });
        }
    }

    /// Asks for a flush after the records queued so far; the receiver hears when it is done
    /// (or is disconnected if the sink's thread has stopped).
    pub(crate) fn flush_acked(&mut self) -> Receiver<()> {
        let (ack, ack_rx) = bounded(1);
        let _ = self.control.send(Control::Flush {
            target: self.accepted,
            ack: Some(ack),
        });
        ack_rx
    }

    /// Tells the sink's thread to write what is queued and close the sink by `deadline`;
    /// does not wait (see [`Isolated::wait_closed`]), so that every isolated sink closes at
    /// once.
    pub(crate) fn begin_close(&mut self, deadline: Instant) {
        if self.done.is_some() {
            return;
        }
        let (done, done_rx) = bounded(1);
        let _ = self.control.send(Control::Close {
            target: self.accepted,
            deadline,
            done,
        });
        self.done = Some(done_rx);
    }

    /// Waits until the sink has closed or `deadline` passes. `false`: the sink is still busy
    /// (stuck); the error is counted and its thread left behind, so the process can exit.
    pub(crate) fn wait_closed(&mut self, deadline: Instant) -> bool {
        self.begin_close(deadline);
        let Some(done) = &self.done else {
            return true;
        };
        // A disconnect means the thread ended (it drops `done` on its way out): closed too.
        if !matches!(done.recv_deadline(deadline), Err(RecvTimeoutError::Timeout)) {
            // Joined only when already over: dropping the sink may take time, and the
            // deadline holds for that too.
            if let Some(t) = self.thread.take().filter(JoinHandle::is_finished) {
                let _ = t.join();
            }
            return true;
        }
        // Those queued and the one in the sink's hands.
        let undelivered = self
            .accepted
            .saturating_sub(self.state.handled.load(Ordering::Acquire));
        let doing = match self.state.busy() {
            Some((call, d)) => format!(": blocked in {} for {}", call.as_str(), seconds(d)),
            None => String::new(),
        };
        let message = format!(
            "did not close within the shutdown deadline{doing}; {undelivered} record(s) not \
             delivered"
        );
        self.state.counters.error(message);
        false
    }
}

/// `4.2 s`, `35 ms`.
pub(crate) fn seconds(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// The sink's thread: writes records in order; flushes and closes when the worker asks, after
/// the records queued before the request.
fn run(
    mut sink: Box<dyn Sink>,
    records: &Receiver<Record>,
    control: &Receiver<Control>,
    state: &State,
) {
    super::accounting::mark_worker_thread();
    let sink = &mut sink;
    loop {
        select! {
            recv(records) -> r => match r {
                Ok(record) => write(sink, state, &record),
                // The worker is gone without closing (it panicked): make what we have visible.
                Err(_) => {
                    call(sink, state, Call::Flush, |s| s.flush());
                    return;
                }
            },
            recv(control) -> c => match c {
                Ok(Control::Flush { target, ack }) => {
                    catch_up(sink, state, records, target);
                    if ack.is_none() {
                        state.flush_queued.store(false, Ordering::Release);
                    }
                    call(sink, state, Call::Flush, |s| s.flush());
                    if let Some(ack) = ack {
                        let _ = ack.send(());
                    }
                }
                Ok(Control::Close { target, deadline, done }) => {
                    catch_up(sink, state, records, target);
                    call(sink, state, Call::Close, |s| s.close(deadline));
                    let _ = done.send(());
                    return;
                }
                Err(_) => return,
            },
        }
    }
}

/// Writes queued records until `target` have been handled (all of them are queued already).
fn catch_up(sink: &mut Box<dyn Sink>, state: &State, records: &Receiver<Record>, target: u64) {
    while state.handled.load(Ordering::Acquire) < target {
        match records.recv() {
            Ok(record) => write(sink, state, &record),
            Err(_) => break,
        }
    }
}

fn write(sink: &mut Box<dyn Sink>, state: &State, record: &Record) {
    call(sink, state, Call::Write, |s| s.write(record));
    state.handled.fetch_add(1, Ordering::Release);
}

/// One call into the sink, timed and accounted; `busy` says what it is doing meanwhile.
fn call(
    sink: &mut Box<dyn Sink>,
    state: &State,
    what: Call,
    f: impl FnOnce(&mut Box<dyn Sink>) -> Result<(), SinkError>,
) {
    let start = Instant::now();
    *state.busy.lock().unwrap_or_else(|e| e.into_inner()) = Some((what, start));
    let result = catch_unwind(AssertUnwindSafe(|| f(sink)));
    *state.busy.lock().unwrap_or_else(|e| e.into_inner()) = None;
    state.counters.outcome(result, what, start.elapsed());
}
