//! Capturing `tracing` field values as typed [`Value`]s, without formatting anything: numbers
//! and booleans are stored as they are; an event's strings are copied into buffers its
//! recycled record kept (keys and namespaces that are known MLLOG constants, and span strings,
//! are `'static` references); lists, tuples and objects from `mllog!` arrive whole as the
//! `Value` of a `Composite` (see `crate::log_value`); any other `Debug` field is its `Debug`
//! text.

use std::borrow::Cow;
use std::fmt;

use smallvec::SmallVec;
use tracing_core::field::{Field, Visit};

use crate::keys;
use crate::pipeline::{Capture, Kind, Raw};
use crate::record::{Stash, Str, Value};

/// The field that marks an event as an MLLOG record and names its key.
pub const KEY_FIELD: &str = "mllog.key";
/// The field holding a record's value; `value.<name>` fields build an object value.
pub const VALUE_FIELD: &str = "value";
/// Overrides the namespace of one record.
pub const NAMESPACE_FIELD: &str = "mllog.namespace";
/// The `run` span field that decides `run_stop`'s status.
pub const STATUS_FIELD: &str = "status";

/// Field values in the order they were first recorded.
#[derive(Default, Debug, Clone)]
pub(crate) struct SpanFields {
    pub(crate) items: SmallVec<[(&'static str, Value); 4]>,
}

impl SpanFields {
    fn set(&mut self, name: &'static str, value: Value) {
        match self.items.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => self.items.push((name, value)),
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Value> {
        self.items.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }
}

/// A string value, borrowed when it is a known constant (no allocation), owned otherwise.
pub(crate) fn string_value(s: &str) -> Value {
    Value::Str(intern_str(s))
}

pub(crate) fn intern_str(s: &str) -> Str {
    match intern_cached(s) {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(s.to_owned()),
    }
}

thread_local! {
    /// Recently interned strings, by a cheap hash of their content: a training loop logs the
    /// same few keys over and over, and a hit costs one short comparison instead of a binary
    /// search over every known key.
    static INTERNED: [std::cell::Cell<&'static str>; 32] =
        const { [const { std::cell::Cell::new("") }; 32] };
}

fn intern_cached(s: &str) -> Option<&'static str> {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return Some("");
    };
    let slot = (b.len() * 7 + *first as usize * 3 + *last as usize) % 32;
    INTERNED.with(|cache| {
        let cached = cache[slot].get();
        // Keys are usually the `keys::*` constants themselves: the same pointer each time.
        if (cached.as_ptr() == s.as_ptr() && cached.len() == s.len()) || same(cached, s) {
            return Some(cached);
        }
        if !may_be_key(b) {
            return None;
        }
        let found = keys::intern(s)?;
        cache[slot].set(found);
        Some(found)
    })
}

/// `a == b`, without a `memcmp` call for the short strings keys are: 8 to 16 bytes are two
/// overlapping 8-byte loads from each end, 17 to 32 bytes four.
#[inline(always)]
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let n = a.len();
    #[inline(always)]
    fn word(s: &[u8], at: usize) -> u64 {
        u64::from_ne_bytes(s[at..at + 8].try_into().unwrap())
    }
    let eq = |at: usize| word(a, at) == word(b, at);
    match n {
        8..=16 => eq(0) & eq(n - 8),
        17..=32 => eq(0) & eq(8) & eq(n - 16) & eq(n - 8),
        _ => a == b,
    }
}

/// The most bytes of keys of the program's own that are kept for good (see [`own_key`]).
const OWN_KEY_BYTES_MAX: usize = 64 * 1024;
/// The longest key of the program's own that is kept.
const OWN_KEY_MAX_LEN: usize = 64;
/// Bytes of keys kept so far, in the whole process.
static OWN_KEY_BYTES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A key of the program's own (no MLLOG constant), kept for good, so that its callsite's next
/// events compare their key with it instead of looking it up among the known keys and copying
/// it: a program logs a few keys of its own over and over. Also put in the interned cache,
/// so that another callsite logging the same key finds it there rather than keeping a copy of
/// its own. Bounded: once [`OWN_KEY_BYTES_MAX`] is spent (a program that builds a new key per
/// event with `format!`), keys are copied per event as before.
#[cold]
#[inline(never)]
fn own_key(s: &str) -> Option<&'static str> {
    use std::sync::atomic::Ordering::Relaxed;
    if s.is_empty() || s.len() > OWN_KEY_MAX_LEN {
        return None;
    }
    if OWN_KEY_BYTES.fetch_add(s.len(), Relaxed) + s.len() > OWN_KEY_BYTES_MAX {
        OWN_KEY_BYTES.store(OWN_KEY_BYTES_MAX, Relaxed);
        return None;
    }
    let kept: &'static str = Box::leak(s.into());
    let b = s.as_bytes();
    let slot = (b.len() * 7 + b[0] as usize * 3 + b[b.len() - 1] as usize) % 32;
    INTERNED.with(|cache| cache[slot].set(kept));
    Some(kept)
}

