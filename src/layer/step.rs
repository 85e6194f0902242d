//! `train_step` spans: no MLLOG line of their own; they drive throughput (in-step time only),
//! `train_loss` every N steps and the samples count. Their state lives in a thread-local stack
//! rather than in span extensions, so a step costs no allocation.

use std::cell::RefCell;
use std::fmt;

use tracing_core::field::{Field, Visit};

/// The fields a `train_step` span may carry.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct StepFields {
    /// `step`: the step number (for `train_loss` frequency and metadata).
    pub(crate) step: Option<u64>,
    /// `samples`: samples this step trains (default: the configured global batch size).
    pub(crate) samples: Option<u64>,
    /// `samples_count`: samples trained after this step, if the loop counts them itself.
    pub(crate) samples_count: Option<u64>,
    /// `loss`: the training loss, usually recorded before the span closes.
    pub(crate) loss: Option<f64>,
    /// `lr`: the learning rate used by this step.
    pub(crate) lr: Option<f64>,
}

impl Visit for StepFields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        // Dispatch on length first: one comparison per field instead of five.
        let name = field.name();
        match (name.len(), name) {
            (4, "step") => self.step = Some(value),
            (7, "samples") => self.samples = Some(value),
            (13, "samples_count") => self.samples_count = Some(value),
            (4, "loss") => self.loss = Some(value as f64),
            (2, "lr") => self.lr = Some(value as f64),
            _ => {}
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, value.max(0) as u64);
        if field.name() == "loss" {
            self.loss = Some(value as f64);
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        match field.name() {
            "loss" => self.loss = Some(value),
            "lr" => self.lr = Some(value),
            _ => {}
        }
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
    OPEN_STEPS.with(|s| s.borrow_mut().push(frame));
}

/// Updates the open step `span`; false when it is not an open, counted step of this thread.
pub(crate) fn update(span: u64, f: impl FnOnce(&mut StepFields)) -> bool {
    OPEN_STEPS.with(
        |s| match s.borrow_mut().iter_mut().rev().find(|fr| fr.span == span) {
            Some(frame) => {
                f(&mut frame.fields);
                true
            }
            None => false,
        },
    )
}

pub(crate) fn pop(span: u64) -> Option<StepFrame> {
    OPEN_STEPS.with(|s| {
        let mut stack = s.borrow_mut();
        // Steps nest and close innermost first: the one closing is nearly always the last.
        if stack.last().is_some_and(|fr| fr.span == span) {
            return stack.pop();
        }
        let at = stack.iter().rposition(|fr| fr.span == span)?;
        Some(stack.remove(at))
    })
}
