//! The OpenTelemetry sink (feature `otel`): MLLOG intervals become spans, point records
//! become span events, and a few well-known keys become metrics. See `docs/otel.md` for the
//! naming scheme, the queue policy and the environment variables.

mod attributes;
mod config;
mod env;
mod errors;
mod processor;
mod span;

pub use config::{Backpressure, OtelConfig, OtelError, SpanPatterns};
pub use env::{
    ENV_OTEL, ENV_OTEL_BACKPRESSURE, ENV_OTEL_QUEUE_SIZE, ENV_OTEL_SPANS, ENV_OTEL_STEP_EVERY,
    ENV_OTEL_TRACE_ID, ENV_OTEL_TRAIN_STEP_RATE, ENV_TRACEPARENT, ENV_TRACESTATE,
};

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use opentelemetry::metrics::{Gauge, Histogram, MeterProvider as _};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracerProvider, SpanExporter};

use self::attributes::{otel_value, record_attributes, KeyCache};
use self::errors::Signal;
use self::processor::{Executor, ExportCounters, QueueProcessor, QueueSettings};
use self::span::{LiveSpan, Parent, Spans};
use super::{Sink, SinkError};
use crate::record::{EventType, OtelFields, TraceParent, TracedRecord, Value};

/// Name of the instrumentation scope of every span and metric.
pub const OTEL_SCOPE: &str = "tracing-mllog";

/// What the sink did, from [`OtelHandle::report`] (also in the sink's [`crate::sink::SinkReport`]
/// detail). Every span or event that did not reach the exporter is counted here with its
/// cause; the [`OtelSink`] example reads `spans_exported`.
///
/// A collector that is down costs spans, counted, with the exporter's message:
///
/// ```
/// use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
/// use opentelemetry_sdk::trace::{SpanData, SpanExporter};
/// use tracing_mllog::sink::{OtelConfig, OtelSink};
/// use tracing_mllog::{MllogLayer, Output};
/// use tracing_subscriber::prelude::*;
///
/// /// Refuses every batch, as an exporter whose collector is down.
/// #[derive(Debug)]
/// struct Down;
///
/// impl SpanExporter for Down {
///     fn export(&self, _: Vec<SpanData>) -> impl std::future::Future<Output = OTelSdkResult> + Send {
///         std::future::ready(Err(OTelSdkError::InternalFailure("connection refused".into())))
///     }
/// }
///
/// let sink = OtelSink::with_span_exporter(Down, OtelConfig::new())?;
/// let otel = sink.handle();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(sink)
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     let _run = tracing::info_span!("run").entered();
///     let _epoch = tracing::info_span!("epoch", epoch_num = 1u64).entered();
/// });
/// let run = guard.shutdown(); // the MLLOG records themselves are unaffected
/// assert!(run.is_clean(), "{run}");
/// let report = otel.report();
/// assert_eq!((report.spans_ended, report.spans_exported), (2, 0), "{report:?}");
/// assert_eq!(report.dropped, 2); // `spans_ended == spans_exported + dropped`
/// assert!(report.trace_export_errors > 0);
/// assert!(report.last_trace_error.as_deref().unwrap().contains("connection refused"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtelReport {
    /// Spans started (intervals, kept `train_step`s and standalone `mllog.point` spans).
    pub spans_started: u64,
    /// Spans ended and handed to the SDK.
    pub spans_ended: u64,
    /// Spans the exporter accepted. With your own providers
    /// ([`OtelSink::with_providers`]) delivery is your processor's business: this then counts
    /// spans handed to the provider and [`OtelReport::delivery_tracked`] is false.
    pub spans_exported: u64,
    /// `train_step` intervals not turned into spans by sampling (not a loss).
    pub sampled_out: u64,
    /// Span events added (point records).
    pub events: u64,
    /// Point records not added because their span already had
    /// [`OtelConfig::max_events_per_span`] events.
    pub events_dropped: u64,
    /// Metric measurements recorded.
    pub metrics_points: u64,
    /// Spans that did not reach the exporter: queue full (after the backpressure wait),
    /// export failed, or still queued at the shutdown deadline. After shutdown,
    /// `spans_ended == spans_exported + dropped` holds exactly when delivery is tracked.
    pub dropped: u64,
    /// Of `dropped`, those refused by a full queue.
    pub dropped_queue_full: u64,
    /// Failed export requests (spans and metrics: the sum of the two below).
    pub export_errors: u64,
    /// Failed span export requests.
    pub trace_export_errors: u64,
    /// Failed metric export requests.
    pub metric_export_errors: u64,
    /// The latest span export failure in words: endpoint, cause ("connection refused",
    /// "timed out after 10 s", "HTTP status 503"), the exporter's message; secrets redacted.
    pub last_trace_error: Option<String>,
    /// The latest metric export failure, likewise.
    pub last_metric_error: Option<String>,
    /// End records without a start (and starts that reused an open id).
    pub unmatched: u64,
    /// The latest error message.
    pub last_error: Option<String>,
    /// Whether spans go through the sink's own queue, so that `spans_exported` and `dropped`
    /// are exact.
    pub delivery_tracked: bool,
}

