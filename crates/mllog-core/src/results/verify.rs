//! The whole review of a submitter folder, as MLCommons' tools make it (mlperf-logging
//! 4.1.68, training): every decision of `package_checker` (folder and file naming, the result
//! count per benchmark, unknown files, benchmarks the ruleset does not allow, each file's
//! compliance check, the one non-compliant run olympic scoring accepts, the seed checker and
//! its bypass), of `system_desc_checker` (the fields of `systems/<system>.json`), of the RCP
//! checker ([`super::rcp`]), then `result_summarizer`'s table with the final, RCP-scaled
//! scores.
//!
//! [`verify`] takes the folder as `package_checker` does (`results/<system>/<benchmark>/
//! result_*.txt`, `systems/<system>.json`) and returns a [`Review`]: every problem with its
//! path and the rule's words, one verdict per benchmark folder, the table. Result files are
//! read in parallel, each once and streamed, so memory follows the largest line, not the
//! submission. Nothing in the folder is modified unless [`VerifyOptions::set_scaling`].
//!
//! Under [`VerifyOptions::usage`] HPC the folder is taken as `package_checker <folder> hpc
//! <ruleset>` takes it: `results/<system>/<strong|weak>/<benchmark>/`, HPC's result counts (at
//! least that many for weak scaling), benchmarks and RCPs, and a weak-scaling folder scored by
//! the summarizer's tuple ([`super::weak_score`]).
//!
//! Where the official tools crash (a malformed system description, a missing `systems/` file,
//! a `scaling.json` that is not JSON, a benchmark folder the ruleset does not allow, which the
//! summarizer's table cannot hold), the review names the path, says what the official tool
//! does, and goes on with the rest.
//!
//! ```
//! use mllog_core::compliance::{example_log, Division, Ruleset};
//! use mllog_core::results::verify::{verify, VerifyOptions};
//! use mllog_core::Benchmark;
//!
//! let dir = tempfile::tempdir()?;
//! let folder = dir.path().join("results/sys/flux1");
//! std::fs::create_dir_all(&folder)?;
//! let log = example_log(Ruleset::V6_1_0, Benchmark::Flux1, Division::Closed).unwrap();
//! for i in 0..9 {
//!     std::fs::write(folder.join(format!("result_{i}.txt")), &log)?;
//! }
//! let review = verify(dir.path(), &VerifyOptions::new(Ruleset::V6_1_0))?;
//! assert!(!review.passed());
//! let words: Vec<_> = review.problems().map(|p| p.message.as_str()).collect();
//! // No systems/sys.json, nine files where flux1 needs ten, the same seed in every run.
//! assert!(words.iter().any(|m| m.contains("found 9, expected 10")), "{words:?}");
//! assert!(words.iter().any(|m| m.contains("systems/sys.json")), "{words:?}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value as Json;

use super::package::{check_seeds, params_enable, SeedRecord, SeedReport};
use super::rcp::{
    check_benchmark, np_mean, package_bypass, py_float, write_scaling, RcpOptions, RcpResult,
    RcpStatus, Scaling,
};
use super::repo_check::{repo_check, RepoFinding};
use super::score::{olympic_mean, FileVerdict};
use super::summary::csv_field;
use super::usage::{HpcScaling, Usage};
use super::verify_data::{RulesetFacts, AVAILABILITY, RULESETS};
use super::weak_score::{score_weak, WeakScore};
use crate::compliance::{Checker, Ruleset};
use crate::record::{LogReader, Record};

/// Compliance errors kept per result file (the rest are counted): a binary or garbled file
/// can have one per line.
pub const MAX_ERRORS_KEPT: usize = 10;

/// A system description larger than this is not read: no real one is over a few kilobytes.
pub const MAX_SYSTEM_DESC_BYTES: u64 = 1 << 20;

/// Options of [`verify`].
///
/// ```
/// use mllog_core::compliance::Ruleset;
/// use mllog_core::results::verify::VerifyOptions;
///
/// let o = VerifyOptions::new(Ruleset::V5_0_0);
/// assert!(!o.set_scaling && !o.rcp_bypass && !o.seed_checker_bypass);
/// ```
#[derive(Clone, Debug)]
pub struct VerifyOptions {
    /// The ruleset (`package_checker`'s `ruleset` argument), `X.Y.Z`: a built-in one, or
    /// with [`VerifyOptions::rules`] any the package has.
    pub ruleset: String,
    /// Write `scaling.json` as the official tools do (deleted, then written when the RCP check
    /// normalises); by default nothing is written.
    pub set_scaling: bool,
    /// `--rcp-bypass` of the package checker, for every folder.
    pub rcp_bypass: bool,
    /// `--seed-checker-bypass` of the package checker, for every folder.
    pub seed_checker_bypass: bool,
    /// Worker threads for the result files; 0: the available parallelism.
    pub threads: usize,
    /// Where the RCP check's records come from (`None`: the built-in tables of `ruleset`).
    pub rcp_tables: Option<std::sync::Arc<super::rcp_tables::RcpTables>>,
    /// The rules each result file is checked with, read at run time from a package (`None`:
    /// the built-in rules of `ruleset`); the ruleset facts are then the package's too
    /// ([`super::package_facts`]).
    #[cfg(feature = "rules")]
    pub rules: Option<std::sync::Arc<super::rules_check::RulesCheck>>,
    /// The package checker's usage: Training, or HPC (`results/<system>/<strong|weak>/
    /// <benchmark>/`, HPC's result counts and benchmarks; its rules and facts are read at run
    /// time, none are built in).
    pub usage: Usage,
}

impl VerifyOptions {
    /// Defaults for `ruleset`: nothing written, no bypass, all cores.
    pub fn new(ruleset: Ruleset) -> VerifyOptions {
        VerifyOptions {
            ruleset: ruleset.as_str().to_owned(),
            set_scaling: false,
            rcp_bypass: false,
            seed_checker_bypass: false,
            threads: 0,
            rcp_tables: None,
            #[cfg(feature = "rules")]
            rules: None,
            usage: Usage::Training,
        }
    }
}

/// Why [`verify`] could not review the folder at all (the CLI's exit status 2). Anything
/// wrong inside a readable folder is a [`Problem`] of the [`Review`] instead.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The submission folder cannot be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The path is not a folder.
    #[error("{}: not a folder (give the submitter folder that holds results/ and systems/)", path.display())]
    NotAFolder {
        /// The path given.
        path: PathBuf,
    },
    /// The ruleset has no training facts in this build.
    #[error("ruleset {0} is not a training ruleset of mlperf-logging {ver} (the rules of other rulesets are read from the official package with --rules)", ver = super::verify_data::PACKAGE_VERSION)]
    Ruleset(String),
    /// The package the rules are read from does not give the ruleset's facts.
    #[error("{0}")]
    Facts(String),
}

/// How bad a [`Problem`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The submission does not pass review.
    Error,
    /// The official tools warn; the verdict stands.
    Warning,
    /// Information (what was checked and how).
    Note,
}

impl Severity {
    /// `error`, `warning`, `note`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// One finding of the review: what, where, and which official tool's rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Problem {
    /// Error, warning or note.
    pub severity: Severity,
    /// The file or folder, as shown (lossy for a name that is not UTF-8).
    pub path: String,
    /// The official tool whose decision this is: `package_checker`, `system_desc_checker`,
    /// `seed_checker`, `rcp_checker`, `compliance_checker`, `result_summarizer`,
    /// `repo_checker`, or `io`.
    pub tool: &'static str,
    /// The step of the official review script (`verify_for_v<round>_training.sh`) it belongs
    /// to: `package_checker` (which runs the compliance, seed, system description and RCP
    /// checkers), `result_summarizer` or `repo_checker`. See [`STEPS`].
    pub step: &'static str,
    /// What was found, in the official tool's words where it has some.
    pub message: String,
    /// Whether the file or folder could not be read (exit status 2 rather than 1).
    pub io: bool,
}

impl Problem {
    fn new(
        severity: Severity,
        path: &Path,
        tool: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            severity,
            path: path.display().to_string(),
            tool,
            step: step_of(tool),
            message: message.into(),
            io: false,
        }
    }

    fn io(path: &Path, what: &str, e: &std::io::Error) -> Self {
        let why = if e.raw_os_error() == Some(libc::ELOOP) {
            format!("{e} (a symbolic link loop)")
        } else {
            e.to_string()
        };
        Problem {
            io: true,
            ..Problem::new(Severity::Error, path, "io", format!("cannot {what}: {why}"))
        }
    }
}

/// The steps of the official review script, in its order: `python3 -m mlperf_logging.<step>
/// <folder> training <ruleset>`.
pub const STEPS: [&str; 3] = ["package_checker", "result_summarizer", "repo_checker"];

