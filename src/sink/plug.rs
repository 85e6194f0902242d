//! How the environment adds an optional sink (`crate::registry::FACTORIES`, one registration
//! per sink, each the sink's own `from_env`), and the span hook through which the segment
//! profiler, which is not a sink, sees the spans on the training thread.
//!
//! A sink, from the environment or given to the builder, then starts the same way
//! ([`Sink::start`](super::Sink::start)) and reports through [`Sink::status`](super::Sink::status)
//! and the generic [`SinkReport`](crate::sink::SinkReport); a span hook through [`SpanHook::detail`].

use super::{Delivery, Detail, Sink};
use crate::env::Env;

/// A sink the environment asks for, and how it runs.
pub(crate) struct EnvSink {
    pub(crate) sink: Box<dyn Sink>,
    pub(crate) delivery: Delivery,
    /// On every rank (each exports its own), rather than on the writing rank only.
    pub(crate) every_rank: bool,
}

impl EnvSink {
    /// A sink on the writing rank, on its own thread (the default [`Delivery`]).
    // Used by the optional sinks only.
    #[cfg_attr(
        not(any(
            feature = "rpd",
            feature = "nvtx",
            feature = "otel-sdk",
            feature = "object-store"
        )),
        allow(dead_code)
    )]
    pub(crate) fn isolated(sink: impl Sink) -> EnvSink {
        EnvSink {
            sink: Box::new(sink),
            delivery: Delivery::default(),
            every_rank: false,
        }
    }
}

/// One optional sink's registration: its `from_env`, `Ok(None)` when the environment does not
/// ask for it. `rank` and the submission are there for the sinks that label what they export.
pub(crate) type Factory =
    fn(&Env, u32, &crate::submission::Submission) -> Result<Option<EnvSink>, crate::Error>;

/// Called by the layer on the training thread for every span it sees (the segment profiler):
/// must return at once unless the span is its business.
pub(crate) trait SpanHook: Send + Sync + 'static {
    /// A span opened; `run_open` is whether the timed run is open.
    fn on_span_open(&self, span_id: u64, name: &'static str, run_open: bool);
    /// A span closed.
    fn on_span_close(&self, span_id: u64);
    /// The pipeline stops: finish what is open.
    fn finish(&self);
    /// Its own report (see [`crate::Guard::detail`]).
    fn detail(&self) -> Detail;
}
