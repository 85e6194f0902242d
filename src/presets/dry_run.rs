//! Dry run: drives the real layer with a [`Preset`] and a synthetic schedule (no model) and
//! writes the complete log a real run of that configuration would produce, then checks it with
//! the built-in checker. This is what `mllog dry-run` runs.
//!
//! ```no_run
//! use tracing_mllog::presets::dry_run::{self, DryRun};
//! use tracing_mllog::presets::Preset;
//! use tracing_mllog::{Benchmark, Division, Ruleset};
//!
//! let preset = Preset::for_benchmark(Ruleset::V6_1_0, Benchmark::Llama2_70bLora,
//!                                    Division::Closed, None).unwrap();
//! let opts = DryRun::new("MyOrg", "1xNode-8xGPU", "config_1x8.sh");
//! let out = dry_run::run(&preset, &opts, "llama2.log".as_ref()).unwrap();
//! assert!(out.report.passed(true));
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use tracing::info_span;
use tracing_subscriber::prelude::*;

use super::{Preset, PresetError, Progress};
use crate::compliance::{self, Interval, Report, Ruleset};
use crate::keys::{self, Benchmark};
use crate::layer::MllogLayer;
use crate::run::Target;
use crate::submission::{Division, SystemStatus};

/// The target of the dry run's spans and events (the layer ignores this crate's own target).
const TARGET: &str = "mllog_dry_run";

/// One MLLOG event under [`TARGET`] (what `mllog!` does, with a target the layer accepts).
macro_rules! emit {
    ($key:expr, $($fields:tt)*) => {
        tracing::event!(target: TARGET, tracing::Level::INFO, { mllog.key = $key, $($fields)* })
    };
}

/// At most this many `train_step` spans per block; longer blocks use spans of several steps
/// (`samples` = their samples), which changes no MLLOG line.
const MAX_STEP_SPANS_PER_BLOCK: u64 = 1000;

/// The submission metadata and disclosure keys of a dry run, given explicitly (a dry run has
/// no defaults for who submits on what; the CLI supplies placeholders).
#[derive(Clone, Debug, PartialEq)]
pub struct DryRun {
    /// `submission_org`.
    pub org: String,
    /// `submission_platform`.
    pub platform: String,
    /// `submission_status`, if any.
    pub status: Option<SystemStatus>,
    /// `config_filename`.
    pub config_filename: String,
    /// `lowest_numerical_precision_in_{linear,attn,comm}` (default bfloat16 each).
    pub precision: [String; 3],
    /// Tensor, pipeline, context and expert parallelism (default 1 each).
    pub parallelism: [u32; 4],
    /// `micro_batch_size` (default 1).
    pub micro_batch_size: u32,
    /// The evaluation at which the synthetic metric reaches the target (1-based, default 3).
    pub converge_at_eval: u64,
}

impl DryRun {
    /// A dry run for this organisation, platform and configuration file, with precisions
    /// bfloat16, parallelism 1 and micro batch size 1.
    pub fn new(
        org: impl Into<String>,
        platform: impl Into<String>,
        config_filename: impl Into<String>,
    ) -> DryRun {
        DryRun {
            org: org.into(),
            platform: platform.into(),
            status: None,
            config_filename: config_filename.into(),
            precision: ["bfloat16".into(), "bfloat16".into(), "bfloat16".into()],
            parallelism: [1, 1, 1, 1],
            micro_batch_size: 1,
            converge_at_eval: 3,
        }
    }
}

/// What a dry run did and what the checker said.
#[derive(Clone, Debug)]
pub struct DryRunOutcome {
    /// The log written.
    pub path: PathBuf,
    /// The built-in checker's report on it.
    pub report: Report,
    /// Evaluations run.
    pub evals: u64,
    /// Samples trained at the end.
    pub samples: u64,
    /// Whether the run converged (`run_stop` says `success`).
    pub converged: bool,
    /// MLLOG lines written.
    pub lines: usize,
}

