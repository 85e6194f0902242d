//! Throughput of the compliance checker in MB/s (10^6 bytes) on one thread, beside the official
//! checker (`mlperf_logging.compliance_checker`) on the same files in the same run.
//!
//! `cargo bench --bench check`. The official checker runs with the interpreter in
//! `MLLOG_PYTHON` (one that can `import mlperf_logging`); without it the comparison is skipped.
//! Files (written to a temporary directory, removed at the end):
//!
//! * `real_x<N>`: a real submission log (llama31_8b, HPE, from the corpus of published logs
//!   that `MLLOG_CORPUS` names, as `scripts/test` sets it; skipped without it), its
//!   lines between `run_start` and `run_stop` repeated to `MLLOG_BENCH_MB` (default 32) MB;
//! * `generated`: a complete 6.1.0 llama31_8b log with `train_loss` and `tracked_stats` lines
//!   (the bulk of real logs) filling it to the same size;
//! * `real`: the real log as it is (0.6 MB), where the official checker's start-up dominates.
//!
//! Ours: median of `MLLOG_BENCH_RUNS` (default 5) runs of `check_reader` over a `BufReader` of
//! the file (page cache warm). Official: median of `MLLOG_BENCH_OFFICIAL_RUNS` (default 1) runs
//! of `python -m mlperf_logging.compliance_checker --usage training --ruleset X --log_output F
//! FILE`, wall clock, process start-up included; its start-up (the time on the 47-line example log) is
//! printed, and the rate without it.
//!
//! Without `--bench` (e.g. `cargo test --benches`) it checks a 1 MB file once, for a smoke test.

use std::fmt::Write as _;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use mllog_core::compliance::{check_reader, example_log, Division, Ruleset};
use mllog_core::keys::Benchmark;
use mllog_core::record::{Metadata, Record, Value};

const CORPUS_LOG: &str = "real/v5.1_HPE_llama31_8b_XD670-H200-n8_result_8.txt";

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

/// Splits a log into the lines up to `run_start`, the lines up to `run_stop`, and the rest.
fn split(text: &str) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.contains("\"run_start\""))
        .map_or(0, |i| i + 1);
    let stop = lines
        .iter()
        .rposition(|l| l.contains("\"run_stop\""))
        .unwrap_or(lines.len())
        .max(start);
    (
        lines[..start].to_vec(),
        lines[start..stop].to_vec(),
        lines[stop..].to_vec(),
    )
}

/// The header, then the body repeated until about `target` bytes, then the tail.
fn extend(text: &str, target: usize) -> (String, usize) {
    let (head, body, tail) = split(text);
    let mut out = String::with_capacity(target + text.len());
    let push = |out: &mut String, l: &str| {
        out.push_str(l);
        out.push('\n');
    };
    head.iter().for_each(|l| push(&mut out, l));
    let mut times = 0;
    while out.len() < target && !body.is_empty() {
        body.iter().for_each(|l| push(&mut out, l));
        times += 1;
    }
    tail.iter().for_each(|l| push(&mut out, l));
    (out, times)
}

