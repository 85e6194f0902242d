//! `mllog score`: result_summarizer's score of a results folder.

use std::path::PathBuf;

use crate::machine;
use crate::progress::Progress;
use mllog_core::compliance::Ruleset;
use mllog_core::results::score::{self, BenchmarkScore};

/// Output formats of `mllog score`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Each decision explained.
    Text,
    /// One JSON document: `{"schema_version", "command", "benchmarks": [...]}`.
    Json,
    /// One JSON object per benchmark folder and line.
    Jsonl,
    /// One row per benchmark folder, with a header.
    Csv,
}

/// Options of `mllog score`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Scores results/<system>/<benchmark>/result_*.txt as MLCommons' \
result_summarizer does: compliance of every file, olympic mean (drop fastest and slowest; one \
dropped non-converged/non-compliant run stands in for the slowest; more than one: no score), \
times scaling.json's factor when present.\n\
Exit status: 0 every benchmark has a score, 1 some has none, 2 usage or I/O error."
)]
pub struct Args {
    /// The ruleset to check each file against [default: detected from each file].
    #[arg(long, value_name = "X.Y.Z")]
    ruleset: Option<Ruleset>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// A submission, its results/, a system folder or one benchmark folder.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

pub fn run(a: Args) -> u8 {
    let opts = score::ScoreOptions { ruleset: a.ruleset };
    let dir = a.dir.display();
    let folders = match score::benchmark_folders(&a.dir) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("mllog score: {dir}: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    // What `score::score_dir` does, a folder at a time, so that a bar can follow: a
    // submission's folders hold hundreds of logs, each read three times.
    let files: Vec<Vec<PathBuf>> = folders
        .iter()
        .map(|f| score::result_files(f).unwrap_or_default())
        .collect();
    let progress = Progress::new(&files.concat());
    let mut scores = Vec::with_capacity(folders.len());
    for (folder, files) in folders.iter().zip(&files) {
        progress.working_on(folder);
        match score::score_benchmark(folder, opts) {
            Ok(s) => scores.push(s),
            Err(e) => {
                progress.finish();
                eprintln!("mllog score: {dir}: {e}");
                return crate::USAGE_OR_IO;
            }
        }
        progress.done(
            files
                .iter()
                .filter_map(|f| std::fs::metadata(f).ok())
                .map(|m| m.len())
                .sum(),
        );
    }
    progress.finish();
    if scores.is_empty() {
        eprintln!("mllog score: no result_*.txt under {dir}");
        return crate::USAGE_OR_IO;
    }
    let text = match a.format {
        Format::Json => machine::Document::new(
            "score",
            "benchmarks",
            scores.iter().map(machine::value).collect(),
        )
        .render(),
        Format::Jsonl => scores
            .iter()
            .map(|s| machine::line(machine::value(s)))
            .collect(),
        Format::Csv => csv(&scores),
        Format::Text => score::render_text(&scores),
    };
    if !crate::emit(&text) {
        return crate::USAGE_OR_IO;
    }
    if scores.iter().all(|s| s.score.is_some()) {
        crate::OK
    } else {
        crate::FAILED
    }
}

/// One row per benchmark folder; times in minutes, empty when absent.
fn csv(scores: &[BenchmarkScore]) -> String {
    let num = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
    let mut out = String::from(
        "system,benchmark,folder,runs,required_runs,dropped,max_dropped,olympic_mean_min,\
         scaling_factor,score_min\n",
    );
    for s in scores {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{}\n",
            machine::csv_field(&s.system),
            machine::csv_field(&s.benchmark),
            machine::csv_field(&s.folder.display().to_string()),
            s.runs.len(),
            s.required_runs.map_or(String::new(), |n| n.to_string()),
            s.dropped,
            s.max_dropped,
            num(s.olympic_mean),
            s.scaling_factor,
            num(s.score),
        ));
    }
    out
}
