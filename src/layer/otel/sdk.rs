//! The layer's side of the OTel sink, compiled with the `otel-sdk` feature only (see the
//! bridge in `super`).

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;
use tracing_core::span::Id;
use tracing_core::Subscriber;
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use opentelemetry::trace::TraceContextExt;
use tracing_core::dispatcher::WeakDispatch;
use tracing_core::field::{Field, Visit};

use crate::record::{OtelFields, TraceParent};

/// Records `otel.name`, `otel.kind`, `otel.status_code` and `otel.status_description` (the
/// fields tracing-opentelemetry honours) into a lazily allocated [`OtelFields`].
pub(crate) struct OtelVisitor<'a>(pub(crate) &'a mut Option<Box<OtelFields>>);

impl OtelVisitor<'_> {
    fn set(&mut self, field: &Field, value: Cow<'_, str>) {
        let name = field.name();
        if !name.starts_with("otel.") {
            return;
        }
        let f = self.0.get_or_insert_with(Box::default);
        let slot = match name {
            "otel.name" => &mut f.name,
            "otel.kind" => &mut f.kind,
            "otel.status_code" => &mut f.status_code,
            "otel.status_description" => &mut f.status_description,
            _ => return,
        };
        *slot = Some(Cow::Owned(value.into_owned()));
    }
}

impl Visit for OtelVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, Cow::Borrowed(value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name().starts_with("otel.") {
            self.set(field, Cow::Owned(format!("{value:?}")));
        }
    }
}

/// The OpenTelemetry span of the nearest enclosing span that has one (tracing-opentelemetry
/// in the same subscriber), as plain ids. `None` without tracing-opentelemetry: a failed
/// downcast per enclosing span.
pub(crate) fn enclosing_parent<S>(
    span: &SpanRef<'_, S>,
    dispatch: &OnceLock<WeakDispatch>,
) -> Option<TraceParent>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let ids: Vec<Id> = span.scope().skip(1).map(|s| s.id()).collect();
    if ids.is_empty() {
        return None;
    }
    let dispatch = dispatch.get()?.upgrade()?;
    ids.iter().find_map(|id| {
        let cx = tracing_opentelemetry::get_otel_context(id, &dispatch)?;
        let sc = cx.span().span_context().clone();
        sc.is_valid().then(|| TraceParent {
            trace_id: sc.trace_id().to_bytes(),
            span_id: sc.span_id().to_bytes(),
            sampled: sc.is_sampled(),
        })
    })
}

/// An opening interval's [`OtelFields`]: its `otel.*` fields and, when `root` (no enclosing
/// interval), the application's enclosing span. `None` (nothing allocated) without either.
pub(crate) fn interval_fields<S>(
    attrs: &tracing_core::span::Attributes<'_>,
    root: Option<&SpanRef<'_, S>>,
    dispatch: &OnceLock<WeakDispatch>,
) -> Option<Box<OtelFields>>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let mut fields = None;
    attrs.record(&mut OtelVisitor(&mut fields));
    if let Some(parent) = root.and_then(|span| enclosing_parent(span, dispatch)) {
        fields.get_or_insert_with(Box::default).parent = Some(parent);
    }
    fields
}

/// A span exported because its name matches `MLLOG_OTEL_SPANS`: kept in its extensions
/// until it closes.
pub(crate) struct TracedSpan {
    ids: crate::record::IntervalIds,
    key: crate::record::Str,
    meta: &'static tracing_core::Metadata<'static>,
}

/// [`super::open_traced`] with the feature: if a run is open and its name matches
/// `MLLOG_OTEL_SPANS`, a trace-only interval start record (for OTel and RPD; never an MLLOG
/// line). Out of line; a non-matching span costs one name comparison per pattern.
#[inline(never)]
pub(crate) fn open_traced_slow<S>(
    shared: &crate::layer::Shared,
    attrs: &tracing_core::span::Attributes<'_>,
    id: &Id,
    ctx: &tracing_subscriber::layer::Context<'_, S>,
) where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    use std::sync::atomic::Ordering;
    let meta = attrs.metadata();
    if !shared.state.run_open.load(Ordering::Relaxed)
        || !shared.traced_spans.matches(meta.name())
        || crate::layer::is_foreign_target(meta)
        || crate::sink::accounting::on_worker_thread()
    {
        return;
    }
    let Some(span) = ctx.span(id) else {
        return;
    };
    let time = crate::record::Timestamp::now();
    // The nearest enclosing interval or exported span.
    let parent = span.scope().skip(1).find_map(|s| {
        s.extensions()
            .get::<TracedSpan>()
            .map(|t| t.ids.id)
            .or_else(|| shared.open_interval_id(s.id().into_u64()))
    });
    let ids = crate::record::IntervalIds {
        id: shared.state.next_id.fetch_add(1, Ordering::Relaxed),
        parent,
    };
    let name = meta.name();
    let mut r = shared.record(
        meta,
        time,
        crate::record::EventType::IntervalStart,
        Cow::Owned(format!("{name}_start")),
        crate::record::Value::Null,
    );
    let mut fields = crate::layer::fields::SpanFields::default();
    attrs.record(&mut fields);
    if let Some(ns) = fields.start_parts(false, &mut r.metadata.fields) {
        r.namespace = ns;
    }
    r.trace_only = true;
    r.interval = Some(ids);
    r.scope = parent;
    r.otel = interval_fields::<S>(attrs, None, &shared.state.dispatch.0);
    shared.pipeline.push(r);
    span.extensions_mut().insert(TracedSpan {
        ids,
        key: Cow::Owned(format!("{name}_stop")),
        meta,
    });
    shared.bucket(id).fetch_add(1, Ordering::Relaxed);
}

/// [`super::close_traced`] with the feature.
pub(crate) fn close_traced_slow<S>(
    shared: &crate::layer::Shared,
    id: &Id,
    span: &SpanRef<'_, S>,
) -> bool
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(t) = span.extensions_mut().remove::<TracedSpan>() else {
        return false;
    };
    shared
        .bucket(id)
        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    let mut r = shared.record(
        t.meta,
        crate::record::Timestamp::now(),
        crate::record::EventType::IntervalEnd,
        t.key,
        crate::record::Value::Null,
    );
    r.trace_only = true;
    r.interval = Some(t.ids);
    r.scope = t.ids.parent;
    shared.pipeline.push(r);
    true
}