/// A cloneable view of an [`OtelSink`]'s counters, usable after the sink moved into the
/// pipeline. Take it with [`OtelSink::handle`] before handing the sink to the builder (see the
/// [`OtelSink`] example).
///
/// Through the layer, the same report is the sink's [`crate::sink::SinkReport::detail`] and
/// [`crate::Guard::detail`]`::<OtelReport>()`:
///
/// ```
/// use opentelemetry_sdk::error::OTelSdkResult;
/// use opentelemetry_sdk::trace::{SpanData, SpanExporter};
/// use tracing_mllog::sink::{OtelConfig, OtelReport, OtelSink};
/// use tracing_mllog::{MllogLayer, Output};
/// use tracing_subscriber::prelude::*;
///
/// /// Accepts every batch (a real exporter sends it to a collector).
/// #[derive(Debug)]
/// struct Accept;
///
/// impl SpanExporter for Accept {
///     fn export(&self, _: Vec<SpanData>) -> impl std::future::Future<Output = OTelSdkResult> + Send {
///         std::future::ready(Ok(()))
///     }
/// }
///
/// let sink = OtelSink::with_span_exporter(Accept, OtelConfig::new())?;
/// let otel = sink.handle(); // before the sink moves into the pipeline
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(sink)
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     let _run = tracing::info_span!("run").entered();
///     tracing_mllog::mllog!("train_loss", 0.5); // an event on the `run` span
/// });
/// guard.shutdown();
/// let report = otel.report();
/// assert_eq!((report.spans_exported, report.events, report.dropped), (1, 1, 0));
/// assert!(report.delivery_tracked);
/// assert_eq!(guard.detail::<OtelReport>(), Some(report));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct OtelHandle {
    counters: Arc<ExportCounters>,
}

impl OtelHandle {
    /// The counters now. Final once the guard has shut the pipeline down.
    pub fn report(&self) -> OtelReport {
        let c = &self.counters;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Acquire);
        let tracked = c.tracked.load(Ordering::Acquire);
        let ended = get(&c.spans_ended);
        let mut exported = get(&c.spans_exported);
        let mut dropped = get(&c.dropped);
        if !tracked {
            exported = ended;
        } else if c.closed.load(Ordering::Acquire) {
            // Whatever did not reach the exporter by the deadline is lost.
            dropped = dropped.max(ended.saturating_sub(exported));
        }
        OtelReport {
            spans_started: get(&c.spans_started),
            spans_ended: ended,
            spans_exported: exported,
            sampled_out: get(&c.sampled_out),
            events: get(&c.events),
            events_dropped: get(&c.events_dropped),
            metrics_points: get(&c.metrics_points),
            dropped,
            dropped_queue_full: get(&c.dropped_queue_full),
            export_errors: get(&c.export_errors) + get(&c.metric_export_errors),
            trace_export_errors: get(&c.export_errors),
            metric_export_errors: get(&c.metric_export_errors),
            last_trace_error: c.last_export_error(Signal::Traces),
            last_metric_error: c.last_export_error(Signal::Metrics),
            unmatched: get(&c.unmatched),
            last_error: c
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            delivery_tracked: tracked,
        }
    }
}

struct Instruments {
    eval_accuracy: Gauge<f64>,
    throughput: Gauge<f64>,
    train_loss: Gauge<f64>,
    step_time: Histogram<f64>,
    /// Per-rank distributions (attribute `mllog.rank`): a straggler's throughput sits in a
    /// lower bucket and its step time in a higher one than the other ranks'.
    throughput_hist: Histogram<f64>,
    mean_step_time: Histogram<f64>,
}

enum OpenSpan {
    Span {
        span: LiveSpan,
        events: u32,
        start_ns: i64,
        step: bool,
        /// The start record's metadata fields, so the stop record's do not repeat them.
        fields: Vec<(crate::record::Str, Value)>,
    },
    Skipped {
        parent: Option<u64>,
        start_ns: i64,
    },
}

/// The intervals open right now, innermost last. A stack searched from the top rather than a
/// hash map: MLLOG intervals nest a handful deep, and the one a record needs is nearly always
/// the innermost, so a backwards scan beats hashing every id.
#[derive(Default)]
struct OpenSpans(Vec<(u64, OpenSpan)>);

impl OpenSpans {
    fn position(&self, id: u64) -> Option<usize> {
        self.0.iter().rposition(|(i, _)| *i == id)
    }
    fn get(&self, id: u64) -> Option<&OpenSpan> {
        self.position(id).map(|at| &self.0[at].1)
    }
    fn get_mut(&mut self, id: u64) -> Option<&mut OpenSpan> {
        self.position(id).map(|at| &mut self.0[at].1)
    }
    fn push(&mut self, id: u64, open: OpenSpan) {
        self.0.push((id, open));
    }
    fn remove(&mut self, id: u64) -> Option<OpenSpan> {
        self.position(id).map(|at| self.0.remove(at).1)
    }
    /// Ids, innermost first.
    fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().rev().map(|(i, _)| *i)
    }
}

