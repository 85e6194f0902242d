//! The synthetic evaluation metric of a dry run: worse than the quality target before the
//! evaluation at which the run converges, at the target (inside the rules' range) from then on.
//! The driver that runs a preset through the layer is `mllog dry-run` (the `mllog-cli` package).

use super::Preset;
use crate::compliance::ValueRange;
use crate::run::Target;

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// A metric value that reaches `target` and lies in the rules' `range`.
pub(crate) fn converged_value(target: Target, range: ValueRange) -> f64 {
    let t = target.value;
    let higher = matches!(
        target.direction,
        crate::run::Direction::AtLeast | crate::run::Direction::Above
    );
    let raw = if higher {
        match range.max {
            Some(h) => t + 0.02 * (h.value - t),
            None => t + 0.01 * t.abs().max(1.0),
        }
    } else {
        match range.min {
            Some(l) => t - 0.02 * (t - l.value),
            None => t - 0.01 * t.abs().max(1.0),
        }
    };
    let r = round4(raw);
    if target.reached(r) && range.contains(r) {
        r
    } else {
        raw
    }
}

/// The synthetic metric of evaluation `n` (0-based) when the run converges at evaluation
/// `converge_at` (1-based): worse than the target before, at the target from then on.
pub fn synthetic_metric(preset: &Preset, n: u64, converge_at: u64) -> f64 {
    let target = preset.target();
    let conv = converged_value(target, preset.target_range());
    let remaining = converge_at.saturating_sub(n + 1);
    if remaining == 0 {
        return conv;
    }
    let delta = (0.05 * target.value.abs()).max(0.01);
    let higher = matches!(
        target.direction,
        crate::run::Direction::AtLeast | crate::run::Direction::Above
    );
    let v = if higher {
        target.value - delta * remaining as f64
    } else {
        target.value + delta * remaining as f64
    };
    round4(v)
}
