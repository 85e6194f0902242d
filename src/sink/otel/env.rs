//! [`OtelSink::from_env`]: OTLP exporters from the standard `OTEL_EXPORTER_OTLP_*` variables.

use std::time::Duration;

#[cfg(any(feature = "otel-grpc", feature = "otel-http"))]
use opentelemetry_otlp::{MetricExporter, SpanExporter};
#[cfg(feature = "otel-http")]
use opentelemetry_otlp::{Protocol, WithExportConfig};

use super::config::{Backpressure, OtelConfig, OtelError};
use super::OtelSink;
use crate::rank::RANK_VARIABLES;
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

const WORLD_SIZE_VARIABLES: [&str; 4] = [
    "WORLD_SIZE",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Transport {
    Grpc,
    Http,
}

impl Transport {
    /// The error for a transport this build does not have.
    #[allow(dead_code)]
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

fn env_err(name: &str, value: &str, reason: impl Into<String>) -> OtelError {
    OtelError::Env {
        name: name.to_owned(),
        value: value.to_owned(),
        reason: reason.into(),
    }
}

fn transport(
    get: &dyn Fn(&str) -> Option<String>,
    signal_var: &str,
) -> Result<Transport, OtelError> {
    let (name, raw) = match get(signal_var) {
        Some(v) => (signal_var, v),
        None => match get("OTEL_EXPORTER_OTLP_PROTOCOL") {
            Some(v) => ("OTEL_EXPORTER_OTLP_PROTOCOL", v),
            None => return Ok(Transport::Http),
        },
    };
    match raw.trim() {
        "grpc" => Ok(Transport::Grpc),
        "http/protobuf" | "" => Ok(Transport::Http),
        other => Err(env_err(
            name,
            other,
            "supported: grpc, http/protobuf (http/json is not built in)",
        )),
    }
}

#[cfg(any(feature = "otel-grpc", feature = "otel-http"))]
/// The endpoint an OTLP exporter sends `signal` to, as the exporter derives it from the
/// variables (for messages; credentials in it redacted).
fn endpoint(
    get: &dyn Fn(&str) -> Option<String>,
    transport: Transport,
    signal: &str,
    path: &str,
) -> String {
    let signal_var = format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT");
    let url = match (get(&signal_var), get("OTEL_EXPORTER_OTLP_ENDPOINT")) {
        (Some(u), _) if !u.trim().is_empty() => u.trim().to_owned(),
        (_, Some(base)) if !base.trim().is_empty() => match transport {
            Transport::Grpc => base.trim().to_owned(),
            Transport::Http => format!("{}{path}", base.trim().trim_end_matches('/')),
        },
        _ => match transport {
            Transport::Grpc => "http://localhost:4317".to_owned(),
            Transport::Http => format!("http://localhost:4318{path}"),
        },
    };
    let mut secrets = crate::sink::redact::env_secrets();
    crate::sink::redact::normalize(&mut secrets);
    crate::sink::redact::redact(&url, &secrets)
}

/// Applies the `MLLOG_OTEL_*`, rank, world size and submission variables to `config`
/// (settings made in code win only where no variable is set).
pub(crate) fn overlay(
    mut config: OtelConfig,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<OtelConfig, OtelError> {
    if let Some(raw) = get(ENV_OTEL_TRAIN_STEP_RATE) {
        let rate: f64 = raw
            .trim()
            .parse()
            .ok()
            .filter(|r: &f64| (0.0..=1.0).contains(r))
            .ok_or_else(|| env_err(ENV_OTEL_TRAIN_STEP_RATE, &raw, "expected a number in 0..=1"))?;
        config = config.train_step_sampling(rate);
    }
    if let Some(raw) = get(ENV_OTEL_STEP_EVERY) {
        let n: u64 =
            raw.trim().parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                env_err(ENV_OTEL_STEP_EVERY, &raw, "expected a whole number >= 1")
            })?;
        config = config.train_step_every(n);
    }
    if let Some(raw) = get(ENV_OTEL_SPANS) {
        config.spans = super::config::SpanPatterns::parse(&raw);
    }
    if let Some(raw) = get(ENV_TRACEPARENT) {
        // An unusable traceparent starts a new trace, as W3C trace-context says; the report
        // says why.
        let state = get(ENV_TRACESTATE);
        match super::config::parse_traceparent(&raw, state.as_deref()) {
            Ok(cx) => config.remote_parent = Some(cx),
            Err(reason) => {
                config.ignored = Some(format!("{ENV_TRACEPARENT}={raw:?} ignored: {reason}"))
            }
        }
    }
    if let Some(raw) = get(ENV_OTEL_QUEUE_SIZE) {
        let n: usize = raw
            .trim()
            .parse()
            .ok()
            .filter(|n| (1..=MAX_QUEUE_SIZE).contains(n))
            .ok_or_else(|| {
                env_err(
                    ENV_OTEL_QUEUE_SIZE,
                    &raw,
                    format!("expected a whole number of spans in 1..={MAX_QUEUE_SIZE}"),
                )
            })?;
        config = config.queue_size(n);
    }
    if let Some(raw) = get(ENV_OTEL_BACKPRESSURE) {
        let v = raw.trim().to_ascii_lowercase();
        let bp = if v == "drop" {
            Backpressure::Drop
        } else if v == "wait" {
            Backpressure::default()
        } else if let Some(ms) = v.strip_prefix("wait:") {
            let ms: u64 = ms
                .parse()
                .ok()
                .filter(|ms| *ms <= MAX_BACKPRESSURE_WAIT_MS)
                .ok_or_else(|| {
                    env_err(
                        ENV_OTEL_BACKPRESSURE,
                        &raw,
                        format!("expected wait:<milliseconds> with 0..={MAX_BACKPRESSURE_WAIT_MS}"),
                    )
                })?;
            Backpressure::Wait(Duration::from_millis(ms))
        } else {
            return Err(env_err(
                ENV_OTEL_BACKPRESSURE,
                &raw,
                "expected wait, wait:<ms> or drop",
            ));
        };
        config = config.backpressure(bp);
    }
    if let Some(raw) = get(ENV_OTEL_TRACE_ID) {
        let id = u128::from_str_radix(raw.trim(), 16)
            .ok()
            .filter(|id| *id != 0 && raw.trim().len() == 32)
            .ok_or_else(|| {
                env_err(
                    ENV_OTEL_TRACE_ID,
                    &raw,
                    "expected 32 hex digits, not all zero",
                )
            })?;
        config = config.trace_id(id);
    }
    if config.rank.is_none() {
        for name in RANK_VARIABLES {
            if let Some(raw) = get(name) {
                let r: u32 = raw
                    .trim()
                    .parse()
                    .map_err(|_| env_err(name, &raw, "expected a non-negative integer"))?;
                config = config.rank(r);
                break;
            }
        }
    }
    if config.world_size.is_none() {
        for name in WORLD_SIZE_VARIABLES {
            if let Some(raw) = get(name) {
                let n: u32 = raw
                    .trim()
                    .parse()
                    .map_err(|_| env_err(name, &raw, "expected a positive integer"))?;
                config = config.world_size(n);
                break;
            }
        }
    }
    config
        .submission
        .overlay_env(get)
        .map_err(|e| env_err("MLLOG_SUBMISSION_*", "", e.to_string()))?;
    Ok(config)
}

impl OtelSink {
    /// `None` unless `MLLOG_OTEL=1`; otherwise an OTLP sink configured from the environment:
    /// [`OtelSink::from_env_with`] with the default [`OtelConfig`].
    pub fn from_env() -> Result<Option<OtelSink>, OtelError> {
        OtelSink::from_env_with(OtelConfig::new())
    }

    /// `None` unless `MLLOG_OTEL=1` (also `true`/`yes`/`on`). Otherwise builds OTLP span and
    /// metric exporters the way the OpenTelemetry specification says: protocol from
    /// `OTEL_EXPORTER_OTLP_{TRACES,METRICS}_PROTOCOL` or `OTEL_EXPORTER_OTLP_PROTOCOL`
    /// (`grpc` or `http/protobuf`, the default), endpoint, headers, timeout and compression
    /// from the other `OTEL_EXPORTER_OTLP_*` variables (read by `opentelemetry-otlp`).
    /// `OTEL_TRACES_EXPORTER=none` / `OTEL_METRICS_EXPORTER=none` leave that signal out
    /// (no traces: `None`). gRPC runs on a small Tokio runtime the sink owns. `config` is
    /// overlaid with `MLLOG_OTEL_*`, rank (`RANK`, ...), world size (`WORLD_SIZE`, ...) and
    /// submission (`MLLOG_SUBMISSION_*`) variables.
    pub fn from_env_with(config: OtelConfig) -> Result<Option<OtelSink>, OtelError> {
        let get = |name: &str| std::env::var(name).ok();
        let on = match get(ENV_OTEL) {
            None => false,
            Some(raw) => match raw.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" | "" => false,
                _ => {
                    return Err(env_err(
                        ENV_OTEL,
                        &raw,
                        "expected 1/0, true/false, yes/no or on/off",
                    ))
                }
            },
        };
        if !on || get("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none") {
            return Ok(None);
        }
        let config = overlay(config, &get)?;
        // With the object-store feature, reqwest is built without a default TLS provider
        // (`rustls-no-provider`); the HTTP exporter needs one. Keep one the application set.
        #[cfg(feature = "object-store")]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let traces = transport(&get, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")?;
        let metrics = if get("OTEL_METRICS_EXPORTER").is_some_and(|v| v.trim() == "none") {
            None
        } else {
            Some(transport(&get, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")?)
        };
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
            let mut secrets = crate::sink::redact::env_secrets();
            crate::sink::redact::normalize(&mut secrets);
            OtelError::Exporter(crate::sink::redact::redact(&e.to_string(), &secrets))
        };
        #[cfg(not(any(feature = "otel-grpc", feature = "otel-http")))]
        {
            drop((runtime, metrics, config));
            Err(traces.missing())
        }
        #[cfg(any(feature = "otel-grpc", feature = "otel-http"))]
        {
            let span_exporter = match traces {
                #[cfg(feature = "otel-grpc")]
                Transport::Grpc => {
                    let rt = runtime.as_ref().expect("runtime for gRPC");
                    rt.block_on(async { SpanExporter::builder().with_tonic().build() })
                        .map_err(exp_err)?
                }
                #[cfg(feature = "otel-http")]
                Transport::Http => SpanExporter::builder()
                    .with_http()
                    .with_protocol(Protocol::HttpBinary)
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
                    Some(
                        rt.block_on(async { MetricExporter::builder().with_tonic().build() })
                            .map_err(exp_err)?,
                    )
                }
                #[cfg(feature = "otel-http")]
                Some(Transport::Http) => Some(
                    MetricExporter::builder()
                        .with_http()
                        .with_protocol(Protocol::HttpBinary)
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
                traces: Some(endpoint(&get, traces, "TRACES", "/v1/traces")),
                metrics: metrics.map(|m| endpoint(&get, m, "METRICS", "/v1/metrics")),
            };
            OtelSink::build(span_exporter, metric_exporter, config, runtime, grpc_spans).map(Some)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlay_with(pairs: &[(&str, &str)]) -> Result<OtelConfig, OtelError> {
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        overlay(OtelConfig::new(), &get)
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
