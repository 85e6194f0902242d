//! `mllog watch`: follows a log another process is writing, checks it as it grows, and ends
//! with the verdict `mllog check` gives the finished file. How it follows and when it ends:
//! `docs/watch.md`.

use std::cell::RefCell;
use std::collections::HashSet;
use std::io::{BufReader, Read};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mllog_cli::follow::{Controls, Ending, Follow, Restarted, Source};
use mllog_core::compliance::{ruleset_of, ComplianceReport, Ruleset, Severity, StreamCheck};
use mllog_core::record::{LineError, LogReader, Record};
use mllog_core::Benchmark;

use crate::check::choice_note;
use crate::diag;
use tracing_mllog::Output;
use tracing_mllog::Ranks;

// The watch runs beside a job, often in the same pipe: a closed stderr (`2>&1 | head`) must
// not end it with a panic, or the job's output would end with it. What cannot be said is
// dropped.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
macro_rules! say_text {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

/// Options of `mllog watch`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The ruleset to check against [default: as `mllog check` picks it, from the log's
    /// submission_benchmark]
    #[arg(long, value_name = "X.Y.Z")]
    ruleset: Option<Ruleset>,
    /// The benchmark the run must be (its ruleset is the newest that allows it, unless
    /// --ruleset); a log that names another one fails.
    #[arg(long, value_name = "NAME")]
    benchmark: Option<String>,
    /// Treat warnings as errors, like the official --werror.
    #[arg(long)]
    werror: bool,
    /// Stop at the first error (exit 1), so a job script can end a run whose log cannot pass.
    #[arg(long)]
    fail_fast: bool,
    /// End this many seconds after `run_stop` once nothing more is written (a file without
    /// --pid only: standard input is read to its end, so that the writer never meets a closed
    /// pipe, and with --pid the watch waits for the writer to exit).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 3.0,
        allow_hyphen_values = true
    )]
    quiet_period: f64,
    /// The writer's process id: the watch ends when it exits (after reading what it wrote).
    #[arg(long, value_name = "PID", allow_hyphen_values = true)]
    pid: Option<i32>,
    /// End after this many seconds whatever happens.
    #[arg(long, value_name = "SECS", allow_hyphen_values = true)]
    timeout: Option<f64>,
    /// Also write every byte read to FILE (for `-`: a local copy of the log).
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Keep a copy of the log in object storage, uploaded whole whenever it grows and once
    /// more at the end (gs://, s3://, az://, file://; default: MLLOG_UPLOAD_URL). Needs a file,
    /// or `--output` for `-`.
    #[arg(long, value_name = "URL")]
    upload: Option<String>,
    /// How often, in milliseconds, the file is looked at when nothing new was read.
    #[arg(long, value_name = "MS", default_value_t = 50, hide = true)]
    poll_ms: u64,
    /// The log to follow (`-` reads standard input until its end).
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

/// Problems found during the run are looked for at most this often while records stream in
/// (and whenever the input goes quiet): a full report per record would cost more than the
/// parsing.
const SCAN_EVERY: Duration = Duration::from_millis(250);

/// What the watch knows of the run so far.
struct Live {
    check: StreamCheck,
    ruleset: Option<Ruleset>,
    shown: String,
    werror: bool,
    fail_fast: bool,
    quiet_period: Duration,
    run_started: bool,
    run_stopped: bool,
    /// Findings already said on stderr (line and message).
    said: HashSet<(Option<usize>, String)>,
    last_scan: Instant,
    dirty: bool,
    failed_fast: bool,
    records: usize,
    malformed: usize,
    restarts: usize,
    /// The benchmark `--benchmark` asks for, and whether the log named another.
    benchmark: Option<Benchmark>,
    wrong_benchmark: bool,
    /// The line of the run's `init_start`: a second one means a second run in one file.
    init_start: Option<usize>,
    second_run_said: bool,
}

impl Live {
    fn new(
        ruleset: Option<Ruleset>,
        benchmark: Option<Benchmark>,
        shown: String,
        a: &Args,
    ) -> Live {
        Live {
            check: StreamCheck::new(ruleset),
            ruleset,
            shown,
            werror: a.werror,
            fail_fast: a.fail_fast,
            // Standard input is read to its end: ending earlier would close the pipe under a
            // job that still writes (its next line would fail with EPIPE). A writer given by
            // --pid is waited for: what it writes after run_stop belongs in the copies too.
            quiet_period: if a.file.as_os_str() == "-" || a.pid.is_some() {
                Duration::MAX
            } else {
                Duration::from_secs_f64(a.quiet_period.max(0.0))
            },
            run_started: false,
            run_stopped: false,
            said: HashSet::new(),
            last_scan: Instant::now(),
            dirty: false,
            failed_fast: false,
            records: 0,
            malformed: 0,
            restarts: 0,
            benchmark,
            wrong_benchmark: false,
            init_start: None,
            second_run_said: false,
        }
    }

