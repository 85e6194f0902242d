//! Cost on the calling thread of (a) an emitted MLLOG event and (b) a `train_step` span that
//! emits no line, beside the same work through a bare `Registry` and through
//! tracing-subscriber's JSON `fmt` layer, in the same run.
//!
//! `cargo bench --bench hot_path`. Our layer's worker writes real `:::MLLOG` lines to
//! `io::sink()`, so the sustained numbers include backpressure from the worker when it is the
//! bottleneck.

use criterion::{criterion_group, criterion_main, Criterion};
use tracing::info_span;
use tracing_mllog::{mllog, train_step, MllogLayer};

#[path = "support/stacks.rs"]
mod support;

fn bench(c: &mut Criterion) {
    let stacks = support::stacks(MllogLayer::builder());
    let mut events = c.benchmark_group("event_3_fields");
    for (name, dispatch, _) in &stacks {
        events.bench_function(*name, |b| {
            tracing::dispatcher::with_default(dispatch, || {
                let mut i = 0u64;
                b.iter(|| {
                    i += 1;
                    mllog!("train_loss", 1.25, samples_count = i, step = i);
                })
            })
        });
    }
    events.finish();

    // A counted step inside the entered run, opened both ways: `train_step!` (a root span) and
    // `info_span!` (a child of `run`, which costs the `Registry` a reference on the parent).
    let mut spans = c.benchmark_group("train_step_span_2_fields");
    for (name, dispatch, _) in &stacks {
        tracing::dispatcher::with_default(dispatch, || {
            let _run = info_span!("run").entered();
            let mut i = 0u64;
            spans.bench_function(format!("{name}, train_step!"), |b| {
                b.iter(|| {
                    i += 1;
                    let _s = train_step!(step = i, samples = 8u64).entered();
                })
            });
            spans.bench_function(format!("{name}, child of run"), |b| {
                b.iter(|| {
                    i += 1;
                    let _s = info_span!("train_step", step = i, samples = 8u64).entered();
                })
            });
        });
    }
    spans.finish();
    drop(stacks);
}

criterion_group!(benches, bench);
criterion_main!(benches);
