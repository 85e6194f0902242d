//! The typed per-benchmark structs. Tunables are fields (defaults from the reference
//! configurations); fixed values come from [`crate::compliance::required_value`]; derived values
//! are computed here; [`super::Draft::finish`] checks everything against the rules.

use super::{round_up, Draft, Preset, PresetError};
use crate::compliance::Ruleset;
use crate::keys::Benchmark;
use crate::record::Value;
use crate::run::EvalSchedule;
use crate::submission::Division;

macro_rules! overrides {
    ($t:ident) => {
        impl $t {
            /// Logs `value` for `key` instead of the value the preset would log. Meant for keys
            /// the closed rules fix (open-division experiments): in the closed division a value
            /// other than the rules' one makes [`Self::preset`] fail, as does a key the preset
            /// does not log.
            pub fn with_value(mut self, key: &'static str, value: impl Into<Value>) -> Self {
                self.overrides.push((key, value.into()));
                self
            }
        }
    };
}

/// `llama2_70b_lora`: LoRA fine-tuning of Llama 2 70B. Target: eval loss ≤ 0.925 (closed).
/// Evaluation every `ceil(384 / gbs) * gbs` samples, skipping the first
/// `floor(0.125 * gbs + 2)` evaluations.
///
/// Like every benchmark struct here: set the tunables as fields (struct update syntax from
/// `Default`), then [`Llama2_70bLora::preset`] derives and validates the rest.
///
/// ```
/// use mllog_core::presets::Llama2_70bLora;
/// use mllog_core::{Division, Ruleset, Value};
///
/// let p = Llama2_70bLora { global_batch_size: 16, ..Default::default() }
///     .preset(Division::Closed, Ruleset::V6_1_0)
///     .unwrap();
/// assert_eq!(p.global_batch_size(), 16);
/// assert_eq!(p.get("lora_rank"), Some(&Value::Int(16))); // fixed by the closed rules
/// assert_eq!(p.target().to_string(), "<= 0.925");
/// assert_eq!(p.eval_schedule().every, 384); // ceil(384 / 16) * 16
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Llama2_70bLora {
    /// `global_batch_size` (default 8).
    pub global_batch_size: u64,
    /// `gradient_accumulation_steps` (default 1).
    pub gradient_accumulation_steps: u64,
    /// `opt_base_learning_rate` (default 4e-4).
    pub base_learning_rate: f64,
    /// `opt_learning_rate_training_steps` (default 1024).
    pub training_steps: u64,
    /// `opt_gradient_clip_norm` (default 0.3, as the rules document says).
    pub gradient_clip_norm: f64,
    /// `opt_adamw_weight_decay` (default 1e-4, as the rules document says).
    pub weight_decay: f64,
    /// `lora_alpha` (default 32, as the rules document says).
    pub lora_alpha: u64,
    /// `train_samples` (default 3901, the GovReport training set).
    pub train_samples: u64,
    /// `eval_samples` (default 173).
    pub eval_samples: u64,
    /// Values for other keys (see [`Self::with_value`]).
    pub overrides: Vec<(&'static str, Value)>,
}

impl Default for Llama2_70bLora {
    fn default() -> Self {
        Llama2_70bLora {
            global_batch_size: 8,
            gradient_accumulation_steps: 1,
            base_learning_rate: 4e-4,
            training_steps: 1024,
            gradient_clip_norm: 0.3,
            weight_decay: 1e-4,
            lora_alpha: 32,
            train_samples: 3901,
            eval_samples: 173,
            overrides: Vec::new(),
        }
    }
}
overrides!(Llama2_70bLora);

impl Llama2_70bLora {
    /// Builds and validates the preset.
    pub fn preset(self, division: Division, ruleset: Ruleset) -> Result<Preset, PresetError> {
        let g = self.global_batch_size;
        let mut p = Draft::new(
            ruleset,
            Benchmark::Llama2_70bLora,
            division,
            &self.overrides,
        )?;
        p.put("global_batch_size", g);
        p.put(
            "gradient_accumulation_steps",
            self.gradient_accumulation_steps,
        );
        p.put("train_samples", self.train_samples);
        p.put("eval_samples", self.eval_samples);
        p.put("opt_base_learning_rate", self.base_learning_rate);
        p.put("opt_learning_rate_training_steps", self.training_steps);
        p.put("opt_gradient_clip_norm", self.gradient_clip_norm);
        p.put("opt_adamw_weight_decay", self.weight_decay);
        p.fixed("lora_rank");
        p.put("lora_alpha", self.lora_alpha);
        let raw = g;
        let g = g.max(1);
        let every = round_up(384, g);
        let skip = (0.125 * g as f64 + 2.0).floor() as u64;
        p.finish(raw, EvalSchedule::every_skipping(every, skip))
    }
}

/// Shared by `llama31_8b` and `gpt_oss_20b` (same rules, different targets).
fn llm_8b_like(
    benchmark: Benchmark,
    s: &Llama31_8b,
    division: Division,
    ruleset: Ruleset,
) -> Result<Preset, PresetError> {
    let g = s.global_batch_size;
    let mut p = Draft::new(ruleset, benchmark, division, &s.overrides)?;
    p.put("global_batch_size", g);
    p.put("gradient_accumulation_steps", s.gradient_accumulation_steps);
    p.fixed("max_sequence_length");
    let max_steps = p.fixed_f64("max_steps").unwrap_or(0.0) as u64;
    p.put(
        "train_samples",
        s.train_samples.unwrap_or(max_steps.saturating_mul(g)),
    );
    p.fixed("eval_samples");
    p.fixed("opt_name");
    p.put("opt_base_learning_rate", s.base_learning_rate);
    p.put(
        "opt_end_learning_rate",
        s.base_learning_rate * s.end_learning_rate_factor,
    );
    p.fixed("opt_adamw_beta_1");
    p.fixed("opt_adamw_beta_2");
    p.fixed("opt_adamw_epsilon");
    p.fixed("opt_adamw_weight_decay");
    p.fixed("opt_gradient_clip_norm");
    p.fixed("max_steps");
    p.put("opt_learning_rate_warmup_steps", s.warmup_steps);
    // Decay steps = total − warmup (never typed by hand).
    p.put(
        "opt_learning_rate_decay_steps",
        max_steps.saturating_sub(s.warmup_steps),
    );
    p.fixed("opt_learning_rate_decay_schedule");
    let raw = g;
    let g = g.max(1);
    p.finish(raw, EvalSchedule::every(round_up(12288, g)))
}

/// `llama31_8b`: Llama 3.1 8B pretraining. Target: log perplexity ≤ 3.3 (closed). Evaluation
/// every 12288 sequences (rounded up to whole steps).
///
///
/// ```
/// use mllog_core::presets::Llama31_8b;
/// use mllog_core::{Division, Ruleset, Value};
///
/// let p = Llama31_8b { global_batch_size: 100, ..Default::default() }
///     .preset(Division::Closed, Ruleset::V6_1_0)
///     .unwrap();
/// assert_eq!(p.target().to_string(), "<= 3.3");
/// assert_eq!(p.eval_schedule().every, 12300); // 12288 rounded up to whole steps of 100
/// assert_eq!(p.get("train_samples"), Some(&Value::Int(1_200_000 * 100))); // max_steps × gbs
/// assert_eq!(p.get("opt_learning_rate_warmup_steps"), Some(&Value::Int(128)));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Llama31_8b {
    /// `global_batch_size` (default 32).
    pub global_batch_size: u64,
    /// `gradient_accumulation_steps` (default 1).
    pub gradient_accumulation_steps: u64,
    /// `opt_base_learning_rate` (default 8e-4).
    pub base_learning_rate: f64,
    /// `opt_end_learning_rate` = this × the base learning rate (default 0.1, as the rules say).
    pub end_learning_rate_factor: f64,
    /// `opt_learning_rate_warmup_steps` (default 128); decay steps = `max_steps` − warmup.
    pub warmup_steps: u64,
    /// `train_samples` (default: `max_steps` × batch size, as the reference logs).
    pub train_samples: Option<u64>,
    /// Values for other keys (see [`Self::with_value`]).
    pub overrides: Vec<(&'static str, Value)>,
}

impl Default for Llama31_8b {
    fn default() -> Self {
        Llama31_8b {
            global_batch_size: 32,
            gradient_accumulation_steps: 1,
            base_learning_rate: 8e-4,
            end_learning_rate_factor: 0.1,
            warmup_steps: 128,
            train_samples: None,
            overrides: Vec::new(),
        }
    }
}
overrides!(Llama31_8b);

impl Llama31_8b {
    /// Builds and validates the preset.
    pub fn preset(self, division: Division, ruleset: Ruleset) -> Result<Preset, PresetError> {
        llm_8b_like(Benchmark::Llama31_8b, &self, division, ruleset)
    }
}

/// `gpt_oss_20b`: the llama31_8b rules with target ≤ 3.34 (closed). Same fields as
/// [`Llama31_8b`].
///
///
/// ```
/// use mllog_core::presets::GptOss20b;
/// use mllog_core::{Benchmark, Division, Ruleset};
///
/// let p = GptOss20b::default().preset(Division::Closed, Ruleset::V6_1_0).unwrap();
/// assert_eq!(p.benchmark(), Benchmark::GptOss20b);
/// assert_eq!(p.target().to_string(), "<= 3.34");
/// assert_eq!(p.eval_schedule().every, 12288);
/// // The closed rules fix the optimizer's betas.
/// assert!(GptOss20b::default()
///     .with_value("opt_adamw_beta_1", 0.8)
///     .preset(Division::Closed, Ruleset::V6_1_0)
///     .is_err());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct GptOss20b {
    /// `global_batch_size` (default 32).
    pub global_batch_size: u64,
    /// The other hyperparameters (their `global_batch_size` is ignored).
    pub params: Llama31_8b,
}

