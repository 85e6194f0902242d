//! RCP tables read at run time (`--rules`, `--custom-rcps`) against the official package
//! (mlperf-logging, through `MLLOG_PYTHON`): the package's tables equal the built-in ones,
//! every RCP folder it ships loads with the official statistics, the RCP checker's
//! `--custom_rcps` verdicts and factors on the real submission folders of `$MLLOG_CORPUS`
//! (with custom files this test writes: the package's own, its figures changed, the record of
//! the folder's batch size removed, a record of another benchmark mixed in, and for a
//! benchmark whose package file is gone), `rcp`, `score` and `verify` computing the same from
//! the package as from the built-in tables, and bad input.

mod common;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use mllog_core::results::rcp::RcpTable;
use mllog_core::results::rcp_tables::{rcp_folders, RcpTables};
use mllog_core::rules_source::RulesSource;
use serde_json::Value;

use common::mllog;
use support::copy_dir;

fn python(code: &str, args: &[&std::ffi::OsStr]) -> Value {
    support::python(code, args)
}

/// The rulesets whose RCPs are built in.
const BUILT_IN: [&str; 4] = ["5.0.0", "5.1.0", "6.0.0", "6.1.0"];

fn package() -> RulesSource {
    let py = common::python().to_string_lossy().into_owned();
    RulesSource::from_python(&py).expect("the official package is importable")
}

/// A copy of the package's `rcp_checker` folder under `<tmp>/mlperf_logging/`, the package
/// folder of the copy returned.
fn package_copy(tmp: &Path) -> PathBuf {
    let root = tmp.join("mlperf_logging");
    copy_dir(&package().rcp_dir(), &root.join("rcp_checker"));
    std::fs::create_dir_all(root.join("compliance_checker")).unwrap();
    root
}

fn table(tables: &RcpTables, benchmark: &str) -> RcpTable {
    let recs = tables
        .records(benchmark)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("{} {benchmark}: no file", tables.ruleset));
    let runs = tables
        .submission_runs(benchmark)
        .unwrap_or_else(|| panic!("{benchmark}: no run count"));
    RcpTable::from_records(&tables.ruleset, benchmark, &recs.records, runs, false)
}

/// For every built-in ruleset, the tables read from the installed package are the built-in
/// ones: the same benchmarks, records, statistics, pruned sets and run counts. A package that
/// moved on fails here.
#[test]
fn package_tables_equal_the_built_in_ones() {
    let src = package();
    for rs in BUILT_IN {
        let ours = RcpTables::built_in(rs).unwrap();
        let read = RcpTables::open(&src.rcp_dir(), "training", rs, src.version.clone()).unwrap();
        let benchmarks = ours.benchmarks().unwrap();
        assert_eq!(benchmarks, read.benchmarks().unwrap(), "{rs}");
        assert!(!benchmarks.is_empty(), "{rs}");
        for b in &benchmarks {
            assert_eq!(table(&ours, b), table(&read, b), "{rs} {b}");
            assert_eq!(ours.submission_runs(b), read.submission_runs(b), "{rs} {b}");
        }
    }
}

