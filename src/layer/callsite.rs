//! What a callsite is to the layer, decided once per callsite (and thread) and then found by
//! the address of its metadata: the hot hooks compare a pointer instead of span names, target
//! prefixes and field names on every span and event.

use std::cell::Cell;

use tracing_core::Metadata;

use super::fields::Role;
use super::step::StepField;

/// Fields classified per callsite; fields past these are classified by name when recorded.
pub(crate) const MAPPED_FIELDS: usize = 16;

/// A callsite's meaning to one layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// Not ours: a plain span or event, or one from a target whose diagnostics we never record.
    Ignored,
    /// An event carrying `mllog.key`: what each of its fields is, and its file as records
    /// name it (relative to the configured root).
    Event {
        roles: [Role; MAPPED_FIELDS],
        /// The fields (bit `i`: field index `i`) that say where in training a record is, and
        /// the `samples_count` field among them: an `eval_accuracy` looks at its raw fields
        /// by these bits instead of by name.
        progress: u16,
        samples: u16,
        file: &'static str,
    },
    /// The `train_step` span, with what each of its fields is.
    Step([StepField; MAPPED_FIELDS]),
    /// An interval span: the index of its interval spec.
    Interval(usize),
    /// The warmup span.
    Warmup,
}

#[derive(Clone, Copy)]
struct Entry {
    layer: u64,
    meta: usize,
    class: Class,
}

const SLOTS: usize = 64;

thread_local! {
    /// Direct-mapped by metadata address; a collision only costs deciding again. Per thread, so
    /// no synchronisation; keyed by layer too, as one process may build several layers.
    static CACHE: [Cell<Entry>; SLOTS] = const {
        [const { Cell::new(Entry { layer: 0, meta: 0, class: Class::Ignored }) }; SLOTS]
    };
}

fn slot_of(meta: &'static Metadata<'static>) -> usize {
    let addr = meta as *const Metadata<'static> as usize;
    (((addr as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SLOTS
}

/// The class of the callsite `meta` for layer `layer` (never 0), deciding it with `decide` the
/// first time this thread sees the callsite.
#[inline]
pub(crate) fn class(
    layer: u64,
    meta: &'static Metadata<'static>,
    decide: impl FnOnce() -> Class,
) -> Class {
    let addr = meta as *const Metadata<'static> as usize;
    let slot = slot_of(meta);
    let entry = CACHE.with(|cache| cache[slot].get());
    if entry.meta == addr && entry.layer == layer {
        return entry.class;
    }
    let class = decide();
    CACHE.with(|cache| {
        cache[slot].set(Entry {
            layer,
            meta: addr,
            class,
        })
    });
    class
}

thread_local! {
    /// The interned key of the last event of the callsite in the same slot of `CACHE` ("" at
    /// first): nearly every callsite logs one key, so its next event compares the key's text
    /// with this instead of looking it up (cheaper per event in
    /// `examples/budgets.rs`). Beside `CACHE` rather than in its entries, which every span
    /// hook copies. A slot another callsite took over only makes a hint that does not match.
    static KEYS: [Cell<&'static str>; SLOTS] = const { [const { Cell::new("") }; SLOTS] };
}

/// The key the event callsite `meta` logged last on this thread, if it is still in its slot;
/// the caller compares texts before it uses it.
#[inline]
pub(crate) fn key_hint(meta: &'static Metadata<'static>) -> &'static str {
    KEYS.with(|keys| keys[slot_of(meta)].get())
}

/// Remembers `key` as the key of the event callsite `meta` on this thread.
#[cold]
pub(crate) fn remember_key(meta: &'static Metadata<'static>, key: &'static str) {
    KEYS.with(|keys| keys[slot_of(meta)].set(key));
}
