//! The RCP checker: a benchmark folder's convergence against the reference convergence points
//! (RCPs) of its ruleset, the way `mlperf_logging.rcp_checker` (mlperf-logging 4.1.68) decides
//! it, with every decision in words, and the scaling factor the review applies to the score.
//!
//! For a folder `results/<system>/<benchmark>/`:
//! 1. each `result_*.txt` gives its samples (or epochs) to converge as the official reader
//!    takes them ([`read_run`]): the `samples_count` (or rounded `epoch_num`) of the last
//!    `eval_accuracy` before a successful `run_stop`; stable_diffusion: the first eval step whose
//!    FID ≤ 90 and CLIP ≥ 0.15; a run that did not succeed counts as 1e9. More than one such
//!    run (4 for unet3d): "Insufficient convergence". Every file must have the same
//!    `global_batch_size` and `submission_benchmark`;
//! 2. the ruleset's RCP records ([`RcpTable`]): per record the olympic mean (one dropped at
//!    each end, four for unet3d) and the population standard deviation of its runs, and the
//!    *minimum acceptable mean*: the smallest submission mean that a one-sided two-sample
//!    t-test at alpha 0.05 (pooled variance, as `scipy.stats.ttest_ind_from_stats(...,
//!    equal_var=True)`, through `statrs`' Student's t distribution) does not call faster than
//!    the reference, found by bisection to 1e-4 ([`min_acceptable_mean`]). The records are
//!    *pruned* (by default): those below the fastest-converging batch size go, then every point
//!    that converges slower than the interpolation of its neighbours;
//! 3. the record for the folder's batch size: the exact one ("RCP found"), else the
//!    interpolation of the two neighbouring batch sizes ("RCP Interpolation"); below the
//!    smallest batch size, the smallest record is used and a pass reads "RCP not found but
//!    slower convergence on smaller batch size"; above the largest, or a fail below the
//!    smallest: "Missing RCP, please submit RCP with BS = N";
//! 4. the folder's olympic mean must be at least the minimum acceptable mean (llama31_405b,
//!    from 5.0.0: `RCP mean / (min acceptable − 46080)` is the allowed speedup); a mean below
//!    the RCP mean but within it passes and the score is *normalised* by `RCP mean / mean`
//!    (`scaling.json`); `--rcp_bypass` (or a `package_checker_params` file whose last line is
//!    exactly `rcp-bypass`) lets a failed "RCP found", "RCP Interpolation" or "Missing RCP" pass.
//!
//! ```
//! use mllog_core::compliance::Ruleset;
//! use mllog_core::results::rcp::RcpTable;
//!
//! let table = RcpTable::new(Ruleset::V5_0_0, "bert", false).unwrap();
//! let rec = &table.records[0];
//! assert!(rec.min_acceptable_mean < rec.mean && rec.max_speedup > 1.0);
//! assert!(RcpTable::new(Ruleset::V6_1_0, "bert", false).is_none()); // no bert in 6.1.0
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::rcp_data::SUBMISSION_RUNS;
use super::rcp_file::RcpRecord;
use super::rcp_tables::RcpTables;
use super::score::{result_entries, ResultEntry};
use crate::compliance::Ruleset;

/// The t-test's significance level.
pub const ALPHA: f64 = 0.05;
/// The bisection's stopping width.
pub const TOLERANCE: f64 = 0.0001;
/// What a run that did not converge counts as.
pub const NOT_CONVERGED: f64 = 1e9;

/// The benchmarks whose convergence is the eval's `samples_count`.
const SAMPLES_BENCHMARKS: [&str; 8] = [
    "llama2_70b_lora",
    "flux1",
    "llama31_405b",
    "llama31_8b",
    "gpt_oss_20b",
    "deepseekv3_671b",
    "qwen35_397b_grpo",
    "dlrmv4",
];

/// `rcp_checker.submission_runs`: the runs of a submission, per benchmark.
pub fn submission_runs(benchmark: &str) -> Option<usize> {
    SUBMISSION_RUNS
        .iter()
        .find(|(b, _)| *b == benchmark)
        .map(|(_, n)| *n)
}

fn rejected(benchmark: &str) -> usize {
    if benchmark == "unet3d" {
        4
    } else {
        1
    }
}

// ---------------------------------------------------------------------------------------------
// numpy's arithmetic, so that means and factors agree to the last bit.

/// numpy's pairwise summation (`np.add.reduce` on a contiguous float64 array).
pub fn np_sum(a: &[f64]) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut r = 0.0;
        for x in a {
            r += x;
        }
        r
    } else if n <= 128 {
        let mut r = [0.0; 8];
        r.copy_from_slice(&a[..8]);
        let mut i = 8;
        while i < n - n % 8 {
            for j in 0..8 {
                r[j] += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        while i < n {
            res += a[i];
            i += 1;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        np_sum(&a[..n2]) + np_sum(&a[n2..])
    }
}

/// `np.mean` (NaN for an empty slice, as numpy gives with a warning).
pub fn np_mean(a: &[f64]) -> f64 {
    np_sum(a) / a.len() as f64
}

/// `np.std` (population, `ddof=0`).
pub fn np_std(a: &[f64]) -> f64 {
    let m = np_mean(a);
    let d: Vec<f64> = a.iter().map(|x| (x - m) * (x - m)).collect();
    (np_sum(&d) / a.len() as f64).sqrt()
}

/// `np.interp(x, [x0, x1], [y0, y1])` for `x0 < x < x1`.
pub fn np_interp2(x: f64, (x0, y0): (f64, f64), (x1, y1): (f64, f64)) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < x0 {
        return y0;
    }
    if x >= x1 {
        return y1;
    }
    if x == x0 {
        return y0;
    }
    let slope = (y1 - y0) / (x1 - x0);
    let r = slope * (x - x0) + y0;
    if r.is_nan() {
        let r = slope * (x - x1) + y1;
        if r.is_nan() && y0 == y1 {
            return y0;
        }
        return r;
    }
    r
}

/// Python's `round(x, 3)`: correctly rounded to three decimals (ties to even, on the exact
/// binary value).
pub fn py_round3(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    format!("{x:.3}").parse().unwrap_or(x)
}

// ---------------------------------------------------------------------------------------------
// The statistics.

/// The one-sided p-value of `rcp_checker._find_p_value`: a two-sample t-test with pooled
/// variance (`equal_var=True`) of the means `m1`, `m2` with standard deviations `s1`, `s2` and
/// sizes `n1`, `n2`, the two-sided p-value turned one-sided the way the official tool does (which
/// is the t distribution's CDF at the statistic).
pub fn one_sided_p(m1: f64, s1: f64, n1: f64, m2: f64, s2: f64, n2: f64) -> f64 {
    let df = n1 + n2 - 2.0;
    let svar = ((n1 - 1.0) * (s1 * s1) + (n2 - 1.0) * (s2 * s2)) / df;
    let denom = (svar * (1.0 / n1 + 1.0 / n2)).sqrt();
    let t = (m1 - m2) / denom;
    // A NaN or infinite figure (an RCP file may hold them: Python's json reads NaN and
    // Infinity) gives scipy's NaN p-value, or the limits of the t distribution.
    if t.is_nan() || df.is_nan() {
        return f64::NAN;
    }
    if t.is_infinite() {
        return if t < 0.0 { 0.0 } else { 1.0 };
    }
    let dist = StudentsT::new(0.0, 1.0, df).expect("df > 0 for the sizes the checker uses");
    let two_sided = 2.0 * dist.sf(t.abs());
    if t < 0.0 {
        two_sided / 2.0
    } else {
        1.0 - two_sided / 2.0
    }
}

/// `_find_min_acceptable_mean`: the bisection, between 0 and `mean`, for the smallest
/// submission mean whose one-sided p-value against the reference (`mean`, `stdev`,
/// `num_samples_ref` runs; the submission with the same deviation and `submission_runs − 2`
/// runs) is above [`ALPHA`]. A zero deviation gives `mean`.
pub fn min_acceptable_mean(
    mean: f64,
    stdev: f64,
    num_samples_ref: usize,
    submission_runs: usize,
) -> f64 {
    if stdev == 0.0 {
        return mean;
    }
    let n_subm = submission_runs as f64 - 2.0;
    let (mut lo, mut hi) = (0.0_f64, mean);
    let mut mid = (lo + hi) / 2.0;
    while hi - lo > TOLERANCE {
        let p = one_sided_p(mid, stdev, num_samples_ref as f64, mean, stdev, n_subm);
        if p > ALPHA {
            hi = mid;
        } else {
            lo = mid;
        }
        mid = (lo + hi) / 2.0;
    }
    mid
}

/// One RCP record with its statistics.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RcpPoint {
    /// The record's name (`bert_ref_448`; `<benchmark>_interp_<bs>` for an interpolation).
    pub name: String,
    /// The record's `Benchmark` (see [`RcpRecord::benchmark`]; serialized as the file's JSON
    /// value, `null` for a record of no benchmark).
    #[cfg_attr(feature = "serde", serde(serialize_with = "as_in_file"))]
    pub benchmark: String,
    /// The batch size.
    pub bs: f64,
    /// The reference runs (empty for an interpolation).
    pub runs: usize,
    /// The olympic mean of the reference runs.
    pub mean: f64,
    /// Their population standard deviation.
    pub stdev: f64,
    /// The minimum acceptable submission mean.
    pub min_acceptable_mean: f64,
    /// `mean / min_acceptable_mean`.
    pub max_speedup: f64,
}

