//! The one vocabulary every part of the crate shares: [`Record`], its [`Value`]s and
//! [`Metadata`], the `:::MLLOG` encoder ([`Record::encode`]) and the parser ([`parse_line`],
//! [`LogReader`]).
//!
//! A [`Record`] is one `:::MLLOG` line: its [`EventType`], `key`, [`Value`], [`Metadata`]
//! and time. The layer builds them from `tracing` spans and events, sinks receive them, and
//! the checker and the `mllog` command read them back from files. Encoding and parsing are
//! exact inverses for everything the official `mlperf_logging` package writes.
//!
//! # Examples
//!
//! Build a record, encode it, and parse the line back:
//!
//! ```
//! use mllog_core::record::{parse_line, EventType, Metadata, Record, Value};
//!
//! let record = Record::event("eval_accuracy", 0.75)
//!     .at_millis(1_700_000_000_000)
//!     .with_metadata(Metadata::at("train.py", 42).with("epoch_num", 3u64));
//! let line = record.to_line();
//! assert_eq!(
//!     line,
//!     r#":::MLLOG {"namespace": "", "time_ms": 1700000000000, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", "value": 0.75, "metadata": {"file": "train.py", "lineno": 42, "epoch_num": 3}}"#
//! );
//!
//! // Noise (no `:::MLLOG ` token) is `Ok(None)`; a rank prefix is tolerated.
//! assert_eq!(parse_line("loss went down"), Ok(None));
//! let back = parse_line(&format!("0: {line}")).unwrap().unwrap();
//! assert_eq!(back.event_type, EventType::PointInTime);
//! assert_eq!(back.value.as_f64(), Some(0.75));
//! assert_eq!(back.metadata.get("epoch_num"), Some(&Value::from(3u64)));
//! assert_eq!(back.time_ms(), 1_700_000_000_000);
//! ```
//!
//! Stream a whole log with [`LogReader`] (any `BufRead`: a file, stdin): each item is a
//! [`ParsedLine`] with its line number, or a [`LineError`] for a malformed `:::MLLOG` line;
//! reading continues after it.
//!
//! ```
//! use mllog_core::record::LogReader;
//!
//! let log = concat!(
//!     ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"INTERVAL_START\", ",
//!     "\"key\": \"run_start\", \"value\": null, \"metadata\": {}}\n",
//!     "some other output\n",
//!     ":::MLLOG {not json\n",
//! );
//! let mut reader = LogReader::new(log.as_bytes());
//! let first = reader.next().unwrap().unwrap();
//! assert_eq!((first.lineno, first.index, &*first.record.key), (1, 0, "run_start"));
//! assert!(first.record.value.is_null());
//! let bad = reader.next().unwrap().unwrap_err();
//! assert_eq!((bad.lineno, bad.index), (3, 1));
//! assert!(reader.next().is_none());
//! assert_eq!(reader.error_count(), 1);
//! ```

mod encode;
mod float32;
mod parse;
mod value;

#[doc(hidden)]
pub use float32::f32_shortest;
pub use parse::{
    parse_line, parse_log, LineError, LogReader, ParsedLine, MAX_KEPT_ERRORS, MAX_LINE,
};
pub use value::Value;

#[cfg(feature = "review")]
pub(crate) use encode::write_float;
pub(crate) use parse::parse_json;

use std::borrow::Cow;
use std::sync::OnceLock;

/// The token that starts every MLLOG record, trailing space included (the checker requires it).
pub const MLLOG_TOKEN: &str = ":::MLLOG ";

