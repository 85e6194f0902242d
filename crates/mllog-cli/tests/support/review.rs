//! The review oracle shared by the `verify` tests: the official package checker and result
//! summarizer run on a copy, and every decision they make compared with `mllog verify`'s.
//! Included by the test files that review (`#[path]`), beside their `common` module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::mllog;

/// A small CSV reader (quoted fields, doubled quotes), enough for the summarizer's output.
pub fn read_csv(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let (mut row, mut field, mut quoted, mut chars) =
        (Vec::new(), String::new(), false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, '\r') => {}
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    let Some((head, body)) = rows.split_first() else {
        return Vec::new();
    };
    body.iter()
        .map(|r| head.iter().cloned().zip(r.iter().cloned()).collect())
        .collect()
}

/// What the official tools said about a folder.
pub struct Official {
    /// The package checker's log ends in success.
    pub success: bool,
    /// The package checker stopped with an exception.
    pub crashed: bool,
    pub log: String,
    pub stderr: String,
    /// ERROR lines per `system/benchmark` folder (every reviewed folder has an entry).
    pub folder_errors: BTreeMap<String, Vec<String>>,
    /// Folders the package checker skipped.
    pub skipped: Vec<String>,
    /// `scaling.json` per `system/benchmark` after the package checker.
    pub scaling: BTreeMap<String, f64>,
    /// The summarizer stopped with an exception.
    pub summarizer_crashed: bool,
    pub summarizer_output: String,
    /// `out_detailed.csv`, one map per row.
    pub table: Vec<BTreeMap<String, String>>,
}

/// Runs `python ARGS` in `cwd`, forked from the fork server: its stdout and stderr.
pub fn py(args: &[&str], cwd: &Path) -> (String, String) {
    let out = crate::support::forkserver::run(args, cwd);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs the package checker, then the summarizer, on `copy` (which they modify).
pub fn official(copy: &Path, ruleset: &str, work: &Path) -> Official {
    std::fs::create_dir_all(work).unwrap();
    let log_path = work.join("package_checker.log");
    let c = copy.to_str().unwrap();
    let (_, stderr) = py(
        &[
            "-m",
            "mlperf_logging.package_checker",
            c,
            "training",
            ruleset,
            "--log_output",
            log_path.to_str().unwrap(),
        ],
        work,
    );
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut folder_errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut skipped = Vec::new();
    let mut current: Option<String> = None;
    for line in log.lines() {
        if let Some(dir) = line.split("Running compliance checks in dir ").nth(1) {
            let p = Path::new(dir.trim());
            let key = rel_key(p);
            folder_errors.entry(key.clone()).or_default();
            current = Some(key);
        } else if let Some(b) = line.split("Skipping benchmark: ").nth(1) {
            skipped.push(b.trim().to_string());
        } else if line.starts_with("ERROR")
            && let Some(k) = &current
        {
            folder_errors.get_mut(k).unwrap().push(line.to_string());
        }
    }
    let mut scaling = BTreeMap::new();
    for b in benchmark_folders(copy) {
        if let Ok(t) = std::fs::read_to_string(b.join("scaling.json")) {
            let v: Value = serde_json::from_str(&t).unwrap();
            scaling.insert(rel_key(&b), v["scaling_factor"].as_f64().unwrap());
        }
    }
    let (out, err) = summarizer_csv(copy, "training", ruleset, work);
    let table = std::fs::read_to_string(work.join("out_detailed.csv"))
        .map(|t| read_csv(&t))
        .unwrap_or_default();
    Official {
        success: log.contains("PACKAGE CHECKER FOUND NO ERRORS, SUCCESS !"),
        crashed: stderr.contains("Traceback"),
        log,
        stderr,
        folder_errors,
        skipped,
        scaling,
        summarizer_crashed: err.contains("Traceback"),
        summarizer_output: out + &err,
        table,
    }
}

/// Runs `result_summarizer <copy> <usage> <ruleset> --csv <work>/out.csv` in `work` (its
/// tables: `out.csv`, `out_detailed.csv`): its stdout and stderr.
pub fn summarizer_csv(copy: &Path, usage: &str, ruleset: &str, work: &Path) -> (String, String) {
    let csv = work.join("out.csv");
    py(
        &[
            "-m",
            "mlperf_logging.result_summarizer",
            copy.to_str().unwrap(),
            usage,
            ruleset,
            "--csv",
            csv.to_str().unwrap(),
        ],
        work,
    )
}

/// `results/*/*/` of a submitter folder, as a glob has them: the folders, not the hidden ones,
/// in name order.
pub fn benchmark_folders(sub: &Path) -> Vec<PathBuf> {
    let visible_dirs = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
            .collect()
    };
    let mut folders: Vec<PathBuf> = visible_dirs(&sub.join("results"))
        .iter()
        .flat_map(|s| visible_dirs(s))
        .collect();
    folders.sort();
    folders
}

