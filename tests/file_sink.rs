//! The MLLOG file sink's counts tell the truth: "written" is the number of complete lines the
//! operating system took. Real failures, in child processes: `/dev/full`, a file-size limit
//! (`ulimit -f`, which makes the kernel take part of a line and then refuse the rest), a
//! closed stdout and a stdout whose reader went away.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::{mllog, MllogLayer, Pipeline};
use tracing_subscriber::prelude::*;

/// Selects what the child does (unset: the child test returns at once).
const CHILD_MODE: &str = "MLLOG_FILE_SINK_TEST_CHILD";
const RECORDS: u64 = 400;

/// Emits `RECORDS` events through the layer, shuts down and prints the MLLOG sink's counters
/// to stderr as `CHILD written=W errors=E last=...`.
fn run_layer(output: Option<&Path>) {
    let mut builder = MllogLayer::builder()
        .live_check(LivePolicy::Off)
        .pipeline(Pipeline::default().shutdown_timeout(Duration::from_secs(10)));
    builder = match output {
        Some(path) => builder.output(tracing_mllog::Output::file(path)),
        None => builder.output(tracing_mllog::Output::Stdout),
    };
    let (layer, mut guard) = builder.build().expect("build layer");
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        for i in 0..RECORDS {
            mllog!("train_loss", 1.25, samples_count = i);
        }
    });
    let report = guard.shutdown();
    let sink = report
        .sinks
        .iter()
        .find(|s| s.name.starts_with("mllog-"))
        .expect("the MLLOG sink is in the report");
    eprintln!(
        "CHILD written={} errors={} records={} last={}",
        sink.written,
        sink.errors,
        report.records,
        sink.last_error.as_deref().unwrap_or("-")
    );
}

#[test]
fn child_writes_records() {
    let Ok(mode) = std::env::var(CHILD_MODE) else {
        return; // only meaningful as the child of the tests below
    };
    match mode.as_str() {
        "stdout" => run_layer(None),
        "closed-stdout" => {
            // Closed inside the process: a Rust program started with descriptor 1 closed gets
            // /dev/null there from the runtime, so only a close during the run leaves it closed
            // (as a launcher or a library closing it would).
            // SAFETY: plain descriptor calls on descriptors this test owns.
            unsafe {
                let saved = libc::dup(1);
                libc::close(1);
                run_layer(None);
                libc::dup2(saved, 1);
                libc::close(saved);
            }
        }
        "broken-pipe" => {
            // stdout becomes a pipe whose read end is closed: every write fails with EPIPE
            // (Rust ignores SIGPIPE). The real stdout is put back for the harness.
            let mut fds = [0; 2];
            // SAFETY: plain descriptor calls on descriptors this test owns.
            unsafe {
                assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
                let saved = libc::dup(1);
                libc::close(fds[0]);
                libc::dup2(fds[1], 1);
                libc::close(fds[1]);
                run_layer(None);
                libc::dup2(saved, 1);
                libc::close(saved);
            }
        }
        path => run_layer(Some(Path::new(path))),
    }
}

struct Counts {
    written: u64,
    errors: u64,
    records: u64,
    last: String,
}

fn child(shell_prefix: &str, mode: &str, stdout: Stdio) -> (Counts, Output) {
    let exe = std::env::current_exe().unwrap();
    let script = format!("{shell_prefix} exec \"$0\" \"$@\"");
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .arg(exe)
        .args([
            "--exact",
            "child_writes_records",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_MODE, mode)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("CHILD "))
        .unwrap_or_else(|| panic!("the child did not report ({:?}):\n{stderr}", out.status))
        .to_string();
    let field = |name: &str| -> String {
        let start = line.find(&format!("{name}=")).unwrap() + name.len() + 1;
        let rest = &line[start..];
        match name {
            "last" => rest.to_string(),
            _ => rest.split(' ').next().unwrap().to_string(),
        }
    };
    let counts = Counts {
        written: field("written").parse().unwrap(),
        errors: field("errors").parse().unwrap(),
        records: field("records").parse().unwrap(),
        last: field("last"),
    };
    (counts, out)
}

#[test]
#[cfg(target_os = "linux")] // /dev/full
fn a_full_device_counts_nothing_as_written() {
    let (c, _) = child("", "/dev/full", Stdio::null());
    assert!(c.records >= RECORDS, "{}", c.records);
    assert_eq!(c.written, 0, "nothing reached /dev/full: {}", c.last);
    assert_eq!(c.errors, c.records, "{}", c.last);
    assert!(c.last.contains("/dev/full"), "{}", c.last);
    assert!(c.last.contains("No space left on device"), "{}", c.last);
    assert!(c.last.contains("not written"), "{}", c.last);
}

#[test]
fn a_file_size_limit_leaves_complete_lines_and_counts_exactly_them() {
    // 8 blocks of 512 bytes: the limit falls inside a line, so the kernel takes part of it
    // and refuses the rest (EFBIG; SIGXFSZ ignored, as a training job would).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mllog.log");
    let (c, _) = child(
        "trap '' XFSZ; ulimit -f 8;",
        path.to_str().unwrap(),
        Stdio::null(),
    );
    let bytes = std::fs::read(&path).unwrap();
    assert!(
        bytes.len() <= 8 * 512 && bytes.len() > 1000,
        "{}",
        bytes.len()
    );
    assert!(bytes.ends_with(b"\n"), "the last line is torn");
    let text = String::from_utf8(bytes).unwrap();
    let lines = text.lines().count() as u64;
    assert!(text
        .lines()
        .all(|l| l.starts_with(":::MLLOG {") && l.ends_with('}')));
    assert_eq!(
        c.written, lines,
        "written must equal the complete lines: {}",
        c.last
    );
    assert_eq!(c.written + c.errors, c.records, "{}", c.last);
    assert!(c.last.contains("File too large"), "{}", c.last);
    // The kernel took the first part of the line before refusing: it was removed again.
    assert!(c.last.contains("then removed"), "{}", c.last);
    assert!(c.last.contains(path.to_str().unwrap()), "{}", c.last);
}

#[test]
fn a_closed_stdout_is_an_error_not_a_success() {
    let (c, _) = child("", "closed-stdout", Stdio::null());
    assert!(c.records >= RECORDS);
    assert_eq!(c.written, 0, "{}", c.last);
    assert_eq!(c.errors, c.records, "{}", c.last);
    assert!(c.last.contains("writing stdout"), "{}", c.last);
    assert!(c.last.contains("Bad file descriptor"), "{}", c.last);
}

#[test]
fn a_stdout_without_reader_is_an_error_not_a_success() {
    let (c, _) = child("", "broken-pipe", Stdio::null());
    assert_eq!(c.written, 0, "{}", c.last);
    assert_eq!(c.errors, c.records, "{}", c.last);
    assert!(c.last.contains("Broken pipe"), "{}", c.last);
}

#[test]
fn a_healthy_stdout_counts_every_line() {
    let (c, out) = child("", "stdout", Stdio::piped());
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The harness prints `test child_writes_records ... ` without a newline before the first.
    let lines = stdout.lines().filter(|l| l.contains(":::MLLOG ")).count() as u64;
    assert_eq!(c.errors, 0, "{}", c.last);
    assert_eq!(c.written, lines);
    assert!(lines >= RECORDS);
}
