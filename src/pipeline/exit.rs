//! The process's ways out, each of which ends the run and flushes every live pipeline:
//! `exit()` (an `atexit` hook), a panic in a `panic = "abort"` build (a panic hook, chained
//! to the one before it), and, when asked for, SIGTERM and SIGINT (a signal-hook thread that
//! re-raises the signal's default action afterwards). Also what they must not do: hang on a
//! lock held by a stuck thread ([`lock_until`]).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, Once, TryLockError, Weak};
use std::time::{Duration, Instant};

use super::queue::Queue;

// The pipeline's process-global state, all of it, each with the reason it must be global: the
// exit paths run outside any value the program holds, so what they act on has to be reachable
// from a `static`.

/// Every guard built in this process, weakly (a dropped guard has finished): `exit()`, a
/// panic hook and a signal have no guard in hand, yet must finish every live pipeline.
static LIVE_GUARDS: Mutex<Vec<Weak<dyn Finishable>>> = Mutex::new(Vec::new());

/// Guards dropped before any record (`let (layer, _) = ..`), kept alive here so the pipeline
/// runs on and is flushed at exit instead of losing the whole log.
static DETACHED_GUARDS: Mutex<Vec<Arc<dyn Finishable>>> = Mutex::new(Vec::new());

/// Pipelines that have stopped, with the records dropped after their shutdown that a report
/// has told of: what a thread still logs after the guard is gone is said once, at exit, when
/// no report will follow.
static STOPPED_PIPELINES: Mutex<Vec<(Weak<Queue>, u64)>> = Mutex::new(Vec::new());

/// The `atexit` and panic hooks are registered once per process, whatever the number of
/// layers: libc keeps a hook forever, and each would finish every pipeline again.
static EXIT_HOOKS: Once = Once::new();

/// SIGTERM and SIGINT are handled by one thread per process: a signal has one disposition
/// per process, and a second iterator would see the same signal twice.
static SIGNALS_HANDLED: Mutex<bool> = Mutex::new(false);

/// Locks one of these, poisoned or not: nothing panics while they are held, and a list left
/// by a panicking thread is still consistent.
fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What an exit path finishes: a guard's shared part (`GuardInner`), known here only by this.
pub(crate) trait Finishable: Send + Sync {
    /// Ends the run and stops the pipeline, once, whoever asks first.
    fn finish(&self, how: Finish);
}

/// How an interval comes to its end.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Ending {
    /// Its span closed, or the process exits normally with it open: `run_stop`'s status
    /// follows the usual rule (an explicit `status`, else the target, else `aborted`).
    Closed,
    /// The run was cut short (a signal, the guard dropped while the run is open): `aborted`.
    Aborted,
}

/// Puts `guard` in reach of the exit paths; registers the `atexit` and panic hooks on the
/// first call.
pub(crate) fn register(guard: Weak<dyn Finishable>) {
    EXIT_HOOKS.call_once(|| {
        // SAFETY: `at_exit` is an `extern "C" fn()` that never unwinds (it catches panics).
        unsafe { libc::atexit(at_exit) };
        if cfg!(panic = "abort") {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                finish_all(Finish::PanicAbort);
                previous(info);
            }));
        }
    });
    let mut live = lock(&LIVE_GUARDS);
    live.retain(|g| g.strong_count() > 0);
    live.push(guard);
}

/// Keeps a guard dropped before any record alive until the process exits.
pub(crate) fn detach(guard: Arc<dyn Finishable>) {
    lock(&DETACHED_GUARDS).push(guard);
}

/// The `atexit` hook: what `std::process::exit` (and a return from `main` with the guard
/// leaked) still runs.
extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        finish_all(Finish::ProcessExit);
        say_late_drops();
    });
}

/// A report of a stopped pipeline told of `dropped` records logged after its shutdown.
pub(crate) fn reported_drops(queue: &Arc<Queue>, dropped: u64) {
    let mut stopped = lock(&STOPPED_PIPELINES);
    stopped.retain(|(q, _)| q.strong_count() > 0);
    match stopped
        .iter_mut()
        .find(|(q, _)| q.as_ptr() == Arc::as_ptr(queue))
    {
        Some((_, told)) => *told = dropped,
        None => stopped.push((Arc::downgrade(queue), dropped)),
    }
}

