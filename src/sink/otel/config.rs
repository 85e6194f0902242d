//! [`OtelConfig`], [`Backpressure`] and [`OtelError`].

use std::time::Duration;

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;

use crate::keys::Benchmark;
use crate::submission::Submission;

/// The service name (read by the sink, not by the exporter, so a builder's map is honoured).
pub(crate) const ENV_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// Largest span queue (`OtelConfig::queue_size`, `MLLOG_OTEL_QUEUE_SIZE`).
pub(crate) const MAX_QUEUE_SIZE: usize = 1 << 24;

/// What the span queue does when the exporter falls behind (see `docs/otel.md`).
///
/// Set it with [`OtelConfig::backpressure`] or `MLLOG_OTEL_BACKPRESSURE`. Either way the
/// training thread never waits for a collector; the choice is between losing fewer spans in a
/// burst ([`Backpressure::Wait`]) and never delaying the pipeline's worker
/// ([`Backpressure::Drop`]). Dropped spans are counted in the [`super::OtelReport`].
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::{Duration, Instant};
/// use opentelemetry_sdk::error::OTelSdkResult;
/// use opentelemetry_sdk::trace::{SpanData, SpanExporter};
/// use tracing_mllog::sink::{Backpressure, OtelConfig, OtelSink};
/// use tracing_mllog::{MllogLayer, Output};
/// use tracing_subscriber::prelude::*;
///
/// /// Hangs while `gate` is held, as an exporter whose collector stopped answering.
/// #[derive(Debug)]
/// struct Hung(Arc<Mutex<()>>);
///
/// impl SpanExporter for Hung {
///     fn export(&self, _: Vec<SpanData>) -> impl std::future::Future<Output = OTelSdkResult> + Send {
///         drop(self.0.lock().unwrap());
///         std::future::ready(Ok(()))
///     }
/// }
///
/// let gate = Arc::new(Mutex::new(()));
/// let config = OtelConfig::new().queue_size(1).batch_size(1).backpressure(Backpressure::Drop);
/// let sink = OtelSink::with_span_exporter(Hung(gate.clone()), config)?;
/// let otel = sink.handle();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(sink)
///     .build()?;
/// let held = gate.lock().unwrap();
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     for epoch in 1..=20u64 {
///         drop(tracing::info_span!("epoch", epoch_num = epoch).entered());
///     }
/// });
/// // Every span ends at once; none waits for the hung exporter.
/// let deadline = Instant::now() + Duration::from_secs(30);
/// while otel.report().spans_ended < 20 && Instant::now() < deadline {
///     std::thread::sleep(Duration::from_millis(5));
/// }
/// drop(held);
/// guard.shutdown();
/// let report = otel.report();
/// assert!(report.dropped_queue_full > 0, "{report:?}");
/// assert_eq!(report.spans_exported + report.dropped, 20, "{report:?}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backpressure {
    /// Wait up to this long for room in the queue, then drop the span (counted). The wait
    /// happens on the pipeline's worker thread, never on the training thread; while it waits
    /// the pipeline's own channel absorbs the burst. The default (30 s).
    Wait(Duration),
    /// Never wait: drop the span at once when the queue is full (counted).
    Drop,
}

impl Default for Backpressure {
    fn default() -> Self {
        Backpressure::Wait(Duration::from_secs(30))
    }
}

/// Settings of an [`super::OtelSink`]. Builder style: `OtelConfig::new().rank(3).world_size(8)`.
///
/// It decides what is exported (which `train_step`s are sampled, which other spans inside
/// `run`), how the span queue behaves when the collector falls behind ([`Backpressure`]),
/// the resource that describes the run (service name, rank, host, submission), and which
/// trace the run joins ([`OtelConfig::traceparent`]). [`super::OtelSink::from_env`] fills it
/// from the `MLLOG_OTEL_*` and `OTEL_*` variables instead; a malformed setting is an
/// [`super::OtelError`] naming it. See the [`super::OtelSink`] example for the whole path.
///
/// ```
/// use tracing_mllog::sink::OtelConfig;
/// use tracing_mllog::Benchmark;
///
/// let config = OtelConfig::new()
///     .benchmark(Benchmark::Llama2_70bLora)
///     .rank(3)
///     .world_size(8)
///     .train_step_every(100) // one traced step in a hundred
///     .traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None)?;
/// // The benchmark names the service, unless the process sets OTEL_SERVICE_NAME.
/// if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
///     assert_eq!(config.effective_service_name(), "llama2_70b_lora");
/// }
/// assert!(OtelConfig::new().traceparent("not-a-traceparent", None).is_err());
/// # Ok::<(), tracing_mllog::sink::OtelError>(())
/// ```
#[derive(Clone, Debug)]
pub struct OtelConfig {
    pub(crate) service_name: Option<String>,
    pub(crate) train_step_rate: f64,
    pub(crate) resource_attributes: Vec<(String, String)>,
    pub(crate) queue_size: usize,
    pub(crate) batch_size: usize,
    pub(crate) batch_delay: Duration,
    pub(crate) backpressure: Backpressure,
    pub(crate) max_events_per_span: u32,
    pub(crate) metric_interval: Option<Duration>,
    pub(crate) rank: Option<u32>,
    pub(crate) world_size: Option<u32>,
    pub(crate) host: Option<String>,
    pub(crate) submission: Submission,
    pub(crate) trace_id: Option<TraceId>,
    pub(crate) remote_parent: Option<SpanContext>,
    /// Where OTLP spans and metrics go (for error messages), when the sink built the exporters.
    pub(crate) endpoints: Endpoints,
    /// A setting that was ignored, reported as the first `last_error`.
    pub(crate) ignored: Option<String>,
    pub(crate) spans: SpanPatterns,
    /// Whether the layer is asked for the counted steps as records
    /// ([`OtelConfig::train_step_every`]).
    pub(crate) trace_steps: bool,
    /// `OTEL_SERVICE_NAME` of the environment the sink was configured from (`None`: not
    /// configured from one yet; the process environment is read when needed).
    pub(crate) env_service_name: Option<Option<String>>,
}