/// The review script's step that runs `tool`: the package checker runs every checker but the
/// summarizer and the repository checker; an unreadable file is met first by it.
fn step_of(tool: &'static str) -> &'static str {
    match tool {
        "result_summarizer" | "repo_checker" => tool,
        _ => "package_checker",
    }
}

/// The review of one `systems/<system>.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SystemReview {
    /// The file.
    #[serde(serialize_with = "display_path")]
    pub path: PathBuf,
    /// The name it describes (`systems/<name>.json`).
    pub name: String,
    /// Whether `system_desc_checker` accepts it.
    pub valid: bool,
    /// The description's `division`.
    pub division: Option<String>,
    /// The problems found.
    pub problems: Vec<Problem>,
    /// The description, when it is a JSON object.
    #[serde(skip)]
    pub desc: Option<serde_json::Map<String, Json>>,
}

/// One result file: the package checker's and the summarizer's view of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReview {
    /// The file.
    #[serde(serialize_with = "display_path")]
    pub file: PathBuf,
    /// Whether it passes the compliance check (not `--werror`).
    pub compliant: bool,
    /// The first [`MAX_ERRORS_KEPT`] compliance errors (message and line).
    pub errors: Vec<String>,
    /// How many compliance errors there are.
    pub error_count: usize,
    /// `run_start` to `run_stop` in minutes, for a compliant run that logs both.
    pub minutes: Option<f64>,
    /// Whether the minutes entered the olympic mean.
    pub counted: bool,
    /// What the summarizer did with it, in words.
    pub decision: String,
    /// Lines holding `:::MLLOG` that are not records.
    pub parse_errors: usize,
    /// The seeds it logs.
    #[serde(skip)]
    pub seeds: Vec<SeedRecord>,
    /// Why it could not be read.
    pub io_error: Option<String>,
    /// Why it is no result file although its name says so (a folder, a FIFO, a device).
    pub not_a_file: Option<String>,
}

/// The RCP step of one benchmark folder, as the review uses it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RcpStep {
    /// Whether the RCP test passes (after a bypass).
    pub passed: bool,
    /// Whether a bypass made it pass.
    pub bypassed: bool,
    /// The official message (`RCP found`, `RCP Interpolation`, ...).
    pub message: String,
    /// The summarizer's `<benchmark>:RCP` column.
    pub column: String,
    /// The factor of the final score once the check has run (what it writes to
    /// `scaling.json`, 1.0 when it deletes the file).
    pub scaling_factor: f64,
    /// The global batch size (`-1` when the files disagree or do not say).
    pub batch_size: Option<f64>,
    /// Samples (or epochs) to converge per run, the checker's order; `None` when more runs
    /// did not converge than olympic scoring allows.
    pub samples: Option<Vec<f64>>,
    /// Where the official tool stops with an exception, in words.
    pub error: Option<String>,
    /// The RCP checker's result: records, means, the factor, its decisions in words.
    pub detail: RcpResult,
}

/// The review of one `results/<system>/<benchmark>` folder.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchmarkReview {
    /// The folder.
    #[serde(serialize_with = "display_path")]
    pub folder: PathBuf,
    /// The system (parent folder name).
    pub system: String,
    /// The benchmark (folder name; `mask` is `maskrcnn` for the summarizer).
    pub benchmark: String,
    /// HPC: the `strong` or `weak` folder it is in (absent for Training).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling: Option<HpcScaling>,
    /// HPC weak scaling: the summarizer's weak-scaling score (models trained, accelerators per
    /// model, time to train them all), of the runs as the package checker judged them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weak: Option<WeakScore>,
    /// Whether the package checker reviews it (false: the ruleset does not allow it).
    pub reviewed: bool,
    /// The division of its system description, `closed` or anything else.
    pub division: Option<String>,
    /// Result files the package checker wants.
    pub required_runs: Option<usize>,
    /// The `result_*.txt` files, sorted.
    pub runs: Vec<RunReview>,
    /// The seed check, when it ran (closed division, no bypass).
    pub seeds: Option<SeedSummary>,
    /// The RCP check, when it ran (closed division).
    pub rcp: Option<RcpStep>,
    /// Files olympic scoring dropped (non-compliant, or no `run_start`/`run_stop`).
    pub dropped: usize,
    /// The olympic mean in minutes, before scaling.
    pub olympic_mean: Option<f64>,
    /// `scaling_factor` of the `scaling.json` in the folder now (`None` when there is none, or
    /// when it cannot be read: that is one of the folder's problems).
    pub committed_scaling_factor: Option<f64>,
    /// The factor of the final score: the RCP checker's for the closed division, else the
    /// committed one.
    pub scaling_factor: f64,
    /// The final score in minutes (`olympic_mean × scaling_factor`); `None` where the official
    /// summarizer gives none, [`BenchmarkReview::no_score`] says why.
    pub score: Option<f64>,
    /// Why there is no score (a reviewed folder only): too many runs dropped, or no row for
    /// the system in the summarizer's table (its description missing, unreadable, or without a
    /// field the table needs, the division among them).
    pub no_score: Option<String>,
    /// The summarizer's `samples_to_converge` (olympic mean of the runs' samples).
    pub samples_to_converge: Option<f64>,
    /// The folder's problems.
    pub problems: Vec<Problem>,
    /// The folder passes review: no error.
    pub passed: bool,
}

/// The seed check of one folder.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeedSummary {
    /// Whether it was bypassed (`package_checker_params` or `--seed-checker-bypass`).
    pub bypassed: bool,
    /// The errors (the seed checker fails on any).
    pub errors: Vec<String>,
    /// The warnings (more than one seed in a run).
    pub warnings: Vec<String>,
}

/// One row of the summarizer's detailed table: a system and its benchmarks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableRow {
    /// The system folder's name.
    pub system_folder: String,
    /// Column name and value, in the summarizer's column order (`out_detailed.csv`).
    pub cells: Vec<(String, Cell)>,
}

/// A cell of the summarizer's table.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Cell {
    /// Text.
    Text(String),
    /// An integer column.
    Int(i64),
    /// A number.
    Num(f64),
    /// Empty.
    Empty,
}

impl Cell {
    /// As a CSV field (numbers as Python's `repr` writes them).
    pub fn csv(&self) -> String {
        match self {
            Cell::Text(s) => csv_field(s),
            Cell::Int(i) => i.to_string(),
            Cell::Num(x) => py_float(*x),
            Cell::Empty => String::new(),
        }
    }
}

/// The whole review: [`verify`]'s result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Review {
    /// The submitter folder.
    #[serde(serialize_with = "display_path")]
    pub dir: PathBuf,
    /// The ruleset.
    pub ruleset: String,
    /// The usage it is reviewed under.
    pub usage: Usage,
    /// Whether it passes review.
    pub passed: bool,
    /// Problems of the folder itself (no `results/`, unreadable entries).
    pub problems: Vec<Problem>,
    /// Each `systems/*.json`.
    pub systems: Vec<SystemReview>,
    /// Each benchmark folder.
    pub benchmarks: Vec<BenchmarkReview>,
    /// The summarizer's table, one row per system.
    pub table: Vec<TableRow>,
    /// The summarizer's column names (`out_detailed.csv`).
    pub columns: Vec<String>,
}

impl Review {
    /// No error anywhere.
    pub fn passed(&self) -> bool {
        self.passed
    }

