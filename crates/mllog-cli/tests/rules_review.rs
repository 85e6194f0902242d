//! `mllog score --rules` and `mllog verify --rules`: each result file's compliance from the
//! rule engine running the source's rule files, so that rulesets this build has no rules for
//! are scored and reviewed. The oracles are the official tools of the installed package
//! (through `MLLOG_PYTHON`): `result_summarizer._compute_strong_score_standalone` for the
//! score, `package_checker` for the review. The logs are the real ones of
//! `$MLLOG_CORPUS/rounds` (training 3.1.0, 4.0.0, 4.1.0), laid out by this test as benchmark
//! folders, as they are and mutated; and a copy of the package with its 6.1.0 rules and RCPs
//! renamed 6.2.0, a ruleset no build of `mllog` has, against the official tools under 6.1.0.

mod common;
#[path = "support/review.rs"]
mod review;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use common::mllog;
use support::copy_dir;

fn python(code: &str, args: &[&std::ffi::OsStr]) -> Value {
    support::python(code, args)
}

/// One benchmark folder of the rounds corpus: `(ruleset, system, benchmark, logs)`.
type Group = (String, String, String, Vec<PathBuf>);

/// The training logs of the rounds corpus, grouped by round, system and benchmark.
fn round_groups(c: &Path) -> Vec<Group> {
    let text = std::fs::read_to_string(c.join("MANIFEST.tsv")).unwrap();
    let mut groups: BTreeMap<(String, String, String), Vec<PathBuf>> = BTreeMap::new();
    for l in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let r: Vec<&str> = l.split('\t').collect();
        if r[5] != "training" {
            continue;
        }
        // source_path: <submitter>/results/<system>/<benchmark>/result_N.txt
        let p: Vec<&str> = r[3].split('/').collect();
        let key = (
            r[6].to_owned(),
            format!("{}_{}", p[0], p[2]),
            p[3].to_owned(),
        );
        groups.entry(key).or_default().push(c.join(r[0]));
    }
    groups
        .into_iter()
        .map(|((rs, sys, b), logs)| (rs, sys, b, logs))
        .collect()
}

