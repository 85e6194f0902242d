//! Results tooling (`mllog_core::results`): summaries of the real corpus against the Python
//! computation, scores against MLCommons' `result_summarizer`, the `package` command against
//! the official package checker, and the plots.
//!
//! Generated runs are llama2_70b_lora, closed, ruleset 6.1.0, global batch size 8, evals every
//! 384 samples. Converged runs stop at 3072–3840 samples, which the RCP for batch size 8
//! (olympic mean 3178.67 samples) accepts without normalisation, so the package checker's
//! RCP step passes honestly: no `rcp-bypass`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use mllog_core::compliance::{example_log, Division, Ruleset};
use mllog_core::record::{parse_line, EventType, Metadata, Record, Value};
use mllog_core::results::score::{score_dir, BenchmarkScore, ScoreOptions};
use mllog_core::results::summary::{summarize_file, summarize_text};
use mllog_core::Benchmark;

use common::mllog;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Converged,
    NotConverged,
    NonCompliant,
}

/// A generated run: `evals` evals every 384 samples, one a minute-ish, `minutes` of training.
fn gen_run(seed: i64, evals: usize, minutes: f64, kind: Kind, day: i64) -> String {
    let ex = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
    let t0: i64 = 1_767_225_600_000 + day * 86_400_000;
    let mut out = String::new();
    let mut run_start = 0;
    let src = "/workspace/train/src/mlperf.rs";
    for line in ex.lines() {
        let mut r = parse_line(line).unwrap().unwrap();
        let shift = r.time_ms() - 1_767_225_600_000;
        r = r.at_millis(t0 + shift);
        if r.key == "seed" {
            r.value = Value::Int(seed as i128);
        }
        if kind == Kind::NonCompliant && r.key == "lora_rank" {
            continue;
        }
        r.encode(&mut out);
        out.push('\n');
        if r.key == "run_start" {
            run_start = r.time_ms();
            break;
        }
    }
    let mut lineno = 500;
    let mut emit = |key: &'static str,
                    value: Value,
                    et: EventType,
                    md: Vec<(&'static str, Value)>,
                    t: i64,
                    out: &mut String| {
        let mut m = Metadata::at(src, lineno);
        lineno += 1;
        for (k, v) in md {
            m.set(k, v);
        }
        Record::event(key, value)
            .at_millis(t)
            .with_metadata(m)
            .with_event_type(et)
            .encode(out);
        out.push('\n');
    };
    let total_ms = (minutes * 60_000.0).round() as i64;
    let mut prev = 0i128;
    let mut last = 0.0;
    for k in 1..=evals {
        let sc = 384 * k as i128;
        let t = run_start + total_ms * k as i64 / evals as i64;
        let tb = run_start + total_ms * (k as i64 - 1) / evals as i64;
        emit(
            "block_start",
            Value::Null,
            EventType::IntervalStart,
            vec![("samples_count", Value::Int(prev))],
            tb,
            &mut out,
        );
        for s in 0..4 {
            let step = 0.4 + 0.01 * ((seed + s + k as i64) % 7) as f64;
            emit(
                "tracked_stats",
                Value::Object(vec![("train_step_time".into(), Value::Float(step))]),
                EventType::PointInTime,
                vec![("samples_count", Value::Int(prev + 96 * s as i128))],
                tb + 1000 * (s + 1),
                &mut out,
            );
        }
        emit(
            "block_stop",
            Value::Null,
            EventType::IntervalEnd,
            vec![("samples_count", Value::Int(sc))],
            t,
            &mut out,
        );
        let md = || {
            vec![
                ("samples_count", Value::Int(sc)),
                ("epoch_num", Value::Int(k as i128)),
            ]
        };
        emit(
            "eval_start",
            Value::Null,
            EventType::IntervalStart,
            md(),
            t,
            &mut out,
        );
        // Loss falls towards the target; the last eval meets it unless the run fails to converge.
        let frac = k as f64 / evals as f64;
        last = if k == evals && kind != Kind::NotConverged {
            0.9241
        } else {
            0.93 + 0.08 * (1.0 - frac)
        };
        emit(
            "eval_accuracy",
            Value::Float(last),
            EventType::PointInTime,
            md(),
            t,
            &mut out,
        );
        emit(
            "eval_stop",
            Value::Null,
            EventType::IntervalEnd,
            md(),
            t,
            &mut out,
        );
        prev = sc;
    }
    let status = if kind == Kind::NotConverged {
        "aborted"
    } else {
        "success"
    };
    emit(
        "run_stop",
        Value::Float(last),
        EventType::IntervalEnd,
        vec![
            ("samples_count", Value::Int(prev)),
            ("status", Value::from(status)),
        ],
        run_start + total_ms,
        &mut out,
    );
    out
}

const SYSTEM_JSON: &str = r#"{
  "submitter": "ExampleOrg", "division": "closed", "status": "Available on-premise",
  "system_name": "NAME", "number_of_nodes": "1", "host_processors_per_node": "2",
  "host_processor_model_name": "Example CPU", "host_processor_core_count": "64",
  "host_processor_vcpu_count": "128", "host_processor_frequency": "", "host_processor_caches": "",
  "host_processor_interconnect": "", "host_memory_capacity": "1 TB", "host_storage_type": "NVMe",
  "host_storage_capacity": "4 TB", "host_networking": "", "host_networking_topology": "",
  "host_memory_configuration": "", "accelerators_per_node": "8",
  "accelerator_model_name": "Example GPU", "accelerator_host_interconnect": "",
  "accelerator_frequency": "", "accelerator_on-chip_memories": "",
  "accelerator_memory_configuration": "HBM", "accelerator_memory_capacity": "80 GB",
  "accelerator_interconnect": "", "accelerator_interconnect_topology": "", "cooling": "air",
  "hw_notes": "", "framework": "Rust", "other_software_stack": "", "operating_system": "Linux",
  "sw_notes": ""
}"#;

fn system_json(name: &str) -> String {
    SYSTEM_JSON.replace("\"NAME\"", &format!("\"{name}\""))
}

/// (seed, evals, minutes, kind) of ten runs.
fn ten_runs(unconverged: bool, noncompliant: bool) -> Vec<(i64, usize, f64, Kind)> {
    let evals = [8, 8, 9, 9, 8, 10, 9, 8, 9, 10];
    let minutes = [12.5, 11.75, 13.2, 14.1, 12.05, 15.3, 13.7, 11.9, 12.8, 16.4];
    (0..10)
        .map(|i| {
            let kind = match i {
                3 if unconverged => Kind::NotConverged,
                6 if noncompliant => Kind::NonCompliant,
                _ => Kind::Converged,
            };
            (
                1000 + 17 * i as i64,
                evals[i],
                minutes[i] + 0.013 * i as f64,
                kind,
            )
        })
        .collect()
}

fn write_benchmark(root: &Path, system: &str, runs: &[(i64, usize, f64, Kind)]) -> PathBuf {
    let dir = root.join("results").join(system).join("llama2_70b_lora");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(root.join("systems")).unwrap();
    std::fs::write(
        root.join("systems").join(format!("{system}.json")),
        system_json(system),
    )
    .unwrap();
    for (i, &(seed, evals, minutes, kind)) in runs.iter().enumerate() {
        std::fs::write(
            dir.join(format!("result_{i}.txt")),
            gen_run(seed, evals, minutes, kind, i as i64),
        )
        .unwrap();
    }
    dir
}

