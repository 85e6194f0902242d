//! Segment-scoped profiling: record one part of the run (the timed run, the Nth real training
//! step, an eval, a block, any span) with ROCm's `librpd_tracer.so` (`PROFILER=rpd`) or CUDA's
//! profiler API (`PROFILER=cuda`: `cudaProfilerStart`/`cudaProfilerStop`, for
//! `nsys profile --capture-range=cudaProfilerApi`), either loaded at run time.
//!
//! The layer calls [`SegmentProfiler::on_span_open`] and [`SegmentProfiler::on_span_close`] on
//! the training thread for every span; both return after an atomic load and, at most, one
//! string comparison unless the span is the segment. Only the outermost span of the segment
//! starts and stops recording, so start and stop stay balanced however the segment's spans
//! nest. Training steps opened before the `run` span (warmup) are never counted.
//!
//! One state machine decides when to start and stop; a small back-end per profiler makes the
//! calls (RPD: `rpdstart`, `rpdstop` then `rpdflush`, since `rpdstop` does not flush; CUDA:
//! the start and stop calls, whose error codes are reported). See `docs/rpd.md` and
//! `docs/nvidia.md`.
//!
//! Nothing here needs ROCm or CUDA at build time; without `PROFILER` nothing is loaded.
//!
//! # Examples
//!
//! In code, the profiler goes to [`crate::Builder::profiler`]; the same settings come from
//! `PROFILER`, `PROFILE_SEGMENT` and `PROFILE_REPEAT`, parsed as below. A library that cannot
//! be loaded is an error at start-up, never a silent run without the profile:
//!
//! ```
//! use tracing_mllog::profile::{ProfileError, ProfilerKind, Repeat, Segment, SegmentProfiler};
//!
//! // `PROFILE_SEGMENT=train_step:100`: the 100th training step of the timed run.
//! let segment: Segment = "train_step:100".parse()?;
//! assert_eq!((segment.span_name(), segment.nth()), ("train_step", 100));
//! assert!(segment.in_run_only()); // warmup steps do not count
//! assert_eq!("data_load:2".parse::<Segment>()?, Segment::Span { name: "data_load".into(), nth: 2 });
//! assert!("eval:0".parse::<Segment>().is_err()); // occurrences count from 1
//! assert_eq!("all".parse::<Repeat>()?, Repeat::Always);
//!
//! let err = SegmentProfiler::builder()
//!     .profiler(ProfilerKind::Cuda)
//!     .segment(segment)
//!     .library("/nonexistent/libcudart.so")
//!     .build()
//!     .unwrap_err();
//! assert!(matches!(err, ProfileError::Library { profiler: ProfilerKind::Cuda, .. }), "{err}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! With a profiler that loads, the wiring is one builder call:
//!
//! ```no_run
//! use tracing_mllog::profile::{ProfilerKind, Segment, SegmentProfiler};
//!
//! // Under `nsys profile --capture-range=cudaProfilerApi`: record the first eval only.
//! let profiler = SegmentProfiler::builder()
//!     .profiler(ProfilerKind::Cuda)
//!     .segment(Segment::Eval(1))
//!     .build()?; // needs libcudart
//! let (layer, guard) = tracing_mllog::MllogLayer::builder().profiler(profiler).build()?;
//! # let _: (tracing_mllog::MllogLayer<tracing_subscriber::Registry>, _) = (layer, guard);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(feature = "rpd")]
use std::ffi::OsString;
use std::mem::ManuallyDrop;
#[cfg(feature = "rpd")]
use std::path::Path;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

#[cfg(feature = "rpd")]
use crate::sink::{RpdError, RpdSchema};

/// `PROFILER`: profiling is on when it is `rpd` or `cuda` (any case).
pub const ENV_PROFILER: &str = "PROFILER";
/// `PROFILE_SEGMENT`: which segment to record (see [`Segment`]); default `train`.
pub const ENV_PROFILE_SEGMENT: &str = "PROFILE_SEGMENT";
/// `PROFILE_REPEAT`: how many occurrences to record (see [`Repeat`]); default `1`.
pub const ENV_PROFILE_REPEAT: &str = "PROFILE_REPEAT";
/// `RPD_TRACER_LIB`: path of `librpd_tracer.so`; default: the loader's search path.
pub const ENV_RPD_TRACER_LIB: &str = "RPD_TRACER_LIB";
/// `CUDA_PROFILER_LIB`: path (or name) of the library with the CUDA profiler API
/// (`libcudart.so`, or the driver's `libcuda.so`); default: [`CUDA_LIBRARIES`] in turn.
pub const ENV_CUDA_PROFILER_LIB: &str = "CUDA_PROFILER_LIB";
/// `RPDT_FILENAME`: the tracer's output file (set by the profiler before loading).
pub const ENV_RPDT_FILENAME: &str = "RPDT_FILENAME";
/// `RPDT_AUTOSTART`: set to `0` before loading, so that the tracer starts stopped.
pub const ENV_RPDT_AUTOSTART: &str = "RPDT_AUTOSTART";
/// `MLLOG_RPD_FILE`: the RPD file, when `RPDT_FILENAME` is not set.
pub const ENV_MLLOG_RPD_FILE: &str = "MLLOG_RPD_FILE";

/// The library name looked up on the loader's search path.
pub const DEFAULT_LIBRARY: &str = "librpd_tracer.so";
/// The RPD file when neither `RPDT_FILENAME` nor `MLLOG_RPD_FILE` names one (as the tracer).
pub const DEFAULT_RPD_FILE: &str = "trace.rpd";
/// The libraries tried for `PROFILER=cuda` when `CUDA_PROFILER_LIB` is not set, in order: the
/// CUDA runtime (development link, then the sonames of CUDA 13, 12 and 11), then the driver.
pub const CUDA_LIBRARIES: &[&str] = &[
    "libcudart.so",
    "libcudart.so.13",
    "libcudart.so.12",
    "libcudart.so.11.0",
    "libcuda.so.1",
];

