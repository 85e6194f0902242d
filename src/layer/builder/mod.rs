//! Configuration of [`MllogLayer`]: the builder's settings, and the environment (`MLLOG_*`)
//! over them when the program asks for it (`Builder::from_env`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::{IntervalSpec, MllogLayer, Output, Ranks};
use crate::barrier::Barrier;
use crate::cache_clear::CacheClear;
use crate::compliance::{LivePolicy, Ruleset};
use crate::device_sync::SyncAt;
use crate::env::Env;
use crate::keys;
use crate::pipeline::{Guard, Pipeline, RecordFeed, RecordSender, Start};
use crate::record::{Str, Value};
use crate::run::{EvalSchedule, Target};
use crate::sink::{Delivery, Sink};
use crate::submission::Submission;
use crate::Error;
use start::Settings;

mod overlay;
mod start;

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
/// use tracing_mllog::CacheClear;
/// use tracing_mllog::Output;
///
/// let (memory, records) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(memory)
///     .cache_clear(CacheClear::Off)
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

/// Configures and builds an [`MllogLayer`] and its [`Guard`].
///
/// Start from [`MllogLayer::builder`], choose where the log goes ([`Builder::output`]: a file,
/// standard output (the default), any writer, or nowhere), describe the submission
/// ([`Builder::submission`], or a [`Builder::preset`]), add extra [`Sink`]s, then call
/// [`Builder::build`]. Settings that belong together are one value each, as
/// `tracing_subscriber::fmt`'s format is: [`Output`], [`Submission`], [`Ranks`],
/// [`Pipeline`] and [`Barrier`]. It returns the layer, to add to a
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
/// use tracing_mllog::{keys, mllog, sink::MemorySink, Benchmark, MllogLayer, Output, Submission};
/// use tracing_subscriber::prelude::*;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("result_0.txt");
/// let (memory, records) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::file(&path))
///     .submission(
///         Submission::default()
///             .benchmark(Benchmark::Llama2_70bLora)
///             .org("ExampleOrg"),
///     )
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
/// use tracing_mllog::{Error, MllogLayer, Output};
///
/// let err = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .environment([("MLLOG_APPEND", "perhaps")])
///     .build::<tracing_subscriber::Registry>()
///     .err()
///     .expect("not a boolean");
/// assert!(matches!(&err, Error::Env { name, .. } if name == "MLLOG_APPEND"), "{err}");
/// ```
#[must_use = "a Builder does nothing until `build()` is called"]
pub struct Builder {
    output: Output,
    namespace: String,
    root_dir: Option<String>,
    cache_clear: CacheClear,
    ranks: Ranks,
    submission: Submission,
    span_names: Vec<(Interval, String)>,
    custom: Vec<IntervalSpec>,
    /// Each given sink, whether it runs on every rank, and its delivery when `sink_with` chose
    /// one.
    sinks: Vec<(Box<dyn Sink>, bool, Option<Delivery>)>,
    /// Delivery chosen by sink name, for the sinks the environment adds (RPD, OTel, upload).
    deliveries: Vec<(String, Delivery)>,
    pipeline: Pipeline,
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
    /// The ruleset those rules run, when not the builder's (`LiveRules::ruleset`,
    /// `MLLOG_RULES_RULESET`).
    #[cfg(feature = "rules")]
    live_rules_ruleset: Option<String>,
    /// `MLLOG_RULES` as set, in a build that cannot read rules: said once the pipeline runs.
    #[cfg(not(feature = "rules"))]
    rules_unread: Option<String>,
    seed: Option<i128>,
    eval_schedule: Option<EvalSchedule>,
    handle_signals: bool,
    barrier: Option<Barrier>,
    /// The wall-clock step that is said (`crate::clock_step`).
    clock_step: Duration,
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
            .field("output", &self.output)
            .field("namespace", &self.namespace)
            .field("ranks", &self.ranks)
            .field("submission", &self.submission)
            .field("sinks", &sinks)
            .field("ruleset", &self.ruleset)
            .field("target", &self.target)
            .field("seed", &self.seed)
            .field("pipeline", &self.pipeline)
            .field("barrier", &self.barrier)
            .finish_non_exhaustive()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            output: Output::Stdout,
            namespace: String::new(),
            root_dir: None,
            cache_clear: CacheClear::default(),
            ranks: Ranks::default(),
            submission: Submission::default(),
            span_names: Vec::new(),
            custom: Vec::new(),
            sinks: Vec::new(),
            deliveries: Vec::new(),
            pipeline: Pipeline::default(),
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
            #[cfg(feature = "rules")]
            live_rules_ruleset: None,
            #[cfg(not(feature = "rules"))]
            rules_unread: None,
            seed: None,
            eval_schedule: None,
            handle_signals: false,
            barrier: None,
            clock_step: crate::clock_step::DEFAULT_THRESHOLD,
            device_sync: None,
            device_sync_at: None,
            #[cfg(feature = "profiling")]
            profiler: None,
        }
    }
}

