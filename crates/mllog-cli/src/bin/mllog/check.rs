//! `mllog check`: the compliance checker.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::progress::Progress;
use crate::{diag, machine};
use mllog_core::compliance::{
    check_reader, check_reader_detect_older, rules, ComplianceReport, Ruleset,
};
use mllog_core::Benchmark;

/// Output formats of `mllog check`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Compiler-style diagnostics.
    Text,
    /// One JSON document: `{"schema_version", "command", "passed", "files": [...]}`.
    Json,
    /// One JSON object per file and line, written as each file is checked.
    Jsonl,
}

/// Options of `mllog check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The ruleset to check against: 5.0.0, 5.1.0, 6.0.0 or 6.1.0 built in [default: detected
    /// from the log's submission_benchmark when 6.1.0 does not allow it, else 6.1.0]; with
    /// --rules, any ruleset the package has [default: the newest of --usage with rules for the
    /// log's submission_benchmark, said per file]
    #[arg(long, value_name = "X.Y.Z")]
    pub(crate) ruleset: Option<String>,
    /// Check against the official rule files of an installed mlperf-logging package, read now:
    /// `python` (the package $MLLOG_PYTHON or python3 imports), `python:PATH` (the one that
    /// interpreter imports), or a folder (the mlperf_logging package or its
    /// compliance_checker) [env: MLLOG_RULES]
    #[arg(long, value_name = "SOURCE")]
    pub(crate) rules: Option<String>,
    /// With --rules: the rules' usage, `training` or `hpc`.
    #[arg(long, value_name = "USAGE", default_value = "training")]
    pub(crate) usage: String,
    /// With --rules: start from this rule file instead of `<usage>_<ruleset>/common.yaml`, as the
    /// official --config (a relative path is looked up in the compliance_checker folder, then
    /// in the current directory).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Treat warnings (e.g. a repeated EXACTLY_ONE key) as errors, like the official --werror.
    #[arg(long)]
    pub(crate) werror: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
    /// Text format: print only the verdict line of each file.
    #[arg(short, long)]
    pub(crate) quiet: bool,
    /// The logs to check (`-` reads standard input).
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
}

/// Why the ruleset of a log checked without `--ruleset` is the one used, and the older
/// rulesets that allow its benchmark and under which it passes too.
#[derive(Clone, Debug, Default)]
pub(crate) struct Choice {
    /// The reason, in words (`None` when `--ruleset` was given).
    pub(crate) note: Option<String>,
    /// Older rulesets the log passes under.
    also: Vec<Ruleset>,
}

pub(crate) fn choice_note(
    report: &ComplianceReport,
    detected: bool,
    older: &[ComplianceReport],
) -> Choice {
    let used = report.ruleset;
    let bench = report.benchmark.as_deref();
    let allows = |r: Ruleset| {
        bench
            .and_then(Benchmark::from_name)
            .is_some_and(|b| rules(r).allows(b))
    };
    let mut note = match bench {
        None => format!("checked under {used}, the default: the log names no submission_benchmark"),
        Some(b) if detected => format!(
            "checked under {used}, the newest ruleset that allows {b} ({} does not); no log \
             names its round",
            Ruleset::DEFAULT
        ),
        Some(b) if allows(used) => {
            format!("checked under {used}, the default, which allows {b}; no log names its round")
        }
        Some(b) => format!("checked under {used}, the default; no ruleset allows {b}"),
    };
    let also: Vec<Ruleset> = older
        .iter()
        .filter(|r| r.passed(false))
        .map(|r| r.ruleset)
        .collect();
    if !also.is_empty() {
        let list: Vec<&str> = also.iter().map(|r| r.as_str()).collect();
        note.push_str(&format!(
            "; it {} under {}, which allow{} {} too: pass --ruleset for the round you submit to",
            if report.passed(false) {
                "also passes"
            } else {
                "passes"
            },
            list.join(", "),
            if also.len() == 1 { "s" } else { "" },
            bench.unwrap_or("the benchmark")
        ));
    }
    Choice {
        note: Some(note),
        also,
    }
}

/// Checks one input, streamed: memory stays bounded whatever the size of the log.
fn check_one(
    path: &Path,
    ruleset: Option<Ruleset>,
    progress: &Progress,
) -> std::io::Result<(ComplianceReport, Choice)> {
    fn go(
        input: impl BufRead,
        ruleset: Option<Ruleset>,
    ) -> std::io::Result<(ComplianceReport, Choice)> {
        match ruleset {
            Some(r) => check_reader(r, input).map(|rep| (rep, Choice::default())),
            None => check_reader_detect_older(input).map(|(report, detected, older)| {
                let c = choice_note(&report, detected, &older);
                (report, c)
            }),
        }
    }
    if path.as_os_str() == "-" {
        go(std::io::stdin().lock(), ruleset)
    } else {
        let f = progress.reader(path, std::fs::File::open(path)?);
        go(std::io::BufReader::with_capacity(1 << 16, f), ruleset)
    }
}