impl Default for GptOss20b {
    fn default() -> Self {
        GptOss20b {
            global_batch_size: 32,
            params: Llama31_8b::default(),
        }
    }
}

impl GptOss20b {
    /// Logs `value` for `key` instead of the preset's (see [`Llama31_8b::with_value`]).
    pub fn with_value(mut self, key: &'static str, value: impl Into<Value>) -> Self {
        self.params.overrides.push((key, value.into()));
        self
    }

    /// Builds and validates the preset.
    pub fn preset(self, division: Division, ruleset: Ruleset) -> Result<Preset, PresetError> {
        let mut s = self.params;
        s.global_batch_size = self.global_batch_size;
        llm_8b_like(Benchmark::GptOss20b, &s, division, ruleset)
    }
}

/// `llama31_405b` (rulesets up to 6.0.0): learning rate `8e-5 × gbs / 1152`, warmup
/// `ceil(8000 × 1152 / gbs)` steps, decay `ceil(1200000 × 1152 / gbs)` − warmup. Target
/// ≤ 5.6; evaluation every 18432 sequences, skipping the first `floor(0.0026 × gbs + 12)`.
///
///
/// ```
/// use mllog_core::presets::{Llama31_405b, PresetError};
/// use mllog_core::{Division, Ruleset, Value};
///
/// let p = Llama31_405b::default().preset(Division::Closed, Ruleset::V6_0_0).unwrap();
/// assert_eq!(p.get("opt_learning_rate_warmup_steps"), Some(&Value::Int(8000)));
/// assert_eq!(p.target().to_string(), "<= 5.6");
/// // Every 18432 samples, skipping the first floor(0.0026 × 1152 + 12) = 14 points.
/// assert_eq!(p.eval_schedule().every, 18432);
/// assert_eq!(p.eval_schedule().first, 15 * 18432);
/// // Ruleset 6.1.0 no longer has the benchmark.
/// assert!(matches!(
///     Llama31_405b::default().preset(Division::Closed, Ruleset::V6_1_0),
///     Err(PresetError::NotInRuleset { .. })
/// ));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Llama31_405b {
    /// `global_batch_size` (default 1152).
    pub global_batch_size: u64,
    /// `gradient_accumulation_steps` (default 1).
    pub gradient_accumulation_steps: u64,
    /// `opt_end_learning_rate` = this × the base learning rate (default 0.01: 8e-7 at 1152).
    pub end_learning_rate_factor: f64,
    /// `train_samples` (default: total steps × batch size).
    pub train_samples: Option<u64>,
    /// Values for other keys (see [`Self::with_value`]).
    pub overrides: Vec<(&'static str, Value)>,
}

