//! The official checker's log parsers (`mlp_parser/ruleset_*.py`), one of three forms:
//! the 0.6.0 text line (`:::MLL <time> <key>: <json>`), and the JSON line (`:::MLLOG {...}`)
//! whose records are named tuples up to 3.0.0 and dataclasses (attributes can be set) since.
//!
//! As the official parsers do: the file is read as Latin-1 with universal newlines, only lines
//! holding the token count (`lineno` numbers those, from 0), everything before the token's
//! last occurrence is dropped, and the line is stripped. A line that fails with a ValueError
//! is a parse error; a record without `time_ms`, `key`, `value` or `metadata`, or that is not
//! an object, crashes the official parser (a KeyError or TypeError), and here ends the check.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use super::obj::{Dict, LogLine, Obj};
use super::shapes::{Shapes, MAX_SHAPE_LEN};
use super::skim::{self, Make};
use super::token_lines::{from_last_token, token_lines};
use crate::record::{parse_json, Value};

/// Which parser a ruleset uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// 0.6.0: `:::MLL <time> <key>: <json value>`; records are named tuples.
    TextLine,
    /// 0.7.0 to 3.0.0: `:::MLLOG {json}`; records are named tuples.
    JsonTuple,
    /// Since 3.1.0: `:::MLLOG {json}`; records are dataclasses.
    JsonDataclass,
}

impl LogFormat {
    /// The parser the package in `compliance_dir` has for `ruleset`, read from its
    /// `mlp_parser/ruleset_<digits>.py` (the token it looks for, and whether its `LogLine`
    /// is a dataclass); `None` when the package has no parser for it (the official checker
    /// raises `Ruleset "X" is not supported`). A folder without `mlp_parser` gets the forms
    /// of the published packages by version.
    pub fn of(compliance_dir: &Path, ruleset: &str) -> Option<LogFormat> {
        let parsers = compliance_dir.join("mlp_parser");
        if !parsers.is_dir() {
            return Some(match ruleset {
                "0.6.0" => LogFormat::TextLine,
                "0.7.0" | "1.0.0" | "1.1.0" | "2.0.0" | "2.1.0" | "3.0.0" => LogFormat::JsonTuple,
                _ => LogFormat::JsonDataclass,
            });
        }
        let file = parsers.join(format!("ruleset_{}.py", ruleset.replace('.', "")));
        let src = std::fs::read_to_string(file).ok()?;
        Some(if src.contains("TOKEN = ':::MLL'") {
            LogFormat::TextLine
        } else if src.contains("@dataclass") {
            LogFormat::JsonDataclass
        } else {
            LogFormat::JsonTuple
        })
    }

    fn token(self) -> &'static str {
        match self {
            LogFormat::TextLine => ":::MLL",
            _ => ":::MLLOG ",
        }
    }
}

/// A line the parser refused: its physical line, its text and why.
#[derive(Clone, Debug)]
pub(crate) struct BadLine {
    pub(crate) phys: usize,
    pub(crate) message: String,
}

/// A record as the parse keeps it: where its text is, and its key. Its Python object is built
/// when a rule first reads it (see `lines`), or at parse time where the record is anything but
/// the common form; `built` then says where in [`Parsed::built`] it is. Forty bytes, one per
/// record of the log: the one part of a check that grows with every record.
pub(crate) struct Rec {
    pub(crate) phys: usize,
    pub(crate) lineno: u64,
    /// The stripped record's byte range in the log (ASCII text).
    pub(crate) span: (usize, usize),
    /// The key's number in [`Parsed::keys`]; [`BUILT`] for a record built at parse time.
    pub(crate) key: u32,
    /// Its object's place in [`Parsed::built`]; [`NOT_BUILT`] before it is built.
    pub(crate) built: u32,
}

/// [`Rec::built`] of a record not built yet.
pub(crate) const NOT_BUILT: u32 = u32::MAX;