/// Whether some known key has this length, first byte and last byte: most strings that are no
/// key (a host name, a device) are told apart here in a few instructions instead of a binary
/// search over every key.
fn may_be_key(b: &[u8]) -> bool {
    static FILTER: std::sync::OnceLock<[(u64, u64); 64]> = std::sync::OnceLock::new();
    let filter = FILTER.get_or_init(|| {
        let mut t = [(0u64, 0u64); 64];
        for k in keys::ALL.iter().map(|k| k.as_bytes()) {
            if let (Some(f), Some(l)) = (k.first(), k.last()) {
                let slot = &mut t[k.len() % 64];
                slot.0 |= 1 << (f % 64);
                slot.1 |= 1 << (l % 64);
            }
        }
        t
    });
    let (Some(f), Some(l)) = (b.first(), b.last()) else {
        return true;
    };
    let (first, last) = filter[b.len() % 64];
    b.len() < 64 && first & (1 << (f % 64)) != 0 && last & (1 << (l % 64)) != 0
}

/// What a field name means in an event.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Role {
    Key,
    Namespace,
    Value,
    ValuePath,
    Skip,
    Metadata,
}

/// Classifies by the first byte before comparing strings: most fields are metadata.
pub(crate) fn role_of(name: &str) -> Role {
    match name.as_bytes().first() {
        Some(b'm') if name == KEY_FIELD => Role::Key,
        Some(b'm') if name == NAMESPACE_FIELD => Role::Namespace,
        Some(b'm') if name == "message" || name.starts_with("mllog.") => Role::Skip,
        Some(b'v') if name == VALUE_FIELD => Role::Value,
        Some(b'v') if name.starts_with("value.") => Role::ValuePath,
        Some(b'o') if name.starts_with("otel.") => Role::Skip,
        _ => Role::Metadata,
    }
}

/// A field past the callsite's classified ones: found by name.
#[cold]
#[inline(never)]
fn role_by_name(field: &Field) -> Role {
    role_of(field.name())
}

/// An event's fields captured straight into the parts of its record, in one pass. Numbers,
/// booleans and strings of metadata fields, and a string value, are captured raw into the
/// record's [`Capture`] (a few stores, a string one copy into a buffer the record keeps); the
/// worker makes them [`Value`]s (`crate::pipeline::Pending::settle`). Anything else (a list,
/// a `Debug` text, a field past the capture's room) becomes a `Value` here, after the raw
/// fields before it are settled, so the metadata keeps the order the fields came in.
pub(crate) struct EventFields<'a> {
    pub(crate) key: Option<Str>,
    pub(crate) value: Value,
    pub(crate) namespace: Option<Str>,
    pub(crate) metadata: &'a mut SmallVec<[(Str, Value); 3]>,
    /// Cleared buffers of the recycled record: a copied string or a list goes into one.
    stash: &'a mut Stash,
    /// The raw fields, settled on the worker.
    capture: &'a mut Capture,
    /// What each field index of the callsite is (fields past its end are classified by name).
    roles: &'a [Role],
    /// The key the callsite logged last (see `callsite::remember_key`).
    key_hint: &'static str,
    /// A key interned here that differs from the hint: the callsite's hint to be.
    pub(crate) learned_key: Option<&'static str>,
}

