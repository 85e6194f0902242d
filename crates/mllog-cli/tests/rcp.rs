//! The RCP checker, the final score and the ruleset inference against the official tools
//! (mlperf-logging 4.1.68, run through `MLLOG_PYTHON`): the RCP data generated from the
//! package, every record's statistics, the real submission folders of `$MLLOG_CORPUS` and
//! mutations of copies of them (runs made faster than the reference, a run removed, runs that
//! did not converge, a batch size without a record, a bypass). The official tools delete and
//! rewrite `scaling.json`, so they only ever run on copies in a temporary folder.

mod common;
#[path = "support/review.rs"]
mod review;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use common::mllog;
use support::copy_dir;

fn python(code: &str, args: &[&std::ffi::OsStr]) -> Value {
    support::python(code, args)
}

/// `$MLLOG_CORPUS/submissions`, or `None` after saying on stderr what was skipped.
fn corpus(what: &str) -> Option<PathBuf> {
    common::corpus("submissions", what)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// The MANIFEST rows: (round, ruleset, submitter, system, benchmark, factor, final score).
fn manifest(c: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(c.join("MANIFEST.tsv")).unwrap();
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

/// Every record's olympic mean, deviation, minimum acceptable mean and the pruned set, as the
/// official `RCP_Checker` computes them, for every ruleset and benchmark.
#[test]
fn record_statistics_and_pruning_equal_the_official_checker() {
    use mllog_core::compliance::Ruleset;
    use mllog_core::results::rcp::RcpTable;
    let code = r#"
import glob, json, os, sys, logging
logging.disable(logging.CRITICAL)
from mlperf_logging.rcp_checker import rcp_checker as rc
base = os.path.dirname(rc.__file__)
out = {}
for rs in ["5.0.0", "5.1.0", "6.0.0", "6.1.0"]:
    for f in sorted(glob.glob(os.path.join(base, "training_" + rs, "rcps_*.json"))):
        b = os.path.basename(f)[5:-5]
        c = rc.RCP_Checker("training", rs, b, False)
        out[rs + "/" + b] = {
            "records": [[k, float(v["BS"]), float(v["RCP Mean"]), float(v["RCP Stdev"]), float(v["Min Epochs"])] for k, v in c.rcp_data.items()],
            "pruned": list(c.pruned_rcp_data.keys()),
        }
print(json.dumps(out))
"#;
    let official = python(code, &[]);
    let Value::Object(tables) = official else {
        panic!("not an object")
    };
    assert!(tables.len() > 20, "{}", tables.len());
    for (key, t) in &tables {
        let (rs, b) = key.split_once('/').unwrap();
        let ours = RcpTable::new(Ruleset::from_name(rs).unwrap(), b, false)
            .unwrap_or_else(|| panic!("no table for {key}"));
        let recs = t["records"].as_array().unwrap();
        assert_eq!(recs.len(), ours.records.len(), "{key}");
        for (o, p) in recs.iter().zip(&ours.records) {
            let o = o.as_array().unwrap();
            assert_eq!(o[0].as_str().unwrap(), p.name, "{key}");
            assert_eq!(o[1].as_f64().unwrap(), p.bs, "{key}");
            // numpy's pairwise sums and the same bisection: every figure agrees to the bit.
            assert_eq!(o[2].as_f64().unwrap(), p.mean, "{key} {}", p.name);
            assert_eq!(o[3].as_f64().unwrap(), p.stdev, "{key} {}", p.name);
            let min = o[4].as_f64().unwrap();
            assert!(
                min == p.min_acceptable_mean,
                "{key} {}: official {min}, ours {}",
                p.name,
                p.min_acceptable_mean
            );
        }
        let pruned: Vec<&str> = t["pruned"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let ours_pruned: Vec<&str> = ours.pruned.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(pruned, ours_pruned, "{key}");
    }
}

/// Runs the official summarizer twice (on a copy without scaling.json) and the standalone
/// rcp_checker per folder, as the corpus README does: one JSON object per benchmark folder
/// (`unscaled` and `final` scores, the `scaling.json` text the first summarizer run wrote, the RCP
/// checker's exit status `rcp_rc` and message `rcp_msg`). Each tool runs as its command line,
/// forked from the fork server's interpreter rather than started afresh.
fn official_rcp_run(src: &Path, rs: &str, work: &Path) -> Value {
    let noscale = work.join("noscale");
    copy_dir(src, &noscale);
    for f in glob_scaling(&noscale) {
        std::fs::remove_file(f).unwrap();
    }
    let tool = |args: &[&str], cwd: &Path| {
        let out = support::forkserver::run(args, cwd);
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status, text(&out.stdout) + &text(&out.stderr))
    };
    let summarize = |tag: &str| {
        let d = work.join(tag);
        std::fs::create_dir_all(&d).unwrap();
        let summarizer = [
            "-m",
            "mlperf_logging.result_summarizer",
            noscale.to_str().unwrap(),
            "training",
            rs,
            "--csv",
            "out.csv",
        ];
        let (status, output) = tool(&summarizer, &d);
        assert!(status.success(), "{output}");
        review::read_csv(&std::fs::read_to_string(d.join("out.csv")).unwrap())
    };
    let rows1 = summarize("sum1");
    let after: BTreeMap<PathBuf, String> = glob_scaling(&noscale)
        .into_iter()
        .map(|f| {
            let rel = f.parent().unwrap().strip_prefix(&noscale).unwrap();
            (rel.to_path_buf(), std::fs::read_to_string(&f).unwrap())
        })
        .collect();
    let rows2 = summarize("sum2");
    let mut out = serde_json::Map::new();
    for b in review::benchmark_folders(src) {
        let rel = b.strip_prefix(src).unwrap();
        let name = |p: &Path| p.file_name().unwrap().to_str().unwrap().to_owned();
        let (system, bm) = (name(b.parent().unwrap()), name(&b));
        let score = |rows: &[BTreeMap<String, String>]| {
            rows.iter()
                .find(|r| {
                    r["details_url"].ends_with(&format!("/{system}.json"))
                        && r.get(&bm).is_some_and(|v| !v.is_empty())
                })
                .map(|r| r[&bm].parse::<f64>().unwrap())
        };
        let pristine = work.join("rcp").join(rel);
        copy_dir(&b, &pristine);
        let log = work.join(format!("rcp_{system}_{bm}.log"));
        let checker = [
            "-m",
            "mlperf_logging.rcp_checker",
            pristine.to_str().unwrap(),
            "--rcp_usage",
            "training",
            "--rcp_version",
            rs,
            "--log_output",
            log.to_str().unwrap(),
        ];
        let (status, _) = tool(&checker, work);
        // The last line that gives the verdict, as the README's loop reads it.
        let msg = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .rfind(|l| l.contains(", RCP test "))
            .map(|l| {
                let after = l.split_once(" - ").unwrap().1;
                after
                    .rsplit_once(", RCP test ")
                    .map_or(after, |(m, _)| m)
                    .to_owned()
            });
        out.insert(
            rel.to_str().unwrap().to_owned(),
            serde_json::json!({
                "unscaled": score(&rows1),
                "final": score(&rows2),
                "scaling": after.get(rel),
                "rcp_rc": status.code(),
                "rcp_msg": msg,
            }),
        );
    }
    Value::Object(out)
}

/// Every real folder: the official verdict, message, scaling.json (byte for byte) and final
/// score against ours (`mllog rcp`, `mllog rcp --set-scaling`, `mllog score`).
#[test]
fn corpus_rcp_verdicts_factors_and_final_scores_equal_the_official_tools() {
    let Some(c) = corpus(
        "RCP verdicts, scaling factors and final scores of the real submission folders against \
         rcp_checker and result_summarizer",
    ) else {
        return;
    };
    let rows = manifest(&c);
    assert_eq!(rows.len(), 15);
    let mut submitters: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| (r[0].clone(), r[2].clone(), r[1].clone()))
        .collect();
    submitters.sort();
    submitters.dedup();
    let checked = std::sync::atomic::AtomicUsize::new(0);
    support::each(&submitters, |(round, submitter, ruleset)| {
        let src = c.join(round).join(submitter);
        let work = tempfile::tempdir().unwrap();
        let official = official_rcp_run(&src, ruleset, &work.path().join("w"));
        // Ours, on our own copy (never the corpus).
        let mine = work.path().join("mine");
        copy_dir(&src, &mine);
        for f in glob_scaling(&mine) {
            std::fs::remove_file(f).unwrap();
        }
        let (code, out, err) = mllog([
            "score".as_ref(),
            "--ruleset".as_ref(),
            ruleset.as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            mine.as_os_str(),
        ]);
        assert_eq!(code, 0, "{out}{err}");
        let doc: Value = serde_json::from_str(&out).unwrap();
        let benchmarks = doc["benchmarks"].as_array().unwrap();
        let Value::Object(official) = official else {
            panic!()
        };
        for (rel, o) in &official {
            let folder = mine.join(rel);
            let ours = benchmarks
                .iter()
                .find(|b| Path::new(b["folder"].as_str().unwrap()) == folder)
                .unwrap_or_else(|| panic!("{rel} not scored: {out}"));
            let row = rows
                .iter()
                .find(|r| &r[0] == round && &r[2] == submitter && r[8].ends_with(rel.as_str()))
                .unwrap_or_else(|| panic!("{rel} not in MANIFEST"));
            // The standalone checker's verdict and message.
            let (code, rcp_out, err) = mllog([
                "rcp".as_ref(),
                "--ruleset".as_ref(),
                ruleset.as_ref(),
                "--format".as_ref(),
                "json".as_ref(),
                folder.as_os_str(),
            ]);
            let rdoc: Value = serde_json::from_str(&rcp_out).unwrap_or_else(|e| panic!("{e}{err}"));
            let r = &rdoc["benchmarks"][0];
            assert_eq!(code == 0, o["rcp_rc"] == 0, "{rel}: {rcp_out}");
            assert_eq!(r["passed"].as_bool(), Some(o["rcp_rc"] == 0), "{rel}");
            assert_eq!(r["official_message"], o["rcp_msg"], "{rel}");
            // scaling.json as the first summarizer run wrote it.
            let copy = work.path().join("set").join(rel);
            copy_dir(&folder, &copy);
            let (code, _, err) = mllog([
                "rcp".as_ref(),
                "--ruleset".as_ref(),
                ruleset.as_ref(),
                "--set-scaling".as_ref(),
                copy.as_os_str(),
            ]);
            assert!(code == 0 || code == 1, "{err}");
            let written = std::fs::read_to_string(copy.join("scaling.json")).ok();
            assert_eq!(written.as_deref(), o["scaling"].as_str(), "{rel}");
            // The default never touches the folder.
            assert!(!folder.join("scaling.json").exists(), "{rel}");
            // The final score, computed (no scaling.json in our copy).
            let fin = &ours["final"];
            assert_eq!(fin["computed"], true, "{rel}");
            let ours_final = fin["score"].as_f64().unwrap();
            let ours_unscaled = ours["olympic_mean"].as_f64().unwrap();
            let of = o["final"].as_f64().unwrap();
            let ou = o["unscaled"].as_f64().unwrap();
            assert!(
                close(ours_final, of),
                "{rel}: ours {ours_final}, official {of}"
            );
            assert!(
                close(ours_unscaled, ou),
                "{rel}: ours {ours_unscaled}, official {ou}"
            );
            // And the MANIFEST, recorded from the same tools.
            let factor = fin["factor"].as_f64().unwrap();
            match row[10].as_str() {
                "none" => assert_eq!(factor, 1.0, "{rel}"),
                f => assert_eq!(factor, f.parse::<f64>().unwrap(), "{rel}"),
            }
            assert!(close(ours_final, row[11].parse().unwrap()), "{rel}");
            checked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert_eq!(checked.into_inner(), 15);
}

/// With the committed scaling.json left in place, `score` says whether it agrees.
#[test]
fn score_says_whether_the_committed_scaling_agrees() {
    let Some(c) = corpus("the committed scaling.json against the computed factor") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("AMD");
    copy_dir(&c.join("5.0/AMD"), &sub);
    let (code, out, err) = mllog([
        "score".as_ref(),
        "--ruleset".as_ref(),
        "5.0.0".as_ref(),
        sub.as_os_str(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("FINAL SCORE MI300X_EPYC_9575F_pytorch/llama2_70b_lora"),
        "{out}"
    );
    assert!(out.contains("the committed scaling.json agrees"), "{out}");
    assert!(
        out.contains("computed by the RCP check (RCP found)"),
        "{out}"
    );
    let scaling = sub.join("results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora/scaling.json");
    std::fs::write(&scaling, "{\"scaling_factor\": 1.5}").unwrap();
    let (_, out, _) = mllog([
        "score".as_ref(),
        "--ruleset".as_ref(),
        "5.0.0".as_ref(),
        sub.as_os_str(),
    ]);
    assert!(
        out.contains("the committed scaling.json says 1.5 instead"),
        "{out}"
    );
    // `score` never modifies the folder.
    assert_eq!(
        std::fs::read_to_string(&scaling).unwrap(),
        "{\"scaling_factor\": 1.5}"
    );
}

/// `results/*/*/scaling.json` of a submitter folder.
fn glob_scaling(sub: &Path) -> Vec<PathBuf> {
    review::benchmark_folders(sub)
        .into_iter()
        .map(|b| b.join("scaling.json"))
        .filter(|p| p.exists())
        .collect()
}

/// `check_directory` of the installed package on `dir` (a copy): passed, message, factor and
/// the scaling.json it leaves.
const CHECK_DIRECTORY: &str = r#"
import json, logging, os, sys
logging.disable(logging.CRITICAL)
from mlperf_logging.rcp_checker import rcp_checker as rc
d, rs, bypass = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
try:
    ok, msg, norm = rc.check_directory(d, "training", rs, False, False, rcp_pass="pruned_rcps", rcp_bypass=bypass, set_scaling=True)
    p = os.path.join(d, "scaling.json")
    s = open(p).read() if os.path.exists(p) else None
    print(json.dumps(dict(crashed=None, passed=ok, msg=msg, norm=float(norm), scaling=s)))
except Exception as e:
    print(json.dumps(dict(crashed=type(e).__name__)))
"#;

/// Ours and the official `check_directory` on the same mutated folder (two copies).
fn compare_mutation(name: &str, folder: &Path, ruleset: &str, bypass: bool) -> (Value, Value) {
    let tmp = tempfile::tempdir().unwrap();
    let theirs = tmp
        .path()
        .join("theirs/sys")
        .join(folder.file_name().unwrap());
    let mine = tmp
        .path()
        .join("mine/sys")
        .join(folder.file_name().unwrap());
    copy_dir(folder, &theirs);
    copy_dir(folder, &mine);
    let o = python(
        CHECK_DIRECTORY,
        &[
            theirs.as_os_str(),
            ruleset.as_ref(),
            if bypass { "1" } else { "0" }.as_ref(),
        ],
    );
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "rcp".as_ref(),
        "--ruleset".as_ref(),
        ruleset.as_ref(),
        "--set-scaling".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
    ];
    if bypass {
        args.push("--rcp-bypass".as_ref());
    }
    args.push(mine.as_os_str());
    let (code, out, err) = mllog(args);
    let doc: Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{name}: {e}: {out}{err}"));
    let r = doc["benchmarks"][0].clone();
    if o["crashed"].is_null() {
        assert_eq!(r["passed"], o["passed"], "{name}: {out}");
        assert_eq!(code == 0, o["passed"] == true, "{name}");
        assert_eq!(r["official_message"], o["msg"], "{name}: {out}");
        assert!(
            close(
                r["norm_factor"].as_f64().unwrap(),
                o["norm"].as_f64().unwrap()
            ),
            "{name}: {out} vs {o}"
        );
        let written = std::fs::read_to_string(mine.join("scaling.json")).ok();
        assert_eq!(written.as_deref(), o["scaling"].as_str(), "{name}");
    } else {
        // Where the official tool stops with an exception, ours fails with the reason.
        assert_eq!(code, 1, "{name}: {out}");
        assert_eq!(r["status"], "error", "{name}: {out}");
        assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "{name}");
    }
    (r, o)
}

/// Rewrites the `samples_count` of every eval line of a log by `f`.
fn scale_evals(text: &str, f: impl Fn(f64) -> f64) -> String {
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        if let Some((pre, body)) = line.split_once(":::MLLOG ")
            && body.contains("\"eval_accuracy\"")
        {
            let mut j: Value = serde_json::from_str(body.trim_end()).unwrap();
            if let Some(s) = j["metadata"]["samples_count"].as_f64() {
                j["metadata"]["samples_count"] = Value::from(f(s).round() as i64);
            }
            out.push_str(&format!(
                "{pre}:::MLLOG {}\n",
                serde_json::to_string(&j).unwrap()
            ));
            continue;
        }
        out.push_str(line);
    }
    out
}

fn edit_all(folder: &Path, f: impl Fn(usize, &str) -> String) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("result_")
        })
        .collect();
    files.sort();
    for (i, p) in files.iter().enumerate() {
        let t = std::fs::read_to_string(p).unwrap();
        std::fs::write(p, f(i, &t)).unwrap();
    }
}

