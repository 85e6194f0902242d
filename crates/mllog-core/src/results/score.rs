//! Benchmark scores the way MLCommons' `result_summarizer` (mlperf-logging 4.1.68) computes
//! them, with every decision explained.
//!
//! For each `results/<system>/<benchmark>/` folder (`_compute_strong_score_standalone`):
//! 1. every `result_*.txt` is checked for compliance (not `--werror`); a file that fails, or
//!    lacks `run_start` / `run_stop`, is **dropped** (this is also how an unconverged run goes:
//!    its eval never meets the target, which the checker rejects);
//! 2. a kept file scores `(run_stop − run_start) / 60 / 1000` minutes (`run_start` and
//!    `run_stop` as in [`super::summary`]);
//! 3. more than `max_dropped` dropped files (1; 4 for unet3d) → no score ("Too many
//!    non-converging runs"); otherwise the sorted scores lose the `max_dropped` fastest and
//!    `max_dropped − dropped` slowest (a dropped file stands in for a slowest run) and the
//!    rest are averaged (`_compute_olympic_average`); nothing left → no score;
//! 4. the mean is multiplied by `scaling_factor` from `scaling.json` in the benchmark folder
//!    when there is one (the package checker's RCP step writes it).
//!
//! `result_summarizer` does not check the number of files; the package checker wants exactly
//! the benchmark's result count of them ([`super::required_runs`] built in, or the package's
//! when rules are read at run time). The score reports the count as a note, without letting it
//! change the number.
//!
//! Differences: the official `result_summarizer` also skips a system without a
//! `systems/<system>.json`, and for the closed division runs the RCP checker after scoring;
//! neither changes the score it prints. This module needs neither.

use std::path::{Path, PathBuf};

use super::max_dropped_runs;
use super::usage::Usage;
use crate::compliance::{check_reader, check_reader_detect, Ruleset};
use crate::record::LogReader;

/// Options for scoring: [`ScoreOptions::default`] detects each file's ruleset, as
/// `mllog score` does without `--ruleset` (see the [`BenchmarkScore`] example).
///
/// ```
/// use mllog_core::compliance::{example_log, rules, Division, Ruleset};
/// use mllog_core::results::score::{score_dir, ScoreOptions};
/// use mllog_core::Benchmark;
///
/// let root = tempfile::tempdir()?;
/// let folder = root.path().join("my_system/flux1");
/// std::fs::create_dir_all(&folder)?;
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Flux1, Division::Closed).unwrap();
/// std::fs::write(folder.join("result_0.txt"), &log)?;
/// // Checked against 5.0.0, which has no flux1: the run is not compliant and is dropped.
/// assert!(!rules(Ruleset::V5_0_0).allows(Benchmark::Flux1));
/// let old = score_dir(root.path(), ScoreOptions { ruleset: Some(Ruleset::V5_0_0) })?;
/// assert_eq!(old[0].dropped, 1);
/// let detected = score_dir(root.path(), ScoreOptions::default())?;
/// assert_eq!(detected[0].dropped, 0);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ScoreOptions {
    /// The ruleset for the compliance check; `None` detects it from each file.
    pub ruleset: Option<Ruleset>,
}

/// What happened to one result file: one entry of [`BenchmarkScore::runs`], with the reason
/// it was counted, dropped or trimmed in words.
///
/// ```
/// use mllog_core::compliance::{example_log, Division, Ruleset};
/// use mllog_core::results::score::{score_benchmark, ScoreOptions};
/// use mllog_core::Benchmark;
///
/// let root = tempfile::tempdir()?;
/// let folder = root.path().join("sys/flux1");
/// std::fs::create_dir_all(&folder)?;
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Flux1, Division::Closed).unwrap();
/// std::fs::write(folder.join("result_0.txt"), &log)?;
/// std::fs::write(folder.join("result_1.txt"), log.replace("run_stop", "run_halt"))?;
/// let score = score_benchmark(&folder, ScoreOptions::default())?;
/// let [ok, bad] = &score.runs[..] else { panic!("two runs") };
/// assert!(ok.compliant && ok.minutes.unwrap() > 0.0 && ok.status.as_deref() == Some("success"));
/// assert!(!bad.compliant && bad.minutes.is_none() && !bad.counted);
/// assert!(bad.error.is_some());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RunScore {
    /// The file.
    #[cfg_attr(feature = "serde", serde(serialize_with = "display_path"))]
    pub file: PathBuf,
    /// Whether it passed the compliance check.
    pub compliant: bool,
    /// The first compliance error, when it failed.
    pub error: Option<String>,
    /// `run_stop` status.
    pub status: Option<String>,
    /// Minutes from `run_start` to `run_stop`, for a kept (compliant) run.
    pub minutes: Option<f64>,
    /// Whether the minutes entered the olympic mean.
    pub counted: bool,
    /// Why it was counted, dropped or trimmed.
    pub decision: String,
}

