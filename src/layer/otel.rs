//! What the OTel sink needs from the training thread when an interval opens (feature `otel`):
//! the `otel.*` fields of its span, and, for an interval with no enclosing interval, the
//! OpenTelemetry span of the application (tracing-opentelemetry) around it, so that the sink's
//! spans join the application's trace. Runs only when an interval opens or is recorded into,
//! never per step.

use std::borrow::Cow;
use std::fmt;

use opentelemetry::trace::TraceContextExt;
use tracing_core::field::{Field, Visit};
use tracing_core::span::Id;
use tracing_core::Subscriber;
use tracing_subscriber::registry::{LookupSpan, SpanRef};

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
pub(crate) fn enclosing_parent<S>(span: &SpanRef<'_, S>) -> Option<TraceParent>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let ids: Vec<Id> = span.scope().skip(1).map(|s| s.id()).collect();
    if ids.is_empty() {
        return None;
    }
    tracing::dispatcher::get_default(|dispatch| {
        ids.iter().find_map(|id| {
            let cx = tracing_opentelemetry::get_otel_context(id, dispatch)?;
            let sc = cx.span().span_context().clone();
            sc.is_valid().then(|| TraceParent {
                trace_id: sc.trace_id().to_bytes(),
                span_id: sc.span_id().to_bytes(),
                sampled: sc.is_sampled(),
            })
        })
    })
}

/// An opening interval's [`OtelFields`]: its `otel.*` fields and, when `root` (no enclosing
/// interval), the application's enclosing span. `None` (nothing allocated) without either.
pub(crate) fn interval_fields<S>(
    attrs: &tracing_core::span::Attributes<'_>,
    root: Option<&SpanRef<'_, S>>,
) -> Option<Box<OtelFields>>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let mut fields = None;
    attrs.record(&mut OtelVisitor(&mut fields));
    if let Some(parent) = root.and_then(enclosing_parent) {
        fields.get_or_insert_with(Box::default).parent = Some(parent);
    }
    fields
}
