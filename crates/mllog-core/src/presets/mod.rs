//! Benchmark presets: typed hyperparameters for every benchmark of the training rulesets 6.0.0
//! and 6.1.0, validated against the compliance rules when they are built, plus the benchmark's
//! quality target and evaluation schedule.
//!
//! A preset logs every key the rules require exactly once, in the order the rules need
//! (`global_batch_size` before the learning rate, warmup before decay, ...). Derived values are
//! computed, never typed by hand (decay steps = total − warmup; learning rate and clip norm from
//! the batch size where the rules tie them). Values the closed rules fix are read from
//! [`crate::compliance`] (the one source of truth); a different value is an error in words.
//!
//! ```
//! use mllog_core::presets::{Llama31_8b, Preset};
//! use mllog_core::{Division, Ruleset, Value};
//!
//! let preset = Llama31_8b { global_batch_size: 64, ..Default::default() }
//!     .preset(Division::Closed, Ruleset::V6_1_0)
//!     .unwrap();
//! assert_eq!(preset.get("opt_learning_rate_decay_steps"), Some(&Value::Int(1_200_000 - 128)));
//! assert_eq!(preset.eval_schedule().first, 12288);
//!
//! // A value the closed rules fix cannot be changed in the closed division.
//! let err = Llama31_8b::default()
//!     .with_value("opt_adamw_beta_2", 0.999)
//!     .preset(Division::Closed, Ruleset::V6_1_0)
//!     .unwrap_err();
//! assert!(err.to_string().contains("`opt_adamw_beta_2` must be 0.95 for llama31_8b in the closed division"));
//! // The open division relaxes it.
//! assert!(Llama31_8b::default()
//!     .with_value("opt_adamw_beta_2", 0.999)
//!     .preset(Division::Open, Ruleset::V6_1_0)
//!     .is_ok());
//!
//! // The CLI's entry point: any benchmark by name, optionally with another batch size.
//! let p = Preset::for_benchmark(Ruleset::V6_1_0, "deepseekv3_671b".parse().unwrap(),
//!                               Division::Closed, Some(15360)).unwrap();
//! assert_eq!(p.eval_schedule().first, 660480);
//! ```
//!
//! See `docs/presets.md`, and `mllog dry-run` (the `mllog-cli` package), which runs a preset
//! through the layer with the synthetic metric of [`dry_run`].

mod benchmarks;
pub mod dry_run;
#[cfg(test)]
mod tests;
mod validate;

use std::fmt;

pub use benchmarks::{
    Deepseekv3_671b, DlrmDcnv2, Dlrmv4, Flux1, GptOss20b, Llama2_70bLora, Llama31_405b, Llama31_8b,
    Qwen35_397bGrpo,
};

use crate::compliance::{self, Ruleset, ValueRange};
use crate::keys::Benchmark;
use crate::record::Value;
use crate::run::{Direction, EvalSchedule, Target};
use crate::submission::Division;

/// How evaluation records report training progress, as the benchmark's rules require.
///
/// Read it from [`Preset::progress`]: the layer and `mllog dry-run` put the matching metadata on
/// every evaluation record.
///
/// ```
/// use mllog_core::presets::{EvalProgress, Preset};
/// use mllog_core::{Benchmark, Division, Ruleset};
///
/// let lora = Preset::for_benchmark(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed, None).unwrap();
/// assert_eq!(lora.progress(), EvalProgress::SamplesCount);
/// let dlrm = Preset::for_benchmark(Ruleset::V6_0_0, Benchmark::DlrmDcnv2, Division::Closed, None).unwrap();
/// assert!(matches!(dlrm.progress(), EvalProgress::EpochNum { samples_per_epoch } if samples_per_epoch > 0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EvalProgress {
    /// `samples_count` (samples trained since `run_start`): the LLMs, flux1, dlrmv4.
    SamplesCount,
    /// `epoch_num` as a fraction of an epoch of `samples_per_epoch` samples (dlrm_dcnv2), in
    /// addition to `samples_count`.
    EpochNum {
        /// Samples in one epoch (the benchmark's `train_samples`).
        samples_per_epoch: u64,
    },
}