    /// Every problem: the folder's, each system description's, each benchmark folder's.
    pub fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .chain(self.systems.iter().flat_map(|s| &s.problems))
            .chain(self.benchmarks.iter().flat_map(|b| &b.problems))
    }

    /// Whether some file or folder could not be read.
    pub fn io_errors(&self) -> bool {
        self.problems().any(|p| p.io)
    }

    /// The summarizer's detailed table as CSV: its header, one row per system.
    pub fn render_csv(&self) -> String {
        let mut out = self
            .columns
            .iter()
            .map(|c| csv_field(c))
            .collect::<Vec<_>>()
            .join(",");
        out.push('\n');
        for row in &self.table {
            let cells: Vec<String> = row.cells.iter().map(|(_, c)| c.csv()).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }

    /// The review in words: each problem with its path and tool, one verdict per benchmark
    /// folder, the table's scores, a closing summary.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Reviewing {} under {} ruleset {}",
            self.dir.display(),
            self.usage.as_str(),
            self.ruleset
        );
        let block = |out: &mut String, p: &Problem| {
            let _ = writeln!(out, "{}: {}", p.severity.as_str(), p.message);
            let _ = writeln!(out, "  --> {}", p.path);
            if p.tool == p.step {
                let _ = writeln!(out, "   = step: {}\n", p.step);
            } else {
                let _ = writeln!(out, "   = step: {} (tool: {})\n", p.step, p.tool);
            }
        };
        for p in &self.problems {
            block(&mut out, p);
        }
        for s in &self.systems {
            for p in &s.problems {
                block(&mut out, p);
            }
            let _ = writeln!(
                out,
                "{}: {}",
                s.path.display(),
                if s.valid {
                    "system description passes"
                } else {
                    "system description FAILS"
                }
            );
        }
        if !self.systems.is_empty() {
            out.push('\n');
        }
        for b in &self.benchmarks {
            for p in &b.problems {
                block(&mut out, p);
            }
            let verdict = if !b.reviewed {
                "SKIPPED (not a benchmark of this ruleset)".to_string()
            } else if b.passed {
                "PASSES REVIEW".to_string()
            } else {
                "DOES NOT PASS REVIEW".to_string()
            };
            let score = match (b.score, b.olympic_mean) {
                _ if b.weak.is_some() => format!(
                    "weak-scaling score: {}",
                    b.weak.as_ref().map(WeakScore::describe).unwrap_or_default()
                ),
                (Some(s), Some(m)) => format!(
                    "score {s:.4} min = olympic mean {m:.4} × factor {}",
                    b.scaling_factor
                ),
                _ if b.reviewed => match &b.no_score {
                    Some(why) => format!("no score: {why}"),
                    None => "no score".to_string(),
                },
                _ => String::new(),
            };
            let rcp = b
                .rcp
                .as_ref()
                .map(|r| match &r.error {
                    Some(e) => format!("; RCP check stopped before a decision: {e}"),
                    None if r.column.is_empty() => format!(
                        "; RCP: no decision{}",
                        if r.message.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", r.message)
                        }
                    ),
                    None => format!("; RCP {}: {}", r.column, r.message),
                })
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{}/{}: {verdict}{}{score}{rcp}",
                b.system,
                b.benchmark,
                if score.is_empty() { "" } else { " — " }
            );
            if let Some(r) = &b.rcp {
                for d in &r.detail.decisions {
                    let _ = writeln!(out, "  rcp: {d}");
                }
            }
            out.push('\n');
        }
        let count = |s: Severity| self.problems().filter(|p| p.severity == s).count();
        let reviewed: Vec<_> = self.benchmarks.iter().filter(|b| b.reviewed).collect();
        let failed = reviewed.iter().filter(|b| !b.passed).count();
        let skipped = self.benchmarks.len() - reviewed.len();
        let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
        let _ = writeln!(
            out,
            "{}: {} reviewed ({} pass, {failed} fail{}), {}; {}, {}",
            if self.passed {
                "PASSES REVIEW"
            } else {
                "DOES NOT PASS REVIEW"
            },
            plural(reviewed.len(), "benchmark folder"),
            reviewed.len() - failed,
            if skipped > 0 {
                format!(", {skipped} skipped")
            } else {
                String::new()
            },
            plural(self.systems.len(), "system description"),
            plural(count(Severity::Error), "error"),
            plural(count(Severity::Warning), "warning"),
        );
        out
    }
}

/// The training facts of `ruleset`.
pub fn facts(ruleset: Ruleset) -> Option<&'static RulesetFacts> {
    RULESETS.iter().find(|f| f.ruleset == ruleset.as_str())
}

/// The facts of the review's ruleset: with rules read at run time, the package's (a release
/// candidate may allow other benchmarks, or want other counts, than this build knows), else
/// the built-in ones.
fn facts_of(opts: &VerifyOptions) -> Result<&'static RulesetFacts, VerifyError> {
    #[cfg(feature = "rules")]
    if let Some(r) = &opts.rules {
        return super::package_facts::read_usage_facts(r.package_root(), opts.usage, &opts.ruleset)
            .map_err(VerifyError::Facts);
    }
    match (
        RULESETS.iter().find(|f| f.ruleset == opts.ruleset),
        opts.usage,
    ) {
        (Some(f), Usage::Training) => Ok(f),
        _ => Err(VerifyError::Ruleset(opts.ruleset.clone())),
    }
}

/// How each result file's compliance is checked.
#[derive(Clone, Copy)]
enum FileRules<'a> {
    BuiltIn(Ruleset),
    #[cfg(feature = "rules")]
    Package(&'a super::rules_check::RulesCheck),
    #[cfg(not(feature = "rules"))]
    #[allow(dead_code)]
    None(std::marker::PhantomData<&'a ()>),
}

fn file_rules(opts: &VerifyOptions) -> Result<FileRules<'_>, VerifyError> {
    #[cfg(feature = "rules")]
    if let Some(r) = &opts.rules {
        return Ok(FileRules::Package(r));
    }
    Ruleset::from_name(&opts.ruleset)
        .filter(|r| r.as_str() == opts.ruleset)
        .map(FileRules::BuiltIn)
        .ok_or_else(|| VerifyError::Ruleset(opts.ruleset.clone()))
}

/// Reviews the submitter folder `dir` (see the module documentation).
pub fn verify(dir: &Path, opts: &VerifyOptions) -> Result<Review, VerifyError> {
    let meta = std::fs::metadata(dir).map_err(|source| VerifyError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(VerifyError::NotAFolder {
            path: dir.to_path_buf(),
        });
    }
    std::fs::read_dir(dir).map_err(|source| VerifyError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let facts = facts_of(opts)?;
    let rules = file_rules(opts)?;
    let mut problems = repo_problems(dir);

    // system_desc_checker, on every systems/*.json (the package checker's glob).
    let systems_dir = dir.join("systems");
    let mut systems = Vec::new();
    if systems_dir.is_dir() {
        match entries(&systems_dir) {
            Ok(list) => {
                for e in list {
                    if !e.hidden && e.name.ends_with(".json") {
                        systems.push(review_system(&e.path, &e.name, facts));
                    }
                }
            }
            Err(e) => problems.push(Problem::io(&systems_dir, "list the folder", &e)),
        }
    } else {
        problems.push(Problem::new(
            Severity::Error,
            &systems_dir,
            "package_checker",
            "no systems/ folder: every system under results/ needs systems/<system>.json",
        ));
    }

    // The package checker's walk: results/<system>/<benchmark>/.
    let results = dir.join("results");
    let mut folders: Vec<FolderPlan> = Vec::new();
    // The systems the summarizer's detailed table has a row for, with benchmark folders or not.
    let mut table_systems: Vec<String> = Vec::new();
    match entries(&results) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => problems.push(Problem::new(
            Severity::Error,
            &results,
            "package_checker",
            "no results/ folder (the package checker stops here with FileNotFoundError)",
        )),
        Err(e) => problems.push(Problem::io(&results, "list the folder", &e)),
        Ok(list) => {
            for sys in list {
                if let Some(e) = &sys.error {
                    problems.push(Problem::io(&sys.path, "read", e));
                    continue;
                }
                if !sys.is_dir {
                    continue;
                }
                if !sys.utf8 {
                    problems.push(Problem::new(
                        Severity::Warning,
                        &sys.path,
                        "package_checker",
                        "the folder name is not valid UTF-8: shown with U+FFFD in its place",
                    ));
                }
                if opts.usage == Usage::Training || sys.path.join("strong").is_dir() {
                    table_systems.push(sys.name.clone());
                }
                plan_system(&sys, opts, facts, &mut folders, &mut problems);
            }
        }
    }

    // Every result file of every reviewed folder, read once, in parallel.
    let jobs: Vec<(usize, PathBuf)> = folders
        .iter()
        .enumerate()
        .filter(|(_, f)| f.reviewed)
        .flat_map(|(i, f)| f.results.iter().map(move |p| (i, p.clone())))
        .collect();
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let facts_of_files = par_map(&jobs, threads, |(_, p)| read_result(p, rules));
    let mut runs_of: Vec<Vec<RunReview>> = vec![Vec::new(); folders.len()];
    for ((i, _), run) in jobs.iter().zip(facts_of_files) {
        runs_of[*i].push(run);
    }
    // The RCP checker reads its own files: one folder per worker.
    let rcp_jobs: Vec<usize> = (0..folders.len())
        .filter(|&i| {
            let f = &folders[i];
            f.reviewed && f.closed() && f.benchmark != "minigo"
        })
        .collect();
    let rcps = par_map(&rcp_jobs, threads, |&i| {
        let f = &folders[i];
        let committed = committed_scaling(&f.path).ok().flatten().unwrap_or(1.0);
        let rcp_opts = RcpOptions {
            ruleset: opts.ruleset.clone(),
            tables: opts.rcp_tables.clone(),
            bypass: opts.rcp_bypass || f.rcp_bypass,
            full_rcps: false,
            bert_train_samples: false,
        };
        rcp_step(&f.path, &rcp_opts, committed)
    });
    let mut rcp_of: Vec<Option<RcpStep>> = vec![None; folders.len()];
    for (&i, r) in rcp_jobs.iter().zip(rcps) {
        rcp_of[i] = Some(r);
    }

    let mut benchmarks = Vec::new();
    for ((plan, runs), rcp) in folders.into_iter().zip(runs_of).zip(rcp_of) {
        benchmarks.push(finish_folder(plan, runs, rcp, opts));
    }
    let table = summary_table(&table_systems, &benchmarks, &systems, facts, opts);
    // The summarizer scores only the systems of its table (of strong scaling: a weak-scaling
    // folder's score is in its own table).
    let strong = |b: &BenchmarkReview| b.scaling != Some(HpcScaling::Weak);
    for b in benchmarks.iter_mut().filter(|b| b.reviewed && strong(b)) {
        if table.iter().all(|r| r.system_folder != b.system) {
            b.score = None;
            b.no_score = Some(no_row_reason(dir, &b.system, &systems));
        }
    }
    let columns = facts
        .detailed_columns
        .iter()
        .map(|c| c.to_string())
        .collect();
    let mut review = Review {
        dir: dir.to_path_buf(),
        ruleset: opts.ruleset.clone(),
        usage: opts.usage,
        passed: false,
        problems,
        systems,
        benchmarks,
        table,
        columns,
    };
    if let Some(p) = nothing_reviewed(&results, &review.benchmarks, facts, opts) {
        review.problems.push(p);
    }
    let failed = review.problems().any(|p| p.severity == Severity::Error);
    review.passed = !failed;
    Ok(review)
}

