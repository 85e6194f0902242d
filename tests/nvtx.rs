//! The NVTX sink and `PROFILER=cuda` (feature `nvtx`), without a GPU or Nsight Systems, through
//! the real interfaces: NVTX loads the tool named by `NVTX_INJECTION64_PATH` and calls its
//! `InitializeInjectionNvtx2`, exactly as it does for Nsight Systems; the tool here is built
//! from `tests/stub_nvtx/stub.c` with `cc` and logs every range, mark and thread name it gets.
//! `PROFILER=cuda` loads a stub `libcudart.so` (`tests/stub_cudart/stub.c`) with the real
//! `cudaProfilerStart`/`cudaProfilerStop` symbols.
//!
//! NVTX loads its tool once per process, on the first NVTX call, so every NVTX scenario runs in
//! a child process: this test binary, re-run with `--exact <test>` and `NVTX_SCENARIO` set.
#![cfg(feature = "nvtx")]

mod common;

use tracing_mllog::env::Env;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use tracing::info_span;
use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::profile::{ProfileError, ProfilerKind, SegmentProfiler};
use tracing_mllog::{train_step, MllogLayer, Output};
use tracing_subscriber::prelude::*;

// ---------------------------------------------------------------------------------------------
// Stubs

/// Compiles `tests/<dir>/stub.c` once per test process with these flags; returns the library.
fn compile(dir: &str, name: &str, flags: &[&str]) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let key = format!("{dir}/{name}/{}", flags.join(" "));
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.get(&key) {
        return p.clone();
    }
    let out_dir = std::env::temp_dir().join(format!(
        "tracing-mllog-nvtx-{}-{}",
        std::process::id(),
        built.len()
    ));
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(dir)
        .join("stub.c");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-o"])
        .arg(&out)
        .arg(&src)
        .args(flags)
        .args(["-ldl", "-lpthread"])
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed for {}", src.display());
    built.insert(key, out.clone());
    out
}

fn stub_nvtx() -> PathBuf {
    compile("stub_nvtx", "libstub_nvtx.so", &[])
}

