//! Per-run summaries: did the run converge, how long did it take, how did it get there.
//!
//! Times follow `mlperf_logging.result_summarizer`: the log's records are scanned in file
//! order, `run_start` and `run_stop` are remembered as they appear and the scan stops as soon
//! as both have been seen (so in a normal log: the first `run_start` and the first
//! `run_stop`); time to train is `(run_stop − run_start) ms / 60000`.

use std::io::BufRead;
use std::path::Path;

use crate::compliance::{target, Ruleset};
use crate::keys::Benchmark;
use crate::record::{LogReader, Record, Value};
use crate::submission::Division;

/// One evaluation: a point of [`RunSummary::evals`], the curve `mllog summary` prints and
/// `mllog plot` draws.
///
///
/// ```
/// use mllog_core::record::{Metadata, Record};
/// use mllog_core::results::summary::summarize_text;
///
/// let log: String = [(1, 0.95, 3840u64), (2, 0.92, 7680)]
///     .iter()
///     .map(|&(min, loss, samples)| {
///         let meta = Metadata::default().with("samples_count", samples);
///         format!("{}\n", Record::event("eval_accuracy", loss).at_millis(min * 60_000).with_metadata(meta))
///     })
///     .collect();
/// let run = summarize_text("result_0.txt", &log);
/// assert_eq!(run.evals.len(), 2);
/// assert_eq!((run.evals[1].x, run.evals[1].value, run.evals[1].time_ms), (Some(7680.0), 0.92, 120_000));
/// assert_eq!(run.x_unit, "samples");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct EvalPoint {
    /// Position in training: `samples_count` of the eval record, else `epoch_num`, else
    /// `step_num` / `step` (see [`RunSummary::x_unit`]).
    pub x: Option<f64>,
    /// The metric value.
    pub value: f64,
    /// `time_ms` of the record.
    pub time_ms: i64,
}

/// The quality target of a run's benchmark, from [`target_line`]: what
/// [`RunSummary::target_reached`] compares the evaluations with.
///
///
/// ```
/// use mllog_core::results::summary::target_line;
///
/// let t = target_line("llama2_70b_lora", None).unwrap(); // closed by default
/// assert_eq!((t.key.as_str(), t.value, t.higher_is_better), ("eval_accuracy", 0.925, false));
/// let t = target_line("dlrmv4", Some("closed")).unwrap();
/// assert!(t.higher_is_better && t.value == 0.75);
/// assert_eq!(target_line("not_a_benchmark", None), None);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TargetLine {
    /// The key that carries the metric (usually `eval_accuracy`).
    pub key: String,
    /// The threshold.
    pub value: f64,
    /// Whether larger is better (the target is a lower bound).
    pub higher_is_better: bool,
}

