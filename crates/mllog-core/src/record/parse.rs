//! Reading `:::MLLOG` lines back, with the tolerance real submission logs need: rank prefixes
//! (`0: `, `[1,0]<stdout>:`), the token glued after other output, CRLF and stray `\r`
//! (Python's universal newlines, which the official checker uses), noise lines, non-UTF-8
//! bytes, and the non-standard `NaN`/`Infinity` tokens Python writes.

use std::borrow::Cow;
use std::io::BufRead;

use super::{EventType, Loose, Metadata, Record, Str, Timestamp, Value, MLLOG_TOKEN};

/// A record read from a log, with where it was found.
///
/// What [`LogReader`] yields and [`parse_log`] collects; the two numbers match the official
/// checker's messages (`index`) and an editor's line numbers (`lineno`). See the
/// [`record`](super) module examples.
///
///
/// ```
/// use mllog_core::record::{parse_log, Record};
///
/// let log = format!("starting\n{}\n{}\n", Record::event("seed", 7).at_millis(1), Record::event("global_batch_size", 8).at_millis(2));
/// let (lines, errors) = parse_log(&log);
/// assert!(errors.is_empty());
/// assert_eq!((lines[1].lineno, lines[1].index), (3, 1));
/// assert_eq!(lines[1].record.key, "global_batch_size");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedLine {
    /// Physical line number in the file, 1-based (lines split as Python's universal newlines
    /// split them: `\n`, `\r\n` and a lone `\r`).
    pub lineno: usize,
    /// 0-based position among the `:::MLLOG` lines (the number the official checker prints).
    pub index: usize,
    /// The record.
    pub record: Record,
}

/// A line that holds the `:::MLLOG ` token but is not a valid record.
///
/// [`LogReader`] yields it (and keeps reading), [`parse_log`] collects it; the compliance
/// checker reports it as a [`FindingKind::Parse`](crate::compliance::FindingKind::Parse)
/// finding.
///
/// ```
/// use mllog_core::record::parse_log;
///
/// let (records, errors) = parse_log("noise\n:::MLLOG {\"key\": \"seed\"\n");
/// assert!(records.is_empty());
/// let e = &errors[0];
/// assert_eq!((e.lineno, e.index), (2, 0));
/// assert!(e.text.starts_with("{\"key\""));
/// assert!(e.to_string().starts_with("line 2: "), "{e}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {lineno}: {message}")]
pub struct LineError {
    /// Physical line number, 1-based.
    pub lineno: usize,
    /// 0-based position among the `:::MLLOG` lines.
    pub index: usize,
    /// What is wrong, in words.
    pub message: String,
    /// The text after the token (cut to 200 characters).
    pub text: String,
}

/// Parses one physical line. `Ok(None)` when the line holds no `:::MLLOG ` token (noise);
/// otherwise the record after the **last** token (as the checker's greedy regex does), or what
/// is wrong with it.
pub fn parse_line(line: &str) -> Result<Option<Record>, String> {
    let Some(pos) = line.rfind(MLLOG_TOKEN) else {
        return Ok(None);
    };
    let body = strip_end_as_python(&line.as_bytes()[pos + MLLOG_TOKEN.len()..]);
    record_from_json(&String::from_utf8_lossy(body)).map(Some)
}

/// The text after the token as the official checker reads it: it decodes the file as latin-1,
/// strips the line with Python's `str.strip()` (the line starts with the token, so only its end
/// changes) and hands the rest to `json.loads`, which skips JSON's own whitespace only. In
/// latin-1, Python's whitespace is exactly these bytes; a UTF-8 space (U+00A0 is `C2 A0`) loses
/// only its last byte and leaves the line broken, as it does there.
fn strip_end_as_python(rest: &[u8]) -> &[u8] {
    let end = rest
        .iter()
        .rposition(|b| {
            !matches!(
                b,
                b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f | b' ' | 0x85 | 0xa0
            )
        })
        .map_or(0, |i| i + 1);
    &rest[..end]
}

/// Parses a whole log held in memory: the records and the malformed lines.
pub fn parse_log(text: &str) -> (Vec<ParsedLine>, Vec<LineError>) {
    let mut reader = LogReader::new(text.as_bytes());
    let records = reader.by_ref().filter_map(Result::ok).collect();
    (records, reader.into_errors())
}

/// The longest physical line [`LogReader`] reads by default (16 MiB). A longer one is one
/// [`LineError`] and ends the reading: it is never held in memory, and an input without line
/// ends (`/dev/zero`) ends too.
pub const MAX_LINE: usize = 16 << 20;

/// How many [`LineError`]s a [`LogReader`] keeps ([`LogReader::error_count`] counts them all).
pub const MAX_KEPT_ERRORS: usize = 1000;

/// Streams records out of a log (a file, stdin, anything `BufRead`), one physical line at a
/// time, so logs of any size are read in bounded memory: one line of at most
/// [`LogReader::max_line`] bytes, and the first [`MAX_KEPT_ERRORS`] malformed lines.
///
/// Iterates over `Result<ParsedLine, LineError>`; an I/O error ends the iteration and is kept
/// in [`LogReader::io_error`].
///
/// ```
/// use std::io::Cursor;
/// use mllog_core::record::{parse_log, LogReader};
///
/// let log = "0: :::MLLOG {\"namespace\": \"\", \"time_ms\": 5, \"event_type\": \"POINT_IN_TIME\", \
///            \"key\": \"seed\", \"value\": 1, \"metadata\": {}}\r\n:::MLLOG oops\n";
/// let mut reader = LogReader::new(Cursor::new(log)).max_line(1 << 20);
/// let keys: Vec<String> = reader.by_ref().filter_map(Result::ok).map(|l| l.record.key.into_owned()).collect();
/// assert_eq!(keys, ["seed"]); // rank prefix and CRLF tolerated
/// assert_eq!((reader.lines_read(), reader.error_count()), (2, 1));
/// assert!(reader.io_error().is_none());
///
/// // The same, all at once, for a log held in memory.
/// let (records, errors) = parse_log(log);
/// assert_eq!((records.len(), errors[0].lineno), (1, 2));
/// ```
pub struct LogReader<R> {
    input: R,
    buf: Vec<u8>,
    /// The line as lossy UTF-8, only for lines that are not valid UTF-8.
    lossy: String,
    lineno: usize,
    index: usize,
    pending_cr: bool,
    errors: Vec<LineError>,
    error_count: usize,
    max_line: usize,
    io_error: Option<std::io::Error>,
    done: bool,
}