/// A fresh copy of a stub libcudart.so in `dir` (a new file is a new library for the loader,
/// with its own depth counter and its own call log `<lib>.calls`).
fn fresh_cudart(dir: &Path, flags: &[&str]) -> (PathBuf, PathBuf) {
    let name = if flags.contains(&"-DSTUB_DRIVER") {
        "libcuda.so.1"
    } else {
        "libcudart.so"
    };
    let lib = dir.join(name);
    std::fs::copy(compile("stub_cudart", name, flags), &lib).unwrap();
    let calls = dir.join(format!("{name}.calls"));
    (lib, calls)
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn gettid() -> i64 {
    // SAFETY: gettid has no preconditions.
    i64::from(unsafe { libc::gettid() })
}

// ---------------------------------------------------------------------------------------------
// Child processes

/// Runs the test `name` of this binary in a child with the stub NVTX tool injected; the child
/// sees `NVTX_SCENARIO=name`. Returns the tool's log and the child's stdout.
fn run_child(name: &str, env: &[(&str, &str)]) -> (Vec<Vec<String>>, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("nvtx.calls");
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("NVTX_SCENARIO", name)
        .env("NVTX_INJECTION64_PATH", stub_nvtx())
        .env("STUB_NVTX_LOG", &log)
        .env("SCENARIO_DIR", dir.path())
        .env_remove("PROFILER")
        .env_remove("MLLOG_NVTX");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child {name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls = read_lines(&log)
        .into_iter()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect();
    (calls, stdout)
}

fn in_child(name: &str) -> bool {
    std::env::var("NVTX_SCENARIO").as_deref() == Ok(name)
}

/// A value the child prints as `name=value` on its stdout.
fn child_value(stdout: &str, name: &str) -> String {
    // The test harness prints the test's name on the same line.
    let tag = format!("{name}=");
    stdout
        .lines()
        .find_map(|l| l.split_once(&tag).map(|(_, v)| v))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or_else(|| panic!("{name} in {stdout}"))
        .to_owned()
}

/// An NVTX start/end range as the tool saw it.
#[derive(Debug, Clone)]
struct SeenRange {
    message: String,
    color: String,
    start_tid: String,
    end_tid: Option<String>,
    /// Positions of the start and end calls in the tool's log.
    start_at: usize,
    end_at: Option<usize>,
}

/// The ranges of `domain`, in start order; panics on an end without a start or a second end.
fn ranges(calls: &[Vec<String>], domain: &str) -> Vec<SeenRange> {
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    let mut out: Vec<SeenRange> = Vec::new();
    for (at, c) in calls.iter().enumerate() {
        match c[0].as_str() {
            "start" if c[2] == domain => {
                by_id.insert(&c[3], out.len());
                out.push(SeenRange {
                    message: c[4].clone(),
                    color: c[6].clone(),
                    start_tid: c[1].clone(),
                    end_tid: None,
                    start_at: at,
                    end_at: None,
                });
            }
            "end" if c[2] == domain => {
                let i = *by_id
                    .get(c[3].as_str())
                    .unwrap_or_else(|| panic!("end of range {} never started: {calls:?}", c[3]));
                assert!(out[i].end_at.is_none(), "range ended twice: {:?}", out[i]);
                out[i].end_tid = Some(c[1].clone());
                out[i].end_at = Some(at);
            }
            _ => {}
        }
    }
    out
}

/// Checks that the ranges nest: every range ends before any range started before it ends.
fn assert_nested(ranges: &[SeenRange]) {
    let mut events: Vec<(usize, bool, usize)> = Vec::new();
    for (i, r) in ranges.iter().enumerate() {
        events.push((r.start_at, true, i));
        events.push((r.end_at.expect("every range ends"), false, i));
    }
    events.sort();
    let mut stack = Vec::new();
    for (_, start, i) in events {
        if start {
            stack.push(i);
        } else {
            let top = stack.pop();
            assert_eq!(
                top,
                Some(i),
                "{:?} ends while {:?} is open",
                ranges[i].message,
                top.map(|t| &ranges[t].message)
            );
        }
    }
}

fn marks<'a>(calls: &'a [Vec<String>], domain: &str) -> Vec<&'a Vec<String>> {
    calls
        .iter()
        .filter(|c| c[0] == "mark" && c[2] == domain)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The NVTX sink through the layer

#[derive(Debug)]
struct EarlyStop;

fn block_that_returns_early() -> Result<(), EarlyStop> {
    let _b = info_span!("block").entered();
    let step = 90u64;
    let _s = train_step!(step).entered();
    Err(EarlyStop)?;
    unreachable!()
}

/// The training loop of the layer scenarios: an init, a run with three blocks (the second
/// returns early with `?`, the third panics inside a step), traced steps and an eval.
fn train() {
    {
        let _i = info_span!("init").entered();
    }
    let _run = info_span!("run").entered();
    {
        let _b = info_span!("block").entered();
        for step in 0..2u64 {
            let _s = train_step!(step).entered();
        }
        let _e = info_span!("eval").entered();
        tracing_mllog::mllog!(tracing_mllog::keys::EVAL_ACCURACY, 0.75);
    }
    assert!(block_that_returns_early().is_err());
    let panicked = std::panic::catch_unwind(|| {
        let _b = info_span!("block").entered();
        let step = 99u64;
        let _s = train_step!(step).entered();
        panic!("a step fails");
    });
    assert!(panicked.is_err());
}

#[test]
fn nvtx_sink_shows_the_run_as_nested_ranges_on_the_worker_thread() {
    const NAME: &str = "nvtx_sink_shows_the_run_as_nested_ranges_on_the_worker_thread";
    if in_child(NAME) {
        let (layer, mut guard) = MllogLayer::builder()
            .output(Output::Nowhere)
            .live_check(LivePolicy::Off)
            .global_batch_size(8)
            .trace_steps(true)
            .environment([("MLLOG_NVTX", "1")])
            .build()
            .unwrap();
        println!("training_tid={}", gettid());
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), train);
        let report = guard.shutdown();
        assert!(report.is_clean(), "{report}");
        return;
    }
    let (calls, stdout) = run_child(NAME, &[]);
    let training_tid = child_value(&stdout, "training_tid");
    assert_eq!(calls[0], ["init"], "{calls:?}");
    // The domain is created once, and every call uses it: no push/pop (per-thread) ranges.
    let domains: Vec<_> = calls.iter().filter(|c| c[0] == "domain").collect();
    assert_eq!(domains.len(), 1, "{calls:?}");
    assert_eq!(domains[0][2], "mllog");
    assert!(
        calls.iter().all(|c| c[0] != "push" && c[0] != "pop"),
        "{calls:?}"
    );
    assert!(
        calls
            .iter()
            .filter(|c| ["start", "end", "mark"].contains(&c[0].as_str()))
            .all(|c| c[2] == "mllog"),
        "{calls:?}"
    );

    let seen = ranges(&calls, "mllog");
    let messages: Vec<&str> = seen.iter().map(|r| r.message.as_str()).collect();
    let names: Vec<&str> = messages
        .iter()
        .map(|m| m.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "init",
            "run",
            "block",
            "train_step",
            "train_step",
            "eval",
            "block",
            "train_step",
            "block",
            "train_step"
        ],
        "{messages:?}"
    );
    // Balanced and nested, also for the block left with `?` and the one that panicked.
    assert_nested(&seen);
    // Metadata in the message.
    assert_eq!(messages[3], "train_step 0", "{messages:?}");
    assert_eq!(messages[7], "train_step 90", "{messages:?}");
    assert_eq!(messages[9], "train_step 99", "{messages:?}");
    assert_eq!(messages[2], "block · samples 0", "{messages:?}");
    assert_eq!(messages[5], "eval · samples 16", "{messages:?}");
    assert_eq!(seen[1].color, "4caf50", "the run is green");
    // Points are marks, with numbers as payloads.
    let acc = marks(&calls, "mllog")
        .into_iter()
        .find(|m| m[3].starts_with("eval_accuracy"))
        .unwrap_or_else(|| panic!("{calls:?}"));
    assert!(acc[3].starts_with("eval_accuracy 0.75"), "{acc:?}");
    assert_eq!(acc[4], "d:0.75", "{acc:?}");
    let mark_at = calls.iter().position(|c| std::ptr::eq(c, acc)).unwrap();
    assert!(
        seen[5].start_at < mark_at && mark_at < seen[5].end_at.unwrap(),
        "eval_accuracy inside its eval"
    );
    // All of it from one thread, the pipeline's worker (named on the timeline), never the
    // training thread: the training thread makes no NVTX call.
    let named = calls
        .iter()
        .find(|c| c[0] == "thread")
        .unwrap_or_else(|| panic!("{calls:?}"));
    assert_eq!(named[3], "mllog worker");
    let worker = &named[2];
    for r in &seen {
        assert_eq!(&r.start_tid, worker, "{r:?}");
        assert_eq!(r.end_tid.as_ref(), Some(worker), "{r:?}");
    }
    assert_ne!(worker, &training_tid);
}