/// How many unparsable lines are kept to be listed one by one.
pub(crate) const MAX_BAD_LINES: usize = 100;

/// The key number of a record built at parse time (its key is read from its object).
pub(crate) const BUILT: u32 = u32::MAX;

/// The parsed log.
pub(crate) struct Parsed {
    pub(crate) records: Vec<Rec>,
    /// The distinct keys of the records in the common form, numbered in order of appearance:
    /// a pass asks once per key, not once per record, whether a rule reads it.
    pub(crate) keys: Vec<Box<str>>,
    /// The first [`MAX_BAD_LINES`] unparsable lines.
    pub(crate) errors: Vec<BadLine>,
    /// All unparsable lines.
    pub(crate) error_count: usize,
    /// Where and why the official parser raises (the check ends there).
    pub(crate) crash: Option<(usize, String)>,
    /// The objects of the records built, in the order they were.
    pub(crate) built: Vec<Obj>,
}

impl Parsed {
    /// The object of `rec`, when it is built.
    pub(crate) fn object(&self, rec: &Rec) -> Option<&Obj> {
        self.built.get(rec.built as usize)
    }

    /// Keeps `obj` as the object of record `i`.
    pub(crate) fn keep(&mut self, i: usize, obj: Obj) {
        // Past four billion objects (which no memory holds) one would be built again instead.
        if let Ok(at) = u32::try_from(self.built.len())
            && at != NOT_BUILT
        {
            self.records[i].built = at;
            self.built.push(obj);
        }
    }
}

/// Python's `str.strip()` whitespace.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Latin-1 text: every byte one character (ASCII, the usual case, as it is).
fn latin1(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    if bytes.is_ascii() {
        // ASCII is valid UTF-8.
        return std::borrow::Cow::Borrowed(std::str::from_utf8(bytes).unwrap_or_default());
    }
    std::borrow::Cow::Owned(bytes.iter().map(|&b| b as char).collect())
}

/// Python's `str.strip()` of the end of a line, on the ASCII whitespace (a line ending in
/// another Latin-1 space is left to the slow path, which strips it as Python does).
fn strip_ascii_end(line: &[u8]) -> &[u8] {
    let keep = line
        .iter()
        .rposition(|&c| !matches!(c, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f | b' '))
        .map_or(0, |i| i + 1);
    &line[..keep]
}

/// The official parser of `format` run over a log fed in pieces of whole lines, keeping only
/// what the checks need: each record's place and key, the objects of the records the first rule
/// file reads (built as they go by, where the log is at hand), the first unparsable lines.
pub(crate) struct Scan<'w> {
    format: LogFormat,
    finder: memchr::memmem::Finder<'static>,
    out: Parsed,
    numbers: rustc_hash::FxHashMap<Box<str>, u32>,
    /// Whether the first rule file reads a key, by key number.
    build_now: Vec<bool>,
    wanted: &'w dyn Fn(&str) -> bool,
    objects: Objects,
    lineno: u64,
    /// Line breaks before the piece being read.
    breaks: usize,
    /// The shapes of the records walked.
    shapes: Shapes,
}

