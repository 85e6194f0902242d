//! `mllog verify` against the official tools: every real submitter folder of the corpus
//! (`$MLLOG_CORPUS/submissions/<round>/<Submitter>`), and mutations of copies of them, are
//! reviewed by MLCommons' `package_checker` and `result_summarizer` (through `$MLLOG_PYTHON`)
//! and by `mllog verify`; every verdict, scaling factor, final score and table cell must agree.
//! The official tools rewrite `scaling.json`, so they only ever run on copies in a tempdir.
//!
//! Bad input (unreadable and looping paths, names that are not UTF-8, huge and binary files,
//! malformed JSON) is tested on generated folders, without the corpus.

mod common;
#[path = "support/review.rs"]
mod review;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use mllog_core::compliance::{example_log, Division, Ruleset};
use mllog_core::record::{parse_line, Value as LogValue};
use mllog_core::Benchmark;
use serde_json::Value;

use common::mllog;
use review::{assert_agree, close, official, ours, py, read_csv, same_cell, Official, Ours};
use support::{copy_dir, each};

/// The submissions corpus, or the one skip line without it (the official tools are required:
/// `common::python` fails the test without them).
fn oracle(what: &str) -> Option<PathBuf> {
    let corpus = common::corpus("submissions", what)?;
    common::python();
    Some(corpus)
}

/// The MANIFEST's factors and final scores (the committed record of the official runs).
fn manifest(subs: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(subs.join("MANIFEST.tsv")).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split('\t').collect();
    lines
        .map(|l| {
            head.iter()
                .map(|h| h.to_string())
                .zip(l.split('\t').map(str::to_string))
                .collect()
        })
        .collect()
}

fn submitters(subs: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for round in ["5.0", "5.1"] {
        let mut v: Vec<PathBuf> = std::fs::read_dir(subs.join(round))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        v.sort();
        out.extend(v.into_iter().map(|p| (format!("{round}.0"), p)));
    }
    out
}