/// Summary of one run (one `result_*.txt`).
///
/// Made by [`summarize_text`], [`summarize_reader`] or [`summarize_file`] (streaming; a
/// [`SummaryBuilder`] fed record by record underneath), rendered by [`render_text`],
/// [`render_json`] and [`render_csv`] for several runs side by side. Times are read the way
/// the RCP checker reads them, so the numbers match what reviewers see. See the
/// [`results`](super) module example for a whole log; the eval curve and step timings:
///
/// ```
/// use mllog_core::compliance::{example_log, Division, Ruleset};
/// use mllog_core::results::summary::{render_csv, summarize_text};
/// use mllog_core::Benchmark;
///
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// let run = summarize_text("result_0.txt", &log);
/// assert_eq!(run.status.as_deref(), Some("success"));
/// assert_eq!(run.target_reached(), Some(true));
/// assert!(!run.evals.is_empty() && run.x_unit == "samples");
/// assert!(run.samples_to_converge.unwrap() > 0.0);
/// assert!(render_csv(&[run]).lines().nth(1).unwrap().starts_with("result_0.txt,"));
/// ```
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RunSummary {
    /// The path (or label) of the log.
    pub path: String,
    /// `submission_benchmark`.
    pub benchmark: Option<String>,
    /// `submission_division`.
    pub division: Option<String>,
    /// `submission_org`.
    pub org: Option<String>,
    /// `metadata.status` of `run_stop` (`success`, `aborted`, ...); `None` without `run_stop`.
    pub status: Option<String>,
    /// `status == "success"` (what the RCP checker counts as converged).
    pub converged: bool,
    /// `time_ms` of `run_start` (see the module docs for which one).
    pub run_start_ms: Option<i64>,
    /// `time_ms` of `run_stop`.
    pub run_stop_ms: Option<i64>,
    /// `(run_stop − run_start) / 60000`.
    pub time_to_train_min: Option<f64>,
    /// First `init_start` to first `init_stop`, in seconds.
    pub init_time_s: Option<f64>,
    /// The last `global_batch_size` (as the RCP checker reads it).
    pub global_batch_size: Option<f64>,
    /// For a converged run, the `samples_count` (for older benchmarks the `epoch_num`) of the
    /// last eval before `run_stop`, as the RCP checker reads it.
    pub samples_to_converge: Option<f64>,
    /// What [`EvalPoint::x`] counts: `samples`, `epochs` or `steps`.
    pub x_unit: &'static str,
    /// The eval curve (records of the target's key with a numeric value), in file order.
    pub evals: Vec<EvalPoint>,
    /// The quality target, when the benchmark is known to a ruleset.
    pub target: Option<TargetLine>,
    /// Samples per second over the timed run: samples to converge / time to train, for
    /// sample-counted benchmarks.
    pub throughput: Option<f64>,
    /// The run's throughput as the log states it: the run's own `tracked_stats` (metadata
    /// `overall: true`, as the layer writes it) when there is one, else the mean of the
    /// `throughput` values of the other `tracked_stats` records, when there are any.
    pub logged_throughput: Option<f64>,
    /// `train_step_time` values from `tracked_stats`, in seconds: each the mean step time of
    /// the block that record closes (the run's `overall` record is no block: left out).
    pub step_times_s: Vec<f64>,
    /// For each of [`step_times_s`](Self::step_times_s), the steps it covers
    /// (`metadata.steps`, which the layer logs), `None` in logs that do not say.
    pub step_counts: Vec<Option<u64>>,
    /// Number of MLLOG records read.
    pub records: usize,
    /// Number of `:::MLLOG` lines that did not parse.
    pub parse_errors: usize,
    /// The largest wall-clock step the logging layer saw during the run, in milliseconds
    /// (signed: the wall clock minus the log's clock), from the [`WALL_CLOCK_STEP_MS`] metadata
    /// of the records that carry it; `None` in logs without it.
    pub wall_clock_step_ms: Option<f64>,
}

/// Metadata on a record (an interval's end) saying how far, in milliseconds, the wall clock
/// had moved away from the log's monotonic clock by then: an NTP step or a pause the log's
/// durations do not count. The official checker ignores it.
pub const WALL_CLOCK_STEP_MS: &str = "wall_clock_step_ms";

impl RunSummary {
    /// Whether the last eval met the target (`None` when either is unknown).
    pub fn target_reached(&self) -> Option<bool> {
        let t = self.target.as_ref()?;
        let best = self
            .evals
            .iter()
            .map(|e| e.value)
            .reduce(if t.higher_is_better {
                f64::max
            } else {
                f64::min
            })?;
        Some(if t.higher_is_better {
            best >= t.value
        } else {
            best <= t.value
        })
    }

    /// Median step time in seconds (weighted by steps, see [`step_stats`](Self::step_stats)).
    pub fn median_step_time_s(&self) -> Option<f64> {
        self.step_stats().map(|s| s.median_s)
    }

    /// Step-time statistics over the steps. Each `tracked_stats` record gives the mean step
    /// time of a block of `metadata.steps` steps, so a record counts as that many steps; a log
    /// whose records lack `steps` (older logs) weights each record once and says so in
    /// [`StepStats::steps`] = `None`.
    pub fn step_stats(&self) -> Option<StepStats> {
        if self.step_times_s.is_empty() {
            return None;
        }
        let known = self.step_counts.len() == self.step_times_s.len()
            && self.step_counts.iter().all(Option::is_some);
        let mut v: Vec<(f64, u64)> = self
            .step_times_s
            .iter()
            .enumerate()
            .map(|(i, &t)| {
                let w = if known {
                    self.step_counts[i].unwrap_or(1)
                } else {
                    1
                };
                (t, w)
            })
            .filter(|(t, w)| t.is_finite() && *w > 0)
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total: u64 = v.iter().map(|x| x.1).sum();
        // Nearest rank: the smallest time whose cumulative weight reaches q of the total.
        let q = |q: f64| {
            let rank = ((q * total as f64).ceil() as u64).max(1);
            let mut cum = 0;
            for &(t, w) in &v {
                cum += w;
                if cum >= rank {
                    return t;
                }
            }
            v[v.len() - 1].0
        };
        Some(StepStats {
            steps: known.then_some(total),
            records: self.step_times_s.len(),
            median_s: q(0.5),
            p90_s: q(0.9),
            p99_s: q(0.99),
        })
    }
}

