//! The rule engine against the official checker, both run here: real logs of older rounds
//! (`MLLOG_CORPUS/rounds`, whose MANIFEST.tsv gives usage, ruleset and the official verdicts)
//! and mutations of them made here, in both modes (plain and `--werror`); the built-in rules
//! against the same rulesets loaded from the installed package on the published 5.x/6.x logs,
//! the submissions and the example logs; and `mllog check --rules` itself.
//!
//! The official checker is the one `MLLOG_PYTHON` (default `python3`) imports; the rules the
//! engine loads are that installation's.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mllog_core::compliance::engine::{rulesets, RuleEngine};
use mllog_core::compliance::{check_text, example_log, rules, Division, Ruleset};
use mllog_core::rules_source::RulesSource;

struct Case {
    path: PathBuf,
    usage: String,
    ruleset: String,
    what: String,
}

/// The official verdicts `(plain, werror)` of `cases`.
fn official(dir: &Path, cases: &[Case]) -> Vec<(bool, bool)> {
    let cases: Vec<_> = cases
        .iter()
        .map(|c| common::Case {
            path: &c.path,
            usage: &c.usage,
            ruleset: &c.ruleset,
        })
        .collect();
    common::official_verdicts(dir, &cases)
}

fn source() -> RulesSource {
    RulesSource::from_python(&common::python().to_string_lossy()).expect("locate mlperf_logging")
}

/// Our verdicts `(plain, werror)`, one engine per usage and ruleset.
fn ours(
    engines: &mut HashMap<(String, String), RuleEngine>,
    src: &RulesSource,
    c: &Case,
) -> (bool, bool) {
    let e = engines
        .entry((c.usage.clone(), c.ruleset.clone()))
        .or_insert_with(|| RuleEngine::load(&src.compliance_dir(), &c.usage, &c.ruleset).unwrap());
    let bytes = std::fs::read(&c.path).unwrap();
    (
        e.check_bytes(&bytes, false).unwrap().passed(),
        e.check_bytes(&bytes, true).unwrap().passed(),
    )
}

fn key_of(line: &str) -> Option<String> {
    let i = line.find(":::MLLOG ")?;
    let v: serde_json::Value = serde_json::from_str(&line[i + 9..]).ok()?;
    v.get("key")?.as_str().map(String::from)
}

/// The line with its `value` (or metadata `status`) changed.
fn with_value(line: &str, f: impl Fn(&mut serde_json::Value)) -> Option<String> {
    let i = line.find(":::MLLOG ")?;
    let mut v: serde_json::Value = serde_json::from_str(&line[i + 9..]).ok()?;
    f(&mut v);
    Some(format!(
        "{}{}",
        &line[..i + 9],
        serde_json::to_string(&v).ok()?
    ))
}

