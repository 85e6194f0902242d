//! [`NvtxSink`]: MLLOG intervals and points as NVTX ranges and marks, for the Nsight Systems
//! timeline.
//!
//! Records reach sinks on the pipeline's worker thread, not on the thread that opened the span.
//! NVTX push/pop ranges belong to the calling thread's stack, so they cannot be used here; the
//! sink uses start/end ranges (`nvtxDomainRangeStartEx` / `nvtxDomainRangeEnd`), which may
//! start and end anywhere, and pairs a start with its end by the record's interval id. The
//! training thread does no NVTX work at all. The price: NVTX stamps a range when it is
//! called, i.e. when the worker handles the record (interval records wake the worker at once;
//! points and traced steps may wait up to `MLLOG_MAX_DELAY_MS`). See `docs/nvidia.md`.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::OnceLock;

use nvtx::domain::{EventAttributes, Message, Range};
use nvtx::{Domain, Payload};

use super::{Sink, SinkError};
use crate::record::{EventType, TracedRecord, Value};

/// `MLLOG_NVTX`: `1` (also `true`, `yes`, `on`) adds an [`NvtxSink`].
pub const ENV_NVTX: &str = "MLLOG_NVTX";
/// The NVTX domain of every range and mark the sink makes.
pub const NVTX_DOMAIN: &str = "mllog";

/// Longest message sent, in bytes (longer ones are cut at a character boundary).
const MAX_MESSAGE_BYTES: usize = 1024;
/// Ranges kept open at most; past this the oldest is ended (ends that never come must not
/// grow memory without bound).
const MAX_OPEN: usize = 1 << 16;

/// Metadata fields shown in messages, in this order, with their short names.
const FIELDS: &[(&str, &str)] = &[
    ("epoch_num", "epoch"),
    ("first_epoch_num", "first_epoch"),
    ("epoch_count", "epochs"),
    ("samples_count", "samples"),
    ("step_num", "step"),
    ("step", "step"),
    ("status", "status"),
];

/// The field whose value follows an interval's name directly (`block 3`, `epoch 2`).
fn own_number(name: &str) -> &'static [&'static str] {
    match name {
        "block" => &["first_epoch_num"],
        "epoch" | "eval" => &["epoch_num"],
        "train_step" => &["step", "step_num"],
        _ => &[],
    }
}

/// Colors (RGB) of the intervals on the timeline; others get the tool's default.
fn color_of(name: &str) -> Option<[u8; 3]> {
    Some(match name {
        "init" => [0x9e, 0x9e, 0x9e],
        "run" => [0x4c, 0xaf, 0x50],
        "block" => [0x21, 0x96, 0xf3],
        "epoch" => [0x00, 0x96, 0x88],
        "eval" => [0xff, 0x98, 0x00],
        "train_step" => [0x90, 0xca, 0xf9],
        _ => return None,
    })
}

/// Why `MLLOG_NVTX` cannot be used.
///
/// Returned by [`NvtxSink::from_env`]; through the layer it is the source of
/// [`crate::Error::Start`]. It wraps the
/// [`EnvError`](crate::env::EnvError) naming the variable.
///
/// ```
/// use tracing_mllog::env::Env;
/// use tracing_mllog::sink::NvtxSink;
///
/// let err = NvtxSink::from_env(&Env::from_map([("MLLOG_NVTX", "maybe")])).unwrap_err();
/// assert_eq!(err.0.name(), "MLLOG_NVTX");
/// assert!(NvtxSink::from_env(&Env::from_map([("MLLOG_NVTX", "0")]))?.is_none());
/// # Ok::<(), tracing_mllog::sink::NvtxError>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct NvtxError(#[from] pub crate::env::EnvError);

/// The `mllog` domain, created once per process: NVTX domains live as long as the process,
/// and ranges borrow it.
fn domain() -> &'static Domain {
    static DOMAIN: OnceLock<Domain> = OnceLock::new();
    DOMAIN.get_or_init(|| Domain::new(c"mllog"))
}

/// An open range and the order it was started in.
struct NvtxRange {
    range: Range<'static>,
    seq: u64,
}