/// A ruleset's RCP records for one benchmark, sorted by batch size, with the pruned set.
#[derive(Clone, Debug, PartialEq)]
pub struct RcpTable {
    /// The ruleset (`X.Y.Z`).
    pub ruleset: String,
    /// The benchmark.
    pub benchmark: String,
    /// Every record, by batch size (stable: file order among equal ones).
    pub records: Vec<RcpPoint>,
    /// The records pruning keeps, in the order the official tool keeps them.
    pub pruned: Vec<RcpPoint>,
    /// The records the checks use (`pruned`, or every record with `full_rcps`).
    pub full: bool,
    /// The benchmark's submission runs.
    pub submission_runs: usize,
}

impl RcpTable {
    /// The table of `training_<ruleset>/rcps_<benchmark>.json`; `None` when the package has
    /// none (or the benchmark has no submission run count). `full` checks against every record
    /// (`--rcp_pass full_rcps`) instead of the pruned ones.
    pub fn new(ruleset: Ruleset, benchmark: &str, full: bool) -> Option<RcpTable> {
        let tables = RcpTables::built_in(ruleset.as_str()).ok()?;
        let data = tables.records(benchmark).ok()??;
        let submission_runs = submission_runs(benchmark)?;
        Some(RcpTable::from_records(
            ruleset.as_str(),
            benchmark,
            &data.records,
            submission_runs,
            full,
        ))
    }

    /// The table of `records` (an RCP file's, in file order) for a check of `benchmark`, whose
    /// submissions have `submission_runs` runs, as `RCP_Checker` builds it.
    pub fn from_records(
        ruleset: &str,
        benchmark: &str,
        records: &[RcpRecord],
        submission_runs: usize,
        full: bool,
    ) -> RcpTable {
        let mut records: Vec<RcpPoint> =
            records.iter().map(|r| point(r, submission_runs)).collect();
        // `sorted(..., key=BS)`; a file whose order CPython's merges would decide is refused
        // when it is read (`rcp_file`).
        super::py_sort::py_sort_by(
            &mut records,
            |a, b| a.bs < b.bs,
            |a, b| a.bs.total_cmp(&b.bs),
        );
        let mut t = RcpTable {
            ruleset: ruleset.to_owned(),
            benchmark: benchmark.to_owned(),
            pruned: Vec::new(),
            records,
            full,
            submission_runs,
        };
        t.pruned = t.prune();
        t
    }

    /// The records the lookups use.
    pub fn used(&self) -> &[RcpPoint] {
        if self.full {
            &self.records
        } else {
            &self.pruned
        }
    }

    /// `_prune_rcps`.
    fn prune(&self) -> Vec<RcpPoint> {
        if self.records.is_empty() {
            return Vec::new();
        }
        let mut fastest = &self.records[0];
        for r in &self.records[1..] {
            if r.mean < fastest.mean {
                fastest = r;
            }
        }
        let mut kept: Vec<&RcpPoint> = self.records.iter().filter(|r| r.bs >= fastest.bs).collect();
        let mut i = 1usize;
        let mut len = kept.len();
        while len >= 2 && i < len - 1 {
            let interp = self.interpolate(kept[i].bs, kept[i - 1], kept[i + 1]);
            if kept[i].mean > interp.mean {
                kept.remove(i);
                i -= 1;
                len -= 1;
            }
            i += 1;
        }
        let mut out: Vec<RcpPoint> = Vec::new();
        for k in &kept {
            for r in &self.records {
                if r.benchmark == k.benchmark
                    && r.bs == k.bs
                    && !out.iter().any(|o| o.name == r.name)
                {
                    out.push(r.clone());
                }
            }
        }
        out
    }

    /// `_create_interp_rcp`: the record for `bs` interpolated between `low` and `high`.
    pub fn interpolate(&self, bs: f64, low: &RcpPoint, high: &RcpPoint) -> RcpPoint {
        let mean = np_interp2(bs, (low.bs, low.mean), (high.bs, high.mean));
        let stdev = np_interp2(bs, (low.bs, low.stdev), (high.bs, high.stdev));
        let min = min_acceptable_mean(mean, stdev, self.submission_runs * 2, self.submission_runs);
        RcpPoint {
            name: format!("{}_interp_{}", self.benchmark, py_num(bs)),
            benchmark: self.benchmark.clone(),
            bs,
            runs: 0,
            mean,
            stdev,
            min_acceptable_mean: min,
            max_speedup: mean / min,
        }
    }

    fn find(&self, bs: f64) -> Option<&RcpPoint> {
        self.used().iter().find(|r| r.bs == bs)
    }

    fn top_min(&self, bs: f64) -> Option<&RcpPoint> {
        let mut best: Option<&RcpPoint> = None;
        let mut min_bs = 0.0;
        for r in self.used() {
            if r.bs < bs && r.bs > min_bs {
                min_bs = r.bs;
                best = Some(r);
            }
        }
        best
    }

    fn bottom_max(&self, bs: f64) -> Option<&RcpPoint> {
        let mut best: Option<&RcpPoint> = None;
        let mut max_bs = 1e9;
        for r in self.used() {
            if r.bs > bs && r.bs < max_bs {
                max_bs = r.bs;
                best = Some(r);
            }
        }
        best
    }

    fn smallest(&self) -> Option<&RcpPoint> {
        let mut best: Option<&RcpPoint> = None;
        let mut min_bs = 1e9;
        for r in self.used() {
            if r.bs < min_bs {
                min_bs = r.bs;
                best = Some(r);
            }
        }
        best
    }
}

/// A record's `Benchmark` as its file has it: the string, or the JSON value that is not one.
#[cfg(feature = "serde")]
fn as_in_file<S: serde::Serializer>(benchmark: &str, s: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    match benchmark.strip_prefix(super::rcp_file::NOT_A_STRING) {
        Some(json) => serde_json::from_str::<serde_json::Value>(json)
            .map_err(serde::ser::Error::custom)?
            .serialize(s),
        None => s.serialize_str(benchmark),
    }
}

fn point(r: &RcpRecord, submission_runs: usize) -> RcpPoint {
    let mut v = r.converge.clone();
    super::py_sort::py_sort_f64(&mut v);
    let rej = rejected(&r.benchmark);
    let kept = v.get(rej..v.len().saturating_sub(rej)).unwrap_or(&[]);
    let mean = np_mean(kept);
    let stdev = np_std(&v);
    let min = min_acceptable_mean(
        mean,
        stdev,
        v.len().saturating_sub(rej * 2),
        submission_runs,
    );
    RcpPoint {
        name: r.name.clone(),
        benchmark: r.benchmark.clone(),
        bs: r.bs,
        runs: v.len(),
        mean,
        stdev,
        min_acceptable_mean: min,
        max_speedup: mean / min,
    }
}

/// A number for messages: integral values without a fraction, others as Python's `repr`.
pub fn show(x: f64) -> String {
    py_num(x)
}

/// A number as Python's `str` shows it: integral values of integer JSON as integers.
fn py_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{}", x as i64)
    } else {
        let mut s = String::new();
        crate::record::write_float(&mut s, x);
        s
    }
}

/// Python's `repr` of a float.
pub fn py_float(x: f64) -> String {
    let mut s = String::new();
    crate::record::write_float(&mut s, x);
    s
}

// ---------------------------------------------------------------------------------------------
// Reading the runs.

/// What one result file gives the RCP checker (`read_submission_file`).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RcpRun {
    /// The file.
    #[cfg_attr(feature = "serde", serde(serialize_with = "display_path"))]
    pub file: PathBuf,
    /// Whether its last `run_stop` has status `success`.
    pub converged: bool,
    /// Samples (or epochs) to converge; [`NOT_CONVERGED`] when it did not.
    pub to_converge: f64,
    /// `global_batch_size` (the last one logged); `None` when absent.
    pub batch_size: Option<f64>,
    /// `global_batch_size` as the log spells it (Python's `str`).
    pub batch_size_text: Option<String>,
    /// `submission_benchmark` (the last one logged).
    pub benchmark: Option<String>,
    /// The log field the figure comes from (`samples_count`, `epoch_num`, `train_samples`).
    pub unit: &'static str,
    /// Where the official reader would stop with an exception, in words.
    pub error: Option<String>,
    /// Lines longer than 16 MiB, skipped unread.
    pub skipped_lines: usize,
}