/// Mutations of a log: `(what, text)`.
fn mutations(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let keys: Vec<Option<String>> = lines.iter().map(|l| key_of(l)).collect();
    let first = |k: &str| keys.iter().position(|x| x.as_deref() == Some(k));
    let join = |ls: Vec<String>| ls.join("\n") + "\n";
    let all = || lines.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    let mut out = Vec::new();
    for k in [
        "submission_org",
        "global_batch_size",
        "init_stop",
        "eval_accuracy",
    ] {
        if let Some(i) = first(k) {
            let mut ls = all();
            ls.remove(i);
            out.push((format!("{k} removed"), join(ls)));
        }
    }
    if let Some(i) = first("submission_platform") {
        let mut ls = all();
        ls.insert(i + 1, lines[i].to_string());
        out.push(("submission_platform repeated, same value".into(), join(ls)));
    }
    // A hyperparameter the rules fix, set wrong; and logged again with another value.
    if let Some(i) = keys
        .iter()
        .position(|k| k.as_deref().is_some_and(|k| k.starts_with("opt_")))
        .filter(|&i| with_value(lines[i], |_| {}).is_some())
    {
        let bump = |v: &mut serde_json::Value| {
            if let Some(x) = v["value"].as_f64() {
                v["value"] = serde_json::json!(x * 3.0 + 1.0);
            } else {
                v["value"] = serde_json::json!("wrong");
            }
        };
        let changed = with_value(lines[i], bump).unwrap();
        let mut ls = all();
        ls[i] = changed.clone();
        out.push((
            format!("{} set wrong", keys[i].as_deref().unwrap()),
            join(ls),
        ));
        let mut ls = all();
        ls.insert(i + 1, changed);
        out.push((
            format!("{} repeated, another value", keys[i].as_deref().unwrap()),
            join(ls),
        ));
    }
    for (name, x) in [("0", 0.0), ("1e9", 1e9)] {
        let mut ls = all();
        let mut any = false;
        for (i, k) in keys.iter().enumerate() {
            if k.as_deref() == Some("eval_accuracy")
                && let Some(l) = with_value(lines[i], |v| v["value"] = serde_json::json!(x))
            {
                ls[i] = l;
                any = true;
            }
        }
        if any {
            out.push((
                format!("every eval_accuracy {name}: target not reached"),
                join(ls),
            ));
        }
    }
    if first("run_stop").is_some() {
        let ls: Vec<String> = lines
            .iter()
            .zip(&keys)
            .filter(|(_, k)| k.as_deref() != Some("run_stop"))
            .map(|(l, _)| l.to_string())
            .collect();
        out.push(("run_stop missing".into(), join(ls)));
        let i = first("run_stop").unwrap();
        if let Some(l) = with_value(lines[i], |v| {
            v["metadata"]["status"] = serde_json::json!("aborted")
        }) {
            let mut ls = all();
            ls[i] = l;
            out.push(("run_stop aborted".into(), join(ls)));
        }
    }
    if let Some(i) = (lines.len() / 2..lines.len()).find(|&i| keys[i].is_some()) {
        let mut ls = all();
        let cut = ls[i].len() / 2;
        ls[i].truncate(cut);
        out.push(("a truncated line".into(), join(ls)));
    }
    if let Some(i) = first("submission_division")
        && let Some(l) = with_value(lines[i], |v| v["value"] = serde_json::json!("open"))
    {
        let mut ls = all();
        ls[i] = l;
        out.push(("open division".into(), join(ls)));
    }
    out
}

fn manifest(dir: &Path) -> Vec<(PathBuf, String, String, bool, bool)> {
    let text = std::fs::read_to_string(dir.join("MANIFEST.tsv")).expect("rounds/MANIFEST.tsv");
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |n: &str| {
        head.iter()
            .position(|h| *h == n)
            .unwrap_or_else(|| panic!("MANIFEST.tsv has no {n}"))
    };
    let (name, usage, ruleset, rc, rcw) = (
        col("local_name"),
        col("usage"),
        col("ruleset"),
        col("checker_rc"),
        col("checker_rc_werror"),
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                dir.join(f[name]),
                f[usage].to_string(),
                f[ruleset].to_string(),
                f[rc] == "0",
                f[rcw] == "0",
            )
        })
        .collect()
}

