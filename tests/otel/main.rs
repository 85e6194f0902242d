//! The OpenTelemetry sink (feature `otel`).
//!
//! - In-process: the sink is driven with a realistic record stream (what the layer's worker
//!   hands it) into collecting span and metric exporters, and the structure, timestamps,
//!   events, attributes, resource and metric values are asserted field by field.
//! - Bursts of 1,000,000 `train_step` intervals: lossless with backpressure, and with the
//!   dropping policy the report's `dropped` equals exactly what did not reach the exporter.
//! - A real collector: rotel (`scripts/deps/otel.sh` installs it; `MLLOG_ROTEL_BIN`) on free
//!   loopback ports, over gRPC and HTTP/protobuf, fed by child processes of this test binary
//!   that build the layer with `MLLOG_OTEL=1` in the environment, including four ranks at once.
#![cfg(all(feature = "otel-grpc", feature = "otel-http"))]

mod bursts;
mod collector;
#[path = "../common/mod.rs"]
mod common;
mod structure;
mod trace_context;

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::SpanId;
use opentelemetry::{KeyValue, Value as OValue};
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use tracing_mllog::record::{
    EventType, IntervalIds, Metadata, Record, Timestamp, TracedRecord, Value,
};
use tracing_mllog::sink::{Backpressure, OtelConfig, OtelReport, OtelSink, Sink};
use tracing_mllog::{Benchmark, Output, Ranks, Submission};

// ---------------------------------------------------------------------------------------------
// Collecting exporters

#[derive(Clone, Debug, Default)]
struct Collect {
    spans: Arc<Mutex<Vec<SpanData>>>,
    resource: Arc<Mutex<Option<Resource>>>,
    count: Arc<AtomicU64>,
    keep: bool,
    delay: Duration,
    fail: bool,
}

impl Collect {
    fn keeping() -> Collect {
        Collect {
            keep: true,
            ..Collect::default()
        }
    }
    fn spans(&self) -> Vec<SpanData> {
        self.spans.lock().unwrap().clone()
    }
    fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }
}

impl SpanExporter for Collect {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        let this = self.clone();
        async move {
            if !this.delay.is_zero() {
                std::thread::sleep(this.delay);
            }
            if this.fail {
                return Err(OTelSdkError::InternalFailure("collector says no".into()));
            }
            this.count.fetch_add(batch.len() as u64, Ordering::SeqCst);
            if this.keep {
                this.spans.lock().unwrap().extend(batch);
            }
            Ok(())
        }
    }
    fn set_resource(&mut self, resource: &Resource) {
        *self.resource.lock().unwrap() = Some(resource.clone());
    }
}

/// One data point as the last export saw it.
#[derive(Clone, Debug)]
struct Point {
    name: String,
    value: f64,
    count: u64,
    attrs: HashMap<String, String>,
}

#[derive(Clone, Default)]
struct MetricCollect {
    last: Arc<Mutex<Vec<Point>>>,
    resource: Arc<Mutex<Option<Resource>>>,
}

fn attr_map<'a>(attrs: impl Iterator<Item = &'a KeyValue>) -> HashMap<String, String> {
    attrs
        .map(|kv| (kv.key.to_string(), kv.value.to_string()))
        .collect()
}

