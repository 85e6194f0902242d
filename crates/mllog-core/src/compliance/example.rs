//! Compliant example logs, generated from the rule data (for tests, docs and presets).

use super::model::*;
use super::rulesets::{rules, target, RulesetFiles};
use crate::keys::Benchmark;
use crate::record::{EventType, Metadata, Record, Value};

/// A typical global batch size for a benchmark (one that satisfies its closed rules).
pub fn example_batch_size(benchmark: Benchmark) -> i64 {
    match benchmark {
        Benchmark::Deepseekv3_671b => 16384,
        Benchmark::Qwen35_397bGrpo => 256,
        Benchmark::Dlrmv4 => 8192,
        Benchmark::Flux1 => 1024,
        Benchmark::Llama31_405b => 1152,
        Benchmark::Llama2_70bLora => 8,
        Benchmark::DlrmDcnv2 => 55296,
        _ => 32,
    }
}

/// Keys logged by the example between `init_start` and `init_stop`, for `benchmark` in
/// `division` under `ruleset`, with values that satisfy the rules, in an order that satisfies
/// the ordering dependencies (`global_batch_size` first, warmup before decay, ...).
pub fn example_hyperparameters(
    ruleset: Ruleset,
    benchmark: Benchmark,
    division: Division,
) -> Option<Vec<(&'static str, Value)>> {
    let set = rules(ruleset);
    let bench = set.benchmark_file(division, benchmark)?;
    let closed = set.benchmark_file(Division::Closed, benchmark)?;
    let gbs = example_batch_size(benchmark);
    let mut keys: Vec<&'static str> = Vec::new();
    let skip = |k: &str| {
        matches!(
            k,
            "eval_accuracy"
                | "aggregated_eval_accuracy"
                | "averaged_validation_loss"
                | "submission_org"
                | "submission_platform"
                | "submission_division"
                | "submission_benchmark"
                | "cache_clear"
                | "init_start"
                | "init_stop"
                | "run_start"
                | "run_stop"
        ) || k.starts_with("block_")
            || k.starts_with("epoch_")
            || k.starts_with("eval_st")
    };
    // Benchmark keys first when they carry state (gbs), then common ones.
    for file in [bench, &set.common, set.division_file(division)] {
        for k in &file.keys {
            if !skip(k.name) && !keys.contains(&k.name) {
                keys.push(k.name);
            }
        }
    }
    Some(
        keys.into_iter()
            .map(|k| {
                (
                    k,
                    value_for(set, ruleset, benchmark, [bench, closed], k, gbs),
                )
            })
            .collect(),
    )
}

