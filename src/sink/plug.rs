//! How an optional sink gets into a layer: one registration per sink (see
//! `crate::registry::FACTORIES`), one function each, called by `Builder::build` in the order
//! registered. A factory reads its variables from the build's [`Env`], takes what the builder
//! was given for it, and returns its sink (or nothing); the core path never names a sink.
//!
//! A sink reports what it did through [`Sink::status`](super::Sink::status) and the generic
//! [`SinkReport`](crate::SinkReport); a span hook (the segment profiler) through
//! [`SpanHook::detail`].

use std::any::Any;
use std::path::Path;
use std::sync::Arc;

use super::{Delivery, Detail, Sink};
use crate::env::Env;
use crate::submission::Submission;

/// What a factory sees of the build.
#[allow(dead_code)] // each field is read by some of the optional sinks
pub(crate) struct SinkSetup<'a> {
    /// The environment of this build (the process's, or the builder's map).
    pub(crate) env: &'a Env,
    /// Whether this rank writes MLLOG records.
    pub(crate) writes: bool,
    /// This process's rank.
    pub(crate) rank: u32,
    /// The MLLOG file, when the output is one.
    pub(crate) output_file: Option<&'a Path>,
    /// The submission metadata, the environment applied.
    pub(crate) submission: &'a Submission,
    /// What the builder was given for the optional sinks (`Builder::rpd`, ...).
    pub(crate) options: &'a mut Options,
    /// The names of the sinks given to the builder (`Builder::sink`).
    pub(crate) sink_names: &'a [String],
    /// What a sink asks of the layer.
    pub(crate) extras: &'a mut LayerExtras,
}

/// A sink a factory built, and where it goes.
pub(crate) struct Plugged {
    pub(crate) sink: Box<dyn Sink>,
    pub(crate) delivery: Delivery,
    /// Right after the MLLOG output and the checker (a sink that reads the file they write),
    /// instead of after the other sinks.
    pub(crate) after_log: bool,
}

impl Plugged {
    /// A sink after the others, on its own thread (the default [`Delivery`]).
    #[allow(dead_code)] // used by the optional sinks only
    pub(crate) fn isolated(sink: impl Sink) -> Plugged {
        Plugged {
            sink: Box::new(sink),
            delivery: Delivery::default(),
            after_log: false,
        }
    }
}

/// One optional sink's registration: `Ok(None)` when the environment and the builder do not
/// ask for it (or this rank has no use for it).
pub(crate) type Factory = fn(&mut SinkSetup<'_>) -> Result<Option<Plugged>, crate::Error>;

/// Settings given to the builder for optional sinks, by type (one of each).
#[derive(Default)]
pub(crate) struct Options(Vec<Box<dyn Any + Send>>);

impl Options {
    /// Keeps `value`, replacing an earlier one of its type.
    #[allow(dead_code)] // used by the optional sinks' builder methods only
    pub(crate) fn set<T: Any + Send>(&mut self, value: T) {
        self.0.retain(|v| !(**v).is::<T>());
        self.0.push(Box::new(value));
    }

    /// Takes the value of type `T`, if one was given.
    #[allow(dead_code)] // used by the optional sinks' factories only
    pub(crate) fn take<T: Any + Send>(&mut self) -> Option<T> {
        let at = self.0.iter().position(|v| (**v).is::<T>())?;
        self.0.swap_remove(at).downcast::<T>().ok().map(|b| *b)
    }
}

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

/// Spans beyond the MLLOG intervals that a sink wants as trace-only records (OTel's
/// `MLLOG_OTEL_SPANS`).
#[derive(Clone, Default)]
pub(crate) struct TracedSpans(Option<SpanMatcher>);

type SpanMatcher = Arc<dyn Fn(&str) -> bool + Send + Sync>;

impl TracedSpans {
    #[allow(dead_code)] // used by the OpenTelemetry sink only
    pub(crate) fn new(matches: impl Fn(&str) -> bool + Send + Sync + 'static) -> TracedSpans {
        TracedSpans(Some(Arc::new(matches)))
    }

    #[allow(dead_code)]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    #[allow(dead_code)]
    pub(crate) fn matches(&self, name: &str) -> bool {
        self.0.as_ref().is_some_and(|m| m(name))
    }
}

/// What sinks and hooks ask of the layer.
#[derive(Default)]
pub(crate) struct LayerExtras {
    /// Send counted steps as trace-only interval records.
    pub(crate) trace_steps: bool,
    /// Other spans to send as trace-only records.
    pub(crate) traced_spans: TracedSpans,
    /// Called for every span.
    pub(crate) span_hooks: Vec<Arc<dyn SpanHook>>,
}
