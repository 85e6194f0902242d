//! [`MllogLayer`]: spans become MLLOG intervals, events with an `mllog.key` field become
//! `POINT_IN_TIME` records.
//!
//! The layer carries its own per-layer filter ([`Gate`]): callsites that are not ours get
//! `Interest::never` from it, so they cost this layer nothing and other layers still see them;
//! on a rank that does not write, every callsite is `never`, so with no other layer installed
//! tracing disables them all at the callsite.

mod builder;
pub(crate) mod fields;
mod rank;

pub use builder::{Builder, Interval};
pub use rank::{detect_rank, RANK_VARIABLES};

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use tracing_core::span::{Attributes, Id, Record as SpanValues};
use tracing_core::subscriber::Interest;
use tracing_core::{Event, Metadata as CallsiteMeta, Subscriber};
use tracing_subscriber::filter::Filtered;
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::keys;
use crate::pipeline::{on_worker_thread, Pipeline};
use crate::record::{EventType, IntervalIds, Metadata, Record, Str, Timestamp, Value};
use fields::{Fields, KEY_FIELD, STATUS_FIELD, VALUE_FIELD};

/// Which span names become which interval keys.
#[derive(Clone, Debug)]
pub(crate) struct IntervalSpec {
    pub(crate) span_name: Cow<'static, str>,
    pub(crate) start_key: Str,
    pub(crate) stop_key: Str,
    pub(crate) kind: Interval,
}

/// Targets whose spans and events are never ours, whatever their names: the crates our sinks
/// use, and this crate itself. Keeps their diagnostics out of the MLLOG stream.
const FOREIGN_TARGETS: &[&str] = &[
    "tracing_mllog",
    "object_store",
    "reqwest",
    "hyper",
    "h2",
    "tonic",
    "tower",
    "opentelemetry",
    "rusqlite",
];

pub(crate) struct Shared {
    pub(crate) pipeline: Pipeline,
    pub(crate) intervals: Vec<IntervalSpec>,
    pub(crate) namespace: Str,
    pub(crate) root_dir: Option<String>,
    pub(crate) cache_clear: bool,
    /// Records written right after `init_start` (submission metadata, `config_filename`).
    pub(crate) after_init_start: Vec<(Str, Value)>,
    pub(crate) writes: bool,
    /// Whether any sink receives records in this process (false on a non-writing rank
    /// without every-rank sinks).
    pub(crate) active: bool,
    pub(crate) next_id: AtomicU64,
    pub(crate) run_open: AtomicBool,
}

impl Shared {
    fn interval_for(&self, meta: &CallsiteMeta<'_>) -> Option<usize> {
        if !meta.is_span() {
            return None;
        }
        let name = meta.name();
        self.intervals.iter().position(|s| s.span_name == name)
    }

    fn is_ours(&self, meta: &CallsiteMeta<'_>) -> bool {
        if !self.active {
            return false;
        }
        let target = meta.target();
        if FOREIGN_TARGETS.iter().any(|t| {
            target.starts_with(t) && target[t.len()..].chars().next().is_none_or(|c| c == ':')
        }) {
            return false;
        }
        if meta.is_event() {
            meta.fields().field(KEY_FIELD).is_some()
        } else {
            self.interval_for(meta).is_some()
        }
    }

    /// `file` as the caller wrote it, relative to the configured root directory.
    fn file_of(&self, meta: &'static CallsiteMeta<'static>) -> Str {
        let file = meta.file().unwrap_or("<unknown>");
        if let Some(root) = &self.root_dir {
            if let Some(rest) = file.strip_prefix(root.as_str()) {
                return Cow::Borrowed(rest.trim_start_matches('/'));
            }
        }
        Cow::Borrowed(file)
    }

    fn record(
        &self,
        meta: &'static CallsiteMeta<'static>,
        time: Timestamp,
        event_type: EventType,
        key: Str,
        value: Value,
    ) -> Record {
        Record {
            namespace: self.namespace.clone(),
            time,
            event_type,
            key,
            value,
            metadata: Metadata {
                file: Some(self.file_of(meta)),
                lineno: Some(meta.line().unwrap_or(0)),
                fields: smallvec::SmallVec::new(),
            },
            interval: None,
            scope: None,
            trace_only: false,
            tid: rank::thread_id(),
        }
    }
}

