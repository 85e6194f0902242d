//! Which training ruleset a results folder was made for, with the evidence in words.
//!
//! No log names its round, so a folder's ruleset is either given (`--ruleset`) or inferred
//! once for the whole folder, never per file. [`choose_ruleset`] keeps the rulesets that
//!
//! 1. allow every benchmark the folder holds (the folder names and each log's
//!    `submission_benchmark`);
//! 2. fail no folder for compliance where another candidate accepts it: a ruleset under which
//!    more files of a folder fail the compliance check than the olympic allowance (1; 4 for
//!    unet3d) and than under another candidate is out;
//!
//! (A key only a ruleset requires, such as `lowest_numerical_precision_in_linear` from 6.1.0,
//! shows in 2: its absence fails the files under that ruleset. Its presence is no evidence:
//! loggers log keys before any ruleset checks them, e.g. 5.0 logs carry `submission_org`, which
//! only 5.1.0 and later check.)
//!
//! One ruleset left: it is the answer. Several left that give every file the same compliance
//! verdict and every folder the same RCP check (message, verdict, factor): the choice changes
//! nothing, the newest is taken and the evidence says so. Otherwise the inference refuses
//! ([`RulesetError::Unsettled`]) and says what each candidate would change: pass `--ruleset`.
//!
//! ```
//! use mllog_core::compliance::{example_log, Division, Ruleset};
//! use mllog_core::results::ruleset::{choose_ruleset, RulesetError};
//! use mllog_core::Benchmark;
//!
//! let root = tempfile::tempdir()?;
//! let folder = root.path().join("results/sys/llama2_70b_lora");
//! std::fs::create_dir_all(&folder)?;
//! let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
//! for i in 0..10 {
//!     std::fs::write(folder.join(format!("result_{i}.txt")), &log)?;
//! }
//! let choice = choose_ruleset(None, root.path()).unwrap();
//! assert_eq!(choice.ruleset, Ruleset::V6_1_0);
//! assert!(!choice.given && !choice.evidence.is_empty());
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
}

