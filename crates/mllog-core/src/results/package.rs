//! Submission folder helpers: lay result files out as the package checker expects and check
//! their seeds the way its seed checker does.
//!
//! Layout (`mlperf_logging.package_checker`, training): `OUT/results/<system>/<benchmark>/
//! result_<i>.txt` (i = 0, 1, ... in the order given) and `OUT/systems/<system>.json`. The
//! benchmark comes from each log's `submission_benchmark`.
//!
//! Seed rules (`package_checker/seed_checker.py`, closed division): every run logs at least one
//! `seed` whose value `int()` accepts, with `metadata.file` and `metadata.lineno` (the checker
//! reads both); no two runs of a benchmark may log the same seed on the same file and line;
//! more than one seed in a run is only a warning.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::required_runs;
use crate::record::{LogReader, Value};

/// One `seed` record of a log.
///
/// [`seeds_of`] collects them from a log; [`check_seeds`] compares them across runs.
///
/// ```
/// use mllog_core::record::{Metadata, Record};
/// use mllog_core::results::package::seeds_of;
/// use mllog_core::Value;
///
/// let log = format!(
///     "{}\n{}\n",
///     Record::event("seed", "42").with_metadata(Metadata::at("train.py", 12)),
///     Record::event("global_batch_size", 8u64),
/// );
/// let seeds = seeds_of(&log);
/// assert_eq!(seeds.len(), 1);
/// assert_eq!((seeds[0].file.as_deref(), seeds[0].lineno, seeds[0].log_line), (Some("train.py"), Some(12), 1));
/// assert_eq!(seeds[0].value, Value::from("42"));
/// assert_eq!(seeds[0].as_int(), Some(42)); // as Python's int() reads it
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct SeedRecord {
    /// `metadata.file`.
    pub file: Option<String>,
    /// `metadata.lineno`.
    pub lineno: Option<i128>,
    /// The value.
    pub value: Value,
    /// Physical line in the log, 1-based.
    pub log_line: usize,
}

impl SeedRecord {
    /// The seed as Python's `int()` reads it (integers, floats truncated, decimal strings,
    /// booleans), or `None`.
    pub fn as_int(&self) -> Option<i128> {
        match &self.value {
            Value::Int(i) => Some(*i),
            Value::Float(f) if f.is_finite() => Some(f.trunc() as i128),
            Value::Bool(b) => Some(*b as i128),
            Value::Str(s) => s.trim().replace('_', "").parse().ok(),
            _ => None,
        }
    }
}

/// The `seed` records of a log.
pub fn seeds_of(text: &str) -> Vec<SeedRecord> {
    LogReader::new(text.as_bytes())
        .flatten()
        .filter(|l| l.record.key == "seed")
        .map(|l| SeedRecord {
            file: l.record.metadata.file.as_deref().map(str::to_string),
            lineno: l.record.metadata.lineno.map(i128::from),
            value: l.record.value.clone(),
            log_line: l.lineno,
        })
        .collect()
}

/// The seed checker's verdict over the runs of one benchmark.
///
/// From [`check_seeds`], over the [`seeds_of`] each run's log: two runs that log the same seed
/// from the same source line are an error (the runs were not independent), as is a run with
/// no usable seed.
///
/// ```
/// use mllog_core::record::{Metadata, Record};
/// use mllog_core::results::package::{check_seeds, seeds_of};
///
/// let log = |seed: i64| Record::event("seed", seed).with_metadata(Metadata::at("train.py", 12)).to_line();
/// let runs = vec![
///     ("result_0.txt".to_string(), seeds_of(&log(1234))),
///     ("result_1.txt".to_string(), seeds_of(&log(1234))), // same seed, same line
///     ("result_2.txt".to_string(), seeds_of(&log(99))),
/// ];
/// let report = check_seeds(&runs);
/// assert!(!report.passed());
/// assert_eq!(report.errors.len(), 1);
/// assert!(report.errors[0].starts_with("result_1.txt logs seed 1234 on train.py:12"));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeedReport {
    /// Failures (the package checker fails on any).
    pub errors: Vec<String>,
    /// Warnings (more than one seed in a run).
    pub warnings: Vec<String>,
}