/// The per-layer filter: ours or not, decided once per callsite.
pub(crate) struct Gate {
    shared: Arc<Shared>,
}

impl<S> Filter<S> for Gate {
    fn enabled(&self, meta: &CallsiteMeta<'_>, _cx: &Context<'_, S>) -> bool {
        self.shared.is_ours(meta)
    }

    fn callsite_enabled(&self, meta: &'static CallsiteMeta<'static>) -> Interest {
        if self.shared.is_ours(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }
}

/// An interval span that is open.
struct OpenInterval {
    spec: usize,
    ids: IntervalIds,
    fields: Fields,
}

/// Turns our spans and events into records.
pub(crate) struct Core {
    shared: Arc<Shared>,
}

impl<S> Layer<S> for Core
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if on_worker_thread() {
            return;
        }
        let meta = attrs.metadata();
        let Some(spec_index) = self.shared.interval_for(meta) else {
            return;
        };
        let time = Timestamp::now();
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let parent = span
            .scope()
            .skip(1)
            .find_map(|s| s.extensions().get::<OpenInterval>().map(|o| o.ids.id));
        let ids = IntervalIds {
            id: self.shared.next_id.fetch_add(1, Ordering::Relaxed),
            parent,
        };
        let shared = &*self.shared;
        let spec = &shared.intervals[spec_index];
        if spec.kind == Interval::Init && shared.cache_clear {
            let mut r = shared.record(
                meta,
                time,
                EventType::PointInTime,
                Cow::Borrowed(keys::CACHE_CLEAR),
                Value::Bool(true),
            );
            r.scope = parent;
            shared.pipeline.push(r);
        }
        if spec.kind == Interval::Run {
            shared.run_open.store(true, Ordering::Relaxed);
        }
        let mut start = shared.record(
            meta,
            time,
            EventType::IntervalStart,
            spec.start_key.clone(),
            Value::Null,
        );
        start.interval = Some(ids);
        start.scope = parent;
        let skip: &[&str] = if spec.kind == Interval::Run {
            &[VALUE_FIELD, STATUS_FIELD]
        } else {
            &[VALUE_FIELD]
        };
        let parts = fields.clone().into_parts(skip);
        start.metadata.fields = parts.metadata;
        if let Some(ns) = parts.namespace {
            start.namespace = ns;
        }
        shared.pipeline.push(start);
        if spec.kind == Interval::Init {
            for (key, value) in &shared.after_init_start {
                let mut r = shared.record(
                    meta,
                    time,
                    EventType::PointInTime,
                    key.clone(),
                    value.clone(),
                );
                r.scope = Some(ids.id);
                shared.pipeline.push(r);
            }
        }
        span.extensions_mut().insert(OpenInterval {
            spec: spec_index,
            ids,
            fields,
        });
    }

    fn on_record(&self, id: &Id, values: &SpanValues<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(open) = span.extensions_mut().get_mut::<OpenInterval>() {
                values.record(&mut open.fields);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if on_worker_thread() {
            return;
        }
        let time = Timestamp::now();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let parts = fields.into_parts(&[]);
        let Some(key) = parts.key else {
            return;
        };
        let shared = &*self.shared;
        let mut r = shared.record(
            event.metadata(),
            time,
            EventType::PointInTime,
            key,
            parts.value,
        );
        r.metadata.fields = parts.metadata;
        if let Some(ns) = parts.namespace {
            r.namespace = ns;
        }
        r.scope = ctx.event_scope(event).and_then(|mut scope| {
            scope.find_map(|s| s.extensions().get::<OpenInterval>().map(|o| o.ids.id))
        });
        shared.pipeline.push(r);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let time = Timestamp::now();
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(open) = span.extensions_mut().remove::<OpenInterval>() else {
            return;
        };
        let shared = &*self.shared;
        let spec = &shared.intervals[open.spec];
        let said_success =
            open.fields.get(STATUS_FIELD).and_then(Value::as_str) == Some(keys::SUCCESS);
        let skip: &[&str] = if spec.kind == Interval::Run {
            &[STATUS_FIELD]
        } else {
            &[]
        };
        let parts = open.fields.into_parts(skip);
        let mut end = shared.record(
            span.metadata(),
            time,
            EventType::IntervalEnd,
            spec.stop_key.clone(),
            parts.value,
        );
        end.interval = Some(open.ids);
        end.scope = open.ids.parent;
        end.metadata.fields = parts.metadata;
        if let Some(ns) = parts.namespace {
            end.namespace = ns;
        }
        if spec.kind == Interval::Run {
            // `success` only when the run said so and did not unwind; anything else is an
            // aborted run, never a missing status.
            let status = if said_success && !std::thread::panicking() {
                keys::SUCCESS
            } else {
                keys::ABORTED
            };
            end.metadata.fields.push((
                Cow::Borrowed(keys::STATUS),
                Value::Str(Cow::Borrowed(status)),
            ));
            shared.run_open.store(false, Ordering::Relaxed);
        }
        shared.pipeline.push(end);
    }
}

