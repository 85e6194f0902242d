//! The compare example's `mllog watch` case: what following a log costs, measured on the real
//! command. A writer thread appends a compliant run to a file at a fixed rate (records in
//! batches every millisecond, flushed), `mllog watch` follows it in a child process, and the
//! case reports the watcher's CPU per record, its peak memory, and its lag: from the moment
//! `run_stop` reaches the file to the moment the watcher has read, checked and reported the
//! whole run (it ends right after `run_stop`: `--quiet-period 0`).
//!
//! The target: the watcher keeps up with the fastest writer Python's `mlperf_logging.mllog`
//! can be, that is it needs less CPU per record than one Python event costs its writer.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The rates (records per second) the writer keeps, each with the records it writes and
/// whether the watcher also uploads the log (to a `file://` URL: the upload sink's whole path
/// but the network).
const RATES: [(u64, u64, bool); 3] = [
    (10_000, 30_000, false),
    (10_000, 30_000, true),
    (1_000_000, 1_000_000, false),
];

/// Where the `mllog` binary is: `MLLOG_BIN`, or beside this example's own directory (the
/// same profile's `target/<profile>/mllog`).
pub fn mllog_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MLLOG_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("mllog");
    bin.exists().then_some(bin)
}

/// The measurements of one rate.
struct Followed {
    records: u64,
    written_per_s: f64,
    cpu_us_per_record: f64,
    peak_rss_mb: f64,
    lag_ms: f64,
}

/// Adds the watch rows and ratios; `python_event_ns` is one Python `mllog` event's cost when
/// it was measured. Panics when the watcher does not keep up with the Python writer.
pub fn watch_case(
    dir: &Path,
    python_event_ns: Option<f64>,
    rows: &mut Vec<(String, f64, &'static str)>,
    ratios: &mut Vec<(String, String)>,
) {
    let what = "mllog watch following a log being written";
    let Some(bin) = mllog_bin() else {
        println!(
            "skipped: {what} (no mllog binary beside this example: `cargo build --release -p \
             mllog-cli`, or MLLOG_BIN)"
        );
        ratios.push(("python event / watch per record".into(), "skipped".into()));
        return;
    };
    let mut slowest_us: f64 = 0.0;
    for (rate, records, upload) in RATES {
        let f = follow(dir, &bin, rate, records, upload);
        let label = format!(
            "{}k records/s{}",
            rate / 1000,
            if upload { ", uploading" } else { "" }
        );
        rows.push((
            format!("watch CPU per record, writer at {label}"),
            f.cpu_us_per_record * 1e3,
            "ns",
        ));
        rows.push((
            format!("watch lag run_stop → verdict, writer at {label}"),
            f.lag_ms,
            "ms",
        ));
        rows.push((
            format!("watch peak RSS, {} records, writer at {label}", f.records),
            f.peak_rss_mb,
            "MB",
        ));
        rows.push((
            format!("writer rate reached, target {label}"),
            f.written_per_s,
            "records/s",
        ));
        slowest_us = slowest_us.max(f.cpu_us_per_record);
    }
    match python_event_ns {
        Some(py_ns) => {
            let ratio = py_ns / (slowest_us * 1e3);
            ratios.push((
                "python event / watch per record".into(),
                format!("{ratio:.1}"),
            ));
            assert!(
                ratio > 1.0,
                "mllog watch spends {slowest_us:.2} µs of CPU per record, more than the \
                 {:.2} µs one Python mllog event costs its writer: it would fall behind",
                py_ns / 1e3
            );
        }
        None => ratios.push((
            "python event / watch per record".into(),
            "skipped (set MLLOG_PYTHON)".into(),
        )),
    }
}

/// One rate: the writer thread and the watcher, then the watcher's rusage.
fn follow(dir: &Path, bin: &Path, rate: u64, records: u64, upload: bool) -> Followed {
    let log = dir.join(format!("watch-{rate}.log"));
    let remote = dir.join(format!("watch-{rate}.remote"));
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&remote);
    let (head, run_stop) = run_lines();
    let mut watch = Command::new(bin);
    watch
        .args(["watch", "--ruleset", "6.1.0", "--quiet-period", "0"])
        .arg(&log)
        .env_remove("MLLOG_UPLOAD_URL")
        .env_remove("MLLOG_OTEL");
    if upload {
        watch
            .arg("--upload")
            .arg(format!("file://{}", remote.display()));
    }
    // Reaped by `wait_with_usage` (wait4, for its own rusage), not by `Child::wait`.
    #[allow(clippy::zombie_processes)]
    let child = watch
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mllog watch");
    // Written at the pace of `rate`, in one batch a millisecond.
    let mut file = std::io::BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(&log).expect("watched file"),
    );
    file.write_all(head.as_bytes()).expect("write");
    let filler = filler_line(&head);
    let per_ms = (rate / 1000).max(1);
    let start = Instant::now();
    let mut written = 0;
    let mut tick = 0u64;
    while written < records {
        let n = per_ms.min(records - written);
        for _ in 0..n {
            file.write_all(filler.as_bytes()).expect("write");
        }
        file.flush().expect("flush");
        written += n;
        tick += 1;
        let due = start + Duration::from_millis(tick);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let writing = start.elapsed();
    file.write_all(run_stop.as_bytes()).expect("write");
    file.flush().expect("flush");
    let stopped = Instant::now();
    let (exited, cpu_s, peak_rss_mb) = wait_with_usage(child.id());
    let lag = stopped.elapsed();
    assert!(
        exited,
        "mllog watch did not exit by itself following {records} records at {rate}/s"
    );
    if upload {
        let same = std::fs::read(&log).ok() == std::fs::read(&remote).ok();
        assert!(
            same,
            "the uploaded copy differs from the log the watcher followed"
        );
        let _ = std::fs::remove_file(&remote);
    }
    let _ = std::fs::remove_file(&log);
    Followed {
        records,
        written_per_s: records as f64 / writing.as_secs_f64().max(1e-9),
        cpu_us_per_record: cpu_s * 1e6 / records as f64,
        peak_rss_mb,
        lag_ms: lag.as_secs_f64() * 1e3,
    }
}