/// Step-time statistics of a run ([`RunSummary::step_stats`]).
///
/// Steps are weighted by the number of steps each `tracked_stats` record covers, so a long
/// block counts for more than a short one.
///
/// ```
/// use mllog_core::results::summary::RunSummary;
///
/// let run = RunSummary {
///     step_times_s: vec![0.5, 0.6, 2.0],
///     step_counts: vec![Some(98), Some(1), Some(1)],
///     ..Default::default()
/// };
/// let s = run.step_stats().unwrap();
/// assert_eq!((s.steps, s.records), (Some(100), 3));
/// assert_eq!((s.median_s, s.p90_s, s.p99_s), (0.5, 0.5, 0.6));
/// assert_eq!(run.median_step_time_s(), Some(0.5));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepStats {
    /// Steps covered, when every `tracked_stats` record says how many (`metadata.steps`).
    pub steps: Option<u64>,
    /// `tracked_stats` records with a `train_step_time`.
    pub records: usize,
    /// Median step time, seconds.
    pub median_s: f64,
    /// 90th percentile, seconds.
    pub p90_s: f64,
    /// 99th percentile, seconds.
    pub p99_s: f64,
}

/// Builds a summary incrementally from records (what [`summarize_reader`] does).
///
/// Use it where the records arrive one by one (a sink, a log being tailed): [`push`] each
/// record in log order, then [`finish`]. Memory stays proportional to the evaluations and
/// steps, not to the log.
///
/// [`push`]: SummaryBuilder::push
/// [`finish`]: SummaryBuilder::finish
///
/// ```
/// use mllog_core::record::{Metadata, Record};
/// use mllog_core::results::summary::SummaryBuilder;
/// use mllog_core::{EventType, Value};
///
/// let mut b = SummaryBuilder::new("live");
/// b.push(&Record::event("run_start", Value::Null).with_event_type(EventType::IntervalStart).at_millis(0));
/// b.push(&Record::event("eval_accuracy", 0.8).at_millis(60_000)
///     .with_metadata(Metadata::default().with("samples_count", 512u64)));
/// b.push(&Record::event("run_stop", Value::Null).with_event_type(EventType::IntervalEnd).at_millis(120_000)
///     .with_metadata(Metadata::default().with("status", "success")));
/// let run = b.finish();
/// assert_eq!(run.time_to_train_min, Some(2.0));
/// assert!(run.converged);
/// assert_eq!(run.samples_to_converge, Some(512.0));
/// ```
#[derive(Debug, Default)]
pub struct SummaryBuilder {
    s: RunSummary,
    start_stop_done: bool,
    init_start: Option<i64>,
    init_stop: Option<i64>,
    last_eval_x_before_stop: Option<f64>,
    stop_seen: bool,
    throughputs: Vec<f64>,
    overall_throughput: Option<f64>,
    evals_raw: Vec<(String, Option<String>, EvalPoint)>,
}

fn meta_x(r: &Record) -> (Option<f64>, &'static str) {
    for (k, unit) in [
        ("samples_count", "samples"),
        ("epoch_num", "epochs"),
        ("step_num", "steps"),
        ("step", "steps"),
    ] {
        if let Some(v) = r.metadata.get(k).and_then(Value::as_f64) {
            return (Some(v), unit);
        }
    }
    (None, "samples")
}

impl SummaryBuilder {
    /// A builder for the log at `path`.
    pub fn new(path: &str) -> SummaryBuilder {
        SummaryBuilder {
            s: RunSummary {
                path: path.to_string(),
                x_unit: "samples",
                ..RunSummary::default()
            },
            ..SummaryBuilder::default()
        }
    }

