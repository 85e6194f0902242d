//! [`Pending`]: a record on its way to the worker, with the event fields it captured still raw.
//!
//! An event's metadata fields and a string value are the part of a record that grows with
//! what the program logs, and they are captured on the training thread. So they are captured
//! raw: a number or a boolean as it came, a string as its bytes appended to one buffer the
//! recycled record keeps, each beside its field's `'static` name in a fixed inline array. Only
//! the worker turns them into the record's [`Value`]s (and copies the strings into the owned
//! buffers the sinks read), before any sink sees the record. Sinks therefore never meet a raw
//! field: [`Pending::settle`] runs first.

use std::borrow::Cow;
use std::ops::{Deref, DerefMut};

use tracing_core::field::FieldSet;

use crate::record::{Record, Stash, Str, TracedRecord, Value};

/// How many metadata fields an event captures raw; any further field settles them on the
/// calling thread and is stored as a [`Value`] (rare: MLLOG records carry a few).
pub(crate) const RAW_FIELDS: usize = 3;

/// Text buffers past this capacity are not kept when the record is recycled: one huge string
/// logged once must not pin its memory in the pool for the whole run.
const TEXT_KEPT_MAX: usize = 4096;

/// What the bits of a [`Raw`] field are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    U64,
    I64,
    F64,
    Bool,
    /// Bytes `start..end` of the text buffer: `start` in the low half, `end` in the high.
    Text,
}

/// One field as captured: plain data, so capturing it is two stores and recycling it nothing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Raw {
    pub(crate) kind: Kind,
    /// The field's index in its callsite's `FieldSet`: its name, found on the worker.
    pub(crate) index: u8,
    pub(crate) bits: u64,
}

impl Raw {
    /// The number, for a number field.
    pub(crate) fn number(&self) -> Option<f64> {
        match self.kind {
            Kind::U64 => Some(self.bits as f64),
            Kind::I64 => Some(self.bits as i64 as f64),
            Kind::F64 => Some(f64::from_bits(self.bits)),
            Kind::Bool | Kind::Text => None,
        }
    }
}

/// The raw fields of one event.
#[derive(Debug)]
pub(crate) struct Capture {
    /// Metadata fields in the order they were recorded, after every field already in the
    /// record's `metadata.fields` (see [`Capture::settle_into`]).
    slots: [Raw; RAW_FIELDS],
    len: usize,
    /// The fields of the event's callsite, which name the slots.
    fields: Option<&'static FieldSet>,
    /// The record's value, when it is a string: its bytes in `text` (as [`Raw::bits`]).
    value: Option<u64>,
    /// The captured strings, back to back. Cleared, not freed, when the record is recycled.
    text: Vec<u8>,
    /// A field the layer adds after the event's own (`samples_count` on an `eval_accuracy`
    /// that has none).
    after: Option<(&'static str, u64)>,
}

impl Default for Capture {
    fn default() -> Capture {
        Capture {
            slots: [Raw {
                kind: Kind::Bool,
                index: 0,
                bits: 0,
            }; RAW_FIELDS],
            len: 0,
            fields: None,
            value: None,
            text: Vec::new(),
            after: None,
        }
    }
}

impl Capture {
    /// The callsite whose fields the slots are.
    #[inline(always)]
    pub(crate) fn set_fields(&mut self, fields: &'static FieldSet) {
        self.fields = Some(fields);
    }

    /// Captures a metadata field if there is room; `false` when there is none.
    #[inline(always)]
    pub(crate) fn push(&mut self, raw: Raw) -> bool {
        let n = self.len;
        if n >= RAW_FIELDS {
            return false;
        }
        self.slots[n] = raw;
        self.len = n + 1;
        true
    }

    /// Captures string metadata field `index` if there is room; `false` when there is none.
    #[inline(always)]
    pub(crate) fn push_text(&mut self, index: usize, s: &str) -> bool {
        let n = self.len;
        if n >= RAW_FIELDS {
            return false;
        }
        if self.text.capacity() - self.text.len() < s.len() {
            // Out of line and not returning to this path: the common one then makes no call
            // that it has to save registers around.
            self.push_text_grown(index, s);
            return true;
        }
        let bits = self.text(s);
        self.slots[n] = Raw {
            kind: Kind::Text,
            index: index as u8,
            bits,
        };
        self.len = n + 1;
        true
    }

    #[cold]
    #[inline(never)]
    fn push_text_grown(&mut self, index: usize, s: &str) {
        self.grow(s.len());
        let _ = self.push_text(index, s);
    }