impl Default for Llama31_405b {
    fn default() -> Self {
        Llama31_405b {
            global_batch_size: 1152,
            gradient_accumulation_steps: 1,
            end_learning_rate_factor: 0.01,
            train_samples: None,
            overrides: Vec::new(),
        }
    }
}
overrides!(Llama31_405b);

/// The f64 `x` nearest `want` with `x * 1152 == gbs * 8e-5` exactly (the rule compares floats
/// with `==`).
fn l405_lr(gbs: f64) -> f64 {
    let want = gbs * 8e-5 / 1152.0;
    let mut x = want;
    for _ in 0..8 {
        if x * 1152.0 == gbs * 8e-5 {
            return x;
        }
        x = f64::from_bits(x.to_bits() + 1);
    }
    let mut x = want;
    for _ in 0..8 {
        if x * 1152.0 == gbs * 8e-5 {
            return x;
        }
        x = f64::from_bits(x.to_bits() - 1);
    }
    want
}

impl Llama31_405b {
    /// Builds and validates the preset.
    pub fn preset(self, division: Division, ruleset: Ruleset) -> Result<Preset, PresetError> {
        let g = self.global_batch_size;
        let gf = g.max(1) as f64;
        let mut p = Draft::new(ruleset, Benchmark::Llama31_405b, division, &self.overrides)?;
        let warmup = (8000.0 * 1152.0 / gf).ceil() as u64;
        let total = (1_200_000.0 * 1152.0 / gf).ceil() as u64;
        p.put("global_batch_size", g);
        p.put(
            "gradient_accumulation_steps",
            self.gradient_accumulation_steps,
        );
        p.fixed("max_sequence_length");
        p.put(
            "train_samples",
            self.train_samples.unwrap_or(total.saturating_mul(g)),
        );
        p.fixed("eval_samples");
        p.fixed("init_checkpoint_step");
        p.fixed("opt_name");
        let lr = l405_lr(gf);
        p.put("opt_base_learning_rate", lr);
        p.put("opt_end_learning_rate", lr * self.end_learning_rate_factor);
        p.put("opt_learning_rate_warmup_steps", warmup);
        p.put("opt_learning_rate_decay_steps", total - warmup);
        p.fixed("opt_learning_rate_decay_schedule");
        p.fixed("opt_adamw_beta_1");
        p.fixed("opt_adamw_beta_2");
        p.fixed("opt_adamw_epsilon");
        p.fixed("opt_adamw_weight_decay");
        p.fixed("opt_gradient_clip_norm");
        let raw = g;
        let g = g.max(1);
        let skip = (0.0026 * g as f64 + 12.0).floor() as u64;
        p.finish(raw, EvalSchedule::every_skipping(round_up(18432, g), skip))
    }
}