/// A complete llama31_8b log (6.1.0, closed) with `train_loss` and `tracked_stats` records
/// every step, as a training loop logs them, to about `target` bytes.
fn generated(target: usize) -> String {
    let example =
        example_log(Ruleset::V6_1_0, Benchmark::Llama31_8b, Division::Closed).expect("example log");
    let (head, body, tail) = split(&example);
    let mut out = String::with_capacity(target + example.len());
    for l in &head {
        let _ = writeln!(out, "{l}");
    }
    let t0 = 1_767_226_267_692_i64;
    let mut step = 0u64;
    let at = |lineno| Metadata::at("/workspace/llama31_8b/train.py", lineno);
    while out.len() + example.len() < target {
        step += 1;
        let t = t0 + step as i64 * 731;
        let loss = 2.0 + 8.0 / (1.0 + step as f64 * 0.01);
        let train_loss = Record::event("train_loss", loss)
            .at_millis(t)
            .with_metadata(
                at(412)
                    .with("step", step)
                    .with("samples_count", step * 1024),
            );
        let mut stats = Value::Object(Vec::new());
        stats.set_path("throughput", Value::Float(412.3 + (step % 17) as f64));
        stats.set_path("grad_norm", Value::Float(0.25 + (step % 13) as f64 / 100.0));
        stats.set_path("lr", Value::Float(0.0005 * (1.0 - step as f64 / 1e6)));
        stats.set_path("mem.allocated_gb", Value::Float(61.5));
        let tracked = Record::event("tracked_stats", stats)
            .at_millis(t + 1)
            .with_metadata(at(163).with("step", step));
        let _ = writeln!(out, "{}", train_loss.to_line());
        let _ = writeln!(out, "{}", tracked.to_line());
    }
    for l in body.iter().chain(&tail) {
        let _ = writeln!(out, "{l}");
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Our checker over the file: (median seconds, passed).
fn ours(path: &Path, ruleset: Ruleset, runs: usize) -> (f64, bool) {
    let mut times = Vec::new();
    let mut passed = false;
    for _ in 0..runs {
        let start = Instant::now();
        let file = std::fs::File::open(path).expect("bench file");
        let report = check_reader(ruleset, BufReader::with_capacity(1 << 16, file)).expect("read");
        times.push(start.elapsed().as_secs_f64());
        assert!(report.records > 0);
        passed = report.passed(false);
    }
    (median(times), passed)
}

/// The official checker over the file: (median seconds, exit code), `None` if it cannot run.
fn official(
    py: &str,
    path: &Path,
    ruleset: Ruleset,
    dir: &Path,
    runs: usize,
) -> Option<(f64, i32)> {
    let mut times = Vec::new();
    let mut code = -1;
    for _ in 0..runs {
        let start = Instant::now();
        let status = Command::new(py)
            .args([
                "-m",
                "mlperf_logging.compliance_checker",
                "--usage",
                "training",
            ])
            .arg("--ruleset")
            .arg(ruleset.to_string())
            .arg("--log_output")
            .arg(dir.join("official.log"))
            .arg(path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        times.push(start.elapsed().as_secs_f64());
        code = status.code().unwrap_or(-1);
    }
    Some((median(times), code))
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let mb = if full {
        env_num("MLLOG_BENCH_MB", 32)
    } else {
        1
    };
    let runs = if full {
        env_num("MLLOG_BENCH_RUNS", 5)
    } else {
        1
    };
    let official_runs = env_num("MLLOG_BENCH_OFFICIAL_RUNS", 1);
    let python = std::env::var("MLLOG_PYTHON").ok().filter(|_| full);

    let dir = std::env::temp_dir().join(format!("mllog-check-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let corpus = std::env::var_os("MLLOG_CORPUS").map(|d| Path::new(&d).join(CORPUS_LOG));
    let real = corpus
        .as_deref()
        .and_then(|p| std::fs::read_to_string(p).ok());
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    let mut write = |name: String, text: &str| {
        let path = dir.join(format!("{name}.txt"));
        std::fs::write(&path, text).expect("write bench file");
        files.push((name, path));
    };
    match &real {
        Some(text) => {
            let (big, times) = extend(text, mb * 1_000_000);
            write(format!("real_x{times}"), &big);
        }
        None => println!("skipped: the real-log runs ({CORPUS_LOG} under MLLOG_CORPUS not found)"),
    }
    write("generated".into(), &generated(mb * 1_000_000));
    if let (Some(text), true) = (&real, full) {
        write("real".into(), text);
    }
    let tiny =
        example_log(Ruleset::V6_1_0, Benchmark::Llama31_8b, Division::Closed).expect("example log");
    let tiny_path = dir.join("startup.txt");
    std::fs::write(&tiny_path, &tiny).expect("write bench file");

    println!(
        "compliance check throughput, MB = 10^6 bytes, one thread; ours: median of {runs}, \
         official: median of {official_runs}"
    );
    let startup = python.as_deref().and_then(|py| {
        let r = official(py, &tiny_path, Ruleset::V6_1_0, &dir, official_runs);
        match r {
            Some((t, code)) => println!(
                "official checker start-up ({} lines): {t:.3} s (exit {code})",
                tiny.lines().count()
            ),
            None => println!("official checker: `{py}` cannot be run: comparison skipped"),
        }
        r.map(|(t, _)| t)
    });
    if python.is_none() {
        println!("comparison with the official checker skipped (MLLOG_PYTHON not set, or not a --bench run)");
    }
    for (name, path) in &files {
        let bytes = std::fs::metadata(path).expect("bench file").len() as f64;
        // The real log is a v5.1 submission: checked with 5.1.0, as it was submitted.
        let ruleset = if name.starts_with("real") {
            Ruleset::V5_1_0
        } else {
            Ruleset::V6_1_0
        };
        let (t, passed) = ours(path, ruleset, runs);
        let rate = bytes / 1e6 / t;
        println!(
            "{name}: {:.1} MB, ruleset {ruleset}: ours {rate:.1} MB/s ({:.1} ms, {})",
            bytes / 1e6,
            t * 1e3,
            if passed { "compliant" } else { "not compliant" }
        );
        let (Some(py), Some(t0)) = (python.as_deref(), startup) else {
            continue;
        };
        let Some((to, code)) = official(py, path, ruleset, &dir, official_runs) else {
            continue;
        };
        let orate = bytes / 1e6 / to;
        let net = (to - t0).max(1e-9);
        println!(
            "{name}: official {orate:.2} MB/s ({to:.2} s, exit {code}; {:.2} MB/s without its {t0:.2} s start-up)",
            bytes / 1e6 / net
        );
        println!(
            "ratio: {name}: {:.1}x ({:.1}x without the official start-up)",
            to / t,
            net / t
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
