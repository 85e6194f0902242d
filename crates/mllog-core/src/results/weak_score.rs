//! The weak-scaling score of an HPC benchmark folder (`results/<system>/weak/<benchmark>/`)
//! the way MLCommons' `result_summarizer` (mlperf-logging 4.1.68,
//! `_compute_weak_score_standalone`) computes it: the system trains many models at once, and
//! its score is the tuple (number of models, accelerators per model, time to train them all).
//!
//! 1. every `result_*.txt` is checked for compliance (not `--werror`); a file that fails, or
//!    lacks `run_start` / `run_stop`, is not counted;
//! 2. each counted file is one model; the time to train all is from the earliest `run_start`
//!    to the latest `run_stop` of the counted files, in minutes;
//! 3. the instance scale (accelerators per model) is `number_of_nodes × max(accelerators_per_node,
//!    1)` of a counted file; a file that does not log them is still counted as a model;
//! 4. fewer models than the benchmark's result count (the package's `get_result_file_counts`,
//!    which the caller passes) → no score
//!    ("Not enough converging weak scaling runs"). There is no olympic trimming, no
//!    `scaling.json` and no RCP normalisation.
//!
//! Where the summarizer stops with an exception (two models on different instance scales:
//! its `assert`; a benchmark it has no result count for: a `KeyError`; a scale logged as
//! neither number nor text: a `TypeError`), the score is none and [`WeakScore::error`] says so,
//! naming the file.

use std::path::{Path, PathBuf};

use super::score::{benchmark_of, readable, result_entries_by_name, FileVerdict};
use super::usage::Usage;
use crate::record::{LogReader, Value};

/// What happened to one result file of a weak-scaling folder.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct WeakRun {
    /// The file.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "super::score::display_path")
    )]
    pub file: PathBuf,
    /// Whether it passed the compliance check.
    pub compliant: bool,
    /// The first compliance error, when it failed.
    pub error: Option<String>,
    /// `run_start` and `run_stop` time_ms, when both are logged.
    pub start_stop: Option<(i64, i64)>,
    /// Its instance scale, when logged.
    pub instance_scale: Option<i64>,
    /// Whether it counts as a trained model.
    pub counted: bool,
    /// Why it was counted or not, in words.
    pub decision: String,
}

/// The weak-scaling score of one `<system>/weak/<benchmark>` folder.
///
/// ```
/// use mllog_core::results::score::FileVerdict;
/// use mllog_core::results::weak_score::score_weak;
///
/// let root = tempfile::tempdir()?;
/// let folder = root.path().join("results/sys/weak/deepcam");
/// std::fs::create_dir_all(&folder)?;
/// let rec = |t: i64, key: &str, value: &str| {
///     format!(":::MLLOG {{\"namespace\": \"\", \"time_ms\": {t}, \"event_type\": \"POINT_IN_TIME\", \"key\": \"{key}\", \"value\": {value}, \"metadata\": {{}}}}\n")
/// };
/// for i in 0..5 {
///     let log = rec(0, "number_of_nodes", "2") + &rec(0, "accelerators_per_node", "4")
///         + &rec(1000 * i, "run_start", "null") + &rec(60_000 * (i + 10), "run_stop", "null");
///     std::fs::write(folder.join(format!("result_{i}.txt")), log)?;
/// }
/// // Named as a result file, but a folder: a run that cannot be read, said, never skipped.
/// std::fs::create_dir(folder.join("result_9.txt"))?;
/// let pass = |_: &std::path::Path| Ok(FileVerdict { ruleset: "3.0.0".into(), passed: true, first_error: None });
/// // deepcam's result count in the package (`benchmark_meta.get_result_file_counts('hpc')`).
/// let s = score_weak(&folder, Some(5), &pass)?;
/// assert_eq!((s.system.as_str(), s.number_of_models, s.instance_scale), ("sys", 5, Some(8)));
/// assert_eq!((s.runs.len(), s.unreadable.len()), (6, 1));
/// assert_eq!(s.time_to_train_all, Some(14.0));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct WeakScore {
    /// The benchmark folder.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "super::score::display_path")
    )]
    pub folder: PathBuf,
    /// The system (two folders up).
    pub system: String,
    /// The benchmark (the folder's name).
    pub benchmark: String,
    /// Each `result_*.txt`, sorted by name.
    pub runs: Vec<WeakRun>,
    /// The fewest models the benchmark needs.
    pub required_runs: Option<usize>,
    /// Models trained (counted files).
    pub number_of_models: usize,
    /// Accelerators per model.
    pub instance_scale: Option<i64>,
    /// Minutes from the earliest `run_start` to the latest `run_stop` of the counted files,
    /// when there are enough of them.
    pub time_to_train_all: Option<f64>,
    /// Why the summarizer cannot score the folder at all (it stops with an exception there).
    pub error: Option<String>,
    /// The decisions, in order, in words.
    pub decisions: Vec<String>,
    /// The result files that could not be read, each `path: error`.
    pub unreadable: Vec<String>,
}

