use std::sync::{Arc, Mutex};

use super::{Sink, SinkError};
use crate::record::TracedRecord;

/// Keeps every record in memory; for tests and in-process use (summaries, dashboards).
///
/// [`MemorySink::new`] returns the sink, to give to [`crate::Builder::sink`], and a
/// [`MemoryHandle`] that reads what it received from any thread, as [`TracedRecord`]s, keys or
/// `:::MLLOG` lines. Records are kept until the handle and the sink are dropped: meant for
/// tests and short runs, not for a week of training steps.
///
/// ```
/// use tracing_mllog::{keys, mllog, sink::MemorySink, MllogLayer};
/// use tracing_subscriber::prelude::*;
/// use tracing_mllog::Output;
///
/// let (sink, handle) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(sink)
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     mllog!(keys::SEED, 42);
/// });
/// guard.shutdown(); // everything received is in the handle
/// assert_eq!(handle.keys(), ["seed"]);
/// assert_eq!(handle.records()[0].value.as_i128(), Some(42));
/// assert!(handle.lines()[0].starts_with(":::MLLOG {"));
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Debug)]
pub struct MemorySink {
    records: Arc<Mutex<Vec<TracedRecord>>>,
}

/// Reads what a [`MemorySink`] received, from any thread (it is `Clone`; see the
/// [`MemorySink`] example). Each call returns a copy of the records so far.
///
/// It can be read while the run goes on, e.g. after [`crate::Guard::flush`]:
///
/// ```
/// use std::time::Duration;
/// use tracing_mllog::{keys, mllog, sink::MemorySink, MllogLayer};
/// use tracing_subscriber::prelude::*;
/// use tracing_mllog::Output;
///
/// let (sink, handle) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(sink)
///     .build()?;
/// let subscriber = tracing_subscriber::registry().with(layer);
/// tracing::subscriber::with_default(subscriber, || {
///     mllog!(keys::EVAL_ACCURACY, 0.71, epoch_num = 1);
///     assert!(guard.flush(Duration::from_secs(10)));
///     let reader = handle.clone();
///     let seen = std::thread::spawn(move || reader.keys()).join().unwrap();
///     assert_eq!(seen, ["eval_accuracy"]);
///     mllog!(keys::EVAL_ACCURACY, 0.75, epoch_num = 2);
/// });
/// guard.shutdown();
/// let last = handle.records().pop().unwrap();
/// assert_eq!(last.value.as_f64(), Some(0.75));
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MemoryHandle {
    records: Arc<Mutex<Vec<TracedRecord>>>,
}

impl MemorySink {
    /// A sink and the handle that reads it.
    pub fn new() -> (MemorySink, MemoryHandle) {
        let records = Arc::new(Mutex::new(Vec::new()));
        (
            MemorySink {
                records: records.clone(),
            },
            MemoryHandle { records },
        )
    }
}

impl MemoryHandle {
    /// A copy of the records received so far.
    pub fn records(&self) -> Vec<TracedRecord> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The keys received so far, in order.
    pub fn keys(&self) -> Vec<String> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records.iter().map(|r| r.key.to_string()).collect()
    }

    /// The `:::MLLOG` lines of the records received so far.
    pub fn lines(&self) -> Vec<String> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records.iter().map(|r| r.to_line()).collect()
    }
}

impl Sink for MemorySink {
    fn name(&self) -> &str {
        "memory"
    }

    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record.clone());
        Ok(())
    }
}
