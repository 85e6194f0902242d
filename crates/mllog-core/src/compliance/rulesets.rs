//! The training rulesets 5.0.0, 5.1.0, 6.0.0 and 6.1.0, mirrored from the YAML files of
//! mlperf-logging 4.1.68 (`mlperf_logging/compliance_checker/training_X.Y.Z/`).

use std::sync::OnceLock;

use super::model::*;
use super::py::{contains, item, meta_contains, meta_item, num, py_eq, py_int, py_num};
use crate::keys::Benchmark;
use crate::record::Value;

/// All rule files of one ruleset.
///
/// The official checker's YAML files as Rust data ([`rules`] builds each set once): one
/// [`RuleFile`] per file, each a list of [`KeyRule`](super::KeyRule)s with a requirement
/// ([`Req`](super::Req)) and checks ([`Check`](super::Check)). The checker runs them; the
/// presets and the CLI read them, e.g. for the value a closed benchmark requires
/// ([`required_value`]) or its convergence target ([`target()`]).
///
/// ```
/// use mllog_core::compliance::{required_value, rules, target, Division, Lit, Req, Ruleset};
/// use mllog_core::Benchmark;
///
/// let set = rules(Ruleset::V6_1_0);
/// assert!(set.allows(Benchmark::Llama2_70bLora) && !set.allows(Benchmark::Llama31_405b));
/// let file = set.benchmark_file(Division::Closed, Benchmark::Llama2_70bLora).unwrap();
/// assert_eq!(file.name, "training_6.1.0/closed_llama2_70b_lora.yaml");
/// assert_eq!(file.rule("lora_rank").unwrap().req, Some(Req::ExactlyOne));
/// assert_eq!(required_value(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, "lora_rank"), Some(Lit::Int(16)));
///
/// let goal = target(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// assert_eq!(goal.key, "eval_accuracy");
/// assert!(!goal.higher_is_better && goal.range.unwrap().contains(0.92));
/// ```
#[derive(Debug)]
pub struct RulesetFiles {
    /// The version.
    pub ruleset: Ruleset,
    /// `common.yaml`
    pub common: RuleFile,
    /// `closed_common.yaml`
    pub closed_common: RuleFile,
    /// `open_common.yaml`
    pub open_common: RuleFile,
    /// `closed_<benchmark>.yaml` for every allowed benchmark.
    pub closed: Vec<(Benchmark, RuleFile)>,
    /// `open_<benchmark>.yaml` for every allowed benchmark.
    pub open: Vec<(Benchmark, RuleFile)>,
    /// Keys that any file of this ruleset has a rule for.
    pub(crate) all_keys: Vec<&'static str>,
}

impl RulesetFiles {
    /// The benchmarks `submission_benchmark` may name (`closed_common.yaml`'s list).
    pub fn benchmarks(&self) -> Vec<Benchmark> {
        self.closed.iter().map(|(b, _)| *b).collect()
    }

    /// Whether `benchmark` is allowed.
    pub fn allows(&self, benchmark: Benchmark) -> bool {
        self.closed.iter().any(|(b, _)| *b == benchmark)
    }

    /// The division file.
    pub fn division_file(&self, division: Division) -> &RuleFile {
        match division {
            Division::Closed => &self.closed_common,
            Division::Open => &self.open_common,
        }
    }

    /// The benchmark file for a division, if the benchmark is allowed.
    pub fn benchmark_file(&self, division: Division, benchmark: Benchmark) -> Option<&RuleFile> {
        let list = match division {
            Division::Closed => &self.closed,
            Division::Open => &self.open,
        };
        list.iter().find(|(b, _)| *b == benchmark).map(|(_, f)| f)
    }

    /// Every rule file, common first.
    pub fn files(&self) -> impl Iterator<Item = &RuleFile> {
        [&self.common, &self.closed_common, &self.open_common]
            .into_iter()
            .chain(self.closed.iter().map(|(_, f)| f))
            .chain(self.open.iter().map(|(_, f)| f))
    }
}

/// The rules of a ruleset (built once).
pub fn rules(ruleset: Ruleset) -> &'static RulesetFiles {
    static SETS: [OnceLock<RulesetFiles>; 4] = [
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
        OnceLock::new(),
    ];
    let i = Ruleset::ALL.iter().position(|r| *r == ruleset).unwrap_or(3);
    SETS[i].get_or_init(|| build(ruleset))
}

/// The constant the closed division requires for `key` of `benchmark` under `ruleset`
/// (an `Equals` check in `closed_<benchmark>.yaml`, else in the common files), e.g.
/// `lora_rank` → `16`, `opt_adamw_beta_2` → `0.95`.
pub fn required_value(ruleset: Ruleset, benchmark: Benchmark, key: &str) -> Option<Lit> {
    let set = rules(ruleset);
    let files = [
        set.benchmark_file(Division::Closed, benchmark),
        Some(&set.closed_common),
        Some(&set.common),
    ];
    files.into_iter().flatten().find_map(|f| {
        f.rule(key)?.checks.iter().find_map(|c| match c {
            Check::Equals(l) => Some(*l),
            _ => None,
        })
    })
}

/// The convergence target of a benchmark: which key, and the range one occurrence must reach
/// (from [`target()`]; see the [`RulesetFiles`] example).
///
/// The presets and `mllog summary` read it to know when a run has converged.
///
/// ```
/// use mllog_core::compliance::{target, Division, Ruleset};
/// use mllog_core::Benchmark;
///
/// let t = target(Ruleset::V6_1_0, Benchmark::Dlrmv4, Division::Closed).unwrap();
/// assert_eq!(t.key, "eval_accuracy");
/// assert!(t.higher_is_better); // AUC: the range is bounded below
/// let range = t.range.unwrap();
/// assert!(range.contains(0.8) && !range.contains(0.7));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RuleTarget {
    /// Usually `eval_accuracy` (`averaged_validation_loss` for open flux1,
    /// `aggregated_eval_accuracy` for stable diffusion).
    pub key: &'static str,
    /// The range (`None` for stable diffusion, whose target is FID and CLIP together).
    pub range: Option<ValueRange>,
    /// Whether larger values are better (the range is bounded below by the target).
    pub higher_is_better: bool,
}