    /// Feeds one record, in file order.
    pub fn push(&mut self, r: &Record) {
        self.s.records += 1;
        let t = r.time_ms();
        match &*r.key {
            "submission_benchmark" if self.s.benchmark.is_none() => {
                self.s.benchmark = r.value.as_str().map(str::to_string)
            }
            "submission_division" if self.s.division.is_none() => {
                self.s.division = r.value.as_str().map(str::to_string)
            }
            "submission_org" if self.s.org.is_none() => {
                self.s.org = r.value.as_str().map(str::to_string)
            }
            "global_batch_size" => self.s.global_batch_size = r.value.as_f64(),
            "init_start" if self.init_start.is_none() => self.init_start = Some(t),
            "init_stop" if self.init_stop.is_none() => self.init_stop = Some(t),
            "run_start" if !self.start_stop_done => {
                self.s.run_start_ms = Some(t);
                self.start_stop_done = self.s.run_stop_ms.is_some();
            }
            "run_stop" => {
                if !self.start_stop_done {
                    self.s.run_stop_ms = Some(t);
                    self.start_stop_done = self.s.run_start_ms.is_some();
                }
                if !self.stop_seen {
                    self.stop_seen = true;
                    self.s.status = r
                        .metadata
                        .get("status")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                    self.s.converged = self.s.status.as_deref() == Some("success");
                    if self.s.converged {
                        self.s.samples_to_converge = self.last_eval_x_before_stop;
                    }
                }
            }
            // The run's own record (`overall`, as the layer writes it at `run_stop`) describes
            // the blocks' steps a second time: it gives the run's throughput, never more steps.
            "tracked_stats" if r.metadata.get("overall") == Some(&Value::Bool(true)) => {
                if let Some(x) = r.value.get("throughput").and_then(Value::as_f64) {
                    self.overall_throughput = Some(x);
                }
            }
            "tracked_stats" => {
                if let Some(x) = r.value.get("throughput").and_then(Value::as_f64) {
                    self.throughputs.push(x);
                }
                if let Some(x) = r.value.get("train_step_time").and_then(Value::as_f64) {
                    self.s.step_times_s.push(x);
                    let steps = r.metadata.get("steps").and_then(Value::as_f64);
                    self.s
                        .step_counts
                        .push(steps.filter(|n| *n >= 0.0).map(|n| n as u64));
                }
            }
            _ => {}
        }
        if let Some(ms) = r.metadata.get(WALL_CLOCK_STEP_MS).and_then(Value::as_f64)
            && self.s.wall_clock_step_ms.is_none_or(|m| ms.abs() > m.abs())
        {
            self.s.wall_clock_step_ms = Some(ms);
        }
        if matches!(
            &*r.key,
            "eval_accuracy" | "eval_error" | "averaged_validation_loss"
        ) {
            let (x, unit) = meta_x(r);
            if !self.stop_seen {
                self.last_eval_x_before_stop = x;
                if x.is_some() {
                    self.s.x_unit = unit;
                }
            }
            if let Some(v) = r.value.as_f64() {
                let metric = r
                    .metadata
                    .get("metric")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                self.evals_raw.push((
                    r.key.to_string(),
                    metric,
                    EvalPoint {
                        x,
                        value: v,
                        time_ms: t,
                    },
                ));
            }
        }
    }

    /// Notes `n` unparsable `:::MLLOG` lines.
    pub fn parse_errors(&mut self, n: usize) {
        self.s.parse_errors += n;
    }

