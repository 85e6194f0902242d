//! [`OtelSink::from_env`]: OTLP exporters from the standard `OTEL_EXPORTER_OTLP_*` variables.

use std::time::Duration;

#[cfg(any(feature = "otel-grpc", feature = "otel-http"))]
use opentelemetry_otlp::{MetricExporter, SpanExporter};
#[cfg(feature = "otel-http")]
use opentelemetry_otlp::{Protocol, WithExportConfig};

use super::config::{Backpressure, OtelConfig, OtelError, ENV_SERVICE_NAME};
use super::OtelSink;
use crate::env::Env;
use crate::submission::OverlayEnv as _;

/// `MLLOG_OTEL=1` turns [`OtelSink::from_env`] on.
pub const ENV_OTEL: &str = "MLLOG_OTEL";
/// Fraction of `train_step` intervals exported as spans (0..=1).
pub const ENV_OTEL_TRAIN_STEP_RATE: &str = "MLLOG_OTEL_TRAIN_STEP_RATE";
/// Span queue size.
pub const ENV_OTEL_QUEUE_SIZE: &str = "MLLOG_OTEL_QUEUE_SIZE";
/// `wait` (default, 30 s), `wait:<ms>` or `drop`.
pub const ENV_OTEL_BACKPRESSURE: &str = "MLLOG_OTEL_BACKPRESSURE";
/// 32 hex digits: the trace id of every root span (give all ranks the same one).
pub const ENV_OTEL_TRACE_ID: &str = "MLLOG_OTEL_TRACE_ID";
/// Export one `train_step` in N as a span.
pub const ENV_OTEL_STEP_EVERY: &str = "MLLOG_OTEL_STEP_EVERY";
/// Other spans inside `run` to export, by name (`data_load,checkpoint*`).
pub const ENV_OTEL_SPANS: &str = "MLLOG_OTEL_SPANS";
/// W3C trace-context parent of the root spans (set by a launcher).
pub const ENV_TRACEPARENT: &str = "TRACEPARENT";
/// W3C trace state that goes with [`ENV_TRACEPARENT`].
pub const ENV_TRACESTATE: &str = "TRACESTATE";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Transport {
    Grpc,
    Http,
}

impl Transport {
    /// The error for a transport this build does not have.
    #[cfg_attr(all(feature = "otel-grpc", feature = "otel-http"), allow(dead_code))]
    fn missing(self) -> OtelError {
        let (protocol, feature) = match self {
            Transport::Grpc => ("grpc", "otel-grpc"),
            Transport::Http => ("http/protobuf", "otel-http"),
        };
        OtelError::Exporter(format!(
            "OTLP over {protocol} needs the `{feature}` feature of tracing-mllog"
        ))
    }
}

/// Largest `MLLOG_OTEL_QUEUE_SIZE`: the queue is allocated up front.
const MAX_QUEUE_SIZE: usize = super::config::MAX_QUEUE_SIZE;
/// Longest `MLLOG_OTEL_BACKPRESSURE=wait:<ms>`: one hour.
const MAX_BACKPRESSURE_WAIT_MS: u64 = 3_600_000;

fn transport(env: &Env, signal_var: &str) -> Result<Transport, OtelError> {
    let name = match env.string(signal_var)? {
        Some(_) => signal_var,
        None => "OTEL_EXPORTER_OTLP_PROTOCOL",
    };
    Ok(env
        .parse(name, |v| match v {
            "grpc" => Ok(Transport::Grpc),
            "http/protobuf" => Ok(Transport::Http),
            _ => Err("supported: grpc, http/protobuf (http/json is not built in)".to_owned()),
        })?
        .unwrap_or(Transport::Http))
}

/// What the exporter of one signal is given explicitly, read from `env`: given in code, it
/// wins over the process environment the exporter would otherwise read, so a builder's map
/// is honoured.
#[cfg(any(feature = "otel-grpc", feature = "otel-http"))]
struct ExporterSettings {
    /// The endpoint, as the exporter would derive it from the variables.
    endpoint: String,
    timeout: Option<Duration>,
    /// Headers of a map that is not the process environment (the exporter reads the
    /// process's own).
    headers: Option<std::collections::HashMap<String, String>>,
}

