//! Which ruleset a results folder was made for, among those a package ships: the inference of
//! [`super::ruleset`] with the package's rules instead of the built-in tables (`mllog score
//! --rules`, `mllog verify --rules` without `--ruleset`).
//!
//! The candidates are the source's `training_<X.Y.Z>` folders. Against each speaks, as in the
//! built-in inference: a benchmark folder it has no rules for (no `closed_<benchmark>.yaml`,
//! by the folder's name and each log's `submission_benchmark`); more files failing its rules
//! (run by the rule engine) than the olympic allowance and than under another candidate; no
//! RCP record for the folder's batch size in its RCP tables where another candidate has one.
//! One candidate left: it is the answer, with the evidence. None, or several: an error naming
//! the source and the rulesets it has or the ones left, never a guess.

use std::path::Path;

use super::max_dropped_runs;
use super::rcp::{check_benchmark, RcpOptions};
use super::rcp_tables::RcpTables;
use super::rules_check::{source_rulesets, RulesCheck};
use super::ruleset::{evidence_block, folder_benchmark, has_record, lacks_record};
use super::score::{benchmark_folders, result_files};
use crate::rules_source::RulesSource;

/// The ruleset chosen among a source's, and why (the JSON shape of
/// [`super::ruleset::RulesetChoice`]).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SourceChoice {
    /// The ruleset.
    pub ruleset: String,
    /// Whether it was given (`--ruleset`) rather than inferred.
    pub given: bool,
    /// The rulesets the evidence left, oldest first.
    pub candidates: Vec<String>,
    /// The evidence and the decision, in words.
    pub evidence: Vec<String>,
    /// The files that could not be read (left out of the evidence).
    pub unreadable: Vec<String>,
}

/// The training ruleset of `dir` among the source's: `given`, when it is one the source ships,
/// else inferred as the module documentation says. The error is in words, naming the source.
pub fn choose_source_ruleset(
    source: &RulesSource,
    given: Option<&str>,
    dir: &Path,
) -> Result<SourceChoice, String> {
    let have = source_rulesets(source, "training");
    let has = || has_words(source, &have);
    if let Some(r) = given {
        if !have.iter().any(|h| h == r) {
            return Err(format!("ruleset {r}: not in the rules read: {}", has()));
        }
        return Ok(SourceChoice {
            ruleset: r.to_owned(),
            given: true,
            candidates: vec![r.to_owned()],
            evidence: vec![format!("ruleset {r}: given (--ruleset)")],
            unreadable: Vec::new(),
        });
    }
    let Inferred {
        left,
        evidence,
        unreadable,
    } = infer(source, dir)?;
    match left.as_slice() {
        [r] => Ok(inferred(r, "all the evidence", evidence, unreadable)),
        [] => Err(format!(
            "{}: no ruleset of the rules read fits the folder; {}. {}",
            dir.display(),
            has(),
            evidence_block(&evidence[1..])
        )),
        several => Err(format!(
            "{}: the ruleset cannot be inferred ({} fit the evidence); pass --ruleset X.Y.Z \
             with the round you submit to (one of {}). {}",
            dir.display(),
            several.join(", "),
            several.join(", "),
            evidence_block(&evidence)
        )),
    }
}

/// The choice of the one ruleset `consistent_with` left.
fn inferred(
    r: &str,
    consistent_with: &str,
    mut evidence: Vec<String>,
    unreadable: Vec<String>,
) -> SourceChoice {
    evidence.push(format!(
        "ruleset {r}: the only one of the rules read consistent with {consistent_with}"
    ));
    SourceChoice {
        ruleset: r.to_owned(),
        given: false,
        candidates: vec![r.to_owned()],
        evidence,
        unreadable,
    }
}

/// What the evidence leaves of the source's training rulesets for one folder.
struct Inferred {
    left: Vec<String>,
    evidence: Vec<String>,
    unreadable: Vec<String>,
}

fn has_words(source: &RulesSource, have: &[String]) -> String {
    format!(
        "{} ({}) has training rulesets {}",
        source.describe(),
        source.compliance_dir().display(),
        if have.is_empty() {
            "none".to_string()
        } else {
            have.join(", ")
        }
    )
}

