//! The interval spans entered on this thread, innermost last: what gives a record its
//! enclosing interval (its `scope`, a traced step's parent) without a span lookup. Per thread
//! by nature: what is entered is the current span of a thread (an instrumented future enters
//! its span on the thread that polls it, and exits it before the poll returns).

use std::cell::{Cell, RefCell};

/// One interval span entered on this thread.
#[derive(Clone, Copy)]
struct Entered {
    /// The layer (`Shared::id`, never 0) that tracks it: interval ids are numbered per layer,
    /// and two layers (in one subscriber or in two) each see their own intervals only.
    layer: u64,
    span: u64,
    interval: u64,
}

thread_local! {
    /// Interval spans entered on this thread, innermost last.
    static ENTERED_INTERVALS: RefCell<Vec<Entered>> = const { RefCell::new(Vec::new()) };
    /// The last entry of `ENTERED_INTERVALS` (layer 0: none), which every event reads: a `Cell`
    /// without a destructor is read without the registration check a `Vec`'s thread local pays
    /// (it shows in every event's count in `examples/budgets.rs`).
    static INNERMOST: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

pub(crate) fn enter_interval(layer: u64, span: u64, interval: u64) {
    ENTERED_INTERVALS.with(|s| {
        s.borrow_mut().push(Entered {
            layer,
            span,
            interval,
        })
    });
    INNERMOST.with(|c| c.set((layer, interval)));
}

pub(crate) fn exit_interval(layer: u64, span: u64) {
    let innermost = ENTERED_INTERVALS.with(|s| {
        let mut stack = s.borrow_mut();
        if let Some(at) = stack
            .iter()
            .rposition(|e| e.layer == layer && e.span == span)
        {
            stack.remove(at);
        }
        stack.last().map_or((0, 0), |e| (e.layer, e.interval))
    });
    INNERMOST.with(|c| c.set(innermost));
}

/// The innermost interval of `layer` entered on this thread.
#[inline]
pub(crate) fn current_interval(layer: u64) -> Option<u64> {
    let (innermost_layer, interval) = INNERMOST.with(|c| c.get());
    if innermost_layer == layer {
        Some(interval)
    } else if innermost_layer == 0 {
        None
    } else {
        current_interval_below(layer)
    }
}

/// Another layer's interval is innermost (several layers, or one that shut down with
/// intervals entered): this layer's innermost one, if any.
#[cold]
fn current_interval_below(layer: u64) -> Option<u64> {
    ENTERED_INTERVALS.with(|s| {
        s.borrow()
            .iter()
            .rev()
            .find(|e| e.layer == layer)
            .map(|e| e.interval)
    })
}