/// `deepseekv3_671b`: global batch size ≥ 15360, learning rate `2.4e-5 × sqrt(gbs / 16384)`,
/// warmup 4 steps, decay `max_steps` − warmup. Target ≤ 3.6; first evaluation at
/// `gbs × floor(42 + 24576 / gbs)` samples, then every step.
///
///
/// ```
/// use mllog_core::presets::{Deepseekv3_671b, PresetError};
/// use mllog_core::{Division, Ruleset, Value};
///
/// let p = Deepseekv3_671b::default().preset(Division::Closed, Ruleset::V6_1_0).unwrap();
/// assert_eq!(p.get("opt_base_learning_rate"), Some(&Value::Float(2.4e-5))); // at gbs 16384
/// assert_eq!(p.eval_schedule().first, 16384 * 43); // gbs × floor(42 + 24576 / gbs)
/// assert_eq!(p.eval_schedule().every, 16384);
///
/// let small = Deepseekv3_671b { global_batch_size: 8192, ..Default::default() };
/// let err = small.preset(Division::Closed, Ruleset::V6_1_0).unwrap_err();
/// assert!(matches!(err, PresetError::Invalid { key: "global_batch_size", .. }), "{err}");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Deepseekv3_671b {
    /// `global_batch_size` (default 16384; the rules require ≥ 15360).
    pub global_batch_size: u64,
    /// `gradient_accumulation_steps` (default 256).
    pub gradient_accumulation_steps: u64,
    /// `max_steps` (default 12000; decay steps = this − warmup, which the closed rules require
    /// to be 12000 − warmup).
    pub max_steps: u64,
    /// `train_samples` (default: `max_steps` × batch size, as the reference logs).
    pub train_samples: Option<u64>,
    /// Values for other keys (see [`Self::with_value`]).
    pub overrides: Vec<(&'static str, Value)>,
}