/// Every `<usage>_<ruleset>` RCP folder of the package loads, and every record's statistics and
/// every pruned set are the official `RCP_Checker`'s.
#[test]
fn every_rcp_folder_of_the_package_loads_with_the_official_statistics() {
    let code = r#"
import glob, json, os, logging
logging.disable(logging.CRITICAL)
from mlperf_logging.rcp_checker import rcp_checker as rc
base = os.path.dirname(rc.__file__)
out = {}
for d in sorted(glob.glob(os.path.join(base, "*_*.*.*"))):
    usage, rs = os.path.basename(d).split("_", 1)
    for f in sorted(glob.glob(os.path.join(d, "rcps_*.json"))):
        b = os.path.basename(f)[5:-5]
        try:
            c = rc.RCP_Checker(usage, rs, b, False)
        except KeyError:
            # A benchmark of an older round without a run count: the checker stops.
            out[usage + "/" + rs + "/" + b] = None
            continue
        out[usage + "/" + rs + "/" + b] = {
            "records": [[k, float(v["BS"]), float(v["RCP Mean"]), float(v["RCP Stdev"]), float(v["Min Epochs"])] for k, v in c.rcp_data.items()],
            "pruned": list(c.pruned_rcp_data.keys()),
        }
print(json.dumps(out))
"#;
    let Value::Object(official) = python(code, &[]) else {
        panic!("not an object")
    };
    let src = package();
    let folders = rcp_folders(&src.rcp_dir());
    assert!(folders.len() >= 15, "{folders:?}");
    assert!(folders.iter().any(|f| f.starts_with("hpc_")), "{folders:?}");
    let (mut seen, mut unknown) = (0, 0);
    for f in &folders {
        let (usage, rs) = f.split_once('_').unwrap();
        let tables =
            RcpTables::open(&src.rcp_dir(), usage, rs, None).unwrap_or_else(|e| panic!("{f}: {e}"));
        let benchmarks = tables.benchmarks().unwrap();
        assert!(!benchmarks.is_empty(), "{f}");
        for b in benchmarks {
            let key = format!("{usage}/{rs}/{b}");
            let o = &official[&key];
            seen += 1;
            if o.is_null() {
                // The file loads; the check stops where the official one does.
                let recs = tables.records(&b).unwrap_or_else(|e| panic!("{e}"));
                assert!(recs.is_some_and(|r| !r.records.is_empty()), "{key}");
                assert_eq!(tables.submission_runs(&b), None, "{key}");
                unknown += 1;
                continue;
            }
            let t = table(&tables, &b);
            let recs = o["records"].as_array().unwrap();
            assert_eq!(recs.len(), t.records.len(), "{key}");
            for (o, p) in recs.iter().zip(&t.records) {
                assert_eq!(o[0].as_str().unwrap(), p.name, "{key}");
                assert_eq!(o[1].as_f64().unwrap(), p.bs, "{key}");
                assert_eq!(o[2].as_f64().unwrap(), p.mean, "{key} {}", p.name);
                assert_eq!(o[3].as_f64().unwrap(), p.stdev, "{key} {}", p.name);
                assert_eq!(
                    o[4].as_f64().unwrap(),
                    p.min_acceptable_mean,
                    "{key} {}",
                    p.name
                );
            }
            let pruned: Vec<&str> = o["pruned"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            let ours: Vec<&str> = t.pruned.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(pruned, ours, "{key}");
        }
    }
    assert_eq!(seen, official.len());
    assert!(unknown < seen / 4, "{unknown} of {seen}");
}

/// Writes the custom RCP files of each real folder and runs the official
/// `rcp_checker.check_directory` with each (as its command line does with `--custom_rcps`):
/// one JSON object per case.
const CUSTOM: &str = r#"
import glob, json, os, sys, logging, traceback
logging.disable(logging.CRITICAL)
from mlperf_logging.rcp_checker import rcp_checker as rc
work = sys.argv[1]
folders = json.loads(sys.argv[2])
out = []
for i, (folder, rs) in enumerate(folders):
    files = glob.glob(folder + "/result_*.txt")
    bs, _, bench = rc.get_submission_epochs(files, rs, False)
    with open(os.path.join(os.path.dirname(rc.__file__), "training_" + rs, "rcps_%s.json" % bench)) as f:
        own = json.load(f)
    key = "samples to converge" if bench in ["llama2_70b_lora", "flux1"] else "Epochs to converge"
    def scaled(k):
        d = json.loads(json.dumps(own))
        for r in d.values():
            r[key] = [x * k for x in r[key]]
        return d
    first = next(iter(own.values()))
    foreign = json.loads(json.dumps(first))
    foreign["Benchmark"] = "bert" if bench != "bert" else "resnet"
    foreign["Epochs to converge"] = [x * 1.5 for x in first[key]]
    foreign["BS"] = bs * 3
    mixed = dict(own)
    mixed["zz_foreign"] = foreign
    variants = {
        "own": own,
        "slower": scaled(1.3),
        "faster": scaled(0.7),
        "no_exact": {k: v for k, v in own.items() if v["BS"] != bs},
        "mixed": mixed,
    }
    for name, data in variants.items():
        path = os.path.join(work, "%d_%s.json" % (i, name))
        with open(path, "w") as f:
            json.dump(data, f)
        case = dict(folder=folder, ruleset=rs, benchmark=bench, variant=name, file=path)
        try:
            with open(path) as f:
                passed, msg, norm = rc.check_directory(folder, "training", rs, False, False, rcp_file=f, rcp_pass="pruned_rcps")
            case.update(passed=passed, msg=msg, norm=float(norm))
        except Exception as e:
            case.update(error=type(e).__name__)
        out.append(case)
print(json.dumps(out))
"#;

/// Every benchmark folder of the submissions corpus's MANIFEST, with its ruleset.
fn corpus_folders(c: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(c.join("MANIFEST.tsv")).unwrap();
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let r: Vec<&str> = l.split('\t').collect();
            let dir = c
                .join(r[0])
                .join(r[2])
                .join("results")
                .join(r[3])
                .join(r[4]);
            (dir.display().to_string(), r[1].to_owned())
        })
        .collect()
}

fn rcp_json(args: &[&std::ffi::OsStr]) -> (i32, Value, String) {
    let mut all: Vec<&std::ffi::OsStr> = vec!["rcp".as_ref(), "--format".as_ref(), "json".as_ref()];
    all.extend_from_slice(args);
    let (code, out, err) = mllog(all);
    assert!(!err.contains("panicked"), "{err}");
    let doc = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    (code, doc, err)
}

