//! `mllog summary`: per-run summaries and the plot.

use std::path::PathBuf;

use clap::builder::TypedValueParser;

use crate::machine;
use crate::progress::Progress;
use mllog_cli::plot;
use mllog_core::results::summary;

/// Output formats of `mllog summary`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A block per run.
    Text,
    /// One JSON document: `{"schema_version", "command", "files": [...]}`.
    Json,
    /// One JSON object per run and line.
    Jsonl,
    /// One CSV row per run, with a header.
    Csv,
}

/// Options of `mllog summary`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Per run: benchmark, run_stop status, time to train in minutes \
((run_stop - run_start) / 60000), samples to converge, the eval curve, throughput, init time, \
step times.\nExit status: 0 done, 2 usage or I/O error."
)]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also draw the runs to OUT (SVG for .svg, PNG for .png): a panel per benchmark with the
    /// eval metric and the target line, and step times when the logs have them.
    #[arg(long, value_name = "OUT", value_parser = clap::builder::OsStringValueParser::new().try_map(plot_path))]
    plot: Option<PathBuf>,
    /// The logs (`-` reads standard input).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// `--plot OUT`: only the extensions the plotter writes, checked before any log is read.
fn plot_path(s: std::ffi::OsString) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
    if plot::PLOT_EXTENSIONS
        .iter()
        .any(|e| e.eq_ignore_ascii_case(ext))
    {
        Ok(p)
    } else {
        Err(format!(
            "unsupported plot format {}: supported are {}",
            if ext.is_empty() {
                "(no extension)".to_string()
            } else {
                format!(".{ext}")
            },
            plot::PLOT_EXTENSIONS.map(|e| format!(".{e}")).join(", ")
        ))
    }
}

pub fn run(a: Args) -> u8 {
    let mut runs = Vec::new();
    let mut status = crate::OK;
    let mut unreadable = Vec::new();
    let progress = Progress::new(&a.files);
    for f in &a.files {
        let r = if f.as_os_str() == "-" {
            summary::summarize_reader("<stdin>", std::io::stdin().lock())
        } else {
            std::fs::File::open(f).and_then(|file| {
                let r = std::io::BufReader::with_capacity(1 << 16, progress.reader(f, file));
                summary::summarize_reader(&f.display().to_string(), r)
            })
        };
        match r {
            Ok(s) => runs.push(s),
            Err(e) => {
                eprintln!("mllog summary: cannot read {}: {e}", crate::shown(f));
                unreadable.push(machine::unreadable(&crate::shown(f), &e));
                status = crate::USAGE_OR_IO;
            }
        }
    }
    progress.finish();
    let text = match a.format {
        Format::Json => machine::Document::new(
            "summary",
            "files",
            runs.iter()
                .map(machine::value)
                .chain(unreadable.iter().cloned())
                .collect(),
        )
        .render(),
        Format::Jsonl => runs
            .iter()
            .map(machine::value)
            .chain(unreadable.iter().cloned())
            .map(machine::line)
            .collect(),
        Format::Csv => summary::render_csv(&runs),
        Format::Text => summary::render_text(&runs),
    };
    if !crate::emit(&text) {
        return crate::USAGE_OR_IO;
    }
    if let Some(p) = &a.plot {
        if let Err(e) = plot::write_plot(&runs, p) {
            eprintln!("mllog summary: cannot write the plot {}: {e}", p.display());
            return crate::USAGE_OR_IO;
        }
        eprintln!("mllog summary: plot written to {}", p.display());
    }
    status
}