/// Options that only mean something with `--rules`.
fn needs_rules(a: &Args) -> Option<&'static str> {
    if a.config.is_some() {
        Some("--config")
    } else if a.usage != "training" {
        Some("--usage")
    } else {
        None
    }
}

/// An input that could not be read: said on stderr, and an item of the JSON outputs; false
/// when standard output is closed.
pub(crate) fn unreadable(
    format: Format,
    items: &mut Vec<serde_json::Value>,
    shown: &str,
    e: &std::io::Error,
) -> bool {
    eprintln!("mllog: cannot read {shown}: {e}");
    match format {
        Format::Json => items.push(machine::unreadable(shown, e)),
        Format::Jsonl => return crate::emit(&machine::line(machine::unreadable(shown, e))),
        Format::Text => {}
    }
    true
}

/// Says a file that was read but not checked, `why`: on standard error, and as the file's
/// item of the JSON and JSON Lines outputs, as [`unreadable`] does. `false` when the output
/// is gone.
pub(crate) fn unchecked(
    format: Format,
    items: &mut Vec<serde_json::Value>,
    shown: &str,
    why: &str,
) -> bool {
    eprintln!("mllog: {shown}: {why}");
    let item = serde_json::json!({ "file": shown, "error": why });
    match format {
        Format::Json => items.push(item),
        Format::Jsonl => return crate::emit(&machine::line(item)),
        Format::Text => {}
    }
    true
}

/// `mllog check` with the built-in rules (`check_rules` runs it with `--rules`).
pub fn run(a: Args) -> u8 {
    if let Some(opt) = needs_rules(&a) {
        eprintln!("mllog: {opt} needs --rules (or MLLOG_RULES): the built-in rules have no other");
        return crate::USAGE_OR_IO;
    }
    let ruleset = match a.ruleset.as_deref().map(str::parse::<Ruleset>).transpose() {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "mllog: {e}; --rules reads the other rulesets from an installed mlperf-logging"
            );
            return crate::USAGE_OR_IO;
        }
    };
    let mut worst = crate::OK;
    let progress = Progress::new(&a.files);
    let mut items = Vec::new();
    let (mut checked, mut failed, mut errors, mut warnings) = (0, 0, 0, 0);
    for path in &a.files {
        let shown = crate::shown(path);
        let (report, choice) = match check_one(path, ruleset, &progress) {
            Ok(r) => r,
            Err(e) => {
                worst = crate::USAGE_OR_IO;
                if !crate::check::unreadable(a.format, &mut items, &shown, &e) {
                    return crate::USAGE_OR_IO;
                }
                continue;
            }
        };
        let json = || {
            let mut v = machine::value(&report.json(&shown, a.werror));
            if let (serde_json::Value::Object(m), Some(n)) = (&mut v, &choice.note) {
                m.insert("ruleset_note".into(), n.clone().into());
                m.insert(
                    "also_passes_under".into(),
                    choice
                        .also
                        .iter()
                        .map(|r| serde_json::Value::from(r.as_str()))
                        .collect(),
                );
            }
            v
        };
        let out = match a.format {
            Format::Json => {
                items.push(json());
                String::new()
            }
            Format::Jsonl => machine::line(json()),
            Format::Text if a.quiet => {
                let text = report.render_text(&shown, a.werror);
                let verdict = text.lines().last().unwrap_or_default();
                diag::verdict_line(verdict, report.passed(a.werror)) + "\n"
            }
            Format::Text => {
                let mut t = diag::render(&report, path, &shown, a.werror);
                if let Some(n) = &choice.note {
                    t.push_str(&format!("  = note: {n}\n"));
                }
                t
            }
        };
        if !out.is_empty() && !progress.suspend(|| crate::emit(&out)) {
            return crate::USAGE_OR_IO;
        }
        checked += 1;
        errors += report.errors().count();
        warnings += report.warnings().count();
        if !report.passed(a.werror) {
            failed += 1;
            if worst == crate::OK {
                worst = crate::FAILED;
            }
        }
    }
    progress.finish();
    if a.format == Format::Text && a.files.len() > 1 {
        let line = diag::Tally {
            files: a.files.len(),
            failed,
            unreadable: a.files.len() - checked,
            errors,
            warnings,
            ..Default::default()
        }
        .closing_line();
        if !crate::emit(&line) {
            return crate::USAGE_OR_IO;
        }
    }
    if a.format == Format::Json {
        let doc = machine::Document::new("check", "files", items)
            .with("passed", (worst == crate::OK).into())
            .with("werror", a.werror.into());
        if !crate::emit(&doc.render()) {
            return crate::USAGE_OR_IO;
        }
    }
    worst
}