/// The score of one `<system>/<benchmark>` folder. As JSON (feature `serde`): these fields,
/// paths as text, non-finite numbers `null`.
///
/// [`score_benchmark`] (one folder) and [`score_dir`] (every folder below a results
/// directory) compute it as MLCommons' `result_summarizer` does: each `result_*.txt` is
/// checked for compliance, non-compliant runs are dropped (up to the benchmark's allowance),
/// the olympic mean of the rest is taken and multiplied by `scaling.json`'s factor. Every
/// decision is kept in words ([`BenchmarkScore::decisions`], [`RunScore::decision`]), so a
/// missing score says why.
///
/// ```
/// use mllog_core::compliance::{example_log, Division, Ruleset};
/// use mllog_core::results::score::{score_benchmark, ScoreOptions};
/// use mllog_core::Benchmark;
///
/// let root = tempfile::tempdir()?;
/// let folder = root.path().join("results/my_system/llama2_70b_lora");
/// std::fs::create_dir_all(&folder)?;
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// for i in 0..10 {
///     std::fs::write(folder.join(format!("result_{i}.txt")), &log)?;
/// }
/// std::fs::write(folder.join("result_10.txt"), "not a log")?; // dropped, with the reason
///
/// let score = score_benchmark(&folder, ScoreOptions::default())?;
/// assert_eq!((score.system.as_str(), score.required_runs), ("my_system", Some(10)));
/// assert_eq!(score.dropped, 1);
/// assert!(score.runs.iter().filter(|r| r.compliant).count() == 10);
/// assert!(score.score.unwrap() > 0.0 && score.scaling_factor == 1.0);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct BenchmarkScore {
    /// The benchmark folder.
    #[cfg_attr(feature = "serde", serde(serialize_with = "display_path"))]
    pub folder: PathBuf,
    /// The system (the parent folder's name).
    pub system: String,
    /// The benchmark (the folder's name; `mask` is read as `maskrcnn`).
    pub benchmark: String,
    /// Each `result_*.txt`, sorted by name.
    pub runs: Vec<RunScore>,
    /// Files the package checker wants for this benchmark.
    pub required_runs: Option<usize>,
    /// Files dropped (not compliant).
    pub dropped: usize,
    /// Most files olympic scoring may drop.
    pub max_dropped: usize,
    /// The olympic mean in minutes, before scaling.
    pub olympic_mean: Option<f64>,
    /// `scaling.json`'s `scaling_factor`, else 1.0.
    pub scaling_factor: f64,
    /// The score in minutes (`olympic_mean × scaling_factor`), or `None` when invalid.
    pub score: Option<f64>,
    /// The decisions, in order, in words.
    pub decisions: Vec<String>,
    /// The result files that could not be read, each `path: error` (dropped runs; the
    /// commands exit 2).
    pub unreadable: Vec<String>,
}