/// The OTLP endpoints of the exporters `from_env` built, redacted.
#[derive(Clone, Debug, Default)]
pub(crate) struct Endpoints {
    pub traces: Option<String>,
    pub metrics: Option<String>,
    /// The environment they were configured from (default: the process's, when needed).
    pub export_env: Option<super::errors::ExportEnv>,
}

/// Names of other spans to export (`MLLOG_OTEL_SPANS`): exact names or `prefix*`.
///
/// Set through [`OtelConfig::export_spans`]; a span inside `run` whose name matches is
/// exported like an interval.
///
/// ```
/// use tracing_mllog::sink::SpanPatterns;
///
/// let p = SpanPatterns::parse("data_load, checkpoint*");
/// assert!(p.matches("data_load") && p.matches("checkpoint_save"));
/// assert!(!p.matches("data") && !SpanPatterns::parse("").matches("x"));
/// ```
/// use tracing_mllog::Submission;
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpanPatterns(pub(crate) Vec<String>);

impl SpanPatterns {
    /// Parses `data_load,checkpoint*` (commas or spaces between patterns).
    pub fn parse(list: &str) -> SpanPatterns {
        SpanPatterns(
            list.split([',', ' '])
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    }

    /// Whether a span named `name` matches a pattern.
    pub fn matches(&self, name: &str) -> bool {
        self.0.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => p == name,
        })
    }

    /// Whether there is no pattern.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Parses a W3C `traceparent` (`00-<trace id>-<parent id>-<flags>`) and `tracestate`.
