//! `mllog check --rules SOURCE`: the official rule files of an installed mlperf-logging
//! package, read at run time and run by the rule engine, with the output naming the source
//! and the package version.

use std::io::Read;
use std::path::Path;

use crate::check::{Args, Format};
use crate::{diag, machine};
use mllog_core::compliance::engine::{rulesets, EngineReport, Ignored, LoadError, RuleEngine};
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

/// One input of the check: standard input, read whole (it cannot be read twice), or a file,
/// read as a stream.
enum Input<'a> {
    Stdin(Vec<u8>),
    File(&'a Path),
}

impl<'a> Input<'a> {
    fn open(path: &'a Path) -> std::io::Result<Input<'a>> {
        if path.as_os_str() != "-" {
            return Ok(Input::File(path));
        }
        let mut buf = Vec::new();
        std::io::stdin().lock().read_to_end(&mut buf)?;
        Ok(Input::Stdin(buf))
    }

    /// The log's first `submission_benchmark`, for inferring its ruleset: a file is read only
    /// up to it.
    fn first_benchmark(&self) -> std::io::Result<Option<String>> {
        match self {
            Input::Stdin(bytes) => Ok(first_benchmark(bytes)),
            Input::File(path) => {
                let mut reader = std::io::BufReader::new(std::fs::File::open(path)?);
                let mut line = Vec::new();
                loop {
                    line.clear();
                    if std::io::BufRead::read_until(&mut reader, b'\n', &mut line)? == 0 {
                        return Ok(None);
                    }
                    if line.windows(20).any(|w| w == b"submission_benchmark")
                        && let Some(b) = first_benchmark(&line)
                    {
                        return Ok(Some(b));
                    }
                }
            }
        }
    }

    /// The engine's check. The outer error is the log's own (it cannot be read); the inner
    /// one a rule file, reached by the log's chain of configs, that cannot be run.
    fn check(
        &self,
        engine: &RuleEngine,
        werror: bool,
    ) -> std::io::Result<Result<EngineReport, LoadError>> {
        match self {
            Input::Stdin(bytes) => Ok(engine.check_bytes(bytes, werror)),
            Input::File(path) => match engine.check_file(path, werror) {
                Err(LoadError::Io { path: p, source }) if p == *path => Err(source),
                r => Ok(r),
            },
        }
    }
}

/// The rule engines of a check: the one of `--ruleset` (or `--config`), else one per ruleset
/// the logs are inferred to be for, loaded when first needed.
struct Engines {
    src: RulesSource,
    usage: String,
    fixed: Option<RuleEngine>,
    by_ruleset: Vec<RuleEngine>,
}

impl Engines {
    /// The engine a log is checked with, and how its ruleset was picked when it was inferred.
    /// The outer error is the log's own (it cannot be read to infer its ruleset), as in
    /// [`Input::check`]; the inner one says why no engine fits it.
    fn for_log(
        &mut self,
        benchmark: impl FnOnce() -> std::io::Result<Option<String>>,
    ) -> std::io::Result<Result<(&RuleEngine, Option<String>), String>> {
        match self.fixed {
            Some(ref e) => Ok(Ok((e, None))),
            None => Ok(self.inferred(benchmark()?)),
        }
    }

