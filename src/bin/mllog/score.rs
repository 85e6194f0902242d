//! `mllog score`: result_summarizer's score of a results folder.

use std::path::PathBuf;

use tracing_mllog::compliance::Ruleset;
use tracing_mllog::results::score;

/// Output formats of `mllog score`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Each decision explained.
    Text,
    /// One JSON document.
    Json,
}

/// Options of `mllog score`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Scores results/<system>/<benchmark>/result_*.txt as MLCommons' \
result_summarizer does: compliance of every file, olympic mean (drop fastest and slowest; one \
dropped non-converged/non-compliant run stands in for the slowest; more than one: no score), \
times scaling.json's factor when present.\n\
Exit status: 0 every benchmark has a score, 1 some has none, 2 usage or I/O error.")]
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
    let scores = match score::score_dir(&a.dir, opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mllog score: {dir}: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    if scores.is_empty() {
        eprintln!("mllog score: no result_*.txt under {dir}");
        return crate::USAGE_OR_IO;
    }
    let text = match a.format {
        Format::Json => score::render_json(&scores),
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
