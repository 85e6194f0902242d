//! Configuration of [`MllogLayer`]: the builder's settings, and the environment (`MLLOG_*`)
//! over them when the program asks for it (`Builder::from_env`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::plan::{Place, SinkPlan};
use super::{IntervalSpec, MllogLayer, Shared};
use crate::barrier::{BarrierFailure, BarrierResult};
use crate::cache_clear::CacheClear;
use crate::compliance::{ComplianceHandle, ComplianceSink, LivePolicy, LiveRulesHandle, Ruleset};
use crate::device_sync::{DeviceSyncs, SyncAt};
use crate::env::Env;
use crate::keys::{self, Benchmark};
use crate::pipeline::{Guard, Overflow, Pipeline, RecordFeed, Start};
use crate::record::{Str, Value};
use crate::run::{EvalSchedule, Target};
use crate::sink::plug::SpanHook;
use crate::sink::{Delivery, LayerAsks, MllogFileSink, Sink, SinkStart};
use crate::submission::{Division, OverlayEnv, Submission, SystemStatus};
use crate::Error;

/// The intervals the layer knows by default, each from a span of the same (configurable) name.
///
/// Opening a span of that name logs the interval's `*_start` record, closing it the
/// `*_stop` record (`INTERVAL_START` / `INTERVAL_END` in the log); fields of the span such as
/// `samples_count` or `epoch_num` become the records' metadata. [`Builder::span_name`] renames
/// the span that maps to an interval, for code whose spans already have other names, and
/// [`Builder::interval`] adds an interval of any other name ([`Interval::Custom`]).
///
/// ```
/// use tracing_mllog::{sink::MemorySink, Interval, MllogLayer};
/// use tracing_subscriber::prelude::*;
///
/// let (memory, records) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .no_output()
///     .sink(memory)
///     .cache_clear(false)
///     .span_name(Interval::Epoch, "pass") // `pass` spans are epochs
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     let _pass = tracing::info_span!("pass", epoch_num = 1u64).entered();
/// });
/// guard.shutdown();
/// assert_eq!(records.keys(), ["epoch_start", "epoch_stop"]);
/// assert!(records.lines()[0].contains(r#""epoch_num": 1"#));
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Interval {
    /// span `init` → `init_start` / `init_stop` (and `cache_clear` first, when enabled)
    Init,
    /// span `run` → `run_start` / `run_stop` with `status`
    Run,
    /// span `block` → `block_start` / `block_stop`
    Block,
    /// span `epoch` → `epoch_start` / `epoch_stop`
    Epoch,
    /// span `eval` → `eval_start` / `eval_stop`
    Eval,
    /// Any other interval added with [`Builder::interval`].
    Custom,
}

impl Interval {
    fn defaults() -> [(Interval, &'static str, &'static str, &'static str); 5] {
        [
            (Interval::Init, "init", keys::INIT_START, keys::INIT_STOP),
            (Interval::Run, "run", keys::RUN_START, keys::RUN_STOP),
            (
                Interval::Block,
                "block",
                keys::BLOCK_START,
                keys::BLOCK_STOP,
            ),
            (
                Interval::Epoch,
                "epoch",
                keys::EPOCH_START,
                keys::EPOCH_STOP,
            ),
            (Interval::Eval, "eval", keys::EVAL_START, keys::EVAL_STOP),
        ]
    }
}

/// Where a build reads its variables from.
#[derive(Default)]
enum EnvSource {
    /// The launcher's rank variables alone: the settings are the code's.
    #[default]
    Launcher,
    /// The whole process environment (`Builder::from_env`).
    Process,
    /// This map and nothing else (`Builder::environment`).
    Map(HashMap<String, String>),
}

enum Output {
    Stdout,
    File(PathBuf),
    Writer(Box<dyn Write + Send>),
    Nowhere,
    /// Another process writes the MLLOG file: nothing is written, and the sinks that read the
    /// file (the uploader) read this one.
    Followed(PathBuf),
}

/// Configures and builds an [`MllogLayer`] and its [`Guard`].
///
/// Start from [`MllogLayer::builder`], choose where the log goes ([`Builder::output_file`],
/// [`Builder::stdout`] (the default), [`Builder::writer`] or [`Builder::no_output`]), describe
/// the submission ([`Builder::benchmark`], [`Builder::org`], [`Builder::division`], ...), add
/// extra [`Sink`]s, then call [`Builder::build`]. It returns the layer, to add to a
/// `tracing_subscriber::Registry`, and a [`Guard`] that owns the worker thread: keep it alive
/// for the whole run and call [`Guard::shutdown`] (or drop it) at the end, so every record
/// reaches the file.
///
/// Every setting has an `MLLOG_*` environment variable that overrides it at [`Builder::build`]
/// time when the program calls [`Builder::from_env`] (see the README's table), so operators
/// can redirect a run without recompiling; without it the builder reads only the launcher's
/// rank variables. [`Builder::environment`] reads a fixed map instead of the process
/// environment.
///
/// Settings are checked at [`Builder::build`], not when they are set: an unusable value
/// (a contradictory setting, an `MLLOG_*` variable that does not parse, a file that cannot be
/// created, submission metadata the ruleset rejects) is an [`Error`], and a failed build
/// never truncates the previous run's log.
///
/// # Examples
///
/// Spans named `init`, `run`, `block`, `epoch` and `eval` become `*_start`/`*_stop` records
/// ([`Interval`]), and every [`mllog!`](crate::mllog) a `POINT_IN_TIME` record:
///
/// ```
/// use tracing_mllog::{keys, mllog, sink::MemorySink, Benchmark, MllogLayer};
/// use tracing_subscriber::prelude::*;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("result_0.txt");
/// let (memory, records) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output_file(&path)
///     .benchmark(Benchmark::Llama2_70bLora)
///     .org("ExampleOrg")
///     .sink(memory) // every record, in-process, besides the file
///     .environment([("MLLOG_NAMESPACE", "worker0")]) // as from_env would, from this map
///     .build()?;
///
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     let _init = tracing::info_span!("init").entered();
///     mllog!(keys::GLOBAL_BATCH_SIZE, 8);
/// });
/// let report = guard.shutdown(); // flushes the file and stops the worker
/// assert!(report.is_clean(), "{report}");
///
/// let log = std::fs::read_to_string(&path)?;
/// assert!(log.lines().all(|l| l.starts_with(":::MLLOG {")));
/// assert!(log.contains(r#""key": "global_batch_size", "value": 8"#));
/// assert!(log.contains(r#""namespace": "worker0""#));
/// assert_eq!(records.keys()[..2], ["cache_clear", "init_start"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// An unusable environment value fails the build with an error that names the variable:
///
/// ```
/// use tracing_mllog::{Error, MllogLayer};
///
/// let err = MllogLayer::builder()
///     .no_output()
///     .environment([("MLLOG_APPEND", "perhaps")])
///     .build::<tracing_subscriber::Registry>()
///     .err()
///     .expect("not a boolean");
/// assert!(matches!(&err, Error::Env { name, .. } if name == "MLLOG_APPEND"), "{err}");
/// ```
#[must_use = "a Builder does nothing until `build()` is called"]
pub struct Builder {
    output: Option<Output>,
    append: bool,
    namespace: String,
    root_dir: Option<String>,
    cache_clear: bool,
    rank: Option<u32>,
    writer_rank: u32,
    all_ranks: bool,
    submission: Submission,
    span_names: Vec<(Interval, String)>,
    custom: Vec<IntervalSpec>,
    sinks: Vec<(Box<dyn Sink>, bool, Delivery)>,
    /// Delivery chosen by sink name, for the sinks the environment adds (RPD, OTel, upload).
    deliveries: Vec<(String, Delivery)>,
    capacity: usize,
    max_delay: Duration,
    overflow: Overflow,
    shutdown_timeout: Duration,
    /// Where the settings' variables come from (`Builder::from_env`, `Builder::environment`).
    env_source: EnvSource,
    step_span: String,
    warmup_span: String,
    samples_per_step: Option<u64>,
    train_loss_every: u64,
    throughput_stats: bool,
    trace_steps: bool,
    target: Option<Target>,
    ruleset: Ruleset,
    validate_submission: bool,
    hyperparameters: Vec<(Str, Value)>,
    live_check: LivePolicy,
    /// The official rule files to check against live as well (`Builder::live_rules`,
    /// `MLLOG_RULES`).
    #[cfg(feature = "rules")]
    live_rules: Option<crate::compliance::RulesSpec>,
    /// `MLLOG_RULES` as set, in a build that cannot read rules: said once the pipeline runs.
    #[cfg(not(feature = "rules"))]
    rules_unread: Option<String>,
    seed: Option<i128>,
    eval_schedule: Option<EvalSchedule>,
    handle_signals: bool,
    /// The many-ranks settings: barrier, cache clearing, clock steps (`crate::barrier`, ...).
    ranks: RankOptions,
    /// The program's device synchronisation, and where it is called (`crate::device_sync`;
    /// `None`: the default place).
    device_sync: Option<crate::device_sync::Sync>,
    device_sync_at: Option<SyncAt>,
    /// The segment profiler given in code (`Builder::profiler`).
    #[cfg(feature = "profiling")]
    profiler: Option<crate::profile::SegmentProfiler>,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sinks: Vec<&str> = self.sinks.iter().map(|(s, ..)| s.name()).collect();
        f.debug_struct("Builder")
            .field("append", &self.append)
            .field("namespace", &self.namespace)
            .field("rank", &self.rank)
            .field("writer_rank", &self.writer_rank)
            .field("all_ranks", &self.all_ranks)
            .field("submission", &self.submission)
            .field("sinks", &sinks)
            .field("ruleset", &self.ruleset)
            .field("target", &self.target)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            output: None,
            append: false,
            namespace: String::new(),
            root_dir: None,
            cache_clear: true,
            rank: None,
            writer_rank: 0,
            all_ranks: false,
            submission: Submission::default(),
            span_names: Vec::new(),
            custom: Vec::new(),
            sinks: Vec::new(),
            deliveries: Vec::new(),
            capacity: 4096,
            max_delay: Duration::from_millis(2),
            overflow: Overflow::Block,
            shutdown_timeout: Duration::from_secs(10),
            env_source: EnvSource::Launcher,
            step_span: "train_step".into(),
            warmup_span: "warmup".into(),
            samples_per_step: None,
            train_loss_every: 0,
            throughput_stats: true,
            trace_steps: false,
            target: None,
            ruleset: Ruleset::DEFAULT,
            validate_submission: true,
            hyperparameters: Vec::new(),
            live_check: LivePolicy::Warn,
            #[cfg(feature = "rules")]
            live_rules: None,
            #[cfg(not(feature = "rules"))]
            rules_unread: None,
            seed: None,
            eval_schedule: None,
            handle_signals: false,
            ranks: RankOptions::default(),
            device_sync: None,
            device_sync_at: None,
            #[cfg(feature = "profiling")]
            profiler: None,
        }
    }
}

