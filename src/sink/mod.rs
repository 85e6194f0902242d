//! Where records go. The pipeline's worker thread hands every record, in order, to each
//! [`Sink`]; sinks never run on the training thread. Each sink is delivered by its
//! [`Delivery`] policy: on the worker itself (the MLLOG file, the live checker), or on its own
//! thread behind its own bounded queue, so that it cannot hold up the MLLOG file.

pub(crate) mod accounting;
mod delivery;
pub(crate) mod isolated;
mod memory;
mod mllog_file;
#[cfg(feature = "nvtx")]
mod nvtx;
#[cfg(feature = "otel-sdk")]
mod otel;
pub(crate) mod plug;
#[cfg(feature = "rpd")]
mod rpd;
mod start;
#[cfg(feature = "object-store")]
mod upload;

// Each optional sink's registration, listed in `crate::registry`.
#[cfg(feature = "nvtx")]
pub(crate) use nvtx::plug as nvtx_plug;
#[cfg(feature = "otel-sdk")]
pub(crate) use otel::plug as otel_plug;
#[cfg(feature = "rpd")]
pub(crate) use rpd::plug as rpd_plug;
#[cfg(feature = "object-store")]
pub(crate) use upload::plug as upload_plug;

pub use accounting::SinkReport;
pub use delivery::Delivery;
pub use memory::{MemoryHandle, MemorySink};
pub use mllog_file::MllogFileSink;
#[cfg(feature = "nvtx")]
pub use nvtx::{NvtxError, NvtxSink, ENV_NVTX, NVTX_DOMAIN};
#[cfg(feature = "otel-sdk")]
pub use otel::{
    Backpressure, OtelConfig, OtelError, OtelHandle, OtelReport, OtelSink, SpanPatterns, ENV_OTEL,
    ENV_OTEL_BACKPRESSURE, ENV_OTEL_QUEUE_SIZE, ENV_OTEL_SPANS, ENV_OTEL_STEP_EVERY,
    ENV_OTEL_TRACE_ID, ENV_OTEL_TRAIN_STEP_RATE, ENV_TRACEPARENT, ENV_TRACESTATE, OTEL_SCOPE,
};
#[cfg(feature = "rpd")]
pub use rpd::{
    sanitize_label, RpdConfig, RpdError, RpdSchema, RpdSink, DEFAULT_LABEL_FIELDS, ENV_RPD_FILE,
    ENV_RPD_SCHEMA,
};
pub use start::SinkStart;
pub(crate) use start::{LayerAsks, TracedSpans};
#[cfg(feature = "object-store")]
pub use upload::{
    RetryPolicy, UploadConfig, UploadError, UploadHandle, UploadReport, UploadSink,
    DEFAULT_IMPORTANT_KEYS, ENV_UPLOAD_DEADLINE_SECS, ENV_UPLOAD_INTERVAL_SECS, ENV_UPLOAD_URL,
};

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::record::TracedRecord;

/// A sink's own report (an `UploadReport`, an `OtelReport`, a profiler's report, ...),
/// carried by the generic [`crate::sink::SinkReport`]; read it with [`Detail::get`] or
/// [`crate::Guard::detail`]. A custom sink makes one through [`SinkStatus`] (see its
/// example).
///
/// ```
/// use tracing_mllog::sink::Detail;
///
/// #[derive(Clone, Debug, PartialEq)]
/// struct Uploaded {
///     bytes: u64,
/// }
///
/// let detail = Detail::new(Uploaded { bytes: 512 });
/// assert_eq!(detail.get::<Uploaded>(), Some(&Uploaded { bytes: 512 }));
/// assert_eq!(detail.get::<String>(), None); // not that sink's report
/// assert_eq!(detail, Detail::new(Uploaded { bytes: 512 })); // equal when they print the same
/// ```
#[derive(Clone)]
pub struct Detail(Arc<dyn DetailValue>);

trait DetailValue: Any + std::fmt::Debug + Send + Sync {
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any + std::fmt::Debug + Send + Sync> DetailValue for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Detail {
    /// Wraps a report.
    pub fn new<T: Any + std::fmt::Debug + Send + Sync>(report: T) -> Detail {
        Detail(Arc::new(report))
    }

    /// The report, if it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        (*self.0).as_any().downcast_ref()
    }
}

impl std::fmt::Debug for Detail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Two details are equal when they print the same (reports are plain data).
impl PartialEq for Detail {
    fn eq(&self, other: &Detail) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || format!("{self:?}") == format!("{other:?}")
    }
}

impl Eq for Detail {}