    /// The summary.
    pub fn finish(mut self) -> RunSummary {
        let s = &mut self.s;
        if let (Some(a), Some(b)) = (s.run_start_ms, s.run_stop_ms) {
            s.time_to_train_min = Some((b - a) as f64 / 60000.0);
        }
        if let (Some(a), Some(b)) = (self.init_start, self.init_stop) {
            s.init_time_s = Some((b - a) as f64 / 1000.0);
        }
        s.target = s
            .benchmark
            .as_deref()
            .and_then(|b| target_line(b, s.division.as_deref()));
        let key = s
            .target
            .as_ref()
            .map_or("eval_accuracy", |t| t.key.as_str())
            .to_string();
        let pick = |key: &str| -> Vec<EvalPoint> {
            // Logs with several metrics under one key (stable diffusion: FID and CLIP) keep
            // one: the first by name, so that every run shows the same one.
            let metric = self
                .evals_raw
                .iter()
                .filter(|(k, _, _)| k == key)
                .filter_map(|(_, m, _)| m.clone())
                .min();
            self.evals_raw
                .iter()
                .filter(|(k, m, _)| k == key && *m == metric)
                .map(|(_, _, e)| e.clone())
                .collect()
        };
        let mut evals = pick(&key);
        if evals.is_empty() {
            evals = pick("eval_accuracy");
        }
        s.evals = evals;
        if let (Some(n), Some(min)) = (s.samples_to_converge, s.time_to_train_min)
            && s.x_unit == "samples"
            && min > 0.0
        {
            s.throughput = Some(n / (min * 60.0));
        }
        s.logged_throughput = self.overall_throughput.or_else(|| {
            (!self.throughputs.is_empty())
                .then(|| self.throughputs.iter().sum::<f64>() / self.throughputs.len() as f64)
        });
        self.s
    }
}

/// The target of `benchmark` in `division` (default closed) under the newest ruleset that
/// knows the benchmark.
pub fn target_line(benchmark: &str, division: Option<&str>) -> Option<TargetLine> {
    let b = Benchmark::from_name(benchmark)?;
    let d = division
        .and_then(Division::from_name)
        .unwrap_or(Division::Closed);
    Ruleset::ALL.iter().rev().find_map(|&r| {
        let t = target(r, b, d)?;
        let iv = t.range?;
        let bound = if t.higher_is_better { iv.min } else { iv.max }?;
        Some(TargetLine {
            key: t.key.to_string(),
            value: bound.value,
            higher_is_better: t.higher_is_better,
        })
    })
}

/// Summarises a log from any reader (streamed: constant memory apart from the eval curve).
pub fn summarize_reader<R: BufRead>(path: &str, input: R) -> std::io::Result<RunSummary> {
    let mut b = SummaryBuilder::new(path);
    let mut reader = LogReader::new(input);
    let mut errors = 0;
    for item in reader.by_ref() {
        match item {
            Ok(line) => b.push(&line.record),
            Err(_) => errors += 1,
        }
    }
    if let Some(e) = reader.io_error() {
        return Err(std::io::Error::new(e.kind(), e.to_string()));
    }
    b.parse_errors(errors);
    Ok(b.finish())
}

/// Summarises a log held in memory.
pub fn summarize_text(path: &str, text: &str) -> RunSummary {
    summarize_reader(path, text.as_bytes()).expect("reading memory cannot fail")
}

/// Summarises a file.
pub fn summarize_file(path: &Path) -> std::io::Result<RunSummary> {
    let f = std::fs::File::open(path)?;
    let label = path.display().to_string();
    summarize_reader(&label, std::io::BufReader::with_capacity(1 << 16, f))
}

/// Four significant digits, whatever the magnitude (step times span microseconds to seconds).
fn sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (3 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

fn fmt_opt(x: Option<f64>, prec: usize) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.prec$}"))
}

fn fmt_x(x: Option<f64>) -> String {
    match x {
        Some(v) if v.fract() == 0.0 && v.abs() < 1e15 => format!("{}", v as i64),
        Some(v) => format!("{v:.3}"),
        None => "?".into(),
    }
}