fn value_for(
    set: &RulesetFiles,
    ruleset: Ruleset,
    b: Benchmark,
    files: [&RuleFile; 2],
    key: &str,
    gbs: i64,
) -> Value {
    use Benchmark as B;
    let g = gbs as f64;
    let special = match (b, key) {
        (_, "global_batch_size") => Some(Value::Int(gbs as i128)),
        (B::Llama31_8b | B::GptOss20b, "opt_learning_rate_warmup_steps") => Some(Value::Int(128)),
        (B::Llama31_8b | B::GptOss20b, "opt_learning_rate_decay_steps") => {
            Some(Value::Int(1_200_000 - 128))
        }
        (B::Llama31_8b | B::GptOss20b, "opt_base_learning_rate") => Some(Value::Float(0.0008)),
        (B::Llama31_8b | B::GptOss20b, "opt_end_learning_rate") => Some(Value::Float(8e-05)),
        (B::Llama31_405b, "opt_learning_rate_warmup_steps") => {
            Some(Value::Int((8000.0 * 1152.0 / g).ceil() as i128))
        }
        (B::Llama31_405b, "opt_learning_rate_decay_steps") => Some(Value::Int(
            ((1_200_000.0 * 1152.0 / g).ceil() - (8000.0 * 1152.0 / g).ceil()) as i128,
        )),
        (B::Llama31_405b, "opt_base_learning_rate") => Some(Value::Float(g * 8e-5 / 1152.0)),
        (B::Llama31_405b, "opt_end_learning_rate") => Some(Value::Float(8e-7)),
        (B::Deepseekv3_671b, "opt_base_learning_rate") => {
            Some(Value::Float(2.4e-05 * (g / 16384.0).sqrt()))
        }
        (B::Deepseekv3_671b, "opt_learning_rate_decay_steps") => Some(Value::Int(11996)),
        (B::Deepseekv3_671b, "max_steps") => Some(Value::Int(12000)),
        (B::Qwen35_397bGrpo, "opt_base_learning_rate") => {
            Some(Value::Float(1e-6 * (g / 256.0).sqrt()))
        }
        (B::Qwen35_397bGrpo, "opt_gradient_clip_norm") => {
            Some(Value::Float(0.125 * (256.0 / g).sqrt()))
        }
        (B::Qwen35_397bGrpo, "num_prompts_per_step") => Some(Value::Int((gbs / 16) as i128)),
        (B::Qwen35_397bGrpo, "max_steps") => Some(Value::Int(100)),
        (B::Dlrmv4, "opt_base_learning_rate" | "opt_sparse_base_learning_rate") => {
            Some(Value::Float(1e-6 * g / 8192.0))
        }
        (B::Flux1, "evaluation_frequency") => Some(Value::Int(((262144.0 / g).ceil() * g) as i128)),
        (B::Llama2_70bLora, "opt_base_learning_rate") => Some(Value::Float(0.0004)),
        (B::Llama2_70bLora, "opt_gradient_clip_norm") => Some(Value::Float(0.3)),
        (B::Llama2_70bLora, "opt_adamw_weight_decay") => Some(Value::Float(0.0001)),
        (B::Llama2_70bLora, "opt_learning_rate_training_steps") => Some(Value::Int(1024)),
        (B::Llama2_70bLora, "lora_alpha") => Some(Value::Int(32)),
        (_, "train_samples") => None,
        (_, "eval_samples") => None,
        (_, "config_filename") => Some(Value::from("config_example.sh")),
        (_, "submission_status") => Some(Value::from("onprem")),
        _ => None,
    };
    if let Some(v) = special {
        return v;
    }
    let mut all: Vec<&RuleFile> = files.to_vec();
    all.push(&set.common);
    all.push(&set.closed_common);
    for f in &all {
        if let Some(rule) = f.rule(key) {
            for c in &rule.checks {
                match c {
                    Check::Equals(l) => return l.to_value(),
                    Check::OneOf(list) => {
                        return Value::from(if list.contains(&"bfloat16") {
                            "bfloat16"
                        } else {
                            list[0]
                        })
                    }
                    _ => {}
                }
            }
        }
    }
    let _ = ruleset;
    match key {
        "train_samples" => Value::Int(1_000_000),
        "eval_samples" => Value::Int(1024),
        "opt_name" => Value::from("adamw"),
        "opt_learning_rate_decay_schedule" => Value::from("cosine with linear warmup"),
        k if k.contains("beta_1") => Value::Float(0.9),
        k if k.contains("beta_2") => Value::Float(0.95),
        k if k.contains("epsilon") => Value::Float(1e-08),
        k if k.contains("learning_rate") || k.contains("decay") => Value::Float(0.0001),
        _ => Value::Int(1),
    }
}

/// Evaluation points (`samples_count`) for the example's two evaluations.
fn eval_points(ruleset: Ruleset, b: Benchmark, gbs: i64) -> [i64; 2] {
    let g = gbs as f64;
    match b {
        Benchmark::Qwen35_397bGrpo => {
            let start = (g * (2.5 + 3840.0 / g).ceil()) as i64;
            [start, start + gbs]
        }
        Benchmark::Dlrmv4 => {
            let interval = (0.001 * 2290835423.0 / g).ceil().max(1.0) * g;
            let first = ((((4480.0 * g + 135331840.0) / 3.0).floor()) / interval).ceil() * interval;
            [first as i64, (first + interval) as i64]
        }
        Benchmark::Deepseekv3_671b => {
            let first = (g * (42.0 + 24576.0 / g).floor()) as i64;
            [first, first + gbs]
        }
        Benchmark::Flux1 => {
            let f = ((262144.0 / g).ceil() * g) as i64;
            [f, 2 * f]
        }
        _ => {
            let _ = ruleset;
            [gbs * 288, gbs * 336]
        }
    }
}

