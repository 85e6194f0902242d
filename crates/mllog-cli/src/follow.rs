//! Following a log that another process is writing: the byte source of `mllog watch`.
//!
//! [`Follow`] is a [`Read`] over a file that may not exist yet, grows, and may be truncated or
//! replaced by a relaunch, or over standard input. It returns end of input only when the watch
//! should end (see [`Ending`]), so a line reader on top of it (the parser `mllog check` uses)
//! keeps an incomplete last line until its newline arrives. A truncation or a replacement is
//! the error [`Restarted`], after which [`Follow::restart`] reads the new file from its start.
//!
//! The file is polled (its length and inode, every [`Controls::poll`]) rather than watched with
//! inotify: polling works the same on network file systems (NFS, Lustre, GPFS) where a job's
//! results usually live and where inotify sees no writes made on other nodes, and a poll every
//! 50 ms costs nothing next to a training step.
//!
//! ```
//! use std::io::Read;
//! use std::time::Duration;
//! use mllog_cli::follow::{Controls, Follow, Source};
//!
//! let dir = std::env::temp_dir().join(format!("follow-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let path = dir.join("log.txt");
//! std::fs::write(&path, "a line\n")?;
//! let controls = Controls { timeout: Some(Duration::from_millis(200)), ..Controls::default() };
//! let mut follow = Follow::new(Source::File(path), controls, Box::new(|_| false));
//! let mut text = String::new();
//! follow.read_to_string(&mut text)?; // ends at the timeout, with what was written
//! assert_eq!(text, "a line\n");
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What is followed.
#[derive(Clone, Debug)]
pub enum Source {
    /// A file, by path: waited for, re-opened when replaced.
    File(PathBuf),
    /// Standard input, read on a thread of its own so that a signal or a dead writer is
    /// noticed while no byte arrives.
    Stdin,
}

/// When to stop waiting for more input. Every condition first reads what is already there.
#[derive(Clone, Debug)]
pub struct Controls {
    /// Set (by a signal handler) to end the watch.
    pub stop: Arc<AtomicBool>,
    /// The writer's process: the watch ends once it has exited.
    pub pid: Option<i32>,
    /// Ends the watch this long after it started.
    pub timeout: Option<Duration>,
    /// How often the file is looked at when nothing new was read.
    pub poll: Duration,
}

impl Default for Controls {
    fn default() -> Controls {
        Controls {
            stop: Arc::default(),
            pid: None,
            timeout: None,
            poll: Duration::from_millis(50),
        }
    }
}

/// Why the input ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Standard input reached its end.
    EndOfInput,
    /// The writer process (`--pid`) exited.
    WriterExited,
    /// SIGTERM or SIGINT.
    Signal,
    /// `--timeout` passed.
    Timeout,
    /// The idle callback asked to end (the quiet period after `run_stop`, `--fail-fast`).
    Asked,
}

/// The file was truncated or replaced: a new run writes it from its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Restarted {
    /// Shorter than what was read (opened again with `O_TRUNC`).
    #[error("truncated")]
    Truncated,
    /// Another file now has the path (removed and created again, or renamed over it).
    #[error("replaced by a new file")]
    Replaced,
}

impl Restarted {
    /// The [`Restarted`] inside an I/O error, if that is what it is.
    pub fn of(e: &std::io::Error) -> Option<Restarted> {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<Restarted>())
            .copied()
    }
}

/// Called when no new byte is there, with how long the input has been quiet; `true` ends the
/// watch (after one more read).
pub type OnIdle = Box<dyn FnMut(Duration) -> bool>;

/// Chunks read from standard input by its thread; bounded, so a fast writer waits for the
/// watcher rather than growing memory.
const STDIN_CHUNKS: usize = 8;
const CHUNK: usize = 1 << 16;

enum Open {
    /// The file does not exist yet.
    Waiting,
    File {
        file: File,
        ino: u64,
        dev: u64,
    },
    Stdin {
        rx: Receiver<std::io::Result<Vec<u8>>>,
        chunk: Vec<u8>,
        at: usize,
    },
    Closed,
}

/// A [`Read`] over a log being written; see the module documentation.
pub struct Follow {
    source: Source,
    controls: Controls,
    on_idle: OnIdle,
    open: Open,
    /// Bytes read from the current file.
    pos: u64,
    started: Instant,
    last_data: Instant,
    /// Set once an ending condition held: read what is there, then end.
    ending: Option<Ending>,
    ended: Option<Ending>,
    copy: Option<File>,
    said_waiting: bool,
}

impl std::fmt::Debug for Follow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follow")
            .field("pos", &self.pos)
            .field("ended", &self.ended.is_some())
            .finish_non_exhaustive()
    }
}

impl Follow {
    /// Follows `source`; `on_idle` is asked, whenever nothing new is there, whether to end.
    pub fn new(source: Source, controls: Controls, on_idle: OnIdle) -> Follow {
        let open = match &source {
            Source::File(_) => Open::Waiting,
            Source::Stdin => {
                let (tx, rx) = std::sync::mpsc::sync_channel(STDIN_CHUNKS);
                std::thread::spawn(move || read_stdin(tx));
                Open::Stdin {
                    rx,
                    chunk: Vec::new(),
                    at: 0,
                }
            }
        };
        let now = Instant::now();
        Follow {
            source,
            controls,
            on_idle,
            open,
            pos: 0,
            started: now,
            last_data: now,
            ending: None,
            ended: None,
            copy: None,
            said_waiting: false,
        }
    }

