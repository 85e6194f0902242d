//! Dry run: drives the real layer with a [`Preset`] and a synthetic schedule (no model) and
//! writes the complete log a real run of that configuration would produce, then checks it with
//! the built-in checker. This is what `mllog dry-run` runs.
//!
//! ```
//! use mllog_cli::dry_run::{self, DryRun};
//! use tracing_mllog::presets::Preset;
//! use tracing_mllog::{Benchmark, Division, Ruleset};
//!
//! let preset = Preset::for_benchmark(Ruleset::V6_1_0, Benchmark::Llama2_70bLora,
//!                                    Division::Closed, None).unwrap();
//! let opts = DryRun::new("MyOrg", "1xNode-8xGPU", "config_1x8.sh");
//! let dir = tempfile::tempdir().unwrap();
//! let log = dir.path().join("llama2.log");
//! let out = dry_run::run(&preset, &opts, &log).unwrap();
//! assert!(out.report.passed(true));
//! assert!(std::fs::read_to_string(&log).unwrap().contains(r#""key": "run_stop""#));
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use tracing::info_span;
use tracing_subscriber::prelude::*;

use tracing_mllog::compliance::{self, ComplianceReport};
use tracing_mllog::keys;
use tracing_mllog::presets::dry_run::synthetic_metric;
use tracing_mllog::presets::{EvalProgress, Preset, PresetError};
use tracing_mllog::{MllogLayer, Output, Submission, SystemStatus};

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
///
/// Start from [`DryRun::new`] and change the fields that matter (the status, the evaluation at
/// which the synthetic metric converges), then pass it to [`run`].
///
/// ```
/// use mllog_cli::dry_run::{self, DryRun};
/// use mllog_core::presets::Preset;
/// use mllog_core::{Benchmark, Division, Ruleset, SystemStatus};
///
/// let preset = Preset::for_benchmark(Ruleset::V6_1_0, Benchmark::Flux1, Division::Closed, None).unwrap();
/// let opts = DryRun {
///     status: Some(SystemStatus::Cloud),
///     converge_at_eval: 2,
///     ..DryRun::new("MyOrg", "1xNode-8xGPU", "config_1x8.sh")
/// };
/// let dir = tempfile::tempdir().unwrap();
/// let out = dry_run::run(&preset, &opts, &dir.path().join("flux1.log")).unwrap();
/// assert_eq!(out.evals, 2);
/// let log = std::fs::read_to_string(&out.path).unwrap();
/// assert!(log.contains(r#""key": "submission_status", "value": "cloud""#));
/// assert!(log.contains(r#""key": "submission_org", "value": "MyOrg""#));
/// ```
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
///
/// Returned by [`run`]; `mllog dry-run` prints it and exits non-zero when the report fails.
///
/// ```
/// use mllog_cli::dry_run::{self, DryRun};
/// use mllog_core::presets::Preset;
/// use mllog_core::{Benchmark, Division, Ruleset};
///
/// let preset = Preset::for_benchmark(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed, None).unwrap();
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("lora.log");
/// let out = dry_run::run(&preset, &DryRun::new("MyOrg", "1xNode", "config.sh"), &path).unwrap();
/// assert_eq!(out.path, path);
/// assert!(out.converged && out.report.passed(true));
/// assert_eq!(out.evals, 3); // converges at the third evaluation by default
/// assert_eq!(out.samples, preset.eval_schedule().point(2));
/// let text = std::fs::read_to_string(&path).unwrap();
/// assert_eq!(out.lines, text.lines().count());
/// ```
#[derive(Clone, Debug)]
pub struct DryRunOutcome {
    /// The log written.
    pub path: PathBuf,
    /// The built-in checker's report on it.
    pub report: ComplianceReport,
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
///
/// A preset that cannot be built converts into it with `?`.
///
/// ```
/// use mllog_cli::dry_run::{self, DryRun, DryRunError, DryRunOutcome};
/// use mllog_core::presets::{Preset, PresetError};
/// use mllog_core::{Benchmark, Division, Ruleset};
///
/// fn dry(benchmark: Benchmark, out: &std::path::Path) -> Result<DryRunOutcome, DryRunError> {
///     let preset = Preset::for_benchmark(Ruleset::V6_1_0, benchmark, Division::Closed, None)?;
///     dry_run::run(&preset, &DryRun::new("MyOrg", "1xNode", "config.sh"), out)
/// }
///
/// let dir = tempfile::tempdir().unwrap();
/// // llama31_405b is not part of ruleset 6.1.0.
/// let err = dry(Benchmark::Llama31_405b, &dir.path().join("a.log")).unwrap_err();
/// assert!(matches!(err, DryRunError::Preset(PresetError::NotInRuleset { .. })));
/// assert!(err.to_string().starts_with("preset: "));
/// // The log cannot be created: a directory stands where the file should go.
/// let err = dry(Benchmark::Llama2_70bLora, dir.path()).unwrap_err();
/// assert!(matches!(err, DryRunError::Layer(_)), "{err}");
/// ```
/// use tracing_mllog::Output;
/// use tracing_mllog::Submission;
#[derive(Debug)]
pub enum DryRunError {
    /// The preset could not be built.
    Preset(PresetError),
    /// The layer could not be built (e.g. the output file).
    Layer(tracing_mllog::Error),
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

/// Runs the preset through the real layer into `out` and checks the log.
pub fn run(preset: &Preset, opts: &DryRun, out: &Path) -> Result<DryRunOutcome, DryRunError> {
    let [linear, attn, comm] = opts.precision.clone();
    let [tp, pp, cp, ep] = opts.parallelism;
    let mut builder = MllogLayer::builder()
        .preset(preset)
        .output(Output::file(out))
        .submission(
            Submission::default()
                .org(opts.org.clone())
                .platform(opts.platform.clone())
                .config_filename(opts.config_filename.clone())
                .precision(linear, attn, comm)
                .parallelism(tp, pp, cp, ep)
                .micro_batch_size(opts.micro_batch_size),
        );
    if let Some(s) = opts.status {
        builder = builder.submission(Submission::default().status(s));
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
                    EvalProgress::EpochNum { samples_per_epoch } => {
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
                    EvalProgress::SamplesCount => {
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