    /// `s` appended to the text buffer, which has room for it, as the bits of a
    /// [`Kind::Text`] field: one copy, no call.
    #[inline(always)]
    fn text(&mut self, s: &str) -> u64 {
        let start = self.text.len();
        let n = s.len();
        assert!(self.text.capacity() - start >= n);
        // SAFETY: the buffer has room for `n` more bytes (asserted; the callers grow it
        // first), the source is `n` readable bytes, and the two do not overlap (the buffer is
        // ours alone); the bytes written are initialised before the length covers them.
        unsafe {
            copy_short(s.as_ptr(), self.text.as_mut_ptr().add(start), n);
            self.text.set_len(start + n);
        }
        start as u64 | ((start + n) as u64) << 32
    }

    fn grow(&mut self, n: usize) {
        self.text.reserve(n.max(256));
    }

    /// Captures a string value of the record.
    #[inline(always)]
    pub(crate) fn value_text(&mut self, s: &str) {
        if self.text.capacity() - self.text.len() < s.len() {
            return self.value_text_grown(s);
        }
        self.value = Some(self.text(s));
    }

    #[cold]
    #[inline(never)]
    fn value_text_grown(&mut self, s: &str) {
        self.grow(s.len());
        self.value_text(s);
    }

    /// Whether the record's value is a captured string.
    #[inline(always)]
    pub(crate) fn has_value(&self) -> bool {
        self.value.is_some()
    }

    /// Whether there is anything to settle.
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0 && self.value.is_none() && self.after.is_none()
    }

    /// Adds `name` = `value` after the event's own fields, when they are settled.
    pub(crate) fn add_after(&mut self, name: &'static str, value: u64) {
        self.after = Some((name, value));
    }

    /// The name of the field a slot holds.
    fn name(&self, raw: Raw) -> &'static str {
        self.fields
            .and_then(|f| f.iter().nth(raw.index.into()))
            .map_or("", |f| f.name())
    }

    /// The metadata fields captured so far, in order.
    pub(crate) fn fields(&self) -> &[Raw] {
        &self.slots[..self.len]
    }

    fn text_at(&self, bits: u64) -> &str {
        let (start, end) = ((bits & 0xffff_ffff) as usize, (bits >> 32) as usize);
        // SAFETY: `start..end` is the copy of one whole `&str` (`Capture::text`), so valid
        // UTF-8 that starts and ends on character boundaries.
        unsafe { std::str::from_utf8_unchecked(&self.text[start..end]) }
    }

    fn to_value(&self, raw: Raw, stash: &mut Stash) -> Value {
        match raw.kind {
            Kind::U64 => Value::Int(raw.bits.into()),
            Kind::I64 => Value::Int((raw.bits as i64).into()),
            Kind::F64 => Value::Float(f64::from_bits(raw.bits)),
            Kind::Bool => Value::Bool(raw.bits != 0),
            Kind::Text => {
                let mut s = stash.take_string();
                s.push_str(self.text_at(raw.bits));
                Value::Str(Cow::Owned(s))
            }
        }
    }

    /// The string value captured, if any, as a [`Value`] in a stashed buffer.
    pub(crate) fn take_value(&mut self, stash: &mut Stash) -> Option<Value> {
        let bits = self.value.take()?;
        Some(self.to_value(
            Raw {
                kind: Kind::Text,
                index: 0,
                bits,
            },
            stash,
        ))
    }

    /// Appends the captured metadata fields to `fields`, as [`Value`]s (strings in buffers of
    /// `stash`), and empties the capture's fields. The text buffer is cleared by
    /// [`Capture::clear`] only, as the value may still be in it.
    pub(crate) fn settle_into(
        &mut self,
        fields: &mut smallvec::SmallVec<[(Str, Value); 3]>,
        stash: &mut Stash,
    ) {
        for i in 0..self.len {
            let raw = self.slots[i];
            let value = self.to_value(raw, stash);
            fields.push((Cow::Borrowed(self.name(raw)), value));
        }
        self.len = 0;
        if let Some((name, value)) = self.after.take() {
            fields.push((Cow::Borrowed(name), Value::Int(value.into())));
        }
    }

    /// Empties the capture, keeping the text buffer unless it grew past [`TEXT_KEPT_MAX`].
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.value = None;
        self.fields = None;
        self.after = None;
        if self.text.capacity() > TEXT_KEPT_MAX {
            self.text = Vec::new();
        } else {
            self.text.clear();
        }
    }
}