/// `INTERVAL_START`, `INTERVAL_END` or `POINT_IN_TIME`.
///
/// The layer writes `INTERVAL_START`/`INTERVAL_END` for spans ([`Record::event`] and
/// [`Record::with_event_type`] for records built by hand) and `POINT_IN_TIME` for events;
/// [`EventType::as_str`] and [`EventType::from_name`] convert to and from the logged name
/// (see the [module examples](self#examples)).
///
///
/// ```
/// use mllog_core::record::{parse_line, Record};
/// use mllog_core::{EventType, Value};
///
/// let start = Record::event("run_start", Value::Null).with_event_type(EventType::IntervalStart).at_millis(5);
/// let line = start.to_line();
/// assert!(line.contains(r#""event_type": "INTERVAL_START""#));
/// assert_eq!(parse_line(&line).unwrap().unwrap().event_type, EventType::IntervalStart);
/// assert_eq!(EventType::from_name(EventType::IntervalEnd.as_str()), Some(EventType::IntervalEnd));
/// assert_eq!(EventType::from_name("interval_start"), None); // the spelling is exact
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// An interval opened (`init_start`, `run_start`, ...).
    IntervalStart,
    /// An interval closed (`init_stop`, `run_stop`, ...).
    IntervalEnd,
    /// A single event (hyperparameters, `eval_accuracy`, ...).
    PointInTime,
}

impl EventType {
    /// The spelling used in logs.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventType::IntervalStart => "INTERVAL_START",
            EventType::IntervalEnd => "INTERVAL_END",
            EventType::PointInTime => "POINT_IN_TIME",
        }
    }

    /// Parses the log spelling.
    pub fn from_name(name: &str) -> Option<EventType> {
        match name {
            "INTERVAL_START" => Some(EventType::IntervalStart),
            "INTERVAL_END" => Some(EventType::IntervalEnd),
            "POINT_IN_TIME" => Some(EventType::PointInTime),
            _ => None,
        }
    }
}

/// When a record happened.
///
/// `wall_ns` is the wall clock (nanoseconds since the Unix epoch) from which `time_ms` is
/// derived; `mono_ns` is `CLOCK_MONOTONIC`, which RPD profiles use. A record parsed from a log
/// has only the wall clock (`mono_ns == 0`).
///
/// [`Record::time`] holds one; set it with [`Record::at_millis`] when building records by hand
/// (tests, replays).
///
/// ```
/// use mllog_core::record::{parse_line, Record, Timestamp};
///
/// let t = Timestamp::from_millis(1_700_000_000_123);
/// assert_eq!((t.wall_ns, t.mono_ns, t.millis()), (1_700_000_000_123_000_000, 0, 1_700_000_000_123));
/// // `time_ms` truncates, as `int(time.time() * 1e3)` does.
/// assert_eq!(Timestamp { wall_ns: 1_999_999, mono_ns: 0 }.millis(), 1);
///
/// let now = Timestamp::now();
/// assert!(now.mono_ns > 0 && now.millis() > 1_600_000_000_000);
/// let parsed = parse_line(&Record::event("seed", 1).at_millis(42).to_line()).unwrap().unwrap();
/// assert_eq!(parsed.time, Timestamp::from_millis(42)); // no monotonic clock in a log
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp {
    /// Wall clock, nanoseconds since the Unix epoch.
    pub wall_ns: i64,
    /// `CLOCK_MONOTONIC` in nanoseconds, or 0 when unknown.
    pub mono_ns: u64,
}

impl Timestamp {
    /// Now: one read of `CLOCK_MONOTONIC`; the wall clock is derived from it with an offset
    /// taken once per process. One clock read on the hot path instead of two, and durations
    /// between records (time to train) cannot be skewed by a wall-clock step during the run.
    pub fn now() -> Timestamp {
        static OFFSET: OnceLock<i64> = OnceLock::new();
        let mono_ns = clock_ns(libc::CLOCK_MONOTONIC);
        let offset = *OFFSET.get_or_init(|| {
            clock_ns(libc::CLOCK_REALTIME) as i64 - clock_ns(libc::CLOCK_MONOTONIC) as i64
        });
        Timestamp {
            wall_ns: mono_ns as i64 + offset,
            mono_ns,
        }
    }

    /// `CLOCK_MONOTONIC` now, in nanoseconds (for durations: one clock read).
    pub fn mono_now() -> u64 {
        clock_ns(libc::CLOCK_MONOTONIC)
    }

    /// A timestamp from integer milliseconds since the epoch (as logs carry it).
    pub const fn from_millis(ms: i64) -> Timestamp {
        Timestamp {
            wall_ns: ms.saturating_mul(1_000_000),
            mono_ns: 0,
        }
    }