/// The target of `benchmark` in `division` under `ruleset`, from its `ATLEAST_ONE_CHECK`.
pub fn target(ruleset: Ruleset, benchmark: Benchmark, division: Division) -> Option<RuleTarget> {
    let file = rules(ruleset).benchmark_file(division, benchmark)?;
    file.keys.iter().find_map(|k| {
        let c = k.atleast_one?;
        Some(match c {
            Check::Within(iv) => RuleTarget {
                key: k.name,
                range: Some(iv),
                higher_is_better: iv.min.is_some_and(|b| b.value > 0.0),
            },
            _ => RuleTarget {
                key: k.name,
                range: None,
                higher_is_better: false,
            },
        })
    })
}

// ---- builders --------------------------------------------------------------------------------

fn one(name: &'static str) -> KeyRule {
    KeyRule::new(name).req(Req::ExactlyOne)
}
fn eq(name: &'static str, l: Lit) -> KeyRule {
    one(name).check(Check::Equals(l))
}
fn f(x: f64) -> Lit {
    Lit::Float(x)
}
fn i(x: i64) -> Lit {
    Lit::Int(x)
}
fn s(x: &'static str) -> Lit {
    Lit::Str(x)
}
const fn incl(value: f64) -> Option<Bound> {
    Some(Bound {
        value,
        inclusive: true,
    })
}
const fn excl(value: f64) -> Option<Bound> {
    Some(Bound {
        value,
        inclusive: false,
    })
}
fn within(min: Option<Bound>, max: Option<Bound>) -> Check {
    Check::Within(ValueRange { min, max })
}
fn gt(x: f64) -> Check {
    Check::Compare(Cmp::Gt, x)
}
fn ge(x: f64) -> Check {
    Check::Compare(Cmp::Ge, x)
}
/// `eval_accuracy`: AT_LEAST_ONE, metadata field required, target range.
fn eval_acc(meta: &'static str, min: Option<Bound>, max: Option<Bound>) -> KeyRule {
    KeyRule::new("eval_accuracy")
        .req(Req::AtLeastOne)
        .check(Check::MetaHas(meta))
        .atleast(within(min, max))
}
fn positive_int() -> Check {
    Check::Integer(excl(0.0))
}

fn file(r: Ruleset, scope: Scope, keys: Vec<KeyRule>) -> RuleFile {
    let name = match scope {
        Scope::Common => "common".to_string(),
        Scope::Division(d) => format!("{}_common", d.as_str()),
        Scope::Benchmark(d, b) => format!("{}_{b}", d.as_str()),
    };
    RuleFile {
        name: format!("training_{r}/{name}.yaml"),
        scope,
        begin: Vec::new(),
        keys,
        aggregate_eval: false,
    }
}

fn build(r: Ruleset) -> RulesetFiles {
    use Benchmark as B;
    let allowed: &[Benchmark] = match r {
        Ruleset::V5_0_0 => &[
            B::Retinanet,
            B::StableDiffusion,
            B::DlrmDcnv2,
            B::Bert,
            B::Rgat,
            B::Llama2_70bLora,
            B::Llama31_405b,
        ],
        Ruleset::V5_1_0 => &[
            B::Retinanet,
            B::Flux1,
            B::DlrmDcnv2,
            B::Llama31_8b,
            B::Rgat,
            B::Llama2_70bLora,
            B::Llama31_405b,
        ],
        Ruleset::V6_0_0 => &[
            B::Flux1,
            B::DlrmDcnv2,
            B::Llama31_8b,
            B::Llama2_70bLora,
            B::Llama31_405b,
            B::GptOss20b,
            B::Deepseekv3_671b,
        ],
        Ruleset::V6_1_0 => &[
            B::Flux1,
            B::Llama31_8b,
            B::Llama2_70bLora,
            B::GptOss20b,
            B::Deepseekv3_671b,
            B::Qwen35_397bGrpo,
            B::Dlrmv4,
        ],
    };
    let names: &'static [&'static str] = match r {
        Ruleset::V5_0_0 => &[
            "retinanet",
            "stable_diffusion",
            "dlrm_dcnv2",
            "bert",
            "rgat",
            "llama2_70b_lora",
            "llama31_405b",
        ],
        Ruleset::V5_1_0 => &[
            "retinanet",
            "flux1",
            "dlrm_dcnv2",
            "llama31_8b",
            "rgat",
            "llama2_70b_lora",
            "llama31_405b",
        ],
        Ruleset::V6_0_0 => &[
            "flux1",
            "dlrm_dcnv2",
            "llama31_8b",
            "llama2_70b_lora",
            "llama31_405b",
            "gpt_oss_20b",
            "deepseekv3_671b",
        ],
        Ruleset::V6_1_0 => &[
            "flux1",
            "llama31_8b",
            "llama2_70b_lora",
            "gpt_oss_20b",
            "deepseekv3_671b",
            "qwen35_397b_grpo",
            "dlrmv4",
        ],
    };
    let bench_key = |_: Division| {
        KeyRule::new("submission_benchmark")
            .req(Req::ExactlyOne)
            .check(Check::OneOf(names))
            .post(Post::EnqueueBenchmark)
    };
    let closed_common = file(
        r,
        Scope::Division(Division::Closed),
        vec![
            bench_key(Division::Closed),
            one("gradient_accumulation_steps").check(gt(0.0)),
        ],
    );
    let open_common = file(
        r,
        Scope::Division(Division::Open),
        vec![bench_key(Division::Open)],
    );
    let closed = allowed
        .iter()
        .map(|&b| {
            (
                b,
                file(r, Scope::Benchmark(Division::Closed, b), Vec::new()),
            )
        })
        .collect();
    let open = allowed
        .iter()
        .map(|&b| (b, file(r, Scope::Benchmark(Division::Open, b), Vec::new())))
        .collect();
    let mut set = RulesetFiles {
        ruleset: r,
        common: common(r),
        closed_common,
        open_common,
        closed,
        open,
        all_keys: Vec::new(),
    };
    for (b, fl) in &mut set.closed {
        closed_bench(r, *b, fl);
    }
    for (b, fl) in &mut set.open {
        open_bench(r, *b, fl);
    }
    let mut keys: Vec<&'static str> = set
        .files()
        .flat_map(|f| f.keys.iter().map(|k| k.name))
        .collect();
    keys.push("eval_accuracy");
    keys.sort_unstable();
    keys.dedup();
    set.all_keys = keys;
    set
}

