//! The barriers at the ends of the clock: a collective the program hands in
//! ([`Barrier`], given to [`crate::Builder::barrier`]), which the layer calls on
//! every rank, writing or not, when `run` opens and before `run_start` is stamped. So rank 0's
//! `run_start` is never earlier than the end of any rank's `init`, as the peers' `sync=True`
//! (NVIDIA's mlperf-common, composer) make sure. On request
//! ([`Barrier::at_run_stop`], `MLLOG_RUN_STOP_BARRIER`) the same collective is
//! called again when `run` closes, before `run_stop` is stamped, so the clock stops when the
//! slowest rank has finished.
//!
//! The call runs on a thread of its own and the rank waits for it up to a timeout (default
//! [`DEFAULT_TIMEOUT`]); a barrier that fails, panics or times out is reported (stderr, the
//! guard's [`crate::Report::warnings`]) and the run starts, unless the program asked for
//! [`BarrierFailure::Panic`] (before `run_start` only: at `run_stop` the run is timed
//! already, and the hook that writes it runs as a span drops). With no timeout ([`Barrier::timeout`]`(None)`) it runs on the thread
//! that opens `run`, for communicators that must be called from one thread.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// What a fallible barrier returns: `Err` with the communicator's reason.
pub type BarrierResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// How long a rank waits for the barrier by default: 30 minutes, PyTorch's default
/// process-group timeout, so the layer never gives up on a slow rank before the
/// communicator itself would.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A barrier over all ranks (your communicator's: `torch.distributed.barrier`, an NCCL
/// all-reduce, `MPI_Barrier`) and how the layer calls it; [`crate::Builder::barrier`] takes
/// it. The layer calls it on every rank, writing or not, when `run` opens and before
/// `run_start` is stamped, so the clock starts on rank 0 only once every rank has finished
/// `init`; with [`Barrier::at_run_stop`], again before `run_stop`. Called once per process
/// and end, on a thread of the layer's own (see [`Barrier::timeout`]); non-writing ranks keep
/// their disabled callsites, only the `run` span reaches the layer there. docs/ranks.md shows
/// each communicator.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tracing_mllog::barrier::{Barrier, BarrierFailure};
/// use tracing_mllog::{MllogLayer, Output};
///
/// let world = Arc::new(std::sync::Barrier::new(1)); // your communicator
/// let (_layer, _guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .barrier(
///         Barrier::new(move || {
///             world.wait();
///         })
///         .timeout(Some(Duration::from_secs(60)))
///         .on_failure(BarrierFailure::Continue), // the default
///     )
///     .build::<tracing_subscriber::Registry>()?;
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Clone)]
pub struct Barrier {
    pub(crate) call: Arc<dyn Fn() -> BarrierResult + Send + Sync>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) on_failure: BarrierFailure,
    pub(crate) at_run_stop: bool,
}

impl Barrier {
    /// A collective that cannot fail, or fails by panicking.
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> Barrier {
        Barrier::fallible(move || {
            f();
            Ok(())
        })
    }

    /// A collective that can fail (a communicator's own timeout, a lost peer): an `Err` is
    /// reported with its reason, and [`Barrier::on_failure`] decides what follows.
    pub fn fallible(f: impl Fn() -> BarrierResult + Send + Sync + 'static) -> Barrier {
        Barrier {
            call: Arc::new(f),
            timeout: Some(DEFAULT_TIMEOUT),
            on_failure: BarrierFailure::default(),
            at_run_stop: false,
        }
    }

    /// How long a rank waits for the barrier (default 30 minutes, [`DEFAULT_TIMEOUT`]). The
    /// barrier runs on a thread of its own, so a rank that never arrives cannot hold the run
    /// past this; after a timeout the call is left running there. `None`: no timeout, and the
    /// barrier runs on the thread that opens `run`, for a communicator that must not be
    /// called from two threads at once (MPI below `MPI_THREAD_MULTIPLE`).
    pub fn timeout(mut self, timeout: Option<Duration>) -> Barrier {
        self.timeout = timeout;
        self
    }

    /// What a failed, panicking or timed-out barrier does (default
    /// [`BarrierFailure::Continue`]: reported on stderr and in the guard's report, and the
    /// run starts).
    pub fn on_failure(mut self, on_failure: BarrierFailure) -> Barrier {
        self.on_failure = on_failure;
        self
    }

