//! The worker thread: drains the queue into the sinks in order (an inline sink called here,
//! an isolated one handed a copy for its own thread), flushes whenever the queue runs dry,
//! answers flush requests, sleeps when idle, and at shutdown closes the inline sinks in order
//! and then every isolated sink by one deadline.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use super::queue::{Queue, QueueCounters};
use crate::record::TracedRecord;
use crate::sink::accounting::{mark_worker_thread, Call, SinkCounters};
use crate::sink::isolated::Isolated;
use crate::sink::Sink;

pub(super) enum WorkerControl {
    /// Drain and flush; the answer carries, when `every_sink`, one receiver per isolated sink
    /// that hears when that sink has flushed.
    Flush {
        every_sink: bool,
        ack: Sender<Vec<Receiver<()>>>,
    },
    Shutdown(Instant),
}

/// Where the worker sends records: a sink it calls itself, or an isolated sink's queue.
pub(super) enum Route {
    Inline(Box<dyn Sink>, Arc<SinkCounters>),
    Isolated(Isolated),
}

/// Empty timer rounds after which the worker stops polling and waits to be woken: with the
/// default 2 ms delay, 100 ms without a record.
const IDLE_ROUNDS: u32 = 50;

/// How long an idle worker sleeps if nothing wakes it (producers and the guard always do).
const IDLE_PARK: Duration = Duration::from_secs(10);

pub(super) fn run_worker(q: &Queue, control: Receiver<WorkerControl>, mut sinks: Vec<Route>) {
    mark_worker_thread();
    let counters = &q.counters;
    let drain = |sinks: &mut Vec<Route>| -> bool {
        let mut any = false;
        while let Some(mut record) = q.records.pop() {
            // The event's raw fields become values here, off the training thread.
            record.settle();
            write_all(sinks, counters, &record.traced);
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
        if let Route::Isolated(i) = slot
            && !i.wait_closed(isolated_deadline)
        {
            counters.sink_timed_out.store(true, Ordering::Relaxed);
        }
    }
}

fn write_all(sinks: &mut [Route], counters: &QueueCounters, record: &TracedRecord) {
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