fn infer(source: &RulesSource, dir: &Path) -> Result<Inferred, String> {
    let have = source_rulesets(source, "training");
    let folders = benchmark_folders(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if folders.is_empty() {
        return Err(super::ruleset::no_results_words(dir));
    }
    let mut evidence = vec![format!("the rules read: {}", has_words(source, &have))];
    let mut unreadable = Vec::new();
    let checks: Vec<RulesCheck> = have
        .iter()
        .filter_map(|r| match RulesCheck::load(source, "training", r) {
            Ok(c) => Some(c),
            Err(e) => {
                evidence.push(format!(
                    "ruleset {r}: its rules do not load ({e}); not a candidate"
                ));
                None
            }
        })
        .collect();
    let mut against: Vec<Vec<String>> = vec![Vec::new(); checks.len()];
    for folder in &folders {
        let mut names = vec![folder_benchmark(folder)];
        let files = match result_files(folder) {
            Ok(f) => f,
            Err(e) => {
                unreadable.push(format!("{}: {e}", folder.display()));
                continue;
            }
        };
        let mut readable = Vec::new();
        for f in &files {
            match super::summary::summarize_file(f) {
                Ok(s) => {
                    if let Some(b) = s.benchmark
                        && !names.contains(&b)
                    {
                        names.push(b);
                    }
                    readable.push(f.clone());
                }
                Err(e) => unreadable.push(format!("{}: {e}", f.display())),
            }
        }
        let allowing: Vec<usize> = (0..checks.len())
            .filter(|&c| names.iter().all(|n| checks[c].allows(n)))
            .collect();
        for c in (0..checks.len()).filter(|c| !allowing.contains(c)) {
            let bad: Vec<&str> = names
                .iter()
                .filter(|n| !checks[c].allows(n))
                .map(String::as_str)
                .collect();
            against[c].push(format!(
                "{} ({}) has no rules in training_{}",
                bad.join(", "),
                folder.display(),
                checks[c].ruleset()
            ));
        }
        // Compliance under each candidate that has rules for the folder.
        let fails: Vec<(usize, usize, Option<String>)> = allowing
            .iter()
            .map(|&c| {
                let mut n = 0;
                let mut first = None;
                for f in &readable {
                    match checks[c].check_file(f) {
                        Ok(r) if r.passed() => {}
                        Ok(r) => {
                            n += 1;
                            if first.is_none() {
                                first = r
                                    .errors()
                                    .next()
                                    .and_then(|x| x.message.lines().next().map(str::to_owned));
                            }
                        }
                        Err(_) => n += 1,
                    }
                }
                (c, n, first)
            })
            .collect();
        let best = fails.iter().map(|x| x.1).min().unwrap_or(0);
        let allowance = max_dropped_runs(&names[0]);
        for (c, n, first) in &fails {
            if *n > allowance.max(best) {
                against[*c].push(format!(
                    "under {}, {n} of {} files of {} fail its rules (first: {}), more than the \
                     olympic allowance of {allowance}",
                    checks[*c].ruleset(),
                    readable.len(),
                    folder.display(),
                    first.as_deref().unwrap_or("?")
                ));
            }
        }
        // RCP records in the source's tables.
        let rcp: Vec<(usize, super::rcp::RcpResult)> = allowing
            .iter()
            .filter_map(|&c| {
                let tables = RcpTables::open(
                    &source.rcp_dir(),
                    "training",
                    checks[c].ruleset(),
                    source.version.clone(),
                )
                .ok()?;
                let opts = RcpOptions::with_tables(std::sync::Arc::new(tables));
                Some((c, check_benchmark(folder, &opts)))
            })
            .collect();
        let with_record: Vec<&str> = rcp
            .iter()
            .filter(|(_, r)| has_record(r))
            .map(|(c, _)| checks[*c].ruleset())
            .collect();
        if !with_record.is_empty() {
            for (c, r) in &rcp {
                if lacks_record(r) {
                    against[*c].push(format!(
                        "under {}, {} has no RCP record for its batch size {} ({}); {} {} one",
                        checks[*c].ruleset(),
                        folder.display(),
                        r.batch_size.map_or("?".into(), super::rcp::show),
                        r.official_message.trim(),
                        with_record.join(", "),
                        if with_record.len() > 1 { "have" } else { "has" }
                    ));
                }
            }
        }
    }
    for u in &unreadable {
        evidence.push(format!("{u}: unreadable, not used as evidence"));
    }
    let left: Vec<String> = (0..checks.len())
        .filter(|&c| against[c].is_empty())
        .map(|c| checks[c].ruleset().to_owned())
        .collect();
    for (c, a) in against.iter().enumerate() {
        if !a.is_empty() {
            evidence.push(format!("not {}: {}", checks[c].ruleset(), a.join("; ")));
        }
    }
    Ok(Inferred {
        left,
        evidence,
        unreadable,
    })
}

/// The ruleset of a round (a folder of submitter folders) among the source's: `given`, or the
/// one every submitter folder's evidence leaves; otherwise an error naming the candidates.
pub fn choose_source_round_ruleset(
    source: &RulesSource,
    given: Option<&str>,
    dir: &Path,
    submitters: &[std::path::PathBuf],
) -> Result<SourceChoice, String> {
    if given.is_some() {
        return choose_source_ruleset(source, given, dir);
    }
    let have = source_rulesets(source, "training");
    let mut left = have.clone();
    let mut evidence = vec![format!("the rules read: {}", has_words(source, &have))];
    let mut unreadable = Vec::new();
    for s in submitters {
        let n = s
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if benchmark_folders(s).map(|f| f.is_empty()).unwrap_or(false) {
            evidence.push(format!("{n}: no result_*.txt, no evidence"));
            continue;
        }
        let i = infer(source, s)?;
        left.retain(|r| i.left.contains(r));
        evidence.push(format!(
            "{n}: one of {}",
            if i.left.is_empty() {
                "none".into()
            } else {
                i.left.join(", ")
            }
        ));
        unreadable.extend(i.unreadable);
    }
    match left.as_slice() {
        [r] => Ok(inferred(r, "every submitter folder", evidence, unreadable)),
        _ => Err(format!(
            "{}: the ruleset cannot be inferred ({}); pass --ruleset X.Y.Z with the round you \
             submit to. {}",
            dir.display(),
            if left.is_empty() {
                "no ruleset of the rules read fits".to_string()
            } else {
                format!("{} fit the evidence", left.join(", "))
            },
            evidence_block(&evidence)
        )),
    }
}