/// The built-in compliant run up to (not including) its `run_stop`, and that line.
fn run_lines() -> (String, String) {
    let log = tracing_mllog::compliance::example_log(
        tracing_mllog::Ruleset::V6_1_0,
        tracing_mllog::Benchmark::Llama2_70bLora,
        tracing_mllog::Division::Closed,
    )
    .expect("example log");
    let at = log
        .find("\"key\": \"run_stop\"")
        .and_then(|k| log[..k].rfind('\n'))
        .expect("the example log has a run_stop line")
        + 1;
    (log[..at].to_owned(), log[at..].to_owned())
}

/// A `tracked_stats` record stamped with the last time in `head`, so the run stays in order.
fn filler_line(head: &str) -> String {
    let time_ms = head
        .rsplit("\"time_ms\": ")
        .next()
        .and_then(|t| t.split(',').next())
        .expect("a time_ms in the example log");
    format!(
        ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {time_ms}, \"event_type\": \"POINT_IN_TIME\", \
         \"key\": \"tracked_stats\", \"value\": {{\"throughput\": 2.5}}, \"metadata\": {{\"file\": \
         \"train.py\", \"lineno\": 1, \"step\": 1}}}}\n"
    )
}

/// Waits for the child `pid`: whether it exited (not killed by a signal), its CPU seconds
/// (user + system) and its own peak RSS in MB (`wait4` gives that child's alone, where
/// `RUSAGE_CHILDREN` would mix in the Python processes of the other cases).
fn wait_with_usage(pid: u32) -> (bool, f64, f64) {
    let mut status = 0;
    // SAFETY: `rusage` is plain data, and wait4 writes one into memory we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut u) };
    assert_eq!(waited, pid as libc::pid_t, "wait4 on mllog watch");
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        libc::WIFEXITED(status),
        secs(u.ru_utime) + secs(u.ru_stime),
        u.ru_maxrss as f64 / 1024.0,
    )
}