#[test]
fn mutated_folders_get_the_official_verdicts() {
    let Some(c) = corpus(
        "RCP verdicts of mutated copies (faster runs, a run removed, unconverged runs, a batch \
         size without a record, bypasses) against rcp_checker.check_directory",
    ) else {
        return;
    };
    let amd = c.join("5.0/AMD/results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora");
    let rgat = c.join("5.0/Dell/results/XE9680x8H200-SXM-141GB/rgat");
    let tmp = tempfile::tempdir().unwrap();
    let fresh = |name: &str, from: &Path| {
        let p = tmp.path().join(name).join(from.file_name().unwrap());
        copy_dir(from, &p);
        let _ = std::fs::remove_file(p.join("scaling.json"));
        p
    };
    // Unchanged: RCP found, normalised.
    let (r, _) = compare_mutation("unchanged", &fresh("a", &amd), "5.0.0", false);
    assert_eq!(r["status"], "found");
    // Faster than the reference allows: fails, then passes with the bypass (no factor).
    let fast = fresh("fast", &amd);
    edit_all(&fast, |_, t| scale_evals(t, |s| s * 0.6));
    let (r, _) = compare_mutation("faster", &fast, "5.0.0", false);
    assert_eq!(r["passed"], false);
    let (r, _) = compare_mutation("faster, bypassed", &fast, "5.0.0", true);
    assert_eq!(r["passed"], true);
    assert_eq!(r["bypassed"], true);
    // A little faster: passes, normalised by a larger factor.
    let quick = fresh("quick", &amd);
    edit_all(&quick, |_, t| scale_evals(t, |s| s * 0.97));
    let (r, _) = compare_mutation("a little faster", &quick, "5.0.0", false);
    assert!(
        r["norm_factor"].as_f64().unwrap() > 1.034722222222222,
        "{r}"
    );
    // A run removed.
    let nine = fresh("nine", &amd);
    std::fs::remove_file(nine.join("result_9.txt")).unwrap();
    compare_mutation("a run removed", &nine, "5.0.0", false);
    // Two runs that did not converge: "Insufficient convergence"; one: still checked.
    let one = fresh("one", &amd);
    edit_all(&one, |i, t| {
        if i == 0 {
            t.replace("\"status\": \"success\"", "\"status\": \"aborted\"")
        } else {
            t.to_owned()
        }
    });
    compare_mutation("one unconverged", &one, "5.0.0", false);
    let two = fresh("two", &amd);
    edit_all(&two, |i, t| {
        if i < 2 {
            t.replace("\"status\": \"success\"", "\"status\": \"aborted\"")
        } else {
            t.to_owned()
        }
    });
    let (r, _) = compare_mutation("two unconverged", &two, "5.0.0", false);
    assert_eq!(r["status"], "insufficient_convergence");
    // A batch size above every record: "Missing RCP", and the bypass.
    let big = fresh("big", &amd);
    edit_all(&big, |_, t| {
        t.replace(
            "\"global_batch_size\", \"value\": 8",
            "\"global_batch_size\", \"value\": 4096",
        )
    });
    let (r, _) = compare_mutation("batch size above the records", &big, "5.0.0", false);
    assert_eq!(r["status"], "missing", "{r}");
    compare_mutation(
        "batch size above the records, bypassed",
        &big,
        "5.0.0",
        true,
    );
    // Between two records: interpolation (rgat), made faster.
    compare_mutation("interpolated", &fresh("rgat", &rgat), "5.0.0", false);
    let rfast = fresh("rgat_fast", &rgat);
    edit_all(&rfast, |_, t| {
        t.lines()
            .map(|l| {
                if l.contains("\"eval_accuracy\"") {
                    let (pre, body) = l.split_once(":::MLLOG ").unwrap();
                    let mut j: Value = serde_json::from_str(body).unwrap();
                    let e = j["metadata"]["epoch_num"].as_f64().unwrap();
                    j["metadata"]["epoch_num"] = Value::from(e * 0.5);
                    format!("{pre}:::MLLOG {}\n", serde_json::to_string(&j).unwrap())
                } else {
                    format!("{l}\n")
                }
            })
            .collect()
    });
    compare_mutation("interpolated, faster", &rfast, "5.0.0", false);
    // Batch sizes that differ between the files: the official tool stops with an exception.
    let mixed = fresh("mixed", &amd);
    edit_all(&mixed, |i, t| {
        if i == 3 {
            t.replace(
                "\"global_batch_size\", \"value\": 8",
                "\"global_batch_size\", \"value\": 16",
            )
        } else {
            t.to_owned()
        }
    });
    let (r, o) = compare_mutation("mixed batch sizes", &mixed, "5.0.0", false);
    assert!(!o["crashed"].is_null(), "{o}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("global_batch_size differs"),
        "{r}"
    );
}

