//! Benchmark presets and `mllog dry-run`: every benchmark of 6.0.0 and 6.1.0, closed and open,
//! passes the official checker (`--werror`) and ours; fixed values cannot be changed in the
//! closed division; evaluation points follow the rules; the peers' preset bugs cannot happen.
//!
//! Needs the official checker: `MLLOG_PYTHON` naming a Python with mlperf-logging==4.1.68 (as
//! `scripts/test` sets it).

mod common;

use std::path::{Path, PathBuf};

use mllog_cli::dry_run::{self, DryRun};
use tracing_mllog::compliance::{self, required_value, Ruleset};
use tracing_mllog::presets::{
    Deepseekv3_671b, DlrmDcnv2, Dlrmv4, Flux1, GptOss20b, Llama2_70bLora, Llama31_405b, Llama31_8b,
    Preset, PresetError, Qwen35_397bGrpo,
};
use tracing_mllog::run::Direction;
use tracing_mllog::sink::MemorySink;
use tracing_mllog::{Benchmark, Division, MllogLayer, Output, Value};

const RULESETS: [Ruleset; 2] = [Ruleset::V6_0_0, Ruleset::V6_1_0];
const DIVISIONS: [Division; 2] = [Division::Closed, Division::Open];

/// Builds a preset through the typed struct of `b`, with overrides.
fn build(
    b: Benchmark,
    r: Ruleset,
    d: Division,
    gbs: Option<u64>,
    overrides: &[(&'static str, Value)],
) -> Result<Preset, PresetError> {
    macro_rules! typed {
        ($t:ty) => {{
            let mut p = <$t>::default();
            if let Some(g) = gbs {
                p.global_batch_size = g;
            }
            for (k, v) in overrides {
                p = p.with_value(k, v.clone());
            }
            p.preset(d, r)
        }};
    }
    match b {
        Benchmark::Llama2_70bLora => typed!(Llama2_70bLora),
        Benchmark::Llama31_8b => typed!(Llama31_8b),
        Benchmark::GptOss20b => typed!(GptOss20b),
        Benchmark::Llama31_405b => typed!(Llama31_405b),
        Benchmark::Deepseekv3_671b => typed!(Deepseekv3_671b),
        Benchmark::Flux1 => typed!(Flux1),
        Benchmark::Qwen35_397bGrpo => typed!(Qwen35_397bGrpo),
        Benchmark::Dlrmv4 => typed!(Dlrmv4),
        Benchmark::DlrmDcnv2 => typed!(DlrmDcnv2),
        other => panic!("no preset for {other}"),
    }
}

fn all_cases() -> Vec<(Ruleset, Benchmark, Division)> {
    let mut v = Vec::new();
    for r in RULESETS {
        for b in compliance::rules(r).benchmarks() {
            for d in DIVISIONS {
                v.push((r, b, d));
            }
        }
    }
    v
}

fn opts() -> DryRun {
    DryRun::new("TestOrg", "1xTestNode-8xGPU", "config_test.sh")
}

fn dry(preset: &Preset, dir: &Path) -> (PathBuf, dry_run::DryRunOutcome) {
    let path = dir.join(format!(
        "{}_{}_{}_{}.log",
        preset.benchmark(),
        preset.division().as_str(),
        preset.ruleset(),
        preset.global_batch_size()
    ));
    let out = dry_run::run(preset, &opts(), &path).expect("dry run");
    (path, out)
}

fn records_of(path: &Path) -> Vec<tracing_mllog::Record> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|l| tracing_mllog::record::parse_line(l).ok().flatten())
        .collect()
}

