//! Per-span cost on the training thread: our layer + `OtelSink` (the OTel SDK work happens on
//! the pipeline's worker thread) against tracing-opentelemetry 0.34's layer doing the same
//! spans with the SDK's batch processor (the SDK work happens on the training thread), plus a
//! bare `Registry` for reference. Both export into a counting no-op exporter.
//!
//! `cargo bench --features otel --bench otel`. Two groups:
//! - `otel_span_burst_1000`: bursts of 1000 spans, timed on the training thread; between
//!   bursts (untimed) each stack drains (`Guard::flush` / `force_flush`). This is the cost a
//!   training loop pays when the exporter keeps up on average (steps are milliseconds apart).
//! - `otel_span_sustained`: spans back to back forever. Our pipeline is lossless by default
//!   (`Overflow::Block`), so once the worker is the bottleneck this measures the worker's
//!   throughput; the BSP instead drops spans on a full queue (the counts are printed).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::{info_span, Dispatch};
use tracing_mllog::record::TracedRecord;
use tracing_mllog::sink::{OtelConfig, OtelSink, Sink, SinkError};
use tracing_mllog::{MllogLayer, Output};
use tracing_subscriber::prelude::*;

#[derive(Clone, Debug, Default)]
struct Count(Arc<AtomicU64>);

impl SpanExporter for Count {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        self.0.fetch_add(batch.len() as u64, Ordering::Relaxed);
        std::future::ready(Ok(()))
    }
}

/// Takes records and does nothing: the layer + pipeline cost without any OTel work.
struct Null;

impl Sink for Null {
    fn name(&self) -> &str {
        "null"
    }
    fn write(&mut self, _record: &TracedRecord) -> Result<(), SinkError> {
        Ok(())
    }
}

fn bench(c: &mut Criterion) {
    // The same layer twice, into a sink that does nothing and into the OTel sink.
    let ours_into = |sink: Box<dyn Sink>| {
        MllogLayer::builder()
            .output(Output::Nowhere)
            .sink(sink)
            .trace_steps(true)
            .global_batch_size(8)
            .live_check(tracing_mllog::compliance::LivePolicy::Off)
            .build()
            .expect("layer")
    };
    let (null_layer, mut null_guard) = ours_into(Box::new(Null));
    let mllog_null = Dispatch::new(tracing_subscriber::registry().with(null_layer));
    let ours = Count::default();
    let sink = OtelSink::with_span_exporter(ours.clone(), OtelConfig::new()).expect("sink");
    let otel = sink.handle();
    let (layer, mut guard) = ours_into(Box::new(sink));
    let mllog_otel = Dispatch::new(tracing_subscriber::registry().with(layer));

    let theirs = Count::default();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(theirs.clone())
        .build();
    let tracing_otel = Dispatch::new(
        tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("bench"))),
    );
    let registry = Dispatch::new(tracing_subscriber::registry());

    let stacks = [
        ("registry", &registry),
        ("mllog_null_sink", &mllog_null),
        ("mllog_otel_sink", &mllog_otel),
        ("tracing_opentelemetry_bsp", &tracing_otel),
    ];
    const BURST: u64 = 1000;
    let mut group = c.benchmark_group("otel_span_burst_1000");
    group.measurement_time(Duration::from_secs(3));
    for (name, dispatch) in stacks {
        group.bench_function(name, |b| {
            tracing::dispatcher::with_default(dispatch, || {
                // Blocks live inside a run, as in a real log (and as the layer checks).
                let _run = info_span!("run").entered();
                let mut i = 0u64;
                b.iter_custom(|iters| {
                    let mut timed = Duration::ZERO;
                    let mut left = iters;
                    while left > 0 {
                        let n = left.min(BURST);
                        let t = Instant::now();
                        for _ in 0..n {
                            i += 1;
                            // `block` is an MLLOG interval: two records per span for our sink.
                            let _s = info_span!("block", samples_count = i, first_epoch_num = 1)
                                .entered();
                        }
                        timed += t.elapsed();
                        left -= n;
                        match name {
                            "mllog_otel_sink" => {
                                guard.flush(Duration::from_secs(10));
                            }
                            "mllog_null_sink" => {
                                null_guard.flush(Duration::from_secs(10));
                            }
                            "tracing_opentelemetry_bsp" => {
                                let _ = provider.force_flush();
                            }
                            _ => {}
                        }
                    }
                    timed
                })
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("otel_span_sustained");
    group.measurement_time(Duration::from_secs(3));
    for (name, dispatch) in stacks {
        group.bench_function(name, |b| {
            tracing::dispatcher::with_default(dispatch, || {
                // Blocks live inside a run, as in a real log (and as the layer checks).
                let _run = info_span!("run").entered();
                let mut i = 0u64;
                b.iter(|| {
                    i += 1;
                    let _s = info_span!("block", samples_count = i, first_epoch_num = 1).entered();
                })
            })
        });
    }
    group.finish();

    // The span a training loop opens at rate: `train_step` (traced for our sink: two
    // trace-only records per step, which the OTel sink turns into one span).
    let mut group = c.benchmark_group("otel_train_step_sustained");
    group.measurement_time(Duration::from_secs(3));
    for (name, dispatch) in stacks {
        group.bench_function(name, |b| {
            tracing::dispatcher::with_default(dispatch, || {
                let _run = info_span!("run").entered();
                let _block = info_span!("block").entered();
                let mut i = 0u64;
                b.iter(|| {
                    i += 1;
                    let _s = info_span!("train_step", step = i, samples = 8u64).entered();
                })
            })
        });
    }
    group.finish();

    null_guard.shutdown();
    let report = guard.shutdown();
    let _ = provider.shutdown();
    let o = otel.report();
    eprintln!(
        "mllog_otel_sink: {} spans ended, {} exported, {} dropped (pipeline dropped {})",
        o.spans_ended,
        o.spans_exported,
        o.dropped,
        report.dropped()
    );
    eprintln!(
        "tracing_opentelemetry_bsp: {} spans reached the exporter (the BSP drops the rest on a full queue)",
        theirs.0.load(Ordering::Relaxed)
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
