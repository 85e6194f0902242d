//! Records as OpenTelemetry attributes: one documented naming scheme (`docs/otel.md`), keys
//! made once per field name.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use opentelemetry::{Key, KeyValue};

use crate::record::{Str, TracedRecord, Value};

/// `mllog.<field>` / `mllog.stop.<field>` attribute keys, made once per field name (shared,
/// reference-counted) instead of formatted for every record.
#[derive(Default)]
pub(super) struct KeyCache {
    plain: HashMap<Str, Key, BuildHasherDefault<NameHasher>>,
    stop: HashMap<Str, Key, BuildHasherDefault<NameHasher>>,
}

impl KeyCache {
    pub(super) fn plain(&mut self, field: &Str) -> Key {
        if let Some(k) = self.plain.get(field) {
            return k.clone();
        }
        let k = Key::from(Arc::<str>::from(format!("mllog.{field}")));
        self.plain.insert(field.clone(), k.clone());
        k
    }
    pub(super) fn stop(&mut self, field: &Str) -> Key {
        if let Some(k) = self.stop.get(field) {
            return k.clone();
        }
        let k = Key::from(Arc::<str>::from(format!("mllog.stop.{field}")));
        self.stop.insert(field.clone(), k.clone());
        k
    }
}

/// A multiply-rotate hash for the few field names a run uses (SipHash's flooding resistance
/// buys nothing for names from the program's own source, and cost a fifth of the sink's time).
#[derive(Default)]
struct NameHasher(u64);

impl NameHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let mut tail = [0u8; 8];
        let rest = chunks.remainder();
        tail[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(tail) ^ rest.len() as u64);
    }
    fn write_u8(&mut self, byte: u8) {
        self.add(u64::from(byte));
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// `mllog.key`, `mllog.value`, `mllog.<field>`, `code.*`, `thread.id`, `mllog.namespace`,
/// `mllog.trace_only`.
pub(super) fn record_attributes(
    record: &TracedRecord,
    attrs: &mut Vec<KeyValue>,
    keys: &mut KeyCache,
) {
    attrs.push(KeyValue::new("mllog.key", record.key.clone()));
    if let Some(v) = otel_value(&record.value) {
        attrs.push(KeyValue::new("mllog.value", v));
    }
    for (k, v) in &record.metadata.fields {
        if let Some(v) = otel_value(v) {
            attrs.push(KeyValue::new(keys.plain(k), v));
        }
    }
    if let Some(file) = &record.metadata.file {
        attrs.push(KeyValue::new("code.file.path", file.clone()));
    }
    if let Some(line) = record.metadata.lineno {
        attrs.push(KeyValue::new("code.line.number", i64::from(line)));
    }
    if record.tid != 0 {
        attrs.push(KeyValue::new("thread.id", i64::from(record.tid)));
    }
    if !record.namespace.is_empty() {
        attrs.push(KeyValue::new("mllog.namespace", record.namespace.clone()));
    }
    if record.trace_only {
        attrs.push(KeyValue::new("mllog.trace_only", true));
    }
}

/// An MLLOG value as an attribute value: bool, int (i64), float, string; integers beyond
/// i64, lists and objects as their JSON text; `null` → no attribute.
pub(super) fn otel_value(v: &Value) -> Option<opentelemetry::Value> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => (*b).into(),
        Value::Int(i) => match i64::try_from(*i) {
            Ok(i) => i.into(),
            Err(_) => i.to_string().into(),
        },
        Value::UInt(u) => u.to_string().into(),
        Value::Float(f) => (*f).into(),
        Value::Str(s) => s.clone().into(),
        Value::Array(_) | Value::Object(_) => v.to_json().into(),
    })
}