/// Every corpus submitter folder, reviewed alone, then each round's, reviewed in one pass
/// (`a_round_agrees`). The round's review is held to the official runs made on each submitter
/// alone, which are most of what this test costs.
#[test]
fn every_corpus_submitter_agrees_with_the_official_tools_alone_and_in_its_round() {
    let Some(subs) = oracle(
        "mllog verify on every corpus submitter folder, and on each round of them, against \
         package_checker and result_summarizer",
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let folders = submitters(&subs);
    assert!(folders.len() >= 10, "{folders:?}");
    let rows = manifest(&subs);
    // Per submitter folder: the copy the official tools ran on, and what they said.
    let officials = Mutex::new(BTreeMap::new());
    each(&folders, |(ruleset, dir)| {
        let name = format!("{}-{}", ruleset, dir.file_name().unwrap().to_string_lossy());
        let copy = tmp.path().join(&name).join("sub");
        copy_dir(dir, &copy);
        let before = snapshot(dir);
        let us = ours(dir, ruleset);
        assert_eq!(snapshot(dir), before, "verify wrote into {}", dir.display());
        let off = official(&copy, ruleset, &tmp.path().join(&name).join("work"));
        assert_agree(&name, &off, &us);
        officials
            .lock()
            .unwrap()
            .insert(dir.clone(), (copy.clone(), off));
        // --set-scaling, on a copy without the committed files, writes what the package
        // checker leaves, byte for byte.
        let bare = tmp.path().join(&name).join("bare");
        copy_dir(dir, &bare);
        for (p, _) in snapshot(&bare) {
            if p.file_name().unwrap() == "scaling.json" {
                std::fs::remove_file(p).unwrap();
            }
        }
        let (code, _, err) = mllog([
            "verify".as_ref(),
            bare.as_os_str(),
            "--ruleset".as_ref(),
            ruleset.as_ref(),
            "--set-scaling".as_ref(),
        ]);
        assert_eq!(code, us.code, "{name}: {err}");
        let scaling_files = |root: &Path| -> Vec<(PathBuf, Vec<u8>)> {
            snapshot(root)
                .into_iter()
                .filter(|(p, _)| p.file_name().unwrap() == "scaling.json")
                .map(|(p, b)| (p.strip_prefix(root).unwrap().to_path_buf(), b))
                .collect()
        };
        assert_eq!(
            scaling_files(&bare),
            scaling_files(&copy),
            "{name}: scaling.json"
        );
        // And the MANIFEST's record of the official runs.
        let submitter = dir.file_name().unwrap().to_string_lossy().into_owned();
        for b in us.json["benchmarks"].as_array().unwrap() {
            let row = rows
                .iter()
                .find(|r| {
                    r["submitter"] == submitter
                        && r["ruleset"] == *ruleset
                        && r["system"] == b["system"].as_str().unwrap()
                        && r["benchmark"] == b["benchmark"].as_str().unwrap()
                })
                .unwrap_or_else(|| panic!("{name}: no MANIFEST row for {b}"));
            let f = |k: &str| row[k].parse::<f64>().unwrap_or(1.0);
            assert!(close(
                b["olympic_mean"].as_f64().unwrap(),
                f("official_unscaled_score")
            ));
            assert!(close(
                b["scaling_factor"].as_f64().unwrap(),
                f("official_scaling_factor")
            ));
            assert!(close(
                b["score"].as_f64().unwrap(),
                f("official_final_score")
            ));
            let accepted = row["package_checker_verdict"].contains("1 run non-compliant");
            assert_eq!(
                b["runs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|r| r["compliant"] == false)
                    .count(),
                usize::from(accepted),
                "{name}"
            );
        }
        // Without --ruleset: the round, inferred with its evidence, or a refusal that says
        // to pass --ruleset.
        // When another ruleset is inferred, it must give the same verdicts and scores.
        let (code, out, err) = mllog(["verify".as_ref(), dir.as_os_str()]);
        if code == 2 {
            // Refused: the candidates named, the folder's own round among them.
            let one_of = err
                .split("(one of ")
                .nth(1)
                .and_then(|t| t.split(')').next())
                .unwrap_or_else(|| panic!("{name}: no candidates: {err}"));
            assert!(
                err.contains("the ruleset cannot be inferred")
                    && err.contains("pass --ruleset X.Y.Z")
                    && one_of.split(", ").any(|r| r == ruleset),
                "{name}: {err}"
            );
        } else {
            assert!(out.starts_with("ruleset "), "{name}: {out}");
            assert!(
                out.contains(": inferred") && out.contains("evidence: "),
                "{name}: {out}"
            );
            let (_, json, _) = mllog([
                "verify".as_ref(),
                dir.as_os_str(),
                "--format".as_ref(),
                "json".as_ref(),
            ]);
            let inferred: Value = serde_json::from_str(&json).unwrap();
            assert_eq!(code, us.code, "{name}: {out}");
            let pick = |v: &Value| -> Vec<(Value, Value, Value)> {
                v["benchmarks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| (b["folder"].clone(), b["passed"].clone(), b["score"].clone()))
                    .collect()
            };
            assert_eq!(pick(&inferred), pick(&us.json), "{name}: {out}");
        }
    });
    let officials = officials.into_inner().unwrap();
    for (round, ruleset) in [("5.0", "5.0.0"), ("5.1", "5.1.0")] {
        a_round_agrees(&subs, round, ruleset, &officials, tmp.path());
    }
}

/// Every file's path and bytes under `dir`.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// One mutation of a copy of a corpus submitter folder.
struct Mutation {
    name: &'static str,
    base: &'static str,
    ruleset: &'static str,
    apply: fn(&Path, &Path),
}

fn only_dir(p: &Path) -> PathBuf {
    let mut v: Vec<PathBuf> = std::fs::read_dir(p)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v.remove(0)
}

/// `results/<system>` of a submitter folder with one system.
fn system_dir(sub: &Path) -> PathBuf {
    only_dir(&sub.join("results"))
}

fn system_json(sub: &Path) -> PathBuf {
    let name = system_dir(sub).file_name().unwrap().to_owned();
    sub.join("systems")
        .join(format!("{}.json", name.to_string_lossy()))
}

/// The `result_*.txt` of a benchmark folder, sorted (corpus folders number them from 0 or
/// from 01).
fn results_in(b: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(b)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("result_") && n.ends_with(".txt")
        })
        .collect();
    v.sort();
    v
}

/// The second run of a folder becomes a copy of the first: the same seed twice.
fn repeat_seed_in(b: &Path) {
    let r = results_in(b);
    std::fs::copy(&r[0], &r[1]).unwrap();
}

fn repeat_seed(sub: &Path) {
    repeat_seed_in(&system_dir(sub).join("retinanet"));
}

/// Every run of `b` converges at `factor` times the samples it logs.
fn faster_runs(b: &Path, factor: f64) {
    for p in results_in(b) {
        let text = std::fs::read_to_string(&p).unwrap();
        let mut out = String::new();
        for line in text.split_inclusive('\n') {
            match line.split_once(":::MLLOG ") {
                Some((pre, body)) if body.contains("\"eval_accuracy\"") => {
                    let mut j: Value = serde_json::from_str(body.trim_end()).unwrap();
                    if let Some(s) = j["metadata"]["samples_count"].as_f64() {
                        j["metadata"]["samples_count"] = Value::from((s * factor).round() as i64);
                    }
                    out.push_str(&format!(
                        "{pre}:::MLLOG {}\n",
                        serde_json::to_string(&j).unwrap()
                    ));
                }
                _ => out.push_str(line),
            }
        }
        std::fs::write(&p, out).unwrap();
    }
}

const MUTATIONS: &[Mutation] = &[
    Mutation {
        name: "runs faster than the RCP allows",
        base: "5.0/AMD",
        ruleset: "5.0.0",
        apply: |sub, _| faster_runs(&system_dir(sub).join("llama2_70b_lora"), 0.6),
    },
    Mutation {
        name: "runs faster than the RCP allows, with the rcp-bypass file",
        base: "5.0/AMD",
        ruleset: "5.0.0",
        apply: |sub, _| {
            faster_runs(&system_dir(sub).join("llama2_70b_lora"), 0.6);
            std::fs::write(system_dir(sub).join("package_checker_params"), "rcp-bypass").unwrap();
        },
    },
    Mutation {
        name: "a run removed",
        base: "5.1/Lenovo",
        ruleset: "5.1.0",
        apply: |sub, _| {
            let last = results_in(&system_dir(sub).join("rgat")).pop().unwrap();
            std::fs::remove_file(last).unwrap()
        },
    },
    Mutation {
        name: "a seed repeated",
        base: "5.1/Lenovo",
        ruleset: "5.1.0",
        apply: |sub, _| repeat_seed(sub),
    },
    Mutation {
        name: "a seed repeated, with the seed checker's bypass file",
        base: "5.1/Lenovo",
        ruleset: "5.1.0",
        apply: |sub, _| {
            repeat_seed(sub);
            let p = system_dir(sub).join("retinanet/package_checker_params");
            std::fs::write(p, "seed-checker-bypass").unwrap();
        },
    },
    Mutation {
        name: "a seed repeated, the bypass line ending in a newline (not honoured)",
        base: "5.1/Lenovo",
        ruleset: "5.1.0",
        apply: |sub, _| {
            repeat_seed(sub);
            let p = system_dir(sub).join("package_checker_params");
            std::fs::write(p, "seed-checker-bypass\n").unwrap();
        },
    },
    Mutation {
        name: "a system field missing",
        base: "5.1/Lenovo",
        ruleset: "5.1.0",
        apply: |sub, _| {
            let p = system_json(sub);
            let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            v.as_object_mut().unwrap().remove("cooling");
            std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
        },
    },
    Mutation {
        name: "a misnamed file",
        base: "5.1/Lenovo",
        ruleset: "5.1.0",
        apply: |sub, _| {
            let r = results_in(&system_dir(sub).join("retinanet"));
            let name = r[2]
                .file_name()
                .unwrap()
                .to_string_lossy()
                .replace('_', "-");
            std::fs::rename(&r[2], r[2].with_file_name(name)).unwrap();
        },
    },
    Mutation {
        name: "two non-compliant runs",
        base: "5.0/tinycorp",
        ruleset: "5.0.0",
        apply: |sub, _| {
            let p = results_in(&system_dir(sub).join("retinanet")).remove(0);
            let t = std::fs::read_to_string(&p).unwrap();
            let kept: String = t
                .lines()
                .filter(|l| !l.contains("\"run_stop\""))
                .map(|l| format!("{l}\n"))
                .collect();
            std::fs::write(&p, kept).unwrap();
        },
    },
    Mutation {
        name: "a second system, described, with an empty results folder (a row of empty cells)",
        base: "5.1/Lenovo",
        ruleset: "5.1.0",
        apply: |sub, _| {
            let name = format!(
                "{}-spare",
                system_dir(sub).file_name().unwrap().to_string_lossy()
            );
            std::fs::create_dir(sub.join("results").join(&name)).unwrap();
            let json = sub.join("systems").join(format!("{name}.json"));
            std::fs::copy(system_json(sub), json).unwrap();
            repeat_seed(sub);
        },
    },
    Mutation {
        name: "an open-division system (no seed or RCP check, the committed factor)",
        base: "5.0/AMD",
        ruleset: "5.0.0",
        apply: |sub, _| {
            let p = system_json(sub);
            let mut v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            v["division"] = "open".into();
            std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
            repeat_seed_in(&system_dir(sub).join("llama2_70b_lora"));
        },
    },
];

#[test]
fn mutated_copies_agree_with_the_official_tools() {
    let Some(subs) = oracle(
        "mllog verify on mutated copies of corpus folders against package_checker and \
         result_summarizer",
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    each(MUTATIONS, |m| {
        let root = tmp
            .path()
            .join(m.name.replace([' ', ',', '(', ')', '\''], "_"));
        let ours_dir = root.join("ours");
        copy_dir(&subs.join(m.base), &ours_dir);
        (m.apply)(&ours_dir, &subs);
        let official_dir = root.join("official");
        copy_dir(&ours_dir, &official_dir);
        let us = ours(&ours_dir, m.ruleset);
        let off = official(&official_dir, m.ruleset, &root.join("work"));
        assert_agree(m.name, &off, &us);
        assert!(
            !off.success
                || m.name.contains("bypass file")
                || m.name.contains("rcp-bypass")
                || m.name.contains("open-division"),
            "{}: the mutation should fail review:\n{}",
            m.name,
            off.log
        );
    });
}

/// A benchmark the ruleset does not allow: the package checker skips it with a warning, and
/// the summarizer stops with an exception on it; verify skips it, says both, and scores the
/// rest.
#[test]
fn a_benchmark_the_ruleset_does_not_allow() {
    let Some(subs) = oracle(
        "a benchmark folder the ruleset does not allow, against package_checker and \
         result_summarizer",
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("ours");
    copy_dir(&subs.join("5.1/Lenovo"), &sub);
    copy_dir(
        &subs.join("5.0/tinycorp/results/tinybox_green/bert"),
        &system_dir(&sub).join("bert"),
    );
    let copy = tmp.path().join("official");
    copy_dir(&sub, &copy);
    let us = ours(&sub, "5.1.0");
    let off = official(&copy, "5.1.0", &tmp.path().join("work"));
    assert_eq!(off.skipped, vec!["bert".to_string()], "{}", off.log);
    assert!(off.summarizer_crashed, "{}", off.summarizer_output);
    assert_agree("bert under 5.1.0", &off, &us);
    assert!(
        us.text.contains("Skipping benchmark: bert") && us.text.contains("AssertionError"),
        "{}",
        us.text
    );
    // The other folders still have their final scores.
    let scored = us.json["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["score"].is_number())
        .count();
    assert_eq!(scored, 2, "{}", us.text);
}

/// Where the official package checker stops with an exception (a system description that is
/// not JSON, a system without one), verify names the path and reviews the rest.
#[test]
fn where_the_package_checker_crashes_verify_says_why() {
    let Some(subs) =
        oracle("inputs that crash the official package checker (malformed or missing system JSON)")
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    type Mutate = fn(&Path);
    let cases: [(&str, Mutate); 2] = [
        ("malformed", |sub| {
            std::fs::write(system_json(sub), "{\"submitter\": \"Lenovo\",").unwrap()
        }),
        ("missing", |sub| {
            std::fs::remove_file(system_json(sub)).unwrap()
        }),
    ];
    each(&cases, |(name, apply)| {
        let sub = tmp.path().join(name).join("ours");
        copy_dir(&subs.join("5.1/Lenovo"), &sub);
        apply(&sub);
        let copy = tmp.path().join(name).join("official");
        copy_dir(&sub, &copy);
        let json_path = system_json(&sub).display().to_string();
        let off = official(&copy, "5.1.0", &tmp.path().join(name).join("work"));
        assert!(
            off.crashed && !off.success,
            "{name}: {}\n{}",
            off.log,
            off.stderr
        );
        let us = ours(&sub, "5.1.0");
        assert_eq!(us.code, 1, "{name}: {}", us.text);
        assert!(us.text.contains(&json_path), "{name}: {}", us.text);
        // The review went on: both benchmark folders have a verdict, and no score (the
        // summarizer gives none without a readable description), with why.
        let b = us.json["benchmarks"].as_array().unwrap();
        assert_eq!(b.len(), 2, "{name}");
        assert!(
            b.iter().all(|b| b["score"].is_null()
                && b["olympic_mean"].is_number()
                && b["no_score"]
                    .as_str()
                    .is_some_and(|w| w.contains(&json_path))),
            "{name}: {}",
            us.text
        );
    });
}

// ---------------------------------------------------------------------------------------------
// Bad input, on generated folders.

/// A compliant flux1 log (6.1.0, closed) with its own seed.
fn flux1_log(seed: i64) -> String {
    let ex = example_log(Ruleset::V6_1_0, Benchmark::Flux1, Division::Closed).unwrap();
    let mut out = String::new();
    for line in ex.lines() {
        let mut r = parse_line(line).unwrap().unwrap();
        if r.key == "seed" {
            r.value = LogValue::Int(seed as i128);
        }
        r.encode(&mut out);
        out.push('\n');
    }
    out
}

const SYSTEM: &str = r#"{"submitter": "Org", "division": "open", "status": "Available on-premise",
 "system_name": "sys", "number_of_nodes": "1", "host_processors_per_node": "2",
 "host_processor_model_name": "cpu", "host_processor_core_count": "8",
 "host_processor_vcpu_count": "16", "host_processor_frequency": "", "host_processor_caches": "",
 "host_processor_interconnect": "", "host_memory_capacity": "", "host_storage_type": "",
 "host_storage_capacity": "", "host_networking": "", "host_networking_topology": "",
 "host_memory_configuration": "", "accelerators_per_node": "8", "accelerator_model_name": "gpu",
 "accelerator_host_interconnect": "", "accelerator_frequency": "",
 "accelerator_on-chip_memories": "", "accelerator_memory_configuration": "",
 "accelerator_memory_capacity": "", "accelerator_interconnect": "",
 "accelerator_interconnect_topology": "", "cooling": "", "hw_notes": "", "framework": "fw",
 "other_software_stack": "", "operating_system": "", "sw_notes": ""}"#;

/// A submission with two systems of ten flux1 runs each (open division: no RCP table is
/// needed for the example's batch size).
fn generated(root: &Path) -> PathBuf {
    let sub = root.join("sub");
    for sys in ["a", "b"] {
        let b = sub.join("results").join(sys).join("flux1");
        std::fs::create_dir_all(&b).unwrap();
        for i in 0..10 {
            std::fs::write(b.join(format!("result_{i}.txt")), flux1_log(100 + i)).unwrap();
        }
        std::fs::create_dir_all(sub.join("systems")).unwrap();
        std::fs::write(
            sub.join("systems").join(format!("{sys}.json")),
            SYSTEM.replace("\"sys\"", &format!("\"{sys}\"")),
        )
        .unwrap();
    }
    sub
}

fn verify_json(sub: &Path) -> (i32, Value, String) {
    let (code, out, err) = mllog([
        "verify".as_ref(),
        sub.as_os_str(),
        "--ruleset".as_ref(),
        "6.1.0".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ]);
    assert!(!err.contains("panicked"), "{err}");
    (code, serde_json::from_str(&out).unwrap(), err)
}

fn messages_about(v: &Value, path: &Path) -> Vec<String> {
    let p = path.display().to_string();
    let mut all = Vec::new();
    let mut push = |list: &Value| {
        for x in list.as_array().into_iter().flatten() {
            if x["path"].as_str().is_some_and(|q| q == p) {
                all.push(x["message"].as_str().unwrap().to_string());
            }
        }
    };
    push(&v["problems"]);
    for s in v["systems"].as_array().unwrap() {
        push(&s["problems"]);
    }
    for b in v["benchmarks"].as_array().unwrap() {
        push(&b["problems"]);
    }
    all
}

fn scored(v: &Value, system: &str) -> bool {
    v["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["system"] == system && b["score"].is_number())
}

#[test]
fn a_generated_submission_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = generated(tmp.path());
    let (code, v, err) = verify_json(&sub);
    assert_eq!(code, 0, "{v:#}\n{err}");
    assert_eq!(v["command"], "verify");
    assert!(scored(&v, "a") && scored(&v, "b"));
    let (code, text, _) = mllog([
        "verify".as_ref(),
        sub.as_os_str(),
        "--ruleset".as_ref(),
        "6.1.0".as_ref(),
    ]);
    assert_eq!(code, 0);
    assert!(text.contains("a/flux1: PASSES REVIEW"), "{text}");
    assert!(
        text.contains("PASSES REVIEW: 2 benchmark folders reviewed"),
        "{text}"
    );
    // The summarizer's detailed table: its columns, a row per system, the score in it.
    let (code, csv, _) = mllog([
        "verify".as_ref(),
        sub.as_os_str(),
        "--ruleset".as_ref(),
        "6.1.0".as_ref(),
        "--format".as_ref(),
        "csv".as_ref(),
    ]);
    assert_eq!(code, 0);
    let rows = read_csv(&csv);
    assert_eq!(rows.len(), 2, "{csv}");
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(
        header,
        mllog_core::results::verify::facts(Ruleset::V6_1_0)
            .unwrap()
            .detailed_columns
    );
    for (row, system) in rows.iter().zip(["a", "b"]) {
        let b = v["benchmarks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["system"] == system)
            .unwrap();
        let score: f64 = row["flux1:time_to_train"].parse().unwrap();
        assert_eq!(score, b["score"].as_f64().unwrap());
        assert_eq!(row["division"], "open");
        assert_eq!(row["accelerators_count"], "8");
        assert_eq!(row["flux1:RCP"], "", "no RCP check in the open division");
    }
}

#[test]
fn missing_or_not_a_folder_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nowhere");
    let (code, _, err) = mllog([
        "verify".as_ref(),
        missing.as_os_str(),
        "--ruleset".as_ref(),
        "6.1.0".as_ref(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains(&missing.display().to_string()), "{err}");
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let (code, _, err) = mllog([
        "verify".as_ref(),
        file.as_os_str(),
        "--ruleset".as_ref(),
        "6.1.0".as_ref(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not a folder"), "{err}");
    // No results/: said, with the path (the package checker stops here).
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(empty.join("systems")).unwrap();
    let (code, v, _) = verify_json(&empty);
    assert_eq!(code, 1);
    assert!(
        messages_about(&v, &empty.join("results"))
            .iter()
            .any(|m| m.contains("no results/ folder")),
        "{v:#}"
    );
}

#[test]
fn unreadable_and_looping_paths_are_named_and_the_rest_reviewed() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = generated(tmp.path());
    let a = sub.join("results/a/flux1");
    // A result file that is a dangling link, one that is a link loop, and a benchmark folder
    // that loops.
    std::fs::remove_file(a.join("result_8.txt")).unwrap();
    std::os::unix::fs::symlink(a.join("gone.txt"), a.join("result_8.txt")).unwrap();
    std::fs::remove_file(a.join("result_9.txt")).unwrap();
    std::os::unix::fs::symlink(a.join("result_9.txt"), a.join("result_9.txt")).unwrap();
    let looping = sub.join("results/b/loop");
    std::os::unix::fs::symlink(&looping, &looping).unwrap();
    // In b: a FIFO named like a result file (opening it would block) is said and not read.
    let b = sub.join("results/b/flux1");
    std::fs::remove_file(b.join("result_9.txt")).unwrap();
    let fifo = std::ffi::CString::new(b.join("result_9.txt").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let (code, v, _) = verify_json(&sub);
    assert_eq!(code, 2, "an unreadable file is an I/O error: {v:#}");
    let m8 = messages_about(&v, &a.join("result_8.txt"));
    assert!(m8.iter().any(|m| m.contains("cannot read")), "{v:#}");
    let m9 = messages_about(&v, &a.join("result_9.txt"));
    assert!(
        m9.iter().any(|m| m.contains("symbolic link loop")),
        "{m9:?}"
    );
    let ml = messages_about(&v, &looping);
    assert!(ml.iter().any(|m| m.contains("symbolic link loop")), "{v:#}");
    assert!(
        messages_about(&v, &b.join("result_9.txt"))
            .iter()
            .any(|m| m.contains("not a regular file")),
        "{v:#}"
    );
    // Two unreadable runs: the folder cannot be accepted; the other system, with one run
    // short, is scored (olympic scoring drops it).
    assert!(!scored(&v, "a") && scored(&v, "b"), "{v:#}");
}

#[test]
fn non_utf8_names_are_shown_and_reviewed() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let sub = generated(tmp.path());
    let a = sub.join("results/a/flux1");
    let odd = a.join(std::ffi::OsStr::from_bytes(b"result_\xff.txt"));
    std::fs::rename(a.join("result_9.txt"), &odd).unwrap();
    let odd_dir = sub
        .join("results/b")
        .join(std::ffi::OsStr::from_bytes(b"fl\xffx"));
    std::fs::create_dir_all(&odd_dir).unwrap();
    let (code, v, _) = verify_json(&sub);
    // The odd file still counts as result_*.txt, as the package checker's glob counts it.
    assert_eq!(code, 0, "{v:#}");
    assert!(
        messages_about(&v, &odd)
            .iter()
            .any(|m| m.contains("not valid UTF-8")),
        "{v:#}"
    );
    assert!(
        messages_about(&v, &odd_dir)
            .iter()
            .any(|m| m.contains("Skipping benchmark")),
        "{v:#}"
    );
    assert!(scored(&v, "a"));
}

#[test]
fn huge_and_binary_files_are_non_compliant_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = generated(tmp.path());
    let a = sub.join("results/a/flux1");
    // 256 MiB without a line break (sparse), and random-looking bytes.
    let f = std::fs::File::create(a.join("result_8.txt")).unwrap();
    f.set_len(256 << 20).unwrap();
    let bytes: Vec<u8> = (0..1_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(a.join("result_9.txt"), bytes).unwrap();
    let (code, v, _) = verify_json(&sub);
    assert_eq!(code, 1, "{v:#}");
    let b = v["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["system"] == "a")
        .unwrap();
    let bad: Vec<_> = b["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["compliant"] == false)
        .collect();
    assert_eq!(bad.len(), 2, "{b:#}");
    assert!(messages_about(&v, &a)
        .iter()
        .any(|m| m.contains("2 files do not comply, directory cannot be accepted")));
    assert!(scored(&v, "b"));
}

#[test]
fn malformed_json_is_named_and_the_rest_reviewed() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = generated(tmp.path());
    let sys = sub.join("systems/a.json");
    std::fs::write(&sys, "{\"submitter\": ").unwrap();
    let scaling = sub.join("results/b/flux1/scaling.json");
    std::fs::write(&scaling, "scaling_factor = 2").unwrap();
    let (code, v, _) = verify_json(&sub);
    assert_eq!(code, 1, "{v:#}");
    assert!(
        messages_about(&v, &sys)
            .iter()
            .any(|m| m.contains("not valid JSON")),
        "{v:#}"
    );
    assert!(
        messages_about(&v, &scaling)
            .iter()
            .any(|m| m.contains("not valid JSON")),
        "{v:#}"
    );
    // Both folders still have their olympic means; a's system has no row in the table.
    for b in v["benchmarks"].as_array().unwrap() {
        assert!(b["olympic_mean"].is_number(), "{b:#}");
    }
    // A value the summarizer cannot join as text: said (the official checker stops there).
    std::fs::write(
        &sys,
        SYSTEM
            .replace(
                "\"8\", \"accelerator_model_name\"",
                "8, \"accelerator_model_name\"",
            )
            .replace("\"sys\"", "\"a\""),
    )
    .unwrap();
    std::fs::write(&scaling, "{\"scaling_factor\": 1.0}").unwrap();
    let (code, v, _) = verify_json(&sub);
    assert_eq!(code, 1, "{v:#}");
    assert!(
        messages_about(&v, &sys)
            .iter()
            .any(|m| m.contains("`accelerators_per_node` is 8, not a string")),
        "{v:#}"
    );
}

#[test]
fn verify_writes_nothing_unless_set_scaling() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = generated(tmp.path());
    let before = snapshot(&sub);
    let (code, _, _) = verify_json(&sub);
    assert_eq!(code, 0);
    assert_eq!(snapshot(&sub), before);
}

/// Puts system `sys` of a generated submission in the closed division (seed and RCP checks).
fn make_closed(sub: &Path, sys: &str) {
    let p = sub.join("systems").join(format!("{sys}.json"));
    let t = std::fs::read_to_string(&p).unwrap();
    assert!(t.contains("\"division\": \"open\""));
    std::fs::write(
        &p,
        t.replace("\"division\": \"open\"", "\"division\": \"closed\""),
    )
    .unwrap();
}

fn verify_text(sub: &Path, ruleset: &str) -> (i32, String) {
    let (code, out, err) = mllog([
        "verify".as_ref(),
        sub.as_os_str(),
        "--ruleset".as_ref(),
        ruleset.as_ref(),
    ]);
    assert!(!err.contains("panicked"), "{err}");
    (code, out)
}

fn benchmark<'a>(v: &'a Value, system: &str) -> &'a Value {
    v["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["system"] == system)
        .unwrap_or_else(|| panic!("no {system}: {v:#}"))
}

/// A review that reviewed no benchmark folder does not pass (the official package checker
/// says SUCCESS there), and says why, with --ruleset or without.
#[test]
fn a_review_of_nothing_does_not_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = generated(tmp.path());
    let results = sub.join("results");
    // Every benchmark folder skipped: flux1 is no benchmark of 5.0.0.
    assert!(!mllog_core::results::verify::facts(Ruleset::V5_0_0)
        .unwrap()
        .allowed_benchmarks
        .contains(&"flux1"));
    let (code, text) = verify_text(&sub, "5.0.0");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "nothing was reviewed: every benchmark folder (2) is skipped, as ruleset 5.0.0 does \
             not allow flux1"
        ) && text.contains("DOES NOT PASS REVIEW: 0 benchmark folders reviewed"),
        "{text}"
    );
    // results/ emptied, systems/ kept.
    std::fs::remove_dir_all(&results).unwrap();
    std::fs::create_dir(&results).unwrap();
    let (code, v, _) = verify_json(&sub);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["passed"], false);
    assert!(
        messages_about(&v, &results)
            .iter()
            .any(|m| m.contains("nothing was reviewed: no result_*.txt found")),
        "{v:#}"
    );
    let (code, text) = verify_text(&sub, "6.1.0");
    assert_eq!(code, 1);
    assert!(
        text.contains("DOES NOT PASS REVIEW: 0 benchmark folders reviewed"),
        "{text}"
    );
    // A system folder without benchmark folders is nothing to review either.
    std::fs::create_dir(results.join("a")).unwrap();
    let (code, v, _) = verify_json(&sub);
    assert_eq!(code, 1, "{v:#}");
    // Without --ruleset nothing can be inferred: the same words, and the usage status.
    let (code, out, err) = mllog(["verify".as_ref(), sub.as_os_str()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("nothing was reviewed: no result_*.txt found")
            && err.contains(&results.display().to_string()),
        "{err}"
    );
}

/// The seed checker's bypass line with a line break or spaces after it is not honoured (the
/// official checker compares whole lines with their newline), and verify says so.
#[test]
fn a_seed_bypass_line_with_a_line_break_is_said_and_not_honoured() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = generated(tmp.path());
    make_closed(&sub, "a");
    let a = sub.join("results/a/flux1");
    std::fs::copy(a.join("result_0.txt"), a.join("result_1.txt")).unwrap();
    let seed_errors = |v: &Value| -> usize {
        messages_about(v, &a)
            .iter()
            .filter(|m| m.starts_with("Seed checker failed"))
            .count()
    };
    let cases = [
        (
            sub.join("results/a/package_checker_params"),
            "seed-checker-bypass\n",
        ),
        (a.join("package_checker_params"), "seed-checker-bypass  "),
        (
            a.join("package_checker_params"),
            "rcp-bypass\nseed-checker-bypass\r\n",
        ),
    ];
    for (params, line) in &cases {
        std::fs::write(params, line).unwrap();
        let (_, v, _) = verify_json(&sub);
        let notes = messages_about(&v, params);
        assert!(
            notes
                .iter()
                .any(|m| m.contains(&params.display().to_string())
                    && m.contains("line break or spaces")
                    && m.contains("official package checker")
                    && m.contains("does not honour it")),
            "{line:?}: {notes:?}\n{v:#}"
        );
        assert!(seed_errors(&v) > 0, "{line:?}: not bypassed: {v:#}");
        let (_, text) = verify_text(&sub, "6.1.0");
        assert!(text.contains("does not honour it"), "{text}");
        std::fs::remove_file(params).unwrap();
    }
    // The exact line is honoured, and no such note.
    let params = a.join("package_checker_params");
    std::fs::write(&params, "seed-checker-bypass").unwrap();
    let (_, v, _) = verify_json(&sub);
    assert_eq!(seed_errors(&v), 0, "{v:#}");
    assert!(messages_about(&v, &params).is_empty(), "{v:#}");
    assert!(messages_about(&v, &a)
        .iter()
        .any(|m| m.starts_with("Bypassing Seed Checker")));
}

/// `committed_scaling_factor` is the committed file's, `null` without one.
#[test]
fn committed_scaling_factor_is_null_without_scaling_json() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = generated(tmp.path());
    std::fs::write(
        sub.join("results/b/flux1/scaling.json"),
        "{\"scaling_factor\": 1.5}",
    )
    .unwrap();
    let (code, v, _) = verify_json(&sub);
    assert_eq!(code, 0, "{v:#}");
    let a = benchmark(&v, "a");
    assert!(a["committed_scaling_factor"].is_null(), "{a:#}");
    assert_eq!(a["scaling_factor"], 1.0);
    // The open division: the committed factor is the final one.
    let b = benchmark(&v, "b");
    assert_eq!(b["committed_scaling_factor"], 1.5, "{b:#}");
    assert_eq!(b["scaling_factor"], 1.5);
    assert_eq!(
        b["score"].as_f64().unwrap(),
        b["olympic_mean"].as_f64().unwrap() * 1.5
    );
}

/// Where the RCP step cannot decide (an empty benchmark folder, a huge binary result file),
/// the verdict line says what happened, never an empty RCP field.
#[test]
fn the_verdict_line_says_why_the_rcp_step_did_not_decide() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = generated(tmp.path());
    make_closed(&sub, "a");
    make_closed(&sub, "b");
    let a = sub.join("results/a/flux1");
    for p in results_in(&a) {
        std::fs::remove_file(p).unwrap();
    }
    let b = sub.join("results/b/flux1");
    for p in results_in(&b) {
        std::fs::remove_file(&p).unwrap();
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(64 << 20).unwrap();
    }
    let (code, text) = verify_text(&sub, "6.1.0");
    assert_eq!(code, 1, "{text}");
    assert!(!text.contains("RCP : "), "{text}");
    for sys in ["a", "b"] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{sys}/flux1: ")))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains("DOES NOT PASS REVIEW"), "{line}");
        let rcp = line
            .split("; RCP")
            .nth(1)
            .unwrap_or_else(|| panic!("{line}"));
        assert!(rcp.trim_start_matches([' ', ':']).len() > 10, "{line}");
    }
    let line = text
        .lines()
        .find(|l| l.starts_with("a/flux1: DOES NOT PASS REVIEW — no score: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("; RCP check stopped before a decision"),
        "{line}"
    );
}