/// A validated benchmark configuration: the hyperparameter records (in logging order), the
/// quality target, the evaluation schedule and the global batch size.
///
/// Build one from a typed struct ([`Llama31_8b::preset`], ...) or [`Preset::for_benchmark`];
/// feed it to the layer with `tracing_mllog::Builder::preset`.
///
/// Building is the validation: a preset that is built complies with the closed (or open)
/// rules of its ruleset, so a training script that logs [`Preset::hyperparameters`] in order
/// cannot get a hyperparameter wrong. [`Preset::with_hyperparameter`] is the one way out of
/// the rules, taken on purpose (a value a compliance check must refuse). Its
/// [`Preset::target`] and [`Preset::eval_schedule`] come from the same rules and drive
/// convergence and evaluation in the layer. See the [module example](self) for building,
/// rejected values and the by-name entry point.
///
///
/// ```
/// use mllog_core::compliance::{check_text, Ruleset};
/// use mllog_core::presets::Preset;
/// use mllog_core::{Benchmark, Division};
///
/// let p = Preset::for_benchmark(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed, Some(16)).unwrap();
/// assert_eq!((p.benchmark(), p.division(), p.global_batch_size()), (Benchmark::Llama2_70bLora, Division::Closed, 16));
/// assert_eq!(p.hyperparameters()[0].0, "global_batch_size"); // logged first: later rules read it
/// assert_eq!(p.eval_points(2), vec![p.eval_schedule().first, p.eval_schedule().first + 384]);
/// assert_eq!(p.target_key(), "eval_accuracy");
/// assert!(p.target_range().contains(p.target().value));
/// assert!(Preset::BENCHMARKS.contains(&Benchmark::Flux1));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Preset {
    benchmark: Benchmark,
    division: Division,
    ruleset: Ruleset,
    hyperparameters: Vec<(&'static str, Value)>,
    target: Target,
    target_key: &'static str,
    target_range: ValueRange,
    schedule: EvalSchedule,
    global_batch_size: u64,
    progress: EvalProgress,
}

/// Why a preset cannot be built. Every message names the key (where there is one), the
/// benchmark, the division and the ruleset.
///
/// Match on it to tell a configuration mistake ([`PresetError::Invalid`],
/// [`PresetError::Missing`]) from asking for a benchmark the ruleset or the crate does not
/// cover ([`PresetError::NotInRuleset`], [`PresetError::NoPreset`]).
///
/// ```
/// use mllog_core::presets::{Llama31_405b, Llama2_70bLora, PresetError};
/// use mllog_core::{Division, Ruleset};
///
/// let err = Llama31_405b::default().preset(Division::Closed, Ruleset::V6_1_0).unwrap_err();
/// assert!(matches!(err, PresetError::NotInRuleset { ruleset: Ruleset::V6_1_0, .. }));
///
/// let err = Llama2_70bLora::default()
///     .with_value("lora_rank", 8)
///     .preset(Division::Closed, Ruleset::V6_1_0)
///     .unwrap_err();
/// match err {
///     PresetError::Invalid { key, ref requirement, .. } => {
///         assert_eq!(key, "lora_rank");
///         assert!(requirement.contains("16"), "{requirement}");
///     }
///     other => panic!("unexpected: {other}"),
/// }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum PresetError {
    /// The ruleset does not allow the benchmark (e.g. `llama31_405b` under 6.1.0).
    NotInRuleset {
        /// The benchmark.
        benchmark: Benchmark,
        /// The ruleset.
        ruleset: Ruleset,
    },
    /// There is no preset for this benchmark (only the benchmarks of 6.0.0 and 6.1.0 have one).
    NoPreset {
        /// The benchmark.
        benchmark: Benchmark,
    },
    /// A value the rules reject (a fixed value changed, a derived value overridden, a batch
    /// size out of range, ...).
    Invalid {
        /// The key.
        key: &'static str,
        /// What the rules require, in words (`must be 0.95`).
        requirement: String,
        /// The value the preset would log.
        found: Value,
        /// The benchmark.
        benchmark: Benchmark,
        /// The division.
        division: Division,
        /// The ruleset.
        ruleset: Ruleset,
    },
    /// A key the rules require and the preset does not log.
    Missing {
        /// The key.
        key: &'static str,
        /// The benchmark.
        benchmark: Benchmark,
        /// The division.
        division: Division,
        /// The ruleset.
        ruleset: Ruleset,
    },
    /// A key given twice (an `EXACTLY_ONE` key must be logged once).
    Duplicate {
        /// The key.
        key: String,
        /// The benchmark.
        benchmark: Benchmark,
    },
    /// An override for a key this preset does not log (usually a misspelt key, e.g.
    /// `eval_frequency` for `evaluation_frequency`).
    UnknownKey {
        /// The key.
        key: String,
        /// The benchmark.
        benchmark: Benchmark,
        /// The keys the preset logs.
        known: Vec<&'static str>,
    },
    /// A key logged before a key its rule depends on.
    Order {
        /// The key.
        key: &'static str,
        /// The key that must come first.
        after: &'static str,
        /// The benchmark.
        benchmark: Benchmark,
    },
    /// The evaluation schedule does not satisfy the rules.
    Schedule {
        /// What is wrong, in words.
        reason: String,
        /// The benchmark.
        benchmark: Benchmark,
        /// The division.
        division: Division,
        /// The ruleset.
        ruleset: Ruleset,
    },
}