/// Shows MLLOG intervals (`init`, `run`, `block`, `epoch`, `eval`, mapped intervals, traced
/// `train_step`s) as NVTX start/end ranges and points as NVTX marks, in the `mllog` domain.
///
/// A range's message is the interval's name and its metadata (`block 3 · epochs 1 · samples
/// 24576`); a mark's is the key, the value and the metadata (`eval_accuracy 0.75 · epoch 3`),
/// with a numeric value also as the mark's payload. Without an NVTX tool (Nsight Systems,
/// `NVTX_INJECTION64_PATH`) every call returns at once.
///
/// Run the training under `nsys profile` and the ranges appear next to the CUDA kernels;
/// without a tool (as in this example) the sink costs next to nothing and reports no error:
///
/// ```
/// use tracing_mllog::sink::NvtxSink;
/// use tracing_mllog::{MllogLayer, Output};
/// use tracing_subscriber::prelude::*;
///
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(NvtxSink::new()) // or `MLLOG_NVTX=1` in the environment
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     let _epoch = tracing::info_span!("epoch", epoch_num = 1u64).entered();
/// });
/// let report = guard.shutdown();
/// let nvtx = report.sinks.iter().find(|s| s.name == "nvtx").expect("the NVTX sink");
/// assert_eq!((nvtx.written, nvtx.errors), (2, 0));
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
pub struct NvtxSink {
    domain: &'static Domain,
    open: HashMap<u64, NvtxRange>,
    /// Intervals without ids (parsed records), paired by name, innermost last.
    open_by_name: HashMap<String, Vec<NvtxRange>>,
    seq: u64,
    named_thread: bool,
    message: String,
}

impl Default for NvtxSink {
    fn default() -> NvtxSink {
        NvtxSink::new()
    }
}

impl NvtxSink {
    /// A sink in the `mllog` domain (created, and the NVTX tool loaded, on first use).
    pub fn new() -> NvtxSink {
        NvtxSink {
            domain: domain(),
            open: HashMap::new(),
            open_by_name: HashMap::new(),
            seq: 0,
            named_thread: false,
            message: String::with_capacity(96),
        }
    }

    /// The sink `MLLOG_NVTX` asks for (`1`/`true`/`yes`/`on`), or `None` (unset, blank or
    /// off); another value is an error naming the variable.
    pub fn from_env(env: &crate::env::Env) -> Result<Option<NvtxSink>, NvtxError> {
        Ok(env.flag(ENV_NVTX)?.unwrap_or(false).then(NvtxSink::new))
    }

    /// Ranges started and not yet ended.
    pub fn open_ranges(&self) -> usize {
        self.open.len() + self.open_by_name.values().map(Vec::len).sum::<usize>()
    }

