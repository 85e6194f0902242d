//! A progress bar on stderr (indicatif) over the bytes of all inputs, for work that takes
//! more than a second: many files or big logs. Nothing is drawn before that second (most runs
//! end well within it), nor when stderr is not a terminal, nor under `MLLOG_PROGRESS=0`.
//! `MLLOG_PROGRESS_DELAY_MS` changes the delay (tests use 0).

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bar shared by the readers of one command.
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
    start: Instant,
    delay: Duration,
    enabled: bool,
    shown: Arc<AtomicBool>,
}

impl Progress {
    /// A bar over the sizes of `files` (standard input and unreadable files count 0).
    pub fn new(files: &[PathBuf]) -> Progress {
        let total = files
            .iter()
            .filter(|p| p.as_os_str() != "-")
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed}] [{wide_bar}] {binary_bytes}/{binary_total_bytes} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let delay = std::env::var("MLLOG_PROGRESS_DELAY_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(Duration::from_secs(1), Duration::from_millis);
        Progress {
            bar,
            start: Instant::now(),
            delay,
            enabled: std::env::var("MLLOG_PROGRESS").as_deref() != Ok("0")
                && std::io::stderr().is_terminal(),
            shown: Arc::new(AtomicBool::new(false)),
        }
    }

    /// `inner` read through the bar, which names `path` while it is read.
    pub fn reader<R: Read>(&self, path: &Path, inner: R) -> ProgressReader<R> {
        self.bar.set_message(path.display().to_string());
        ProgressReader {
            inner,
            progress: self.clone(),
        }
    }

    /// Names `path` as the work in hand, for work that does not read through [`reader`](Self::reader).
    pub fn working_on(&self, path: &Path) {
        // Shows the bar first (once the delay has passed) so that the message is drawn.
        self.advance(0);
        self.bar.set_message(path.display().to_string());
    }

    /// Counts `n` bytes as done, for work that does not read through [`reader`](Self::reader).
    pub fn done(&self, n: u64) {
        self.advance(n);
    }

    /// Counts `files` as done, by their sizes (a file that is gone counts nothing).
    pub fn done_files(&self, files: &[PathBuf]) {
        self.done(
            files
                .iter()
                .filter_map(|f| std::fs::metadata(f).ok())
                .map(|m| m.len())
                .sum(),
        );
    }

    fn advance(&self, n: u64) {
        self.bar.inc(n);
        if self.enabled && !self.shown.load(Ordering::Relaxed) && self.start.elapsed() >= self.delay
        {
            self.shown.store(true, Ordering::Relaxed);
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    /// Runs `f` (which prints) with the bar out of the way; it is redrawn after.
    pub fn suspend<T>(&self, f: impl FnOnce() -> T) -> T {
        self.bar.suspend(f)
    }

    /// Clears the bar (before the results are printed).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// A reader that advances the bar.
pub struct ProgressReader<R> {
    inner: R,
    progress: Progress,
}

impl<R: Read> Read for ProgressReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}