pub(crate) fn parse_traceparent(
    traceparent: &str,
    tracestate: Option<&str>,
) -> Result<SpanContext, String> {
    let parts: Vec<&str> = traceparent.trim().split('-').collect();
    let hex = |s: &str, len: usize| {
        (s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
        .then_some(())
    };
    let ok = match parts.as_slice() {
        [v, t, p, f, ..] => {
            hex(v, 2).is_some()
                && *v != "ff"
                && (*v != "00" || parts.len() == 4)
                && hex(t, 32).is_some()
                && hex(p, 16).is_some()
                && hex(f, 2).is_some()
        }
        _ => false,
    };
    if !ok {
        return Err("expected 00-<32 hex digits>-<16 hex digits>-<2 hex digits>, lowercase".into());
    }
    let trace = TraceId::from_hex(parts[1]).map_err(|e| e.to_string())?;
    let span = SpanId::from_hex(parts[2]).map_err(|e| e.to_string())?;
    if trace == TraceId::INVALID || span == SpanId::INVALID {
        return Err("the trace id and the parent id must not be all zeros".into());
    }
    let flags = u8::from_str_radix(parts[3], 16).map_err(|e| e.to_string())?;
    // An invalid tracestate is dropped, the traceparent still counts (W3C trace-context).
    let state = tracestate
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    Ok(SpanContext::new(
        trace,
        span,
        TraceFlags::new(flags & 1),
        true,
        state,
    ))
}

impl Default for OtelConfig {
    fn default() -> Self {
        OtelConfig {
            service_name: None,
            train_step_rate: 1.0,
            resource_attributes: Vec::new(),
            queue_size: 65_536,
            batch_size: 512,
            batch_delay: Duration::from_secs(1),
            backpressure: Backpressure::default(),
            max_events_per_span: 4096,
            metric_interval: None,
            rank: None,
            world_size: None,
            host: None,
            submission: Submission::default(),
            trace_id: None,
            remote_parent: None,
            endpoints: Endpoints::default(),
            ignored: None,
            spans: SpanPatterns::default(),
            trace_steps: false,
            env_service_name: None,
        }
    }
}

impl OtelConfig {
    /// The defaults: every `train_step` record exported, queue of 65 536 spans, batches of
    /// 512, [`Backpressure::Wait`] 30 s.
    pub fn new() -> OtelConfig {
        OtelConfig::default()
    }

    /// `service.name` of the resource. Default: `OTEL_SERVICE_NAME` if set, else the
    /// benchmark's name (e.g. `llama2_70b_lora`), else `mllog`.
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }

    /// Fraction of `train_step` intervals that become spans (0.0 = none, 1.0 = all, the
    /// default). Sampling is deterministic: with rate 0.25 every 4th step is kept. The step
    /// time metric sees every step regardless.
    pub fn train_step_sampling(mut self, rate: f64) -> Self {
        self.train_step_rate = if rate.is_nan() {
            0.0
        } else {
            rate.clamp(0.0, 1.0)
        };
        self
    }

    /// Exports one `train_step` in `n` as a span (the nth, the 2nth, ...; `n` = 0 or 1: all),
    /// and asks the layer for the steps as records when the sink starts (as
    /// [`crate::Builder::trace_steps`] does). The step-time histogram still sees every step.
    /// `MLLOG_OTEL_STEP_EVERY`.
    pub fn train_step_every(mut self, n: u64) -> Self {
        self.trace_steps = true;
        self.train_step_sampling(1.0 / n.max(1) as f64)
    }

    /// The parent of the sink's root spans (`init`, `run`, ...): a W3C `traceparent` and
    /// optional `tracestate`, as a launcher passes in `TRACEPARENT` / `TRACESTATE`. Every rank
    /// given the same value exports into one trace, under the launcher's span. A span of the
    /// application's own (tracing-opentelemetry) around an interval wins over it.
    pub fn traceparent(
        mut self,
        traceparent: &str,
        tracestate: Option<&str>,
    ) -> Result<Self, OtelError> {
        let cx =
            parse_traceparent(traceparent, tracestate).map_err(|reason| OtelError::Setting {
                setting: "OtelConfig::traceparent",
                reason: format!("{traceparent:?}: {reason}"),
            })?;
        self.remote_parent = Some(cx);
        Ok(self)
    }

    /// Other spans inside `run` to export, by name: exact names or `prefix*` (e.g.
    /// `["data_load", "checkpoint*"]`; `MLLOG_OTEL_SPANS`). Each costs the training thread
    /// two records (its start and end), like a traced `train_step`.
    pub fn export_spans<I, P>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<String>,
    {
        self.spans = SpanPatterns(patterns.into_iter().map(Into::into).collect());
        self
    }

    /// An extra resource attribute (string valued).
    pub fn resource_attribute(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.resource_attributes.push((key.into(), value.into()));
        self
    }

    /// Spans that may wait for the exporter (default 65 536; 1 to 16 777 216, values outside
    /// are clamped: the queue is allocated up front).
    pub fn queue_size(mut self, spans: usize) -> Self {
        self.queue_size = spans.clamp(1, MAX_QUEUE_SIZE);
        self
    }

    /// Spans per export request (default 512).
    pub fn batch_size(mut self, spans: usize) -> Self {
        self.batch_size = spans.max(1);
        self
    }

    /// Longest time a finished span waits before its (partial) batch is exported (default 1 s).
    pub fn batch_delay(mut self, delay: Duration) -> Self {
        self.batch_delay = delay;
        self
    }

    /// What to do when the queue is full (default [`Backpressure::Wait`] 30 s).
    pub fn backpressure(mut self, backpressure: Backpressure) -> Self {
        self.backpressure = backpressure;
        self
    }

    /// Events kept per span (default 4096); further events are counted in
    /// [`super::OtelReport::events_dropped`].
    pub fn max_events_per_span(mut self, events: u32) -> Self {
        self.max_events_per_span = events;
        self
    }

    /// How often metrics are exported (default: `OTEL_METRIC_EXPORT_INTERVAL` or 60 s; a final
    /// export always happens at shutdown).
    pub fn metric_interval(mut self, interval: Duration) -> Self {
        self.metric_interval = Some(interval);
        self
    }

    /// This process's rank (resource `mllog.rank`, metric attribute `mllog.rank`).
    pub fn rank(mut self, rank: u32) -> Self {
        self.rank = Some(rank);
        self
    }

    /// Number of ranks (resource `mllog.world_size`).
    pub fn world_size(mut self, size: u32) -> Self {
        self.world_size = Some(size);
        self
    }

    /// Host name (resource `host.name`; default: the machine's host name).
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// The benchmark (resource and metric attribute `mllog.benchmark`; default service name).
    pub fn benchmark(mut self, benchmark: Benchmark) -> Self {
        self.submission.benchmark = Some(benchmark);
        self
    }

    /// Submission metadata for the resource (`mllog.submission.*`) and metric attributes.
    pub fn submission(mut self, submission: Submission) -> Self {
        self.submission = submission;
        self
    }

    /// The trace id shared by every root span of this sink (providers built by the sink only).
    /// Give all ranks the same id (e.g. `MLLOG_OTEL_TRACE_ID`) to see them in one trace.
    /// Default: random per sink.
    pub fn trace_id(mut self, id: u128) -> Self {
        self.trace_id = Some(TraceId::from(id));
        self
    }

    /// The service name that will be used.
    pub fn effective_service_name(&self) -> String {
        if let Some(name) = &self.service_name {
            return name.clone();
        }
        let from_env = match &self.env_service_name {
            Some(name) => name.clone(),
            None => crate::env::Env::process()
                .string(ENV_SERVICE_NAME)
                .ok()
                .flatten()
                .map(str::to_owned),
        };
        if let Some(name) = from_env {
            return name;
        }
        match self.submission.benchmark {
            Some(b) => b.as_str().to_owned(),
            None => "mllog".to_owned(),
        }
    }

    /// The resource the sink gives the providers it builds; use it for your own providers
    /// too ([`super::OtelSink::with_providers`] does not change a provider's resource).
    /// Also reads `OTEL_RESOURCE_ATTRIBUTES` (the SDK's detectors); these settings win.
    pub fn resource(&self) -> Resource {
        let mut attrs: Vec<KeyValue> = Vec::new();
        let s = &self.submission;
        if let Some(b) = s.benchmark {
            attrs.push(KeyValue::new("mllog.benchmark", b.as_str()));
        }
        let text = [
            ("mllog.submission.org", s.org.as_deref()),
            ("mllog.submission.division", s.division.map(|d| d.as_str())),
            ("mllog.submission.status", s.status.map(|d| d.as_str())),
            ("mllog.submission.platform", s.platform.as_deref()),
            ("mllog.submission.entry", s.entry.as_deref()),
            ("mllog.submission.poc_name", s.poc_name.as_deref()),
            ("mllog.submission.poc_email", s.poc_email.as_deref()),
        ];
        for (k, v) in text {
            if let Some(v) = v {
                attrs.push(KeyValue::new(k, v.to_owned()));
            }
        }
        if let Some(r) = self.rank {
            attrs.push(KeyValue::new("mllog.rank", i64::from(r)));
        }
        if let Some(w) = self.world_size {
            attrs.push(KeyValue::new("mllog.world_size", i64::from(w)));
        }
        let host = self.host.clone().or_else(hostname);
        if let Some(h) = host {
            attrs.push(KeyValue::new("host.name", h));
        }
        for (k, v) in &self.resource_attributes {
            attrs.push(KeyValue::new(k.clone(), v.clone()));
        }
        Resource::builder()
            .with_service_name(self.effective_service_name())
            .with_attributes(attrs)
            .build()
    }
}

