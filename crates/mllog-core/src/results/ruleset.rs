//! Which training ruleset a results folder was made for, with the evidence in words.
//!
//! No log names its round, so a folder's ruleset is either given (`--ruleset`) or inferred
//! once for the whole folder, never per file. [`choose_ruleset`] weighs every ruleset against
//! all the evidence; each of these speaks against a ruleset:
//!
//! 1. a benchmark folder it does not allow (the folder name and each log's
//!    `submission_benchmark`);
//! 2. a folder with more files failing its compliance check than the olympic allowance (1; 4 for
//!    unet3d) and than under another ruleset that allows the benchmark;
//! 3. a folder whose batch size has no RCP record in its tables ("Missing RCP") where another
//!    ruleset that allows the benchmark has one.
//!
//! (A key only a ruleset requires, such as `lowest_numerical_precision_in_linear` from 6.1.0,
//! shows in 2: its absence fails the files under that ruleset. Its presence is no evidence:
//! loggers log keys before any ruleset checks them, e.g. 5.0 logs carry `submission_org`, which
//! only 5.1.0 and later check.)
//!
//! Exactly one ruleset with nothing against it: it is the answer. None: the folders conflict
//! (say, a benchmark only 5.0.0 allows beside a batch size only 5.1.0 has a record for), and the
//! inference refuses ([`RulesetError::Unsettled`]) with what speaks against each. Several: it
//! refuses too, naming them. Rounds that agree on every verdict still differ in what the review
//! shows (the RCP means and minimum acceptable means, the summarizer's columns and links), so a
//! choice among them would be a guess. An unreadable file is left out of the evidence and
//! listed in [`RulesetChoice::unreadable`].
//!
//! ```
//! use mllog_core::compliance::{example_log, Division, Ruleset};
//! use mllog_core::results::ruleset::{choose_ruleset, RulesetError};
//! use mllog_core::Benchmark;
//!
//! let write = |dir: &std::path::Path, r: Ruleset, b: Benchmark| -> std::io::Result<()> {
//!     let log = example_log(r, b, Division::Closed).unwrap();
//!     std::fs::create_dir_all(dir)?;
//!     for i in 0..10 {
//!         std::fs::write(dir.join(format!("result_{i}.txt")), &log)?;
//!     }
//!     Ok(())
//! };
//! // stable_diffusion: only 5.0.0 allows it.
//! let root = tempfile::tempdir()?;
//! write(&root.path().join("results/sys/stable_diffusion"), Ruleset::V5_0_0, Benchmark::StableDiffusion)?;
//! let choice = choose_ruleset(None, root.path()).unwrap();
//! assert_eq!(choice.ruleset, Ruleset::V5_0_0);
//! assert!(!choice.given && !choice.evidence.is_empty());
//! // A 5.0.0 llama2_70b_lora log fits 5.0.0, 5.1.0 and 6.0.0: refused, not guessed.
//! let several = tempfile::tempdir()?;
//! write(&several.path().join("results/sys/llama2_70b_lora"), Ruleset::V5_0_0, Benchmark::Llama2_70bLora)?;
//! match choose_ruleset(None, several.path()) {
//!     Err(RulesetError::Unsettled { candidates, .. }) => assert_eq!(candidates.len(), 3),
//!     other => panic!("{other:?}"),
//! }
//! let given = choose_ruleset(Some(Ruleset::V5_0_0), root.path()).unwrap();
//! assert!(given.given && given.ruleset == Ruleset::V5_0_0);
//! let empty = tempfile::tempdir()?;
//! assert!(matches!(choose_ruleset(None, empty.path()), Err(RulesetError::NoResults { .. })));
//! # Ok::<(), std::io::Error>(())
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::max_dropped_runs;
use super::score::{benchmark_folders, result_files};
use crate::compliance::{check_reader_each, rules, Ruleset};
use crate::keys::Benchmark;

/// The ruleset a folder is checked under, and why.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RulesetChoice {
    /// The ruleset.
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser_ruleset"))]
    pub ruleset: Ruleset,
    /// Whether it was given (`--ruleset`) rather than inferred.
    pub given: bool,
    /// The rulesets the evidence left, oldest first (just the given one when given).
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser_rulesets"))]
    pub candidates: Vec<Ruleset>,
    /// The evidence and the decision, in words.
    pub evidence: Vec<String>,
    /// The files or folders that could not be read, each `path: error` (left out of the
    /// evidence; the caller says them and exits 2).
    pub unreadable: Vec<String>,
}