#[test]
fn every_benchmark_of_6_0_and_6_1_dry_runs_to_a_log_both_checkers_pass() {
    let dir = tempfile::tempdir().unwrap();
    let cases = all_cases();
    assert_eq!(cases.len(), 28, "7 benchmarks x 2 divisions x 2 rulesets");
    let mut logs = Vec::new();
    for (r, b, d) in cases {
        assert!(Preset::BENCHMARKS.contains(&b), "{b} has a preset");
        let preset = Preset::for_benchmark(r, b, d, None).unwrap_or_else(|e| panic!("{e}"));
        let (path, out) = dry(&preset, dir.path());
        assert!(
            out.report.passed(true),
            "our checker, {b} {} {r}:\n{}",
            d.as_str(),
            out.report.render_text(&path.display().to_string(), true)
        );
        assert!(out.converged, "{b} {} {r} converges", d.as_str());
        assert!(out.evals >= 2, "a few evaluations before converging");
        logs.push((path, r));
    }
    // The official checker, two at a time (about 1 s per call).
    let python = common::python();
    let _ = python;
    let half = logs.len() / 2;
    let (a, b) = logs.split_at(half);
    std::thread::scope(|s| {
        for part in [a, b] {
            s.spawn(move || {
                for (path, r) in part {
                    let (ok, text) = common::official_check(path, r.as_str(), true);
                    assert!(ok, "official checker --werror, {}:\n{text}", path.display());
                }
            });
        }
    });
}

/// A different value of the same type.
fn changed(v: &Value) -> Value {
    match v {
        Value::Int(i) => Value::Int(i + 1),
        Value::Float(f) if *f == 0.0 => Value::Float(0.5),
        Value::Float(f) => Value::Float(f * 1.5),
        Value::Str(s) => Value::from(format!("{s}_changed")),
        other => panic!("unexpected fixed value {other:?}"),
    }
}

#[test]
fn every_fixed_value_changed_fails_in_closed_and_open_relaxes_it() {
    let mut checked = 0;
    for r in RULESETS {
        for b in compliance::rules(r).benchmarks() {
            let preset = build(b, r, Division::Closed, None, &[]).unwrap();
            let open_file = compliance::rules(r)
                .benchmark_file(Division::Open, b)
                .unwrap();
            for (key, value) in preset.hyperparameters() {
                let Some(fixed) = required_value(r, b, key) else {
                    continue;
                };
                assert_eq!(
                    fixed.to_value(),
                    *value,
                    "{b} {r}: `{key}` is the value the rules fix"
                );
                let bad = changed(value);
                let err = build(b, r, Division::Closed, None, &[(key, bad.clone())])
                    .expect_err(&format!("{b} {r}: `{key}` = {bad} must fail in closed"));
                let msg = err.to_string();
                assert!(
                    msg.contains(&format!("`{key}`"))
                        && msg.contains(&format!("for {b} in the closed division")),
                    "message names key, benchmark and division: {msg}"
                );
                checked += 1;
                // The open division only enforces what the open rules check.
                let open_checks = open_file.rule(key).is_some_and(|k| !k.checks.is_empty());
                let common_checks = [
                    &compliance::rules(r).common,
                    &compliance::rules(r).open_common,
                ]
                .iter()
                .any(|f| f.rule(key).is_some_and(|k| !k.checks.is_empty()));
                if !open_checks && !common_checks {
                    build(b, r, Division::Open, None, &[(key, bad)]).unwrap_or_else(|e| {
                        panic!("{b} {r}: the open rules do not fix `{key}`: {e}")
                    });
                }
            }
        }
    }
    assert!(checked > 80, "fixed values checked: {checked}");
}

#[test]
fn preset_errors_name_the_value_the_benchmark_and_the_rule() {
    let err = Llama31_8b::default()
        .with_value("opt_adamw_beta_2", 0.999)
        .preset(Division::Closed, Ruleset::V6_1_0)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "`opt_adamw_beta_2` must be 0.95 for llama31_8b in the closed division (ruleset 6.1.0), \
         found 0.999"
    );
    let err = Preset::for_benchmark(
        Ruleset::V6_1_0,
        Benchmark::Llama31_405b,
        Division::Closed,
        None,
    )
    .unwrap_err();
    assert!(err
        .to_string()
        .starts_with("benchmark llama31_405b is not part of ruleset 6.1.0"));
    let err = Preset::for_benchmark(
        Ruleset::V6_1_0,
        Benchmark::Deepseekv3_671b,
        Division::Closed,
        Some(8192),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("`global_batch_size` must be >= 15360 for deepseekv3_671b"),
        "{err}"
    );
    let err = Preset::for_benchmark(
        Ruleset::V6_1_0,
        Benchmark::Qwen35_397bGrpo,
        Division::Closed,
        Some(250),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("num_generations_per_prompt"),
        "{err}"
    );
}

