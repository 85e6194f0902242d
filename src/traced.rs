//! [`TracedRecord`]: an MLLOG record with what the layer knows of it beyond the line (the
//! interval it pairs with, the interval it happened in, the thread, OpenTelemetry details),
//! which the tracing sinks (OpenTelemetry, RPD, NVTX) read and the MLLOG file never writes.
//! `mllog-core`'s [`Record`] is the MLLOG record alone; this is the layer's.

use std::ops::{Deref, DerefMut};

use crate::record::{Record, Str};

/// What every sink receives: the MLLOG [`Record`] (reached through `Deref`: `record.key`,
/// `record.to_line()`), and beside it what the layer knows that the line does not say.
///
/// A record that was not made by the layer (a parsed line pushed through a
/// [`RecordFeed`](crate::RecordFeed)) has none of it: no ids, no scope, thread 0.
///
/// ```
/// use tracing_mllog::record::{IntervalIds, Record, TracedRecord};
/// use tracing_mllog::Value;
/// use tracing_mllog::record::EventType;
///
/// let line = Record::event("block_start", Value::Null)
///     .with_event_type(EventType::IntervalStart)
///     .at_millis(10);
/// let mut block = TracedRecord::from(line.clone());
/// block.interval = Some(IntervalIds { id: 2, parent: Some(1) });
/// block.scope = Some(1);
/// assert_eq!(block.key, "block_start"); // the record's own fields, through `Deref`
/// assert_eq!(block.to_line(), line.to_line()); // not part of the line
/// assert_ne!(block, TracedRecord::from(line));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct TracedRecord {
    /// The MLLOG record.
    pub record: Record,
    /// Interval pairing, for interval records made by the layer.
    pub interval: Option<IntervalIds>,
    /// The innermost interval open around this record on its thread (for a point record: the
    /// interval it happened in; for an interval record: the same as `interval.parent`), among
    /// the intervals of the layer that made the record: each layer numbers and scopes its own.
    pub scope: Option<u64>,
    /// A record for tracing sinks only (OTel, RPD), not an MLLOG line: e.g. a sampled
    /// `train_step` interval. The MLLOG file and the compliance checker skip it.
    pub trace_only: bool,
    /// OS thread id of the thread that produced the record (0 when unknown, e.g. parsed).
    pub tid: u32,
    /// OpenTelemetry details of an interval record (see [`OtelFields`]); boxed, and `None`
    /// unless the span had any.
    pub otel: Option<Box<OtelFields>>,
}

impl TracedRecord {
    /// An empty record, for the pipeline's pool.
    pub(crate) fn empty() -> TracedRecord {
        TracedRecord::from(Record::empty())
    }

    /// Clears it for reuse, keeping the record's buffers ([`Record::clear`]).
    pub fn clear(&mut self) {
        self.record.clear();
        self.interval = None;
        self.scope = None;
        self.trace_only = false;
        self.tid = 0;
        self.otel = None;
    }
}

impl From<Record> for TracedRecord {
    /// A record with nothing known beyond its line.
    fn from(record: Record) -> TracedRecord {
        TracedRecord {
            record,
            interval: None,
            scope: None,
            trace_only: false,
            tid: 0,
            otel: None,
        }
    }
}

impl Deref for TracedRecord {
    type Target = Record;

    fn deref(&self) -> &Record {
        &self.record
    }
}

impl DerefMut for TracedRecord {
    fn deref_mut(&mut self) -> &mut Record {
        &mut self.record
    }
}

/// The MLLOG line (see [`Record::to_line`]).
impl std::fmt::Display for TracedRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.record.fmt(f)
    }
}

/// The pairing of an interval record: its own id and its enclosing interval's id, so that sinks
/// that need pairing (OpenTelemetry, RPD) do not have to re-derive it from keys.
///
/// The layer sets it on [`TracedRecord::interval`]; it is never written to the MLLOG line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IntervalIds {
    /// Unique per interval within one process; the start and end records share it.
    pub id: u64,
    /// The enclosing interval (e.g. `run` for a `block`), if any.
    pub parent: Option<u64>,
}

/// An OpenTelemetry span an interval continues, as plain data (W3C trace-context ids).
///
/// Part of [`OtelFields::parent`]; a sink that exports spans makes the interval a child of it.
/// Like the rest of [`TracedRecord::otel`], it tells sinks apart records whose MLLOG lines are
/// equal, and a recycled record ([`TracedRecord::clear`]) forgets it.
///
/// ```
/// use tracing_mllog::record::{OtelFields, Record, TraceParent, TracedRecord};
/// use tracing_mllog::Value;
/// use tracing_mllog::record::EventType;
///
/// let parent = TraceParent { trace_id: [0xab; 16], span_id: [0xcd; 8], sampled: true };
/// let plain = TracedRecord::from(
///     Record::event("run_start", Value::Null).with_event_type(EventType::IntervalStart).at_millis(1),
/// );
/// let mut traced = plain.clone();
/// traced.otel = Some(Box::new(OtelFields { parent: Some(parent), ..Default::default() }));
/// assert_ne!(traced, plain);
/// assert_eq!(traced.to_line(), plain.to_line()); // not part of the MLLOG line
/// traced.clear();
/// assert!(traced.otel.is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TraceParent {
    /// Trace id (16 bytes, big-endian as in `traceparent`).
    pub trace_id: [u8; 16],
    /// Span id of the parent span.
    pub span_id: [u8; 8],
    /// Whether the parent was sampled.
    pub sampled: bool,
}

/// OpenTelemetry details of an interval span, for the OTel sink (filled by the layer with
/// feature `otel`; never part of an MLLOG line): the `otel.*` span fields, and the span of
/// the application (tracing-opentelemetry) that encloses an interval with no enclosing
/// interval. It rides on [`TracedRecord::otel`].
#[derive(Clone, Debug, PartialEq, Default)]
pub struct OtelFields {
    /// The application's enclosing span.
    pub parent: Option<TraceParent>,
    /// `otel.name`: the span's name instead of the interval's.
    pub name: Option<Str>,
    /// `otel.kind`: `server`, `client`, `producer`, `consumer` or `internal`.
    pub kind: Option<Str>,
    /// `otel.status_code`: `ok` or `error`.
    pub status_code: Option<Str>,
    /// `otel.status_description`.
    pub status_description: Option<Str>,
}