/// Why a dry run could not run.
#[derive(Debug)]
pub enum DryRunError {
    /// The preset could not be built.
    Preset(PresetError),
    /// The layer could not be built (e.g. the output file).
    Layer(crate::Error),
    /// The log could not be read back.
    Io(PathBuf, std::io::Error),
}

impl fmt::Display for DryRunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DryRunError::Preset(e) => write!(f, "preset: {e}"),
            DryRunError::Layer(e) => write!(f, "layer: {e}"),
            DryRunError::Io(p, e) => write!(f, "cannot read {}: {e}", p.display()),
        }
    }
}

impl std::error::Error for DryRunError {}

impl From<PresetError> for DryRunError {
    fn from(e: PresetError) -> Self {
        DryRunError::Preset(e)
    }
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// A metric value that reaches `target` and lies in the rules' `range`.
pub(crate) fn converged_value(target: Target, range: Interval) -> f64 {
    let t = target.value;
    let higher = matches!(
        target.direction,
        crate::run::Direction::AtLeast | crate::run::Direction::Above
    );
    let raw = if higher {
        match range.max {
            Some(h) => t + 0.02 * (h.value - t),
            None => t + 0.01 * t.abs().max(1.0),
        }
    } else {
        match range.min {
            Some(l) => t - 0.02 * (t - l.value),
            None => t - 0.01 * t.abs().max(1.0),
        }
    };
    let r = round4(raw);
    if target.reached(r) && range.contains(r) {
        r
    } else {
        raw
    }
}

/// The synthetic metric of evaluation `n` (0-based) when the run converges at evaluation
/// `converge_at` (1-based): worse than the target before, at the target from then on.
pub fn synthetic_metric(preset: &Preset, n: u64, converge_at: u64) -> f64 {
    let target = preset.target();
    let conv = converged_value(target, preset.target_range());
    let remaining = converge_at.saturating_sub(n + 1);
    if remaining == 0 {
        return conv;
    }
    let delta = (0.05 * target.value.abs()).max(0.01);
    let higher = matches!(
        target.direction,
        crate::run::Direction::AtLeast | crate::run::Direction::Above
    );
    let v = if higher {
        target.value - delta * remaining as f64
    } else {
        target.value + delta * remaining as f64
    };
    round4(v)
}

/// Runs the preset through the real layer into `out` and checks the log.
pub fn run(preset: &Preset, opts: &DryRun, out: &Path) -> Result<DryRunOutcome, DryRunError> {
    let [linear, attn, comm] = opts.precision.clone();
    let [tp, pp, cp, ep] = opts.parallelism;
    let mut builder = preset
        .apply(MllogLayer::builder())
        .output_file(out)
        .org(opts.org.clone())
        .platform(opts.platform.clone())
        .config_filename(opts.config_filename.clone())
        .precision(linear, attn, comm)
        .parallelism(tp, pp, cp, ep)
        .micro_batch_size(opts.micro_batch_size)
        .environment(Vec::<(String, String)>::new());
    if let Some(s) = opts.status {
        builder = builder.system_status(s);
    }
    let (layer, guard) = builder.build().map_err(DryRunError::Layer)?;
    let handle = layer.run_handle();
    let gbs = preset.global_batch_size();
    let schedule = preset.eval_schedule();
    let key = preset.target_key();
    let converge_at = opts.converge_at_eval.max(1);
    let mut evals = 0u64;
    let mut trained = 0u64;
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        drop(info_span!(target: TARGET, "init").entered());
        let run = info_span!(target: TARGET, "run").entered();
        for n in 0..converge_at + 1 {
            let point = schedule.point(n);
            {
                let _block = info_span!(target: TARGET, "block").entered();
                let steps = point.saturating_sub(trained) / gbs;
                let chunk = steps.div_ceil(MAX_STEP_SPANS_PER_BLOCK).max(1);
                let mut left = steps;
                while left > 0 {
                    let k = left.min(chunk);
                    let _step =
                        info_span!(target: TARGET, "train_step", samples = k * gbs).entered();
                    left -= k;
                }
                trained = point;
            }
            {
                let _eval = info_span!(target: TARGET, "eval").entered();
                let v = synthetic_metric(preset, n, converge_at);
                match preset.progress() {
                    Progress::EpochNum { samples_per_epoch } => {
                        let epoch = point as f64 / samples_per_epoch as f64;
                        emit!(key, value = v, samples_count = point, epoch_num = epoch);
                        if key != keys::EVAL_ACCURACY {
                            emit!(
                                keys::EVAL_ACCURACY,
                                value = v,
                                samples_count = point,
                                epoch_num = epoch
                            );
                        }
                    }
                    Progress::SamplesCount => {
                        if key == keys::EVAL_ACCURACY {
                            // samples_count: filled in by the layer from the counted steps.
                            emit!(key, value = v);
                        } else {
                            // e.g. open flux1's averaged_validation_loss.
                            emit!(key, value = v, samples_count = point);
                            emit!(keys::EVAL_ACCURACY, value = v);
                        }
                    }
                }
            }
            evals += 1;
            if handle.converged() {
                break;
            }
        }
        drop(run);
    });
    let converged = handle.converged();
    let samples = handle.samples();
    drop(guard);
    let text = std::fs::read_to_string(out).map_err(|e| DryRunError::Io(out.to_owned(), e))?;
    let report = compliance::check_text(preset.ruleset(), &text);
    Ok(DryRunOutcome {
        path: out.to_owned(),
        report,
        evals,
        samples,
        converged,
        lines: text.lines().filter(|l| l.contains(":::MLLOG ")).count(),
    })
}

