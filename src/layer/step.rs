//! `train_step` spans: no MLLOG line of their own; they drive throughput (in-step time only),
//! `train_loss` every N steps and the samples count. Their state lives in a thread-local stack
//! rather than in span extensions, so a step costs no allocation.

use std::cell::RefCell;
use std::fmt;

use tracing_core::field::{Field, Visit};

/// What a `train_step` field is; a callsite's fields are classified once (see
/// [`super::callsite`]), so capturing them compares no names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Slot {
    /// `step`: the step number (for `train_loss` frequency and metadata).
    Step,
    /// `samples`: samples this step trains (default: the configured global batch size).
    Samples,
    /// `samples_count`: samples trained after this step, if the loop counts them itself.
    SamplesCount,
    /// `loss`: the training loss, usually recorded before the span closes.
    Loss,
    /// `lr`: the learning rate used by this step.
    Lr,
    /// Anything else: ignored.
    Other,
}

impl Slot {
    pub(crate) fn of(name: &str) -> Slot {
        match name {
            "step" => Slot::Step,
            "samples" => Slot::Samples,
            "samples_count" => Slot::SamplesCount,
            "loss" => Slot::Loss,
            "lr" => Slot::Lr,
            _ => Slot::Other,
        }
    }
}

/// The fields a `train_step` span carries, packed: a presence bit per [`Slot`] instead of five
/// `Option`s keeps the frame small enough to push and pop with a few register moves.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct StepFields {
    values: [u64; 5],
    present: u8,
}

impl StepFields {
    fn get(&self, slot: Slot) -> Option<u64> {
        let i = slot as usize;
        (self.present & (1 << i) != 0).then_some(self.values[i])
    }

    fn put(&mut self, slot: Slot, bits: u64) {
        if slot != Slot::Other {
            let i = slot as usize;
            self.values[i] = bits;
            self.present |= 1 << i;
        }
    }

    fn put_u64(&mut self, slot: Slot, value: u64) {
        match slot {
            Slot::Loss | Slot::Lr => self.put(slot, (value as f64).to_bits()),
            _ => self.put(slot, value),
        }
    }

    fn put_f64(&mut self, slot: Slot, value: f64) {
        if matches!(slot, Slot::Loss | Slot::Lr) {
            self.put(slot, value.to_bits());
        }
    }

    pub(crate) fn step(&self) -> Option<u64> {
        self.get(Slot::Step)
    }
    pub(crate) fn samples(&self) -> Option<u64> {
        self.get(Slot::Samples)
    }
    pub(crate) fn samples_count(&self) -> Option<u64> {
        self.get(Slot::SamplesCount)
    }
    pub(crate) fn loss(&self) -> Option<f64> {
        self.get(Slot::Loss).map(f64::from_bits)
    }
    pub(crate) fn lr(&self) -> Option<f64> {
        self.get(Slot::Lr).map(f64::from_bits)
    }
}

/// Captures a step's fields; `slots` says what each field index of the callsite is (fields past
/// its end are classified by name).
pub(crate) struct StepVisitor<'a> {
    pub(crate) fields: &'a mut StepFields,
    pub(crate) slots: &'a [Slot],
}

impl StepVisitor<'_> {
    fn slot(&self, field: &Field) -> Slot {
        match self.slots.get(field.index()) {
            Some(slot) => *slot,
            None => Slot::of(field.name()),
        }
    }
}

impl Visit for StepVisitor<'_> {
    fn record_u64(&mut self, field: &Field, value: u64) {
        let slot = self.slot(field);
        self.fields.put_u64(slot, value);
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        let slot = self.slot(field);
        match slot {
            Slot::Loss | Slot::Lr => self.fields.put_f64(slot, value as f64),
            _ => self.fields.put(slot, value.max(0) as u64),
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        let slot = self.slot(field);
        self.fields.put_f64(slot, value);
    }
    fn record_debug(&mut self, _: &Field, _: &dyn fmt::Debug) {}
}

pub(crate) struct StepFrame {
    pub(crate) span: u64,
    pub(crate) meta: &'static tracing_core::Metadata<'static>,
    pub(crate) start_mono: u64,
    pub(crate) fields: StepFields,
    /// The interval ids of the step's trace-only records, when steps are traced.
    pub(crate) traced: Option<crate::record::IntervalIds>,
}

thread_local! {
    static OPEN_STEPS: RefCell<Vec<StepFrame>> = const { RefCell::new(Vec::new()) };
    /// The span id of the innermost open step (0: none open), so that closing or recording
    /// any other span costs one comparison while no step is open.
    static TOP: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Interval spans entered on this thread: (span id, interval id), innermost last. Gives a
    /// record its enclosing interval without a span lookup.
    static ENTERED_INTERVALS: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
    /// The OS thread id (`gettid`), cached; 0 until first asked.
    static TID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The OS thread id of the calling thread, cached per thread.
pub(crate) fn thread_id() -> u32 {
    TID.with(|t| {
        let mut v = t.get();
        if v == 0 {
            // SAFETY: gettid takes no arguments and cannot fail.
            v = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
            t.set(v);
        }
        v
    })
}

pub(crate) fn enter_interval(span: u64, interval: u64) {
    ENTERED_INTERVALS.with(|s| s.borrow_mut().push((span, interval)));
}

pub(crate) fn exit_interval(span: u64) {
    ENTERED_INTERVALS.with(|s| {
        let mut stack = s.borrow_mut();
        if let Some(at) = stack.iter().rposition(|(sp, _)| *sp == span) {
            stack.remove(at);
        }
    });
}

/// The innermost interval entered on this thread.
pub(crate) fn current_interval() -> Option<u64> {
    ENTERED_INTERVALS.with(|s| s.borrow().last().map(|(_, i)| *i))
}

pub(crate) fn push(frame: StepFrame) {
    TOP.with(|t| t.set(frame.span));
    OPEN_STEPS.with(|s| s.borrow_mut().push(frame));
}

/// Updates the open step `span` (fields recorded after creation are classified by name);
/// false when it is not an open, counted step of this thread.
pub(crate) fn update(span: u64, f: impl FnOnce(&mut StepVisitor<'_>)) -> bool {
    if TOP.with(std::cell::Cell::get) == 0 {
        return false;
    }
    OPEN_STEPS.with(
        |s| match s.borrow_mut().iter_mut().rev().find(|fr| fr.span == span) {
            Some(frame) => {
                f(&mut StepVisitor {
                    fields: &mut frame.fields,
                    slots: &[],
                });
                true
            }
            None => false,
        },
    )
}

pub(crate) fn pop(span: u64) -> Option<StepFrame> {
    if TOP.with(std::cell::Cell::get) == 0 {
        return None;
    }
    OPEN_STEPS.with(|s| {
        let mut stack = s.borrow_mut();
        // Steps nest and close innermost first: the one closing is nearly always the last.
        let frame = if stack.last().is_some_and(|fr| fr.span == span) {
            stack.pop()
        } else {
            let at = stack.iter().rposition(|fr| fr.span == span)?;
            Some(stack.remove(at))
        };
        TOP.with(|t| t.set(stack.last().map_or(0, |fr| fr.span)));
        frame
    })
}