    /// A relaunch writes the file again from its start: its log is checked on its own.
    fn restart(&mut self) {
        self.check = StreamCheck::new(self.ruleset);
        self.run_started = false;
        self.run_stopped = false;
        self.said.clear();
        self.dirty = false;
        self.restarts += 1;
        self.init_start = None;
        self.second_run_said = false;
    }

    fn is_error(&self, s: Severity) -> bool {
        s == Severity::Error || (self.werror && s == Severity::Warning)
    }

    /// Whether a record of `key` is needed in full: a rule reads it, or it is said at once.
    fn wants(&self, key: &str) -> bool {
        self.check.wants(key) || key == "submission_benchmark"
    }

    /// A record, in full, or (`full` false) only its key: one no rule reads.
    fn record(&mut self, lineno: usize, record: &Record, full: bool) {
        if full {
            self.check.feed(lineno, record);
        } else {
            self.check.count(&record.key);
        }
        self.records += 1;
        self.dirty = true;
        self.said_at_once(lineno, record);
        if record.key == "run_start" && !self.run_started {
            self.run_started = true;
            self.preflight(lineno);
        } else if record.key == "run_stop" && self.run_started && !self.run_stopped {
            self.run_stopped = true;
            self.scan();
            let report = self.check.current().report();
            let text = report.render_text(&self.shown, self.werror);
            say!(
                "mllog watch: run_stop at line {lineno}: {}",
                text.lines().last().unwrap_or_default()
            );
        } else if self.run_started && self.last_scan.elapsed() >= SCAN_EVERY {
            self.scan();
        }
    }

    /// What one record shows by itself, said on its line: a log of another benchmark than
    /// `--benchmark` asks for, a second run appended to the file.
    fn said_at_once(&mut self, lineno: usize, record: &Record) {
        match record.key.as_ref() {
            "submission_benchmark" => {
                let Some(want) = self.benchmark else { return };
                let named = record.value.as_str();
                if named != Some(want.as_str()) && !self.wrong_benchmark {
                    self.wrong_benchmark = true;
                    say!(
                        "mllog watch: error: the log is not a {} run (its submission_benchmark: \
                         {})\n  --> {}:{lineno}",
                        want.as_str(),
                        named.unwrap_or("not a name"),
                        self.shown
                    );
                    self.failed_fast |= self.fail_fast;
                }
            }
            "init_start" => match self.init_start {
                None => self.init_start = Some(lineno),
                // Once: every rule that counts records now fails, and each says so.
                Some(first) if !self.second_run_said => {
                    self.second_run_said = true;
                    say!(
                        "mllog watch: error: a second run begins at line {lineno} of {} (the \
                         first at line {first}): the writer appended to the file \
                         (mlperf_logging opens it for appending). A result file holds one run: \
                         remove or rename it before a relaunch.",
                        self.shown
                    );
                }
                Some(_) => {}
            },
            _ => {}
        }
    }

    fn error(&mut self, e: &LineError) {
        self.check.feed_error(e);
        self.malformed += 1;
        self.dirty = true;
        if self.run_started && self.last_scan.elapsed() >= SCAN_EVERY {
            self.scan();
        }
    }

    /// The set-up verdict, said when the clock starts.
    fn preflight(&mut self, lineno: usize) {
        let pending = self.check.current().pending_at_run_start();
        let errors = pending
            .findings
            .iter()
            .filter(|f| self.is_error(f.severity))
            .count();
        let head = format!(
            "mllog watch: set-up at run_start (line {lineno}, ruleset {}{}, {} records)",
            pending.ruleset,
            pending
                .benchmark
                .as_deref()
                .map(|b| format!(", {b}"))
                .unwrap_or_default(),
            pending.records
        );
        if pending.findings.is_empty() {
            say!("{head}: nothing missing or wrong before the clock starts");
        } else {
            say_text!(
                "{head}: {} problem{} before the clock starts\n{}",
                pending.findings.len(),
                if pending.findings.len() == 1 { "" } else { "s" },
                body_of(&pending, &self.shown, self.werror)
            );
        }
        for f in &pending.findings {
            self.said.insert((f.line, f.message.clone()));
        }
        if self.fail_fast && errors > 0 {
            self.failed_fast = true;
        }
        self.last_scan = Instant::now();
        self.dirty = false;
    }

