//! `mllog check --rules SOURCE`: the official rule files of an installed mlperf-logging
//! package, read at run time and run by the rule engine, with the output naming the source
//! and the package version.

use std::io::Read;
use std::path::Path;

use crate::check::{Args, Format};
use crate::{diag, machine};
use mllog_core::compliance::engine::{rulesets, EngineReport, LoadError, RuleEngine};
use mllog_core::compliance::Severity;
use mllog_core::rules_source::{RulesOrigin, RulesSource};

/// The rules source of `--rules` or, without it, `MLLOG_RULES` (unset or empty: none), or
/// why the one named cannot be used.
pub(crate) fn source(a: &Args) -> Option<Result<RulesSource, String>> {
    let named = match &a.rules {
        Some(spec) => format!("--rules {spec}"),
        None => mllog_core::rules_source::RULES_ENV.to_owned(),
    };
    RulesSource::from_env(a.rules.as_deref()).map(|r| r.map_err(|e| format!("{named}: {e}")))
}

fn source_json(src: &RulesSource) -> serde_json::Value {
    let (origin, python) = match &src.origin {
        RulesOrigin::Folder => ("folder", None),
        RulesOrigin::Python { python } => ("python", Some(python.clone())),
    };
    serde_json::json!({
        "root": src.root.display().to_string(),
        "origin": origin,
        "python": python,
        "package": "mlperf-logging",
        "version": src.version,
    })
}

/// The engine's check of one input: standard input read whole, a file read as a stream. The
/// outer error is the log's own (it cannot be read); the inner one a rule file that cannot be
/// run.
fn check_input(
    engine: &RuleEngine,
    path: &Path,
    werror: bool,
) -> std::io::Result<Result<EngineReport, LoadError>> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin().lock().read_to_end(&mut buf)?;
        return Ok(engine.check_bytes(&buf, werror));
    }
    match engine.check_file(path, werror) {
        Err(LoadError::Io { path: p, source }) if p == path => Err(source),
        r => Ok(r),
    }
}

/// The rule engine for the options: the source, the usage, the ruleset (default: the newest
/// the package has for the usage), the custom config.
fn engine(a: &Args, src: Result<RulesSource, String>) -> Result<(RulesSource, RuleEngine), String> {
    let src = src?;
    let dir = src.compliance_dir();
    let ruleset = match &a.ruleset {
        Some(r) => r.clone(),
        None => rulesets(&dir)
            .into_iter()
            .filter(|(u, _)| *u == a.usage)
            .map(|(_, r)| r)
            .next_back()
            .ok_or_else(|| format!("{}: no {} rulesets", dir.display(), a.usage))?,
    };
    let mut engine = RuleEngine::load(&dir, &a.usage, &ruleset).map_err(|e| e.to_string())?;
    if let Some(c) = &a.config {
        engine = engine.with_config(c).map_err(|e| e.to_string())?;
    }
    Ok((src, engine))
}

fn render_text(report: &EngineReport, src: &RulesSource, shown: &str) -> String {
    let mut out = String::new();
    for f in &report.findings {
        let sev = if f.severity == Severity::Error || report.werror {
            "error"
        } else {
            f.severity.as_str()
        };
        let mut lines = f.message.lines();
        out.push_str(&format!("{sev}: {}\n", lines.next().unwrap_or_default()));
        match f.line {
            Some(l) => out.push_str(&format!("  --> {shown}:{l}\n")),
            None => out.push_str(&format!("  --> {shown}\n")),
        }
        for l in lines {
            out.push_str(&format!("   | {l}\n"));
        }
        if !f.rule.is_empty() || !f.source.is_empty() {
            out.push_str(&format!("   = rule: {} ({})\n", f.rule, f.source));
        }
        out.push('\n');
    }
    out.push_str(&verdict(report, src, shown));
    out
}

fn verdict(report: &EngineReport, src: &RulesSource, shown: &str) -> String {
    let errors = report.errors().count();
    let warnings = report.warnings().count();
    let passed = report.passed();
    let line = format!(
        "{shown}: {} ({errors} error{}, {warnings} warning{}{}) — {} {} rules of {}, {} records, checks: {}",
        if passed { "COMPLIANT" } else { "NOT COMPLIANT" },
        if errors == 1 { "" } else { "s" },
        if warnings == 1 { "" } else { "s" },
        if report.werror { ", warnings are errors" } else { "" },
        report.usage,
        report.ruleset,
        src.describe(),
        report.records,
        if report.rule_files.is_empty() { "-".to_string() } else { report.rule_files.join(", ") },
    );
    diag::verdict_line(&line, passed) + "\n"
}

/// `mllog check` with rules read at run time.
pub(crate) fn run(a: &Args, src: Result<RulesSource, String>) -> u8 {
    let (src, engine) = match engine(a, src) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("mllog: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let mut worst = crate::OK;
    let mut items = Vec::new();
    let (mut checked, mut failed, mut errors, mut warnings) = (0, 0, 0, 0);
    for path in &a.files {
        let shown = crate::shown(path);
        let report = match check_input(&engine, path, a.werror) {
            Ok(checked) => match checked {
                Ok(report) => report,
                // A rule file the log's chain of configs reaches cannot be run: no verdict.
                Err(e) => {
                    eprintln!("mllog: {e}");
                    return crate::USAGE_OR_IO;
                }
            },
            Err(e) => {
                worst = crate::USAGE_OR_IO;
                if !crate::check::unreadable(a.format, &mut items, &shown, &e) {
                    return crate::USAGE_OR_IO;
                }
                continue;
            }
        };
        let json = || {
            let mut v = machine::value(&report);
            if let serde_json::Value::Object(m) = &mut v {
                let mut head = serde_json::Map::new();
                head.insert("file".into(), shown.clone().into());
                head.insert("passed".into(), report.passed().into());
                head.insert("rules".into(), source_json(&src));
                head.insert("errors".into(), report.errors().count().into());
                head.insert("warnings".into(), report.warnings().count().into());
                head.extend(std::mem::take(m));
                *m = head;
            }
            v
        };
        let out = match a.format {
            Format::Json => {
                items.push(json());
                String::new()
            }
            Format::Jsonl => machine::line(json()),
            Format::Text if a.quiet => verdict(&report, &src, &shown),
            Format::Text => render_text(&report, &src, &shown),
        };
        if !out.is_empty() && !crate::emit(&out) {
            return crate::USAGE_OR_IO;
        }
        checked += 1;
        errors += report.errors().count();
        warnings += report.warnings().count();
        if !report.passed() {
            failed += 1;
            if worst == crate::OK {
                worst = crate::FAILED;
            }
        }
    }
    if a.format == Format::Text && a.files.len() > 1 {
        let unreadable = a.files.len() - checked;
        if !crate::emit(&diag::closing_line(
            a.files.len(),
            failed,
            unreadable,
            errors,
            warnings,
        )) {
            return crate::USAGE_OR_IO;
        }
    }
    if a.format == Format::Json {
        let doc = machine::Document::new("check", "files", items)
            .with("passed", (worst == crate::OK).into())
            .with("werror", a.werror.into())
            .with("rules", source_json(&src));
        if !crate::emit(&doc.render()) {
            return crate::USAGE_OR_IO;
        }
    }
    worst
}