impl<R> std::fmt::Debug for LogReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader")
            .field("lines_read", &self.lineno)
            .field("error_count", &self.error_count)
            .finish_non_exhaustive()
    }
}

/// What [`LogReader::next_physical_line`] found.
enum Physical {
    Line,
    End,
    TooLong,
}

impl<R: BufRead> LogReader<R> {
    /// Reads from `input`.
    pub fn new(input: R) -> LogReader<R> {
        LogReader {
            input,
            buf: Vec::with_capacity(512),
            lossy: String::new(),
            lineno: 0,
            index: 0,
            pending_cr: false,
            errors: Vec::new(),
            error_count: 0,
            max_line: MAX_LINE,
            io_error: None,
            done: false,
        }
    }

    /// Sets the longest line read (default [`MAX_LINE`]); a longer line is one [`LineError`]
    /// naming its line number, and the reading stops there.
    pub fn max_line(mut self, bytes: usize) -> LogReader<R> {
        self.max_line = bytes.max(1);
        self
    }

    /// The malformed lines seen so far (the first [`MAX_KEPT_ERRORS`]).
    pub fn errors(&self) -> &[LineError] {
        &self.errors
    }

    /// The malformed lines seen (the first [`MAX_KEPT_ERRORS`]), consuming the reader.
    pub fn into_errors(self) -> Vec<LineError> {
        self.errors
    }

    /// How many malformed lines were seen, kept or not.
    pub fn error_count(&self) -> usize {
        self.error_count
    }

    /// The I/O error that ended the iteration, if any.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        self.io_error.as_ref()
    }

    /// Physical lines read so far.
    pub fn lines_read(&self) -> usize {
        self.lineno
    }

    /// The input, where the reading stopped: after a line longer than
    /// [`LogReader::max_line`], the rest of that line is still in it (a follower of a growing
    /// log drains it from there).
    pub fn into_inner(self) -> R {
        self.input
    }

    /// Reads the next physical line into `self.buf` (without terminator). Splits on `\n`, `\r\n`
    /// and lone `\r`. Stops, without reading further, at a line longer than `max_line`.
    fn next_physical_line(&mut self) -> std::io::Result<Physical> {
        self.buf.clear();
        let mut got_any = false;
        loop {
            let available = match self.input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok(if got_any {
                    Physical::Line
                } else {
                    Physical::End
                });
            }
            if self.pending_cr {
                self.pending_cr = false;
                if available[0] == b'\n' {
                    self.input.consume(1);
                    continue;
                }
            }
            got_any = true;
            let (take, eol) = match find_eol(available) {
                Some(i) => (i, true),
                None => (available.len(), false),
            };
            if self.buf.len() + take > self.max_line {
                return Ok(Physical::TooLong);
            }
            self.buf.extend_from_slice(&available[..take]);
            if eol {
                self.pending_cr = available[take] == b'\r';
                self.input.consume(take + 1);
                return Ok(Physical::Line);
            }
            self.input.consume(take);
        }
    }

    fn keep_error(&mut self, err: &LineError) {
        self.error_count += 1;
        if self.errors.len() < MAX_KEPT_ERRORS {
            self.errors.push(err.clone());
        }
    }
}

impl<R: BufRead> LogReader<R> {
    /// The next line holding the token: `f` is applied to the text after the last token
    /// (its end stripped as the official checker strips it); returns the physical line number, the index among token lines and `f`'s
    /// result, or the [`LineError`] made of `f`'s error (also kept in [`LogReader::errors`]).
    fn next_with<T>(
        &mut self,
        mut f: impl FnMut(&str) -> Result<T, String>,
    ) -> Option<Result<(usize, usize, T), LineError>> {
        while !self.done {
            match self.next_physical_line() {
                Ok(Physical::Line) => {}
                Ok(Physical::End) => {
                    self.done = true;
                    return None;
                }
                Ok(Physical::TooLong) => {
                    self.done = true;
                    self.lineno += 1;
                    let err = LineError {
                        lineno: self.lineno,
                        index: self.index,
                        message: format!(
                            "the line is longer than {} bytes; the input is not read further",
                            self.max_line
                        ),
                        text: String::from_utf8_lossy(&self.buf[..self.buf.len().min(200)])
                            .chars()
                            .take(200)
                            .collect(),
                    };
                    self.buf = Vec::new();
                    self.keep_error(&err);
                    return Some(Err(err));
                }
                Err(e) => {
                    self.io_error = Some(e);
                    self.done = true;
                    return None;
                }
            }
            self.lineno += 1;
            // The official checker reads logs as latin-1; real logs carry UTF-8 noise. Lossy
            // UTF-8 keeps every ASCII byte of a record intact, which is all a record may hold.
            // The token is ASCII, which lossy decoding keeps byte for byte and never makes up,
            // so the last token of the raw bytes is the last token of the decoded line, and the
            // text after it decodes on its own. Valid UTF-8 (nearly every line) is used in
            // place, without a copy.
            let Some(pos) = rfind_token(&self.buf) else {
                continue;
            };
            let rest = strip_end_as_python(&self.buf[pos + MLLOG_TOKEN.len()..]);
            let body: &str = match std::str::from_utf8(rest) {
                Ok(rest) => rest,
                Err(_) => {
                    self.lossy.clear();
                    self.lossy.push_str(&String::from_utf8_lossy(rest));
                    &self.lossy
                }
            };
            let index = self.index;
            self.index += 1;
            return Some(match f(body) {
                Ok(t) => Ok((self.lineno, index, t)),
                Err(message) => {
                    let err = LineError {
                        lineno: self.lineno,
                        index,
                        message,
                        text: body.chars().take(200).collect(),
                    };
                    self.keep_error(&err);
                    Err(err)
                }
            });
        }
        None
    }