fn python_json(code: &str, cwd: &Path) -> String {
    let out = Command::new(common::python())
        .args(["-c", code])
        .current_dir(cwd)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn generated_folder_scores_equal_result_summarizer() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("sub");
    // A results folder: some converged, one not, one non-compliant (two dropped: invalid).
    write_benchmark(&root, "sys_a", &ten_runs(true, true));
    // One unconverged run: it stands in for the slowest.
    write_benchmark(&root, "sys_b", &ten_runs(true, false));
    // One non-compliant run.
    write_benchmark(&root, "sys_c", &ten_runs(false, true));
    // All ten converge, and a scaling.json from the review committee.
    let d = write_benchmark(&root, "sys_d", &ten_runs(false, false));
    std::fs::write(
        d.join("scaling.json"),
        r#"{"scaling_factor": 1.0188034188034189}"#,
    )
    .unwrap();
    // Three runs only (result_summarizer scores them anyway: the median).
    write_benchmark(&root, "sys_e", &ten_runs(false, false)[..3]);

    let ours: Vec<BenchmarkScore> = score_dir(
        &root,
        ScoreOptions {
            ruleset: Some(Ruleset::V6_1_0),
        },
    )
    .unwrap();
    assert_eq!(ours.len(), 5);
    let by = |s: &str| ours.iter().find(|b| b.system == s).unwrap();
    assert_eq!(by("sys_a").score, None, "{:#?}", by("sys_a").decisions);
    assert_eq!(by("sys_a").dropped, 2);
    assert_eq!(by("sys_b").dropped, 1);
    assert_eq!(by("sys_c").dropped, 1);
    assert_eq!(by("sys_d").dropped, 0);
    assert!(by("sys_d").scaling_factor > 1.0);
    for b in &ours {
        assert!(!b.decisions.is_empty());
        assert!(b.runs.iter().all(|r| !r.decision.is_empty()));
    }

    // 1. The official scoring function, per file and per benchmark (compute_score's CLI
    //    crashes in 4.1.68; _compute_strong_score_standalone is what it wraps).
    let code = format!(
        r#"
import json, os, contextlib, io
from mlperf_logging.result_summarizer import result_summarizer as rs
out = {{}}
for system in sorted(os.listdir({root:?} + '/results')):
    folder = {root:?} + '/results/' + system + '/llama2_70b_lora'
    with contextlib.redirect_stdout(io.StringIO()):
        track, _, score, _, scale = rs._compute_strong_score_standalone(
            'llama2_70b_lora', system, False, folder, 'training', '6.1.0', return_full_scores=True)
    out[system] = {{'runs': {{os.path.basename(k): v for k, v in track.items()}}, 'score': score, 'scale': scale}}
print(json.dumps(out))
"#,
        root = root.display().to_string()
    );
    let official = python_json(&code, tmp.path());
    for b in &ours {
        let key = format!("\"{}\": {{\"runs\": {{", b.system);
        let start = official.find(&key).unwrap_or_else(|| panic!("{official}")) + key.len() - 1;
        let chunk = &official[start..];
        let runs_end = chunk.find('}').unwrap();
        let runs = &chunk[1..runs_end];
        let mut official_runs: Vec<(String, f64)> = runs
            .split(", ")
            .filter(|s| !s.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once(": ").unwrap();
                (k.trim_matches('"').to_string(), v.parse().unwrap())
            })
            .collect();
        official_runs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut our_runs: Vec<(String, f64)> = b
            .runs
            .iter()
            .filter_map(|r| {
                Some((
                    r.file.file_name()?.to_string_lossy().into_owned(),
                    r.minutes?,
                ))
            })
            .collect();
        our_runs.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            our_runs.iter().map(|r| &r.0).collect::<Vec<_>>(),
            official_runs.iter().map(|r| &r.0).collect::<Vec<_>>(),
            "{}: kept files differ",
            b.system
        );
        for (o, p) in our_runs.iter().zip(&official_runs) {
            assert!(close(o.1, p.1), "{} {}: {} vs {}", b.system, o.0, o.1, p.1);
        }
        let rest = &chunk[runs_end..];
        let score_txt = rest
            .split("\"score\": ")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .trim();
        match (b.score, score_txt) {
            (None, "null") => {}
            (Some(x), t) => {
                let y: f64 = t
                    .parse()
                    .unwrap_or_else(|_| panic!("{}: ours {x}, official {t}", b.system));
                assert!(close(x, y), "{}: ours {x}, official {y}", b.system);
            }
            (None, t) => panic!("{}: ours none, official {t}", b.system),
        }
    }

    // 2. The result_summarizer command itself, its CSV column for the benchmark.
    let csv = tmp.path().join("summary.csv");
    let out = Command::new(common::python())
        .args(["-m", "mlperf_logging.result_summarizer"])
        .arg(&root)
        .args(["training", "6.1.0", "--csv"])
        .arg(&csv)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "llama2_70b_lora").unwrap();
    let sys_col = header.iter().position(|h| *h == "system").unwrap();
    let mut seen = 0;
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        if cells.len() != header.len() {
            continue;
        }
        let Some(b) = ours.iter().find(|b| b.system == cells[sys_col]) else {
            continue;
        };
        seen += 1;
        match (b.score, cells[col]) {
            (None, "") => {}
            (Some(x), t) => {
                let y: f64 = t
                    .parse()
                    .unwrap_or_else(|_| panic!("{}: ours {x}, csv {t:?}", b.system));
                assert!(close(x, y), "{}: ours {x}, result_summarizer {y}", b.system);
            }
            (None, t) => panic!("{}: ours none, result_summarizer {t:?}", b.system),
        }
    }
    assert_eq!(seen, 5, "{text}");
}

#[test]
fn score_command_explains_decisions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_benchmark(tmp.path(), "sys_b", &ten_runs(true, false));
    let out = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(["score", "--ruleset", "6.1.0"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("dropped: fails the compliance check"),
        "{text}"
    );
    assert!(text.contains("stand in for the slowest"), "{text}");
    assert!(text.contains("trimmed: among the fastest"), "{text}");
    assert!(text.contains("SCORE sys_b/llama2_70b_lora"), "{text}");
    let tmp2 = tempfile::tempdir().unwrap();
    let dir2 = write_benchmark(tmp2.path(), "sys_a", &ten_runs(true, true));
    let out = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(["score", "--ruleset", "6.1.0", "--format", "json"])
        .arg(&dir2)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("\"score\": null"), "{text}");
    assert!(text.contains("INVALID"), "{text}");
}

fn package_checker(folder: &Path) -> (bool, String) {
    // One log per folder (the checker appends to an existing log); its exit status is always
    // 0, so the verdict is its closing line.
    let log = folder.with_extension("package_checker.log");
    let out = Command::new(common::python())
        .args(["-m", "mlperf_logging.package_checker"])
        .arg(folder)
        .args(["training", "6.1.0", "--log_output"])
        .arg(&log)
        .current_dir(folder.parent().unwrap())
        .output()
        .unwrap();
    let text = format!(
        "{}{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    (
        text.contains("PACKAGE CHECKER FOUND NO ERRORS")
            && !text.contains("PACKAGE CHECKER FOUND ERRORS"),
        text,
    )
}

