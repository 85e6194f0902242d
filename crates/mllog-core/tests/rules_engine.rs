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