    /// The next record, read into `rec` (reusing its buffers), for a reader that needs only
    /// some keys in full (the compliance checker: `StreamCheck::wants`). A record whose key
    /// `wanted` rejects is fully validated (a malformed one is the same [`LineError`] as with
    /// the iterator) but comes back with its key, a `null` value and empty metadata, which
    /// costs no allocation. Returns the physical line number and whether the record was built
    /// in full.
    pub fn next_record_into(
        &mut self,
        rec: &mut Record,
        wanted: &mut dyn FnMut(&str) -> bool,
    ) -> Option<Result<(usize, bool), LineError>> {
        self.next_with(|body| record_into(body, rec, wanted))
            .map(|r| r.map(|(lineno, _, full)| (lineno, full)))
    }
}

/// The position of the last `:::MLLOG ` in `line`: candidates are found from the end by their
/// `M`, eight bytes at a time.
fn rfind_token(line: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let tok = MLLOG_TOKEN.as_bytes();
    let mut end = line.len();
    loop {
        // Find the last `M` before `end`.
        while end >= 8 {
            let w = u64::from_le_bytes(line[end - 8..end].try_into().expect("8 bytes"));
            let x = w ^ (LO * b'M' as u64);
            if x.wrapping_sub(LO) & !x & HI != 0 {
                break;
            }
            end -= 8;
        }
        let m = line[..end].iter().rposition(|&b| b == b'M')?;
        if m >= 3 && line[m - 3..].starts_with(tok) {
            return Some(m - 3);
        }
        end = m;
    }
}

/// The position of the first `\n` or `\r`, eight bytes at a time.
fn find_eol(s: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(LO) & !x & HI;
    let mut i = 0;
    while i + 8 <= s.len() {
        let w = u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
        if has_zero(w ^ (LO * b'\n' as u64)) | has_zero(w ^ (LO * b'\r' as u64)) != 0 {
            break;
        }
        i += 8;
    }
    s[i..]
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map(|p| i + p)
}

impl<R: BufRead> Iterator for LogReader<R> {
    type Item = Result<ParsedLine, LineError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_with(record_from_json).map(|r| {
            r.map(|(lineno, index, record)| ParsedLine {
                lineno,
                index,
                record,
            })
        })
    }
}

/// [`record_from_json`] into `rec`, without building the value and metadata of a record whose
/// key `wanted` rejects. A fast path that accepts only what [`record_from_json`] accepts (and
/// then reads the same record); anything unusual (an error, a duplicated member) is left to
/// [`record_from_json`], so errors and edge cases are exactly its own.
fn record_into(
    body: &str,
    rec: &mut Record,
    wanted: &mut dyn FnMut(&str) -> bool,
) -> Result<bool, String> {
    match record_fast(body, rec, wanted) {
        Some(full) => Ok(full),
        None => {
            *rec = record_from_json(body)?;
            Ok(true)
        }
    }
}