    /// The engine of the newest ruleset whose round has the log's `benchmark` (a rule file for
    /// it, and its `closed_common.yaml` accepting it), the newest of all when the log names
    /// none; loaded when first needed.
    fn inferred(
        &mut self,
        benchmark: Option<String>,
    ) -> Result<(&RuleEngine, Option<String>), String> {
        let dir = self.src.compliance_dir();
        let have: Vec<String> = rulesets(&dir)
            .into_iter()
            .filter(|(u, _)| *u == self.usage)
            .map(|(_, r)| r)
            .collect();
        let words = format!(
            "{} ({}) has {} rulesets {}",
            self.src.describe(),
            dir.display(),
            self.usage,
            if have.is_empty() {
                "none".into()
            } else {
                have.join(", ")
            }
        );
        let (i, how) = match benchmark {
            None => {
                let r = have.last().ok_or_else(|| words.clone())?.clone();
                (
                    self.engine(&dir, &r)?,
                    format!("ruleset {r}: the newest of the rules read (the log names no submission_benchmark)"),
                )
            }
            Some(b) => {
                let has_file = |usage: &str, r: &str| {
                    dir.join(format!("{usage}_{r}"))
                        .join(format!("closed_{b}.yaml"))
                        .is_file()
                };
                let with_file: Vec<String> = have
                    .iter()
                    .filter(|r| has_file(&self.usage, r))
                    .cloned()
                    .collect();
                // A folder may keep the file of a benchmark its round dropped: the round's
                // own list, its closed_common.yaml check, decides, newest first.
                let mut refused = Vec::new();
                let mut chosen = None;
                for r in with_file.iter().rev() {
                    let i = self.engine(&dir, r)?;
                    if self.by_ruleset[i].accepts_benchmark(&b) == Some(false) {
                        refused.push(r.clone());
                    } else {
                        chosen = Some((r.clone(), i));
                        break;
                    }
                }
                let Some((r, i)) = chosen else {
                    let elsewhere: Vec<String> = rulesets(&dir)
                        .into_iter()
                        .filter(|(u, r)| *u != self.usage && has_file(u, r))
                        .map(|(u, r)| format!("{u} {r}"))
                        .collect();
                    let hint = match elsewhere.first() {
                        Some(other) => format!(
                            "; {} {} rules for it: pass --usage {}",
                            elsewhere.join(", "),
                            if elsewhere.len() == 1 { "has" } else { "have" },
                            other.split(' ').next().unwrap_or_default()
                        ),
                        None => "; pass --ruleset".into(),
                    };
                    let why = if refused.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " (the closed_common.yaml of {} does not accept it)",
                            refused.join(", ")
                        )
                    };
                    return Err(format!(
                        "the log's submission_benchmark {b:?} has rules in no {} ruleset of the \
                         rules read{why}: {}{hint}",
                        self.usage, words
                    ));
                };
                let passed = if refused.is_empty() {
                    String::new()
                } else {
                    refused.reverse();
                    format!(
                        "; the closed_common.yaml of {} does not accept it",
                        refused.join(", ")
                    )
                };
                (
                    i,
                    format!(
                        "ruleset {r}: the newest of the rules read whose round has {b} ({} have rules for it{passed}); pass --ruleset for the submission round",
                        with_file.join(", ")
                    ),
                )
            }
        };
        Ok((&self.by_ruleset[i], Some(how)))
    }

    /// What the rule files read hold that the official checker reads past without a word,
    /// each once.
    fn ignored(&self) -> Vec<Ignored> {
        let mut all: Vec<Ignored> = Vec::new();
        for i in self
            .fixed
            .iter()
            .chain(&self.by_ruleset)
            .flat_map(RuleEngine::ignored)
        {
            if !all.contains(&i) {
                all.push(i);
            }
        }
        all
    }

    /// The position of the engine of `ruleset` in `by_ruleset`, loaded when first needed.
    fn engine(&mut self, dir: &std::path::Path, ruleset: &str) -> Result<usize, String> {
        if let Some(i) = self.by_ruleset.iter().position(|e| e.ruleset() == ruleset) {
            return Ok(i);
        }
        let e = RuleEngine::load(dir, &self.usage, ruleset).map_err(|e| e.to_string())?;
        self.by_ruleset.push(e);
        Ok(self.by_ruleset.len() - 1)
    }
}

/// The log's first `submission_benchmark` string, as the checker's division file reads it.
fn first_benchmark(log: &[u8]) -> Option<String> {
    let reader = mllog_core::record::LogReader::new(log);
    for item in reader {
        let Ok(line) = item else { continue };
        if &*line.record.key == "submission_benchmark" {
            return line.record.value.as_str().map(str::to_owned);
        }
    }
    None
}