    /// `time_ms` as `mlperf_logging` writes it: `int(time.time() * 1e3)`, i.e. truncated.
    pub const fn millis(self) -> i64 {
        // Truncation towards zero, as Python's int() does.
        self.wall_ns / 1_000_000
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and both clock ids exist on every Unix we
    // build for; clock_gettime cannot fail for them.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A key or name that is usually a `'static` constant and only sometimes owned.
///
/// Keys, metadata names and string values take `impl Into<Str>`, so a `&'static str` is stored
/// without allocating and a `String` is moved in.
///
/// ```
/// use std::borrow::Cow;
/// use mllog_core::record::{Record, Str};
///
/// let fixed: Str = "eval_accuracy".into();
/// assert!(matches!(fixed, Cow::Borrowed(_)));
/// let key = format!("custom_{}", 3);
/// let r = Record::event(key, 1u64);
/// assert!(matches!(r.key, Cow::Owned(_)));
/// assert_eq!(r.key, "custom_3");
/// ```
pub type Str = Cow<'static, str>;

/// Ordered metadata. `file` and `lineno` (the caller's source location) always come first when
/// present, then the other fields in insertion order, as `mlperf_logging` writes them.
///
/// ```
/// use mllog_core::record::{Metadata, Record};
/// use mllog_core::Value;
///
/// let mut meta = Metadata::at("train.py", 7).with("epoch_num", 2u64);
/// meta.set("samples_count", 4096u64);
/// meta.set("epoch_num", 3u64); // replaces, keeps its place
/// assert_eq!(meta.get("epoch_num"), Some(&Value::from(3u64)));
/// let line = Record::event("eval_accuracy", 0.5).with_metadata(meta).to_line();
/// assert!(line.ends_with(
///     r#""metadata": {"file": "train.py", "lineno": 7, "epoch_num": 3, "samples_count": 4096}}"#
/// ));
/// ```
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Metadata {
    /// Source file of the call site (relative to the configured root).
    pub file: Option<Str>,
    /// Source line of the call site.
    pub lineno: Option<u32>,
    /// The remaining fields in order.
    pub fields: smallvec::SmallVec<[(Str, Value); 3]>,
    /// Metadata that is not a JSON object (`""`, `null`, a number, a list), as a parsed log
    /// carried it; `file`, `lineno` and `fields` are then empty. The official checker keeps such
    /// a record and evaluates `'x' in metadata` on it with Python's semantics (a substring test
    /// on a string, an error on `null`), so the parser keeps it too. A record made in code has
    /// none.
    pub other: Option<Box<Value>>,
    /// Buffers kept from the strings and lists of a recycled record's last use (see
    /// [`Stash`]).
    pub stash: Stash,
}

impl Metadata {
    /// Metadata with a source location and no other fields.
    pub fn at(file: impl Into<Str>, lineno: u32) -> Metadata {
        Metadata {
            file: Some(file.into()),
            lineno: Some(lineno),
            fields: smallvec::SmallVec::new(),
            other: None,
            ..Metadata::default()
        }
    }

    /// Sets `name` to `value`, replacing an earlier value in place (keeping its position).
    pub fn set(&mut self, name: impl Into<Str>, value: impl Into<Value>) {
        let name = name.into();
        let value = value.into();
        match self.fields.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => self.fields.push((name, value)),
        }
    }

    /// Adds `name` = `value` (builder style).
    pub fn with(mut self, name: impl Into<Str>, value: impl Into<Value>) -> Metadata {
        self.set(name, value);
        self
    }

    /// The value of a field other than `file`/`lineno`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// Whether there is no field at all (not even a location).
    pub fn is_empty(&self) -> bool {
        self.file.is_none()
            && self.lineno.is_none()
            && self.fields.is_empty()
            && self.other.is_none()
    }
}

/// The fields of a parsed record that are not of the type MLLOG writers write, exactly as the log
/// carried them. The official parser keeps such a record (it checks no types), so ours does too;
/// the compliance checker reads these through Python's semantics.
///
/// You meet it on [`Record::loose`] when reading logs written by other tools.
///
/// ```
/// use mllog_core::record::parse_line;
/// use mllog_core::Value;
///
/// let r = parse_line(r#":::MLLOG {"namespace": "", "time_ms": 0.0000001, "event_type": "POINT_IN_TIME", "key": 7, "value": 1, "metadata": {}}"#)
///     .unwrap()
///     .unwrap();
/// assert_eq!(r.key, "7");
/// let loose = r.loose.as_deref().unwrap();
/// assert_eq!(loose.key, Some(Value::Int(7)));
/// assert_eq!(loose.time_ms, Some(1e-7)); // finer than the nanoseconds `time` holds
///
/// let plain = parse_line(r#":::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "seed", "value": 1, "metadata": {}}"#);
/// assert_eq!(plain.unwrap().unwrap().loose, None);
/// ```
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Loose {
    /// `key` when it is not a string (a number, `null`, a list, ...). [`Record::key`] then holds
    /// its JSON text, which names no rule, as the original matches no rule.
    pub key: Option<Value>,
    /// `time_ms` as the official parser reads it (`float(time_ms)`) when [`Record::time`] cannot
    /// hold it exactly: a fraction, a numeric string, NaN, an infinity, a huge integer.
    pub time_ms: Option<f64>,
}

/// One MLLOG record: what a writer produces, what the parser returns.
///
/// [`Record::event`] makes a point-in-time record stamped now; [`Record::at_millis`],
/// [`Record::with_metadata`] and [`Record::with_event_type`] adjust it; [`Record::to_line`]
/// encodes it exactly as the official `mlperf_logging` package would, and [`parse_line`]
/// reads it back. Every field is part of the line except [`Record::loose`], which keeps how a
/// parsed line spelled what it spelled unusually. See the [module examples](self#examples).
///
///
/// ```
/// use mllog_core::record::{parse_line, Metadata, Record};
/// use mllog_core::{EventType, Value};
///
/// let stop = Record::event("run_stop", Value::Null)
///     .with_event_type(EventType::IntervalEnd)
///     .at_millis(1_700_000_060_000)
///     .with_metadata(Metadata::at("train.py", 90).with("status", "success"));
/// let back = parse_line(&stop.to_string()).unwrap().unwrap(); // `Display` is the line
/// assert_eq!(back.key, "run_stop");
/// assert_eq!(back.time_ms(), 1_700_000_060_000);
/// assert_eq!(back.metadata.get("status"), Some(&Value::from("success")));
/// assert_eq!(back.to_line(), stop.to_line());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// `namespace` (default `""`; no checker reads it).
    pub namespace: Str,
    /// When it happened.
    pub time: Timestamp,
    /// Interval start/end or point in time.
    pub event_type: EventType,
    /// The MLLOG key, e.g. `run_start` or `global_batch_size`.
    pub key: Str,
    /// The value (`null` for interval records without one).
    pub value: Value,
    /// `file`, `lineno` and the other metadata fields.
    pub metadata: Metadata,
    /// For a parsed record: the fields whose JSON type is not the usual one, as logged (see
    /// [`Loose`]). `None` for every record made in code.
    pub loose: Option<Box<Loose>>,
}