impl fmt::Display for PresetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PresetError::NotInRuleset { benchmark, ruleset } => {
                let allowed: Vec<&str> = compliance::rules(*ruleset)
                    .benchmarks()
                    .iter()
                    .map(|b| b.as_str())
                    .collect();
                write!(
                    f,
                    "benchmark {benchmark} is not part of ruleset {ruleset} (allowed: {})",
                    allowed.join(", ")
                )
            }
            PresetError::NoPreset { benchmark } => write!(
                f,
                "there is no preset for benchmark {benchmark} (presets exist for the benchmarks of \
                 rulesets 6.0.0 and 6.1.0)"
            ),
            PresetError::Invalid {
                key,
                requirement,
                found,
                benchmark,
                division,
                ruleset,
            } => write!(
                f,
                "`{key}` {requirement} for {benchmark} in the {division} division (ruleset \
                 {ruleset}), found {}",
                found.to_json(),
                division = division.as_str()
            ),
            PresetError::Missing {
                key,
                benchmark,
                division,
                ruleset,
            } => write!(
                f,
                "`{key}` is required for {benchmark} in the {} division (ruleset {ruleset}) but \
                 the preset has no value for it",
                division.as_str()
            ),
            PresetError::Duplicate { key, benchmark } => write!(
                f,
                "`{key}` is given twice for {benchmark}; an EXACTLY_ONE key is logged once"
            ),
            PresetError::UnknownKey {
                key,
                benchmark,
                known,
            } => write!(
                f,
                "`{key}` is not a key of the {benchmark} preset (it logs: {})",
                known.join(", ")
            ),
            PresetError::Order {
                key,
                after,
                benchmark,
            } => write!(
                f,
                "`{key}` must be logged after `{after}` for {benchmark} (its rule reads that value)"
            ),
            PresetError::Schedule {
                reason,
                benchmark,
                division,
                ruleset,
            } => write!(
                f,
                "evaluation schedule of {benchmark} in the {} division (ruleset {ruleset}): \
                 {reason}",
                division.as_str()
            ),
        }
    }
}

impl std::error::Error for PresetError {}

impl Preset {
    /// The preset of `benchmark` with its default hyperparameters, for the CLI and quick
    /// starts; `global_batch_size` replaces the default batch size (derived values follow it).
    pub fn for_benchmark(
        ruleset: Ruleset,
        benchmark: Benchmark,
        division: Division,
        global_batch_size: Option<u64>,
    ) -> Result<Preset, PresetError> {
        macro_rules! with_gbs {
            ($t:ty) => {{
                let mut p = <$t>::default();
                if let Some(g) = global_batch_size {
                    p.global_batch_size = g;
                }
                p.preset(division, ruleset)
            }};
        }
        match benchmark {
            Benchmark::Llama2_70bLora => with_gbs!(Llama2_70bLora),
            Benchmark::Llama31_8b => with_gbs!(Llama31_8b),
            Benchmark::GptOss20b => with_gbs!(GptOss20b),
            Benchmark::Llama31_405b => with_gbs!(Llama31_405b),
            Benchmark::Deepseekv3_671b => with_gbs!(Deepseekv3_671b),
            Benchmark::Flux1 => with_gbs!(Flux1),
            Benchmark::Qwen35_397bGrpo => with_gbs!(Qwen35_397bGrpo),
            Benchmark::Dlrmv4 => with_gbs!(Dlrmv4),
            Benchmark::DlrmDcnv2 => with_gbs!(DlrmDcnv2),
            other => Err(PresetError::NoPreset { benchmark: other }),
        }
    }