/// Why no ruleset could be chosen.
#[derive(Debug, thiserror::Error)]
pub enum RulesetError {
    /// The evidence leaves several rulesets that would give different results, or none.
    #[error("{}: the ruleset cannot be inferred ({}); pass --ruleset X.Y.Z with the round you submit to{}. {}", .dir.display(), candidates_words(.candidates), pass_words(.candidates), evidence_block(.evidence))]
    Unsettled {
        /// The folder.
        dir: PathBuf,
        /// The rulesets left (empty: none fits).
        candidates: Vec<Ruleset>,
        /// The evidence, in words.
        evidence: Vec<String>,
    },
    /// No `result_*.txt` under the folder.
    #[error("{}", no_results_words(.dir))]
    NoResults {
        /// The folder.
        dir: PathBuf,
    },
    /// A folder or file could not be read.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The evidence of an inference that did not settle, one item a line, after the decision
/// and what to do: read on a terminal, a sentence per ruleset rather than one long line.
pub(crate) fn evidence_block(evidence: &[String]) -> String {
    let mut out = String::from("The evidence:");
    for e in evidence {
        out.push_str("\n  - ");
        out.push_str(e);
    }
    out
}

fn candidates_words(c: &[Ruleset]) -> String {
    if c.is_empty() {
        "no ruleset fits".into()
    } else {
        format!("{} fit the evidence", list(c))
    }
}

fn pass_words(c: &[Ruleset]) -> String {
    if c.len() > 1 {
        format!(" (one of {})", list(c))
    } else {
        String::new()
    }
}

fn list(c: &[Ruleset]) -> String {
    c.iter().map(|r| r.as_str()).collect::<Vec<_>>().join(", ")
}

#[cfg(feature = "serde")]
fn ser_ruleset<S: serde::Serializer>(r: &Ruleset, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(r.as_str())
}

#[cfg(feature = "serde")]
fn ser_rulesets<S: serde::Serializer>(r: &[Ruleset], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(r.iter().map(|r| r.as_str()))
}

/// [`choose_ruleset`] without a given ruleset.
pub fn infer_ruleset(dir: &Path) -> Result<RulesetChoice, RulesetError> {
    choose_ruleset(None, dir)
}

/// What one file says about the rulesets.
struct FileEvidence {
    folder: usize,
    /// Passes the compliance check, per ruleset of [`Ruleset::ALL`].
    passes: Vec<bool>,
    /// The first error per ruleset.
    first_error: Vec<Option<String>>,
    benchmark: Option<String>,
}

/// Why `dir` holds no benchmark folder, in words: a folder of submitter folders (each with its
/// `results/`) is said as such, so that the user gives one of them.
pub fn no_results_words(dir: &Path) -> String {
    let submitters: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            let mut v: Vec<String> = rd
                .filter_map(Result::ok)
                .filter(|e| e.path().join("results").is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        })
        .unwrap_or_default();
    if submitters.is_empty() {
        format!(
            "{}: no result_*.txt found (expected a submitter folder, its results/, a system \
             folder or a benchmark folder)",
            dir.display()
        )
    } else {
        format!(
            "{}: a folder of {} submitter folder(s) ({}); give one submitter folder (the one \
             holding results/ and systems/)",
            dir.display(),
            submitters.len(),
            submitters.join(", ")
        )
    }
}