#[test]
fn package_command_output_passes_the_package_checker() {
    let tmp = tempfile::tempdir().unwrap();
    let inputs = tmp.path().join("logs");
    std::fs::create_dir_all(&inputs).unwrap();
    let mut files = Vec::new();
    for (i, (seed, evals, minutes, kind)) in ten_runs(false, false).into_iter().enumerate() {
        let p = inputs.join(format!("run-{i:02}.log"));
        std::fs::write(&p, gen_run(seed, evals, minutes, kind, i as i64)).unwrap();
        files.push(p);
    }
    let desc = tmp.path().join("desc.json");
    std::fs::write(&desc, system_json("sys_p")).unwrap();
    let sub = tmp.path().join("submission");
    let out = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(["package", "--system", "sys_p", "--out"])
        .arg(&sub)
        .arg("--system-desc")
        .arg(&desc)
        .args(&files)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = sub.join("results/sys_p/llama2_70b_lora");
    for i in 0..10 {
        assert!(dir.join(format!("result_{i}.txt")).is_file());
    }
    let (ok, log) = package_checker(&sub);
    assert!(ok, "package checker rejected our folder:\n{log}");
    assert!(log.contains("RCP Test Passed"), "{log}");

    // Same seed in two runs on the same line: we refuse, and so does the seed checker.
    let dup = inputs.join("run-dup.log");
    std::fs::write(&dup, gen_run(1000, 9, 12.2, Kind::Converged, 30)).unwrap();
    let mut dup_files = files[..9].to_vec();
    dup_files.push(dup);
    let sub2 = tmp.path().join("submission2");
    let run = |force: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mllog"));
        c.args(["package", "--system", "sys_p", "--out"])
            .arg(&sub2)
            .arg("--system-desc")
            .arg(&desc);
        if force {
            c.arg("--force");
        }
        c.args(&dup_files).output().unwrap()
    };
    let out = run(false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("already logs the same seed"), "{text}");
    assert!(!sub2
        .join("results/sys_p/llama2_70b_lora/result_0.txt")
        .exists());
    let out = run(true);
    assert_eq!(out.status.code(), Some(1));
    let (ok, log) = package_checker(&sub2);
    assert!(!ok && log.contains("Seed checker failed"), "{log}");
}