impl<'w> Scan<'w> {
    /// A scan that builds the records whose key `wanted` names as it reads them.
    pub(crate) fn new(format: LogFormat, wanted: &'w dyn Fn(&str) -> bool) -> Scan<'w> {
        Scan {
            format,
            finder: memchr::memmem::Finder::new(format.token().as_bytes()),
            out: Parsed {
                records: Vec::new(),
                keys: Vec::new(),
                errors: Vec::new(),
                error_count: 0,
                crash: None,
                built: Vec::new(),
            },
            numbers: Default::default(),
            build_now: Vec::new(),
            wanted,
            objects: Objects::default(),
            lineno: 0,
            breaks: 0,
            shapes: Shapes::default(),
        }
    }

    /// Reads `piece`, whole lines found at byte `offset` of the log; `false` once the official
    /// parser has raised (nothing more is read).
    pub(crate) fn feed(&mut self, piece: &[u8], offset: usize) -> bool {
        let token = self.format.token().len();
        // A copy, for the records to be read while it runs over the piece.
        let finder = self.finder.clone();
        let mut lines = token_lines(piece, &finder);
        let json = self.format != LogFormat::TextLine;
        for (phys, first) in lines.by_ref() {
            let phys = self.breaks + phys;
            // A record of a shape seen before holds no second token (a shape's text has none,
            // and a number cannot make one), so its line is read from the first; any other
            // line from the last, as the official parser reads it.
            let seen = json
                .then(|| strip_ascii_end(first).get(token..))
                .flatten()
                .and_then(|body| self.shapes.find(body));
            let (line, key) = match seen {
                Some(key) => (first, Some(key)),
                None => {
                    let line = from_last_token(first, &finder);
                    let body = json.then(|| strip_ascii_end(line).get(token..)).flatten();
                    // The shapes were tried on this very text unless a later token cut it.
                    let tried = line.len() == first.len();
                    (line, body.and_then(|body| self.key(body, tried)))
                }
            };
            let stripped = strip_ascii_end(line);
            if let Some(key) = key {
                // The common form: kept as its place in the log and its key.
                let start = offset + (stripped.as_ptr() as usize - piece.as_ptr() as usize);
                self.out.records.push(Rec {
                    phys,
                    lineno: self.lineno,
                    span: (start, start + stripped.len()),
                    key,
                    built: NOT_BUILT,
                });
                if self.build_now[key as usize] {
                    let i = self.out.records.len() - 1;
                    let rec = &self.out.records[i];
                    if let Ok(obj) = build(stripped, rec, self.format, &mut self.objects) {
                        self.out.keep(i, obj);
                    }
                }
                self.lineno += 1;
                continue;
            }
            let text = latin1(line);
            let text = text.trim_matches(py_space);
            let r = match self.format {
                LogFormat::TextLine => text_line(text),
                _ => json_line(text, token),
            };
            match r {
                Ok((ts, key, value)) => {
                    let obj = line_obj(text, ts, key, value, self.lineno, phys, self.format);
                    self.out.records.push(Rec {
                        phys,
                        lineno: self.lineno,
                        span: (0, 0),
                        key: BUILT,
                        built: NOT_BUILT,
                    });
                    self.out.keep(self.out.records.len() - 1, obj);
                }
                Err(Fail::Value(message)) => {
                    self.out.error_count += 1;
                    if self.out.errors.len() < MAX_BAD_LINES {
                        self.out.errors.push(BadLine { phys, message });
                    }
                }
                Err(Fail::Crash(message)) => {
                    self.out.crash = Some((phys, message));
                    return false;
                }
            }
            self.lineno += 1;
        }
        self.breaks += lines.breaks_to_end();
        true
    }

    /// The number of the key of a record in the common form (`body`: the text after the token,
    /// stripped); `None` for any other record. `tried`: the shapes seen did not match it.
    fn key(&mut self, body: &[u8], tried: bool) -> Option<u32> {
        if !tried && let Some(key) = self.shapes.find(body) {
            return Some(key);
        }
        let (key, shape) = if body.len() <= MAX_SHAPE_LEN {
            let (key, shape) = skim::head_shape(body)?;
            (key, Some(shape))
        } else {
            (skim::head_key(body)?, None)
        };
        let key = match self.numbers.get(key) {
            Some(&k) => k,
            None => {
                let k = self.out.keys.len() as u32;
                self.numbers.insert(key.into(), k);
                self.out.keys.push(key.into());
                self.build_now.push((self.wanted)(key));
                k
            }
        };
        if let Some(shape) = shape {
            self.shapes.add(shape, key);
        }
        Some(key)
    }

    /// What the scan kept.
    pub(crate) fn finish(self) -> Parsed {
        self.out
    }
}

/// A whole log held in memory, parsed as the official parser of `format` does.
#[cfg(test)]
pub(crate) fn parse(bytes: &[u8], format: LogFormat) -> Parsed {
    let mut scan = Scan::new(format, &|_| false);
    scan.feed(bytes, 0);
    scan.finish()
}

fn line_obj(
    text: &str,
    ts: f64,
    key: Obj,
    value: Obj,
    lineno: u64,
    phys: usize,
    format: LogFormat,
) -> Obj {
    Obj::Line(Rc::new(RefCell::new(LogLine {
        full_string: Obj::str(text),
        timestamp: Obj::Float(ts),
        key,
        value,
        lineno: Obj::Int(lineno.into()),
        phys,
        mutable: format == LogFormat::JsonDataclass,
    })))
}

/// The Python object of a record kept as its place in the log (`line` is its text there): read
/// in one walk straight into objects, the record being in the common form the scan checked.
pub(crate) fn build(
    line: &[u8],
    rec: &Rec,
    format: LogFormat,
    objects: &mut Objects,
) -> Result<Obj, String> {
    let text = std::str::from_utf8(line).map_err(|e| e.to_string())?;
    let Some(head) = line
        .get(format.token().len()..)
        .and_then(|body| skim::head(body, objects))
    else {
        // Not the common form after all: the official parser's path.
        return match json_line(text, format.token().len()) {
            Ok((ts, key, value)) => {
                Ok(line_obj(text, ts, key, value, rec.lineno, rec.phys, format))
            }
            Err(Fail::Value(m) | Fail::Crash(m)) => Err(m),
        };
    };
    // `float(m['time_ms'])`
    let ts = match objects.number(head.time_ms, true) {
        Obj::Float(f) => f,
        _ => f64::NAN,
    };
    let mut d = Dict {
        entries: Vec::with_capacity(2),
    };
    d.entries.push((objects.name(b"value"), head.value));
    d.entries.push((objects.name(b"metadata"), head.metadata));
    Ok(line_obj(
        text,
        ts,
        objects.name(head.key.as_bytes()),
        Obj::dict(d),
        rec.lineno,
        rec.phys,
        format,
    ))
}

/// The objects `json.loads` makes of JSON values (strings here are ASCII without escapes).
///
/// The names of objects' members, records' keys and short string values are made once and
/// shared, as `json.loads` shares a repeated name within a document: a log repeats a handful
/// of names and values in every record, and strings compare by value in the engine (`is`
/// included), so sharing them across records is not seen by a rule; it spares an allocation,
/// a free and the memory of a copy per string.
#[derive(Default)]
pub(crate) struct Objects {
    names: rustc_hash::FxHashMap<Box<[u8]>, Rc<str>>,
}

/// The longest string value shared between records; a longer one is rarely repeated.
const MAX_SHARED_LEN: usize = 256;

/// How many distinct member names are kept: a log whose names never repeat (a dict keyed
/// by some id) does not grow the memo past this.
const MAX_NAMES: usize = 1024;

impl Objects {
    /// A string, shared with the earlier records that had it.
    fn name(&mut self, text: &[u8]) -> Obj {
        if let Some(s) = self.names.get(text) {
            return Obj::Str(s.clone());
        }
        let s: Rc<str> = Rc::from(std::str::from_utf8(text).unwrap_or_default());
        if self.names.len() < MAX_NAMES {
            self.names.insert(text.into(), s.clone());
        }
        Obj::Str(s)
    }
}

impl skim::Make for Objects {
    type Out = Obj;
    type Dict = Dict;