/// A text table, one row per run, then each run's eval curve.
pub fn render_text(runs: &[RunSummary]) -> String {
    let header = [
        "file",
        "benchmark",
        "status",
        "ttt_min",
        "samples",
        "evals",
        "init_s",
        "samples/s",
    ];
    let rows: Vec<[String; 8]> = runs
        .iter()
        .map(|r| {
            [
                r.path.clone(),
                r.benchmark.clone().unwrap_or_else(|| "-".into()),
                r.status.clone().unwrap_or_else(|| "no run_stop".into()),
                fmt_opt(r.time_to_train_min, 4),
                r.samples_to_converge
                    .map_or_else(|| "-".into(), |v| fmt_x(Some(v))),
                r.evals.len().to_string(),
                fmt_opt(r.init_time_s, 1),
                fmt_opt(r.throughput.or(r.logged_throughput), 2),
            ]
        })
        .collect();
    let mut w = header.map(|h| h.chars().count());
    for row in &rows {
        for (i, c) in row.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if i == 0 || i == 1 || i == 2 {
                out.push_str(c);
                out.push_str(&" ".repeat(pad));
            } else {
                out.push_str(&" ".repeat(pad));
                out.push_str(c);
            }
            out.push_str(if i + 1 < cells.len() { "  " } else { "\n" });
        }
    };
    line(&header.map(String::from), &mut out);
    for row in &rows {
        line(row, &mut out);
    }
    for r in runs {
        if let Some(ms) = r.wall_clock_step_ms {
            out.push_str(&format!(
                "{}: the wall clock stepped {ms:+.3} ms during the run (an NTP step or a pause; \
                 the log's durations are on the monotonic clock)\n",
                r.path
            ));
        }
    }
    for r in runs {
        if r.evals.is_empty() {
            if r.step_times_s.is_empty() {
                continue;
            }
            out.push_str(&format!("\n{}: no eval\n", r.path));
        }
        let tgt = r.target.as_ref().map_or(String::new(), |t| {
            format!(
                " (target {} {})",
                if t.higher_is_better { ">=" } else { "<=" },
                t.value
            )
        });
        if !r.evals.is_empty() {
            out.push_str(&format!(
                "\n{}: eval curve, {} -> value{tgt}\n",
                r.path, r.x_unit
            ));
            let pts: Vec<String> = r
                .evals
                .iter()
                .map(|e| format!("{}:{}", fmt_x(e.x), e.value))
                .collect();
            out.push_str("  ");
            out.push_str(&pts.join(" "));
            out.push('\n');
        }
        if let Some(st) = r.step_stats() {
            let over = match st.steps {
                Some(n) => format!(
                    "over {n} steps ({} tracked_stats record{})",
                    st.records,
                    if st.records == 1 { "" } else { "s" }
                ),
                None => format!(
                    "over {} tracked_stats records, not steps: the log does not say how many \
                     steps each covers (no metadata.steps)",
                    st.records
                ),
            };
            out.push_str(&format!(
                "  step time: median {} s, p90 {} s, p99 {} s {over}\n",
                sig(st.median_s),
                sig(st.p90_s),
                sig(st.p99_s),
            ));
        }
    }
    out
}

/// A run as the machine-readable output shows it: `RunSummary`'s fields with the derived ones
/// (`num_evals`, `target_reached`, step-time statistics) and without the raw step times.
#[cfg(feature = "serde")]
#[derive(serde::Serialize)]
struct RunJson<'a> {
    path: &'a str,
    benchmark: Option<&'a str>,
    division: Option<&'a str>,
    org: Option<&'a str>,
    status: Option<&'a str>,
    converged: bool,
    run_start_ms: Option<i64>,
    run_stop_ms: Option<i64>,
    time_to_train_min: Option<f64>,
    init_time_s: Option<f64>,
    global_batch_size: Option<f64>,
    samples_to_converge: Option<f64>,
    x_unit: &'static str,
    num_evals: usize,
    evals: &'a [EvalPoint],
    target: Option<&'a TargetLine>,
    target_reached: Option<bool>,
    throughput: Option<f64>,
    logged_throughput: Option<f64>,
    num_step_times: usize,
    steps: Option<u64>,
    median_step_time_s: Option<f64>,
    p90_step_time_s: Option<f64>,
    p99_step_time_s: Option<f64>,
    records: usize,
    parse_errors: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    wall_clock_step_ms: Option<f64>,
}

