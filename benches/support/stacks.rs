//! The three subscriber stacks the hot-path comparisons measure side by side: a bare
//! `Registry`, tracing-subscriber's JSON `fmt` layer and ours, each writing to `io::sink()`,
//! and the step of an async training loop. Shared by `benches/hot_path.rs`,
//! `examples/compare.rs` and `examples/budgets.rs` (through `#[path]`), so that the criterion
//! numbers, the comparison table and the budgets measure the same thing.

use tracing::Dispatch;
use tracing_mllog::Output;
use tracing_subscriber::prelude::*;

/// `(name, dispatch, guard)` for each stack; ours is built from `builder`, writing to
/// `io::sink()`, with live checking off (the workloads are not runs: a compliance report at
/// shutdown would only clutter the output). Keep the guards alive while measuring.
#[allow(dead_code)]
pub fn stacks(
    builder: tracing_mllog::Builder,
) -> Vec<(&'static str, Dispatch, Option<tracing_mllog::Guard>)> {
    let (layer, guard) = builder
        .output(Output::writer(std::io::sink()))
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .build()
        .expect("layer");
    vec![
        (
            "registry",
            Dispatch::new(tracing_subscriber::registry()),
            None,
        ),
        (
            "fmt_json",
            Dispatch::new(
                tracing_subscriber::registry().with(
                    tracing_subscriber::fmt::layer()
                        .json()
                        .with_writer(std::io::sink),
                ),
            ),
            None,
        ),
        (
            "mllog",
            Dispatch::new(tracing_subscriber::registry().with(layer)),
            Some(guard),
        ),
    ]
}

/// One step of an async training loop, on the calling thread: a future instrumented with its
/// `train_step!` span, polled until done; it yields once (as a step awaiting its data does),
/// so the span is entered and exited twice.
#[allow(dead_code)]
pub fn async_step(step: u64) {
    use std::future::Future;
    use tracing::Instrument;

    /// Pending once, then ready.
    struct YieldOnce(bool);

    impl Future for YieldOnce {
        type Output = ();
        fn poll(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<()> {
            if std::mem::replace(&mut self.0, true) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        }
    }

    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let future = YieldOnce(false).instrument(tracing_mllog::train_step!(step, samples = 8u64));
    let mut future = std::pin::pin!(future);
    while future.as_mut().poll(&mut cx).is_pending() {}
}
