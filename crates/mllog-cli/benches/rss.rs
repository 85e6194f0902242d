//! Peak memory (resident set size) of `mllog check`, `summary` and `score` on inputs that must
//! not be held in memory: they stream, so the peak stays under 64 MB whatever the input.
//!
//! `cargo bench --bench rss`. Runs the built `mllog` binary as a child on generated inputs in a
//! temporary directory (removed at the end) and reads the child's peak RSS from `wait4`:
//!
//! * `malformed`: `MLLOG_RSS_MB` (default 1024) MB of `:::MLLOG` lines that are not valid JSON,
//!   every one an error (the official checker lists them all);
//! * `/dev/zero`: endless input without a line end;
//! * `long_line`: one 50 MB record line (longer than the 16 MiB line cap: one error naming
//!   line 2), between two valid lines.
//!
//! `score` reads a benchmark folder, so it gets the files as `result_0.txt` (not `/dev/zero`,
//! which is no regular file). Exit status 1 when a peak reaches the limit.
//!
//! Without `--bench` (e.g. `cargo test --benches`) the malformed file is 16 MB, a smoke test.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const LIMIT_MB: f64 = 64.0;

/// Runs `mllog args...` with its output discarded; (exit code, peak RSS in MB, seconds).
// The child is reaped by `wait4` (which also gives its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run(args: &[&str]) -> (i32, f64, f64) {
    let t = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start mllog");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: all-zero bytes are a valid `rusage` (plain integers and timevals).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet reaped (the `Child` is never waited on); `status` and
    // `usage` are valid for writes.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    // Linux reports ru_maxrss in KiB.
    let mb = usage.ru_maxrss as f64 * 1024.0 / 1e6;
    (code, mb, t.elapsed().as_secs_f64())
}

fn write_malformed(path: &Path, bytes: u64) {
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let mut written = 0u64;
    let mut i = 0u64;
    while written < bytes {
        let line = format!(
            ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {i}, \"event_type\": \"POINT_IN_TIME\", \"key\": \"train_loss\", \"value\": [1, 2,, \"metadata\": {{}}}}\n"
        );
        f.write_all(line.as_bytes()).unwrap();
        written += line.len() as u64;
        i += 1;
    }
    f.flush().unwrap();
}

fn write_long_line(path: &Path, bytes: usize) {
    let ok = ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"POINT_IN_TIME\", \"key\": \"seed\", \"value\": 1, \"metadata\": {}}\n";
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(ok.as_bytes()).unwrap();
    f.write_all(b":::MLLOG {\"namespace\": \"\", \"time_ms\": 2, \"event_type\": \"POINT_IN_TIME\", \"key\": \"x\", \"value\": \"")
        .unwrap();
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..bytes >> 20 {
        f.write_all(&chunk).unwrap();
    }
    f.write_all(b"\", \"metadata\": {}}\n").unwrap();
    f.write_all(ok.as_bytes()).unwrap();
    f.flush().unwrap();
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let mb: u64 = std::env::var("MLLOG_RSS_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if bench { 1024 } else { 16 });
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let malformed = dir.join("malformed").join("bench");
    let long = dir.join("long").join("bench");
    std::fs::create_dir_all(&malformed).unwrap();
    std::fs::create_dir_all(&long).unwrap();
    let malformed_file = malformed.join("result_0.txt");
    let long_file = long.join("result_0.txt");
    eprintln!(
        "writing {mb} MB of malformed lines and a 50 MB line to {}",
        dir.display()
    );
    write_malformed(&malformed_file, mb << 20);
    write_long_line(&long_file, 50 << 20);
    let m = malformed_file.to_str().unwrap();
    let l = long_file.to_str().unwrap();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("check malformed", vec!["check", "-q", m]),
        (
            "check malformed --ruleset",
            vec!["check", "-q", "--ruleset", "6.1.0", m],
        ),
        ("check /dev/zero", vec!["check", "-q", "/dev/zero"]),
        ("check long_line", vec!["check", "-q", l]),
        ("summary malformed", vec!["summary", m]),
        ("summary /dev/zero", vec!["summary", "/dev/zero"]),
        ("summary long_line", vec!["summary", l]),
        (
            "score malformed",
            vec!["score", malformed.to_str().unwrap()],
        ),
        ("score long_line", vec!["score", long.to_str().unwrap()]),
    ];
    println!(
        "{:<28} {:>6} {:>12} {:>9}",
        "command", "exit", "peak RSS MB", "seconds"
    );
    let mut over = Vec::new();
    for (name, args) in cases {
        let (code, rss, secs) = run(&args);
        println!("{name:<28} {code:>6} {rss:>12.1} {secs:>9.2}");
        if rss >= LIMIT_MB {
            over.push(name);
        }
        // Every input here is malformed: the check fails (1), nothing is an I/O error (2).
        if name.starts_with("check") {
            assert_eq!(code, 1, "{name}: exit status");
        }
    }
    if !over.is_empty() {
        eprintln!("peak RSS reached {LIMIT_MB} MB: {over:?}");
        std::process::exit(1);
    }
}