    /// The benchmarks that have a preset.
    pub const BENCHMARKS: [Benchmark; 9] = [
        Benchmark::Llama2_70bLora,
        Benchmark::Llama31_8b,
        Benchmark::Llama31_405b,
        Benchmark::Deepseekv3_671b,
        Benchmark::GptOss20b,
        Benchmark::Flux1,
        Benchmark::Qwen35_397bGrpo,
        Benchmark::Dlrmv4,
        Benchmark::DlrmDcnv2,
    ];

    /// The benchmark.
    pub fn benchmark(&self) -> Benchmark {
        self.benchmark
    }

    /// The division.
    pub fn division(&self) -> Division {
        self.division
    }

    /// The ruleset the preset was validated against.
    pub fn ruleset(&self) -> Ruleset {
        self.ruleset
    }

    /// The hyperparameter records, in logging order.
    pub fn hyperparameters(&self) -> &[(&'static str, Value)] {
        &self.hyperparameters
    }

    /// The value logged for `key`, if the preset logs it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.hyperparameters
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    /// The preset with `value` logged for `key` in place of the value it validated, in the
    /// same place of the logging order, all else kept; an error naming the keys it logs when
    /// it logs no `key`.
    ///
    /// The value is *not* validated: this is how a program logs, on purpose, a value the
    /// rules refuse, e.g. to see a compliance check fail it. For a value that must pass,
    /// give it to the benchmark struct's `with_value` before [`Llama2_70bLora::preset`] (and
    /// the like), which validates it. Nothing is derived again either: replacing
    /// `global_batch_size` changes that record only, not [`Preset::global_batch_size`], the
    /// target or the evaluation schedule.
    ///
    /// ```
    /// use mllog_core::compliance::{Division, Ruleset};
    /// use mllog_core::presets::Llama2_70bLora;
    /// use mllog_core::Value;
    ///
    /// let preset = Llama2_70bLora::default().preset(Division::Closed, Ruleset::V6_1_0).unwrap();
    /// let changed = preset.clone().with_hyperparameter("lora_rank", 8).unwrap();
    /// assert_eq!(changed.get("lora_rank"), Some(&Value::Int(8))); // the closed rules want 16
    /// assert_eq!(changed.hyperparameters().len(), preset.hyperparameters().len());
    /// assert_eq!(changed.eval_schedule(), preset.eval_schedule());
    ///
    /// let err = preset.with_hyperparameter("lora_rnak", 8).unwrap_err();
    /// assert!(err.to_string().starts_with("`lora_rnak` is not a key of the llama2_70b_lora preset"));
    /// ```
    pub fn with_hyperparameter(
        mut self,
        key: &str,
        value: impl Into<Value>,
    ) -> Result<Preset, PresetError> {
        match self.hyperparameters.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => {
                *v = value.into();
                Ok(self)
            }
            None => Err(PresetError::UnknownKey {
                key: key.to_owned(),
                benchmark: self.benchmark,
                known: self.hyperparameters.iter().map(|(k, _)| *k).collect(),
            }),
        }
    }

    /// The quality target (from the division's rule file).
    pub fn target(&self) -> Target {
        self.target
    }

    /// The key whose value must reach the target (`eval_accuracy`; `averaged_validation_loss`
    /// for open flux1).
    pub fn target_key(&self) -> &'static str {
        self.target_key
    }

    /// The range the rules accept for the target key (e.g. `(0, 0.925]`).
    pub fn target_range(&self) -> ValueRange {
        self.target_range
    }

    /// The evaluation points the rules demand.
    pub fn eval_schedule(&self) -> EvalSchedule {
        self.schedule
    }

    /// The first `n` evaluation points (`samples_count`).
    pub fn eval_points(&self, n: usize) -> Vec<u64> {
        (0..n as u64).map(|i| self.schedule.point(i)).collect()
    }

    /// The global batch size (samples per training step).
    pub fn global_batch_size(&self) -> u64 {
        self.global_batch_size
    }

    /// How evaluation records report progress.
    pub fn progress(&self) -> EvalProgress {
        self.progress
    }
}