/// A live view of a sink's own account, read from any thread whenever a report is taken
/// (the sink itself lives on the worker or its own thread).
///
/// A sink that keeps its own report (bytes sent, retries, ...) returns one from
/// [`Sink::status`]; the pipeline asks it for a [`Detail`] whenever a [`crate::Report`] is
/// taken, and [`crate::Guard::detail`] finds it by type:
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::Arc;
/// use tracing_mllog::sink::{Detail, Sink, SinkError, SinkStatus};
/// use tracing_mllog::{mllog, MllogLayer, Output};
/// use tracing_mllog::record::TracedRecord;
/// use tracing_subscriber::prelude::*;
///
/// #[derive(Clone, Debug, PartialEq)]
/// struct Bytes(u64);
///
/// struct Counting(Arc<AtomicU64>);
/// struct CountingStatus(Arc<AtomicU64>);
///
/// impl SinkStatus for CountingStatus {
///     fn detail(&self) -> Detail {
///         Detail::new(Bytes(self.0.load(Ordering::Relaxed)))
///     }
/// }
///
/// impl Sink for Counting {
///     fn name(&self) -> &str {
///         "counting"
///     }
///     fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
///         self.0.fetch_add(record.to_line().len() as u64, Ordering::Relaxed);
///         Ok(())
///     }
///     fn status(&self) -> Option<Arc<dyn SinkStatus>> {
///         Some(Arc::new(CountingStatus(self.0.clone())))
///     }
/// }
///
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(Counting(Arc::new(AtomicU64::new(0))))
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     mllog!("seed", 1);
/// });
/// let report = guard.shutdown();
/// let Bytes(n) = guard.detail::<Bytes>().expect("the sink's own report");
/// assert!(n > ":::MLLOG {}".len() as u64);
/// assert_eq!(report.detail::<Bytes>(), Some(&Bytes(n))); // the same, as the report has it
/// let mine = report.sinks.iter().find(|s| s.name == "counting").unwrap();
/// assert_eq!(mine.detail.as_ref().and_then(|d| d.get::<Bytes>()), Some(&Bytes(n)));
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
pub trait SinkStatus: Send + Sync + 'static {
    /// The sink's report as it stands.
    fn detail(&self) -> Detail;
}

/// `now + timeout`, or the latest representable instant when that overflows
/// (`Duration::MAX` means "no deadline", never a panic).
pub(crate) fn saturating_deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    if let Some(t) = now.checked_add(timeout) {
        return t;
    }
    // Far enough to be "never" and representable on every platform (about 136 years).
    let mut far = Duration::from_secs(u64::from(u32::MAX));
    loop {
        if let Some(t) = now.checked_add(far) {
            return t;
        }
        far /= 2;
    }
}

/// Why a sink could not take a record (counted and reported by the pipeline).
///
/// Returned by [`Sink::write`], [`Sink::flush`] and [`Sink::close`]. The pipeline never
/// propagates it to the training code: it counts it in the sink's [`crate::sink::SinkReport`]
/// (`errors`) and keeps its message as `last_error`; the sink keeps receiving later records.
/// `?` converts an [`std::io::Error`]; anything else is [`SinkError::Other`] in words (see
/// the [`Sink`] example).
///
/// ```
/// use std::io::Write;
/// use tracing_mllog::sink::{Sink, SinkError};
/// use tracing_mllog::{mllog, MllogLayer, Output};
/// use tracing_mllog::record::TracedRecord;
/// use tracing_subscriber::prelude::*;
///
/// /// Writes each key to a pipe whose reader is gone.
/// struct Closed(std::io::PipeWriter);
///
/// impl Sink for Closed {
///     fn name(&self) -> &str {
///         "closed-pipe"
///     }
///     fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
///         if record.key.is_empty() {
///             return Err(SinkError::Other("a record without a key".into()));
///         }
///         writeln!(self.0, "{}", record.key)?; // an `io::Error` becomes `SinkError::Io`
///         Ok(())
///     }
/// }
///
/// let (reader, writer) = std::io::pipe()?;
/// drop(reader);
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(Closed(writer))
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     mllog!("seed", 1); // the training thread never sees the error
///     mllog!("global_batch_size", 8);
/// });
/// let report = guard.shutdown();
/// let sink = report.sinks.iter().find(|s| s.name == "closed-pipe").unwrap();
/// assert_eq!((sink.written, sink.errors), (0, 2));
/// assert!(sink.last_error.as_deref().unwrap().contains("pipe"), "{report}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// An I/O error (file, socket, ...).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Anything else, in words.
    #[error("{0}")]
    Other(String),
}