fn record_fast(body: &str, rec: &mut Record, wanted: &mut dyn FnMut(&str) -> bool) -> Option<bool> {
    let mut p = Parser {
        s: body.as_bytes(),
        i: 0,
        depth: 1,
    };
    p.ws();
    if !p.eat("{") {
        return None;
    }
    let mut namespace: Option<Str> = None;
    let mut time = None;
    let mut event_type = None;
    let mut key: Option<(usize, usize)> = None;
    let mut value = None;
    let mut metadata = None;
    p.ws();
    if !p.eat("}") {
        loop {
            p.ws();
            if p.s.get(p.i) != Some(&b'"') {
                return None;
            }
            // Member names with escapes or repeated members: the slow path.
            let name = p.plain_string()?;
            p.ws();
            if !p.eat(":") {
                return None;
            }
            p.ws();
            let start = p.i;
            match name {
                b"namespace" if namespace.is_none() && p.plain_string() == Some(b"") => {
                    namespace = Some(Cow::Borrowed(""))
                }
                b"namespace" if namespace.is_none() => {
                    p.i = start;
                    namespace = Some(match p.value().ok()? {
                        Value::Str(s) => s,
                        other => Cow::Owned(other.to_json()),
                    })
                }
                b"time_ms" if time.is_none() => time = Some(time_from(&p.value().ok()?).ok()?),
                b"event_type" if event_type.is_none() && p.plain_string().is_some() => {
                    let t = std::str::from_utf8(&p.s[start + 1..p.i - 1]).ok()?;
                    event_type = Some(EventType::from_name(t).unwrap_or(EventType::PointInTime))
                }
                b"event_type" if event_type.is_none() => {
                    p.i = start;
                    event_type = Some(match p.value().ok()? {
                        Value::Str(s) => EventType::from_name(&s).unwrap_or(EventType::PointInTime),
                        _ => EventType::PointInTime,
                    })
                }
                b"key" if key.is_none() => {
                    p.plain_string()?;
                    key = Some((start + 1, p.i - 1));
                }
                b"value" if value.is_none() => {
                    p.skip_value().ok()?;
                    value = Some((start, p.i));
                }
                b"metadata" if metadata.is_none() => {
                    if p.s.get(p.i) != Some(&b'{') {
                        return None;
                    }
                    p.skip_value().ok()?;
                    metadata = Some((start, p.i));
                }
                b"namespace" | b"time_ms" | b"event_type" | b"key" | b"value" | b"metadata" => {
                    return None
                }
                _ => p.skip_value().ok()?,
            }
            p.ws();
            if p.eat(",") {
                continue;
            }
            if p.eat("}") {
                break;
            }
            return None;
        }
    }
    p.ws();
    if p.i != p.s.len() {
        return None;
    }
    let (time, (ks, ke), value, metadata) = (time?, key?, value?, metadata?);
    let k = &body[ks..ke];
    rec.namespace = namespace.unwrap_or(Cow::Borrowed(""));
    rec.time = time.0;
    rec.loose = time.1.map(|t| {
        Box::new(Loose {
            key: None,
            time_ms: Some(t),
        })
    });
    rec.event_type = event_type.unwrap_or(EventType::PointInTime);
    let full = wanted(k);
    if full {
        rec.key = match crate::keys::intern(k) {
            Some(k) => Cow::Borrowed(k),
            None => Cow::Owned(k.to_owned()),
        };
        rec.value = parse_json(&body[value.0..value.1]).ok()?;
        let Value::Object(fields) = parse_json(&body[metadata.0..metadata.1]).ok()? else {
            return None;
        };
        rec.metadata = metadata_from(fields);
    } else {
        match &mut rec.key {
            Cow::Owned(s) => {
                s.clear();
                s.push_str(k);
            }
            slot => *slot = Cow::Owned(k.to_owned()),
        }
        rec.value = Value::Null;
        rec.metadata.file = None;
        rec.metadata.lineno = None;
        rec.metadata.fields.clear();
        rec.metadata.other = None;
    }
    Some(full)
}

fn record_from_json(body: &str) -> Result<Record, String> {
    let value = parse_json(body)?;
    let Value::Object(members) = value else {
        return Err(
            "the record is not a JSON object (the official checker crashes with a TypeError)"
                .into(),
        );
    };
    let mut namespace: Str = Cow::Borrowed("");
    let mut time = None;
    let mut event_type = EventType::PointInTime;
    let mut key = None;
    let mut value = None;
    let mut metadata = None;
    let mut loose = Loose::default();
    for (name, v) in members {
        match &*name {
            "namespace" => {
                namespace = match v {
                    Value::Str(s) => s,
                    other => Cow::Owned(other.to_json()),
                }
            }
            "time_ms" => time = Some(v),
            "event_type" => {
                event_type = v
                    .as_str()
                    .and_then(EventType::from_name)
                    .unwrap_or(EventType::PointInTime)
            }
            "key" => key = Some(v),
            "value" => value = Some(v),
            "metadata" => metadata = Some(v),
            _ => {}
        }
    }
    // The official parser reads `time_ms`, `key`, `value`, `metadata` in this order; a missing
    // one is a KeyError, which it does not catch.
    let missing = |field: &str| {
        format!("missing field `{field}` (the official checker crashes with a KeyError)")
    };
    let (time, loose_time) = time_from(&time.ok_or_else(|| missing("time_ms"))?)?;
    loose.time_ms = loose_time;
    let key = match key.ok_or_else(|| missing("key"))? {
        Value::Str(s) => intern(s),
        other => {
            let text = Cow::Owned(other.to_json());
            loose.key = Some(other);
            text
        }
    };
    let value = value.ok_or_else(|| missing("value"))?;
    let metadata = match metadata.ok_or_else(|| missing("metadata"))? {
        Value::Object(fields) => metadata_from(fields),
        other => Metadata {
            other: Some(Box::new(other)),
            ..Metadata::default()
        },
    };
    Ok(Record {
        namespace,
        time,
        event_type,
        key,
        value,
        metadata,
        loose: (loose != Loose::default()).then(|| Box::new(loose)),
    })
}

fn intern(s: Str) -> Str {
    match crate::keys::intern(&s) {
        Some(k) => Cow::Borrowed(k),
        None => s,
    }
}

/// `time_ms` as the official parser reads it: `float(time_ms)`. Integers, floats, booleans and
/// numeric strings (Python's spelling: blanks around, `_` between digits, `nan`, `inf`) are
/// read; another string is a ValueError, which the official parser reports as a parse error;
/// `null`, a list or an object is a TypeError, which crashes it.
/// Returns the timestamp and, when the timestamp cannot hold the time exactly, the time itself.
fn time_from(v: &Value) -> Result<(Timestamp, Option<f64>), String> {
    /// Integer milliseconds that whole nanoseconds in an i64 hold (about ±292 years).
    const MAX_MS: i128 = i64::MAX as i128 / 1_000_000;
    let ms = match v {
        Value::Int(i) if (-MAX_MS..=MAX_MS).contains(i) => {
            return Ok((Timestamp::from_millis(*i as i64), None))
        }
        Value::Int(i) => *i as f64,
        Value::Bool(b) => return Ok((Timestamp::from_millis(i64::from(*b)), None)),
        Value::Float(f) => *f,
        Value::Str(s) => py_float(s).ok_or_else(|| format!("`time_ms` {s:?} is not a number"))?,
        other => {
            return Err(format!(
                "`time_ms` {} is not a number (the official checker crashes with a TypeError)",
                other.to_json()
            ))
        }
    };
    let ns = ms * 1e6;
    let exact = ns.fract() == 0.0 && ns.abs() < 9.2e18;
    Ok((
        Timestamp {
            // Saturating; NaN becomes 0. The exact time is kept beside it.
            wall_ns: ns as i64,
            mono_ns: 0,
        },
        (!exact).then_some(ms),
    ))
}

