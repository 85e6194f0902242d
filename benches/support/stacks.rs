//! The three subscriber stacks the hot-path comparisons measure side by side: a bare
//! `Registry`, tracing-subscriber's JSON `fmt` layer and ours, each writing to `io::sink()`.
//! Shared by `benches/hot_path.rs` and `examples/compare.rs` (through `#[path]`), so that the
//! criterion numbers and the comparison table measure the same thing.

use tracing::Dispatch;
use tracing_subscriber::prelude::*;

/// `(name, dispatch, guard)` for each stack; ours is built from `builder`, writing to
/// `io::sink()`, with live checking off (the workloads are not runs: a compliance report at
/// shutdown would only clutter the output). Keep the guards alive while measuring.
pub fn stacks(
    builder: tracing_mllog::Builder,
) -> Vec<(&'static str, Dispatch, Option<tracing_mllog::Guard>)> {
    let (layer, guard) = builder
        .writer(std::io::sink())
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