/// Converts the rules' target range into a [`Target`]: the bound on the good side.
pub(crate) fn run_target(t: &compliance::RuleTarget) -> Option<(Target, ValueRange)> {
    let range = t.range?;
    let (bound, dir) = if t.higher_is_better {
        let b = range.min?;
        (
            b,
            if b.inclusive {
                Direction::AtLeast
            } else {
                Direction::Above
            },
        )
    } else {
        let b = range.max?;
        (
            b,
            if b.inclusive {
                Direction::AtMost
            } else {
                Direction::Below
            },
        )
    };
    Some((
        Target {
            value: bound.value,
            direction: dir,
        },
        range,
    ))
}

/// Collects a preset's records in order; validation happens in [`Draft::finish`].
pub(crate) struct Draft {
    pub(crate) ruleset: Ruleset,
    pub(crate) benchmark: Benchmark,
    pub(crate) division: Division,
    overrides: Vec<(&'static str, Value)>,
    used: Vec<&'static str>,
    pub(crate) values: Vec<(&'static str, Value)>,
    error: Option<PresetError>,
}

impl Draft {
    pub(crate) fn new(
        ruleset: Ruleset,
        benchmark: Benchmark,
        division: Division,
        overrides: &[(&'static str, Value)],
    ) -> Result<Draft, PresetError> {
        if !compliance::rules(ruleset).allows(benchmark) {
            return Err(PresetError::NotInRuleset { benchmark, ruleset });
        }
        for (i, (k, _)) in overrides.iter().enumerate() {
            if overrides[..i].iter().any(|(o, _)| o == k) {
                return Err(PresetError::Duplicate {
                    key: (*k).to_string(),
                    benchmark,
                });
            }
        }
        Ok(Draft {
            ruleset,
            benchmark,
            division,
            overrides: overrides.to_vec(),
            used: Vec::new(),
            values: Vec::new(),
            error: None,
        })
    }

    fn override_of(&mut self, key: &'static str) -> Option<Value> {
        let v = self
            .overrides
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone());
        if v.is_some() && !self.used.contains(&key) {
            self.used.push(key);
        }
        v
    }

    /// Logs `key` = `value` (an override wins). A key logged twice is an error.
    pub(crate) fn put(&mut self, key: &'static str, value: impl Into<Value>) {
        let value = self.override_of(key).unwrap_or_else(|| value.into());
        if self.values.iter().any(|(k, _)| *k == key) {
            self.error.get_or_insert(PresetError::Duplicate {
                key: key.to_string(),
                benchmark: self.benchmark,
            });
            return;
        }
        self.values.push((key, value));
    }

    /// The value the closed rules fix for `key` (or its override).
    pub(crate) fn fixed_value(&mut self, key: &'static str) -> Option<Value> {
        self.override_of(key).or_else(|| {
            compliance::required_value(self.ruleset, self.benchmark, key).map(|l| l.to_value())
        })
    }

    /// Logs the value the closed rules fix for `key` (an override wins; the validation then
    /// rejects a different value in the closed division).
    pub(crate) fn fixed(&mut self, key: &'static str) {
        match self.fixed_value(key) {
            Some(v) => self.put(key, v),
            None => {
                self.error.get_or_insert(PresetError::Missing {
                    key,
                    benchmark: self.benchmark,
                    division: self.division,
                    ruleset: self.ruleset,
                });
            }
        }
    }

    /// A fixed numeric value (for derivations), if the rules fix one.
    pub(crate) fn fixed_f64(&mut self, key: &'static str) -> Option<f64> {
        self.fixed_value(key).and_then(|v| v.as_f64())
    }

    /// Validates the records against the rules and builds the preset.
    pub(crate) fn finish(
        mut self,
        global_batch_size: u64,
        schedule: EvalSchedule,
    ) -> Result<Preset, PresetError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if let Some((k, _)) = self.overrides.iter().find(|(k, _)| !self.used.contains(k)) {
            return Err(PresetError::UnknownKey {
                key: (*k).to_string(),
                benchmark: self.benchmark,
                known: self.values.iter().map(|(k, _)| *k).collect(),
            });
        }
        validate::finish(self, global_batch_size, schedule)
    }
}

/// `ceil(a / b) * b` for positive integers.
pub(crate) fn round_up(a: u64, b: u64) -> u64 {
    a.div_ceil(b) * b
}