/// With `--custom-rcps`, the verdict, message and factor of every real folder equal the
/// official checker's with `--custom_rcps`, for each custom file; and a custom file for a
/// benchmark whose package file is gone gives the same as with the file there.
#[test]
fn custom_rcps_verdicts_and_factors_equal_the_official_checker() {
    let Some(c) = common::corpus(
        "submissions",
        "--custom-rcps verdicts and factors of the real submission folders against rcp_checker",
    ) else {
        return;
    };
    let folders = corpus_folders(&c);
    assert_eq!(folders.len(), 15);
    let tmp = tempfile::tempdir().unwrap();
    // The official checker deletes scaling.json only with set_scaling; it reads the corpus
    // folders as they are, and so do we.
    let arg = serde_json::to_string(&folders).unwrap();
    let Value::Array(cases) = python(CUSTOM, &[tmp.path().as_os_str(), arg.as_ref()]) else {
        panic!("not a list")
    };
    assert_eq!(cases.len(), 15 * 5);
    // The package without the RCP file of each folder's benchmark.
    let stripped = package_copy(tmp.path());
    let mut passed_and_failed = (0, 0);
    for case in &cases {
        let what = format!("{} {}", case["folder"], case["variant"]);
        let folder = case["folder"].as_str().unwrap();
        let file = case["file"].as_str().unwrap();
        let rs = case["ruleset"].as_str().unwrap();
        let (code, doc, err) = rcp_json(&[
            "--ruleset".as_ref(),
            rs.as_ref(),
            "--custom-rcps".as_ref(),
            file.as_ref(),
            folder.as_ref(),
        ]);
        let r = &doc["benchmarks"][0];
        assert!(
            case.get("error").is_none(),
            "{what}: the official checker stops with {}",
            case["error"]
        );
        assert_eq!(r["passed"], case["passed"], "{what}: {doc}{err}");
        assert_eq!(code, if case["passed"] == true { 0 } else { 1 }, "{what}");
        assert_eq!(r["official_message"], case["msg"], "{what}");
        assert_eq!(r["norm_factor"].as_f64(), case["norm"].as_f64(), "{what}");
        assert_eq!(doc["rcps"]["custom_rcps"].as_str(), Some(file), "{what}");
        if case["passed"] == true {
            passed_and_failed.0 += 1;
        } else {
            passed_and_failed.1 += 1;
        }
        if case["variant"] == "slower" {
            // The final score's RCP step takes the same file.
            let (_, out, err) = mllog([
                "score",
                "--ruleset",
                rs,
                "--custom-rcps",
                file,
                "--format",
                "json",
                folder,
            ]);
            let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}{err}"));
            let fin = &doc["benchmarks"][0]["final"]["rcp"];
            assert_eq!(fin["passed"], case["passed"], "{what}: score");
            assert_eq!(
                fin["norm_factor"].as_f64(),
                case["norm"].as_f64(),
                "{what}: score"
            );
        }
        if case["variant"] == "own" {
            let bench = case["benchmark"].as_str().unwrap();
            let gone = stripped
                .join("rcp_checker")
                .join(format!("training_{rs}"))
                .join(format!("rcps_{bench}.json"));
            let _ = std::fs::remove_file(&gone);
            let (_, without, _) = rcp_json(&[
                "--ruleset".as_ref(),
                rs.as_ref(),
                "--rules".as_ref(),
                stripped.as_os_str(),
                folder.as_ref(),
            ]);
            let e = without["benchmarks"][0]["error"]
                .as_str()
                .unwrap_or_default();
            assert!(e.contains(&gone.display().to_string()), "{what}: {without}");
            let (code2, with, _) = rcp_json(&[
                "--ruleset".as_ref(),
                rs.as_ref(),
                "--rules".as_ref(),
                stripped.as_os_str(),
                "--custom-rcps".as_ref(),
                file.as_ref(),
                folder.as_ref(),
            ]);
            assert_eq!(code2, code, "{what}");
            let w = &with["benchmarks"][0];
            for k in ["passed", "official_message", "norm_factor", "scaling"] {
                assert_eq!(w[k], r[k], "{what}: {k}");
            }
        }
    }
    // The changed figures move verdicts both ways.
    assert!(
        passed_and_failed.0 > 0 && passed_and_failed.1 > 0,
        "{passed_and_failed:?}"
    );
}