/// Which part of the run to record (`PROFILE_SEGMENT`).
///
/// `N` counts from 1 and defaults to 1. Training steps, blocks and evals count only when opened
/// while the `run` span is open, so warmup is never recorded; other span names count wherever
/// they occur. A span of the segment's name nested in another one is part of the outer
/// occurrence.
///
/// Parse it from the `PROFILE_SEGMENT` spelling, or build a variant, and give it to
/// [`SegmentProfilerBuilder::segment`]; `Display` spells it back:
///
/// ```
/// use tracing_mllog::profile::Segment;
///
/// let eval: Segment = "eval:2".parse()?;
/// assert_eq!(eval, Segment::Eval(2));
/// assert_eq!((eval.span_name(), eval.nth(), eval.in_run_only()), ("eval", 2, true));
/// assert_eq!(eval.to_string(), "eval:2");
///
/// // Any other name is a span of that name, counted wherever it opens (warmup included).
/// let load: Segment = "data_load".parse()?;
/// assert_eq!(load, Segment::Span { name: "data_load".into(), nth: 1 });
/// assert!(!load.in_run_only());
///
/// assert_eq!("train".parse::<Segment>()?, Segment::Train); // the whole timed run
/// assert!("train:2".parse::<Segment>().is_err()); // the run happens once
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Segment {
    /// `train`: the `run` span, i.e. the timed run after warmup.
    #[default]
    Train,
    /// `eval[:N]`: the Nth `eval` span.
    Eval(u64),
    /// `train_step[:N]`: the Nth real training step (a `train_step` span opened in the run).
    TrainStep(u64),
    /// `block[:N]`: the Nth `block` span.
    Block(u64),
    /// `NAME[:N]`: the Nth span called `NAME`.
    Span {
        /// The span name.
        name: String,
        /// Which occurrence, from 1.
        nth: u64,
    },
}

impl Segment {
    /// The span name that delimits the segment.
    pub fn span_name(&self) -> &str {
        match self {
            Segment::Train => "run",
            Segment::Eval(_) => "eval",
            Segment::TrainStep(_) => "train_step",
            Segment::Block(_) => "block",
            Segment::Span { name, .. } => name,
        }
    }

    /// The first occurrence recorded, from 1.
    pub fn nth(&self) -> u64 {
        match self {
            Segment::Train => 1,
            Segment::Eval(n) | Segment::TrainStep(n) | Segment::Block(n) => *n,
            Segment::Span { nth, .. } => *nth,
        }
    }

    /// Whether only spans opened while the `run` span is open count.
    pub fn in_run_only(&self) -> bool {
        matches!(
            self,
            Segment::Eval(_) | Segment::TrainStep(_) | Segment::Block(_)
        )
    }
}

impl FromStr for Segment {
    type Err = String;

    /// Parses `train`, `eval[:N]`, `train_step[:N]`, `block[:N]` or `NAME[:N]`.
    fn from_str(s: &str) -> Result<Segment, String> {
        let s = s.trim();
        let (name, nth) = match s.split_once(':') {
            Some((name, n)) => {
                let n: u64 = n.trim().parse().map_err(|_| {
                    format!("{n:?} after ':' is not an occurrence number (1, 2, ...)")
                })?;
                if n == 0 {
                    return Err("occurrences count from 1".into());
                }
                (name.trim(), Some(n))
            }
            None => (s, None),
        };
        if name.is_empty() {
            return Err("empty segment name".into());
        }
        let n = nth.unwrap_or(1);
        Ok(match name {
            "train" => {
                if n != 1 {
                    return Err("`train` (the run) happens once; drop the `:N`".into());
                }
                Segment::Train
            }
            "eval" => Segment::Eval(n),
            "train_step" => Segment::TrainStep(n),
            "block" => Segment::Block(n),
            other => Segment::Span {
                name: other.to_owned(),
                nth: n,
            },
        })
    }
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Segment::Train => f.write_str("train"),
            Segment::Eval(n) => write!(f, "eval:{n}"),
            Segment::TrainStep(n) => write!(f, "train_step:{n}"),
            Segment::Block(n) => write!(f, "block:{n}"),
            Segment::Span { name, nth } => write!(f, "{name}:{nth}"),
        }
    }
}

/// How many occurrences of the segment to record (`PROFILE_REPEAT`).
///
/// Give it to [`SegmentProfilerBuilder::repeat`]; from the environment it is parsed as below.
/// With `Segment::TrainStep(100)` and `Repeat::Times(3)`, steps 100, 101 and 102 are
/// recorded, each between its own start and stop.
///
/// ```
/// use tracing_mllog::profile::Repeat;
///
/// assert_eq!(Repeat::default(), Repeat::Times(1)); // one-shot
/// assert_eq!("3".parse::<Repeat>()?, Repeat::Times(3));
/// assert_eq!("ALL".parse::<Repeat>()?, Repeat::Always);
/// assert_eq!("once".parse::<Repeat>()?, Repeat::Times(1));
/// assert!("0".parse::<Repeat>().is_err()); // nothing to record is a mistake, not a no-op
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Repeat {
    /// This many consecutive occurrences from the Nth (`PROFILE_REPEAT=K`; default 1, one-shot).
    Times(u64),
    /// Every occurrence from the Nth (`PROFILE_REPEAT=all`).
    Always,
}

impl Default for Repeat {
    /// One occurrence (one-shot).
    fn default() -> Repeat {
        Repeat::Times(1)
    }
}

impl FromStr for Repeat {
    type Err = String;