/// Usage of `mllog dry-run`.
pub const USAGE: &str = "\
usage: mllog dry-run --benchmark NAME --out FILE [--division closed|open] [--gbs N]
                     [--ruleset X.Y.Z] [--org ORG] [--platform PLATFORM]
                     [--config-filename NAME] [--precision LINEAR,ATTN,COMM]
                     [--parallelism TP,PP,CP,EP] [--micro-batch-size N]

Writes the complete MLLOG a run of the benchmark preset would produce (real layer, synthetic
training and evaluation, no model), then checks it (warnings count as errors).

options:
  --benchmark NAME        llama2_70b_lora, llama31_8b, llama31_405b, deepseekv3_671b,
                          gpt_oss_20b, flux1, qwen35_397b_grpo, dlrmv4, dlrm_dcnv2
  --out FILE              the log to write
  --division D            closed (default) or open
  --gbs N                 global batch size (default: the preset's)
  --ruleset X.Y.Z         6.1.0 (default), 6.0.0, ...
  --org ORG               submission_org (default DryRunOrg)
  --platform PLATFORM     submission_platform (default DryRunPlatform)
  --config-filename NAME  config_filename (default dry_run_<benchmark>.sh)
  --precision L,A,C       lowest numerical precisions (default bfloat16,bfloat16,bfloat16)
  --parallelism T,P,C,E   tensor, pipeline, context, expert parallelism (default 1,1,1,1)
  --micro-batch-size N    micro_batch_size (default 1)

exit status: 0 the log complies, 1 it does not, 2 usage, preset or I/O error";

/// Writes to stdout, ignoring a closed pipe (`mllog dry-run ... | head`).
fn out(text: &str) {
    use std::io::Write;
    let mut lock = std::io::stdout().lock();
    let _ = lock.write_all(text.as_bytes()).and_then(|_| lock.flush());
}

/// `mllog dry-run ARGS`: returns the exit status (0 compliant, 1 not, 2 usage/preset/I/O).
pub fn main(args: &[String]) -> u8 {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        out(&format!("{USAGE}\n"));
        return 0;
    }
    let cli = match parse(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mllog dry-run: {e}\n\n{USAGE}");
            return 2;
        }
    };
    let preset = match Preset::for_benchmark(cli.ruleset, cli.benchmark, cli.division, cli.gbs) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("mllog dry-run: {e}");
            return 2;
        }
    };
    match run(&preset, &cli.opts, &cli.out) {
        Ok(o) => {
            let shown = cli.out.display().to_string();
            out(&format!(
                "dry run: {} {} division, ruleset {}, global batch size {}: {} evaluation(s), \
                 {} samples, {}; wrote {} MLLOG lines to {shown}\n{}",
                preset.benchmark(),
                preset.division().as_str(),
                preset.ruleset(),
                preset.global_batch_size(),
                o.evals,
                o.samples,
                if o.converged {
                    "converged"
                } else {
                    "did not converge"
                },
                o.lines,
                o.report.render_text(&shown, true)
            ));
            if o.report.passed(true) {
                0
            } else {
                1
            }
        }
        Err(e) => {
            eprintln!("mllog dry-run: {e}");
            2
        }
    }
}

