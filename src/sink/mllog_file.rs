use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::{Sink, SinkError};
use crate::record::Record;

/// Writes `:::MLLOG` lines to a file, stdout or any writer, one record per line.
///
/// Buffered; the pipeline flushes it whenever the channel runs dry, so the file is current
/// within a moment of each record (for `tail -f` and the object-store uploader).
pub struct MllogFileSink {
    out: BufWriter<Box<dyn Write + Send>>,
    path: Option<PathBuf>,
    line: String,
}

impl MllogFileSink {
    /// Opens `path` (creating parent directories), truncating it unless `append` is set.
    ///
    /// Fails now, not at the first record, when the path cannot be written.
    pub fn create(path: impl AsRef<Path>, append: bool) -> std::io::Result<MllogFileSink> {
        let path = path.as_ref();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let file: File = OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(path)?;
        let mut sink = MllogFileSink::writer(file);
        sink.path = Some(path.to_path_buf());
        Ok(sink)
    }

    /// Writes to standard output.
    pub fn stdout() -> MllogFileSink {
        MllogFileSink::writer(std::io::stdout())
    }

    /// Writes to any writer.
    pub fn writer(w: impl Write + Send + 'static) -> MllogFileSink {
        MllogFileSink {
            out: BufWriter::with_capacity(64 * 1024, Box::new(w)),
            path: None,
            line: String::with_capacity(512),
        }
    }

    /// The file written, if this sink writes a file.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

impl Sink for MllogFileSink {
    fn name(&self) -> &str {
        if self.path.is_some() {
            "mllog-file"
        } else {
            "mllog-stream"
        }
    }

    fn write(&mut self, record: &Record) -> Result<(), SinkError> {
        if record.trace_only {
            return Ok(());
        }
        self.line.clear();
        record.encode(&mut self.line);
        self.line.push('\n');
        self.out.write_all(self.line.as_bytes())?;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        self.out.flush()?;
        Ok(())
    }
}