/// Python's result_summarizer reading of run_start / run_stop on the same file.
#[test]
fn real_corpus_summaries_match_python() {
    let Some(corpus) = common::corpus("real", "summaries of the published logs against Python's")
    else {
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 25);
    let code = format!(
        r#"
import json, os
from mlperf_logging.compliance_checker.mlp_parser import parse_file
from mlperf_logging.result_summarizer import result_summarizer as rs
out = {{}}
for f in sorted(os.listdir({dir:?})):
    if not f.endswith('.txt'):
        continue
    lines, _ = parse_file(os.path.join({dir:?}, f), ruleset='5.0.0')
    try:
        start, stop = rs._query_run_start_stop(lines)
        out[f] = (stop - start) / 60000
    except ValueError:
        out[f] = None
print(json.dumps(out))
"#,
        dir = corpus
    );
    let py = python_json(&code, &corpus);
    let mut with_time = 0;
    for f in &files {
        let s = summarize_file(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(s.parse_errors, 0, "{}", f.display());
        assert!(s.benchmark.is_some(), "{}", f.display());
        let name = f.file_name().unwrap().to_string_lossy();
        let key = format!("\"{name}\": ");
        let v = py
            .split(&key)
            .nth(1)
            .unwrap_or_else(|| panic!("{name} not in {py}"));
        let v = v.split([',', '}']).next().unwrap().trim();
        match (s.time_to_train_min, v) {
            (None, "null") => {}
            (Some(x), t) => {
                let y: f64 = t
                    .parse()
                    .unwrap_or_else(|_| panic!("{name}: ours {x}, python {t}"));
                assert!(close(x, y), "{name}: ours {x}, python {y}");
                with_time += 1;
            }
            (None, t) => panic!("{name}: ours none, python {t}"),
        }
    }
    assert_eq!(with_time, 22);
    // And the renderers take all of them.
    let runs: Vec<_> = files.iter().map(|f| summarize_file(f).unwrap()).collect();
    let csv = mllog_core::results::summary::render_csv(&runs);
    assert_eq!(csv.lines().count(), 26);
    let json = mllog_core::results::summary::render_json(&runs);
    assert!(!json.contains("NaN"));
    let parsed: Vec<serde_json::Value> = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(parsed.len(), 25);
    for (run, item) in runs.iter().zip(&parsed) {
        assert_eq!(item["path"], run.path.as_str());
        assert_eq!(item["num_evals"], run.evals.len());
        assert_eq!(item["converged"], run.converged);
    }
}

#[test]
fn summary_of_generated_runs() {
    let conv = summarize_text("a", &gen_run(1, 8, 12.5, Kind::Converged, 0));
    assert_eq!(conv.status.as_deref(), Some("success"));
    assert!(conv.converged);
    assert_eq!(conv.time_to_train_min, Some(12.5));
    assert_eq!(conv.samples_to_converge, Some(3072.0));
    assert_eq!(conv.evals.len(), 8);
    assert_eq!(conv.target_reached(), Some(true));
    assert_eq!(conv.step_times_s.len(), 32);
    assert!((conv.throughput.unwrap() - 3072.0 / 750.0).abs() < 1e-9);
    let t = conv.target.as_ref().unwrap();
    assert_eq!(
        (t.key.as_str(), t.value, t.higher_is_better),
        ("eval_accuracy", 0.925, false)
    );
    let un = summarize_text("b", &gen_run(2, 8, 12.5, Kind::NotConverged, 0));
    assert!(!un.converged);
    assert_eq!(un.status.as_deref(), Some("aborted"));
    assert_eq!(un.samples_to_converge, None);
    assert_eq!(un.target_reached(), Some(false));
}

fn plot_inputs(dir: &Path) -> Vec<PathBuf> {
    (0..3)
        .map(|i| {
            let p = dir.join(format!("result_{i}.txt"));
            let kind = if i == 2 {
                Kind::NotConverged
            } else {
                Kind::Converged
            };
            std::fs::write(
                &p,
                gen_run(10 + i, 8 + i as usize, 12.0 + i as f64, kind, i),
            )
            .unwrap();
            p
        })
        .collect()
}

/// Inputs of the plot tests: the generated llama2_70b_lora runs (with step times; one with a
/// file name far wider than a panel) and two published logs of other benchmarks, from the
/// corpus (`None` without it).
fn plot_mix(dir: &Path, what: &str) -> Option<Vec<PathBuf>> {
    let corpus = common::corpus("real", what)?;
    let mut files = plot_inputs(dir);
    let long = dir.join(format!(
        "v6.1_{}_llama2_70b_lora_{}_result_3.txt",
        "A-Submitter-With-A-Very-Long-Name".repeat(3),
        "system-with-eight-nodes-and-a-long-description".repeat(2)
    ));
    std::fs::write(&long, gen_run(13, 9, 13.0, Kind::Converged, 3)).unwrap();
    files.push(long);
    files.push(corpus.join("v5.0_Supermicro_bert_AS-4126GS-NBR-LCC-N1_result_1.txt"));
    files.push(corpus.join("v5.0_QCT_dlrm_dcnv2_D74H-7U_result_0.txt"));
    Some(files)
}

fn hex(c: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// The SVG is well-formed XML with one panel per benchmark, each target line drawn and
/// labelled once, every run's curve in its colour and its name in the legend, and the
/// step-time panel.
#[test]
fn svg_plot_parses_and_shows_panels_targets_and_runs() {
    use mllog_cli::plot::{run_colors, short_name, TARGET_COLOR};
    let tmp = tempfile::tempdir().unwrap();
    let Some(files) = plot_mix(tmp.path(), "the SVG plot of generated and published logs") else {
        return;
    };
    let svg = tmp.path().join("out.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(["summary", "--format", "csv", "--plot"])
        .arg(&svg)
        .args(&files)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        files.len() + 1
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let width: f64 = root.attribute("width").unwrap().parse().unwrap();
    let height: f64 = root.attribute("height").unwrap().parse().unwrap();
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    let count = |pred: &dyn Fn(&str) -> bool| texts.iter().filter(|t| pred(t)).count();
    for (bench, unit) in [
        ("bert", "samples"),
        ("dlrm_dcnv2", "epochs"),
        ("llama2_70b_lora", "samples"),
    ] {
        let caption = format!("{bench}: eval_accuracy vs {unit}");
        assert_eq!(count(&|t| t == caption), 1, "{caption}: {texts:?}");
    }
    assert_eq!(
        count(&|t| t.ends_with(" vs samples") || t.ends_with(" vs epochs")),
        3
    );
    for label in ["target ≤ 0.925", "target ≥ 0.72", "target ≥ 0.80275"] {
        assert_eq!(count(&|t| t == label), 1, "{label}: {texts:?}");
    }
    // Strokes: the target's dashes and each run's curve.
    let strokes: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") || n.has_tag_name("line"))
        .filter_map(|n| n.attribute("stroke"))
        .map(str::to_ascii_lowercase)
        .collect();
    assert!(
        strokes.iter().filter(|s| **s == hex(TARGET_COLOR)).count() >= 3,
        "target lines: {strokes:?}"
    );
    let runs: Vec<_> = files.iter().map(|f| summarize_file(f).unwrap()).collect();
    let colors = run_colors(&runs);
    for (i, f) in files.iter().enumerate() {
        assert!(
            strokes.contains(&hex(colors[i])),
            "run {i} has no curve in {}",
            hex(colors[i])
        );
        // The legend names every run; long names are cut from the right, keeping the start.
        let name = short_name(&f.display().to_string());
        let head: String = name.chars().take(30).collect();
        assert_eq!(
            count(&|t| t.starts_with(&head)),
            if i < 4 { 2 } else { 1 },
            "{name}: {texts:?}"
        );
    }
    assert_eq!(
        count(&|t| t.starts_with("v6.1_A-Submitter") && t.contains('…') && t.ends_with(" min)")),
        1,
        "the long name is cut in the legend, its status kept: {texts:?}"
    );
    assert_eq!(count(&|t| t.starts_with("Step time per run")), 1);
    assert_eq!(count(&|t| t.starts_with("median ")), 4, "{texts:?}");
    // Every text is anchored inside the canvas.
    for n in doc.descendants().filter(|n| n.has_tag_name("text")) {
        let x: f64 = n.attribute("x").unwrap().parse().unwrap();
        let y: f64 = n.attribute("y").unwrap().parse().unwrap();
        assert!((0.0..=width).contains(&x) && (0.0..=height).contains(&y));
    }
}

/// The PNG decodes to the size the library reports, with the same pixels, shows the target
/// and every run colour, and keeps text inside the canvas: a long run name is cut, so the
/// outer border stays background.
#[test]
fn png_plot_decodes_and_shows_target_and_runs() {
    use mllog_cli::plot::{render_rgb, run_colors, TARGET_COLOR};
    let tmp = tempfile::tempdir().unwrap();
    let Some(files) = plot_mix(tmp.path(), "the PNG plot of generated and published logs") else {
        return;
    };
    let png_path = tmp.path().join("out.png");
    let out = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(["summary", "--plot"])
        .arg(&png_path)
        .args(&files)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dec = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).unwrap(),
    ));
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    let px = &buf[..info.buffer_size()];
    let runs: Vec<_> = files.iter().map(|f| summarize_file(f).unwrap()).collect();
    let lib = render_rgb(&runs).unwrap();
    assert_eq!((info.width, info.height), (lib.width, lib.height));
    assert!(info.width >= 1000 && info.height >= 900, "{info:?}");
    assert!(lib.rgb == px, "the CLI wrote the library's picture");
    let count = |c: [u8; 3]| px.chunks(3).filter(|p| *p == c).count();
    assert!(count(TARGET_COLOR) > 300, "target lines missing");
    for (i, c) in run_colors(&runs).into_iter().enumerate() {
        assert!(count(c) > 100, "run {i} missing");
    }
    assert_border_is_background(px, info.width, info.height);
}

/// The outer 6 pixels of an RGB picture are white: nothing (text included) runs off it.
fn assert_border_is_background(px: &[u8], w: u32, h: u32) {
    let (w, h) = (w as usize, h as usize);
    for y in 0..h {
        for x in 0..w {
            if (6..w - 6).contains(&x) && (6..h - 6).contains(&y) {
                continue;
            }
            let i = (y * w + x) * 3;
            assert_eq!(
                &px[i..i + 3],
                &[255, 255, 255],
                "pixel ({x}, {y}) of {w}x{h}"
            );
        }
    }
}

/// The corpus of real logs (ten benchmarks, mixed units, step times from 1.4 ms to 50 s):
/// a panel per benchmark, every run its own colour, step-time ticks on decades, nothing
/// off the canvas.
#[test]
fn plot_of_the_real_corpus() {
    use mllog_cli::plot::{render_rgb, render_svg, run_colors, PALETTE_SIZE, TARGET_COLOR};
    let Some(corpus) = common::corpus("real", "the plot of every published log") else {
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    let runs: Vec<_> = files.iter().map(|f| summarize_file(f).unwrap()).collect();
    assert!(runs.len() <= PALETTE_SIZE);
    let colors: std::collections::HashSet<_> = run_colors(&runs).into_iter().collect();
    assert_eq!(colors.len(), runs.len(), "a colour per run");
    assert!(!colors.contains(&TARGET_COLOR));
    let mut benches: Vec<&str> = runs.iter().filter_map(|r| r.benchmark.as_deref()).collect();
    benches.sort_unstable();
    benches.dedup();
    let svg = render_svg(&runs).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for b in &benches {
        let n = texts
            .iter()
            .filter(|t| t.starts_with(&format!("{b}: eval_accuracy vs ")))
            .count();
        assert_eq!(n, 1, "{b}: {texts:?}");
    }
    let converged = runs.iter().filter(|r| r.converged).count();
    assert!(texts.contains(&&*format!(
        "MLPerf Training: {} runs of {} benchmarks, {converged} converged",
        runs.len(),
        benches.len()
    )));
    // BERT logs samples under epoch_num: the axis says what the numbers are.
    assert!(texts.contains(&"bert: eval_accuracy vs samples"));
    assert!(texts.contains(&"samples (logged as epoch_num)"));
    assert!(texts.contains(&"rgat: eval_accuracy vs epochs"));
    for t in ["1 ms", "10 ms", "100 ms", "1 s", "10 s", "100 s"] {
        assert!(texts.contains(&t), "tick {t}: {texts:?}");
    }
    let b = render_rgb(&runs).unwrap();
    assert_border_is_background(&b.rgb, b.width, b.height);
}

/// Ten runs of one benchmark whose steps all take about 0.3 ms: the log axis still gets
/// distinct tick labels in a unit that shows the difference.
#[test]
fn plot_step_ticks_of_close_fast_runs_are_distinct() {
    use mllog_cli::plot::render_svg;
    let runs: Vec<_> = (0..10)
        .map(|i| {
            let mut r = summarize_text(
                &format!("result_{i}.txt"),
                &gen_run(20 + i, 6, 10.0, Kind::Converged, i),
            );
            for t in &mut r.step_times_s {
                *t *= 0.00075;
            }
            r
        })
        .collect();
    let svg = render_svg(&runs).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let ticks: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .filter(|t| t.ends_with(" µs") && !t.starts_with("median"))
        .collect();
    assert!(ticks.len() >= 3, "{ticks:?}");
    let mut distinct = ticks.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), ticks.len(), "{ticks:?}");
}

