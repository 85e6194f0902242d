//! Spans under construction. With the sink's own span queue (providers it built) a span is
//! assembled straight into the SDK's `SpanData` and handed to the queue when it ends: no SDK
//! span, context, lock or sampler per span, which is most of the SDK's cost. With your own
//! providers it goes through their tracer, so your sampler and processors see it.

use std::borrow::Cow;
use std::time::SystemTime;

use opentelemetry::trace::{
    Event, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
    Tracer as _,
};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{
    IdGenerator, RandomIdGenerator, SdkTracer, SpanData, SpanEvents, SpanLinks,
};

use super::processor::SpanQueue;

/// Where the sink's spans go.
pub(super) enum Spans {
    /// The sink's own queue: spans built as `SpanData`.
    Direct {
        queue: SpanQueue,
        scope: InstrumentationScope,
        trace_id: TraceId,
        ids: RandomIdGenerator,
    },
    /// Your providers: spans through their tracer.
    Sdk(SdkTracer),
}

/// A span that has started and not ended.
pub(super) enum LiveSpan {
    Direct(Box<DirectSpan>),
    Sdk(Context),
}

/// What a new span hangs on.
pub(super) enum Parent<'a> {
    /// None: a root (of the sink's own trace).
    None,
    /// An open span of this sink.
    Local(&'a LiveSpan),
    /// A span elsewhere: the application's (tracing-opentelemetry) or a launcher's
    /// (`TRACEPARENT`).
    Remote(&'a SpanContext),
}

pub(super) struct DirectSpan {
    context: SpanContext,
    parent: SpanId,
    parent_is_remote: bool,
    kind: SpanKind,
    name: Cow<'static, str>,
    start: SystemTime,
    attributes: Vec<KeyValue>,
    events: Vec<Event>,
    status: Status,
}

impl Spans {
    pub(super) fn start(
        &self,
        name: Cow<'static, str>,
        start: SystemTime,
        attributes: Vec<KeyValue>,
        parent: Parent<'_>,
        kind: SpanKind,
    ) -> LiveSpan {
        match self {
            Spans::Direct { trace_id, ids, .. } => {
                // A child is in its parent's trace (with its trace state); a root in the
                // sink's.
                let (trace, parent, remote, state) = match parent {
                    Parent::Local(LiveSpan::Direct(p)) => (
                        p.context.trace_id(),
                        p.context.span_id(),
                        false,
                        p.context.trace_state().clone(),
                    ),
                    Parent::Remote(sc) => {
                        (sc.trace_id(), sc.span_id(), true, sc.trace_state().clone())
                    }
                    _ => (*trace_id, SpanId::INVALID, false, TraceState::default()),
                };
                LiveSpan::Direct(Box::new(DirectSpan {
                    context: SpanContext::new(
                        trace,
                        ids.new_span_id(),
                        TraceFlags::SAMPLED,
                        false,
                        state,
                    ),
                    parent,
                    parent_is_remote: remote,
                    kind,
                    name,
                    start,
                    attributes,
                    events: Vec::new(),
                    status: Status::Unset,
                }))
            }
            Spans::Sdk(tracer) => {
                let parent = match parent {
                    Parent::Local(LiveSpan::Sdk(cx)) => cx.clone(),
                    Parent::Remote(sc) => Context::new().with_remote_span_context(sc.clone()),
                    _ => Context::new(),
                };
                let span = tracer
                    .span_builder(name)
                    .with_kind(kind)
                    .with_start_time(start)
                    .with_attributes(attributes)
                    .start_with_context(tracer, &parent);
                LiveSpan::Sdk(parent.with_span(span))
            }
        }
    }

    pub(super) fn end(&self, span: LiveSpan, end: SystemTime) {
        match (self, span) {
            (Spans::Direct { queue, scope, .. }, LiveSpan::Direct(span)) => {
                let span = *span;
                let mut events = SpanEvents::default();
                events.events = span.events;
                queue.send(SpanData {
                    span_context: span.context,
                    parent_span_id: span.parent,
                    parent_span_is_remote: span.parent_is_remote,
                    span_kind: span.kind,
                    name: span.name,
                    start_time: span.start,
                    end_time: end,
                    attributes: span.attributes,
                    dropped_attributes_count: 0,
                    events,
                    links: SpanLinks::default(),
                    status: span.status,
                    instrumentation_scope: scope.clone(),
                });
            }
            (_, LiveSpan::Sdk(cx)) => cx.span().end_with_timestamp(end),
            // A span outlives the backend that started it only if the sink swapped backends,
            // which it never does.
            (Spans::Sdk(_), LiveSpan::Direct(_)) => {}
        }
    }
}

impl LiveSpan {
    /// Renames the span (`otel.name` recorded after it started: SDK spans only keep the
    /// first name they were given, so this is for the sink's own spans).
    pub(super) fn set_name(&mut self, name: Cow<'static, str>) {
        match self {
            LiveSpan::Direct(s) => s.name = name,
            LiveSpan::Sdk(cx) => cx.span().update_name(name),
        }
    }

    pub(super) fn add_attributes(&mut self, attributes: Vec<KeyValue>) {
        match self {
            LiveSpan::Direct(s) => s.attributes.extend(attributes),
            LiveSpan::Sdk(cx) => cx.span().set_attributes(attributes),
        }
    }

    pub(super) fn set_status(&mut self, status: Status) {
        match self {
            LiveSpan::Direct(s) => s.status = status,
            LiveSpan::Sdk(cx) => cx.span().set_status(status),
        }
    }

    pub(super) fn add_event(
        &mut self,
        name: Cow<'static, str>,
        time: SystemTime,
        attributes: Vec<KeyValue>,
    ) {
        match self {
            LiveSpan::Direct(s) => s.events.push(Event::new(name, time, attributes, 0)),
            LiveSpan::Sdk(cx) => cx.span().add_event_with_timestamp(name, time, attributes),
        }
    }
}