impl Builder {
    /// Write the log to this file (created with its parent directories; truncated unless
    /// [`Builder::append`]). `MLLOG_OUTPUT_FILE` overrides it.
    pub fn output_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.output = Some(Output::File(path.into()));
        self
    }

    /// Write the log to standard output (the default, as `mlperf_logging` does).
    pub fn stdout(mut self) -> Self {
        self.output = Some(Output::Stdout);
        self
    }

    /// Write the log to any writer (owned by the worker thread).
    pub fn writer(mut self, w: impl Write + Send + 'static) -> Self {
        self.output = Some(Output::Writer(Box::new(w)));
        self
    }

    /// No MLLOG text output at all; only the extra [`Builder::sink`]s receive records.
    pub fn no_output(mut self) -> Self {
        self.output = Some(Output::Nowhere);
        self
    }

    /// The MLLOG file is written by another process (a Python job followed by `mllog watch`):
    /// the pipeline writes no MLLOG text, and the sinks that read the log file (the
    /// object-store uploader) read `path`. `MLLOG_OUTPUT_FILE` and `MLLOG_SAVE_TO_FILE` do not
    /// override it, so a watcher started inside a job never truncates a file of the job's.
    /// Use it with [`Builder::build_feed`].
    pub fn followed_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.output = Some(Output::Followed(path.into()));
        self
    }

    /// Append to an existing file instead of truncating it (`MLLOG_APPEND`).
    pub fn append(mut self, append: bool) -> Self {
        self.append = append;
        self
    }

    /// The `namespace` of every record (default `""`; `MLLOG_NAMESPACE`).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Strip this directory from the start of `file` in metadata (`MLLOG_ROOT_DIR`).
    pub fn root_dir(mut self, dir: impl Into<String>) -> Self {
        self.root_dir = Some(dir.into());
        self
    }

    /// Log `cache_clear` right before `init_start` (default on; `MLLOG_CACHE_CLEAR=0` turns
    /// it off). Its value says who cleared the page cache ([`Builder::cache_clear_mode`]):
    /// `false` unless the layer dropped it or the program says its launcher did.
    pub fn cache_clear(mut self, on: bool) -> Self {
        self.cache_clear = on;
        self
    }

    /// This process's global rank. Without it, the rank comes from the first of
    /// [`crate::env::RANK_VARIABLES`] that is set (`MLLOG_RANK`, `RANK`, `OMPI_COMM_WORLD_RANK`,
    /// `PMIX_RANK`, `PMI_RANK`, `MV2_COMM_WORLD_RANK`, `SLURM_PROCID`,
    /// `JOB_COMPLETION_INDEX`), else 0; another that disagrees is a warning naming both.
    pub fn rank(mut self, rank: u32) -> Self {
        self.rank = Some(rank);
        self
    }

    /// The rank that writes MLLOG records (default 0).
    pub fn writer_rank(mut self, rank: u32) -> Self {
        self.writer_rank = rank;
        self
    }

    /// Every rank writes (`MLLOG_ALL_RANKS`); give each its own file or namespace.
    pub fn all_ranks(mut self, on: bool) -> Self {
        self.all_ranks = on;
        self
    }

    /// Submission metadata, several fields at once: each field `submission` sets replaces
    /// what an earlier setter gave (`org`, `platform`, ...); a field it leaves `None` keeps
    /// it, so the order of the setters never loses a value.
    pub fn submission(mut self, submission: Submission) -> Self {
        self.submission.overlay(submission);
        self
    }

    /// `submission_benchmark` (`MLLOG_SUBMISSION_BENCHMARK`).
    pub fn benchmark(mut self, benchmark: Benchmark) -> Self {
        self.submission.benchmark = Some(benchmark);
        self
    }

    /// `submission_org` (`MLLOG_SUBMISSION_ORG`).
    pub fn org(mut self, org: impl Into<String>) -> Self {
        self.submission.org = Some(org.into());
        self
    }

    /// `submission_division` (`MLLOG_SUBMISSION_DIVISION`).
    pub fn division(mut self, division: Division) -> Self {
        self.submission.division = Some(division);
        self
    }

    /// `submission_status` (`MLLOG_SUBMISSION_STATUS`).
    pub fn system_status(mut self, status: SystemStatus) -> Self {
        self.submission.status = Some(status);
        self
    }

    /// `submission_platform` (`MLLOG_SUBMISSION_PLATFORM`).
    pub fn platform(mut self, platform: impl Into<String>) -> Self {
        self.submission.platform = Some(platform.into());
        self
    }

    /// The lowest numerical precisions in linear layers, attention and communication
    /// (`lowest_numerical_precision_in_{linear,attn,comm}`, e.g. `"fp8"`, `"bfloat16"`;
    /// `MLLOG_LOWEST_NUMERICAL_PRECISION_{LINEAR,ATTN,COMM}`).
    pub fn precision(
        mut self,
        linear: impl Into<String>,
        attn: impl Into<String>,
        comm: impl Into<String>,
    ) -> Self {
        self.submission.precision_linear = Some(linear.into());
        self.submission.precision_attn = Some(attn.into());
        self.submission.precision_comm = Some(comm.into());
        self
    }

    /// Tensor, pipeline, context and expert parallelism (1 for an unused dimension;
    /// `MLLOG_{TENSOR,PIPELINE,CONTEXT,EXPERT}_PARALLELISM`).
    pub fn parallelism(mut self, tensor: u32, pipeline: u32, context: u32, expert: u32) -> Self {
        self.submission.tensor_parallelism = Some(tensor);
        self.submission.pipeline_parallelism = Some(pipeline);
        self.submission.context_parallelism = Some(context);
        self.submission.expert_parallelism = Some(expert);
        self
    }

    /// `micro_batch_size` (`MLLOG_MICRO_BATCH_SIZE`).
    pub fn micro_batch_size(mut self, n: u32) -> Self {
        self.submission.micro_batch_size = Some(n);
        self
    }

    /// Hyperparameter records (key, value) logged inside the `init` span right after the
    /// submission metadata, in this order (benchmark presets feed their keys through this).
    pub fn hyperparameters<K: Into<Str>, V: Into<Value>>(
        mut self,
        records: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.hyperparameters
            .extend(records.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Live compliance checking on the worker (default [`LivePolicy::Warn`]): at `run_start`
    /// what is missing or wrong so far goes to stderr (or your callback), and the guard's
    /// report carries the verdict on the whole log. `MLLOG_LIVE_CHECK=off|warn`.
    pub fn live_check(mut self, policy: LivePolicy) -> Self {
        self.live_check = policy;
        self
    }

    /// Live compliance checking against the official rule files read at run time as well
    /// (feature `rules`): an installed mlperf-logging, or a folder laid out as its package,
    /// such as the release candidate of a round. At `run_start` and at the end of the run,
    /// mllog-core's rule engine runs the rules of the builder's [`Builder::ruleset`] from
    /// `source` over the lines written so far, on a thread of its own, and its findings are
    /// reported as the built-in check's are (the same [`LivePolicy`]; nothing when it is
    /// `Off`); the guard's report carries them as [`Report::live_rules`], naming the source.
    /// A source without the ruleset, or a rule file that does not load, is said (naming the
    /// file) and the run goes on, its log untouched. `MLLOG_RULES` (a folder, `python` or
    /// `python:PATH`, as `mllog check --rules`) overrides it.
    ///
    /// [`Report::live_rules`]: crate::Report::live_rules
    #[cfg(feature = "rules")]
    #[cfg_attr(docsrs, doc(cfg(feature = "rules")))]
    pub fn live_rules(mut self, source: crate::rules_source::RulesSource) -> Self {
        self.live_rules = Some(crate::compliance::RulesSpec::Source(source));
        self
    }

    /// The run's random seed, logged as `seed` right after `init_start` (with the submission
    /// metadata). Without it (and without a `seed` record of the program's own before
    /// `run_start`), live checking warns: `mllog package` rejects a log without a seed.
    pub fn seed(mut self, seed: impl Into<i128>) -> Self {
        self.seed = Some(seed.into());
        self
    }

    /// The evaluation points the rules demand (a preset sets the benchmark's own; see
    /// [`crate::presets::Preset::eval_schedule`]): live checking warns on stderr when an
    /// `eval_accuracy` record's `samples_count` is off this schedule, at the moment it is
    /// logged rather than when the log is reviewed.
    pub fn eval_schedule(mut self, schedule: EvalSchedule) -> Self {
        self.eval_schedule = Some(schedule);
        self
    }

    /// End the run and flush the log when the process receives SIGTERM or SIGINT (what Slurm
    /// sends at a time limit or a preemption, and Ctrl-C), then let the signal terminate the
    /// process as it would have: `run_stop` is written with status `aborted` after the open
    /// intervals' end records (default off; `MLLOG_HANDLE_SIGNALS=1`). Installed once per
    /// process, on a thread of its own (the signal handler itself only wakes it). Leave it
    /// off when the program handles these signals itself (then drop the guard, or call
    /// [`Guard::shutdown`], on the way out).
    pub fn handle_signals(mut self, on: bool) -> Self {
        self.handle_signals = on;
        self
    }

    /// The ruleset the submission metadata is validated against (default 6.1.0).
    pub fn ruleset(mut self, ruleset: Ruleset) -> Self {
        self.ruleset = ruleset;
        self
    }

    /// Whether `build()` checks the submission metadata against the ruleset (default on):
    /// a closed submission must set every key the common rules require. Turn it off only when
    /// the program logs those keys itself.
    pub fn validate_submission(mut self, on: bool) -> Self {
        self.validate_submission = on;
        self
    }

    /// `config_filename` (`MLLOG_CONFIG_FILENAME`).
    pub fn config_filename(mut self, name: impl Into<String>) -> Self {
        self.submission.config_filename = Some(name.into());
        self
    }

    /// Use another span name for one of the default intervals, e.g. `mlperf_run` for `run`
    /// when a dependency already has spans called `run`.
    pub fn span_name(mut self, interval: Interval, name: impl Into<String>) -> Self {
        self.span_names.push((interval, name.into()));
        self
    }

    /// Map spans named `span_name` to an interval with these keys (e.g. `staging`,
    /// `staging_start`, `staging_stop`).
    pub fn interval(
        mut self,
        span_name: impl Into<String>,
        start_key: impl Into<String>,
        stop_key: impl Into<String>,
    ) -> Self {
        self.custom.push(IntervalSpec {
            span_name: Cow::Owned(span_name.into()),
            start_key: Cow::Owned(start_key.into()),
            stop_key: Cow::Owned(stop_key.into()),
            kind: Interval::Custom,
        });
        self
    }

    /// Also send every record to this sink (on the writing rank only, like the MLLOG file),
    /// isolated: on its own thread behind its own bounded queue, so that it can lose records
    /// (counted in the report) but never delay the MLLOG file (see [`Delivery`]). The one way
    /// in for every sink, the crate's (`RpdSink::new(config)`, `UploadSink::new(config)`,
    /// `OtelSink`, `NvtxSink`) and yours: `build()` starts it ([`Sink::start`]) where it runs.
    /// With [`Builder::from_env`], a sink the environment turns on (`MLLOG_RPD_FILE`, ...)
    /// replaces one of the same name given here.
    pub fn sink(self, sink: impl Sink) -> Self {
        self.sink_with(sink, Delivery::default())
    }

    /// [`Builder::sink`] with a chosen [`Delivery`]: [`Delivery::Inline`] for a sink that must
    /// not lose a record and may hold up the MLLOG file (and the training thread) when slow.
    pub fn sink_with(mut self, sink: impl Sink, delivery: Delivery) -> Self {
        self.sinks.push((Box::new(sink), false, delivery));
        self
    }

    /// Send every record to this sink on every rank (e.g. telemetry that each rank exports),
    /// isolated like [`Builder::sink`]. On a rank that does not write MLLOG lines, the layer
    /// stays active for such sinks only.
    pub fn sink_on_every_rank(mut self, sink: impl Sink) -> Self {
        self.sinks.push((Box::new(sink), true, Delivery::default()));
        self
    }

    /// How the sink named `name` (its [`Sink::name`]: `"rpd"`, `"otel"`,
    /// `"object-store-upload"`, or a sink of your own) receives records, instead of the
    /// default for its kind ([`Delivery::Isolated`] for all of these). The MLLOG output and the
    /// live checker are always [`Delivery::Inline`]: they are the log.
    pub fn sink_delivery(mut self, name: impl Into<String>, delivery: Delivery) -> Self {
        self.deliveries.push((name.into(), delivery));
        self
    }

    /// The global batch size: each `train_step` span without a `samples` field trains this
    /// many samples, and records that need a `samples_count` (block, eval, `eval_accuracy`,
    /// `run_stop`) get the running count when they carry no progress field of their own.
    pub fn global_batch_size(mut self, samples_per_step: u64) -> Self {
        self.samples_per_step = Some(samples_per_step);
        self
    }

    /// The quality target: an `eval_accuracy` that reaches it makes the run converged
    /// ([`crate::RunHandle::converged`]) and `run_stop` say `success`.
    /// `MLLOG_TARGET_EVAL_LOSS` overrides it with a loss target (`<=`).
    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// Log `train_loss` (from the `loss` field of `train_step` spans) every `n` steps; 0 turns
    /// it off (the default). `MLLOG_TRAIN_LOSS_LOG_FREQ`.
    pub fn train_loss_every(mut self, n: u64) -> Self {
        self.train_loss_every = n;
        self
    }

    /// Log `tracked_stats {"throughput", "train_step_time"}` at the end of each block and of
    /// the run (default on). `MLLOG_BLOCK_TPUT_LOG`.
    pub fn throughput_stats(mut self, on: bool) -> Self {
        self.throughput_stats = on;
        self
    }

    /// Also send each counted `train_step` as a pair of trace-only interval records
    /// (`train_step_start`/`train_step_stop`), for the OpenTelemetry and RPD sinks; the MLLOG
    /// file and the checker skip them (default off: it costs two records per step;
    /// `MLLOG_TRACE_STEPS`).
    pub fn trace_steps(mut self, on: bool) -> Self {
        self.trace_steps = on;
        self
    }

    /// The span name of training steps (default `train_step`).
    pub fn train_step_span(mut self, name: impl Into<String>) -> Self {
        self.step_span = name.into();
        self
    }

    /// The span name of the warmup phase (default `warmup`): steps inside it count for nothing.
    pub fn warmup_span(mut self, name: impl Into<String>) -> Self {
        self.warmup_span = name.into();
        self
    }

    /// Records that may wait for the worker (default 4096; each slot holds one preallocated
    /// record of a few hundred bytes).
    pub fn channel_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The longest a record waits before the worker hands it to the sinks (default 2 ms;
    /// `MLLOG_MAX_DELAY_MS`). A sleeping worker is not woken for every record, because the
    /// wake-up is a system call on the training thread that costs more than the rest of the
    /// record: the worker drains the channel on this timer, and is woken at once only for
    /// interval records (`run_start` is checked immediately), when the channel is a quarter
    /// full, after 50 empty timer rounds (it then stops polling), and by
    /// [`crate::Guard::flush`] / shutdown. `Duration::ZERO` wakes it for every record (lowest
    /// latency, highest cost).
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.max_delay = delay;
        self
    }

    /// What to do when the channel is full (default: wait, lossless).
    pub fn overflow(mut self, overflow: Overflow) -> Self {
        self.overflow = overflow;
        self
    }

    /// How long the guard waits for the sinks at shutdown (default 10 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Applies the process environment over the settings made in code at [`Builder::build`]:
    /// the layer's `MLLOG_*` variables (the README's table), the submission's, and those that
    /// turn on and configure the optional sinks and the profiler (`MLLOG_OTEL`,
    /// `OTEL_EXPORTER_OTLP_*`, `MLLOG_RPD_FILE`, `MLLOG_UPLOAD_URL`, `PROFILER`, ...), so
    /// that an operator can redirect a run without recompiling. Without it the builder does
    /// what its code says and reads only the launcher's rank variables
    /// ([`RANK_VARIABLES`](crate::env::RANK_VARIABLES) and their kin), which say which process this
    /// is rather than how to log; a variable that would have turned on the output or a sink
    /// is then named on stderr at `build()`, never applied. The environment is read once, at
    /// `build()`.
    ///
    /// ```
    /// use tracing_mllog::MllogLayer;
    ///
    /// // A training binary that operators configure through MLLOG_OUTPUT_FILE, MLLOG_OTEL, ...
    /// let builder = MllogLayer::builder().output_file("results/result_0.txt").from_env();
    /// # drop(builder);
    /// ```
    pub fn from_env(mut self) -> Self {
        self.env_source = EnvSource::Process;
        self
    }

    /// [`Builder::from_env`] with this map as the environment, in place of the process's: the
    /// layer's `MLLOG_*` settings, the rank variables, and those of every optional sink and of
    /// the profiler all come from it (an empty map: nothing is set, not even a rank). See
    /// [`crate::env::Env`]. Two things still read the process: `librpd_tracer.so` (`RPDT_*`,
    /// when it is loaded) and the object-store and OTLP client crates' own credential and
    /// header lookups.
    pub fn environment<K: Into<String>, V: Into<String>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.env_source = EnvSource::Map(
            vars.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        );
        self
    }

    /// Applies the environment, opens the output and starts the worker.
    ///
    /// Fails with an error naming the path when the output file cannot be written, and with an
    /// error naming the variable when an environment value is unusable. Every other setting
    /// is validated and every other sink started before the output file is opened, so a
    /// failed build never truncates the previous run's log.
    pub fn build<S>(self) -> Result<(MllogLayer<S>, Guard), Error> {
        // The settings: the code's, then the environment over them, validated.
        let mut settings = self.resolve()?;
        // The sinks, each at its place (`plan::Place` is the order), the output opened last.
        let planned = settings.plan()?;
        // The pipeline and the layer, each started with everything it needs.
        settings.start(planned)
    }

    /// Starts the pipeline and its sinks without a layer, for records that were made
    /// elsewhere: lines of a log another process writes, read back and parsed. Each record
    /// pushed through the [`RecordFeed`] reaches the sinks as it is, its `time_ms` kept. The
    /// settings, the environment (`MLLOG_UPLOAD_URL`, `MLLOG_OTEL`, ...) and the [`Guard`]
    /// with its [`Report`](crate::Report) are those of [`Builder::build`]; the live checker is
    /// started only if [`Builder::live_check`] leaves it on.
    ///
    /// ```
    /// use tracing_mllog::compliance::LivePolicy;
    /// use tracing_mllog::record::parse_log;
    /// use tracing_mllog::sink::MemorySink;
    /// use tracing_mllog::MllogLayer;
    ///
    /// let (memory, seen) = MemorySink::new();
    /// let (feed, mut guard) = MllogLayer::builder()
    ///     .no_output()
    ///     .sink(memory)
    ///     .live_check(LivePolicy::Off)
    ///     .validate_submission(false)
    ///     .build_feed()?;
    /// let log = ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1700000000123, \"event_type\": \
    ///            \"POINT_IN_TIME\", \"key\": \"seed\", \"value\": 7, \"metadata\": {}}";
    /// for line in parse_log(log).0 {
    ///     feed.push(line.record);
    /// }
    /// let report = guard.shutdown();
    /// assert_eq!(report.dropped(), 0);
    /// assert_eq!(seen.lines(), [log]); // the same line, its time kept
    /// # Ok::<(), tracing_mllog::Error>(())
    /// ```
    pub fn build_feed(self) -> Result<(RecordFeed, Guard), Error> {
        let mut settings = self.resolve()?;
        let planned = settings.plan()?;
        let b = settings.builder;
        let (pipeline, guard) = Pipeline::start(Start {
            sinks: planned.plan.into_ordered(&b.deliveries),
            capacity: b.capacity,
            overflow: b.overflow,
            shutdown_timeout: b.shutdown_timeout,
            max_delay: b.max_delay,
            compliance: planned.compliance,
            live_rules: planned.live_rules,
            // What a feed receives is its caller's business: the report's "no span or event
            // reached the layer" (and the dropped-guard probe) speak of a layer there is not.
            writes: false,
            hooks: Vec::new(),
        })
        .map_err(Error::Worker)?;
        #[cfg(not(feature = "rules"))]
        say_rules_unread(&b, settings.writes, &pipeline);
        Ok((RecordFeed::new(pipeline), guard))
    }

    /// Reads the environment once (the launcher's variables, the process's with
    /// [`Builder::from_env`], or the map given to [`Builder::environment`]: everything after
    /// this reads that snapshot), applies it over the builder's settings and validates them.
    fn resolve(mut self) -> Result<Settings, Error> {
        compiled_level_check(tracing::level_filters::STATIC_MAX_LEVEL)?;
        let (env, ignored) = match std::mem::take(&mut self.env_source) {
            EnvSource::Launcher => {
                let process = Env::process();
                let ignored = crate::registry::switches_set(&process);
                (process.only(crate::env::is_launcher_variable), ignored)
            }
            EnvSource::Process => (Env::process(), Vec::new()),
            EnvSource::Map(map) => (Env::from_map(map), Vec::new()),
        };
        if !ignored.is_empty() {
            stderr_line!(
                "tracing-mllog: warning: {} set, but this program's layer does not read the \
                 environment (`Builder::from_env`): not applied",
                ignored.join(", ")
            );
        }
        self.overlay_env(&env)?;
        self.ranks.check()?;
        if self.device_sync.is_none() && self.device_sync_at.is_some_and(|at| at != SyncAt::Off) {
            return Err(Error::Config(
                "Builder::device_sync_at asks for device synchronisation, but none was given \
                 (Builder::device_sync)"
                    .into(),
            ));
        }
        crate::registry::check_features(&env)?;
        if self.validate_submission {
            self.submission.validate(self.ruleset)?;
        }
        let detected = env.rank_detection()?;
        let rank = match self.rank {
            Some(r) => r,
            None => detected.rank.map_or(0, |(r, _)| r),
        };
        let writes = self.all_ranks || rank == self.writer_rank;
        let intervals = self.interval_specs()?;
        Ok(Settings {
            builder: self,
            env,
            rank,
            writes,
            intervals,
            rank_conflicts: detected.conflicts,
        })
    }

    /// The interval each span name maps to: the defaults, renamed, and the custom ones. Two
    /// intervals (or a step or warmup span) under one name are an error.
    fn interval_specs(&mut self) -> Result<Vec<IntervalSpec>, Error> {
        let mut intervals: Vec<IntervalSpec> = Interval::defaults()
            .into_iter()
            .map(|(kind, name, start, stop)| IntervalSpec {
                span_name: Cow::Borrowed(name),
                start_key: Cow::Borrowed(start),
                stop_key: Cow::Borrowed(stop),
                kind,
            })
            .collect();
        for (kind, name) in std::mem::take(&mut self.span_names) {
            if let Some(spec) = intervals.iter_mut().find(|s| s.kind == kind) {
                spec.span_name = Cow::Owned(name);
            }
        }
        intervals.append(&mut self.custom);
        let mut names: Vec<&str> = intervals.iter().map(|s| &*s.span_name).collect();
        names.extend([self.step_span.as_str(), self.warmup_span.as_str()]);
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::Config(format!(
                "span name {:?} is mapped to two intervals",
                w[0]
            )));
        }
        Ok(intervals)
    }

    fn overlay_env(&mut self, env: &Env) -> Result<(), Error> {
        let followed = matches!(self.output, Some(Output::Followed(_)));
        if followed {
            // Read, so that a value that is not UTF-8 is still an error, but not applied.
            env.raw("MLLOG_OUTPUT_FILE")?;
            env.flag("MLLOG_SAVE_TO_FILE")?;
        } else if let Some(path) = env.raw("MLLOG_OUTPUT_FILE")? {
            if path.trim().is_empty() {
                return Err(env.invalid("MLLOG_OUTPUT_FILE", "must not be empty").into());
            }
            self.output = Some(Output::File(PathBuf::from(path)));
        }
        match env.flag("MLLOG_SAVE_TO_FILE")?.filter(|_| !followed) {
            Some(false) => self.output = Some(Output::Stdout),
            Some(true) if !matches!(self.output, Some(Output::File(_))) => {
                return Err(env
                    .invalid(
                        "MLLOG_SAVE_TO_FILE",
                        "no file to save to: set MLLOG_OUTPUT_FILE or Builder::output_file",
                    )
                    .into())
            }
            _ => {}
        }
        if let Some(v) = env.flag("MLLOG_APPEND")? {
            self.append = v;
        }
        match crate::cache_clear::from_env(env)? {
            Some(crate::cache_clear::FromEnv::Record(on)) => self.cache_clear = on,
            Some(crate::cache_clear::FromEnv::Mode(mode)) => {
                self.cache_clear = true;
                self.ranks.cache_clear = mode;
            }
            None => {}
        }
        if let Some(at) = crate::device_sync::from_env(env)? {
            if at != SyncAt::Off && self.device_sync.is_none() {
                return Err(env
                    .invalid(
                        crate::device_sync::VARIABLE,
                        "no device synchronisation was given in code (Builder::device_sync)",
                    )
                    .into());
            }
            self.device_sync_at = Some(at);
        }
        if let Some(v) = env.flag("MLLOG_RUN_STOP_BARRIER")? {
            self.ranks.barrier_at_stop = v;
        }
        if let Some(ms) = env.number(
            "MLLOG_CLOCK_STEP_MS",
            0,
            u64::MAX,
            "whole milliseconds (0: every divergence)",
        )? {
            self.ranks.clock_step = Duration::from_millis(ms);
        }
        if let Some(v) = env.flag("MLLOG_ALL_RANKS")? {
            self.all_ranks = v;
        }
        if let Some(policy) = env.parse("MLLOG_LIVE_CHECK", |v| {
            match (v.eq_ignore_ascii_case("warn"), crate::env::parse_flag(v)) {
                (true, _) | (_, Some(true)) => Ok(LivePolicy::Warn),
                (_, Some(false)) => Ok(LivePolicy::Off),
                _ => Err("expected `off` or `warn`".to_owned()),
            }
        })? {
            self.live_check = policy;
        }
        if let Some(spec) = env.string(crate::rules_source::RULES_ENV)? {
            #[cfg(feature = "rules")]
            {
                let python = env.string(crate::rules_source::PYTHON_ENV)?;
                self.live_rules = Some(crate::compliance::RulesSpec::Env {
                    spec: spec.to_owned(),
                    python: python.unwrap_or("python3").to_owned(),
                });
            }
            #[cfg(not(feature = "rules"))]
            {
                self.rules_unread = Some(spec.to_owned());
            }
        }
        if let Some(v) = env.flag("MLLOG_HANDLE_SIGNALS")? {
            self.handle_signals = v;
        }
        if let Some(v) = env.flag("MLLOG_TRACE_STEPS")? {
            self.trace_steps = v;
        }
        if let Some(v) = env.flag("MLLOG_BLOCK_TPUT_LOG")? {
            self.throughput_stats = v;
        }
        if let Some(n) = env.number(
            "MLLOG_TRAIN_LOSS_LOG_FREQ",
            0,
            u64::MAX,
            "a number of steps (0 = off)",
        )? {
            self.train_loss_every = n;
        }
        if let Some(ms) = env.number(
            "MLLOG_MAX_DELAY_MS",
            0,
            MAX_DELAY_MS,
            "whole milliseconds (0 = wake the worker for every record)",
        )? {
            self.max_delay = Duration::from_millis(ms);
        }
        if let Some(value) = env.parse("MLLOG_TARGET_EVAL_LOSS", |v| {
            v.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| "expected a finite number".to_owned())
        })? {
            self.target = Some(Target::at_most(value));
        }
        if let Some(ns) = env.raw("MLLOG_NAMESPACE")? {
            self.namespace = ns.to_owned();
        }
        if let Some(root) = env.raw("MLLOG_ROOT_DIR")? {
            self.root_dir = Some(root.to_owned());
        }
        // The submission module reads through a plain lookup: a value that is not UTF-8 is an
        // error here, before it could look like "unset" there.
        for name in crate::env::SUBMISSION_VARIABLES {
            env.raw(name)?;
        }
        self.submission
            .overlay_env(&|name| env.raw(name).ok().flatten().map(str::to_owned))
    }
}