/// The ruleset for the folder `dir` (a submission, its `results/`, a system folder or one
/// benchmark folder): `given` when there is one, else inferred from the folder as the module
/// documentation says.
pub fn choose_ruleset(given: Option<Ruleset>, dir: &Path) -> Result<RulesetChoice, RulesetError> {
    let folders = benchmark_folders(dir).map_err(|source| RulesetError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    if folders.is_empty() {
        return Err(RulesetError::NoResults {
            dir: dir.to_path_buf(),
        });
    }
    if let Some(r) = given {
        return Ok(RulesetChoice {
            ruleset: r,
            given: true,
            candidates: vec![r],
            evidence: vec![format!("ruleset {r}: given (--ruleset)")],
            unreadable: Vec::new(),
        });
    }
    let mut evidence = Vec::new();
    let mut unreadable = Vec::new();
    let folder_benchmarks: Vec<String> = folders.iter().map(|f| folder_benchmark(f)).collect();
    // An unreadable file (or folder) is said and left out: the rest still tells the round.
    let mut files = Vec::new();
    for (i, folder) in folders.iter().enumerate() {
        let listed = match result_files(folder) {
            Ok(l) => l,
            Err(e) => {
                unreadable.push(format!("{}: {e}", folder.display()));
                continue;
            }
        };
        for file in listed {
            let reports = std::fs::File::open(&file)
                .map(|f| std::io::BufReader::with_capacity(1 << 16, f))
                .and_then(|r| check_reader_each(&Ruleset::ALL, r));
            let reports = match reports {
                Ok(r) => r,
                Err(e) => {
                    unreadable.push(format!("{}: {e}", file.display()));
                    continue;
                }
            };
            files.push(FileEvidence {
                folder: i,
                passes: reports.iter().map(|r| r.passed(false)).collect(),
                first_error: reports
                    .iter()
                    .map(|r| r.errors().next().map(|f| f.message.clone()))
                    .collect(),
                benchmark: reports.iter().find_map(|r| r.benchmark.clone()),
            });
        }
    }
    for u in &unreadable {
        evidence.push(format!("{u}: unreadable, not used as evidence"));
    }
    // The benchmarks each folder stands for (its name and its logs' submission_benchmark).
    let mut folder_names: Vec<BTreeSet<String>> = folder_benchmarks
        .iter()
        .map(|n| BTreeSet::from([n.clone()]))
        .collect();
    for f in &files {
        if let Some(b) = &f.benchmark {
            folder_names[f.folder].insert(b.clone());
        }
    }
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for n in folder_names.iter().flatten() {
        names.insert(n);
    }
    let allowed_by = |name: &str| -> Option<Vec<Ruleset>> {
        Benchmark::from_name(name).map(|b| {
            Ruleset::ALL
                .iter()
                .copied()
                .filter(|r| rules(*r).allows(b))
                .collect()
        })
    };
    for name in &names {
        match allowed_by(name) {
            None => evidence.push(format!(
                "{name}: not a benchmark any ruleset names; not used"
            )),
            Some(a) => evidence.push(format!(
                "{name} is allowed by {}",
                if a.is_empty() {
                    "no ruleset".into()
                } else {
                    list(&a)
                }
            )),
        }
    }
    // Whether ruleset `r` allows every benchmark folder `fi` stands for.
    let folder_allowed = |r: Ruleset, fi: usize| {
        folder_names[fi]
            .iter()
            .all(|n| allowed_by(n).is_none_or(|a| a.contains(&r)))
    };
    // Every piece of evidence against each ruleset. A ruleset counts only when nothing speaks
    // against it: one disallowed benchmark folder does not pick the ruleset for the others.
    let mut conflicts: Vec<Vec<String>> = vec![Vec::new(); Ruleset::ALL.len()];
    let fails = |c: usize, fi: usize| {
        files
            .iter()
            .filter(|f| f.folder == fi && !f.passes[c])
            .count()
    };
    for (fi, folder) in folders.iter().enumerate() {
        let allowing: Vec<usize> = (0..Ruleset::ALL.len())
            .filter(|&c| folder_allowed(Ruleset::ALL[c], fi))
            .collect();
        for (c, &r) in Ruleset::ALL.iter().enumerate() {
            if !allowing.contains(&c) {
                let bad: Vec<&str> = folder_names[fi]
                    .iter()
                    .filter(|n| allowed_by(n).is_some_and(|a| !a.contains(&r)))
                    .map(String::as_str)
                    .collect();
                conflicts[c].push(format!(
                    "{} ({}) is not allowed by {r}",
                    bad.join(", "),
                    folder.display()
                ));
            }
        }
        // Compliance: more failing files than the olympic allowance and than under another
        // ruleset that allows the benchmark.
        let best = allowing.iter().map(|&o| fails(o, fi)).min().unwrap_or(0);
        let allowance = max_dropped_runs(&folder_benchmarks[fi]);
        let total = files.iter().filter(|f| f.folder == fi).count();
        for &c in &allowing {
            let n = fails(c, fi);
            if n > allowance.max(best) {
                let first = files
                    .iter()
                    .find(|f| f.folder == fi && !f.passes[c])
                    .and_then(|f| f.first_error[c].as_deref())
                    .unwrap_or("?");
                conflicts[c].push(format!(
                    "under {}, {n} of {total} files of {} fail the compliance check (first: \
                     {first}), more than the olympic allowance of {allowance}",
                    Ruleset::ALL[c],
                    folder.display(),
                ));
            }
        }
        // RCP: a ruleset with no reference point for the folder's batch size, where another
        // that allows the benchmark has one.
        let rcp: Vec<(usize, super::rcp::RcpResult)> = allowing
            .iter()
            .map(|&c| {
                (
                    c,
                    super::rcp::check_benchmark(
                        folder,
                        &super::rcp::RcpOptions::new(Ruleset::ALL[c]),
                    ),
                )
            })
            .collect();
        let with_record: Vec<Ruleset> = rcp
            .iter()
            .filter(|(_, r)| has_record(r))
            .map(|(c, _)| Ruleset::ALL[*c])
            .collect();
        if !with_record.is_empty() {
            for (c, r) in &rcp {
                if lacks_record(r) {
                    conflicts[*c].push(format!(
                        "under {}, {} has no RCP record for its batch size {} ({}); {} {} one",
                        Ruleset::ALL[*c],
                        folder.display(),
                        r.batch_size.map_or("?".into(), super::rcp::show),
                        r.official_message.trim(),
                        list(&with_record),
                        if with_record.len() > 1 { "have" } else { "has" }
                    ));
                }
            }
        }
    }
    let consistent: Vec<Ruleset> = Ruleset::ALL
        .iter()
        .enumerate()
        .filter(|(c, _)| conflicts[*c].is_empty())
        .map(|(_, r)| *r)
        .collect();
    match consistent.as_slice() {
        [r] => {
            let r = *r;
            for (c, other) in Ruleset::ALL.iter().enumerate() {
                if !conflicts[c].is_empty() {
                    evidence.push(format!("not {other}: {}", conflicts[c].join("; ")));
                }
            }
            evidence.push(format!(
                "ruleset {r}: the only one consistent with all the evidence"
            ));
            Ok(RulesetChoice {
                ruleset: r,
                given: false,
                candidates: consistent,
                evidence,
                unreadable,
            })
        }
        [] => {
            // Only the rulesets that allow some folder are worth the user's reading.
            for (c, r) in Ruleset::ALL.iter().enumerate() {
                if (0..folders.len()).any(|fi| folder_allowed(*r, fi)) {
                    evidence.push(format!("not {r}: {}", conflicts[c].join("; ")));
                }
            }
            evidence.push(
                "no ruleset is consistent with all the evidence: the folders conflict (a \
                 benchmark the round does not allow, or a batch size only another round has an \
                 RCP record for)"
                    .into(),
            );
            Err(RulesetError::Unsettled {
                dir: dir.to_path_buf(),
                candidates: consistent,
                evidence,
            })
        }
        several => {
            for (c, r) in Ruleset::ALL.iter().enumerate() {
                if !conflicts[c].is_empty() {
                    evidence.push(format!("not {r}: {}", conflicts[c].join("; ")));
                }
            }
            // Never a guess: the rounds differ in their RCP tables (means, minimum acceptable
            // means), the summarizer's columns and the rules, even where the verdicts agree.
            evidence.push(format!(
                "{} are all consistent with the evidence, and the review differs between them \
                 (RCP tables, the summarizer's columns and links), and the logs do not name \
                 their round",
                list(several)
            ));
            Err(RulesetError::Unsettled {
                dir: dir.to_path_buf(),
                candidates: consistent,
                evidence,
            })
        }
    }
}

/// The benchmark a folder stands for by its name (`mask` is maskrcnn's, as the official
/// tools name it).
pub(super) fn folder_benchmark(folder: &Path) -> String {
    let n = folder
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if n == "mask" {
        "maskrcnn".into()
    } else {
        n
    }
}

/// A reference point serves the folder's batch size.
pub(super) fn has_record(r: &super::rcp::RcpResult) -> bool {
    use super::rcp::RcpStatus::*;
    matches!(r.status, Found | Interpolated | BelowSmallest)
}

/// The ruleset has no reference point for the folder's batch size.
pub(super) fn lacks_record(r: &super::rcp::RcpResult) -> bool {
    use super::rcp::RcpStatus::*;
    matches!(r.status, Missing | NoRcps)
        || (r.status == Error
            && r.error
                .as_deref()
                .is_some_and(|e| e.starts_with("no RCP file")))
}

/// For `mllog check FILE` without `--ruleset`: the older rulesets that allow the log's
/// benchmark and under which it passes too, given the reports of [`check_reader_each`] over
/// [`Ruleset::ALL`] and the ruleset used.
pub fn also_passes_under(
    reports: &[crate::compliance::ComplianceReport],
    used: Ruleset,
) -> Vec<Ruleset> {
    reports
        .iter()
        .filter(|r| r.ruleset < used && r.passed(false))
        .map(|r| r.ruleset)
        .collect()
}