const PRECISIONS_61: &[&str] = &[
    "fp64",
    "fp32",
    "tf32",
    "fp16",
    "fp8",
    "mxfp6",
    "nvfp4",
    "mxfp4",
    "bfloat16",
    "Graphcore FLOAT 16.16",
    "int8",
    "uint8",
    "int4",
    "uint4",
];
const PRECISIONS_60: &[&str] = &[
    "fp64",
    "fp32",
    "tf32",
    "fp16",
    "fp8",
    "nvfp4",
    "mxfp4",
    "bfloat16",
    "Graphcore FLOAT 16.16",
    "int8",
    "uint8",
    "int4",
    "uint4",
];

/// The keys 6.1.0 (4.1.68) made mandatory and 6.0.0 has as optional.
pub const DISCLOSURE_KEYS: [&str; 9] = [
    "lowest_numerical_precision_in_linear",
    "lowest_numerical_precision_in_attn",
    "lowest_numerical_precision_in_comm",
    "tensor_parallelism",
    "pipeline_parallelism",
    "context_parallelism",
    "expert_parallelism",
    "micro_batch_size",
    "config_filename",
];

fn init_time(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    Ok(l.time_ms - s.num("first_init_start")? < s.num("compile_time_mins")? * 60.0 * 1e3)
}
fn block_first_epoch(l: &Line<'_>, _: &State) -> Result<bool, ExecError> {
    if meta_contains(l.metadata, "epoch_count")? {
        meta_contains(l.metadata, "first_epoch_num")
    } else {
        Ok(true)
    }
}
fn block_epoch_count(l: &Line<'_>, _: &State) -> Result<bool, ExecError> {
    if meta_contains(l.metadata, "epoch_count")? {
        Ok(num(meta_item(l.metadata, "epoch_count")?.as_ref())? > 0.0)
    } else {
        Ok(true)
    }
}
fn block_samples(l: &Line<'_>, _: &State) -> Result<bool, ExecError> {
    if meta_contains(l.metadata, "samples_count")? {
        Ok(num(meta_item(l.metadata, "samples_count")?.as_ref())? >= 0.0)
    } else {
        Ok(true)
    }
}

fn common(r: Ruleset) -> RuleFile {
    let mut keys = Vec::new();
    if r != Ruleset::V5_0_0 {
        keys.push(one("submission_org").check(Check::NotEmpty));
        keys.push(one("submission_platform").check(Check::NotEmpty));
    }
    keys.push(
        one("submission_division")
            .check(Check::OneOf(&["closed", "open"]))
            .post(Post::EnqueueDivision),
    );
    keys.push(
        KeyRule::new("cache_clear")
            .req(Req::AtLeastOne)
            .check(Check::Custom(Custom {
                code: "'value' in v",
                words: "must have a value",
                f: |_, _| Ok(true),
            })),
    );
    keys.push(
        KeyRule::new("init_start")
            .req(Req::AtLeastOne)
            .check(Check::StateIs("init_stopped", false))
            .check(Check::StateIs("run_started", false))
            .post(Post::SetTrue("init_started"))
            .post(Post::MinTimestamp("first_init_start")),
    );
    keys.push(
        one("init_stop")
            .check(Check::StateIs("init_started", true))
            .check(Check::StateIs("run_started", false))
            .check(Check::Custom(Custom {
                code: "ll.timestamp - s['first_init_start'] < (s['compile_time_mins']*60*1e3)",
                words: "must come within the init time limit (30 min closed, 240 min open) of the first `init_start`",
                f: init_time,
            }))
            .post(Post::SetTrue("init_stopped")),
    );
    keys.push(
        one("run_start")
            .check(Check::StateIs("init_stopped", true))
            .post(Post::SetTrue("run_started")),
    );
    keys.push(
        one("run_stop")
            .check(Check::StateIs("run_started", true))
            .check(Check::MetaHas("status"))
            .post(Post::SetTrue("run_stopped")),
    );
    keys.push(
        KeyRule::new("block_start")
            .req(Req::AtLeastOneOr(&["epoch_start"]))
            .check(Check::StateIs("run_started", true))
            .check(Check::MetaHasAny(&["epoch_count", "samples_count"]))
            .check(Check::Custom(Custom {
                code: "'first_epoch_num' in v['metadata'] if 'epoch_count' in v['metadata'] else True",
                words: "needs metadata `first_epoch_num` when it has `epoch_count`",
                f: block_first_epoch,
            }))
            .check(Check::Custom(Custom {
                code: "v['metadata']['epoch_count'] > 0 if 'epoch_count' in v['metadata'] else True",
                words: "needs metadata `epoch_count` > 0",
                f: block_epoch_count,
            }))
            .check(Check::Custom(Custom {
                code: "v['metadata']['samples_count'] >= 0 if 'samples_count' in v['metadata'] else True",
                words: "needs metadata `samples_count` >= 0",
                f: block_samples,
            })),
    );
    keys.push(
        KeyRule::new("block_stop")
            .req(Req::AtLeastOneOr(&["epoch_stop"]))
            .check(Check::MetaHasAny(&["first_epoch_num", "samples_count"])),
    );
    let epoch_or_samples = Check::MetaHasAny(&["epoch_num", "samples_count"]);
    for (k, alt) in [
        ("epoch_start", &["block_start"]),
        ("epoch_stop", &["block_stop"]),
        ("eval_start", &["block_start"]),
        ("eval_stop", &["block_stop"]),
    ] {
        keys.push(
            KeyRule::new(k)
                .req(Req::AtLeastOneOr(alt))
                .check(epoch_or_samples),
        );
    }
    keys.push(
        KeyRule::new("eval_accuracy")
            .req(Req::AtLeastOne)
            .check(epoch_or_samples),
    );
    keys.push(one("train_samples").check(Check::NotEmpty));
    keys.push(one("eval_samples").check(Check::NotEmpty));
    match r {
        Ruleset::V6_1_0 => {
            for k in &DISCLOSURE_KEYS[..3] {
                keys.push(one(k).check(Check::OneOf(PRECISIONS_61)));
            }
            for k in &DISCLOSURE_KEYS[3..8] {
                keys.push(one(k).check(Check::Integer(incl(1.0))));
            }
            keys.push(one("config_filename").check(Check::NotEmpty));
        }
        Ruleset::V6_0_0 => {
            for k in &DISCLOSURE_KEYS[..3] {
                keys.push(
                    KeyRule::new(k)
                        .req(Req::Optional)
                        .check(Check::OneOf(PRECISIONS_60)),
                );
            }
            for k in &DISCLOSURE_KEYS[3..8] {
                keys.push(
                    KeyRule::new(k)
                        .req(Req::Optional)
                        .check(Check::Integer(None)),
                );
            }
            keys.push(KeyRule::new("config_filename").req(Req::Optional));
        }
        _ => {}
    }
    let mut fl = file(r, Scope::Common, keys);
    fl.begin = vec![
        ("init_started", Value::Bool(false)),
        ("init_stopped", Value::Bool(false)),
        ("run_started", Value::Bool(false)),
        ("run_stopped", Value::Bool(false)),
        ("in_epoch", Value::Bool(false)),
        ("last_epoch", Value::Int(0)),
        ("in_block", Value::Bool(false)),
        ("block_first_epoch", Value::Int(-1)),
        ("first_init_start", Value::Float(9e99)),
        ("compile_time_mins", Value::Int(0)),
    ];
    fl
}