fn expect_error(args: &[&std::ffi::OsStr], names: &str) -> String {
    let (code, out, err) = mllog(args);
    assert_eq!(code, 2, "{out}{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(names), "{names} not in: {err}");
    err
}

/// Bad input: a clear error naming the folder or file, exit 2, never a panic; a broken RCP file
/// of one benchmark stops only that benchmark's check, as in the official checker.
#[test]
fn bad_rules_and_custom_files_are_named_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    // A folder with a result file, so that the commands reach the RCPs.
    let bench = t.join("results/sys/llama2_70b_lora");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(bench.join("result_0.txt"), ":::MLLOG {\"key\": \"submission_benchmark\", \"value\": \"llama2_70b_lora\", \"metadata\": {}}\n").unwrap();
    let arg = |s: &Path| s.as_os_str().to_owned();
    let base = ["rcp", "--ruleset", "5.0.0"];
    let with = |extra: &[std::ffi::OsString]| -> Vec<std::ffi::OsString> {
        let mut v: Vec<std::ffi::OsString> = base.iter().map(|s| s.into()).collect();
        v.extend_from_slice(extra);
        v.push(arg(&bench));
        v
    };
    let run = |v: Vec<std::ffi::OsString>, names: &str| {
        let refs: Vec<&std::ffi::OsStr> = v.iter().map(|s| s.as_os_str()).collect();
        expect_error(&refs, names)
    };
    // Not a package folder.
    let nowhere = t.join("nowhere");
    run(
        with(&["--rules".into(), arg(&nowhere)]),
        &nowhere.display().to_string(),
    );
    // A Python that cannot be run.
    run(
        with(&["--rules".into(), "python:/nonexistent/python".into()]),
        "/nonexistent/python",
    );
    // A package without the ruleset's folder.
    let pkg = package_copy(t);
    std::fs::remove_dir_all(pkg.join("rcp_checker/training_5.0.0")).unwrap();
    let err = run(
        with(&["--rules".into(), arg(&pkg.join("compliance_checker"))]),
        "training_5.0.0: no such RCP folder",
    );
    assert!(err.contains("training_5.1.0"), "{err}");
    // Custom files: missing, not JSON, not the official format (the official checker fails
    // on the same files).
    let missing = t.join("missing.json");
    run(
        with(&["--custom-rcps".into(), arg(&missing)]),
        &missing.display().to_string(),
    );
    let cases = [
        ("malformed.json", "{\"a\": {\"Benchmark\": ", "not JSON"),
        ("list.json", "[1, 2]", "not an RCP file in the official format"),
        (
            "nohyper.json",
            "{\"r\": {\"Benchmark\": \"llama2_70b_lora\", \"BS\": 8, \"samples to converge\": [1, 2, 3]}}",
            "has no \"Hyperparams\"",
        ),
        (
            "wrongkey.json",
            "{\"r\": {\"Benchmark\": \"llama2_70b_lora\", \"BS\": 8, \"Hyperparams\": {}, \"Epochs to converge\": [1, 2, 3]}}",
            "has no \"samples to converge\"",
        ),
    ];
    let official = r#"
import sys, logging
logging.disable(logging.CRITICAL)
from mlperf_logging.rcp_checker import rcp_checker as rc
import json
try:
    with open(sys.argv[1]) as f:
        rc.RCP_Checker("training", "5.0.0", "llama2_70b_lora", False, f)
    print(json.dumps("accepted"))
except Exception as e:
    print(json.dumps(type(e).__name__))
"#;
    for (name, text, says) in cases {
        let f = t.join(name);
        std::fs::write(&f, text).unwrap();
        let err = run(with(&["--custom-rcps".into(), arg(&f)]), says);
        assert!(err.contains(&f.display().to_string()), "{err}");
        let o = python(official, &[f.as_os_str()]);
        assert_ne!(o, "accepted", "{name}: the official checker takes it");
    }
    // A malformed package file stops the check of its benchmark only.
    let Some(c) = common::corpus("submissions", "a malformed package RCP file") else {
        return;
    };
    let sub = t.join("sub");
    copy_dir(&c.join("5.0/tinycorp"), &sub);
    let pkg = t.join("p2");
    std::fs::create_dir_all(&pkg).unwrap();
    let pkg = package_copy(&pkg);
    let broken = pkg.join("rcp_checker/training_5.0.0/rcps_bert.json");
    std::fs::write(&broken, "{\"bert_ref_1\": ").unwrap();
    let (code, doc, _) = rcp_json(&[
        "--ruleset".as_ref(),
        "5.0.0".as_ref(),
        "--rules".as_ref(),
        pkg.as_os_str(),
        sub.as_os_str(),
    ]);
    let items = doc["benchmarks"].as_array().unwrap();
    let bert: Vec<&Value> = items.iter().filter(|b| b["benchmark"] == "bert").collect();
    let others: Vec<&Value> = items.iter().filter(|b| b["benchmark"] != "bert").collect();
    assert!(!bert.is_empty() && !others.is_empty(), "{doc}");
    for b in bert {
        let e = b["error"].as_str().unwrap();
        assert!(
            e.contains(&broken.display().to_string()) && e.contains("not JSON"),
            "{e}"
        );
    }
    assert!(
        others
            .iter()
            .all(|b| b["error"].is_null() && b["passed"] == true),
        "{doc}"
    );
    assert_eq!(code, 1);
}

/// `value` without the keys that name where the RCPs come from (the source, the file in the
/// decisions, the ruleset lines).
/// The document without what names the source, and without the words of compliance
/// findings: under `--rules` each file is checked by the rule engine, whose messages are the
/// official checker's texts (the verdicts, `compliant`, stay compared).
fn without_source(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "rcps" | "decisions" | "ruleset_evidence"))
                .filter(|(k, _)| {
                    !(m.contains_key("compliant")
                        && matches!(k.as_str(), "error" | "errors" | "decision"))
                })
                .map(|(k, v)| (k.clone(), without_source(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_source).collect()),
        // A review problem quoting a file's first compliance error: the verdict's words only.
        Value::String(t) if t.starts_with("not compliant under ") => {
            Value::String(t.split(": ").next().unwrap_or_default().to_owned())
        }
        v => v.clone(),
    }
}

/// `mllog rcp`, `score` and `verify` compute the same from the installed package's RCPs
/// (`--rules` with its compliance_checker folder, and `MLLOG_RULES=python`) as from the
/// built-in ones, on every real submitter folder, and say which they used.
#[test]
fn rcp_score_and_verify_compute_the_same_from_the_package() {
    let Some(c) = common::corpus(
        "submissions",
        "rcp, score and verify from the package's RCPs against the built-in ones",
    ) else {
        return;
    };
    let src = package();
    let dir = src.root.join("compliance_checker");
    let text = std::fs::read_to_string(c.join("MANIFEST.tsv")).unwrap();
    let mut subs: Vec<(String, String)> = text
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let r: Vec<&str> = l.split('\t').collect();
            (
                c.join(r[0]).join(r[2]).display().to_string(),
                r[1].to_owned(),
            )
        })
        .collect();
    subs.sort();
    subs.dedup();
    assert!(subs.len() >= 8, "{subs:?}");
    let py = common::python().display().to_string();
    for (sub, rs) in &subs {
        for cmd in ["rcp", "score", "verify"] {
            let run = |extra: &[&str], env: Option<&str>| {
                let exe = env!("CARGO_BIN_EXE_mllog");
                let mut c = Command::new(exe);
                c.args([cmd, "--ruleset", rs, "--format", "json"])
                    .args(extra)
                    .arg(sub)
                    .env_remove("MLLOG_RULES")
                    .env("MLLOG_PYTHON", &py);
                if let Some(e) = env {
                    c.env("MLLOG_RULES", e);
                }
                let o = c.output().unwrap();
                let err = String::from_utf8_lossy(&o.stderr).into_owned();
                assert!(!err.contains("panicked"), "{err}");
                let doc: Value = serde_json::from_slice(&o.stdout)
                    .unwrap_or_else(|e| panic!("{cmd} {sub}: {e}: {err}"));
                (o.status.code(), doc)
            };
            let (code, built_in) = run(&[], None);
            let (code2, read) = run(&["--rules", dir.to_str().unwrap()], None);
            let (code3, env) = run(&[], Some("python"));
            assert_eq!(built_in["rcps"]["kind"], "built_in", "{cmd} {sub}");
            for (c, doc) in [(code2, &read), (code3, &env)] {
                assert_eq!(c, code, "{cmd} {sub}");
                assert_eq!(
                    without_source(doc),
                    without_source(&built_in),
                    "{cmd} {sub}"
                );
                assert_eq!(doc["rcps"]["kind"], "folder", "{cmd} {sub}");
                assert_eq!(
                    doc["rcps"]["package_version"].as_str(),
                    src.version.as_deref()
                );
                let rcps = src.rcp_dir().join(format!("training_{rs}"));
                assert_eq!(doc["rcps"]["dir"].as_str(), rcps.to_str(), "{cmd} {sub}");
            }
        }
    }
}

