//! [`Pipeline`]: how records travel from the training threads to the sinks, as one value the
//! builder takes whole.

use std::time::Duration;

use super::Overflow;

/// The pipeline's settings: how many records may wait for the worker, how long one waits
/// before the worker hands it on, what a full queue does, and how long the guard waits for
/// the sinks at shutdown. [`crate::Builder::pipeline`] takes them; the defaults suit a
/// training run (lossless, a few milliseconds' delay).
///
/// ```
/// use std::time::Duration;
/// use tracing_mllog::{MllogLayer, Output, Overflow, Pipeline};
///
/// let (_layer, _guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .pipeline(
///         Pipeline::default()
///             .capacity(16_384)
///             .overflow(Overflow::DropAfter(Duration::from_millis(5))),
///     )
///     .build::<tracing_subscriber::Registry>()?;
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pipeline {
    pub(crate) capacity: usize,
    pub(crate) max_delay: Duration,
    pub(crate) overflow: Overflow,
    pub(crate) shutdown_timeout: Duration,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline {
            capacity: 4096,
            max_delay: Duration::from_millis(2),
            overflow: Overflow::Block,
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

impl Pipeline {
    /// Records that may wait for the worker (default 4096; each slot holds one preallocated
    /// record of a few hundred bytes).
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The longest a record waits before the worker hands it to the sinks (default 2 ms;
    /// `MLLOG_MAX_DELAY_MS`). A sleeping worker is not woken for every record, because the
    /// wake-up is a system call on the training thread that costs more than the rest of the
    /// record: the worker drains the queue on this timer, and is woken at once only for
    /// interval records (`run_start` is checked immediately), when the queue is a quarter
    /// full, after 50 empty timer rounds (it then stops polling), and by
    /// [`crate::Guard::flush`] / shutdown. `Duration::ZERO` wakes it for every record (lowest
    /// latency, highest cost).
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.max_delay = delay;
        self
    }

    /// What to do when the queue is full (default [`Overflow::Block`]: wait, lossless).
    pub fn overflow(mut self, overflow: Overflow) -> Self {
        self.overflow = overflow;
        self
    }

    /// How long the guard waits for the sinks at shutdown (default 10 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }
}