    /// Parses a count from 1, `all` (also `always`, `true`, `yes`, `on`) or `once` (also
    /// `false`, `no`, `off`).
    fn from_str(s: &str) -> Result<Repeat, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "all" | "always" | "true" | "yes" | "on" => Ok(Repeat::Always),
            "once" | "false" | "no" | "off" => Ok(Repeat::Times(1)),
            n => match n.parse::<u64>() {
                Ok(0) | Err(_) => Err(format!(
                    "{s:?} is not a repeat count (use 1, 2, ... or `all`)"
                )),
                Ok(k) => Ok(Repeat::Times(k)),
            },
        }
    }
}

/// Which profiler records the segment (`PROFILER`).
///
/// Chosen with [`SegmentProfilerBuilder::profiler`] or the `PROFILER` variable; it also
/// names the profiler in [`ProfileError`] and [`ProfileReport`].
///
/// ```
/// use tracing_mllog::profile::ProfilerKind;
///
/// let kind: ProfilerKind = " CUDA ".parse()?; // as `PROFILER` may spell it
/// assert_eq!(kind, ProfilerKind::Cuda);
/// assert_eq!(kind.to_string(), "cuda");
/// assert_eq!(ProfilerKind::default().as_str(), "rpd");
/// assert!("nsys".parse::<ProfilerKind>().is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ProfilerKind {
    /// `rpd`: ROCm's `librpd_tracer.so` (`rpdstart`, `rpdstop`, `rpdflush`); feature `rpd`.
    #[default]
    Rpd,
    /// `cuda`: the CUDA profiler API (`cudaProfilerStart`/`cudaProfilerStop` of `libcudart.so`,
    /// or `cuProfilerStart`/`cuProfilerStop` of the driver's `libcuda.so`).
    Cuda,
}

impl ProfilerKind {
    /// As `PROFILER` spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ProfilerKind::Rpd => "rpd",
            ProfilerKind::Cuda => "cuda",
        }
    }

    fn load_hint(self) -> &'static str {
        match self {
            ProfilerKind::Rpd => {
                "set RPD_TRACER_LIB to the path of librpd_tracer.so (built from \
                 rocmProfileData's rpd_tracer), add its directory to LD_LIBRARY_PATH, or unset \
                 PROFILER"
            }
            ProfilerKind::Cuda => {
                "set CUDA_PROFILER_LIB to the path of libcudart.so (e.g. \
                 /usr/local/cuda/lib64/libcudart.so) or of the driver's libcuda.so.1, add its \
                 directory to LD_LIBRARY_PATH, or unset PROFILER"
            }
        }
    }
}

impl std::fmt::Display for ProfilerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProfilerKind {
    type Err = String;

    /// Parses `rpd` or `cuda` (any case).
    fn from_str(s: &str) -> Result<ProfilerKind, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "rpd" => Ok(ProfilerKind::Rpd),
            "cuda" => Ok(ProfilerKind::Cuda),
            _ => Err("expected `rpd` (librpd_tracer.so) or `cuda` (cudaProfilerStart/Stop)".into()),
        }
    }
}

/// Why profiling could not be set up.
///
/// Returned by [`SegmentProfiler::from_env`] and [`SegmentProfilerBuilder::build`]; through
/// the layer it is the source of [`crate::Error::Start`]. Profiling that was asked for and cannot happen is
/// an error at start-up, never a run without the profile; each message says what to set.
///
/// ```
/// use tracing_mllog::env::Env;
/// use tracing_mllog::profile::{ProfileError, ProfilerKind, SegmentProfiler};
///
/// let env = Env::from_map([("PROFILER", "cuda"), ("PROFILE_SEGMENT", "eval:0")]);
/// let err = SegmentProfiler::from_env(&env).unwrap_err();
/// assert!(matches!(&err, ProfileError::Env(e) if e.name() == "PROFILE_SEGMENT"), "{err}");
///
/// let env = Env::from_map([
///     ("PROFILER", "cuda"),
///     ("CUDA_PROFILER_LIB", "/nonexistent/libcudart.so"),
/// ]);
/// let err = SegmentProfiler::from_env(&env).unwrap_err();
/// assert!(matches!(
///     &err,
///     ProfileError::Library { profiler: ProfilerKind::Cuda, library, .. }
///         if library == "/nonexistent/libcudart.so"
/// ));
/// assert!(err.to_string().contains("set CUDA_PROFILER_LIB"), "{err}");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// An environment variable has a value that cannot be used.
    #[error(transparent)]
    Env(#[from] crate::env::EnvError),
    /// `librpd_tracer.so` reads `RPDT_FILENAME` and `RPDT_AUTOSTART` from the process
    /// environment when it is loaded, and they are not set as the profiler needs; setting
    /// them now is unsound because other threads run (one may be reading the environment).
    #[error(
        "PROFILER=rpd: librpd_tracer.so reads RPDT_FILENAME and RPDT_AUTOSTART when it is \
         loaded, and this process already runs {threads} threads, so they cannot be set \
         safely now: set RPDT_FILENAME={filename:?} RPDT_AUTOSTART=0 in the launcher, or build \
         the layer (or the profiler) before any other thread starts"
    )]
    TracerEnvironment {
        /// The file the tracer must write.
        filename: PathBuf,
        /// Threads running (0: unknown).
        threads: usize,
    },
    /// The profiler's library could not be loaded.
    #[error(
        "PROFILER={profiler}: cannot load {library:?} ({message}); {}",
        profiler.load_hint()
    )]
    Library {
        /// The profiler.
        profiler: ProfilerKind,
        /// The path or name tried (names, comma-separated, when several were tried).
        library: String,
        /// The loader's message.
        message: String,
    },
    /// The library lacks a function the profiler calls.
    #[error("PROFILER={profiler}: {library:?} has no symbol {symbol} ({message}); {}", match profiler {
        ProfilerKind::Rpd => "is it librpd_tracer.so?",
        ProfilerKind::Cuda => "is it libcudart.so or libcuda.so?",
    })]
    Symbol {
        /// The profiler.
        profiler: ProfilerKind,
        /// The path or name loaded.
        library: String,
        /// The missing symbol.
        symbol: &'static str,
        /// The loader's message.
        message: String,
    },
    /// The RPD file could not be created with its schema.
    #[cfg(feature = "rpd")]
    #[error("PROFILER=rpd: cannot prepare the RPD file {path:?}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: RpdError,
    },
    /// The profiler was not compiled in.
    #[error("PROFILER={0}: this build of tracing-mllog lacks the `{0}` feature")]
    Unsupported(ProfilerKind),
}

