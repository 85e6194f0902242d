//! [`RecordFeed`]: records made outside the layer, into the pipeline.

use super::RecordSender;
use crate::record::{Record, TracedRecord};

/// The sending side of a pipeline started by [`crate::Builder::build_feed`]: pushes records
/// that were made elsewhere (parsed from a log another process writes) to the sinks, in order,
/// each as it is (its time is not stamped again). A full queue makes [`RecordFeed::push`] wait,
/// as it makes a training thread wait with the default [`crate::Overflow::Block`]; the sinks
/// that cannot hold the MLLOG file up (upload, OTel, RPD) lose records on their own queues
/// instead, counted in the [`crate::Report`]. The [`crate::Guard`] that came with it flushes
/// and ends the pipeline. See [`crate::Builder::build_feed`] for an example.
pub struct RecordFeed {
    pipeline: RecordSender,
}

impl RecordFeed {
    pub(crate) fn new(pipeline: RecordSender) -> RecordFeed {
        RecordFeed { pipeline }
    }

    /// Whether any sink takes the records. Without one a caller need not push at all: the
    /// records it parsed would only cross to the worker thread to be freed there.
    pub fn has_sinks(&self) -> bool {
        !self.pipeline.queue.counters.sinks.is_empty()
    }

    /// Hands `record` to the worker (after the guard's shutdown it is counted as dropped).
    pub fn push(&self, record: Record) {
        let mut slot = self.pipeline.record();
        slot.traced = TracedRecord::from(record);
        self.pipeline.push(slot);
    }
}

impl std::fmt::Debug for RecordFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecordFeed")
    }
}