fn first_points(b: Benchmark, r: Ruleset, gbs: u64) -> (u64, u64) {
    let p = build(b, r, Division::Closed, Some(gbs), &[]).unwrap_or_else(|e| panic!("{e}"));
    let s = p.eval_schedule();
    (s.first, s.every)
}

#[test]
fn eval_points_follow_the_rules_for_several_batch_sizes() {
    let r = Ruleset::V6_1_0;
    // llama2_70b_lora: every ceil(384/gbs)*gbs, the first floor(0.125*gbs+2) skipped.
    for g in [8u64, 16, 24, 32, 64, 100] {
        let every = 384u64.div_ceil(g) * g;
        let skip = (0.125 * g as f64 + 2.0).floor() as u64;
        assert_eq!(
            first_points(Benchmark::Llama2_70bLora, r, g),
            ((skip + 1) * every, every),
            "gbs {g}"
        );
    }
    assert_eq!(first_points(Benchmark::Llama2_70bLora, r, 8), (1536, 384));
    // deepseekv3_671b: first at gbs*floor(42+24576/gbs), then every step.
    assert_eq!(
        first_points(Benchmark::Deepseekv3_671b, r, 16384),
        (704512, 16384)
    );
    assert_eq!(
        first_points(Benchmark::Deepseekv3_671b, r, 15360),
        (660480, 15360)
    );
    assert_eq!(
        first_points(Benchmark::Deepseekv3_671b, r, 32768),
        (32768 * 42, 32768)
    );
    // llama31_8b / gpt_oss_20b: every 12288 sequences, in whole steps.
    for b in [Benchmark::Llama31_8b, Benchmark::GptOss20b] {
        assert_eq!(first_points(b, r, 32), (12288, 12288));
        assert_eq!(first_points(b, r, 100), (12300, 12300));
    }
    // flux1: evaluation_frequency = ceil(262144/gbs)*gbs under 6.1.0, logged as such.
    for g in [1024u64, 1000, 3000] {
        let every = 262144u64.div_ceil(g) * g;
        assert_eq!(first_points(Benchmark::Flux1, r, g), (every, every));
        let p = build(Benchmark::Flux1, r, Division::Closed, Some(g), &[]).unwrap();
        assert_eq!(
            p.get("evaluation_frequency"),
            Some(&Value::Int(every.into()))
        );
    }
    // 6.0.0 fixes evaluation_frequency at 262144.
    let p = build(
        Benchmark::Flux1,
        Ruleset::V6_0_0,
        Division::Closed,
        Some(1000),
        &[],
    )
    .unwrap();
    assert_eq!(p.get("evaluation_frequency"), Some(&Value::Int(262144)));
    // qwen35_397b_grpo: the grid from gbs*ceil(2.5+3840/gbs), every step.
    for (g, first) in [(256u64, 256 * 18), (512, 512 * 10), (128, 128 * 33)] {
        assert_eq!(
            first_points(Benchmark::Qwen35_397bGrpo, r, g),
            (first, g),
            "gbs {g}"
        );
    }
    // dlrmv4: interval ceil(0.001*train_samples/gbs)*gbs; first from the rules' formula.
    for g in [8192u64, 16384, 65536] {
        let interval = ((0.001 * 2290835423.0 / g as f64).ceil() as u64) * g;
        let first =
            (((4480 * g + 135331840) / 3) as f64 / interval as f64).ceil() as u64 * interval;
        assert_eq!(first_points(Benchmark::Dlrmv4, r, g), (first, interval));
    }
    assert_eq!(
        first_points(Benchmark::Dlrmv4, r, 8192),
        (57344000, 2293760)
    );
    // llama31_405b (6.0.0): every 18432 sequences, skipping floor(0.0026*gbs+12).
    let r0 = Ruleset::V6_0_0;
    assert_eq!(
        first_points(Benchmark::Llama31_405b, r0, 1152),
        (15 * 18432, 18432)
    );
    assert_eq!(
        first_points(Benchmark::Llama31_405b, r0, 2304),
        (18 * 18432, 18432) // skip floor(0.0026 * 2304 + 12) = 17
    );
    // dlrm_dcnv2 (6.0.0): every 0.05 epoch, in whole steps.
    let g = 55296u64;
    let every = ((0.05 * 4195197692.0 / g as f64).ceil() as u64) * g;
    assert_eq!(first_points(Benchmark::DlrmDcnv2, r0, g), (every, every));
}