    /// Says every problem found since the last look.
    fn scan(&mut self) {
        self.last_scan = Instant::now();
        self.dirty = false;
        let pending = self.check.current().pending_at_run_start();
        for f in &pending.findings {
            if f.severity == Severity::Note || !self.said.insert((f.line, f.message.clone())) {
                continue;
            }
            let sev = if self.is_error(f.severity) {
                "error"
            } else {
                "warning"
            };
            let at = f.line.map(|l| format!(":{l}")).unwrap_or_default();
            say!(
                "mllog watch: {sev}: {}\n  --> {}{at}",
                f.message,
                self.shown
            );
            if self.fail_fast && self.is_error(f.severity) {
                self.failed_fast = true;
            }
        }
    }

    /// Nothing new to read: look for problems once, and say whether the watch should end.
    fn idle(&mut self, quiet: Duration) -> bool {
        if self.dirty && self.run_started {
            self.scan();
        }
        self.failed_fast || (self.run_stopped && quiet >= self.quiet_period)
    }
}

/// A report's findings as `render_text` writes them, without its verdict line.
fn body_of(report: &ComplianceReport, shown: &str, werror: bool) -> String {
    let text = report.render_text(shown, werror);
    let mut lines: Vec<&str> = text.lines().collect();
    lines.pop();
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

fn ending_words(e: Option<Ending>, failed_fast: bool) -> &'static str {
    if failed_fast {
        return "--fail-fast: an error";
    }
    match e {
        Some(Ending::EndOfInput) | None => "end of input",
        Some(Ending::WriterExited) => "the writer exited",
        Some(Ending::Signal) => "a signal (SIGTERM or SIGINT)",
        Some(Ending::Timeout) => "--timeout",
        Some(Ending::Asked) => "run_stop and the quiet period",
    }
}

/// Refuses to watch (exit 2) after saying why. A job piped into `mllog watch -` is still
/// writing: its output is passed through to standard output until it ends, so that a mistake
/// on the watcher's command line neither loses the log nor breaks the job's pipe.
fn refuse(stdin: bool, why: std::fmt::Arguments<'_>) -> u8 {
    say!("mllog watch: {why}");
    if stdin {
        say!("mllog watch: passing standard input through to standard output, unchecked");
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::stdout().lock());
    }
    crate::USAGE_OR_IO
}