#[test]
fn olympic_mean_mirrors_compute_olympic_average() {
    use mllog_core::results::score::olympic_mean;
    // Ten runs: drop one at each end.
    let mut v: Vec<f64> = (1..=10).map(f64::from).collect();
    assert_eq!(olympic_mean(&mut v, 0, 1), Some(5.5));
    // One dropped run stands in for the slowest: drop only the fastest.
    let mut v: Vec<f64> = (1..=9).map(f64::from).collect();
    assert_eq!(olympic_mean(&mut v, 1, 1), Some(5.5));
    // Three runs: the median.
    assert_eq!(olympic_mean(&mut [3.0, 1.0, 2.0], 0, 1), Some(2.0));
    // unet3d: four at each end.
    let mut v: Vec<f64> = (1..=40).map(f64::from).collect();
    assert_eq!(olympic_mean(&mut v, 0, 4), Some(20.5));
    // Nothing left.
    assert_eq!(olympic_mean(&mut [1.0, 2.0], 0, 1), None);
    assert_eq!(olympic_mean(&mut [], 1, 1), None);
    assert_eq!(mllog_core::results::required_runs("llama31_405b"), Some(3));
    assert_eq!(mllog_core::results::required_runs("dlrmv4"), Some(10));
}

/// The CLI as users of cargo and rustc expect it: top-level help, `--version`, `help`,
/// suggestions, short usage errors, per-command help with defaults, completions.
#[test]
fn cli_help_version_suggestions_and_completions() {
    let (code, out, _) = mllog(["--help"]);
    assert_eq!(code, 0);
    for cmd in [
        "check",
        "dry-run",
        "summary",
        "score",
        "package",
        "completions",
        "help",
    ] {
        assert!(
            out.contains(&format!("\n  {cmd} ")),
            "{cmd} missing:\n{out}"
        );
    }
    assert!(out.contains("0 ok, 1 not compliant / failed, 2 usage or I/O error"));
    let (code, out, _) = mllog(["--version"]);
    assert_eq!(
        (code, out.trim()),
        (0, concat!("mllog ", env!("CARGO_PKG_VERSION")))
    );
    let (code, _, err) = mllog(["chek", "x.log"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("a similar subcommand exists: 'check'"),
        "{err}"
    );
    let (code, _, err) = mllog(["check", "--werorr", "x.log"]);
    assert_eq!(code, 2);
    assert!(err.contains("--werror"), "no suggestion: {err}");
    assert!(err.lines().count() < 10, "a usage error is short: {err}");
    let (code, _, _) = mllog(["check"]);
    assert_eq!(code, 2);
    for (cmd, options) in [
        (
            "check",
            &["--ruleset", "--werror", "--format", "--quiet"][..],
        ),
        ("summary", &["--format", "--plot", "[default: text]"][..]),
        ("score", &["--ruleset", "--format", "[default: text]"][..]),
        (
            "package",
            &[
                "--system",
                "--out",
                "--system-desc",
                "--force",
                "[default: .]",
            ][..],
        ),
        (
            "dry-run",
            &[
                "--benchmark",
                "--gbs",
                "[default: closed]",
                "[default: 6.1.0]",
                "[default: 1,1,1,1]",
            ][..],
        ),
    ] {
        let (code, out, _) = mllog(["help", cmd]);
        assert_eq!(code, 0, "{cmd}");
        for o in options {
            assert!(out.contains(o), "mllog help {cmd} lacks {o}:\n{out}");
        }
        assert_eq!(mllog([cmd, "--help"]).1, out);
    }
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, _) = mllog(["completions", shell]);
        assert_eq!(code, 0, "{shell}");
        assert!(out.contains("mllog") && out.contains("dry-run") && out.contains("--werror"));
    }
    let (code, _, _) = mllog(["completions", "tcsh"]);
    assert_eq!(code, 2);
}

