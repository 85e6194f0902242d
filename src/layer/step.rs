//! `train_step` spans: no MLLOG line of their own; they drive throughput (in-step time only),
//! `train_loss` every N steps and the samples count. Their state lives in a table keyed by
//! span id rather than in span extensions, so a step costs no allocation and may close on any
//! thread.

use std::fmt;
use std::sync::Mutex;

use tracing_core::field::{Field, Visit};

/// What a `train_step` field is; a callsite's fields are classified once (see
/// [`super::callsite`]), so capturing them compares no names. The discriminant is the field's
/// index in [`StepFields`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum StepField {
    /// `step`: the step number (for `train_loss` frequency and metadata).
    Step = 0,
    /// `samples`: samples this step trains (default: the configured global batch size).
    Samples = 1,
    /// `samples_count`: samples trained after this step, if the loop counts them itself.
    SamplesCount = 2,
    /// `loss`: the training loss, usually recorded before the span closes.
    Loss = 3,
    /// `lr`: the learning rate used by this step.
    Lr = 4,
    /// Anything else: ignored (written to a scratch value that is never read).
    Other = 5,
}

impl StepField {
    pub(crate) fn of(name: &str) -> StepField {
        match name {
            "step" => StepField::Step,
            "samples" => StepField::Samples,
            "samples_count" => StepField::SamplesCount,
            "loss" => StepField::Loss,
            "lr" => StepField::Lr,
            _ => StepField::Other,
        }
    }

    fn is_float(self) -> bool {
        matches!(self, StepField::Loss | StepField::Lr)
    }
}

/// The fields a `train_step` span carries, packed: a presence bit per [`StepField`] instead of five
/// `Option`s keeps the frame small, and a scratch value for [`StepField::Other`] makes capturing a
/// field a store and an `or`, with no branch.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct StepFields {
    values: [u64; 6],
    present: u8,
}

impl StepFields {
    fn get(&self, slot: StepField) -> Option<u64> {
        let i = slot as usize;
        (self.present & (1 << i) != 0).then_some(self.values[i])
    }

    #[inline(always)]
    fn put(&mut self, slot: StepField, bits: u64) {
        let i = slot as usize;
        self.values[i] = bits;
        self.present |= 1 << i;
    }

    #[inline(always)]
    fn put_u64(&mut self, slot: StepField, value: u64) {
        if slot.is_float() {
            self.put(slot, (value as f64).to_bits());
        } else {
            self.put(slot, value);
        }
    }

    /// A field past the callsite's classified ones (or recorded later): found by name.
    #[cold]
    #[inline(never)]
    fn put_u64_named(&mut self, name: &str, value: u64) {
        self.put_u64(StepField::of(name), value);
    }

    fn put_f64(&mut self, slot: StepField, value: f64) {
        if slot.is_float() {
            self.put(slot, value.to_bits());
        }
    }

    pub(crate) fn step(&self) -> Option<u64> {
        self.get(StepField::Step)
    }
    pub(crate) fn samples(&self) -> Option<u64> {
        self.get(StepField::Samples)
    }
    pub(crate) fn samples_count(&self) -> Option<u64> {
        self.get(StepField::SamplesCount)
    }
    pub(crate) fn loss(&self) -> Option<f64> {
        self.get(StepField::Loss).map(f64::from_bits)
    }
    pub(crate) fn lr(&self) -> Option<f64> {
        self.get(StepField::Lr).map(f64::from_bits)
    }
}

/// Captures a step's fields; `slots` says what each field index of the callsite is (fields past
/// its end are classified by name).
pub(crate) struct StepVisitor<'a> {
    pub(crate) fields: &'a mut StepFields,
    pub(crate) slots: &'a [StepField],
}

impl StepVisitor<'_> {
    fn slot(&self, field: &Field) -> StepField {
        match self.slots.get(field.index()) {
            Some(slot) => *slot,
            None => StepField::of(field.name()),
        }
    }
}

impl Visit for StepVisitor<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        // The named path is a tail call, so the common one saves no registers.
        match self.slots.get(field.index()) {
            Some(&slot) => self.fields.put_u64(slot, value),
            None => self.fields.put_u64_named(field.name(), value),
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        let slot = self.slot(field);
        if slot.is_float() {
            self.fields.put_f64(slot, value as f64);
        } else {
            self.fields.put(slot, value.max(0) as u64);
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        let slot = self.slot(field);
        self.fields.put_f64(slot, value);
    }
    fn record_debug(&mut self, _: &Field, _: &dyn fmt::Debug) {}
}

#[derive(Clone, Copy)]
pub(crate) struct StepFrame {
    pub(crate) span: u64,
    pub(crate) meta: &'static tracing_core::Metadata<'static>,
    pub(crate) start_mono: u64,
    pub(crate) fields: StepFields,
    /// The interval ids of the step's trace-only records, when steps are traced.
    pub(crate) traced: Option<crate::record::IntervalIds>,
}

/// Shards of [`OpenSteps`] (and of the layer's open-span counts, which share the index).
pub(crate) const SHARDS: usize = 64;

/// The shard of span `id`: a multiplicative hash, as the Registry hands out small ids.
#[inline]
pub(crate) fn shard_of(id: u64) -> usize {
    (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize
}

/// The counted steps that are open, keyed by span id. Async training moves a step between
/// threads (a task resumes on another worker of the runtime, a step is spawned), so a step's
/// state cannot live on the thread that opened it: it lives here, found by its id wherever
/// it closes. Sharded so that threads closing steps rarely meet on a lock; each shard keeps
/// its capacity, so the steady state allocates nothing.
pub(crate) struct OpenSteps {
    shards: [Mutex<Vec<StepFrame>>; SHARDS],
}

impl Default for OpenSteps {
    fn default() -> Self {
        OpenSteps {
            shards: [const { Mutex::new(Vec::new()) }; SHARDS],
        }
    }
}

impl OpenSteps {
    fn shard(&self, span: u64) -> std::sync::MutexGuard<'_, Vec<StepFrame>> {
        // Nothing panics while a shard is locked; a poisoned one is still consistent.
        self.shards[shard_of(span)]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a counted step.
    pub(crate) fn open(&self, frame: StepFrame) {
        self.shard(frame.span).push(frame);
    }

    /// Updates the open step `span` (fields recorded after creation are classified by name);
    /// false when it is not an open, counted step.
    pub(crate) fn update(&self, span: u64, f: impl FnOnce(&mut StepVisitor<'_>)) -> bool {
        let mut shard = self.shard(span);
        let Some(frame) = shard.iter_mut().find(|fr| fr.span == span) else {
            return false;
        };
        f(&mut StepVisitor {
            fields: &mut frame.fields,
            slots: &[],
        });
        true
    }

    /// Takes the open step `span` out, if it is one.
    #[inline]
    pub(crate) fn close(&self, span: u64) -> Option<StepFrame> {
        let mut shard = self.shard(span);
        let at = shard.iter().position(|fr| fr.span == span)?;
        Some(shard.swap_remove(at))
    }
}