impl<'a> EventFields<'a> {
    pub(crate) fn new(
        metadata: &'a mut SmallVec<[(Str, Value); 3]>,
        stash: &'a mut Stash,
        capture: &'a mut Capture,
        roles: &'a [Role],
        key_hint: &'static str,
    ) -> EventFields<'a> {
        EventFields {
            key: None,
            value: Value::Null,
            namespace: None,
            metadata,
            stash,
            capture,
            roles,
            key_hint,
            learned_key: None,
        }
    }

    /// The key, as the callsite's hint when the text is the same (compared, not by address:
    /// a key built at run time may reuse a freed key's memory), else interned.
    #[inline(always)]
    fn key(&mut self, s: &str) -> Str {
        if same(self.key_hint, s) {
            return Cow::Borrowed(self.key_hint);
        }
        self.new_key(s)
    }

    #[inline(never)]
    fn new_key(&mut self, s: &str) -> Str {
        match intern_cached(s).or_else(|| own_key(s)) {
            Some(k) => {
                self.learned_key = Some(k);
                Cow::Borrowed(k)
            }
            // Past the bound on kept keys: copied like a string value, into a kept buffer.
            None => Cow::Owned(self.copied(s)),
        }
    }

    /// `s` in a stashed buffer (a new one only while the pool is cold).
    fn copied(&mut self, s: &str) -> String {
        let mut buf = self.stash.take_string();
        buf.push_str(s);
        buf
    }

    fn role(&self, field: &Field) -> Role {
        match self.roles.get(field.index()) {
            Some(role) => *role,
            None => role_by_name(field),
        }
    }

    /// A number or boolean: captured raw when it is metadata and there is room, set inline
    /// when it is the value; anything else out of line, so that the common paths save no
    /// registers.
    #[inline(always)]
    fn put_raw(&mut self, field: &Field, kind: Kind, bits: u64) {
        let index = field.index();
        match self.roles.get(index) {
            Some(Role::Metadata) => {
                let raw = Raw {
                    kind,
                    index: index as u8,
                    bits,
                };
                if self.capture.push(raw) {
                    return;
                }
            }
            Some(Role::Value) if self.value.is_null() && !self.capture.has_value() => {
                // Set once per event, over the `Null` of `new`: nothing to drop.
                std::mem::forget(std::mem::replace(&mut self.value, number(kind, bits)));
                return;
            }
            _ => {}
        }
        self.put_raw_rare(field, kind, bits)
    }

    #[inline(never)]
    fn put_raw_rare(&mut self, field: &Field, kind: Kind, bits: u64) {
        self.put(field, number(kind, bits))
    }

    fn put(&mut self, field: &Field, value: Value) {
        self.put_as(self.role(field), field, value)
    }

    fn put_as(&mut self, role: Role, field: &Field, value: Value) {
        match role {
            Role::Metadata => {
                // After the raw fields recorded before it: they are settled first.
                self.capture.settle_into(self.metadata, self.stash);
                self.metadata.push((Cow::Borrowed(field.name()), value))
            }
            Role::Value => {
                // The last `value` field is the value, a captured string one included.
                self.capture.take_value(self.stash);
                self.value = value;
            }
            Role::ValuePath => {
                if let Some(v) = self.capture.take_value(self.stash) {
                    self.value = v;
                }
                self.value.set_path(&field.name()["value.".len()..], value)
            }
            Role::Key => self.key = Some(text_of(value)),
            Role::Namespace => self.namespace = Some(text_of(value)),
            Role::Skip => {}
        }
    }

    /// A string: the key, or a metadata field or the value copied once, into the record's
    /// text buffer; the rest out of line.
    #[inline(always)]
    fn put_str(&mut self, field: &Field, s: &str) {
        let index = field.index();
        match self.roles.get(index) {
            Some(Role::Metadata) => {
                if !self.capture.push_text(index, s) {
                    self.put_str_rare(field, s)
                }
            }
            Some(Role::Value) if self.value.is_null() => self.capture.value_text(s),
            Some(Role::Key) if same(self.key_hint, s) => {
                self.key = Some(Cow::Borrowed(self.key_hint));
            }
            Some(Role::Key) => self.put_key(s),
            _ => self.put_str_rare(field, s),
        }
    }

    /// Out of line, so that the captures beside it need no saved registers.
    #[inline(never)]
    fn put_key(&mut self, s: &str) {
        self.key = Some(self.key(s));
    }

    #[inline(never)]
    fn put_str_rare(&mut self, field: &Field, s: &str) {
        match self.role(field) {
            Role::Key => self.key = Some(self.key(s)),
            Role::Namespace => self.namespace = Some(intern_str(s)),
            Role::Skip => {}
            role => {
                let v = Value::Str(Cow::Owned(self.copied(s)));
                self.put_as(role, field, v)
            }
        }
    }

    /// The value, taking a string value out of the capture (for the callers that read it on
    /// the calling thread).
    pub(crate) fn take_value(&mut self) -> Value {
        match self.capture.take_value(self.stash) {
            Some(v) => v,
            None => std::mem::take(&mut self.value),
        }
    }
}

/// The value of a number or boolean captured as bits.
fn number(kind: Kind, bits: u64) -> Value {
    match kind {
        Kind::U64 => Value::Int(bits.into()),
        Kind::I64 => Value::Int((bits as i64).into()),
        Kind::F64 => Value::Float(f64::from_bits(bits)),
        Kind::Bool | Kind::Text => Value::Bool(bits != 0),
    }
}

