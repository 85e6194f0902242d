//! `mllog verify`: the whole review of a submitter folder, as MLCommons' package checker,
//! system description checker, seed checker, RCP checker, result summarizer and repository
//! checker make it.

use std::path::{Path, PathBuf};

use mllog_core::compliance::Ruleset;
use mllog_core::results::ruleset::{infer_ruleset, RulesetChoice, RulesetError};
use mllog_core::results::usage::Usage;
use mllog_core::results::verify::{self, Review, VerifyOptions};

use crate::machine;
use crate::rcp_source::Chosen;

/// Output formats of `mllog verify`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Each problem with its path and tool, a verdict per benchmark folder, a summary.
    Text,
    /// One JSON document: `{"schema_version", "command", "passed", "ruleset", "problems",
    /// "systems", "table", "benchmarks": [...]}`.
    Json,
    /// result_summarizer's detailed table (`out_detailed.csv`): its columns, one row per
    /// system, with the final scores.
    Csv,
}

/// Options of `mllog verify`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Reviews a submitter folder (results/<system>/<benchmark>/result_*.txt, \
systems/<system>.json) as the official tools do, in one pass: the package checker's folder rules \
(names, the result count per benchmark, unknown files, benchmarks the ruleset does not allow), \
each file's compliance (one non-compliant run accepted under olympic scoring), the seed checker \
(package_checker_params bypass), the system description checker, the RCP checker, then \
result_summarizer's table with the final, RCP-scaled scores, then repo_checker's (names with a space or starting with '.', files over 50 MB, broken symbolic links). Each problem names its step of the official review script. A review of no benchmark folder \
(results/ empty, or every folder skipped by the ruleset) does not pass. Nothing is written \
unless --set-scaling.\n\
Given a round (a folder of submitter folders, as the results repositories lay it out: no \
results/ of its own), every submitter folder is reviewed in one pass, then one table of final \
scores for the round (text; --format json: every review and the scores; --format csv: the \
summarizer's table of the whole round).\n\
Without --ruleset, the ruleset is inferred once for the whole folder (for a round, the one every \
submitter folder's evidence leaves) and the evidence printed; when the evidence does not settle \
it, verify refuses.\n\
With --usage hpc (rules read at run time: --rules or MLLOG_RULES, and --ruleset), a submitter \
folder is reviewed as package_checker <folder> hpc <ruleset> does: results/<system>/strong/\
<benchmark>/ wants exactly the benchmark's result count, results/<system>/weak/<benchmark>/ at \
least that many; any other folder under a system that holds folders stops the official checker \
(an error here); HPC's benchmarks, RCPs and seed check; the system description's status is not \
checked. The table is the summarizer's strong-scaling one; a weak-scaling folder's score is \
the summarizer's tuple (models, accelerators per model, time to train them all), as mllog score \
--usage hpc gives it; a round of HPC submitter folders is reviewed as one of Training.\n\
Exit status: 0 passes review, 1 does not, 2 usage or I/O error (an unreadable file or folder)."
)]
pub struct Args {
    /// The training ruleset [default: inferred from the folder, with the evidence]. With
    /// --rules, any training ruleset the package has rules for, and inferred among them. With
    /// --usage hpc, required: an HPC ruleset the package has rules for.
    #[arg(long, value_name = "X.Y.Z")]
    pub(crate) ruleset: Option<String>,
    /// Whose review: training, or hpc (with --rules and --ruleset; one submitter folder,
    /// results/SYSTEM/strong or weak/BENCHMARK/) (the package checker's usage).
    #[arg(long, value_name = "USAGE", default_value = "training", value_parser = crate::rcp_source::usage_parser())]
    pub(crate) usage: Usage,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
    /// Write scaling.json in each closed-division benchmark folder as the official tools do
    /// (deleted, then written when the RCP check normalises).
    #[arg(long)]
    set_scaling: bool,
    /// The package checker's --rcp-bypass: a failed RCP test does not fail the folder.
    #[arg(long)]
    rcp_bypass: bool,
    /// The package checker's --seed-checker-bypass.
    #[arg(long)]
    seed_checker_bypass: bool,
    /// Worker threads [default: the available parallelism].
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
    #[command(flatten)]
    pub(crate) rcps: crate::rcp_source::RcpSourceArgs,
    /// The submitter folder (holding results/ and systems/), or a round: a folder of
    /// submitter folders.
    #[arg(value_name = "SUBMISSION_DIR|ROUND_DIR")]
    pub(crate) dir: PathBuf,
}

