//! Each sink's accounting, kept by the pipeline's worker and, for an isolated sink, by the
//! sink's own thread: what was written, failed, dropped and why; and the mark on the threads
//! that run sinks, so that what a sink logs through `tracing` never feeds back into the record
//! stream.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::delivery::Delivery;
#[cfg(doc)]
use super::Sink;
use super::{Detail, SinkStatus};

thread_local! {
    /// Set on the worker thread so that anything a sink (or a crate a sink uses) logs through
    /// `tracing` never feeds back into the record stream.
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// Whether the current thread is the pipeline's worker thread (or an isolated sink's).
#[inline]
pub(crate) fn on_worker_thread() -> bool {
    ON_WORKER.with(Cell::get)
}

/// Marks the current thread as one that runs sinks: what it logs is not recorded.
pub(crate) fn mark_worker_thread() {
    ON_WORKER.with(|w| w.set(true));
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

/// A duration in words: `35 ms`, `4.2 s`, `10 s`.
pub(crate) fn seconds(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// One sink's accounting, shared by the worker and (for an isolated sink) the sink's thread.
pub(crate) struct SinkCounters {
    pub(crate) name: String,
    delivery: Delivery,
    written: AtomicU64,
    errors: AtomicU64,
    last_error: Mutex<Option<String>>,
    dropped: AtomicU64,
    /// The most telling cause among the drops: the longest stall seen.
    drop_cause: Mutex<Option<DropCause>>,
    /// The longest single call into the sink, in nanoseconds.
    slowest_ns: AtomicU64,
    /// The sink's own account, if it keeps one.
    pub(crate) status: Option<Arc<dyn SinkStatus>>,
}

/// Why an isolated sink lost records.
#[derive(Clone, Copy, Debug)]
pub(crate) enum DropCause {
    /// Its queue was full; the sink was in this call for this long (or busy with a backlog).
    QueueFull {
        capacity: usize,
        busy: Option<(Call, Duration)>,
    },
    /// Its thread had stopped.
    Stopped,
}

impl DropCause {
    fn stall(&self) -> Duration {
        match self {
            DropCause::QueueFull {
                busy: Some((_, d)), ..
            } => *d,
            _ => Duration::ZERO,
        }
    }

    fn describe(&self) -> String {
        match self {
            DropCause::QueueFull {
                capacity,
                busy: Some((call, d)),
            } => format!(
                "queue full ({capacity} records) while the sink was blocked in {} for {}",
                call.as_str(),
                seconds(*d)
            ),
            DropCause::QueueFull {
                capacity,
                busy: None,
            } => format!(
                "queue full ({capacity} records): the sink is slower than the records arrive"
            ),
            DropCause::Stopped => "the sink's thread had stopped".into(),
        }
    }
}

impl SinkCounters {
    pub(crate) fn new(
        name: &str,
        delivery: Delivery,
        status: Option<Arc<dyn SinkStatus>>,
    ) -> SinkCounters {
        SinkCounters {
            status,
            name: name.to_owned(),
            delivery,
            written: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            last_error: Mutex::new(None),
            dropped: AtomicU64::new(0),
            drop_cause: Mutex::new(None),
            slowest_ns: AtomicU64::new(0),
        }
    }

    /// Counts a call's outcome: a write that succeeded, or an error (a panic included).
    pub(crate) fn outcome(
        &self,
        result: std::thread::Result<Result<(), crate::sink::SinkError>>,
        call: Call,
        took: Duration,
    ) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.slowest_ns.fetch_max(ns, Ordering::Relaxed);
        match result {
            Ok(Ok(())) => {
                if call == Call::Write {
                    self.written.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(Err(e)) => self.error(e.to_string()),
            Err(panic) => self.error(format!("sink panicked: {}", panic_message(&panic))),
        }
    }

    pub(crate) fn error(&self, message: String) {
        if self.errors.fetch_add(1, Ordering::Relaxed) == 0 {
            // Said at once: a run of hours must not learn at its end that its log (or an
            // export) has been failing since its first minute.
            stderr_line!(
                "tracing-mllog: error: sink `{}` failed: {message} (later failures are counted; \
                 the report at shutdown has them)",
                self.name
            );
        }
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(message);
    }

    pub(crate) fn dropped(&self, cause: DropCause) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        let mut worst = self.drop_cause.lock().unwrap_or_else(|e| e.into_inner());
        if worst.as_ref().is_none_or(|w| cause.stall() >= w.stall()) {
            *worst = Some(cause);
        }
    }

    pub(crate) fn report(&self) -> SinkReport {
        SinkReport {
            name: self.name.clone(),
            delivery: self.delivery,
            written: self.written.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            last_error: self
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            dropped: self.dropped.load(Ordering::Relaxed),
            drop_reason: self
                .drop_cause
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(DropCause::describe),
            slowest_call: Duration::from_nanos(self.slowest_ns.load(Ordering::Relaxed)),
            detail: self.status.as_ref().map(|s| s.detail()),
        }
    }
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

/// One sink's share of a [`Report`](crate::Report).
///
/// One per sink in [`crate::Report::sinks`], in the order the pipeline feeds them: how it is
/// delivered, what it wrote, what it lost and why.
///
/// ```
/// use tracing_mllog::sink::{Delivery, MemorySink};
/// use tracing_mllog::{keys, mllog, MllogLayer, Output};
/// use tracing_subscriber::prelude::*;
///
/// let (isolated, _) = MemorySink::new();
/// let (inline, _) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(isolated) // on its own thread by default
///     .sink_with(inline, Delivery::Inline)
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     mllog!(keys::SEED, 42);
/// });
/// let report = guard.shutdown();
/// let memory: Vec<_> = report.sinks.iter().filter(|s| s.name == "memory").collect();
/// assert_eq!(memory.len(), 2);
/// assert_eq!(memory[0].delivery, Delivery::isolated());
/// assert_eq!(memory[1].delivery, Delivery::Inline);
/// for s in memory {
///     assert_eq!((s.written, s.errors, s.dropped), (1, 0, 0), "{s:?}");
///     assert!(s.last_error.is_none() && s.drop_reason.is_none());
/// }
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SinkReport {
    /// The sink's name.
    pub name: String,
    /// How the worker hands it records (see [`Delivery`]).
    pub delivery: Delivery,
    /// Records written without error.
    pub written: u64,
    /// Failed writes, flushes or closes.
    pub errors: u64,
    /// The latest error message.
    pub last_error: Option<String>,
    /// Records an isolated sink lost because its queue was full (or its thread had stopped).
    pub dropped: u64,
    /// Why, in words, for the longest stall seen when a record was dropped, e.g. "queue full
    /// (4096 records) while the sink was blocked in write for 4.2 s".
    pub drop_reason: Option<String>,
    /// The longest single call (write, flush or close) into the sink.
    pub slowest_call: Duration,
    /// The sink's own report, when it keeps one ([`Sink::status`]): read it with
    /// [`Detail::get`], e.g. `detail.get::<tracing_mllog::sink::OtelReport>()`.
    pub detail: Option<Detail>,
}