/// Reads one result file as the official RCP checker does: the lines holding `:::MLLOG `
/// (latin-1, any line ending), the last `global_batch_size` and `submission_benchmark`, and
/// the convergence figure at the last successful `run_stop`. `bert_train_samples` takes bert's
/// `train_samples` instead of `epoch_num`.
pub fn read_run(file: &Path, bert_train_samples: bool) -> std::io::Result<RcpRun> {
    read_run_for(file, bert_train_samples, Ruleset::DEFAULT.as_str())
}

/// [`read_run`] under `ruleset`: in 3.1.0 a stable_diffusion eval's step is its `step_num`,
/// later its `samples_count`.
pub fn read_run_for(
    file: &Path,
    bert_train_samples: bool,
    ruleset: &str,
) -> std::io::Result<RcpRun> {
    let f = std::io::BufReader::with_capacity(1 << 16, std::fs::File::open(file)?);
    let mut lines = Latin1Lines::new(f);
    let sd_step = if ruleset == "3.1.0" {
        "step_num"
    } else {
        "samples_count"
    };
    let mut run = read_run_lines(file, &mut lines, bert_train_samples, sd_step);
    if let Some(e) = lines.error.take() {
        return Err(e);
    }
    run.skipped_lines = lines.skipped;
    Ok(run)
}

/// The lines of a file as Python's text mode with `encoding='latin-1'` gives them (a line
/// ends at `\n`, `\r\n` or `\r`), read as a stream; a physical line longer than
/// [`crate::record::MAX_LINE`] is skipped (counted), never held in memory.
struct Latin1Lines<R> {
    r: R,
    buf: Vec<u8>,
    pieces: std::collections::VecDeque<String>,
    lineno: usize,
    skipped: usize,
    error: Option<std::io::Error>,
    done: bool,
}

impl<R: std::io::BufRead> Latin1Lines<R> {
    fn new(r: R) -> Self {
        Latin1Lines {
            r,
            buf: Vec::new(),
            pieces: Default::default(),
            lineno: 0,
            skipped: 0,
            error: None,
            done: false,
        }
    }
}

impl<R: std::io::BufRead> Iterator for Latin1Lines<R> {
    type Item = (usize, String);

    fn next(&mut self) -> Option<(usize, String)> {
        loop {
            if let Some(p) = self.pieces.pop_front() {
                self.lineno += 1;
                return Some((self.lineno, p));
            }
            if self.done {
                return None;
            }
            self.buf.clear();
            let mut too_long = false;
            loop {
                let avail = match self.r.fill_buf() {
                    Ok(b) => b,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        self.error = Some(e);
                        self.done = true;
                        break;
                    }
                };
                if avail.is_empty() {
                    self.done = true;
                    break;
                }
                let (n, found) = match avail.iter().position(|&b| b == b'\n') {
                    Some(i) => (i + 1, true),
                    None => (avail.len(), false),
                };
                if !too_long {
                    if self.buf.len() + n > crate::record::MAX_LINE {
                        too_long = true;
                        self.buf = Vec::new();
                    } else {
                        self.buf.extend_from_slice(&avail[..n]);
                    }
                }
                self.r.consume(n);
                if found {
                    break;
                }
            }
            if too_long {
                self.skipped += 1;
                self.lineno += 1;
                continue;
            }
            if self.buf.is_empty() {
                continue;
            }
            let text: String = self.buf.iter().map(|&b| b as char).collect();
            let text = text.strip_suffix('\n').unwrap_or(&text);
            let text = text.strip_suffix('\r').unwrap_or(text);
            self.pieces.extend(text.split('\r').map(str::to_owned));
        }
    }
}

const TOKEN: &str = ":::MLLOG ";

fn py_strip(s: &str) -> &str {
    let ws = |c: char| {
        matches!(
            c,
            ' ' | '\t'
                | '\n'
                | '\r'
                | '\x0b'
                | '\x0c'
                | '\x1c'
                | '\x1d'
                | '\x1e'
                | '\x1f'
                | '\u{85}'
                | '\u{a0}'
        )
    };
    s.trim_matches(ws)
}

fn read_run_lines(
    file: &Path,
    lines: &mut dyn Iterator<Item = (usize, String)>,
    bert_train_samples: bool,
    sd_step: &'static str,
) -> RcpRun {
    use serde_json::Value as J;
    let mut run = RcpRun {
        file: file.to_path_buf(),
        converged: false,
        to_converge: NOT_CONVERGED,
        batch_size: None,
        batch_size_text: None,
        benchmark: None,
        unit: if bert_train_samples {
            "train_samples"
        } else {
            "epoch_num"
        },
        error: None,
        skipped_lines: 0,
    };
    let mut use_train_samples = bert_train_samples;
    let mut conv: Option<f64> = None;
    // stable_diffusion: eval step → (FID, CLIP), in first-seen order.
    let mut sd: Vec<(f64, Option<f64>, Option<f64>)> = Vec::new();
    let fail = |run: &mut RcpRun, lineno: usize, what: String| {
        if run.error.is_none() {
            run.error = Some(format!("line {lineno}: {what}"));
        }
    };
    let num = |v: &J| v.as_f64();
    for (lineno, raw) in lines {
        let raw = raw.as_str();
        let Some(pos) = raw.rfind(TOKEN) else {
            continue;
        };
        let line = py_strip(&raw[pos..]);
        let Some(body) = line.strip_prefix(TOKEN) else {
            continue;
        };
        let parse = || serde_json::from_str::<J>(body);
        if body.contains("global_batch_size") {
            match parse() {
                Ok(j) => {
                    let v = j.get("value").cloned().unwrap_or(J::Null);
                    run.batch_size = super::rcp_file::json_number(&v);
                    run.batch_size_text = Some(match &v {
                        J::Number(n) if n.is_f64() => py_float(n.as_f64().unwrap_or(f64::NAN)),
                        J::Bool(true) => "True".into(),
                        J::Bool(false) => "False".into(),
                        other => other.to_string(),
                    });
                }
                Err(e) => fail(&mut run, lineno, format!("not JSON ({e})")),
            }
        }
        if body.contains("submission_benchmark") {
            match parse() {
                Ok(j) => {
                    let b = j
                        .get("value")
                        .and_then(J::as_str)
                        .map(str::to_owned)
                        .unwrap_or_default();
                    if b != "bert" && use_train_samples {
                        use_train_samples = false;
                    }
                    run.benchmark = Some(b);
                }
                Err(e) => fail(&mut run, lineno, format!("not JSON ({e})")),
            }
        }
        let is_eval = body.contains("eval_error") || body.contains("eval_accuracy");
        let bench = run.benchmark.as_deref().unwrap_or("");
        if bench == "stable_diffusion" && is_eval {
            run.unit = sd_step;
            match parse() {
                Ok(j) => {
                    let md = j.get("metadata");
                    let step = md.and_then(|m| m.get(sd_step)).and_then(num);
                    let metric = md.and_then(|m| m.get("metric")).and_then(J::as_str);
                    let score = j.get("value").and_then(num);
                    match (step, metric) {
                        (Some(step), Some(metric)) => {
                            let idx = match sd.iter().position(|e| e.0 == step) {
                                Some(i) => i,
                                None => {
                                    sd.push((step, None, None));
                                    sd.len() - 1
                                }
                            };
                            match metric {
                                "FID" => sd[idx].1 = score,
                                "CLIP" => sd[idx].2 = score,
                                _ => {}
                            }
                        }
                        _ => fail(
                            &mut run,
                            lineno,
                            format!("an eval line without metadata {sd_step} and metric"),
                        ),
                    }
                }
                Err(e) => fail(&mut run, lineno, format!("not JSON ({e})")),
            }
        } else if SAMPLES_BENCHMARKS.contains(&bench) && is_eval {
            run.unit = "samples_count";
            match parse().map(|j| {
                j.get("metadata")
                    .and_then(|m| m.get("samples_count"))
                    .and_then(num)
            }) {
                Ok(Some(v)) => conv = Some(v),
                Ok(None) => fail(
                    &mut run,
                    lineno,
                    "an eval line without a numeric metadata samples_count".into(),
                ),
                Err(e) => fail(&mut run, lineno, format!("not JSON ({e})")),
            }
        } else if !use_train_samples && is_eval {
            run.unit = "epoch_num";
            match parse().map(|j| {
                j.get("metadata")
                    .and_then(|m| m.get("epoch_num"))
                    .and_then(num)
            }) {
                Ok(Some(v)) => conv = Some(py_round3(v)),
                Ok(None) => fail(
                    &mut run,
                    lineno,
                    "an eval line without a numeric metadata epoch_num".into(),
                ),
                Err(e) => fail(&mut run, lineno, format!("not JSON ({e})")),
            }
        } else if use_train_samples && body.contains("train_samples") {
            run.unit = "train_samples";
            match parse().map(|j| j.get("value").and_then(num)) {
                Ok(Some(v)) => conv = Some(v),
                Ok(None) => fail(&mut run, lineno, "train_samples without a number".into()),
                Err(e) => fail(&mut run, lineno, format!("not JSON ({e})")),
            }
        }
        if body.contains("run_stop") {
            let Ok(j) = parse() else {
                fail(&mut run, lineno, "a run_stop line that is not JSON".into());
                continue;
            };
            if j.get("key").and_then(J::as_str) != Some("run_stop") {
                continue;
            }
            let status = j
                .get("metadata")
                .and_then(|m| m.get("status"))
                .and_then(J::as_str);
            if status == Some("success") {
                run.converged = true;
                if run.benchmark.as_deref() == Some("stable_diffusion") {
                    let mut best: Option<f64> = None;
                    // `FID <= 90 and CLIP >= 0.15`, as Python evaluates it: CLIP is only
                    // looked up when FID passes, so a step without CLIP whose FID is above
                    // 90 is just not a passing step.
                    for (step, fid, clip) in &sd {
                        match (fid, clip) {
                            (Some(f), Some(c)) if *f <= 90.0 => {
                                if *c >= 0.15 && best.is_none_or(|b| *step < b) {
                                    best = Some(*step);
                                }
                            }
                            (Some(f), None) if *f <= 90.0 => fail(
                                &mut run,
                                lineno,
                                format!("the eval at {sd_step} {step} has FID <= 90 but no CLIP"),
                            ),
                            (Some(_), _) => {}
                            (None, _) => fail(
                                &mut run,
                                lineno,
                                format!("the eval at {sd_step} {step} has no FID"),
                            ),
                        }
                    }
                    conv = best;
                    if best.is_none() {
                        fail(
                            &mut run,
                            lineno,
                            "no eval step meets FID <= 90 and CLIP >= 0.15".into(),
                        );
                    }
                }
                match conv {
                    Some(c) => run.to_converge = c,
                    None => {
                        fail(
                            &mut run,
                            lineno,
                            "a successful run_stop with no eval before it".into(),
                        );
                        run.to_converge = NOT_CONVERGED;
                    }
                }
            } else {
                run.converged = false;
                run.to_converge = NOT_CONVERGED;
            }
        }
    }
    run
}