#[cfg(any(feature = "otel-grpc", feature = "otel-http"))]
impl ExporterSettings {
    fn read(
        env: &Env,
        transport: Transport,
        signal: &str,
        path: &str,
    ) -> Result<ExporterSettings, OtelError> {
        let signal_var = format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT");
        let endpoint = match (
            env.string(&signal_var)?,
            env.string("OTEL_EXPORTER_OTLP_ENDPOINT")?,
        ) {
            (Some(u), _) => u.to_owned(),
            (_, Some(base)) => match transport {
                Transport::Grpc => base.to_owned(),
                Transport::Http => format!("{}{path}", base.trim_end_matches('/')),
            },
            _ => match transport {
                Transport::Grpc => "http://localhost:4317".to_owned(),
                Transport::Http => format!("http://localhost:4318{path}"),
            },
        };
        let timeout_var = format!("OTEL_EXPORTER_OTLP_{signal}_TIMEOUT");
        let timeout_var = match env.string(&timeout_var)? {
            Some(_) => timeout_var.as_str(),
            None => "OTEL_EXPORTER_OTLP_TIMEOUT",
        };
        let timeout = env
            .number(timeout_var, 0, MAX_EXPORT_TIMEOUT_MS, "whole milliseconds")?
            .map(Duration::from_millis);
        let headers = if env.is_process() {
            None
        } else {
            let var = format!("OTEL_EXPORTER_OTLP_{signal}_HEADERS");
            let list = match env.raw(&var)? {
                Some(v) => Some(v),
                None => env.raw("OTEL_EXPORTER_OTLP_HEADERS")?,
            };
            Some(
                list.unwrap_or_default()
                    .split(',')
                    .filter_map(|pair| {
                        let (k, v) = pair.split_once('=')?;
                        Some((k.trim().to_owned(), v.trim().to_owned()))
                    })
                    .filter(|(k, _)| !k.is_empty())
                    .collect(),
            )
        };
        Ok(ExporterSettings {
            endpoint,
            timeout,
            headers,
        })
    }

    /// The endpoint for messages: credentials redacted.
    fn shown(&self, env: &Env) -> String {
        env.redact(&self.endpoint)
    }
}

/// Longest `OTEL_EXPORTER_OTLP_*TIMEOUT`: an hour.
#[cfg(any(feature = "otel-grpc", feature = "otel-http"))]
const MAX_EXPORT_TIMEOUT_MS: u64 = 3_600_000;

/// Applies the `MLLOG_OTEL_*`, rank, world size and submission variables to `config`
/// (settings made in code win only where no variable is set).
pub(crate) fn overlay(mut config: OtelConfig, env: &Env) -> Result<OtelConfig, OtelError> {
    if let Some(rate) = env.number(ENV_OTEL_TRAIN_STEP_RATE, 0.0, 1.0, "a fraction")? {
        config = config.train_step_sampling(rate);
    }
    if let Some(n) = env.number(ENV_OTEL_STEP_EVERY, 1, u64::MAX, "a whole number")? {
        config = config.train_step_every(n);
    }
    if let Some(raw) = env.string(ENV_OTEL_SPANS)? {
        config.spans = super::config::SpanPatterns::parse(raw);
    }
    if let Some(raw) = env.string(ENV_TRACEPARENT)? {
        // An unusable traceparent starts a new trace, as W3C trace-context says; the report
        // says why.
        let state = env.string(ENV_TRACESTATE)?;
        match super::config::parse_traceparent(raw, state) {
            Ok(cx) => config.remote_parent = Some(cx),
            Err(reason) => {
                config.ignored = Some(format!("{ENV_TRACEPARENT}={raw:?} ignored: {reason}"))
            }
        }
    }
    if let Some(n) = env.number(
        ENV_OTEL_QUEUE_SIZE,
        1,
        MAX_QUEUE_SIZE,
        "a whole number of spans",
    )? {
        config = config.queue_size(n);
    }
    if let Some(bp) = env.parse(ENV_OTEL_BACKPRESSURE, |raw| {
        let v = raw.to_ascii_lowercase();
        if v == "drop" {
            Ok(Backpressure::Drop)
        } else if v == "wait" {
            Ok(Backpressure::default())
        } else if let Some(ms) = v.strip_prefix("wait:") {
            ms.parse()
                .ok()
                .filter(|ms| *ms <= MAX_BACKPRESSURE_WAIT_MS)
                .map(|ms| Backpressure::Wait(Duration::from_millis(ms)))
                .ok_or_else(|| {
                    format!("expected wait:<milliseconds> with 0..={MAX_BACKPRESSURE_WAIT_MS}")
                })
        } else {
            Err("expected wait, wait:<ms> or drop".to_owned())
        }
    })? {
        config = config.backpressure(bp);
    }
    if let Some(id) = env.parse(ENV_OTEL_TRACE_ID, |raw| {
        u128::from_str_radix(raw, 16)
            .ok()
            .filter(|id| *id != 0 && raw.len() == 32)
            .ok_or_else(|| "expected 32 hex digits, not all zero".to_owned())
    })? {
        config = config.trace_id(id);
    }
    if config.rank.is_none()
        && let Some((r, _)) = env.rank()?
    {
        config = config.rank(r);
    }
    if config.world_size.is_none()
        && let Some((n, _)) = env.world_size()?
    {
        config = config.world_size(n);
    }
    if config.service_name.is_none() {
        config.env_service_name = Some(env.string(ENV_SERVICE_NAME)?.map(str::to_owned));
    }
    for name in crate::env::SUBMISSION_VARIABLES {
        env.raw(name)?;
    }
    config
        .submission
        .overlay_env(&|name| env.raw(name).ok().flatten().map(str::to_owned))
        .map_err(|e| match e {
            crate::Error::Env {
                name,
                value,
                reason,
            } => OtelError::Env(crate::env::EnvError::Invalid {
                name,
                value,
                reason,
            }),
            other => OtelError::Setting {
                setting: "submission",
                reason: other.to_string(),
            },
        })?;
    Ok(config)
}