// ---- custom checks of benchmark files --------------------------------------------------------

fn decay_1_2m(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    let w = s.num("opt_learning_rate_warmup_steps")?;
    Ok(py_num(l.value) == Some(1_200_000.0 - w))
}
fn decay_12000(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    let w = s.num("opt_learning_rate_warmup_steps")?;
    Ok(py_num(l.value) == Some(12000.0 - w))
}
fn ds_lr(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    let g = s.num("global_batch_size")?;
    Ok((num(l.value)? - 2.4e-05 * (g / 16384.0).powf(0.5)).abs() < 1e-9)
}
fn ds_first_eval(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    let g = s.num("global_batch_size")?;
    let sc = py_int(meta_item(l.metadata, "samples_count")?.as_ref())?;
    Ok(sc == g * (42.0 + 24576.0 / g).floor())
}
fn l405_lr(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    let g = s.num("global_batch_size")?;
    Ok(num(l.value)? * 1152.0 == g * 8e-5)
}
fn l405_warmup_post(_: &Line<'_>, s: &mut State) -> Result<(), ExecError> {
    let g = s.num("global_batch_size")?;
    s.set(
        "opt_learning_rate_warmup_steps",
        Value::Float((8000.0 * 1152.0 / g).ceil()),
    );
    Ok(())
}
fn l405_decay(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    let g = s.num("global_batch_size")?;
    let w = s.num("opt_learning_rate_warmup_steps")?;
    Ok(py_num(l.value) == Some((1_200_000.0 * 1152.0 / g).ceil() - w))
}
fn flux_gbs_post(l: &Line<'_>, s: &mut State) -> Result<(), ExecError> {
    let g = num(l.value)?;
    if g == 0.0 {
        return Err(ExecError::Type("division by zero".into()));
    }
    s.set(
        "eval_interval_samples",
        Value::Float((262144.0 / g).ceil() * g),
    );
    Ok(())
}
fn flux_eval_freq(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    let e = s.num("eval_interval_samples")?;
    Ok(py_num(l.value) == Some(e))
}
fn dlrmv4_gbs_post(l: &Line<'_>, s: &mut State) -> Result<(), ExecError> {
    s.set("global_batch_size", l.value.clone());
    let g = num(l.value)?;
    if g == 0.0 {
        return Err(ExecError::Type("division by zero".into()));
    }
    let interval = (0.001 * 2290835423.0 / g).ceil().max(1.0).trunc() * g;
    s.set("eval_interval_samples", Value::Float(interval));
    let first = ((((4480.0 * g + 135331840.0) / 3.0).floor()) / interval)
        .ceil()
        .trunc()
        * interval;
    s.set("first_eval_samples", Value::Float(first));
    s.set("lr_min", Value::Float(0.5e-6 * g / 8192.0));
    s.set("lr_max", Value::Float(1.5e-6 * g / 8192.0));
    Ok(())
}
fn dlrmv4_lr(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    if s.get("lr_min").is_none_or(Value::is_null) {
        return Ok(false);
    }
    let (lo, hi) = (s.num("lr_min")?, s.num("lr_max")?);
    let v = num(l.value)?;
    Ok(lo * (1.0 - 1e-9) <= v && v <= hi * (1.0 + 1e-9))
}
fn dlrmv4_sparse_lr(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    Ok(py_eq(
        l.value,
        s.get("opt_base_learning_rate").unwrap_or(&Value::Null),
    ))
}
fn dlrmv4_eval_grid(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    let sc = num(meta_item(l.metadata, "samples_count")?.as_ref())?;
    let e = s.num("eval_interval_samples")?;
    if e == 0.0 {
        return Err(ExecError::Type("modulo by zero".into()));
    }
    Ok(sc.rem_euclid(e) == 0.0)
}
fn dlrmv4_first_eval(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    let sc = py_int(meta_item(l.metadata, "samples_count")?.as_ref())?;
    Ok(sc == s.num("first_eval_samples")?)
}
fn qwen_gbs_post(l: &Line<'_>, s: &mut State) -> Result<(), ExecError> {
    s.set("global_batch_size", l.value.clone());
    let g = num(l.value)?;
    s.set(
        "learning_rate",
        Value::Float(1.0e-6 * (g / 256.0).powf(0.5)),
    );
    if g == 0.0 {
        return Err(ExecError::Type("division by zero".into()));
    }
    let start = g * (2.5 + 3840.0 / g).ceil();
    s.set("validation_start_samples", Value::Float(start));
    s.set("next_validation_samples", Value::Float(start));
    Ok(())
}
fn qwen_lr(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    Ok((num(l.value)? - s.num("learning_rate")?).abs() < 1e-9)
}
fn qwen_clip(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    let g = s.num("global_batch_size")?;
    if g == 0.0 {
        return Err(ExecError::Type("division by zero".into()));
    }
    Ok((num(l.value)? - 0.125 * (256.0 / g).powf(0.5)).abs() < 1e-9)
}
fn qwen_gens(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    let g = s.num("global_batch_size")?;
    let p = s.num("num_prompts_per_step")?;
    Ok(py_num(l.value).is_some_and(|v| g == p * v))
}
fn qwen_grid(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    let sc = meta_item(l.metadata, "samples_count")?;
    Ok(py_eq(
        &sc,
        s.get("next_validation_samples").unwrap_or(&Value::Null),
    ))
}
fn qwen_eval_post(l: &Line<'_>, s: &mut State) -> Result<(), ExecError> {
    let sc = meta_item(l.metadata, "samples_count")?;
    if py_eq(
        &sc,
        s.get("next_validation_samples").unwrap_or(&Value::Null),
    ) {
        let next = s.num("next_validation_samples")? + s.num("global_batch_size")?;
        s.set("next_validation_samples", Value::Float(next));
    }
    Ok(())
}
fn sd_fid_clip(
    min_clip: f64,
    max_fid: f64,
) -> impl Fn(&Line<'_>, &State) -> Result<bool, ExecError> {
    move |l, _| {
        let get = |k: &str| item(l.value, k);
        let fid = num(get("FID")?)?;
        if !(0.0 <= fid && fid <= max_fid) {
            return Ok(false);
        }
        let clip = num(get("CLIP")?)?;
        Ok(min_clip <= clip && clip <= 1.0)
    }
}
fn sd_closed_target(l: &Line<'_>, s: &State) -> Result<bool, ExecError> {
    sd_fid_clip(0.15, 90.0)(l, s)
}
fn sd_open_target(l: &Line<'_>, _: &State) -> Result<bool, ExecError> {
    let get = |k: &str| item(l.value, k);
    if num(get("FID")?)? < 0.0 {
        return Ok(false);
    }
    Ok(num(get("CLIP")?)? <= 1.0)
}
fn value_has(k: &'static str) -> Check {
    Check::Custom(Custom {
        code: match k {
            "FID" => "'FID' in v['value']",
            "CLIP" => "'CLIP' in v['value']",
            _ => "'samples_count' in v['value']",
        },
        words: match k {
            "FID" => "needs an `FID` metric",
            "CLIP" => "needs a `CLIP` metric",
            _ => "needs `samples_count`",
        },
        f: match k {
            "FID" => |l, _| contains(l.value, "FID"),
            "CLIP" => |l, _| contains(l.value, "CLIP"),
            _ => |l, _| contains(l.value, "samples_count"),
        },
    })
}