/// Paths are OS strings: a log whose name is not UTF-8 is checked and summarised.
#[cfg(unix)]
#[test]
fn cli_non_utf8_paths() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let log = example_log(Ruleset::V6_1_0, Benchmark::Llama31_8b, Division::Closed).unwrap();
    let p = tmp
        .path()
        .join(std::ffi::OsStr::from_bytes(b"run-\xff.log"));
    std::fs::write(&p, log).unwrap();
    let (code, out, err) = mllog([std::ffi::OsStr::new("check"), p.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("COMPLIANT"), "{out}");
    let (code, out, err) = mllog([std::ffi::OsStr::new("summary"), p.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("llama31_8b"), "{out}");
}

/// `python3 -m json.tool` on `text`: the parsed document re-printed, or a panic.
fn json_tool(text: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("python3")
        .args(["-m", "json.tool", "--sort-keys"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "json.tool rejects:\n{text}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// One machine-readable shape per command: `--format json` is one document with
/// `schema_version` and a `files` (or `benchmarks`) array; `jsonl` one object a line; `csv` a
/// header and a row per item.
#[test]
fn cli_machine_readable_output() {
    let tmp = tempfile::tempdir().unwrap();
    let good = example_log(Ruleset::V6_1_0, Benchmark::Llama31_8b, Division::Closed).unwrap();
    let a = tmp.path().join("a.log");
    std::fs::write(&a, &good).unwrap();
    let b = tmp.path().join("b.log");
    let beta = good
        .lines()
        .find(|l| l.contains("\"opt_adamw_beta_2\""))
        .unwrap();
    std::fs::write(&b, good.replace(beta, &beta.replace("0.95", "0.999"))).unwrap();
    let (code, out, _) = mllog([
        "check".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
    ]);
    assert_eq!(code, 1);
    let pretty = json_tool(&out);
    let doc = parse_json(&out);
    assert_eq!(doc.get("schema_version"), Some(&Value::Int(1)), "{pretty}");
    assert_eq!(doc.get("passed"), Some(&Value::Bool(false)));
    let Some(Value::Array(files)) = doc.get("files") else {
        panic!("no files array: {pretty}")
    };
    assert_eq!(files.len(), 2);
    assert_eq!(files[0].get("passed"), Some(&Value::Bool(true)));
    assert_eq!(files[1].get("passed"), Some(&Value::Bool(false)));
    let (code, out, _) = mllog([
        "check".as_ref(),
        "--format".as_ref(),
        "jsonl".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
    ]);
    assert_eq!(code, 1);
    assert_eq!(out.lines().count(), 2, "{out}");
    for l in out.lines() {
        json_tool(l);
        assert_eq!(parse_json(l).get("schema_version"), Some(&Value::Int(1)));
    }

    let runs = plot_inputs(tmp.path());
    let mut args: Vec<&std::ffi::OsStr> =
        vec!["summary".as_ref(), "--format".as_ref(), "json".as_ref()];
    args.extend(runs.iter().map(|p| p.as_os_str()));
    let (code, out, _) = mllog(&args);
    assert_eq!(code, 0, "{out}");
    json_tool(&out);
    let doc = parse_json(&out);
    assert_eq!(doc.get("schema_version"), Some(&Value::Int(1)));
    let Some(Value::Array(files)) = doc.get("files") else {
        panic!("no files array: {out}")
    };
    assert_eq!(files.len(), 3);
    args[2] = "jsonl".as_ref();
    let (_, out, _) = mllog(&args);
    assert_eq!(out.lines().count(), 3, "{out}");

    let dir = write_benchmark(tmp.path(), "sys_c", &ten_runs(false, false));
    let (code, out, _) = mllog([
        "score".as_ref(),
        "--ruleset".as_ref(),
        "6.1.0".as_ref(),
        "--format".as_ref(),
        "csv".as_ref(),
        dir.as_os_str(),
    ]);
    assert_eq!(code, 0, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("system,benchmark,folder,runs,"),
        "{out}"
    );
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[1].starts_with("sys_c,llama2_70b_lora,"), "{out}");
    let score: f64 = lines[1].rsplit(',').next().unwrap().parse().unwrap();
    let ours = score_dir(&dir, ScoreOptions::default()).unwrap()[0]
        .score
        .unwrap();
    assert!(close(score, ours), "{score} vs {ours}");
    let (_, out, _) = mllog([
        "score".as_ref(),
        "--ruleset".as_ref(),
        "6.1.0".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        dir.as_os_str(),
    ]);
    json_tool(&out);
    assert!(matches!(parse_json(&out).get("benchmarks"), Some(Value::Array(b)) if b.len() == 1));
}

/// A JSON document parsed with the crate's own MLLOG value parser.
fn parse_json(text: &str) -> Value {
    let line = format!(
        ":::MLLOG {{\"time_ms\": 0, \"key\": \"k\", \"value\": {}, \"metadata\": {{}}}}",
        text.trim().replace('\n', " ")
    );
    parse_line(&line).unwrap().unwrap().value
}

/// `mllog check` text: the offending line as a snippet with the key underlined, `= rule:` and
/// `help:` lines, a closing line for several files; colour only when asked for or on a
/// terminal, never under NO_COLOR unless `--color always`.
#[test]
fn cli_check_diagnostics_and_colour() {
    let tmp = tempfile::tempdir().unwrap();
    let good = example_log(Ruleset::V6_1_0, Benchmark::Llama31_8b, Division::Closed).unwrap();
    let beta = good
        .lines()
        .find(|l| l.contains("\"opt_adamw_beta_2\""))
        .unwrap();
    let lineno = good.lines().position(|l| l == beta).unwrap() + 1;
    let bad = tmp.path().join("bad.log");
    std::fs::write(&bad, good.replace(beta, &beta.replace("0.95", "0.999"))).unwrap();
    let no_init = tmp.path().join("no_init.log");
    let init_start = good.lines().find(|l| l.contains("\"init_start\"")).unwrap();
    std::fs::write(&no_init, good.replace(&format!("{init_start}\n"), "")).unwrap();
    let run = |env: &[(&str, &str)], extra: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_mllog"));
        c.env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c
            .arg("check")
            .args(extra)
            .arg(&bad)
            .arg(&no_init)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        String::from_utf8(o.stdout).unwrap()
    };
    let plain = run(&[], &[]);
    assert!(!plain.contains('\x1b'), "colour into a pipe:\n{plain}");
    let snippet = format!("{lineno} | {}", &beta.replace("0.95", "0.999")[..40]);
    assert!(plain.contains(&snippet), "no snippet {snippet:?}:\n{plain}");
    let under = plain
        .lines()
        .skip_while(|l| !l.starts_with(&format!("{lineno} |")))
        .nth(1)
        .unwrap();
    let col = beta.find("\"opt_adamw_beta_2\"").unwrap();
    let width = lineno.to_string().len() + 3;
    assert_eq!(
        under.find('^'),
        Some(width + col),
        "the key is underlined:\n{plain}"
    );
    assert_eq!(under.matches('^').count(), "\"opt_adamw_beta_2\"".len());
    assert!(
        plain.contains("= rule: CHECK v['value'] == 0.95 (training_6.1.0/closed_llama31_8b.yaml)"),
        "{plain}"
    );
    assert!(
        plain.contains("= help: the rule wants `\"value\": 0.95` for `opt_adamw_beta_2`"),
        "{plain}"
    );
    assert!(
        plain.contains("= help: log `init_start` before line"),
        "{plain}"
    );
    assert!(
        plain
            .trim_end()
            .ends_with("error: 2 of 2 files not compliant (3 errors, 0 warnings)"),
        "{plain}"
    );
    let forced = run(&[("CLICOLOR_FORCE", "1")], &[]);
    assert!(forced.contains("\x1b["), "CLICOLOR_FORCE gives colour");
    let no_color = run(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")], &[]);
    assert!(!no_color.contains('\x1b'), "NO_COLOR wins:\n{no_color}");
    assert_eq!(no_color, plain);
    let always = run(&[("NO_COLOR", "1")], &["--color", "always"]);
    assert!(always.contains("\x1b["), "--color always");
    let never = run(&[("CLICOLOR_FORCE", "1")], &["--color=never"]);
    assert_eq!(never, plain);
}

/// `--plot` with an extension the plotter does not write is a usage error naming the
/// supported ones, and writes nothing; the library refuses it too.
#[test]
fn cli_plot_rejects_unsupported_extensions() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = plot_inputs(tmp.path());
    for name in ["out.jpg", "out.PDF", "out"] {
        let out = tmp.path().join(name);
        let (code, stdout, err) = mllog([
            "summary".as_ref(),
            "--plot".as_ref(),
            out.as_os_str(),
            runs[0].as_os_str(),
        ]);
        assert_eq!(code, 2, "{name}: {stdout}{err}");
        assert!(err.contains("supported are .svg, .png"), "{err}");
        assert!(stdout.is_empty(), "nothing is summarised: {stdout}");
        assert!(!out.exists(), "{name} was written");
    }
    let (code, _, err) = mllog([
        "summary".as_ref(),
        "--plot".as_ref(),
        tmp.path().join("ok.SVG").as_os_str(),
        runs[0].as_os_str(),
    ]);
    assert_eq!(code, 0, "{err}");
    let r = summarize_file(&runs[0]).unwrap();
    let e = mllog_cli::plot::write_plot(&[r], &tmp.path().join("lib.jpg")).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(!tmp.path().join("lib.jpg").exists());
}

/// Step-time statistics are over steps: each `tracked_stats` record weighs `metadata.steps`.
/// A log without `steps` is summarised per record, and the text says so.
#[test]
fn cli_summary_step_times_are_over_steps() {
    let tmp = tempfile::tempdir().unwrap();
    // Two blocks: 240 steps of 0.1 s, then 10 steps of 1 s. Per record the median would be
    // 0.55 s; per step it is 0.1 s, and p99 (rank 248 of 250) falls in the slow block.
    let rec = |t: i64, key: &str, value: &str, md: &str| {
        format!(
            ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {t}, \"event_type\": \"POINT_IN_TIME\", \
             \"key\": \"{key}\", \"value\": {value}, \"metadata\": {{{md}}}}}\n"
        )
    };
    let mut log = rec(1, "submission_benchmark", "\"llama31_8b\"", "");
    log += &rec(
        2,
        "tracked_stats",
        "{\"train_step_time\": 0.1}",
        "\"steps\": 240",
    );
    log += &rec(
        3,
        "tracked_stats",
        "{\"train_step_time\": 1.0}",
        "\"steps\": 10",
    );
    let p = tmp.path().join("steps.log");
    std::fs::write(&p, &log).unwrap();
    let (code, out, _) = mllog(["summary".as_ref(), p.as_os_str()]);
    assert_eq!(code, 0);
    assert!(
        out.contains("step time: median 0.1000 s, p90 0.1000 s, p99 1.000 s over 250 steps (2 tracked_stats records)"),
        "{out}"
    );
    let (_, out, _) = mllog([
        "summary".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        p.as_os_str(),
    ]);
    let doc = parse_json(&out);
    let Some(Value::Array(files)) = doc.get("files") else {
        panic!("{out}")
    };
    assert_eq!(files[0].get("steps"), Some(&Value::Int(250)), "{out}");
    assert_eq!(
        files[0].get("p99_step_time_s").and_then(Value::as_f64),
        Some(1.0)
    );

    // Older logs: no `steps`.
    let old = tmp.path().join("old.log");
    std::fs::write(&old, gen_run(1, 8, 12.5, Kind::Converged, 0)).unwrap();
    let (_, out, _) = mllog(["summary".as_ref(), old.as_os_str()]);
    assert!(
        out.contains("over 32 tracked_stats records, not steps: the log does not say how many steps each covers"),
        "{out}"
    );

    // The layer's own log: the steps are the sum of its blocks' `metadata.steps`; the run's
    // own record (`overall`) counts them once more and is left out.
    let dry = tmp.path().join("dry.log");
    let (code, out, err) = mllog([
        "dry-run".as_ref(),
        "--benchmark".as_ref(),
        "llama31_8b".as_ref(),
        "--out".as_ref(),
        dry.as_os_str(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let logged: f64 = std::fs::read_to_string(&dry)
        .unwrap()
        .lines()
        .filter_map(|l| parse_line(l).ok().flatten())
        .filter(|r| r.key == "tracked_stats" && r.metadata.get("overall").is_none())
        .filter_map(|r| r.metadata.get("steps").and_then(Value::as_f64))
        .sum();
    let (_, out, _) = mllog([
        "summary".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        dry.as_os_str(),
    ]);
    let doc = parse_json(&out);
    let Some(Value::Array(files)) = doc.get("files") else {
        panic!("{out}")
    };
    let steps = files[0].get("steps").and_then(Value::as_f64).unwrap();
    assert_eq!(steps, logged, "{out}");
    assert!(
        steps
            > files[0]
                .get("num_step_times")
                .and_then(Value::as_f64)
                .unwrap()
    );
}

/// What a log says happened, counted apart from the summary: blocks (`block_stop`), the
/// samples at `run_stop`, and each `tracked_stats` record that describes a stretch of steps
/// (not the run's `overall` one, which describes them all again).
struct Counted {
    blocks: usize,
    block_records: usize,
    run_samples: Option<f64>,
    overall_throughput: Option<f64>,
}

fn count_records(text: &str) -> Counted {
    let mut c = Counted {
        blocks: 0,
        block_records: 0,
        run_samples: None,
        overall_throughput: None,
    };
    for r in text.lines().filter_map(|l| parse_line(l).ok().flatten()) {
        match &*r.key {
            "block_stop" => c.blocks += 1,
            "run_stop" if c.run_samples.is_none() => {
                c.run_samples = r.metadata.get("samples_count").and_then(Value::as_f64)
            }
            "tracked_stats" if r.metadata.get("overall") == Some(&Value::Bool(true)) => {
                c.overall_throughput = r.value.get("throughput").and_then(Value::as_f64)
            }
            "tracked_stats"
                if r.value
                    .get("train_step_time")
                    .and_then(Value::as_f64)
                    .is_some() =>
            {
                c.block_records += 1
            }
            _ => {}
        }
    }
    c
}

/// The summary counts what happened, once: on the layer's own logs (a dry run of every
/// benchmark) the steps are the run's samples over the global batch size and there is one
/// step-time record per block; on every published log of the corpus, one per record that
/// describes steps.
#[test]
fn summary_counts_each_step_once() {
    let tmp = tempfile::tempdir().unwrap();
    for (benchmark, gbs) in [
        ("llama31_8b", 32.0),
        ("llama2_70b_lora", 8.0),
        ("flux1", 1024.0),
    ] {
        let dry = tmp.path().join(format!("{benchmark}.log"));
        let (code, out, err) = mllog([
            "dry-run".as_ref(),
            "--benchmark".as_ref(),
            benchmark.as_ref(),
            "--gbs".as_ref(),
            gbs.to_string().as_ref(),
            "--out".as_ref(),
            dry.as_os_str(),
        ]);
        assert_eq!(code, 0, "{out}{err}");
        let counted = count_records(&std::fs::read_to_string(&dry).unwrap());
        let run = summarize_file(&dry).unwrap();
        let stats = run.step_stats().expect("the layer logs step times");
        assert_eq!(
            stats.records, counted.blocks,
            "{benchmark}: one record per block"
        );
        let samples = counted.run_samples.expect("run_stop's samples_count");
        assert_eq!(stats.steps, Some((samples / gbs) as u64), "{benchmark}");
        assert_eq!(
            run.logged_throughput, counted.overall_throughput,
            "{benchmark}"
        );
        let (_, text, _) = mllog(["summary".as_ref(), dry.as_os_str()]);
        let said = format!(
            "over {} steps ({} tracked_stats",
            (samples / gbs) as u64,
            counted.blocks
        );
        assert!(text.contains(&said), "{benchmark}: {said:?} in\n{text}");
    }
    let Some(corpus) = common::corpus("", "the summary's counts on the published logs") else {
        return;
    };
    let mut logs = Vec::new();
    let mut dirs = vec![corpus];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
            let p = entry.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "txt")
                && !p.to_string_lossy().contains("/systems/")
            {
                logs.push(p);
            }
        }
    }
    assert!(logs.len() > 150, "{} logs", logs.len());
    for log in logs {
        let Ok(text) = std::fs::read_to_string(&log) else {
            continue;
        };
        if !text.contains(":::MLLOG") {
            continue;
        }
        let counted = count_records(&text);
        let run = summarize_file(&log).unwrap();
        let records = run.step_stats().map_or(0, |s| s.records);
        assert_eq!(records, counted.block_records, "{}", log.display());
    }
}

/// The progress bar: drawn on stderr when it is a terminal (a pseudo-terminal from
/// util-linux `script`) once the delay has passed, never into a pipe, never under
/// `MLLOG_PROGRESS=0`; the output on stdout is the same either way.
#[test]
fn cli_progress_bar_only_on_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let files = plot_inputs(tmp.path());
    let exe = env!("CARGO_BIN_EXE_mllog");
    // In a pipe, with no delay: nothing on stderr.
    let o = Command::new(exe)
        .env("MLLOG_PROGRESS_DELAY_MS", "0")
        .arg("summary")
        .args(&files)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped the terminal half: no `script` (util-linux)");
        return;
    }
    let on_tty = |progress: Option<&str>| {
        // stdout goes to a file; only stderr reaches the pseudo-terminal.
        let out = tmp.path().join("stdout.txt");
        let cmd = format!(
            "{exe} summary {} > {}",
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(" "),
            out.display()
        );
        let mut c = Command::new("script");
        c.args(["-qfec", &cmd, "/dev/null"])
            .env("MLLOG_PROGRESS_DELAY_MS", "0");
        if let Some(p) = progress {
            c.env("MLLOG_PROGRESS", p);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{o:?}");
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            std::fs::read_to_string(out).unwrap(),
        )
    };
    let (tty, stdout) = on_tty(None);
    assert!(tty.contains("result_"), "no bar naming the file: {tty:?}");
    assert!(tty.contains("\x1b[2K"), "the bar is cleared: {tty:?}");
    assert!(stdout.contains("llama2_70b_lora"), "{stdout}");
    let (tty_off, stdout_off) = on_tty(Some("0"));
    assert!(
        !tty_off.contains("result_"),
        "MLLOG_PROGRESS=0: {tty_off:?}"
    );
    assert_eq!(stdout_off, stdout);
}