/// The review script's last step, `repo_checker`, as problems.
fn repo_problems(dir: &Path) -> Vec<Problem> {
    repo_check(dir)
        .into_iter()
        .map(|f| {
            let severity = match f {
                RepoFinding::Unreadable { .. } => Severity::Warning,
                _ => Severity::Error,
            };
            Problem::new(severity, f.path(), "repo_checker", f.message(dir))
        })
        .collect()
}

/// The error of a review that reviewed no benchmark folder (the official package checker says
/// SUCCESS there): nothing was checked, so nothing passes. `None` when a folder was reviewed,
/// or when `results/` is missing or unreadable (said already).
fn nothing_reviewed(
    results: &Path,
    benchmarks: &[BenchmarkReview],
    facts: &RulesetFacts,
    opts: &VerifyOptions,
) -> Option<Problem> {
    let ruleset = &opts.ruleset;
    let layout = match opts.usage {
        Usage::Training => "results/<system>/<benchmark>",
        Usage::Hpc => "results/<system>/<strong|weak>/<benchmark>",
    };
    if benchmarks.iter().any(|b| b.reviewed) || !results.is_dir() {
        return None;
    }
    let why = if benchmarks.is_empty() {
        format!(
            "nothing was reviewed: no result_*.txt found ({} holds no {layout} folder)",
            results.display()
        )
    } else {
        let mut names: Vec<&str> = benchmarks.iter().map(|b| b.benchmark.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        format!(
            "nothing was reviewed: every benchmark folder ({}) is skipped, as ruleset {ruleset} \
             does not allow {} (it allows {}); pass --ruleset with the round you submit to",
            benchmarks.len(),
            names.join(", "),
            facts.allowed_benchmarks.join(", ")
        )
    };
    Some(Problem::new(
        Severity::Error,
        results,
        "package_checker",
        format!("{why}; a review of nothing does not pass"),
    ))
}

/// A note for a `package_checker_params` line that reads `seed-checker-bypass` only once its
/// line break or spaces are trimmed: the official checker compares whole `readlines()` lines,
/// so it ignores it, and so does the review, but silently ignoring it would mislead.
fn seed_bypass_note(params: &Path) -> Option<Problem> {
    if !params.is_file() || params_enable(params, "seed-checker-bypass") {
        return None;
    }
    let bytes = std::fs::read(params).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    text.split_inclusive('\n')
        .any(|l| l.trim() == "seed-checker-bypass")
        .then(|| {
            Problem::new(
                Severity::Note,
                params,
                "seed_checker",
                format!(
                    "{}: `seed-checker-bypass` followed by a line break or spaces: the official \
                     package checker compares whole lines with their newline, so it does not \
                     honour it (neither do we)",
                    params.display()
                ),
            )
        })
}

/// A folder entry, with what the walk needs to know.
struct Entry {
    path: PathBuf,
    name: String,
    utf8: bool,
    hidden: bool,
    is_dir: bool,
    error: Option<std::io::Error>,
}

/// The entries of a folder, sorted by name; `is_dir` follows symbolic links as Python's
/// `os.path.isdir` does.
fn entries(dir: &Path) -> std::io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = match e {
            Ok(e) => e,
            Err(err) => {
                out.push(Entry {
                    path: dir.to_path_buf(),
                    name: String::new(),
                    utf8: true,
                    hidden: false,
                    is_dir: false,
                    error: Some(err),
                });
                continue;
            }
        };
        let os = e.file_name();
        let name = os.to_string_lossy().into_owned();
        let path = e.path();
        let (is_dir, error) = match std::fs::metadata(&path) {
            Ok(m) => (m.is_dir(), None),
            // A dangling link is no folder, as for Python; a loop is said.
            Err(err) if err.raw_os_error() == Some(libc::ELOOP) => (false, Some(err)),
            Err(_) => (false, None),
        };
        out.push(Entry {
            utf8: os.to_str().is_some(),
            hidden: name.starts_with('.'),
            name,
            path,
            is_dir,
            error,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// A benchmark folder, before its files are read.
struct FolderPlan {
    path: PathBuf,
    system: String,
    benchmark: String,
    scaling: Option<HpcScaling>,
    reviewed: bool,
    division: Option<String>,
    required: Option<usize>,
    results: Vec<PathBuf>,
    rcp_bypass: bool,
    seed_bypass: bool,
    problems: Vec<Problem>,
}

impl FolderPlan {
    fn closed(&self) -> bool {
        self.division.as_deref() == Some("closed")
    }
}

fn plan_system(
    sys: &Entry,
    opts: &VerifyOptions,
    facts: &RulesetFacts,
    folders: &mut Vec<FolderPlan>,
    problems: &mut Vec<Problem>,
) {
    let Some(list) = benchmark_entries(sys, opts.usage, problems) else {
        return;
    };
    let params = sys.path.join("package_checker_params");
    let sys_seed_bypass = params_enable(&params, "seed-checker-bypass");
    problems.extend(seed_bypass_note(&params));
    let submission = sys
        .path
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."));
    let desc_path = submission
        .join("systems")
        .join(format!("{}.json", sys.name));
    let desc = read_division(&desc_path);
    for (scaling, b) in list {
        if let Some(e) = &b.error {
            problems.push(Problem::io(&b.path, "read", e));
            continue;
        }
        if !b.is_dir {
            continue;
        }
        let mut fp = FolderPlan {
            path: b.path.clone(),
            system: sys.name.clone(),
            benchmark: b.name.clone(),
            scaling,
            reviewed: false,
            division: None,
            required: None,
            results: Vec::new(),
            rcp_bypass: false,
            seed_bypass: false,
            problems: Vec::new(),
        };
        match &desc {
            Ok(d) => fp.division = d.clone(),
            Err(why) => fp.problems.push(Problem::new(
                Severity::Error,
                &desc_path,
                "package_checker",
                format!(
                    "{why}: the package checker reads the division of every benchmark folder's \
                     system from it, and stops"
                ),
            )),
        }
        if !facts.allowed_benchmarks.contains(&b.name.as_str()) {
            fp.problems.push(Problem::new(
                Severity::Warning,
                &b.path,
                "package_checker",
                format!(
                    "Skipping benchmark: {} (ruleset {} allows {}; result_summarizer stops with \
                     an AssertionError on a folder its table has no column for)",
                    b.name,
                    opts.ruleset,
                    facts.allowed_benchmarks.join(", ")
                ),
            ));
            folders.push(fp);
            continue;
        }
        fp.reviewed = true;
        let required = super::required_runs_in(facts.result_file_counts, &b.name);
        fp.required = required;
        let files = match entries(&b.path) {
            Ok(l) => l,
            Err(e) => {
                fp.problems
                    .push(Problem::io(&b.path, "list the folder", &e));
                folders.push(fp);
                continue;
            }
        };
        let params = b.path.join("package_checker_params");
        let has_params = params.exists();
        let (rcp_bypass, rcp_note) = package_bypass(&b.path);
        fp.rcp_bypass = rcp_bypass;
        if let Some(n) = rcp_note {
            fp.problems
                .push(Problem::new(Severity::Note, &params, "package_checker", n));
        }
        fp.seed_bypass = opts.seed_checker_bypass
            || sys_seed_bypass
            || params_enable(&params, "seed-checker-bypass");
        fp.problems.extend(seed_bypass_note(&params));
        // glob('*') and glob('result_*.txt'): hidden names are not matched.
        let visible: Vec<&Entry> = files.iter().filter(|f| !f.hidden).collect();
        let is_result = |f: &Entry| f.name.starts_with("result_") && f.name.ends_with(".txt");
        for f in &visible {
            // A result file that cannot be read is said when it is read.
            if let (Some(e), false) = (&f.error, is_result(f)) {
                fp.problems.push(Problem::io(&f.path, "read", e));
            }
            if !f.utf8 {
                fp.problems.push(Problem::new(
                    Severity::Warning,
                    &f.path,
                    "package_checker",
                    "the file name is not valid UTF-8: shown with U+FFFD in its place",
                ));
            }
        }
        let results: Vec<&Entry> = visible
            .iter()
            .copied()
            .filter(|f| f.name.starts_with("result_") && f.name.ends_with(".txt"))
            .collect();
        fp.results = results.iter().map(|f| f.path.clone()).collect();
        if let (Some(n), Some(HpcScaling::Weak)) = (required, scaling) {
            if results.len() < n {
                fp.problems.push(Problem::new(
                    Severity::Error,
                    &b.path,
                    "package_checker",
                    format!(
                        "Expected at least {n} runs, but detected {} runs (weak scaling)",
                        results.len()
                    ),
                ));
            }
        } else if let Some(n) = required
            && results.len() != n
        {
            fp.problems.push(Problem::new(
                Severity::Error,
                &b.path,
                "package_checker",
                format!(
                    "Incorrect number of files in dir, or wrong file names in directory: \
                         found {}, expected {n} result_*.txt",
                    results.len()
                ),
            ));
        }
        let params_count = usize::from(has_params);
        let others: Vec<&str> = visible
            .iter()
            .filter(|f| !(is_result(f) || (has_params && f.name == "package_checker_params")))
            .map(|f| f.name.as_str())
            .collect();
        if visible.len() > results.len() + params_count {
            fp.problems.push(Problem::new(
                Severity::Warning,
                &b.path,
                "package_checker",
                format!(
                    "Detected {} total files in directory, but some do not conform to naming \
                     convention, should you rename them to result_*.txt? ({})",
                    visible.len(),
                    others.join(", ")
                ),
            ));
        }
        if results.len() < visible.len() {
            fp.problems.push(Problem::new(
                Severity::Warning,
                &b.path,
                "package_checker",
                "Unknown files in result directory",
            ));
        }
        if b.path.join("power").exists() {
            fp.problems.push(Problem::new(
                Severity::Note,
                &b.path.join("power"),
                "package_checker",
                "power results are not reviewed",
            ));
        }
        folders.push(fp);
    }
}

/// The benchmark folders of a system folder, as the package checker walks them: its entries
/// (Training), or the entries of each of its sub-folders, which must be `strong` or `weak`
/// (HPC). `None` when the system folder cannot be listed (said in `problems`).
fn benchmark_entries(
    sys: &Entry,
    usage: Usage,
    problems: &mut Vec<Problem>,
) -> Option<Vec<(Option<HpcScaling>, Entry)>> {
    let list = match entries(&sys.path) {
        Ok(l) => l,
        Err(e) => {
            problems.push(Problem::io(&sys.path, "list the folder", &e));
            return None;
        }
    };
    if usage == Usage::Training {
        return Some(list.into_iter().map(|e| (None, e)).collect());
    }
    let mut out = Vec::new();
    for s in list.into_iter().filter(|e| e.is_dir) {
        let inner = match entries(&s.path) {
            Ok(l) => l,
            Err(e) => {
                problems.push(Problem::io(&s.path, "list the folder", &e));
                continue;
            }
        };
        let scaling = match s.name.as_str() {
            "strong" => HpcScaling::Strong,
            "weak" => HpcScaling::Weak,
            _ => {
                if inner.iter().any(|e| e.is_dir) {
                    problems.push(Problem::new(
                        Severity::Error,
                        &s.path,
                        "package_checker",
                        format!(
                            "{}: an HPC system folder holds strong/ and weak/ only (the package \
                             checker stops here with an AssertionError)",
                            s.name
                        ),
                    ));
                }
                continue;
            }
        };
        out.extend(inner.into_iter().map(|e| (Some(scaling), e)));
    }
    Some(out)
}

/// The `division` of a system description, as the package checker reads it; `Err` says why it
/// cannot.
fn read_division(path: &Path) -> Result<Option<String>, String> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => return Err(format!("{} is not a regular file", path.display())),
        Ok(m) if m.len() > MAX_SYSTEM_DESC_BYTES => {
            return Err(format!("{} is too large to read", path.display()))
        }
        _ => {}
    }
    let text = std::fs::read(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!("no {}", path.display())
        } else {
            format!("cannot read {}: {e}", path.display())
        }
    })?;
    let v: Json = serde_json::from_slice(&text)
        .map_err(|e| format!("{} is not valid JSON ({e})", path.display()))?;
    match v.get("division") {
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(other) => Ok(Some(other.to_string())),
        None => Err(format!("{} has no `division`", path.display())),
    }
}