fn adamw(b2: f64, eps: f64, wd: f64) -> Vec<KeyRule> {
    vec![
        eq("opt_adamw_beta_1", f(0.9)),
        eq("opt_adamw_beta_2", f(b2)),
        eq("opt_adamw_epsilon", f(eps)),
        eq("opt_adamw_weight_decay", f(wd)),
    ]
}

fn llm_8b_like(target: f64, r: Ruleset) -> Vec<KeyRule> {
    let _ = r;
    let mut k = vec![
        one("global_batch_size").post(Post::Store("global_batch_size")),
        eq("max_sequence_length", i(8192)),
        eq("opt_name", s("adamw")),
        one("opt_base_learning_rate"),
        one("opt_end_learning_rate"),
        one("opt_learning_rate_warmup_steps").post(Post::Store("opt_learning_rate_warmup_steps")),
        one("opt_learning_rate_decay_steps").check(Check::Custom(Custom {
            code: "v['value'] == 1_200_000 - s['opt_learning_rate_warmup_steps']",
            words: "must be 1200000 - opt_learning_rate_warmup_steps",
            f: decay_1_2m,
        })),
        eq(
            "opt_learning_rate_decay_schedule",
            s("cosine with linear warmup"),
        ),
    ];
    k.extend(adamw(0.95, 1e-05, 0.1));
    k.extend([
        eq("opt_gradient_clip_norm", f(1.0)),
        one("gradient_accumulation_steps").check(gt(0.0)),
        eq("eval_samples", i(1024)),
        eval_acc("samples_count", excl(0.0), incl(target)),
        eq("max_steps", i(1200000)),
    ]);
    k
}