impl SeedReport {
    /// No errors.
    pub fn passed(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Checks the seeds of the runs of one benchmark: `(label, seeds)` per run.
pub fn check_seeds(runs: &[(String, Vec<SeedRecord>)]) -> SeedReport {
    let mut rep = SeedReport::default();
    let mut seen: HashMap<(String, i128, i128), &str> = HashMap::new();
    for (label, seeds) in runs {
        if seeds.is_empty() {
            rep.errors.push(format!("{label} logs no seed"));
            continue;
        }
        if seeds.len() > 1 {
            rep.warnings.push(format!(
                "{label} logs {} seeds (the seed checker warns on more than one)",
                seeds.len()
            ));
        }
        for s in seeds {
            let (Some(file), Some(lineno)) = (&s.file, s.lineno) else {
                rep.errors.push(format!(
                    "{label}:{}: seed without metadata file/lineno (the seed checker needs both)",
                    s.log_line
                ));
                continue;
            };
            let Some(v) = s.as_int() else {
                rep.errors.push(format!(
                    "{label}:{}: seed {} is not an integer",
                    s.log_line,
                    s.value.to_json()
                ));
                continue;
            };
            let key = (file.clone(), lineno, v);
            if let Some(first) = seen.get(&key) {
                rep.errors.push(format!(
                    "{label} logs seed {v} on {file}:{lineno}, and {first} already logs the same \
                     seed on the same line: runs must use different seeds"
                ));
            } else {
                seen.insert(key, label);
            }
        }
    }
    rep
}

/// Options of [`package`]: where the submission folder is, the system's name and description,
/// and whether to overwrite. `mllog package` fills it from its command line.
///
/// ```
/// use mllog_core::compliance::{example_log, Division, Ruleset};
/// use mllog_core::results::package::{package, PackageOptions};
/// use mllog_core::Benchmark;
///
/// let dir = tempfile::tempdir()?;
/// let log = dir.path().join("run.txt");
/// std::fs::write(&log, example_log(Ruleset::V6_1_0, Benchmark::Flux1, Division::Closed).unwrap())?;
/// let opts = PackageOptions {
///     out: dir.path().join("submission"),
///     system: "my_system".into(),
///     system_desc: None,
///     force: false,
/// };
/// let report = package(&[log], &opts)?;
/// assert!(opts.out.join("results/my_system/flux1/result_0.txt").is_file());
/// assert!(report.system_desc.1 && opts.out.join("systems/my_system.json").is_file()); // a template
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct PackageOptions {
    /// The submission folder to fill.
    pub out: PathBuf,
    /// The system name (`results/<system>/`, `systems/<system>.json`).
    pub system: String,
    /// A system description to copy to `systems/<system>.json`; without it a template with
    /// `TODO` values is written when the file does not exist yet.
    pub system_desc: Option<PathBuf>,
    /// Write even when the seed check fails, and replace existing `result_*.txt`.
    pub force: bool,
}

/// What [`package`] did for one benchmark.
///
/// One entry of [`PackageReport::benchmarks`].
///
/// ```
/// use mllog_core::compliance::{example_log, Division, Ruleset};
/// use mllog_core::results::package::{package, PackageOptions};
/// use mllog_core::Benchmark;
///
/// let dir = tempfile::tempdir()?;
/// let text = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// let logs: Vec<_> = (0..2).map(|i| dir.path().join(format!("run{i}.txt"))).collect();
/// for l in &logs {
///     std::fs::write(l, &text)?; // the same seed twice: the seed check fails
/// }
/// let opts = PackageOptions { out: dir.path().join("out"), system: "sys".into(), system_desc: None, force: false };
/// let report = package(&logs, &opts)?;
/// let b = &report.benchmarks[0];
/// assert_eq!((b.benchmark.as_str(), b.files.len(), b.required_runs), ("llama2_70b_lora", 2, Some(10)));
/// assert!(!b.seeds.passed() && !b.written);
/// assert!(!b.files[1].1.exists()); // nothing written
/// assert!(!report.ok());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct PackagedBenchmark {
    /// The benchmark.
    pub benchmark: String,
    /// `(source, destination)` of each file.
    pub files: Vec<(PathBuf, PathBuf)>,
    /// How many runs the package checker wants.
    pub required_runs: Option<usize>,
    /// The seed check.
    pub seeds: SeedReport,
    /// Whether the files were written.
    pub written: bool,
    /// Notes (file count, skipped writes).
    pub notes: Vec<String>,
}

/// What [`package`] did.
///
/// [`PackageReport::ok`] is the verdict; [`PackageReport::render_text`] says it in words.
///
/// ```
/// use mllog_core::compliance::{example_log, Division, Ruleset};
/// use mllog_core::results::package::{package, PackageOptions};
/// use mllog_core::Benchmark;
///
/// let dir = tempfile::tempdir()?;
/// let good = dir.path().join("run.txt");
/// std::fs::write(&good, example_log(Ruleset::V6_1_0, Benchmark::Flux1, Division::Closed).unwrap())?;
/// let noise = dir.path().join("notes.txt");
/// std::fs::write(&noise, "no MLLOG here\n")?;
/// let opts = PackageOptions { out: dir.path().join("out"), system: "sys".into(), system_desc: None, force: false };
/// let report = package(&[good, noise.clone()], &opts)?;
/// assert_eq!(report.unknown, vec![noise]); // no `submission_benchmark`: not packaged
/// assert!(report.benchmarks[0].written);
/// assert!(!report.ok());
/// assert!(report.render_text().contains("flux1: 1 file(s)"), "{}", report.render_text());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct PackageReport {
    /// Per benchmark, in order of first appearance.
    pub benchmarks: Vec<PackagedBenchmark>,
    /// The system description path and whether it was written now.
    pub system_desc: (PathBuf, bool),
    /// Files without `submission_benchmark` (not packaged).
    pub unknown: Vec<PathBuf>,
}