/// What the profiler did, for the run report.
///
/// Read it with [`crate::Guard::detail`]`::<ProfileReport>()` (also the profiler's
/// [`crate::sink::SinkReport::detail`]). A healthy one-shot profile ends with
/// `starts == stops == 1` and `errors == 0`; `occurrences` below the segment's `N` means the
/// segment never came (a run shorter than the step asked for). Without profiling there is
/// no report:
///
/// ```
/// use tracing_mllog::{MllogLayer, Output};
///
/// // No `PROFILER` in this environment: nothing is loaded and nothing is reported.
/// let (_layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .build::<tracing_subscriber::Registry>()?;
/// guard.shutdown();
/// assert_eq!(guard.detail::<tracing_mllog::profile::ProfileReport>(), None);
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
///
/// With a profiler, after the run (`no_run`: loading `libcudart.so` needs a CUDA machine):
///
/// ```no_run
/// use tracing_mllog::profile::{ProfilerKind, Segment, SegmentProfiler};
/// use tracing_mllog::MllogLayer;
/// use tracing_subscriber::prelude::*;
///
/// let profiler = SegmentProfiler::builder()
///     .profiler(ProfilerKind::Cuda)
///     .segment(Segment::TrainStep(10))
///     .build()?;
/// let (layer, mut guard) = MllogLayer::builder().profiler(profiler).build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     let _run = tracing::info_span!("run").entered();
///     for step in 1..=20u64 {
///         let _step = tracing::info_span!("train_step", step).entered();
///     }
/// });
/// guard.shutdown();
/// let report = guard.detail::<tracing_mllog::profile::ProfileReport>().expect("profiling is on");
/// assert_eq!((report.starts, report.stops, report.errors), (1, 1, 0), "{report:?}");
/// assert_eq!(report.segment, "train_step:10");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileReport {
    /// The profiler.
    pub profiler: ProfilerKind,
    /// The segment, as `PROFILE_SEGMENT` spells it.
    pub segment: String,
    /// The library loaded.
    pub library: String,
    /// The RPD file the tracer writes (`PROFILER=rpd`).
    pub rpd_file: Option<PathBuf>,
    /// Occurrences of the segment seen (nested ones and warmup excluded).
    pub occurrences: u64,
    /// Start calls (`rpdstart`, `cudaProfilerStart`).
    pub starts: u64,
    /// Stop calls (`rpdstop`, `cudaProfilerStop`).
    pub stops: u64,
    /// `rpdflush` calls (none for CUDA, whose stop flushes).
    pub flushes: u64,
    /// Whether recording is on now.
    pub active: bool,
    /// Failures (an error code from CUDA, inconsistent calls the profiler refused to make, a
    /// poisoned lock, ...).
    pub errors: u64,
    /// The latest failure, in words.
    pub last_error: Option<String>,
    /// Things worth knowing (an already loaded tracer, a replaced `RPDT_FILENAME`, ...).
    pub notes: Vec<String>,
}

/// The calls of one profiler; the state machine in [`SegmentProfiler`] decides when.
trait Backend: Send + Sync {
    /// Starts recording.
    fn start(&self) -> Result<(), String>;
    /// Stops recording.
    fn stop(&self) -> Result<(), String>;
    /// Makes what was recorded durable, right after a stop; `None` when the stop does that.
    fn flush(&self) -> Option<Result<(), String>>;
}

/// Opens `library` and never unloads it: profilers register exit handlers and run threads,
/// and unloading a library under them is not safe.
fn open_library(
    profiler: ProfilerKind,
    library: &str,
) -> Result<ManuallyDrop<libloading::Library>, ProfileError> {
    // SAFETY: loading runs the library's initialisers; for librpd_tracer.so they read the
    // RPDT_* variables set just before, for libcudart.so they only register the runtime. The
    // caller is told to load before other threads touch the environment.
    unsafe { libloading::Library::new(library) }
        .map(ManuallyDrop::new)
        .map_err(|e| ProfileError::Library {
            profiler,
            library: library.to_owned(),
            message: e.to_string(),
        })
}

/// The symbol `name` of `lib` as a function pointer of type `F`.
///
/// # Safety
/// `F` must be the symbol's real type; the library must never be unloaded.
unsafe fn symbol<F: Copy>(
    profiler: ProfilerKind,
    lib: &libloading::Library,
    library: &str,
    name: &'static str,
) -> Result<F, ProfileError> {
    let mut bytes = name.as_bytes().to_vec();
    bytes.push(0);
    // SAFETY: as the caller promises.
    unsafe { lib.get::<F>(&bytes) }
        .map(|s| *s)
        .map_err(|e| ProfileError::Symbol {
            profiler,
            library: library.to_owned(),
            symbol: name,
            message: e.to_string(),
        })
}

#[cfg(feature = "rpd")]
type VoidFn = unsafe extern "C" fn();

/// `librpd_tracer.so`'s entry points.
#[cfg(feature = "rpd")]
struct RpdTracer {
    _lib: ManuallyDrop<libloading::Library>,
    start: VoidFn,
    stop: VoidFn,
    flush: VoidFn,
}