fn closed_bench(r: Ruleset, b: Benchmark, fl: &mut RuleFile) {
    use Benchmark as B;
    fl.keys = match b {
        B::Llama2_70bLora => vec![
            one("global_batch_size").post(Post::Store("global_batch_size")),
            one("opt_base_learning_rate"),
            one("opt_learning_rate_training_steps"),
            one("opt_gradient_clip_norm"),
            one("opt_adamw_weight_decay"),
            one("gradient_accumulation_steps"),
            one("lora_alpha"),
            eq("lora_rank", i(16)),
            eval_acc("samples_count", excl(0.0), incl(0.925)),
        ],
        B::Llama31_8b => llm_8b_like(3.3, r),
        B::GptOss20b => llm_8b_like(3.34, r),
        B::Deepseekv3_671b => {
            let mut k = vec![
                one("global_batch_size").check(ge(15360.0)).post(Post::Store("global_batch_size")),
                eq("max_sequence_length", i(4096)),
                eq("opt_name", s("adamw")),
                one("opt_base_learning_rate").check(Check::Custom(Custom {
                    code: "abs(v['value'] - 2.4e-05 * (s['global_batch_size'] / 16384) ** 0.5) < 1e-9",
                    words: "must be 2.4e-05 * sqrt(global_batch_size / 16384)",
                    f: ds_lr,
                })),
                one("max_steps"),
                eq("opt_learning_rate_warmup_steps", i(4)).post(Post::Store("opt_learning_rate_warmup_steps")),
                one("opt_learning_rate_decay_steps").check(Check::Custom(Custom {
                    code: "v['value'] == 12000 - s['opt_learning_rate_warmup_steps']",
                    words: "must be 12000 - opt_learning_rate_warmup_steps",
                    f: decay_12000,
                })),
                eq("opt_learning_rate_decay_schedule", s("cosine with linear warmup")),
            ];
            k.extend(adamw(0.95, 1e-08, 0.1));
            let mut ev = eval_acc("samples_count", excl(0.0), incl(3.6));
            if r == Ruleset::V6_1_0 {
                ev = ev.first(Check::Custom(Custom {
                    code: "int(v['metadata']['samples_count']) == s['global_batch_size'] * math.floor(42 + 24576 / s['global_batch_size'])",
                    words: "(the first one) must be at samples_count = global_batch_size * floor(42 + 24576 / global_batch_size)",
                    f: ds_first_eval,
                }));
            }
            k.extend([
                eq("opt_gradient_clip_norm", f(1.0)),
                eq("moe_aux_loss_coeff", f(0.01)),
                one("gradient_accumulation_steps").check(gt(0.0)),
                eq("eval_samples", i(1024)),
                ev,
            ]);
            k
        }
        B::Flux1 => {
            let (gbs, freq) = if r == Ruleset::V6_1_0 {
                (
                    KeyRule::new("global_batch_size")
                        .req(Req::AtLeastOne)
                        .check(ge(0.0))
                        .post(Post::Custom(flux_gbs_post)),
                    one("evaluation_frequency").check(Check::Custom(Custom {
                        code: "v['value'] == s['eval_interval_samples']",
                        words: "must be ceil(262144 / global_batch_size) * global_batch_size",
                        f: flux_eval_freq,
                    })),
                )
            } else {
                (
                    KeyRule::new("global_batch_size")
                        .req(Req::AtLeastOne)
                        .check(ge(0.0)),
                    eq("evaluation_frequency", i(262144)),
                )
            };
            let mut k = vec![gbs, freq, eq("opt_name", s("adamw"))];
            k.extend(adamw(0.95, 1e-08, 0.1));
            k.extend([
                one("opt_base_learning_rate").check(ge(0.0)),
                one("opt_learning_rate_warmup_steps").check(ge(0.0)),
                eq("opt_gradient_clip_norm", f(1.0)),
                eval_acc("samples_count", excl(0.0), incl(0.586)),
            ]);
            k
        }
        B::Qwen35_397bGrpo => {
            fl.begin = vec![
                ("global_batch_size", Value::Null),
                ("num_prompts_per_step", Value::Null),
                ("next_validation_samples", Value::Null),
                ("validation_start_samples", Value::Null),
                ("target_accuracy", Value::Float(0.69)),
            ];
            let mut k = vec![
                one("global_batch_size")
                    .check(positive_int())
                    .post(Post::Custom(qwen_gbs_post)),
                eq("max_sequence_length", i(65536)),
                eq("eval_samples", i(251)),
                eq("init_checkpoint_step", i(0)),
                one("max_steps"),
                eq("opt_name", s("adamw")),
                one("opt_base_learning_rate").check(Check::Custom(Custom {
                    code: "abs(v['value'] - s['learning_rate']) < 1e-9",
                    words: "must be 1e-6 * sqrt(global_batch_size / 256)",
                    f: qwen_lr,
                })),
            ];
            k.extend(adamw(0.999, 1e-8, 0.0));
            k.extend([
                one("opt_gradient_clip_norm").check(Check::Custom(Custom {
                    code: "abs(v['value'] - 0.125 * (256 / s['global_batch_size']) ** 0.5) < 1e-9",
                    words: "must be 0.125 * sqrt(256 / global_batch_size)",
                    f: qwen_clip,
                })),
                eq("opt_learning_rate_warmup_steps", i(0)),
                eq("opt_learning_rate_decay_schedule", s("constant")),
                eq("generation_training_rollout_temperature", f(1.0)),
                eq("generation_training_rollout_top_p", f(1.0)),
                eq("generation_validation_rollout_temperature", f(0.1)),
                eq("generation_validation_rollout_top_p", f(0.95)),
                one("num_prompts_per_step").check(positive_int()).post(Post::Store("num_prompts_per_step")),
                eq("num_generations_per_prompt", i(16)).check(Check::Custom(Custom {
                    code: "s['global_batch_size'] == s['num_prompts_per_step'] * v['value']",
                    words: "times num_prompts_per_step must be global_batch_size",
                    f: qwen_gens,
                })),
                KeyRule::new("eval_accuracy")
                    .req(Req::AtLeastOne)
                    .check(Check::MetaHas("samples_count"))
                    .check(Check::Custom(Custom {
                        code: "v['metadata']['samples_count'] == s['next_validation_samples']",
                        words: "must sit on the evaluation grid (samples_count = next validation point)",
                        f: qwen_grid,
                    }))
                    .check(within(incl(0.0), incl(1.0)))
                    .post(Post::Custom(qwen_eval_post))
                    .atleast(within(excl(0.69), None)),
            ]);
            k
        }
        B::Dlrmv4 => {
            fl.begin = vec![
                ("global_batch_size", Value::Null),
                ("eval_interval_samples", Value::Null),
                ("first_eval_samples", Value::Null),
                ("opt_base_learning_rate", Value::Null),
                ("lr_min", Value::Null),
                ("lr_max", Value::Null),
                ("train_samples", Value::Int(2290835423)),
                ("target_accuracy", Value::Float(0.75)),
            ];
            vec![
                one("global_batch_size").check(positive_int()).post(Post::Custom(dlrmv4_gbs_post)),
                eq("train_samples", i(2290835423)),
                eq("eval_samples", i(2058204)),
                eq("max_sequence_length", i(4096)),
                eq("opt_name", s("Adam")),
                one("opt_base_learning_rate")
                    .check(Check::Custom(Custom {
                        code: "s['lr_min'] is not None and s['lr_min'] * (1 - 1e-9) <= v['value'] <= s['lr_max'] * (1 + 1e-9)",
                        words: "must lie in [0.5e-6, 1.5e-6] * global_batch_size / 8192",
                        f: dlrmv4_lr,
                    }))
                    .post(Post::Store("opt_base_learning_rate")),
                eq("opt_adam_beta_1", f(0.95)),
                eq("opt_adam_beta_2", f(0.999)),
                eq("opt_adam_epsilon", f(1e-8)),
                eq("opt_weight_decay", f(0.0)),
                eq("opt_gradient_clip_norm", f(1.0)),
                eq("opt_sparse_name", s("RowWiseAdagrad")),
                one("opt_sparse_base_learning_rate").check(Check::Custom(Custom {
                    code: "v['value'] == s['opt_base_learning_rate']",
                    words: "must equal opt_base_learning_rate",
                    f: dlrmv4_sparse_lr,
                })),
                eq("opt_learning_rate_warmup_steps", i(24000)),
                eq("opt_learning_rate_warmup_start_lr", f(0.0)),
                eq("eval_every_data_pct", f(0.001)),
                KeyRule::new("eval_accuracy")
                    .req(Req::AtLeastOne)
                    .check(Check::MetaHas("samples_count"))
                    .check(Check::Custom(Custom {
                        code: "v['metadata']['samples_count'] % s['eval_interval_samples'] == 0",
                        words: "must sit on the evaluation grid (samples_count a multiple of the eval interval)",
                        f: dlrmv4_eval_grid,
                    }))
                    .check(within(incl(0.0), incl(1.0)))
                    .first(Check::Custom(Custom {
                        code: "int(v['metadata']['samples_count']) == s['first_eval_samples']",
                        words: "(the first one) must be at the first evaluation point",
                        f: dlrmv4_first_eval,
                    }))
                    .atleast(within(incl(0.75), None)),
            ]
        }
        B::Llama31_405b => {
            let mut k = vec![
                one("global_batch_size").post(Post::Store("global_batch_size")),
                eq("max_sequence_length", i(8192)),
                eq("opt_name", s("adamw")),
                one("opt_base_learning_rate").check(Check::Custom(Custom {
                    code: "v['value'] * 1152 == s['global_batch_size'] * 8e-5",
                    words: "must be 8e-5 * global_batch_size / 1152",
                    f: l405_lr,
                })),
                one("opt_end_learning_rate"),
            ];
            if r == Ruleset::V5_0_0 {
                k.extend([
                    one("opt_learning_rate_decay_steps"),
                    one("opt_learning_rate_warmup_steps"),
                ]);
            } else {
                k.extend([
                    one("opt_learning_rate_warmup_steps").post(Post::Custom(l405_warmup_post)),
                    one("opt_learning_rate_decay_steps").check(Check::Custom(Custom {
                        code: "v['value'] == math.ceil(1_200_000 * 1152 / s['global_batch_size'] ) - s['opt_learning_rate_warmup_steps']",
                        words: "must be ceil(1200000 * 1152 / global_batch_size) - ceil(8000 * 1152 / global_batch_size)",
                        f: l405_decay,
                    })),
                ]);
            }
            k.push(eq(
                "opt_learning_rate_decay_schedule",
                s("cosine with linear warmup"),
            ));
            k.extend(adamw(0.95, 1e-05, 0.1));
            k.extend([
                eq("opt_gradient_clip_norm", f(1.0)),
                one("gradient_accumulation_steps").check(gt(0.0)),
                eq("eval_samples", i(5760)),
                eval_acc("samples_count", excl(0.0), incl(5.6)),
                eq("init_checkpoint_step", i(0)),
            ]);
            k
        }
        B::DlrmDcnv2 => vec![
            one("global_batch_size"),
            eq("opt_name", s("adagrad")),
            one("opt_base_learning_rate"),
            eq("opt_adagrad_learning_rate_decay", i(0)),
            eq("opt_weight_decay", i(0)),
            eq("opt_adagrad_initial_accumulator_value", i(0)),
            eq("opt_adagrad_epsilon", f(1e-8)),
            eq("opt_learning_rate_warmup_steps", i(0)),
            eq("opt_learning_rate_decay_start_step", i(0)),
            eq("opt_learning_rate_decay_steps", i(0)),
            eval_acc("epoch_num", incl(0.80275), incl(1.0)),
            eq("eval_samples", i(89137319)),
        ],
        B::Bert => vec![
            one("global_batch_size").post(Post::Store("global_batch_size")),
            one("opt_base_learning_rate"),
            one("opt_lamb_epsilon"),
            one("opt_learning_rate_training_steps"),
            one("opt_learning_rate_warmup_steps"),
            one("num_warmup_steps"),
            one("start_warmup_step"),
            one("opt_lamb_beta_1"),
            one("opt_lamb_beta_2"),
            one("opt_lamb_weight_decay_rate"),
            eval_acc("epoch_num", incl(0.720), excl(1.0)),
        ],
        B::Retinanet => vec![
            one("global_batch_size"),
            eq("opt_name", s("adam")),
            one("opt_base_learning_rate").check(ge(0.0)),
            eq("opt_weight_decay", f(0.0)),
            one("opt_learning_rate_warmup_epochs").check(ge(0.0)),
            one("opt_learning_rate_warmup_factor").check(ge(0.0)),
            eval_acc("epoch_num", incl(0.340), excl(1.0)),
        ],
        B::Rgat => vec![
            one("global_batch_size").check(gt(0.0)),
            eq("opt_name", s("adam")),
            one("opt_base_learning_rate").check(ge(0.0)),
            eval_acc("epoch_num", incl(0.72), excl(1.0)),
        ],
        B::StableDiffusion => {
            fl.aggregate_eval = true;
            let mut k = vec![
                KeyRule::new("global_batch_size")
                    .req(Req::AtLeastOne)
                    .check(ge(0.0)),
                eq("opt_name", s("adamw")),
            ];
            k.extend(adamw(0.999, 1e-08, 0.01));
            k.extend([
                one("opt_base_learning_rate").check(ge(0.0)),
                one("opt_learning_rate_warmup_steps").check(ge(0.0)),
                sd_aggregated(Check::Custom(Custom {
                    code: "(0.0 <= v['value']['FID'] <= 90.0) and (0.15 <= v['value']['CLIP'] <= 1.0)",
                    words: "needs FID in [0, 90] and CLIP in [0.15, 1]",
                    f: sd_closed_target,
                })),
            ]);
            k
        }
        _ => Vec::new(),
    };
}