/// The parsed command line.
struct Cli {
    ruleset: Ruleset,
    benchmark: Benchmark,
    division: Division,
    gbs: Option<u64>,
    opts: DryRun,
    out: PathBuf,
}

fn list<T: std::str::FromStr, const N: usize>(flag: &str, s: &str) -> Result<[T; N], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() != N {
        return Err(format!(
            "{flag} needs {N} comma-separated values, got {s:?}"
        ));
    }
    let v: Vec<T> = parts
        .iter()
        .map(|p| p.parse().map_err(|_| format!("{flag}: bad value {p:?}")))
        .collect::<Result<_, _>>()?;
    v.try_into().map_err(|_| format!("{flag} needs {N} values"))
}

fn parse(args: &[String]) -> Result<Cli, String> {
    let mut benchmark: Option<Benchmark> = None;
    let mut division = Division::Closed;
    let mut gbs: Option<u64> = None;
    let mut ruleset = Ruleset::DEFAULT;
    let mut out: Option<PathBuf> = None;
    let mut org = "DryRunOrg".to_string();
    let mut platform = "DryRunPlatform".to_string();
    let mut config: Option<String> = None;
    let mut precision: Option<[String; 3]> = None;
    let mut parallelism: Option<[u32; 4]> = None;
    let mut mbs: Option<u32> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        let mut value = || -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match name {
            "--benchmark" => {
                let v = value()?;
                benchmark = Some(
                    Benchmark::from_name(&v).ok_or_else(|| format!("unknown benchmark {v:?}"))?,
                )
            }
            "--division" => {
                let v = value()?;
                division = Division::from_name(&v)
                    .ok_or_else(|| format!("unknown division {v:?} (closed or open)"))?
            }
            "--gbs" => {
                let v = value()?;
                gbs = Some(
                    v.parse()
                        .map_err(|_| format!("--gbs needs a positive integer, got {v:?}"))?,
                )
            }
            "--ruleset" => ruleset = value()?.parse()?,
            "--out" => out = Some(PathBuf::from(value()?)),
            "--org" => org = value()?,
            "--platform" => platform = value()?,
            "--config-filename" => config = Some(value()?),
            "--precision" => precision = Some(list("--precision", &value()?)?),
            "--parallelism" => parallelism = Some(list("--parallelism", &value()?)?),
            "--micro-batch-size" => {
                let v = value()?;
                mbs = Some(
                    v.parse()
                        .map_err(|_| format!("--micro-batch-size needs an integer, got {v:?}"))?,
                )
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    let benchmark = benchmark.ok_or("--benchmark is required")?;
    let out = out.ok_or("--out is required")?;
    let mut opts = DryRun::new(
        org,
        platform,
        config.unwrap_or_else(|| format!("dry_run_{benchmark}.sh")),
    );
    if let Some(p) = precision {
        opts.precision = p;
    }
    if let Some(p) = parallelism {
        opts.parallelism = p;
    }
    if let Some(m) = mbs {
        opts.micro_batch_size = m;
    }
    Ok(Cli {
        ruleset,
        benchmark,
        division,
        gbs,
        opts,
        out,
    })
}