/// A builder with the environment applied and validated: what the sinks and the layer are
/// made of.
struct Settings {
    builder: Builder,
    env: Env,
    rank: u32,
    writes: bool,
    intervals: Vec<IntervalSpec>,
    /// Rank variables that disagree with the rank used, said once the pipeline runs.
    rank_conflicts: Vec<crate::env::RankConflict>,
}

/// The sinks of one build, started, and what they ask of the layer and the guard.
struct Planned {
    plan: SinkPlan,
    /// The live checker's handle, and whether its failing verdict is printed at shutdown.
    compliance: Option<(ComplianceHandle, bool)>,
    /// The live check against rules read at run time.
    live_rules: Option<LiveRulesHandle>,
    asks: LayerAsks,
    /// Called for every span on the training thread (the segment profiler).
    span_hooks: Vec<Arc<dyn SpanHook>>,
}

impl Settings {
    /// Every sink at its place, started: the profiler first (an RPD profiler may have to
    /// export variables before any thread starts); the sinks given in code (on every rank
    /// where asked) and those the environment asks for (`crate::registry::FACTORIES`; one
    /// replaces a given sink of its name: code, then the environment), each started
    /// ([`Sink::start`]); the live checker; and last, once nothing else can fail, the MLLOG
    /// output, opened (a file truncated) now.
    fn plan(&mut self) -> Result<Planned, Error> {
        let b = &mut self.builder;
        let writes = self.writes;
        let output = if writes {
            b.output.take().unwrap_or(Output::Stdout)
        } else {
            Output::Nowhere
        };
        let file_path = match &output {
            Output::File(path) | Output::Followed(path) => Some(path.clone()),
            _ => None,
        };
        #[allow(unused_mut)] // pushed to with the `profiling` feature only
        let mut span_hooks: Vec<Arc<dyn SpanHook>> = Vec::new();
        #[cfg(feature = "profiling")]
        if writes {
            span_hooks.extend(crate::registry::profiler(&self.env, b.profiler.take())?);
        }
        let mut sinks: Vec<(Place, Box<dyn Sink>, Delivery)> = std::mem::take(&mut b.sinks)
            .into_iter()
            .filter(|(_, every_rank, _)| writes || *every_rank)
            .map(|(sink, _, delivery)| (Place::Given, sink, delivery))
            .collect();
        for factory in crate::registry::FACTORIES {
            let Some(found) = factory(&self.env, self.rank, &b.submission)? else {
                continue;
            };
            if writes || found.every_rank {
                sinks.retain(|(_, given, _)| given.name() != found.sink.name());
                sinks.push((Place::Optional, found.sink, found.delivery));
            }
        }
        let mut asks = LayerAsks {
            trace_steps: b.trace_steps,
            ..LayerAsks::default()
        };
        let mut plan = SinkPlan::default();
        for (place, mut sink, delivery) in sinks {
            let mut start = SinkStart::new(
                self.rank,
                writes,
                file_path.as_deref(),
                &b.submission,
                &mut asks,
            );
            if let Err(source) = sink.start(&mut start) {
                let what = format!("the sink `{}`", sink.name());
                return Err(Error::Start { what, source });
            }
            let place = if start.reads_log() {
                Place::AfterLog
            } else {
                place
            };
            plan.add(place, sink, delivery);
        }
        let mut compliance = None;
        #[allow(unused_mut)] // set with the `rules` feature only
        let mut live_rules = None;
        if writes && !matches!(b.live_check, LivePolicy::Off) {
            let warn_at_shutdown = matches!(b.live_check, LivePolicy::Warn);
            let policy = std::mem::take(&mut b.live_check);
            // With rules read at run time, their check follows the built-in one, under the
            // same policy (a callback shared by both).
            #[cfg(feature = "rules")]
            let (policy, rules_sink) = match b.live_rules.take() {
                Some(rules) => {
                    let (policy, shared) = crate::compliance::split_policy(policy);
                    let (sink, handle) =
                        crate::compliance::RulesSink::start(rules, b.ruleset, shared)
                            .map_err(Error::Worker)?;
                    live_rules = Some(handle);
                    (policy, Some(sink))
                }
                None => (policy, None),
            };
            let sink = ComplianceSink::new(b.ruleset).with_policy(policy);
            let sink = match b.eval_schedule.take() {
                Some(schedule) => sink.with_eval_schedule(schedule),
                None => sink,
            };
            compliance = Some((sink.handle(), warn_at_shutdown));
            plan.add(Place::Checker, Box::new(sink), Delivery::Inline);
            #[cfg(feature = "rules")]
            if let Some(sink) = rules_sink {
                plan.add(Place::Checker, Box::new(sink), Delivery::Inline);
            }
        }
        let sink: Option<Box<dyn Sink>> = match output {
            Output::Stdout => Some(Box::new(MllogFileSink::stdout())),
            Output::File(path) => Some(Box::new(
                MllogFileSink::create(&path, b.append)
                    .map_err(|source| Error::Output { path, source })?,
            )),
            Output::Writer(w) => Some(Box::new(MllogFileSink::writer(w))),
            Output::Nowhere | Output::Followed(_) => None,
        };
        if let Some(sink) = sink {
            plan.add(Place::Output, sink, Delivery::Inline);
        }
        Ok(Planned {
            plan,
            compliance,
            live_rules,
            asks,
            span_hooks,
        })
    }