    /// The attributes of a range or mark: the message as it is, not registered. (The `nvtx`
    /// crate's attribute builder registers every message and keeps it for the life of the
    /// process; messages here carry step and sample counts, so nearly every one is new, and
    /// registering them would grow memory without bound.)
    fn attributes(&self, name: &str, payload: Option<Payload>) -> EventAttributes<'static> {
        let message = if self.message.is_ascii() {
            // ASCII goes as a C string, the cheapest form for the tool to copy.
            match CString::new(self.message.as_str()) {
                Ok(c) => Message::Ascii(c),
                Err(_) => nvtx::Str::from_str_lossy(&self.message).into(),
            }
        } else {
            nvtx::Str::from_str_lossy(&self.message).into()
        };
        EventAttributes {
            category: None,
            color: color_of(name).map(Into::into),
            message: Some(message),
            payload,
        }
    }

    fn open_range(&mut self, record: &TracedRecord) {
        let name = interval_name(&record.key);
        self.message.clear();
        self.message.push_str(name);
        push_fields(&mut self.message, name, record);
        cut(&mut self.message);
        let range = self.domain.range(self.attributes(name, None));
        self.seq += 1;
        let open = NvtxRange {
            range,
            seq: self.seq,
        };
        if self.open_ranges() >= MAX_OPEN {
            self.end_oldest();
        }
        match record.interval {
            // A repeated id ends the range it replaces (dropping it).
            Some(ids) => drop(self.open.insert(ids.id, open)),
            None => self
                .open_by_name
                .entry(name.to_owned())
                .or_default()
                .push(open),
        }
    }

    fn end(&mut self, record: &TracedRecord) {
        let name = interval_name(&record.key);
        let found = match record.interval {
            Some(ids) => self.open.remove(&ids.id),
            None => None,
        }
        .or_else(|| self.open_by_name.get_mut(name).and_then(Vec::pop));
        match found {
            Some(open) => drop(open.range), // ends it
            None => {
                // An end without a start (the sink was added late): a mark at the end.
                self.message.clear();
                self.message.push_str(&record.key);
                push_fields(&mut self.message, "", record);
                cut(&mut self.message);
                self.domain.mark(self.attributes(name, None));
            }
        }
    }

    fn mark(&mut self, record: &TracedRecord) {
        self.message.clear();
        self.message.push_str(&record.key);
        if !record.value.is_null() {
            self.message.push(' ');
            push_value(&mut self.message, &record.value);
        }
        push_fields(&mut self.message, "", record);
        cut(&mut self.message);
        let payload = match &record.value {
            Value::Int(i) => i64::try_from(*i).ok().map(Payload::Int64),
            Value::Float(f) => Some(Payload::Double(*f)),
            _ => None,
        };
        let attributes = self.attributes(&record.key, payload);
        self.domain.mark(attributes);
    }

    fn end_oldest(&mut self) {
        let by_id = self
            .open
            .iter()
            .min_by_key(|(_, o)| o.seq)
            .map(|(id, o)| (*id, o.seq));
        let by_name = self
            .open_by_name
            .iter()
            .filter_map(|(n, v)| v.first().map(|o| (n.clone(), o.seq)))
            .min_by_key(|(_, seq)| *seq);
        match (by_id, by_name) {
            (Some((id, a)), Some((_, b))) if a <= b => drop(self.open.remove(&id)),
            (_, Some((name, _))) => {
                if let Some(v) = self.open_by_name.get_mut(&name) {
                    drop(v.remove(0));
                }
            }
            (Some((id, _)), None) => drop(self.open.remove(&id)),
            (None, None) => {}
        }
    }

    /// Ends every open range, innermost (latest started) first.
    fn end_all(&mut self) {
        let mut open: Vec<NvtxRange> = self.open.drain().map(|(_, o)| o).collect();
        for (_, v) in self.open_by_name.drain() {
            open.extend(v);
        }
        open.sort_by_key(|o| std::cmp::Reverse(o.seq));
        drop(open);
    }
}

/// The registration (see `crate::registry::FACTORIES`): `MLLOG_NVTX`, on the writing rank,
/// on the worker itself: an NVTX call only hands the event to the tool in memory (it never
/// blocks on I/O), and inline its range edges stay closest to the spans' own times.
pub(crate) fn plug(
    env: &crate::env::Env,
    _rank: u32,
    _submission: &crate::submission::Submission,
) -> Result<Option<super::plug::EnvSink>, crate::Error> {
    let sink = NvtxSink::from_env(env).map_err(|e| crate::Error::start("the NVTX sink", e))?;
    Ok(sink.map(|sink| super::plug::EnvSink {
        delivery: super::Delivery::Inline,
        ..super::plug::EnvSink::isolated(sink)
    }))
}

impl Sink for NvtxSink {
    fn name(&self) -> &str {
        "nvtx"
    }

    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
        if !self.named_thread {
            self.named_thread = true;
            name_this_thread();
        }
        match record.event_type {
            EventType::IntervalStart => self.open_range(record),
            EventType::IntervalEnd => self.end(record),
            EventType::PointInTime => self.mark(record),
        }
        Ok(())
    }

    /// Ends the ranges still open (an aborted run), so that none is left dangling.
    fn close(&mut self, deadline: std::time::Instant) -> Result<(), SinkError> {
        let _ = deadline;
        self.end_all();
        Ok(())
    }
}

impl Drop for NvtxSink {
    fn drop(&mut self) {
        self.end_all();
    }
}

