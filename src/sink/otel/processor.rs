//! The span processor the sink uses for providers it builds: a bounded queue to a dedicated
//! export thread, with deliberate backpressure and exact counts (unlike the SDK's
//! `BatchSpanProcessor`, which drops silently on a full queue and only logs a total at
//! shutdown).

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender, TrySendError};
use opentelemetry::Context;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};

use super::config::Backpressure;
use super::errors::Signal;

/// Counters shared by the sink, its processor, its export thread and every handle.
#[derive(Debug, Default)]
pub(crate) struct ExportCounters {
    pub spans_started: AtomicU64,
    pub spans_ended: AtomicU64,
    pub spans_exported: AtomicU64,
    pub sampled_out: AtomicU64,
    pub events: AtomicU64,
    pub events_dropped: AtomicU64,
    pub metrics_points: AtomicU64,
    pub dropped: AtomicU64,
    pub dropped_queue_full: AtomicU64,
    pub export_errors: AtomicU64,
    pub metric_export_errors: AtomicU64,
    pub unmatched: AtomicU64,
    pub last_error: Mutex<Option<String>>,
    /// The latest span export failure, in words.
    pub last_trace_error: Mutex<Option<String>>,
    /// The latest metric export failure, in words.
    pub last_metric_error: Mutex<Option<String>>,
    /// Where spans go (redacted), when the sink built the exporter: named in messages.
    pub trace_endpoint: OnceLock<String>,
    /// Where metrics go (redacted).
    pub metric_endpoint: OnceLock<String>,
    /// The secrets and export timeout of the environment the exporters came from.
    pub export_env: OnceLock<super::errors::ExportEnv>,
    /// Spans go through our [`QueueProcessor`], so delivery is known exactly.
    pub tracked: AtomicBool,
    /// `close` has run (successfully or not).
    pub closed: AtomicBool,
    /// The shutdown deadline, once shutdown began: past it, queued spans are counted as
    /// dropped instead of starting another export.
    pub shutdown_deadline: Mutex<Option<Instant>>,
}

impl ExportCounters {
    fn past_shutdown_deadline(&self) -> bool {
        self.shutdown_deadline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|d| Instant::now() >= d)
    }
}

impl ExportCounters {
    pub(crate) fn error(&self, msg: String) {
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(msg);
    }

    /// Counts a failed export of `signal` and keeps its message, in words: the endpoint and
    /// the cause, secrets redacted.
    pub(crate) fn export_failed(&self, signal: Signal, error: &str, what: &str, took: Duration) {
        let (count, last, endpoint) = match signal {
            Signal::Traces => (
                &self.export_errors,
                &self.last_trace_error,
                &self.trace_endpoint,
            ),
            Signal::Metrics => (
                &self.metric_export_errors,
                &self.last_metric_error,
                &self.metric_endpoint,
            ),
        };
        count.fetch_add(1, Ordering::Relaxed);
        let endpoint = endpoint.get().map(String::as_str);
        let env = self
            .export_env
            .get_or_init(|| super::errors::ExportEnv::from_env(&crate::env::Env::process()));
        let msg = super::errors::describe(signal, endpoint, error, what, took, env);
        *last.lock().unwrap_or_else(|e| e.into_inner()) = Some(msg.clone());
        self.error(msg);
    }