impl Visit for EventFields<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put_raw(field, Kind::F64, value.to_bits());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put_raw(field, Kind::I64, value as u64);
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put_raw(field, Kind::U64, value);
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.put(field, Value::Int(value));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put_raw(field, Kind::Bool, value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put_str(field, value);
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::Str(Cow::Owned(value.to_string())));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let role = self.role(field);
        if role == Role::Skip {
            return; // never format what is dropped anyway (e.g. `message`)
        }
        let mut spare = self.stash.take_list();
        let v = crate::log_value::debug_value(value, &mut spare);
        if let Some(list) = spare {
            self.stash.keep_list(list);
        }
        self.put_as(role, field, v);
    }
}

impl Visit for SpanFields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field.name(), Value::Float(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.name(), Value::Int(value.into()));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field.name(), Value::Int(value.into()));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        self.set(field.name(), Value::Int(value));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        self.set(field.name(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field.name(), Value::Bool(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field.name(), string_value(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.set(field.name(), Value::Str(Cow::Owned(value.to_string())));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.set(
            field.name(),
            crate::log_value::debug_value(value, &mut None),
        );
    }
}

/// Splits captured fields into an MLLOG record's parts: the key, the value (built from `value`
/// and `value.<path>` fields), an optional namespace, and the remaining metadata.
pub(crate) struct RecordParts {
    pub(crate) key: Option<Str>,
    pub(crate) value: Value,
    pub(crate) namespace: Option<Str>,
    pub(crate) metadata: SmallVec<[(Str, Value); 3]>,
}

/// A field holding the record's key or namespace, given as anything but a `&str` (`%key`,
/// `?key`, a number): its text (other types as their JSON). `?key` of a string arrives in
/// Rust's quoted `Debug` form; a key or namespace never holds quotes, so they come off.
fn text_of(value: Value) -> Str {
    match value {
        Value::Str(s) => match s.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
            Some(inner) if !inner.contains(['"', '\\']) => Cow::Owned(inner.to_owned()),
            _ => s,
        },
        other => Cow::Owned(other.to_json()),
    }
}

impl SpanFields {
    /// The parts of a stop record; `skip_status`: the `status` field is no metadata.
    pub(crate) fn into_parts(self, skip_status: bool) -> RecordParts {
        let mut parts = RecordParts {
            key: None,
            value: Value::Null,
            namespace: None,
            metadata: SmallVec::new(),
        };
        for (name, value) in self.items {
            match role_of(name) {
                Role::Key => parts.key = Some(text_of(value)),
                Role::Namespace => parts.namespace = Some(text_of(value)),
                Role::Value => parts.value = value,
                Role::ValuePath => parts.value.set_path(&name["value.".len()..], value),
                Role::Metadata if !(skip_status && name == STATUS_FIELD) => {
                    parts.metadata.push((Cow::Borrowed(name), value))
                }
                Role::Metadata | Role::Skip => {}
            }
        }
        parts
    }

    /// What a start record takes from the fields, without consuming them (the stop record
    /// needs them too): metadata straight into `metadata`, and the namespace if one is set.
    /// The value fields belong to the stop record.
    pub(crate) fn start_parts(
        &self,
        skip_status: bool,
        metadata: &mut SmallVec<[(Str, Value); 3]>,
    ) -> Option<Str> {
        let mut namespace = None;
        for (name, value) in &self.items {
            match role_of(name) {
                Role::Metadata if !(skip_status && *name == STATUS_FIELD) => {
                    metadata.push((Cow::Borrowed(*name), value.clone()))
                }
                Role::Namespace => namespace = Some(text_of(value.clone())),
                _ => {}
            }
        }
        namespace
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_by_content() {
        for (a, b) in [
            ("tracked_stats", "tracked_stats"),
            ("eval_accuracy", "eval_accuracx"),
        ] {
            assert_eq!(same(a, b), a == b);
        }
        assert!(!same("run_start", "run_stop"));
        assert!(same("", ""));
        assert!(!same("a_very_long_key_name_x", "a_very_long_key_name_y"));
        // Every length up to past 32, differing at every place.
        let base = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH";
        for n in 0..=base.len() {
            let a = &base[..n];
            assert!(same(a, a), "{a}");
            for at in 0..n {
                let mut b = a.as_bytes().to_vec();
                b[at] = b'_';
                let b = String::from_utf8(b).unwrap();
                assert!(!same(a, &b), "{a} {b}");
            }
        }
    }

    #[test]
    fn keys_of_the_program_own_are_kept_once() {
        let key = "a_key_of_this_test_only";
        let first = own_key(key).unwrap();
        assert_eq!(first, key);
        // Found in the interned cache from then on (for the same text elsewhere in memory),
        // the same kept copy.
        let elsewhere = String::from(key);
        let found = intern_cached(elsewhere.as_str()).unwrap();
        assert!(std::ptr::eq(found, first));
        assert_eq!(own_key(""), None);
        assert_eq!(own_key(&"k".repeat(OWN_KEY_MAX_LEN + 1)), None);
    }
}
