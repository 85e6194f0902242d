//! What the OTel sink needs from the training thread, and the one place the layer's
//! `otel-sdk` feature is decided: the layer calls the bridge below ([`OtelDispatch`],
//! [`IntervalOtel`], [`open_traced`], [`close_traced`]) whatever the features, and without
//! the feature each is empty and costs nothing.
//!
//! With it: when an interval opens, the `otel.*` fields of its span and, for an interval with
//! no enclosing interval, the OpenTelemetry span of the application (tracing-opentelemetry)
//! around it, so that the sink's spans join the application's trace; and the other spans
//! exported by name (`MLLOG_OTEL_SPANS`). Runs only when an interval opens or is recorded
//! into, never per step.

use tracing_core::span::{Attributes, Id, Record as SpanValues};
use tracing_core::Subscriber;
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use crate::record::TracedRecord;
#[cfg(feature = "otel-sdk")]
use sdk::{close_traced_slow, interval_fields, open_traced_slow, OtelVisitor};

#[cfg(feature = "otel-sdk")]
mod sdk;

/// The subscriber, to ask tracing-opentelemetry for an enclosing span's context (inside a
/// hook, `dispatcher::get_default` gives no subscriber).
#[derive(Default)]
pub(crate) struct OtelDispatch(
    #[cfg(feature = "otel-sdk")] std::sync::OnceLock<tracing_core::dispatcher::WeakDispatch>,
);

impl OtelDispatch {
    /// Remembers the subscriber the layer is part of (the first one told wins).
    #[cfg_attr(not(feature = "otel-sdk"), allow(unused_variables))]
    pub(crate) fn set(&self, dispatch: &tracing_core::Dispatch) {
        #[cfg(feature = "otel-sdk")]
        let _ = self.0.set(dispatch.downgrade());
    }
}

/// What an open interval carries for the OTel sink: its `otel.*` fields and the
/// application's enclosing span, allocated only when there is any.
#[derive(Clone, Default)]
pub(crate) struct IntervalOtel(#[cfg(feature = "otel-sdk")] Option<Box<crate::record::OtelFields>>);

impl IntervalOtel {
    /// An opening interval's: its `otel.*` fields and, when `root` (no enclosing interval),
    /// the application's enclosing span.
    #[cfg_attr(not(feature = "otel-sdk"), allow(unused_variables))]
    #[inline]
    pub(crate) fn open<S>(
        attrs: &Attributes<'_>,
        root: Option<&SpanRef<'_, S>>,
        dispatch: &OtelDispatch,
    ) -> IntervalOtel
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        #[cfg(feature = "otel-sdk")]
        return IntervalOtel(interval_fields(attrs, root, &dispatch.0));
        #[cfg(not(feature = "otel-sdk"))]
        IntervalOtel()
    }

    /// Fields recorded into the span after it opened.
    #[cfg_attr(not(feature = "otel-sdk"), allow(unused_variables))]
    pub(crate) fn record(&mut self, values: &SpanValues<'_>) {
        #[cfg(feature = "otel-sdk")]
        values.record(&mut OtelVisitor(&mut self.0));
    }

    /// Puts a copy on one of the interval's records (its start, the `cache_clear` before it).
    #[cfg_attr(not(feature = "otel-sdk"), allow(unused_variables))]
    pub(crate) fn copy_to(&self, record: &mut TracedRecord) {
        #[cfg(feature = "otel-sdk")]
        record.otel.clone_from(&self.0);
    }

    /// Puts it on the interval's end record.
    #[cfg_attr(not(feature = "otel-sdk"), allow(unused_variables))]
    pub(crate) fn move_to(self, record: &mut TracedRecord) {
        #[cfg(feature = "otel-sdk")]
        {
            record.otel = self.0;
        }
    }
}

/// A span that is none of ours opens: if spans are exported by name (`MLLOG_OTEL_SPANS`), a
/// run is open and its name matches, a trace-only interval start record.
#[cfg_attr(not(feature = "otel-sdk"), allow(unused_variables))]
#[inline]
pub(super) fn open_traced<S>(
    shared: &super::Shared,
    attrs: &Attributes<'_>,
    id: &Id,
    ctx: &tracing_subscriber::layer::Context<'_, S>,
) where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    #[cfg(feature = "otel-sdk")]
    if !shared.traced_spans.is_empty() {
        open_traced_slow(shared, attrs, id, ctx);
    }
}

/// A span that may be an exported one closes: its trace-only end record. Whether it was one.
#[cfg_attr(not(feature = "otel-sdk"), allow(unused_variables))]
#[inline]
pub(super) fn close_traced<S>(shared: &super::Shared, id: &Id, span: &SpanRef<'_, S>) -> bool
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    #[cfg(feature = "otel-sdk")]
    return close_traced_slow(shared, id, span);
    #[cfg(not(feature = "otel-sdk"))]
    false
}
