//! The review of a whole round: a folder of submitter folders, as the results repositories
//! lay it out (`training_results_v5.1/<Submitter>/{results,systems}`, `hpc_results_v3.0/…`),
//! each reviewed by [`verify`] in one pass under the options' usage, and one table of final
//! scores for the round (an HPC weak-scaling folder's score in words beside it).
//!
//! A submitter folder is a subfolder with `results/` or `systems/` (the summarizer's round
//! mode, `result_summarizer 'ROUND/{*}'`, takes those with both; one with only one of them is
//! reviewed here, and its review says what is missing). Other subfolders are named and
//! skipped, hidden ones (`.git`) silently. Submitters are reviewed one after another, the
//! files of each in parallel, each file streamed: memory follows the largest file, not the
//! round.
//!
//! ```
//! use mllog_core::compliance::{example_log, Division, Ruleset};
//! use mllog_core::results::round::{is_round, verify_round};
//! use mllog_core::results::verify::VerifyOptions;
//! use mllog_core::Benchmark;
//!
//! let tmp = tempfile::tempdir()?;
//! let round = tmp.path().join("round");
//! let log = example_log(Ruleset::V6_1_0, Benchmark::Flux1, Division::Closed).unwrap();
//! for org in ["Alpha", "Beta"] {
//!     let folder = round.join(org).join("results/sys/flux1");
//!     std::fs::create_dir_all(&folder)?;
//!     std::fs::write(folder.join("result_0.txt"), &log)?;
//! }
//! assert!(is_round(&round));
//! let r = verify_round(&round, &VerifyOptions::new(Ruleset::V6_1_0))?;
//! assert_eq!(r.submitters.len(), 2);
//! assert!(!r.passed); // one file where flux1 needs ten, no system descriptions
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::ruleset::{infer_ruleset, RulesetChoice, RulesetError};
use super::verify::{display_path, verify, Review, TableRow, VerifyError, VerifyOptions};
use crate::compliance::Ruleset;

/// One line of the round's table of final scores: a benchmark folder of a submitter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScoreLine {
    /// The submitter folder's name.
    pub submitter: String,
    /// The system folder's name.
    pub system: String,
    /// The benchmark.
    pub benchmark: String,
    /// Whether the folder passes review.
    pub passed: bool,
    /// The final score in minutes.
    pub score: Option<f64>,
    /// The factor of the final score.
    pub scaling_factor: f64,
    /// Why there is no score.
    pub no_score: Option<String>,
    /// An HPC weak-scaling folder's score, in words (its time is not the final score's); it
    /// has one unless [`ScoreLine::no_score`] says why not.
    pub weak: Option<String>,
}

impl ScoreLine {
    /// Whether the folder has a score: a final score, or a weak-scaling one.
    pub fn scored(&self) -> bool {
        self.score.is_some() || (self.weak.is_some() && self.no_score.is_none())
    }
}

/// A round's review: [`verify_round`]'s result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoundReview {
    /// The round folder.
    #[serde(serialize_with = "display_path")]
    pub dir: PathBuf,
    /// The ruleset.
    pub ruleset: String,
    /// The usage reviewed: `training` or `hpc`.
    pub usage: &'static str,
    /// Whether every submitter passes review.
    pub passed: bool,
    /// Subfolders that are no submitter folder, each with why.
    pub skipped: Vec<String>,
    /// Each submitter's review, by folder name.
    pub submitters: Vec<Review>,
    /// The final scores of every reviewed benchmark folder of the round.
    pub scores: Vec<ScoreLine>,
    /// The summarizer's column names (`out_detailed.csv`).
    pub columns: Vec<String>,
}

/// Whether `dir` is a round: it has no `results/` of its own, and a subfolder that has.
pub fn is_round(dir: &Path) -> bool {
    !dir.join("results").exists()
        && submitter_folders(dir)
            .is_ok_and(|(subs, _)| subs.iter().any(|s| s.join("results").is_dir()))
}

/// The submitter folders of `dir`, sorted, and the subfolders skipped (with why).
pub fn submitter_folders(dir: &Path) -> std::io::Result<(Vec<PathBuf>, Vec<String>)> {
    let mut subs = Vec::new();
    let mut skipped = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        let hidden = path
            .file_name()
            .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."));
        if hidden || !path.is_dir() {
            continue;
        }
        if path.join("results").is_dir() || path.join("systems").is_dir() {
            subs.push(path);
        } else {
            skipped.push(format!(
                "{}: no results/ or systems/, not a submitter folder (skipped)",
                path.display()
            ));
        }
    }
    subs.sort();
    skipped.sort();
    Ok((subs, skipped))
}

/// The round's ruleset: `given`, or the one ruleset every submitter folder's evidence leaves
/// ([`infer_ruleset`] on each; a round has one ruleset, and the summarizer's table one set of
/// columns). A folder without result files says nothing; an unreadable one is an error.
pub fn choose_round_ruleset(
    given: Option<Ruleset>,
    dir: &Path,
) -> Result<RulesetChoice, RulesetError> {
    if let Some(r) = given {
        return Ok(RulesetChoice {
            ruleset: r,
            given: true,
            candidates: vec![r],
            evidence: vec![format!("ruleset {r}: given (--ruleset)")],
            unreadable: Vec::new(),
        });
    }
    let (subs, _) = submitter_folders(dir).map_err(|source| RulesetError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut left: Vec<Ruleset> = Ruleset::ALL.to_vec();
    let mut evidence = Vec::new();
    let mut unreadable = Vec::new();
    let list = |c: &[Ruleset]| c.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", ");
    for s in &subs {
        let n = name(s);
        match infer_ruleset(s) {
            Ok(c) => {
                left.retain(|r| c.candidates.contains(r));
                evidence.push(format!("{n}: ruleset {}", c.ruleset));
                unreadable.extend(c.unreadable);
            }
            Err(RulesetError::Unsettled { candidates, .. }) => {
                left.retain(|r| candidates.contains(r));
                evidence.push(format!("{n}: one of {}", list(&candidates)));
            }
            Err(RulesetError::NoResults { .. }) => {
                evidence.push(format!("{n}: no result_*.txt, no evidence"));
            }
            Err(e) => return Err(e),
        }
    }
    match left[..] {
        [r] => {
            evidence.push(format!(
                "ruleset {r}: the only one consistent with every submitter folder"
            ));
            Ok(RulesetChoice {
                ruleset: r,
                given: false,
                candidates: left,
                evidence,
                unreadable,
            })
        }
        _ => Err(RulesetError::Unsettled {
            dir: dir.to_path_buf(),
            candidates: left,
            evidence,
        }),
    }
}