fn sd_aggregated(target: Check) -> KeyRule {
    KeyRule::new("aggregated_eval_accuracy")
        .req(Req::AtLeast(2))
        .check(value_has("FID"))
        .check(value_has("CLIP"))
        .check(value_has("samples_count"))
        .atleast(target)
}

fn open_bench(r: Ruleset, b: Benchmark, fl: &mut RuleFile) {
    use Benchmark as B;
    let v5 = matches!(r, Ruleset::V5_0_0 | Ruleset::V5_1_0);
    let loose = |meta| vec![eval_acc(meta, None, excl(1.0))];
    fl.keys = match b {
        B::Bert | B::Retinanet | B::Rgat => loose("epoch_num"),
        B::Llama2_70bLora => loose(if v5 { "epoch_num" } else { "samples_count" }),
        B::Llama31_8b => loose(if v5 { "epoch_num" } else { "samples_count" }),
        B::DlrmDcnv2 => vec![eval_acc("epoch_num", None, incl(1.0))],
        B::Flux1 => vec![KeyRule::new("averaged_validation_loss")
            .req(Req::AtLeastOne)
            .check(Check::MetaHas("samples_count"))
            .atleast(within(excl(0.0), incl(0.586)))],
        B::StableDiffusion => {
            fl.aggregate_eval = true;
            vec![sd_aggregated(Check::Custom(Custom {
                code: "v['value']['FID'] >= 0.0 and v['value']['CLIP'] <= 1.0",
                words: "needs FID >= 0 and CLIP <= 1",
                f: sd_open_target,
            }))]
        }
        B::Llama31_405b => {
            let mut k = vec![
                one("global_batch_size").post(Post::Store("global_batch_size")),
                eq("max_sequence_length", i(8192)),
                eq("opt_name", s("adamw")),
            ];
            for n in [
                "opt_base_learning_rate",
                "opt_end_learning_rate",
                "opt_learning_rate_decay_steps",
                "opt_learning_rate_warmup_steps",
                "opt_learning_rate_decay_schedule",
                "opt_adamw_beta_1",
                "opt_adamw_beta_2",
                "opt_adamw_epsilon",
                "opt_adamw_weight_decay",
                "opt_gradient_clip_norm",
            ] {
                k.push(one(n));
            }
            k.extend([
                one("gradient_accumulation_steps").check(gt(0.0)),
                eq("eval_samples", i(5760)),
                eval_acc(
                    if v5 { "epoch_num" } else { "samples_count" },
                    excl(0.0),
                    incl(5.6),
                ),
                eq("init_checkpoint_step", i(0)),
            ]);
            k
        }
        B::GptOss20b => {
            let mut k = vec![
                eval_acc("samples_count", excl(0.0), incl(3.34)),
                eq("max_sequence_length", i(8192)),
                eq("opt_name", s("adamw")),
            ];
            for n in [
                "opt_base_learning_rate",
                "opt_end_learning_rate",
                "opt_learning_rate_warmup_steps",
                "opt_learning_rate_decay_steps",
                "opt_learning_rate_decay_schedule",
                "opt_adamw_beta_1",
                "opt_adamw_beta_2",
                "opt_adamw_epsilon",
                "opt_adamw_weight_decay",
                "opt_gradient_clip_norm",
                "gradient_accumulation_steps",
                "eval_samples",
                "max_steps",
            ] {
                k.push(one(n));
            }
            k
        }
        B::Deepseekv3_671b => {
            let mut k = vec![
                one("global_batch_size")
                    .check(ge(15360.0))
                    .post(Post::Store("global_batch_size")),
                eq("max_sequence_length", i(4096)),
                eq("opt_name", s("adamw")),
            ];
            for n in [
                "max_steps",
                "opt_base_learning_rate",
                "opt_learning_rate_warmup_steps",
                "opt_learning_rate_decay_steps",
                "opt_learning_rate_decay_schedule",
                "opt_adamw_beta_1",
                "opt_adamw_beta_2",
                "opt_adamw_epsilon",
                "opt_adamw_weight_decay",
                "opt_gradient_clip_norm",
                "moe_aux_loss_coeff",
            ] {
                k.push(one(n));
            }
            k.extend([
                one("gradient_accumulation_steps").check(gt(0.0)),
                eq("eval_samples", i(1024)),
                eval_acc("samples_count", excl(0.0), incl(3.6)),
            ]);
            k
        }
        B::Qwen35_397bGrpo => {
            let mut k = vec![
                one("global_batch_size").check(positive_int()),
                eq("max_sequence_length", i(65536)),
                eq("eval_samples", i(251)),
                eq("init_checkpoint_step", i(0)),
                one("max_steps"),
                eq("opt_name", s("adamw")),
            ];
            for n in [
                "opt_base_learning_rate",
                "opt_adamw_beta_1",
                "opt_adamw_beta_2",
                "opt_adamw_epsilon",
                "opt_adamw_weight_decay",
                "opt_gradient_clip_norm",
                "opt_learning_rate_warmup_steps",
                "opt_learning_rate_decay_schedule",
                "generation_training_rollout_temperature",
                "generation_training_rollout_top_p",
                "generation_validation_rollout_temperature",
                "generation_validation_rollout_top_p",
            ] {
                k.push(one(n));
            }
            k.extend([
                one("num_prompts_per_step").check(positive_int()),
                one("num_generations_per_prompt").check(positive_int()),
                KeyRule::new("eval_accuracy")
                    .req(Req::AtLeastOne)
                    .check(Check::MetaHas("samples_count"))
                    .check(within(incl(0.0), incl(1.0)))
                    .atleast(within(excl(0.69), None)),
            ]);
            k
        }
        B::Dlrmv4 => {
            let lr = || {
                Check::Custom(Custom {
                    code: "s.get('lr_min') is not None and s['lr_min'] * (1 - 1e-9) <= v['value'] <= s['lr_max'] * (1 + 1e-9)",
                    words: "must lie in [0.5e-6, 1.5e-6] * global_batch_size / 8192",
                    f: dlrmv4_lr,
                })
            };
            let mut k = vec![
                one("global_batch_size")
                    .check(positive_int())
                    .post(Post::Custom(open_dlrmv4_gbs_post)),
                one("gradient_accumulation_steps").check(positive_int()),
                eq("train_samples", i(2290835423)),
                eq("eval_samples", i(2058204)),
                one("max_sequence_length").check(positive_int()),
                one("opt_name"),
                one("opt_base_learning_rate").check(lr()),
            ];
            for n in [
                "opt_adam_beta_1",
                "opt_adam_beta_2",
                "opt_adam_epsilon",
                "opt_weight_decay",
                "opt_gradient_clip_norm",
                "opt_sparse_name",
            ] {
                k.push(one(n));
            }
            k.push(one("opt_sparse_base_learning_rate").check(lr()));
            for n in [
                "opt_learning_rate_warmup_steps",
                "opt_learning_rate_warmup_start_lr",
                "eval_every_data_pct",
            ] {
                k.push(one(n));
            }
            k.push(
                KeyRule::new("eval_accuracy")
                    .req(Req::AtLeastOne)
                    .check(Check::MetaHas("samples_count"))
                    .check(within(incl(0.0), incl(1.0)))
                    .atleast(within(incl(0.75), None)),
            );
            k
        }
        _ => Vec::new(),
    };
}

fn open_dlrmv4_gbs_post(l: &Line<'_>, s: &mut State) -> Result<(), ExecError> {
    let g = num(l.value)?;
    s.set("lr_min", Value::Float(0.5e-6 * g / 8192.0));
    s.set("lr_max", Value::Float(1.5e-6 * g / 8192.0));
    Ok(())
}