impl PackageReport {
    /// Every benchmark written and its seeds passed.
    pub fn ok(&self) -> bool {
        self.unknown.is_empty()
            && self
                .benchmarks
                .iter()
                .all(|b| b.written && b.seeds.passed())
    }

    /// In words.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for b in &self.benchmarks {
            out.push_str(&format!(
                "{}: {} file(s){}\n",
                b.benchmark,
                b.files.len(),
                if b.written { "" } else { " (NOT written)" }
            ));
            for (s, d) in &b.files {
                out.push_str(&format!("  {} -> {}\n", s.display(), d.display()));
            }
            if b.seeds.passed() {
                out.push_str("  seeds: ok (each run logs a distinct seed with file and lineno)\n");
            }
            for e in &b.seeds.errors {
                out.push_str(&format!("  seed error: {e}\n"));
            }
            for w in &b.seeds.warnings {
                out.push_str(&format!("  seed warning: {w}\n"));
            }
            for n in &b.notes {
                out.push_str(&format!("  note: {n}\n"));
            }
        }
        for u in &self.unknown {
            out.push_str(&format!(
                "{}: no submission_benchmark, not packaged\n",
                u.display()
            ));
        }
        out.push_str(&format!(
            "system description: {}{}\n",
            self.system_desc.0.display(),
            if self.system_desc.1 {
                " (written)"
            } else {
                " (kept)"
            }
        ));
        out
    }
}

/// Fields `system_desc_checker` requires (training, 4.1.68).
pub const SYSTEM_DESC_FIELDS: [&str; 33] = [
    "submitter",
    "division",
    "status",
    "system_name",
    "number_of_nodes",
    "host_processors_per_node",
    "host_processor_model_name",
    "host_processor_core_count",
    "host_processor_vcpu_count",
    "host_processor_frequency",
    "host_processor_caches",
    "host_processor_interconnect",
    "host_memory_capacity",
    "host_storage_type",
    "host_storage_capacity",
    "host_networking",
    "host_networking_topology",
    "host_memory_configuration",
    "accelerators_per_node",
    "accelerator_model_name",
    "accelerator_host_interconnect",
    "accelerator_frequency",
    "accelerator_on-chip_memories",
    "accelerator_memory_configuration",
    "accelerator_memory_capacity",
    "accelerator_interconnect",
    "accelerator_interconnect_topology",
    "cooling",
    "hw_notes",
    "framework",
    "other_software_stack",
    "operating_system",
    "sw_notes",
];

/// The system description template: every field MLCommons' template has, in its order,
/// `TODO` where we know nothing.
fn template(system: &str, division: &str, org: &str) -> String {
    struct Fields<'a>(Vec<(&'static str, &'a str)>);
    impl serde::Serialize for Fields<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_map(self.0.iter().copied())
        }
    }
    let fields = SYSTEM_DESC_FIELDS
        .iter()
        .map(|f| {
            let v = match *f {
                "submitter" => org,
                "division" => division,
                "system_name" => system,
                _ => "TODO",
            };
            (*f, v)
        })
        .collect();
    serde_json::to_string_pretty(&Fields(fields)).expect("strings serialise") + "\n"
}

/// Files of one benchmark with their seeds.
type Group = (String, Vec<(PathBuf, Vec<SeedRecord>)>);

