//! The OpenTelemetry sink (feature `otel`).
//!
//! - In-process: the sink is driven with a realistic record stream (what the layer's worker
//!   hands it) into collecting span and metric exporters, and the structure, timestamps,
//!   events, attributes, resource and metric values are asserted field by field.
//! - Bursts of 1,000,000 `train_step` intervals: lossless with backpressure, and with the
//!   dropping policy the report's `dropped` equals exactly what did not reach the exporter.
//! - A real collector: rotel (`scripts/deps/otel.sh` installs it; `MLLOG_ROTEL_BIN`) on free
//!   loopback ports, over gRPC and HTTP/protobuf, fed by child processes of this test binary
//!   that build the layer with `OtelSink::from_env()`, including four ranks at once.
#![cfg(all(feature = "otel-grpc", feature = "otel-http"))]

mod common;

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
use tracing_mllog::record::{EventType, IntervalIds, Metadata, Record, Timestamp, Value};
use tracing_mllog::sink::{Backpressure, OtelConfig, OtelReport, OtelSink, Sink};
use tracing_mllog::Benchmark;

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
) -> Record {
    let mut metadata = Metadata::at("train.py", 42);
    for (k, v) in fields {
        metadata.set(k.to_string(), v.clone());
    }
    Record {
        namespace: Cow::Borrowed(""),
        time: ts(us),
        event_type,
        key: Cow::Owned(key.to_owned()),
        value,
        metadata,
        interval: interval.map(|(id, parent)| IntervalIds { id, parent }),
        scope,
        trace_only,
        tid: 4242,
        loose: None,
        otel: None,
    }
}