fn review_system(path: &Path, name: &str, facts: &RulesetFacts) -> SystemReview {
    let stem = name.trim_end_matches(".json").to_string();
    let mut r = SystemReview {
        path: path.to_path_buf(),
        name: stem,
        valid: false,
        division: None,
        problems: Vec::new(),
        desc: None,
    };
    let err = |msg: String| Problem::new(Severity::Error, path, "system_desc_checker", msg);
    let size = match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => {
            r.problems.push(err(
                "not a regular file (a folder, FIFO, socket or device): not read".into(),
            ));
            return r;
        }
        Ok(m) => m.len(),
        Err(e) => {
            r.problems.push(Problem::io(path, "read", &e));
            return r;
        }
    };
    if size > MAX_SYSTEM_DESC_BYTES {
        r.problems.push(err(format!(
            "{size} bytes: too large for a system description (at most {MAX_SYSTEM_DESC_BYTES} \
             read)"
        )));
        return r;
    }
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            r.problems.push(Problem::io(path, "read", &e));
            return r;
        }
    };
    let v: Json = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            r.problems.push(err(format!(
                "not valid JSON: {e} (the official system_desc_checker stops here with a \
                 JSONDecodeError, and the package checker with it)"
            )));
            return r;
        }
    };
    let Json::Object(map) = v else {
        r.problems.push(err(
            "not a JSON object (the official system_desc_checker stops here)".into(),
        ));
        return r;
    };
    let mut valid = true;
    for f in facts.required_fields {
        if !map.contains_key(*f) {
            valid = false;
            r.problems.push(err(format!("Missing field {f}")));
        }
    }
    if facts.status_checked
        && let Some(s) = map.get("status")
        && !s.as_str().is_some_and(|s| AVAILABILITY.contains(&s))
    {
        valid = false;
        r.problems.push(err(format!(
            "Field status contains a non valid value: {}, must be one of {}",
            s.as_str().map_or_else(|| s.to_string(), str::to_string),
            AVAILABILITY.join(", ")
        )));
    }
    // The checker joins these into its table prefix with ",".join: a value that is there but
    // not a string stops it with a TypeError.
    for f in [
        "submitter",
        "system_name",
        "host_processor_model_name",
        "host_processor_core_count",
        "accelerator_model_name",
        "accelerators_per_node",
        "framework",
    ] {
        if let Some(v) = map.get(f)
            && !v.is_string()
        {
            valid = false;
            r.problems.push(err(format!(
                "`{f}` is {v}, not a string (the official system_desc_checker stops here \
                     with a TypeError: its table joins the field as text)"
            )));
        }
    }
    r.valid = valid;
    r.division = map.get("division").map(|d| match d {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    });
    if !valid {
        r.problems.push(err(format!(
            "System description checker failed for {} (ruleset {})",
            map.get("system_name")
                .and_then(Json::as_str)
                .unwrap_or(&r.name),
            facts.ruleset
        )));
    }
    r.desc = Some(map);
    r
}

