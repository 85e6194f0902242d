//! A progress bar on stderr for long files.
//!
//! Nothing is drawn during the first second (most logs are read well within it); after that
//! the bar is redrawn at most ten times a second, and cleared when the file is done. It draws
//! only when stderr is a terminal, unless `MLLOG_PROGRESS=1` forces it (`MLLOG_PROGRESS=0`
//! turns it off).

use std::io::{IsTerminal, Read, Write};
use std::time::{Duration, Instant};

/// Delay before the bar first appears.
pub const DELAY: Duration = Duration::from_secs(1);

/// A byte-count progress bar for one file.
#[derive(Debug)]
pub struct Progress {
    label: String,
    total: u64,
    done: u64,
    start: Instant,
    last_draw: Option<Instant>,
    enabled: bool,
    drawn: bool,
}

impl Progress {
    /// A bar for `label` (usually the path) over `total` bytes (0 when unknown).
    pub fn new(label: &str, total: u64) -> Progress {
        let enabled = match std::env::var("MLLOG_PROGRESS").as_deref() {
            Ok("1") => true,
            Ok("0") => false,
            _ => std::io::stderr().is_terminal(),
        };
        Progress {
            label: label.to_string(),
            total,
            done: 0,
            start: Instant::now(),
            last_draw: None,
            enabled,
            drawn: false,
        }
    }

    /// Adds `n` bytes done; redraws when due.
    pub fn advance(&mut self, n: u64) {
        self.done += n;
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.start) < DELAY {
            return;
        }
        if self
            .last_draw
            .is_some_and(|t| now.duration_since(t) < Duration::from_millis(100))
        {
            return;
        }
        self.last_draw = Some(now);
        self.draw();
    }

    /// Whether the bar has been drawn (the file took more than [`DELAY`]).
    pub fn was_drawn(&self) -> bool {
        self.drawn
    }

    /// The bar line (without `\r`), e.g. `result_0.txt [#####     ] 52% 3.1/6.0 MB`.
    pub fn line(&self) -> String {
        const WIDTH: usize = 30;
        let frac = if self.total > 0 {
            (self.done as f64 / self.total as f64).min(1.0)
        } else {
            0.0
        };
        let filled = (frac * WIDTH as f64).round() as usize;
        let mut label = self.label.clone();
        if label.chars().count() > 40 {
            let tail: String = label.chars().rev().take(39).collect();
            label = format!("…{}", tail.chars().rev().collect::<String>());
        }
        format!(
            "{label} [{}{}] {:3.0}% {:.1}/{:.1} MB",
            "#".repeat(filled),
            " ".repeat(WIDTH - filled),
            frac * 100.0,
            self.done as f64 / 1e6,
            self.total as f64 / 1e6
        )
    }

    fn draw(&mut self) {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{}\x1b[K", self.line());
        let _ = err.flush();
        self.drawn = true;
    }

    /// Clears the bar if it was drawn.
    pub fn finish(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A reader that reports the bytes it reads to a [`Progress`].
#[derive(Debug)]
pub struct ProgressReader<R> {
    inner: R,
    progress: Progress,
}

impl<R: Read> ProgressReader<R> {
    /// Wraps `inner`, reporting to a bar labelled `label` over `total` bytes.
    pub fn new(inner: R, label: &str, total: u64) -> ProgressReader<R> {
        ProgressReader {
            inner,
            progress: Progress::new(label, total),
        }
    }
}

impl<R: Read> Read for ProgressReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}
