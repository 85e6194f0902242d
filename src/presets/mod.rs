//! Benchmark presets (from `mllog-core`): typed hyperparameters for every benchmark of the
//! training rulesets 6.0.0 and 6.1.0, validated against the compliance rules when they are
//! built, plus the benchmark's quality target and evaluation schedule. [`crate::Builder::preset`]
//! feeds one to the layer.
//!
//! ```
//! use tracing_mllog::presets::{Llama31_8b, Preset};
//! use tracing_mllog::{Division, MllogLayer, Ruleset, Submission};
//!
//! let preset = Llama31_8b { global_batch_size: 64, ..Default::default() }
//!     .preset(Division::Closed, Ruleset::V6_1_0)
//!     .unwrap();
//! let _builder = MllogLayer::builder()
//!     .preset(&preset)
//!     .submission(Submission::default().org("MyOrg"));
//! ```
//!
//! See `docs/presets.md` and `mllog dry-run` (the `mllog-cli` package).

pub use mllog_core::presets::*;