/// Sends the record stream to OpenTelemetry (feature `otel`).
///
/// Build it with [`OtelSink::from_env`] (OTLP exporters from `OTEL_EXPORTER_OTLP_*` when
/// `MLLOG_OTEL=1`), [`OtelSink::with_exporters`] / [`OtelSink::with_span_exporter`] (any
/// exporter, through the sink's own counting queue) or [`OtelSink::with_providers`] (your own
/// SDK providers), then hand it to [`crate::Builder::sink`]. Keep an [`OtelHandle`] from
/// [`OtelSink::handle`] to read the [`OtelReport`].
///
/// Every MLLOG interval (`run`, `block`, `epoch`, `eval`, sampled `train_step`s) becomes a
/// span with the interval's metadata as attributes, and every point record an event on the
/// innermost open span; the run's trace can join an application's trace
/// ([`OtelConfig::traceparent`]). Export happens on the sink's own threads; a collector that
/// is down or slow costs dropped spans (counted in the [`OtelReport`]), never a stalled
/// training step.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use opentelemetry_sdk::error::OTelSdkResult;
/// use opentelemetry_sdk::trace::{SpanData, SpanExporter};
/// use tracing_mllog::sink::{OtelConfig, OtelSink};
/// use tracing_mllog::{MllogLayer, Output};
/// use tracing_subscriber::prelude::*;
///
/// /// Keeps the names of the spans it is given (a real one sends them to a collector).
/// #[derive(Clone, Debug, Default)]
/// struct Names(Arc<Mutex<Vec<String>>>);
///
/// impl SpanExporter for Names {
///     fn export(&self, batch: Vec<SpanData>) -> impl std::future::Future<Output = OTelSdkResult> + Send {
///         self.0.lock().unwrap().extend(batch.into_iter().map(|s| s.name.into_owned()));
///         std::future::ready(Ok(()))
///     }
/// }
///
/// let names = Names::default();
/// let sink = OtelSink::with_span_exporter(names.clone(), OtelConfig::new().service_name("demo"))?;
/// let otel = sink.handle();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(sink)
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     let _run = tracing::info_span!("run").entered();
///     let _epoch = tracing::info_span!("epoch", epoch_num = 1u64).entered();
/// });
/// guard.shutdown(); // ends the spans and flushes the exporter
/// let mut exported = names.0.lock().unwrap().clone();
/// exported.sort();
/// assert_eq!(exported, ["epoch", "run"]);
/// assert_eq!(otel.report().spans_exported, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct OtelSink {
    name: String,
    spans: Spans,
    tracer_provider: SdkTracerProvider,
    meter_provider: Option<SdkMeterProvider>,
    instruments: Option<Instruments>,
    own_providers: bool,
    runtime: Option<tokio::runtime::Runtime>,
    open: OpenSpans,
    counters: Arc<ExportCounters>,
    step_rate: f64,
    step_acc: f64,
    max_events: u32,
    metric_attrs: Vec<KeyValue>,
    benchmark_from_config: bool,
    last_ns: i64,
    closed: bool,
    keys: KeyCache,
    /// The launcher's span (`TRACEPARENT`): parent of every root span.
    remote_parent: Option<SpanContext>,
    /// Asked of the layer when the sink starts: other spans, and the counted steps.
    traced_spans: SpanPatterns,
    trace_steps: bool,
}

impl std::fmt::Debug for OtelSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtelSink")
            .field("name", &self.name)
            .field("own_providers", &self.own_providers)
            .field("trace_steps", &self.trace_steps)
            .finish_non_exhaustive()
    }
}

/// Counts metric export failures.
struct CountingMetricExporter<M> {
    inner: M,
    counters: Arc<ExportCounters>,
}

impl<M: PushMetricExporter> PushMetricExporter for CountingMetricExporter<M> {
    fn export(
        &self,
        metrics: &ResourceMetrics,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        let fut = self.inner.export(metrics);
        let counters = self.counters.clone();
        let began = Instant::now();
        async move {
            let r = fut.await;
            if let Err(e) = &r {
                counters.export_failed(Signal::Metrics, &e.to_string(), "", began.elapsed());
            }
            r
        }
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }
    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

impl OtelSink {
    /// Uses your providers as they are (their resource, sampler and processors). At shutdown
    /// the sink force-flushes them (within the guard's deadline) but does not shut them down.
    /// Delivery after the provider is not visible to the sink
    /// ([`OtelReport::delivery_tracked`] is false); use [`OtelSink::with_exporters`] for
    /// exact drop counts. [`OtelConfig::resource`] gives the resource the sink would use.
    pub fn with_providers(
        tracer_provider: SdkTracerProvider,
        meter_provider: Option<SdkMeterProvider>,
        config: OtelConfig,
    ) -> OtelSink {
        OtelSink::assemble(
            tracer_provider,
            meter_provider,
            config,
            None,
            None,
            ExportCounters::default().into(),
        )
    }