/// Writes custom RCP files, each the package's file of the folder's benchmark with one change
/// (`argv[3]` picks the set: `nan`, Python's JSON constants `NaN`, `Infinity`, `-Infinity`,
/// which `json.load` accepts; `odd`, one odd record: figures empty, a `Benchmark` that is no
/// string, `true` as a batch size or figure, a key missing, a string among the figures), for
/// each real folder, and runs `check_directory` with each: one JSON object per case, with the
/// record changed, a NaN factor as `null`, and the exception's name where the official
/// checker stops with one.
const VARIANT_CUSTOM: &str = r#"
import copy, glob, json, math, os, sys, logging
logging.disable(logging.CRITICAL)
import warnings; warnings.simplefilter("ignore")
from mlperf_logging.rcp_checker import rcp_checker as rc
work, kind = sys.argv[1], sys.argv[3]
folders = json.loads(sys.argv[2])
out = []
nan, inf = float("nan"), float("inf")
for i, (folder, rs) in enumerate(folders):
    files = glob.glob(folder + "/result_*.txt")
    bs, _, bench = rc.get_submission_epochs(files, rs, False)
    with open(os.path.join(os.path.dirname(rc.__file__), "training_" + rs, "rcps_%s.json" % bench)) as f:
        own = json.load(f)
    key = "samples to converge" if bench in ["llama2_70b_lora", "flux1"] else "Epochs to converge"
    names = list(own)
    exact = [k for k in names if own[k]["BS"] == bs]
    other = [k for k in names if own[k]["BS"] != bs]
    def put(target, field, index, value):
        def f(d):
            if not target:
                return None
            r = d[target[0]]
            if value is KeyError:
                del r[field]
            elif index is None:
                r[field] = value
            else:
                r[field][index % len(r[field])] = value
            return target[0]
        return f
    def all_nan(d):
        r = d[(exact or names)[0]]
        r[key] = [nan] * len(r[key])
        return (exact or names)[0]
    variants = {
        "nan_first_exact": put(exact, key, 0, nan),
        "nan_middle_exact": put(exact, key, 3, nan),
        "nan_last_exact": put(exact, key, -1, nan),
        "inf_exact": put(exact, key, 1, inf),
        "minus_inf_exact": put(exact, key, 2, -inf),
        "nan_other": put(other, key, 1, nan),
        "nan_bs_other": put(other, "BS", None, nan),
        "all_nan": all_nan,
    } if kind == "nan" else {
        "empty_other": put(other, key, None, []),
        "empty_exact": put(exact, key, None, []),
        "null_benchmark_other": put(other, "Benchmark", None, None),
        "null_benchmark_exact": put(exact, "Benchmark", None, None),
        "number_benchmark_other": put(other, "Benchmark", None, 7),
        "bool_bs_other": put(other, "BS", None, True),
        "bool_figure_exact": put(exact, key, 1, True),
        "no_hyperparams_other": put(other, "Hyperparams", None, KeyError),
        "string_figure_other": put(other, key, 1, "1.5"),
    }
    for name, change in variants.items():
        data = copy.deepcopy(own)
        record = change(data)
        if record is None:
            continue
        path = os.path.join(work, "%d_%s.json" % (i, name))
        with open(path, "w") as f:
            json.dump(data, f)
        case = dict(folder=folder, ruleset=rs, variant=name, file=path, record=record)
        try:
            with open(path) as f:
                passed, msg, norm = rc.check_directory(folder, "training", rs, False, False, rcp_file=f, rcp_pass="pruned_rcps")
            norm = float(norm)
            case.update(passed=passed, msg=msg, norm=None if math.isnan(norm) or math.isinf(norm) else norm)
        except Exception as e:
            case.update(error=type(e).__name__)
        out.append(case)
print(json.dumps(out))
"#;

/// The cases of [`VARIANT_CUSTOM`] (`kind`: `nan` or `odd`) on every folder of the corpus, in
/// the temporary folder that holds their files; `None` without the corpus.
fn variant_cases(kind: &str, what: &str) -> Option<(tempfile::TempDir, Vec<Value>)> {
    let c = common::corpus("submissions", what)?;
    let folders = corpus_folders(&c);
    let tmp = tempfile::tempdir().unwrap();
    let arg = serde_json::to_string(&folders).unwrap();
    let args = [tmp.path().as_os_str(), arg.as_ref(), kind.as_ref()];
    let Value::Array(cases) = python(VARIANT_CUSTOM, &args) else {
        panic!("not a list")
    };
    Some((tmp, cases))
}