#[test]
fn other_batch_sizes_dry_run_to_compliant_logs() {
    let dir = tempfile::tempdir().unwrap();
    let mut official = Vec::new();
    for (r, b, g) in [
        (Ruleset::V6_1_0, Benchmark::Deepseekv3_671b, 15360u64),
        (Ruleset::V6_1_0, Benchmark::Qwen35_397bGrpo, 512),
        (Ruleset::V6_1_0, Benchmark::Flux1, 1000),
        (Ruleset::V6_1_0, Benchmark::Llama2_70bLora, 16),
        (Ruleset::V6_1_0, Benchmark::Dlrmv4, 16384),
        (Ruleset::V6_0_0, Benchmark::Llama31_405b, 2304),
    ] {
        let p = Preset::for_benchmark(r, b, Division::Closed, Some(g)).unwrap();
        let (path, out) = dry(&p, dir.path());
        assert!(
            out.report.passed(true),
            "{b} gbs {g}: {}",
            out.report.render_text("log", true)
        );
        let evals: Vec<i128> = records_of(&path)
            .iter()
            .filter(|r| r.key == "eval_accuracy")
            .map(|r| r.metadata.get("samples_count").unwrap().as_i128().unwrap())
            .collect();
        let want: Vec<i128> = p
            .eval_points(evals.len())
            .into_iter()
            .map(i128::from)
            .collect();
        assert_eq!(
            evals, want,
            "{b} gbs {g}: evaluations at the schedule's points"
        );
        if matches!(b, Benchmark::Deepseekv3_671b | Benchmark::Qwen35_397bGrpo) {
            official.push((path, r));
        }
    }
    for (path, r) in official {
        let (ok, text) = common::official_check(&path, r.as_str(), true);
        assert!(ok, "{}:\n{text}", path.display());
    }
}

// ---- the Python helpers' preset problems (docs/peers.md) -------------------------------

/// #4: `opt_learning_rate_decay_steps` is derived (total − warmup), never off by one, and a
/// hand-typed off-by-one value is rejected.
#[test]
fn peer_bug_4_decay_steps_are_derived_and_an_off_by_one_is_rejected() {
    for warmup in [0u64, 1, 128, 1000] {
        let p = Llama31_8b {
            warmup_steps: warmup,
            ..Default::default()
        }
        .preset(Division::Closed, Ruleset::V6_1_0)
        .unwrap();
        assert_eq!(
            p.get("opt_learning_rate_decay_steps"),
            Some(&Value::Int((1_200_000 - warmup).into()))
        );
    }
    let p = Deepseekv3_671b::default()
        .preset(Division::Closed, Ruleset::V6_1_0)
        .unwrap();
    assert_eq!(
        p.get("opt_learning_rate_decay_steps"),
        Some(&Value::Int(11996))
    );
    // Warmup comes before decay (the rule reads it), batch size before the learning rate.
    for b in [Benchmark::Llama31_8b, Benchmark::Deepseekv3_671b] {
        let p = build(b, Ruleset::V6_1_0, Division::Closed, None, &[]).unwrap();
        let pos = |k: &str| {
            p.hyperparameters()
                .iter()
                .position(|(x, _)| *x == k)
                .unwrap()
        };
        assert!(pos("opt_learning_rate_warmup_steps") < pos("opt_learning_rate_decay_steps"));
        assert!(pos("global_batch_size") < pos("opt_base_learning_rate"));
    }
    for b in [Benchmark::Llama31_8b, Benchmark::Deepseekv3_671b] {
        let p = build(b, Ruleset::V6_1_0, Division::Closed, None, &[]).unwrap();
        let decay = p
            .get("opt_learning_rate_decay_steps")
            .unwrap()
            .as_i128()
            .unwrap();
        let err = build(
            b,
            Ruleset::V6_1_0,
            Division::Closed,
            None,
            &[("opt_learning_rate_decay_steps", Value::Int(decay + 1))],
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("`opt_learning_rate_decay_steps` must be"),
            "{err}"
        );
    }
}