// ---------------------------------------------------------------------------------------------
// The check.

/// Options of [`check_benchmark`].
#[derive(Clone, Debug, PartialEq)]
pub struct RcpOptions {
    /// The ruleset whose RCPs apply (`X.Y.Z`).
    pub ruleset: String,
    /// Where the RCP records come from (`None`: the built-in tables of `ruleset`).
    pub tables: Option<Arc<RcpTables>>,
    /// `--rcp_bypass`: a failed "RCP found", "RCP Interpolation" or "Missing RCP" passes.
    pub bypass: bool,
    /// `--rcp_pass full_rcps`: every record, not the pruned ones.
    pub full_rcps: bool,
    /// `--bert_train_samples`.
    pub bert_train_samples: bool,
}

impl RcpOptions {
    /// The package checker's defaults for `ruleset`: pruned records, no bypass.
    pub fn new(ruleset: Ruleset) -> RcpOptions {
        RcpOptions {
            ruleset: ruleset.as_str().into(),
            tables: None,
            bypass: false,
            full_rcps: false,
            bert_train_samples: false,
        }
    }

    /// The package checker's defaults with the RCPs of `tables` (and their ruleset, which need
    /// not be one built in).
    pub fn with_tables(tables: Arc<RcpTables>) -> RcpOptions {
        RcpOptions {
            ruleset: tables.ruleset.clone(),
            tables: Some(tables),
            bypass: false,
            full_rcps: false,
            bert_train_samples: false,
        }
    }
}

/// How the folder's batch size met the RCP records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum RcpStatus {
    /// A record has the batch size.
    Found,
    /// Between two records: interpolated.
    Interpolated,
    /// Below the smallest record, and not faster than it allows.
    BelowSmallest,
    /// No usable record ("Missing RCP, please submit RCP with BS = N").
    Missing,
    /// The table has no record at all.
    NoRcps,
    /// No `global_batch_size` in the logs.
    NoBatchSize,
    /// More runs did not converge than olympic scoring drops.
    InsufficientConvergence,
    /// The official tool would stop with an exception here (see [`RcpResult::error`]).
    Error,
}

/// What the check does to `scaling.json` (the official tool with `set_scaling=True`).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum Scaling {
    /// Deletes it, then writes this factor.
    Write(f64),
    /// Deletes it (no normalisation).
    Delete,
    /// Leaves it as it is (the check stopped before comparing).
    Untouched,
}

/// The RCP check of one benchmark folder, every decision kept in words.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RcpResult {
    /// The folder.
    #[cfg_attr(feature = "serde", serde(serialize_with = "display_path"))]
    pub folder: PathBuf,
    /// The ruleset (`X.Y.Z`).
    pub ruleset: String,
    /// The logs' `submission_benchmark`.
    pub benchmark: Option<String>,
    /// The logs' `global_batch_size`.
    pub batch_size: Option<f64>,
    /// Each result file, sorted by name.
    pub runs: Vec<RcpRun>,
    /// How the batch size met the records.
    pub status: RcpStatus,
    /// The official tool's message (`rcp_msg`).
    pub official_message: String,
    /// The record(s) used: one, or the two neighbours of an interpolation.
    pub records: Vec<RcpPoint>,
    /// The record compared against (the interpolation itself when interpolated).
    pub compared: Option<RcpPoint>,
    /// The reference mean.
    pub rcp_mean: Option<f64>,
    /// The smallest mean that passes (after llama31_405b's rule).
    pub min_acceptable_mean: Option<f64>,
    /// The folder's olympic mean of samples (or epochs) to converge.
    pub mean: Option<f64>,
    /// The verdict (after any bypass).
    pub passed: bool,
    /// Whether the bypass turned a fail into a pass.
    pub bypassed: bool,
    /// `RCP mean / mean`, at least 1 (1 when nothing was compared).
    pub norm_factor: f64,
    /// What happens to `scaling.json`.
    pub scaling: Scaling,
    /// Where the official tool would stop with an exception, in words.
    pub error: Option<String>,
    /// The folder or one of its files could not be read (an I/O error, not a verdict: the
    /// commands exit 2).
    pub io_error: bool,
    /// The decisions, in order.
    pub decisions: Vec<String>,
}

impl RcpResult {
    /// The factor the score is multiplied by once the check has run: the one written, 1.0 when
    /// `scaling.json` is deleted, else `committed` (the existing file's, 1.0 when none).
    pub fn final_factor(&self, committed: f64) -> f64 {
        match self.scaling {
            Scaling::Write(f) => f,
            Scaling::Delete => 1.0,
            Scaling::Untouched => committed,
        }
    }

    /// The result_summarizer's `<benchmark>:RCP` column. The summarizer runs the check without
    /// any bypass, so a bypassed pass reads as the failure it was.
    pub fn summarizer_column(&self) -> &'static str {
        let msg = self
            .official_message
            .strip_suffix(" passed using rcp_bypass")
            .unwrap_or(&self.official_message);
        if self.passed && !self.bypassed {
            "Pass"
        } else if msg == "RCP found" {
            "Fail"
        } else if msg == "RCP Interpolation" {
            "Interp. Fail"
        } else if msg.contains("Missing") {
            "Missing"
        } else if msg == "Cannot find any RCPs" {
            "No RCP"
        } else {
            "Unknown state"
        }
    }
}

#[cfg(feature = "serde")]
fn display_path<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&p.display())
}

/// `scaling.json`'s text as the official tool writes it: `{"scaling_factor": <repr>}`, no
/// newline.
pub fn scaling_json(factor: f64) -> String {
    format!("{{\"scaling_factor\": {}}}", py_float(factor))
}

/// Applies [`RcpResult::scaling`] to the folder, as the official tool with `set_scaling=True`.
pub fn write_scaling(folder: &Path, r: &RcpResult) -> std::io::Result<()> {
    let path = folder.join("scaling.json");
    let remove = || match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    };
    match r.scaling {
        Scaling::Untouched => Ok(()),
        Scaling::Delete => remove(),
        Scaling::Write(f) => {
            remove()?;
            std::fs::write(&path, scaling_json(f))
        }
    }
}