impl Default for Deepseekv3_671b {
    fn default() -> Self {
        Deepseekv3_671b {
            global_batch_size: 16384,
            gradient_accumulation_steps: 256,
            max_steps: 12000,
            train_samples: None,
            overrides: Vec::new(),
        }
    }
}
overrides!(Deepseekv3_671b);

impl Deepseekv3_671b {
    /// Builds and validates the preset.
    pub fn preset(self, division: Division, ruleset: Ruleset) -> Result<Preset, PresetError> {
        let g = self.global_batch_size;
        let gf = g.max(1) as f64;
        let mut p = Draft::new(
            ruleset,
            Benchmark::Deepseekv3_671b,
            division,
            &self.overrides,
        )?;
        p.put("global_batch_size", g);
        p.put(
            "gradient_accumulation_steps",
            self.gradient_accumulation_steps,
        );
        p.fixed("max_sequence_length");
        p.put(
            "train_samples",
            self.train_samples
                .unwrap_or(self.max_steps.saturating_mul(g)),
        );
        p.fixed("eval_samples");
        p.fixed("opt_name");
        p.put("opt_base_learning_rate", 2.4e-05 * (gf / 16384.0).powf(0.5));
        p.put("max_steps", self.max_steps);
        let warmup = p.fixed_f64("opt_learning_rate_warmup_steps").unwrap_or(0.0) as u64;
        p.fixed("opt_learning_rate_warmup_steps");
        p.put(
            "opt_learning_rate_decay_steps",
            self.max_steps.saturating_sub(warmup),
        );
        p.fixed("opt_learning_rate_decay_schedule");
        p.fixed("opt_adamw_beta_1");
        p.fixed("opt_adamw_beta_2");
        p.fixed("opt_adamw_epsilon");
        p.fixed("opt_adamw_weight_decay");
        p.fixed("opt_gradient_clip_norm");
        p.fixed("moe_aux_loss_coeff");
        let raw = g;
        let g = g.max(1);
        let first = g * (42.0 + 24576.0 / g as f64).floor() as u64;
        p.finish(raw, EvalSchedule { first, every: g })
    }
}

/// `flux1`: text-to-image. `evaluation_frequency` = `ceil(262144 / gbs) × gbs` (6.1.0; fixed
/// 262144 in 6.0.0). Target: validation loss ≤ 0.586.
///
///
/// ```
/// use mllog_core::presets::Flux1;
/// use mllog_core::{Division, Ruleset, Value};
///
/// let p = Flux1 { global_batch_size: 1000, ..Default::default() }
///     .preset(Division::Closed, Ruleset::V6_1_0)
///     .unwrap();
/// assert_eq!(p.get("evaluation_frequency"), Some(&Value::Int(263_000))); // ceil(262144 / 1000) × 1000
/// assert_eq!(p.eval_schedule().every, 263_000);
/// assert_eq!(p.target().to_string(), "<= 0.586");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Flux1 {
    /// `global_batch_size` (default 1024).
    pub global_batch_size: u64,
    /// `gradient_accumulation_steps` (default 1).
    pub gradient_accumulation_steps: u64,
    /// `opt_base_learning_rate` (default 1e-4).
    pub base_learning_rate: f64,
    /// `opt_learning_rate_warmup_steps` (default 0).
    pub warmup_steps: u64,
    /// `train_samples` (default 1099776).
    pub train_samples: u64,
    /// `eval_samples` (default 29696).
    pub eval_samples: u64,
    /// Values for other keys (see [`Self::with_value`]).
    pub overrides: Vec<(&'static str, Value)>,
}

