//! [`filter`]: a filter for the whole subscriber that never hides the MLLOG spans and events.
//!
//! A filter on the whole subscriber (`EnvFilter` through `fmt().with_env_filter(..)`, a
//! `LevelFilter` layer, `RUST_LOG`) decides for every layer, this one included: with
//! `RUST_LOG=warn` or `RUST_LOG=hyper=debug`, `init`, `run`, `train_step` and every `mllog!`
//! are disabled and the MLLOG log comes out empty. Wrapping the filter in [`filter`] keeps its
//! decisions for everything else while the spans and events the layer maps always pass.

use std::borrow::Cow;

use tracing_core::span::{Attributes, Id, Record};
use tracing_core::subscriber::Interest;
use tracing_core::{Dispatch, Event, LevelFilter, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

use super::fields::KEY_FIELD;
use super::is_foreign_target;

/// The span names the layer maps by default: the intervals, the step and the warmup span.
const DEFAULT_SPANS: [&str; 7] = [
    "init",
    "run",
    "block",
    "epoch",
    "eval",
    "train_step",
    "warmup",
];

/// Wraps a subscriber-wide filter so that the MLLOG spans and events always pass it, whatever
/// it says; everything else is left to it.
///
/// What always passes: spans named `init`, `run`, `block`, `epoch`, `eval`, `train_step` and
/// `warmup` (more with [`MllogFilter::span`], for renamed or extra intervals) and events with
/// an `mllog.key` field (every `mllog!`), except from the crates whose diagnostics the layer
/// never records. Other layers (`fmt`) see them too, as they would without the filter.
///
/// ```
/// use tracing_subscriber::{prelude::*, EnvFilter};
/// use tracing_mllog::Output;
///
/// let (layer, _guard) = tracing_mllog::MllogLayer::builder()
///     .output(Output::Nowhere)
///     .build()
///     .unwrap();
/// let subscriber = tracing_subscriber::registry()
///     .with(tracing_mllog::filter(EnvFilter::new("warn")))
///     .with(tracing_subscriber::fmt::layer())
///     .with(layer);
/// # let _ = subscriber;
/// ```
pub fn filter<F>(inner: F) -> MllogFilter<F> {
    MllogFilter {
        inner,
        spans: DEFAULT_SPANS.iter().map(|s| Cow::Borrowed(*s)).collect(),
    }
}

/// The filter returned by [`filter`]: a [`Layer`] that forwards everything to the filter it
/// wraps, but enables the MLLOG spans and events itself.
///
/// Without it, `RUST_LOG=warn` (or any `EnvFilter` that does not name this crate's spans)
/// silently empties the MLLOG log: the filter disables `init`, `run` and every `mllog!` for
/// every layer. With it, the wrapped filter still decides for everything else, including
/// what the `fmt` layer prints:
///
/// ```
/// use tracing_mllog::{keys, mllog, sink::MemorySink, MllogLayer};
/// use tracing_subscriber::{prelude::*, EnvFilter};
/// use tracing_mllog::Output;
/// use tracing_mllog::CacheClear;
///
/// let (memory, records) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(memory)
///     .cache_clear(CacheClear::Off)
///     .span_name(tracing_mllog::Interval::Eval, "validate")
///     .build()?;
/// let subscriber = tracing_subscriber::registry()
///     // a renamed interval span must be named here too
///     .with(tracing_mllog::filter(EnvFilter::new("warn")).span("validate"))
///     .with(layer);
/// tracing::subscriber::with_default(subscriber, || {
///     let _eval = tracing::info_span!("validate").entered();
///     mllog!(keys::EVAL_ACCURACY, 0.5);
///     tracing::info!("filtered out, as `warn` says");
/// });
/// guard.shutdown();
/// assert_eq!(records.keys(), ["eval_start", "eval_accuracy", "eval_stop"]);
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Debug)]
pub struct MllogFilter<F> {
    inner: F,
    spans: Vec<Cow<'static, str>>,
}

impl<F> MllogFilter<F> {
    /// Lets spans of this name pass too: a span renamed with
    /// [`crate::Builder::span_name`] or an interval added with [`crate::Builder::interval`].
    pub fn span(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.spans.push(name.into());
        self
    }

    /// The wrapped filter.
    pub fn inner(&self) -> &F {
        &self.inner
    }

    fn is_mllog(&self, meta: &Metadata<'_>) -> bool {
        let ours = if meta.is_event() {
            meta.fields().field(KEY_FIELD).is_some()
        } else {
            self.spans.iter().any(|s| *s == meta.name())
        };
        ours && !is_foreign_target(meta)
    }
}

impl<S, F> Layer<S> for MllogFilter<F>
where
    S: Subscriber,
    F: Layer<S>,
{
    fn on_register_dispatch(&self, subscriber: &Dispatch) {
        self.inner.on_register_dispatch(subscriber);
    }
    fn on_layer(&mut self, subscriber: &mut S) {
        self.inner.on_layer(subscriber);
    }
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.is_mllog(meta) {
            // The inner filter still learns of the callsite (it may keep per-callsite state).
            let _ = self.inner.register_callsite(meta);
            Interest::always()
        } else {
            self.inner.register_callsite(meta)
        }
    }
    fn enabled(&self, meta: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        self.is_mllog(meta) || self.inner.enabled(meta, ctx)
    }
    fn event_enabled(&self, event: &Event<'_>, ctx: Context<'_, S>) -> bool {
        self.is_mllog(event.metadata()) || self.inner.event_enabled(event, ctx)
    }
    fn max_level_hint(&self) -> Option<LevelFilter> {
        // MLLOG spans may be at any level (`debug_span!("train_step")`): a hint below theirs
        // would disable them before any filter is asked, unseen. Every callsite is then
        // registered once and the wrapped filter's `never` is cached for it: a disabled
        // `trace!` costs one more load at its call (its cached interest).
        Some(LevelFilter::TRACE)
    }
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        self.inner.on_new_span(attrs, id, ctx);
    }
    fn on_record(&self, span: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        self.inner.on_record(span, values, ctx);
    }
    fn on_follows_from(&self, span: &Id, follows: &Id, ctx: Context<'_, S>) {
        self.inner.on_follows_from(span, follows, ctx);
    }
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        self.inner.on_event(event, ctx);
    }
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.inner.on_enter(id, ctx);
    }
    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        self.inner.on_exit(id, ctx);
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.inner.on_close(id, ctx);
    }
    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, S>) {
        self.inner.on_id_change(old, new, ctx);
    }
}