/// #5: every evaluation closes a block: a dry run has one block_stop per evaluation, and
/// `samples_count` never goes negative; an impossible schedule is an error, not a silent log.
#[test]
fn peer_bug_5_every_eval_has_a_block_stop() {
    let dir = tempfile::tempdir().unwrap();
    for b in [Benchmark::Llama2_70bLora, Benchmark::Deepseekv3_671b] {
        let p = Preset::for_benchmark(Ruleset::V6_1_0, b, Division::Closed, None).unwrap();
        let (path, out) = dry(&p, dir.path());
        let recs = records_of(&path);
        let count = |k: &str| recs.iter().filter(|r| r.key == k).count() as u64;
        assert_eq!(count("block_stop"), out.evals);
        assert_eq!(count("block_start"), out.evals);
        assert_eq!(count("eval_accuracy"), out.evals);
        for r in recs.iter().filter(|r| r.key.starts_with("block_")) {
            assert!(r.metadata.get("samples_count").unwrap().as_i128().unwrap() >= 0);
        }
        assert!(p.eval_schedule().first > 0 && p.eval_schedule().every > 0);
    }
    let err = Preset::for_benchmark(
        Ruleset::V6_1_0,
        Benchmark::Llama31_8b,
        Division::Closed,
        Some(0),
    )
    .unwrap_err();
    assert!(err.to_string().contains("`global_batch_size`"), "{err}");
}

/// #6: no key twice: presets hold each key once, never a key the layer logs itself, and a
/// duplicate override is an error.
#[test]
fn peer_bug_6_no_exactly_one_key_twice() {
    for (r, b, d) in all_cases() {
        let p = Preset::for_benchmark(r, b, d, None).unwrap();
        let keys: Vec<&str> = p.hyperparameters().iter().map(|(k, _)| *k).collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), keys.len(), "{b}: {keys:?}");
        for k in &keys {
            assert!(
                !k.starts_with("submission_") && !compliance::DISCLOSURE_KEYS.contains(k),
                "{b}: `{k}` is the builder's"
            );
        }
    }
    let err = Llama31_8b::default()
        .with_value("opt_adamw_beta_2", 0.95)
        .with_value("opt_adamw_beta_2", 0.95)
        .preset(Division::Closed, Ruleset::V6_1_0)
        .unwrap_err();
    assert!(matches!(err, PresetError::Duplicate { .. }), "{err}");
}