/// Records logged after a pipeline stopped (a thread still logging after the guard was
/// dropped) that no report has told of: said as the process exits, so none is lost
/// silently.
fn say_late_drops() {
    let stopped = lock(&STOPPED_PIPELINES);
    for (queue, told) in stopped.iter() {
        let Some(queue) = queue.upgrade() else {
            continue;
        };
        let dropped = queue.counters.dropped_closed.load(Ordering::Relaxed);
        if dropped > *told {
            stderr_line!(
                "tracing-mllog: {} records were logged after the MLLOG pipeline shut down \
                 (the guard was dropped, or `shutdown()` called, while threads still \
                 logged) and are not in the log",
                dropped - told
            );
        }
    }
}

/// Finishes every live pipeline of the process.
pub(crate) fn finish_all(how: Finish) {
    let mut guards: Vec<Arc<dyn Finishable>> = lock(&LIVE_GUARDS)
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    guards.extend(std::mem::take(&mut *lock(&DETACHED_GUARDS)));
    for g in guards {
        g.finish(how);
    }
}

/// Whether `sig` has a handler already (the program's own: `tokio::signal`, `signal-hook`,
/// `ctrlc`); the default action and "ignore" (a shell's background job) are none.
fn has_own_handler(sig: libc::c_int) -> bool {
    // SAFETY: sigaction(2) with a null new action only reads the current one into `old`,
    // a zeroed (valid) `sigaction`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction != libc::SIG_DFL
            && old.sa_sigaction != libc::SIG_IGN
    }
}

/// Handles SIGTERM and SIGINT from now on: every live pipeline ends its run (`aborted`)
/// and flushes, then the signal's default action (termination) happens. Once per process.
pub(crate) fn handle_signals() -> std::io::Result<()> {
    let mut installed = lock(&SIGNALS_HANDLED);
    if *installed {
        return Ok(());
    }
    for sig in [libc::SIGTERM, libc::SIGINT] {
        if has_own_handler(sig) {
            stderr_line!(
                "tracing-mllog: warning: the program handles {} itself; with signal \
                 handling on, the signal also ends the run and then the process once the \
                 log is flushed, which cuts that handler's work short (a last step, a \
                 checkpoint). Leave `handle_signals` off if the program ends its run itself.",
                signal_name(sig)
            );
        }
    }
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGTERM, libc::SIGINT])?;
    std::thread::Builder::new()
        .name("mllog-signals".into())
        .spawn(move || {
            // The handler itself only writes to a pipe (async-signal-safe); the work
            // happens here, on an ordinary thread.
            if let Some(sig) = signals.forever().next() {
                finish_all(Finish::Signal(sig));
                let _ = signal_hook::low_level::emulate_default_handler(sig);
            }
        })?;
    *installed = true;
    Ok(())
}

/// Locks `mutex`, waiting no later than `deadline`: the exit paths must not hang on a lock held
/// by a thread that is stuck (or by the exit path's own thread, reentered from a panic hook).
pub(crate) fn lock_until<T>(mutex: &Mutex<T>, deadline: Instant) -> Option<MutexGuard<'_, T>> {
    loop {
        match mutex.try_lock() {
            Ok(guard) => return Some(guard),
            Err(TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

/// Why the pipeline is being stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Finish {
    /// [`Guard::shutdown`], or the guard dropped.
    Guard,
    /// `exit()` with the pipeline still running (`std::process::exit`, or `main` returned
    /// with the guard leaked).
    ProcessExit,
    /// A panic in a `panic = "abort"` build, just before the abort.
    PanicAbort,
    /// SIGTERM or SIGINT, with signal handling on.
    Signal(i32),
}

impl Finish {
    /// How the intervals still open end: a run cut short is `aborted`; at a plain exit (and
    /// in a panic, which makes the status `aborted` anyway) the usual rule decides.
    pub(super) fn ending(self) -> Ending {
        match self {
            Finish::Guard | Finish::Signal(_) => Ending::Aborted,
            Finish::ProcessExit | Finish::PanicAbort => Ending::Closed,
        }
    }

    pub(super) fn describe(self) -> String {
        match self {
            Finish::Guard => "the guard was dropped (or shut down)".into(),
            Finish::ProcessExit => "the process is exiting".into(),
            Finish::PanicAbort => "a panic is aborting the process".into(),
            Finish::Signal(sig) => format!("signal {} arrived", signal_name(sig)),
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "?",
    }
}