/// The rule engines for the options: the source, the usage, the ruleset given (else inferred
/// per log), the custom config (checked with the given ruleset, else the newest of the usage).
fn engines(a: &Args, src: Result<RulesSource, String>) -> Result<Engines, String> {
    let src = src?;
    let dir = src.compliance_dir();
    let usages: std::collections::BTreeSet<String> =
        rulesets(&dir).into_iter().map(|(u, _)| u).collect();
    if !usages.contains(&a.usage) {
        return Err(format!(
            "no {} rules in {} ({}): it has rules for {}",
            a.usage,
            src.describe(),
            dir.display(),
            if usages.is_empty() {
                "no usage".into()
            } else {
                usages.into_iter().collect::<Vec<_>>().join(", ")
            }
        ));
    }
    let ruleset = match (&a.ruleset, &a.config) {
        (Some(r), _) => Some(r.clone()),
        (None, Some(_)) => Some(
            rulesets(&dir)
                .into_iter()
                .filter(|(u, _)| *u == a.usage)
                .map(|(_, r)| r)
                .next_back()
                .ok_or_else(|| format!("{}: no {} rulesets", dir.display(), a.usage))?,
        ),
        (None, None) => None,
    };
    let fixed = match ruleset {
        Some(r) => {
            let mut engine = RuleEngine::load(&dir, &a.usage, &r).map_err(|e| e.to_string())?;
            if let Some(c) = &a.config {
                engine = engine.with_config(c).map_err(|e| e.to_string())?;
            }
            Some(engine)
        }
        None => None,
    };
    Ok(Engines {
        src,
        usage: a.usage.clone(),
        fixed,
        by_ruleset: Vec::new(),
    })
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
    let mut engines = match engines(a, src) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("mllog: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let mut worst = crate::OK;
    let mut items = Vec::new();
    let mut tally = diag::Tally {
        files: a.files.len(),
        ..Default::default()
    };
    for path in &a.files {
        let shown = crate::shown(path);
        let input = match Input::open(path) {
            Ok(input) => input,
            Err(e) => {
                worst = crate::USAGE_OR_IO;
                tally.unreadable += 1;
                if !crate::check::unreadable(a.format, &mut items, &shown, &e) {
                    return crate::USAGE_OR_IO;
                }
                continue;
            }
        };
        let (engine, how) = match engines.for_log(|| input.first_benchmark()) {
            Ok(Ok(found)) => found,
            Ok(Err(e)) => {
                worst = crate::USAGE_OR_IO;
                tally.no_ruleset += 1;
                if !crate::check::unchecked(a.format, &mut items, &shown, &e) {
                    return crate::USAGE_OR_IO;
                }
                continue;
            }
            Err(e) => {
                worst = crate::USAGE_OR_IO;
                tally.unreadable += 1;
                if !crate::check::unreadable(a.format, &mut items, &shown, &e) {
                    return crate::USAGE_OR_IO;
                }
                continue;
            }
        };
        let report = match input.check(engine, a.werror) {
            Ok(Ok(report)) => report,
            // A snippet needs, on this log's values, what the engine does not have: this log
            // has no verdict, the others may well have one.
            Ok(Err(e @ LoadError::Limit { .. })) => {
                worst = crate::USAGE_OR_IO;
                tally.no_verdict += 1;
                if !crate::check::unchecked(a.format, &mut items, &shown, &e.to_string()) {
                    return crate::USAGE_OR_IO;
                }
                continue;
            }
            // A rule file the log's chain of configs reaches cannot be run: no log would
            // have a verdict.
            Ok(Err(e)) => {
                eprintln!("mllog: {e}");
                return crate::USAGE_OR_IO;
            }
            Err(e) => {
                worst = crate::USAGE_OR_IO;
                tally.unreadable += 1;
                if !crate::check::unreadable(a.format, &mut items, &shown, &e) {
                    return crate::USAGE_OR_IO;
                }
                continue;
            }
        };
        let src = &engines.src;
        let json = || {
            let mut v = machine::value(&report);
            if let serde_json::Value::Object(m) = &mut v {
                let mut head = serde_json::Map::new();
                head.insert("file".into(), shown.clone().into());
                head.insert("passed".into(), report.passed().into());
                head.insert("rules".into(), source_json(src));
                if let Some(h) = &how {
                    head.insert("ruleset_inferred".into(), h.clone().into());
                }
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
            Format::Text if a.quiet => verdict(&report, src, &shown),
            Format::Text => {
                let mut t = how
                    .as_ref()
                    .map_or(String::new(), |h| format!("{shown}: {h}\n"));
                t.push_str(&render_text(&report, src, &shown));
                t
            }
        };
        if !out.is_empty() && !crate::emit(&out) {
            return crate::USAGE_OR_IO;
        }
        tally.errors += report.errors().count();
        tally.warnings += report.warnings().count();
        if !report.passed() {
            tally.failed += 1;
            if worst == crate::OK {
                worst = crate::FAILED;
            }
        }
    }
    // Said, not counted: the official checker ignores these, and so do the verdicts.
    let ignored = engines.ignored();
    for i in &ignored {
        eprintln!("mllog: note: {i}");
    }
    if a.format == Format::Text && a.files.len() > 1 && !crate::emit(&tally.closing_line()) {
        return crate::USAGE_OR_IO;
    }
    if a.format == Format::Json {
        let doc = machine::Document::new("check", "files", items)
            .with("passed", (worst == crate::OK).into())
            .with("werror", a.werror.into())
            .with("rules", source_json(&engines.src))
            .with("rules_ignored", machine::value(&ignored));
        if !crate::emit(&doc.render()) {
            return crate::USAGE_OR_IO;
        }
    }
    worst
}