/// `_compute_olympic_average`: sorts `scores`, drops `max_dropped` from the low end and
/// `max_dropped − dropped` from the high end, and averages the rest (summed in ascending
/// order, as Python's `sum` does). `None` when nothing is left.
pub fn olympic_mean(scores: &mut [f64], dropped: usize, max_dropped: usize) -> Option<f64> {
    scores.sort_by(f64::total_cmp);
    let hi = scores
        .len()
        .saturating_sub(max_dropped.saturating_sub(dropped));
    let kept = scores.get(max_dropped.min(hi)..hi)?;
    if kept.is_empty() {
        return None;
    }
    let sum: f64 = kept.iter().sum();
    Some(sum * 1.0 / kept.len() as f64)
}

/// `run_start` and `run_stop` time_ms as `result_summarizer._query_run_start_stop` finds them.
pub fn run_start_stop(text: &str) -> (Option<i64>, Option<i64>) {
    run_start_stop_reader(text.as_bytes()).expect("reading memory cannot fail")
}

/// [`run_start_stop`] of a log read from `input`, streamed.
pub fn run_start_stop_reader<R: std::io::BufRead>(
    input: R,
) -> std::io::Result<(Option<i64>, Option<i64>)> {
    let (mut start, mut stop) = (None, None);
    let mut reader = LogReader::new(input);
    for line in reader.by_ref().flatten() {
        match &*line.record.key {
            "run_start" => start = Some(line.record.time_ms()),
            "run_stop" => stop = Some(line.record.time_ms()),
            _ => continue,
        }
        if start.is_some() && stop.is_some() {
            break;
        }
    }
    if let Some(e) = reader.io_error() {
        return Err(std::io::Error::new(e.kind(), e.to_string()));
    }
    Ok((start, stop))
}

/// Reads `scaling.json` in `folder`: `Ok(1.0)` when absent. It is parsed as the summarizer's
/// `json.load` parses it; a file that cannot be read, is no JSON, or has no numeric
/// `scaling_factor` is an error naming the path, never a factor of 1.
pub fn scaling_factor(folder: &Path) -> Result<f64, String> {
    let p = folder.join("scaling.json");
    let text = match std::fs::read(&p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(1.0),
        Err(e) => return Err(format!("{}: {e}", p.display())),
    };
    let text = String::from_utf8(text)
        .map_err(|e| format!("{}: not UTF-8 ({e}), so not JSON", p.display()))?;
    let v = crate::record::parse_json(&text).map_err(|e| {
        format!(
            "{}: not valid JSON: {e} (result_summarizer stops here with a TypeError: its \
             handler raises json.JSONDecodeError with one argument, \
             \"JSONDecodeError.__init__() missing 2 required positional arguments\")",
            p.display()
        )
    })?;
    match v.get("scaling_factor") {
        Some(f) if f.is_number() => f.as_f64().ok_or_else(|| {
            format!(
                "{}: scaling_factor {} is no float",
                p.display(),
                f.to_json()
            )
        }),
        Some(f) => Err(format!(
            "{}: scaling_factor {} is not a number (the summarizer's multiplication fails)",
            p.display(),
            f.to_json()
        )),
        None => Err(format!(
            "{}: no scaling_factor (the summarizer stops with a KeyError)",
            p.display()
        )),
    }
}

/// An entry of a folder named as a result file (`result_*.txt`, as the official glob matches
/// names).
#[derive(Clone, Debug, PartialEq)]
pub struct ResultEntry {
    /// Its path.
    pub path: PathBuf,
    /// Why it is not a result file to read, when it is no regular file: a directory, a FIFO,
    /// a link to nothing. The official tools open every entry the glob names and stop at such
    /// a one; only a regular file is opened here (a FIFO would block, a device never end).
    pub not_a_file: Option<&'static str>,
}

/// The entries of a folder named as result files, in the order the folder lists them (as
/// Python's `glob` takes them), from one reading of it.
pub fn result_entries(folder: &Path) -> std::io::Result<Vec<ResultEntry>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(folder)? {
        let e = e?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("result_") && name.ends_with(".txt")) {
            continue;
        }
        let path = e.path();
        let not_a_file = match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => None,
            Ok(m) if m.is_dir() => Some("a directory, not a result file"),
            Ok(_) => Some("not a regular file (a FIFO, socket or device)"),
            Err(_) => Some("a link to nothing, not a result file"),
        };
        v.push(ResultEntry { path, not_a_file });
    }
    Ok(v)
}