/// `package_checker_params` as the package checker reads it, in the benchmark folder and in
/// its system folder: `(bypass, note)`. Only a line that is exactly `rcp-bypass` counts, and
/// Python's `readlines()` keeps the newline, so only a last line without one does; the note
/// says so when a file names `rcp-bypass` on a line the official tool does not honour.
pub fn package_bypass(folder: &Path) -> (bool, Option<String>) {
    let mut on = false;
    let mut note = None;
    let mut paths = vec![folder.join("package_checker_params")];
    if let Some(system) = folder.parent() {
        paths.push(system.join("package_checker_params"));
    }
    for p in paths {
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let text: String = bytes.iter().map(|&b| b as char).collect();
        for line in text.split_inclusive('\n') {
            if line == "rcp-bypass" {
                on = true;
            } else if line.trim() == "rcp-bypass" {
                note = Some(format!(
                    "{}: `rcp-bypass` followed by a line break or spaces: the official package \
                     checker compares whole lines with their newline, so it does not honour it \
                     (neither do we)",
                    p.display()
                ));
            }
        }
    }
    (on, note)
}

/// `runs` in the order the folder listed their files.
fn listing_order<'a>(listed: &[ResultEntry], runs: &'a [RcpRun]) -> Vec<&'a RcpRun> {
    let mut v: Vec<&RcpRun> = runs.iter().collect();
    v.sort_by_key(|run| listed.iter().position(|e| e.path == run.file));
    v
}

/// A file's `global_batch_size` as `get_submission_epochs` compares it: a number (`-1` when
/// the file logs none), or another JSON value by its text (equal only to the same text).
#[derive(Clone, Debug, PartialEq)]
enum LoggedBs {
    Number(f64),
    Other(String),
}

impl LoggedBs {
    fn of(run: &RcpRun) -> LoggedBs {
        match (run.batch_size, &run.batch_size_text) {
            (Some(n), _) => LoggedBs::Number(n),
            (None, Some(t)) => LoggedBs::Other(t.clone()),
            (None, None) => LoggedBs::Number(-1.0),
        }
    }

    fn is_missing(&self) -> bool {
        *self == LoggedBs::Number(-1.0)
    }
}

fn fmt(x: f64) -> String {
    show(x)
}

