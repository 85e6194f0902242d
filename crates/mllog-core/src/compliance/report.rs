//! Findings and reports, with text (compiler-diagnostic style) and JSON output.

use std::fmt::Write;

use super::model::{Division, Ruleset};

/// How bad a finding is. Only [`Severity::Error`] fails a check, and [`Severity::Warning`]
/// under `werror` ([`ComplianceReport::passed`]).
///
///
/// ```
/// use mllog_core::compliance::{check_text, example_log, Division, Ruleset, Severity};
/// use mllog_core::Benchmark;
///
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// // An `EXACTLY_ONE` key logged twice with the same value: a warning.
/// let line = log.lines().find(|l| l.contains("\"lora_rank\"")).unwrap();
/// let twice = format!("{log}{line}\n");
/// let report = check_text(Ruleset::V6_1_0, &twice);
/// assert_eq!(report.findings[0].severity, Severity::Warning);
/// assert!(report.passed(false) && !report.passed(true));
/// assert_eq!(Severity::Warning.as_str(), "warning");
/// assert!(Severity::Error < Severity::Warning); // most severe first
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Fails the check.
    Error,
    /// Passes, but fails under `--werror` (e.g. an `EXACTLY_ONE` key repeated with the same value).
    Warning,
    /// Information only (never fails), e.g. "division not logged yet" in a live report.
    Note,
}

impl Severity {
    /// `"error"`, `"warning"`, `"note"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// What kind of rule a finding comes from ([`Finding::kind`]): lets a tool group findings,
/// e.g. every missing key ([`FindingKind::Missing`]) apart from every failed check.
///
///
/// ```
/// use mllog_core::compliance::{check_text, example_log, Division, FindingKind, Ruleset};
/// use mllog_core::Benchmark;
///
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// let without: String = log
///     .lines()
///     .filter(|l| !l.contains("\"lora_alpha\""))
///     .map(|l| format!("{l}\n"))
///     .collect();
/// let report = check_text(Ruleset::V6_1_0, &without);
/// let missing = report.findings.iter().find(|f| f.kind == FindingKind::Missing).unwrap();
/// assert_eq!(missing.key.as_deref(), Some("lora_alpha"));
/// assert_eq!(FindingKind::Missing.as_str(), "missing");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FindingKind {
    /// A `CHECK` was false.
    Check,
    /// A `FIRST_CHECK` was false.
    FirstCheck,
    /// A check could not be evaluated (wrong type, or state read before it was written):
    /// the official "Failed executing CHECK code".
    Exec,
    /// A `POST` action failed.
    Post,
    /// A required key is missing (`REQ`).
    Missing,
    /// An `EXACTLY_ONE` key occurs more than once.
    Duplicate,
    /// No occurrence passed the `ATLEAST_ONE_CHECK` (usually: target not reached).
    Target,
    /// None of the alternatives of `AT_LEAST_ONE_OR` occurs.
    Alternatives,
    /// A line holding `:::MLLOG ` is not a valid record.
    Parse,
    /// The log has no MLLOG lines.
    NoLines,
    /// The official checker crashes here (traceback, rc 1); we report it as an error.
    Fatal,
    /// Information (live reports).
    Info,
}

impl FindingKind {
    /// A short identifier, used in JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            FindingKind::Check => "check",
            FindingKind::FirstCheck => "first_check",
            FindingKind::Exec => "exec",
            FindingKind::Post => "post",
            FindingKind::Missing => "missing",
            FindingKind::Duplicate => "duplicate",
            FindingKind::Target => "target",
            FindingKind::Alternatives => "alternatives",
            FindingKind::Parse => "parse",
            FindingKind::NoLines => "no_lines",
            FindingKind::Fatal => "fatal",
            FindingKind::Info => "info",
        }
    }
}