/// `{path, benchmark, division, org, status, converged, run_start_ms, run_stop_ms,
/// time_to_train_min, init_time_s, global_batch_size, samples_to_converge, x_unit, num_evals,
/// evals: [{x, value, time_ms}], target: {key, value, higher_is_better}, target_reached,
/// throughput, logged_throughput, num_step_times, steps, median_step_time_s, p90_step_time_s,
/// p99_step_time_s, records, parse_errors, wall_clock_step_ms (only when the log has one)}`;
/// non-finite numbers are `null`.
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
impl serde::Serialize for RunSummary {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let st = self.step_stats();
        RunJson {
            path: &self.path,
            benchmark: self.benchmark.as_deref(),
            division: self.division.as_deref(),
            org: self.org.as_deref(),
            status: self.status.as_deref(),
            converged: self.converged,
            run_start_ms: self.run_start_ms,
            run_stop_ms: self.run_stop_ms,
            time_to_train_min: self.time_to_train_min,
            init_time_s: self.init_time_s,
            global_batch_size: self.global_batch_size,
            samples_to_converge: self.samples_to_converge,
            x_unit: self.x_unit,
            num_evals: self.evals.len(),
            evals: &self.evals,
            target: self.target.as_ref(),
            target_reached: self.target_reached(),
            throughput: self.throughput,
            logged_throughput: self.logged_throughput,
            num_step_times: self.step_times_s.len(),
            steps: st.and_then(|s| s.steps),
            median_step_time_s: st.map(|s| s.median_s),
            p90_step_time_s: st.map(|s| s.p90_s),
            p99_step_time_s: st.map(|s| s.p99_s),
            records: self.records,
            parse_errors: self.parse_errors,
            wall_clock_step_ms: self.wall_clock_step_ms,
        }
        .serialize(s)
    }
}

/// One JSON object for a run (one line); the shape is `RunSummary`'s `Serialize`.
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub fn run_to_json(r: &RunSummary) -> String {
    serde_json::to_string(r).expect("a run summary serialises")
}

/// A JSON array of runs (one object per line).
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub fn render_json(runs: &[RunSummary]) -> String {
    let items: Vec<String> = runs.iter().map(run_to_json).collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}

/// A CSV field, quoted when needed (RFC 4180: a comma, quote or line break inside).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// CSV with a header row; the eval curve is one field `x:value;x:value;...`.
pub fn render_csv(runs: &[RunSummary]) -> String {
    let mut out = String::from(
        "path,benchmark,status,converged,time_to_train_min,samples_to_converge,num_evals,\
         init_time_s,throughput,logged_throughput,global_batch_size,target,median_step_time_s,\
         p90_step_time_s,p99_step_time_s,steps,eval_curve\n",
    );
    let num = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
    for r in runs {
        let curve: Vec<String> = r
            .evals
            .iter()
            .map(|e| format!("{}:{}", num(e.x), e.value))
            .collect();
        let st = r.step_stats();
        let cells = [
            csv_field(&r.path),
            csv_field(r.benchmark.as_deref().unwrap_or("")),
            csv_field(r.status.as_deref().unwrap_or("")),
            r.converged.to_string(),
            num(r.time_to_train_min),
            num(r.samples_to_converge),
            r.evals.len().to_string(),
            num(r.init_time_s),
            num(r.throughput),
            num(r.logged_throughput),
            num(r.global_batch_size),
            num(r.target.as_ref().map(|t| t.value)),
            num(st.map(|s| s.median_s)),
            num(st.map(|s| s.p90_s)),
            num(st.map(|s| s.p99_s)),
            st.and_then(|s| s.steps)
                .map_or(String::new(), |n| n.to_string()),
            csv_field(&curve.join(";")),
        ];
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod wall_clock_step {
    use super::*;

    #[test]
    fn the_largest_step_is_kept_and_shown() {
        let line = |key: &str, t: i64, step: Option<&str>| {
            let md = step.map_or(String::new(), |s| format!("\"{WALL_CLOCK_STEP_MS}\": {s}"));
            format!(
                ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {t}, \"event_type\": \
                 \"INTERVAL_END\", \"key\": \"{key}\", \"value\": null, \"metadata\": {{{md}}}}}\n"
            )
        };
        let log = [
            line("block_stop", 1, Some("1500.0")),
            line("block_stop", 2, Some("-2500.25")),
            line("run_stop", 3, Some("900.0")),
        ]
        .concat();
        let run = summarize_text("a.txt", &log);
        assert_eq!(run.wall_clock_step_ms, Some(-2500.25));
        let text = render_text(std::slice::from_ref(&run));
        assert!(
            text.contains("a.txt: the wall clock stepped -2500.250 ms during the run"),
            "{text}"
        );
        let plain = summarize_text("b.txt", &line("run_stop", 3, None));
        assert_eq!(plain.wall_clock_step_ms, None);
        assert!(!render_text(&[plain]).contains("wall clock"));
    }
}
