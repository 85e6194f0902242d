//! `mllog check`: the compliance checker.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::progress::Progress;
use crate::{diag, machine};
use mllog_core::compliance::{check_reader, check_reader_detect, ComplianceReport, Ruleset};

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
    /// The ruleset to check against: 5.0.0, 5.1.0, 6.0.0 or 6.1.0 [default: detected from the
    /// log's submission_benchmark when 6.1.0 does not allow it, else 6.1.0]
    #[arg(long, value_name = "X.Y.Z")]
    ruleset: Option<Ruleset>,
    /// Treat warnings (e.g. a repeated EXACTLY_ONE key) as errors, like the official --werror.
    #[arg(long)]
    werror: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Text format: print only the verdict line of each file.
    #[arg(short, long)]
    quiet: bool,
    /// The logs to check (`-` reads standard input).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Checks one input, streamed: memory stays bounded whatever the size of the log.
fn check_one(
    path: &Path,
    ruleset: Option<Ruleset>,
    progress: &Progress,
) -> std::io::Result<ComplianceReport> {
    fn go(input: impl BufRead, ruleset: Option<Ruleset>) -> std::io::Result<ComplianceReport> {
        match ruleset {
            Some(r) => check_reader(r, input),
            None => check_reader_detect(input).map(|(report, _)| report),
        }
    }
    if path.as_os_str() == "-" {
        go(std::io::stdin().lock(), ruleset)
    } else {
        let f = progress.reader(path, std::fs::File::open(path)?);
        go(std::io::BufReader::with_capacity(1 << 16, f), ruleset)
    }
}

pub fn run(a: Args) -> u8 {
    let mut worst = crate::OK;
    let progress = Progress::new(&a.files);
    let mut items = Vec::new();
    let (mut checked, mut failed, mut errors, mut warnings) = (0, 0, 0, 0);
    for path in &a.files {
        let shown = crate::shown(path);
        let report = match check_one(path, a.ruleset, &progress) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("mllog: cannot read {shown}: {e}");
                worst = crate::USAGE_OR_IO;
                match a.format {
                    Format::Json => items.push(machine::unreadable(&shown, &e)),
                    Format::Jsonl => {
                        if !crate::emit(&machine::line(machine::unreadable(&shown, &e))) {
                            return crate::USAGE_OR_IO;
                        }
                    }
                    Format::Text => {}
                }
                continue;
            }
        };
        let out = match a.format {
            Format::Json => {
                items.push(machine::value(&report.json(&shown, a.werror)));
                String::new()
            }
            Format::Jsonl => machine::line(machine::value(&report.json(&shown, a.werror))),
            Format::Text if a.quiet => {
                let text = report.render_text(&shown, a.werror);
                let verdict = text.lines().last().unwrap_or_default();
                diag::verdict_line(verdict, report.passed(a.werror)) + "\n"
            }
            Format::Text => diag::render(&report, path, &shown, a.werror),
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
        let unreadable = a.files.len() - checked;
        let line = diag::closing_line(a.files.len(), failed, unreadable, errors, warnings);
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
