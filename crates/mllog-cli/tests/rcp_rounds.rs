//! The RCP check of real logs of older rounds (MLPerf Training 3.1, 4.0 and 4.1, MLPerf HPC
//! 3.0, from `$MLLOG_CORPUS/rounds`) with the RCPs read from the installed package, against the
//! official RCP checker: each round's logs of one system and benchmark laid out as a folder, as
//! they are and mutated (the batch size changed to one without a record, a run aborted, the
//! batch size removed, a run that converged later).

mod common;
mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;

use common::mllog;

/// `(folder, usage, ruleset)` for each group of the corpus's logs, copied into `into`.
fn folders(rounds: &Path, into: &Path) -> Vec<(PathBuf, String, String)> {
    let text = std::fs::read_to_string(rounds.join("MANIFEST.tsv")).unwrap();
    let mut out: Vec<(PathBuf, String, String)> = Vec::new();
    for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let r: Vec<&str> = line.split('\t').collect();
        let (name, usage, ruleset) = (r[0], r[5], r[6]);
        let group = name.split("_result_").next().unwrap();
        let dir = into.join(group);
        std::fs::create_dir_all(&dir).unwrap();
        let n = std::fs::read_dir(&dir).unwrap().count();
        std::fs::copy(rounds.join(name), dir.join(format!("result_{n}.txt"))).unwrap();
        if !out.iter().any(|(d, _, _)| *d == dir) {
            out.push((dir, usage.to_owned(), ruleset.to_owned()));
        }
    }
    out
}

/// Rewrites the MLLOG records of `key` in `file` with `edit` (`None`: the line goes).
fn mutate(file: &Path, key: &str, edit: impl Fn(&mut Value) -> bool) {
    let bytes = std::fs::read(file).unwrap();
    let text: String = bytes.iter().map(|&b| b as char).collect();
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let rec = line
            .find(":::MLLOG ")
            .and_then(|p| serde_json::from_str::<Value>(line[p + 9..].trim()).ok())
            .filter(|v| v["key"] == key);
        match rec {
            Some(mut v) => {
                if edit(&mut v) {
                    out.push_str(&format!(":::MLLOG {v}\n"));
                }
            }
            None => out.push_str(line),
        }
    }
    let latin1: Vec<u8> = out.chars().map(|c| c as u32 as u8).collect();
    std::fs::write(file, latin1).unwrap();
}

/// A change made to a copy of a result file.
type Mutation = dyn Fn(&Path);

/// Runs `rcp_checker.check_directory` on each `(folder, usage, ruleset)`: its verdict, message
/// and factor, or the exception it stops with.
const OFFICIAL: &str = r#"
import json, sys, logging
logging.disable(logging.CRITICAL)
from mlperf_logging.rcp_checker import rcp_checker as rc
out = []
for folder, usage, rs in json.loads(sys.argv[1]):
    try:
        passed, msg, norm = rc.check_directory(folder, usage, rs, False, False, rcp_pass="pruned_rcps")
        out.append(dict(passed=passed, msg=msg, norm=repr(float(norm))))
    except Exception as e:
        out.append(dict(error=type(e).__name__))
print(json.dumps(out))
"#;

#[test]
fn older_rounds_rcp_verdicts_equal_the_official_checker() {
    let Some(rounds) = common::corpus(
        "rounds",
        "RCP verdicts of the logs of rounds 3.1 to 4.1 and HPC 3.0 against rcp_checker",
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let base = folders(&rounds, &tmp.path().join("as_is"));
    assert!(base.len() >= 20, "{}", base.len());
    let mut cases: Vec<(String, PathBuf, String, String)> = base
        .iter()
        .map(|(d, u, r)| ("as is".to_string(), d.clone(), u.clone(), r.clone()))
        .collect();
    let variants: [(&str, &Mutation); 4] = [
        ("batch size without a record", &|f| {
            mutate(f, "global_batch_size", |v| {
                let bs = v["value"].as_i64().unwrap_or(1);
                v["value"] = (bs * 7 + 3).into();
                true
            })
        }),
        ("a run aborted", &|f| {
            mutate(f, "run_stop", |v| {
                v["metadata"]["status"] = "aborted".into();
                true
            })
        }),
        ("no batch size", &|f| {
            mutate(f, "global_batch_size", |_| false)
        }),
        ("converged later", &|f| {
            mutate(f, "eval_accuracy", |v| {
                let md = &mut v["metadata"];
                for k in ["epoch_num", "samples_count"] {
                    if let Some(x) = md.get(k).and_then(Value::as_f64) {
                        md[k] = (x * 1.25).into();
                    }
                }
                true
            })
        }),
    ];
    for (name, apply) in variants {
        for (d, u, r) in &base {
            let to = tmp
                .path()
                .join(name.replace(' ', "_"))
                .join(d.file_name().unwrap());
            support::copy_dir(d, &to);
            // The first file only: the other runs stay as they were.
            apply(&to.join("result_0.txt"));
            cases.push((name.to_string(), to, u.clone(), r.clone()));
        }
    }
    let arg: Vec<(String, &str, &str)> = cases
        .iter()
        .map(|(_, d, u, r)| (d.display().to_string(), u.as_str(), r.as_str()))
        .collect();
    let arg = serde_json::to_string(&arg).unwrap();
    let Value::Array(official) = support::python(OFFICIAL, &[arg.as_ref()]) else {
        panic!("not a list")
    };
    let rules = format!("python:{}", common::python().display());
    let mut outcomes = std::collections::BTreeSet::new();
    for ((variant, dir, usage, ruleset), o) in cases.iter().zip(&official) {
        let what = format!("{} ({variant})", dir.display());
        let (code, out, err) = mllog([
            "rcp".as_ref(),
            "--rules".as_ref(),
            rules.as_ref(),
            "--usage".as_ref(),
            usage.as_ref(),
            "--ruleset".as_ref(),
            ruleset.as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            dir.as_os_str(),
        ]);
        assert!(!err.contains("panicked"), "{what}: {err}");
        let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{what}: {e}{err}"));
        let r = &doc["benchmarks"][0];
        if let Some(e) = o.get("error") {
            // Where the official checker stops with an exception: ours names why, no verdict.
            assert_eq!(r["status"], "error", "{what}: official {e}: {r}");
            assert!(r["error"].as_str().is_some_and(|m| !m.is_empty()), "{what}");
            assert_eq!(code, 1, "{what}");
            outcomes.insert(format!("error {e}"));
            continue;
        }
        assert_eq!(r["passed"], o["passed"], "{what}: {r}");
        assert_eq!(code, if o["passed"] == true { 0 } else { 1 }, "{what}");
        assert_eq!(r["official_message"], o["msg"], "{what}");
        // NaN (a mean of no runs) is JSON's null in ours.
        let norm = o["norm"].as_str().unwrap();
        match r["norm_factor"].as_f64() {
            Some(f) => assert_eq!(Some(f), norm.parse().ok(), "{what}"),
            None => assert_eq!(norm, "nan", "{what}"),
        }
        assert_eq!(doc["rcps"]["ruleset"].as_str(), Some(ruleset.as_str()));
        assert_eq!(doc["rcps"]["usage"].as_str(), Some(usage.as_str()));
        outcomes.insert(
            o["msg"]
                .as_str()
                .unwrap_or_default()
                .split(',')
                .next()
                .unwrap()
                .to_owned(),
        );
    }
    // The mutations reach several of the checker's paths.
    assert!(outcomes.len() >= 4, "{outcomes:?}");
}
