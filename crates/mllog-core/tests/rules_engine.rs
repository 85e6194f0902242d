//! The rule engine on the installed official package: every rule file of every ruleset loads
//! with no unsupported construct, and misspells nothing the engine would say.
//!
//! The package is found through `MLLOG_PYTHON` (default `python3`), which must import
//! `mlperf_logging`.

#![cfg(feature = "rules")]

use std::path::PathBuf;
use std::process::Command;

use mllog_core::compliance::engine::{rulesets, LoadError, RuleEngine};

fn compliance_dir() -> PathBuf {
    let py = std::env::var("MLLOG_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&py)
        .args([
            "-c",
            "import os, mlperf_logging.compliance_checker as c; print(os.path.dirname(c.__file__))",
        ])
        .output()
        .unwrap_or_else(|e| panic!("run {py}: {e}"));
    assert!(
        out.status.success(),
        "`{py}` cannot import mlperf_logging (set MLLOG_PYTHON to an interpreter that has mlperf-logging): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// How many `KEY` entries of the rule file `path` are named `name`, as PyYAML's `BaseLoader`
/// (the checker's) reads the file.
fn key_records(path: &std::path::Path, name: &str) -> usize {
    let py = std::env::var("MLLOG_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&py)
        .args([
            "-c",
            "import sys, yaml\n\
             doc = yaml.load(open(sys.argv[1]), Loader=yaml.BaseLoader)\n\
             print(sum(1 for e in doc if list(e)[0] == 'KEY' and e['KEY'].get('NAME') == sys.argv[2]))",
        ])
        .arg(path)
        .arg(name)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn every_rule_file_of_every_ruleset_loads() {
    let dir = compliance_dir();
    let all = rulesets(&dir);
    assert!(
        all.len() >= 17,
        "rulesets found in {}: {all:?}",
        dir.display()
    );
    let mut files = 0;
    for (usage, ruleset) in &all {
        let engine = RuleEngine::load(&dir, usage, ruleset)
            .unwrap_or_else(|e| panic!("{usage} {ruleset}: {e}"));
        engine
            .load_all()
            .unwrap_or_else(|e| panic!("{usage} {ruleset}: {e}"));
        let names = engine.rule_files();
        assert!(
            names.iter().any(|n| n.ends_with("/common.yaml")),
            "{usage} {ruleset}: {names:?}"
        );
        eprintln!(
            "{usage} {ruleset}: {} files: {}",
            names.len(),
            names.join(" ")
        );
        // The package's own files misspell nothing: all the engine reads past in them is a
        // key given two records in one file, which PyYAML reads as two.
        for i in engine.ignored() {
            let name = i
                .what
                .strip_prefix("a second KEY record for `")
                .and_then(|r| r.split('`').next())
                .unwrap_or_else(|| panic!("{usage} {ruleset}: {i}"));
            assert_eq!(key_records(&i.path, name), 2, "{i}");
            eprintln!("{usage} {ruleset}: said: {i}");
        }
        files += names.len();
    }
    eprintln!("{} rulesets, {files} rule files", all.len());
}

#[test]
fn the_one_malformed_file_of_the_package_is_reported_with_its_line() {
    // training_0.7.0_warn is not a ruleset the official CLI offers (its `--ruleset` takes the
    // version only; the folder is reached through `--config`), and its bert.yaml is not
    // valid YAML: PyYAML raises reading it.
    let dir = compliance_dir();
    if !dir.join("training_0.7.0_warn/bert.yaml").exists() {
        eprintln!("skipped: this package has no training_0.7.0_warn/bert.yaml");
        return;
    }
    let engine = RuleEngine::load(&dir, "training", "0.7.0").unwrap();
    match engine.with_config("training_0.7.0_warn/bert.yaml".as_ref()) {
        Err(LoadError::Yaml { path, line, .. }) => {
            assert!(path.ends_with("training_0.7.0_warn/bert.yaml"));
            assert_eq!(line, 25);
        }
        other => panic!("{other:?}"),
    }
}

/// A rules folder of our own: `training_9.9.9/common.yaml` with `text`.
fn folder_with(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("training_9.9.9")).unwrap();
    std::fs::write(dir.path().join("training_9.9.9/common.yaml"), text).unwrap();
    dir
}

#[test]
fn an_unsupported_construct_is_a_load_error_naming_file_line_and_construct() {
    let dir = folder_with(
        "- KEY:\n    NAME: a\n    REQ: EXACTLY_ONE\n\n- KEY:\n    NAME: b\n    POST: |\n        s['x'] = 1\n        s['y'] = [k for k in s]\n",
    );
    match RuleEngine::load(dir.path(), "training", "9.9.9") {
        Err(LoadError::Unsupported {
            path,
            line,
            construct,
        }) => {
            assert!(path.ends_with("training_9.9.9/common.yaml"));
            assert_eq!(line, 9);
            assert!(construct.contains("list comprehension"), "{construct}");
        }
        other => panic!("{other:?}"),
    }
    let dir = folder_with("- KEY:\n    NAME: a\n    CHECK: \"zip(v, v)\"\n");
    let err = RuleEngine::load(dir.path(), "training", "9.9.9").unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}: unsupported Python construct: the builtin `zip`",
            dir.path().join("training_9.9.9/common.yaml:3").display()
        )
    );
    let err = RuleEngine::load(dir.path(), "training", "1.0.0").unwrap_err();
    assert!(
        err.to_string()
            .contains("no rules for training 1.0.0 (this folder has: training 9.9.9)"),
        "{err}"
    );
}

#[test]
fn a_snippet_that_raises_is_the_official_failed_executing_message() {
    let dir = folder_with(
        "- KEY:\n    NAME: a\n    REQ: EXACTLY_ONE\n    CHECK: \" v['value'] > 3 \"\n- KEY:\n    NAME: b\n    POST: \" s['x'] = nothing \"\n",
    );
    let engine = RuleEngine::load(dir.path(), "training", "9.9.9").unwrap();
    let log = ":::MLLOG {\"time_ms\": 1, \"key\": \"a\", \"value\": \"four\", \"metadata\": {}}\n:::MLLOG {\"time_ms\": 2, \"key\": \"b\", \"value\": 1, \"metadata\": {}}\n";
    let report = engine.check_bytes(log.as_bytes(), false).unwrap();
    assert!(!report.passed());
    let msgs: Vec<&str> = report.findings.iter().map(|f| f.message.as_str()).collect();
    assert!(
        msgs[0].starts_with(
            "Failed executing CHECK code:\n v['value'] > 3 \ntriggered by line:\n:::MLLOG"
        ),
        "{msgs:?}"
    );
    assert!(
        msgs[0].contains("TypeError: '>' not supported between instances of 'str' and 'int'"),
        "{msgs:?}"
    );
    assert!(
        msgs[1].starts_with("Failed executing code POST code triggered by line :"),
        "{msgs:?}"
    );
    assert_eq!(report.findings[1].line, Some(2));
}

/// A chain of configs of our own: `common.yaml` enqueues `<division>.yaml`, `closed.yaml`
/// enqueues `deep.yaml`; `open.yaml` holds Python the engine does not run.
fn chained_folder() -> tempfile::TempDir {
    let dir = folder_with(
        "- KEY:\n    NAME: division\n    REQ: EXACTLY_ONE\n    POST: \" enqueue_config('training_9.9.9/{}.yaml'.format(v['value'])) \"\n- KEY:\n    NAME: a\n    REQ: EXACTLY_ONE\n    CHECK: \" v['value'] > 3 \"\n",
    );
    let folder = dir.path().join("training_9.9.9");
    std::fs::write(
        folder.join("closed.yaml"),
        "- KEY:\n    NAME: b\n    REQ: AT_LEAST_ONE\n    CHECK: \" v['value'] == 'x' \"\n    POST: \" enqueue_config('training_9.9.9/deep.yaml') \"\n",
    )
    .unwrap();
    std::fs::write(
        folder.join("deep.yaml"),
        "- KEY:\n    NAME: c\n    REQ: EXACTLY_ONE\n- END:\n    CHECK: \" s.get('never', False) \"\n",
    )
    .unwrap();
    std::fs::write(
        folder.join("open.yaml"),
        "- KEY:\n    NAME: b\n    CHECK: \"zip(v, v)\"\n",
    )
    .unwrap();
    dir
}

fn record(time: u32, key: &str, value: &str) -> String {
    format!(":::MLLOG {{\"time_ms\": {time}, \"key\": \"{key}\", \"value\": {value}, \"metadata\": {{}}}}\n")
}

#[test]
fn a_rule_file_is_loaded_only_when_a_log_reaches_it() {
    let dir = chained_folder();
    let engine = RuleEngine::load(dir.path(), "training", "9.9.9").unwrap();
    assert_eq!(engine.rule_files(), ["training_9.9.9/common.yaml"]);
    // The closed chain: open.yaml, which the engine cannot run, is never read.
    let log = record(1, "division", "\"closed\"") + &record(2, "a", "1") + &record(3, "b", "\"y\"");
    let report = engine.check_bytes(log.as_bytes(), false).unwrap();
    assert_eq!(
        report.rule_files,
        [
            "training_9.9.9/common.yaml",
            "training_9.9.9/closed.yaml",
            "training_9.9.9/deep.yaml"
        ]
    );
    assert_eq!(engine.rule_files(), {
        let mut v = report.rule_files.clone();
        v.sort();
        v
    });
    // A log whose chain reaches open.yaml gets no verdict: the error names the file and line.
    let open = record(1, "division", "\"open\"") + &record(2, "b", "1");
    match engine.check_bytes(open.as_bytes(), false) {
        Err(LoadError::Unsupported { path, line, .. }) => {
            assert!(path.ends_with("training_9.9.9/open.yaml"), "{path:?}");
            assert_eq!(line, 3);
        }
        other => panic!("{other:?}"),
    }
    // Loading the whole folder up front says the same before any log is read.
    let eager = RuleEngine::load(dir.path(), "training", "9.9.9").unwrap();
    assert!(matches!(
        eager.load_all(),
        Err(LoadError::Unsupported { .. })
    ));
}

#[test]
fn a_log_that_reaches_every_file_gets_the_findings_of_every_file() {
    let dir = chained_folder();
    std::fs::remove_file(dir.path().join("training_9.9.9/open.yaml")).unwrap();
    let lazy = RuleEngine::load(dir.path(), "training", "9.9.9").unwrap();
    let eager = RuleEngine::load(dir.path(), "training", "9.9.9").unwrap();
    eager.load_all().unwrap();
    // `a` fails common.yaml's CHECK, `b` closed.yaml's, `c` is missing for deep.yaml, and
    // deep.yaml's END check fails.
    let log = record(1, "division", "\"closed\"") + &record(2, "a", "1") + &record(3, "b", "\"y\"");
    for werror in [false, true] {
        let (l, e) = (
            lazy.check_bytes(log.as_bytes(), werror).unwrap(),
            eager.check_bytes(log.as_bytes(), werror).unwrap(),
        );
        assert_eq!(l, e);
        let msgs: Vec<&str> = l.findings.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(msgs.len(), 4, "{msgs:?}");
        assert!(
            msgs[0].starts_with("CHECK for 'a' failed in line 1:"),
            "{msgs:?}"
        );
        assert!(
            msgs[1].starts_with("CHECK for 'b' failed in line 2:"),
            "{msgs:?}"
        );
        assert_eq!(
            msgs[2],
            "Required EXACTLY_ONE occurrence of 'c' but found 0"
        );
        assert!(
            msgs[3].starts_with("failed test:  s.get('never', False) "),
            "{msgs:?}"
        );
        let sources: Vec<&str> = l.findings.iter().map(|f| f.source.as_str()).collect();
        assert_eq!(
            sources,
            [
                "training_9.9.9/common.yaml",
                "training_9.9.9/closed.yaml",
                "training_9.9.9/deep.yaml",
                "training_9.9.9/deep.yaml"
            ]
        );
    }
}

#[test]
fn a_log_read_as_a_stream_gets_the_report_of_the_log_read_whole() {
    let Ok(corpus) = std::env::var("MLLOG_CORPUS") else {
        eprintln!("skipped: MLLOG_CORPUS not set");
        return;
    };
    let dir = compliance_dir();
    let mut logs: Vec<PathBuf> = std::fs::read_dir(PathBuf::from(corpus).join("real"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    logs.sort();
    assert!(!logs.is_empty());
    for ruleset in ["5.0.0", "5.1.0"] {
        let engine = RuleEngine::load(&dir, "training", ruleset).unwrap();
        for log in &logs {
            let bytes = std::fs::read(log).unwrap();
            for werror in [false, true] {
                let whole = engine.check_bytes(&bytes, werror).unwrap();
                let streamed = engine.check_file(log, werror).unwrap();
                assert_eq!(streamed, whole, "{} under {ruleset}", log.display());
            }
        }
    }
    // A log that cannot be read is the log's own error, naming it.
    let engine = RuleEngine::load(&dir, "training", "5.1.0").unwrap();
    match engine.check_file("no/such/log.txt".as_ref(), false) {
        Err(LoadError::Io { path, .. }) => assert_eq!(path, PathBuf::from("no/such/log.txt")),
        other => panic!("{other:?}"),
    }
}