/// Python's `float(str)`: surrounding whitespace, an optional sign, digits with single `_`
/// between digits, a fraction, an exponent, or `nan`/`inf`/`infinity` in any case.
pub(crate) fn py_float(s: &str) -> Option<f64> {
    let t = s.trim();
    let body = t.strip_prefix(['+', '-']).unwrap_or(t);
    let lower = body.to_ascii_lowercase();
    if matches!(lower.as_str(), "nan" | "inf" | "infinity") {
        return t.parse::<f64>().ok();
    }
    let b = body.as_bytes();
    let mut seen_digit = false;
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'0'..=b'9' => seen_digit = true,
            b'_' => {
                let digit = |j: Option<&u8>| j.is_some_and(u8::is_ascii_digit);
                if !digit(i.checked_sub(1).and_then(|j| b.get(j))) || !digit(b.get(i + 1)) {
                    return None;
                }
            }
            b'.' | b'e' | b'E' | b'+' | b'-' => {}
            _ => return None,
        }
    }
    if !seen_digit {
        return None;
    }
    t.replace('_', "").parse::<f64>().ok()
}

fn metadata_from(fields: Vec<(Str, Value)>) -> Metadata {
    let mut md = Metadata::default();
    for (k, v) in fields {
        match (&*k, v) {
            ("file", Value::Str(s)) if md.file.is_none() => md.file = Some(s),
            ("lineno", Value::Int(i))
                if md.lineno.is_none() && (0..=u32::MAX as i128).contains(&i) =>
            {
                md.lineno = Some(i as u32)
            }
            (_, v) => md.set(intern(k), v),
        }
    }
    md
}

/// How deep JSON values may nest: as deep as Python's `json.loads` reads them inside the
/// official checker, whose recursion limit (1 000 calls) less the calls above the parser leaves
/// about 985 levels; deeper, Python raises RecursionError, and a record is an error here.
const MAX_JSON_DEPTH: u32 = 985;