/// Why no ruleset could be chosen.
#[derive(Debug, thiserror::Error)]
pub enum RulesetError {
    /// The evidence leaves several rulesets that would give different results, or none.
    #[error("{}: the ruleset cannot be inferred ({}): {}; pass --ruleset X.Y.Z", .dir.display(), candidates_words(.candidates), .evidence.join("; "))]
    Unsettled {
        /// The folder.
        dir: PathBuf,
        /// The rulesets left (empty: none fits).
        candidates: Vec<Ruleset>,
        /// The evidence, in words.
        evidence: Vec<String>,
    },
    /// No `result_*.txt` under the folder.
    #[error("{}: no result_*.txt found", .dir.display())]
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

fn candidates_words(c: &[Ruleset]) -> String {
    if c.is_empty() {
        "no ruleset fits".into()
    } else {
        format!("{} fit", list(c))
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
    /// Passes the compliance check, per candidate (same order as the candidates).
    passes: Vec<bool>,
    /// The first error per candidate.
    first_error: Vec<Option<String>>,
    benchmark: Option<String>,
}

/// The ruleset for the folder `dir` (a submission, its `results/`, a system folder or one
/// benchmark folder): `given` when there is one, else inferred from the folder as the module
/// documentation says.
pub fn choose_ruleset(given: Option<Ruleset>, dir: &Path) -> Result<RulesetChoice, RulesetError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RulesetError::Io { path, source }
    };
    let folders = benchmark_folders(dir).map_err(io(dir))?;
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
        });
    }
    let mut evidence = Vec::new();
    // 1. The benchmarks.
    let folder_benchmarks: Vec<String> = folders
        .iter()
        .map(|f| {
            let n = f
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if n == "mask" {
                "maskrcnn".into()
            } else {
                n
            }
        })
        .collect();
    let mut files = Vec::new();
    for (i, folder) in folders.iter().enumerate() {
        for file in result_files(folder).map_err(io(folder))? {
            let open = || -> Result<_, RulesetError> {
                Ok(std::io::BufReader::with_capacity(
                    1 << 16,
                    std::fs::File::open(&file).map_err(io(&file))?,
                ))
            };
            let reports = check_reader_each(&Ruleset::ALL, open()?).map_err(io(&file))?;
            let benchmark = reports.iter().find_map(|r| r.benchmark.clone());
            files.push(FileEvidence {
                folder: i,
                passes: reports.iter().map(|r| r.passed(false)).collect(),
                first_error: reports
                    .iter()
                    .map(|r| r.errors().next().map(|f| f.message.clone()))
                    .collect(),
                benchmark,
            });
        }
    }
    let mut names: BTreeSet<String> = folder_benchmarks.iter().cloned().collect();
    names.extend(files.iter().filter_map(|f| f.benchmark.clone()));
    let mut candidates: Vec<usize> = (0..Ruleset::ALL.len()).collect();
    for name in &names {
        let Some(b) = Benchmark::from_name(name) else {
            evidence.push(format!(
                "{name}: not a benchmark any ruleset names; not used"
            ));
            continue;
        };
        let allowed: Vec<Ruleset> = Ruleset::ALL
            .iter()
            .copied()
            .filter(|r| rules(*r).allows(b))
            .collect();
        evidence.push(format!(
            "{name} is allowed by {}",
            if allowed.is_empty() {
                "no ruleset".into()
            } else {
                list(&allowed)
            }
        ));
        candidates.retain(|&i| allowed.contains(&Ruleset::ALL[i]));
    }
    // 2. Compliance: a ruleset under which a folder has more failing files than the
    // olympic allowance and than under another candidate is out.
    let fails = |c: usize, fi: usize| {
        files
            .iter()
            .filter(|f| f.folder == fi && !f.passes[c])
            .count()
    };
    let mut accepted = Vec::new();
    for &c in &candidates {
        let r = Ruleset::ALL[c];
        let mut ok = true;
        for (fi, folder) in folders.iter().enumerate() {
            let best = candidates.iter().map(|&o| fails(o, fi)).min().unwrap_or(0);
            let allowance = max_dropped_runs(&folder_benchmarks[fi]);
            let n = fails(c, fi);
            if n > allowance.max(best) {
                ok = false;
                let total = files.iter().filter(|f| f.folder == fi).count();
                let first = files
                    .iter()
                    .find(|f| f.folder == fi && !f.passes[c])
                    .and_then(|f| f.first_error[c].as_deref())
                    .unwrap_or("?");
                evidence.push(format!(
                    "under {r}, {n} of {total} files of {} fail (first: {first})",
                    folder.display(),
                ));
            }
        }
        if ok {
            accepted.push(c);
        }
    }
    if accepted.len() < candidates.len() && !accepted.is_empty() {
        evidence.push(format!(
            "fewer files fail under {}",
            list(
                &accepted
                    .iter()
                    .map(|&i| Ruleset::ALL[i])
                    .collect::<Vec<_>>()
            )
        ));
    }
    let candidates = accepted;
    let cands: Vec<Ruleset> = candidates.iter().map(|&i| Ruleset::ALL[i]).collect();
    match candidates.len() {
        0 => Err(RulesetError::Unsettled {
            dir: dir.to_path_buf(),
            candidates: cands,
            evidence,
        }),
        1 => {
            let r = cands[0];
            evidence.push(format!("ruleset {r}: the only one that fits"));
            Ok(RulesetChoice {
                ruleset: r,
                given: false,
                candidates: cands,
                evidence,
            })
        }
        _ => {
            // Several fit: the choice matters only if they differ on this folder.
            let mut differences = Vec::new();
            let first = candidates[0];
            for &c in &candidates[1..] {
                let verdicts = files
                    .iter()
                    .filter(|f| f.passes[c] != f.passes[first])
                    .count();
                if verdicts > 0 {
                    differences.push(format!(
                        "{} and {} disagree on {verdicts} file(s)",
                        Ruleset::ALL[first],
                        Ruleset::ALL[c]
                    ));
                }
            }
            for folder in &folders {
                let outcomes: Vec<(Ruleset, String)> =
                    cands.iter().map(|&r| (r, rcp_outcome(folder, r))).collect();
                if outcomes.windows(2).any(|w| w[0].1 != w[1].1) {
                    differences.push(format!(
                        "their RCP checks of {} differ ({})",
                        folder.display(),
                        outcomes
                            .iter()
                            .map(|(r, o)| format!("{r}: {o}"))
                            .collect::<Vec<_>>()
                            .join("; ")
                    ));
                }
            }
            if differences.is_empty() {
                let r = *cands.last().expect("several");
                evidence.push(format!(
                    "{} fit and give every file the same compliance verdict and every folder the \
                     same RCP check, so the choice does not change the result: using the \
                     newest, {r}",
                    list(&cands)
                ));
                Ok(RulesetChoice {
                    ruleset: r,
                    given: false,
                    candidates: cands,
                    evidence,
                })
            } else {
                evidence.extend(differences);
                Err(RulesetError::Unsettled {
                    dir: dir.to_path_buf(),
                    candidates: cands,
                    evidence,
                })
            }
        }
    }
}

/// The RCP check's outcome under `ruleset`, in words: what decides the score.
fn rcp_outcome(folder: &Path, ruleset: Ruleset) -> String {
    let r = super::rcp::check_benchmark(folder, &super::rcp::RcpOptions::new(ruleset));
    let factor = match r.scaling {
        super::rcp::Scaling::Write(f) => super::rcp::py_float(f),
        super::rcp::Scaling::Delete => "1.0".into(),
        super::rcp::Scaling::Untouched => "scaling.json untouched".into(),
    };
    format!(
        "{}, {}, factor {factor}",
        r.official_message,
        if r.passed { "passed" } else { "failed" }
    )
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