/// The layer returned by [`MllogLayer::builder`]: add it to a `tracing_subscriber::Registry`.
///
/// ```no_run
/// use tracing_subscriber::prelude::*;
///
/// let (layer, _guard) = tracing_mllog::MllogLayer::builder()
///     .output_file("results/mllog.txt")
///     .build()
///     .expect("MLLOG output");
/// tracing_subscriber::registry().with(layer).init();
/// ```
pub struct MllogLayer<S> {
    inner: Filtered<Core, Gate, S>,
    shared: Arc<Shared>,
}

impl MllogLayer<tracing_subscriber::Registry> {
    /// Starts configuring a layer. (The subscriber type is inferred at [`Builder::build`].)
    pub fn builder() -> Builder {
        Builder::default()
    }
}

impl<S> MllogLayer<S> {
    pub(crate) fn new(shared: Arc<Shared>) -> MllogLayer<S> {
        let core = Core {
            shared: shared.clone(),
        };
        let gate = Gate {
            shared: shared.clone(),
        };
        MllogLayer {
            inner: Filtered::new(core, gate),
            shared,
        }
    }

    /// Whether this process writes MLLOG lines (its rank is the writing rank, or all ranks write).
    pub fn writes(&self) -> bool {
        self.shared.writes
    }

    /// Whether a `run` span is open right now.
    pub fn run_open(&self) -> bool {
        self.shared.run_open.load(Ordering::Relaxed)
    }
}

impl<S> Layer<S> for MllogLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_register_dispatch(&self, subscriber: &tracing_core::Dispatch) {
        self.inner.on_register_dispatch(subscriber)
    }
    fn on_layer(&mut self, subscriber: &mut S) {
        self.inner.on_layer(subscriber)
    }
    fn register_callsite(&self, meta: &'static CallsiteMeta<'static>) -> Interest {
        self.inner.register_callsite(meta)
    }
    fn enabled(&self, meta: &CallsiteMeta<'_>, ctx: Context<'_, S>) -> bool {
        self.inner.enabled(meta, ctx)
    }
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        self.inner.on_new_span(attrs, id, ctx)
    }
    fn max_level_hint(&self) -> Option<tracing_core::LevelFilter> {
        self.inner.max_level_hint()
    }
    fn on_record(&self, span: &Id, values: &SpanValues<'_>, ctx: Context<'_, S>) {
        self.inner.on_record(span, values, ctx)
    }
    fn on_follows_from(&self, span: &Id, follows: &Id, ctx: Context<'_, S>) {
        self.inner.on_follows_from(span, follows, ctx)
    }
    fn event_enabled(&self, event: &Event<'_>, ctx: Context<'_, S>) -> bool {
        self.inner.event_enabled(event, ctx)
    }
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        self.inner.on_event(event, ctx)
    }
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.inner.on_enter(id, ctx)
    }
    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        self.inner.on_exit(id, ctx)
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        self.inner.on_close(id, ctx)
    }
    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, S>) {
        self.inner.on_id_change(old, new, ctx)
    }
    #[doc(hidden)]
    unsafe fn downcast_raw(&self, id: std::any::TypeId) -> Option<*const ()> {
        // SAFETY: forwarded unchanged to the wrapped layer, which upholds the contract; the
        // per-layer filter machinery finds its `FilterId` through this call.
        unsafe { self.inner.downcast_raw(id) }
    }
}