/// `mllog score` shows the bar too, naming the benchmark folder it scores, on a terminal only;
/// its stdout and exit status are the same with and without it.
#[test]
fn cli_score_progress_bar_only_on_a_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("results/sys_p/llama2_70b_lora");
    std::fs::create_dir_all(&folder).unwrap();
    plot_inputs(&folder);
    let exe = env!("CARGO_BIN_EXE_mllog");
    let dir = tmp.path().display().to_string();
    let o = Command::new(exe)
        .env("MLLOG_PROGRESS_DELAY_MS", "0")
        .args(["score", "--ruleset", "6.1.0", &dir])
        .output()
        .unwrap();
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let piped = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(piped.contains("llama2_70b_lora"), "{piped}");
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped the terminal half: no `script` (util-linux)");
        return;
    }
    let on_tty = |progress: &str| {
        let out = tmp.path().join("stdout.txt");
        let cmd = format!("{exe} score --ruleset 6.1.0 {dir} > {}", out.display());
        let o = Command::new("script")
            .args(["-qfec", &cmd, "/dev/null"])
            .env("MLLOG_PROGRESS_DELAY_MS", "0")
            .env("MLLOG_PROGRESS", progress)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            std::fs::read_to_string(out).unwrap(),
        )
    };
    let (code, tty, stdout) = on_tty("1");
    assert_eq!(code, o.status.code());
    assert!(
        tty.contains("sys_p/llama2_70b_lora"),
        "no bar naming the folder: {tty:?}"
    );
    assert!(tty.contains("\x1b[2K"), "the bar is cleared: {tty:?}");
    assert_eq!(stdout, piped);
    let (_, tty_off, stdout_off) = on_tty("0");
    assert!(!tty_off.contains("sys_p"), "MLLOG_PROGRESS=0: {tty_off:?}");
    assert_eq!(stdout_off, piped);
}