#[test]
fn package_checker_params_bypass_is_read_as_the_package_checker_reads_it() {
    let Some(c) = corpus("the package_checker_params RCP bypass on a copy") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("sys/llama2_70b_lora");
    copy_dir(
        &c.join("5.0/AMD/results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora"),
        &f,
    );
    edit_all(&f, |_, t| scale_evals(t, |s| s * 0.6));
    let run = || {
        mllog([
            "rcp".as_ref(),
            "--ruleset".as_ref(),
            "5.0.0".as_ref(),
            f.as_os_str(),
        ])
    };
    assert_eq!(run().0, 1);
    std::fs::write(f.join("package_checker_params"), "rcp-bypass").unwrap();
    let (code, out, _) = run();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("passed using rcp_bypass"), "{out}");
    // With a newline the official readlines() comparison never matches: no bypass, and a note.
    std::fs::write(f.join("package_checker_params"), "rcp-bypass\n").unwrap();
    let (code, out, _) = run();
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does not honour it"), "{out}");
    // The system folder's file counts too.
    std::fs::remove_file(f.join("package_checker_params")).unwrap();
    std::fs::write(
        tmp.path().join("sys/package_checker_params"),
        "x\nrcp-bypass",
    )
    .unwrap();
    assert_eq!(run().0, 0);
}

