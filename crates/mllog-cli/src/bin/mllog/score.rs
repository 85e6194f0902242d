//! `mllog score`: result_summarizer's score of a results folder.

use std::path::PathBuf;

use crate::machine;
use crate::progress::Progress;
use crate::rcp_source::Chosen;
use mllog_core::results::package_facts::read_facts;
use mllog_core::results::rcp::{self, FinalScore};
use mllog_core::results::required_runs_in;
use mllog_core::results::ruleset;
use mllog_core::results::score::{self, BenchmarkScore};
use mllog_core::results::usage::Usage;
use mllog_core::results::verify_data::{PACKAGE_VERSION, RESULT_FILE_COUNTS};

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
times scaling.json's factor when present (SCORE); then the final score after the review's RCP \
step (FINAL SCORE): the olympic mean times the factor the RCP check computes (closed division, \
or no systems/<system>.json), with the reason. The ruleset is given, or inferred once for the \
whole folder with the evidence shown; when the evidence does not settle it, nothing is scored \
(exit 2).\n\
With --usage hpc (rules read at run time: --rules or MLLOG_RULES, and --ruleset), an HPC \
folder is scored as result_summarizer <folder> hpc <ruleset> does: results/<system>/strong/\
<benchmark>/ as above (HPC's result counts, its RCPs); results/<system>/weak/<benchmark>/ by its \
weak-scaling tuple (WEAK SCORE): the compliant runs with run_start and run_stop are the models \
trained, at least the benchmark's result count of them, all on the same number of accelerators \
(number_of_nodes × accelerators_per_node), timed from the first run_start to the last run_stop; \
no olympic trimming, scaling.json or RCP step.\n\
Exit status: 0 every benchmark has a score, 1 some has none, 2 usage or I/O error (an unreadable \
file is said with its path and dropped, the rest is still scored)."
)]
pub struct Args {
    /// The ruleset to check each file against and whose RCPs apply [default: inferred once for
    /// the whole folder, with the evidence shown; refused when the evidence does not settle it].
    /// With --rules, any training ruleset the package has rules for, and inferred among them.
    /// With --usage hpc, required: an HPC ruleset the package has rules for.
    #[arg(long, value_name = "X.Y.Z")]
    pub(crate) ruleset: Option<String>,
    /// Whose results: training, or hpc (with --rules and --ruleset; strong- and weak-scaling
    /// folders) (result_summarizer's usage).
    #[arg(long, value_name = "USAGE", default_value = "training", value_parser = crate::rcp_source::usage_parser())]
    pub(crate) usage: Usage,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
    #[command(flatten)]
    pub(crate) rcps: crate::rcp_source::RcpSourceArgs,
    /// A submission, its results/, a system folder or one benchmark folder (HPC: also a
    /// strong/ or weak/ folder).
    #[arg(value_name = "DIR")]
    pub(crate) dir: PathBuf,
}