impl Default for Flux1 {
    fn default() -> Self {
        Flux1 {
            global_batch_size: 1024,
            gradient_accumulation_steps: 1,
            base_learning_rate: 1e-4,
            warmup_steps: 0,
            train_samples: 1_099_776,
            eval_samples: 29_696,
            overrides: Vec::new(),
        }
    }
}
overrides!(Flux1);

impl Flux1 {
    /// Builds and validates the preset.
    pub fn preset(self, division: Division, ruleset: Ruleset) -> Result<Preset, PresetError> {
        let g = self.global_batch_size;
        let mut p = Draft::new(ruleset, Benchmark::Flux1, division, &self.overrides)?;
        p.put("global_batch_size", g);
        // Fixed in 6.0.0 (262144); derived from the batch size in 6.1.0.
        let every = round_up(262_144, g.max(1));
        match p.fixed_value("evaluation_frequency") {
            Some(v) => p.put("evaluation_frequency", v),
            None => p.put("evaluation_frequency", every),
        }
        p.put(
            "gradient_accumulation_steps",
            self.gradient_accumulation_steps,
        );
        p.put("train_samples", self.train_samples);
        p.put("eval_samples", self.eval_samples);
        p.fixed("opt_name");
        p.fixed("opt_adamw_beta_1");
        p.fixed("opt_adamw_beta_2");
        p.fixed("opt_adamw_epsilon");
        p.fixed("opt_adamw_weight_decay");
        p.put("opt_base_learning_rate", self.base_learning_rate);
        p.put("opt_learning_rate_warmup_steps", self.warmup_steps);
        p.fixed("opt_gradient_clip_norm");
        p.finish(g, EvalSchedule::every(every))
    }
}

/// `qwen35_397b_grpo` (6.1.0): GRPO. Learning rate `1e-6 × sqrt(gbs / 256)`, clip norm
/// `0.125 × sqrt(256 / gbs)`, `num_prompts_per_step` = gbs / 16. Target > 0.69; evaluations
/// on the grid `gbs × ceil(2.5 + 3840 / gbs)`, then every step.
///
///
/// ```
/// use mllog_core::presets::Qwen35_397bGrpo;
/// use mllog_core::run::Direction;
/// use mllog_core::{Division, Ruleset, Value};
///
/// let p = Qwen35_397bGrpo::default().preset(Division::Closed, Ruleset::V6_1_0).unwrap();
/// assert_eq!(p.get("num_prompts_per_step"), Some(&Value::Int(16))); // 256 / 16
/// assert_eq!(p.eval_schedule().first, 256 * 18); // gbs × ceil(2.5 + 3840 / gbs)
/// assert_eq!(p.target().direction, Direction::Above);
/// assert_eq!(p.target().to_string(), "> 0.69");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Qwen35_397bGrpo {
    /// `global_batch_size` (default 256; a multiple of `num_generations_per_prompt`).
    pub global_batch_size: u64,
    /// `gradient_accumulation_steps` (default 1).
    pub gradient_accumulation_steps: u64,
    /// `max_steps` (default 100).
    pub max_steps: u64,
    /// `train_samples` (default: `max_steps` × batch size).
    pub train_samples: Option<u64>,
    /// Values for other keys (see [`Self::with_value`]).
    pub overrides: Vec<(&'static str, Value)>,
}

impl Default for Qwen35_397bGrpo {
    fn default() -> Self {
        Qwen35_397bGrpo {
            global_batch_size: 256,
            gradient_accumulation_steps: 1,
            max_steps: 100,
            train_samples: None,
            overrides: Vec::new(),
        }
    }
}
overrides!(Qwen35_397bGrpo);