#[cfg(feature = "rpd")]
impl RpdTracer {
    fn load(library: &str) -> Result<RpdTracer, ProfileError> {
        let kind = ProfilerKind::Rpd;
        let lib = open_library(kind, library)?;
        // SAFETY: rpdstart, rpdstop and rpdflush are `extern "C" void f(void)` in
        // rpd_tracer.h; the library is never unloaded.
        unsafe {
            Ok(RpdTracer {
                start: symbol(kind, &lib, library, "rpdstart")?,
                stop: symbol(kind, &lib, library, "rpdstop")?,
                flush: symbol(kind, &lib, library, "rpdflush")?,
                _lib: lib,
            })
        }
    }
}

#[cfg(feature = "rpd")]
impl Backend for RpdTracer {
    fn start(&self) -> Result<(), String> {
        // SAFETY: `void rpdstart(void)` of the loaded tracer.
        unsafe { (self.start)() };
        Ok(())
    }
    fn stop(&self) -> Result<(), String> {
        // SAFETY: `void rpdstop(void)` of the loaded tracer.
        unsafe { (self.stop)() };
        Ok(())
    }
    fn flush(&self) -> Option<Result<(), String>> {
        // SAFETY: `void rpdflush(void)` of the loaded tracer.
        unsafe { (self.flush)() };
        Some(Ok(()))
    }
}

/// `cudaError_t cudaProfilerStart(void)` / `CUresult cuProfilerStart(void)`: both enums are
/// `int`-sized, 0 is success.
type StatusFn = unsafe extern "C" fn() -> std::ffi::c_int;

/// The CUDA profiler API of the runtime or of the driver.
struct CudaProfiler {
    _lib: ManuallyDrop<libloading::Library>,
    start: StatusFn,
    stop: StatusFn,
    names: [&'static str; 2],
}

impl CudaProfiler {
    /// Loads `library`, or the first of [`CUDA_LIBRARIES`] that loads. Returns the profiler and
    /// the library's name.
    fn load(library: Option<&str>) -> Result<(CudaProfiler, String), ProfileError> {
        let kind = ProfilerKind::Cuda;
        let (lib, name) = match library {
            Some(l) => (open_library(kind, l)?, l.to_owned()),
            None => {
                let mut failures = Vec::new();
                let mut found = None;
                for l in CUDA_LIBRARIES {
                    match open_library(kind, l) {
                        Ok(lib) => {
                            found = Some((lib, (*l).to_owned()));
                            break;
                        }
                        Err(ProfileError::Library { message, .. }) => failures.push(message),
                        Err(e) => return Err(e),
                    }
                }
                found.ok_or_else(|| ProfileError::Library {
                    profiler: kind,
                    library: CUDA_LIBRARIES.join(", "),
                    message: failures.last().cloned().unwrap_or_default(),
                })?
            }
        };
        // SAFETY: `cudaError_t cudaProfilerStart(void)` and `cudaProfilerStop(void)`
        // (cuda_profiler_api.h), `CUresult cuProfilerStart(void)` and `cuProfilerStop(void)`
        // (cudaProfiler.h); the library is never unloaded.
        let runtime = unsafe {
            symbol::<StatusFn>(kind, &lib, &name, "cudaProfilerStart").and_then(|start| {
                Ok((
                    start,
                    symbol::<StatusFn>(kind, &lib, &name, "cudaProfilerStop")?,
                ))
            })
        };
        let (start, stop, names) = match runtime {
            Ok((start, stop)) => (start, stop, ["cudaProfilerStart", "cudaProfilerStop"]),
            // The driver's API, under its own names.
            Err(runtime_err) => match unsafe {
                symbol::<StatusFn>(kind, &lib, &name, "cuProfilerStart").and_then(|start| {
                    Ok((
                        start,
                        symbol::<StatusFn>(kind, &lib, &name, "cuProfilerStop")?,
                    ))
                })
            } {
                Ok((start, stop)) => (start, stop, ["cuProfilerStart", "cuProfilerStop"]),
                Err(_) => return Err(runtime_err),
            },
        };
        Ok((
            CudaProfiler {
                _lib: lib,
                start,
                stop,
                names,
            },
            name,
        ))
    }

    fn call(&self, f: StatusFn, name: &str) -> Result<(), String> {
        // SAFETY: one of the two `int f(void)` functions loaded above.
        match unsafe { f() } {
            0 => Ok(()),
            code => Err(format!("{name} returned error {code}")),
        }
    }
}

impl Backend for CudaProfiler {
    fn start(&self) -> Result<(), String> {
        self.call(self.start, self.names[0])
    }
    fn stop(&self) -> Result<(), String> {
        self.call(self.stop, self.names[1])
    }
    fn flush(&self) -> Option<Result<(), String>> {
        None // cudaProfilerStop flushes the profiling buffers itself
    }
}

/// Serialises the environment changes and the load, within this crate.
static LOAD_LOCK: Mutex<()> = Mutex::new(());

/// Explicit configuration for a [`SegmentProfiler`], from [`SegmentProfiler::builder`].
///
/// The in-code alternative to `PROFILER`, `PROFILE_SEGMENT`, `PROFILE_REPEAT` and the library
/// variables. [`SegmentProfilerBuilder::build`] loads the library at once, so a profiler that
/// cannot work fails here, before training starts:
///
/// ```
/// use tracing_mllog::profile::{ProfileError, ProfilerKind, Repeat, Segment, SegmentProfiler};
///
/// let err = SegmentProfiler::builder()
///     .profiler(ProfilerKind::Cuda)
///     .segment(Segment::TrainStep(100))
///     .repeat(Repeat::Times(3))
///     .library("/nonexistent/libcudart.so")
///     .build()
///     .unwrap_err();
/// assert!(matches!(err, ProfileError::Library { profiler: ProfilerKind::Cuda, .. }), "{err}");
/// ```
#[derive(Clone, Debug, Default)]
pub struct SegmentProfilerBuilder {
    profiler: ProfilerKind,
    segment: Segment,
    repeat: Repeat,
    library: Option<PathBuf>,
    #[cfg(feature = "rpd")]
    rpd_file: Option<PathBuf>,
    #[cfg(feature = "rpd")]
    schema: Option<RpdSchema>,
    /// Where `RPDT_FILENAME` and `MLLOG_RPD_FILE` are read (default: the process).
    #[cfg(feature = "rpd")]
    env: Option<crate::env::Env>,
}

impl SegmentProfilerBuilder {
    /// The profiler (default [`ProfilerKind::Rpd`]).
    pub fn profiler(mut self, profiler: ProfilerKind) -> Self {
        self.profiler = profiler;
        self
    }