    /// Starts the pipeline with its sinks and the layer over it, ties the guard to the layer
    /// and the process's exit paths.
    fn start<S>(self, planned: Planned) -> Result<(MllogLayer<S>, Guard), Error> {
        let Settings {
            builder: b,
            writes,
            intervals,
            env,
            rank_conflicts,
            ..
        } = self;
        let (cache_cleared, cache_note) =
            crate::cache_clear::settle(b.ranks.cache_clear, &env, b.cache_clear, writes);
        let Planned {
            plan,
            compliance,
            live_rules,
            asks,
            span_hooks,
        } = planned;
        if b.handle_signals && writes {
            crate::pipeline::handle_signals().map_err(Error::Worker)?;
        }
        // A rank with nothing to feed disables every callsite (see `MllogLayer`); a span hook
        // (the profiler) alone needs the spans too.
        let active = !plan.is_empty() || !span_hooks.is_empty();
        let (pipeline, guard) = Pipeline::start(Start {
            sinks: plan.into_ordered(&b.deliveries),
            capacity: b.capacity,
            overflow: b.overflow,
            shutdown_timeout: b.shutdown_timeout,
            max_delay: b.max_delay,
            compliance,
            live_rules,
            writes,
            hooks: span_hooks.clone(),
        })
        .map_err(Error::Worker)?;
        for warning in rank_conflicts.iter().map(ToString::to_string) {
            stderr_line!("tracing-mllog: warning: {warning}");
            pipeline.warn(warning);
        }
        #[cfg(not(feature = "rules"))]
        say_rules_unread(&b, writes, &pipeline);
        // Said by the report at the end and by the live check at `run_start`, where a
        // reviewer of the run looks; a drop that failed is said now as well.
        if let Some(note) = cache_note {
            if b.ranks.cache_clear == CacheClear::Drop {
                stderr_line!("tracing-mllog: warning: {note}");
            }
            pipeline.warn(note);
        }
        // Process-wide: the intervals a thread has entered are kept per thread for every
        // layer at once (`entered`), and each layer finds its own by this id.
        static LAYERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let shared = Arc::new(Shared {
            id: LAYERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
            pipeline,
            intervals,
            step_span: Cow::Owned(b.step_span),
            warmup_span: Cow::Owned(b.warmup_span),
            // Leaked once per layer, so that every record borrows it instead of cloning a String.
            namespace: Cow::Borrowed(Box::leak(b.namespace.into_boxed_str())),
            root_dir: b.root_dir,
            cache_clear: b.cache_clear,
            cache_cleared,
            barrier: b.ranks.barrier_of(crate::barrier::At::RunStart),
            stop_barrier: b.ranks.barrier_of(crate::barrier::At::RunStop),
            device: DeviceSyncs::new(b.device_sync, b.device_sync_at.unwrap_or_default()),
            clock: crate::clock_step::ClockWatch::new(b.ranks.clock_step),
            after_init_start: {
                let mut records = b.submission.records();
                if let Some(seed) = b.seed {
                    records.push((Cow::Borrowed(keys::SEED), Value::Int(seed)));
                }
                records.extend(b.hyperparameters);
                records
            },
            writes,
            active,
            samples_per_step: b.samples_per_step,
            train_loss_every: b.train_loss_every,
            throughput_stats: b.throughput_stats,
            trace_steps: asks.trace_steps,
            traced_spans: asks.traced_spans,
            stats: Arc::new(crate::run::RunStats::new(b.target)),
            span_hooks: span_hooks.into_boxed_slice(),
            state: Default::default(),
        });
        guard.arm(&shared);
        Ok((MllogLayer::new(shared), guard))
    }
}