/// Cleared buffers that [`Record::clear`] keeps from a record's strings and lists, so that a
/// writer that recycles its records (refilling one instead of making a new one per event)
/// copies a string or builds a small list into it without allocating. Part of no record's
/// meaning: not compared, not cloned, not shown.
///
/// ```
/// use mllog_core::record::Record;
/// use mllog_core::Value;
///
/// let mut r = Record::event("submission_org", String::from("ExampleOrg"));
/// r.clear();
/// assert!(r.value.is_null());
/// let mut buffer = r.metadata.stash.take_string(); // the string's buffer, cleared
/// assert!(buffer.is_empty() && buffer.capacity() >= "ExampleOrg".len());
/// buffer.push_str("OtherOrg");
/// r.value = Value::from(buffer); // no allocation
/// assert!(r.metadata.stash.take_list().is_none()); // no list was kept
/// ```
#[derive(Default)]
pub struct Stash {
    strings: Vec<String>,
    lists: Vec<Vec<Value>>,
}

impl Stash {
    /// A kept string buffer, empty; a new one when none is kept.
    pub fn take_string(&mut self) -> String {
        self.strings.pop().unwrap_or_default()
    }

    /// A kept list buffer, empty, if one is kept.
    pub fn take_list(&mut self) -> Option<Vec<Value>> {
        self.lists.pop()
    }