/// Reads one result file once: the compliance check, its seeds, `run_start` and `run_stop`.
fn read_result(path: &Path, rules: FileRules) -> RunReview {
    let mut run = RunReview {
        file: path.to_path_buf(),
        compliant: false,
        errors: Vec::new(),
        error_count: 0,
        minutes: None,
        counted: false,
        decision: String::new(),
        parse_errors: 0,
        seeds: Vec::new(),
        io_error: None,
        not_a_file: None,
    };
    // Only a regular file is opened: a FIFO would block, a device never end.
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(m) => {
            run.not_a_file = Some(if m.is_dir() {
                "a folder named like a result file: not read (the official checker stops with \
                 IsADirectoryError)"
                    .to_string()
            } else {
                "not a regular file (a FIFO, socket or device): not read".to_string()
            });
            return run;
        }
        Err(e) => {
            run.io_error = Some(Problem::io(path, "read", &e).message);
            return run;
        }
    }
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            run.io_error = Some(Problem::io(path, "read", &e).message);
            return run;
        }
    };
    let built_in = match rules {
        FileRules::BuiltIn(r) => Some(Checker::new(r)),
        _ => None,
    };
    match scan(std::io::BufReader::with_capacity(1 << 16, file), built_in) {
        Ok((report, seeds, parse_errors, start, stop)) => {
            let verdict = match (report, rules) {
                (Some(report), _) => Ok(built_in_verdict(&report)),
                #[cfg(feature = "rules")]
                (None, FileRules::Package(r)) => r.check_file(path).map(|e| engine_verdict(&e)),
                // A built-in ruleset always has its checker: no other case reaches here.
                _ => Err(std::io::Error::other("no rules to check the file with")),
            };
            match verdict {
                Ok((compliant, error_count, errors)) => {
                    run.compliant = compliant;
                    run.error_count = error_count;
                    run.errors = errors;
                }
                Err(e) => {
                    run.io_error = Some(Problem::io(path, "read", &e).message);
                    return run;
                }
            }
            run.seeds = seeds;
            run.parse_errors = parse_errors;
            if let (true, Some(a), Some(b)) = (run.compliant, start, stop) {
                run.minutes = Some((b - a) as f64 / 60.0 / 1000.0);
            }
        }
        Err(e) => run.io_error = Some(Problem::io(path, "read", &e).message),
    }
    run
}

/// A file's verdict: compliant, the number of errors, the first [`MAX_ERRORS_KEPT`] in words.
type Verdict = (bool, usize, Vec<String>);

fn built_in_verdict(report: &crate::compliance::ComplianceReport) -> Verdict {
    let errors = report
        .errors()
        .take(MAX_ERRORS_KEPT)
        .map(|f| match f.line {
            Some(l) => format!("line {l}: {}", f.message),
            None => f.message.clone(),
        })
        .collect();
    (report.passed(false), report.errors().count(), errors)
}

/// The rule engine's verdict; each message's first line (the official messages go on with
/// the log line and the checker's state).
#[cfg(feature = "rules")]
fn engine_verdict(report: &crate::compliance::engine::EngineReport) -> Verdict {
    let errors = report
        .errors()
        .take(MAX_ERRORS_KEPT)
        .map(|f| {
            let first = f.message.lines().next().unwrap_or_default();
            match f.line {
                Some(l) => format!("line {l}: {first}"),
                None => first.to_owned(),
            }
        })
        .collect();
    let mut count = report.errors().count();
    if report.crashed && count == 0 {
        count = 1;
    }
    (report.passed(), count, errors)
}

type Scan = (
    Option<crate::compliance::ComplianceReport>,
    Vec<SeedRecord>,
    usize,
    Option<i64>,
    Option<i64>,
);

/// One pass over a result file: the built-in check (when given), its seeds, `run_start` and
/// `run_stop`.
fn scan(input: impl BufRead, mut checker: Option<Checker>) -> std::io::Result<Scan> {
    let mut reader = LogReader::new(input);
    let mut seeds = Vec::new();
    let (mut start, mut stop) = (None, None);
    let mut parse_errors = 0;
    for item in reader.by_ref() {
        match item {
            Ok(line) => {
                let rec: &Record = &line.record;
                if let Some(c) = checker.as_mut() {
                    c.feed(line.lineno, rec);
                }
                match &*rec.key {
                    "seed" => seeds.push(SeedRecord {
                        file: rec.metadata.file.as_deref().map(str::to_string),
                        lineno: rec.metadata.lineno.map(i128::from),
                        value: rec.value.clone(),
                        log_line: line.lineno,
                    }),
                    // result_summarizer._query_run_start_stop: the last of each seen before
                    // both are known.
                    "run_start" if start.is_none() || stop.is_none() => start = Some(rec.time_ms()),
                    "run_stop" if start.is_none() || stop.is_none() => stop = Some(rec.time_ms()),
                    _ => {}
                }
            }
            Err(e) => {
                parse_errors += 1;
                if let Some(c) = checker.as_mut() {
                    c.feed_error(&e);
                }
            }
        }
    }
    if let Some(e) = reader.io_error() {
        return Err(std::io::Error::new(e.kind(), e.to_string()));
    }
    Ok((
        checker.map(|c| c.report()),
        seeds,
        parse_errors,
        start,
        stop,
    ))
}