impl std::fmt::Debug for NvtxSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvtxSink")
            .field("domain", &NVTX_DOMAIN)
            .field("open_ranges", &self.open_ranges())
            .finish_non_exhaustive()
    }
}

/// The ranges start on this (the worker's) thread: say so on the timeline.
fn name_this_thread() {
    nvtx::name_thread(crate::os_thread::id(), c"mllog worker");
}

/// `block_start` → `block`; `run_stop` → `run`; other keys unchanged.
fn interval_name(key: &str) -> &str {
    key.strip_suffix("_start")
        .or_else(|| key.strip_suffix("_stop"))
        .filter(|s| !s.is_empty())
        .unwrap_or(key)
}

/// Appends the interval's own number after its name, then ` · short value` for the other
/// fields of [`FIELDS`] present in `record`.
fn push_fields(out: &mut String, name: &str, record: &TracedRecord) {
    let own = own_number(name);
    let mut shown_own = false;
    if let Some(v) = own.iter().find_map(|f| record.metadata.get(f)) {
        out.push(' ');
        push_value(out, v);
        shown_own = true;
    }
    let mut last_short = "";
    for (field, short) in FIELDS {
        if shown_own && own.contains(field) {
            continue;
        }
        let Some(v) = record.metadata.get(field) else {
            continue;
        };
        if *short == last_short {
            continue; // `step` and `step_num` both present: shown once
        }
        last_short = short;
        out.push_str(" · ");
        out.push_str(short);
        out.push(' ');
        push_value(out, v);
    }
}

fn push_value(out: &mut String, value: &Value) {
    use std::fmt::Write;
    match value {
        Value::Str(s) => out.push_str(s),
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// At most [`MAX_MESSAGE_BYTES`], cut at a character boundary.
fn cut(s: &mut String) {
    if s.len() > MAX_MESSAGE_BYTES {
        let mut at = MAX_MESSAGE_BYTES;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Metadata, Record};

    fn record(key: &str, fields: &[(&str, Value)]) -> TracedRecord {
        let mut md = Metadata::default();
        for (k, v) in fields {
            md.set(k.to_string(), v.clone());
        }
        Record::event(key.to_owned(), Value::Null)
            .with_metadata(md)
            .into()
    }

    fn message(name: &str, r: &TracedRecord) -> String {
        let mut s = name.to_owned();
        push_fields(&mut s, name, r);
        s
    }

    #[test]
    fn messages_put_the_own_number_first() {
        let r = record(
            "block_start",
            &[
                ("first_epoch_num", Value::Int(3)),
                ("epoch_count", Value::Int(1)),
                ("samples_count", Value::Int(24576)),
            ],
        );
        assert_eq!(message("block", &r), "block 3 · epochs 1 · samples 24576");
        let r = record("epoch_start", &[("epoch_num", Value::Int(2))]);
        assert_eq!(message("epoch", &r), "epoch 2");
        let r = record(
            "train_step_start",
            &[("step", Value::Int(7)), ("step_num", Value::Int(7))],
        );
        assert_eq!(message("train_step", &r), "train_step 7");
        let r = record("run_stop", &[("status", Value::Str("success".into()))]);
        assert_eq!(message("run", &r), "run · status success");
        let r = record("x", &[("step", Value::Int(1)), ("step_num", Value::Int(1))]);
        assert_eq!(message("x", &r), "x · step 1");
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let mut s = "·".repeat(MAX_MESSAGE_BYTES); // 2 bytes each
        s.insert(0, 'a');
        cut(&mut s);
        assert!(s.len() <= MAX_MESSAGE_BYTES && s.len() >= MAX_MESSAGE_BYTES - 1);
    }

    #[test]
    fn mllog_nvtx_is_read_strictly() {
        let on = |v: &str| {
            NvtxSink::from_env(&crate::env::Env::from_map([(ENV_NVTX, v)])).map(|s| s.is_some())
        };
        assert!(on("1").unwrap());
        assert!(on(" On ").unwrap());
        assert!(!on("0").unwrap());
        assert!(!on("").unwrap());
        let err = on("nvtx").unwrap_err();
        assert!(err.to_string().contains("MLLOG_NVTX"), "{err}");
    }
}
