use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{Sink, SinkError};
use crate::record::TracedRecord;

/// Writes `:::MLLOG` lines to a file, stdout or any writer, one record per line.
///
/// It is the sink behind [`crate::Builder::output`] ([`crate::Output`]); build one yourself for a second copy of the log (add it with
/// [`crate::Builder::sink`]) or to write [`Record`](crate::Record)s that did not come from
/// `tracing`:
///
/// ```
/// use tracing_mllog::sink::{MllogFileSink, Sink};
/// use tracing_mllog::Record;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("logs/copy.txt"); // parent directories are created
/// let mut sink = MllogFileSink::create(&path, false)?;
/// sink.write(&Record::event("seed", 42).at_millis(1_700_000_000_000).into())?;
/// sink.flush()?;
/// let text = std::fs::read_to_string(&path)?;
/// assert!(text.starts_with(r#":::MLLOG {"namespace": "", "time_ms": 1700000000000"#));
/// assert!(text.contains(r#""key": "seed", "value": 42"#));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
///
/// Each line goes to the operating system with its own `write(2)` calls before
/// [`Sink::write`] returns, so the pipeline's "written" count is the number of lines the OS
/// has taken (the file is current for `tail -f` and the object-store uploader, and a crash
/// loses nothing already counted). A short write is continued; a line that cannot be written
/// completely is an error with the reason, is not counted, and in a file its partial bytes
/// are removed again (truncated away), so the file holds complete lines only. Standard
/// output is written with `write(2)` on descriptor 1 too: a closed or broken stdout is an
/// error, not a silent success.
pub struct MllogFileSink {
    out: Out,
    path: Option<PathBuf>,
    line: String,
}

impl std::fmt::Debug for MllogFileSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MllogFileSink")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

enum Out {
    File(File),
    Stdout,
    Writer(Box<dyn Write + Send>),
}

/// Standard output by its descriptor. Rust's `Stdout` reports success when descriptor 1 is
/// closed (EBADF), which would count lines that went nowhere.
struct RawStdout;

impl Write for RawStdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes; fd 1 is only written, never closed.
        let n = unsafe { libc::write(1, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl MllogFileSink {
    /// Opens `path` (creating parent directories), truncating it unless `append` is set.
    ///
    /// Fails now, not at the first record, when the path cannot be written.
    pub fn create(path: impl AsRef<Path>, append: bool) -> std::io::Result<MllogFileSink> {
        let path = path.as_ref();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| file_in_the_way(parent).unwrap_or(e))?;
        }
        let file: File = OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(path)?;
        Ok(MllogFileSink {
            out: Out::File(file),
            path: Some(path.to_path_buf()),
            line: String::with_capacity(512),
        })
    }

    /// Writes to standard output (descriptor 1; see the type's documentation).
    pub fn stdout() -> MllogFileSink {
        MllogFileSink {
            out: Out::Stdout,
            path: None,
            line: String::with_capacity(512),
        }
    }

    /// Writes to any writer: each line is handed over with `write` calls before
    /// [`Sink::write`] returns; [`Sink::flush`] flushes the writer. A buffering writer makes
    /// "written" mean "in its buffer".
    pub fn writer(w: impl Write + Send + 'static) -> MllogFileSink {
        MllogFileSink {
            out: Out::Writer(Box::new(w)),
            path: None,
            line: String::with_capacity(512),
        }
    }

    /// The file written, if this sink writes a file.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn target(&self) -> String {
        match (&self.out, &self.path) {
            (Out::File(_), Some(p)) => p.display().to_string(),
            (Out::File(_), None) => "the MLLOG file".into(),
            (Out::Stdout, _) => "stdout".into(),
            (Out::Writer(_), _) => "the MLLOG writer".into(),
        }
    }

    /// Writes all of `self.line`, continuing short writes and retrying interrupted ones.
    /// Returns how many bytes were taken and the error that stopped it, if any.
    fn write_line(&mut self) -> (usize, Option<std::io::Error>) {
        let bytes = self.line.as_bytes();
        // Holding Rust's stdout lock (after pushing out what the application buffered in it)
        // keeps our lines and the application's `println!` output from interleaving.
        let _stdout = matches!(self.out, Out::Stdout).then(|| {
            let mut lock = std::io::stdout().lock();
            let _ = lock.flush();
            lock
        });
        let w: &mut dyn Write = match &mut self.out {
            Out::File(f) => f,
            Out::Stdout => &mut RawStdout,
            Out::Writer(w) => w,
        };
        let mut done = 0;
        while done < bytes.len() {
            match w.write(&bytes[done..]) {
                Ok(0) => {
                    let e = std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        "the output took no bytes",
                    );
                    return (done, Some(e));
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return (done, Some(e)),
            }
        }
        (done, None)
    }

    /// Removes the `partial` bytes of a torn last line from the file.
    fn remove_tail(file: &mut File, partial: usize) -> std::io::Result<()> {
        let len = file.metadata()?.len();
        let keep = len.saturating_sub(partial as u64);
        file.set_len(keep)?;
        // Without append mode the cursor would stay past the end and leave a hole.
        file.seek(SeekFrom::Start(keep))?;
        Ok(())
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

    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
        if record.trace_only {
            return Ok(());
        }
        self.line.clear();
        record.encode(&mut self.line);
        self.line.push('\n');
        let (done, error) = self.write_line();
        let Some(e) = error else {
            return Ok(());
        };
        let total = self.line.len();
        let target = self.target();
        let tail = if done == 0 {
            "the line was not written".to_string()
        } else if let Out::File(f) = &mut self.out {
            match MllogFileSink::remove_tail(f, done) {
                Ok(()) => format!(
                    "the line was not written ({done} of {total} bytes taken, then removed)"
                ),
                Err(e2) => format!(
                    "the line is torn: {done} of {total} bytes written and not removable ({e2})"
                ),
            }
        } else {
            format!("the line is torn: {done} of {total} bytes written")
        };
        Err(SinkError::Other(format!("writing {target}: {e}; {tail}")))
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        if let Out::Writer(w) = &mut self.out {
            w.flush()
                .map_err(|e| SinkError::Other(format!("flushing the MLLOG writer: {e}")))?;
        }
        Ok(())
    }
}