impl Args {
    /// The review's options under the chosen ruleset, with its rules and the RCP tables
    /// `--rules` and `--custom-rcps` name (or the error naming the folder or file).
    pub(crate) fn options(&self, chosen: &Chosen) -> Result<VerifyOptions, String> {
        Ok(VerifyOptions {
            ruleset: chosen.ruleset.clone(),
            rcp_tables: Some(self.rcps.open_named(self.usage, &chosen.ruleset)?),
            rules: chosen.rules.clone(),
            set_scaling: self.set_scaling,
            rcp_bypass: self.rcp_bypass,
            seed_checker_bypass: self.seed_checker_bypass,
            threads: self.threads,
            usage: self.usage,
        })
    }

    /// The options under the chosen ruleset, and `how` the ruleset was chosen followed by
    /// where the rules and RCPs come from (also as JSON); an error is said on stderr and
    /// becomes the exit status.
    pub(crate) fn prepared(
        &self,
        chosen: &Chosen,
        mut how: Vec<String>,
    ) -> Result<(VerifyOptions, Vec<String>, serde_json::Value), u8> {
        let opts = self.options(chosen).map_err(|e| {
            eprintln!("mllog verify: {e}");
            crate::USAGE_OR_IO
        })?;
        let tables = opts
            .rcp_tables
            .as_deref()
            .expect("options carry the tables");
        how.push(tables.describe());
        how.extend(chosen.rules_line());
        let rcps = machine::value(tables);
        Ok((opts, how, rcps))
    }

    /// Prints `text` and gives the exit status. The problems that make the status 2 or 1 are
    /// in a JSON or CSV document; the verdict (`failed`) is said on stderr too, so a pipe into
    /// a CSV reader still shows it.
    pub(crate) fn said(&self, text: &str, passed: bool, io_errors: bool, failed: &str) -> u8 {
        if !crate::emit(text) {
            return crate::USAGE_OR_IO;
        }
        if self.format != Format::Text && !passed {
            eprintln!("mllog verify: {}: {failed}", self.dir.display());
        }
        crate::review_status(io_errors, passed)
    }

    /// Whether the folder given is a round (a folder of submitter folders).
    pub(crate) fn is_round(&self) -> bool {
        mllog_core::results::round::is_round(&self.dir)
    }
}

/// A Training submitter folder's built-in ruleset: the one given (the review runs whatever the
/// folder holds, and an empty one fails it), else the one its files show.
fn training_ruleset(given: Option<Ruleset>, dir: &Path) -> Result<RulesetChoice, String> {
    if let Some(r) = given {
        return Ok(RulesetChoice {
            ruleset: r,
            given: true,
            candidates: vec![r],
            evidence: Vec::new(),
            unreadable: Vec::new(),
        });
    }
    // The same words as a review of an empty folder under --ruleset: there, the review runs
    // and fails; here, not even the ruleset can be inferred.
    infer_ruleset(dir).map_err(|e| match e {
        RulesetError::NoResults { .. } if dir.join("results").is_dir() => format!(
            "nothing was reviewed: no result_*.txt found under {}, so no ruleset can be \
             inferred either; a review of nothing does not pass",
            dir.join("results").display()
        ),
        e @ RulesetError::NoResults { .. } => format!("nothing was reviewed: {e}"),
        e => e.to_string(),
    })
}

pub fn run(a: Args) -> u8 {
    let chosen = match a.usage {
        Usage::Hpc => a.rcps.choose_hpc(a.ruleset.as_deref()),
        Usage::Training => a.rcps.choose(a.ruleset.as_deref(), &a.dir, |given| {
            training_ruleset(given, &a.dir)
        }),
    };
    let chosen = match chosen {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mllog verify: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let how = if chosen.given {
        vec![format!("ruleset {}: given (--ruleset)", chosen.ruleset)]
    } else {
        let mut how = vec![format!(
            "ruleset {}: inferred from the folder",
            chosen.ruleset
        )];
        how.extend(chosen.evidence.iter().map(|e| format!("  evidence: {e}")));
        how
    };
    let (opts, how, rcps) = match a.prepared(&chosen, how) {
        Ok(x) => x,
        Err(status) => return status,
    };
    let review = match verify::verify(&a.dir, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mllog verify: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let text = match a.format {
        Format::Text => format!("{}\n{}", how.join("\n"), review.render_text()),
        Format::Json => json(&review, &how, rcps),
        Format::Csv => review.render_csv(),
    };
    a.said(
        &text,
        review.passed(),
        review.io_errors(),
        "does not pass review",
    )
}

fn json(review: &Review, how: &[String], rcps: serde_json::Value) -> String {
    machine::document_of(
        "verify",
        "benchmarks",
        review,
        vec![("ruleset_evidence", how.to_vec().into()), ("rcps", rcps)],
    )
}
