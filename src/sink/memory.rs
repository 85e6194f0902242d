use std::sync::{Arc, Mutex};

use super::{Sink, SinkError};
use crate::record::Record;

/// Keeps every record in memory; for tests and in-process use (summaries, dashboards).
pub struct MemorySink {
    records: Arc<Mutex<Vec<Record>>>,
}

/// Reads what a [`MemorySink`] received, from any thread.
#[derive(Clone)]
pub struct MemoryHandle {
    records: Arc<Mutex<Vec<Record>>>,
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
    pub fn records(&self) -> Vec<Record> {
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
        records.iter().map(Record::to_line).collect()
    }
}

impl Sink for MemorySink {
    fn name(&self) -> &str {
        "memory"
    }

    fn write(&mut self, record: &Record) -> Result<(), SinkError> {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record.clone());
        Ok(())
    }
}