pub fn run(a: Args) -> u8 {
    let stdin = a.file.as_os_str() == "-";
    let bench = match a.benchmark.as_deref().map(|b| (b, Benchmark::from_name(b))) {
        None => None,
        Some((_, Some(b))) => Some(b),
        Some((name, None)) => {
            let known: Vec<&str> = Benchmark::ALL.iter().map(|b| b.as_str()).collect();
            return refuse(
                stdin,
                format_args!("unknown benchmark `{name}` (known: {})", known.join(", ")),
            );
        }
    };
    if !(a.quiet_period.is_finite() && a.quiet_period >= 0.0)
        || a.timeout.is_some_and(|t| !(t.is_finite() && t >= 0.0))
    {
        return refuse(
            stdin,
            format_args!("--quiet-period and --timeout take a number of seconds, 0 or more"),
        );
    }
    if let Some(pid) = a.pid {
        // kill(pid, 0) tells whether the process exists; 0 and negative numbers name process
        // groups, not a writer.
        // SAFETY: signal 0 sends nothing; kill only checks that the process exists.
        let exists = pid > 0
            && (unsafe { libc::kill(pid, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM));
        if !exists {
            return refuse(
                stdin,
                format_args!("--pid {pid}: no such process (the writer's process id, above 0)"),
            );
        }
    }
    let ruleset = a.ruleset.or(bench.map(|b| ruleset_of(b).0));
    let shown = crate::shown(&a.file);

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&stop)) {
            return refuse(stdin, format_args!("cannot handle signal {sig}: {e}"));
        }
    }
    let controls = Controls {
        stop,
        pid: a.pid,
        timeout: a.timeout.map(Duration::from_secs_f64),
        poll: Duration::from_millis(a.poll_ms.max(1)),
    };
    // The copy's path is what the sinks that read the log file (the uploader) read.
    let log_file = if stdin {
        a.output.clone()
    } else {
        Some(a.file.clone())
    };
    let (feed, mut guard) = match start_sinks(log_file, a.upload.as_deref()) {
        Ok(started) => started,
        Err(e) => return refuse(stdin, format_args!("{e}")),
    };
    // Without a sink (no upload, no OTel, no RPD) the records stay here: handing each one to
    // the worker thread, to be freed there, would cost several times the parsing.
    let feeding = feed.has_sinks();
    let live = Rc::new(RefCell::new(Live::new(ruleset, bench, shown.clone(), &a)));
    let on_idle = {
        let live = Rc::clone(&live);
        Box::new(move |quiet| live.borrow_mut().idle(quiet))
    };
    let source = if stdin {
        Source::Stdin
    } else {
        Source::File(a.file.clone())
    };
    let mut follow = Follow::new(source, controls, on_idle);
    if let Some(out) = &a.output {
        // `results/` not made yet is the usual case, as for the layer's output file.
        let made = match out.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir),
            _ => Ok(()),
        };
        match made.and_then(|()| std::fs::File::create(out)) {
            Ok(f) => follow = follow.with_copy(f),
            Err(e) => {
                drop(follow);
                return refuse(stdin, format_args!("cannot create {}: {e}", out.display()));
            }
        }
    }

    if !stdin && !a.file.exists() {
        // A path with a typo waits forever otherwise, without a word.
        say!("mllog watch: waiting for {shown} to be created");
    }
    let mut follow = Some(follow);
    let mut io_error = None;
    'runs: while let Some(f) = follow.take() {
        let mut reader = LogReader::new(BufReader::with_capacity(1 << 16, f));
        if feeding {
            for item in reader.by_ref() {
                match item {
                    Ok(line) => {
                        live.borrow_mut().record(line.lineno, &line.record, true);
                        feed.push(line.record);
                    }
                    Err(e) => live.borrow_mut().error(&e),
                }
                if live.borrow().failed_fast {
                    break;
                }
            }
        } else {
            // Nothing to hand on: as `mllog check`, a record no rule reads is parsed no
            // further than its key, into one reused record.
            let mut record = Record::empty();
            loop {
                let mut wanted = |key: &str| live.borrow().wants(key);
                match reader.next_record_into(&mut record, &mut wanted) {
                    None => break,
                    Some(Ok((lineno, full))) => live.borrow_mut().record(lineno, &record, full),
                    Some(Err(e)) => live.borrow_mut().error(&e),
                }
                if live.borrow().failed_fast {
                    break;
                }
            }
        }
        let restarted = reader.io_error().map(|e| (Restarted::of(e), e.to_string()));
        let mut f = reader.into_inner().into_inner();
        let mut restart = match restarted {
            Some((Some(why), _)) => Some(why),
            Some((None, msg)) => {
                io_error = Some(msg);
                None
            }
            None if f.ended().is_none() && !live.borrow().failed_fast => {
                // The reader stopped at a line longer than it holds (as `mllog check` does):
                // the verdict is made, but the file is followed to its end for the copy and
                // the upload, without holding what is read.
                drain(&mut f).unwrap_or_else(|e| {
                    io_error = Some(e.to_string());
                    None
                })
            }
            None => None,
        };
        if let Some(why) = restart.take() {
            say!("mllog watch: {shown} was {why}: a new run; starting over from its first line");
            if let Err(e) = f.restart() {
                io_error = Some(e.to_string());
                break 'runs;
            }
            live.borrow_mut().restart();
            follow = Some(f);
            continue 'runs;
        }
        let live = live.borrow();
        say!(
            "mllog watch: ended ({}): {} records{}{}",
            ending_words(f.ended(), live.failed_fast),
            live.records,
            if live.malformed > 0 {
                format!(", {} malformed lines", live.malformed)
            } else {
                String::new()
            },
            match live.restarts {
                0 => String::new(),
                1 => ", 1 restart of the file".to_owned(),
                n => format!(", {n} restarts of the file"),
            },
        );
    }
    // Everything read reaches the sinks, and the upload's last copy is the whole file.
    let report = guard.shutdown();
    if !feeding {
        say!("mllog watch: no sink (no upload, OTel or RPD asked for)");
    } else if report.is_clean() {
        say!("mllog watch: sinks: {report}");
    } // else the guard has said it, with what went wrong
    let incomplete_copy = remote_copy_incomplete(&guard);
    if let Some(e) = io_error {
        say!("mllog watch: cannot read {shown}: {e}");
        return crate::USAGE_OR_IO;
    }
    if !stdin && !a.file.exists() {
        say!("mllog watch: cannot read {shown}: it was never created");
        return crate::USAGE_OR_IO;
    }

    let live = match Rc::try_unwrap(live) {
        Ok(l) => l.into_inner(),
        Err(_) => unreachable!("the follower, which shared the state, is gone"),
    };
    let (werror, given) = (live.werror, live.ruleset.is_some());
    let live_wrong_benchmark = live.wrong_benchmark;
    let (report, detected, older) = live.check.finish();
    let mut out = diag::render(&report, &a.file, &shown, werror);
    if !given && let Some(n) = choice_note(&report, detected, &older).note {
        out.push_str(&format!("  = note: {n}\n"));
    }
    if !crate::emit(&out) {
        return crate::USAGE_OR_IO;
    }
    let mut passed = report.passed(werror);
    if let Some(b) = bench
        && report.benchmark.as_deref() != Some(b.as_str())
        && !live_wrong_benchmark
    {
        say!(
            "mllog watch: error: the log is not a {} run (its submission_benchmark: {})",
            b.as_str(),
            report.benchmark.as_deref().unwrap_or("none")
        );
        passed = false;
    }
    if live_wrong_benchmark {
        passed = false;
    }
    if !passed {
        crate::FAILED
    } else if let Some(why) = incomplete_copy {
        // A compliant log whose remote copy was asked for and is not whole: an I/O error.
        say!("mllog watch: error: {why}");
        crate::USAGE_OR_IO
    } else {
        crate::OK
    }
}

