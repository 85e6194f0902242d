//! `mllog score --usage hpc` against MLCommons' `result_summarizer <folder> hpc 3.0.0` (through
//! `$MLLOG_PYTHON`), on HPC submitter folders built in a tempdir from the real HPC v3.0 logs of
//! the corpus (`$MLLOG_CORPUS/rounds/hpc3.0_*`: deepcam and openfold, strong scaling) and from
//! copies of them edited here: a run without `run_stop` (not compliant), runs moved in time
//! under a new seed, a weak-scaling folder (the same runs as models trained at once), a model on
//! another number of nodes. Every score is compared with the summarizer's, computed in the same
//! run. The official tools write into the folders they read, so they run on copies.

mod common;
#[path = "support/review.rs"]
mod review;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use common::mllog;
use review::{close, py, read_csv, summarizer_csv};
use support::copy_dir;

const RULESET: &str = "3.0.0";

/// The rounds corpus, or the one skip line without it (the official tools are required:
/// `common::python` fails the test without them).
fn oracle(what: &str) -> Option<PathBuf> {
    let rounds = common::corpus("rounds", what)?;
    common::python();
    Some(rounds)
}

/// The three published runs of `benchmark` in the corpus: deepcam results 1, 3, 4 (Dell) or
/// openfold results 1, 5, 6 (TACC), strong scaling.
fn published(rounds: &Path, benchmark: &str) -> Vec<String> {
    let (runs, prefix) = match benchmark {
        "deepcam" => ([1, 3, 4], "Dell_deepcam_strong-32xXE8545x4A100-SXM4-40GB"),
        "openfold" => ([1, 5, 6], "TACC_openfold_strong-lonestar6-pytorch"),
        b => panic!("no {b} in the corpus"),
    };
    runs.iter()
        .map(|i| {
            std::fs::read_to_string(rounds.join(format!("hpc3.0_{prefix}_result_{i}.txt"))).unwrap()
        })
        .collect()
}

/// Every `time_ms` moved by `ms`, and the seed made `seed`: another run of the same job.
fn moved(log: &str, ms: i64, seed: i64) -> String {
    log.lines()
        .map(|l| {
            let Some((head, json)) = l.split_once(":::MLLOG ") else {
                return format!("{l}\n");
            };
            let mut v: Value = serde_json::from_str(json).unwrap();
            let t = v["time_ms"].as_i64().unwrap();
            v["time_ms"] = (t + ms).into();
            if v["key"] == "seed" {
                v["value"] = seed.into();
            }
            format!("{head}:::MLLOG {}\n", serde_json::to_string(&v).unwrap())
        })
        .collect()
}