/// `text` without its lines of `key`.
fn without_key(text: &str, key: &str) -> String {
    let needle = format!("\"key\": \"{key}\"");
    text.lines()
        .filter(|l| !l.contains(&needle))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `text` with its first `submission_benchmark` line logged a second time, with another value
/// (an EXACTLY_ONE key logged twice with different values: every ruleset fails it).
fn benchmark_twice(text: &str) -> String {
    let needle = "\"key\": \"submission_benchmark\"";
    let mut out = String::new();
    let mut done = false;
    for l in text.lines() {
        out.push_str(l);
        out.push('\n');
        if !done && l.contains(needle) {
            let v = l.find("\"value\": ").unwrap() + "\"value\": ".len();
            let end = v + l[v..].find(',').unwrap();
            out.push_str(&format!("{}\"other\"{}\n", &l[..v], &l[end..]));
            done = true;
        }
    }
    out
}

/// A folder's variant: its name, how many of its runs are changed, and the change.
type Variant = (&'static str, usize, fn(&str) -> String);

/// As published; one run without `run_stop` (dropped, olympic scoring goes on); two runs
/// logging `submission_benchmark` twice (no score).
const VARIANTS: &[Variant] = &[
    ("as_is", 0, as_is),
    ("no_stop", 1, without_run_stop),
    ("twice", 2, benchmark_twice),
];

fn as_is(t: &str) -> String {
    t.to_owned()
}

fn without_run_stop(t: &str) -> String {
    without_key(t, "run_stop")
}

/// Writes `n` result files into `folder` from `logs` (cycled), the first `broken` of them
/// changed by `change`.
fn write_folder(
    folder: &Path,
    logs: &[PathBuf],
    n: usize,
    broken: usize,
    change: fn(&str) -> String,
) {
    std::fs::create_dir_all(folder).unwrap();
    for i in 0..n {
        let bytes = std::fs::read(&logs[i % logs.len()]).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        let text = if i < broken {
            change(&text)
        } else {
            text.into_owned()
        };
        std::fs::write(folder.join(format!("result_{i}.txt")), text).unwrap();
    }
}

/// The official score of each benchmark folder: `{folder: {runs: {file: minutes}, score}}`.
const SUMMARIZER: &str = r#"
import contextlib, io, json, os, sys
from mlperf_logging.result_summarizer import result_summarizer as rs
cases = json.loads(sys.argv[1])
out = {}
for folder, ruleset in cases:
    bench = os.path.basename(folder)
    system = os.path.basename(os.path.dirname(folder))
    with contextlib.redirect_stdout(io.StringIO()):
        track, _, score, _, scale = rs._compute_strong_score_standalone(
            bench, system, False, folder, "training", ruleset, return_full_scores=True)
    out[folder] = {"runs": {os.path.basename(k): v for k, v in track.items()}, "score": score}
print(json.dumps(out))
"#;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// `mllog score --rules SRC --ruleset R --format json FOLDER` against the summarizer's
/// `expected` (`{runs, score}`): the same files kept with the same minutes, the same score.
fn assert_score_matches(src: &Path, ruleset: &str, folder: &Path, expected: &Value) -> Value {
    let (code, out, err) = mllog([
        "score".as_ref(),
        "--rules".as_ref(),
        src.as_os_str(),
        "--ruleset".as_ref(),
        ruleset.as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        folder.as_os_str(),
    ]);
    assert!(!err.contains("panicked"), "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let b = &doc["benchmarks"][0];
    let what = format!("{} under {ruleset}", folder.display());
    let mut ours: Vec<(String, f64)> = b["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["minutes"].is_number())
        .map(|r| {
            let f = r["file"].as_str().unwrap();
            let name = Path::new(f)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (name, r["minutes"].as_f64().unwrap())
        })
        .collect();
    ours.sort_by(|a, b| a.0.cmp(&b.0));
    let mut theirs: Vec<(String, f64)> = expected["runs"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
        .collect();
    theirs.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        ours.iter().map(|x| &x.0).collect::<Vec<_>>(),
        theirs.iter().map(|x| &x.0).collect::<Vec<_>>(),
        "{what}: kept files differ: {doc}"
    );
    for (o, t) in ours.iter().zip(&theirs) {
        assert!(close(o.1, t.1), "{what} {}: {} vs {}", o.0, o.1, t.1);
    }
    match (b["score"].as_f64(), expected["score"].as_f64()) {
        (Some(x), Some(y)) => assert!(close(x, y), "{what}: score {x} vs {y}"),
        (None, None) => assert_ne!(code, 0, "{what}: no score, exit 0"),
        (x, y) => panic!("{what}: ours {x:?}, result_summarizer {y:?}: {doc}"),
    }
    assert_eq!(doc["ruleset"]["ruleset"], ruleset, "{what}");
    assert_eq!(b["ruleset"], ruleset, "{what}");
    doc
}

/// The package `MLLOG_PYTHON` imports.
fn package() -> PathBuf {
    let v = python(
        "import json, os, mlperf_logging; print(json.dumps(os.path.dirname(mlperf_logging.__file__)))",
        &[],
    );
    PathBuf::from(v.as_str().unwrap())
}

/// Every training folder of the rounds corpus, under its own ruleset (which no build of
/// `mllog` has rules for), scored with the package's rules: as published (five runs from its
/// logs), with one run without `run_stop` (dropped, olympic scoring goes on), and with two runs
/// logging `submission_benchmark` twice (no score): the summarizer's runs and scores.
#[test]
fn score_under_older_rulesets_equals_result_summarizer() {
    let Some(c) = common::corpus("rounds", "mllog score --rules on the rounds' logs") else {
        return;
    };
    let groups = round_groups(&c);
    assert!(groups.len() >= 10, "{}", groups.len());
    let tmp = tempfile::tempdir().unwrap();
    let mut cases: Vec<(String, String)> = Vec::new();
    for (i, (rs, sys, bench, logs)) in groups.iter().enumerate() {
        for &(name, broken, change) in VARIANTS {
            let folder = tmp.path().join(format!("{i}_{name}/results/{sys}/{bench}"));
            write_folder(&folder, logs, 5, broken, change);
            cases.push((folder.display().to_string(), rs.clone()));
        }
    }
    // The summarizer's runs, half of the cases each on two cores.
    let halves: Vec<&[(String, String)]> = cases.chunks(cases.len().div_ceil(2)).collect();
    let official = std::sync::Mutex::new(serde_json::Map::new());
    support::each(&halves, |half| {
        let arg = serde_json::to_string(half).unwrap();
        let Value::Object(scores) = python(SUMMARIZER, &[arg.as_ref()]) else {
            panic!("the summarizer's scores are no JSON object")
        };
        official.lock().unwrap().extend(scores);
    });
    let official = Value::Object(official.into_inner().unwrap());
    let pkg = package();
    let (mut scored, mut unscored) = (0, 0);
    for (folder, rs) in &cases {
        let expected = &official[folder.as_str()];
        assert_score_matches(&pkg, rs, Path::new(folder), expected);
        if expected["score"].is_number() {
            scored += 1;
        } else {
            unscored += 1;
        }
    }
    assert!(
        scored > 0 && unscored > 0,
        "{scored} scored, {unscored} not"
    );
}

/// A copy of the package's `compliance_checker` and `rcp_checker` with `training_6.1.0`, its
/// log parser and its RCPs renamed 6.2.0: under `--rules COPY`, `score --ruleset 6.2.0` of
/// generated 6.1.0 folders equals the summarizer's under 6.1.0, and without `--ruleset` the
/// ruleset is inferred among the copy's and said.
#[test]
fn score_under_a_ruleset_no_build_has_equals_result_summarizer() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = renamed_package(tmp.path());
    let mut cases = Vec::new();
    use mllog_core::compliance::{example_log, Division, Ruleset};
    use mllog_core::Benchmark;
    for (i, b) in [Benchmark::Llama2_70bLora, Benchmark::Flux1]
        .iter()
        .enumerate()
    {
        let log = example_log(Ruleset::V6_1_0, *b, Division::Closed).unwrap();
        let src = tmp.path().join(format!("log_{i}.txt"));
        std::fs::write(&src, &log).unwrap();
        for &(name, broken, change) in VARIANTS {
            let folder = tmp
                .path()
                .join(format!("s{i}_{name}/results/sys/{}", b.as_str()));
            write_folder(&folder, std::slice::from_ref(&src), 10, broken, change);
            cases.push((folder.display().to_string(), "6.1.0".to_owned()));
        }
    }
    let arg = serde_json::to_string(&cases).unwrap();
    let official = python(SUMMARIZER, &[arg.as_ref()]);
    for (folder, _) in &cases {
        assert_score_matches(
            &copy,
            "6.2.0",
            Path::new(folder),
            &official[folder.as_str()],
        );
    }
    // Inferred: the evidence names the copy's rulesets; a 6.1.0 llama2_70b_lora log passes
    // 6.2.0 and 6.1.0 alike, so the inference refuses between them.
    let (code, _, err) = mllog([
        "score".as_ref(),
        "--rules".as_ref(),
        copy.as_os_str(),
        Path::new(&cases[0].0).as_os_str(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("6.1.0, 6.2.0 fit the evidence"), "{err}");
    // A copy with 6.2.0 only: inferred, and said.
    let only = only_six_two(tmp.path(), &copy);
    let (code, out, err) = mllog([
        "score".as_ref(),
        "--rules".as_ref(),
        only.as_os_str(),
        Path::new(&cases[0].0).as_os_str(),
    ]);
    // Scored (1 where the generated runs fail the RCP test: no final score).
    assert_ne!(code, 2, "{out}{err}");
    assert!(out.contains("ruleset 6.2.0 (inferred)"), "{out}");
    assert!(out.contains("has training rulesets 6.2.0"), "{out}");
    assert!(out.contains("SCORE sys/llama2_70b_lora: "), "{out}");
    assert!(
        out.contains("compliance: the rules of training_6.2.0 read from"),
        "{out}"
    );
    // The source has no benchmark_meta.py: the counts noted are said to be this build's.
    assert!(
        err.contains("the result counts noted are this build's")
            && err.contains("benchmark_meta.py"),
        "{err}"
    );
    // A folder of a benchmark the source has no rules for: an error naming the source and
    // what it has.
    let resnet = tmp.path().join("r/results/sys/resnet");
    std::fs::create_dir_all(&resnet).unwrap();
    std::fs::copy(tmp.path().join("log_0.txt"), resnet.join("result_0.txt")).unwrap();
    let (code, _, err) = mllog([
        "score".as_ref(),
        "--rules".as_ref(),
        only.as_os_str(),
        resnet.as_os_str(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has training rulesets 6.2.0"), "{err}");
    assert!(err.contains("resnet"), "{err}");
    // A ruleset the source lacks, given.
    let (code, _, err) = mllog([
        "score".as_ref(),
        "--rules".as_ref(),
        only.as_os_str(),
        "--ruleset".as_ref(),
        "6.1.0".as_ref(),
        resnet.as_os_str(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("ruleset 6.1.0: not in the rules read")
            && err.contains(&only.display().to_string()),
        "{err}"
    );
}

/// `<tmp>/only`: a source with the copy's training 6.2.0 rules, log parsers and RCPs, and no
/// other ruleset.
fn only_six_two(tmp: &Path, copy: &Path) -> PathBuf {
    let only = tmp.join("only");
    let cc = only.join("compliance_checker");
    std::fs::create_dir_all(&cc).unwrap();
    copy_dir(
        &copy.join("compliance_checker/training_6.2.0"),
        &cc.join("training_6.2.0"),
    );
    copy_dir(
        &copy.join("compliance_checker/mlp_parser"),
        &cc.join("mlp_parser"),
    );
    copy_dir(&copy.join("rcp_checker"), &only.join("rcp_checker"));
    only
}

/// `<tmp>/mlperf_logging`: the package's `compliance_checker`, `rcp_checker` and
/// `system_desc_checker` with 6.1.0 also as 6.2.0 (rules, log parser, RCPs), and its
/// `benchmark_meta.py` with 6.2 beside 6.1.
fn renamed_package(tmp: &Path) -> PathBuf {
    let pkg = package();
    let root = tmp.join("mlperf_logging");
    copy_dir(
        &pkg.join("compliance_checker"),
        &root.join("compliance_checker"),
    );
    copy_dir(&pkg.join("rcp_checker"), &root.join("rcp_checker"));
    copy_dir(
        &pkg.join("system_desc_checker"),
        &root.join("system_desc_checker"),
    );
    let cc = root.join("compliance_checker");
    copy_dir(&cc.join("training_6.1.0"), &cc.join("training_6.2.0"));
    std::fs::copy(
        cc.join("mlp_parser/ruleset_610.py"),
        cc.join("mlp_parser/ruleset_620.py"),
    )
    .unwrap();
    let rcp = root.join("rcp_checker");
    copy_dir(&rcp.join("training_6.1.0"), &rcp.join("training_6.2.0"));
    let meta = std::fs::read_to_string(pkg.join("benchmark_meta.py")).unwrap();
    let at = meta
        .find("    '6.1': [")
        .expect("benchmark_meta.py lists 6.1");
    let end = at + meta[at..].find(']').unwrap() + 1;
    let six_one = &meta[at..end];
    let meta = format!(
        "{}{six_one},\n{}{}",
        &meta[..at],
        six_one.replace("'6.1'", "'6.2'"),
        &meta[end..]
    );
    std::fs::write(root.join("benchmark_meta.py"), meta).unwrap();
    root
}

/// `text` with its `seed` values moved by `by` (copies of one run would share their seeds,
/// which the seed checker refuses).
fn seed_moved(text: &str, by: usize) -> String {
    let needle = "\"key\": \"seed\", \"value\": ";
    text.lines()
        .map(|l| match l.find(needle) {
            Some(at) => {
                let v = at + needle.len();
                let end = v + l[v..].find(|c: char| !c.is_ascii_digit()).unwrap_or(0);
                match l[v..end].parse::<u64>() {
                    Ok(n) => format!("{}{}{}\n", &l[..v], n + by as u64, &l[end..]),
                    Err(_) => format!("{l}\n"),
                }
            }
            None => format!("{l}\n"),
        })
        .collect()
}

/// A closed-division system description with every field `system_desc_checker` requires.
fn system_json(system: &str) -> String {
    let mut m = serde_json::Map::new();
    for f in mllog_core::results::package::SYSTEM_DESC_FIELDS {
        m.insert(f.into(), "x".into());
    }
    for (k, v) in [
        ("submitter", "Org"),
        ("division", "closed"),
        ("status", "Available on-premise"),
        ("system_name", system),
        ("number_of_nodes", "1"),
        ("host_processors_per_node", "2"),
        ("accelerators_per_node", "8"),
    ] {
        m.insert(k.into(), v.into());
    }
    serde_json::to_string_pretty(&Value::Object(m)).unwrap()
}

/// A submitter folder of one round's logs: every benchmark folder with the result count the
/// package checker wants (the logs cycled, seeds moved), a system description per system;
/// in the first folder one run without `run_stop` (accepted under olympic scoring), in the
/// second two (the folder fails).
fn round_submission(root: &Path, groups: &[&Group]) {
    for (gi, (_, sys, bench, logs)) in groups.iter().enumerate() {
        let n = mllog_core::results::required_runs(bench).unwrap_or(5);
        let folder = root.join("results").join(sys).join(bench);
        std::fs::create_dir_all(&folder).unwrap();
        let broken = match gi {
            0 => 1,
            1 => 2,
            _ => 0,
        };
        for i in 0..n {
            let bytes = std::fs::read(&logs[i % logs.len()]).unwrap();
            let mut text = seed_moved(&String::from_utf8_lossy(&bytes), i);
            if i < broken {
                text = without_key(&text, "run_stop");
            }
            std::fs::write(folder.join(format!("result_{i}.txt")), text).unwrap();
        }
        let systems = root.join("systems");
        std::fs::create_dir_all(&systems).unwrap();
        std::fs::write(systems.join(format!("{sys}.json")), system_json(sys)).unwrap();
    }
}

/// For each training round of the rounds corpus (3.1.0, 4.0.0, 4.1.0: rulesets no build of
/// `mllog` has rules or review facts for), a submitter folder of its real logs is reviewed by
/// the installed package's `package_checker` and `result_summarizer` and by `mllog verify
/// --rules`: every verdict, scaling factor and table cell agrees.
#[test]
fn verify_under_older_rulesets_agrees_with_the_package_checker() {
    let Some(c) = common::corpus("rounds", "mllog verify --rules on the rounds' logs") else {
        return;
    };
    let groups = round_groups(&c);
    let pkg = package();
    let tmp = tempfile::tempdir().unwrap();
    let mut rounds: Vec<&str> = groups.iter().map(|g| g.0.as_str()).collect();
    rounds.dedup();
    assert!(rounds.len() >= 3, "{rounds:?}");
    support::each(&rounds, |&rs| {
        let mine: Vec<&Group> = groups.iter().filter(|g| g.0 == rs).collect();
        let base = tmp.path().join(rs);
        let (ours_dir, official_dir) = (base.join("ours/Org"), base.join("official/Org"));
        round_submission(&ours_dir, &mine);
        round_submission(&official_dir, &mine);
        let us = review::ours_with(&ours_dir, rs, &["--rules".as_ref(), pkg.as_os_str()]);
        let off = review::official(&official_dir, rs, &base.join("work"));
        review::assert_agree(&format!("round {rs}"), &off, &us);
        let benches = us.json["benchmarks"].as_array().unwrap();
        assert!(
            benches.iter().any(|b| b["passed"] == true)
                && benches.iter().any(|b| b["passed"] == false),
            "{rs}: both verdicts expected: {}",
            us.text
        );
        assert!(
            us.text.contains("compliance: the rules of training_"),
            "{}",
            us.text
        );
    });
}

/// The package copy with 6.1.0 renamed 6.2.0: `verify --rules COPY --ruleset 6.2.0` of a
/// generated submission gives the verdicts, factors and scores that the built-in review gives
/// under 6.1.0 (itself held to the official tools in `verify.rs`); the facts of 6.2.0 come from
/// the copy's `benchmark_meta.py`, as do the result counts of every ruleset. Without the 6.2
/// entry there, the review says so, naming the file.
#[test]
fn verify_under_a_ruleset_no_build_has_matches_its_source_ruleset() {
    use mllog_core::compliance::{example_log, Division, Ruleset};
    use mllog_core::Benchmark;
    let tmp = tempfile::tempdir().unwrap();
    let copy = renamed_package(tmp.path());
    let sub = tmp.path().join("Org");
    for (sys, b) in [("sa", Benchmark::Llama2_70bLora), ("sb", Benchmark::Flux1)] {
        let log = example_log(Ruleset::V6_1_0, b, Division::Closed).unwrap();
        let folder = sub.join("results").join(sys).join(b.as_str());
        std::fs::create_dir_all(&folder).unwrap();
        for i in 0..10 {
            std::fs::write(folder.join(format!("result_{i}.txt")), seed_moved(&log, i)).unwrap();
        }
        std::fs::create_dir_all(sub.join("systems")).unwrap();
        std::fs::write(sub.join(format!("systems/{sys}.json")), system_json(sys)).unwrap();
    }
    let built_in = review::ours(&sub, "6.1.0");
    let read = review::ours_with(&sub, "6.2.0", &["--rules".as_ref(), copy.as_os_str()]);
    assert_eq!(read.code, built_in.code, "{}\n{}", read.text, built_in.text);
    let a = built_in.json["benchmarks"].as_array().unwrap();
    let b = read.json["benchmarks"].as_array().unwrap();
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        for k in [
            "passed",
            "score",
            "scaling_factor",
            "reviewed",
            "olympic_mean",
        ] {
            assert_eq!(x[k], y[k], "{k}: {}\n{}", read.text, built_in.text);
        }
        let compliant = |v: &Value| -> Vec<Value> {
            v["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["compliant"].clone())
                .collect()
        };
        assert_eq!(compliant(x), compliant(y));
    }
    assert_eq!(read.json["ruleset"], "6.2.0");
    assert_eq!(read.table.len(), built_in.table.len());
    for (x, y) in read.table.iter().zip(&built_in.table) {
        assert_eq!(
            x.keys().collect::<Vec<_>>(),
            y.keys().collect::<Vec<_>>(),
            "the columns of 6.2.0 are 6.1.0's"
        );
    }
    // The result counts are the package's, even for a ruleset this build has facts for: a
    // release candidate that wants 9 llama2_70b_lora files makes the 10 a finding.
    let meta = copy.join("benchmark_meta.py");
    let text = std::fs::read_to_string(&meta).unwrap();
    let nine = text.replacen("'llama2_70b_lora': 10,", "'llama2_70b_lora': 9,", 1);
    assert_ne!(nine, text, "benchmark_meta.py counts llama2_70b_lora");
    std::fs::write(&meta, &nine).unwrap();
    for ruleset in ["6.1.0", "6.2.0"] {
        let nine = review::ours_with(&sub, ruleset, &["--rules".as_ref(), copy.as_os_str()]);
        assert_eq!(nine.code, 1, "{ruleset}: {}", nine.text);
        assert!(
            nine.text.contains("found 10, expected 9 result_*.txt"),
            "{ruleset}: {}",
            nine.text
        );
        // score says the package's count in its note, and scores the same.
        let (code, out, err) = mllog([
            "score".as_ref(),
            sub.as_os_str(),
            "--rules".as_ref(),
            copy.as_os_str(),
            "--ruleset".as_ref(),
            ruleset.as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
        ]);
        assert_eq!(code, 0, "{ruleset}: {err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        let llama = v["benchmarks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["benchmark"] == "llama2_70b_lora")
            .unwrap();
        assert_eq!(llama["required_runs"], 9, "{ruleset}: {out}");
        let same = a
            .iter()
            .find(|b| b["benchmark"] == "llama2_70b_lora")
            .unwrap();
        assert_eq!(
            llama["olympic_mean"], same["olympic_mean"],
            "{ruleset}: {out}"
        );
    }
    std::fs::write(&meta, &text).unwrap();
    // A package that lists no benchmarks for 6.2: said, naming the file.
    std::fs::write(&meta, text.replace("'6.2'", "'6.3'")).unwrap();
    let (code, _, err) = mllog([
        "verify".as_ref(),
        sub.as_os_str(),
        "--rules".as_ref(),
        copy.as_os_str(),
        "--ruleset".as_ref(),
        "6.2.0".as_ref(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&meta.display().to_string()) && err.contains("6.2.0"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// Without `--ruleset` under `--rules`, each command picks among the rulesets the source
/// ships and says which and why: `check` the newest with rules for the log's benchmark (the
/// official checker gives the same verdict under it), `rcp` and `score` the one the folder's
/// evidence leaves or a refusal naming the candidates; a log or folder of a benchmark the
/// source has no rules for is an error naming the source and what it has.
#[test]
fn inference_under_rules_uses_what_the_source_ships() {
    let Some(c) = common::corpus("rounds", "ruleset inference under --rules") else {
        return;
    };
    let pkg = package();
    let tmp = tempfile::tempdir().unwrap();
    // check: every training log of the rounds, its ruleset inferred among the package's.
    let mut inferred = std::collections::BTreeSet::new();
    for (_, _, _, logs) in round_groups(&c) {
        let log = &logs[0];
        let (code, out, err) = mllog([
            "check".as_ref(),
            "--rules".as_ref(),
            pkg.as_os_str(),
            log.as_os_str(),
        ]);
        assert!(!err.contains("panicked"), "{err}");
        let line = out
            .lines()
            .find(|l| l.contains(": ruleset ") && l.contains("the newest of the rules read"))
            .unwrap_or_else(|| panic!("{}: no inference said: {out}{err}", log.display()));
        let rs = line
            .split(": ruleset ")
            .nth(1)
            .unwrap()
            .split(':')
            .next()
            .unwrap();
        inferred.insert(rs.to_owned());
        let (official, text) = common::official_check(log, rs, false);
        assert_eq!(
            code == 0,
            official,
            "{} under {rs}: {out}\n{text}",
            log.display()
        );
    }
    assert!(inferred.len() >= 2, "{inferred:?}");
    // A source with 6.2.0 only has no rules for these benchmarks: said, naming it.
    let copy = renamed_package(tmp.path());
    let only = only_six_two(tmp.path(), &copy);
    let resnet = round_groups(&c)
        .into_iter()
        .find(|g| g.2 == "resnet")
        .expect("a resnet log in the rounds");
    let (code, _, err) = mllog([
        "check".as_ref(),
        "--rules".as_ref(),
        only.as_os_str(),
        resnet.3[0].as_os_str(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("\"resnet\" has rules in no training ruleset of the rules read")
            && err.contains("training rulesets 6.2.0")
            && err.contains(&only.display().to_string()),
        "{err}"
    );
    // rcp and score: a folder of the resnet logs is inferred among the package's rulesets
    // (never the built-in ones, which have no resnet), or refused naming the candidates.
    let folder = tmp.path().join("f/results/sys/resnet");
    write_folder(&folder, &resnet.3, 5, 0, as_is);
    for cmd in ["rcp", "score"] {
        let (code, out, err) = mllog([
            cmd.as_ref(),
            "--rules".as_ref(),
            pkg.as_os_str(),
            folder.as_os_str(),
        ]);
        assert!(!err.contains("panicked"), "{err}");
        if code == 2 {
            assert!(
                err.contains("fit the evidence") && err.contains(&resnet.0),
                "{cmd}: {err}"
            );
        } else {
            assert!(out.contains("the rules read: "), "{cmd}: {out}");
        }
        let (code, _, err) = mllog([
            cmd.as_ref(),
            "--rules".as_ref(),
            only.as_os_str(),
            folder.as_os_str(),
        ]);
        assert_eq!(code, 2, "{cmd}: {err}");
        assert!(
            err.contains("training rulesets 6.2.0") && err.contains("resnet"),
            "{cmd}: {err}"
        );
    }
    // A rule file that does not load stops score and verify, naming the file.
    let broken = copy.join("compliance_checker/training_6.2.0/closed_common.yaml");
    std::fs::write(&broken, "- KEY:\n    NAME: x\n   bad: [\n").unwrap();
    for cmd in ["score", "verify"] {
        let (code, _, err) = mllog([
            cmd.as_ref(),
            "--rules".as_ref(),
            copy.as_os_str(),
            "--ruleset".as_ref(),
            "6.2.0".as_ref(),
            folder.as_os_str(),
        ]);
        assert_eq!(code, 2, "{cmd}: {err}");
        assert!(err.contains("closed_common.yaml"), "{cmd}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// The review facts read from the package equal what its own functions give, for every
/// training ruleset it allows benchmarks for: `get_allowed_benchmarks` (repeats dropped),
/// `get_result_file_counts`, `_get_column_schema` detailed and not, and the fields `check_system_desc` requires (each
/// probed: a description without it fails, with every field passes); and the built-in facts
/// of 5.0.0 to 6.1.0 equal the ones read.
#[test]
fn review_facts_read_from_the_package_equal_its_functions() {
    let code = r#"
import json, logging
logging.disable(logging.CRITICAL)
from mlperf_logging import benchmark_meta
from mlperf_logging.result_summarizer import result_summarizer as rs
from mlperf_logging.compliance_checker.mlp_compliance import rule_choices
out = {}
for r in sorted(rule_choices()):
    try:
        allowed = list(dict.fromkeys(benchmark_meta.get_allowed_benchmarks("training", r)))
    except ValueError:
        continue
    out[r] = {
        "allowed": allowed,
        "detailed": list(rs._get_column_schema("training", r, detailed=True).keys()),
        "summary": list(rs._get_column_schema("training", r).keys()),
        "counts": list(benchmark_meta.get_result_file_counts("training").items()),
    }
print(json.dumps(out))
"#;
    let official = python(code, &[]);
    let pkg = package();
    let rulesets = official.as_object().unwrap();
    assert!(rulesets.len() >= 10, "{}", rulesets.len());
    for (r, want) in rulesets {
        let got = mllog_core::results::package_facts::read_facts(&pkg, r)
            .unwrap_or_else(|e| panic!("{r}: {e}"));
        let strs = |v: &Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(got.allowed_benchmarks, strs(&want["allowed"]), "{r}");
        assert_eq!(got.detailed_columns, strs(&want["detailed"]), "{r}");
        assert_eq!(got.summary_columns, strs(&want["summary"]), "{r}");
        let counts: Vec<(String, usize)> = serde_json::from_value(want["counts"].clone()).unwrap();
        let got_counts: Vec<(String, usize)> = got
            .result_file_counts
            .iter()
            .map(|(b, n)| (b.to_string(), *n))
            .collect();
        assert_eq!(got_counts, counts, "{r}");
        assert_eq!(
            got.required_fields,
            &mllog_core::results::package::SYSTEM_DESC_FIELDS[..],
            "{r}"
        );
        if let Some(b) = mllog_core::results::verify_data::RULESETS
            .iter()
            .find(|f| f.ruleset == r)
        {
            assert_eq!(b, got, "{r}: the built-in facts");
        }
    }
    // status is checked from ruleset 4 on, as system_desc_checker decides.
    let probe = r#"
import json, logging, sys, tempfile
logging.disable(logging.CRITICAL)
from mlperf_logging.system_desc_checker import system_desc_checker as sd
desc = json.loads(sys.argv[1])
desc["status"] = "not an availability"
out = {}
for r in json.loads(sys.argv[2]):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(desc, f)
    out[r] = not sd.check_system_desc(f.name, "training", r)[0]
print(json.dumps(out))
"#;
    let names: Vec<&String> = rulesets.keys().collect();
    let checked = python(
        probe,
        &[
            system_json("s").as_ref(),
            serde_json::to_string(&names).unwrap().as_ref(),
        ],
    );
    for r in rulesets.keys() {
        let got = mllog_core::results::package_facts::read_facts(&pkg, r).unwrap();
        assert_eq!(Value::Bool(got.status_checked), checked[r], "{r}");
    }
}

/// A round of two submitter folders of the 4.1 logs under `--rules`: given 4.1.0, each
/// submitter's verdicts in the round are those of its own review; not given, the ruleset is
/// inferred among the package's for the whole round, or refused naming the candidates.
#[test]
fn a_round_under_rules_reviews_each_submitter_as_alone() {
    let Some(c) = common::corpus("rounds", "mllog verify --rules on a round") else {
        return;
    };
    let groups = round_groups(&c);
    let mine: Vec<&Group> = groups.iter().filter(|g| g.0 == "4.1.0").collect();
    assert!(mine.len() >= 3);
    let pkg = package();
    let tmp = tempfile::tempdir().unwrap();
    let round = tmp.path().join("round");
    round_submission(&round.join("OrgA"), &mine[..2]);
    round_submission(&round.join("OrgB"), &mine[2..]);
    let run = |dir: &Path, given: bool| {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "verify".as_ref(),
            dir.as_os_str(),
            "--rules".as_ref(),
            pkg.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
        ];
        if given {
            args.push(std::ffi::OsStr::new("--ruleset"));
            args.push(std::ffi::OsStr::new("4.1.0"));
        }
        let (code, out, err) = mllog(args);
        assert!(!err.contains("panicked"), "{err}");
        (code, out, err)
    };
    let (code, out, err) = run(&round, true);
    assert_ne!(code, 2, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    let subs = doc["submitters"].as_array().unwrap();
    assert_eq!(subs.len(), 2, "{doc}");
    for s in subs {
        let dir = PathBuf::from(s["dir"].as_str().unwrap());
        let (_, alone, _) = run(&dir, true);
        let alone: Value = serde_json::from_str(&alone).unwrap();
        assert_eq!(s["passed"], alone["passed"], "{}", dir.display());
        let verdicts = |v: &Value| -> Vec<(Value, Value)> {
            v["benchmarks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| (b["passed"].clone(), b["score"].clone()))
                .collect()
        };
        assert_eq!(verdicts(s), verdicts(&alone), "{}", dir.display());
    }
    let (code, out, err) = run(&round, false);
    if code == 2 {
        assert!(
            err.contains("fit the evidence") && err.contains("4.1.0"),
            "{err}"
        );
    } else {
        let doc: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(doc["ruleset"], "4.1.0", "{doc}");
    }
}