#[test]
fn forecast_of_a_campaign_in_progress() {
    let Some(c) = corpus("the RCP forecast on copies with three of ten runs") else {
        return;
    };
    let amd = c.join("5.0/AMD/results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora");
    let tmp = tempfile::tempdir().unwrap();
    let keep = |name: &str, runs: &[&str]| {
        let d = tmp.path().join(name).join("llama2_70b_lora");
        std::fs::create_dir_all(&d).unwrap();
        for r in runs {
            std::fs::copy(amd.join(r), d.join(r)).unwrap();
        }
        d
    };
    let fc = |d: &Path| {
        let (code, out, err) = mllog([
            "rcp".as_ref(),
            "--ruleset".as_ref(),
            "5.0.0".as_ref(),
            "--forecast".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            d.as_os_str(),
        ]);
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        v["benchmarks"][0]["forecast"].clone()
    };
    // Three identical runs (3072 samples): no spread, every finished set has mean 3072, which
    // passes (≥ the minimum acceptable mean) but is faster than the RCP mean: always scaled.
    let same = keep("same", &["result_0.txt", "result_1.txt", "result_2.txt"]);
    let f = fc(&same);
    assert_eq!(f["present"], 3);
    assert_eq!(f["required"], 10);
    assert_eq!(f["p_pass"].as_f64(), Some(1.0), "{f}");
    assert_eq!(f["p_pass_unscaled"].as_f64(), Some(0.0), "{f}");
    // With spread (one run at 3456): probabilities strictly between, and the same on a rerun.
    let spread = keep("spread", &["result_0.txt", "result_4.txt", "result_1.txt"]);
    let f = fc(&spread);
    let (p, u) = (
        f["p_pass"].as_f64().unwrap(),
        f["p_pass_unscaled"].as_f64().unwrap(),
    );
    assert!(0.0 < u && u < p && p <= 1.0, "{f}");
    assert_eq!(fc(&spread), f);
    assert_eq!(f["draws"], 20000);
    // Far faster than the reference: almost surely fails.
    edit_all(&spread, |_, t| scale_evals(t, |s| s * 0.6));
    let f = fc(&spread);
    assert!(f["p_pass"].as_f64().unwrap() < 0.01, "{f}");
    let (_, out, _) = mllog([
        "rcp".as_ref(),
        "--ruleset".as_ref(),
        "5.0.0".as_ref(),
        "--forecast".as_ref(),
        spread.as_os_str(),
    ]);
    assert!(out.contains("FORECAST "), "{out}");
    assert!(out.contains("posterior predictive"), "{out}");
}

#[test]
fn ruleset_inferred_once_for_the_folder_or_refused() {
    let Some(c) = corpus("the ruleset inference on the real submitter folders") else {
        return;
    };
    // stable_diffusion exists only in 5.0.0.
    let (code, out, err) = mllog(["rcp".as_ref(), c.join("5.0/Dell").as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("ruleset 5.0.0 (inferred)"), "{out}");
    assert!(
        out.contains("stable_diffusion is allowed by 5.0.0\n"),
        "{out}"
    );
    // 6.1.0 requires lowest_numerical_precision_in_linear: every v5.0 llama2_70b_lora run fails
    // under it. 5.0.0, 5.1.0 and 6.0.0 remain, and they differ in what the review shows (RCP
    // tables, the summarizer's columns): refused, never guessed.
    let (code, out, err) = mllog(["score".as_ref(), c.join("5.0/AMD").as_os_str()]);
    assert_eq!(code, 2, "{out}");
    assert!(
        err.contains("\n  - not 6.1.0: under 6.1.0, 10 of 10 files"),
        "{err}"
    );
    assert!(
        err.contains("5.0.0, 5.1.0, 6.0.0 fit the evidence); pass --ruleset"),
        "{err}"
    );
    // dlrm_dcnv2 at batch size 160000 has no record in 5.0.0: refused, with the reason.
    let (code, out, err) = mllog(["score".as_ref(), c.join("5.1/Cisco").as_os_str()]);
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("the ruleset cannot be inferred"), "{err}");
    assert!(
        err.contains("under 5.0.0, ") && err.contains("(Missing RCP"),
        "{err}"
    );
    assert!(err.contains("pass --ruleset"), "{err}");
    let (code, _, _) = mllog([
        "score".as_ref(),
        "--ruleset".as_ref(),
        "5.1.0".as_ref(),
        c.join("5.1/Cisco").as_os_str(),
    ]);
    assert_eq!(code, 0);
}

