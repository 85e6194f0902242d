//! The rule engine on the installed official package: every rule file of every ruleset loads
//! with no unsupported construct.
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
    let report = engine.check_bytes(log.as_bytes(), false);
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