    /// Also writes every byte read to `copy` (truncated again at a restart): a local file
    /// identical to what was read, for standard input.
    pub fn with_copy(mut self, copy: File) -> Follow {
        self.copy = Some(copy);
        self
    }

    /// Why the input ended, once it has.
    pub fn ended(&self) -> Option<Ending> {
        self.ended
    }

    /// Bytes read from the current file (or standard input).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// After [`Restarted`]: reads the file at the path from its start.
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.open = Open::Waiting;
        self.pos = 0;
        if let Some(c) = &mut self.copy {
            use std::io::Seek;
            c.set_len(0)?;
            c.seek(std::io::SeekFrom::Start(0))?;
        }
        Ok(())
    }

    /// Whether an ending condition other than the idle callback holds now.
    fn must_end(&self) -> Option<Ending> {
        if self.controls.stop.load(Ordering::Relaxed) {
            return Some(Ending::Signal);
        }
        if let Some(t) = self.controls.timeout
            && self.started.elapsed() >= t
        {
            return Some(Ending::Timeout);
        }
        if let Some(pid) = self.controls.pid
            && !alive(pid)
        {
            return Some(Ending::WriterExited);
        }
        None
    }

    /// One attempt at reading; `Ok(None)` when nothing is there now.
    fn try_read(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        loop {
            match &mut self.open {
                Open::Closed => return Ok(Some(0)),
                Open::Waiting => {
                    let Source::File(path) = &self.source else {
                        return Ok(Some(0));
                    };
                    match File::open(path) {
                        Ok(file) => {
                            let meta = file.metadata()?;
                            self.open = Open::File {
                                file,
                                ino: meta.ino(),
                                dev: meta.dev(),
                            };
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            if !self.said_waiting {
                                self.said_waiting = true;
                                eprintln!(
                                    "mllog watch: waiting for {} to be created",
                                    path.display()
                                );
                            }
                            return Ok(None);
                        }
                        Err(e) => return Err(e),
                    }
                }
                Open::File { file, ino, dev } => {
                    let n = read_retrying(file, buf)?;
                    if n > 0 {
                        return Ok(Some(n));
                    }
                    let Source::File(path) = &self.source else {
                        return Ok(None);
                    };
                    // At the end of what this file holds: has the path been given to a new
                    // file, or this one cut short?
                    match std::fs::metadata(path) {
                        Ok(m) if m.ino() != *ino || m.dev() != *dev => {
                            return Err(std::io::Error::other(Restarted::Replaced));
                        }
                        Ok(m) if m.len() < self.pos => {
                            return Err(std::io::Error::other(Restarted::Truncated));
                        }
                        // Removed and not created again yet: the next run's file will come.
                        _ => return Ok(None),
                    }
                }
                Open::Stdin { rx, chunk, at } => {
                    if *at < chunk.len() {
                        let n = (chunk.len() - *at).min(buf.len());
                        buf[..n].copy_from_slice(&chunk[*at..*at + n]);
                        *at += n;
                        return Ok(Some(n));
                    }
                    let wait = if self.ending.is_some() {
                        Duration::ZERO
                    } else {
                        self.controls.poll
                    };
                    match rx.recv_timeout(wait) {
                        Ok(Ok(data)) => {
                            *chunk = data;
                            *at = 0;
                        }
                        Ok(Err(e)) => return Err(e),
                        Err(RecvTimeoutError::Timeout) => return Ok(None),
                        Err(RecvTimeoutError::Disconnected) => {
                            self.open = Open::Closed;
                            if self.ending.is_none() {
                                self.ending = Some(Ending::EndOfInput);
                            }
                            return Ok(Some(0));
                        }
                    }
                }
            }
        }
    }
}

impl Read for Follow {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.ended.is_some() || buf.is_empty() {
            return Ok(0);
        }
        loop {
            match self.try_read(buf)? {
                Some(0) => {
                    self.ended = Some(self.ending.unwrap_or(Ending::EndOfInput));
                    return Ok(0);
                }
                Some(n) => {
                    self.pos += n as u64;
                    self.last_data = Instant::now();
                    if let Some(c) = &mut self.copy {
                        c.write_all(&buf[..n])?;
                    }
                    return Ok(n);
                }
                None => {}
            }
            // Nothing there now. After an ending condition, what was there has been read.
            if let Some(e) = self.ending {
                self.ended = Some(e);
                return Ok(0);
            }
            if let Some(e) = self.must_end() {
                self.ending = Some(e);
                continue; // one more read: what the writer wrote before it went
            }
            if (self.on_idle)(self.last_data.elapsed()) {
                self.ending = Some(Ending::Asked);
                continue;
            }
            if !matches!(self.open, Open::Stdin { .. }) {
                std::thread::sleep(self.controls.poll);
            }
        }
    }
}

fn read_retrying(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match file.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

fn read_stdin(tx: SyncSender<std::io::Result<Vec<u8>>>) {
    let mut stdin = std::io::stdin().lock();
    loop {
        let mut chunk = vec![0u8; CHUNK];
        match stdin.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                chunk.truncate(n);
                if tx.send(Ok(chunk)).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        }
    }
}

/// Whether process `pid` is still running. A zombie (exited, not yet waited for by its parent)
/// counts as gone: it writes nothing more.
pub fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 performs the existence and permission checks only; nothing is sent.
    let r = unsafe { libc::kill(pid, 0) };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM) {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may hold any byte.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}