    /// Builds providers around these exporters: spans through the sink's bounded queue and
    /// export thread (exact counts, [`Backpressure`] as configured), metrics through a
    /// periodic reader. The resource is [`OtelConfig::resource`].
    pub fn with_exporters<S, M>(
        span_exporter: S,
        metric_exporter: M,
        config: OtelConfig,
    ) -> Result<OtelSink, OtelError>
    where
        S: SpanExporter + 'static,
        M: PushMetricExporter,
    {
        OtelSink::build(span_exporter, Some(metric_exporter), config, None, false)
    }

    /// Like [`OtelSink::with_exporters`] without metrics.
    pub fn with_span_exporter<S>(
        span_exporter: S,
        config: OtelConfig,
    ) -> Result<OtelSink, OtelError>
    where
        S: SpanExporter + 'static,
    {
        OtelSink::build::<S, NoMetrics>(span_exporter, None, config, None, false)
    }

    pub(crate) fn build<S, M>(
        mut span_exporter: S,
        metric_exporter: Option<M>,
        config: OtelConfig,
        runtime: Option<tokio::runtime::Runtime>,
        spans_on_runtime: bool,
    ) -> Result<OtelSink, OtelError>
    where
        S: SpanExporter + 'static,
        M: PushMetricExporter,
    {
        let counters: Arc<ExportCounters> = Arc::new(ExportCounters::default());
        if let Some(e) = &config.endpoints.traces {
            let _ = counters.trace_endpoint.set(e.clone());
        }
        if let Some(e) = &config.endpoints.metrics {
            let _ = counters.metric_endpoint.set(e.clone());
        }
        if let Some(env) = &config.endpoints.export_env {
            let _ = counters.export_env.set(env.clone());
        }
        let resource = config.resource();
        span_exporter.set_resource(&resource);
        let executor = match &runtime {
            Some(rt) if spans_on_runtime => Executor::Tokio(rt.handle().clone()),
            _ => Executor::Plain,
        };
        let processor = QueueProcessor::start(
            span_exporter,
            QueueSettings {
                queue_size: config.queue_size,
                batch_size: config.batch_size,
                batch_delay: config.batch_delay,
                backpressure: config.backpressure,
            },
            executor,
            counters.clone(),
        )?;
        let trace_id = config
            .trace_id
            .unwrap_or_else(|| RandomIdGenerator::default().new_trace_id());
        // Every root span of one sink shares one trace id, so a rank's `init` and `run` are
        // one trace.
        let direct = Spans::Direct {
            queue: processor.queue(),
            scope: InstrumentationScope::builder(OTEL_SCOPE).build(),
            trace_id,
            ids: RandomIdGenerator::default(),
        };
        // Spans skip its tracer (see `span.rs`); the provider owns the processor, so that
        // shutting it down flushes and stops the export thread.
        let tracer_provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(resource.clone())
            .build();
        let meter_provider = metric_exporter.map(|m| {
            let exporter = CountingMetricExporter {
                inner: m,
                counters: counters.clone(),
            };
            let mut reader = PeriodicReader::builder(exporter);
            if let Some(i) = config.metric_interval {
                reader = reader.with_interval(i);
            }
            SdkMeterProvider::builder()
                .with_reader(reader.build())
                .with_resource(resource)
                .build()
        });
        Ok(OtelSink::assemble(
            tracer_provider,
            meter_provider,
            config,
            Some(direct),
            runtime,
            counters,
        ))
    }