/// `system/benchmark` of a benchmark folder path.
pub fn rel_key(p: &Path) -> String {
    let n = |p: Option<&Path>| {
        p.and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    format!("{}/{}", n(p.parent()), n(Some(p)))
}

pub struct Ours {
    pub code: i32,
    pub json: Value,
    pub table: Vec<BTreeMap<String, String>>,
    pub text: String,
}

pub fn ours(dir: &Path, ruleset: &str) -> Ours {
    ours_with(dir, ruleset, &[])
}

/// [`ours`] with more options (`--rules SRC`).
pub fn ours_with(dir: &Path, ruleset: &str, extra: &[&OsStr]) -> Ours {
    let run = |format: Option<&str>| {
        let mut args: Vec<&OsStr> = vec![
            "verify".as_ref(),
            dir.as_os_str(),
            "--ruleset".as_ref(),
            ruleset.as_ref(),
        ];
        args.extend_from_slice(extra);
        if let Some(f) = format {
            args.push(OsStr::new("--format"));
            args.push(OsStr::new(f));
        }
        mllog(args)
    };
    let (code, out, err) = run(Some("json"));
    assert!(!err.contains("panicked"), "{err}");
    let json: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let (code_csv, csv, err) = run(Some("csv"));
    assert_eq!(code, code_csv, "{err}");
    let (code_text, text, _) = run(None);
    assert_eq!(code, code_text);
    Ours {
        code,
        json,
        table: read_csv(&csv),
        text,
    }
}

pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// Two table cells agree: numbers to 1e-9 relative, anything else exactly.
pub fn same_cell(theirs: &str, ours: &str) -> bool {
    match (theirs.parse::<f64>(), ours.parse::<f64>()) {
        (Ok(a), Ok(b)) => close(a, b),
        _ => theirs == ours,
    }
}

/// Every decision of the official tools, said by `mllog verify` too.
pub fn assert_agree(label: &str, off: &Official, us: &Ours) {
    let ctx = || {
        format!(
            "{label}\n--- package checker log:\n{}\n{}\n--- ours:\n{}",
            off.log, off.stderr, us.text
        )
    };
    assert!(!off.crashed, "the package checker crashed: {}", ctx());
    assert_eq!(us.code == 0, off.success, "overall verdict: {}", ctx());
    assert_ne!(us.code, 2, "no I/O error expected: {}", ctx());
    let benches = us.json["benchmarks"].as_array().unwrap();
    let key = |b: &Value| {
        format!(
            "{}/{}",
            b["system"].as_str().unwrap(),
            Path::new(b["folder"].as_str().unwrap())
                .file_name()
                .unwrap()
                .to_string_lossy()
        )
    };
    let reviewed: BTreeMap<String, &Value> = benches
        .iter()
        .filter(|b| b["reviewed"] == true)
        .map(|b| (key(b), b))
        .collect();
    assert_eq!(
        reviewed.keys().collect::<Vec<_>>(),
        off.folder_errors.keys().collect::<Vec<_>>(),
        "folders reviewed: {}",
        ctx()
    );
    let mut skipped: Vec<String> = benches
        .iter()
        .filter(|b| b["reviewed"] == false)
        .map(|b| b["benchmark"].as_str().unwrap().to_string())
        .collect();
    skipped.sort();
    let mut off_skipped = off.skipped.clone();
    off_skipped.sort();
    assert_eq!(skipped, off_skipped, "folders skipped: {}", ctx());
    for (k, errors) in &off.folder_errors {
        let b = reviewed[k];
        assert_eq!(
            b["passed"] == true,
            errors.is_empty(),
            "{k}: verdict (official errors {errors:?}): {}",
            ctx()
        );
        let accepted = off.log.contains("accepting this under olympic scoring");
        let ours_accepted = b["problems"].as_array().unwrap().iter().any(|p| {
            p["message"]
                .as_str()
                .unwrap()
                .contains("accepting this under olympic")
        });
        if !accepted {
            assert!(!ours_accepted, "{k}: {}", ctx());
        }
        if b["division"] == "closed" && b["rcp"].is_object() {
            let want = off.scaling.get(k).copied().unwrap_or(1.0);
            let got = b["scaling_factor"].as_f64().unwrap();
            assert!(close(got, want), "{k}: factor {got} vs {want}: {}", ctx());
        }
    }
    if off.summarizer_crashed {
        return;
    }
    // The summarizer's table, cell by cell (its rows are keyed by the details URL).
    let row_key = |r: &BTreeMap<String, String>| r["details_url"].clone();
    let theirs: BTreeMap<String, &BTreeMap<String, String>> =
        off.table.iter().map(|r| (row_key(r), r)).collect();
    let mine: BTreeMap<String, &BTreeMap<String, String>> =
        us.table.iter().map(|r| (row_key(r), r)).collect();
    assert_eq!(
        theirs.keys().collect::<Vec<_>>(),
        mine.keys().collect::<Vec<_>>(),
        "table rows: {}\n{}",
        ctx(),
        off.summarizer_output
    );
    for (k, t) in &theirs {
        let m = mine[k];
        assert_eq!(
            t.keys().collect::<Vec<_>>(),
            m.keys().collect::<Vec<_>>(),
            "columns"
        );
        for (col, tv) in t.iter() {
            let mv = &m[col];
            assert!(
                same_cell(tv, mv),
                "{k} {col}: official {tv:?}, ours {mv:?}: {}\n{}",
                ctx(),
                off.summarizer_output
            );
        }
    }
}
