//! What a sink learns of the build before its first record, and what it may ask of the layer:
//! the [`SinkStart`] that `Builder::build` hands to every sink's
//! [`Sink::start`](super::Sink::start), built in or the user's, the same way.

use std::path::Path;
use std::sync::Arc;

use crate::submission::Submission;

/// The build as a sink sees it when it starts: the rank, the MLLOG file, the submission; and
/// the records it may ask the layer for beyond the MLLOG lines.
///
/// Given to [`Sink::start`](super::Sink::start), once, on the thread that calls
/// [`Builder::build`](crate::Builder::build), before any record. A sink that opens files or
/// threads does so there rather than when it is made, so that a rank that never uses it
/// (a sink given to the builder runs on the writing rank only, unless
/// [`Builder::sink_on_every_rank`](crate::Builder::sink_on_every_rank)) never opens them.
///
/// ```
/// use std::path::PathBuf;
/// use std::sync::{Arc, Mutex};
/// use tracing_mllog::sink::{Sink, SinkError, SinkStart};
/// use tracing_mllog::{MllogLayer, Output};
/// use tracing_mllog::record::TracedRecord;
///
/// /// Remembers which file the layer writes and asks for the sampled steps as records.
/// struct Watching(Arc<Mutex<Option<PathBuf>>>);
///
/// impl Sink for Watching {
///     fn name(&self) -> &str {
///         "watching"
///     }
///     fn start(
///         &mut self,
///         start: &mut SinkStart<'_>,
///     ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///         let file = start.read_log_file().ok_or("this sink reads the MLLOG file")?;
///         *self.0.lock().unwrap() = Some(file.to_path_buf());
///         start.trace_steps();
///         Ok(())
///     }
///     fn write(&mut self, _: &TracedRecord) -> Result<(), SinkError> {
///         Ok(())
///     }
/// }
///
/// let dir = tempfile::tempdir()?;
/// let seen = Arc::new(Mutex::new(None));
/// let (_layer, mut guard) = MllogLayer::builder()
///     .output(Output::file(dir.path().join("result_0.txt")))
///     .sink(Watching(seen.clone()))
///     .build::<tracing_subscriber::Registry>()?;
/// assert_eq!(*seen.lock().unwrap(), Some(dir.path().join("result_0.txt")));
/// guard.shutdown();
///
/// // Without a file to read, the build fails, naming the sink.
/// let err = MllogLayer::builder()
///     .output(Output::Stdout)
///     .sink(Watching(seen))
///     .build::<tracing_subscriber::Registry>()
///     .err()
///     .unwrap();
/// assert_eq!(err.to_string(), "cannot start the sink `watching`: this sink reads the MLLOG file");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SinkStart<'a> {
    rank: u32,
    writes: bool,
    output_file: Option<&'a Path>,
    submission: &'a Submission,
    asks: &'a mut LayerAsks,
    reads_log: bool,
}

impl std::fmt::Debug for SinkStart<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkStart")
            .field("rank", &self.rank)
            .field("writes", &self.writes)
            .field("output_file", &self.output_file)
            .finish_non_exhaustive()
    }
}

impl<'a> SinkStart<'a> {
    pub(crate) fn new(
        rank: u32,
        writes: bool,
        output_file: Option<&'a Path>,
        submission: &'a Submission,
        asks: &'a mut LayerAsks,
    ) -> SinkStart<'a> {
        SinkStart {
            rank,
            writes,
            output_file,
            submission,
            asks,
            reads_log: false,
        }
    }

    /// This process's rank (the launcher's, or [`Ranks::rank`](crate::Ranks::rank)).
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Whether this rank writes the MLLOG log (see
    /// [`Ranks`](crate::Ranks)).
    pub fn writes(&self) -> bool {
        self.writes
    }

    /// The submission metadata, the environment applied.
    pub fn submission(&self) -> &Submission {
        self.submission
    }

    /// The MLLOG file this rank writes (or follows), when the output is a file.
    pub fn output_file(&self) -> Option<&Path> {
        self.output_file
    }

    /// The MLLOG file, for a sink that reads it (an uploader): the sink is then called right
    /// after the file has taken (and flushed) each batch, and after the live checker, instead
    /// of after the other sinks. `None` when the output is not a file.
    pub fn read_log_file(&mut self) -> Option<&'a Path> {
        self.reads_log = true;
        self.output_file
    }

    /// Asks the layer for every counted `train_step` as a pair of trace-only interval
    /// records (`TracedRecord::trace_only`; the MLLOG file and the checker skip them). Each costs
    /// the training thread two records.
    pub fn trace_steps(&mut self) {
        self.asks.trace_steps = true;
    }

    /// Asks the layer for the spans inside `run` whose name `matches` as trace-only interval
    /// records. Several sinks may ask: a span is sent when any of them matches it.
    pub fn trace_spans(&mut self, matches: impl Fn(&str) -> bool + Send + Sync + 'static) {
        let earlier = self.asks.traced_spans.0.take();
        self.asks.traced_spans.0 = Some(match earlier {
            None => Arc::new(matches),
            Some(earlier) => Arc::new(move |name: &str| earlier(name) || matches(name)),
        });
    }

    /// Whether the sink asked for the MLLOG file ([`SinkStart::read_log_file`]).
    pub(crate) fn reads_log(&self) -> bool {
        self.reads_log
    }
}

/// What the sinks asked of the layer when they started.
#[derive(Default)]
pub(crate) struct LayerAsks {
    /// Send counted steps as trace-only interval records.
    pub(crate) trace_steps: bool,
    /// Other spans to send as trace-only records.
    pub(crate) traced_spans: TracedSpans,
}

/// Spans beyond the MLLOG intervals that a sink wants as trace-only records.
#[derive(Clone, Default)]
pub(crate) struct TracedSpans(Option<SpanMatcher>);

type SpanMatcher = Arc<dyn Fn(&str) -> bool + Send + Sync>;

// Read by the layer's OpenTelemetry code only.
#[cfg_attr(not(feature = "otel-sdk"), allow(dead_code))]
impl TracedSpans {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub(crate) fn matches(&self, name: &str) -> bool {
        self.0.as_ref().is_some_and(|m| m(name))
    }
}