/// A committed scaling.json that the RCP step replaces is said, with both factors, in the text
/// and the JSON; the factor is the one the official package checker writes.
#[test]
fn a_stale_committed_scaling_json_is_said() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = generated(tmp.path());
    make_closed(&sub, "a");
    make_closed(&sub, "b");
    // a: converges within the RCP's bounds but faster than its mean (normalised, factor > 1);
    // b: far faster (fails, scaling.json removed).
    faster_runs(&sub.join("results/a/flux1"), 15.5);
    for sys in ["a", "b"] {
        std::fs::write(
            sub.join("results").join(sys).join("flux1/scaling.json"),
            "{\"scaling_factor\": 1.25}",
        )
        .unwrap();
    }
    let (_, v, _) = verify_json(&sub);
    let (_, text) = verify_text(&sub, "6.1.0");
    let a = benchmark(&v, "a");
    let factor = a["scaling_factor"].as_f64().unwrap();
    assert!(factor > 1.0 && factor != 1.25, "{a:#}");
    assert_eq!(a["committed_scaling_factor"], 1.25);
    for (sys, verb) in [("a", "rewrites"), ("b", "removes")] {
        let words = format!("the committed scaling.json says 1.25 instead (the review {verb} it)");
        let path = sub.join("results").join(sys).join("flux1/scaling.json");
        assert!(
            messages_about(&v, &path).iter().any(|m| m.contains(&words)),
            "{sys}: {v:#}"
        );
        assert!(text.contains(&words), "{sys}: {text}");
    }
    assert_eq!(benchmark(&v, "b")["scaling_factor"], 1.0);
    // A committed file that agrees is not said.
    let agreeing = serde_json::json!({ "scaling_factor": factor }).to_string();
    std::fs::write(sub.join("results/a/flux1/scaling.json"), agreeing).unwrap();
    let (_, v, _) = verify_json(&sub);
    assert!(
        messages_about(&v, &sub.join("results/a/flux1/scaling.json")).is_empty(),
        "{v:#}"
    );
    let copy = tmp.path().join("official");
    copy_dir(&sub, &copy);
    let off = official(&copy, "6.1.0", &tmp.path().join("work"));
    assert_eq!(off.scaling.get("a/flux1"), Some(&factor), "{}", off.log);
    assert_eq!(off.scaling.get("b/flux1"), None, "{}", off.log);
}