/// One problem found in a log. As JSON (feature `serde`): `{severity, kind, line, key, message,
/// rule, source}`.
///
/// `message` is meant for people (what the rule requires and what was found), `rule` quotes
/// the official rule so the verdict can be traced to the YAML files, and `line` points into
/// the log. Findings of a finished check come in line order; see the [`ComplianceReport`]
/// example.
///
/// ```
/// use mllog_core::compliance::{check_text, example_log, Division, FindingKind, Ruleset, Severity};
/// use mllog_core::Benchmark;
///
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// let bad = log.replace("\"lora_rank\", \"value\": 16", "\"lora_rank\", \"value\": 8");
/// let report = check_text(Ruleset::V6_1_0, &bad);
/// let f = &report.findings[0];
/// assert_eq!((f.severity, f.kind, f.key.as_deref()), (Severity::Error, FindingKind::Check, Some("lora_rank")));
/// let lineno = bad.lines().position(|l| l.contains("\"lora_rank\"")).unwrap() + 1;
/// assert_eq!(f.line, Some(lineno));
/// assert_eq!(f.rule, "CHECK v['value'] == 16");
/// assert_eq!(f.source, "training_6.1.0/closed_llama2_70b_lora.yaml");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Finding {
    /// Error, warning or note.
    pub severity: Severity,
    /// What kind of rule.
    pub kind: FindingKind,
    /// Physical line number (1-based), when the finding is about one line.
    pub line: Option<usize>,
    /// The key concerned.
    pub key: Option<String>,
    /// The rule in words, with what was found.
    pub message: String,
    /// The official rule text (e.g. `CHECK v['value'] == 16`, `REQ EXACTLY_ONE`).
    pub rule: String,
    /// The rule file, e.g. `training_6.1.0/closed_llama2_70b_lora.yaml`.
    pub source: String,
}

#[cfg(feature = "serde")]
impl serde::Serialize for Severity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for FindingKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A [`ComplianceReport`] as the machine-readable output shows it: the report with the file it is about
/// and whether warnings count as errors (from [`ComplianceReport::json`]).
///
/// Serialise it with any serde serializer, or take the JSON text directly from
/// [`ComplianceReport::render_json`].
///
/// ```
/// use mllog_core::compliance::{check_text, example_log, ComplianceReportJson, Division, Ruleset};
/// use mllog_core::Benchmark;
///
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// let report = check_text(Ruleset::V6_1_0, &log);
/// let json: ComplianceReportJson<'_> = report.json("result_0.txt", true);
/// assert!(format!("{json:?}").contains("passed: true"));
/// let text = report.render_json("result_0.txt", true);
/// assert!(text.starts_with(r#"{"file":"result_0.txt","ruleset":"6.1.0","werror":true,"passed":true,"#), "{text}");
/// assert!(text.ends_with(r#""errors":0,"warnings":0,"findings":[]}"#), "{text}");
/// ```
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
#[derive(Debug, serde::Serialize)]
pub struct ComplianceReportJson<'a> {
    file: &'a str,
    ruleset: &'static str,
    werror: bool,
    passed: bool,
    division: Option<&'static str>,
    benchmark: Option<&'a str>,
    rule_files: &'a [String],
    records: usize,
    errors: usize,
    warnings: usize,
    findings: &'a [Finding],
}