impl WeakScore {
    /// Whether the folder has a score.
    pub fn scored(&self) -> bool {
        self.time_to_train_all.is_some()
    }

    /// The score in words: `5 model(s) × 128 accelerator(s), all trained in 61.3914 min`, or
    /// `none` and why.
    pub fn describe(&self) -> String {
        match (self.time_to_train_all, &self.error) {
            (Some(t), _) => format!(
                "{} model(s) × {} accelerator(s), all trained in {t:.4} min",
                self.number_of_models,
                self.instance_scale
                    .map_or_else(|| "?".into(), |s| s.to_string())
            ),
            (None, Some(e)) => format!("none: {e}"),
            (None, None) => format!(
                "none ({} model(s), {} needed)",
                self.number_of_models,
                self.required_runs.unwrap_or_default()
            ),
        }
    }
}

/// What one file logs for the weak score, read once.
struct Facts {
    start: Option<i64>,
    stop: Option<i64>,
    nodes: Option<Value>,
    per_node: Option<Value>,
}

fn read_facts(file: &Path) -> std::io::Result<Facts> {
    let input = std::io::BufReader::with_capacity(1 << 16, std::fs::File::open(file)?);
    let mut f = Facts {
        start: None,
        stop: None,
        nodes: None,
        per_node: None,
    };
    let mut reader = LogReader::new(input);
    // Each query stops at its own first complete answer, as the summarizer's loops do.
    let (mut times_done, mut scale_done) = (false, false);
    for line in reader.by_ref().flatten() {
        let r = &line.record;
        if !times_done {
            match &*r.key {
                "run_start" => f.start = Some(r.time_ms()),
                "run_stop" => f.stop = Some(r.time_ms()),
                _ => {}
            }
            times_done = f.start.is_some() && f.stop.is_some();
        }
        if !scale_done {
            match &*r.key {
                "number_of_nodes" => f.nodes = Some(r.value.clone()),
                "accelerators_per_node" => f.per_node = Some(r.value.clone()),
                _ => {}
            }
            scale_done = f.nodes.is_some() && f.per_node.is_some();
        }
        if times_done && scale_done {
            break;
        }
    }
    if let Some(e) = reader.io_error() {
        return Err(std::io::Error::new(e.kind(), e.to_string()));
    }
    Ok(f)
}

/// Python's `int(v)` of a logged value: `Ok(Some)`, `Ok(None)` where it raises `ValueError`
/// (the summarizer skips the file's scale then), `Err` where it raises `TypeError` (the
/// summarizer stops).
fn py_int(v: &Value) -> Result<Option<i64>, String> {
    match v {
        Value::Bool(b) => Ok(Some(i64::from(*b))),
        Value::Int(i) => Ok(i64::try_from(*i).ok()),
        Value::Float(x) if x.is_finite() => Ok(Some(x.trunc() as i64)),
        Value::Float(_) => Ok(None),
        Value::Str(s) => Ok(s.trim().parse().ok()),
        other => Err(format!("int() of {other:?}")),
    }
}

/// `_query_instance_scale`: `Ok(None)` where the summarizer reads no scale from the file.
fn instance_scale(f: &Facts) -> Result<Option<i64>, String> {
    let (Some(n), Some(a)) = (&f.nodes, &f.per_node) else {
        return Ok(None);
    };
    Ok(match (py_int(n)?, py_int(a)?) {
        (Some(n), Some(a)) => Some(n * a.max(1)),
        _ => None,
    })
}

