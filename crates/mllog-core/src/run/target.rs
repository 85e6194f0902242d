/// Which side of the target value counts as converged (see the [`Target`] example).
///
/// A preset's [`Target`] gets it from the rules: accuracies and AUC are [`Direction::AtLeast`],
/// losses [`Direction::AtMost`], a strict bound (`> 0.69`) [`Direction::Above`].
///
/// ```
/// use mllog_core::presets::Preset;
/// use mllog_core::run::{Direction, Target};
/// use mllog_core::{Benchmark, Division, Ruleset};
///
/// let dlrm = Preset::for_benchmark(Ruleset::V6_1_0, Benchmark::Dlrmv4, Division::Closed, None).unwrap();
/// assert_eq!(dlrm.target().direction, Direction::AtLeast);
/// let below = Target { value: 3.3, direction: Direction::Below };
/// assert!(below.reached(3.29) && !below.reached(3.3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// `value <= target` (losses, perplexities).
    AtMost,
    /// `value < target`.
    Below,
    /// `value >= target` (accuracies, AUC).
    AtLeast,
    /// `value > target`.
    Above,
}

/// A quality target: the `eval_accuracy` value at which the run has converged.
///
/// Its [`Direction`] says which side of the threshold is good: accuracies must reach it from
/// below ([`Target::at_least`]), losses and perplexities from above ([`Target::at_most`]).
/// NaN and infinities never reach a target, so a diverged run is never counted as converged.
/// The presets carry each benchmark's target from the rules; `Display` shows it as the
/// comparison (`>= 0.75`).
///
/// ```
/// use mllog_core::run::{Direction, Target};
///
/// let loss = Target::at_most(0.925);
/// assert!(loss.reached(0.925) && loss.reached(0.9) && !loss.reached(0.93));
/// assert!(!loss.reached(f64::NAN));
/// let strict = Target { value: 0.69, direction: Direction::Above };
/// assert!(!strict.reached(0.69));
/// assert_eq!(Target::at_least(0.75).to_string(), ">= 0.75");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Target {
    /// The threshold.
    pub value: f64,
    /// Which side of it is good.
    pub direction: Direction,
}

impl Target {
    /// Converged when the metric is at most `value` (a loss).
    pub const fn at_most(value: f64) -> Target {
        Target {
            value,
            direction: Direction::AtMost,
        }
    }

    /// Converged when the metric is at least `value` (an accuracy).
    pub const fn at_least(value: f64) -> Target {
        Target {
            value,
            direction: Direction::AtLeast,
        }
    }

    /// Whether `metric` reaches the target. NaN and infinities never do.
    pub fn reached(&self, metric: f64) -> bool {
        if !metric.is_finite() {
            return false;
        }
        match self.direction {
            Direction::AtMost => metric <= self.value,
            Direction::Below => metric < self.value,
            Direction::AtLeast => metric >= self.value,
            Direction::Above => metric > self.value,
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let op = match self.direction {
            Direction::AtMost => "<=",
            Direction::Below => "<",
            Direction::AtLeast => ">=",
            Direction::Above => ">",
        };
        write!(f, "{op} {}", self.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_never_converges() {
        for t in [Target::at_most(0.925), Target::at_least(0.75)] {
            assert!(!t.reached(f64::NAN));
            assert!(!t.reached(f64::INFINITY) && !t.reached(f64::NEG_INFINITY));
        }
        assert!(Target::at_most(0.925).reached(0.925));
        assert!(!Target {
            value: 0.69,
            direction: Direction::Above
        }
        .reached(0.69));
    }
}