/// What a build that cannot read rules says when `MLLOG_RULES` names some, once, on the rank
/// that writes, on stderr and in the guard's report: the operator expects a check that will
/// not happen.
#[cfg(not(feature = "rules"))]
fn say_rules_unread(b: &Builder, writes: bool, pipeline: &Pipeline) {
    let (true, Some(spec)) = (writes, &b.rules_unread) else {
        return;
    };
    let note = format!(
        "MLLOG_RULES={spec} is set, but this build of tracing-mllog lacks its `rules` feature: \
         the live check uses the built-in rules only (enable the feature, or unset the variable)"
    );
    stderr_line!("tracing-mllog: warning: {note}");
    pipeline.warn(note);
}

/// The many-ranks settings (`crate::barrier`, `crate::cache_clear`, `crate::clock_step`).
struct RankOptions {
    barrier: Option<Arc<dyn Fn() -> BarrierResult + Send + Sync>>,
    barrier_timeout: Option<Duration>,
    barrier_failure: BarrierFailure,
    /// The barrier is called again when `run` closes (`MLLOG_RUN_STOP_BARRIER`).
    barrier_at_stop: bool,
    cache_clear: CacheClear,
    clock_step: Duration,
}

impl Default for RankOptions {
    fn default() -> Self {
        RankOptions {
            barrier: None,
            barrier_timeout: Some(crate::barrier::DEFAULT_TIMEOUT),
            barrier_failure: BarrierFailure::default(),
            barrier_at_stop: false,
            cache_clear: CacheClear::default(),
            clock_step: crate::clock_step::DEFAULT_THRESHOLD,
        }
    }
}