#[test]
fn nvtx_sink_ends_ranges_left_open_at_shutdown() {
    const NAME: &str = "nvtx_sink_ends_ranges_left_open_at_shutdown";
    if in_child(NAME) {
        // Added by hand and asked for by the environment: still one sink.
        let (layer, mut guard) = MllogLayer::builder()
            .output(Output::Nowhere)
            .live_check(LivePolicy::Off)
            .sink(tracing_mllog::sink::NvtxSink::new())
            .environment([("MLLOG_NVTX", "1")])
            .build()
            .unwrap();
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            // An aborted run: spans that never close.
            std::mem::forget(info_span!("run").entered());
            std::mem::forget(info_span!("block").entered());
        });
        let report = guard.shutdown();
        println!("report={}", report.is_clean());
        return;
    }
    let (calls, _) = run_child(NAME, &[]);
    let seen = ranges(&calls, "mllog");
    let names: Vec<&str> = seen.iter().map(|r| r.message.as_str()).collect();
    assert_eq!(names.len(), 2, "{calls:?}");
    assert!(
        names[0].starts_with("run") && names[1].starts_with("block"),
        "{names:?}"
    );
    // Ended at shutdown, innermost first.
    assert_nested(&seen);
}

#[test]
fn nvtx_sink_pairs_records_without_ids_by_name() {
    const NAME: &str = "nvtx_sink_pairs_records_without_ids_by_name";
    if in_child(NAME) {
        use tracing_mllog::record::{EventType, Metadata, Record, Value};
        use tracing_mllog::sink::{NvtxSink, Sink};
        // Records parsed from a log carry no interval ids: pairs by name, innermost first.
        let rec = |t: EventType, key: &str, fields: &[(&str, i64)]| {
            let mut md = Metadata::default();
            for (k, v) in fields {
                md.set(k.to_string(), Value::Int(i128::from(*v)));
            }
            Record::event(key.to_owned(), Value::Null)
                .with_event_type(t)
                .with_metadata(md)
        };
        let mut sink = NvtxSink::new();
        for r in [
            rec(EventType::IntervalStart, "epoch_start", &[("epoch_num", 1)]),
            rec(EventType::IntervalStart, "epoch_start", &[("epoch_num", 2)]),
            rec(EventType::IntervalEnd, "epoch_stop", &[]),
            rec(EventType::IntervalEnd, "epoch_stop", &[]),
            // An end without a start: a mark, not a dangling end.
            rec(
                EventType::IntervalEnd,
                "block_stop",
                &[("first_epoch_num", 3)],
            ),
        ] {
            sink.write(&r.into()).unwrap();
        }
        assert_eq!(sink.open_ranges(), 0);
        return;
    }
    let (calls, _) = run_child(NAME, &[]);
    let seen = ranges(&calls, "mllog");
    let names: Vec<&str> = seen.iter().map(|r| r.message.as_str()).collect();
    assert_eq!(names, ["epoch 1", "epoch 2"], "{calls:?}");
    assert_nested(&seen);
    let m = marks(&calls, "mllog");
    assert_eq!(m.len(), 1, "{calls:?}");
    assert_eq!(m[0][3], "block_stop · first_epoch 3");
}