fn finish_folder(
    mut plan: FolderPlan,
    mut runs: Vec<RunReview>,
    rcp: Option<RcpStep>,
    opts: &VerifyOptions,
) -> BenchmarkReview {
    let mut problems = std::mem::take(&mut plan.problems);
    let benchmark = if plan.benchmark == "mask" {
        "maskrcnn".to_string()
    } else {
        plan.benchmark.clone()
    };
    let mut review = BenchmarkReview {
        folder: plan.path.clone(),
        system: plan.system.clone(),
        benchmark,
        scaling: plan.scaling,
        weak: None,
        reviewed: plan.reviewed,
        division: plan.division.clone(),
        required_runs: plan.required,
        runs: Vec::new(),
        seeds: None,
        rcp: None,
        dropped: 0,
        olympic_mean: None,
        committed_scaling_factor: None,
        scaling_factor: 1.0,
        score: None,
        no_score: None,
        samples_to_converge: None,
        problems: Vec::new(),
        passed: false,
    };
    if !plan.reviewed {
        review.problems = problems;
        review.passed = !review
            .problems
            .iter()
            .any(|p| p.severity == Severity::Error);
        return review;
    }
    // The package checker: each file's compliance, one non-compliant file accepted (four for
    // unet3d).
    let mut non_compliant = 0;
    for r in &runs {
        if let Some(e) = &r.io_error {
            problems.push(Problem {
                io: true,
                ..Problem::new(Severity::Error, &r.file, "io", e.clone())
            });
            non_compliant += 1;
        } else if let Some(why) = &r.not_a_file {
            problems.push(Problem::new(
                Severity::Error,
                &r.file,
                "package_checker",
                why.clone(),
            ));
            non_compliant += 1;
        } else if !r.compliant {
            non_compliant += 1;
            let first = r.errors.first().map_or("?", String::as_str);
            let more = match r.error_count {
                0 | 1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            problems.push(Problem::new(
                Severity::Warning,
                &r.file,
                "compliance_checker",
                format!("not compliant under {}: {first}{more}", opts.ruleset),
            ));
        }
    }
    let allowance = if review.benchmark == "unet3d" { 4 } else { 1 };
    match non_compliant {
        0 => {}
        n if n <= allowance => problems.push(Problem::new(
            Severity::Warning,
            &plan.path,
            "package_checker",
            if n == 1 {
                "1 file does not comply, accepting this under olympic scoring".to_string()
            } else {
                format!("{n} files do not comply, accepting this under olympic scoring")
            },
        )),
        n => problems.push(Problem::new(
            Severity::Error,
            &plan.path,
            "package_checker",
            format!("{n} files do not comply, directory cannot be accepted"),
        )),
    }
    // The seed checker (closed division).
    if plan.closed() {
        if plan.seed_bypass {
            review.seeds = Some(SeedSummary {
                bypassed: true,
                errors: vec![],
                warnings: vec![],
            });
            problems.push(Problem::new(
                Severity::Note,
                &plan.path,
                "seed_checker",
                "Bypassing Seed Checker (package_checker_params or --seed-checker-bypass)",
            ));
        } else {
            let rep = seed_check(&runs);
            for e in &rep.errors {
                problems.push(Problem::new(
                    Severity::Error,
                    &plan.path,
                    "seed_checker",
                    format!("Seed checker failed: {e}"),
                ));
            }
            review.seeds = Some(SeedSummary {
                bypassed: false,
                errors: rep.errors,
                warnings: rep.warnings,
            });
        }
    }
    // The RCP checker.
    if let Some(r) = &rcp {
        let words = match &r.error {
            Some(e) => format!(
                "the official RCP checker stops here with an exception (and the package \
                 checker with it): {e}"
            ),
            None if r.passed => format!("RCP Test Passed: {}", r.message),
            None => format!("RCP Test Failed: {}", r.message),
        };
        problems.push(Problem::new(
            if r.passed && r.error.is_none() {
                Severity::Note
            } else {
                Severity::Error
            },
            &plan.path,
            "rcp_checker",
            words,
        ));
    }
    // result_summarizer: olympic mean of the compliant runs, times the factor.
    let committed = match committed_scaling(&plan.path) {
        Ok(f) => f,
        Err(p) => {
            problems.push(p);
            None
        }
    };
    review.committed_scaling_factor = committed;
    review.scaling_factor = match &rcp {
        Some(r) => r.scaling_factor,
        None => committed.unwrap_or(1.0),
    };
    // A committed factor the RCP step replaces: the score is not the one the file says.
    if let (Some(c), Some(r)) = (committed, &rcp)
        && c != r.scaling_factor
    {
        problems.push(Problem::new(
            Severity::Warning,
            &plan.path.join("scaling.json"),
            "rcp_checker",
            format!(
                "the committed scaling.json says {} instead (the review {} it): the score \
                     uses factor {}",
                py_float(c),
                if r.detail.scaling == Scaling::Delete {
                    "removes"
                } else {
                    "rewrites"
                },
                py_float(r.scaling_factor)
            ),
        ));
    }
    let max_dropped = super::max_dropped_runs(&review.benchmark);
    let mut scores = Vec::new();
    for r in runs.iter_mut() {
        match r.minutes {
            Some(m) => scores.push(m),
            None => {
                review.dropped += 1;
                r.decision = if r.io_error.is_some() || r.not_a_file.is_some() {
                    "dropped: unreadable".into()
                } else if !r.compliant {
                    "dropped: not compliant".into()
                } else {
                    "dropped: run_start or run_stop not recorded".into()
                };
            }
        }
    }
    if review.scaling == Some(HpcScaling::Weak) {
        // The summarizer's weak-scaling table holds a tuple, not a time to train.
        review.no_score = Some(
            "weak scaling: scored by the models trained, their accelerators and the time to \
             train them all (`weak`), not by an olympic mean"
                .into(),
        );
        weak_step(
            &plan.path,
            plan.required,
            &runs,
            opts,
            &mut review,
            &mut problems,
        );
    } else if review.dropped > max_dropped {
        problems.push(Problem::new(
            Severity::Error,
            &plan.path,
            "result_summarizer",
            format!(
                "CRITICAL ERROR: Too many non-converging runs for {}/{}: {} dropped, olympic \
                 scoring allows {max_dropped}",
                review.system, review.benchmark, review.dropped
            ),
        ));
        review.no_score = Some(format!(
            "too many non-converging runs: {} dropped, olympic scoring allows {max_dropped}",
            review.dropped
        ));
    } else {
        review.olympic_mean = olympic_mean(&mut scores.clone(), review.dropped, max_dropped);
        review.score = review.olympic_mean.map(|m| m * review.scaling_factor);
        if review.score.is_none() {
            review.no_score = Some(format!(
                "no olympic mean: {} run(s) with a time to train",
                scores.len()
            ));
        }
        mark_counted(&mut runs, review.dropped, max_dropped);
    }
    if let Some(r) = &rcp {
        review.samples_to_converge = r.samples.as_ref().and_then(|s| {
            let mut s = s.clone();
            s.sort_by(f64::total_cmp);
            (s.len() >= 3).then(|| {
                let kept = &s[1..s.len() - 1];
                np_mean(kept)
            })
        });
    }
    if opts.set_scaling
        && let Some(r) = &rcp
        && let Err(e) = write_scaling(&plan.path, &r.detail)
    {
        problems.push(Problem::io(&plan.path.join("scaling.json"), "write", &e));
    }
    review.runs = runs;
    review.rcp = rcp;
    review.passed = !problems.iter().any(|p| p.severity == Severity::Error);
    review.problems = problems;
    review
}

/// The summarizer's weak-scaling score of a folder, from the compliance verdicts already
/// made: where it has none, a warning in its words; where it stops with an exception, an error.
fn weak_step(
    folder: &Path,
    required: Option<usize>,
    runs: &[RunReview],
    opts: &VerifyOptions,
    review: &mut BenchmarkReview,
    problems: &mut Vec<Problem>,
) {
    let verdict = |f: &Path| {
        let r = runs.iter().find(|r| r.file == f);
        Ok(FileVerdict {
            ruleset: opts.ruleset.clone(),
            passed: r
                .is_some_and(|r| r.compliant && r.io_error.is_none() && r.not_a_file.is_none()),
            first_error: r.and_then(|r| r.errors.first().cloned()),
        })
    };
    let w = match score_weak(folder, required, &verdict) {
        Ok(w) => w,
        Err(e) => {
            problems.push(Problem::io(folder, "list the folder", &e));
            return;
        }
    };
    if let Some(e) = &w.error {
        problems.push(Problem::new(
            Severity::Error,
            folder,
            "result_summarizer",
            e.clone(),
        ));
    } else if !w.scored() {
        problems.push(Problem::new(
            Severity::Warning,
            folder,
            "result_summarizer",
            format!(
                "CRITICAL ERROR: Not enough converging weak scaling runs for {}/{}: {} model(s), \
                 {} needed (no weak-scaling score)",
                review.system,
                review.benchmark,
                w.number_of_models,
                w.required_runs.unwrap_or_default()
            ),
        ));
    }
    review.weak = Some(w);
}

/// Marks which runs olympic scoring counts: ascending minutes, ties by file name, the
/// `max_dropped` fastest and `max_dropped − dropped` slowest trimmed.
fn mark_counted(runs: &mut [RunReview], dropped: usize, max_dropped: usize) {
    let mut order: Vec<usize> = (0..runs.len())
        .filter(|&i| runs[i].minutes.is_some())
        .collect();
    order.sort_by(|&a, &b| {
        runs[a]
            .minutes
            .unwrap_or(0.0)
            .total_cmp(&runs[b].minutes.unwrap_or(0.0))
            .then(a.cmp(&b))
    });
    let hi = order.len().saturating_sub(max_dropped - dropped);
    let lo = max_dropped.min(hi);
    for (rank, &i) in order.iter().enumerate() {
        let r = &mut runs[i];
        if rank < lo {
            r.decision = "trimmed: among the fastest".into();
        } else if rank >= hi {
            r.decision = "trimmed: among the slowest".into();
        } else {
            r.counted = true;
            r.decision = "counted".into();
        }
    }
}

/// The seed checker over a folder's runs, with the official reading of a file that has parse
/// errors (no seed of it is read, and that is an error).
fn seed_check(runs: &[RunReview]) -> SeedReport {
    let mut labelled = Vec::new();
    let mut errors = Vec::new();
    for r in runs {
        let label = r.file.display().to_string();
        if let Some(e) = r.io_error.as_ref().or(r.not_a_file.as_ref()) {
            errors.push(format!("Error found when querying seeds from {label}: {e}"));
            continue;
        }
        if r.parse_errors > 0 {
            errors.push(format!(
                "Error found when querying seeds from {label}: Found parsing errors ({} line(s) \
                 hold :::MLLOG but are not records)",
                r.parse_errors
            ));
            continue;
        }
        labelled.push((label, r.seeds.clone()));
    }
    let mut rep = check_seeds(&labelled);
    errors.append(&mut rep.errors);
    rep.errors = errors;
    rep
}

/// `scaling.json`'s factor in `folder` (`None` when there is none), or the problem with it.
fn committed_scaling(folder: &Path) -> Result<Option<f64>, Problem> {
    let p = folder.join("scaling.json");
    if !p.is_file() {
        return Ok(None);
    }
    let err = |m: String| Problem::new(Severity::Error, &p, "result_summarizer", m);
    let meta = std::fs::metadata(&p).map_err(|e| Problem::io(&p, "read", &e))?;
    if meta.len() > MAX_SYSTEM_DESC_BYTES {
        return Err(err(format!(
            "{} bytes: too large for scaling.json",
            meta.len()
        )));
    }
    let bytes = std::fs::read(&p).map_err(|e| Problem::io(&p, "read", &e))?;
    let v: Json = serde_json::from_slice(&bytes).map_err(|e| {
        err(format!(
            "not valid JSON: {e} (result_summarizer stops here with a JSONDecodeError)"
        ))
    })?;
    match v.get("scaling_factor").and_then(Json::as_f64) {
        Some(f) => Ok(Some(f)),
        None => Err(err(
            "no numeric `scaling_factor` (result_summarizer stops here with a KeyError or \
             TypeError)"
                .into(),
        )),
    }
}

/// The summarizer's detailed table: one row per system of `table_systems` (the system folders
/// under results/; of HPC, those with a strong/ folder, as the detailed table is of strong
/// scaling) with a valid description, its cells empty where it has no benchmark folder.
fn summary_table(
    table_systems: &[String],
    benchmarks: &[BenchmarkReview],
    systems: &[SystemReview],
    facts: &RulesetFacts,
    opts: &VerifyOptions,
) -> Vec<TableRow> {
    let mut by_system: BTreeMap<&str, Vec<&BenchmarkReview>> = table_systems
        .iter()
        .map(|s| (s.as_str(), Vec::new()))
        .collect();
    for b in benchmarks {
        if let Some(list) = by_system.get_mut(b.system.as_str()) {
            list.push(b);
        }
    }
    let mut rows = Vec::new();
    for (system, list) in by_system {
        let Some(desc) = systems
            .iter()
            .find(|s| s.name == system)
            .and_then(|s| s.desc.as_ref())
        else {
            continue;
        };
        let Some(mut cells) = system_cells(desc) else {
            continue;
        };
        for col in facts.detailed_columns {
            let Some((bench, metric)) = col.split_once(':') else {
                continue;
            };
            let b = list.iter().find(|b| {
                b.benchmark == bench && b.reviewed && b.scaling != Some(HpcScaling::Weak)
            });
            let cell = match (b, metric) {
                (None, "RCP") => Cell::Text(String::new()),
                (None, _) => Cell::Empty,
                (Some(b), "time_to_train") => b.score.map_or(Cell::Empty, Cell::Num),
                (Some(b), "rcp_scaling_factor") => Cell::Num(b.scaling_factor),
                (Some(b), "GBS") => b
                    .rcp
                    .as_ref()
                    .and_then(|r| r.batch_size)
                    .map_or(Cell::Empty, Cell::Num),
                (Some(b), "samples_to_converge") => {
                    b.samples_to_converge.map_or(Cell::Empty, Cell::Num)
                }
                (Some(b), "RCP") => {
                    Cell::Text(b.rcp.as_ref().map(|r| r.column.clone()).unwrap_or_default())
                }
                (Some(_), _) => Cell::Empty,
            };
            cells.push((col.to_string(), cell));
        }
        let submitter = desc.get("submitter").and_then(Json::as_str).unwrap_or("");
        let prefix = ruleset_url_prefix(opts.usage, &opts.ruleset);
        cells.push((
            "details_url".into(),
            Cell::Text(format!(
                "{prefix}/blob/main/{submitter}/systems/{system}.json"
            )),
        ));
        cells.push((
            "code_url".into(),
            Cell::Text(format!("{prefix}/blob/master/{submitter}/benchmarks")),
        ));
        // The columns in the summarizer's order.
        let order: Vec<&str> = facts.detailed_columns.to_vec();
        cells.sort_by_key(|(c, _)| order.iter().position(|o| o == c).unwrap_or(usize::MAX));
        rows.push(TableRow {
            system_folder: system.to_string(),
            cells,
        });
    }
    rows
}

/// Why the summarizer's table has no row for `system`, in its words where it has some.
fn no_row_reason(dir: &Path, system: &str, systems: &[SystemReview]) -> String {
    let Some(s) = systems.iter().find(|s| s.name == system) else {
        let path = dir.join("systems").join(format!("{system}.json"));
        return format!(
            "no system description: the division is unknown, and so whether the RCP factor \
             applies; the official result_summarizer says `ERROR: Missing {}` and leaves the \
             system out of its table",
            path.display()
        );
    };
    let shown = s.path.display();
    let Some(desc) = &s.desc else {
        return format!(
            "{shown} cannot be read as a JSON object: the division is unknown; the official \
             result_summarizer stops there with an exception (a TypeError for JSON it cannot \
             decode) and gives no table"
        );
    };
    // The fields in the order the summarizer asks for them.
    for f in SUMMARIZER_FIELDS {
        if !desc.contains_key(f) {
            let what = if f == "division" {
                "the division is unknown"
            } else {
                "the table needs it"
            };
            return format!(
                "`{f}` missing from {shown}: {what}; the official result_summarizer stops here \
                 with a NameError (its message for a missing field names a variable it does not \
                 have) and gives no table"
            );
        }
    }
    format!(
        "{shown}: a count (`number_of_nodes`, `host_processors_per_node`, \
         `accelerators_per_node`) is not an integer: the official result_summarizer stops here \
         with a ValueError from int() and gives no table"
    )
}

/// The description fields `result_summarizer` reads for its table, in its order.
const SUMMARIZER_FIELDS: [&str; 13] = [
    "division",
    "status",
    "submitter",
    "system_name",
    "host_processor_model_name",
    "number_of_nodes",
    "host_processor_core_count",
    "host_processors_per_node",
    "accelerator_model_name",
    "accelerators_per_node",
    "framework",
    "hw_notes",
    "sw_notes",
];

fn ruleset_url_prefix(usage: Usage, r: &str) -> String {
    let short = format!("{}{}", &r[..3], r[3..].replace(".0", ""));
    format!(
        "https://github.com/mlcommons/{}_results_v{short}",
        usage.as_str()
    )
}

/// The system columns of the summarizer's row, or `None` where it skips the system (a field
/// missing, a count that `int()` does not read).
fn system_cells(desc: &serde_json::Map<String, Json>) -> Option<Vec<(String, Cell)>> {
    let s = |k: &str| -> Option<String> {
        desc.get(k).map(|v| match v {
            Json::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    let int = |k: &str| -> Option<i64> {
        match desc.get(k)? {
            Json::Number(n) => n.as_i64(),
            Json::String(s) => s.trim().parse().ok(),
            Json::Bool(b) => Some(*b as i64),
            _ => None,
        }
    };
    let nodes = int("number_of_nodes")?;
    let mut system_name = s("system_name")?;
    let mut accel = s("accelerator_model_name")?;
    if system_name == "tpu-v3" {
        system_name = format!("TPUv3.{}", int("accelerators_per_node")? * 2);
    }
    if accel == "tpu-v3" {
        accel = "TPUv3".into();
    }
    let mut framework = s("framework")?;
    if framework.contains("TensorFlow")
        && let Some(i) = framework.find(" commit hash = ")
    {
        framework.truncate(i);
    }
    let notes: Vec<String> = [s("hw_notes")?, s("sw_notes")?]
        .into_iter()
        .filter(|n| !n.is_empty())
        .collect();
    // The summarizer asks for it with the counts, and skips the system without it.
    s("host_processor_core_count")?;
    Some(vec![
        ("division".into(), Cell::Text(s("division")?)),
        ("availability".into(), Cell::Text(s("status")?)),
        ("submitter".into(), Cell::Text(s("submitter")?)),
        ("system".into(), Cell::Text(system_name)),
        ("number_of_nodes".into(), Cell::Text(s("number_of_nodes")?)),
        (
            "host_processor_model_name".into(),
            Cell::Text(s("host_processor_model_name")?),
        ),
        (
            "host_processors_count".into(),
            Cell::Int(int("host_processors_per_node")? * nodes),
        ),
        ("accelerator_model_name".into(), Cell::Text(accel)),
        (
            "accelerators_count".into(),
            Cell::Int(int("accelerators_per_node")? * nodes),
        ),
        ("framework".into(), Cell::Text(framework)),
        ("notes".into(), Cell::Text(notes.join(";"))),
        ("private_id".into(), Cell::Text(String::new())),
    ])
}

/// Runs `f` over `items` on `threads` workers; results in the items' order.
fn par_map<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let slots: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let workers = threads.clamp(1, items.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every item is mapped")
        })
        .collect()
}

pub(super) fn display_path<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&p.display())
}

