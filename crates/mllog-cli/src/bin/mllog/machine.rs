//! Machine-readable output, one shape per command: `--format json` is one document
//! `{"schema_version", "command", ..., "files" | "benchmarks": [...]}`; `--format jsonl` is one
//! object per line, each with `schema_version`; `--format csv` is a header and one row per item.

use serde::Serialize;
use serde_json::{Map, Value};

/// Bumped when a field changes meaning or disappears (new fields do not bump it).
pub const SCHEMA_VERSION: u32 = 1;

/// The `--format json` document.
#[derive(Serialize)]
pub struct Document<'a> {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The subcommand.
    pub command: &'a str,
    /// Per-command summary fields (e.g. `passed`).
    #[serde(flatten)]
    pub summary: Map<String, Value>,
    /// The items, under `files` or `benchmarks`.
    #[serde(flatten)]
    pub items: Map<String, Value>,
}

impl<'a> Document<'a> {
    pub fn new(command: &'a str, list: &str, items: Vec<Value>) -> Document<'a> {
        let mut m = Map::new();
        m.insert(list.into(), Value::Array(items));
        Document {
            schema_version: SCHEMA_VERSION,
            command,
            summary: Map::new(),
            items: m,
        }
    }

    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.summary.insert(key.into(), value);
        self
    }

    /// Pretty-printed, with a final newline.
    pub fn render(&self) -> String {
        serde_json::to_string_pretty(self).expect("a JSON value serialises") + "\n"
    }
}

/// A library result (report, run, score) as a JSON value, fields in their declared order.
pub fn value(item: &impl Serialize) -> Value {
    serde_json::to_value(item).expect("library results serialise")
}

/// A library result as the `--format json` document: its array field `list` becomes the
/// items, `first` then its other fields the summary fields.
pub fn document_of(
    command: &str,
    list: &str,
    item: &impl Serialize,
    first: Vec<(&str, Value)>,
) -> String {
    let Value::Object(mut all) = value(item) else {
        unreachable!("a library result serialises to an object")
    };
    let items = match all.remove(list) {
        Some(Value::Array(v)) => v,
        _ => Vec::new(),
    };
    let mut doc = Document::new(command, list, items);
    for (k, v) in first
        .into_iter()
        .chain(all.iter().map(|(k, v)| (k.as_str(), v.clone())))
    {
        doc = doc.with(k, v);
    }
    doc.render()
}

/// One JSON Lines line: the item with `schema_version` first.
pub fn line(item: Value) -> String {
    let mut m = Map::new();
    m.insert("schema_version".into(), SCHEMA_VERSION.into());
    if let Value::Object(o) = item {
        m.extend(o);
    }
    serde_json::to_string(&Value::Object(m)).expect("a JSON value serialises") + "\n"
}

/// An input that could not be read, as an item.
pub fn unreadable(file: &str, error: &std::io::Error) -> Value {
    serde_json::json!({ "file": file, "error": error.to_string() })
}

pub use mllog_core::results::summary::csv_field;