#[test]
fn without_mllog_nvtx_no_nvtx_call_is_made() {
    const NAME: &str = "without_mllog_nvtx_no_nvtx_call_is_made";
    if in_child(NAME) {
        let (layer, mut guard) = MllogLayer::builder()
            .output(Output::Nowhere)
            .live_check(LivePolicy::Off)
            .trace_steps(true)
            .environment([("MLLOG_NVTX", "0")])
            .build()
            .unwrap();
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), train);
        guard.shutdown();
        return;
    }
    let (calls, _) = run_child(NAME, &[]);
    // NVTX never initialised: the tool was not even loaded.
    assert!(calls.is_empty(), "{calls:?}");
}

#[test]
fn a_bad_mllog_nvtx_is_an_error_naming_it() {
    let err = MllogLayer::builder()
        .output(Output::Nowhere)
        .environment([("MLLOG_NVTX", "nsys")])
        .build::<tracing_subscriber::Registry>()
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("MLLOG_NVTX=\"nsys\""), "{err}");
}

// ---------------------------------------------------------------------------------------------
// PROFILER=cuda

/// The stub's calls, without the load line: `(call, tid, depth after it, code)`.
fn cuda_calls(path: &Path) -> Vec<(String, String, i32, i32)> {
    read_lines(path)
        .into_iter()
        .filter(|l| !l.starts_with("load "))
        .map(|l| {
            let p: Vec<&str> = l.split(' ').collect();
            (
                p[0].to_owned(),
                p[1].to_owned(),
                p[2].parse().unwrap(),
                p[3].parse().unwrap(),
            )
        })
        .collect()
}

/// Steps, blocks and evals with warmup before the run; `note` marks the steps in the log.
fn profiled_loop(note: &dyn Fn(&str)) {
    {
        let _w = info_span!("warmup").entered();
        for _ in 0..3 {
            let _s = info_span!("train_step").entered();
            note("warmup");
        }
    }
    let _run = info_span!("run").entered();
    for b in 0..3 {
        let _b = info_span!("block").entered();
        for s in 0..2 {
            let _s = info_span!("train_step").entered();
            // A nested span of the same name belongs to the outer occurrence.
            let _inner = info_span!("train_step").entered();
            note(&format!("step{}", b * 2 + s + 1));
        }
        let _e = info_span!("eval").entered();
    }
}

fn run_profiled(env: &[(&str, &str)], calls: &Path) -> tracing_mllog::profile::ProfileReport {
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .live_check(LivePolicy::Off)
        .global_batch_size(8)
        .environment(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .build()
        .unwrap();
    let note = |line: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(calls)
            .unwrap();
        writeln!(f, "{line} {} 0 0", gettid()).unwrap();
    };
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        profiled_loop(&note)
    });
    let report = guard.shutdown();
    assert!(report.is_clean(), "{report}");
    guard
        .detail::<tracing_mllog::profile::ProfileReport>()
        .expect("profiling is on")
}