    /// `direct`: the sink's own span queue, when it built the providers (spans then skip
    /// the SDK tracer); `None` with your providers.
    fn assemble(
        tracer_provider: SdkTracerProvider,
        meter_provider: Option<SdkMeterProvider>,
        config: OtelConfig,
        direct: Option<Spans>,
        runtime: Option<tokio::runtime::Runtime>,
        counters: Arc<ExportCounters>,
    ) -> OtelSink {
        let own_providers = direct.is_some();
        if let Some(why) = &config.ignored {
            counters.error(why.clone());
        }
        let spans = direct.unwrap_or_else(|| Spans::Sdk(tracer_provider.tracer(OTEL_SCOPE)));
        let instruments = meter_provider.as_ref().map(|mp| {
            let meter = mp.meter(OTEL_SCOPE);
            Instruments {
                eval_accuracy: meter
                    .f64_gauge("mllog.eval_accuracy")
                    .with_description("eval_accuracy records (the benchmark's quality metric)")
                    .build(),
                throughput: meter
                    .f64_gauge("mllog.throughput")
                    .with_description("throughput from `throughput` or `tracked_stats` records")
                    .build(),
                train_loss: meter
                    .f64_gauge("mllog.train_loss")
                    .with_description("training loss from `train_loss` or `tracked_stats` records")
                    .build(),
                step_time: meter
                    .f64_histogram("mllog.train_step.duration")
                    .with_unit("s")
                    .with_description("duration of every train_step interval (sampled or not)")
                    .build(),
                throughput_hist: meter
                    .f64_histogram("mllog.throughput.distribution")
                    .with_unit("{sample}/s")
                    .with_description("throughput per block (`tracked_stats`), per rank")
                    .with_boundaries(log_buckets(1.0, 1e7))
                    .build(),
                mean_step_time: meter
                    .f64_histogram("mllog.step_time")
                    .with_unit("s")
                    .with_description("mean step time per block (`tracked_stats`), per rank")
                    .with_boundaries(log_buckets(1e-4, 1e3))
                    .build(),
            }
        });
        let mut metric_attrs = Vec::new();
        let s = &config.submission;
        if let Some(b) = s.benchmark {
            metric_attrs.push(KeyValue::new("mllog.benchmark", b.as_str()));
        }
        if let Some(r) = config.rank {
            metric_attrs.push(KeyValue::new("mllog.rank", i64::from(r)));
        }
        for (k, v) in [
            ("mllog.submission.org", s.org.as_deref()),
            ("mllog.submission.division", s.division.map(|d| d.as_str())),
            ("mllog.submission.status", s.status.map(|d| d.as_str())),
            ("mllog.submission.platform", s.platform.as_deref()),
        ] {
            if let Some(v) = v {
                metric_attrs.push(KeyValue::new(k, v.to_owned()));
            }
        }
        OtelSink {
            name: "otel".to_owned(),
            spans,
            tracer_provider,
            meter_provider,
            instruments,
            own_providers,
            runtime,
            open: OpenSpans::default(),
            counters,
            step_rate: config.train_step_rate,
            step_acc: 0.0,
            max_events: config.max_events_per_span,
            metric_attrs,
            benchmark_from_config: s.benchmark.is_some(),
            last_ns: 0,
            closed: false,
            keys: KeyCache::default(),
            remote_parent: config.remote_parent,
            traced_spans: config.spans,
            trace_steps: config.trace_steps,
        }
    }

    /// A handle to the counters.
    pub fn handle(&self) -> OtelHandle {
        OtelHandle {
            counters: self.counters.clone(),
        }
    }

    /// The open span a new one hangs on.
    fn parent_span(&self, mut parent: Option<u64>) -> Option<&LiveSpan> {
        // Sampled-out intervals are transparent: their children hang on the nearest kept one.
        for _ in 0..64 {
            match parent.and_then(|p| self.open.get(p)) {
                Some(OpenSpan::Span { span, .. }) => return Some(span),
                Some(OpenSpan::Skipped { parent: up, .. }) => parent = *up,
                None => break,
            }
        }
        None
    }

    /// The open span a point record belongs to: its scope (skipping sampled-out intervals),
    /// else the innermost open span.
    fn event_target(&self, record: &TracedRecord) -> Option<u64> {
        let mut id = record.scope;
        for _ in 0..64 {
            match id.and_then(|i| self.open.get(i).map(|o| (i, o))) {
                Some((i, OpenSpan::Span { .. })) => return Some(i),
                Some((_, OpenSpan::Skipped { parent, .. })) => id = *parent,
                None => break,
            }
        }
        // No scope (or its chain ended at a sampled-out root): the innermost open span.
        self.open
            .0
            .iter()
            .rev()
            .find(|(_, o)| matches!(o, OpenSpan::Span { .. }))
            .map(|(i, _)| *i)
    }

    fn on_start(&mut self, record: &TracedRecord) {
        let name = interval_name(&record.key, "_start");
        let (id, parent) = match record.interval {
            Some(ids) => (ids.id, ids.parent),
            None => (synthetic_id(name), self.open.ids().next()),
        };
        if self.open.position(id).is_some() {
            self.counters.unmatched.fetch_add(1, Ordering::Relaxed);
            self.end_open(id, record.time.wall_ns, true);
        }
        let step = name == "train_step";
        if step && !self.keep_step() {
            self.counters.sampled_out.fetch_add(1, Ordering::Relaxed);
            self.open.push(
                id,
                OpenSpan::Skipped {
                    parent,
                    start_ns: record.time.wall_ns,
                },
            );
            return;
        }
        let mut attrs = Vec::with_capacity(6 + record.metadata.fields.len());
        record_attributes(record, &mut attrs, &mut self.keys);
        let otel = record.otel.as_deref();
        let app_parent = otel.and_then(|o| o.parent).map(remote_context);
        // Our own enclosing interval first; for a root, the application's span around it
        // (tracing-opentelemetry), else the launcher's (`TRACEPARENT`).
        let parent = match (self.parent_span(parent), &app_parent, &self.remote_parent) {
            (Some(p), _, _) => Parent::Local(p),
            (None, Some(app), _) => Parent::Remote(app),
            (None, None, Some(launcher)) => Parent::Remote(launcher),
            (None, None, None) => Parent::None,
        };
        let span_name = match otel.and_then(|o| o.name.clone()) {
            Some(n) => n,
            None => interval_span_name(&record.key, name),
        };
        let kind = otel
            .and_then(|o| o.kind.as_deref())
            .map_or(SpanKind::Internal, span_kind);
        let span = self.spans.start(
            span_name,
            system_time(record.time.wall_ns),
            attrs,
            parent,
            kind,
        );
        self.counters.spans_started.fetch_add(1, Ordering::Relaxed);
        self.open.push(
            id,
            OpenSpan::Span {
                span,
                events: 0,
                start_ns: record.time.wall_ns,
                step,
                fields: record.metadata.fields.to_vec(),
            },
        );
    }