/// Why the remote copy asked for (`--upload`, MLLOG_UPLOAD_URL) is not the whole log, if it
/// is not.
#[cfg(feature = "upload")]
fn remote_copy_incomplete(guard: &tracing_mllog::Guard) -> Option<String> {
    let upload = guard.detail::<tracing_mllog::sink::UploadReport>()?;
    if upload.final_remote_matches_local == Some(true) {
        return None;
    }
    Some(format!(
        "the copy at {} is not the whole log{}",
        upload.url,
        upload
            .last_error
            .as_deref()
            .map(|e| format!(" (last error: {e})"))
            .unwrap_or_default()
    ))
}

#[cfg(not(feature = "upload"))]
fn remote_copy_incomplete(_: &tracing_mllog::Guard) -> Option<String> {
    None
}

/// Why the sinks could not start.
#[derive(Debug, thiserror::Error)]
enum SinkStartError {
    #[error("--upload needs a file to upload: give --output FILE when reading `-`")]
    NoFile,
    #[cfg(not(feature = "upload"))]
    #[error("--upload: this mllog was built without the `upload` feature")]
    NoUploadFeature,
    #[cfg(feature = "upload")]
    #[error("--upload: {0}")]
    Upload(#[from] tracing_mllog::sink::UploadError),
    #[error(transparent)]
    Start(#[from] tracing_mllog::Error),
}

/// The layer's pipeline with the sinks the environment (MLLOG_UPLOAD_URL, MLLOG_OTEL, ...) or
/// `--upload` asks for, fed with the records read. The watch checks the log itself (by physical
/// line, as `mllog check` does), so the pipeline's own live checker is off.
fn start_sinks(
    log_file: Option<PathBuf>,
    upload: Option<&str>,
) -> Result<(tracing_mllog::RecordFeed, tracing_mllog::Guard), SinkStartError> {
    let mut b = tracing_mllog::MllogLayer::builder()
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .validate_submission(false)
        // The sinks as the layer's are configured: MLLOG_UPLOAD_URL, MLLOG_OTEL, ...
        .from_env()
        // The watcher is the one process that forwards this log, whatever rank variables the
        // job gave it.
        .ranks(Ranks::default().rank(0));
    b = match &log_file {
        Some(p) => b.output(Output::followed(p)),
        None => b.output(Output::Nowhere),
    };
    if let Some(url) = upload {
        if log_file.is_none() {
            return Err(SinkStartError::NoFile);
        }
        #[cfg(feature = "upload")]
        {
            // The option wins over MLLOG_UPLOAD_URL, whose sink would replace the one given here.
            let env: Vec<(String, String)> = std::env::vars_os()
                .filter(|(k, _)| k != "MLLOG_UPLOAD_URL")
                .map(|(k, v)| {
                    (
                        k.to_string_lossy().into_owned(),
                        v.to_string_lossy().into_owned(),
                    )
                })
                .collect();
            b = b
                .sink(tracing_mllog::sink::UploadSink::new(
                    tracing_mllog::sink::UploadConfig::new(url)?,
                ))
                .environment(env);
        }
        #[cfg(not(feature = "upload"))]
        {
            let _ = url;
            return Err(SinkStartError::NoUploadFeature);
        }
    }
    Ok(b.build_feed()?)
}

/// Reads `f` to its end, keeping nothing; a restart of the file is returned.
fn drain(f: &mut Follow) -> std::io::Result<Option<Restarted>> {
    let mut scratch = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut scratch) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) => match Restarted::of(&e) {
                Some(why) => return Ok(Some(why)),
                None => return Err(e),
            },
        }
    }
}