    /// The segment to record (default [`Segment::Train`]).
    pub fn segment(mut self, segment: Segment) -> Self {
        self.segment = segment;
        self
    }

    /// How many occurrences to record (default one).
    pub fn repeat(mut self, repeat: Repeat) -> Self {
        self.repeat = repeat;
        self
    }

    /// The profiler's library (default: `librpd_tracer.so` for RPD, [`CUDA_LIBRARIES`] in turn
    /// for CUDA, on the loader's search path).
    pub fn library(mut self, path: impl Into<PathBuf>) -> Self {
        self.library = Some(path.into());
        self
    }

    /// The RPD file (default: `RPDT_FILENAME`, else `MLLOG_RPD_FILE`, else `trace.rpd`).
    /// Exported as `RPDT_FILENAME` before the library is loaded.
    #[cfg(feature = "rpd")]
    pub fn rpd_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.rpd_file = Some(path.into());
        self
    }

    /// The schema of the RPD file when it has to be created (default v3, which the current
    /// `rpd_tracer` writes; an existing file is kept as it is).
    #[cfg(feature = "rpd")]
    pub fn schema(mut self, schema: RpdSchema) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Loads the profiler's library. For RPD it first prepares the file and sets
    /// `RPDT_AUTOSTART=0` and `RPDT_FILENAME`.
    ///
    /// Call it early, before threads that read the environment start: it may set environment
    /// variables, which the tracer's initialiser reads when it is loaded.
    pub fn build(self) -> Result<SegmentProfiler, ProfileError> {
        let _guard = LOAD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let library = self
            .library
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned());
        match self.profiler {
            ProfilerKind::Cuda => {
                let (backend, library) = CudaProfiler::load(library.as_deref())?;
                Ok(SegmentProfiler::new(
                    ProfilerKind::Cuda,
                    self.segment,
                    self.repeat,
                    Box::new(backend),
                    library,
                    None,
                    Vec::new(),
                ))
            }
            #[cfg(feature = "rpd")]
            ProfilerKind::Rpd => self.build_rpd(library),
            #[cfg(not(feature = "rpd"))]
            ProfilerKind::Rpd => Err(ProfileError::Unsupported(ProfilerKind::Rpd)),
        }
    }

    #[cfg(feature = "rpd")]
    fn build_rpd(self, library: Option<String>) -> Result<SegmentProfiler, ProfileError> {
        let mut notes = Vec::new();
        let env = self.env.clone().unwrap_or_else(crate::env::Env::process);
        let env_file = env.string(ENV_RPDT_FILENAME)?.map(OsString::from);
        let rpd_file = match (&self.rpd_file, &env_file) {
            (Some(p), Some(e)) => {
                if Path::new(e) != p.as_path() {
                    notes.push(format!(
                        "RPDT_FILENAME was {:?}; replaced by {:?}",
                        Path::new(e),
                        p
                    ));
                }
                p.clone()
            }
            (Some(p), None) => p.clone(),
            (None, Some(e)) => PathBuf::from(e),
            (None, None) => env
                .string(ENV_MLLOG_RPD_FILE)?
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_RPD_FILE)),
        };
        let schema = self.schema.unwrap_or_default();
        schema
            .ensure_file(&rpd_file)
            .map_err(|source| ProfileError::File {
                path: rpd_file.clone(),
                source,
            })?;
        // The tracer opens the file relative to its own working directory: give it a path
        // that stays right if the process changes directory.
        let export = std::fs::canonicalize(&rpd_file).unwrap_or_else(|_| rpd_file.clone());

        let library = library.unwrap_or_else(|| DEFAULT_LIBRARY.to_owned());
        // What the tracer itself will read: the process environment, whatever map the
        // profiler's settings came from.
        let process = crate::env::Env::process();
        if process.raw("RPDT_LOADED").ok().flatten().is_some() {
            notes.push(
                "librpd_tracer.so was already loaded (RPDT_LOADED is set, e.g. by LD_PRELOAD): \
                 its RPDT_FILENAME and RPDT_AUTOSTART were read at that time"
                    .to_owned(),
            );
        }
        export_tracer_variables(&process, &export)?;
        let tracer = RpdTracer::load(&library)?;
        Ok(SegmentProfiler::new(
            ProfilerKind::Rpd,
            self.segment,
            self.repeat,
            Box::new(tracer),
            library,
            Some(rpd_file),
            notes,
        ))
    }
}

#[derive(Default)]
struct ProfilerState {
    occurrences: u64,
    profiled: u64,
    active: bool,
    errors: u64,
    last_error: Option<String>,
}

impl ProfilerState {
    fn fail(&mut self, message: String) {
        self.errors += 1;
        self.last_error = Some(message);
    }
}

