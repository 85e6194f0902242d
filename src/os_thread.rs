//! The OS thread id a record carries (`TracedRecord::tid`: the RPD and OpenTelemetry sinks
//! put it beside the profiler's own rows), read once per thread. `gettid` is Linux's, and the
//! crate builds for Linux only (`lib.rs` says so at compile time).

use std::cell::Cell;

thread_local! {
    /// The calling thread's id, cached; 0 until first asked.
    static TID: Cell<u32> = const { Cell::new(0) };
}

/// The OS thread id of the calling thread, cached per thread.
#[inline]
pub(crate) fn id() -> u32 {
    TID.with(|t| {
        let mut v = t.get();
        if v == 0 {
            // SAFETY: gettid takes no arguments and cannot fail.
            v = unsafe { libc::gettid() } as u32;
            t.set(v);
        }
        v
    })
}