/// `mllog rcp --custom-rcps` on a case the official checker judged: the same verdict, exit
/// status, message and factor. Whether it passed.
fn assert_official_verdict(case: &Value) -> bool {
    let what = format!("{} {}", case["folder"], case["variant"]);
    let (code, doc, err) = rcp_json(&[
        "--ruleset".as_ref(),
        case["ruleset"].as_str().unwrap().as_ref(),
        "--custom-rcps".as_ref(),
        case["file"].as_str().unwrap().as_ref(),
        case["folder"].as_str().unwrap().as_ref(),
    ]);
    let r = &doc["benchmarks"][0];
    assert_eq!(r["passed"], case["passed"], "{what}: {doc}{err}");
    assert_eq!(code, if case["passed"] == true { 0 } else { 1 }, "{what}");
    assert_eq!(r["official_message"], case["msg"], "{what}");
    assert_eq!(
        r["norm_factor"].as_f64(),
        case["norm"].as_f64(),
        "{what}: {doc}"
    );
    case["passed"] == true
}

/// A custom RCP file with `NaN` or `Infinity` among its figures or as a batch size is read as
/// the official checker reads it (`json.load` takes them), and the verdict, message and factor
/// of every real folder equal `check_directory`'s with `--custom_rcps`.
#[test]
fn custom_rcps_with_nan_and_infinity_get_the_official_verdicts() {
    let Some((_tmp, cases)) = variant_cases(
        "nan",
        "--custom-rcps with NaN and Infinity against rcp_checker",
    ) else {
        return;
    };
    assert!(cases.len() >= 15 * 6, "{}", cases.len());
    let mut verdicts = (0, 0);
    for case in &cases {
        let what = format!("{} {}", case["folder"], case["variant"]);
        let written = std::fs::read_to_string(case["file"].as_str().unwrap()).unwrap();
        assert!(
            written.contains("NaN") || written.contains("Infinity"),
            "{what}: {written}"
        );
        assert!(
            case.get("error").is_none(),
            "{what}: the official checker stops with {}",
            case["error"]
        );
        if assert_official_verdict(case) {
            verdicts.0 += 1;
        } else {
            verdicts.1 += 1;
        }
    }
    assert!(verdicts.0 > 0 && verdicts.1 > 0, "{verdicts:?}");
}

/// Writes the package's RCP file of another benchmark as a custom file and runs the official
/// `check_directory` on one folder with it, keeping the warnings it logs.
const FOREIGN: &str = r#"
import json, os, sys, logging
from mlperf_logging.rcp_checker import rcp_checker as rc
folder, rs, source, path = sys.argv[1:5]
with open(os.path.join(os.path.dirname(rc.__file__), "training_" + rs, "rcps_%s.json" % source)) as f:
    data = json.load(f)
with open(path, "w") as f:
    json.dump(data, f)
warned = []
class Keep(logging.Handler):
    def emit(self, record):
        if record.levelno == logging.WARNING:
            warned.append(record.getMessage().strip())
root = logging.getLogger()
root.handlers[:] = [Keep()]
root.setLevel(logging.INFO)
with open(path) as f:
    passed, msg, norm = rc.check_directory(folder, "training", rs, False, False, rcp_file=f, rcp_pass="pruned_rcps")
print(json.dumps(dict(passed=passed, msg=msg, norm=float(norm), warned=warned)))
"#;