    /// Keeps a list buffer taken with [`Stash::take_list`] and not used after all.
    pub fn keep_list(&mut self, mut list: Vec<Value>) {
        list.clear();
        self.keep(Value::Array(list));
    }
}

impl Stash {
    /// At most this many buffers of at most this many bytes (elements) each are kept.
    const MAX: usize = 6;
    const MAX_CAPACITY: usize = 1024;
    const MAX_LISTS: usize = 2;
    const MAX_LIST_CAPACITY: usize = 64;

    /// Keeps `v`'s buffer if it is an owned string or a list and there is room.
    fn keep(&mut self, v: Value) {
        match v {
            Value::Str(Cow::Owned(mut s))
                if self.strings.len() < Self::MAX && s.capacity() <= Self::MAX_CAPACITY =>
            {
                s.clear();
                self.strings.push(s);
            }
            Value::Array(mut items)
                if self.lists.len() < Self::MAX_LISTS
                    && items.capacity() <= Self::MAX_LIST_CAPACITY =>
            {
                items.clear();
                self.lists.push(items);
            }
            _ => {}
        }
    }
}

impl Clone for Stash {
    fn clone(&self) -> Stash {
        Stash::default()
    }
}

impl PartialEq for Stash {
    fn eq(&self, _: &Stash) -> bool {
        true
    }
}

impl std::fmt::Debug for Stash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stash")
    }
}

impl Record {
    /// A point-in-time record stamped now, without metadata.
    pub fn event(key: impl Into<Str>, value: impl Into<Value>) -> Record {
        Record {
            namespace: Cow::Borrowed(""),
            time: Timestamp::now(),
            event_type: EventType::PointInTime,
            key: key.into(),
            value: value.into(),
            metadata: Metadata::default(),
            loose: None,
        }
    }

    /// A record with every field empty (`null` value, empty key and metadata).
    pub fn empty() -> Record {
        Record {
            namespace: Cow::Borrowed(""),
            time: Timestamp::default(),
            event_type: EventType::PointInTime,
            key: Cow::Borrowed(""),
            value: Value::Null,
            metadata: Metadata::default(),
            loose: None,
        }
    }

    /// Empties the record, keeping the metadata's capacity, and the buffers of its strings,
    /// for reuse.
    pub fn clear(&mut self) {
        self.namespace = Cow::Borrowed("");
        let md = &mut self.metadata;
        // A key of the program's own (no MLLOG constant) is copied like a string value.
        md.stash.keep(Value::Str(std::mem::replace(
            &mut self.key,
            Cow::Borrowed(""),
        )));
        md.stash.keep(std::mem::take(&mut self.value));
        md.file = None;
        md.lineno = None;
        for (_, v) in md.fields.drain(..) {
            md.stash.keep(v);
        }
        md.other = None;
        self.loose = None;
    }

    /// Replaces the timestamp (builder style).
    pub fn at_millis(mut self, ms: i64) -> Record {
        self.time = Timestamp::from_millis(ms);
        self
    }

    /// Replaces the metadata (builder style).
    pub fn with_metadata(mut self, metadata: Metadata) -> Record {
        self.metadata = metadata;
        self
    }

    /// Replaces the event type (builder style).
    pub fn with_event_type(mut self, event_type: EventType) -> Record {
        self.event_type = event_type;
        self
    }

    /// `time_ms` as written in the log.
    pub fn time_ms(&self) -> i64 {
        self.time.millis()
    }

    /// The `:::MLLOG {...}` line without its newline, byte-identical to `mlperf_logging`.
    pub fn to_line(&self) -> String {
        let mut s = String::with_capacity(192);
        self.encode(&mut s);
        s
    }
}

impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_line())
    }
}