impl Qwen35_397bGrpo {
    /// Builds and validates the preset.
    pub fn preset(self, division: Division, ruleset: Ruleset) -> Result<Preset, PresetError> {
        let g = self.global_batch_size;
        let gf = g.max(1) as f64;
        let mut p = Draft::new(
            ruleset,
            Benchmark::Qwen35_397bGrpo,
            division,
            &self.overrides,
        )?;
        p.put("global_batch_size", g);
        p.put(
            "gradient_accumulation_steps",
            self.gradient_accumulation_steps,
        );
        p.fixed("max_sequence_length");
        p.put(
            "train_samples",
            self.train_samples
                .unwrap_or(self.max_steps.saturating_mul(g)),
        );
        p.fixed("eval_samples");
        p.fixed("init_checkpoint_step");
        p.put("max_steps", self.max_steps);
        p.fixed("opt_name");
        p.put("opt_base_learning_rate", 1.0e-6 * (gf / 256.0).powf(0.5));
        p.fixed("opt_adamw_beta_1");
        p.fixed("opt_adamw_beta_2");
        p.fixed("opt_adamw_epsilon");
        p.fixed("opt_adamw_weight_decay");
        p.put("opt_gradient_clip_norm", 0.125 * (256.0 / gf).powf(0.5));
        p.fixed("opt_learning_rate_warmup_steps");
        p.fixed("opt_learning_rate_decay_schedule");
        p.fixed("generation_training_rollout_temperature");
        p.fixed("generation_training_rollout_top_p");
        p.fixed("generation_validation_rollout_temperature");
        p.fixed("generation_validation_rollout_top_p");
        let gens = p
            .fixed_f64("num_generations_per_prompt")
            .unwrap_or(1.0)
            .max(1.0) as u64;
        p.put("num_prompts_per_step", g / gens);
        p.fixed("num_generations_per_prompt");
        let raw = g;
        let g = g.max(1);
        let first = g * (2.5 + 3840.0 / g as f64).ceil() as u64;
        p.finish(raw, EvalSchedule { first, every: g })
    }
}

/// `dlrmv4` (6.1.0): dense Adam plus sparse RowWiseAdagrad at the same learning rate, which
/// must lie in `[0.5e-6, 1.5e-6] × gbs / 8192`. Target AUC ≥ 0.75; evaluations every
/// `eval_every_data_pct` of the training samples, from a first point the rules compute.
///
///
/// ```
/// use mllog_core::presets::{Dlrmv4, PresetError};
/// use mllog_core::{Division, Ruleset, Value};
///
/// let p = Dlrmv4::default().preset(Division::Closed, Ruleset::V6_1_0).unwrap();
/// assert_eq!(p.get("opt_base_learning_rate"), p.get("opt_sparse_base_learning_rate"));
/// assert_eq!(p.get("opt_base_learning_rate"), Some(&Value::Float(1e-6)));
/// assert_eq!(p.target().to_string(), ">= 0.75");
///
/// // Outside [0.5e-6, 1.5e-6] × gbs / 8192.
/// let hot = Dlrmv4 { base_learning_rate: Some(2e-6), ..Default::default() };
/// assert!(matches!(
///     hot.preset(Division::Closed, Ruleset::V6_1_0),
///     Err(PresetError::Invalid { key: "opt_base_learning_rate", .. })
/// ));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Dlrmv4 {
    /// `global_batch_size` (default 8192).
    pub global_batch_size: u64,
    /// `gradient_accumulation_steps` (default 1).
    pub gradient_accumulation_steps: u64,
    /// `opt_base_learning_rate` and `opt_sparse_base_learning_rate` (default: `1e-6 × gbs /
    /// 8192`, the middle of the allowed range).
    pub base_learning_rate: Option<f64>,
    /// Values for other keys (see [`Self::with_value`]).
    pub overrides: Vec<(&'static str, Value)>,
}

impl Default for Dlrmv4 {
    fn default() -> Self {
        Dlrmv4 {
            global_batch_size: 8192,
            gradient_accumulation_steps: 1,
            base_learning_rate: None,
            overrides: Vec::new(),
        }
    }
}
overrides!(Dlrmv4);