/// Checks one benchmark folder as `rcp_checker.check_directory` does (never panics; an
/// unreadable folder or file, or a case where the official tool stops with an exception, is
/// [`RcpStatus::Error`] with the reason).
pub fn check_benchmark(folder: &Path, opts: &RcpOptions) -> RcpResult {
    let mut r = RcpResult {
        folder: folder.to_path_buf(),
        ruleset: opts.ruleset.clone(),
        benchmark: None,
        batch_size: None,
        runs: Vec::new(),
        status: RcpStatus::Error,
        official_message: String::new(),
        records: Vec::new(),
        compared: None,
        rcp_mean: None,
        min_acceptable_mean: None,
        mean: None,
        passed: false,
        bypassed: false,
        norm_factor: 1.0,
        scaling: Scaling::Untouched,
        error: None,
        io_error: false,
        decisions: Vec::new(),
    };
    let err = |mut r: RcpResult, e: String| {
        r.decisions.push(format!("error: {e}"));
        r.error = Some(e);
        r.status = RcpStatus::Error;
        r
    };
    let listed = match result_entries(folder) {
        Ok(l) => l,
        Err(e) => {
            r.io_error = true;
            return err(r, format!("{}: {e}", folder.display()));
        }
    };
    let mut by_name = listed.clone();
    by_name.sort_by(|a, b| a.path.cmp(&b.path));
    if let Some(e) = by_name.iter().find(|e| e.not_a_file.is_some()) {
        r.io_error = true;
        return err(
            r,
            format!(
                "{}: {} (the official rcp_checker stops here with an OSError)",
                e.path.display(),
                e.not_a_file.unwrap_or_default()
            ),
        );
    }
    let paths: Vec<PathBuf> = by_name.into_iter().map(|e| e.path).collect();
    if paths.is_empty() {
        return err(r, format!("{}: no result_*.txt", folder.display()));
    }
    for p in &paths {
        match read_run_for(p, opts.bert_train_samples, &opts.ruleset) {
            Ok(run) => r.runs.push(run),
            Err(e) => {
                r.io_error = true;
                return err(r, format!("{}: {e}", p.display()));
            }
        }
    }
    for run in &r.runs {
        if run.skipped_lines > 0 {
            r.decisions.push(format!(
                "{}: {} line(s) longer than 16 MiB skipped unread (no MLLOG record is that long)",
                run.file.display(),
                run.skipped_lines
            ));
        }
    }
    if let Some(run) = r.runs.iter().find(|x| x.error.is_some()) {
        let e = format!(
            "{}: {} (the official rcp_checker stops here with an exception)",
            run.file.display(),
            run.error.as_deref().unwrap_or_default()
        );
        return err(r, e);
    }
    // get_submission_epochs: batch size and benchmark must agree across the files, taken in the
    // order the official glob lists them, which is the directory's: a file without a batch
    // size (or benchmark) is skipped over when it comes first, a mismatch when it comes later.
    let mut bs: Option<(LoggedBs, Option<String>)> = None;
    let mut bench: Option<String> = None;
    for run in listing_order(&listed, &r.runs) {
        let cur = LoggedBs::of(run);
        match &bs {
            None => bs = Some((cur, run.batch_size_text.clone())),
            Some((b, _)) if b.is_missing() => bs = Some((cur, run.batch_size_text.clone())),
            Some((b, first)) if *b != cur => {
                let e = format!(
                    "global_batch_size differs between the files ({} has {}, the first had {}); \
                     the official rcp_checker stops with a KeyError",
                    run.file.display(),
                    run.batch_size_text.as_deref().unwrap_or("none"),
                    first.as_deref().unwrap_or("none")
                );
                return err(r, e);
            }
            _ => {}
        }
        match &bench {
            None => bench = run.benchmark.clone(),
            Some(b) if run.benchmark.as_ref() != Some(b) => {
                let e = format!(
                    "submission_benchmark differs between the files ({} has {}, others {b}); the \
                     official rcp_checker stops with a KeyError",
                    run.file.display(),
                    run.benchmark.as_deref().unwrap_or("none"),
                );
                return err(r, e);
            }
            _ => {}
        }
    }
    let (bs, bs_text) = bs.unwrap_or((LoggedBs::Number(-1.0), None));
    let (bs, not_a_number) = match bs {
        LoggedBs::Number(n) => (n, None),
        LoggedBs::Other(t) => (f64::NAN, Some(t)),
    };
    r.benchmark = bench.clone();
    let Some(benchmark) = bench else {
        return err(
            r,
            "no submission_benchmark in the logs (the official rcp_checker stops with a KeyError)"
                .into(),
        );
    };
    let (table, file) = match table_for(opts, &benchmark) {
        Ok((table, file, warnings)) => {
            r.decisions.extend(warnings);
            (table, file)
        }
        Err(e) => {
            r.io_error = e.io;
            return err(r, e.message);
        }
    };
    let unit = r.runs.first().map_or("epoch_num", |x| x.unit);
    r.decisions.push(format!(
        "RCP table {file}: {} records (batch sizes {}); {}",
        table.records.len(),
        table
            .records
            .iter()
            .map(|p| py_num(p.bs))
            .collect::<Vec<_>>()
            .join(", "),
        if opts.full_rcps {
            "every record used (full_rcps)".to_string()
        } else {
            let gone: Vec<String> = table
                .records
                .iter()
                .filter(|p| !table.pruned.iter().any(|k| k.name == p.name))
                .map(|p| py_num(p.bs))
                .collect();
            if gone.is_empty() {
                "pruning keeps every record".into()
            } else {
                format!("pruning drops batch sizes {}", gone.join(", "))
            }
        }
    ));
    if bs == -1.0 {
        r.status = RcpStatus::NoBatchSize;
        r.official_message = "Could not detect global_batch_size".into();
        r.decisions
            .push("no global_batch_size in the logs: fails before any comparison".into());
        return r;
    }
    r.batch_size = not_a_number.is_none().then_some(bs);
    let bs_shown = bs_text.unwrap_or_else(|| py_num(bs));
    let not_converged = r.runs.iter().filter(|x| !x.converged).count();
    let allowance = rejected(&benchmark);
    r.decisions.push(format!(
        "{} runs, {} converged; {unit} to converge per run: {}",
        r.runs.len(),
        r.runs.len() - not_converged,
        r.runs
            .iter()
            .map(|x| if x.converged {
                fmt(x.to_converge)
            } else {
                "not converged (1e9)".into()
            })
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if not_converged > allowance {
        r.status = RcpStatus::InsufficientConvergence;
        r.official_message = "Insufficient convergence".into();
        r.decisions.push(format!(
            "{not_converged} runs did not converge (olympic scoring drops {allowance}): fails"
        ));
        return r;
    }
    if let Some(t) = not_a_number {
        return err(
            r,
            format!(
                "global_batch_size is {t}, not a number (the official rcp_checker stops with a \
                 TypeError comparing it with the records' batch sizes)"
            ),
        );
    }
    let mut subm: Vec<f64> = r.runs.iter().map(|x| x.to_converge).collect();
    let eval = |r: &mut RcpResult, rec: &RcpPoint, subm: &mut Vec<f64>| -> bool {
        let mut rec = rec.clone();
        if version_at_least(&opts.ruleset, "5.0.0") && benchmark == "llama31_405b" {
            rec.max_speedup = rec.mean / (rec.min_acceptable_mean - 46080.0);
            r.decisions.push(format!(
                "llama31_405b: the allowed speedup is RCP mean / (minimum acceptable mean − \
                 46080) = {} / ({} − 46080) = {}",
                fmt(rec.mean),
                fmt(rec.min_acceptable_mean),
                fmt(rec.max_speedup)
            ));
        }
        super::py_sort::py_sort_f64(subm);
        // The record's benchmark, as the official checker reads it (a custom file may mix them).
        let rej = rejected(&rec.benchmark);
        let kept = subm.get(rej..subm.len().saturating_sub(rej)).unwrap_or(&[]);
        let mean = np_mean(kept);
        let norm = rec.mean / mean;
        let norm = if norm < 1.0 { 1.0 } else { norm };
        let threshold = rec.mean / rec.max_speedup;
        r.mean = Some(mean);
        r.rcp_mean = Some(rec.mean);
        r.min_acceptable_mean = Some(threshold);
        r.norm_factor = norm;
        r.decisions.push(format!(
            "the folder's mean {unit} to converge (olympic: {} of {} runs): {}; RCP mean {}, \
             minimum acceptable mean {}",
            kept.len(),
            subm.len(),
            fmt(mean),
            fmt(rec.mean),
            fmt(threshold)
        ));
        r.compared = Some(rec.clone());
        if mean >= threshold {
            if mean < rec.mean {
                r.scaling = Scaling::Write(norm);
                r.decisions.push(format!(
                    "passes, faster than the RCP mean but within the allowed speedup: the score \
                     is normalised by RCP mean / mean = {} / {} = {}",
                    fmt(rec.mean),
                    fmt(mean),
                    fmt(norm)
                ));
            } else {
                r.scaling = Scaling::Delete;
                r.decisions.push(
                    "passes, not faster than the RCP mean: no normalisation (factor 1)".into(),
                );
            }
            true
        } else if mean.is_nan() {
            r.scaling = Scaling::Delete;
            r.decisions.push(format!(
                "fails: olympic scoring of {} runs leaves none, so the mean is NaN, which no \
                 comparison passes (numpy's mean of nothing, as in the official checker)",
                subm.len()
            ));
            false
        } else {
            r.scaling = Scaling::Delete;
            r.decisions.push(format!(
                "fails: the mean {} is below the minimum acceptable mean {} (converges faster \
                 than the reference allows)",
                fmt(mean),
                fmt(threshold)
            ));
            false
        }
    };
    let missing = format!("Missing RCP, please submit RCP with BS = {bs_shown}");
    let passed;
    if let Some(rec) = table.find(bs).cloned() {
        r.status = RcpStatus::Found;
        r.official_message = "RCP found".into();
        r.decisions.push(format!(
            "batch size {bs_shown}: record {} ({} reference runs)",
            rec.name, rec.runs
        ));
        r.records = vec![rec.clone()];
        passed = eval(&mut r, &rec, &mut subm);
    } else {
        let low = table.top_min(bs).cloned();
        let high = table.bottom_max(bs).cloned();
        match (low, high) {
            (Some(low), Some(high)) => {
                r.status = RcpStatus::Interpolated;
                r.official_message = "RCP Interpolation".into();
                let interp = table.interpolate(bs, &low, &high);
                r.decisions.push(format!(
                    "batch size {bs_shown}: no record; interpolated between {} (BS {}, mean {}) \
                     and {} (BS {}, mean {}): mean {}, stdev {}",
                    low.name,
                    py_num(low.bs),
                    fmt(low.mean),
                    high.name,
                    py_num(high.bs),
                    fmt(high.mean),
                    fmt(interp.mean),
                    fmt(interp.stdev)
                ));
                r.records = vec![low, high];
                passed = eval(&mut r, &interp, &mut subm);
            }
            (Some(low), None) => {
                r.status = RcpStatus::Missing;
                r.official_message = missing.clone();
                r.decisions.push(format!(
                    "batch size {bs_shown}: above the largest record ({}, BS {}): no RCP to \
                     compare with; fails (scaling.json is left as it is)",
                    low.name,
                    py_num(low.bs)
                ));
                r.records = vec![low];
                passed = false;
            }
            (None, Some(_)) => {
                let rec = table.smallest().cloned().expect("a record exists");
                r.decisions.push(format!(
                    "batch size {bs_shown}: below the smallest record; compared with it: {} (BS \
                     {}, {} reference runs)",
                    rec.name,
                    py_num(rec.bs),
                    rec.runs
                ));
                r.records = vec![rec.clone()];
                passed = eval(&mut r, &rec, &mut subm);
                if passed {
                    r.status = RcpStatus::BelowSmallest;
                    r.official_message =
                        "RCP not found but slower convergence on smaller batch size".into();
                    if let Scaling::Write(f) = r.scaling {
                        r.decisions.push(format!(
                            "the official message reads \"RCP not found but slower convergence \
                             on smaller batch size\", but the folder converged faster than {} \
                             and is normalised by {}",
                            rec.name,
                            fmt(f)
                        ));
                    }
                } else {
                    r.status = RcpStatus::Missing;
                    r.official_message = missing.clone();
                }
            }
            (None, None) => {
                r.status = RcpStatus::NoRcps;
                r.official_message = "Cannot find any RCPs".into();
                r.decisions.push("the table has no record: fails".into());
                passed = false;
            }
        }
    }
    r.passed = passed;
    if opts.bypass
        && !passed
        && matches!(
            r.status,
            RcpStatus::Found | RcpStatus::Interpolated | RcpStatus::Missing
        )
    {
        r.official_message.push_str(" passed using rcp_bypass");
        r.passed = true;
        r.bypassed = true;
        r.decisions.push(
            "the RCP bypass lets it pass (to be reviewed by the submission committee); no \
             normalisation"
                .into(),
        );
    }
    r
}

/// Why [`table_for`] has no table: where the official checker stops with an exception, in
/// words naming the file.
#[derive(Clone, Debug, PartialEq)]
pub struct TableError {
    /// What happened, naming the file.
    pub message: String,
    /// Whether the RCP file could not be read (an I/O error, not a verdict on the folder).
    pub io: bool,
}

impl From<String> for TableError {
    fn from(message: String) -> TableError {
        TableError { message, io: false }
    }
}

/// The table a check of `benchmark` uses under `opts`: `(table, the file it comes from, what the
/// official checker warns about it)`; `Err` says, naming the file, where the official checker
/// stops with an exception instead.
pub fn table_for(
    opts: &RcpOptions,
    benchmark: &str,
) -> Result<(RcpTable, String, Vec<String>), TableError> {
    let built;
    let tables = match &opts.tables {
        Some(t) => t.as_ref(),
        None => {
            built = RcpTables::built_in(&opts.ruleset).map_err(|e| e.to_string())?;
            &built
        }
    };
    let Some(runs) = tables.submission_runs(benchmark) else {
        return Err(format!(
            "{benchmark}: not a benchmark the RCP checker knows (it stops with a KeyError)"
        )
        .into());
    };
    let data = match tables.records(benchmark) {
        Ok(Some(d)) => d,
        Ok(None) => {
            let file = format!("{}_{}/rcps_{benchmark}.json", tables.usage, tables.ruleset);
            let file = match &tables.origin {
                super::rcp_tables::RcpOrigin::Folder { dir, .. } => dir
                    .join(format!("rcps_{benchmark}.json"))
                    .display()
                    .to_string(),
                super::rcp_tables::RcpOrigin::BuiltIn { .. } => file,
            };
            return Err(format!(
                "no RCP file {file} (the official rcp_checker stops with FileNotFoundError; \
                 --custom-rcps brings RCPs for a benchmark that has none)"
            )
            .into());
        }
        Err(e) => {
            return Err(TableError {
                message: format!("{e} (the official rcp_checker stops here with an exception)"),
                io: e.is_io(),
            })
        }
    };
    let table = RcpTable::from_records(
        &tables.ruleset,
        benchmark,
        &data.records,
        runs,
        opts.full_rcps,
    );
    Ok((table, data.file, data.warnings))
}

/// `rcp_checker.is_version_at_least`: `version` ≥ `min`, compared as dotted integers (a part
/// that is not an integer compares as 0).
pub fn version_at_least(version: &str, min: &str) -> bool {
    let parts = |v: &str| -> Vec<u64> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    let (mut a, mut b) = (parts(version), parts(min));
    let n = a.len().max(b.len());
    a.resize(n, 0);
    b.resize(n, 0);
    a >= b
}

/// The benchmark folders under `dir` (see [`super::score::benchmark_folders`]), each checked.
pub fn check_dir(dir: &Path, opts: &RcpOptions) -> std::io::Result<Vec<RcpResult>> {
    Ok(super::score::benchmark_folders(dir)?
        .iter()
        .map(|f| check_benchmark(f, opts))
        .collect())
}

// ---------------------------------------------------------------------------------------------
// The final score.

/// A benchmark score after the review's RCP step: the olympic mean times the factor the RCP
/// check computes (not only the one a committed `scaling.json` holds).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FinalScore {
    /// The division of `systems/<system>.json`, when the folder sits in a submission.
    pub division: Option<String>,
    /// The RCP check (`None` in the open division: the summarizer runs none).
    pub rcp: Option<RcpResult>,
    /// The committed `scaling.json`'s factor, when there is one.
    pub committed_factor: Option<f64>,
    /// The factor applied.
    pub factor: f64,
    /// Whether the factor was computed by the RCP check (false: read from `scaling.json`).
    pub computed: bool,
    /// Whether a committed `scaling.json` holds the same factor (`None`: no file or no check).
    pub committed_agrees: Option<bool>,
    /// `olympic mean × factor`, in minutes; `None` when the folder has no score.
    pub score: Option<f64>,
    /// The decision, in words.
    pub decision: String,
}

/// `division` of `<submission>/systems/<system>.json` for `results/<system>/<benchmark>`, or
/// for an HPC folder `results/<system>/<strong|weak>/<benchmark>`.
pub fn system_division(folder: &Path) -> Result<Option<String>, String> {
    let hpc = folder
        .parent()
        .and_then(|s| s.parent().and_then(Path::parent).map(|r| (s, r)))
        .filter(|(s, r)| {
            matches!(
                s.file_name().and_then(|n| n.to_str()),
                Some("strong" | "weak")
            ) && r.file_name().is_some_and(|n| n == "results")
        });
    if let Some((scaling, _)) = hpc {
        return system_division(scaling);
    }
    let (Some(system), Some(sub)) = (
        folder.parent(),
        folder
            .parent()
            .and_then(Path::parent)
            .and_then(Path::parent),
    ) else {
        return Ok(None);
    };
    let Some(name) = system.file_name() else {
        return Ok(None);
    };
    let mut file = name.to_os_string();
    file.push(".json");
    let path = sub.join("systems").join(file);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let v: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    Ok(v.get("division")
        .and_then(|d| d.as_str())
        .map(str::to_owned))
}

/// The final score of a scored folder under `opts` (its ruleset and RCP tables; no bypass, as
/// the summarizer runs the check): as the result_summarizer's second run prints it once its RCP
/// step has written `scaling.json` (closed division, or no `systems/<system>.json`), or with
/// the committed factor in the open division.
pub fn final_score(s: &super::score::BenchmarkScore, opts: &RcpOptions) -> FinalScore {
    let committed = std::fs::metadata(s.folder.join("scaling.json"))
        .is_ok()
        .then_some(s.scaling_factor);
    let (division, division_note) = match system_division(&s.folder) {
        Ok(d) => (d, None),
        Err(e) => (None, Some(e)),
    };
    let open = division.as_deref().is_some_and(|d| d != "closed");
    let mut f = FinalScore {
        division: division.clone(),
        rcp: None,
        committed_factor: committed,
        factor: s.scaling_factor,
        computed: false,
        committed_agrees: None,
        score: None,
        decision: String::new(),
    };
    let mut why = Vec::new();
    if let Some(n) = division_note {
        why.push(format!(
            "the system description cannot be read ({n}): treated as closed"
        ));
    }
    if open {
        why.push(format!(
            "{} division: no RCP check; the factor is scaling.json's ({})",
            division.as_deref().unwrap_or_default(),
            py_float(s.scaling_factor)
        ));
    } else {
        let r = check_benchmark(&s.folder, opts);
        f.factor = r.final_factor(s.scaling_factor);
        f.computed = true;
        if division.is_none() {
            why.push("no systems/<system>.json: checked as the closed division".into());
        }
        why.push(match r.scaling {
            Scaling::Write(x) => format!(
                "computed by the RCP check ({}): the folder's mean {} is faster than the RCP \
                 mean {} of {}, normalised by {}",
                r.official_message,
                r.mean.map_or("-".into(), show),
                r.rcp_mean.map_or("-".into(), show),
                r.compared.as_ref().map_or("-".into(), |p| p.name.clone()),
                py_float(x)
            ),
            Scaling::Delete if r.passed => format!(
                "computed by the RCP check ({}): not faster than the RCP mean, factor 1",
                r.official_message
            ),
            Scaling::Delete => format!(
                "the RCP check fails ({}): scaling.json is removed, factor 1",
                r.official_message
            ),
            Scaling::Untouched => format!(
                "the RCP check stops early ({}): scaling.json is left as it is, factor {}",
                if r.official_message.is_empty() {
                    r.error.as_deref().unwrap_or("error")
                } else {
                    &r.official_message
                },
                py_float(s.scaling_factor)
            ),
        });
        if let Some(c) = committed {
            let agrees = c == f.factor;
            f.committed_agrees = Some(agrees);
            why.push(if agrees {
                "the committed scaling.json agrees".into()
            } else {
                format!(
                    "the committed scaling.json says {} instead (the review rewrites it)",
                    py_float(c)
                )
            });
        }
        f.rcp = Some(r);
    }
    f.score = s.score.and(s.olympic_mean).map(|m| m * f.factor);
    f.decision = why.join("; ");
    f
}

// ---------------------------------------------------------------------------------------------
// The forecast.

/// Draws of the forecast.
pub const FORECAST_DRAWS: usize = 20_000;
/// The forecast's seed: the same folder gives the same probabilities.
pub const FORECAST_SEED: u64 = 0x4d4c_4c4f_4752_4350;

/// A forecast of a campaign in progress (fewer runs than the benchmark requires).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Forecast {
    /// Runs present (converged).
    pub present: usize,
    /// Runs present that did not converge.
    pub not_converged: usize,
    /// Runs the benchmark requires.
    pub required: usize,
    /// The mean of the converged runs so far (plain mean).
    pub mean_so_far: Option<f64>,
    /// Their sample standard deviation.
    pub stdev_so_far: Option<f64>,
    /// The RCP mean for the folder's batch size.
    pub rcp_mean: Option<f64>,
    /// The minimum acceptable mean.
    pub min_acceptable_mean: Option<f64>,
    /// Probability that the finished set passes the RCP test.
    pub p_pass: Option<f64>,
    /// Probability that it passes without normalisation (olympic mean ≥ RCP mean).
    pub p_pass_unscaled: Option<f64>,
    /// Draws made.
    pub draws: usize,
    /// The model and the decisions, in words.
    pub decisions: Vec<String>,
}