/// Given one benchmark folder, a custom file whose records are all of another benchmark is
/// still the folder's table, as the official command uses it (its verdict, message, factor
/// and warning); checking a system folder, each benchmark the file has no record of is checked
/// against its own RCPs, and `rcp`, `score` and `verify` say so.
#[test]
fn a_custom_file_of_another_benchmark_is_the_table_of_one_folder_and_said_for_several() {
    let Some(c) = common::corpus(
        "submissions",
        "--custom-rcps of another benchmark against rcp_checker",
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let rgat = c.join("5.0/Dell/results/XE9680x8H200-SXM-141GB/rgat");
    let lora = c.join("5.0/AMD/results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora");
    let src = package();
    let rules = src.root.display().to_string();
    let mut messages = std::collections::BTreeSet::new();
    for (i, (folder, source)) in [
        (&rgat, "llama31_405b"),
        (&rgat, "dlrm_dcnv2"),
        (&lora, "rgat"),
    ]
    .into_iter()
    .enumerate()
    {
        let file = tmp.path().join(format!("{i}_{source}.json"));
        let o = python(
            FOREIGN,
            &[
                folder.as_os_str(),
                "5.0.0".as_ref(),
                source.as_ref(),
                file.as_os_str(),
            ],
        );
        let what = format!("{} with {source}", folder.display());
        let (code, doc, err) = rcp_json(&[
            "--rules".as_ref(),
            rules.as_ref(),
            "--ruleset".as_ref(),
            "5.0.0".as_ref(),
            "--custom-rcps".as_ref(),
            file.as_os_str(),
            folder.as_os_str(),
        ]);
        let r = &doc["benchmarks"][0];
        assert_eq!(r["passed"], o["passed"], "{what}: {doc}{err}");
        assert_eq!(code, if o["passed"] == true { 0 } else { 1 }, "{what}");
        assert_eq!(r["official_message"], o["msg"], "{what}");
        assert_eq!(r["norm_factor"].as_f64(), o["norm"].as_f64(), "{what}");
        let warning = "RCP in specified json file does not match benchmark name in results.";
        assert!(
            o["warned"].as_array().unwrap().iter().any(|w| w == warning),
            "{what}: {o}"
        );
        let decisions = r["decisions"].to_string();
        assert!(
            decisions.contains(&warning.replace('"', "\\\"")),
            "{what}: {decisions}"
        );
        messages.insert(o["msg"].as_str().unwrap().to_owned());
    }
    assert!(messages.len() >= 2, "{messages:?}");
    // A submitter folder of two benchmarks, a custom file for one of them: the other is checked
    // against its own RCPs, as without the file, and each command says so.
    let submitter = c.join("5.0/tinycorp");
    let system = submitter.join("results/tinybox_green");
    let file = tmp.path().join("bert.json");
    python(
        FOREIGN,
        &[
            system.join("bert").as_os_str(),
            "5.0.0".as_ref(),
            "bert".as_ref(),
            file.as_os_str(),
        ],
    );
    let said = "no record for retinanet, so retinanet is checked against the built-in RCPs";
    for cmd in ["rcp", "score", "verify"] {
        let args = |custom: bool| {
            let mut v: Vec<&std::ffi::OsStr> = vec![cmd.as_ref(), "--ruleset".as_ref()];
            v.push("5.0.0".as_ref());
            if custom {
                v.extend(["--custom-rcps".as_ref(), file.as_os_str()]);
            }
            v.push(submitter.as_os_str());
            v
        };
        let (code, out, err) = mllog(args(true));
        assert!(out.contains(said), "{cmd}: {out}{err}");
        let (code2, out2, _) = mllog(args(false));
        assert_eq!(code, code2, "{cmd}");
        assert!(!out2.contains(said), "{cmd}");
    }
    let json = |custom: bool| {
        let mut v: Vec<&std::ffi::OsStr> = vec!["--ruleset".as_ref(), "5.0.0".as_ref()];
        if custom {
            v.extend(["--custom-rcps".as_ref(), file.as_os_str()]);
        }
        v.push(submitter.as_os_str());
        let (_, doc, _) = rcp_json(&v);
        doc["benchmarks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["benchmark"] == "retinanet")
            .cloned()
            .unwrap()
    };
    let (with, without) = (json(true), json(false));
    for k in ["passed", "official_message", "norm_factor", "status"] {
        assert_eq!(with[k], without[k], "retinanet {k}");
    }
}

/// A custom RCP file with an odd record is read as the official checker reads it: what it
/// computes with (figures empty, a `Benchmark` that is no string, `true` as a number) gives
/// its verdict, message and factor on every real folder, whether that record is used or not;
/// what it stops on with an exception (a key missing, a string among the figures) is exit 2
/// naming the file and the record.
#[test]
fn custom_rcps_with_odd_records_get_the_official_verdicts() {
    let Some((_tmp, cases)) =
        variant_cases("odd", "--custom-rcps with odd records against rcp_checker")
    else {
        return;
    };
    assert!(cases.len() >= 15 * 7, "{}", cases.len());
    let (mut verdicts, mut stopped, mut shown) = ((0, 0), 0, 0);
    for case in &cases {
        if case.get("error").is_none() {
            shown += usize::from(benchmark_shown_as_in_file(case));
            if assert_official_verdict(case) {
                verdicts.0 += 1;
            } else {
                verdicts.1 += 1;
            }
            continue;
        }
        let what = format!("{} {}", case["folder"], case["variant"]);
        let file = case["file"].as_str().unwrap();
        let (code, out, err) = mllog([
            "rcp",
            "--ruleset",
            case["ruleset"].as_str().unwrap(),
            "--custom-rcps",
            file,
            case["folder"].as_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{what}: {out}{err}");
        let record = case["record"].as_str().unwrap();
        assert!(
            err.contains(file) && err.contains(&format!("{record:?}")),
            "{what}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        stopped += 1;
    }
    assert!(
        verdicts.0 > 0 && verdicts.1 > 0 && stopped > 0 && shown > 0,
        "{verdicts:?} {stopped} {shown}"
    );
}

/// Whether the JSON output lists the case's changed record, and then that it shows its
/// `Benchmark` as the file has it (`null`, `7`, the string).
fn benchmark_shown_as_in_file(case: &Value) -> bool {
    let file = case["file"].as_str().unwrap();
    let data: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let record = case["record"].as_str().unwrap();
    let (_, doc, _) = rcp_json(&[
        "--ruleset".as_ref(),
        case["ruleset"].as_str().unwrap().as_ref(),
        "--custom-rcps".as_ref(),
        file.as_ref(),
        case["folder"].as_str().unwrap().as_ref(),
    ]);
    let Some(point) = doc["benchmarks"][0]["records"]
        .as_array()
        .and_then(|r| r.iter().find(|p| p["name"] == record))
    else {
        return false;
    };
    assert_eq!(
        point["benchmark"], data[record]["Benchmark"],
        "{file}: {doc}"
    );
    true
}

/// `check_directory` on a folder with the RCPs of a package copy (its `rcp_checker` module
/// loaded from there): the exception's name, or the verdict.
const FROM_COPY: &str = r#"
import importlib.util, json, logging, sys
logging.disable(logging.CRITICAL)
spec = importlib.util.spec_from_file_location("copied", sys.argv[1] + "/rcp_checker/rcp_checker.py")
rc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rc)
try:
    print(json.dumps(dict(passed=rc.check_directory(sys.argv[2], "training", "6.1.0", False, False, rcp_pass="pruned_rcps")[0])))
except Exception as e:
    print(json.dumps(dict(error=type(e).__name__)))
"#;

/// A package RCP file that cannot be read (mode 000, checked as an unprivileged user) or is a
/// directory is an I/O error, exit 2, naming the file and saying which, where the official
/// checker stops with an `OSError` (`PermissionError`, `IsADirectoryError`).
#[test]
fn an_unreadable_or_directory_package_rcp_file_is_an_io_error() {
    use mllog_core::compliance::{example_log, Division, Ruleset};
    use std::os::unix::fs::PermissionsExt;
    let Some(prefix) = support::as_nobody() else {
        println!("skipped: an unreadable RCP file (running as root without setpriv)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let pkg = package_copy(tmp.path());
    let folder = tmp.path().join("llama2_70b_lora");
    std::fs::create_dir_all(&folder).unwrap();
    let log = example_log(
        Ruleset::V6_1_0,
        mllog_core::Benchmark::Llama2_70bLora,
        Division::Closed,
    )
    .unwrap();
    std::fs::write(folder.join("result_0.txt"), log).unwrap();
    let file = pkg.join("rcp_checker/training_6.1.0/rcps_llama2_70b_lora.json");
    let open = |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755));
    let walk = |d: &Path| {
        for e in walkdir(d) {
            let mode = if e.is_dir() { 0o755 } else { 0o644 };
            std::fs::set_permissions(&e, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    };
    open(tmp.path()).unwrap();
    walk(tmp.path());
    let py = common::python().display().to_string();
    let run = |exe: &str, args: &[&str]| {
        let mut all: Vec<String> = prefix.clone();
        all.push(exe.into());
        all.extend(args.iter().map(|s| s.to_string()));
        let o = Command::new(&all[0]).args(&all[1..]).output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (p, f) = (pkg.display().to_string(), folder.display().to_string());
    let ours = || {
        run(
            env!("CARGO_BIN_EXE_mllog"),
            &["rcp", "--rules", &p, "--ruleset", "6.1.0", &f],
        )
    };
    let theirs = || {
        let (_, out, err) = run(&py, &["-c", FROM_COPY, &p, &f]);
        serde_json::from_str::<Value>(out.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}: {out}{err}"))
    };
    // Readable: a verdict, not an error.
    let (code, out, err) = ours();
    assert!(code == 0 || code == 1, "{out}{err}");
    let t = theirs();
    assert!(t["error"].is_null(), "{t}");
    // Unreadable.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).unwrap();
    let (code, out, err) = ours();
    assert_eq!(code, 2, "{out}{err}");
    let named = format!("{}: Permission denied", file.display());
    assert!(out.contains(&named) && out.contains("ERROR"), "{out}{err}");
    if !prefix.is_empty() {
        assert_eq!(theirs()["error"], "PermissionError");
    }
    // A directory in its place.
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir(&file).unwrap();
    open(&file).unwrap();
    let (code, out, err) = ours();
    assert_eq!(code, 2, "{out}{err}");
    let named = format!("{}: a directory, not an RCP file", file.display());
    assert!(
        out.contains(&named) && !out.contains("no RCP file"),
        "{out}{err}"
    );
    assert_eq!(theirs()["error"], "IsADirectoryError");
}

/// Every path under `d` (itself included).
fn walkdir(d: &Path) -> Vec<PathBuf> {
    let mut out = vec![d.to_path_buf()];
    if d.is_dir() {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            out.extend(walkdir(&e.path()));
        }
    }
    out
}

/// With the package's RCPs, a ruleset not written `X.Y.Z` (`5.0`, `training_5.0.0`) is refused
/// naming the option (exit 2), as the official `RCP_Checker` refuses it; `5.0.0` is checked.
#[test]
fn a_ruleset_not_written_x_y_z_is_refused_with_the_package() {
    let refuses = r#"
import json, sys, logging
logging.disable(logging.CRITICAL)
from mlperf_logging.rcp_checker import rcp_checker as rc
out = {}
for rs in sys.argv[1:]:
    try:
        rc.RCP_Checker("training", rs, "llama2_70b_lora", False)
        out[rs] = False
    except Exception:
        out[rs] = True
print(json.dumps(out))
"#;
    let names = ["5.0", "training_5.0.0", "5.0.0"];
    let args: Vec<&std::ffi::OsStr> = names.iter().map(|s| s.as_ref()).collect();
    let official = python(refuses, &args);
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("llama2_70b_lora");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("result_0.txt"),
        ":::MLLOG {\"key\": \"submission_benchmark\", \"value\": \"llama2_70b_lora\", \"metadata\": {}}\n",
    )
    .unwrap();
    let rules = package().root.display().to_string();
    for rs in names {
        let (code, out, err) = mllog([
            "rcp".as_ref(),
            "--rules".as_ref(),
            rules.as_ref(),
            "--ruleset".as_ref(),
            rs.as_ref(),
            folder.as_os_str(),
        ]);
        assert!(!err.contains("panicked"), "{err}");
        if official[rs] == true {
            assert_eq!(code, 2, "{rs}: {out}{err}");
            assert!(
                err.contains(&format!("--ruleset {rs:?}")) && err.contains("X.Y.Z"),
                "{rs}: {err}"
            );
        } else {
            assert!(
                out.contains(&format!("ruleset {rs} (given)")),
                "{rs}: {out}{err}"
            );
        }
    }
    assert_eq!(official["5.0"], true);
}