/// A consumer of the record stream.
///
/// All methods run on the pipeline's worker thread, or, for an isolated sink (see
/// [`Delivery`]), on the sink's own thread, in the same order. A sink that fails keeps
/// receiving later records; each failure is counted in the [`crate::Report`] with its latest
/// message.
///
/// Every sink enters the same way, the crate's own (`RpdSink`, `UploadSink`, `OtelSink`,
/// `NvtxSink`, [`MemorySink`]) and yours: made from its config (or its `from_env`), handed to
/// [`crate::Builder::sink`] (isolated on its own thread) or [`crate::Builder::sink_with`]
/// (choosing its [`Delivery`]), started by [`Sink::start`]. A sink sees every record the
/// MLLOG file gets, in the same order, as a [`TracedRecord`]: the MLLOG
/// [`Record`](crate::Record) (through `Deref`; [`Record::to_line`](crate::Record::to_line)
/// gives the exact `:::MLLOG` line) and what the layer knows beyond the line (interval ids,
/// scope, thread). Only [`Sink::name`] and [`Sink::write`] are required; override
/// [`Sink::start`] to open files or ask the layer for more, [`Sink::flush`] and
/// [`Sink::close`] when the sink buffers.
///
/// A sink must not panic or block for long: an [`Delivery::Inline`] sink holds up the MLLOG
/// file behind it; an isolated one loses the records that no longer fit its queue.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use tracing_mllog::sink::{Delivery, Sink, SinkError};
/// use tracing_mllog::{keys, mllog, MllogLayer, Output};
/// use tracing_mllog::record::TracedRecord;
/// use tracing_subscriber::prelude::*;
///
/// /// Keeps the latest evaluation accuracy; refuses records without a value.
/// struct LastAccuracy(Arc<Mutex<Option<f64>>>);
///
/// impl Sink for LastAccuracy {
///     fn name(&self) -> &str {
///         "last-accuracy"
///     }
///     fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
///         if &*record.key == keys::EVAL_ACCURACY {
///             let v = record.value.as_f64().ok_or_else(|| SinkError::Other("no number".into()))?;
///             *self.0.lock().unwrap() = Some(v);
///         }
///         Ok(())
///     }
/// }
///
/// let accuracy = Arc::new(Mutex::new(None));
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink_with(LastAccuracy(accuracy.clone()), Delivery::Inline)
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     mllog!(keys::EVAL_ACCURACY, 0.71, samples_count = 512);
///     mllog!(keys::EVAL_ACCURACY, 0.93, samples_count = 1024);
///     mllog!(keys::EVAL_ACCURACY, "n/a"); // counted as an error of this sink
/// });
/// let report = guard.shutdown();
/// assert_eq!(*accuracy.lock().unwrap(), Some(0.93));
/// let mine = report.sinks.iter().find(|s| s.name == "last-accuracy").unwrap();
/// assert_eq!((mine.errors, mine.last_error.as_deref()), (1, Some("no number")));
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
pub trait Sink: Send + 'static {
    /// A short name for reports (`"mllog-file"`, `"memory"`, ...).
    fn name(&self) -> &str;

    /// Takes one record.
    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError>;

    /// Called once by [`crate::Builder::build`], on the thread that builds, before the first
    /// record: what the build knows of the run and what the sink may ask of the layer (see
    /// [`SinkStart`]). A sink that opens a file or a connection does it here, so that it is
    /// opened only where it runs and a bad setting fails the build. An error fails the build
    /// ([`crate::Error::Start`], naming the sink, its error as the source) before the MLLOG
    /// file is opened.
    fn start(
        &mut self,
        start: &mut SinkStart<'_>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let _ = start;
        Ok(())
    }

    /// Makes everything written so far durable or visible. Called when the channel runs dry,
    /// on [`crate::Guard::flush`] and before shutdown.
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }

    /// Last call, at shutdown: finish within `deadline` where possible.
    fn close(&mut self, deadline: Instant) -> Result<(), SinkError> {
        let _ = deadline;
        self.flush()
    }

    /// The sink's own report beyond the pipeline's counts, if it keeps one: asked once, when
    /// the pipeline starts; its [`SinkStatus::detail`] goes into every
    /// [`crate::sink::SinkReport`] of this sink.
    fn status(&self) -> Option<Arc<dyn SinkStatus>> {
        None
    }
}

impl Sink for Box<dyn Sink> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
        (**self).write(record)
    }
    fn start(
        &mut self,
        start: &mut SinkStart<'_>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        (**self).start(start)
    }
    fn flush(&mut self) -> Result<(), SinkError> {
        (**self).flush()
    }
    fn close(&mut self, deadline: Instant) -> Result<(), SinkError> {
        (**self).close(deadline)
    }
    fn status(&self) -> Option<Arc<dyn SinkStatus>> {
        (**self).status()
    }
}