impl Dlrmv4 {
    /// Builds and validates the preset.
    pub fn preset(self, division: Division, ruleset: Ruleset) -> Result<Preset, PresetError> {
        let g = self.global_batch_size;
        let gf = g.max(1) as f64;
        let mut p = Draft::new(ruleset, Benchmark::Dlrmv4, division, &self.overrides)?;
        p.put("global_batch_size", g);
        p.put(
            "gradient_accumulation_steps",
            self.gradient_accumulation_steps,
        );
        let train = p.fixed_f64("train_samples").unwrap_or(0.0);
        let pct = p.fixed_f64("eval_every_data_pct").unwrap_or(0.0);
        p.fixed("train_samples");
        p.fixed("eval_samples");
        p.fixed("max_sequence_length");
        p.fixed("opt_name");
        let lr = self.base_learning_rate.unwrap_or(1e-6 * gf / 8192.0);
        p.put("opt_base_learning_rate", lr);
        p.fixed("opt_adam_beta_1");
        p.fixed("opt_adam_beta_2");
        p.fixed("opt_adam_epsilon");
        p.fixed("opt_weight_decay");
        p.fixed("opt_gradient_clip_norm");
        p.fixed("opt_sparse_name");
        p.put("opt_sparse_base_learning_rate", lr);
        p.fixed("opt_learning_rate_warmup_steps");
        p.fixed("opt_learning_rate_warmup_start_lr");
        p.fixed("eval_every_data_pct");
        let raw = g;
        let g = g.max(1);
        let interval = ((pct * train / g as f64).ceil().max(1.0) as u64) * g;
        let first = round_up(
            ((4480.0 * g as f64 + 135_331_840.0) / 3.0).floor() as u64,
            interval,
        );
        p.finish(
            raw,
            EvalSchedule {
                first,
                every: interval,
            },
        )
    }
}

/// `dlrm_dcnv2` (rulesets up to 6.0.0): Adagrad without decay or warmup. Target AUC ≥ 0.80275,
/// reported with `epoch_num`; evaluation every 0.05 epoch (rounded up to whole steps).
///
///
/// ```
/// use mllog_core::presets::{DlrmDcnv2, EvalProgress};
/// use mllog_core::{Division, Ruleset};
///
/// let p = DlrmDcnv2::default().preset(Division::Closed, Ruleset::V6_0_0).unwrap();
/// assert_eq!(p.progress(), EvalProgress::EpochNum { samples_per_epoch: 4_195_197_692 });
/// assert_eq!(p.eval_schedule().every, 209_793_024); // 0.05 epoch, rounded up to whole steps
/// assert_eq!(p.target().to_string(), ">= 0.80275");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct DlrmDcnv2 {
    /// `global_batch_size` (default 55296).
    pub global_batch_size: u64,
    /// `gradient_accumulation_steps` (default 1).
    pub gradient_accumulation_steps: u64,
    /// `opt_base_learning_rate` (default 0.004).
    pub base_learning_rate: f64,
    /// `train_samples`, one epoch (default 4195197692, Criteo 1TB).
    pub train_samples: u64,
    /// Values for other keys (see [`Self::with_value`]).
    pub overrides: Vec<(&'static str, Value)>,
}

impl Default for DlrmDcnv2 {
    fn default() -> Self {
        DlrmDcnv2 {
            global_batch_size: 55296,
            gradient_accumulation_steps: 1,
            base_learning_rate: 0.004,
            train_samples: 4_195_197_692,
            overrides: Vec::new(),
        }
    }
}
overrides!(DlrmDcnv2);

impl DlrmDcnv2 {
    /// Builds and validates the preset.
    pub fn preset(self, division: Division, ruleset: Ruleset) -> Result<Preset, PresetError> {
        let g = self.global_batch_size;
        let mut p = Draft::new(ruleset, Benchmark::DlrmDcnv2, division, &self.overrides)?;
        p.put("global_batch_size", g);
        p.put(
            "gradient_accumulation_steps",
            self.gradient_accumulation_steps,
        );
        p.put("train_samples", self.train_samples);
        p.fixed("eval_samples");
        p.fixed("opt_name");
        p.put("opt_base_learning_rate", self.base_learning_rate);
        p.fixed("opt_adagrad_learning_rate_decay");
        p.fixed("opt_weight_decay");
        p.fixed("opt_adagrad_initial_accumulator_value");
        p.fixed("opt_adagrad_epsilon");
        p.fixed("opt_learning_rate_warmup_steps");
        p.fixed("opt_learning_rate_decay_start_step");
        p.fixed("opt_learning_rate_decay_steps");
        let raw = g;
        let g = g.max(1);
        let every = ((0.05 * self.train_samples as f64 / g as f64).ceil() as u64).max(1) * g;
        p.finish(raw, EvalSchedule::every(every))
    }
}
