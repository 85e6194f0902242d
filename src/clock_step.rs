//! Wall-clock steps during the run.
//!
//! A record's `time_ms` is `CLOCK_MONOTONIC` plus a wall-clock offset taken once per process
//! ([`crate::record::Timestamp::now`]), so every duration in the log (time to train, each
//! block) is measured on the monotonic clock and an NTP step cannot skew it. What the log
//! cannot show by itself is that the wall clock moved away from it: an NTP step (the log's
//! times are then off the system's by that much) or a pause the monotonic clock did not count
//! (a suspended VM: the run took longer than its log says). At every interval's end the layer
//! reads the wall clock once and, when it has moved away from the log's clock by more than
//! the threshold since it was last said, puts the size of the step on that end record as
//! [`WALL_CLOCK_STEP_MS`] metadata (the official checker ignores metadata it has no rule for),
//! says it on stderr and in the guard's report; the live check and `mllog summary` read it
//! from the record.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

pub use crate::results::WALL_CLOCK_STEP_MS;

/// The step that is said by default: 1 s. NTP steps the clock past 128 ms of offset and
/// slews below that (at most 0.5 ms per second, so a slew alone takes over half an hour to
/// reach 1 s); a second is large next to both and small next to any time to train.
pub(crate) const DEFAULT_THRESHOLD: Duration = Duration::from_secs(1);

/// How far the wall clock is from the log's, last said.
#[derive(Debug)]
pub(crate) struct ClockWatch {
    threshold_ns: i64,
    said_ns: AtomicI64,
}

impl ClockWatch {
    pub(crate) fn new(threshold: Duration) -> ClockWatch {
        ClockWatch {
            threshold_ns: i64::try_from(threshold.as_nanos()).unwrap_or(i64::MAX),
            said_ns: AtomicI64::new(0),
        }
    }

    /// The wall clock now against a log time taken now (`log_wall_ns`): the whole divergence
    /// in milliseconds when it moved by at least the threshold since it was last said.
    pub(crate) fn observe(&self, log_wall_ns: i64) -> Option<f64> {
        self.observe_at(wall_now_ns(), log_wall_ns)
    }

    fn observe_at(&self, wall_ns: i64, log_wall_ns: i64) -> Option<f64> {
        let diff = wall_ns.saturating_sub(log_wall_ns);
        let said = self.said_ns.load(Ordering::Relaxed);
        if diff.saturating_sub(said).saturating_abs() < self.threshold_ns.max(1) {
            return None;
        }
        self.said_ns.store(diff, Ordering::Relaxed);
        // Microseconds are plenty; the figure reads better without the noise.
        Some((diff as f64 / 1e3).round() / 1e3)
    }
}

/// The warning for a step of `ms` milliseconds seen at `key`.
pub(crate) fn warning(ms: f64, key: &str) -> String {
    format!(
        "the wall clock moved {ms:+.3} ms away from the log's clock by `{key}` (an NTP step, \
         or a pause such as a suspended VM, which the monotonic clock the log's durations are \
         measured on does not count); the record carries it as `{WALL_CLOCK_STEP_MS}`"
    )
}

fn wall_now_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_REALTIME always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_said_once_with_its_size() {
        let w = ClockWatch::new(Duration::from_secs(1));
        let t = 1_700_000_000_000_000_000;
        assert_eq!(w.observe_at(t + 999_000_000, t), None);
        assert_eq!(w.observe_at(t + 2_500_000_000, t), Some(2500.0));
        // The same divergence again: already said.
        assert_eq!(w.observe_at(t + 2_600_000_000, t), None);
        // Back by more than the threshold (the clock stepped back): said, signed.
        assert_eq!(w.observe_at(t - 1_000_000_000, t), Some(-1000.0));
        // Today's clock against the log's: well within a second.
        let fresh = ClockWatch::new(Duration::from_secs(1));
        assert_eq!(fresh.observe(crate::record::Timestamp::now().wall_ns), None);
    }

    #[test]
    fn a_zero_threshold_says_any_divergence() {
        let w = ClockWatch::new(Duration::ZERO);
        let t = 1_000_000_000;
        assert_eq!(w.observe_at(t + 1_500, t), Some(0.002));
        assert_eq!(w.observe_at(t + 1_500, t), None);
    }
}