    /// Calls the barrier a second time on every rank, when `run` closes and before
    /// `run_stop` is stamped, so the clock stops on rank 0 only once every rank has finished
    /// its run, as NVIDIA's mlperf-common does (default off, `MLLOG_RUN_STOP_BARRIER`). The
    /// same timeout applies; a rank that never arrives (it crashed, or it is still training
    /// at the timeout) is reported and `run_stop` is written without it. Off by default
    /// because every rank must then close `run` exactly once, or the others wait out the
    /// timeout: docs/ranks.md.
    pub fn at_run_stop(mut self, on: bool) -> Barrier {
        self.at_run_stop = on;
        self
    }

    /// The barrier armed for one end of the clock; `None` before `run_stop` unless asked.
    pub(crate) fn arm(&self, at: At) -> Option<ArmedBarrier> {
        if at == At::RunStop && !self.at_run_stop {
            return None;
        }
        Some(ArmedBarrier::new(
            self.call.clone(),
            self.timeout,
            self.on_failure,
            at,
        ))
    }
}

impl std::fmt::Debug for Barrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Barrier")
            .field("timeout", &self.timeout)
            .field("on_failure", &self.on_failure)
            .field("at_run_stop", &self.at_run_stop)
            .finish_non_exhaustive()
    }
}

/// What happens when the barrier fails, panics or times out ([`Barrier::on_failure`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BarrierFailure {
    /// Say so (stderr and the guard's report) and start the run: the log is written either way,
    /// and the report tells the reviewer that the ranks were not known to be ready (the
    /// default).
    #[default]
    Continue,
    /// Panic on the thread that opens `run`, before `run_start` is written: a run whose ranks
    /// were not all ready is not timed at all. The barrier before `run_stop` never panics:
    /// the run is timed by then, and `run_stop` is written after the report.
    Panic,
}

/// Which end of the clock a barrier guards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum At {
    /// Before `run_start`: every rank finished `init`.
    RunStart,
    /// Before `run_stop`: every rank finished its run.
    RunStop,
}

impl At {
    fn record(self) -> &'static str {
        match self {
            At::RunStart => "run_start",
            At::RunStop => "run_stop",
        }
    }

    /// What the rank does without the barrier, and which ranks it may be waiting for.
    fn without(self) -> (&'static str, &'static str) {
        match self {
            At::RunStart => (
                "the run starts without knowing that every rank finished init",
                "a rank still in init, or one that is gone",
            ),
            At::RunStop => (
                "run_stop is written without knowing that every rank finished its run",
                "a rank still training, or one that is gone",
            ),
        }
    }
}

/// A barrier of one layer at one end of the clock, passed once.
pub(crate) struct ArmedBarrier {
    call: Arc<dyn Fn() -> BarrierResult + Send + Sync>,
    timeout: Option<Duration>,
    pub(crate) on_failure: BarrierFailure,
    at: At,
    passed: AtomicBool,
}

impl std::fmt::Debug for ArmedBarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArmedBarrier")
            .field("timeout", &self.timeout)
            .field("on_failure", &self.on_failure)
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}

/// Why the barrier did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BarrierError {
    #[error(
        "the barrier before {} failed after {waited:.3?}: {reason}; {}",
        at.record(),
        at.without().0
    )]
    Failed {
        at: At,
        waited: Duration,
        reason: String,
    },
    #[error(
        "the barrier before {} did not complete within {timeout:?} ({}); {}",
        at.record(),
        at.without().1,
        at.without().0
    )]
    TimedOut { at: At, timeout: Duration },
}

impl ArmedBarrier {
    pub(crate) fn new(
        call: Arc<dyn Fn() -> BarrierResult + Send + Sync>,
        timeout: Option<Duration>,
        on_failure: BarrierFailure,
        at: At,
    ) -> ArmedBarrier {
        ArmedBarrier {
            call,
            timeout,
            on_failure,
            at,
            passed: AtomicBool::new(false),
        }
    }