/// Records one segment of the run with a profiler loaded at run time; see the module
/// documentation.
///
/// `Send + Sync`: the layer may call it from any thread. The layer builds one from the
/// environment on its own ([`SegmentProfiler::from_env`]); give one to
/// [`crate::Builder::profiler`] to configure it in code. Without `PROFILER` nothing is loaded:
///
/// ```
/// use tracing_mllog::env::Env;
/// use tracing_mllog::profile::{ProfileError, SegmentProfiler};
///
/// assert!(SegmentProfiler::from_env(&Env::from_map([("PROFILE_SEGMENT", "eval")]))?.is_none());
///
/// // Asked for, it loads its library now; none here, so it says which and why.
/// let env = Env::from_map([("PROFILER", "cuda"), ("CUDA_PROFILER_LIB", "/nonexistent/x.so")]);
/// assert!(matches!(SegmentProfiler::from_env(&env), Err(ProfileError::Library { .. })));
/// # Ok::<(), ProfileError>(())
/// ```
///
/// On a machine with the profiler (`no_run`: `libcudart.so` needs CUDA), under
/// `nsys profile --capture-range=cudaProfilerApi`:
///
/// ```no_run
/// use tracing_mllog::profile::{ProfilerKind, Segment, SegmentProfiler};
///
/// let profiler = SegmentProfiler::builder()
///     .profiler(ProfilerKind::Cuda)
///     .segment(Segment::Eval(1))
///     .build()?;
/// assert_eq!(profiler.segment(), &Segment::Eval(1));
/// let (layer, guard) = tracing_mllog::MllogLayer::builder().profiler(profiler).build()?;
/// # let _: (tracing_mllog::MllogLayer<tracing_subscriber::Registry>, _) = (layer, guard);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SegmentProfiler {
    target: Box<str>,
    segment: Segment,
    in_run_only: bool,
    nth: u64,
    repeat: Repeat,
    /// The open outermost span of the segment's name (its id, mapped away from 0), or 0.
    outer: AtomicU64,
    /// Set when no further occurrence will be recorded.
    finished: AtomicBool,
    starts: AtomicU64,
    stops: AtomicU64,
    flushes: AtomicU64,
    state: Mutex<ProfilerState>,
    kind: ProfilerKind,
    backend: Box<dyn Backend>,
    library: String,
    rpd_file: Option<PathBuf>,
    notes: Vec<String>,
}

/// Span ids are non-zero in `tracing`; keep 0 free as "none" anyway.
fn key(span_id: u64) -> u64 {
    if span_id == 0 {
        u64::MAX
    } else {
        span_id
    }
}

impl SegmentProfiler {
    /// The profiler the environment asks for: `None` unless `PROFILER` is `rpd` or `cuda`.
    /// Reads `PROFILE_SEGMENT` (default `train`) and `PROFILE_REPEAT` (default `1`); for RPD
    /// `RPD_TRACER_LIB`, `RPDT_FILENAME` / `MLLOG_RPD_FILE` (default `trace.rpd`) and
    /// `MLLOG_RPD_SCHEMA`; for CUDA `CUDA_PROFILER_LIB`.
    ///
    /// When profiling is asked for, a bad value, a missing library or an unwritable file is an
    /// error (naming the variable or the library) rather than a silently disabled profiler;
    /// the caller decides whether to go on without it. When it is not, nothing is loaded.
    pub fn from_env(env: &crate::env::Env) -> Result<Option<SegmentProfiler>, ProfileError> {
        let Some(kind) = env.parse(ENV_PROFILER, |v| v.parse::<ProfilerKind>())? else {
            return Ok(None);
        };
        let mut builder = SegmentProfiler::builder().profiler(kind);
        if let Some(segment) = env.parse(ENV_PROFILE_SEGMENT, |v| v.parse())? {
            builder.segment = segment;
        }
        if let Some(repeat) = env.parse(ENV_PROFILE_REPEAT, |v| v.parse())? {
            builder.repeat = repeat;
        }
        let library_var = match kind {
            ProfilerKind::Rpd => ENV_RPD_TRACER_LIB,
            ProfilerKind::Cuda => ENV_CUDA_PROFILER_LIB,
        };
        if let Some(v) = env.string(library_var)? {
            builder.library = Some(PathBuf::from(v));
        }
        #[cfg(feature = "rpd")]
        if kind == ProfilerKind::Rpd {
            builder.schema = RpdSchema::from_env(env).map_err(|e| match e {
                RpdError::Env(e) => ProfileError::Env(e),
                other => ProfileError::File {
                    path: PathBuf::new(),
                    source: other,
                },
            })?;
            builder.env = Some(env.clone());
        }
        builder.build().map(Some)
    }

    /// A builder for explicit configuration.
    pub fn builder() -> SegmentProfilerBuilder {
        SegmentProfilerBuilder::default()
    }

    fn new(
        kind: ProfilerKind,
        segment: Segment,
        repeat: Repeat,
        backend: Box<dyn Backend>,
        library: String,
        rpd_file: Option<PathBuf>,
        notes: Vec<String>,
    ) -> SegmentProfiler {
        SegmentProfiler {
            target: segment.span_name().into(),
            in_run_only: segment.in_run_only(),
            nth: segment.nth(),
            segment,
            repeat,
            outer: AtomicU64::new(0),
            finished: AtomicBool::new(false),
            starts: AtomicU64::new(0),
            stops: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            state: Mutex::new(ProfilerState::default()),
            kind,
            backend,
            library,
            rpd_file,
            notes,
        }
    }

    /// The segment recorded.
    pub fn segment(&self) -> &Segment {
        &self.segment
    }