/// The machine's host name, if it has one.
pub(crate) fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its whole length, which is what we pass.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).into_owned();
    (!name.is_empty()).then_some(name)
}

/// Why an OpenTelemetry sink could not be built.
///
/// Returned by [`super::OtelSink`]'s constructors and [`OtelConfig::traceparent`]; through the
/// layer it is the source of [`crate::Error::Start`] (downcast it to match on it). Nothing
/// after start-up is an error: export failures are counted in the [`super::OtelReport`].
///
/// ```
/// use tracing_mllog::env::Env;
/// use tracing_mllog::sink::{OtelConfig, OtelError, OtelSink};
///
/// let err = OtelConfig::new().traceparent("00-not-a-trace", None).unwrap_err();
/// assert!(matches!(err, OtelError::Setting { setting: "OtelConfig::traceparent", .. }));
///
/// let env = Env::from_map([("MLLOG_OTEL", "1"), ("MLLOG_OTEL_QUEUE_SIZE", "lots")]);
/// let err = OtelSink::from_env(&env).err().expect("a bad queue size");
/// assert!(matches!(&err, OtelError::Env(e) if e.name() == "MLLOG_OTEL_QUEUE_SIZE"), "{err}");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    /// An environment variable has an unusable value.
    #[error(transparent)]
    Env(#[from] crate::env::EnvError),
    /// A setting made in code is unusable.
    #[error("{setting}: {reason}")]
    Setting {
        /// The method that made it.
        setting: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The OTLP exporter could not be built.
    #[error("building the OTLP exporter: {0}")]
    Exporter(String),
    /// A thread or the Tokio runtime for gRPC could not be started.
    #[error("starting the OpenTelemetry worker: {0}")]
    Runtime(#[from] std::io::Error),
}
