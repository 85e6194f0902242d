//! `mllog package`: the submission layout, with the seed check.

use std::path::PathBuf;

use mllog_core::results::package::{self, PackageReport};
use serde_json::json;

use crate::machine;

pub(crate) fn system_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s.contains(['/', '\\']) || s.starts_with('.') {
        Err("a system name is not empty, has no slash and does not start with a dot".into())
    } else {
        Ok(s.to_string())
    }
}

/// Output formats of `mllog package`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// What was written, in words.
    Text,
    /// One JSON document: `{"schema_version", "command", "ok", "system_desc", "unknown",
    /// "benchmarks": [...]}`.
    Json,
}

/// Options of `mllog package`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Copies result logs to DIR/results/NAME/<benchmark>/result_<i>.txt (the \
benchmark from each log's submission_benchmark), and DIR/systems/NAME.json from --system-desc \
(or a TODO template). Checks the seeds as the package checker does: every run logs an integer \
seed with file and lineno, no two runs the same seed on the same line. Nothing is written for a \
benchmark whose seeds fail, unless --force.\n\
Exit status: 0 packaged, 1 seed check failed or files without submission_benchmark, 2 usage or \
I/O error."
)]
pub struct Args {
    /// The system name (results/NAME, systems/NAME.json).
    #[arg(long, value_name = "NAME", value_parser = system_name)]
    system: String,
    /// The submission folder to write into.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// The system description JSON to copy [default: a TODO template].
    #[arg(long, value_name = "FILE")]
    system_desc: Option<PathBuf>,
    /// Write the files of a benchmark even when its seed check fails.
    #[arg(long)]
    force: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// The result logs.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

pub fn run(a: Args) -> u8 {
    let opts = package::PackageOptions {
        out: a.out,
        system: a.system,
        system_desc: a.system_desc,
        force: a.force,
    };
    match package::package(&a.files, &opts) {
        Ok(rep) => {
            let text = match a.format {
                Format::Text => rep.render_text(),
                Format::Json => json(&rep),
            };
            if !crate::emit(&text) {
                return crate::USAGE_OR_IO;
            }
            if rep.ok() {
                crate::OK
            } else {
                crate::FAILED
            }
        }
        Err(e) => {
            eprintln!("mllog package: {e}");
            crate::USAGE_OR_IO
        }
    }
}

fn json(rep: &PackageReport) -> String {
    let path = |p: &std::path::Path| p.display().to_string();
    let benchmarks = rep
        .benchmarks
        .iter()
        .map(|b| {
            json!({
                "benchmark": b.benchmark,
                "required_runs": b.required_runs,
                "written": b.written,
                "files": b.files.iter().map(|(src, dst)| json!({"from": path(src), "to": path(dst)})).collect::<Vec<_>>(),
                "seeds": {"passed": b.seeds.passed(), "errors": b.seeds.errors, "warnings": b.seeds.warnings},
                "notes": b.notes,
            })
        })
        .collect();
    machine::Document::new("package", "benchmarks", benchmarks)
        .with("ok", rep.ok().into())
        .with(
            "system_desc",
            json!({"path": path(&rep.system_desc.0), "written": rep.system_desc.1}),
        )
        .with(
            "unknown",
            rep.unknown
                .iter()
                .map(|p| path(p))
                .collect::<Vec<_>>()
                .into(),
        )
        .render()
}