#[test]
fn profiler_cuda_starts_and_stops_exactly_around_the_nth_real_step() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, calls) = fresh_cudart(dir.path(), &[]);
    let report = run_profiled(
        &[
            ("PROFILER", "cuda"),
            ("PROFILE_SEGMENT", "train_step:2"),
            ("CUDA_PROFILER_LIB", lib.to_str().unwrap()),
        ],
        &calls,
    );
    let log = cuda_calls(&calls);
    let names: Vec<&str> = log.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "warmup",
            "warmup",
            "warmup",
            "step1",
            "cudaProfilerStart",
            "step2",
            "cudaProfilerStop",
            "step3",
            "step4",
            "step5",
            "step6"
        ]
    );
    // Called on the training thread, balanced.
    assert!(log.iter().all(|c| c.1 == log[0].1), "{log:?}");
    assert_eq!(log[4].2, 1);
    assert_eq!(log[6].2, 0);
    assert_eq!(report.profiler, ProfilerKind::Cuda);
    assert_eq!(report.rpd_file, None);
    assert_eq!(
        (
            report.occurrences,
            report.starts,
            report.stops,
            report.flushes
        ),
        (2, 1, 1, 0)
    );
    assert_eq!((report.active, report.errors), (false, 0));
}

#[test]
fn profiler_cuda_repeats_blocks_and_evals_like_rpd() {
    for (segment, repeat, expected) in [
        // Blocks 2 and 3 (PROFILE_REPEAT=all from the 2nd).
        (
            "block:2",
            "all",
            vec![
                "step2",
                "cudaProfilerStart",
                "step3",
                "step4",
                "cudaProfilerStop",
                "cudaProfilerStart",
                "step5",
                "step6",
                "cudaProfilerStop",
            ],
        ),
        // The first two evals.
        (
            "eval",
            "2",
            vec![
                "step2",
                "cudaProfilerStart",
                "cudaProfilerStop",
                "step3",
                "step4",
                "cudaProfilerStart",
                "cudaProfilerStop",
                "step5",
                "step6",
            ],
        ),
        // The whole timed run, never the warmup.
        (
            "train",
            "1",
            vec![
                "cudaProfilerStart",
                "step1",
                "step2",
                "step3",
                "step4",
                "step5",
                "step6",
                "cudaProfilerStop",
            ],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (lib, calls) = fresh_cudart(dir.path(), &[]);
        run_profiled(
            &[
                ("PROFILER", "CUDA"),
                ("PROFILE_SEGMENT", segment),
                ("PROFILE_REPEAT", repeat),
                ("CUDA_PROFILER_LIB", lib.to_str().unwrap()),
            ],
            &calls,
        );
        let log = cuda_calls(&calls);
        // Warmup is never profiled; the first step shows only for the whole run.
        let names: Vec<&str> = log
            .iter()
            .map(|c| c.0.as_str())
            .filter(|n| *n != "warmup" && (*n != "step1" || segment == "train"))
            .collect();
        assert_eq!(names, expected, "{segment} x {repeat}");
        assert!(log.iter().all(|c| c.0 != "UNBALANCED"), "{log:?}");
    }
}

#[test]
fn profiler_cuda_uses_the_driver_api_when_that_is_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let (lib, calls) = fresh_cudart(dir.path(), &["-DSTUB_DRIVER"]);
    let report = run_profiled(
        &[
            ("PROFILER", "cuda"),
            ("PROFILE_SEGMENT", "block:3"),
            ("CUDA_PROFILER_LIB", lib.to_str().unwrap()),
        ],
        &calls,
    );
    let names: Vec<String> = cuda_calls(&calls).into_iter().map(|c| c.0).collect();
    let at = |s: &str| names.iter().position(|n| n == s).unwrap();
    assert!(at("step4") < at("cuProfilerStart") && at("cuProfilerStart") < at("step5"));
    assert!(at("step6") < at("cuProfilerStop"));
    assert_eq!((report.starts, report.stops), (1, 1));
}