impl RankOptions {
    fn barrier_of(&self, at: crate::barrier::At) -> Option<crate::barrier::Barrier> {
        if at == crate::barrier::At::RunStop && !self.barrier_at_stop {
            return None;
        }
        let call = self.barrier.clone()?;
        Some(crate::barrier::Barrier::new(
            call,
            self.barrier_timeout,
            self.barrier_failure,
            at,
        ))
    }

    /// A barrier before `run_stop` needs the collective to call.
    fn check(&self) -> Result<(), Error> {
        if self.barrier_at_stop && self.barrier.is_none() {
            return Err(Error::Config(
                "a barrier before run_stop was asked for (Builder::barrier_at_run_stop, \
                 MLLOG_RUN_STOP_BARRIER), but no barrier was given (Builder::barrier, \
                 Builder::try_barrier)"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// Many ranks: the barrier before the clock starts, what `cache_clear` says, wall-clock steps.
impl Builder {
    /// A barrier over all ranks (your communicator's: `torch.distributed.barrier`, an NCCL
    /// all-reduce, `MPI_Barrier`), which the layer calls on every rank, writing or not, when
    /// `run` opens and before `run_start` is stamped, so the clock starts on rank 0 only once
    /// every rank has finished `init`. Called once per process, on a thread of the layer's own
    /// (see [`Builder::barrier_timeout`]); non-writing ranks keep their disabled callsites,
    /// only the `run` span reaches the layer there. docs/ranks.md shows each communicator.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tracing_mllog::MllogLayer;
    ///
    /// let world = Arc::new(std::sync::Barrier::new(1)); // your communicator
    /// let (_layer, _guard) = MllogLayer::builder()
    ///     .no_output()
    ///     .barrier(move || {
    ///         world.wait();
    ///     })
    ///     .build::<tracing_subscriber::Registry>()?;
    /// # Ok::<(), tracing_mllog::Error>(())
    /// ```
    pub fn barrier(self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.try_barrier(move || {
            f();
            Ok(())
        })
    }

    /// [`Builder::barrier`] for a collective that can fail (a communicator's own timeout, a
    /// lost peer): an `Err` is reported with its reason, and [`Builder::barrier_failure`]
    /// decides what follows.
    pub fn try_barrier(mut self, f: impl Fn() -> BarrierResult + Send + Sync + 'static) -> Self {
        self.ranks.barrier = Some(Arc::new(f));
        self
    }

    /// How long a rank waits for the barrier (default 30 minutes,
    /// [`crate::barrier::DEFAULT_TIMEOUT`]). The barrier runs on a thread of its own, so a
    /// rank that never arrives cannot hold the run past this; after a timeout the call is
    /// left running there. `None`: no timeout, and the barrier runs on the thread that opens
    /// `run`, for a communicator that must not be called from two threads at once (MPI below
    /// `MPI_THREAD_MULTIPLE`).
    pub fn barrier_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.ranks.barrier_timeout = timeout;
        self
    }

    /// Calls the barrier a second time on every rank, when `run` closes and before `run_stop`
    /// is stamped, so the clock stops on rank 0 only once every rank has finished its run, as
    /// NVIDIA's mlperf-common does (default off, `MLLOG_RUN_STOP_BARRIER`; needs
    /// [`Builder::barrier`]). The same timeout applies; a rank that never arrives (it crashed,
    /// or it is still training at the timeout) is reported and `run_stop` is written without
    /// it. Off by default because every rank must then close `run` exactly once, or the
    /// others wait out the timeout: docs/ranks.md.
    pub fn barrier_at_run_stop(mut self, on: bool) -> Self {
        self.ranks.barrier_at_stop = on;
        self
    }

    /// What a failed, panicking or timed-out barrier does (default
    /// [`BarrierFailure::Continue`]: reported on stderr and in the guard's report, and the
    /// run starts).
    pub fn barrier_failure(mut self, on_failure: BarrierFailure) -> Self {
        self.ranks.barrier_failure = on_failure;
        self
    }

    /// Who cleared the page cache, which is what the `cache_clear` record says (default
    /// [`CacheClear::NotCleared`]: `false`, and the report says that nothing was cleared by
    /// this process). `MLLOG_CACHE_CLEAR=launcher|drop`; [`Builder::cache_clear`] decides
    /// whether the record is written at all.
    pub fn cache_clear_mode(mut self, mode: CacheClear) -> Self {
        self.ranks.cache_clear = mode;
        self
    }

    /// The wall-clock step that is said (default 1 s, `MLLOG_CLOCK_STEP_MS`): at each
    /// interval's end, when the wall clock has moved this far from the log's monotonic clock,
    /// the end record carries [`crate::WALL_CLOCK_STEP_MS`] and the report says so.
    pub fn clock_step_threshold(mut self, threshold: Duration) -> Self {
        self.ranks.clock_step = threshold;
        self
    }
}

/// GPUs: intervals that end when the device's work has (`crate::device_sync`).
impl Builder {
    /// Your device's synchronisation, which returns once the work queued on the device so far
    /// has finished: candle's `device.synchronize()`, `tch::Cuda::synchronize`, burn's
    /// `B::sync(&device)` (docs/devices.md). The layer calls it on the thread that closes
    /// the span, before it stamps the end of every `block`, `eval` and `run` and, at
    /// [`SyncAt::Steps`], of every counted `train_step`, so that those times are the
    /// device's and not the host's enqueue. Not set: nothing is called. Not called while a
    /// thread unwinds, nor by the exit paths (`process::exit`, a signal, a dropped guard);
    /// a panic inside it is the program's, as if its own code had called it there.
    ///
    /// ```
    /// use tracing_mllog::MllogLayer;
    ///
    /// let (_layer, _guard) = MllogLayer::builder()
    ///     .no_output()
    ///     .device_sync(|| { /* device.synchronize().unwrap() */ })
    ///     .build::<tracing_subscriber::Registry>()?;
    /// # Ok::<(), tracing_mllog::Error>(())
    /// ```
    pub fn device_sync(mut self, sync: impl Fn() + Send + Sync + 'static) -> Self {
        self.device_sync = Some(Arc::new(sync));
        self
    }

    /// Where the device synchronisation is called (default [`SyncAt::Intervals`];
    /// `MLLOG_DEVICE_SYNC=off|intervals|steps`): [`SyncAt::Steps`] for step-exact
    /// `train_step_time` and throughput.
    pub fn device_sync_at(mut self, at: SyncAt) -> Self {
        self.device_sync_at = Some(at);
        self
    }
}

/// The segment profiler, under its feature: not a sink (see `crate::registry::profiler`).
impl Builder {
    /// Profile one segment with `librpd_tracer.so` or the CUDA profiler API (`PROFILER=rpd` or
    /// `cuda`, `PROFILE_SEGMENT`, ...). An RPD profiler is best built before other threads
    /// start: it may have to set `RPDT_*` variables (see
    /// [`ProfileError::TracerEnvironment`](crate::profile::ProfileError::TracerEnvironment)).
    #[cfg(feature = "profiling")]
    #[cfg_attr(docsrs, doc(cfg(feature = "profiling")))]
    pub fn profiler(mut self, profiler: crate::profile::SegmentProfiler) -> Self {
        self.profiler = Some(profiler);
        self
    }
}

/// Longest `MLLOG_MAX_DELAY_MS`: a minute (a record waits at most this long for the worker).
const MAX_DELAY_MS: u64 = 60_000;

/// `mllog!` events are `INFO`, and so are the spans of every example: a `tracing` built with a
/// lower maximum (its `max_level_warn` or `release_max_level_off` features, which Cargo turns
/// on for every crate once one dependency asks) compiles them out, and no filter or check at
/// run time could see them. Said at `build()`, before a run that could only log nothing.
fn compiled_level_check(max: tracing_core::LevelFilter) -> Result<(), Error> {
    if max >= tracing_core::LevelFilter::INFO {
        return Ok(());
    }
    Err(Error::Config(format!(
        "the `tracing` crate is compiled with its maximum level at {max} (one of its \
         `max_level_*` or `release_max_level_*` features is on), so every `mllog!` event and \
         every INFO span is compiled out and the MLLOG log would be empty; enable INFO or more \
         (`max_level_info`, `release_max_level_info`)"
    )))
}

#[cfg(test)]
mod compiled_level {
    use super::compiled_level_check;
    use tracing_core::LevelFilter;

    #[test]
    fn a_tracing_compiled_below_info_is_an_error_at_build() {
        for max in [LevelFilter::OFF, LevelFilter::ERROR, LevelFilter::WARN] {
            let err = compiled_level_check(max).unwrap_err().to_string();
            assert!(err.contains(&format!("maximum level at {max}")), "{err}");
            assert!(err.contains("max_level_info"), "{err}");
        }
        for max in [LevelFilter::INFO, LevelFilter::DEBUG, LevelFilter::TRACE] {
            assert!(compiled_level_check(max).is_ok(), "{max}");
        }
        // This build's own level passes, or no test here could log anything.
        assert!(compiled_level_check(tracing::level_filters::STATIC_MAX_LEVEL).is_ok());
    }
}