/// `create_dir_all` fails with "File exists" when a component of the path is a regular file;
/// the error names that file instead.
fn file_in_the_way(dir: &Path) -> Option<std::io::Error> {
    dir.ancestors().find(|a| a.is_file()).map(|file| {
        std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            format!("{} is a file, not a directory", file.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Takes at most `chunk` bytes per call and fails after `limit` bytes in all.
    struct Stingy {
        got: Arc<Mutex<Vec<u8>>>,
        chunk: usize,
        limit: usize,
        interrupt_next: bool,
    }

    impl Write for Stingy {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if std::mem::take(&mut self.interrupt_next) {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            self.interrupt_next = true;
            let mut got = self.got.lock().unwrap();
            let room = self.limit - got.len();
            if room == 0 {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let n = buf.len().min(self.chunk).min(room);
            got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn short_and_interrupted_writes_are_continued_and_failures_reported() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let mut sink = MllogFileSink::writer(Stingy {
            got: got.clone(),
            chunk: 7,
            limit: 400,
            interrupt_next: true,
        });
        let record = TracedRecord::from(crate::record::Record::event("seed", 1));
        let mut ok = 0;
        let mut errors = Vec::new();
        for _ in 0..8 {
            match sink.write(&record) {
                Ok(()) => ok += 1,
                Err(e) => errors.push(e.to_string()),
            }
        }
        let got = got.lock().unwrap().clone();
        let text = String::from_utf8(got).unwrap();
        let line_len = text.find('\n').unwrap() + 1;
        assert_eq!(ok, 400 / line_len, "{text}");
        assert!((1..8).contains(&ok), "{text}");
        assert!(text.starts_with(":::MLLOG "), "{text}");
        // The line that hit the limit is reported torn (a writer cannot take bytes back), the
        // ones after it as not written; the reason is in every message.
        assert_eq!(errors.len(), 8 - ok, "{errors:?}");
        assert!(errors[0].contains("torn"), "{errors:?}");
        assert!(errors[1].contains("not written"), "{errors:?}");
        assert!(
            errors.iter().all(|e| e.contains("No space left")),
            "{errors:?}"
        );
    }
}