    fn keep_step(&mut self) -> bool {
        if self.step_rate >= 1.0 {
            return true;
        }
        self.step_acc += self.step_rate;
        if self.step_acc >= 1.0 - 1e-9 {
            self.step_acc -= 1.0;
            true
        } else {
            false
        }
    }

    fn on_end(&mut self, record: &TracedRecord) {
        let name = interval_name(&record.key, "_stop");
        let id = match record.interval {
            Some(ids) => ids.id,
            None => synthetic_id(name),
        };
        let keys = &mut self.keys;
        let Some(open) = self.open.get_mut(id) else {
            self.counters.unmatched.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if let OpenSpan::Span { span, fields, .. } = open {
            let mut attrs = Vec::with_capacity(4 + record.metadata.fields.len());
            attrs.push(KeyValue::new("mllog.stop_key", record.key.clone()));
            if let Some(v) = otel_value(&record.value) {
                attrs.push(KeyValue::new("mllog.stop_value", v));
            }
            for (k, v) in &record.metadata.fields {
                // Same as at the start: already there. Different: `mllog.stop.<field>`.
                let name = match fields.iter().find(|(sk, _)| sk == k) {
                    Some((_, sv)) if sv == v => continue,
                    Some(_) => keys.stop(k),
                    None => keys.plain(k),
                };
                if let Some(v) = otel_value(v) {
                    attrs.push(KeyValue::new(name, v));
                }
            }
            span.add_attributes(attrs);
            if let Some(status) = record.metadata.get("status").and_then(Value::as_str)
                && status != "success"
            {
                span.set_status(Status::error(status.to_owned()));
            }
            // `otel.status_code` wins, as with tracing-opentelemetry.
            if let Some(status) = record.otel.as_deref().and_then(otel_status) {
                span.set_status(status);
            }
            // `otel.name` recorded after the span opened.
            if let Some(name) = record.otel.as_deref().and_then(|o| o.name.clone()) {
                span.set_name(name);
            }
        }
        self.end_open(id, record.time.wall_ns, false);
    }

    /// Ends (or forgets, if sampled out) an open interval and records its step time.
    fn end_open(&mut self, id: u64, end_ns: i64, incomplete: bool) {
        let Some(open) = self.open.remove(id) else {
            return;
        };
        let (start_ns, step) = match &open {
            OpenSpan::Span { start_ns, step, .. } => (*start_ns, *step),
            OpenSpan::Skipped { start_ns, .. } => (*start_ns, true),
        };
        if step
            && !incomplete
            && let Some(ins) = &self.instruments
        {
            let secs = (end_ns - start_ns) as f64 / 1e9;
            ins.step_time.record(secs, &self.metric_attrs);
            self.counters.metrics_points.fetch_add(1, Ordering::Relaxed);
        }
        if let OpenSpan::Span { mut span, .. } = open {
            if incomplete {
                span.add_attributes(vec![KeyValue::new("mllog.incomplete", true)]);
            }
            self.spans.end(span, system_time(end_ns));
            self.counters.spans_ended.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn on_point(&mut self, record: &TracedRecord) {
        self.learn_submission(record);
        self.record_metrics(record);
        let mut attrs = Vec::with_capacity(6 + record.metadata.fields.len());
        record_attributes(record, &mut attrs, &mut self.keys);
        let time = system_time(record.time.wall_ns);
        match self.event_target(record) {
            Some(id) => {
                let max = self.max_events;
                if let Some(OpenSpan::Span { span, events, .. }) = self.open.get_mut(id) {
                    if *events >= max {
                        self.counters.events_dropped.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    *events += 1;
                    span.add_event(record.key.clone(), time, attrs);
                }
            }
            None => {
                // Outside every interval (e.g. `cache_clear` before `init_start`): a
                // zero-length span carrying the one event.
                let span_attrs = vec![KeyValue::new("mllog.key", record.key.clone())];
                // The application's span around it (a `cache_clear` made as `init` opens), else
                // the launcher's.
                let app = record
                    .otel
                    .as_deref()
                    .and_then(|o| o.parent)
                    .map(remote_context);
                let parent = match (&app, &self.remote_parent) {
                    (Some(app), _) => Parent::Remote(app),
                    (None, Some(launcher)) => Parent::Remote(launcher),
                    (None, None) => Parent::None,
                };
                let mut span = self.spans.start(
                    "mllog.point".into(),
                    time,
                    span_attrs,
                    parent,
                    SpanKind::Internal,
                );
                self.counters.spans_started.fetch_add(1, Ordering::Relaxed);
                span.add_event(record.key.clone(), time, attrs);
                self.spans.end(span, time);
                self.counters.spans_ended.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.counters.events.fetch_add(1, Ordering::Relaxed);
    }

    fn learn_submission(&mut self, record: &TracedRecord) {
        let attr = match &*record.key {
            "submission_benchmark" if !self.benchmark_from_config => "mllog.benchmark",
            "submission_org" => "mllog.submission.org",
            "submission_division" => "mllog.submission.division",
            "submission_status" => "mllog.submission.status",
            "submission_platform" => "mllog.submission.platform",
            _ => return,
        };
        let Some(v) = record.value.as_str() else {
            return;
        };
        let kv = KeyValue::new(attr, v.to_owned());
        match self
            .metric_attrs
            .iter_mut()
            .find(|k| k.key.as_str() == attr)
        {
            Some(slot) => *slot = kv,
            None => self.metric_attrs.push(kv),
        }
    }

    fn record_metrics(&mut self, record: &TracedRecord) {
        let Some(ins) = &self.instruments else {
            return;
        };
        let mut n = 0;
        match &*record.key {
            "eval_accuracy" => {
                if let Some(v) = record.value.as_f64() {
                    let mut attrs = self.metric_attrs.clone();
                    for field in ["samples_count", "epoch_num"] {
                        if let Some(i) = record.metadata.get(field).and_then(Value::as_i128) {
                            attrs.push(KeyValue::new(format!("mllog.{field}"), i as i64));
                        }
                    }
                    ins.eval_accuracy.record(v, &attrs);
                    n += 1;
                }
            }
            "throughput" => {
                if let Some(v) = record.value.as_f64() {
                    ins.throughput.record(v, &self.metric_attrs);
                    n += 1;
                }
            }
            "train_loss" => {
                if let Some(v) = record.value.as_f64() {
                    ins.train_loss.record(v, &self.metric_attrs);
                    n += 1;
                }
            }
            "tracked_stats" => {
                if let Some(v) = record.value.get("throughput").and_then(Value::as_f64) {
                    ins.throughput.record(v, &self.metric_attrs);
                    ins.throughput_hist.record(v, &self.metric_attrs);
                    n += 2;
                }
                if let Some(v) = record.value.get("train_step_time").and_then(Value::as_f64) {
                    ins.mean_step_time.record(v, &self.metric_attrs);
                    n += 1;
                }
                let loss = record
                    .value
                    .get("train_loss")
                    .or_else(|| record.value.get("loss"))
                    .and_then(Value::as_f64);
                if let Some(v) = loss {
                    ins.train_loss.record(v, &self.metric_attrs);
                    n += 1;
                }
            }
            _ => {}
        }
        if n > 0 {
            self.counters.metrics_points.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn finish(&mut self, deadline: Instant) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        // Intervals still open (an aborted run): end them at the last record's time.
        let still_open: Vec<u64> = self.open.ids().collect();
        for id in still_open {
            self.end_open(id, self.last_ns, true);
        }
        self.open.0.clear();
        let tp = self.tracer_provider.clone();
        let mp = self.meter_provider.clone();
        let own = self.own_providers;
        let (tx, rx) = crossbeam_channel::bounded(1);
        let spawned = std::thread::Builder::new()
            .name("mllog-otel-shutdown".into())
            .spawn(move || {
                let left = || deadline.saturating_duration_since(Instant::now());
                let mut errors = Vec::new();
                let r = if own {
                    tp.shutdown_with_timeout(left())
                } else {
                    tp.force_flush()
                };
                if let Err(e) = r {
                    errors.push(format!("tracer provider: {e}"));
                }
                if let Some(mp) = mp {
                    let r = if own {
                        mp.shutdown_with_timeout(left())
                    } else {
                        mp.force_flush()
                    };
                    if let Err(e) = r {
                        errors.push(format!("meter provider: {e}"));
                    }
                }
                let _ = tx.send(errors);
            });
        let counters = self.counters.clone();
        // A provider's shutdown error ("Failed to shutdown") hides why: the export failures
        // counted on the way say it, so they are what the message shows.
        let in_words = move |errors: Vec<String>| {
            let why: Vec<String> = [Signal::Traces, Signal::Metrics]
                .into_iter()
                .filter_map(|s| counters.last_export_error(s))
                .collect();
            if why.is_empty() {
                errors.join("; ")
            } else {
                why.join("; ")
            }
        };
        let result = match spawned {
            Err(e) => Err(SinkError::Io(e)),
            Ok(_) => match rx.recv_deadline(deadline + Duration::from_millis(300)) {
                Ok(errors) if errors.is_empty() => Ok(()),
                Ok(errors) => Err(SinkError::Other(in_words(errors))),
                Err(_) => Err(SinkError::Other(
                    "OpenTelemetry shutdown did not finish by the deadline".to_owned(),
                )),
            },
        };
        if let Err(e) = &result {
            self.counters.error(e.to_string());
        }
        self.counters.closed.store(true, Ordering::Release);
        result
    }
}

impl super::SinkStatus for OtelHandle {
    fn detail(&self) -> super::Detail {
        super::Detail::new(self.report())
    }
}

/// The registration (see `crate::registry::FACTORIES`): `MLLOG_OTEL`, on every rank (each
/// exports its own spans, labelled with its rank).
pub(crate) fn plug(
    env: &crate::env::Env,
    rank: u32,
    submission: &crate::submission::Submission,
) -> Result<Option<super::plug::EnvSink>, crate::Error> {
    let config = OtelConfig::new().rank(rank).submission(submission.clone());
    let sink = OtelSink::from_env_with(env, config)
        .map_err(|e| crate::Error::start("the OpenTelemetry sink", e))?;
    Ok(sink.map(|sink| super::plug::EnvSink {
        every_rank: true,
        ..super::plug::EnvSink::isolated(sink)
    }))
}

impl Sink for OtelSink {
    fn name(&self) -> &str {
        &self.name
    }

    /// Asks the layer for the spans and steps the configuration exports.
    fn start(
        &mut self,
        start: &mut super::SinkStart<'_>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if self.trace_steps {
            start.trace_steps();
        }
        if !self.traced_spans.is_empty() {
            let spans = self.traced_spans.clone();
            start.trace_spans(move |name| spans.matches(name));
        }
        Ok(())
    }

    fn status(&self) -> Option<Arc<dyn super::SinkStatus>> {
        Some(Arc::new(self.handle()))
    }

    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
        self.last_ns = self.last_ns.max(record.time.wall_ns);
        match record.event_type {
            EventType::IntervalStart => self.on_start(record),
            EventType::IntervalEnd => self.on_end(record),
            EventType::PointInTime => self.on_point(record),
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        // The export thread sends a partial batch after `batch_delay` on its own; flushing
        // here (called whenever the channel runs dry) would turn every quiet moment into a
        // tiny export request.
        Ok(())
    }

    fn close(&mut self, deadline: Instant) -> Result<(), SinkError> {
        self.finish(deadline)
    }
}

impl Drop for OtelSink {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.finish(Instant::now() + Duration::from_secs(5));
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// A metric exporter type for "no metrics" (never constructed).
struct NoMetrics;

impl PushMetricExporter for NoMetrics {
    #[allow(clippy::manual_async_fn)]
    fn export(
        &self,
        _metrics: &ResourceMetrics,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        async { Ok(()) }
    }
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
    fn temporality(&self) -> Temporality {
        Temporality::Cumulative
    }
}

/// A parent span known only by its ids.
fn remote_context(p: TraceParent) -> SpanContext {
    SpanContext::new(
        TraceId::from_bytes(p.trace_id),
        SpanId::from_bytes(p.span_id),
        if p.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        },
        true,
        TraceState::default(),
    )
}

/// `otel.kind` as tracing-opentelemetry reads it.
fn span_kind(kind: &str) -> SpanKind {
    match kind.to_ascii_lowercase().as_str() {
        "server" => SpanKind::Server,
        "client" => SpanKind::Client,
        "producer" => SpanKind::Producer,
        "consumer" => SpanKind::Consumer,
        _ => SpanKind::Internal,
    }
}

/// `otel.status_code` (`ok` / `error`, any case) with `otel.status_description`.
fn otel_status(o: &OtelFields) -> Option<Status> {
    let code = o.status_code.as_deref()?;
    match code.to_ascii_lowercase().as_str() {
        "ok" => Some(Status::Ok),
        "error" => Some(Status::error(
            o.status_description.clone().unwrap_or_default(),
        )),
        _ => None,
    }
}

/// Histogram bucket bounds from `lo` to `hi`, four per decade: throughput spans orders of
/// magnitude between benchmarks, and a straggler differs by a fraction of one.
fn log_buckets(lo: f64, hi: f64) -> Vec<f64> {
    let mut b = Vec::new();
    let mut x = lo;
    while x <= hi * 1.0001 {
        b.push(x);
        x *= 10f64.powf(0.25);
    }
    b
}

/// The span name: the interval name, borrowed from the key when the key is static.
fn interval_span_name(key: &crate::record::Str, name: &str) -> std::borrow::Cow<'static, str> {
    match key {
        std::borrow::Cow::Borrowed(k) => {
            std::borrow::Cow::Borrowed(k.strip_suffix("_start").unwrap_or(k))
        }
        std::borrow::Cow::Owned(_) => std::borrow::Cow::Owned(name.to_owned()),
    }
}

/// `run_start` → `run`.
fn interval_name<'a>(key: &'a str, suffix: &str) -> &'a str {
    key.strip_suffix(suffix).unwrap_or(key)
}

/// An interval id for records without pairing (e.g. parsed from a log): one per name.
fn synthetic_id(name: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    h.finish() | (1 << 63)
}

fn system_time(wall_ns: i64) -> SystemTime {
    if wall_ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(wall_ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(wall_ns.unsigned_abs())
    }
}