    fn literal(&mut self, word: &[u8]) -> Obj {
        match word {
            b"true" => Obj::Bool(true),
            b"false" => Obj::Bool(false),
            _ => Obj::None,
        }
    }

    /// An int up to 128 bits, the nearest float beyond, as `record::parse_json` reads it.
    fn number(&mut self, text: &[u8], float: bool) -> Obj {
        let text = std::str::from_utf8(text).unwrap_or_default();
        if !float {
            if let Ok(i) = text.parse::<i128>() {
                return Obj::Int(i);
            }
            if let Ok(u) = text.parse::<u128>() {
                return Obj::Float(u as f64);
            }
        }
        Obj::Float(text.parse().unwrap_or(f64::NAN))
    }

    fn string(&mut self, text: &[u8]) -> Obj {
        // Shared as names are: a log repeats its string values (a source file, a status) in
        // every record.
        if text.len() <= MAX_SHARED_LEN {
            return self.name(text);
        }
        Obj::str(std::str::from_utf8(text).unwrap_or_default())
    }

    fn list(&mut self, items: Vec<Obj>) -> Obj {
        Obj::list(items)
    }

    fn dict(&mut self) -> Dict {
        Dict::default()
    }

    fn entry(&mut self, dict: &mut Dict, key: &[u8], value: Obj) {
        // JSON keys are strings: always hashable, the last of a repeated key wins.
        let _ = dict.set(self.name(key), value);
    }