impl PushMetricExporter for MetricCollect {
    fn export(&self, metrics: &ResourceMetrics) -> impl Future<Output = OTelSdkResult> + Send {
        let mut points = Vec::new();
        for sm in metrics.scope_metrics() {
            for m in sm.metrics() {
                let name = m.name().to_owned();
                if let AggregatedMetrics::F64(data) = m.data() {
                    match data {
                        MetricData::Gauge(g) => {
                            for dp in g.data_points() {
                                points.push(Point {
                                    name: name.clone(),
                                    value: dp.value(),
                                    count: 1,
                                    attrs: attr_map(dp.attributes()),
                                });
                            }
                        }
                        MetricData::Histogram(h) => {
                            for dp in h.data_points() {
                                points.push(Point {
                                    name: name.clone(),
                                    value: dp.sum(),
                                    count: dp.count(),
                                    attrs: attr_map(dp.attributes()),
                                });
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        *self.last.lock().unwrap() = points;
        *self.resource.lock().unwrap() = Some(metrics.resource().clone());
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

// ---------------------------------------------------------------------------------------------
// Records

/// 2023-11-14T22:13:20Z plus `us` microseconds and a few odd nanoseconds, so that times are
/// finer than a millisecond.
fn ts(us: i64) -> Timestamp {
    Timestamp {
        wall_ns: 1_700_000_000_000_000_000 + us * 1_000 + 7,
        mono_ns: 0,
    }
}

fn system_time(t: Timestamp) -> SystemTime {
    UNIX_EPOCH + Duration::from_nanos(t.wall_ns as u64)
}

#[allow(clippy::too_many_arguments)]
fn rec(
    event_type: EventType,
    key: &str,
    us: i64,
    interval: Option<(u64, Option<u64>)>,
    scope: Option<u64>,
    value: Value,
    fields: &[(&str, Value)],
    trace_only: bool,
) -> TracedRecord {
    let mut metadata = Metadata::at("train.py", 42);
    for (k, v) in fields {
        metadata.set(k.to_string(), v.clone());
    }
    TracedRecord {
        record: Record {
            namespace: Cow::Borrowed(""),
            time: ts(us),
            event_type,
            key: Cow::Owned(key.to_owned()),
            value,
            metadata,
            loose: None,
        },
        interval: interval.map(|(id, parent)| IntervalIds { id, parent }),
        scope,
        trace_only,
        tid: 4242,
        otel: None,
    }
}

fn start(
    key: &str,
    us: i64,
    id: u64,
    parent: Option<u64>,
    fields: &[(&str, Value)],
) -> TracedRecord {
    rec(
        EventType::IntervalStart,
        key,
        us,
        Some((id, parent)),
        parent,
        Value::Null,
        fields,
        false,
    )
}

fn stop(
    key: &str,
    us: i64,
    id: u64,
    parent: Option<u64>,
    fields: &[(&str, Value)],
) -> TracedRecord {
    rec(
        EventType::IntervalEnd,
        key,
        us,
        Some((id, parent)),
        parent,
        Value::Null,
        fields,
        false,
    )
}

fn point(
    key: &str,
    us: i64,
    scope: Option<u64>,
    value: Value,
    fields: &[(&str, Value)],
) -> TracedRecord {
    rec(
        EventType::PointInTime,
        key,
        us,
        None,
        scope,
        value,
        fields,
        false,
    )
}

fn s(v: &str) -> Value {
    Value::Str(Cow::Owned(v.to_owned()))
}

const INIT: u64 = 1;
const RUN: u64 = 2;
const BLOCK: u64 = 3;
const EVAL: u64 = 4;
const STEP0: u64 = 100;
const STEPS: u64 = 8;

/// What the layer hands its sinks for one short run: `cache_clear` before `init`, the
/// submission and hyperparameters inside `init`, `run` with one `block` of eight sampled
/// `train_step` intervals (trace_only) carrying `tracked_stats`, one `eval` with
/// `eval_accuracy`, and `run_stop` with its status.
fn run_stream() -> Vec<TracedRecord> {
    let mut r = vec![
        point("cache_clear", 0, None, Value::Bool(true), &[]),
        start("init_start", 10, INIT, None, &[]),
        point(
            "submission_benchmark",
            20,
            Some(INIT),
            s("llama2_70b_lora"),
            &[],
        ),
        point("submission_org", 21, Some(INIT), s("tracing-mllog"), &[]),
        point("submission_division", 22, Some(INIT), s("closed"), &[]),
        point("global_batch_size", 30, Some(INIT), Value::Int(8), &[]),
        point(
            "opt_base_learning_rate",
            31,
            Some(INIT),
            Value::Float(2e-3),
            &[],
        ),
        stop("init_stop", 1_000, INIT, None, &[]),
        start("run_start", 1_001, RUN, None, &[]),
        start(
            "block_start",
            1_100,
            BLOCK,
            Some(RUN),
            &[
                ("first_epoch_num", Value::Int(1)),
                ("epoch_count", Value::Int(1)),
            ],
        ),
    ];
    for i in 0..STEPS {
        let id = STEP0 + i;
        let t0 = 2_000 + i as i64 * 1_000;
        let mut a = rec(
            EventType::IntervalStart,
            "train_step_start",
            t0,
            Some((id, Some(BLOCK))),
            Some(BLOCK),
            Value::Null,
            &[("step", Value::Int(i as i128))],
            true,
        );
        a.trace_only = true;
        r.push(a);
        r.push(point(
            "tracked_stats",
            t0 + 500,
            Some(id),
            Value::Object(vec![
                (Cow::Borrowed("throughput"), Value::Float(100.0 + i as f64)),
                (
                    Cow::Borrowed("train_loss"),
                    Value::Float(2.0 - i as f64 / 10.0),
                ),
            ]),
            &[("step", Value::Int(i as i128))],
        ));
        r.push(rec(
            EventType::IntervalEnd,
            "train_step_stop",
            t0 + 750,
            Some((id, Some(BLOCK))),
            Some(BLOCK),
            Value::Null,
            &[("step", Value::Int(i as i128))],
            true,
        ));
    }
    r.extend([
        stop(
            "block_stop",
            11_000,
            BLOCK,
            Some(RUN),
            &[
                ("first_epoch_num", Value::Int(1)),
                ("epoch_count", Value::Int(2)),
            ],
        ),
        start(
            "eval_start",
            11_100,
            EVAL,
            Some(RUN),
            &[("epoch_num", Value::Int(1))],
        ),
        point(
            "eval_accuracy",
            11_500,
            Some(EVAL),
            Value::Float(0.9312),
            &[
                ("samples_count", Value::Int(64)),
                ("epoch_num", Value::Int(1)),
            ],
        ),
        stop(
            "eval_stop",
            11_900,
            EVAL,
            Some(RUN),
            &[("epoch_num", Value::Int(1))],
        ),
        stop("run_stop", 12_000, RUN, None, &[("status", s("success"))]),
    ]);
    r
}

fn drive(sink: &mut OtelSink, records: &[TracedRecord], deadline: Duration) {
    for r in records {
        sink.write(r).expect("write");
    }
    sink.close(Instant::now() + deadline).expect("close");
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a OValue> {
    attrs
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn one<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    let found: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "spans named {name}: {found:#?}");
    found[0]
}

// ---------------------------------------------------------------------------------------------
// A real collector (rotel), fed by child processes of this test binary

/// The body of one rank: the layer built with the builder API, the OTel sink from `MLLOG_OTEL=1`, and
/// a short training-shaped span tree. Runs only as a child (`MLLOG_OTEL_TEST_CHILD` set by
/// the parent); prints one `OTEL_REPORT` line for the parent.
#[test]
#[ignore = "child process of the rotel tests (run by them)"]
fn rank_child() {
    use tracing::info_span;
    use tracing_mllog::{keys, mllog, MllogLayer};
    use tracing_subscriber::prelude::*;

    let Ok(out) = std::env::var("MLLOG_OTEL_TEST_CHILD") else {
        return;
    };
    let rank: u32 = std::env::var("RANK").unwrap().parse().unwrap();
    // MLLOG_OTEL=1 makes the builder add the OTel sink, on every rank; only rank 0 writes
    // its MLLOG file.
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::file(&out))
        .ranks(Ranks::default().rank(rank))
        .submission(
            Submission::default()
                .benchmark(Benchmark::Llama2_70bLora)
                .org("tracing-mllog"),
        )
        .trace_steps(true)
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .from_env()
        .build()
        .expect("build the layer");
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        {
            let _init = info_span!("init").entered();
            mllog!(keys::SEED, 1234);
            mllog!(keys::GLOBAL_BATCH_SIZE, 8);
            mllog!(keys::OPT_BASE_LR, 2e-3);
        }
        let _run = info_span!("run").entered();
        for b in 0..2u64 {
            {
                let _block = info_span!("block", samples_count = b * 32).entered();
                for step in 0..4u64 {
                    let _s = info_span!("train_step", step = b * 4 + step).entered();
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            let _eval = info_span!("eval").entered();
            mllog!(
                keys::EVAL_ACCURACY,
                0.5 + b as f64 / 10.0,
                samples_count = (b + 1) * 32
            );
        }
    });
    let report = guard.shutdown();
    let o = guard
        .detail::<tracing_mllog::sink::OtelReport>()
        .expect("MLLOG_OTEL=1 is set");
    println!(
        "OTEL_REPORT rank={rank} started={} exported={} dropped={} errors={} pipeline_dropped={} \
         trace_errors={} metric_errors={} last_trace_error={:?} last_metric_error={:?} last_error={:?}",
        o.spans_started,
        o.spans_exported,
        o.dropped,
        o.export_errors,
        report.dropped(),
        o.trace_export_errors,
        o.metric_export_errors,
        o.last_trace_error,
        o.last_metric_error,
        o.last_error
    );
}

fn rotel_bin() -> PathBuf {
    let bin = std::env::var_os("MLLOG_ROTEL_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "MLLOG_ROTEL_BIN is not set: the OTel tests need the rotel collector. Run them \
             through scripts/test (it sources scripts/deps/otel.sh), or \
             `VENV=<venv> . scripts/deps/otel.sh` first"
            )
        });
    assert!(
        bin.is_file(),
        "MLLOG_ROTEL_BIN={} does not exist: re-run scripts/deps/otel.sh (via scripts/test)",
        bin.display()
    );
    bin
}

fn wait_for_port(port: u16, child: &mut Child, log: &Path) {
    let until = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "rotel exited ({status}) before listening on {port}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < until,
            "rotel did not listen on 127.0.0.1:{port} within 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A rotel collector on free loopback ports that prints what it receives (traces and
/// metrics, detailed) to a file in its own temp dir. Killed by PID on drop.
struct Rotel {
    child: Child,
    dir: tempfile::TempDir,
    grpc: u16,
    http: u16,
}

impl Rotel {
    fn start() -> Rotel {
        let bin = rotel_bin();
        let dir = tempfile::tempdir().unwrap();
        let (grpc, http) = (common::free_port(), common::free_port());
        let out = std::fs::File::create(dir.path().join("rotel.out")).unwrap();
        let mut child = Command::new(&bin)
            .arg("start")
            .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc}")])
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http}")])
            .args(["--exporter", "blackhole"])
            .args(["--debug-log", "traces", "--debug-log", "metrics"])
            .args(["--debug-log-verbosity", "detailed"])
            .arg("--pid-file")
            .arg(dir.path().join("rotel.pid"))
            .arg("--log-file")
            .arg(dir.path().join("rotel.log"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("starting {}: {e} (see scripts/deps/otel.sh)", bin.display())
            });
        let log = dir.path().join("rotel.out");
        wait_for_port(grpc, &mut child, &log);
        wait_for_port(http, &mut child, &log);
        Rotel {
            child,
            dir,
            grpc,
            http,
        }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("rotel.out")).unwrap_or_default()
    }

    /// Waits until the parsed output satisfies `done`.
    fn wait_for(&self, what: &str, done: impl Fn(&Received) -> bool) -> Received {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let got = parse_rotel(&self.output());
            if done(&got) {
                return got;
            }
            assert!(
                Instant::now() < until,
                "rotel did not receive {what} within 30 s; output:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Rotel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Clone, Debug, Default)]
struct RSpan {
    resource: Vec<(String, String)>,
    name: String,
    trace: String,
    id: String,
    parent: String,
    attrs: Vec<(String, String)>,
    events: Vec<(String, Vec<(String, String)>)>,
}

impl RSpan {
    fn res(&self, k: &str) -> Option<&str> {
        self.resource
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
    fn attr(&self, k: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
}

/// Attributes as (key, rotel's rendering of the value).
type Kv = Vec<(String, String)>;

#[derive(Debug, Default)]
struct Received {
    spans: Vec<RSpan>,
    /// (resource, metric name, data point attributes, value)
    metrics: Vec<(Kv, String, Kv, String)>,
}

impl Received {
    fn of_rank(&self, rank: u32) -> Vec<&RSpan> {
        let want = format!("Int({rank})");
        self.spans
            .iter()
            .filter(|s| s.res("mllog.rank") == Some(want.as_str()))
            .collect()
    }
}

/// Parses rotel's debug output (the Collector debug exporter's text format).
fn parse_rotel(text: &str) -> Received {
    fn kv(line: &str) -> Option<(String, String)> {
        let rest = line.trim().strip_prefix("-> ")?;
        let (k, v) = rest.split_once(": ")?;
        Some((k.trim().to_owned(), v.trim().to_owned()))
    }
    fn field(line: &str, name: &str) -> Option<String> {
        let rest = line.trim().strip_prefix(name)?;
        let rest = rest.trim_start().strip_prefix(':')?;
        Some(rest.trim().to_owned())
    }
    #[derive(PartialEq)]
    enum At {
        Resource,
        SpanAttrs,
        Event,
        MetricPoint,
        Other,
    }
    let mut got = Received::default();
    let mut resource: Vec<(String, String)> = Vec::new();
    let mut at = At::Other;
    let mut span: Option<RSpan> = None;
    let mut metric = String::new();
    let mut point_attrs: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("ResourceSpans #") || t.starts_with("ResourceMetrics #") {
            got.spans.extend(span.take());
            resource = Vec::new();
            at = At::Other;
        } else if t == "Resource attributes:" {
            at = At::Resource;
        } else if t.starts_with("Span #") {
            got.spans.extend(span.take());
            span = Some(RSpan {
                resource: resource.clone(),
                ..RSpan::default()
            });
            at = At::Other;
        } else if t == "Attributes:" {
            at = At::SpanAttrs;
        } else if t.starts_with("SpanEvent #") {
            at = At::Event;
        } else if t == "Data point attributes:" {
            at = At::MetricPoint;
            point_attrs = Vec::new();
        } else if let Some(v) = t.strip_prefix("Value: ") {
            got.metrics.push((
                resource.clone(),
                metric.clone(),
                point_attrs.clone(),
                v.to_owned(),
            ));
            at = At::Other;
        } else if let Some(s) = span
            .as_mut()
            .filter(|_| at != At::Event && at != At::SpanAttrs && at != At::Resource)
        {
            if let Some(v) = field(t, "Name") {
                s.name = v;
            } else if let Some(v) = field(t, "Trace ID") {
                s.trace = v;
            } else if let Some(v) = field(t, "Parent ID") {
                s.parent = v;
            } else if let Some(v) = field(t, "ID") {
                s.id = v;
            }
        } else if let Some((k, v)) = kv(t) {
            match at {
                At::Resource => resource.push((k, v)),
                At::SpanAttrs => {
                    if let Some(s) = span.as_mut() {
                        s.attrs.push((k, v));
                    }
                }
                At::Event => {
                    if let Some(s) = span.as_mut() {
                        if k == "Name" {
                            s.events.push((v, Vec::new()));
                        } else if let Some(e) = s.events.last_mut() {
                            e.1.push((k, v));
                        }
                    }
                }
                At::MetricPoint => point_attrs.push((k, v)),
                At::Other => {
                    if k == "Name" {
                        metric = v;
                    }
                }
            }
        } else if t.starts_with("Start time") || t.starts_with("Metric #") || t == "Events:" {
            if t.starts_with("Metric #") {
                got.spans.extend(span.take());
            }
            at = At::Other;
        }
    }
    got.spans.extend(span.take());
    got
}

const SHARED_TRACE: &str = "4d4c4c4f47000000000000000000beef";

fn spawn_rank(rank: u32, world: u32, protocol: &str, endpoint: &str, dir: &Path) -> Child {
    spawn_child("rank_child", rank, world, protocol, endpoint, dir, &[])
}

fn spawn_child(
    test: &str,
    rank: u32,
    world: u32,
    protocol: &str,
    endpoint: &str,
    dir: &Path,
    extra: &[(&str, &str)],
) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        test,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_")
            || k.starts_with("MLLOG_")
            || k.ends_with("RANK")
            || k == "WORLD_SIZE"
            || k == "TRACEPARENT"
            || k == "TRACESTATE"
        {
            cmd.env_remove(k);
        }
    }
    cmd.env(
        "MLLOG_OTEL_TEST_CHILD",
        dir.join(format!("result_{rank}.txt")),
    )
    .env("MLLOG_OTEL", "1")
    .env("RANK", rank.to_string())
    .env("WORLD_SIZE", world.to_string())
    .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    .env("OTEL_METRIC_EXPORT_INTERVAL", "60000")
    .env("MLLOG_OTEL_TRACE_ID", SHARED_TRACE)
    .envs(extra.iter().copied())
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd.spawn().expect("spawn the rank child")
}

/// Waits for a child and returns its `OTEL_REPORT` line.
fn rank_report(child: Child, rank: u32) -> String {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "rank {rank} failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.find("OTEL_REPORT").map(|i| &l[i..]))
        .unwrap_or_else(|| {
            panic!("rank {rank}: no OTEL_REPORT (did the child test run?)\n{stdout}")
        })
        .to_owned()
}

/// The spans one rank child sends: `mllog.point` (cache_clear), init, run, 2 blocks, 2 evals.
const CHILD_SPANS: usize = 7;

fn check_rank(got: &Received, rank: u32, world: u32) {
    let all = got.of_rank(rank);
    // train_step spans (once the layer sends them) hang on a block.
    let blocks: Vec<&str> = all
        .iter()
        .filter(|s| s.name == "block")
        .map(|s| s.id.as_str())
        .collect();
    for step in all.iter().filter(|s| s.name == "train_step") {
        assert!(blocks.contains(&step.parent.as_str()), "{step:?}");
    }
    let spans: Vec<&RSpan> = all.into_iter().filter(|s| s.name != "train_step").collect();
    let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "block",
            "block",
            "eval",
            "eval",
            "init",
            "mllog.point",
            "run"
        ],
        "rank {rank}"
    );
    for s in &spans {
        assert_eq!(
            s.res("service.name"),
            Some("Str(llama2_70b_lora)"),
            "rank {rank}: {s:?}"
        );
        assert_eq!(
            s.res("mllog.world_size"),
            Some(format!("Int({world})").as_str())
        );
        assert_eq!(s.res("mllog.benchmark"), Some("Str(llama2_70b_lora)"));
        assert!(s.res("host.name").is_some());
        assert_eq!(
            s.trace, SHARED_TRACE,
            "all ranks share the trace id from MLLOG_OTEL_TRACE_ID"
        );
    }
    let run = spans.iter().find(|s| s.name == "run").unwrap();
    assert_eq!(run.attr("mllog.key"), Some("Str(run_start)"));
    assert_eq!(run.parent, "");
    for child in spans
        .iter()
        .filter(|s| s.name == "block" || s.name == "eval")
    {
        assert_eq!(child.parent, run.id, "{} is a child of run", child.name);
    }
    let init = spans.iter().find(|s| s.name == "init").unwrap();
    let gbs = init
        .events
        .iter()
        .find(|(n, _)| n == "global_batch_size")
        .expect("global_batch_size event");
    assert!(
        gbs.1
            .contains(&("mllog.value".to_owned(), "Int(8)".to_owned())),
        "{gbs:?}"
    );
    let mut accs: Vec<String> = spans
        .iter()
        .filter(|s| s.name == "eval")
        .flat_map(|s| s.events.iter())
        .filter(|(n, _)| n == "eval_accuracy")
        .map(|(_, a)| {
            a.iter()
                .find(|(k, _)| k == "mllog.value")
                .unwrap()
                .1
                .clone()
        })
        .collect();
    accs.sort();
    assert_eq!(accs, ["Double(0.5)", "Double(0.6)"]);
}

/// Checks a child's report line and returns how many spans it exported (at least
/// [`CHILD_SPANS`]; more once the layer also sends sampled `train_step` records).
fn check_report(line: &str, rank: u32) -> usize {
    let num = |name: &str| -> usize {
        let rest = &line[line
            .find(&format!(" {name}="))
            .unwrap_or_else(|| panic!("{name} in {line}"))
            + name.len()
            + 2..];
        rest.split(' ').next().unwrap().parse().unwrap()
    };
    assert!(line.contains(&format!("rank={rank} ")), "{line}");
    let started = num("started");
    assert!(started >= CHILD_SPANS, "{line}");
    assert_eq!(num("exported"), started, "{line}");
    assert_eq!(
        (num("dropped"), num("errors"), num("pipeline_dropped")),
        (0, 0, 0),
        "{line}"
    );
    started
}

fn one_rank_through(protocol: &str) {
    let rotel = Rotel::start();
    let work = tempfile::tempdir().unwrap();
    let endpoint = match protocol {
        "grpc" => format!("http://127.0.0.1:{}", rotel.grpc),
        _ => format!("http://127.0.0.1:{}", rotel.http),
    };
    let child = spawn_rank(0, 1, protocol, &endpoint, work.path());
    let report = rank_report(child, 0);
    let sent = check_report(&report, 0);
    let got = rotel.wait_for("rank 0's spans and metrics", |g| {
        g.of_rank(0).len() >= sent && g.metrics.iter().any(|m| m.1 == "mllog.eval_accuracy")
    });
    check_rank(&got, 0, 1);
    let acc: Vec<_> = got
        .metrics
        .iter()
        .filter(|m| m.1 == "mllog.eval_accuracy")
        .collect();
    assert!(acc.iter().any(|m| m.3 == "0.6"), "{acc:?}");
    for m in &acc {
        assert!(
            m.2.contains(&("mllog.rank".to_owned(), "Int(0)".to_owned())),
            "{m:?}"
        );
        assert!(
            m.2.contains(&(
                "mllog.benchmark".to_owned(),
                "Str(llama2_70b_lora)".to_owned()
            )),
            "{m:?}"
        );
        assert!(
            m.2.contains(&(
                "mllog.submission.org".to_owned(),
                "Str(tracing-mllog)".to_owned()
            )),
            "{m:?}"
        );
    }
    // The MLLOG file was written as usual.
    let log = std::fs::read_to_string(work.path().join("result_0.txt")).unwrap();
    assert!(log.contains("\"key\": \"eval_accuracy\""), "{log}");
}

/// The body of an application with its own OpenTelemetry setup: tracing-opentelemetry with
/// its provider (service `app`, OTLP/HTTP) and the MLLOG layer (`MLLOG_OTEL=1`) in one
/// subscriber; a `job` span around init and run; other spans inside the run; `otel.*` fields.
#[test]
#[ignore = "child process of the rotel tests (run by them)"]
fn app_child() {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    use tracing::info_span;
    use tracing_mllog::{keys, mllog, MllogLayer};
    use tracing_subscriber::prelude::*;

    let Ok(out) = std::env::var("MLLOG_OTEL_TEST_CHILD") else {
        return;
    };
    let app_endpoint = std::env::var("APP_OTLP_TRACES").unwrap();
    // reqwest is built without a default TLS provider when object-store is on.
    #[cfg(feature = "object-store")]
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(app_endpoint)
        .build()
        .unwrap();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(exporter)
        .with_resource(Resource::builder().with_service_name("app").build())
        .build();
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::file(&out))
        .ranks(Ranks::default().rank(0))
        .submission(Submission::default().benchmark(Benchmark::Llama2_70bLora))
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .from_env()
        .build()
        .expect("build the layer");
    // The application's layer leaves the spans our sink exports to it (else both would
    // export them): the recipe in docs/otel.md.
    let ours = [
        "init",
        "run",
        "block",
        "eval",
        "train_step",
        "data_load",
        "checkpoint_save",
    ];
    let app_layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("app"))
        .with_filter(tracing_subscriber::filter::filter_fn(move |m| {
            !ours.contains(&m.name())
        }));
    let subscriber = tracing_subscriber::registry().with(app_layer).with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let _job = info_span!("job").entered();
        {
            let _init = info_span!("init").entered();
            mllog!(keys::SEED, 1234);
        }
        let _run = info_span!("run", otel.name = "training", otel.kind = "server").entered();
        {
            let _block = info_span!("block", samples_count = 0u64).entered();
            for step in 0..4u64 {
                let _load = info_span!("data_load", step).entered();
                drop(_load);
                let _s = info_span!("train_step", step).entered();
            }
            let _ckpt = info_span!("checkpoint_save", path = "/tmp/ckpt").entered();
            drop(_ckpt);
            let _other = info_span!("logging_only").entered();
        }
        let eval = info_span!("eval", otel.status_code = tracing::field::Empty).entered();
        mllog!(keys::EVAL_ACCURACY, 0.5, samples_count = 32u64);
        eval.record("otel.status_code", "error");
    });
    guard.shutdown();
    provider.shutdown().unwrap();
    println!("APP_DONE");
}