fn start(key: &str, us: i64, id: u64, parent: Option<u64>, fields: &[(&str, Value)]) -> Record {
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

fn stop(key: &str, us: i64, id: u64, parent: Option<u64>, fields: &[(&str, Value)]) -> Record {
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

fn point(key: &str, us: i64, scope: Option<u64>, value: Value, fields: &[(&str, Value)]) -> Record {
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
fn run_stream() -> Vec<Record> {
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

fn drive(sink: &mut OtelSink, records: &[Record], deadline: Duration) {
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
// In-process structure

#[test]
fn spans_events_attributes_resource_and_metrics() {
    let spans_out = Collect::keeping();
    let metrics_out = MetricCollect::default();
    let config = OtelConfig::new()
        .benchmark(Benchmark::Llama2_70bLora)
        .rank(3)
        .world_size(4)
        .host("node-7")
        .resource_attribute("deployment.environment.name", "ci");
    let mut sink =
        OtelSink::with_exporters(spans_out.clone(), metrics_out.clone(), config).unwrap();
    let handle = sink.handle();
    let records = run_stream();
    drive(&mut sink, &records, Duration::from_secs(10));
    let spans = spans_out.spans();
    let report = handle.report();

    // Names: every interval, every sampled train_step, and the point outside any interval.
    let mut names: Vec<&str> = spans.iter().map(|s| &*s.name).collect();
    names.sort_unstable();
    let mut expected = vec!["block", "eval", "init", "mllog.point", "run"];
    expected.extend(std::iter::repeat_n("train_step", STEPS as usize));
    expected.sort_unstable();
    assert_eq!(names, expected);

    // Parent/child structure, one trace.
    let (init, run, block, eval) = (
        one(&spans, "init"),
        one(&spans, "run"),
        one(&spans, "block"),
        one(&spans, "eval"),
    );
    let trace = run.span_context.trace_id();
    assert!(
        spans.iter().all(|s| s.span_context.trace_id() == trace),
        "one trace per sink"
    );
    assert_eq!(init.parent_span_id, SpanId::INVALID);
    assert_eq!(run.parent_span_id, SpanId::INVALID);
    assert_eq!(block.parent_span_id, run.span_context.span_id());
    assert_eq!(eval.parent_span_id, run.span_context.span_id());
    let steps: Vec<&SpanData> = spans.iter().filter(|s| s.name == "train_step").collect();
    assert!(steps
        .iter()
        .all(|s| s.parent_span_id == block.span_context.span_id()));

    // Start and end times are the records' times, to the nanosecond.
    let time_of = |key: &str, id: u64| {
        records
            .iter()
            .find(|r| r.key == key && r.interval.map(|i| i.id) == Some(id))
            .map(|r| system_time(r.time))
            .unwrap()
    };
    for (span, name, id) in [
        (init, "init", INIT),
        (run, "run", RUN),
        (block, "block", BLOCK),
        (eval, "eval", EVAL),
    ] {
        assert_eq!(
            span.start_time,
            time_of(&format!("{name}_start"), id),
            "{name} start"
        );
        assert_eq!(
            span.end_time,
            time_of(&format!("{name}_stop"), id),
            "{name} end"
        );
    }
    for step in &steps {
        let n = match attr(&step.attributes, "mllog.step") {
            Some(OValue::I64(n)) => *n as u64,
            other => panic!("mllog.step: {other:?}"),
        };
        assert_eq!(step.start_time, time_of("train_step_start", STEP0 + n));
        assert_eq!(step.end_time, time_of("train_step_stop", STEP0 + n));
        assert_eq!(
            attr(&step.attributes, "mllog.trace_only"),
            Some(&OValue::Bool(true))
        );
        // The tracked_stats point of the step is an event on the step.
        let ev: Vec<_> = step.events.iter().collect();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].name, "tracked_stats");
        assert_eq!(
            attr(&ev[0].attributes, "mllog.value").map(|v| v.to_string()),
            Some(format!(
                "{{\"throughput\": {:?}, \"train_loss\": {:?}}}",
                100.0 + n as f64,
                2.0 - n as f64 / 10.0
            ))
        );
    }

    // Interval attributes: start key, metadata of start and stop, source location, status.
    assert_eq!(
        attr(&run.attributes, "mllog.key"),
        Some(&OValue::from("run_start"))
    );
    assert_eq!(
        attr(&run.attributes, "mllog.stop_key"),
        Some(&OValue::from("run_stop"))
    );
    assert_eq!(
        attr(&run.attributes, "mllog.status"),
        Some(&OValue::from("success"))
    );
    assert_eq!(run.status, opentelemetry::trace::Status::Unset);
    assert_eq!(
        attr(&block.attributes, "mllog.epoch_count"),
        Some(&OValue::I64(1))
    );
    // A stop field equal to the start's is not repeated; a different one is `mllog.stop.*`.
    let n = block
        .attributes
        .iter()
        .filter(|kv| kv.key.as_str() == "mllog.first_epoch_num")
        .count();
    assert_eq!(n, 1);
    assert_eq!(
        attr(&block.attributes, "mllog.stop.epoch_count"),
        Some(&OValue::I64(2))
    );
    assert_eq!(
        attr(&block.attributes, "code.file.path"),
        Some(&OValue::from("train.py"))
    );
    assert_eq!(
        attr(&block.attributes, "code.line.number"),
        Some(&OValue::I64(42))
    );
    assert_eq!(
        attr(&block.attributes, "thread.id"),
        Some(&OValue::I64(4242))
    );

    // Point records are events on their interval, in order, at their times, with values.
    let init_events: Vec<&str> = init.events.iter().map(|e| &*e.name).collect();
    assert_eq!(
        init_events,
        [
            "submission_benchmark",
            "submission_org",
            "submission_division",
            "global_batch_size",
            "opt_base_learning_rate"
        ]
    );
    let gbs = init
        .events
        .iter()
        .find(|e| e.name == "global_batch_size")
        .unwrap();
    assert_eq!(gbs.timestamp, system_time(ts(30)));
    assert_eq!(attr(&gbs.attributes, "mllog.value"), Some(&OValue::I64(8)));
    assert_eq!(
        attr(&gbs.attributes, "mllog.key"),
        Some(&OValue::from("global_batch_size"))
    );
    let lr = init
        .events
        .iter()
        .find(|e| e.name == "opt_base_learning_rate")
        .unwrap();
    assert_eq!(
        attr(&lr.attributes, "mllog.value"),
        Some(&OValue::F64(2e-3))
    );
    let acc = eval.events.iter().next().expect("eval_accuracy event");
    assert_eq!(acc.name, "eval_accuracy");
    assert_eq!(acc.timestamp, system_time(ts(11_500)));
    assert_eq!(
        attr(&acc.attributes, "mllog.value"),
        Some(&OValue::F64(0.9312))
    );
    assert_eq!(
        attr(&acc.attributes, "mllog.samples_count"),
        Some(&OValue::I64(64))
    );
    assert_eq!(
        attr(&acc.attributes, "mllog.epoch_num"),
        Some(&OValue::I64(1))
    );
    let lone = one(&spans, "mllog.point");
    assert_eq!(lone.start_time, system_time(ts(0)));
    assert_eq!(lone.events.iter().next().unwrap().name, "cache_clear");

    // Resource.
    let resource = spans_out
        .resource
        .lock()
        .unwrap()
        .clone()
        .expect("resource");
    let rget = |k: &str| {
        resource
            .get(&opentelemetry::Key::from(k.to_owned()))
            .map(|v| v.to_string())
    };
    assert_eq!(rget("service.name").as_deref(), Some("llama2_70b_lora"));
    assert_eq!(rget("mllog.benchmark").as_deref(), Some("llama2_70b_lora"));
    assert_eq!(rget("mllog.rank").as_deref(), Some("3"));
    assert_eq!(rget("mllog.world_size").as_deref(), Some("4"));
    assert_eq!(rget("host.name").as_deref(), Some("node-7"));
    assert_eq!(rget("deployment.environment.name").as_deref(), Some("ci"));

    // Metrics: last values, with benchmark, rank and (learned from the stream) submission.
    let points = metrics_out.last.lock().unwrap().clone();
    let get =
        |name: &str| -> Vec<Point> { points.iter().filter(|p| p.name == name).cloned().collect() };
    let acc = get("mllog.eval_accuracy");
    assert_eq!(acc.len(), 1, "{points:#?}");
    assert_eq!(acc[0].value, 0.9312);
    assert_eq!(
        acc[0].attrs.get("mllog.benchmark").map(String::as_str),
        Some("llama2_70b_lora")
    );
    assert_eq!(
        acc[0].attrs.get("mllog.rank").map(String::as_str),
        Some("3")
    );
    assert_eq!(
        acc[0].attrs.get("mllog.submission.org").map(String::as_str),
        Some("tracing-mllog")
    );
    assert_eq!(
        acc[0]
            .attrs
            .get("mllog.submission.division")
            .map(String::as_str),
        Some("closed")
    );
    assert_eq!(
        acc[0].attrs.get("mllog.samples_count").map(String::as_str),
        Some("64")
    );
    let thr = get("mllog.throughput");
    assert_eq!(thr.len(), 1);
    assert_eq!(thr[0].value, 107.0);
    // Every throughput figure also lands in the per-rank distribution.
    let dist = get("mllog.throughput.distribution");
    assert_eq!(dist.len(), 1);
    assert_eq!(dist[0].count, STEPS);
    assert_eq!(
        dist[0].value,
        (0..STEPS).map(|i| 100.0 + i as f64).sum::<f64>()
    );
    assert_eq!(
        dist[0].attrs.get("mllog.rank").map(String::as_str),
        Some("3")
    );
    let loss = get("mllog.train_loss");
    assert_eq!(loss.len(), 1);
    assert!((loss[0].value - 1.3).abs() < 1e-12);
    let step_time = get("mllog.train_step.duration");
    assert_eq!(step_time.len(), 1);
    assert_eq!(step_time[0].count, STEPS);
    assert!(
        (step_time[0].value - STEPS as f64 * 750e-6).abs() < 1e-9,
        "{:?}",
        step_time[0]
    );
    let mres = metrics_out.resource.lock().unwrap().clone().unwrap();
    assert_eq!(
        mres.get(&opentelemetry::Key::from_static_str("service.name"))
            .map(|v| v.to_string())
            .as_deref(),
        Some("llama2_70b_lora")
    );

    // Report.
    let total_spans = 5 + STEPS;
    assert_eq!(
        report,
        OtelReport {
            spans_started: total_spans,
            spans_ended: total_spans,
            spans_exported: total_spans,
            sampled_out: 0,
            events: 1 + 5 + STEPS + 1,
            events_dropped: 0,
            // eval_accuracy; throughput (gauge and histogram) and loss per step; step time.
            metrics_points: 1 + 3 * STEPS + STEPS,
            dropped: 0,
            dropped_queue_full: 0,
            export_errors: 0,
            trace_export_errors: 0,
            metric_export_errors: 0,
            last_trace_error: None,
            last_metric_error: None,
            unmatched: 0,
            last_error: None,
            delivery_tracked: true,
        }
    );
}

#[test]
fn train_step_sampling_is_deterministic_and_metrics_see_every_step() {
    let spans_out = Collect::keeping();
    let metrics_out = MetricCollect::default();
    let config = OtelConfig::new().train_step_sampling(0.25);
    let mut sink =
        OtelSink::with_exporters(spans_out.clone(), metrics_out.clone(), config).unwrap();
    let handle = sink.handle();
    drive(&mut sink, &run_stream(), Duration::from_secs(10));
    let spans = spans_out.spans();
    let steps: Vec<_> = spans.iter().filter(|s| s.name == "train_step").collect();
    assert_eq!(steps.len(), 2, "every 4th of 8 steps");
    let block = one(&spans, "block");
    // The tracked_stats of the six sampled-out steps land on the enclosing block.
    let on_block = block
        .events
        .iter()
        .filter(|e| e.name == "tracked_stats")
        .count();
    assert_eq!(on_block, 6);
    let report = handle.report();
    assert_eq!(report.sampled_out, 6);
    assert_eq!(report.spans_exported, 5 + 2);
    assert_eq!(report.dropped, 0);
    let points = metrics_out.last.lock().unwrap().clone();
    let st = points
        .iter()
        .find(|p| p.name == "mllog.train_step.duration")
        .unwrap();
    assert_eq!(st.count, STEPS);
    assert_eq!(
        OtelConfig::new()
            .train_step_sampling(0.0)
            .effective_service_name(),
        "mllog"
    );
}

/// A span as an exporter sees it, minus its random ids: name, parent's name, times, status,
/// attributes and events.
fn comparable(spans: &[SpanData]) -> Vec<String> {
    let name_of = |id: SpanId| {
        spans
            .iter()
            .find(|s| s.span_context.span_id() == id)
            .map_or("-".to_owned(), |s| s.name.to_string())
    };
    let mut out: Vec<String> = spans
        .iter()
        .map(|s| {
            format!(
                "{} parent={} {:?}..{:?} {:?} kind={:?} sampled={} attrs={:?} events={:?}",
                s.name,
                name_of(s.parent_span_id),
                s.start_time,
                s.end_time,
                s.status,
                s.span_kind,
                s.span_context.is_sampled(),
                s.attributes,
                s.events
                    .iter()
                    .map(|e| (&e.name, e.timestamp, &e.attributes))
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The sink assembles spans itself when it owns the span queue and goes through the tracer
/// of your providers otherwise: an exporter sees the same spans either way.
#[test]
fn own_queue_and_your_providers_export_the_same_spans() {
    let records = run_stream();

    let direct = Collect::keeping();
    let mut sink = OtelSink::with_span_exporter(direct.clone(), OtelConfig::new()).unwrap();
    drive(&mut sink, &records, Duration::from_secs(10));

    let through_sdk = Collect::keeping();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(through_sdk.clone())
        .build();
    let mut sink = OtelSink::with_providers(provider.clone(), None, OtelConfig::new());
    drive(&mut sink, &records, Duration::from_secs(10));
    provider.shutdown().unwrap();

    let (a, b) = (direct.spans(), through_sdk.spans());
    assert!(!a.is_empty());
    assert_eq!(comparable(&a), comparable(&b));
    // Ids and scope are real: valid span ids, the sink's scope name; one trace per sink when
    // it owns the ids (your provider's id generator decides otherwise).
    for spans in [&a, &b] {
        assert!(spans
            .iter()
            .all(|s| s.span_context.span_id() != SpanId::INVALID
                && s.instrumentation_scope.name() == tracing_mllog::sink::OTEL_SCOPE));
    }
    let trace = a[0].span_context.trace_id();
    assert!(a.iter().all(|s| s.span_context.trace_id() == trace));
}

#[test]
fn aborted_run_and_unmatched_records() {
    let spans_out = Collect::keeping();
    let mut sink = OtelSink::with_span_exporter(spans_out.clone(), OtelConfig::new()).unwrap();
    let handle = sink.handle();
    let records = vec![
        start("run_start", 0, RUN, None, &[]),
        start("block_start", 10, BLOCK, Some(RUN), &[]),
        point("eval_accuracy", 20, Some(BLOCK), Value::Float(0.5), &[]),
        stop("epoch_stop", 30, 77, Some(RUN), &[]),
        stop("run_stop", 40, RUN, None, &[("status", s("aborted"))]),
    ];
    // run_stop before block_stop: the run ends; the block stays open until close.
    drive(&mut sink, &records, Duration::from_secs(10));
    let spans = spans_out.spans();
    let run = one(&spans, "run");
    assert!(
        matches!(run.status, opentelemetry::trace::Status::Error { ref description } if description == "aborted")
    );
    let block = one(&spans, "block");
    assert_eq!(
        attr(&block.attributes, "mllog.incomplete"),
        Some(&OValue::Bool(true))
    );
    assert_eq!(
        block.end_time,
        system_time(ts(40)),
        "ended at the last record's time"
    );
    let report = handle.report();
    assert_eq!(report.unmatched, 1);
    assert_eq!(report.spans_exported, 2);
}

#[test]
fn events_beyond_the_per_span_limit_are_counted() {
    let spans_out = Collect::keeping();
    let mut sink =
        OtelSink::with_span_exporter(spans_out.clone(), OtelConfig::new().max_events_per_span(10))
            .unwrap();
    let handle = sink.handle();
    let mut records = vec![start("run_start", 0, RUN, None, &[])];
    for i in 0..25 {
        records.push(point(
            "tracked_stats",
            1 + i,
            Some(RUN),
            Value::Int(i as i128),
            &[],
        ));
    }
    records.push(stop("run_stop", 100, RUN, None, &[]));
    drive(&mut sink, &records, Duration::from_secs(10));
    assert_eq!(one(&spans_out.spans(), "run").events.len(), 10);
    let report = handle.report();
    assert_eq!((report.events, report.events_dropped), (10, 15));
}

// ---------------------------------------------------------------------------------------------
// Bursts and failures: exact counts

const BURST: u64 = 1_000_000;

fn burst(sink: &mut OtelSink) {
    sink.write(&start("run_start", 0, RUN, None, &[])).unwrap();
    let mut a = rec(
        EventType::IntervalStart,
        "train_step_start",
        0,
        Some((0, Some(RUN))),
        Some(RUN),
        Value::Null,
        &[],
        true,
    );
    for i in 0..BURST {
        let id = 1_000 + i;
        a.event_type = EventType::IntervalStart;
        a.key = Cow::Borrowed("train_step_start");
        a.interval = Some(IntervalIds {
            id,
            parent: Some(RUN),
        });
        a.time = ts(10 + i as i64);
        sink.write(&a).unwrap();
        a.event_type = EventType::IntervalEnd;
        a.key = Cow::Borrowed("train_step_stop");
        a.time = ts(10 + i as i64);
        a.time.wall_ns += 500;
        sink.write(&a).unwrap();
    }
    sink.write(&stop("run_stop", 10 + BURST as i64, RUN, None, &[]))
        .unwrap();
}

#[test]
fn burst_of_a_million_steps_with_backpressure_loses_nothing() {
    let out = Collect::default();
    let config = OtelConfig::new()
        .queue_size(2048)
        .backpressure(Backpressure::Wait(Duration::from_secs(60)));
    let mut sink = OtelSink::with_span_exporter(out.clone(), config).unwrap();
    let handle = sink.handle();
    let t = Instant::now();
    burst(&mut sink);
    sink.close(Instant::now() + Duration::from_secs(60))
        .unwrap();
    let report = handle.report();
    eprintln!(
        "burst (backpressure): {:?} for {} spans: {report:?}",
        t.elapsed(),
        BURST + 1
    );
    assert_eq!(out.count(), BURST + 1, "every span reached the exporter");
    assert_eq!(report.spans_exported, BURST + 1);
    assert_eq!(report.spans_ended, BURST + 1);
    assert_eq!(report.dropped, 0);
}

#[test]
fn burst_of_a_million_steps_with_drop_policy_counts_every_loss() {
    // A slow collector (20 ms per 512-span request ≈ 25 k spans/s) and a small queue that
    // drops instead of waiting: much is lost, and the report says exactly how much.
    let out = Collect {
        delay: Duration::from_millis(20),
        ..Collect::default()
    };
    let config = OtelConfig::new()
        .queue_size(1024)
        .backpressure(Backpressure::Drop);
    let mut sink = OtelSink::with_span_exporter(out.clone(), config).unwrap();
    let handle = sink.handle();
    burst(&mut sink);
    sink.close(Instant::now() + Duration::from_secs(60))
        .unwrap();
    let report = handle.report();
    eprintln!("burst (drop): {report:?}");
    let total = BURST + 1;
    assert!(
        report.dropped > 0,
        "the burst must overflow the queue: {report:?}"
    );
    assert_eq!(report.spans_ended, total);
    assert_eq!(
        report.spans_exported,
        out.count(),
        "exported = what the exporter received"
    );
    assert_eq!(
        report.dropped,
        total - out.count(),
        "dropped = what did not reach the exporter"
    );
    assert_eq!(report.dropped_queue_full, report.dropped);
}

#[test]
fn failed_exports_are_counted_as_dropped() {
    let out = Collect {
        fail: true,
        ..Collect::default()
    };
    let mut sink =
        OtelSink::with_span_exporter(out.clone(), OtelConfig::new().batch_size(4)).unwrap();
    let handle = sink.handle();
    let records = run_stream();
    for r in &records {
        sink.write(r).unwrap();
    }
    sink.close(Instant::now() + Duration::from_secs(10))
        .unwrap();
    let report = handle.report();
    assert_eq!(report.spans_exported, 0);
    assert_eq!(report.dropped, report.spans_ended);
    assert_eq!(report.dropped, 5 + STEPS);
    assert_eq!(report.export_errors, (5 + STEPS).div_ceil(4));
    assert!(
        report
            .last_error
            .as_deref()
            .unwrap()
            .contains("collector says no"),
        "{report:?}"
    );
}

#[test]
fn shutdown_keeps_the_deadline_and_counts_what_was_left() {
    // Each export takes 1 s; the guard gives 300 ms.
    let out = Collect {
        delay: Duration::from_secs(1),
        ..Collect::default()
    };
    let config = OtelConfig::new()
        .batch_size(5)
        .batch_delay(Duration::from_millis(1));
    let mut sink = OtelSink::with_span_exporter(out.clone(), config).unwrap();
    let handle = sink.handle();
    for r in &run_stream() {
        sink.write(r).unwrap();
    }
    let t = Instant::now();
    let result = sink.close(Instant::now() + Duration::from_millis(300));
    let took = t.elapsed();
    assert!(result.is_err(), "the deadline passed");
    assert!(took < Duration::from_millis(900), "close took {took:?}");
    let report = handle.report();
    assert_eq!(
        report.spans_exported + report.dropped,
        report.spans_ended,
        "{report:?}"
    );
    assert!(report.dropped > 0);
    // Once the in-flight request returns, the counts settle and still add up.
    std::thread::sleep(Duration::from_millis(1500));
    let report = handle.report();
    assert_eq!(report.spans_exported, out.count());
    assert_eq!(
        report.spans_exported + report.dropped,
        report.spans_ended,
        "{report:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// A real collector (rotel), fed by child processes of this test binary

/// The body of one rank: the layer built with the builder API, an `OtelSink::from_env()`, and
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
        .output_file(&out)
        .rank(rank)
        .benchmark(Benchmark::Llama2_70bLora)
        .org("tracing-mllog")
        .trace_steps(true)
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
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
    let o = guard.otel_report().expect("MLLOG_OTEL=1 is set");
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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
        let (grpc, http) = (free_port(), free_port());
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

#[test]
fn rotel_receives_spans_and_metrics_over_grpc() {
    one_rank_through("grpc");
}

#[test]
fn rotel_receives_spans_and_metrics_over_http_protobuf() {
    one_rank_through("http/protobuf");
}

#[test]
fn four_ranks_export_to_one_collector() {
    let rotel = Rotel::start();
    let work = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{}", rotel.grpc);
    let children: Vec<Child> = (0..4)
        .map(|r| spawn_rank(r, 4, "grpc", &endpoint, work.path()))
        .collect();
    let sent: Vec<usize> = children
        .into_iter()
        .enumerate()
        .map(|(rank, child)| check_report(&rank_report(child, rank as u32), rank as u32))
        .collect();
    let got = rotel.wait_for("the spans of all four ranks", |g| {
        (0..4).all(|r| g.of_rank(r).len() >= sent[r as usize])
    });
    for rank in 0..4 {
        check_rank(&got, rank, 4);
        assert_eq!(
            got.of_rank(rank).len(),
            sent[rank as usize],
            "rank {rank}: nothing twice"
        );
    }
    assert_eq!(
        got.spans.len(),
        sent.iter().sum::<usize>(),
        "nothing from elsewhere"
    );
}

/// The quickstart with `MLLOG_OTEL=1` on four ranks (`RANK=0..3`) into one collector: every
/// rank's run arrives as spans (run, init, block, eval and the traced train_steps) with its
/// rank, and only rank 0 writes an MLLOG file.
#[test]
fn quickstart_on_four_ranks_exports_to_one_collector() {
    let rotel = Rotel::start();
    let work = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{}", rotel.grpc);
    let children: Vec<Child> = (0..4)
        .map(|rank| {
            let mut cmd = Command::new(common::quickstart_exe());
            for var in tracing_mllog::SUBMISSION_VARIABLES {
                cmd.env_remove(var);
            }
            cmd.env("RANK", rank.to_string())
                .env("WORLD_SIZE", "4")
                .env("MLLOG_OTEL", "1")
                .env("MLLOG_TRACE_STEPS", "1")
                .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
                .env("OTEL_METRIC_EXPORT_INTERVAL", "500")
                .env(
                    "MLLOG_OUTPUT_FILE",
                    work.path().join(format!("result_rank{rank}.txt")),
                )
                .current_dir(work.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (rank, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "rank {rank}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let got = rotel.wait_for("every rank's run", |g| {
        (0..4).all(|r| g.of_rank(r).iter().any(|s| s.name == "run"))
    });
    for rank in 0..4 {
        let spans = got.of_rank(rank);
        for name in ["init", "run", "block", "eval", "train_step"] {
            assert!(
                spans.iter().any(|s| s.name == name),
                "rank {rank} has no {name} span"
            );
        }
        let run = spans.iter().find(|s| s.name == "run").unwrap();
        assert_eq!(
            run.res("service.name"),
            Some("Str(llama2_70b_lora)"),
            "{run:?}"
        );
        assert_eq!(run.attr("mllog.key"), Some("Str(run_start)"), "{run:?}");
        let block = spans.iter().find(|s| s.name == "block").unwrap();
        assert_eq!(block.parent, run.id, "block is a child of run");
        let eval = spans.iter().find(|s| s.name == "eval").unwrap();
        assert!(
            eval.events.iter().any(|(n, _)| n == "eval_accuracy"),
            "{eval:?}"
        );
    }
    for rank in 0..4 {
        let file = work.path().join(format!("result_rank{rank}.txt"));
        assert_eq!(
            file.exists(),
            rank == 0,
            "only rank 0 writes MLLOG lines: {}",
            file.display()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Joining a trace: TRACEPARENT, the application's spans, otel.* fields

const LAUNCHER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const LAUNCHER_SPAN: &str = "b7ad6b7169203331";

fn launcher_traceparent() -> String {
    format!("00-{LAUNCHER_TRACE}-{LAUNCHER_SPAN}-01")
}

/// A launcher's traceparent: every root span (init, run, the standalone point) continues it,
/// as a remote parent, with its trace state; the rest hang on them, in the same trace. Both
/// ways spans are made (the sink's own queue, your providers) agree.
#[test]
fn traceparent_is_the_parent_of_every_root_span() {
    use opentelemetry::trace::TraceId;
    let records = run_stream();
    let config = || {
        OtelConfig::new()
            .traceparent(&launcher_traceparent(), Some("vendor=abc"))
            .unwrap()
    };
    let direct = Collect::keeping();
    let mut sink = OtelSink::with_span_exporter(direct.clone(), config()).unwrap();
    drive(&mut sink, &records, Duration::from_secs(10));
    let through_sdk = Collect::keeping();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(through_sdk.clone())
        .build();
    let mut sink = OtelSink::with_providers(provider.clone(), None, config());
    drive(&mut sink, &records, Duration::from_secs(10));
    provider.shutdown().unwrap();
    for spans in [direct.spans(), through_sdk.spans()] {
        assert!(spans.len() > 4, "{spans:#?}");
        let trace = TraceId::from_hex(LAUNCHER_TRACE).unwrap();
        let launcher = SpanId::from_hex(LAUNCHER_SPAN).unwrap();
        let ids: Vec<SpanId> = spans.iter().map(|s| s.span_context.span_id()).collect();
        for s in &spans {
            assert_eq!(s.span_context.trace_id(), trace, "{}", s.name);
            if ["init", "run", "mllog.point"].contains(&s.name.as_ref()) {
                assert_eq!(s.parent_span_id, launcher, "{}", s.name);
                assert!(s.parent_span_is_remote, "{}", s.name);
            } else {
                assert!(
                    ids.contains(&s.parent_span_id),
                    "{} hangs on one of ours",
                    s.name
                );
            }
        }
        assert_eq!(
            one(&spans, "run").span_context.trace_state().get("vendor"),
            Some("abc")
        );
    }
    // Not a traceparent: refused in code, named.
    let err = OtelConfig::new()
        .traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", None)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("traceparent"), "{err}");
    for bad in [
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
    ] {
        assert!(OtelConfig::new().traceparent(bad, None).is_err(), "{bad}");
    }
}

/// With tracing-opentelemetry in the same subscriber, the interval spans with no enclosing
/// interval continue the application's span around them (same trace, that span as parent);
/// `otel.name`, `otel.kind` and `otel.status_code` work as with tracing-opentelemetry. In
/// process: the application's spans and ours go to two collecting exporters.
#[test]
fn application_span_is_the_parent_of_the_run() {
    use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
    use tracing::info_span;
    use tracing_mllog::{keys, mllog, MllogLayer};
    use tracing_subscriber::prelude::*;

    let app_out = Collect::keeping();
    let app_provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(app_out.clone())
        .build();
    let ours = Collect::keeping();
    let sink = OtelSink::with_span_exporter(ours.clone(), OtelConfig::new()).unwrap();
    let (layer, mut guard) = MllogLayer::builder()
        .no_output()
        .sink(sink)
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .build()
        .unwrap();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(app_provider.tracer("app")))
        .with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let _job = info_span!("job").entered();
        {
            let _init = info_span!("init").entered();
            mllog!(keys::SEED, 1);
        }
        let _run = info_span!("run", otel.name = "training", otel.kind = "server").entered();
        let block = info_span!(
            "block",
            samples_count = 0u64,
            otel.status_code = tracing::field::Empty
        );
        block.in_scope(|| mllog!(keys::EVAL_ACCURACY, 0.1, samples_count = 0u64));
        block.record("otel.status_code", "error");
        drop(block);
    });
    guard.shutdown();
    app_provider.shutdown().unwrap();
    let app = app_out.spans();
    let job = one(&app, "job");
    let spans = ours.spans();
    assert!(spans.len() >= 3, "{spans:#?}");
    for s in &spans {
        assert_eq!(
            s.span_context.trace_id(),
            job.span_context.trace_id(),
            "{} is in the application's trace",
            s.name
        );
    }
    let run = one(&spans, "training");
    assert_eq!(run.parent_span_id, job.span_context.span_id());
    assert_eq!(run.span_kind, SpanKind::Server);
    let init = one(&spans, "init");
    assert_eq!(init.parent_span_id, job.span_context.span_id());
    let block = one(&spans, "block");
    assert_eq!(block.parent_span_id, run.span_context.span_id());
    assert!(
        matches!(block.status, Status::Error { .. }),
        "{:?}",
        block.status
    );
}

/// A launcher's `TRACEPARENT` on four ranks, two over gRPC and two over HTTP: every span the
/// collector receives from them is in the launcher's trace (it wins over
/// `MLLOG_OTEL_TRACE_ID`), each rank's roots (`init`, `run`, the standalone point) hang on the
/// launcher's span, and the rest on them.
#[test]
fn four_ranks_join_the_launchers_trace() {
    let rotel = Rotel::start();
    let work = tempfile::tempdir().unwrap();
    let traceparent = launcher_traceparent();
    let children: Vec<Child> = (0..4)
        .map(|r| {
            let (protocol, port) = if r < 2 {
                ("grpc", rotel.grpc)
            } else {
                ("http/protobuf", rotel.http)
            };
            let endpoint = format!("http://127.0.0.1:{port}");
            spawn_child(
                "rank_child",
                r,
                4,
                protocol,
                &endpoint,
                work.path(),
                &[
                    ("TRACEPARENT", &traceparent),
                    ("TRACESTATE", "launcher=job-17"),
                ],
            )
        })
        .collect();
    let sent: Vec<usize> = children
        .into_iter()
        .enumerate()
        .map(|(rank, child)| check_report(&rank_report(child, rank as u32), rank as u32))
        .collect();
    let got = rotel.wait_for("the spans of all four ranks", |g| {
        (0..4).all(|r| g.of_rank(r).len() >= sent[r as usize])
    });
    assert_eq!(got.spans.len(), sent.iter().sum::<usize>());
    for rank in 0..4 {
        let spans = got.of_rank(rank);
        let run = spans.iter().find(|s| s.name == "run").expect("run");
        let blocks: Vec<&str> = spans
            .iter()
            .filter(|s| s.name == "block")
            .map(|s| s.id.as_str())
            .collect();
        assert_eq!(blocks.len(), 2, "rank {rank}");
        for s in &spans {
            assert_eq!(s.trace, LAUNCHER_TRACE, "rank {rank}: {s:?}");
            let want = match s.name.as_str() {
                "init" | "run" | "mllog.point" => LAUNCHER_SPAN,
                "block" | "eval" => run.id.as_str(),
                "train_step" => {
                    assert!(blocks.contains(&s.parent.as_str()), "rank {rank}: {s:?}");
                    continue;
                }
                other => panic!("rank {rank}: unexpected span {other}"),
            };
            assert_eq!(s.parent, want, "rank {rank}: {} parent", s.name);
        }
    }
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
        .output_file(&out)
        .rank(0)
        .benchmark(Benchmark::Llama2_70bLora)
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
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

/// An application with tracing-opentelemetry and the MLLOG layer in one subscriber: the
/// collector gets one trace. The run (named by `otel.name`) and init are children of the
/// application's `job` span; `MLLOG_OTEL_SPANS` spans are exported under the block, others
/// not; one step in two with `MLLOG_OTEL_STEP_EVERY=2`; `otel.status_code` is honoured.
#[test]
fn application_and_mllog_spans_are_one_trace_in_the_collector() {
    let rotel = Rotel::start();
    let work = tempfile::tempdir().unwrap();
    let app = format!("http://127.0.0.1:{}/v1/traces", rotel.http);
    let child = spawn_child(
        "app_child",
        0,
        1,
        "grpc",
        &format!("http://127.0.0.1:{}", rotel.grpc),
        work.path(),
        &[
            ("APP_OTLP_TRACES", &app),
            ("MLLOG_OTEL_SPANS", "data_load, checkpoint*"),
            ("MLLOG_OTEL_STEP_EVERY", "2"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ],
    );
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("APP_DONE"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let service = |s: &RSpan| s.res("service.name").unwrap_or("").to_owned();
    let got = rotel.wait_for("the application's and our spans", |g| {
        g.spans
            .iter()
            .any(|s| service(s) == "Str(app)" && s.name == "job")
            && g.spans
                .iter()
                .any(|s| service(s).contains("llama2") && s.name == "training")
    });
    let job = got
        .spans
        .iter()
        .find(|s| service(s) == "Str(app)" && s.name == "job")
        .unwrap();
    let ours: Vec<&RSpan> = got
        .spans
        .iter()
        .filter(|s| service(s).contains("llama2"))
        .collect();
    let trace_ids: std::collections::BTreeSet<&str> =
        got.spans.iter().map(|s| s.trace.as_str()).collect();
    assert_eq!(trace_ids.len(), 1, "one trace: {trace_ids:?}");
    let named = |n: &str| -> Vec<&RSpan> { ours.iter().copied().filter(|s| s.name == n).collect() };
    let run = named("training");
    assert_eq!(run.len(), 1, "{ours:#?}");
    assert_eq!(
        run[0].parent, job.id,
        "run under the application's job span"
    );
    assert_eq!(named("init")[0].parent, job.id);
    let block = &named("block")[0];
    assert_eq!(block.parent, run[0].id);
    assert_eq!(named("data_load").len(), 4);
    assert_eq!(named("checkpoint_save").len(), 1);
    for s in named("data_load")
        .iter()
        .chain(named("checkpoint_save").iter())
    {
        assert_eq!(s.parent, block.id, "{s:?}");
    }
    assert_eq!(
        named("checkpoint_save")[0].attr("mllog.path"),
        Some("Str(/tmp/ckpt)")
    );
    assert!(named("logging_only").is_empty(), "not in MLLOG_OTEL_SPANS");
    assert_eq!(named("train_step").len(), 2, "one step in two");
    // MLLOG lines are unchanged: no line for the exported spans.
    let log = std::fs::read_to_string(work.path().join("result_0.txt")).unwrap();
    assert!(
        !log.contains("data_load") && !log.contains("checkpoint"),
        "{log}"
    );
    // `otel.*` fields are not MLLOG metadata.
    assert!(
        log.contains("run_start") && !log.contains("\"otel."),
        "{log}"
    );
    // The tree as docs/otel.md shows it.
    let tree = span_tree(&got.spans);
    eprintln!("{tree}");
    assert!(tree.starts_with("job [app]\n"), "{tree}");
    assert!(tree.contains("\n  logging_only [app]\n"), "{tree}");
    assert_eq!(tree.matches("[app]").count(), 2, "{tree}");
    let text = rotel.output();
    assert!(
        text.contains("SPAN_KIND_SERVER") || text.contains("Server"),
        "{text}"
    );
    assert!(
        text.contains("STATUS_CODE_ERROR") || text.contains("Error"),
        "{text}"
    );
}

/// A collector that is not there: the report says which endpoint, for which signal, and why
/// (connection refused), over gRPC and HTTP; credentials in the endpoint are masked.
#[test]
fn dead_endpoint_is_named_in_the_report() {
    for (protocol, endpoint_of) in [
        (
            "grpc",
            (|p: u16| format!("http://127.0.0.1:{p}")) as fn(u16) -> String,
        ),
        ("http/protobuf", |p: u16| {
            format!("http://mllog:pa55word-xyz@127.0.0.1:{p}")
        }),
    ] {
        let work = tempfile::tempdir().unwrap();
        // Bound and dropped: nothing listens there.
        let port = free_port();
        let endpoint = endpoint_of(port);
        let child = spawn_child(
            "rank_child",
            0,
            1,
            protocol,
            &endpoint,
            work.path(),
            &[("OTEL_EXPORTER_OTLP_TIMEOUT", "2000")],
        );
        let line = rank_report(child, 0);
        eprintln!("{protocol}: {line}");
        assert!(!line.contains("pa55word"), "{line}");
        let want = format!("127.0.0.1:{port}");
        for (signal, field) in [
            ("traces", "last_trace_error"),
            ("metrics", "last_metric_error"),
        ] {
            let at = line.find(&format!("{field}=")).expect(field);
            let msg = &line[at..];
            let msg = &msg[..msg.find("\")").map_or(msg.len(), |e| e + 2)];
            assert!(
                msg.contains(&format!("{signal} to ")) && msg.contains(&want),
                "{protocol}: {msg}"
            );
            assert!(msg.contains("connection refused"), "{protocol}: {msg}");
        }
        assert!(!line.contains("trace_errors=0 "), "{line}");
        assert!(!line.contains("metric_errors=0 "), "{line}");
    }
}

/// The received spans as an indented tree (name, service), children in arrival order.
fn span_tree(spans: &[RSpan]) -> String {
    fn walk(spans: &[RSpan], parent: &str, depth: usize, out: &mut String) {
        for s in spans.iter().filter(|s| s.parent == parent) {
            let service = s
                .res("service.name")
                .unwrap_or("")
                .trim_start_matches("Str(")
                .trim_end_matches(')');
            out.push_str(&format!("{}{} [{service}]\n", "  ".repeat(depth), s.name));
            walk(spans, &s.id, depth + 1, out);
        }
    }
    let mut out = String::new();
    walk(spans, "", 0, &mut out);
    out
}

/// A collector that accepts connections and never answers: the report says the export timed
/// out after the exporter's timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`), over gRPC and HTTP.
#[test]
fn silent_endpoint_times_out_in_words() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Holds every connection open without reading or writing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            held.extend(conn.ok());
        }
    });
    for protocol in ["grpc", "http/protobuf"] {
        let work = tempfile::tempdir().unwrap();
        let child = spawn_child(
            "rank_child",
            0,
            1,
            protocol,
            &format!("http://127.0.0.1:{port}"),
            work.path(),
            &[
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000"),
                ("OTEL_METRICS_EXPORTER", "none"),
            ],
        );
        let line = rank_report(child, 0);
        eprintln!("{protocol}: {line}");
        let at = line.find("last_trace_error=").expect("last_trace_error");
        let msg = &line[at..];
        assert!(
            msg.contains(&format!("traces to http://127.0.0.1:{port}"))
                && msg.contains("timed out after 1 s"),
            "{protocol}: {msg}"
        );
    }
}
