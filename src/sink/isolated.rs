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

use super::accounting::{seconds, Call, DropCause, SinkCounters};
use super::{Sink, SinkError};
use crate::record::TracedRecord;

enum SinkControl {
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
struct SinkThread {
    counters: Arc<SinkCounters>,
    /// The call the sink is in and since when (`None` between calls).
    busy: Mutex<Option<(Call, Instant)>>,
    /// Records the sink's thread has handed to the sink.
    handled: AtomicU64,
    /// A periodic flush is queued and not yet done: another one would add nothing.
    flush_queued: AtomicBool,
}

impl SinkThread {
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
    records: Sender<TracedRecord>,
    control: Sender<SinkControl>,
    state: Arc<SinkThread>,
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
        let state = Arc::new(SinkThread {
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
    pub(crate) fn write(&mut self, record: &TracedRecord) {
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
            let _ = self.control.send(SinkControl::Flush {
                target: self.accepted,
                ack: None,
            });
        }
    }

    /// Asks for a flush after the records queued so far; the receiver hears when it is done
    /// (or is disconnected if the sink's thread has stopped).
    pub(crate) fn flush_acked(&mut self) -> Receiver<()> {
        let (ack, ack_rx) = bounded(1);
        let _ = self.control.send(SinkControl::Flush {
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
        let _ = self.control.send(SinkControl::Close {
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

/// The sink's thread: writes records in order; flushes and closes when the worker asks, after
/// the records queued before the request.
fn run(
    mut sink: Box<dyn Sink>,
    records: &Receiver<TracedRecord>,
    control: &Receiver<SinkControl>,
    state: &SinkThread,
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
                Ok(SinkControl::Flush { target, ack }) => {
                    catch_up(sink, state, records, target);
                    if ack.is_none() {
                        state.flush_queued.store(false, Ordering::Release);
                    }
                    call(sink, state, Call::Flush, |s| s.flush());
                    if let Some(ack) = ack {
                        let _ = ack.send(());
                    }
                }
                Ok(SinkControl::Close { target, deadline, done }) => {
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
fn catch_up(
    sink: &mut Box<dyn Sink>,
    state: &SinkThread,
    records: &Receiver<TracedRecord>,
    target: u64,
) {
    while state.handled.load(Ordering::Acquire) < target {
        match records.recv() {
            Ok(record) => write(sink, state, &record),
            Err(_) => break,
        }
    }
}

fn write(sink: &mut Box<dyn Sink>, state: &SinkThread, record: &TracedRecord) {
    call(sink, state, Call::Write, |s| s.write(record));
    state.handled.fetch_add(1, Ordering::Release);
}

/// One call into the sink, timed and accounted; `busy` says what it is doing meanwhile.
fn call(
    sink: &mut Box<dyn Sink>,
    state: &SinkThread,
    what: Call,
    f: impl FnOnce(&mut Box<dyn Sink>) -> Result<(), SinkError>,
) {
    let start = Instant::now();
    *state.busy.lock().unwrap_or_else(|e| e.into_inner()) = Some((what, start));
    let result = catch_unwind(AssertUnwindSafe(|| f(sink)));
    *state.busy.lock().unwrap_or_else(|e| e.into_inner()) = None;
    state.counters.outcome(result, what, start.elapsed());
}