/// Forecasts the RCP verdict of the finished campaign in `folder`: the remaining runs are drawn
/// from the posterior predictive of a normal model fitted to the present converged runs (flat
/// prior: σ² ~ scaled inverse χ²(n − 1, s²), μ | σ² ~ N(x̄, σ²/n), each remaining run ~
/// N(μ, σ²)), [`FORECAST_DRAWS`] sets with the seed [`FORECAST_SEED`]; each finished set is
/// judged as [`check_benchmark`] judges it (olympic mean against the minimum acceptable mean
/// and the RCP mean of the folder's batch size). Needs two converged runs.
pub fn forecast(folder: &Path, opts: &RcpOptions) -> (RcpResult, Forecast) {
    use rand::SeedableRng;
    use statrs::distribution::{ChiSquared, Normal};
    let r = check_benchmark(folder, opts);
    let benchmark = r.benchmark.clone().unwrap_or_default();
    let required = submission_runs(&benchmark).unwrap_or(0);
    let conv: Vec<f64> = r
        .runs
        .iter()
        .filter(|x| x.converged)
        .map(|x| x.to_converge)
        .collect();
    let not_converged = r.runs.len() - conv.len();
    let mut f = Forecast {
        present: conv.len(),
        not_converged,
        required,
        mean_so_far: None,
        stdev_so_far: None,
        rcp_mean: None,
        min_acceptable_mean: None,
        p_pass: None,
        p_pass_unscaled: None,
        draws: 0,
        decisions: Vec::new(),
    };
    let n = conv.len();
    if n > 0 {
        f.mean_so_far = Some(np_mean(&conv));
    }
    // The reference point for the batch size, as the check would find it.
    let point = r.batch_size.and_then(|bs| {
        let (table, _, _) = table_for(opts, &benchmark).ok()?;
        if let Some(p) = table.find(bs) {
            return Some(p.clone());
        }
        match (table.top_min(bs), table.bottom_max(bs)) {
            (Some(l), Some(h)) => Some(table.interpolate(bs, l, h)),
            (None, Some(_)) => table.smallest().cloned(),
            _ => None,
        }
    });
    let Some(mut point) = point else {
        f.decisions.push(match &r.error {
            Some(e) => format!("no forecast: {e}"),
            None => "no forecast: no RCP record applies to the folder's batch size".into(),
        });
        return (r, f);
    };
    if version_at_least(&opts.ruleset, "5.0.0") && benchmark == "llama31_405b" {
        point.max_speedup = point.mean / (point.min_acceptable_mean - 46080.0);
    }
    let threshold = point.mean / point.max_speedup;
    f.rcp_mean = Some(point.mean);
    f.min_acceptable_mean = Some(threshold);
    if required == 0 || r.runs.len() >= required {
        f.decisions.push(format!(
            "the folder already has {} of {required} runs: the check above is the verdict",
            r.runs.len()
        ));
        return (r, f);
    }
    if n < 2 {
        f.decisions.push(format!(
            "no forecast: {n} converged run(s); the model needs at least two to estimate the \
             spread"
        ));
        return (r, f);
    }
    let mean = np_mean(&conv);
    let s2 = conv.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n as f64 - 1.0);
    f.stdev_so_far = Some(s2.sqrt());
    let remaining = required - r.runs.len();
    let allowance = rejected(&benchmark);
    let mut rng = rand::rngs::StdRng::seed_from_u64(FORECAST_SEED);
    let chi = ChiSquared::new(n as f64 - 1.0).expect("n ≥ 2");
    let (mut pass, mut unscaled) = (0usize, 0usize);
    let mut set = Vec::with_capacity(required);
    for _ in 0..FORECAST_DRAWS {
        let (sigma2, mu) = if s2 > 0.0 {
            let sigma2 = (n as f64 - 1.0) * s2 / rand::distr::Distribution::sample(&chi, &mut rng);
            let mu = rand::distr::Distribution::sample(
                &Normal::new(mean, (sigma2 / n as f64).sqrt()).expect("finite"),
                &mut rng,
            );
            (sigma2, mu)
        } else {
            (0.0, mean)
        };
        set.clear();
        set.extend_from_slice(&conv);
        set.extend(std::iter::repeat_n(NOT_CONVERGED, not_converged));
        for _ in 0..remaining {
            let x = if sigma2 > 0.0 {
                rand::distr::Distribution::sample(
                    &Normal::new(mu, sigma2.sqrt()).expect("finite"),
                    &mut rng,
                )
            } else {
                mu
            };
            set.push(x);
        }
        if set.iter().filter(|x| **x == NOT_CONVERGED).count() > allowance {
            continue;
        }
        set.sort_by(f64::total_cmp);
        let m = np_mean(&set[allowance..set.len() - allowance]);
        if m >= threshold {
            pass += 1;
            if m >= point.mean {
                unscaled += 1;
            }
        }
    }
    f.draws = FORECAST_DRAWS;
    f.p_pass = Some(pass as f64 / FORECAST_DRAWS as f64);
    f.p_pass_unscaled = Some(unscaled as f64 / FORECAST_DRAWS as f64);
    f.decisions.push(format!(
        "{n} converged runs so far (mean {}, sample stdev {}), {remaining} to come of {required}",
        fmt(mean),
        fmt(s2.sqrt())
    ));
    f.decisions.push(format!(
        "model: the remaining runs drawn from the posterior predictive of a normal fitted to the \
         present runs (flat prior: σ² from a scaled inverse χ² with {} degrees of freedom, μ \
         given σ² normal around the mean so far), {FORECAST_DRAWS} finished sets, seed {:#x}; \
         each judged by its olympic mean against {} ({})",
        n - 1,
        FORECAST_SEED,
        point.name,
        if point.runs == 0 {
            "interpolated"
        } else {
            "record"
        }
    ));
    f.decisions.push(format!(
        "P(passes the RCP test) = {:.3}; P(passes without normalisation, mean ≥ RCP mean {}) = \
         {:.3}",
        pass as f64 / FORECAST_DRAWS as f64,
        fmt(point.mean),
        unscaled as f64 / FORECAST_DRAWS as f64
    ));
    (r, f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairwise_sum_matches_numpy_blocks() {
        // Eight accumulators: the order of additions differs from a plain loop.
        let a: Vec<f64> = (0..20).map(|i| 0.1 * i as f64 + 1e-3).collect();
        let plain: f64 = a.iter().sum();
        let r: Vec<f64> = (0..8).map(|j| a[j] + a[j + 8]).collect();
        let expect = ((r[0] + r[1]) + (r[2] + r[3]))
            + ((r[4] + r[5]) + (r[6] + r[7]))
            + a[16]
            + a[17]
            + a[18]
            + a[19];
        assert_eq!(np_sum(&a), expect);
        assert!((np_sum(&a) - plain).abs() < 1e-9);
        assert_eq!(np_sum(&[1.0, 2.0, 3.0]), 6.0);
        assert_eq!(np_std(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]), 2.0);
    }

    #[test]
    fn std_of_a_reference_record_is_numpys() {
        let t = RcpTables::built_in("5.0.0").unwrap();
        let mut v = t.records("bert").unwrap().unwrap().records[0]
            .converge
            .clone();
        v.sort_by(f64::total_cmp);
        // np.std of training_5.0.0 bert_ref_256, from numpy 2.4.
        assert_eq!(np_std(&v), 218406.13406770426, "{:?}", v);
        assert_eq!(np_mean(&v), 2552704.0);
    }

    #[test]
    fn lines_end_as_in_python_text_mode_and_long_lines_are_skipped() {
        let mut data = b"a\r\nb\rc\nd".to_vec();
        data.extend(std::iter::repeat_n(b'x', crate::record::MAX_LINE + 1));
        data.extend_from_slice(b"\ne\xff\n");
        let mut l = Latin1Lines::new(&data[..]);
        let got: Vec<String> = l.by_ref().map(|(_, s)| s).collect();
        // "d" starts the long line, which goes unread.
        assert_eq!(got, ["a", "b", "c", "e\u{ff}"]);
        assert_eq!(l.skipped, 1);
    }

    #[test]
    fn python_round_ties_to_even_on_the_exact_value() {
        assert_eq!(py_round3(0.0625), 0.062);
        assert_eq!(py_round3(0.5625), 0.562);
        assert_eq!(py_round3(2.0005), 2.001); // 2.0005 is slightly above the tie
        assert_eq!(py_round3(1.2344999), 1.234);
    }

    #[test]
    fn interpolation_is_numpys_formula() {
        assert_eq!(np_interp2(3.0, (1.0, 2.0), (5.0, 7.0)), 4.5);
        assert_eq!(np_interp2(1.0, (1.0, 2.0), (5.0, 7.0)), 2.0);
        assert_eq!(np_interp2(5.0, (1.0, 2.0), (5.0, 7.0)), 7.0);
    }

    #[test]
    fn p_value_is_the_t_cdf_and_the_bisection_brackets_alpha() {
        // Equal means: t = 0, p = 0.5.
        assert!((one_sided_p(10.0, 1.0, 18.0, 10.0, 1.0, 8.0) - 0.5).abs() < 1e-12);
        // Far below: p → 0; far above: p → 1.
        assert!(one_sided_p(0.0, 1.0, 18.0, 10.0, 1.0, 8.0) < 1e-6);
        assert!(one_sided_p(20.0, 1.0, 18.0, 10.0, 1.0, 8.0) > 1.0 - 1e-6);
        let m = min_acceptable_mean(100.0, 5.0, 18, 10);
        assert!(m < 100.0 && m > 90.0, "{m}");
        let p = |x: f64| one_sided_p(x, 5.0, 18.0, 100.0, 5.0, 8.0);
        assert!(p(m + 2.0 * TOLERANCE) > ALPHA && p(m - 2.0 * TOLERANCE) <= ALPHA);
        assert_eq!(min_acceptable_mean(100.0, 0.0, 18, 10), 100.0);
    }

    #[test]
    fn every_generated_table_builds_and_prunes_to_a_nonempty_set() {
        for (ruleset, bench, _) in super::super::rcp_data::RCP_FILES {
            let r = Ruleset::from_name(ruleset).unwrap();
            let t = RcpTable::new(r, bench, false).unwrap();
            assert!(!t.pruned.is_empty(), "{ruleset} {bench}");
            assert!(t.records.windows(2).all(|w| w[0].bs <= w[1].bs));
            for p in &t.records {
                assert!(p.min_acceptable_mean <= p.mean, "{ruleset} {}", p.name);
            }
        }
    }

    #[test]
    fn scaling_json_is_pythons_dump() {
        assert_eq!(
            scaling_json(1.034722222222222),
            "{\"scaling_factor\": 1.034722222222222}"
        );
        assert_eq!(scaling_json(2.0), "{\"scaling_factor\": 2.0}");
    }
}