pub fn run(a: Args) -> u8 {
    let dir = a.dir.display();
    let folders = match score::benchmark_folders(&a.dir) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("mllog score: {dir}: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    if folders.is_empty() {
        eprintln!("mllog score: {}", ruleset::no_results_words(&a.dir));
        return crate::USAGE_OR_IO;
    }
    let choice = match a.rcps.choose(a.ruleset.as_deref(), &a.dir, |given| {
        ruleset::choose_ruleset(given, &a.dir).map_err(|e| e.to_string())
    }) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mllog score: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let tables = match a.rcps.open_named(Usage::Training, &choice.ruleset) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mllog score: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    // With rules read at run time, the package's result counts too (a release candidate may
    // want other counts than this build knows). They only make a note, so a rules folder
    // without the package's `benchmark_meta.py` still scores, and says whose counts it notes.
    let counts = match &choice.rules {
        Some(rules) => match read_facts(rules.package_root(), &choice.ruleset) {
            Ok(facts) => facts.result_file_counts,
            Err(why) => {
                eprintln!(
                    "mllog score: note: the result counts noted are this build's \
                     (mlperf-logging {PACKAGE_VERSION}): {why}"
                );
                RESULT_FILE_COUNTS
            }
        },
        None => RESULT_FILE_COUNTS,
    };
    let rcp_opts = rcp::RcpOptions::with_tables(tables.clone());
    let opts = score::ScoreOptions {
        ruleset: choice.built_in,
    };
    // What `score::score_dir` does, a folder at a time, so that a bar can follow: a
    // submission's folders hold hundreds of logs, each read three times.
    let files: Vec<Vec<PathBuf>> = folders
        .iter()
        .map(|f| score::result_files(f).unwrap_or_default())
        .collect();
    let progress = Progress::new(&files.concat());
    let mut scores = Vec::with_capacity(folders.len());
    // A folder or file that cannot be read is said with its path; the others are still scored.
    let mut io_error = !choice.unreadable.is_empty();
    for (folder, files) in folders.iter().zip(&files) {
        progress.working_on(folder);
        let scored = match &choice.rules {
            Some(rules) => score::score_benchmark_as(
                folder,
                Usage::Training,
                required_runs_in(counts, &score::benchmark_of(folder)),
                &|f| Chosen::verdict(rules, f),
            ),
            None => score::score_benchmark(folder, opts),
        };
        match scored {
            Ok(s) => {
                for u in &s.unreadable {
                    eprintln!("mllog score: {u}");
                }
                io_error |= !s.unreadable.is_empty();
                scores.push(s);
            }
            Err(e) => {
                // The error names the file (the folder, or its scaling.json).
                eprintln!("mllog score: {e}");
                io_error = true;
            }
        }
        progress.done_files(files);
    }
    let finals: Vec<FinalScore> = scores
        .iter()
        .map(|s| rcp::final_score(s, &rcp_opts))
        .collect();
    progress.finish();
    let item = |s: &BenchmarkScore, f: &FinalScore| {
        let mut v = machine::value(s);
        if let serde_json::Value::Object(m) = &mut v {
            m.insert("ruleset".into(), choice.ruleset.clone().into());
            m.insert("final".into(), machine::value(f));
        }
        v
    };
    let text = match a.format {
        Format::Json => machine::Document::new(
            "score",
            "benchmarks",
            scores
                .iter()
                .zip(&finals)
                .map(|(s, f)| item(s, f))
                .collect(),
        )
        .with("ruleset", choice.json.clone())
        .with("rcps", machine::value(&*tables))
        .render(),
        Format::Jsonl => scores
            .iter()
            .zip(&finals)
            .map(|(s, f)| machine::line(item(s, f)))
            .collect(),
        Format::Csv => csv(&scores, &finals, &choice.ruleset),
        Format::Text => {
            let mut out = crate::rcp::ruleset_lines(
                &choice.ruleset,
                choice.given,
                &choice.evidence,
                &choice.unreadable,
            );
            let mut sources = format!("{}\n", tables.describe());
            if let Some(l) = choice.rules_line() {
                sources.push_str(&format!("{l}\n"));
            }
            out.insert_str(out.len() - 1, &sources);
            for (s, f) in scores.iter().zip(&finals) {
                out.push_str(&text(s, f));
            }
            out
        }
    };
    if !crate::emit(&text) {
        return crate::USAGE_OR_IO;
    }
    if io_error {
        crate::USAGE_OR_IO
    } else if finals.iter().all(|f| f.score.is_some()) {
        crate::OK
    } else {
        crate::FAILED
    }
}

/// One folder's text: the summarizer's decisions and SCORE, then the RCP step and FINAL SCORE.
pub(crate) fn text(s: &BenchmarkScore, f: &FinalScore) -> String {
    let mut out = score::render_text(std::slice::from_ref(s));
    out.truncate(out.trim_end().len());
    out.push('\n');
    if let Some(r) = &f.rcp {
        for d in &r.decisions {
            out.push_str(&format!("  - RCP: {d}\n"));
        }
    }
    match (f.score, s.olympic_mean) {
        (Some(v), Some(m)) => out.push_str(&format!(
            "  FINAL SCORE {}/{}: {v:.4} min = olympic mean {m:.4} min × factor {} ({})\n\n",
            s.system,
            s.benchmark,
            rcp::py_float(f.factor),
            f.decision
        )),
        _ => out.push_str(&format!(
            "  FINAL SCORE {}/{}: none (invalid); {}\n\n",
            s.system, s.benchmark, f.decision
        )),
    }
    out
}

/// One row per benchmark folder; times in minutes, empty when absent.
pub(crate) fn csv(scores: &[BenchmarkScore], finals: &[FinalScore], ruleset: &str) -> String {
    let num = |x: Option<f64>| x.map_or(String::new(), |v| v.to_string());
    let mut out = String::from(
        "system,benchmark,folder,runs,required_runs,dropped,max_dropped,olympic_mean_min,\
         scaling_factor,score_min,ruleset,rcp,rcp_factor,final_score_min\n",
    );
    for (s, f) in scores.iter().zip(finals) {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
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
            ruleset,
            f.rcp
                .as_ref()
                .map_or(String::new(), |r| machine::csv_field(r.summarizer_column())),
            f.factor,
            num(f.score),
        ));
    }
    out
}