/// The log without its `run_stop`: the compliance check fails it.
fn without_stop(log: &str) -> String {
    log.lines()
        .filter(|l| !l.contains("\"key\": \"run_stop\""))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The log with `number_of_nodes` set to `n`.
fn on_nodes(log: &str, n: i64) -> String {
    log.lines()
        .map(|l| {
            if l.contains("\"key\": \"number_of_nodes\"") {
                let (head, json) = l.split_once(":::MLLOG ").unwrap();
                let mut v: Value = serde_json::from_str(json).unwrap();
                v["value"] = n.into();
                format!("{head}:::MLLOG {}\n", serde_json::to_string(&v).unwrap())
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// A system description the summarizer and the system description checker accept.
fn system_json(name: &str, division: &str) -> String {
    serde_json::json!({
        "submitter": "ExampleOrg", "division": division, "status": "Available on-premise",
        "system_name": name, "number_of_nodes": "32", "host_processors_per_node": "2",
        "host_processor_model_name": "Example CPU", "host_processor_core_count": "64",
        "host_processor_vcpu_count": "128", "host_processor_frequency": "",
        "host_processor_caches": "", "host_processor_interconnect": "",
        "host_memory_capacity": "1 TB", "host_storage_type": "NVMe",
        "host_storage_capacity": "4 TB", "host_networking": "", "host_networking_topology": "",
        "host_memory_configuration": "", "accelerators_per_node": "4",
        "accelerator_model_name": "Example GPU", "accelerator_host_interconnect": "",
        "accelerator_frequency": "", "accelerator_on-chip_memories": "",
        "accelerator_memory_configuration": "HBM", "accelerator_memory_capacity": "40 GB",
        "accelerator_interconnect": "", "accelerator_interconnect_topology": "",
        "cooling": "air", "hw_notes": "", "framework": "PyTorch", "other_software_stack": "",
        "operating_system": "Linux", "sw_notes": ""
    })
    .to_string()
}

/// Writes `results/<system>/<scaling>/<benchmark>/result_<i>.txt` for each log, and the
/// system's description.
fn write_folder(
    sub: &Path,
    system: &str,
    division: &str,
    scaling: &str,
    bench: &str,
    logs: &[String],
) {
    let dir = sub.join("results").join(system).join(scaling).join(bench);
    std::fs::create_dir_all(&dir).unwrap();
    for (i, log) in logs.iter().enumerate() {
        std::fs::write(dir.join(format!("result_{i}.txt")), log).unwrap();
    }
    std::fs::create_dir_all(sub.join("systems")).unwrap();
    std::fs::write(
        sub.join("systems").join(format!("{system}.json")),
        system_json(system, division),
    )
    .unwrap();
}

/// The summarizer's tables: strong scaling, then weak scaling, one row per system (keyed by
/// the system's name), as its CSV writes them one after the other into the same file.
struct Summarized {
    strong: BTreeMap<String, BTreeMap<String, String>>,
    weak: BTreeMap<String, BTreeMap<String, String>>,
    output: String,
}

fn summarize(sub: &Path, work: &Path) -> Summarized {
    let copy = work.join("copy");
    copy_dir(sub, &copy);
    summarize_copy(&copy, work)
}

/// [`summarize`] of a copy already made (which the package checker may have changed).
fn summarize_copy(copy: &Path, work: &Path) -> Summarized {
    let (out, err) = summarizer_csv(copy, "hpc", RULESET, work);
    tables(work, format!("{out}{err}"))
}

/// The summarizer's tables from the CSV it wrote into `work`, and what it said (`output`).
fn tables(work: &Path, output: String) -> Summarized {
    assert!(
        !output.contains("Traceback"),
        "the summarizer crashed: {output}"
    );
    let text = std::fs::read_to_string(work.join("out.csv")).unwrap();
    let mut blocks: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with("division,") {
            blocks.push(String::new());
        }
        let b = blocks.last_mut().unwrap();
        b.push_str(line);
        b.push('\n');
    }
    let by_system = |b: Option<&String>| -> BTreeMap<String, BTreeMap<String, String>> {
        b.map(|b| read_csv(b))
            .unwrap_or_default()
            .into_iter()
            .map(|r| (r["system"].clone(), r))
            .collect()
    };
    Summarized {
        strong: by_system(blocks.first()),
        weak: by_system(blocks.get(1)),
        output,
    }
}

/// `mllog <command> SUB --usage hpc --rules python:… --ruleset 3.0.0 --format FORMAT`:
/// (exit status, stdout, stderr).
fn hpc(command: &str, sub: &Path, format: &str) -> (i32, String, String) {
    hpc_with(
        &format!("python:{}", common::python().display()),
        command,
        sub,
        format,
    )
}

/// [`hpc`] with the rules of `rules` (a `--rules` value).
fn hpc_with(rules: &str, command: &str, sub: &Path, format: &str) -> (i32, String, String) {
    let (code, out, err) = mllog([
        command,
        sub.to_str().unwrap(),
        "--usage",
        "hpc",
        "--rules",
        rules,
        "--ruleset",
        RULESET,
        "--format",
        format,
    ]);
    assert!(!err.contains("panicked"), "{err}");
    (code, out, err)
}

/// `mllog score --usage hpc --format FORMAT` of `sub`.
fn score_as(sub: &Path, format: &str) -> (i32, String, String) {
    hpc("score", sub, format)
}

/// [`score_as`] JSON: (exit status, the benchmarks, stderr).
fn score(sub: &Path) -> (i32, Vec<Value>, String) {
    let (code, out, err) = score_as(sub, "json");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    (code, v["benchmarks"].as_array().unwrap().clone(), err)
}

/// A summarizer cell as a number (`None` when empty).
fn cell(row: &BTreeMap<String, String>, col: &str) -> Option<f64> {
    let c = row
        .get(col)
        .unwrap_or_else(|| panic!("no column {col}: {row:?}"));
    (!c.is_empty()).then(|| c.parse().unwrap())
}

/// Every folder `mllog score` scored has the summarizer's score; the count of agreements.
fn assert_scores_agree(ours: &[Value], theirs: &Summarized) -> usize {
    let ctx = || format!("{}\n--- ours: {ours:#?}", theirs.output);
    let mut agreed = 0;
    for b in ours {
        let system = b["system"].as_str().unwrap();
        let bench = b["benchmark"].as_str().unwrap();
        let (table, cols) = match b["scaling"].as_str().unwrap() {
            "strong" => (&theirs.strong, vec![(bench.to_owned(), "score")]),
            _ => (
                &theirs.weak,
                vec![
                    (format!("{bench}:time_to_train_all"), "time_to_train_all"),
                    (format!("{bench}:number_of_models"), "number_of_models"),
                    (format!("{bench}:instance_scale"), "instance_scale"),
                ],
            ),
        };
        let row = table
            .get(system)
            .unwrap_or_else(|| panic!("{system}: no row in the summarizer's table: {}", ctx()));
        let weak_unscored = b["scaling"] == "weak" && b["time_to_train_all"].is_null();
        for (col, field) in cols {
            let want = cell(row, &col);
            // A weak folder without a score has no tuple in the summarizer's table at all.
            let got = if weak_unscored {
                None
            } else {
                b[field].as_f64()
            };
            match (got, want) {
                (Some(x), Some(y)) => assert!(
                    close(x, y),
                    "{system} {col}: ours {x}, theirs {y}: {}",
                    ctx()
                ),
                (None, None) => {}
                _ => panic!("{system} {col}: ours {got:?}, theirs {want:?}: {}", ctx()),
            }
        }
        agreed += 1;
    }
    agreed
}

/// The runs `_compute_strong_score_standalone` keeps in a strong-scaling folder (argv: the
/// folder, the benchmark), by file name, with their minutes.
const KEPT_RUNS: &str = r#"
import json, os, sys
from mlperf_logging.result_summarizer import result_summarizer as rs
folder, bench = sys.argv[1], sys.argv[2]
track, _, _, _, _ = rs._compute_strong_score_standalone(
    bench, 'sys', False, folder, 'hpc', '3.0.0', return_full_scores=True)
print(json.dumps({os.path.basename(f): m for f, m in track.items()}))
"#;

#[test]
fn hpc_scores_equal_result_summarizer() {
    let Some(rounds) = oracle("HPC scores against result_summarizer") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("ExampleOrg");
    let deepcam = published(&rounds, "deepcam");
    let openfold = published(&rounds, "openfold");
    // The published runs as they are (fewer than the package checker wants: scored anyway).
    write_folder(&sub, "dell-real", "closed", "strong", "deepcam", &deepcam);
    write_folder(&sub, "tacc-real", "closed", "strong", "openfold", &openfold);
    // One run not compliant: dropped, it stands in for the slowest.
    let mut one_bad = deepcam.clone();
    one_bad.push(moved(&without_stop(&deepcam[0]), 3_600_000, 7));
    write_folder(&sub, "one-dropped", "closed", "strong", "deepcam", &one_bad);
    // Two not compliant: more than olympic scoring drops, no score.
    let mut two_bad = openfold.clone();
    two_bad.push(without_stop(&openfold[0]));
    two_bad.push(without_stop(&openfold[1]));
    write_folder(&sub, "two-dropped", "open", "strong", "openfold", &two_bad);
    // Weak scaling: five models of deepcam (the published three and two more moved in time),
    // one not compliant beside them; openfold with three models where it needs ten.
    let mut models = deepcam.clone();
    models.push(moved(&deepcam[0], 600_000, 11));
    models.push(moved(&deepcam[1], -300_000, 12));
    models.push(moved(&without_stop(&deepcam[2]), 900_000, 13));
    write_folder(&sub, "weak-sys", "closed", "weak", "deepcam", &models);
    write_folder(&sub, "weak-sys", "closed", "weak", "openfold", &openfold);
    write_folder(&sub, "weak-sys", "closed", "strong", "deepcam", &deepcam);

    let (code, ours, err) = score(&sub);
    let theirs = summarize(&sub, &tmp.path().join("work"));
    let agreed = assert_scores_agree(&ours, &theirs);
    assert_eq!(agreed, 7, "{ours:#?}");
    // Which runs count: each strong folder's kept runs and their minutes, as
    // `_compute_strong_score_standalone(..., return_full_scores=True)` tracks them.
    let copy = tmp.path().join("runs");
    copy_dir(&sub, &copy);
    let mut strong_folders = 0;
    for b in ours.iter().filter(|b| b["scaling"] == "strong") {
        let folder = Path::new(b["folder"].as_str().unwrap());
        let rel = folder.strip_prefix(&sub).unwrap();
        let theirs = support::python(
            KEPT_RUNS,
            &[
                copy.join(rel).as_os_str(),
                b["benchmark"].as_str().unwrap().as_ref(),
            ],
        );
        let kept: BTreeMap<String, f64> = b["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| {
                let name = Path::new(r["file"].as_str().unwrap()).file_name()?;
                Some((name.to_string_lossy().into_owned(), r["minutes"].as_f64()?))
            })
            .collect();
        let theirs: BTreeMap<String, f64> = theirs
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
            .collect();
        assert_eq!(
            kept.keys().collect::<Vec<_>>(),
            theirs.keys().collect::<Vec<_>>(),
            "{rel:?}"
        );
        for (k, m) in &kept {
            assert!(
                close(*m, theirs[k]),
                "{rel:?} {k}: ours {m}, theirs {}",
                theirs[k]
            );
        }
        strong_folders += 1;
    }
    assert_eq!(strong_folders, 5);
    // What the official code distinguishes, seen in ours too.
    let find = |sys: &str, scaling: &str, b: &str| {
        ours.iter()
            .find(|x| x["system"] == sys && x["scaling"] == scaling && x["benchmark"] == b)
            .unwrap_or_else(|| panic!("{sys}/{scaling}/{b}: {ours:#?}"))
    };
    assert_eq!(find("one-dropped", "strong", "deepcam")["dropped"], 1);
    assert!(find("two-dropped", "strong", "openfold")["score"].is_null());
    let weak = find("weak-sys", "weak", "deepcam");
    assert_eq!(
        (
            weak["number_of_models"].as_u64(),
            weak["instance_scale"].as_i64()
        ),
        (Some(5), Some(128))
    );
    assert!(find("weak-sys", "weak", "openfold")["time_to_train_all"].is_null());
    // Folders without a score: exit status 1, nothing unreadable.
    assert_eq!(code, 1, "{err}");
    // The CSV and the text say the same scores, with the same status.
    let (csv_code, csv, _) = score_as(&sub, "csv");
    let rows = read_csv(&csv);
    assert_eq!((csv_code, rows.len()), (code, ours.len()), "{csv}");
    for (row, b) in rows.iter().zip(&ours) {
        assert_eq!(row["scaling"], b["scaling"].as_str().unwrap(), "{csv}");
        let (col, field) = match row["scaling"].as_str() {
            "weak" => ("time_to_train_all_min", "time_to_train_all"),
            _ => ("score_min", "score"),
        };
        assert_eq!(cell(row, col), b[field].as_f64(), "{csv}");
    }
    let (text_code, text, _) = score_as(&sub, "text");
    assert_eq!(text_code, code);
    assert!(
        text.contains("WEAK SCORE weak-sys/deepcam: 5 model(s) × 128 accelerator(s)"),
        "{text}"
    );
    assert!(
        text.contains("WEAK SCORE weak-sys/openfold: none (3 model(s), 10 needed)"),
        "{text}"
    );
}

#[test]
fn weak_models_on_different_scales_are_a_clear_error() {
    let Some(rounds) = oracle("HPC weak scaling on mixed scales") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("ExampleOrg");
    let mut models = published(&rounds, "deepcam");
    models.push(moved(&models[0], 600_000, 11));
    models.push(moved(&on_nodes(&models[1], 16), 600_000, 12));
    write_folder(&sub, "mixed", "closed", "weak", "deepcam", &models);
    // The summarizer stops with an AssertionError.
    let work = tmp.path().join("work");
    let copy = work.join("copy");
    copy_dir(&sub, &copy);
    let (_, err) = py(
        &[
            "-m",
            "mlperf_logging.result_summarizer",
            copy.to_str().unwrap(),
            "hpc",
            RULESET,
        ],
        &work,
    );
    assert!(err.contains("AssertionError"), "{err}");
    // mllog: no score, and why, naming the file.
    let (code, ours, err) = score(&sub);
    assert_eq!(code, 1, "{err}");
    assert!(ours[0]["time_to_train_all"].is_null());
    let file = sub.join("results/mixed/weak/deepcam/result_4.txt");
    assert!(
        err.contains("instance scale")
            && err.contains(&file.display().to_string())
            && err.contains("AssertionError"),
        "{err}"
    );
    // verify: the summarizer's stop is an error of the folder, naming the file.
    let (code, out, err) = verify(&sub, "json");
    assert_eq!(code, 1, "{err}");
    let review: Value = serde_json::from_str(&out).unwrap();
    let problems = review["benchmarks"][0]["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(|p| p["severity"] == "error"
            && p["tool"] == "result_summarizer"
            && p["message"]
                .as_str()
                .unwrap()
                .contains(&file.display().to_string())),
        "{out}"
    );
}

/// The result counts are the package's: a copy of it that wants 6 deepcam models leaves a weak
/// folder of 5 without a score, as that copy's summarizer says, where the installed package
/// (5) scores it; `verify` and the strong folder's note say the copy's count too.
#[test]
fn hpc_result_counts_are_the_packages() {
    let Some(rounds) = oracle("HPC result counts read from the package") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("ExampleOrg");
    let runs = published(&rounds, "deepcam");
    let mut models = runs.clone();
    models.push(moved(&runs[0], 600_000, 11));
    models.push(moved(&runs[1], 600_000, 12));
    write_folder(&sub, "five", "closed", "weak", "deepcam", &models);
    write_folder(&sub, "five", "closed", "strong", "deepcam", &runs);
    // The installed package: 5 models are enough.
    let (_, ours, err) = score(&sub);
    let weak = |v: &[Value]| v.iter().find(|b| b["scaling"] == "weak").unwrap().clone();
    let strong = |v: &[Value]| v.iter().find(|b| b["scaling"] == "strong").unwrap().clone();
    assert_eq!(weak(&ours)["required_runs"], 5, "{err}");
    assert!(weak(&ours)["time_to_train_all"].is_number(), "{ours:#?}");
    let work = tmp.path().join("work");
    let installed = summarize(&sub, &work);
    assert!(cell(&installed.weak["five"], "deepcam:time_to_train_all").is_some());
    // A copy of the package wanting 6.
    let (out, _) = py(
        &[
            "-c",
            "import os, mlperf_logging; print(os.path.dirname(mlperf_logging.__file__))",
        ],
        tmp.path(),
    );
    let pkgs = tmp.path().join("pkgs");
    let copy = pkgs.join("mlperf_logging");
    copy_dir(Path::new(out.trim()), &copy);
    let meta = copy.join("benchmark_meta.py");
    let text = std::fs::read_to_string(&meta).unwrap();
    let six = text.replacen("'deepcam': 5,", "'deepcam': 6,", 1);
    assert_ne!(six, text, "benchmark_meta.py counts deepcam");
    std::fs::write(&meta, six).unwrap();
    // That copy's summarizer: no weak score.
    let theirs = tmp.path().join("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    let folder = theirs.join("copy");
    copy_dir(&sub, &folder);
    let run = std::process::Command::new(common::python())
        .args(["-m", "mlperf_logging.result_summarizer"])
        .arg(&folder)
        .args(["hpc", RULESET, "--csv"])
        .arg(theirs.join("out.csv"))
        .current_dir(&theirs)
        .env("PYTHONPATH", &pkgs)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert!(
        said.contains("Not enough converging weak scaling runs"),
        "{said}"
    );
    let copied = tables(&theirs, said);
    let row = copied.weak.get("five");
    assert!(
        row.is_none_or(|r| cell(r, "deepcam:time_to_train_all").is_none()),
        "{}",
        copied.output
    );
    // mllog with the copy's rules: the same.
    let rules = copy.to_str().unwrap();
    let (_, out, err) = hpc_with(rules, "score", &sub, "json");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let ours = v["benchmarks"].as_array().unwrap();
    assert_eq!(weak(ours)["required_runs"], 6, "{out}");
    assert!(weak(ours)["time_to_train_all"].is_null(), "{out}");
    assert_eq!(strong(ours)["required_runs"], 6, "{out}");
    let (_, text, _) = hpc_with(rules, "score", &sub, "text");
    assert!(text.contains("needs at least 6"), "{text}");
    let (_, out, err) = hpc_with(rules, "verify", &sub, "json");
    let review: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let weak_review = review["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["scaling"] == "weak")
        .unwrap();
    assert_eq!(weak_review["required_runs"], 6, "{out}");
    assert!(
        weak_review["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["message"]
                .as_str()
                .unwrap()
                .contains("Not enough converging weak scaling runs")),
        "{out}"
    );
}

#[test]
fn hpc_needs_rules_read_at_run_time() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("results/sys/strong/deepcam");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("result_0.txt"), "").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(["score", "--usage", "hpc", "--ruleset", RULESET])
        .arg(tmp.path())
        .env_remove("MLLOG_RULES")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no HPC rules are built in") && err.contains("--rules"),
        "{err}"
    );
}

/// What `package_checker <copy> hpc 3.0.0` said: success, whether it crashed, the ERROR lines
/// of each benchmark folder it checked (keyed by the path below `results/`), and the
/// summarizer's detailed table after it (its `scaling.json` written, as in the review script).
struct Checked {
    success: bool,
    crashed: bool,
    folder_errors: BTreeMap<String, Vec<String>>,
    log: String,
    table: Vec<BTreeMap<String, String>>,
    /// The summarizer's strong- and weak-scaling tables.
    summary: Summarized,
}

fn package_check(sub: &Path, work: &Path) -> Checked {
    let copy = work.join("copy");
    copy_dir(sub, &copy);
    let log_path = work.join("package_checker.log");
    let (_, stderr) = py(
        &[
            "-m",
            "mlperf_logging.package_checker",
            copy.to_str().unwrap(),
            "hpc",
            RULESET,
            "--log_output",
            log_path.to_str().unwrap(),
        ],
        work,
    );
    let log = std::fs::read_to_string(&log_path).unwrap_or_default() + &stderr;
    let results = copy.join("results");
    let mut folder_errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in log.lines() {
        if let Some(dir) = line.split("Running compliance checks in dir ").nth(1) {
            let key = Path::new(dir.trim())
                .strip_prefix(&results)
                .unwrap()
                .display()
                .to_string();
            folder_errors.entry(key.clone()).or_default();
            current = Some(key);
        } else if line.starts_with("ERROR")
            && let Some(k) = &current
        {
            folder_errors.get_mut(k).unwrap().push(line.to_owned());
        }
    }
    let summary = summarize_copy(&copy, work);
    let table = std::fs::read_to_string(work.join("out_detailed.csv"))
        .map(|t| read_csv(&t))
        .unwrap_or_default();
    Checked {
        success: log.contains("PACKAGE CHECKER FOUND NO ERRORS, SUCCESS !"),
        crashed: stderr.contains("Traceback"),
        folder_errors,
        log,
        table,
        summary,
    }
}

/// `mllog verify --usage hpc --format FORMAT` of `sub`.
fn verify(sub: &Path, format: &str) -> (i32, String, String) {
    hpc("verify", sub, format)
}

/// The official error lines and the words `mllog verify` says them with.
const REASONS: [(&str, &str); 5] = [
    ("Incorrect number of files", "Incorrect number of files"),
    ("Expected at least", "Expected at least"),
    (
        "directory cannot be accepted",
        "directory cannot be accepted",
    ),
    ("Seed checker failed", "Seed checker failed"),
    ("RCP Test Failed", "RCP Test Failed"),
];

/// The package checker's verdict, each folder's verdict and reasons, and the summarizer's
/// table, said by `mllog verify --usage hpc` too; the number of folders compared.
fn assert_review_agrees(label: &str, sub: &Path, work: &Path) -> usize {
    let (code, out, err) = verify(sub, "json");
    let theirs = package_check(sub, work);
    let ctx = || {
        format!(
            "{label}\n--- package checker:\n{}\n--- ours:\n{out}{err}",
            theirs.log
        )
    };
    assert!(!theirs.crashed, "the package checker crashed: {}", ctx());
    assert_eq!(code == 0, theirs.success, "verdict: {}", ctx());
    assert_ne!(code, 2, "{}", ctx());
    eprintln!(
        "{label}: package checker {}",
        if theirs.success { "SUCCESS" } else { "errors" }
    );
    let ours: Value = serde_json::from_str(&out).unwrap();
    let results = sub.join("results");
    let reviewed: BTreeMap<String, &Value> = ours["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["reviewed"] == true)
        .map(|b| {
            let p = Path::new(b["folder"].as_str().unwrap());
            (p.strip_prefix(&results).unwrap().display().to_string(), b)
        })
        .collect();
    assert_eq!(
        reviewed.keys().collect::<Vec<_>>(),
        theirs.folder_errors.keys().collect::<Vec<_>>(),
        "folders: {}",
        ctx()
    );
    for (k, errors) in &theirs.folder_errors {
        let b = reviewed[k];
        assert_eq!(b["passed"] == true, errors.is_empty(), "{k}: {}", ctx());
        let said: Vec<&str> = b["problems"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["severity"] == "error")
            .map(|p| p["message"].as_str().unwrap())
            .collect();
        for (official, ours) in REASONS {
            assert_eq!(
                errors.iter().any(|e| e.contains(official)),
                said.iter().any(|m| m.contains(ours)),
                "{k}: {official:?}: {}",
                ctx()
            );
        }
    }
    // The summarizer's detailed (strong-scaling) table, cell by cell.
    let (_, csv, _) = verify(sub, "csv");
    let mine: BTreeMap<String, BTreeMap<String, String>> = read_csv(&csv)
        .into_iter()
        .map(|r| (r["system"].clone(), r))
        .collect();
    let table: BTreeMap<String, &BTreeMap<String, String>> = theirs
        .table
        .iter()
        .map(|r| (r["system"].clone(), r))
        .collect();
    assert_eq!(
        table.keys().collect::<Vec<_>>(),
        mine.keys().collect::<Vec<_>>(),
        "{}",
        ctx()
    );
    for (system, t) in &table {
        for (col, tv) in t.iter() {
            let mv = mine[system]
                .get(col)
                .unwrap_or_else(|| panic!("no {col}: {}", ctx()));
            assert!(
                review::same_cell(tv, mv),
                "{system} {col}: official {tv:?}, ours {mv:?}: {}",
                ctx()
            );
        }
    }
    // The scores of the summarizer's two tables: each strong folder's final score, each weak
    // folder's tuple.
    let scores: Vec<Value> = reviewed
        .values()
        .map(|b| match b.get("weak") {
            Some(w) => {
                let mut w = w.clone();
                w["scaling"] = "weak".into();
                w
            }
            None => (*b).clone(),
        })
        .collect();
    assert_scores_agree(&scores, &theirs.summary);
    reviewed.len()
}

#[test]
fn hpc_reviews_equal_package_checker() {
    let Some(rounds) = oracle("HPC reviews against the package checker") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let deepcam = published(&rounds, "deepcam");
    let openfold = published(&rounds, "openfold");
    // Five deepcam runs: the published three, two more moved in time under new seeds.
    let mut five = deepcam.clone();
    five.push(moved(&deepcam[0], 7_200_000, 21));
    five.push(moved(&deepcam[1], 7_200_000, 22));
    let mut cases: Vec<(&str, PathBuf)> = Vec::new();
    let mut case = |name: &'static str, build: &dyn Fn(&Path)| {
        let sub = tmp.path().join(name).join("ExampleOrg");
        build(&sub);
        cases.push((name, sub));
    };
    case("published runs, too few", &|sub| {
        write_folder(sub, "dell", "closed", "strong", "deepcam", &deepcam);
        write_folder(sub, "tacc", "closed", "strong", "openfold", &openfold);
    });
    case("complete strong and weak", &|sub| {
        write_folder(sub, "dell", "closed", "strong", "deepcam", &five);
        let models: Vec<String> = five
            .iter()
            .enumerate()
            .map(|(i, l)| moved(l, 100_000 * i as i64, 40 + i as i64))
            .collect();
        write_folder(sub, "dell", "closed", "weak", "deepcam", &models);
    });
    case("one run not compliant", &|sub| {
        let mut runs = five.clone();
        runs[4] = without_stop(&runs[4]);
        write_folder(sub, "dell", "closed", "strong", "deepcam", &runs);
    });
    case("two runs not compliant, weak too few", &|sub| {
        let mut runs = five.clone();
        runs[3] = without_stop(&runs[3]);
        runs[4] = without_stop(&runs[4]);
        write_folder(sub, "dell", "closed", "strong", "deepcam", &runs);
        write_folder(sub, "dell", "closed", "weak", "deepcam", &deepcam);
    });
    case(
        "a second system, described, with an empty strong folder",
        &|sub| {
            write_folder(sub, "dell", "closed", "strong", "deepcam", &five);
            write_folder(sub, "dell-spare", "closed", "strong", "deepcam", &[]);
            std::fs::remove_dir(sub.join("results/dell-spare/strong/deepcam")).unwrap();
        },
    );
    case("a seed used twice, closed and open", &|sub| {
        let mut runs = five.clone();
        runs[4] = moved(&deepcam[0], 7_200_000, 1_662_603_983);
        write_folder(sub, "dell", "closed", "strong", "deepcam", &runs);
        write_folder(sub, "dell-open", "open", "strong", "deepcam", &runs);
    });
    let mut compared = 0;
    for (name, sub) in &cases {
        compared += assert_review_agrees(name, sub, &tmp.path().join(format!("work-{name}")));
    }
    assert_eq!(compared, 10);
    // The same folders as one round: each submitter's verdict in it is its own review's (held
    // to the package checker above), and the round passes only if every one does.
    let round = tmp.path().join("round");
    let mut alone = Vec::new();
    for (i, (_, sub)) in cases.iter().enumerate() {
        copy_dir(sub, &round.join(format!("Org{i}")));
        let (code, out, _) = verify(sub, "json");
        let v: Value = serde_json::from_str(&out).unwrap();
        alone.push((code, v["passed"].clone()));
    }
    let (code, out, err) = hpc("verify", &round, "json");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_eq!(v["usage"], "hpc", "{out}");
    let subs = v["submitters"].as_array().unwrap();
    assert_eq!(subs.len(), cases.len());
    for (s, (_, passed)) in subs.iter().zip(&alone) {
        assert_eq!(&s["passed"], passed, "{}", s["dir"]);
    }
    let all_pass = alone.iter().all(|(c, _)| *c == 0);
    assert!(!all_pass, "the cases include failing submitters");
    assert_eq!(code, 1, "{err}");
    let (_, text, _) = hpc("verify", &round, "text");
    assert!(text.contains("(hpc ruleset 3.0.0)"), "{text}");
    assert!(text.contains("weak scaling: 5 model(s)"), "{text}");
    assert!(text.contains("no score: weak scaling: none ("), "{text}");
    // A weak-scaling folder with its tuple counts as scored, one with too few models not.
    let lines = v["scores"].as_array().unwrap();
    let scored = lines
        .iter()
        .filter(|l| !l["score"].is_null() || (!l["weak"].is_null() && l["no_score"].is_null()))
        .count();
    assert!(
        lines
            .iter()
            .any(|l| !l["weak"].is_null() && l["no_score"].is_null()),
        "{out}"
    );
    assert!(
        text.contains(&format!(
            "{scored} benchmark folder(s) scored of {}",
            lines.len()
        )),
        "{text}"
    );
}

#[test]
fn a_stray_folder_under_an_hpc_system_is_a_clear_error() {
    let Some(rounds) = oracle("a stray folder in an HPC review") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("ExampleOrg");
    let deepcam = published(&rounds, "deepcam");
    write_folder(&sub, "dell", "closed", "strong", "deepcam", &deepcam);
    write_folder(&sub, "dell", "closed", "medium", "deepcam", &deepcam);
    let theirs = package_check(&sub, &tmp.path().join("work"));
    assert!(
        theirs.crashed && theirs.log.contains("AssertionError"),
        "{}",
        theirs.log
    );
    let (code, out, err) = verify(&sub, "text");
    assert_eq!(code, 1, "{out}{err}");
    let stray = sub.join("results/dell/medium");
    assert!(
        out.contains("holds strong/ and weak/ only") && out.contains(&stray.display().to_string()),
        "{out}"
    );
}

#[test]
fn a_training_layout_under_hpc_reviews_nothing_and_does_not_pass() {
    let Some(rounds) = oracle("a Training layout reviewed under --usage hpc") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("ExampleOrg");
    // results/<system>/<benchmark>/: no strong/ or weak/ level.
    write_folder(
        &sub,
        "dell",
        "closed",
        "",
        "deepcam",
        &published(&rounds, "deepcam"),
    );
    let theirs = package_check(&sub, &tmp.path().join("work"));
    // The official checker finds no benchmark folder, and says SUCCESS.
    assert!(
        theirs.success && theirs.folder_errors.is_empty(),
        "{}",
        theirs.log
    );
    // verify: a review of nothing does not pass, and says which layout it looked for.
    let (code, out, err) = verify(&sub, "text");
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("nothing was reviewed")
            && out.contains("results/<system>/<strong|weak>/<benchmark>"),
        "{out}"
    );
}