/// Lays `files` out under `opts.out` and checks their seeds. Nothing is written for a
/// benchmark whose seeds fail or whose folder already holds result files, unless
/// `opts.force`.
pub fn package(files: &[PathBuf], opts: &PackageOptions) -> std::io::Result<PackageReport> {
    let mut groups: Vec<Group> = Vec::new();
    let mut unknown = Vec::new();
    let mut division = String::from("closed");
    let mut org = String::from("TODO");
    for f in files {
        let text = String::from_utf8_lossy(&std::fs::read(f)?).into_owned();
        let s = super::summary::summarize_text(&f.display().to_string(), &text);
        let Some(b) = s.benchmark else {
            unknown.push(f.clone());
            continue;
        };
        if let Some(d) = s.division {
            division = d;
        }
        if let Some(o) = s.org {
            org = o;
        }
        let seeds = seeds_of(&text);
        match groups.iter_mut().find(|(n, _)| *n == b) {
            Some((_, v)) => v.push((f.clone(), seeds)),
            None => groups.push((b, vec![(f.clone(), seeds)])),
        }
    }
    let mut out = Vec::new();
    for (benchmark, runs) in groups {
        let dir = opts.out.join("results").join(&opts.system).join(&benchmark);
        let labelled: Vec<(String, Vec<SeedRecord>)> = runs
            .iter()
            .map(|(p, s)| (p.display().to_string(), s.clone()))
            .collect();
        let seeds = check_seeds(&labelled);
        let dests: Vec<(PathBuf, PathBuf)> = runs
            .iter()
            .enumerate()
            .map(|(i, (p, _))| (p.clone(), dir.join(format!("result_{i}.txt"))))
            .collect();
        let mut notes = Vec::new();
        let required = required_runs(&benchmark);
        if let Some(r) = required
            && r != runs.len()
        {
            notes.push(format!(
                "the package checker wants exactly {r} result files for {benchmark}; \
                     {} given",
                runs.len()
            ));
        }
        let existing = if dir.is_dir() {
            super::score::result_files(&dir)?
        } else {
            vec![]
        };
        let mut write = opts.force || seeds.passed();
        if !seeds.passed() && !opts.force {
            notes.push("not written: the seed check failed (--force writes anyway)".into());
        }
        if !existing.is_empty() && !opts.force {
            write = false;
            notes.push(format!(
                "not written: {} already holds {} result file(s) (--force replaces them)",
                dir.display(),
                existing.len()
            ));
        }
        if write {
            std::fs::create_dir_all(&dir)?;
            for e in &existing {
                std::fs::remove_file(e)?;
            }
            for (s, d) in &dests {
                std::fs::copy(s, d)?;
            }
        }
        out.push(PackagedBenchmark {
            benchmark,
            files: dests,
            required_runs: required,
            seeds,
            written: write,
            notes,
        });
    }
    let systems = opts.out.join("systems");
    let desc = systems.join(format!("{}.json", opts.system));
    let mut desc_written = false;
    if let Some(src) = &opts.system_desc {
        std::fs::create_dir_all(&systems)?;
        std::fs::copy(src, &desc)?;
        desc_written = true;
    } else if !desc.exists() {
        std::fs::create_dir_all(&systems)?;
        std::fs::write(&desc, template(&opts.system, &division, &org))?;
        desc_written = true;
    }
    Ok(PackageReport {
        benchmarks: out,
        system_desc: (desc, desc_written),
        unknown,
    })
}

/// Whether `path` is a `package_checker_params` file that the package checker would read as
/// holding `word` (`rcp-bypass` / `seed-checker-bypass`): it compares each line read with
/// `readline()` to the word with `==`, without stripping, so only a last line without a
/// trailing newline matches.
pub fn params_enable(path: &Path, word: &str) -> bool {
    // Only a regular file is read: a FIFO would block.
    path.is_file()
        && std::fs::read_to_string(path).is_ok_and(|t| t.split_inclusive('\n').any(|l| l == word))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The template is JSON with every field in MLCommons' order, the known ones filled in
    /// (escaped), the rest `TODO`.
    #[test]
    fn system_description_template() {
        let text = template("sys\"1", "closed", "Org\\Inc\n");
        assert!(text.starts_with("{\n  \"submitter\": ") && text.ends_with("}\n"));
        let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), SYSTEM_DESC_FIELDS.len());
        assert_eq!(v["submitter"], "Org\\Inc\n");
        assert_eq!(v["system_name"], "sys\"1");
        assert_eq!(v["division"], "closed");
        assert_eq!(v["status"], "TODO");
        let at = |k: &str| text.find(&format!("\"{k}\"")).unwrap();
        for pair in SYSTEM_DESC_FIELDS.windows(2) {
            assert!(at(pair[0]) < at(pair[1]), "{pair:?} out of order");
        }
    }
}