impl OtelSink {
    /// `None` unless `MLLOG_OTEL=1` in `env` (`Env::process()` for the process environment);
    /// otherwise an OTLP sink configured from it: [`OtelSink::from_env_with`] with the
    /// default [`OtelConfig`].
    pub fn from_env(env: &Env) -> Result<Option<OtelSink>, OtelError> {
        OtelSink::from_env_with(env, OtelConfig::new())
    }

    /// `None` unless `MLLOG_OTEL=1` (also `true`/`yes`/`on`). Otherwise builds OTLP span and
    /// metric exporters the way the OpenTelemetry specification says: protocol from
    /// `OTEL_EXPORTER_OTLP_{TRACES,METRICS}_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL`
    /// (`grpc` or `http/protobuf`, the default), endpoint and timeout from
    /// `OTEL_EXPORTER_OTLP_[{TRACES,METRICS}_]{ENDPOINT,TIMEOUT}`, headers from
    /// `OTEL_EXPORTER_OTLP_[{TRACES,METRICS}_]HEADERS`, all read from `env` and given to the
    /// exporters explicitly. `OTEL_TRACES_EXPORTER=none` / `OTEL_METRICS_EXPORTER=none` leave
    /// that signal out (no traces: `None`). gRPC runs on a small Tokio runtime the sink owns.
    /// `config` is overlaid with `MLLOG_OTEL_*`, rank (`RANK`, ...), world size
    /// (`WORLD_SIZE`, ...), `OTEL_SERVICE_NAME` and submission (`MLLOG_SUBMISSION_*`)
    /// variables. (The exporter crate itself still adds the process's
    /// `OTEL_EXPORTER_OTLP_*HEADERS` and `*COMPRESSION`, and the SDK its
    /// `OTEL_RESOURCE_ATTRIBUTES`.)
    pub fn from_env_with(env: &Env, config: OtelConfig) -> Result<Option<OtelSink>, OtelError> {
        let on = env.flag(ENV_OTEL)?.unwrap_or(false);
        let none = |var: &str| -> Result<bool, OtelError> { Ok(env.string(var)? == Some("none")) };
        if !on || none("OTEL_TRACES_EXPORTER")? {
            return Ok(None);
        }
        let config = overlay(config, env)?;
        // With the object-store feature, reqwest is built without a default TLS provider
        // (`rustls-no-provider`); the HTTP exporter needs one. Keep one the application set.
        #[cfg(feature = "object-store")]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let traces = transport(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")?;
        let metrics = if none("OTEL_METRICS_EXPORTER")? {
            None
        } else {
            Some(transport(env, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")?)
        };
        #[cfg(any(feature = "otel-grpc", feature = "otel-http"))]
        let trace_settings = ExporterSettings::read(env, traces, "TRACES", "/v1/traces")?;
        #[cfg(any(feature = "otel-grpc", feature = "otel-http"))]
        let metric_settings = match metrics {
            Some(m) => Some(ExporterSettings::read(env, m, "METRICS", "/v1/metrics")?),
            None => None,
        };
        let export_env = super::errors::ExportEnv::from_env(env);
        let runtime = if traces == Transport::Grpc || metrics == Some(Transport::Grpc) {
            Some(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("mllog-otel-rt")
                    .enable_all()
                    .build()?,
            )
        } else {
            None
        };
        // Endpoint URLs and headers (`OTEL_EXPORTER_OTLP_HEADERS=authorization=...`) may carry
        // credentials; the exporter's messages can quote them.
        #[cfg(any(feature = "otel-grpc", feature = "otel-http"))]
        let exp_err = |e: opentelemetry_otlp::ExporterBuildError| {
            OtelError::Exporter(crate::redact::redact(&e.to_string(), &export_env.secrets))
        };
        #[cfg(not(any(feature = "otel-grpc", feature = "otel-http")))]
        {
            drop((runtime, metrics, config, export_env));
            Err(traces.missing())
        }
        #[cfg(any(feature = "otel-grpc", feature = "otel-http"))]
        {
            let span_exporter = match traces {
                #[cfg(feature = "otel-grpc")]
                Transport::Grpc => {
                    let rt = runtime.as_ref().expect("runtime for gRPC");
                    let s = &trace_settings;
                    rt.block_on(async { grpc(SpanExporter::builder().with_tonic(), s).build() })
                        .map_err(exp_err)?
                }
                #[cfg(feature = "otel-http")]
                Transport::Http => http(SpanExporter::builder().with_http(), &trace_settings)
                    .build()
                    .map_err(exp_err)?,
                #[allow(unreachable_patterns)]
                other => return Err(other.missing()),
            };
            let metric_exporter = match metrics {
                None => None,
                #[cfg(feature = "otel-grpc")]
                Some(Transport::Grpc) => {
                    let rt = runtime.as_ref().expect("runtime for gRPC");
                    let s = metric_settings.as_ref().expect("settings for metrics");
                    Some(
                        rt.block_on(async {
                            grpc(MetricExporter::builder().with_tonic(), s).build()
                        })
                        .map_err(exp_err)?,
                    )
                }
                #[cfg(feature = "otel-http")]
                Some(Transport::Http) => Some(
                    http(
                        MetricExporter::builder().with_http(),
                        metric_settings.as_ref().expect("settings for metrics"),
                    )
                    .build()
                    .map_err(exp_err)?,
                ),
                #[allow(unreachable_patterns)]
                Some(other) => return Err(other.missing()),
            };
            // The span export thread drives gRPC exports on the runtime; HTTP uses the blocking
            // client on a plain thread (it must not run inside a Tokio runtime). The runtime
            // lives as long as the sink either way (gRPC metrics need it too).
            let grpc_spans = traces == Transport::Grpc;
            let mut config = config;
            config.endpoints = super::config::Endpoints {
                traces: Some(trace_settings.shown(env)),
                metrics: metric_settings.as_ref().map(|s| s.shown(env)),
                export_env: Some(export_env),
            };
            OtelSink::build(span_exporter, metric_exporter, config, runtime, grpc_spans).map(Some)
        }
    }
}

/// An HTTP exporter builder given what `env` says.
#[cfg(feature = "otel-http")]
fn http<B>(builder: B, s: &ExporterSettings) -> B
where
    B: WithExportConfig + opentelemetry_otlp::WithHttpConfig,
{
    let mut b = builder
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(s.endpoint.clone());
    if let Some(t) = s.timeout {
        b = b.with_timeout(t);
    }
    if let Some(h) = &s.headers {
        b = b.with_headers(h.clone());
    }
    b
}

/// A gRPC exporter builder given what `env` says.
#[cfg(feature = "otel-grpc")]
fn grpc<B>(builder: B, s: &ExporterSettings) -> B
where
    B: opentelemetry_otlp::WithExportConfig + opentelemetry_otlp::WithTonicConfig,
{
    let mut b = builder.with_endpoint(s.endpoint.clone());
    if let Some(t) = s.timeout {
        b = b.with_timeout(t);
    }
    if let Some(h) = &s.headers {
        let mut map = opentelemetry_otlp::tonic_types::metadata::MetadataMap::new();
        for (k, v) in h {
            if let Ok(v) = v.parse() {
                // `MetadataMap` takes static keys (or tonic's own key type, which is not
                // re-exported): a few short names, leaked once per sink.
                let key: &'static str = Box::leak(k.to_ascii_lowercase().into_boxed_str());
                map.insert(key, v);
            }
        }
        b = b.with_metadata(map);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlay_with(pairs: &[(&str, &str)]) -> Result<OtelConfig, OtelError> {
        overlay(OtelConfig::new(), &Env::from_map(pairs.iter().copied()))
    }

    #[test]
    fn sizes_and_waits_are_range_checked() {
        for (var, value, range) in [
            (ENV_OTEL_QUEUE_SIZE, "1000000000000000000", "1..=16777216"),
            (ENV_OTEL_QUEUE_SIZE, "0", "1..=16777216"),
            (
                ENV_OTEL_BACKPRESSURE,
                "wait:18446744073709551615",
                "0..=3600000",
            ),
        ] {
            let err = overlay_with(&[(var, value)])
                .map(|_| ())
                .expect_err(value)
                .to_string();
            assert!(err.contains(var) && err.contains(range), "{err}");
        }
        let c = overlay_with(&[
            (ENV_OTEL_QUEUE_SIZE, "16777216"),
            (ENV_OTEL_BACKPRESSURE, "wait:3600000"),
        ])
        .unwrap();
        assert_eq!(c.queue_size, 1 << 24);
        assert_eq!(
            c.backpressure,
            Backpressure::Wait(Duration::from_secs(3600))
        );
        // In code, the queue size is clamped (it is allocated up front).
        assert_eq!(OtelConfig::new().queue_size(usize::MAX).queue_size, 1 << 24);
    }
}