/// Reviews every submitter folder of the round `dir` under `opts` (see the module
/// documentation).
pub fn verify_round(dir: &Path, opts: &VerifyOptions) -> Result<RoundReview, VerifyError> {
    let (subs, skipped) = submitter_folders(dir).map_err(|source| VerifyError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut submitters = Vec::new();
    for s in &subs {
        submitters.push(verify(s, opts)?);
    }
    let scores = submitters
        .iter()
        .flat_map(|r| {
            let org = name(&r.dir);
            r.benchmarks
                .iter()
                .filter(|b| b.reviewed)
                .map(move |b| ScoreLine {
                    submitter: org.clone(),
                    system: b.system.clone(),
                    benchmark: b.benchmark.clone(),
                    passed: b.passed,
                    score: b.score,
                    scaling_factor: b.scaling_factor,
                    no_score: match &b.weak {
                        Some(w) if w.scored() => None,
                        Some(w) => Some(format!("weak scaling: {}", w.describe())),
                        None => b.no_score.clone(),
                    },
                    weak: b
                        .weak
                        .as_ref()
                        .map(|w| format!("weak scaling: {}", w.describe())),
                })
        })
        .collect();
    let columns = submitters
        .first()
        .map(|r| r.columns.clone())
        .unwrap_or_default();
    Ok(RoundReview {
        dir: dir.to_path_buf(),
        ruleset: opts.ruleset.clone(),
        usage: opts.usage.as_str(),
        passed: !submitters.is_empty() && submitters.iter().all(Review::passed),
        skipped,
        submitters,
        scores,
        columns,
    })
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

impl RoundReview {
    /// Whether some file or folder could not be read.
    pub fn io_errors(&self) -> bool {
        self.submitters.iter().any(Review::io_errors)
    }

    /// The summarizer's rows of the whole round, submitter by submitter.
    pub fn table(&self) -> impl Iterator<Item = &TableRow> {
        self.submitters.iter().flat_map(|r| &r.table)
    }

    /// The summarizer's detailed table of the whole round as CSV (`out_detailed.csv` of
    /// `result_summarizer 'ROUND/{*}'`): its header, one row per system, submitter folders in
    /// name order.
    pub fn render_csv(&self) -> String {
        let mut lines = self.submitters.iter().map(Review::render_csv);
        let mut out = lines.next().unwrap_or_default();
        for csv in lines {
            // Every review has the same header (one ruleset): keep the first.
            out.extend(csv.split_inclusive('\n').skip(1));
        }
        out
    }

    /// Each submitter's review in words, then the round's table of final scores and a verdict
    /// per submitter.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for s in &self.skipped {
            let _ = writeln!(out, "note: {s}");
        }
        for r in &self.submitters {
            out.push_str(&r.render_text());
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "Final scores of the round {} ({} ruleset {}):",
            self.dir.display(),
            self.usage,
            self.ruleset
        );
        let w = |f: fn(&ScoreLine) -> usize| self.scores.iter().map(f).max().unwrap_or(0);
        let (ws, wy, wb) = (
            w(|l| l.submitter.len()).max(9),
            w(|l| l.system.len()).max(6),
            w(|l| l.benchmark.len()).max(9),
        );
        let _ = writeln!(
            out,
            "{:ws$}  {:wy$}  {:wb$}  {:>12}  {:>8}  review",
            "submitter", "system", "benchmark", "score (min)", "factor"
        );
        for l in &self.scores {
            let score = match l.score {
                Some(s) => format!("{s:.4}"),
                None if l.scored() => "weak".to_string(),
                None => "-".to_string(),
            };
            let verdict = if l.passed { "passes" } else { "FAILS" };
            let why = match (&l.no_score, &l.weak) {
                (Some(w), _) => format!("; no score: {w}"),
                (None, Some(w)) => format!("; {w}"),
                (None, None) => String::new(),
            };
            let _ = writeln!(
                out,
                "{:ws$}  {:wy$}  {:wb$}  {score:>12}  {:>8}  {verdict}{why}",
                l.submitter,
                l.system,
                l.benchmark,
                format!("{:.4}", l.scaling_factor)
            );
        }
        let failed: Vec<String> = self
            .submitters
            .iter()
            .filter(|r| !r.passed())
            .map(|r| name(&r.dir))
            .collect();
        let _ = writeln!(
            out,
            "\n{}: {} submitter folder(s), {} benchmark folder(s) scored of {}{}",
            if self.passed {
                "THE ROUND PASSES REVIEW"
            } else {
                "THE ROUND DOES NOT PASS REVIEW"
            },
            self.submitters.len(),
            self.scores.iter().filter(|l| l.scored()).count(),
            self.scores.len(),
            if failed.is_empty() {
                String::new()
            } else {
                format!("; failing: {}", failed.join(", "))
            }
        );
        out
    }
}