/// Without --ruleset, rulesets that would review a folder differently are not chosen between:
/// verify refuses (exit status 2), names them, and says to pass --ruleset; no partial review.
#[test]
fn an_unsettled_ruleset_is_refused_with_the_candidates() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = generated(tmp.path());
    for format in ["text", "json", "csv"] {
        let (code, out, err) = mllog([
            "verify".as_ref(),
            sub.as_os_str(),
            "--format".as_ref(),
            format.as_ref(),
        ]);
        assert_eq!(code, 2, "{format}: {out}{err}");
        assert!(out.is_empty(), "{format}: {out}");
        assert!(
            err.contains("the ruleset cannot be inferred")
                && err.contains("pass --ruleset X.Y.Z")
                && err.contains("(one of 5.1.0, 6.0.0, 6.1.0)"),
            "{format}: {err}"
        );
        // 5.0.0 is ruled out, and why.
        assert!(err.contains("not 5.0.0: flux1"), "{err}");
    }
}

/// The official package checker says SUCCESS on a submission it reviewed nothing of (every
/// benchmark folder skipped, or results/ emptied); verify does not pass it.
#[test]
fn where_the_package_checker_passes_nothing_verify_does_not() {
    let Some(subs) = oracle(
        "a review of nothing (all folders skipped, results/ emptied) against package_checker",
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    type Mutate = fn(&Path);
    let cases: [(&str, &str, Mutate); 2] = [
        ("skipped", "6.1.0", |_| {}),
        ("emptied", "5.0.0", |sub| {
            std::fs::remove_dir_all(sub.join("results")).unwrap();
            std::fs::create_dir(sub.join("results")).unwrap();
        }),
    ];
    each(&cases, |(name, ruleset, apply)| {
        let sub = tmp.path().join(name).join("ours");
        copy_dir(&subs.join("5.0/tinycorp"), &sub);
        apply(&sub);
        let copy = tmp.path().join(name).join("official");
        copy_dir(&sub, &copy);
        let off = official(&copy, ruleset, &tmp.path().join(name).join("work"));
        assert!(
            off.success && !off.crashed,
            "{name}: {}\n{}",
            off.log,
            off.stderr
        );
        assert!(off.folder_errors.is_empty(), "{name}: {}", off.log);
        let us = ours(&sub, ruleset);
        assert_eq!(us.code, 1, "{name}: {}", us.text);
        assert!(
            us.text.contains("error: nothing was reviewed: ")
                && us
                    .text
                    .contains("DOES NOT PASS REVIEW: 0 benchmark folders reviewed"),
            "{name}: {}",
            us.text
        );
    });
}

/// What `repo_checker` logged: (kind, path) for every file it names, kinds `name`, `size`,
/// `link`. Its messages list one path a line after the first.
fn repo_checker_findings(log: &str) -> std::collections::BTreeSet<(&'static str, String)> {
    let mut out = std::collections::BTreeSet::new();
    let mut kind: Option<&'static str> = None;
    for line in log.lines() {
        let rest = if let Some(m) = line.strip_prefix("ERROR - ") {
            kind = None;
            if let Some(p) = m.strip_prefix("Files with git-unfriendly name: ") {
                kind = Some("name");
                p
            } else if let Some(p) = m.strip_prefix("Files > 50MB: ") {
                kind = Some("size");
                p
            } else if let Some((_, p)) = m.split_once(" contains broken symbolic links: ") {
                kind = Some("link");
                p
            } else {
                continue;
            }
        } else if line.starts_with("INFO - ") || line.starts_with("WARNING - ") {
            kind = None;
            continue;
        } else {
            line
        };
        if let Some(k) = kind {
            // The name list ends with the message's trailing space.
            out.insert((k, rest.trim_end_matches(' ').to_string()));
        }
    }
    out
}

/// The repo_checker problems of a verify JSON document, as (kind, path).
fn our_repo_findings(v: &Value) -> std::collections::BTreeSet<(&'static str, String)> {
    v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["tool"] == "repo_checker")
        .map(|p| {
            assert_eq!(p["step"], "repo_checker", "{p}");
            let m = p["message"].as_str().unwrap();
            let kind = if m.starts_with("Files with git-unfriendly name: ") {
                "name"
            } else if m.starts_with("Files > 50MB: ") {
                "size"
            } else if m.contains(" contains broken symbolic links: ") {
                "link"
            } else {
                panic!("unexpected repo_checker problem: {p}")
            };
            (kind, p["path"].as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn the_repo_checker_step_agrees_with_the_official_repo_checker() {
    let Some(subs) = oracle("mllog verify's repo_checker step against repo_checker") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("tinycorp");
    copy_dir(&subs.join("5.0/tinycorp"), &copy);
    let clean = ours(&copy, "5.0.0");
    assert!(our_repo_findings(&clean.json).is_empty(), "{}", clean.text);

    let bert = copy.join("results/tinybox_green/bert");
    std::fs::write(bert.join("notes copy.txt"), "").unwrap();
    std::fs::write(copy.join("systems/.DS_Store"), "").unwrap();
    std::fs::create_dir_all(copy.join("results/.cache/sub dir")).unwrap();
    std::fs::write(copy.join("results/.cache/sub dir/x"), "").unwrap();
    // Sparse: the size is what counts. One byte over the limit, and exactly at it.
    let big = std::fs::File::create(copy.join("big.bin")).unwrap();
    big.set_len(50 * 1024 * 1024 + 1).unwrap();
    let edge = std::fs::File::create(copy.join("edge.bin")).unwrap();
    edge.set_len(50 * 1024 * 1024).unwrap();
    std::os::unix::fs::symlink("/nonexistent/mllog/target", copy.join("dangling")).unwrap();
    std::os::unix::fs::symlink("missing.txt", bert.join("bad_link")).unwrap();
    std::os::unix::fs::symlink("loop", copy.join("loop")).unwrap();
    // Links that work: to a file (from the folder the official tool runs in, so both agree)
    // and to a folder (neither walked nor checked by either).
    std::os::unix::fs::symlink("systems/tinybox_green.json", copy.join("desc_link")).unwrap();
    std::os::unix::fs::symlink("systems", copy.join(".systems link")).unwrap();
    // A relative link that works from its own folder; the official tool resolves it from the
    // folder it runs in, and calls it broken.
    std::os::unix::fs::symlink("result_0.txt", bert.join("first_run")).unwrap();

    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let log_path = work.join("repo_checker.log");
    let out = Command::new(common::python())
        .args(["-m", "mlperf_logging.repo_checker"])
        .arg(&copy)
        .args(["training", "5.0.0", "--log_output"])
        .arg(&log_path)
        .current_dir(&copy)
        .output()
        .unwrap();
    // It exits 0 whatever it finds: the verdict is only in its log.
    assert!(out.status.success(), "{out:?}");
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("CHECKS FAILED."), "{log}");
    let mut official = repo_checker_findings(&log);
    let misjudged = ("link", bert.join("first_run").display().to_string());
    assert!(official.remove(&misjudged), "{log}");

    let us = ours(&copy, "5.0.0");
    let found = our_repo_findings(&us.json);
    let p = |s: &str| copy.join(s).display().to_string();
    let expected: std::collections::BTreeSet<_> = [
        ("name", p("results/tinybox_green/bert/notes copy.txt")),
        ("name", p("systems/.DS_Store")),
        ("name", p("results/.cache")),
        ("name", p("results/.cache/sub dir")),
        ("size", p("big.bin")),
        ("link", p("dangling")),
        ("link", p("loop")),
        ("link", p("results/tinybox_green/bert/bad_link")),
    ]
    .into_iter()
    .collect();
    assert_eq!(official, expected, "{log}");
    assert_eq!(found, expected, "{}", us.text);
    assert_eq!(us.code, 1, "{}", us.text);
    assert!(
        us.text.contains(&format!(
            "error: Files > 50MB: {} (52428801 bytes; Please remove or reduce the size of \
             these files.)\n  --> {}\n   = step: repo_checker\n",
            p("big.bin"),
            p("big.bin")
        )),
        "{}",
        us.text
    );
    // Every other problem names its step too: the package checker's, the summarizer's.
    for prob in us.json["problems"].as_array().unwrap() {
        let step = prob["step"].as_str().unwrap();
        assert!(
            ["package_checker", "result_summarizer", "repo_checker"].contains(&step),
            "{prob}"
        );
    }
    let steps: Vec<&str> = us.json["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["problems"].as_array().unwrap())
        .map(|p| p["step"].as_str().unwrap())
        .collect();
    assert!(steps.contains(&"package_checker"), "{steps:?}");
    assert!(
        us.text.contains("   = step: package_checker (tool: "),
        "{}",
        us.text
    );
}

#[test]
fn no_score_where_the_official_summarizer_gives_none() {
    let Some(subs) = oracle("mllog verify's missing scores against result_summarizer") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let edit = |copy: &Path, f: &dyn Fn(&mut serde_json::Map<String, Value>)| {
        let p = system_json(copy);
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        f(v.as_object_mut().unwrap());
        std::fs::write(&p, v.to_string()).unwrap();
    };
    // (case, mutation, what the summarizer prints, what verify says)
    type Mutation = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Mutation, &str, &str)> = vec![
        ("as published", Box::new(|_| {}), "", ""),
        (
            "missing",
            Box::new(|c| std::fs::remove_file(system_json(c)).unwrap()),
            "ERROR: Missing ",
            "no system description: the division is unknown",
        ),
        (
            "not JSON",
            Box::new(|c| std::fs::write(system_json(c), "{\"division\": ").unwrap()),
            "TypeError",
            "cannot be read as a JSON object: the division is unknown",
        ),
        (
            "no division",
            Box::new(move |c| edit(c, &|m| drop(m.remove("division")))),
            "NameError",
            "`division` missing from ",
        ),
        (
            "no framework",
            Box::new(move |c| edit(c, &|m| drop(m.remove("framework")))),
            "NameError",
            "`framework` missing from ",
        ),
    ];
    for (case, mutate, official_says, we_say) in &cases {
        let copy = tmp.path().join(case.replace(' ', "_")).join("tinycorp");
        copy_dir(&subs.join("5.0/tinycorp"), &copy);
        mutate(&copy);
        let us = ours(&copy, "5.0.0");
        // The summarizer rewrites scaling.json: it runs after verify, on the same copy.
        let work = copy.parent().unwrap().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let (out, err) = py(
            &[
                "-m",
                "mlperf_logging.result_summarizer",
                copy.to_str().unwrap(),
                "training",
                "5.0.0",
                "--csv",
                "out.csv",
            ],
            &work,
        );
        let said = out + &err;
        let table = std::fs::read_to_string(work.join("out_detailed.csv"))
            .map(|t| read_csv(&t))
            .unwrap_or_default();
        // One system in the folder: a row is its row.
        let official_scored = !table.is_empty();
        let b = benchmark(&us.json, "tinybox_green");
        assert_eq!(
            official_scored,
            !b["score"].is_null(),
            "{case}: {said}\n{}",
            us.text
        );
        assert_eq!(official_scored, !us.table.is_empty(), "{case}: {said}");
        if official_scored {
            assert!(b["no_score"].is_null(), "{case}: {b}");
            continue;
        }
        assert!(said.contains(official_says), "{case}: {said}");
        for b in us.json["benchmarks"].as_array().unwrap() {
            assert!(b["score"].is_null(), "{case}: {b}");
            let why = b["no_score"].as_str().unwrap_or_default();
            assert!(why.contains(we_say), "{case}: {why}");
            assert!(
                us.text.contains(&format!("— no score: {why}")),
                "{case}: {}",
                us.text
            );
        }
    }
}

/// The summarizer's table of one review in a verify JSON document (`table`: rows of
/// `[column, value]`), as `read_csv` gives a CSV's.
fn table_of(review: &Value) -> Vec<BTreeMap<String, String>> {
    review["table"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            row["cells"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    let v = match &c[1] {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    };
                    (c[0].as_str().unwrap().to_string(), v)
                })
                .collect()
        })
        .collect()
}

/// The corpus submitter folders of `round` (`subs/<round>`) as one round, reviewed in one pass:
/// every submitter's verdicts, factors and table cells agree with package_checker and
/// result_summarizer run on that submitter (`officials`: the copy they ran on, which has the
/// package checker's `scaling.json` files, and what they said), and the round's table with
/// result_summarizer's round mode (`'ROUND/{*}'`) on those copies, cell by cell.
fn a_round_agrees(
    subs: &Path,
    round: &str,
    ruleset: &str,
    officials: &BTreeMap<PathBuf, (PathBuf, Official)>,
    tmp: &Path,
) {
    let dir = tmp.join(round).join("round");
    let official_round = tmp.join(round).join("official");
    let mut orgs = Vec::new();
    for e in std::fs::read_dir(subs.join(round)).unwrap() {
        let p = e.unwrap().path();
        let org = p.file_name().unwrap().to_string_lossy().into_owned();
        copy_dir(&p, &dir.join(&org));
        copy_dir(&officials[&p].0, &official_round.join(&org));
        orgs.push(org);
    }
    orgs.sort();
    // A folder that is no submitter's is named and skipped.
    std::fs::create_dir_all(dir.join("tools")).unwrap();
    let us = ours(&dir, ruleset);
    assert_eq!(us.json["round"], true, "{}", us.text);
    let reviews = us.json["submitters"].as_array().unwrap();
    let names: Vec<String> = reviews
        .iter()
        .map(|r| {
            let d = r["dir"].as_str().unwrap();
            Path::new(d)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        names, orgs,
        "one review per submitter folder, in name order"
    );
    assert!(
        us.json["skipped"][0]
            .as_str()
            .unwrap()
            .contains("tools: no results/ or systems/"),
        "{}",
        us.json["skipped"]
    );
    let all_pass = reviews.iter().all(|r| r["passed"] == true);
    let pairs: Vec<(&String, &Value)> = orgs.iter().zip(reviews).collect();
    each(&pairs, |&(org, review)| {
        let off = &officials[&subs.join(round).join(org)].1;
        let passed = review["passed"] == true;
        let one = Ours {
            code: if passed { 0 } else { 1 },
            json: review.clone(),
            table: table_of(review),
            text: us.text.clone(),
        };
        assert_agree(&format!("{round}/{org} in the round"), off, &one);
    });
    assert_eq!(us.code, if all_pass { 0 } else { 1 }, "{}", us.text);
    // The round's table: the summarizer's round mode on the reviewed copies.
    let work = tmp.join(round).join("work");
    std::fs::create_dir_all(&work).unwrap();
    let pattern = format!("{}/{{*}}", official_round.display());
    let (out, err) = py(
        &[
            "-m",
            "mlperf_logging.result_summarizer",
            &pattern,
            "training",
            ruleset,
            "--csv",
            "round.csv",
        ],
        &work,
    );
    assert!(!err.contains("Traceback"), "{out}{err}");
    let theirs = read_csv(&std::fs::read_to_string(work.join("round_detailed.csv")).unwrap());
    let key = |r: &BTreeMap<String, String>| r["details_url"].clone();
    let mut mine: BTreeMap<String, BTreeMap<String, String>> =
        us.table.iter().map(|r| (key(r), r.clone())).collect();
    assert_eq!(mine.len(), us.table.len(), "one row per system");
    assert_eq!(theirs.len(), mine.len(), "{out}");
    for t in &theirs {
        let m = mine
            .remove(&key(t))
            .unwrap_or_else(|| panic!("no row {}", key(t)));
        assert_eq!(t.keys().collect::<Vec<_>>(), m.keys().collect::<Vec<_>>());
        for (col, tv) in t {
            let mv = &m[col];
            assert!(
                same_cell(tv, mv),
                "{round} {} {col}: official {tv:?}, ours {mv:?}",
                key(t)
            );
        }
    }
    // The text's table: a line per reviewed benchmark folder, with its final score.
    assert!(us.text.contains("Final scores of the round"), "{}", us.text);
    for s in us.json["scores"].as_array().unwrap() {
        let score = s["score"]
            .as_f64()
            .map_or("-".into(), |x| format!("{x:.4}"));
        assert!(
            us.text
                .lines()
                .any(|l| l.starts_with(s["submitter"].as_str().unwrap())
                    && l.contains(s["system"].as_str().unwrap())
                    && l.contains(&score)),
            "{s}: {}",
            us.text
        );
    }
    // Without --ruleset: the round's own ruleset, or a refusal that names it.
    let (code, out, err) = mllog(["verify".as_ref(), dir.as_os_str()]);
    if code == 2 {
        assert!(
            err.contains("the ruleset cannot be inferred") && err.contains(ruleset),
            "{err}"
        );
    } else {
        assert_eq!(code, us.code, "{out}");
        assert!(
            out.contains(&format!("ruleset {ruleset}: the only one consistent")),
            "{out}"
        );
    }
}