/// [`result_entries`] sorted by name, as the scores take them.
pub fn result_entries_by_name(folder: &Path) -> std::io::Result<Vec<ResultEntry>> {
    let mut v = result_entries(folder)?;
    v.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(v)
}

/// [`ResultEntry::not_a_file`] as the error of reading the entry.
pub(crate) fn readable(entry: &ResultEntry) -> std::io::Result<()> {
    entry
        .not_a_file
        .map_or(Ok(()), |what| Err(std::io::Error::other(what)))
}

/// The `result_*.txt` regular files of a folder, sorted by name.
pub fn result_files(folder: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = result_entries(folder)?
        .into_iter()
        .filter(|e| e.not_a_file.is_none())
        .map(|e| e.path)
        .collect();
    v.sort();
    Ok(v)
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The benchmark a folder holds, as the summarizer names it: the folder's name, except that
/// a `mask` folder holds `maskrcnn`.
pub fn benchmark_of(folder: &Path) -> String {
    match name(folder) {
        n if n == "mask" => "maskrcnn".into(),
        n => n,
    }
}

/// One result file's compliance verdict, as the score reads it (not `--werror`).
#[derive(Clone, Debug, PartialEq)]
pub struct FileVerdict {
    /// The ruleset the file was checked under.
    pub ruleset: String,
    /// Whether it passed.
    pub passed: bool,
    /// The first error, in words.
    pub first_error: Option<String>,
}

/// Scores one benchmark folder (`.../<system>/<benchmark>`).
pub fn score_benchmark(folder: &Path, opts: ScoreOptions) -> std::io::Result<BenchmarkScore> {
    score_benchmark_with(folder, &|file| {
        let open = || -> std::io::Result<_> {
            Ok(std::io::BufReader::with_capacity(
                1 << 16,
                std::fs::File::open(file)?,
            ))
        };
        let report = match opts.ruleset {
            Some(r) => check_reader(r, open()?)?,
            None => check_reader_detect(open()?)?.0,
        };
        let first_error = report.errors().next().map(|f| f.message.clone());
        Ok(FileVerdict {
            ruleset: report.ruleset.as_str().to_owned(),
            passed: report.passed(false),
            first_error,
        })
    })
}

/// Scores one benchmark folder with each result file's compliance verdict from `check` (the
/// rule engine's, for rules read at run time).
pub fn score_benchmark_with(
    folder: &Path,
    check: &dyn Fn(&Path) -> std::io::Result<FileVerdict>,
) -> std::io::Result<BenchmarkScore> {
    let required = super::required_runs(&benchmark_of(folder));
    score_benchmark_as(folder, Usage::Training, required, check)
}

/// [`score_benchmark_with`] of a folder laid out for `usage`, with the result count its
/// package wants (`required`, only said in a note): an HPC strong-scaling folder
/// (`results/<system>/strong/<benchmark>/`) is scored the same way, its system two levels up.
pub fn score_benchmark_as(
    folder: &Path,
    usage: Usage,
    required: Option<usize>,
    check: &dyn Fn(&Path) -> std::io::Result<FileVerdict>,
) -> std::io::Result<BenchmarkScore> {
    let benchmark = benchmark_of(folder);
    let system = usage.system_of(folder);
    let max_dropped = max_dropped_runs(&benchmark);
    let mut runs = Vec::new();
    let mut decisions = Vec::new();
    let mut unreadable = Vec::new();
    let listed = result_entries_by_name(folder)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", folder.display())))?;
    for entry in listed {
        let file = entry.path.clone();
        // Streamed, three passes: a result file of any size is read in bounded memory.
        let open = || -> std::io::Result<_> {
            Ok(std::io::BufReader::with_capacity(
                1 << 16,
                std::fs::File::open(&file)?,
            ))
        };
        // An unreadable file is a dropped run that names the file (the official summarizer
        // stops with a traceback there); the rest of the folder is still scored.
        let read = || -> std::io::Result<_> {
            readable(&entry)?;
            let report = check(&file)?;
            let summary = super::summary::summarize_reader(&file.display().to_string(), open()?)?;
            let (start, stop) = run_start_stop_reader(open()?)?;
            Ok((report, summary, start, stop))
        };
        let (report, summary, start, stop) = match read() {
            Ok(x) => x,
            Err(e) => {
                let why = format!("{}: {e}", file.display());
                runs.push(RunScore {
                    file: file.clone(),
                    compliant: false,
                    error: Some(why.clone()),
                    status: None,
                    minutes: None,
                    counted: false,
                    decision: format!("dropped: cannot be read ({why})"),
                });
                unreadable.push(why);
                continue;
            }
        };
        let ruleset = report.ruleset;
        let mut run = RunScore {
            file: file.clone(),
            compliant: report.passed,
            error: report.first_error,
            status: summary.status.clone(),
            minutes: None,
            counted: false,
            decision: String::new(),
        };
        if !run.compliant {
            run.decision = format!(
                "dropped: fails the compliance check (ruleset {ruleset}): {}",
                run.error.as_deref().unwrap_or("?")
            );
        } else if let (Some(a), Some(b)) = (start, stop) {
            run.minutes = Some((b - a) as f64 / 60.0 / 1000.0);
        } else {
            run.compliant = false;
            run.decision = "dropped: run_start or run_stop not recorded".into();
        }
        runs.push(run);
    }
    let dropped = runs.iter().filter(|r| r.minutes.is_none()).count();
    let n = runs.len();
    decisions.push(format!(
        "{n} result file(s); {} compliant, {dropped} dropped",
        n - dropped
    ));
    match required {
        Some(req) if req != n => decisions.push(format!(
            "note: the package checker wants exactly {req} result files for {benchmark}, \
             found {n} (result_summarizer scores them anyway)"
        )),
        Some(req) => decisions.push(format!("{benchmark} needs {req} runs: present")),
        None => decisions.push(format!(
            "note: {benchmark} is not a known {} benchmark",
            usage.as_str()
        )),
    }
    let scale = scaling_factor(folder).map_err(std::io::Error::other)?;
    let mut olympic = None;
    if dropped > max_dropped {
        for r in runs.iter_mut().filter(|r| r.minutes.is_some()) {
            r.decision = "not scored: too many dropped runs in this folder".into();
        }
        decisions.push(format!(
            "INVALID: {dropped} runs did not converge or failed compliance; olympic scoring \
             tolerates at most {max_dropped} (result_summarizer: \"Too many non-converging runs\")"
        ));
    } else {
        // Which runs are trimmed: ascending order, ties by file name.
        let mut order: Vec<usize> = (0..n).filter(|&i| runs[i].minutes.is_some()).collect();
        order.sort_by(|&a, &b| {
            runs[a]
                .minutes
                .unwrap()
                .total_cmp(&runs[b].minutes.unwrap())
                .then(a.cmp(&b))
        });
        let hi_drop = max_dropped - dropped;
        let hi = order.len().saturating_sub(hi_drop);
        let lo = max_dropped.min(hi);
        for (rank, &i) in order.iter().enumerate() {
            let r = &mut runs[i];
            if rank < lo {
                r.decision =
                    "trimmed: among the fastest (olympic scoring drops the fastest)".into();
            } else if rank >= hi {
                r.decision =
                    "trimmed: among the slowest (olympic scoring drops the slowest)".into();
            } else {
                r.counted = true;
                r.decision = "counted".into();
            }
        }
        if dropped > 0 {
            decisions.push(format!(
                "{dropped} dropped run(s) stand in for the slowest; drop the {max_dropped} \
                 fastest and {hi_drop} more slowest"
            ));
        } else {
            decisions.push(format!(
                "all runs kept: drop the {max_dropped} fastest and the {max_dropped} slowest"
            ));
        }
        let mut scores: Vec<f64> = runs.iter().filter_map(|r| r.minutes).collect();
        olympic = olympic_mean(&mut scores, dropped, max_dropped);
        match olympic {
            Some(m) => decisions.push(format!(
                "olympic mean of {} run(s): {m:.6} min",
                runs.iter().filter(|r| r.counted).count()
            )),
            None => decisions.push("INVALID: no run left after olympic trimming".into()),
        }
    }
    if scale != 1.0 {
        decisions.push(format!(
            "scaling.json: scaling_factor {scale} (RCP normalization) multiplies the mean"
        ));
    }
    let score = olympic.map(|m| m * scale);
    if let Some(s) = score {
        decisions.push(format!("score: {s:.6} min"));
    }
    Ok(BenchmarkScore {
        folder: folder.to_path_buf(),
        system,
        benchmark,
        runs,
        required_runs: required,
        dropped,
        max_dropped,
        olympic_mean: olympic,
        scaling_factor: scale,
        score,
        decisions,
        unreadable,
    })
}

/// The sub-folders of `p`, sorted (symbolic links to folders included).
pub(crate) fn subdirs(p: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(p)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    Ok(v)
}

/// The folder of system folders: `dir/results` of a submission, else `dir` itself.
pub(crate) fn results_root(dir: &Path) -> PathBuf {
    let results = dir.join("results");
    if results.is_dir() {
        results
    } else {
        dir.to_path_buf()
    }
}

/// Finds the benchmark folders under `dir`: a submission (`dir/results/<system>/<benchmark>`),
/// a `results` folder, one system's folder, or one benchmark folder (holding `result_*.txt`).
pub fn benchmark_folders(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    if !result_files(dir)?.is_empty() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut out = Vec::new();
    for a in subdirs(&results_root(dir))? {
        if !result_files(&a)?.is_empty() {
            out.push(a);
            continue;
        }
        for b in subdirs(&a)? {
            if !result_files(&b)?.is_empty() {
                out.push(b);
            }
        }
    }
    Ok(out)
}

/// Scores every benchmark folder under `dir` (see [`benchmark_folders`]).
pub fn score_dir(dir: &Path, opts: ScoreOptions) -> std::io::Result<Vec<BenchmarkScore>> {
    benchmark_folders(dir)?
        .iter()
        .map(|f| score_benchmark(f, opts))
        .collect()
}

/// Text report: per benchmark, each file's verdict and the decisions.
pub fn render_text(scores: &[BenchmarkScore]) -> String {
    let mut out = String::new();
    for s in scores {
        out.push_str(&format!(
            "{}/{}  ({})\n",
            s.system,
            s.benchmark,
            s.folder.display()
        ));
        let w = s
            .runs
            .iter()
            .map(|r| name(&r.file).len())
            .max()
            .unwrap_or(0);
        for r in &s.runs {
            out.push_str(&format!(
                "  {:w$}  {:>12}  {:<9}  {}\n",
                name(&r.file),
                r.minutes
                    .map_or_else(|| "-".into(), |m| format!("{m:.4} min")),
                r.status.as_deref().unwrap_or("no stop"),
                r.decision,
            ));
        }
        for d in &s.decisions {
            out.push_str(&format!("  - {d}\n"));
        }
        match s.score {
            Some(v) => out.push_str(&format!(
                "  SCORE {}/{}: {v:.4} min\n\n",
                s.system, s.benchmark
            )),
            None => out.push_str(&format!(
                "  SCORE {}/{}: none (invalid)\n\n",
                s.system, s.benchmark
            )),
        }
    }
    out
}

/// A path as JSON text, the way the text output shows it (lossy for non-UTF-8 names).
#[cfg(feature = "serde")]
pub(crate) fn display_path<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&p.display())
}

/// One benchmark folder as a JSON object (one line); the shape is `BenchmarkScore`'s
/// `Serialize`.
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub fn benchmark_to_json(s: &BenchmarkScore) -> String {
    serde_json::to_string(s).expect("a score serialises")
}

/// JSON array, one object per benchmark folder.
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub fn render_json(scores: &[BenchmarkScore]) -> String {
    let items: Vec<String> = scores.iter().map(benchmark_to_json).collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}
