//! One RCP file in the official format (`rcp_checker/<usage>_<ruleset>/rcps_<benchmark>.json`,
//! or the file of the RCP checker's `--custom_rcps`), read as `RCP_Checker` reads it: a JSON
//! object of records, each with `Benchmark`, `BS`, `Hyperparams` and its runs' figures under
//! `samples to converge` (llama2_70b_lora, flux1) or `Epochs to converge` (every other
//! benchmark). Records keep the file's order; a name given twice keeps its first place and its
//! last value, as Python's `json.load` builds the dict. As `json.load`, the reader takes the
//! constants `NaN`, `Infinity` and `-Infinity` (which JSON itself has not) as numbers: the
//! official checker computes its statistics with them, and so does ours.
//!
//! What the official checker computes with, the reader takes: a `Benchmark` that is no string
//! (`null`: a record of no benchmark, which only warns), `true` and `false` as the numbers 1
//! and 0 (Python's `bool` is an `int`), and a record without figures (its statistics are NaN,
//! which matters only where the record is used). What it stops on with an exception whenever
//! it loads the file (a record without one of the keys, figures that are not a list of
//! numbers, a batch size that is not a number) is an error naming the file and the record.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// One RCP record.
#[derive(Clone, Debug, PartialEq)]
pub struct RcpRecord {
    /// The record's name (the JSON object key).
    pub name: String,
    /// `Benchmark`: the string, or for any other JSON value [`NOT_A_STRING`] followed by its
    /// JSON text (equal only to the same value, never to a benchmark's name).
    pub benchmark: String,
    /// `BS`, the global batch size.
    pub bs: f64,
    /// The runs' samples (or epochs) to converge, in file order.
    pub converge: Vec<f64>,
}

/// Why an RCP file cannot be used; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum RcpFileError {
    /// The file cannot be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A directory where the RCP file should be.
    #[error("{}: a directory, not an RCP file", path.display())]
    Directory {
        /// The directory.
        path: PathBuf,
    },
    /// The file is not JSON.
    #[error("{}: not JSON: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Where and why.
        source: serde_json::Error,
    },
    /// JSON, but not the official RCP format.
    #[error("{}: not an RCP file in the official format: {why}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the record.
        why: String,
    },
}

/// What starts the [`RcpRecord::benchmark`] of a `Benchmark` that is not a string.
pub const NOT_A_STRING: char = '\0';

/// A record's benchmark as the messages show it (a value that is no string as its JSON text).
pub fn shown_benchmark(benchmark: &str) -> &str {
    benchmark.strip_prefix(NOT_A_STRING).unwrap_or(benchmark)
}

/// The key of a record's figures, as `RCP_Checker._process_raw_rcp_data` picks it.
pub fn converge_key(benchmark: &str) -> &'static str {
    if matches!(benchmark, "llama2_70b_lora" | "flux1") {
        "samples to converge"
    } else {
        "Epochs to converge"
    }
}

impl RcpFileError {
    /// Whether the file could not be read (an I/O error, as against its content).
    pub fn is_io(&self) -> bool {
        matches!(
            self,
            RcpFileError::Io { .. } | RcpFileError::Directory { .. }
        )
    }
}