#[test]
fn check_says_which_ruleset_and_where_else_the_log_passes() {
    let Some(c) = corpus("mllog check's ruleset note on a real v5.0 log") else {
        return;
    };
    let log = c.join("5.0/AMD/results/MI300X_EPYC_9575F_pytorch/llama2_70b_lora/result_0.txt");
    let (code, out, _) = mllog(["check".as_ref(), log.as_os_str()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("checked under 6.1.0, the default"), "{out}");
    assert!(out.contains("it passes under 5.0.0, 5.1.0, 6.0.0"), "{out}");
    // The official checker agrees that 5.0.0 accepts it and 6.1.0 does not.
    assert!(common::official_check(&log, "5.0.0", false).0);
    assert!(!common::official_check(&log, "6.1.0", false).0);
    let (code, out, _) = mllog([
        "check".as_ref(),
        "--ruleset".as_ref(),
        "5.0.0".as_ref(),
        log.as_os_str(),
    ]);
    assert_eq!(code, 0);
    assert!(!out.contains("checked under"), "{out}");
}

/// Generated folders (no corpus needed): every lookup path against the official
/// `check_directory`, by batch size and speed.
#[test]
fn generated_folders_take_every_lookup_path_as_the_official_checker() {
    use mllog_core::compliance::{example_log, Division, Ruleset};
    use mllog_core::Benchmark;
    let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
    let bs_line = log
        .lines()
        .find(|l| l.contains("\"global_batch_size\""))
        .unwrap()
        .to_owned();
    let tmp = tempfile::tempdir().unwrap();
    let mut statuses = std::collections::BTreeSet::new();
    for (i, (bs, speed)) in [
        (8, 1.0),
        (8, 0.93),
        (8, 0.5),
        (12, 1.0),
        (12, 0.9),
        (4, 1.0),
        (4, 0.8),
        (4, 3.0),
        (8, 3.0),
        (4096, 1.0),
    ]
    .into_iter()
    .enumerate()
    {
        let folder = tmp.path().join(format!("case{i}/llama2_70b_lora"));
        std::fs::create_dir_all(&folder).unwrap();
        for run in 0..10 {
            // Runs differ a little so that the mean is not a record's.
            let jitter = 1.0 + 0.01 * (run % 3) as f64;
            let text = scale_evals(&log, |s| s * speed * jitter).replace(
                &bs_line,
                &bs_line.replace("\"value\": 8", &format!("\"value\": {bs}")),
            );
            std::fs::write(folder.join(format!("result_{run}.txt")), text).unwrap();
        }
        let (r, _) = compare_mutation(&format!("bs {bs}, speed {speed}"), &folder, "6.1.0", false);
        statuses.insert(r["status"].as_str().unwrap().to_owned());
    }
    for s in ["found", "interpolated", "below_smallest", "missing"] {
        assert!(statuses.contains(s), "{s} not reached: {statuses:?}");
    }
}

#[test]
fn bad_input_is_a_message_naming_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no/such/folder");
    let (code, _, err) = mllog([
        "rcp".as_ref(),
        "--ruleset".as_ref(),
        "6.1.0".as_ref(),
        missing.as_os_str(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("no/such/folder"), "{err}");
    // A result file that is binary, one whose batch size line is not JSON, and a benchmark the
    // RCP files do not have: each a failed check with the reason, the others still checked.
    let bin = tmp.path().join("a/llama2_70b_lora");
    std::fs::create_dir_all(&bin).unwrap();
    let mut junk: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    junk.retain(|&b| b != b'\n' && b != b'\r');
    std::fs::write(bin.join("result_0.txt"), &junk).unwrap();
    let broken = tmp.path().join("b/llama2_70b_lora");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("result_0.txt"),
        ":::MLLOG {\"key\": \"global_batch_size\", \"value\": 8,\n",
    )
    .unwrap();
    let (code, out, err) = mllog([
        "rcp".as_ref(),
        "--ruleset".as_ref(),
        "6.1.0".as_ref(),
        tmp.path().as_os_str(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("no submission_benchmark in the logs"), "{out}");
    assert!(out.contains("result_0.txt: line 1: not JSON"), "{out}");
    assert_eq!(out.matches("FAILED").count(), 2, "{out}");
}

/// The forecast on generated runs (no corpus needed): three of ten runs, with spread.
#[test]
fn forecast_of_generated_runs() {
    use mllog_core::compliance::{example_log, Division, Ruleset};
    use mllog_core::Benchmark;
    let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, speed: f64| {
        let folder = tmp.path().join(name).join("llama2_70b_lora");
        std::fs::create_dir_all(&folder).unwrap();
        for (i, j) in [1.0, 1.08, 0.95].iter().enumerate() {
            let text = scale_evals(&log, |s| s * 3.0 * speed * j);
            std::fs::write(folder.join(format!("result_{i}.txt")), text).unwrap();
        }
        let (code, out, err) = mllog([
            "rcp".as_ref(),
            "--ruleset".as_ref(),
            "6.1.0".as_ref(),
            "--forecast".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            folder.as_os_str(),
        ]);
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        v["benchmarks"][0]["forecast"].clone()
    };
    let slow = run("slow", 1.0);
    assert_eq!(
        (slow["present"].as_u64(), slow["required"].as_u64()),
        (Some(3), Some(10))
    );
    let p = slow["p_pass"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&p), "{slow}");
    assert!(slow["mean_so_far"].as_f64().unwrap() > slow["min_acceptable_mean"].as_f64().unwrap());
    assert_eq!(run("slow", 1.0), slow, "the forecast is seeded");
    let fast = run("fast", 0.05);
    assert!(fast["p_pass"].as_f64().unwrap() < p, "{fast} vs {slow}");
}

/// Ten copies of the example log of `ruleset` for `benchmark` in `folder`, each passed
/// through `edit` (run index, text).
fn example_folder(
    folder: &Path,
    ruleset: mllog_core::compliance::Ruleset,
    benchmark: mllog_core::Benchmark,
    runs: usize,
    edit: impl Fn(usize, &str) -> String,
) {
    use mllog_core::compliance::{example_log, Division};
    let log = example_log(ruleset, benchmark, Division::Closed).unwrap();
    std::fs::create_dir_all(folder).unwrap();
    for i in 0..runs {
        std::fs::write(folder.join(format!("result_{i}.txt")), edit(i, &log)).unwrap();
    }
}

/// The example log's `global_batch_size` set to `bs`.
fn with_batch_size(log: &str, bs: u64) -> String {
    log.lines()
        .map(|l| {
            if l.contains("\"key\": \"global_batch_size\"") {
                let v: Value = serde_json::from_str(l.trim_start_matches(":::MLLOG ")).unwrap();
                let mut v = v;
                v["value"] = bs.into();
                format!(":::MLLOG {v}")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Several rulesets fit the evidence: refused (exit 2), never guessed, with the candidates
/// and what to pass; the given ruleset is used as is.
#[test]
fn several_fitting_rulesets_are_refused_not_guessed() {
    use mllog_core::compliance::Ruleset;
    use mllog_core::Benchmark;
    let tmp = tempfile::tempdir().unwrap();
    // A 5.0.0 llama2_70b_lora log passes 5.0.0, 5.1.0 and 6.0.0 (6.1.0 wants a key it lacks).
    let sub = tmp.path().join("Org");
    example_folder(
        &sub.join("results/sys/llama2_70b_lora"),
        Ruleset::V5_0_0,
        Benchmark::Llama2_70bLora,
        10,
        |_, l| l.to_owned(),
    );
    for cmd in ["rcp", "score"] {
        let (code, out, err) = mllog([cmd.as_ref(), sub.as_os_str()]);
        assert_eq!(code, 2, "{cmd}: {out}{err}");
        assert!(
            out.is_empty(),
            "{cmd}: nothing reviewed under a guess: {out}"
        );
        assert!(err.contains("the ruleset cannot be inferred"), "{err}");
        assert!(
            err.contains("5.0.0, 5.1.0, 6.0.0 fit the evidence"),
            "{err}"
        );
        assert!(err.contains("pass --ruleset X.Y.Z"), "{err}");
        assert!(!err.contains("does not change the result"), "{err}");
    }
    let (code, out, err) = mllog([
        "score".as_ref(),
        "--ruleset".as_ref(),
        "5.1.0".as_ref(),
        sub.as_os_str(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("ruleset 5.1.0 (given)"), "{out}");
}

/// Evidence that conflicts: a benchmark only 5.0.0 allows beside a batch size only later
/// rulesets have an RCP record for. No ruleset fits all of it: refused, each conflict said;
/// the disallowed folder does not decide the ruleset for the other.
#[test]
fn conflicting_evidence_is_refused_with_the_conflicts() {
    use mllog_core::compliance::Ruleset;
    use mllog_core::results::ruleset::{choose_ruleset, RulesetError};
    use mllog_core::Benchmark;
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("Org");
    // dlrm_dcnv2 at batch size 160000: a record in 5.1.0's table, none in 5.0.0's.
    example_folder(
        &sub.join("results/sys/dlrm_dcnv2"),
        Ruleset::V5_1_0,
        Benchmark::DlrmDcnv2,
        10,
        |_, l| with_batch_size(l, 160_000),
    );
    let alone = choose_ruleset(None, &sub);
    let only_dlrm = match &alone {
        Err(RulesetError::Unsettled { candidates, .. }) => candidates.clone(),
        other => panic!("{other:?}"),
    };
    assert!(!only_dlrm.contains(&Ruleset::V5_0_0), "{alone:?}");
    assert!(only_dlrm.contains(&Ruleset::V5_1_0), "{alone:?}");
    example_folder(
        &sub.join("results/sys/bert"),
        Ruleset::V5_0_0,
        Benchmark::Bert,
        10,
        |_, l| l.to_owned(),
    );
    match choose_ruleset(None, &sub) {
        Err(RulesetError::Unsettled {
            candidates,
            evidence,
            ..
        }) => {
            assert!(candidates.is_empty(), "{evidence:?}");
            let all = evidence.join("\n");
            assert!(
                all.contains("no RCP record for its batch size 160000"),
                "{all}"
            );
            assert!(all.contains("is not allowed by 5.1.0"), "{all}");
        }
        other => panic!("bert must not pick 5.0.0 for the whole submission: {other:?}"),
    }
    let (code, out, err) = mllog(["rcp".as_ref(), sub.as_os_str()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("no ruleset fits"), "{err}");
}

/// The tester's case on the real folder: 5.1's Cisco with a bert folder added.
#[test]
fn corpus_conflicting_evidence_is_refused() {
    let Some(c) = corpus("the inference refusing conflicting evidence on a real folder") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("Cisco");
    copy_dir(&c.join("5.1/Cisco"), &sub);
    copy_dir(
        &c.join("5.0/tinycorp/results/tinybox_green/bert"),
        &sub.join("results/hpf_n8/bert"),
    );
    let (code, out, err) = mllog(["score".as_ref(), sub.as_os_str()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("no ruleset fits"), "{err}");
    assert!(err.contains("Missing RCP"), "{err}");
    assert!(err.contains("bert ("), "{err}");
}

/// An unreadable result file is a problem naming the file; the inference works from the
/// readable ones and says so; the rest is reviewed; exit 2.
#[test]
fn an_unreadable_file_is_said_and_the_rest_reviewed() {
    use mllog_core::compliance::Ruleset;
    use mllog_core::Benchmark;
    use std::os::unix::fs::PermissionsExt;
    let Some(prefix) = support::as_nobody() else {
        println!("skipped: an unreadable result file (running as root without setpriv)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("Org");
    // stable_diffusion: only 5.0.0 allows it, so the readable files settle the ruleset.
    example_folder(
        &sub.join("results/sys/stable_diffusion"),
        Ruleset::V5_0_0,
        Benchmark::StableDiffusion,
        10,
        |_, l| l.to_owned(),
    );
    let bad = sub.join("results/sys/stable_diffusion/result_5.txt");
    for d in [
        tmp.path(),
        &sub,
        &sub.join("results"),
        &sub.join("results/sys"),
    ] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o000)).unwrap();
    let run = |args: &[&str]| {
        let exe = env!("CARGO_BIN_EXE_mllog");
        let mut all: Vec<String> = prefix.clone();
        all.push(exe.into());
        all.extend(args.iter().map(|s| s.to_string()));
        all.push(sub.display().to_string());
        let o = Command::new(&all[0]).args(&all[1..]).output().unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let named = "stable_diffusion/result_5.txt: Permission denied";
    for args in [
        &["score"][..],
        &["score", "--ruleset", "5.0.0"],
        &["rcp"],
        &["rcp", "--ruleset", "5.0.0"],
    ] {
        let (code, out, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(
            format!("{out}{err}").contains(named),
            "{args:?}: {out}{err}"
        );
        assert!(
            out.contains("sys/stable_diffusion"),
            "{args:?}: the folder is still reviewed: {out}"
        );
        if !args.contains(&"--ruleset") {
            assert!(
                out.starts_with("ruleset 5.0.0 (inferred)"),
                "{args:?}: {out}"
            );
            assert!(out.contains("unreadable"), "{args:?}: {out}");
        }
        if args[0] == "score" {
            assert!(out.contains("FINAL SCORE sys/stable_diffusion"), "{out}");
            assert!(out.contains("dropped: cannot be read"), "{out}");
        }
    }
}

/// `--forecast` on a campaign in progress: the check so far is no verdict ("failing so far",
/// never "FAILED"), and it does not make the exit status 1, with or without a forecast; a
/// finished folder is judged as without --forecast.
#[test]
fn forecast_exit_status_judges_finished_folders_only() {
    use mllog_core::compliance::Ruleset;
    use mllog_core::Benchmark;
    let tmp = tempfile::tempdir().unwrap();
    let fast = |_: usize, l: &str| scale_evals(l, |s| s * 0.05);
    for (name, runs, expect) in [("three", 3, 0), ("one", 1, 0), ("ten", 10, 1)] {
        let folder = tmp.path().join(name).join("llama2_70b_lora");
        example_folder(
            &folder,
            Ruleset::V6_1_0,
            Benchmark::Llama2_70bLora,
            runs,
            fast,
        );
        let (plain, _, _) = mllog([
            "rcp".as_ref(),
            "--ruleset".as_ref(),
            "6.1.0".as_ref(),
            folder.as_os_str(),
        ]);
        assert_eq!(plain, 1, "{name}: without --forecast, the check fails");
        let (code, out, err) = mllog([
            "rcp".as_ref(),
            "--ruleset".as_ref(),
            "6.1.0".as_ref(),
            "--forecast".as_ref(),
            folder.as_os_str(),
        ]);
        assert_eq!(code, expect, "{name}: {out}{err}");
        if runs < 10 {
            assert!(
                out.contains(&format!("failing so far ({runs} of 10 runs")),
                "{name}: {out}"
            );
            assert!(!out.contains("FAILED"), "{name}: {out}");
        } else {
            assert!(out.contains("FAILED"), "{name}: {out}");
        }
        // A folder given on its own is labelled by its name, not as `/name`.
        assert!(out.contains("RCP llama2_70b_lora: "), "{name}: {out}");
        assert!(!out.contains(" /llama2_70b_lora"), "{name}: {out}");
    }
}

/// Labels and words: a folder given relative to the working directory, a folder of submitter
/// folders, an RCP step that cannot run.
#[test]
fn labels_and_messages_name_what_is_there() {
    use mllog_core::compliance::Ruleset;
    use mllog_core::Benchmark;
    let tmp = tempfile::tempdir().unwrap();
    example_folder(
        &tmp.path().join("round/Org/results/sys/llama2_70b_lora"),
        Ruleset::V6_1_0,
        Benchmark::Llama2_70bLora,
        10,
        |_, l| l.to_owned(),
    );
    for cmd in ["rcp", "score"] {
        let (code, out, err) = mllog([
            cmd.as_ref(),
            "--ruleset".as_ref(),
            "6.1.0".as_ref(),
            tmp.path().join("round").as_os_str(),
        ]);
        assert_eq!(code, 2, "{cmd}: {out}{err}");
        assert!(
            err.contains("a folder of 1 submitter folder(s) (Org)"),
            "{err}"
        );
        assert!(err.contains("give one submitter folder"), "{err}");
    }
    // Relative to the working directory, from inside results/: still `sys/benchmark`.
    let o = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(["rcp", "--ruleset", "6.1.0", "sys/llama2_70b_lora"])
        .current_dir(tmp.path().join("round/Org/results"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("\n  RCP sys/llama2_70b_lora: "), "{out}");
    // The RCP step cannot run (no benchmark in the logs): its reason, no empty field.
    let junk = tmp.path().join("junk/llama2_70b_lora");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("result_0.txt"), "no log here\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(["rcp", "--ruleset", "6.1.0", "llama2_70b_lora"])
        .current_dir(tmp.path().join("junk"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("RCP llama2_70b_lora: FAILED (no submission_benchmark in the logs"),
        "{out}"
    );
    assert!(!out.contains("()") && !out.contains("RCP : "), "{out}");
}

/// A rule on a time difference reports the difference, and its help names the limit, not an
/// ordering; the official checker agrees that the log fails.
#[test]
fn check_reports_the_init_time_not_the_value() {
    use mllog_core::compliance::{example_log, Division, Ruleset};
    use mllog_core::Benchmark;
    let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
    // The first init_start 45 minutes earlier than it was.
    let mut shifted = false;
    let text: String = log
        .lines()
        .map(|l| {
            if !shifted && l.contains("\"key\": \"init_start\"") {
                shifted = true;
                let mut v: Value = serde_json::from_str(l.trim_start_matches(":::MLLOG ")).unwrap();
                let t = v["time_ms"].as_f64().unwrap() - 45.0 * 60_000.0;
                v["time_ms"] = (t as i64).into();
                format!(":::MLLOG {v}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert!(shifted);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("result_0.txt");
    std::fs::write(&file, text).unwrap();
    let (code, out, err) = mllog([
        "check".as_ref(),
        "--ruleset".as_ref(),
        "6.1.0".as_ref(),
        file.as_os_str(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("init time limit"), "{out}");
    let found: f64 = out
        .split("found ")
        .nth(1)
        .and_then(|s| s.split(" min after the first `init_start`").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no measured duration: {out}"));
    assert!((45.0..47.0).contains(&found), "{out}");
    assert!(out.contains("the limit is 30 min"), "{out}");
    assert!(!out.contains("found null"), "{out}");
    assert!(!out.contains("should have come first"), "{out}");
    assert!(!common::official_check(&file, "6.1.0", false).0);
}

/// A malformed or unreadable scaling.json is an error naming it, never a factor of 1; the
/// other folders are still scored (exit 2). On a real folder, the official summarizer stops
/// with the TypeError our message names.
#[test]
fn a_malformed_scaling_json_is_said_not_read_as_one() {
    use mllog_core::compliance::Ruleset;
    use mllog_core::Benchmark;
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("Org");
    for sys in ["a", "b"] {
        example_folder(
            &sub.join(format!("results/{sys}/llama2_70b_lora")),
            Ruleset::V6_1_0,
            Benchmark::Llama2_70bLora,
            10,
            |_, l| l.to_owned(),
        );
    }
    let bad = sub.join("results/a/llama2_70b_lora/scaling.json");
    for (text, words) in [
        ("{\"scaling_factor\": 1.0", "not valid JSON"),
        ("{\"factor\": 1.5}", "no scaling_factor"),
        ("{\"scaling_factor\": \"1.5\"}", "is not a number"),
    ] {
        std::fs::write(&bad, text).unwrap();
        let (code, out, err) = mllog([
            "score".as_ref(),
            "--ruleset".as_ref(),
            "6.1.0".as_ref(),
            sub.as_os_str(),
        ]);
        assert_eq!(code, 2, "{text}: {out}{err}");
        assert!(err.contains("a/llama2_70b_lora/scaling.json: "), "{err}");
        assert!(err.contains(words), "{text}: {err}");
        assert!(out.contains("FINAL SCORE b/llama2_70b_lora"), "{out}");
        assert!(!out.contains("FINAL SCORE a/llama2_70b_lora"), "{out}");
    }
    let Some(c) = corpus("the official summarizer on a malformed scaling.json") else {
        return;
    };
    let copy = tmp.path().join("Lenovo");
    copy_dir(&c.join("5.1/Lenovo"), &copy);
    let rgat = copy.join("results/SR680aV3-8xB200_SXM_180GB/rgat/scaling.json");
    std::fs::write(&rgat, "{\"scaling_factor\": 1.0").unwrap();
    let o = Command::new(common::python())
        .args([
            "-m",
            "mlperf_logging.result_summarizer",
            "Lenovo",
            "training",
            "5.1.0",
        ])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let official = String::from_utf8_lossy(&o.stderr);
    assert!(
        official.contains("TypeError: JSONDecodeError.__init__() missing 2 required positional"),
        "{official}"
    );
    let (code, _, err) = mllog([
        "score".as_ref(),
        "--ruleset".as_ref(),
        "5.1.0".as_ref(),
        copy.as_os_str(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("TypeError") && err.contains("rgat/scaling.json"),
        "{err}"
    );
}

/// The text of a stable_diffusion log without the CLIP line of the first eval step whose FID
/// satisfies `pick` (and whose CLIP is logged).
fn drop_clip(text: &str, pick: impl Fn(f64) -> bool) -> String {
    let evals: Vec<(usize, Value)> = text
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let body = &l[l.find(":::MLLOG ")? + 9..];
            let v: Value = serde_json::from_str(body).ok()?;
            (v["key"] == "eval_accuracy").then_some((i, v))
        })
        .collect();
    let metric = |v: &Value, m: &str| v["metadata"]["metric"] == m;
    let step = |v: &Value| v["metadata"]["samples_count"].as_f64();
    let target = evals
        .iter()
        .filter(|(_, v)| metric(v, "FID") && v["value"].as_f64().is_some_and(&pick))
        .find_map(|(_, f)| {
            evals
                .iter()
                .find(|(_, c)| metric(c, "CLIP") && step(c) == step(f))
        })
        .map(|(i, _)| *i)
        .expect("an eval step with FID and CLIP");
    text.lines()
        .enumerate()
        .filter(|(i, _)| *i != target)
        .map(|(_, l)| format!("{l}\n"))
        .collect()
}

/// stable_diffusion: CLIP is only looked up for an eval step whose FID is at most 90, as the
/// official `FID <= 90 and CLIP >= 0.15` does; a step with FID above 90 and no CLIP is just not
/// a passing step, while one with FID at most 90 and no CLIP is an error for both.
#[test]
fn stable_diffusion_clip_is_needed_only_where_fid_passes() {
    let Some(c) = corpus("stable_diffusion eval steps without CLIP against rcp_checker") else {
        return;
    };
    let sd = c.join("5.0/Dell/results/9xXE9712x4GB200/stable_diffusion");
    let tmp = tempfile::tempdir().unwrap();
    let high = tmp.path().join("high/stable_diffusion");
    copy_dir(&sd, &high);
    let low = tmp.path().join("low/stable_diffusion");
    copy_dir(&sd, &low);
    let edit = |folder: &Path, pick: fn(f64) -> bool| {
        let f = folder.join("result_0.txt");
        let text = std::fs::read_to_string(&f).unwrap();
        std::fs::write(&f, drop_clip(&text, pick)).unwrap();
    };
    edit(&high, |fid| fid > 90.0);
    edit(&low, |fid| fid <= 90.0);
    let (r, o) = compare_mutation("CLIP missing where FID > 90", &high, "5.0.0", false);
    assert!(o["crashed"].is_null(), "{o}");
    assert_eq!(r["passed"], true, "{r}");
    let (r, o) = compare_mutation("CLIP missing where FID <= 90", &low, "5.0.0", false);
    assert_eq!(o["crashed"], "KeyError", "{o}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("has FID <= 90 but no CLIP"),
        "{r}"
    );
}

/// An entry named as a result file that is a directory, or a link to nothing, is an I/O error
/// naming it (exit 2), where the official checker stops opening it (`IsADirectoryError`,
/// `FileNotFoundError`); never skipped: `score` drops it as a run that cannot be read, naming
/// it, and scores the rest.
#[test]
fn a_result_name_that_is_no_file_is_an_io_error() {
    use mllog_core::compliance::Ruleset;
    use mllog_core::Benchmark;
    let tmp = tempfile::tempdir().unwrap();
    for (case, official) in [
        ("directory", "IsADirectoryError"),
        ("dangling link", "FileNotFoundError"),
    ] {
        let folder = tmp
            .path()
            .join(case.replace(' ', "_"))
            .join("llama2_70b_lora");
        example_folder(
            &folder,
            Ruleset::V6_1_0,
            Benchmark::Llama2_70bLora,
            10,
            |_, l| l.to_owned(),
        );
        let odd = folder.join("result_10.txt");
        if case == "directory" {
            std::fs::create_dir(&odd).unwrap();
        } else {
            std::os::unix::fs::symlink(tmp.path().join("nowhere"), &odd).unwrap();
        }
        let o = python(
            CHECK_DIRECTORY,
            &[folder.as_os_str(), "6.1.0".as_ref(), "0".as_ref()],
        );
        assert_eq!(o["crashed"], official, "{case}: {o}");
        let (code, out, err) = mllog([
            "rcp".as_ref(),
            "--ruleset".as_ref(),
            "6.1.0".as_ref(),
            folder.as_os_str(),
        ]);
        assert_eq!(code, 2, "{case}: {out}{err}");
        assert!(
            out.contains(&format!("{}: ", odd.display())) && out.contains("ERROR"),
            "{case}: {out}"
        );
        let (code, out, err) = mllog([
            "score".as_ref(),
            "--ruleset".as_ref(),
            "6.1.0".as_ref(),
            "--format".as_ref(),
            "json".as_ref(),
            folder.as_os_str(),
        ]);
        assert_eq!(code, 2, "{case}: {out}{err}");
        let doc: Value = serde_json::from_str(&out).unwrap();
        let runs = doc["benchmarks"][0]["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 11, "{case}: {out}");
        let dropped: Vec<&Value> = runs.iter().filter(|r| r["error"].is_string()).collect();
        assert_eq!(dropped.len(), 1, "{case}: {out}");
        assert_eq!(
            dropped[0]["file"].as_str(),
            Some(odd.to_str().unwrap()),
            "{case}: {out}"
        );
        assert!(err.contains(&odd.display().to_string()), "{case}: {err}");
    }
}

/// The example log's `global_batch_size` value set to `value` (any JSON).
fn with_batch_size_value(log: &str, value: &Value) -> String {
    log.lines()
        .map(|l| {
            if l.contains("\"key\": \"global_batch_size\"") {
                let mut v: Value = serde_json::from_str(l.trim_start_matches(":::MLLOG ")).unwrap();
                v["value"] = value.clone();
                format!(":::MLLOG {v}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// A `global_batch_size` that is a string is said to be no number (a failure, where the
/// official checker stops with a TypeError), not taken for a missing one; with too many runs
/// not converged both fail with "Insufficient convergence" first; `true` is the number 1, as
/// in Python.
#[test]
fn a_batch_size_that_is_no_number_is_said() {
    use mllog_core::compliance::Ruleset;
    use mllog_core::Benchmark;
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        ("string", serde_json::json!("8"), false),
        ("string, unconverged", serde_json::json!("8"), true),
        ("true", serde_json::json!(true), false),
    ];
    for (i, (case, value, unconverged)) in cases.into_iter().enumerate() {
        let folder = tmp.path().join(format!("c{i}/llama2_70b_lora"));
        example_folder(
            &folder,
            Ruleset::V6_1_0,
            Benchmark::Llama2_70bLora,
            10,
            |run, l| {
                let l = with_batch_size_value(l, &value);
                if unconverged && run < 3 {
                    l.replace("\"status\": \"success\"", "\"status\": \"aborted\"")
                } else {
                    l
                }
            },
        );
        let (r, o) = compare_mutation(case, &folder, "6.1.0", false);
        match case {
            "string" => {
                assert_eq!(o["crashed"], "TypeError", "{o}");
                let e = r["error"].as_str().unwrap();
                assert!(
                    e.contains("global_batch_size is \"8\", not a number"),
                    "{r}"
                );
            }
            "string, unconverged" => {
                assert_eq!(o["msg"], "Insufficient convergence", "{o}");
            }
            _ => assert!(o["crashed"].is_null(), "{o}"),
        }
    }
}