#[test]
fn a_failing_cuda_profiler_start_is_reported_and_never_stopped() {
    let dir = tempfile::tempdir().unwrap();
    // cudaErrorInitializationError (3), as without a usable device.
    let (lib, calls) = fresh_cudart(dir.path(), &["-DSTUB_FAIL=3"]);
    let report = run_profiled(
        &[
            ("PROFILER", "cuda"),
            ("PROFILE_SEGMENT", "train_step:1"),
            ("CUDA_PROFILER_LIB", lib.to_str().unwrap()),
        ],
        &calls,
    );
    let names: Vec<String> = cuda_calls(&calls).into_iter().map(|c| c.0).collect();
    assert!(names.contains(&"cudaProfilerStart".to_owned()), "{names:?}");
    assert!(!names.contains(&"cudaProfilerStop".to_owned()), "{names:?}");
    assert_eq!((report.starts, report.stops, report.errors), (1, 0, 1));
    assert!(!report.active);
    let e = report.last_error.unwrap();
    assert!(e.contains("cudaProfilerStart returned error 3"), "{e}");
}

#[test]
fn a_missing_cuda_library_is_an_error_naming_it_and_the_variable() {
    let err = SegmentProfiler::from_env(&Env::from_map([
        ("PROFILER", "cuda"),
        ("CUDA_PROFILER_LIB", "/nonexistent/libcudart.so"),
    ]))
    .unwrap_err();
    assert!(matches!(err, ProfileError::Library { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("PROFILER=cuda")
            && text.contains("/nonexistent/libcudart.so")
            && text.contains("CUDA_PROFILER_LIB"),
        "{text}"
    );
    // Through the builder: the run does not start.
    let err = MllogLayer::builder()
        .output(Output::Nowhere)
        .environment([
            ("PROFILER", "cuda"),
            ("CUDA_PROFILER_LIB", "/nonexistent/libcudart.so"),
        ])
        .build::<tracing_subscriber::Registry>()
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("libcudart.so"), "{err}");
    // A library without the API.
    let dir = tempfile::tempdir().unwrap();
    let (lib, _) = fresh_cudart(dir.path(), &["-DSTUB_NO_STOP"]);
    let err = SegmentProfiler::builder()
        .profiler(ProfilerKind::Cuda)
        .library(&lib)
        .build()
        .unwrap_err();
    match &err {
        ProfileError::Symbol { symbol, .. } => assert_eq!(*symbol, "cudaProfilerStop"),
        other => panic!("{other}"),
    }
    // A typo in PROFILER is an error, not profiling silently off.
    let err = SegmentProfiler::from_env(&Env::from_map([("PROFILER", "cdua")])).unwrap_err();
    assert!(err.to_string().contains("`cuda`"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// The quickstart (built with --all-features)

fn run_quickstart(dir: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(common::example_exe("quickstart"));
    cmd.env("MLLOG_OUTPUT_FILE", dir.join("result_0.txt"))
        .current_dir(dir);
    for var in tracing_mllog::env::SUBMISSION_VARIABLES {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn quickstart_under_the_nvtx_tool_and_the_cuda_profiler() {
    let dir = tempfile::tempdir().unwrap();
    let nvtx_log = dir.path().join("nvtx.calls");
    let (lib, calls) = fresh_cudart(dir.path(), &[]);
    run_quickstart(
        dir.path(),
        &[
            ("MLLOG_NVTX", "1"),
            ("NVTX_INJECTION64_PATH", stub_nvtx().to_str().unwrap()),
            ("STUB_NVTX_LOG", nvtx_log.to_str().unwrap()),
            ("PROFILER", "cuda"),
            ("PROFILE_SEGMENT", "block:2"),
            ("CUDA_PROFILER_LIB", lib.to_str().unwrap()),
        ],
    );
    let nv: Vec<Vec<String>> = read_lines(&nvtx_log)
        .into_iter()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect();
    let seen = ranges(&nv, "mllog");
    assert_nested(&seen);
    let count = |name: &str| {
        seen.iter()
            .filter(|r| r.message.split(' ').next() == Some(name))
            .count()
    };
    assert_eq!((count("init"), count("run")), (1, 1), "{seen:?}");
    assert!(count("block") >= 2 && count("eval") >= 2, "{seen:?}");
    assert!(
        marks(&nv, "mllog")
            .iter()
            .any(|m| m[3].starts_with("eval_accuracy")),
        "{nv:?}"
    );
    let cuda: Vec<String> = cuda_calls(&calls).into_iter().map(|c| c.0).collect();
    assert_eq!(cuda, ["cudaProfilerStart", "cudaProfilerStop"]);
}
