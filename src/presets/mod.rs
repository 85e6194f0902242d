//! Benchmark presets (from `mllog-core`): typed hyperparameters for every benchmark of the
//! training rulesets 6.0.0 and 6.1.0, validated against the compliance rules when they are
//! built, plus the benchmark's quality target and evaluation schedule. [`Builder::preset`]
//! feeds one to the layer.
//!
//! ```
//! use tracing_mllog::presets::{Llama31_8b, Preset};
//! use tracing_mllog::{Division, MllogLayer, Ruleset};
//!
//! let preset = Llama31_8b { global_batch_size: 64, ..Default::default() }
//!     .preset(Division::Closed, Ruleset::V6_1_0)
//!     .unwrap();
//! let _builder = MllogLayer::builder().preset(&preset).org("MyOrg");
//! ```
//!
//! See `docs/presets.md` and `mllog dry-run` (the `mllog-cli` package).

pub use mllog_core::presets::*;

use crate::layer::Builder;

impl Builder {
    /// Configures the layer with a benchmark preset: `submission_benchmark`,
    /// `submission_division`, the ruleset, the global batch size (sample counting), the quality
    /// target, the evaluation schedule and the hyperparameter records (logged inside `init`, in
    /// order).
    ///
    /// Submission metadata that is not the preset's business (org, platform, precisions,
    /// parallelism, `config_filename`) is still yours to set on the builder.
    pub fn preset(self, preset: &Preset) -> Builder {
        self.benchmark(preset.benchmark())
            .division(preset.division())
            .ruleset(preset.ruleset())
            .global_batch_size(preset.global_batch_size())
            .target(preset.target())
            .eval_schedule(preset.eval_schedule())
            .hyperparameters(preset.hyperparameters().iter().cloned())
    }
}