/// #3: wrong key names cannot be logged: every key is one the rules know, flux1 logs
/// `evaluation_frequency`, and an override with a misspelt key is an error.
#[test]
fn peer_bug_3_no_wrong_key_names() {
    for (r, b, d) in all_cases() {
        let p = Preset::for_benchmark(r, b, d, None).unwrap();
        for (k, v) in p.hyperparameters() {
            let known = compliance::rules(r).files().any(|f| f.rule(k).is_some())
                || tracing_mllog::keys::intern(k).is_some();
            assert!(known, "{b}: `{k}`");
            assert!(!v.is_null(), "{b}: `{k}` is null");
            assert_ne!(v, &Value::from(""), "{b}: `{k}` is empty");
        }
    }
    let p = Flux1::default()
        .preset(Division::Closed, Ruleset::V6_1_0)
        .unwrap();
    assert!(p.get("evaluation_frequency").is_some());
    let err = Flux1::default()
        .with_value("eval_frequency", 262144)
        .preset(Division::Closed, Ruleset::V6_1_0)
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("`eval_frequency` is not a key of the flux1 preset"),
        "{err}"
    );
}

/// #15–18: no hard-coded organisation, platform, status or division, and the target is the
/// rules' target (never 0.0).
#[test]
fn peer_bugs_15_to_18_no_hard_coded_metadata_and_a_real_target() {
    for (r, b, d) in all_cases() {
        let p = Preset::for_benchmark(r, b, d, None).unwrap();
        let t = compliance::target(r, b, d).unwrap();
        let range = t.range.unwrap();
        let bound = if t.higher_is_better {
            range.min.unwrap()
        } else {
            range.max.unwrap()
        };
        assert_eq!(p.target().value, bound.value, "{b} {}", d.as_str());
        assert_ne!(p.target().value, 0.0);
        assert_eq!(
            matches!(p.target().direction, Direction::AtLeast | Direction::Above),
            t.higher_is_better
        );
        assert_eq!(p.division(), d);
        assert_eq!(p.benchmark(), b);
    }
    // Builder::preset sets no org, platform or status: a closed build without them fails ...
    let p = Preset::for_benchmark(
        Ruleset::V6_1_0,
        Benchmark::Llama2_70bLora,
        Division::Closed,
        None,
    )
    .unwrap();
    let err = MllogLayer::builder()
        .preset(&p)
        .output(Output::Nowhere)
        .build::<tracing_subscriber::Registry>()
        .expect_err("closed without org/platform");
    assert!(err.to_string().contains("submission_org") || err.to_string().contains("org"));
    // ... and an open one logs none of them.
    let p = Preset::for_benchmark(
        Ruleset::V6_0_0,
        Benchmark::Llama2_70bLora,
        Division::Open,
        None,
    )
    .unwrap();
    let (sink, handle) = MemorySink::new();
    let (layer, guard) = MllogLayer::builder()
        .preset(&p)
        .output(Output::Nowhere)
        .sink(sink)
        .build::<tracing_subscriber::Registry>()
        .unwrap();
    use tracing_subscriber::prelude::*;
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        drop(tracing::info_span!("init").entered());
    });
    drop(guard);
    let recs = handle.records();
    for k in ["submission_org", "submission_platform", "submission_status"] {
        assert!(!recs.iter().any(|r| r.key == k), "{k} is never invented");
    }
    assert!(recs.iter().any(|r| r.key == "lora_rank"));
}

/// `mllog dry-run`, as a child process of the built binary.
#[test]
fn cli_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cli.log");
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_mllog"))
            .arg("dry-run")
            .args(args)
            .output()
            .unwrap()
    };
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let o = run(&[
        os("--benchmark"),
        os("llama31_8b"),
        os("--division"),
        os("closed"),
        os("--gbs"),
        os("64"),
        os("--ruleset"),
        os("6.1.0"),
        os("--out"),
        out.as_os_str(),
        os("--precision"),
        os("fp8,bfloat16,bfloat16"),
        os("--parallelism"),
        os("2,1,1,1"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("\"key\": \"global_batch_size\", \"value\": 64"));
    assert!(text.contains("\"value\": \"fp8\""));
    let o = run(&[os("--benchmark"), os("nope"), os("--out"), os("x")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown benchmark"));
    assert_eq!(
        run(&[os("--benchmark"), os("flux1")]).status.code(),
        Some(2)
    );
    let o = run(&[os("--parallelism"), os("2,1")]);
    assert_eq!(o.status.code(), Some(2));
}