/// The RCP step of one folder: the package checker's check (with its bypass), and the
/// summarizer's view of it (no bypass, the GBS and samples-to-converge columns).
fn rcp_step(folder: &Path, opts: &RcpOptions, committed: f64) -> RcpStep {
    let r = check_benchmark(folder, opts);
    // The summarizer's column, which reads a bypassed pass as the failure it was.
    let column = if r.status == RcpStatus::Error {
        String::new()
    } else {
        r.summarizer_column().to_string()
    };
    let max_dropped = r.benchmark.as_deref().map_or(1, super::max_dropped_runs);
    let not_converged = r.runs.iter().filter(|x| !x.converged).count();
    let samples = (r.status != RcpStatus::Error && not_converged <= max_dropped)
        .then(|| r.runs.iter().map(|x| x.to_converge).collect());
    RcpStep {
        passed: r.passed,
        bypassed: r.bypassed,
        message: r.official_message.clone(),
        column,
        scaling_factor: r.final_factor(committed),
        batch_size: if r.status == RcpStatus::Error {
            None
        } else {
            r.batch_size
        },
        samples,
        error: r.error.clone(),
        detail: r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated required fields are the ones the package module checks.
    #[test]
    fn generated_fields_agree_with_the_package_module() {
        assert_eq!(
            facts(Ruleset::V5_0_0).unwrap().required_fields,
            &super::super::package::SYSTEM_DESC_FIELDS[..]
        );
    }
}