    fn end_dict(&mut self, dict: Dict) -> Obj {
        Obj::dict(dict)
    }
}

enum Fail {
    /// A ValueError: the line is a parse error.
    Value(String),
    /// Any other exception: the official parser stops with a traceback.
    Crash(String),
}

/// `:::MLL <time> <key>[ ]:<whitespace><json>` (0.6.0).
fn text_line(s: &str) -> Result<(f64, Obj, Obj), Fail> {
    let no = || Fail::Value("does not match regex".into());
    let rest = s.strip_prefix(":::MLL ").ok_or_else(no)?;
    let ts_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    if ts_len == 0 {
        return Err(no());
    }
    let (ts, rest) = rest.split_at(ts_len);
    let rest = rest.strip_prefix(' ').ok_or_else(no)?;
    let key_len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    if key_len == 0 {
        return Err(no());
    }
    let (key, rest) = rest.split_at(key_len);
    let rest = rest.strip_prefix(' ').unwrap_or(rest);
    let rest = rest.strip_prefix(':').ok_or_else(no)?;
    let value = rest.trim_start_matches(py_space);
    if value.len() == rest.len() || value.is_empty() {
        return Err(no());
    }
    let ts: f64 = ts
        .parse()
        .map_err(|_| Fail::Value(format!("could not convert string to float: '{ts}'")))?;
    let v = parse_json(value).map_err(Fail::Value)?;
    Ok((ts, Obj::str(key), Obj::from_value(&v)))
}

/// `:::MLLOG {json}` (since 0.7.0): `LogLine(string, float(m['time_ms']), m['key'],
/// {'value': m['value'], 'metadata': m['metadata']}, lineno)`.
fn json_line(s: &str, token_len: usize) -> Result<(f64, Obj, Obj), Fail> {
    // A bare token loses its space to the strip: Python reads the empty rest.
    let v = parse_json(s.get(token_len..).unwrap_or("")).map_err(Fail::Value)?;
    let fields = match &v {
        Value::Null => return Err(Fail::Value("does not match regex".into())),
        Value::Object(o) => o,
        Value::Str(_) => {
            return Err(Fail::Crash(
                "TypeError: string indices must be integers".into(),
            ))
        }
        Value::Array(_) => {
            return Err(Fail::Crash(
                "TypeError: list indices must be integers or slices, not str".into(),
            ))
        }
        other => {
            return Err(Fail::Crash(format!(
                "TypeError: '{}' object is not subscriptable",
                Obj::from_value(other).type_name()
            )))
        }
    };
    // Duplicate keys: the last one, as Python's dict keeps it.
    let field = |name: &str| {
        fields
            .iter()
            .rev()
            .find(|(k, _)| &**k == name)
            .map(|(_, v)| v)
            .ok_or_else(|| Fail::Crash(format!("KeyError: '{name}'")))
    };
    let ts = match field("time_ms")? {
        Value::Str(t) => super::builtins::py_float(t)
            .ok_or_else(|| Fail::Value(format!("could not convert string to float: '{t}'")))?,
        Value::Bool(b) => f64::from(u8::from(*b)),
        n => match n.as_f64() {
            Some(f) => f,
            None => {
                return Err(Fail::Crash(format!(
                    "TypeError: float() argument must be a string or a real number, not '{}'",
                    Obj::from_value(n).type_name()
                )))
            }
        },
    };
    let key = Obj::from_value(field("key")?);
    let mut d = Dict::default();
    d.entries
        .push((Obj::str("value"), Obj::from_value(field("value")?)));
    d.entries
        .push((Obj::str("metadata"), Obj::from_value(field("metadata")?)));
    Ok((ts, key, Obj::dict(d)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(log: &[u8], p: &Parsed, rec: &Rec, format: LogFormat) -> LogLine {
        let obj = match p.object(rec) {
            Some(o) => o.clone(),
            None => build(
                &log[rec.span.0..rec.span.1],
                rec,
                format,
                &mut Objects::default(),
            )
            .unwrap(),
        };
        let Obj::Line(l) = obj else {
            panic!("not a line")
        };

        l.borrow().clone()
    }

    #[test]
    fn parses_as_the_official_parsers() {
        let log = b"junk\r\nx :::MLLOG {\"key\": \"a\", \"value\": 1, \"time_ms\": 5, \"metadata\": {}}\r:::MLLOG {bad\n:::MLLOG null\n";
        let p = parse(log, LogFormat::JsonDataclass);
        assert_eq!(p.records.len(), 1);
        assert!(
            p.object(&p.records[0]).is_none(),
            "the common form is built on demand"
        );
        let l = get(log, &p, &p.records[0], LogFormat::JsonDataclass);
        assert_eq!(l.phys, 2);
        assert_eq!(l.key.to_str(), "a");
        assert_eq!(l.timestamp.as_f64(), Some(5.0));
        assert_eq!(p.errors.len(), 2);
        assert_eq!(p.errors[0].phys, 3);
        let p = parse(
            b":::MLLOG {\"key\": \"a\", \"value\": 1, \"time_ms\": 5}\n",
            LogFormat::JsonTuple,
        );
        assert!(p.crash.unwrap().1.contains("KeyError: 'metadata'"));
        let text = b":::MLL 1558767599.999 run_start: {\"value\": null}\n:::MLL 1.2.3 x: 1\n";
        let p = parse(text, LogFormat::TextLine);
        assert_eq!(p.records.len(), 1);
        assert_eq!(p.errors.len(), 1);
        assert!(!get(text, &p, &p.records[0], LogFormat::TextLine).mutable);
        // A duplicated field, a key that is no string: the parser's own path, as Python reads them.
        let odd = b":::MLLOG {\"key\": \"a\", \"key\": 7, \"value\": 1, \"time_ms\": 5, \"metadata\": {}}\n";
        let p = parse(odd, LogFormat::JsonDataclass);
        assert_eq!(
            parse(b":::MLLOG \n", LogFormat::JsonDataclass).errors.len(),
            1
        );
        assert_eq!(
            get(odd, &p, &p.records[0], LogFormat::JsonDataclass)
                .key
                .as_int(),
            Some(7)
        );
    }

    #[test]
    fn a_record_read_in_one_walk_is_the_object_the_official_path_makes() {
        let bodies = [
            r#"{"key": "a", "value": {"x": [1, -2, 3.5, 1e3, 1E-2, true, false, null, "s", {}, []]}, "time_ms": 1760110091610, "metadata": {"file": "f.py", "lineno": 3}}"#,
            // Beyond 64 and 128 bits, a float time, a repeated key inside a value.
            r#"{"time_ms": 1.5e3, "key": "b", "value": [170141183460469231731687303715884105728, 18446744073709551616, -0, 0.1], "metadata": {"a": 1, "a": 2}}"#,
            r#"{"key": "c", "value": null, "time_ms": -17, "metadata": {}, "namespace": ""}"#,
        ];
        for body in bodies {
            let line = format!(":::MLLOG {body}");
            let p = parse(line.as_bytes(), LogFormat::JsonDataclass);
            assert!(p.object(&p.records[0]).is_none(), "{body}");
            let fast = get(line.as_bytes(), &p, &p.records[0], LogFormat::JsonDataclass);
            let Ok((ts, key, value)) = json_line(&line, LogFormat::JsonDataclass.token().len())
            else {
                panic!("{body}")
            };
            assert_eq!(fast.timestamp.as_f64(), Some(ts), "{body}");
            assert_eq!(fast.key.repr(), key.repr(), "{body}");
            assert_eq!(fast.value.repr(), value.repr(), "{body}");
            assert_eq!(fast.full_string.to_str(), line);
        }
    }

    #[test]
    fn records_of_a_shape_seen_before_are_read_as_a_walk_reads_them() {
        // More shapes than a scan keeps, interleaved, and records that differ from a shape seen
        // before only where it matters: a malformed number, a second token, an escape.
        let rec = |key: &str, value: &str, n: usize| {
            format!(
                ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {n}, \"key\": \"{key}\", \"value\": {value}, \"metadata\": {{\"lineno\": {n}}}}}"
            )
        };
        let mut lines = Vec::new();
        for n in 0..400 {
            let k = n % 23;
            lines.push(rec(
                &format!("k{k}"),
                &format!("{{\"v{}\": {n}.5}}", k % 5),
                n,
            ));
            match n % 37 {
                0 => lines.push(rec("k1", "01", n)),
                1 => lines.push(rec("k2", "1.", n)),
                2 => lines.push(rec("k3", "-", n)),
                3 => lines.push(rec("k4", "{\"v4\": 1.5e}", n)),
                4 => lines.push(rec("k5", "{\"v0\": \":::MLLOG {}\"}", n)),
                5 => lines.push(rec("k6", "{\"v1\": \"\\u00e9\"}", n)),
                6 => lines.push(format!("{} ", rec("k7", "{\"v2\": 1}", n))),
                7 => lines.push(rec("k8", "NaN", n)),
                // A second token: the record after it, of a shape seen, is the one read.
                8 => lines.push(format!(":::MLLOG junk {}", rec("k9", "{\"v4\": 2.5}", n))),
                9 => lines.push(format!(
                    "{} {}",
                    rec("k9", "1", n),
                    rec("k9", "{\"v4\": 2.5}", n)
                )),
                _ => {}
            }
        }
        let log = lines.join("\n");
        let seen = parse(log.as_bytes(), LogFormat::JsonDataclass);
        // Each line walked afresh, no shape remembered.
        let mut walked = Scan::new(LogFormat::JsonDataclass, &|_| false);
        let mut offset = 0;
        for line in &lines {
            walked.shapes = Shapes::default();
            walked.feed(line.as_bytes(), offset);
            walked.feed(b"\n", offset + line.len());
            offset += line.len() + 1;
        }
        let walked = walked.finish();
        let read = |p: &Parsed| {
            p.records
                .iter()
                .map(|r| {
                    let key = p.keys.get(r.key as usize).map(|k| k.to_string());
                    (r.phys, r.lineno, r.span, key, p.object(r).is_some())
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(read(&seen), read(&walked));
        assert!(seen.records.iter().filter(|r| r.key == BUILT).count() >= 20);
        let errors = |p: &Parsed| {
            p.errors
                .iter()
                .map(|e| (e.phys, e.message.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(errors(&seen), errors(&walked));
        assert_eq!(seen.error_count, walked.error_count);
        assert!(seen.error_count >= 30, "{}", seen.error_count);
    }

    #[test]
    fn a_record_kept_for_every_line_is_forty_bytes() {
        // What a check holds for each record of the log, however long the log.
        assert_eq!(std::mem::size_of::<Rec>(), 40);
    }
}
