//! `mllog check`: the compliance checker.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use tracing_mllog::compliance::{check_reader, check_reader_detect, Report, Ruleset};

/// Output formats of `mllog check`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Compiler-style diagnostics.
    Text,
    /// One JSON document for all files.
    Json,
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
fn check_one(path: &Path, ruleset: Option<Ruleset>) -> std::io::Result<Report> {
    fn go(input: impl BufRead, ruleset: Option<Ruleset>) -> std::io::Result<Report> {
        match ruleset {
            Some(r) => check_reader(r, input),
            None => check_reader_detect(input).map(|(report, _)| report),
        }
    }
    if path.as_os_str() == "-" {
        go(std::io::stdin().lock(), ruleset)
    } else {
        let f = std::fs::File::open(path)?;
        go(std::io::BufReader::with_capacity(1 << 16, f), ruleset)
    }
}

pub fn run(a: Args) -> u8 {
    let mut worst = crate::OK;
    for path in &a.files {
        let shown = crate::shown(path);
        let report = match check_one(path, a.ruleset) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("mllog: cannot read {shown}: {e}");
                worst = crate::USAGE_OR_IO;
                continue;
            }
        };
        let out = match a.format {
            Format::Json => report.render_json(&shown, a.werror) + "\n",
            Format::Text if a.quiet => {
                let text = report.render_text(&shown, a.werror);
                text.lines().last().unwrap_or_default().to_string() + "\n"
            }
            Format::Text => report.render_text(&shown, a.werror),
        };
        if !crate::emit(&out) {
            return crate::USAGE_OR_IO;
        }
        if !report.passed(a.werror) && worst == crate::OK {
            worst = crate::FAILED;
        }
    }
    worst
}