/// The result of checking a log (or the part of it seen so far).
///
/// Returned by [`check_text`](super::check_text), [`check_reader`](super::check_reader) and
/// [`Checker::report`](super::Checker::report). [`ComplianceReport::passed`] is the verdict
/// (with `werror`, as the official checker's `--werror`, warnings fail too); the
/// [`Finding`]s say what is wrong and where, in words, and render as compiler-style text
/// ([`ComplianceReport::render_text`]) or JSON (`render_json`, feature `serde`).
///
/// ```
/// use mllog_core::compliance::{check_text, example_log, Division, Ruleset, Severity};
/// use mllog_core::keys::Benchmark;
///
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// // Drop the `run_stop` line: the run never ends.
/// let cut: String = log.lines().filter(|l| !l.contains("run_stop")).map(|l| format!("{l}\n")).collect();
/// let report = check_text(Ruleset::V6_1_0, &cut);
/// assert_eq!(report.benchmark.as_deref(), Some("llama2_70b_lora"));
/// assert_eq!(report.division, Some(Division::Closed));
/// assert!(!report.passed(false));
/// let error = report.errors().next().unwrap();
/// assert_eq!(error.severity, Severity::Error);
/// assert!(report.render_text("result_0.txt", false).contains("result_0.txt"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ComplianceReport {
    /// The ruleset checked against.
    pub ruleset: Ruleset,
    /// The division, once `submission_division` named a valid one.
    pub division: Option<Division>,
    /// The benchmark named by `submission_benchmark` (even if not allowed).
    pub benchmark: Option<String>,
    /// The rule files applied, in order (`common`, `closed_common`, `closed_llama2_70b_lora`).
    pub rule_files: Vec<String>,
    /// MLLOG records checked.
    pub records: usize,
    /// The findings, in line order (findings without a line last).
    pub findings: Vec<Finding>,
}

impl ComplianceReport {
    /// Whether the log complies: no error, and with `werror` no warning either (the official
    /// checker's `--werror`).
    pub fn passed(&self, werror: bool) -> bool {
        !self
            .findings
            .iter()
            .any(|f| f.severity == Severity::Error || (werror && f.severity == Severity::Warning))
    }

    /// The errors.
    pub fn errors(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
    }

    /// The warnings.
    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
    }

    /// Compiler-diagnostic style text: one block per finding, then a summary line. `path` names
    /// the log in `-->` lines; under `werror` warnings are shown as errors.
    pub fn render_text(&self, path: &str, werror: bool) -> String {
        let mut out = String::new();
        for f in &self.findings {
            let sev = if werror && f.severity == Severity::Warning {
                "error"
            } else {
                f.severity.as_str()
            };
            let _ = writeln!(out, "{sev}: {}", f.message);
            match f.line {
                Some(l) => {
                    let _ = writeln!(out, "  --> {path}:{l}");
                }
                None => {
                    let _ = writeln!(out, "  --> {path}");
                }
            }
            if !f.rule.is_empty() || !f.source.is_empty() {
                let _ = writeln!(out, "   = rule: {} ({})", f.rule, f.source);
            }
            out.push('\n');
        }
        let errors = self.errors().count();
        let warnings = self.warnings().count();
        let verdict = if self.passed(werror) {
            "COMPLIANT"
        } else {
            "NOT COMPLIANT"
        };
        let _ = writeln!(
            out,
            "{path}: {verdict} ({errors} error{}, {warnings} warning{}{}) — ruleset {}, {} records, checks: {}",
            if errors == 1 { "" } else { "s" },
            if warnings == 1 { "" } else { "s" },
            if werror && warnings > 0 { ", warnings are errors" } else { "" },
            self.ruleset,
            self.records,
            if self.rule_files.is_empty() { "-".to_string() } else { self.rule_files.join(", ") },
        );
        out
    }

    /// The report as JSON: `{file, ruleset, werror, passed, division, benchmark, rule_files,
    /// records, errors, warnings, findings: [...]}`, serialisable with serde.
    #[cfg(feature = "serde")]
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub fn json<'a>(&'a self, path: &'a str, werror: bool) -> ComplianceReportJson<'a> {
        ComplianceReportJson {
            file: path,
            ruleset: self.ruleset.as_str(),
            werror,
            passed: self.passed(werror),
            division: self.division.map(|d| d.as_str()),
            benchmark: self.benchmark.as_deref(),
            rule_files: &self.rule_files,
            records: self.records,
            errors: self.errors().count(),
            warnings: self.warnings().count(),
            findings: &self.findings,
        }
    }

    /// The report as JSON text (one line); see [`ComplianceReport::json`].
    #[cfg(feature = "serde")]
    #[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
    pub fn render_json(&self, path: &str, werror: bool) -> String {
        serde_json::to_string(&self.json(path, werror)).expect("a report serialises")
    }
}