/// `package` and `dry-run` have the same JSON document shape as the other commands.
#[test]
fn cli_package_and_dry_run_json() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = plot_inputs(tmp.path());
    let sub = tmp.path().join("sub");
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "package".as_ref(),
        "--system".as_ref(),
        "sys_j".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        "--out".as_ref(),
        sub.as_os_str(),
    ];
    args.extend(runs.iter().map(|p| p.as_os_str()));
    let (code, out, err) = mllog(&args);
    assert!(code == 0 || code == 1, "{out}{err}");
    json_tool(&out);
    let doc = parse_json(&out);
    assert_eq!(doc.get("schema_version"), Some(&Value::Int(1)));
    assert_eq!(doc.get("ok"), Some(&Value::Bool(code == 0)));
    let Some(Value::Array(b)) = doc.get("benchmarks") else {
        panic!("{out}")
    };
    assert_eq!(
        b[0].get("benchmark").and_then(Value::as_str),
        Some("llama2_70b_lora")
    );
    let Some(Value::Array(files)) = b[0].get("files") else {
        panic!("{out}")
    };
    assert_eq!(files.len(), 3);

    let log = tmp.path().join("dry.log");
    let (code, out, err) = mllog([
        "dry-run".as_ref(),
        "--benchmark".as_ref(),
        "flux1".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        "--out".as_ref(),
        log.as_os_str(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    json_tool(&out);
    let doc = parse_json(&out);
    assert_eq!(doc.get("command").and_then(Value::as_str), Some("dry-run"));
    assert_eq!(doc.get("converged"), Some(&Value::Bool(true)));
    let Some(Value::Array(files)) = doc.get("files") else {
        panic!("{out}")
    };
    assert_eq!(files[0].get("passed"), Some(&Value::Bool(true)));
}

/// A log whose interval ends carry the layer's `wall_clock_step_ms`: `mllog summary` shows
/// the largest step under its table and in JSON; a log without it shows neither.
#[test]
fn summary_shows_a_wall_clock_step() {
    let dir = tempfile::tempdir().unwrap();
    let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
    let plain = dir.path().join("plain.txt");
    std::fs::write(&plain, &log).unwrap();
    let stepped = dir.path().join("stepped.txt");
    let text: String = log
        .lines()
        .map(|l| {
            if l.contains(r#""key": "run_stop""#) {
                l.replace(
                    r#""metadata": {"#,
                    r#""metadata": {"wall_clock_step_ms": -1500.25, "#,
                )
            } else {
                l.to_owned()
            }
        })
        .map(|l| l + "\n")
        .collect();
    std::fs::write(&stepped, text).unwrap();
    let summary = |args: &[&str], file: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_mllog"))
            .arg("summary")
            .args(args)
            .arg(file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let shown = summary(&[], &stepped);
    assert!(
        shown.contains("the wall clock stepped -1500.250 ms during the run"),
        "{shown}"
    );
    let json: serde_json::Value =
        serde_json::from_str(summary(&["--format", "jsonl"], &stepped).trim()).unwrap();
    assert_eq!(
        json["wall_clock_step_ms"],
        serde_json::json!(-1500.25),
        "{json}"
    );
    assert!(!summary(&[], &plain).contains("wall clock"));
    assert!(!summary(&["--format", "jsonl"], &plain).contains("wall_clock_step_ms"));
}
