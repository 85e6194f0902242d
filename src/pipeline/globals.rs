//! The pipeline's process-global state, all of it, each with the reason it must be global:
//! the exit paths (`atexit`, a panic hook, a signal) run outside any value the program holds,
//! so what they act on has to be reachable from a `static`.

use std::sync::{Arc, Mutex, MutexGuard, Once, Weak};

use super::guard::GuardInner;
use super::queue::Queue;

/// Every guard built in this process, weakly (a dropped guard has finished): `exit()`, a
/// panic hook and a signal have no guard in hand, yet must finish every live pipeline.
pub(super) static LIVE_GUARDS: Mutex<Vec<Weak<GuardInner>>> = Mutex::new(Vec::new());

/// Guards dropped before any record (`let (layer, _) = ..`), kept alive here so the pipeline
/// runs on and is flushed at exit instead of losing the whole log.
pub(super) static DETACHED_GUARDS: Mutex<Vec<Arc<GuardInner>>> = Mutex::new(Vec::new());

/// Pipelines that have stopped, with the records dropped after their shutdown that a report
/// has told of: what a thread still logs after the guard is gone is said once, at exit, when
/// no report will follow.
pub(super) static STOPPED_PIPELINES: Mutex<Vec<(Weak<Queue>, u64)>> = Mutex::new(Vec::new());

/// The `atexit` and panic hooks are registered once per process, whatever the number of
/// layers: libc keeps a hook forever, and each would finish every pipeline again.
pub(super) static EXIT_HOOKS: Once = Once::new();

/// SIGTERM and SIGINT are handled by one thread per process: a signal has one disposition
/// per process, and a second iterator would see the same signal twice.
pub(super) static SIGNALS_HANDLED: Mutex<bool> = Mutex::new(false);

/// Locks one of these, poisoned or not: nothing panics while they are held, and a list left
/// by a panicking thread is still consistent.
pub(super) fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