    /// The latest export failure of `signal`.
    pub(crate) fn last_export_error(&self, signal: Signal) -> Option<String> {
        let last = match signal {
            Signal::Traces => &self.last_trace_error,
            Signal::Metrics => &self.last_metric_error,
        };
        last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

pub(crate) enum Msg {
    /// Boxed so that the preallocated queue holds pointers, not 350-byte slots.
    Span(Box<SpanData>),
    Flush(Sender<()>),
    Shutdown(Instant, Sender<()>),
}

/// Runs an exporter's future to completion: on the Tokio runtime the gRPC exporter was built
/// in, or with a plain executor (HTTP with the blocking client, in-process exporters).
#[derive(Clone, Debug)]
pub(crate) enum Executor {
    Plain,
    Tokio(tokio::runtime::Handle),
}

impl Executor {
    pub(crate) fn block_on<F: Future>(&self, f: F) -> F::Output {
        match self {
            Executor::Plain => futures_executor::block_on(f),
            Executor::Tokio(h) => h.block_on(f),
        }
    }
}

#[derive(Debug)]
pub(crate) struct QueueProcessor {
    queue: SpanQueue,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The sending end of the export queue: what the processor's `on_end` does, also usable
/// directly by the sink for spans it assembles itself.
#[derive(Clone, Debug)]
pub(crate) struct SpanQueue {
    tx: Sender<Msg>,
    backpressure: Backpressure,
    counters: Arc<ExportCounters>,
}

impl SpanQueue {
    /// Queues an ended span; waits or drops by the backpressure policy, and counts a drop.
    pub(crate) fn send(&self, span: SpanData) {
        let full = match self.backpressure {
            Backpressure::Drop => match self.tx.try_send(Msg::Span(Box::new(span))) {
                Ok(()) => false,
                Err(TrySendError::Full(_)) => true,
                Err(TrySendError::Disconnected(_)) => true,
            },
            Backpressure::Wait(wait) => match self.tx.send_timeout(Msg::Span(Box::new(span)), wait)
            {
                Ok(()) => false,
                Err(SendTimeoutError::Timeout(_)) => true,
                Err(SendTimeoutError::Disconnected(_)) => true,
            },
        };
        if full {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            self.counters
                .dropped_queue_full
                .fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub(crate) struct QueueSettings {
    pub queue_size: usize,
    pub batch_size: usize,
    pub batch_delay: Duration,
    pub backpressure: Backpressure,
}

impl QueueProcessor {
    pub(crate) fn start<E: SpanExporter + 'static>(
        exporter: E,
        settings: QueueSettings,
        executor: Executor,
        counters: Arc<ExportCounters>,
    ) -> std::io::Result<QueueProcessor> {
        let (tx, rx) = crossbeam_channel::bounded(settings.queue_size);
        let c = counters.clone();
        let batch_size = settings.batch_size;
        let delay = settings.batch_delay;
        let thread = std::thread::Builder::new()
            .name("mllog-otel-export".into())
            .spawn(move || export_loop(exporter, rx, c, batch_size, delay, executor))?;
        counters.tracked.store(true, Ordering::Relaxed);
        Ok(QueueProcessor {
            queue: SpanQueue {
                tx,
                backpressure: settings.backpressure,
                counters,
            },
            thread: Mutex::new(Some(thread)),
        })
    }

    pub(crate) fn queue(&self) -> SpanQueue {
        self.queue.clone()
    }
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        self.queue.send(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        let (ack, done) = crossbeam_channel::bounded(1);
        self.queue
            .tx
            .send(Msg::Flush(ack))
            .map_err(|_| OTelSdkError::AlreadyShutdown)?;
        done.recv().map_err(|_| OTelSdkError::AlreadyShutdown)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let deadline = crate::sink::saturating_deadline(timeout);
        *self
            .queue
            .counters
            .shutdown_deadline
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(deadline);
        let (ack, done) = crossbeam_channel::bounded(1);
        self.queue
            .tx
            .send_deadline(Msg::Shutdown(deadline, ack), deadline)
            .map_err(|_| OTelSdkError::Timeout(timeout))?;
        // A little grace past the deadline for the thread to count what it could not send.
        match done.recv_deadline(deadline + Duration::from_millis(200)) {
            Ok(()) => {
                let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(t) = thread {
                    let _ = t.join();
                }
                Ok(())
            }
            Err(_) => Err(OTelSdkError::Timeout(timeout)),
        }
    }
}

fn export_loop<E: SpanExporter>(
    exporter: E,
    rx: Receiver<Msg>,
    counters: Arc<ExportCounters>,
    batch_size: usize,
    delay: Duration,
    executor: Executor,
) {
    let mut batch: Vec<SpanData> = Vec::with_capacity(batch_size);
    let mut batch_due = Instant::now();
    let export = |batch: &mut Vec<SpanData>| {
        if batch.is_empty() {
            return;
        }
        if counters.past_shutdown_deadline() {
            // Shutdown gave up waiting: never start another export after its deadline.
            counters
                .dropped
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            batch.clear();
            return;
        }
        let spans = std::mem::replace(batch, Vec::with_capacity(batch_size));
        let n = spans.len() as u64;
        let began = Instant::now();
        match executor.block_on(exporter.export(spans)) {
            Ok(()) => {
                counters.spans_exported.fetch_add(n, Ordering::Relaxed);
            }
            Err(e) => {
                counters.dropped.fetch_add(n, Ordering::Relaxed);
                counters.export_failed(
                    Signal::Traces,
                    &e.to_string(),
                    &format!("{n} spans lost"),
                    began.elapsed(),
                );
            }
        }
    };
    let discard = |batch: &mut Vec<SpanData>| {
        counters
            .dropped
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        batch.clear();
    };
    loop {
        let msg = if batch.is_empty() {
            rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            rx.recv_deadline(batch_due)
        };
        match msg {
            Ok(Msg::Span(s)) => {
                if batch.is_empty() {
                    batch_due = crate::sink::saturating_deadline(delay);
                }
                batch.push(*s);
                if batch.len() >= batch_size {
                    export(&mut batch);
                }
            }
            Ok(Msg::Flush(ack)) => {
                export(&mut batch);
                let _ = ack.send(());
            }
            Ok(Msg::Shutdown(deadline, ack)) => {
                let mut late = false;
                while let Ok(m) = rx.try_recv() {
                    match m {
                        Msg::Span(s) => {
                            batch.push(*s);
                            if batch.len() >= batch_size {
                                late = late || Instant::now() >= deadline;
                                if late {
                                    discard(&mut batch);
                                } else {
                                    export(&mut batch);
                                }
                            }
                        }
                        Msg::Flush(a) | Msg::Shutdown(_, a) => {
                            let _ = a.send(());
                        }
                    }
                }
                if late || Instant::now() >= deadline {
                    if !batch.is_empty() {
                        counters.error(format!(
                            "shutdown deadline passed: {} spans not exported",
                            batch.len()
                        ));
                    }
                    discard(&mut batch);
                } else {
                    export(&mut batch);
                }
                let left = deadline.saturating_duration_since(Instant::now());
                let _ = exporter.shutdown_with_timeout(left.max(Duration::from_millis(10)));
                let _ = ack.send(());
                return;
            }
            Err(RecvTimeoutError::Timeout) => export(&mut batch),
            Err(RecvTimeoutError::Disconnected) => {
                export(&mut batch);
                let _ = exporter.shutdown();
                return;
            }
        }
    }
}
