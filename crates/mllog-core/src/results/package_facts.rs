//! The facts `verify` needs for a ruleset (the benchmarks the package checker reviews and the
//! result files it wants of each, the fields `system_desc_checker` requires, the summarizer's
//! columns), read from a package at run time (`mllog verify --rules`), whatever the ruleset:
//! the built-in facts ([`super::verify_data`], 5.0.0 to 6.1.0) serve only without a package.
//!
//! As the package computes them: the allowed benchmarks are `benchmark_meta.py`'s
//! `_ALL_ALLOWED_BENCHMARKS['training']` of the ruleset, else of its short form (`4.1` for
//! `4.1.0`), as `get_allowed_benchmarks` looks them up (a ruleset in neither is its
//! `ValueError`, here an error naming the file); the counts are its `_ALL_RESULT_FILE_COUNTS`
//! of the usage (`get_result_file_counts`); the required fields are
//! `system_desc_checker.py`'s `required_fields` list; the `status` values are checked from
//! ruleset 4 on (the checker's condition on the major version); the columns are
//! `result_summarizer._get_column_schema`'s: the system columns, six per allowed benchmark
//! (detailed) or one, and the two links.

use std::path::Path;
use std::sync::{Mutex, OnceLock};

use super::py_literal::{assigned, Literal};
use super::usage::Usage;
use super::verify_data::RulesetFacts;

const SYSTEM_COLUMNS: [&str; 12] = [
    "division",
    "availability",
    "submitter",
    "system",
    "number_of_nodes",
    "host_processor_model_name",
    "host_processors_count",
    "accelerator_model_name",
    "accelerators_count",
    "framework",
    "notes",
    "private_id",
];
const METRICS: [&str; 6] = [
    "time_to_train",
    "Energy",
    "GBS",
    "samples_to_converge",
    "RCP",
    "rcp_scaling_factor",
];
const LINKS: [&str; 2] = ["details_url", "code_url"];

/// The facts read so far, by (package folder, ruleset). The review's code takes the built-in
/// `&'static` facts; facts read at run time are kept for the life of the process (a handful
/// per run: one per package and ruleset) rather than copied through every function.
type Cache = Mutex<Vec<((std::path::PathBuf, String), &'static RulesetFacts)>>;
static READ: OnceLock<Cache> = OnceLock::new();

/// The facts of training ruleset `ruleset` from the package folder `root`, or the error
/// naming the file that does not give them.
pub fn read_facts(root: &Path, ruleset: &str) -> Result<&'static RulesetFacts, String> {
    read_usage_facts(root, Usage::Training, ruleset)
}

/// [`read_facts`] of a ruleset of `usage`: for HPC, `_ALL_ALLOWED_BENCHMARKS['hpc']`, and no
/// `status` check (`system_desc_checker` checks it for training only).
pub fn read_usage_facts(
    root: &Path,
    usage: Usage,
    ruleset: &str,
) -> Result<&'static RulesetFacts, String> {
    let key = (root.to_path_buf(), format!("{}_{ruleset}", usage.as_str()));
    let cache = READ.get_or_init(|| Mutex::new(Vec::new()));
    if let Some((_, f)) = cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(k, _)| *k == key)
    {
        return Ok(f);
    }
    let facts = read(root, usage, ruleset)?;
    let leaked: &'static RulesetFacts = Box::leak(Box::new(facts));
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((key, leaked));
    Ok(leaked)
}

fn leak_strs(v: Vec<String>) -> &'static [&'static str] {
    let v: Vec<&'static str> = v
        .into_iter()
        .map(|s| &*Box::leak(s.into_boxed_str()))
        .collect();
    Box::leak(v.into_boxed_slice())
}

fn source(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn read(root: &Path, usage: Usage, ruleset: &str) -> Result<RulesetFacts, String> {
    let meta_path = root.join("benchmark_meta.py");
    let meta = source(&meta_path)?;
    let u = usage.as_str();
    let training = assigned(&meta, "_ALL_ALLOWED_BENCHMARKS")
        .and_then(|a| a.get(u).cloned())
        .ok_or_else(|| {
            format!(
                "{}: no _ALL_ALLOWED_BENCHMARKS literal with {u} rulesets",
                meta_path.display()
            )
        })?;
    let short = ruleset.rsplit_once('.').map_or(ruleset, |(s, _)| s);
    let listed = training.get(ruleset).or_else(|| training.get(short));
    let Some(listed) = listed else {
        let have = match &training {
            Literal::Dict(e) => e
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            _ => String::new(),
        };
        return Err(format!(
            "{}: the package checker allows no benchmarks for {u} ruleset {ruleset} (nor \
             {short}); it lists {have} (benchmark_meta.get_allowed_benchmarks raises \
             ValueError there)",
            meta_path.display()
        ));
    };
    let mut allowed = listed.strings().ok_or_else(|| {
        format!(
            "{}: the benchmarks of {ruleset} are not a list of names",
            meta_path.display()
        )
    })?;
    // Order kept, repeats dropped (4.0 lists stable_diffusion twice), as the columns are.
    let mut seen = std::collections::HashSet::new();
    allowed.retain(|b| seen.insert(b.clone()));
    let desc_path = root.join("system_desc_checker/system_desc_checker.py");
    let required = assigned(&source(&desc_path)?, "required_fields")
        .and_then(|l| l.strings())
        .ok_or_else(|| format!("{}: no required_fields list", desc_path.display()))?;
    let major: u32 = ruleset
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let mut detailed: Vec<String> = SYSTEM_COLUMNS.iter().map(|s| s.to_string()).collect();
    let mut summary = detailed.clone();
    for b in &allowed {
        detailed.extend(METRICS.iter().map(|m| format!("{b}:{m}")));
        summary.push(b.clone());
    }
    detailed.extend(LINKS.iter().map(|s| s.to_string()));
    summary.extend(LINKS.iter().map(|s| s.to_string()));
    let counts =
        super::py_literal::usage_counts(&meta, "_ALL_RESULT_FILE_COUNTS", u).ok_or_else(|| {
            format!(
                "{}: no _ALL_RESULT_FILE_COUNTS literal with {u} counts",
                meta_path.display()
            )
        })?;
    let counts: Vec<(&'static str, usize)> = counts
        .into_iter()
        .map(|(b, n)| (&*Box::leak(b.into_boxed_str()), n))
        .collect();
    Ok(RulesetFacts {
        ruleset: Box::leak(ruleset.to_owned().into_boxed_str()),
        required_fields: leak_strs(required),
        status_checked: usage == Usage::Training && major >= 4,
        allowed_benchmarks: leak_strs(allowed),
        detailed_columns: leak_strs(detailed),
        summary_columns: leak_strs(summary),
        result_file_counts: Box::leak(counts.into_boxed_slice()),
    })
}