/// Copies `n` bytes without a call for the short strings events carry: up to 64 bytes are two
/// overlapping fixed-size copies (from each end), as `memcpy` does inside, but inline, so
/// the capture that calls it needs no call and no saved registers for it.
///
/// # Safety
///
/// `src` must be valid for `n` reads, `dst` for `n` writes, and they must not overlap.
#[inline(always)]
unsafe fn copy_short(src: *const u8, dst: *mut u8, n: usize) {
    use std::ptr::{copy_nonoverlapping as copy, read_unaligned as read, write_unaligned as write};
    // SAFETY (each arm): every read and write lies within the first `n` bytes of its side.
    unsafe {
        // Longer strings first: they are the ones a program logs most as values and notes.
        if n > 16 {
            if n > 64 {
                copy(src, dst, n);
            } else if n > 32 {
                write(dst as *mut [u8; 32], read(src as *const [u8; 32]));
                write(
                    dst.add(n - 32) as *mut [u8; 32],
                    read(src.add(n - 32) as *const [u8; 32]),
                );
            } else {
                write(dst as *mut [u8; 16], read(src as *const [u8; 16]));
                write(
                    dst.add(n - 16) as *mut [u8; 16],
                    read(src.add(n - 16) as *const [u8; 16]),
                );
            }
        } else if n >= 8 {
            write(dst as *mut u64, read(src as *const u64));
            write(
                dst.add(n - 8) as *mut u64,
                read(src.add(n - 8) as *const u64),
            );
        } else if n >= 4 {
            write(dst as *mut u32, read(src as *const u32));
            write(
                dst.add(n - 4) as *mut u32,
                read(src.add(n - 4) as *const u32),
            );
        } else if n > 0 {
            *dst = *src;
            *dst.add(n / 2) = *src.add(n / 2);
            *dst.add(n - 1) = *src.add(n - 1);
        }
    }
}

/// A record in the pipeline's pool and queue: the [`TracedRecord`] the sinks will get, and the
/// fields its event captured raw (empty for every record that is no event).
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) traced: TracedRecord,
    pub(crate) capture: Capture,
}

impl Pending {
    pub(crate) fn empty() -> Pending {
        Pending {
            traced: TracedRecord::empty(),
            capture: Capture::default(),
        }
    }

    /// Turns the raw fields into the record's value and metadata: on the worker before the
    /// sinks see the record, or on the calling thread where the layer reads them itself.
    pub(crate) fn settle(&mut self) {
        if self.capture.is_empty() {
            return;
        }
        let Record {
            value, metadata, ..
        } = &mut self.traced.record;
        if let Some(v) = self.capture.take_value(&mut metadata.stash) {
            *value = v;
        }
        self.capture
            .settle_into(&mut metadata.fields, &mut metadata.stash);
    }

    /// Empties it for reuse, keeping its buffers.
    pub(crate) fn clear(&mut self) {
        self.traced.clear();
        self.capture.clear();
    }
}

impl Deref for Pending {
    type Target = TracedRecord;

    fn deref(&self) -> &TracedRecord {
        &self.traced
    }
}

impl DerefMut for Pending {
    fn deref_mut(&mut self) -> &mut TracedRecord {
        &mut self.traced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_copies_are_exact_at_every_length() {
        let src: Vec<u8> = (0..200u8).collect();
        for n in 0..=130 {
            let mut dst = vec![0xAAu8; n + 8];
            // SAFETY: `src` has 200 bytes, `dst` n + 8; distinct buffers.
            unsafe { copy_short(src.as_ptr(), dst.as_mut_ptr(), n) };
            assert_eq!(&dst[..n], &src[..n], "{n}");
            assert!(
                dst[n..].iter().all(|&b| b == 0xAA),
                "{n}: wrote past the end"
            );
        }
    }

    #[test]
    fn a_huge_text_buffer_is_not_kept() {
        let mut c = Capture::default();
        c.value_text(&"x".repeat(TEXT_KEPT_MAX + 1));
        c.clear();
        assert_eq!(c.text.capacity(), 0);
    }

    #[test]
    fn texts_go_back_to_back_and_read_back() {
        let mut c = Capture::default();
        c.grow(64);
        let a = c.text("node-017");
        let b = c.text("é, \"quoted\"");
        let e = c.text("");
        assert_eq!(c.text_at(a), "node-017");
        assert_eq!(c.text_at(b), "é, \"quoted\"");
        assert_eq!(c.text_at(e), "");
    }
}