/// Parses JSON as Python's `json.loads` does, `NaN`, `Infinity` and `-Infinity` included.
/// Duplicate object keys keep the last value, as Python does.
pub(crate) fn parse_json(text: &str) -> Result<Value, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
        depth: 0,
    };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!(
            "extra data after the JSON object at column {}",
            p.i + 1
        ));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    depth: u32,
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("invalid JSON at column {}: {what}", self.i + 1))
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.depth += 1;
        if self.depth > MAX_JSON_DEPTH {
            return self.err("nested too deeply");
        }
        let v = match self.s.get(self.i) {
            None => self.err("unexpected end"),
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().map(|s| Value::Str(Cow::Owned(s))),
            Some(b't') if self.eat("true") => Ok(Value::Bool(true)),
            Some(b'f') if self.eat("false") => Ok(Value::Bool(false)),
            Some(b'n') if self.eat("null") => Ok(Value::Null),
            Some(b'N') if self.eat("NaN") => Ok(Value::Float(f64::NAN)),
            Some(b'I') if self.eat("Infinity") => Ok(Value::Float(f64::INFINITY)),
            Some(b'-') if self.eat("-Infinity") => Ok(Value::Float(f64::NEG_INFINITY)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => self.err("expected a value"),
        };
        self.depth -= 1;
        v
    }

    /// A string without escapes at the cursor (which must be at its `"`): its bytes. `None`
    /// (cursor unspecified) for anything else.
    fn plain_string(&mut self) -> Option<&'a [u8]> {
        let s = self.s;
        if s.get(self.i) != Some(&b'"') {
            return None;
        }
        let start = self.i + 1;
        let mut i = start;
        while let Some(&b) = s.get(i) {
            if b == b'"' {
                self.i = i + 1;
                return Some(&s[start..i]);
            }
            if b == b'\\' || b < 0x20 {
                return None;
            }
            i += 1;
        }
        None
    }

    /// Validates the value at the cursor exactly as [`Parser::value`] does (same depth limit,
    /// same errors) without building it.
    fn skip_value(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_JSON_DEPTH {
            return self.err("nested too deeply");
        }
        let r = match self.s.get(self.i) {
            None => self.err("unexpected end"),
            Some(b'{') => self.skip_object(),
            Some(b'[') => self.skip_array(),
            Some(b'"') => self.skip_string(),
            Some(b't') if self.eat("true") => Ok(()),
            Some(b'f') if self.eat("false") => Ok(()),
            Some(b'n') if self.eat("null") => Ok(()),
            Some(b'N') if self.eat("NaN") => Ok(()),
            Some(b'I') if self.eat("Infinity") => Ok(()),
            Some(b'-') if self.eat("-Infinity") => Ok(()),
            Some(b'-' | b'0'..=b'9') => self.number_end().map(|_| ()),
            Some(_) => self.err("expected a value"),
        };
        self.depth -= 1;
        r
    }

    fn skip_object(&mut self) -> Result<(), String> {
        self.i += 1;
        self.ws();
        if self.eat("}") {
            return Ok(());
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return self.err("expected a string key");
            }
            self.skip_string()?;
            self.ws();
            if !self.eat(":") {
                return self.err("expected ':'");
            }
            self.ws();
            self.skip_value()?;
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("}") {
                return Ok(());
            }
            return self.err("expected ',' or '}'");
        }
    }

    fn skip_array(&mut self) -> Result<(), String> {
        self.i += 1;
        self.ws();
        if self.eat("]") {
            return Ok(());
        }
        loop {
            self.ws();
            self.skip_value()?;
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("]") {
                return Ok(());
            }
            return self.err("expected ',' or ']'");
        }
    }

    /// Validates a string as [`Parser::string`] does, without building it.
    fn skip_string(&mut self) -> Result<(), String> {
        self.i += 1;
        loop {
            match self.s.get(self.i) {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.i += 1;
                    let Some(&e) = self.s.get(self.i) else {
                        return self.err("unterminated escape");
                    };
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let hi = self.hex4()?;
                            if (0xD800..0xDC00).contains(&hi) && self.eat("\\u") {
                                self.hex4()?;
                            }
                        }
                        _ => return self.err("bad escape"),
                    }
                }
                Some(&b) if b < 0x20 => return self.err("control character in string"),
                Some(_) => self.i += 1,
            }
        }
    }

    fn object(&mut self) -> Result<Value, String> {
        self.i += 1;
        let mut members: Vec<(Str, Value)> = Vec::new();
        self.ws();
        if self.eat("}") {
            return Ok(Value::Object(members));
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return self.err("expected a string key");
            }
            let k = self.string()?;
            self.ws();
            if !self.eat(":") {
                return self.err("expected ':'");
            }
            self.ws();
            let v = self.value()?;
            match members.iter_mut().find(|(name, _)| *name == k) {
                Some(slot) => slot.1 = v,
                None => members.push((Cow::Owned(k), v)),
            }
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("}") {
                return Ok(Value::Object(members));
            }
            return self.err("expected ',' or '}'");
        }
    }

    fn array(&mut self) -> Result<Value, String> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.eat("]") {
            return Ok(Value::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value()?);
            self.ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("]") {
                return Ok(Value::Array(items));
            }
            return self.err("expected ',' or ']'");
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let Some(h) = self.s.get(self.i..self.i + 4) else {
            return self.err("truncated \\u escape");
        };
        let h = std::str::from_utf8(h).map_err(|e| e.to_string())?;
        let v = u32::from_str_radix(h, 16).or_else(|_| self.err("bad \\u escape"))?;
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, String> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let start = self.i;
            while let Some(&b) = self.s.get(self.i) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.i += 1;
            }
            let part = &self.s[start..self.i];
            match std::str::from_utf8(part) {
                Ok(t) => out.push_str(t),
                Err(_) => out.push_str(&String::from_utf8_lossy(part)),
            }
            match self.s.get(self.i) {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let Some(&e) = self.s.get(self.i) else {
                        return self.err("unterminated escape");
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi) && self.eat("\\u") {
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                                } else {
                                    None
                                }
                            } else {
                                char::from_u32(hi)
                            };
                            // Lone surrogates are valid in Python strings but not in Rust ones.
                            out.push(c.unwrap_or(char::REPLACEMENT_CHARACTER));
                        }
                        _ => return self.err("bad escape"),
                    }
                }
                Some(_) => return self.err("control character in string"),
            }
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.i;
        let is_float = self.number_end()?;
        let text = std::str::from_utf8(&self.s[start..self.i]).expect("ASCII digits");
        if !is_float {
            if let Ok(i) = text.parse::<i128>() {
                return Ok(Value::Int(i));
            }
            if let Ok(u) = text.parse::<u128>() {
                return Ok(Value::UInt(u));
            }
        }
        text.parse::<f64>()
            .map(Value::Float)
            .or_else(|_| self.err("bad number"))
    }

    /// Moves over a number's grammar; whether it has a fraction or an exponent.
    fn number_end(&mut self) -> Result<bool, String> {
        if self.s[self.i] == b'-' {
            self.i += 1;
        }
        let int_start = self.i;
        while let Some(b'0'..=b'9') = self.s.get(self.i) {
            self.i += 1;
        }
        if self.i == int_start {
            return self.err("expected digits");
        }
        if self.s[int_start] == b'0' && self.i - int_start > 1 {
            return self.err("leading zero");
        }
        let mut is_float = false;
        if self.s.get(self.i) == Some(&b'.') {
            is_float = true;
            self.i += 1;
            let frac = self.i;
            while let Some(b'0'..=b'9') = self.s.get(self.i) {
                self.i += 1;
            }
            if self.i == frac {
                return self.err("expected digits after '.'");
            }
        }
        if let Some(b'e' | b'E') = self.s.get(self.i) {
            is_float = true;
            self.i += 1;
            if let Some(b'+' | b'-') = self.s.get(self.i) {
                self.i += 1;
            }
            let exp = self.i;
            while let Some(b'0'..=b'9') = self.s.get(self.i) {
                self.i += 1;
            }
            if self.i == exp {
                return self.err("expected exponent digits");
            }
        }
        Ok(is_float)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prefixed_and_glued_lines() {
        let log = "noise\r\n0: :::MLLOG {\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"POINT_IN_TIME\", \"key\": \"seed\", \"value\": 7, \"metadata\": {\"file\": \"a.rs\", \"lineno\": 3}}\r\n\
host:1:5:::MLLOG {\"time_ms\": \"2.5\", \"key\": \"x\", \"value\": NaN, \"metadata\": {}}\rprogress 50%\n\
[1,0]<stdout>::::MLLOG {\"key\": \"x\"}\n";
        let (records, errors) = parse_log(log);
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].lineno, 2);
        assert_eq!(records[0].record.key, "seed");
        assert_eq!(records[0].record.metadata.file.as_deref(), Some("a.rs"));
        assert_eq!(records[1].lineno, 3);
        assert!(records[1].record.value.as_f64().unwrap().is_nan());
        assert_eq!(records[1].record.time.wall_ns, 2_500_000);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].lineno, 5);
        assert_eq!(errors[0].index, 2);
        assert!(
            errors[0].message.contains("time_ms"),
            "{}",
            errors[0].message
        );
    }

    /// A line longer than the cap is one error naming its line number, and the reading stops
    /// there without holding the line: an input without line ends (`/dev/zero`) ends too.
    #[test]
    fn an_overlong_line_is_one_error_and_ends_the_reading() {
        let ok = ":::MLLOG {\"time_ms\": 1, \"key\": \"a\", \"value\": 1, \"metadata\": {}}";
        let log = format!("{ok}\nnoise\n{}\n{ok}\n", "x".repeat(300));
        let mut reader = LogReader::new(log.as_bytes()).max_line(256);
        let items: Vec<_> = reader.by_ref().collect();
        assert_eq!(items.len(), 2, "{items:?}");
        assert!(items[0].is_ok());
        let err = items[1].as_ref().unwrap_err();
        assert_eq!(err.lineno, 3);
        assert!(
            err.message.contains("longer than 256 bytes"),
            "{}",
            err.message
        );
        assert_eq!(reader.error_count(), 1);
        assert!(reader.io_error().is_none());
        // Endless input without a line end: terminates after the cap.
        let zeros = std::io::BufReader::with_capacity(64, std::io::repeat(0));
        let mut reader = LogReader::new(zeros).max_line(4096);
        let items: Vec<_> = reader.by_ref().collect();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].as_ref().unwrap_err().lineno, 1);
        // A line of exactly the cap is read.
        let exact = format!("{ok}{}\n", " ".repeat(256 - ok.len()));
        let items: Vec<_> = LogReader::new(exact.as_bytes()).max_line(256).collect();
        assert!(items[0].is_ok(), "{items:?}");
    }

    #[test]
    fn keeps_a_bounded_number_of_errors() {
        let log = ":::MLLOG {\n".repeat(MAX_KEPT_ERRORS + 5);
        let mut reader = LogReader::new(log.as_bytes());
        assert_eq!(reader.by_ref().count(), MAX_KEPT_ERRORS + 5);
        assert_eq!(reader.errors().len(), MAX_KEPT_ERRORS);
        assert_eq!(reader.error_count(), MAX_KEPT_ERRORS + 5);
    }

    /// The official parser keeps a record whatever the JSON types of its fields; only a missing
    /// field, or a `time_ms` that `float()` rejects, is an error.
    #[test]
    fn keeps_fields_of_any_type() {
        let rec = |body: &str| record_from_json(body);
        let r = rec(r#"{"time_ms": 1, "key": 5, "value": 1, "metadata": ""}"#).unwrap();
        assert_eq!(r.key, "5");
        assert_eq!(r.loose.as_ref().unwrap().key, Some(Value::Int(5)));
        assert_eq!(r.metadata.other.as_deref(), Some(&Value::from("")));
        let r = rec(r#"{"time_ms": true, "key": "k", "value": 1, "metadata": null}"#).unwrap();
        assert_eq!(r.time_ms(), 1);
        assert_eq!(r.metadata.other.as_deref(), Some(&Value::Null));
        let r = rec(r#"{"time_ms": " 1_000.5 ", "key": "k", "value": 1, "metadata": []}"#).unwrap();
        assert_eq!((r.time.wall_ns, r.loose), (1_000_500_000, None));
        let r = rec(r#"{"time_ms": 0.0000001, "key": "k", "value": 1, "metadata": {}}"#).unwrap();
        assert_eq!(r.loose.unwrap().time_ms, Some(0.0000001));
        let r = rec(r#"{"time_ms": "-Infinity", "key": "k", "value": 1, "metadata": {}}"#).unwrap();
        assert_eq!(r.loose.unwrap().time_ms, Some(f64::NEG_INFINITY));
        let r = rec(r#"{"time_ms": NaN, "key": "k", "value": 1, "metadata": {}}"#).unwrap();
        assert!(r.loose.unwrap().time_ms.unwrap().is_nan());
        for bad in [
            r#"{"time_ms": "", "key": "k", "value": 1, "metadata": {}}"#,
            r#"{"time_ms": "1__0", "key": "k", "value": 1, "metadata": {}}"#,
            r#"{"time_ms": null, "key": "k", "value": 1, "metadata": {}}"#,
            r#"{"time_ms": [1], "key": "k", "value": 1, "metadata": {}}"#,
            r#"{"time_ms": 1, "value": 1, "metadata": {}}"#,
            r#"{"time_ms": 1, "key": "k", "metadata": {}}"#,
            r#"{"time_ms": 1, "key": "k", "value": 1}"#,
        ] {
            assert!(rec(bad).is_err(), "{bad}");
        }
        for (s, want) in [
            ("1", 1.0),
            ("+1.5e3", 1500.0),
            ("1_0", 10.0),
            (" .5", 0.5),
            ("inf", f64::INFINITY),
        ] {
            assert_eq!(py_float(s), Some(want), "{s}");
        }
        for s in ["", "_1", "1_", "1e", "abc", "0x10", "1 2"] {
            assert_eq!(py_float(s), None, "{s}");
        }
    }

    #[test]
    fn reports_malformed_json() {
        let (_, errors) = parse_log(":::MLLOG {\"key\": \"a\", \"value\": 1, \n:::MLLOG{}\n");
        assert_eq!(errors.len(), 1);
        assert!(errors[0].message.contains("invalid JSON"));
    }

    /// The checker's fast path reads exactly what `record_from_json` reads, and fails exactly
    /// where it fails; a record it does not want comes back with its key only.
    #[test]
    fn fast_path_matches_full_parse() {
        let mut bodies: Vec<String> = vec![
            r#"{"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "seed", "value": 7, "metadata": {"file": "a.rs", "lineno": 3}}"#.into(),
            r#"{"namespace": "ns", "time_ms": "2.5", "event_type": "INTERVAL_END", "key": "run_stop", "value": {"a": [1, 2.5e3, -0.0, NaN, -Infinity, null, true]}, "metadata": {"status": "success", "x": "\u00e9\ud83d\ude00\ud800"}}"#.into(),
            r#"{"namespace": 3, "time_ms": 1.5, "event_type": 4, "key": "k", "value": "v", "metadata": {}}"#.into(),
            r#"{"key": "a", "key": "b", "time_ms": 1, "value": 1, "metadata": {}}"#.into(),
            r#"{"k\u0065y": "a", "time_ms": 1, "value": 1, "metadata": {}}"#.into(),
            r#"{"key": "a\"b", "time_ms": 1, "value": 1, "metadata": {}}"#.into(),
            r#"{"key": "a", "time_ms": 1, "value": 1, "metadata": {}, "extra": [{"deep": [[]]}]}"#.into(),
            r#"{"key": "a", "time_ms": 1, "value": 1, "metadata": []}"#.into(),
            r#"{"key": 1, "time_ms": 1, "value": 1, "metadata": {}}"#.into(),
            r#"{"key": "a", "time_ms": NaN, "value": 1, "metadata": {}}"#.into(),
            r#"{"key": "a", "time_ms": 1, "metadata": {}}"#.into(),
            r#"{"key": "a", "time_ms": 1, "value": 01, "metadata": {}}"#.into(),
            r#"{"key": "a", "time_ms": 1, "value": "\x", "metadata": {}}"#.into(),
            r#"{"key": "a", "time_ms": 1, "value": "\u+abc", "metadata": {}}"#.into(),
            r#"{"key": "a", "time_ms": 1, "value": 1, "metadata": {}} x"#.into(),
            r#"{"key": "a", "time_ms": 1, "value": [1,], "metadata": {}}"#.into(),
            "{\"key\": \"a\", \"time_ms\": 1, \"value\": \"tab\there\", \"metadata\": {}}".into(),
            r#"[1]"#.into(),
            r#"{}"#.into(),
            r#"{"#.into(),
        ];
        let deep = format!(
            "{{\"key\": \"a\", \"time_ms\": 1, \"value\": {}1{}, \"metadata\": {{}}}}",
            "[".repeat(255),
            "]".repeat(255)
        );
        bodies.push(deep.replace("[1]", "[[1]]"));
        bodies.push(deep);
        for path in crate::published_logs("the record parser's two paths on published records") {
            let text = std::fs::read(path).unwrap();
            for line in String::from_utf8_lossy(&text).lines() {
                if let Some(pos) = line.rfind(MLLOG_TOKEN) {
                    bodies.push(line[pos + MLLOG_TOKEN.len()..].trim().to_string());
                }
            }
        }
        for body in &bodies {
            let full = record_from_json(body);
            let mut rec = Record::empty();
            let got = record_into(body, &mut rec, &mut |_| true);
            match &full {
                Ok(r) => {
                    assert_eq!(got, Ok(true), "{body}");
                    // Debug, not ==: NaN values are equal spellings but not equal numbers.
                    assert_eq!(format!("{rec:?}"), format!("{r:?}"), "{body}");
                }
                Err(e) => assert_eq!(got.as_ref(), Err(e), "{body}"),
            }
            let mut rec = Record::empty();
            let got = record_into(body, &mut rec, &mut |_| false);
            match &full {
                Ok(r) => {
                    assert!(got.is_ok(), "{body}");
                    assert_eq!(rec.key, r.key, "{body}");
                    assert_eq!(rec.time, r.time, "{body}");
                    if got == Ok(false) {
                        assert_eq!(rec.value, Value::Null);
                        assert!(rec.metadata.is_empty());
                    } else {
                        assert_eq!(format!("{rec:?}"), format!("{r:?}"), "{body}");
                    }
                }
                Err(e) => assert_eq!(got.as_ref(), Err(e), "{body}"),
            }
        }
    }

    #[test]
    fn finds_the_last_token_and_line_ends() {
        for line in [
            "",
            "M",
            ":::MLLOG ",
            "x:::MLLOG a:::MLLOG b",
            "MMMMMMMMMMMMMMMMMMMMM:::MLLOG {}MMMMMMMMMMMMMMM",
            ":::MLLOG:::MLLOG x",
            "no token here at all, just a long line of noise MLLOG ::MLLOG",
        ] {
            assert_eq!(
                rfind_token(line.as_bytes()),
                line.rfind(MLLOG_TOKEN),
                "{line}"
            );
        }
        for s in [
            "",
            "abc",
            "abcdefghij\rk",
            "abcdefghijklmnop\n",
            "\n",
            "abcdefgh",
        ] {
            let b = s.as_bytes();
            assert_eq!(
                find_eol(b),
                b.iter().position(|&c| c == b'\n' || c == b'\r')
            );
        }
    }

    #[test]
    fn round_trips_encoding() {
        let line = r#":::MLLOG {"namespace": "", "time_ms": 1767226267692, "event_type": "INTERVAL_END", "key": "run_stop", "value": 0.9243, "metadata": {"file": "/workspace/train/src/mlperf.rs", "lineno": 150, "samples_count": 3072, "status": "success", "v": [1, 2.5, {"a": null}], "big": 1180591620717411303424}}"#;
        let rec = parse_line(line).unwrap().unwrap();
        assert_eq!(rec.to_line(), line);
    }
}