    /// Calls the barrier, the first time only (`None` afterwards): every rank opens and closes
    /// `run` once, so each calls the collective the same number of times.
    pub(crate) fn pass(&self) -> Option<Result<Duration, BarrierError>> {
        if self.passed.swap(true, Ordering::AcqRel) {
            return None;
        }
        let started = Instant::now();
        let call = Arc::clone(&self.call);
        let outcome = match self.timeout {
            None => run(&*call),
            Some(timeout) => {
                let (tx, rx) = mpsc::sync_channel(1);
                let spawned = std::thread::Builder::new()
                    .name("mllog-barrier".into())
                    .spawn(move || {
                        let _ = tx.send(run(&*call));
                    });
                match spawned {
                    // A barrier that never returns keeps its thread; the process exits anyway.
                    Ok(_) => match rx.recv_timeout(timeout) {
                        Ok(outcome) => outcome,
                        Err(_) => {
                            return Some(Err(BarrierError::TimedOut {
                                at: self.at,
                                timeout,
                            }))
                        }
                    },
                    Err(_) => run(&*self.call),
                }
            }
        };
        let waited = started.elapsed();
        Some(match outcome {
            Ok(()) => Ok(waited),
            Err(reason) => Err(BarrierError::Failed {
                at: self.at,
                waited,
                reason,
            }),
        })
    }
}

impl ArmedBarrier {
    /// Passes the barrier (the first time), saying on stderr and through `report` why it did
    /// not complete; panics then under [`BarrierFailure::Panic`], before `run_start` only.
    pub(crate) fn pass_reported(&self, report: impl FnOnce(String)) {
        let Some(Err(e)) = self.pass() else {
            return;
        };
        let text = e.to_string();
        stderr_line!("tracing-mllog: warning: {text}");
        report(text.clone());
        if self.on_failure == BarrierFailure::Panic && self.at == At::RunStart {
            panic!("tracing-mllog: {text} (BarrierFailure::Panic)");
        }
    }
}

fn run(call: &(dyn Fn() -> BarrierResult + Send + Sync)) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(panic) => Err(format!(
            "the barrier panicked: {}",
            panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    fn barrier(
        f: impl Fn() -> BarrierResult + Send + Sync + 'static,
        timeout: Option<Duration>,
    ) -> ArmedBarrier {
        ArmedBarrier::new(Arc::new(f), timeout, BarrierFailure::Continue, At::RunStart)
    }

    #[test]
    fn called_once_and_the_wait_is_measured() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        for timeout in [None, Some(Duration::from_secs(5))] {
            calls.store(0, Ordering::Relaxed);
            let c = c.clone();
            let b = barrier(
                move || {
                    c.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(50));
                    Ok(())
                },
                timeout,
            );
            let waited = b.pass().unwrap().unwrap();
            assert!(waited >= Duration::from_millis(50), "{waited:?}");
            assert!(b.pass().is_none());
            assert_eq!(calls.load(Ordering::Relaxed), 1);
        }
    }

    #[test]
    fn errors_panics_and_timeouts_are_reported() {
        let b = barrier(|| Err("peer 3 reset the connection".into()), None);
        let err = b.pass().unwrap().unwrap_err().to_string();
        assert!(err.contains("peer 3 reset the connection"), "{err}");
        let b = barrier(|| panic!("no communicator"), Some(Duration::from_secs(5)));
        let err = b.pass().unwrap().unwrap_err().to_string();
        assert!(
            err.contains("the barrier panicked: no communicator"),
            "{err}"
        );
        let b = barrier(
            || {
                std::thread::sleep(Duration::from_secs(3));
                Ok(())
            },
            Some(Duration::from_millis(100)),
        );
        let started = Instant::now();
        let err = b.pass().unwrap().unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(
            err,
            BarrierError::TimedOut {
                at: At::RunStart,
                timeout: Duration::from_millis(100)
            }
        );
        assert!(err.to_string().contains("did not complete within 100ms"));
    }

    #[test]
    fn the_barrier_before_run_stop_says_so_and_never_panics() {
        let b = ArmedBarrier::new(
            Arc::new(|| Err("peer 2 is gone".into())),
            None,
            BarrierFailure::Panic,
            At::RunStop,
        );
        let mut said = Vec::new();
        b.pass_reported(|w| said.push(w));
        assert_eq!(said.len(), 1);
        assert!(
            said[0].starts_with("the barrier before run_stop failed after"),
            "{said:?}"
        );
        assert!(said[0].contains("peer 2 is gone"), "{said:?}");
        assert!(said[0].contains("every rank finished its run"), "{said:?}");
    }
}
