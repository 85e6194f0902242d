/// When to evaluate, in samples trained: the first evaluation at `first`, then every `every`
/// samples. Build one from the benchmark's rules (see the presets) or by hand.
///
/// The rules of most benchmarks fix the evaluation points in samples, not steps; a training
/// loop asks [`EvalSchedule::is_due`] after each step, with the sample counts before and
/// after it, so a batch size that does not divide the interval still evaluates once per
/// point. Given to the layer (`Builder::eval_schedule` in `tracing-mllog`), it also lets
/// the live checker flag an evaluation logged off schedule.
///
/// ```
/// use mllog_core::run::EvalSchedule;
///
/// let s = EvalSchedule::every_skipping(3072, 1); // first at 6144, then every 3072
/// assert_eq!((s.point(0), s.point(2)), (6144, 12288));
/// assert!(!s.is_due(0, 3072));
/// assert!(s.is_due(6000, 6200)); // a step of 200 samples crosses 6144
/// assert_eq!(s.next_after(6144), 9216);
/// assert_eq!(s.last_at_or_before(10_000), Some(9216));
/// assert!(s.is_point(9216) && !s.is_point(9000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvalSchedule {
    /// Samples at the first evaluation.
    pub first: u64,
    /// Samples between evaluations after the first (0: only one evaluation).
    pub every: u64,
}

impl EvalSchedule {
    /// Every `every` samples, starting at `every`.
    pub const fn every(every: u64) -> EvalSchedule {
        EvalSchedule {
            first: every,
            every,
        }
    }

    /// Every `every` samples, skipping the first `skip` evaluation points (the first evaluation
    /// happens at `(skip + 1) * every`).
    pub const fn every_skipping(every: u64, skip: u64) -> EvalSchedule {
        EvalSchedule {
            first: (skip + 1) * every,
            every,
        }
    }

    /// The `n`-th evaluation point (0-based).
    pub const fn point(&self, n: u64) -> u64 {
        self.first + n * self.every
    }

    /// The first evaluation point strictly after `samples`.
    pub fn next_after(&self, samples: u64) -> u64 {
        if samples < self.first || self.every == 0 {
            return if samples < self.first {
                self.first
            } else {
                u64::MAX
            };
        }
        let done = (samples - self.first) / self.every + 1;
        self.first + done * self.every
    }

    /// Whether `samples` is one of the evaluation points.
    pub fn is_point(&self, samples: u64) -> bool {
        samples == self.first
            || (self.every != 0
                && samples > self.first
                && (samples - self.first).is_multiple_of(self.every))
    }

    /// The last evaluation point at or before `samples`, if there is one.
    pub fn last_at_or_before(&self, samples: u64) -> Option<u64> {
        if samples < self.first {
            return None;
        }
        if self.every == 0 {
            return Some(self.first);
        }
        Some(self.first + (samples - self.first) / self.every * self.every)
    }

    /// Whether an evaluation point lies in `(before, after]`: call it after each step with the
    /// samples before and after that step.
    pub fn is_due(&self, before: u64, after: u64) -> bool {
        after >= self.next_after(before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_and_due() {
        let s = EvalSchedule::every_skipping(384, 3);
        assert_eq!(s.first, 1536);
        assert_eq!(s.next_after(0), 1536);
        assert_eq!(s.next_after(1536), 1920);
        assert_eq!(s.next_after(1700), 1920);
        assert!(s.is_due(1528, 1536));
        assert!(!s.is_due(1536, 1544));
        assert!(s.is_due(1900, 1930));
        assert_eq!(s.point(2), 2304);
        assert!(s.is_point(1536) && s.is_point(1920) && !s.is_point(1537) && !s.is_point(384));
        assert_eq!(s.last_at_or_before(1700), Some(1536));
        assert_eq!(s.last_at_or_before(100), None);
        let once = EvalSchedule {
            first: 10,
            every: 0,
        };
        assert!(once.is_point(10) && !once.is_point(20));
    }
}