/// A complete log that the official checker passes (with `--werror`) for `benchmark` in
/// `division` under `ruleset`. Errors when the ruleset does not allow the benchmark.
pub fn example_log(
    ruleset: Ruleset,
    benchmark: Benchmark,
    division: Division,
) -> Result<String, crate::Error> {
    let params = example_hyperparameters(ruleset, benchmark, division).ok_or_else(|| {
        crate::Error::UnknownBenchmark(format!("{benchmark} (ruleset {ruleset})"))
    })?;
    let gbs = example_batch_size(benchmark);
    let mut t: i64 = 1_767_225_600_000;
    let mut lineno: u32 = 100;
    let mut out = String::new();
    let mut emit = |key: &'static str,
                    value: Value,
                    et: EventType,
                    extra: Vec<(&'static str, Value)>,
                    t: i64| {
        let mut md = Metadata::at("/workspace/train/src/mlperf.rs", lineno);
        lineno += 1;
        for (k, v) in extra {
            md.set(k, v);
        }
        let rec = Record::event(key, value)
            .at_millis(t)
            .with_metadata(md)
            .with_event_type(et);
        rec.encode(&mut out);
        out.push('\n');
    };
    use EventType::{IntervalEnd as End, IntervalStart as Start, PointInTime as Point};
    emit("cache_clear", Value::Bool(true), Point, vec![], t);
    emit("init_start", Value::Null, Start, vec![], t);
    emit(
        "submission_benchmark",
        Value::from(benchmark.as_str()),
        Point,
        vec![],
        t,
    );
    emit(
        "submission_org",
        Value::from("ExampleOrg"),
        Point,
        vec![],
        t,
    );
    emit(
        "submission_division",
        Value::from(division.as_str()),
        Point,
        vec![],
        t,
    );
    emit("submission_status", Value::from("onprem"), Point, vec![], t);
    emit(
        "submission_platform",
        Value::from("1xExampleNode-8xGPU"),
        Point,
        vec![],
        t,
    );
    emit("seed", Value::Int(1234), Point, vec![], t);
    for (k, v) in params {
        emit(k, v, Point, vec![], t);
    }
    t += 60_000;
    emit("init_stop", Value::Null, End, vec![], t);
    emit("run_start", Value::Null, Start, vec![], t);
    let tgt = target(ruleset, benchmark, division);
    let acc = match tgt.and_then(|t| t.range) {
        Some(iv) => {
            let lo = iv.min.map(|b| b.value);
            let hi = iv.max.map(|b| b.value);
            let span = match (lo, hi) {
                (Some(l), Some(h)) => h - l,
                _ => 1.0,
            };
            let higher = tgt.is_some_and(|t| t.higher_is_better);
            let x = if higher {
                lo.unwrap_or(0.0) + 0.01 * span
            } else {
                hi.unwrap_or(1.0) - 0.01 * span
            };
            let x = (x * 1e4).round() / 1e4;
            if iv.contains(x) {
                x
            } else {
                (lo.unwrap_or(0.0) + hi.unwrap_or(1.0)) / 2.0
            }
        }
        None => 0.5,
    };
    let mut prev = 0i64;
    let points = eval_points(ruleset, benchmark, gbs);
    for (n, &sc) in points.iter().enumerate() {
        let m = |extra: Vec<(&'static str, Value)>| {
            let mut v = vec![
                ("epoch_num", Value::Int(n as i128)),
                ("samples_count", Value::Int(sc as i128)),
            ];
            v.extend(extra);
            v
        };
        emit(
            "block_start",
            Value::Null,
            Start,
            vec![("samples_count", Value::Int(prev as i128))],
            t,
        );
        t += 100_000;
        emit(
            "block_stop",
            Value::Null,
            End,
            vec![("samples_count", Value::Int(sc as i128))],
            t,
        );
        emit("eval_start", Value::Null, Start, m(vec![]), t);
        t += 10_000;
        match (benchmark, tgt.map(|t| t.key)) {
            (Benchmark::StableDiffusion, _) => {
                emit(
                    "eval_accuracy",
                    Value::Float(80.0 - n as f64),
                    Point,
                    m(vec![("metric", Value::from("FID"))]),
                    t,
                );
                emit(
                    "eval_accuracy",
                    Value::Float(0.2),
                    Point,
                    m(vec![("metric", Value::from("CLIP"))]),
                    t,
                );
            }
            (_, Some("averaged_validation_loss")) => {
                emit(
                    "averaged_validation_loss",
                    Value::Float(acc),
                    Point,
                    m(vec![]),
                    t,
                );
                emit("eval_accuracy", Value::Float(acc), Point, m(vec![]), t);
            }
            _ => emit("eval_accuracy", Value::Float(acc), Point, m(vec![]), t),
        }
        emit("eval_stop", Value::Null, End, m(vec![]), t);
        prev = sc;
    }
    emit(
        "run_stop",
        Value::Float(acc),
        End,
        vec![
            ("samples_count", Value::Int(prev as i128)),
            ("status", Value::from("success")),
        ],
        t,
    );
    Ok(out)
}
