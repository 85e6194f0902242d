//! [`Delivery`]: how the pipeline's worker hands records to one sink, the policy the
//! pipeline applies (the sinks know nothing of it).

/// How the pipeline's worker hands records to one sink: the per-sink policy that decides
/// which sinks may hold up the MLLOG file (and, once the record queue is full, the training
/// thread) and which may lose records instead.
///
/// Defaults per sink kind: the MLLOG output and the live compliance checker are always
/// [`Delivery::Inline`] (a missing line makes the log non-compliant); the RPD, OpenTelemetry
/// and object-store sinks and every sink added with [`crate::Builder::sink`] are
/// [`Delivery::Isolated`] with [`Delivery::DEFAULT_CAPACITY`]. Choose otherwise with
/// [`crate::Builder::sink_with`] and [`crate::Builder::sink_delivery`].
///
/// An isolated sink that stalls loses records, counted with the reason, while the MLLOG
/// stream keeps every one:
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use tracing_mllog::sink::{Delivery, Sink, SinkError};
/// use tracing_mllog::{mllog, MllogLayer, Output};
/// use tracing_mllog::record::TracedRecord;
/// use tracing_subscriber::prelude::*;
///
/// /// A sink that stalls while `gate` is held (a collector that stopped answering, say).
/// struct Stalled(Arc<Mutex<()>>);
///
/// impl Sink for Stalled {
///     fn name(&self) -> &str {
///         "stalled"
///     }
///     fn write(&mut self, _: &TracedRecord) -> Result<(), SinkError> {
///         drop(self.0.lock().unwrap());
///         Ok(())
///     }
/// }
///
/// let gate = Arc::new(Mutex::new(()));
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink_with(Stalled(gate.clone()), Delivery::Isolated { capacity: 4 })
///     .build()?;
/// let held = gate.lock().unwrap();
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     for step in 0..50u64 {
///         mllog!("train_loss", 0.5, step);
///     }
/// });
/// // Every record has reached the worker, which handed what fit to the stalled sink's queue;
/// // the sink itself cannot flush while it is stalled.
/// assert!(!guard.flush(std::time::Duration::from_millis(200)));
/// drop(held);
/// let report = guard.shutdown();
/// assert_eq!(report.records, 50); // the worker (and the MLLOG file) got every record
/// let stalled = report.sinks.iter().find(|s| s.name == "stalled").unwrap();
/// assert!(stalled.dropped > 0, "{report}");
/// assert_eq!(stalled.written + stalled.dropped, 50, "{report}");
/// assert!(stalled.drop_reason.as_deref().unwrap().contains("queue full"), "{report}");
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Delivery {
    /// On the worker thread, in order with the MLLOG file: lossless, but a sink that stalls
    /// delays the MLLOG file behind it and, once the record queue is full, the training
    /// thread (with the default [`crate::Overflow::Block`]).
    Inline,
    /// On the sink's own thread, fed through a bounded queue of `capacity` records (copies).
    /// A sink that falls behind or stalls catches up later, or, once its queue is full, loses
    /// the records that do not fit: they are counted in its [`crate::sink::SinkReport`] with the
    /// reason (e.g. how long the sink had been blocked in a write). It never delays the
    /// MLLOG file or the training thread.
    Isolated {
        /// Records the queue holds (at least 1).
        capacity: usize,
    },
}

impl Delivery {
    /// The default queue of an isolated sink, the size of the pipeline's own record queue.
    pub const DEFAULT_CAPACITY: usize = 4096;

    /// [`Delivery::Isolated`] with [`Delivery::DEFAULT_CAPACITY`].
    pub const fn isolated() -> Delivery {
        Delivery::Isolated {
            capacity: Self::DEFAULT_CAPACITY,
        }
    }
}

impl Default for Delivery {
    fn default() -> Self {
        Delivery::isolated()
    }
}
