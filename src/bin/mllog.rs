//! `mllog`: command-line tools for MLLOG files.
//!
//! ```text
//! mllog check [--ruleset X.Y.Z] [--werror] [--format text|json] FILE...   (- = stdin)
//! ```
//! Exit status: 0 every file complies, 1 some file does not, 2 usage or I/O error.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use tracing_mllog::compliance::{check_reader, check_reader_detect, Report, Ruleset};

const USAGE: &str = "\
usage: mllog check [--ruleset X.Y.Z] [--werror] [--format text|json] FILE...
       mllog summary [--format text|json|csv] [--plot OUT.svg|OUT.png] FILE...
       mllog score [--ruleset X.Y.Z] [--format text|json] DIR
       mllog package --system NAME [--out DIR] [--system-desc FILE] [--force] FILE...
       mllog dry-run --benchmark NAME --out FILE [--division closed|open] [--gbs N] [--ruleset X.Y.Z]
       (mllog summary|score|package --help: their options)

Checks MLPerf Training MLLOG files for compliance, with the verdicts of the official
checker (mlperf-logging 4.1.68). FILE `-` reads standard input.

options:
  --ruleset X.Y.Z   5.0.0, 5.1.0, 6.0.0 or 6.1.0 (default: detected from the log's
                    submission_benchmark when 6.1.0 does not allow it, else 6.1.0)
  --werror          treat warnings (e.g. a repeated EXACTLY_ONE key) as errors
  --format FORMAT   text (default; compiler-style diagnostics) or json (one object per file)
  -q, --quiet       text format: print only the summary line of each file
  -h, --help        this help

exit status: 0 compliant, 1 not compliant, 2 usage or I/O error";

#[derive(PartialEq)]
enum Format {
    Text,
    Json,
}

struct Options {
    ruleset: Option<Ruleset>,
    werror: bool,
    format: Format,
    quiet: bool,
    files: Vec<String>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        ruleset: None,
        werror: false,
        format: Format::Text,
        quiet: false,
        files: Vec::new(),
    };
    let mut it = args.iter();
    let mut only_files = false;
    while let Some(a) = it.next() {
        if only_files || a == "-" || !a.starts_with('-') {
            o.files.push(a.clone());
            continue;
        }
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{what} needs a value"))
        };
        match name {
            "--" => only_files = true,
            "--ruleset" => o.ruleset = Some(value("--ruleset")?.parse()?),
            "--werror" => o.werror = true,
            "-q" | "--quiet" => o.quiet = true,
            "--format" => {
                o.format = match value("--format")?.as_str() {
                    "text" => Format::Text,
                    "json" => Format::Json,
                    other => return Err(format!("unknown format {other:?} (text or json)")),
                }
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    if o.files.is_empty() {
        return Err("no FILE given".into());
    }
    Ok(o)
}

/// Checks one input, streamed: memory stays bounded whatever the size of the log.
fn check_one(path: &str, ruleset: Option<Ruleset>) -> std::io::Result<Report> {
    fn run(input: impl BufRead, ruleset: Option<Ruleset>) -> std::io::Result<Report> {
        match ruleset {
            Some(r) => check_reader(r, input),
            None => check_reader_detect(input).map(|(report, _)| report),
        }
    }
    if path == "-" {
        run(std::io::stdin().lock(), ruleset)
    } else {
        let f = std::fs::File::open(path)?;
        run(std::io::BufReader::with_capacity(1 << 16, f), ruleset)
    }
}

fn check(o: &Options) -> u8 {
    let mut worst = 0u8;
    let stdout = std::io::stdout();
    for path in &o.files {
        let shown = if path == "-" {
            "<stdin>"
        } else {
            path.as_str()
        };
        let report = match check_one(path, o.ruleset) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("mllog: cannot read {shown}: {e}");
                worst = 2;
                continue;
            }
        };
        let out = match o.format {
            Format::Json => report.render_json(shown, o.werror) + "\n",
            Format::Text if o.quiet => {
                report
                    .render_text(shown, o.werror)
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .to_string()
                    + "\n"
            }
            Format::Text => report.render_text(shown, o.werror),
        };
        let mut lock = stdout.lock();
        if lock
            .write_all(out.as_bytes())
            .and_then(|_| lock.flush())
            .is_err()
        {
            return 2;
        }
        if !report.passed(o.werror) && worst == 0 {
            worst = 1;
        }
    }
    worst
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `summary`, `score`, `package`: tracing_mllog::results::cli.
    if let Some(code) = args
        .first()
        .and_then(|c| tracing_mllog::results::cli::run(c, &args[1..]))
    {
        return ExitCode::from(code);
    }
    // `dry-run`: tracing_mllog::presets::dry_run.
    if args.first().is_some_and(|c| c == "dry-run") {
        return ExitCode::from(tracing_mllog::presets::dry_run::main(&args[1..]));
    }
    if args.iter().any(|a| a == "-h" || a == "--help") || args.is_empty() {
        println!("{USAGE}");
        return ExitCode::from(if args.is_empty() { 2 } else { 0 });
    }
    match args[0].as_str() {
        "check" => match parse_args(&args[1..]) {
            Ok(o) => ExitCode::from(check(&o)),
            Err(e) => {
                eprintln!("mllog check: {e}\n\n{USAGE}");
                ExitCode::from(2)
            }
        },
        other => {
            eprintln!("mllog: unknown command {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