/// Scores one weak-scaling folder with each result file's compliance verdict from `check`;
/// `required` is the benchmark's result count in the package the rules come from (`None`: it
/// has none, the summarizer's `KeyError`).
pub fn score_weak(
    folder: &Path,
    required: Option<usize>,
    check: &dyn Fn(&Path) -> std::io::Result<FileVerdict>,
) -> std::io::Result<WeakScore> {
    let benchmark = benchmark_of(folder);
    let listed = result_entries_by_name(folder)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", folder.display())))?;
    let mut s = WeakScore {
        folder: folder.to_path_buf(),
        system: Usage::Hpc.system_of(folder),
        required_runs: required,
        benchmark,
        runs: Vec::new(),
        number_of_models: 0,
        instance_scale: None,
        time_to_train_all: None,
        error: None,
        decisions: Vec::new(),
        unreadable: Vec::new(),
    };
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for entry in listed {
        let file = entry.path.clone();
        let read = || Ok((check(&file)?, read_facts(&file)?));
        let run = match readable(&entry).and_then(|()| read()) {
            Ok((verdict, facts)) => weak_run(&mut s, file, verdict, &facts),
            Err(e) => {
                let why = format!("{}: {e}", file.display());
                s.unreadable.push(why.clone());
                WeakRun {
                    file,
                    compliant: false,
                    error: Some(why.clone()),
                    start_stop: None,
                    instance_scale: None,
                    counted: false,
                    decision: format!("not counted: cannot be read ({why})"),
                }
            }
        };
        if let (true, Some((a, b))) = (run.counted, run.start_stop) {
            first = first.min(a);
            last = last.max(b);
        }
        s.runs.push(run);
    }
    s.number_of_models = s.runs.iter().filter(|r| r.counted).count();
    s.decisions.push(format!(
        "{} result file(s); {} model(s) trained (compliant, with run_start and run_stop)",
        s.runs.len(),
        s.number_of_models
    ));
    if s.error.is_some() {
        return Ok(s);
    }
    match s.required_runs {
        None => {
            s.error = Some(format!(
                "{} is not an HPC benchmark: result_summarizer stops with a KeyError (it has no \
                 result count for it)",
                s.benchmark
            ));
        }
        Some(req) if s.number_of_models < req => s.decisions.push(format!(
            "INVALID: {} model(s), {} needs at least {req} (result_summarizer: \"Not enough \
             converging weak scaling runs\")",
            s.number_of_models, s.benchmark
        )),
        Some(req) => {
            let minutes = (last - first) as f64 / 60.0 / 1000.0;
            s.time_to_train_all = Some(minutes);
            s.decisions.push(format!(
                "{} model(s), at least {req} needed: time to train all {minutes:.6} min, from \
                 the first run_start to the last run_stop",
                s.number_of_models
            ));
        }
    }
    Ok(s)
}

/// One file's part of the weak score; records the first instance scale, or the summarizer's
/// stop when a later one differs.
fn weak_run(s: &mut WeakScore, file: PathBuf, verdict: FileVerdict, f: &Facts) -> WeakRun {
    let mut run = WeakRun {
        file,
        compliant: verdict.passed,
        error: verdict.first_error,
        start_stop: f.start.zip(f.stop),
        instance_scale: None,
        counted: false,
        decision: String::new(),
    };
    if !run.compliant {
        run.decision = format!(
            "not counted: fails the compliance check (ruleset {}): {}",
            verdict.ruleset,
            run.error.as_deref().unwrap_or("?")
        );
        return run;
    }
    if run.start_stop.is_none() {
        run.decision = "not counted: run_start or run_stop not recorded".into();
        return run;
    }
    run.counted = true;
    match instance_scale(f) {
        Err(why) => {
            s.error.get_or_insert(format!(
                "{}: number_of_nodes or accelerators_per_node is no number ({why}): \
                 result_summarizer stops with a TypeError",
                run.file.display()
            ));
            run.decision = "counted; its instance scale cannot be read".into();
        }
        Ok(None) => {
            run.decision = "counted; logs no instance scale (number_of_nodes, \
                            accelerators_per_node)"
                .into()
        }
        Ok(Some(x)) => {
            run.instance_scale = Some(x);
            match s.instance_scale {
                None => s.instance_scale = Some(x),
                Some(y) if y != x => {
                    s.error.get_or_insert(format!(
                        "{}: instance scale {x}, where an earlier model has {y}: every model of a \
                         weak-scaling folder must use the same number of accelerators \
                         (result_summarizer stops with an AssertionError)",
                        run.file.display()
                    ));
                }
                Some(_) => {}
            }
            run.decision = format!("counted: {x} accelerator(s)");
        }
    }
    run
}