#[test]
fn rounds_and_their_mutations_get_the_official_verdicts() {
    let Some(dir) = common::corpus(
        "rounds",
        "the rule engine on real logs of older rounds and their mutations",
    ) else {
        return;
    };
    let src = source();
    let tmp = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    let mut recorded = Vec::new();
    for (n, (path, usage, ruleset, rc, rcw)) in manifest(&dir).into_iter().enumerate() {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        for (m, (what, body)) in mutations(&text).into_iter().enumerate() {
            let p = tmp.path().join(format!("{n}_{m}.txt"));
            std::fs::write(&p, body).unwrap();
            cases.push(Case {
                path: p,
                usage: usage.clone(),
                ruleset: ruleset.clone(),
                what: format!("{}: {what}", path.display()),
            });
        }
        recorded.push(cases.len());
        cases.push(Case {
            path: path.clone(),
            usage: usage.clone(),
            ruleset,
            what: path.display().to_string(),
        });
        let _ = (rc, rcw);
        // The same log under two other rulesets of its usage, spread over all of them (the
        // 0.6.0 text-line parser, the named tuples up to 3.0.0, other rule files).
        let others: Vec<String> = rulesets(&src.compliance_dir())
            .into_iter()
            .filter(|(u, _)| *u == usage)
            .map(|(_, r)| r)
            .collect();
        for k in [n, n + 7] {
            let r = others[k % others.len()].clone();
            cases.push(Case {
                path: path.clone(),
                usage: usage.clone(),
                ruleset: r.clone(),
                what: format!("{} under {r}", path.display()),
            });
        }
    }
    let want = official(tmp.path(), &cases);
    let mut engines = HashMap::new();
    let mut wrong = Vec::new();
    let mut failing = 0;
    for (c, w) in cases.iter().zip(&want) {
        let got = ours(&mut engines, &src, c);
        if !w.0 || !w.1 {
            failing += 1;
        }
        if got != *w {
            wrong.push(format!(
                "{} ({} {}): official {w:?}, ours {got:?}",
                c.what, c.usage, c.ruleset
            ));
        }
    }
    // The manifest's recorded verdicts are the ones the checker gives now.
    for (i, (_, _, _, rc, rcw)) in recorded.iter().zip(manifest(&dir)) {
        assert_eq!(want[*i], (rc, rcw), "{}", cases[*i].what);
    }
    eprintln!(
        "{} cases ({failing} failing officially), {} disagree",
        cases.len(),
        wrong.len()
    );
    assert!(
        failing > cases.len() / 3,
        "the mutations must make logs fail: {failing} of {}",
        cases.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Published 5.x and 6.x logs with their rulesets, and the example logs of every ruleset,
/// benchmark and division.
fn builtin_cases() -> Vec<(String, Ruleset, Vec<u8>)> {
    let mut out = Vec::new();
    for r in Ruleset::ALL {
        for b in rules(r).benchmarks() {
            for d in [Division::Closed, Division::Open] {
                if let Ok(log) = example_log(r, b, d) {
                    out.push((
                        format!("example {r} {} {}", b.as_str(), d.as_str()),
                        r,
                        log.into_bytes(),
                    ));
                }
            }
        }
    }
    if let Some(dir) = common::corpus("real", "built-in and loaded rules on published logs") {
        let text = std::fs::read_to_string(dir.join("MANIFEST.tsv")).unwrap();
        for l in text.lines().skip(1) {
            let f: Vec<&str> = l.split('\t').collect();
            if let Some(r) = Ruleset::from_name(f[4]) {
                out.push((f[0].to_string(), r, std::fs::read(dir.join(f[0])).unwrap()));
            }
        }
    }
    if let Some(dir) = common::corpus("submissions", "built-in and loaded rules on submissions") {
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("result_"))
                {
                    let round = p.strip_prefix(&dir).unwrap().components().next().unwrap();
                    let r =
                        Ruleset::from_name(&format!("{}.0", round.as_os_str().to_string_lossy()));
                    if let Some(r) = r {
                        out.push((p.display().to_string(), r, std::fs::read(&p).unwrap()));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn builtin_and_loaded_rules_agree_on_5_and_6() {
    let src = source();
    let mut engines: HashMap<Ruleset, RuleEngine> = HashMap::new();
    let mut wrong = Vec::new();
    let cases = builtin_cases();
    for (what, r, bytes) in &cases {
        let e = engines.entry(*r).or_insert_with(|| {
            RuleEngine::load(&src.compliance_dir(), "training", r.as_str()).unwrap()
        });
        let text = String::from_utf8_lossy(bytes);
        let builtin = check_text(*r, &text);
        let loaded = (
            e.check_bytes(bytes, false).unwrap(),
            e.check_bytes(bytes, true).unwrap(),
        );
        let b = (builtin.passed(false), builtin.passed(true));
        let l = (loaded.0.passed(), loaded.1.passed());
        if b != l {
            let msgs: Vec<String> = loaded
                .1
                .findings
                .iter()
                .map(|f| f.message.lines().next().unwrap_or("").to_string())
                .collect();
            wrong.push(format!(
                "{what} ({r}): built-in {b:?}, loaded {l:?}: {}",
                msgs.join(" | ")
            ));
        }
        // The keys with findings are the same (the words differ).
        let keys = |it: Vec<Option<String>>| {
            let mut v: Vec<String> = it.into_iter().flatten().collect();
            v.sort();
            v.dedup();
            v
        };
        let bk = keys(builtin.findings.iter().map(|f| f.key.clone()).collect());
        let lk = keys(loaded.1.findings.iter().map(|f| f.key.clone()).collect());
        if b == l && !b.1 && bk != lk {
            eprintln!(
                "note: {what} ({r}): keys with findings differ: built-in {bk:?}, loaded {lk:?}"
            );
        }
    }
    eprintln!("{} logs compared", cases.len());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn mllog_check_rules_names_its_source_and_follows_the_official_cli() {
    let src = source();
    let py = common::python().to_string_lossy().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("result_0.txt");
    std::fs::write(
        &log,
        example_log(
            Ruleset::V6_1_0,
            mllog_core::Benchmark::Llama2_70bLora,
            Division::Closed,
        )
        .unwrap(),
    )
    .unwrap();
    let log = log.to_string_lossy().to_string();
    let spec = format!("python:{py}");
    let (code, out, err) = common::mllog(["check", "--rules", &spec, "--ruleset", "6.1.0", &log]);
    assert_eq!(code, 0, "{out}{err}");
    let version = src
        .version
        .clone()
        .expect("the installed package has a version");
    assert!(out.contains(&format!("mlperf-logging {version}")), "{out}");
    // A folder (the package's compliance_checker), JSON output.
    let cdir = src.compliance_dir().to_string_lossy().to_string();
    let (code, out, _) = common::mllog(["check", "--rules", &cdir, "--format", "json", &log]);
    assert_eq!(code, 0, "{out}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["rules"]["version"], serde_json::json!(version));
    assert_eq!(doc["files"][0]["ruleset"], "6.1.0");
    assert_eq!(doc["files"][0]["passed"], true);
    // MLLOG_RULES, a ruleset the built-in rules do not have, and the official verdict on it.
    let old = tmp.path().join("old.txt");
    std::fs::write(
        &old,
        example_log(
            Ruleset::V5_0_0,
            mllog_core::Benchmark::Bert,
            Division::Closed,
        )
        .unwrap(),
    )
    .unwrap();
    let exe = env!("CARGO_BIN_EXE_mllog");
    let run = |args: &[&str]| {
        let o = Command::new(exe)
            .args(args)
            .env("MLLOG_RULES", &cdir)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (
            o.status.code().unwrap(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let old_s = old.to_string_lossy().to_string();
    let (code, out, _) = run(&["check", "--ruleset", "4.1.0", &old_s]);
    let (official, text) = common::official_check(&old, "4.1.0", false);
    assert_eq!(code == 0, official, "{out}\n{text}");
    assert!(
        out.contains("training 4.1.0 rules of mlperf-logging"),
        "{out}"
    );
    // --config: one custom rule file; a missing one is the official "Could not find config file".
    let custom = tmp.path().join("custom.yaml");
    std::fs::write(&custom, "- KEY:\n    NAME: submission_org\n    REQ: EXACTLY_ONE\n    CHECK: \" v['value'] == 'nobody' \"\n").unwrap();
    let (code, out, _) = run(&["check", "--config", &custom.to_string_lossy(), &log]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("CHECK for 'submission_org' failed"), "{out}");
    let (code, out, _) = run(&["check", "--config", "no_such.yaml", &log]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Could not find config file"), "{out}");
    // A ruleset the package does not have; an option that needs --rules.
    let (code, _, err) = run(&["check", "--ruleset", "9.9.9", &log]);
    assert_eq!(code, 2);
    assert!(err.contains("no rules for training 9.9.9"), "{err}");
    let (code, _, err) = common::mllog(["check", "--usage", "hpc", &log]);
    assert_eq!(code, 2);
    assert!(err.contains("--usage needs --rules"), "{err}");
}

/// A file that cannot be read (missing, a folder) among readable logs: with the ruleset
/// inferred from each log (no `--ruleset`) it is said as with `--ruleset` given: the same exit
/// status, the same items of the JSON and JSON Lines outputs, the same closing line.
#[test]
fn mllog_check_rules_says_an_unreadable_file_alike_with_and_without_ruleset() {
    let cdir = source().compliance_dir().to_string_lossy().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("result_0.txt");
    let log = example_log(
        Ruleset::V6_1_0,
        mllog_core::Benchmark::Llama2_70bLora,
        Division::Closed,
    )
    .unwrap();
    std::fs::write(&good, log).unwrap();
    let good = good.to_string_lossy().to_string();
    let missing = tmp.path().join("missing.txt").to_string_lossy().to_string();
    let folder = tmp.path().to_string_lossy().to_string();
    let files = [
        good.as_str(),
        missing.as_str(),
        folder.as_str(),
        good.as_str(),
    ];
    // Both ways, `--ruleset` given first: (stdout, stdout), each run exiting 2 for the I/O
    // error, the inferred one saying on stderr which files it could not read.
    let both = |format: &str| {
        let run = |ruleset: &[&str]| {
            let mut args = vec!["check", "--rules", &cdir, "--format", format];
            args.extend_from_slice(ruleset);
            args.extend_from_slice(&files);
            common::mllog(args)
        };
        let (fixed, inferred) = (run(&["--ruleset", "6.1.0"]), run(&[]));
        assert_eq!(fixed.0, 2, "{}{}", fixed.1, fixed.2);
        assert_eq!(inferred.0, 2, "{}{}", inferred.1, inferred.2);
        for path in [&missing, &folder] {
            let said = format!("mllog: cannot read {path}: ");
            assert!(inferred.2.contains(&said), "{}", inferred.2);
        }
        (fixed.1, inferred.1)
    };
    // Each file as the JSON output lists it: its name, and its error or its verdict.
    let items = |out: &str| -> Vec<(String, String)> {
        let doc: serde_json::Value = serde_json::from_str(out).expect(out);
        doc["files"]
            .as_array()
            .expect(out)
            .iter()
            .map(|f| {
                let what = match f.get("error") {
                    Some(e) => format!("error: {}", e.as_str().unwrap()),
                    None => format!("passed: {}", f["passed"]),
                };
                (f["file"].as_str().unwrap().to_owned(), what)
            })
            .collect()
    };
    let (fixed, inferred) = both("json");
    let listed = items(&inferred);
    assert_eq!(listed, items(&fixed), "{inferred}");
    assert_eq!(listed.len(), 4, "{inferred}");
    assert_eq!(listed[0], (good.clone(), "passed: true".to_owned()));
    assert_eq!(listed[3], listed[0]);
    assert_eq!(listed[1].0, missing);
    assert!(listed[1].1.contains("No such file"), "{listed:?}");
    assert_eq!(listed[2].0, folder);
    assert!(listed[2].1.starts_with("error: "), "{listed:?}");
    // JSON Lines: the unreadable files' lines are the same.
    let (fixed, inferred) = both("jsonl");
    let errors = |out: &str| -> Vec<String> {
        out.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect(l))
            .filter(|v| v.get("error").is_some())
            .map(|v| v.to_string())
            .collect()
    };
    assert_eq!(errors(&inferred).len(), 2, "{inferred}");
    assert_eq!(errors(&inferred), errors(&fixed));
    // Text: the closing line counts them.
    let (fixed, inferred) = both("text");
    let closing = inferred.lines().last().unwrap_or_default();
    assert!(closing.contains("2 unreadable"), "{inferred}");
    assert_eq!(Some(closing), fixed.lines().last(), "{fixed}");
}

/// Custom rule files (`--config`) that exercise the checker's algorithm beyond the official
/// files: BEGIN and END code, PRE/POST state, `FIRST_CHECK`, `ATLEAST_ONE_CHECK`, `AT_LEAST(n)`,
/// `AT_LEAST_ONE_OR`, `OPTIONAL`, snippets that raise (in a `try` of the checker and outside
/// one), a syntax error, `enqueue_config` of an official file and of a missing one.
const CONFIGS: &[&str] = &[
    "- BEGIN:\n    CODE: |\n        s.update({'count': 0, 'keys': []})\n        from math import ceil\n\
     - KEY:\n    NAME: submission_benchmark\n    REQ: EXACTLY_ONE\n    CHECK: \" v['value'] in ['llama2_70b_lora', 'bert'] and isinstance(v['value'], str) \"\n    POST: |\n        s['count'] += 1\n        s['keys'].extend([v['value']])\n\
     - KEY:\n    NAME: run_start\n    REQ: EXACTLY_ONE\n    CHECK: \" ll.timestamp >= 0 and math.isclose(1.0, 1.0) and (1 if True else 2) == math.ceil(0.5) \"\n\
     - END:\n    PRE: \" total = len(s['keys']) \"\n    CHECK: \" total == s['count'] == 1 \"\n",
    "- KEY:\n    NAME: submission_org\n    REQ: EXACTLY_ONE\n    CHECK:\n      - \" v['value'] != '' \"\n      - \" v['value'] > 3 \"\n\
     - KEY:\n    NAME: run_stop\n    REQ: EXACTLY_ONE\n    POST: \" s['x'] = undefined_name \"\n\
     - KEY:\n    NAME: nowhere\n    REQ: OPTIONAL\n\
     - KEY:\n    NAME: also_nowhere\n    REQ: AT_LEAST_ONE_OR(nowhere)\n\
     - END:\n    CHECK:\n      - \" s == {} \"\n      - \" s['missing'] \"\n",
    "- KEY:\n    NAME: eval_accuracy\n    REQ: AT_LEAST(2)\n    FIRST_CHECK: \" ll.lineno >= 0 and v['metadata']['epoch_num'] > 1e9 \"\n    ATLEAST_ONE_CHECK: \" v['value'] >= 0.0 \"\n\
     - KEY:\n    NAME: submission_platform\n    REQ: EXACTLY_ONE\n    CHECK: \" v['value'] == \"\n",
    "- KEY:\n    NAME: run_start\n    REQ: EXACTLY_ONE\n    ATLEAST_ONE_CHECK: \" v['value']['x'] \"\n",
    "- BEGIN:\n    CODE: \" s['a'] = 1 / 0 \"\n",
    "- KEY:\n    NAME: submission_division\n    REQ: EXACTLY_ONE\n    POST: \" enqueue_config('training_6.1.0/closed_common.yaml') \"\n\
     - KEY:\n    NAME: submission_org\n    REQ: AT_LEAST(3)\n",
    "- KEY:\n    NAME: submission_division\n    REQ: EXACTLY_ONE\n    POST: \" enqueue_config('training_6.1.0/not_there.yaml') \"\n",
];

#[test]
fn custom_rule_files_get_the_official_verdicts() {
    let src = source();
    let tmp = tempfile::tempdir().unwrap();
    let good = example_log(
        Ruleset::V6_1_0,
        mllog_core::Benchmark::Llama2_70bLora,
        Division::Closed,
    )
    .unwrap();
    let line = good
        .lines()
        .find(|l| l.contains("\"submission_org\""))
        .unwrap();
    let twice = format!("{good}{line}\n");
    let mut wrong = Vec::new();
    let mut passed = 0;
    for (i, config) in CONFIGS.iter().enumerate() {
        let cfg = tmp.path().join(format!("custom_{i}.yaml"));
        std::fs::write(&cfg, config).unwrap();
        let engine = RuleEngine::load(&src.compliance_dir(), "training", "6.1.0")
            .unwrap()
            .with_config(&cfg)
            .unwrap_or_else(|e| panic!("config {i}: {e}"));
        for (j, log) in [&good, &twice].iter().enumerate() {
            let path = tmp.path().join(format!("log_{i}_{j}.txt"));
            std::fs::write(&path, log).unwrap();
            for werror in [false, true] {
                let (official, _) =
                    common::official_check_with_config(&path, "6.1.0", werror, &cfg);
                let report = engine.check_bytes(log.as_bytes(), werror).unwrap();
                passed += usize::from(official);
                if report.passed() != official {
                    let msgs: Vec<&str> =
                        report.findings.iter().map(|f| f.message.as_str()).collect();
                    wrong.push(format!("config {i}, log {j}, werror {werror}: official {official}, ours {}: {msgs:?}", report.passed()));
                }
            }
        }
    }
    assert!(passed > 0 && passed < CONFIGS.len() * 4, "{passed} passed");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