/// Reads and checks an RCP file.
pub fn read_rcp_file(path: &Path) -> Result<Vec<RcpRecord>, RcpFileError> {
    let text = std::fs::read(path).map_err(|source| RcpFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_rcp_json(&text).map_err(|e| match e {
        ParseError::Json(source) => RcpFileError::Json {
            path: path.to_path_buf(),
            source,
        },
        ParseError::Format(why) => RcpFileError::Format {
            path: path.to_path_buf(),
            why,
        },
    })
}

enum ParseError {
    Json(serde_json::Error),
    Format(String),
}

fn parse_rcp_json(text: &[u8]) -> Result<Vec<RcpRecord>, ParseError> {
    let text = python_constants(text).map_err(ParseError::Format)?;
    let mut de = serde_json::Deserializer::from_slice(&text);
    let top = de
        .deserialize_any(OrderedTop)
        .and_then(|t| de.end().map(|()| t))
        .map_err(ParseError::Json)?;
    let Top::Object(entries) = top else {
        return Err(ParseError::Format(
            "the top level is not an object of named records".into(),
        ));
    };
    let records: Vec<RcpRecord> = entries
        .into_iter()
        .map(|(name, v)| record(name, &v).map_err(ParseError::Format))
        .collect::<Result<_, _>>()?;
    if records.len() >= 64 && records.iter().any(|r| r.bs.is_nan()) {
        return Err(ParseError::Format(format!(
            "a NaN batch size among {} records: the order Python's sort leaves them in is \
             not reproduced beyond 63",
            records.len()
        )));
    }
    Ok(records)
}

fn record(name: String, v: &Value) -> Result<RcpRecord, String> {
    let Value::Object(m) = v else {
        return Err(format!("record {name:?} is not an object"));
    };
    let get = |k: &str| {
        m.get(k)
            .ok_or_else(|| format!("record {name:?} has no {k:?}"))
    };
    let benchmark = match get("Benchmark")? {
        Value::String(s) => s.clone(),
        other => format!("{NOT_A_STRING}{other}"),
    };
    let bs =
        number(get("BS")?).ok_or_else(|| format!("record {name:?}: \"BS\" is not a number"))?;
    get("Hyperparams")?;
    let key = converge_key(&benchmark);
    let Value::Array(runs) = get(key)? else {
        return Err(format!("record {name:?}: {key:?} is not a list"));
    };
    let converge = runs
        .iter()
        .map(number)
        .collect::<Option<Vec<f64>>>()
        .ok_or_else(|| format!("record {name:?}: {key:?} holds something other than numbers"))?;
    if converge.len() >= 64 && converge.iter().any(|x| x.is_nan()) {
        return Err(format!(
            "record {name:?}: a NaN among {} figures under {key:?}: the order Python's sort \
             leaves them in is not reproduced beyond 63",
            converge.len()
        ));
    }
    Ok(RcpRecord {
        name,
        benchmark,
        bs,
        converge,
    })
}

/// Where Python's `json.load` reads one of its constants, serde_json (which follows the JSON
/// grammar) would refuse the file; each constant outside a string is rewritten as a string
/// no JSON file holds (it starts with an escaped NUL and a tag), which [`number`] reads back.
const CONSTANTS: [(&str, f64); 3] = [
    ("NaN", f64::NAN),
    ("Infinity", f64::INFINITY),
    ("-Infinity", f64::NEG_INFINITY),
];
const TAG: &str = "\\u0000python-constant:";

fn python_constants(text: &[u8]) -> Result<Vec<u8>, String> {
    if memchr_str(text, TAG.as_bytes()) {
        return Err(format!(
            "it holds the text {TAG}, which the reader keeps for Python's NaN and Infinity"
        ));
    }
    let mut out = Vec::with_capacity(text.len());
    let (mut i, mut in_string) = (0, false);
    while i < text.len() {
        let b = text[i];
        if in_string {
            out.push(b);
            if b == b'\\' && i + 1 < text.len() {
                out.push(text[i + 1]);
                i += 1;
            } else if b == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
        }
        match CONSTANTS
            .iter()
            .find(|(c, _)| text[i..].starts_with(c.as_bytes()))
        {
            Some((c, _)) => {
                out.extend_from_slice(format!("\"{TAG}{c}\"").as_bytes());
                i += c.len();
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(out)
}

fn memchr_str(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A number as Python's `json.load` reads it: a JSON number, or one of its constants.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) => {
            let c = s.strip_prefix(&TAG.replace("\\u0000", "\0"))?;
            CONSTANTS.iter().find(|(n, _)| *n == c).map(|(_, x)| *x)
        }
        other => json_number(other),
    }
}

/// A JSON number, or a bool as the number Python computes with (`bool` is an `int` there:
/// `true` is 1 in every comparison and sum after).
pub(super) fn json_number(v: &Value) -> Option<f64> {
    match v {
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        other => other.as_f64(),
    }
}

/// The top level, with an object's entries in file order (duplicates as Python's dict keeps
/// them).
enum Top {
    Object(Vec<(String, Value)>),
    Other,
}

struct OrderedTop;

impl<'de> Visitor<'de> for OrderedTop {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut out: Vec<(String, Value)> = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Value>()? {
            match out.iter_mut().find(|(n, _)| *n == k) {
                Some(slot) => slot.1 = v,
                None => out.push((k, v)),
            }
        }
        Ok(Top::Object(out))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Top, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Top::Other)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Top, E> {
        Ok(Top::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Top, E> {
        Ok(Top::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Top, E> {
        Ok(Top::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Top, E> {
        Ok(Top::Other)
    }
    fn visit_str<E>(self, _: &str) -> Result<Top, E> {
        Ok(Top::Other)
    }
    fn visit_unit<E>(self) -> Result<Top, E> {
        Ok(Top::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Vec<RcpRecord>, String> {
        parse_rcp_json(s.as_bytes()).map_err(|e| match e {
            ParseError::Json(e) => format!("json: {e}"),
            ParseError::Format(w) => w,
        })
    }

    #[test]
    fn records_keep_file_order_and_a_repeated_name_its_first_place() {
        let r = parse(
            r#"{"b": {"Benchmark": "bert", "BS": 8, "Hyperparams": {}, "Epochs to converge": [3, 1.5]},
                "a": {"Benchmark": "flux1", "BS": 4, "Hyperparams": {}, "samples to converge": [7]},
                "b": {"Benchmark": "bert", "BS": 16, "Hyperparams": {}, "Epochs to converge": [2]}}"#,
        )
        .unwrap();
        let names: Vec<(&str, f64)> = r.iter().map(|x| (x.name.as_str(), x.bs)).collect();
        assert_eq!(names, [("b", 16.0), ("a", 4.0)]);
        assert_eq!(r[1].converge, [7.0]);
    }

    #[test]
    fn the_official_keys_are_required() {
        let e = parse(r#"{"x": {"Benchmark": "bert", "BS": 8, "Epochs to converge": [1]}}"#);
        assert_eq!(e.unwrap_err(), "record \"x\" has no \"Hyperparams\"");
        let e = parse(
            r#"{"x": {"Benchmark": "flux1", "BS": 8, "Hyperparams": {}, "Epochs to converge": [1]}}"#,
        );
        assert_eq!(
            e.unwrap_err(),
            "record \"x\" has no \"samples to converge\""
        );
        let e = parse(
            r#"{"x": {"Benchmark": "bert", "BS": "8", "Hyperparams": {}, "Epochs to converge": [1]}}"#,
        );
        assert_eq!(e.unwrap_err(), "record \"x\": \"BS\" is not a number");
        assert!(parse("[1, 2]").unwrap_err().contains("top level"));
        assert!(parse("{\"x\": 1,}").unwrap_err().starts_with("json: "));
    }
}