impl Builder {
    /// Where the MLLOG lines go (default [`Output::Stdout`], as `mlperf_logging` does):
    /// [`Output::file`], [`Output::append_to`], [`Output::writer`], [`Output::Nowhere`] (only
    /// the [`Builder::sink`]s receive records) or [`Output::followed`]. Under
    /// [`Builder::from_env`], `MLLOG_OUTPUT_FILE`, `MLLOG_SAVE_TO_FILE` and `MLLOG_APPEND`
    /// override it, except a followed file.
    pub fn output(mut self, output: Output) -> Self {
        self.output = output;
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

    /// Whether the `cache_clear` record is written right before `init_start`, and who it says
    /// cleared the page cache (default [`CacheClear::NotCleared`]: written, `false`, and the
    /// report says that nothing was cleared by this process). `MLLOG_CACHE_CLEAR=0|1|launcher|drop`.
    pub fn cache_clear(mut self, cache_clear: CacheClear) -> Self {
        self.cache_clear = cache_clear;
        self
    }

    /// Which rank this process is and which ranks write (default: the rank detected from the
    /// launcher's variables; rank 0 writes). `MLLOG_ALL_RANKS`.
    pub fn ranks(mut self, ranks: Ranks) -> Self {
        self.ranks = ranks;
        self
    }

    /// The submission metadata: `submission_benchmark`, `submission_org`,
    /// `submission_division`, `submission_status`, `submission_platform`, the precisions, the
    /// parallelism, `micro_batch_size`, `config_filename`, ... (each
    /// `MLLOG_SUBMISSION_*`-style variable overrides its field). The fields given replace
    /// those of an earlier call or of a [`Builder::preset`]; a field left `None` keeps what
    /// was there, so a preset's benchmark and division survive the org given after it.
    ///
    /// ```
    /// use tracing_mllog::{Division, MllogLayer, Submission, SystemStatus};
    ///
    /// let builder = MllogLayer::builder().submission(
    ///     Submission::default()
    ///         .org("ExampleOrg")
    ///         .division(Division::Closed)
    ///         .status(SystemStatus::Onprem)
    ///         .platform("8xH100"),
    /// );
    /// # drop(builder);
    /// ```
    pub fn submission(mut self, submission: Submission) -> Self {
        self.submission.overlay(submission);
        self
    }

    /// Configures the layer with a benchmark preset: `submission_benchmark`,
    /// `submission_division`, the ruleset, the global batch size (sample counting), the
    /// quality target, the evaluation schedule and the hyperparameter records (logged inside
    /// `init`, in order). Submission metadata that is not the preset's business (org,
    /// platform, precisions, parallelism, `config_filename`) is still yours to give with
    /// [`Builder::submission`], before or after.
    pub fn preset(self, preset: &crate::presets::Preset) -> Self {
        self.submission(
            Submission::default()
                .benchmark(preset.benchmark())
                .division(preset.division()),
        )
        .ruleset(preset.ruleset())
        .global_batch_size(preset.global_batch_size())
        .target(preset.target())
        .eval_schedule(preset.eval_schedule())
        .hyperparameters(preset.hyperparameters().iter().cloned())
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
    /// mllog-core's rule engine runs the rules of the builder's [`Builder::ruleset`] (or the
    /// ruleset [`LiveRules::ruleset`](crate::compliance::LiveRules::ruleset) names: a round
    /// no build of this crate knows) from the source (a `RulesSource`, or a
    /// [`LiveRules`](crate::compliance::LiveRules)) over the lines written so far, on a
    /// thread of its own, and its findings are
    /// reported as the built-in check's are (the same [`LivePolicy`]; nothing when it is
    /// `Off`); the guard's report carries them as [`Report::live_rules`], naming the source.
    /// A source without the ruleset, or a rule file that does not load, is said (naming the
    /// file) and the run goes on, its log untouched. `MLLOG_RULES` (a folder, `python` or
    /// `python:PATH`, as `mllog check --rules`) overrides the source, `MLLOG_RULES_RULESET`
    /// the ruleset.
    ///
    /// [`Report::live_rules`]: crate::Report::live_rules
    #[cfg(feature = "rules")]
    #[cfg_attr(docsrs, doc(cfg(feature = "rules")))]
    pub fn live_rules(mut self, rules: impl Into<crate::compliance::LiveRules>) -> Self {
        let rules = rules.into();
        self.live_rules = Some(crate::compliance::RulesSpec::Source(rules.source));
        self.live_rules_ruleset = rules.ruleset;
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
    pub fn sink(mut self, sink: impl Sink) -> Self {
        self.sinks.push((Box::new(sink), false, None));
        self
    }

    /// [`Builder::sink`] with a chosen [`Delivery`]: [`Delivery::Inline`] for a sink that must
    /// not lose a record and may hold up the MLLOG file (and the training thread) when slow.
    /// A [`Builder::sink_delivery`] that names this sink with another delivery is an error at
    /// `build()`.
    pub fn sink_with(mut self, sink: impl Sink, delivery: Delivery) -> Self {
        self.sinks.push((Box::new(sink), false, Some(delivery)));
        self
    }

    /// Send every record to this sink on every rank (e.g. telemetry that each rank exports),
    /// isolated like [`Builder::sink`]. On a rank that does not write MLLOG lines, the layer
    /// stays active for such sinks only.
    pub fn sink_on_every_rank(mut self, sink: impl Sink) -> Self {
        self.sinks.push((Box::new(sink), true, None));
        self
    }

    /// How the sink named `name` (its [`Sink::name`]: `"rpd"`, `"otel"`,
    /// `"object-store-upload"`, or a sink of your own) receives records, instead of the
    /// default for its kind ([`Delivery::Isolated`] for all of these). The MLLOG output and the
    /// live checker are always [`Delivery::Inline`]: they are the log. For a sink given in code,
    /// [`Builder::sink_with`] says the same; the two disagreeing is an error at `build()`.
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

    /// How records travel to the sinks: the queue's size, the worker's delay, what a full
    /// queue does and how long shutdown waits ([`Pipeline`]; `MLLOG_MAX_DELAY_MS`).
    pub fn pipeline(mut self, pipeline: Pipeline) -> Self {
        self.pipeline = pipeline;
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
    /// use tracing_mllog::{MllogLayer, Output};
    ///
    /// // A training binary that operators configure through MLLOG_OUTPUT_FILE, MLLOG_OTEL, ...
    /// let builder = MllogLayer::builder().output(Output::file("results/result_0.txt")).from_env();
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
    /// use tracing_mllog::{MllogLayer, Output};
    ///
    /// let (memory, seen) = MemorySink::new();
    /// let (feed, mut guard) = MllogLayer::builder()
    ///     .output(Output::Nowhere)
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
        let (pipeline, guard) = RecordSender::start(Start {
            sinks: planned.plan.into_ordered(&b.deliveries),
            settings: b.pipeline,
            compliance: planned.compliance,
            live_rules: planned.live_rules,
            // What a feed receives is its caller's business: the report's "no span or event
            // reached the layer" (and the dropped-guard probe) speak of a layer there is not.
            writes: false,
            hooks: Vec::new(),
        })
        .map_err(Error::Worker)?;
        #[cfg(not(feature = "rules"))]
        start::say_rules_unread(&b, settings.writes, &pipeline);
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
        #[cfg(feature = "rules")]
        if let Some(r) = &self.live_rules_ruleset
            && !Ruleset::is_well_formed(r)
        {
            return Err(Error::Config(format!(
                "LiveRules::ruleset {r:?}: {}",
                crate::compliance::RULESET_FORM
            )));
        }
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
        let rank = match self.ranks.rank {
            Some(r) => r,
            None => detected.rank.map_or(0, |(r, _)| r),
        };
        let writes = self.ranks.all_write || rank == self.ranks.writer;
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
}

/// Many ranks: the barrier at the ends of the clock, wall-clock steps.
impl Builder {
    /// A barrier over all ranks, called when `run` opens (and, when asked, when it closes)
    /// before the clock is stamped ([`Barrier`]).
    pub fn barrier(mut self, barrier: Barrier) -> Self {
        self.barrier = Some(barrier);
        self
    }

    /// The wall-clock step that is said (default 1 s, `MLLOG_CLOCK_STEP_MS`): at each
    /// interval's end, when the wall clock has moved this far from the log's monotonic clock,
    /// the end record carries [`crate::WALL_CLOCK_STEP_MS`] and the report says so.
    pub fn clock_step_threshold(mut self, threshold: Duration) -> Self {
        self.clock_step = threshold;
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
    /// use tracing_mllog::{MllogLayer, Output};
    ///
    /// let (_layer, _guard) = MllogLayer::builder()
    ///     .output(Output::Nowhere)
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
