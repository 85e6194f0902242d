//! The record pipeline: a bounded lock-free queue from the training threads to one worker
//! thread that fans every record out, in order, to the sinks; and the [`Guard`] that flushes
//! it.
//!
//! The training thread only pushes typed records (a recycled box, one compare-and-swap) and
//! wakes the worker if it sleeps; formatting and I/O happen on the worker. Rare control
//! messages (flush, shutdown) take a separate channel. Nothing is dropped silently: every
//! record that does not reach a sink is counted and shows up in the [`Report`].
//!
//! The rooms: [`queue`](self::queue) (the sending side and the queue it shares with the
//! worker), [`pending`](self::pending) (a record on its way, its event's fields still raw,
//! settled on the worker), [`worker`](self::worker) (the worker thread), [`guard`](self::guard) (the
//! [`Guard`] and ending the run once), [`exit`](self::exit) (the process's ways out),
//! [`report`](self::report) (the [`Report`]); the process-global state is all at the top of
//! [`exit`](self::exit), each static with its reason.

mod exit;
mod feed;
mod guard;
mod pending;
mod queue;
mod report;
mod settings;
mod worker;

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock};

use crossbeam_channel::bounded;
use crossbeam_queue::ArrayQueue;

pub(crate) use exit::{handle_signals, lock_until, Ending};
pub use feed::RecordFeed;
pub use guard::Guard;
pub(crate) use guard::{EndOfRun, Placement};
pub(crate) use pending::{Capture, Kind, Pending, Raw};
pub use queue::Overflow;
pub(crate) use queue::RecordSender;

pub use report::Report;
pub use settings::Pipeline;

use crate::compliance::{ComplianceHandle, LiveRulesHandle};
use crate::sink::accounting::SinkCounters;
use crate::sink::isolated::Isolated;
use crate::sink::plug::SpanHook;
use crate::sink::{Delivery, Sink};
use guard::GuardInner;
use queue::{Queue, QueueCounters};
use worker::{run_worker, Route};

/// Everything a pipeline is started with: `Builder::build`'s last step hands it over whole.
pub(crate) struct Start {
    /// The sinks in the order the worker calls them, each with its delivery.
    pub(crate) sinks: Vec<(Box<dyn Sink>, Delivery)>,
    /// The queue's size, the worker's delay, overflow and the shutdown's patience.
    pub(crate) settings: Pipeline,
    /// The live checker's handle (for `preflight` and the report), and whether a failing
    /// verdict is printed at shutdown.
    pub(crate) compliance: Option<(ComplianceHandle, bool)>,
    /// The live check against rules read at run time (feature `rules`), its failing
    /// verdict printed at shutdown as the built-in one's.
    pub(crate) live_rules: Option<LiveRulesHandle>,
    /// The layer writes: a shutdown without a single record is reported (see
    /// [`Report::received_nothing`]).
    pub(crate) writes: bool,
    /// The layer's span hooks (the segment profiler), finished when the pipeline stops.
    pub(crate) hooks: Vec<Arc<dyn SpanHook>>,
}

impl RecordSender {
    /// Starts the worker thread with these sinks, each delivered by its policy (an isolated
    /// sink gets its own thread here), and the guard that stops it.
    pub(crate) fn start(start: Start) -> std::io::Result<(RecordSender, Guard)> {
        let Start {
            sinks,
            settings:
                Pipeline {
                    capacity,
                    max_delay,
                    overflow,
                    shutdown_timeout,
                },
            compliance,
            live_rules,
            writes,
            hooks,
        } = start;
        let (compliance, warn_compliance) = match compliance {
            Some((handle, warn)) => (Some(handle), warn),
            None => (None, false),
        };
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
            let _ = queue.spare.push(Box::new(Pending::empty()));
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
        let pipeline = RecordSender {
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
                compliance,
                live_rules,
                warn_compliance,
                writes,
                layer: OnceLock::new(),
                hooks,
                finishing: Mutex::new(()),
            }),
        };
        Ok((pipeline, guard))
    }
}