    /// The profiler.
    pub fn profiler(&self) -> ProfilerKind {
        self.kind
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ProfilerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A span opened (training thread). `run_open` is whether the `run` span is open.
    #[inline]
    pub fn on_span_open(&self, span_id: u64, name: &'static str, run_open: bool) {
        if self.finished.load(Ordering::Relaxed) || name != &*self.target {
            return;
        }
        if self.in_run_only && !run_open {
            return; // warmup
        }
        if self.outer.load(Ordering::Acquire) != 0 {
            return; // nested in the open occurrence
        }
        self.open_slow(key(span_id));
    }

    #[cold]
    fn open_slow(&self, id: u64) {
        let mut st = self.lock();
        if self.outer.load(Ordering::Acquire) != 0 || self.finished.load(Ordering::Relaxed) {
            return;
        }
        self.outer.store(id, Ordering::Release);
        st.occurrences += 1;
        let wanted = st.occurrences >= self.nth
            && match self.repeat {
                Repeat::Always => true,
                Repeat::Times(k) => st.profiled < k,
            };
        if wanted {
            if st.active {
                st.fail("start while already recording; skipped".into());
                return;
            }
            self.starts.fetch_add(1, Ordering::Relaxed);
            st.profiled += 1;
            // A failed start leaves recording off: no stop is owed for it.
            match self.backend.start() {
                Ok(()) => st.active = true,
                Err(e) => st.fail(e),
            }
        }
    }

    /// A span closed (training thread).
    #[inline]
    pub fn on_span_close(&self, span_id: u64) {
        let outer = self.outer.load(Ordering::Acquire);
        if outer == 0 || outer != key(span_id) {
            return;
        }
        self.close_slow(outer);
    }

    #[cold]
    fn close_slow(&self, id: u64) {
        let mut st = self.lock();
        if self.outer.load(Ordering::Acquire) != id {
            return;
        }
        self.outer.store(0, Ordering::Release);
        if st.active {
            self.stop_locked(&mut st);
        }
        if let Repeat::Times(k) = self.repeat
            && st.profiled >= k
        {
            self.finished.store(true, Ordering::Relaxed);
        }
    }

    /// Stops the one start made for this occurrence, then flushes where the profiler needs it.
    fn stop_locked(&self, st: &mut ProfilerState) {
        self.stops.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = self.backend.stop() {
            st.fail(e);
        }
        if let Some(flushed) = self.backend.flush() {
            self.flushes.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = flushed {
                st.fail(e);
            }
        }
        st.active = false;
    }

    /// Stops recording if a segment is being recorded (an aborted run) and records no further
    /// occurrence. Also done on drop.
    pub fn finish(&self) {
        let mut st = self.lock();
        self.finished.store(true, Ordering::Relaxed);
        self.outer.store(0, Ordering::Release);
        if st.active {
            self.stop_locked(&mut st);
        }
    }

    /// What was done so far.
    pub fn report(&self) -> ProfileReport {
        let st = self.lock();
        ProfileReport {
            profiler: self.kind,
            segment: self.segment.to_string(),
            library: self.library.clone(),
            rpd_file: self.rpd_file.clone(),
            occurrences: st.occurrences,
            starts: self.starts.load(Ordering::Relaxed),
            stops: self.stops.load(Ordering::Relaxed),
            flushes: self.flushes.load(Ordering::Relaxed),
            active: st.active,
            errors: st.errors,
            last_error: st.last_error.clone(),
            notes: self.notes.clone(),
        }
    }
}

impl Drop for SegmentProfiler {
    fn drop(&mut self) {
        self.finish();
    }
}

impl std::fmt::Debug for SegmentProfiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentProfiler")
            .field("profiler", &self.kind)
            .field("segment", &self.segment)
            .field("repeat", &self.repeat)
            .field("library", &self.library)
            .field("rpd_file", &self.rpd_file)
            .finish_non_exhaustive()
    }
}

/// Sets `RPDT_AUTOSTART=0` and `RPDT_FILENAME=export` for the tracer about to be loaded,
/// which reads them in its loader constructor. Nothing is set when they already say so (a
/// launcher set them). Otherwise they are set only while this is the process's one thread:
/// changing the environment while another thread may read it (`getenv` in C code included)
/// is undefined behaviour, so with more threads this is an error saying what to set.
#[cfg(feature = "rpd")]
fn export_tracer_variables(process: &crate::env::Env, export: &Path) -> Result<(), ProfileError> {
    let autostart_off = process.raw(ENV_RPDT_AUTOSTART).ok().flatten() == Some("0");
    let same_file = process
        .raw(ENV_RPDT_FILENAME)
        .ok()
        .flatten()
        .is_some_and(|f| Path::new(f) == export);
    if autostart_off && same_file {
        return Ok(());
    }
    let threads = thread_count();
    if threads != Some(1) {
        return Err(ProfileError::TracerEnvironment {
            filename: export.to_path_buf(),
            threads: threads.unwrap_or(0),
        });
    }
    // SAFETY: this is the process's one thread (checked above): nothing else can read the
    // environment while it changes.
    unsafe {
        std::env::set_var(ENV_RPDT_AUTOSTART, "0");
        std::env::set_var(ENV_RPDT_FILENAME, OsString::from(export.as_os_str()));
    }
    Ok(())
}

/// The threads of this process (Linux: `/proc/self/task`), or `None` when unknown.
#[cfg(feature = "rpd")]
fn thread_count() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/task").ok()?.count())
}

impl crate::sink::plug::SpanHook for SegmentProfiler {
    #[inline]
    fn on_span_open(&self, span_id: u64, name: &'static str, run_open: bool) {
        SegmentProfiler::on_span_open(self, span_id, name, run_open);
    }

    #[inline]
    fn on_span_close(&self, span_id: u64) {
        SegmentProfiler::on_span_close(self, span_id);
    }

    fn finish(&self) {
        SegmentProfiler::finish(self);
    }

    fn detail(&self) -> crate::sink::Detail {
        crate::sink::Detail::new(self.report())
    }
}
