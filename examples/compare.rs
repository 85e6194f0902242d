//! The comparison command: measures, in one run and on the same workloads, our layer against a
//! bare `Registry`, tracing-subscriber's JSON `fmt` layer and Python `mlperf_logging.mllog`,
//! plus end-to-end throughput to a file, memory under a burst, `mllog check` against the
//! official checker, `mllog verify` (the whole submission review) against the official
//! package_checker + result_summarizer, with its peak memory on a large submission, on a whole
//! round (`MLLOG_COMPARE_ROUND`, any folder of submitter folders, or the corpus's v5.0 round)
//! against the official review script's steps on each of its submitters, and what
//! `mllog watch` costs following a log as it is written, and `mllog check --rules` (the rule
//! engine on the installed package's rule files) against the official checker. Prints a table
//! and one `ratio:` line per comparison; with `--markdown`, the same as a Markdown table; with
//! `--write FILE` that table also replaces the `compare` block of FILE (docs/performance.md),
//! and with `--check FILE` the block must have the same rows (wall clock does not repeat, so
//! the figures are not compared).
//!
//! `cargo run --release --all-features --example compare` (Python comparisons need
//! `MLLOG_PYTHON`, which `scripts/test` and `.ci/run` set; the verify case the corpus through
//! `MLLOG_CORPUS`; the watch case the release `mllog` binary beside the example, from `cargo
//! build --release -p mllog-cli`; without them they are reported as skipped). `-- --only-verify`,
//! `-- --only-round`, `-- --only-watch` and `-- --only-engine` run one of those cases alone. Wall-clock numbers on a shared machine
//! are indicative; the instruction budgets (`examples/budgets.rs`) are the repeatable measure.

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use tracing::{info_span, Dispatch};
use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::{mllog, train_step, MllogLayer, Output, Pipeline};
use tracing_subscriber::prelude::*;

mod engine_cost;
#[path = "../benches/support/perf_doc.rs"]
mod perf_doc;
mod round_cost;
#[path = "../benches/support/stacks.rs"]
mod support;
mod watch_cost;

const OPS: u64 = 200_000;

fn main() {
    if let [_, cmd, dir] = &std::env::args().collect::<Vec<_>>()[..] {
        if cmd == "e2e" {
            // A fresh process, so that its peak RSS is the burst's own.
            let (rate, growth_mb) = end_to_end(std::path::Path::new(dir));
            println!("{rate} {growth_mb}");
            return;
        }
        if cmd == "verify-round-rss" {
            // A fresh process, so that its peak RSS is the round review's own.
            let before = peak_rss_kb();
            round_cost::review_round(std::path::Path::new(dir));
            println!("{}", peak_rss_kb().saturating_sub(before) as f64 / 1024.0);
            return;
        }
        if cmd == "verify-rss" {
            // A fresh process, so that its peak RSS is the review's own.
            println!("{}", verify_rss_child(std::path::Path::new(dir)));
            return;
        }
    }
    let dir = std::env::temp_dir().join(format!("mllog-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut rows: Vec<(String, f64, &'static str)> = Vec::new();
    if std::env::args().any(|a| a == "--only-watch") {
        // Just `mllog watch` following a log (section 6), beside one Python event's cost.
        let (mut rows, mut ratios) = (Vec::new(), Vec::new());
        watch_cost::watch_case(&dir, python_mllog_event_ns(&dir), &mut rows, &mut ratios);
        print_plain(&rows, &ratios);
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    if std::env::args().any(|a| a == "--only-round") {
        // Just the review of a whole round.
        let mut ratios = Vec::new();
        round_cost::round_case(&dir, python(), &mut rows, &mut ratios);
        print_plain(&rows, &ratios);
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    if std::env::args().any(|a| a == "--only-engine") {
        // Just the rule engine against the official checker.
        let mut ratios = Vec::new();
        let engine = engine_rows(&dir, &mut rows, &mut ratios);
        print_plain(&rows, &ratios);
        let _ = std::fs::remove_dir_all(&dir);
        engine_cost::hold_target(engine);
        return;
    }
    if std::env::args().any(|a| a == "--only-verify") {
        // Just the submission review (section 5), e.g. after a change to it.
        let mut ratios = Vec::new();
        verify_case(&dir, &mut rows, &mut ratios);
        round_cost::round_case(&dir, python(), &mut rows, &mut ratios);
        print_plain(&rows, &ratios);
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }

    // `mllog watch` (section 6) is measured first, while this process is small: the peak RSS
    // that wait4 reports for a child spawned through posix_spawn (a vfork) starts from its
    // parent's, which the burst and verify cases below grow to hundreds of MB.
    let python_event = python_mllog_event_ns(&dir);
    let (mut watch_rows, mut watch_ratios) = (Vec::new(), Vec::new());
    watch_cost::watch_case(&dir, python_event, &mut watch_rows, &mut watch_ratios);

    // 1. Calling-thread cost: event and non-emitting train_step span.
    let stacks = support::stacks(MllogLayer::builder().global_batch_size(8));
    let mut event_ns = Vec::new();
    let mut span_ns = Vec::new();
    let mut child_ns = Vec::new();
    let mut async_ns = Vec::new();
    for (name, dispatch, _) in &stacks {
        let e = tracing::dispatcher::with_default(dispatch, || {
            per_op(|i| mllog!("tracked_stats", 1.25, samples_count = i, step = i))
        });
        let s = tracing::dispatcher::with_default(dispatch, || {
            let _run = info_span!("run").entered();
            per_op(|i| {
                let _s = train_step!(step = i, samples = 8u64).entered();
            })
        });
        let c = tracing::dispatcher::with_default(dispatch, || {
            let _run = info_span!("run").entered();
            per_op(|i| {
                let _s = info_span!("train_step", step = i, samples = 8u64).entered();
            })
        });
        rows.push((format!("event (3 fields), {name}"), e, "ns/op"));
        rows.push((format!("train_step! span (2 fields), {name}"), s, "ns/op"));
        rows.push((
            format!("train_step span (2 fields), child of run, {name}"),
            c,
            "ns/op",
        ));
        let a = tracing::dispatcher::with_default(dispatch, || {
            let _run = info_span!("run").entered();
            per_op(support::async_step)
        });
        rows.push((
            format!("async step (instrumented, polled twice), {name}"),
            a,
            "ns/op",
        ));
        async_ns.push((*name, a));
        event_ns.push((*name, e));
        span_ns.push((*name, s));
        child_ns.push((*name, c));
    }
    drop(stacks);
    if let Some(p) = python_event {
        rows.push(("event, Python mlperf_logging.mllog".into(), p, "ns/op"));
    }

    // 1b. The same event logged the way a training loop logs it: spaced out, so the worker
    //     is asleep when it arrives. Default (the worker drains on its `max_delay` timer) vs
    //     a wake-up per record (`max_delay(0)`, what a channel receiver would need).
    let spaced: Vec<(&str, f64)> = [
        ("mllog", Duration::from_millis(2)),
        ("mllog, wake per record", Duration::ZERO),
    ]
    .into_iter()
    .map(|(name, delay)| {
        let (layer, guard) = MllogLayer::builder()
            .output(Output::file(dir.join("spaced.log")))
            .pipeline(Pipeline::default().max_delay(delay))
            .live_check(LivePolicy::Off)
            .build()
            .expect("layer");
        let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
        let ns = tracing::dispatcher::with_default(&dispatch, spaced_event_ns);
        drop(guard);
        (name, ns)
    })
    .collect();
    for (name, ns) in &spaced {
        rows.push((format!("event 200 µs apart, {name}"), *ns, "ns/op"));
    }

    // 2. End to end: sustained records/s into a real file, lossless, and memory under a burst.
    let out = Command::new(std::env::current_exe().expect("own path"))
        .arg("e2e")
        .arg(&dir)
        .output()
        .expect("end-to-end child");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap_or(f64::NAN));
    let (rate, rss_growth_mb) = (
        parts.next().unwrap_or(f64::NAN),
        parts.next().unwrap_or(f64::NAN),
    );
    rows.push((
        "end to end to a file (worker included)".into(),
        rate,
        "records/s",
    ));
    rows.push((
        "peak RSS growth, 10M-record burst".into(),
        rss_growth_mb,
        "MB",
    ));

    // 3. The same training-shaped work with each sink on: the calling thread's cost.
    let sinks = sink_costs(&dir);
    for (name, ns) in &sinks {
        rows.push((format!("step + event, {name}"), *ns, "ns/op"));
    }

    // 4. mllog check vs the official checker on the same file.
    let (ours_mb_s, official_mb_s) = check_speed(&dir);
    rows.push(("mllog check".into(), ours_mb_s, "MB/s"));
    if let Some(o) = official_mb_s {
        rows.push(("official compliance checker".into(), o, "MB/s"));
    }

    let get = |v: &[(&str, f64)], n: &str| v.iter().find(|(k, _)| *k == n).map(|(_, x)| *x);
    let (ours_e, reg_e, json_e) = (
        get(&event_ns, "mllog").unwrap(),
        get(&event_ns, "registry").unwrap(),
        get(&event_ns, "fmt_json").unwrap(),
    );
    let (ours_s, reg_s, json_s) = (
        get(&span_ns, "mllog").unwrap(),
        get(&span_ns, "registry").unwrap(),
        get(&span_ns, "fmt_json").unwrap(),
    );
    let mut ratios: Vec<(String, String)> = vec![
        (
            "async step mllog / registry".into(),
            format!(
                "{:.2}",
                get(&async_ns, "mllog").unwrap() / get(&async_ns, "registry").unwrap()
            ),
        ),
        (
            "event mllog / registry".into(),
            format!("{:.2}", ours_e / reg_e),
        ),
        (
            "event fmt_json / mllog".into(),
            format!("{:.2}", json_e / ours_e),
        ),
        (
            "span mllog / registry".into(),
            format!("{:.2}", ours_s / reg_s),
        ),
        (
            "span fmt_json / mllog".into(),
            format!("{:.2}", json_s / ours_s),
        ),
        (
            "child span mllog / registry".into(),
            format!(
                "{:.2}",
                get(&child_ns, "mllog").unwrap() / get(&child_ns, "registry").unwrap()
            ),
        ),
        (
            "spaced event, wake per record / mllog".into(),
            format!("{:.1}", spaced[1].1 / spaced[0].1),
        ),
        (
            "event python mllog / mllog".into(),
            python_event.map_or(skipped(), |p| format!("{:.1}", p / ours_e)),
        ),
    ];
    let base = sinks[0].1;
    for (name, ns) in &sinks[1..] {
        ratios.push((format!("{name} / file only"), format!("{:.2}", ns / base)));
    }
    ratios.push((
        "check mllog / official".into(),
        official_mb_s.map_or(skipped(), |o| format!("{:.1}", ours_mb_s / o)),
    ));

    // 5. mllog verify vs the official package_checker + result_summarizer, and its memory.
    verify_case(&dir, &mut rows, &mut ratios);
    round_cost::round_case(&dir, python(), &mut rows, &mut ratios);

    // 6. mllog watch following a log as it is written: CPU per record, lag, memory.
    //    (measured at the start, see there)
    rows.append(&mut watch_rows);
    ratios.append(&mut watch_ratios);

    // 7. The rule engine (`mllog check --rules`) against the official checker, same logs.
    let engine = engine_rows(&dir, &mut rows, &mut ratios);

    let args: Vec<String> = std::env::args().collect();
    let doc = perf_doc::doc_action(&args);
    if doc.is_some() || args.iter().any(|a| a == "--markdown") {
        // docs/performance.md's results table.
        let mut table = String::from("| measurement | value |\n|---|---:|\n");
        for (name, v, unit) in &rows {
            table.push_str(&format!("| {name} | {v:.1} {unit} |\n"));
        }
        for (name, r) in &ratios {
            table.push_str(&format!("| ratio: {name} | {r} |\n"));
        }
        print!("{table}");
        // Wall clock does not repeat: the check holds the rows, not the figures.
        let result = match doc {
            Some(perf_doc::DocAction::Write(file)) => {
                perf_doc::write_block(&file, "compare", &table)
            }
            Some(perf_doc::DocAction::Check(file)) => {
                perf_doc::check_block(&file, "compare", &table, None)
            }
            None => Ok(()),
        };
        if let Err(e) = result {
            eprintln!("{e}");
            std::process::exit(1);
        }
    } else {
        println!("{:<48} {:>16}", "measurement", "value");
        print_plain(&rows, &ratios);
    }
    let _ = std::fs::remove_dir_all(&dir);
    // Held after the table is printed, so that a miss still shows every figure.
    engine_cost::hold_target(engine);
}

/// The rule engine's rows and ratios (section 7); the smallest ratio, `None` when skipped.
fn engine_rows(
    dir: &std::path::Path,
    rows: &mut Vec<(String, f64, &'static str)>,
    ratios: &mut Vec<(String, String)>,
) -> Option<f64> {
    engine_cost::engine_case(dir, watch_cost::mllog_bin(), python(), rows, ratios)
}

/// The rows and the ratios as plain text, one a line.
fn print_plain(rows: &[(String, f64, &str)], ratios: &[(String, String)]) {
    for (name, v, unit) in rows {
        println!("{name:<48} {v:>12.1} {unit}");
    }
    for (name, r) in ratios {
        println!("ratio: {name} = {r}");
    }
}

/// Mean cost of one event when events come 200 µs apart (the worker sleeps between them);
/// the gaps are spun, not slept, so that the calling thread stays on its core.
fn spaced_event_ns() -> f64 {
    let n = 5_000u64;
    let mut total = Duration::ZERO;
    for i in 0..n {
        let t = Instant::now();
        mllog!("tracked_stats", 1.25, samples_count = i, step = i);
        total += t.elapsed();
        let until = Instant::now() + Duration::from_micros(200);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
    total.as_nanos() as f64 / n as f64
}

fn skipped() -> String {
    "skipped (set MLLOG_PYTHON)".into()
}

/// Mean nanoseconds per call of `f` over `OPS` calls, after a warm-up.
fn per_op(mut f: impl FnMut(u64)) -> f64 {
    for i in 0..OPS / 10 {
        f(i);
    }
    let t = Instant::now();
    for i in 0..OPS {
        f(i);
    }
    t.elapsed().as_nanos() as f64 / OPS as f64
}

/// Per iteration of a training loop's logging (a counted `train_step` span and an event with
/// three fields), on the calling thread, with the MLLOG file alone and with each optional sink
/// added (those whose feature is on).
fn sink_costs(dir: &std::path::Path) -> Vec<(String, f64)> {
    type Add = Box<dyn FnOnce(tracing_mllog::Builder) -> tracing_mllog::Builder>;
    // Only the optional sinks' blocks below add to it.
    #[cfg_attr(
        not(any(feature = "rpd", feature = "otel-sdk", feature = "object-store")),
        allow(unused_mut)
    )]
    let mut configs: Vec<(String, Add)> = vec![("file only".into(), Box::new(|b| b))];
    #[cfg(feature = "rpd")]
    {
        use tracing_mllog::sink::{RpdConfig, RpdSink};
        let (rpd, rpd2) = (dir.join("compare.rpd"), dir.join("compare-steps.rpd"));
        configs.push((
            "file + RPD".into(),
            Box::new(move |b| b.sink(RpdSink::new(RpdConfig::new(rpd)))),
        ));
        configs.push((
            "file + RPD + traced steps".into(),
            Box::new(move |b| b.sink(RpdSink::new(RpdConfig::new(rpd2))).trace_steps(true)),
        ));
    }
    #[cfg(feature = "otel-sdk")]
    for traced in [false, true] {
        let name = if traced {
            "file + OTel + traced steps"
        } else {
            "file + OTel"
        };
        configs.push((
            name.into(),
            Box::new(move |b| {
                let sink = tracing_mllog::sink::OtelSink::with_span_exporter(
                    NullExporter,
                    tracing_mllog::sink::OtelConfig::new(),
                )
                .expect("otel sink");
                b.sink_on_every_rank(sink).trace_steps(traced)
            }),
        ));
    }
    #[cfg(feature = "object-store")]
    {
        use std::sync::Arc;
        use tracing_mllog::sink::{UploadConfig, UploadSink};
        let remote = dir.join("remote");
        std::fs::create_dir_all(&remote).expect("remote dir");
        let url = format!("file://{}/", remote.display());
        configs.push((
            "file + upload (healthy)".into(),
            Box::new(move |b| {
                b.sink(UploadSink::new(
                    UploadConfig::new(&url)
                        .expect("url")
                        .interval(Duration::from_millis(50)),
                ))
            }),
        ));
        configs.push((
            "file + upload (slow store)".into(),
            Box::new(|b| {
                use object_store::throttle::{ThrottleConfig, ThrottledStore};
                let t = ThrottleConfig {
                    wait_put_per_call: Duration::from_secs(2),
                    ..ThrottleConfig::default()
                };
                let store = ThrottledStore::new(object_store::memory::InMemory::new(), t);
                b.sink(UploadSink::new(UploadConfig::from_store(
                    Arc::new(store),
                    "compare/",
                )))
            }),
        ));
        configs.push((
            "file + upload (dead endpoint)".into(),
            Box::new(|b| {
                b.sink(UploadSink::new(
                    UploadConfig::new("s3://compare-bucket/run/")
                        .expect("url")
                        .read_provider_env(false)
                        .option("aws_endpoint", "http://127.0.0.1:1")
                        .option("aws_allow_http", "true")
                        .option("aws_access_key_id", "compare")
                        .option("aws_secret_access_key", "compare-secret")
                        .option("aws_region", "us-east-1")
                        .deadline(Duration::from_secs(1)),
                ))
            }),
        ));
    }
    let mut out = Vec::new();
    for (i, (name, add)) in configs.into_iter().enumerate() {
        let builder = MllogLayer::builder()
            .output(Output::file(dir.join(format!("sinks-{i}.log"))))
            .global_batch_size(8)
            .live_check(LivePolicy::Off)
            .pipeline(Pipeline::default().shutdown_timeout(Duration::from_secs(3)));
        let (layer, guard) = add(builder).build().expect("layer");
        let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
        // Bursts that fit the channel, drained between bursts (untimed): the training thread's
        // own cost when the worker keeps up on average, as it does when steps take
        // milliseconds. Back to back without pause, the slowest sink sets the pace instead.
        let ns = tracing::dispatcher::with_default(&dispatch, || {
            let _run = info_span!("run").entered();
            let _block = info_span!("block").entered();
            let mut total = Duration::ZERO;
            let (bursts, per_burst) = (100u64, 1000u64);
            for b in 0..bursts {
                let t = Instant::now();
                for i in 0..per_burst {
                    let i = b * per_burst + i;
                    let _s = info_span!("train_step", step = i, samples = 8u64).entered();
                    mllog!("tracked_stats", 1.25, samples_count = i, step = i);
                }
                total += t.elapsed();
                guard.flush(Duration::from_secs(30));
            }
            total.as_nanos() as f64 / (bursts * per_burst) as f64
        });
        drop(dispatch);
        drop(guard);
        out.push((name, ns));
    }
    out
}

#[cfg(feature = "otel-sdk")]
#[derive(Debug)]
struct NullExporter;

#[cfg(feature = "otel-sdk")]
impl opentelemetry_sdk::trace::SpanExporter for NullExporter {
    fn export(
        &self,
        _batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> impl std::future::Future<Output = opentelemetry_sdk::error::OTelSdkResult> + Send {
        std::future::ready(Ok(()))
    }
}

fn python() -> Option<String> {
    std::env::var("MLLOG_PYTHON").ok()
}

fn python_mllog_event_ns(dir: &std::path::Path) -> Option<f64> {
    let py = python()?;
    let script = format!(
        "import time, mlperf_logging.mllog as m\n\
         m.config(filename={:?})\n\
         l = m.get_mllogger()\n\
         l.logger.handlers = [h for h in l.logger.handlers if h.__class__.__name__ == 'FileHandler']\n\
         n = 20000\n\
         t = time.perf_counter()\n\
         for i in range(n):\n    l.event('tracked_stats', 1.25, metadata={{'samples_count': i, 'step': i}})\n\
         print((time.perf_counter() - t) / n * 1e9)\n",
        dir.join("python.log").display().to_string()
    );
    let out = Command::new(py).args(["-c", &script]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn end_to_end(dir: &std::path::Path) -> (f64, f64) {
    let path = dir.join("e2e.log");
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::file(&path))
        .live_check(LivePolicy::Off)
        .build()
        .expect("layer");
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    let rss_before = peak_rss_kb();
    let n = 10_000_000u64;
    let t = Instant::now();
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..n {
            mllog!("tracked_stats", 1.25, samples_count = i, step = i);
        }
    });
    let report = guard.shutdown();
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(report.records, n, "lossless: {report}");
    let growth_mb = peak_rss_kb().saturating_sub(rss_before) as f64 / 1024.0;
    let _ = std::fs::remove_file(&path);
    (n as f64 / secs, growth_mb)
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn check_speed(dir: &std::path::Path) -> (f64, Option<f64>) {
    // A long, compliant log: the built-in example plus many tracked_stats lines.
    let base = tracing_mllog::compliance::example_log(
        tracing_mllog::Ruleset::V6_1_0,
        tracing_mllog::Benchmark::Llama2_70bLora,
        tracing_mllog::Division::Closed,
    )
    .expect("example log");
    let path = dir.join("check.log");
    let mut f = std::fs::File::create(&path).expect("file");
    f.write_all(base.as_bytes()).expect("write");
    let line = r#":::MLLOG {"namespace": "", "time_ms": 1767225600000, "event_type": "POINT_IN_TIME", "key": "tracked_stats", "value": {"throughput": 2.5}, "metadata": {"file": "train.py", "lineno": 1, "step": 1}}"#;
    for _ in 0..200_000 {
        writeln!(f, "{line}").expect("write");
    }
    drop(f);
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
    let t = Instant::now();
    let text = std::fs::read_to_string(&path).expect("read");
    let report = tracing_mllog::compliance::check_text(tracing_mllog::Ruleset::V6_1_0, &text);
    std::hint::black_box(report);
    let ours = bytes / t.elapsed().as_secs_f64().max(1e-9);
    let official = python().and_then(|py| {
        let t = Instant::now();
        let ok = Command::new(py)
            .args([
                "-m",
                "mlperf_logging.compliance_checker",
                "--usage",
                "training",
            ])
            .args(["--ruleset", "6.1.0", "--log_output"])
            .arg(dir.join("official.log"))
            .arg(&path)
            .output()
            .ok()?;
        let _ = ok;
        Some(bytes / t.elapsed().max(Duration::from_millis(1)).as_secs_f64())
    });
    (ours, official)
}

/// The submitter folder timed against the official tools: the largest of the corpus.
const VERIFY_FOLDER: (&str, &str) = ("submissions/5.1/NVIDIA", "5.1.0");
/// How much faster than the official tools the review must be.
const VERIFY_MIN_RATIO: f64 = 50.0;

/// `mllog verify` (the library call the command makes) on a whole real submitter folder
/// against MLCommons' package_checker followed by result_summarizer on the same folder, in
/// this run; then its peak RSS on a generated submission much larger than its largest file.
/// Panics when the review is less than [`VERIFY_MIN_RATIO`] times faster, or when its memory
/// grows by more than the largest file.
fn verify_case(
    dir: &std::path::Path,
    rows: &mut Vec<(String, f64, &'static str)>,
    ratios: &mut Vec<(String, String)>,
) {
    use mllog_core::results::verify::{verify, VerifyOptions};
    let what = "mllog verify vs package_checker + result_summarizer on a submitter folder";
    match (std::env::var("MLLOG_CORPUS"), python()) {
        (Err(_), _) => {
            println!("skipped: {what} (MLLOG_CORPUS not set)");
            ratios.push(("verify official / mllog".into(), skipped()));
        }
        (_, None) => {
            println!("skipped: {what} (MLLOG_PYTHON not set)");
            ratios.push(("verify official / mllog".into(), skipped()));
        }
        (Ok(corpus), Some(py)) => {
            let folder = std::path::Path::new(&corpus).join(VERIFY_FOLDER.0);
            let ruleset = tracing_mllog::Ruleset::from_name(VERIFY_FOLDER.1).expect("ruleset");
            let opts = VerifyOptions::new(ruleset);
            // The best of five: the review only reads, so repeats see the same work.
            let mut ours = f64::INFINITY;
            for _ in 0..5 {
                let t = Instant::now();
                let review = verify(&folder, &opts).expect("the corpus folder is readable");
                ours = ours.min(t.elapsed().as_secs_f64());
                assert!(review.passed(), "{}", review.render_text());
            }
            // The official tools rewrite scaling.json: they run on a copy.
            let copy = dir.join("verify-official");
            round_cost::fresh_copy(&folder, &copy);
            let t = Instant::now();
            let log = dir.join("package_checker.log");
            let pc = Command::new(&py)
                .args(["-m", "mlperf_logging.package_checker"])
                .arg(&copy)
                .args(["training", VERIFY_FOLDER.1, "--log_output"])
                .arg(&log)
                .current_dir(dir)
                .output()
                .expect("package_checker");
            let rs = Command::new(&py)
                .args(["-m", "mlperf_logging.result_summarizer"])
                .arg(&copy)
                .args(["training", VERIFY_FOLDER.1, "--csv"])
                .arg(dir.join("out.csv"))
                .current_dir(dir)
                .output()
                .expect("result_summarizer");
            let official = t.elapsed().as_secs_f64();
            let passed = std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("FOUND NO ERRORS");
            assert!(
                pc.status.success() && rs.status.success() && passed,
                "the official tools did not pass {}",
                folder.display()
            );
            rows.push((
                format!("mllog verify, {}", VERIFY_FOLDER.0),
                ours * 1e3,
                "ms",
            ));
            rows.push((
                "package_checker + result_summarizer, same".into(),
                official * 1e3,
                "ms",
            ));
            let ratio = official / ours;
            ratios.push(("verify official / mllog".into(), format!("{ratio:.0}")));
            assert!(
                ratio >= VERIFY_MIN_RATIO,
                "mllog verify is only {ratio:.1}x faster than the official tools (at least \
                 {VERIFY_MIN_RATIO}x wanted)"
            );
        }
    }
    // Memory: ten 16 MB runs in each of two systems, reviewed in a fresh process.
    let sub = dir.join("verify-big");
    let largest_mb = write_big_submission(&sub, 16 << 20);
    let (growth_mb, stderr) = rss_child("verify-rss", &sub);
    let total_mb = 20.0 * largest_mb;
    rows.push((
        format!("mllog verify peak RSS growth, {total_mb:.0} MB submission"),
        growth_mb,
        "MB",
    ));
    ratios.push((
        "verify RSS growth / largest file".into(),
        format!("{:.2}", growth_mb / largest_mb),
    ));
    assert!(
        growth_mb < largest_mb,
        "mllog verify grew by {growth_mb:.1} MB on a {total_mb:.0} MB submission whose largest \
         file is {largest_mb:.0} MB: {}",
        stderr
    );
    // The same, three times over, as a round of three submitter folders.
    let round = dir.join("verify-big-round");
    std::fs::create_dir_all(&round).expect("round folder");
    for org in ["A", "B", "C"] {
        std::os::unix::fs::symlink(&sub, round.join(org)).expect("symlink");
    }
    let (growth_mb, stderr) = rss_child("verify-round-rss", &round);
    rows.push((
        format!("mllog verify peak RSS growth, round of 3 × {total_mb:.0} MB submitter folders"),
        growth_mb,
        "MB",
    ));
    ratios.push((
        "verify round RSS growth / largest file".into(),
        format!("{:.2}", growth_mb / largest_mb),
    ));
    assert!(
        growth_mb < largest_mb,
        "mllog verify grew by {growth_mb:.1} MB on a round whose largest file is \
         {largest_mb:.0} MB: {}",
        stderr
    );
    let _ = std::fs::remove_dir_all(&round);
    let _ = std::fs::remove_dir_all(&sub);
}

/// Runs this example as `cmd path` in a fresh process, whose peak RSS growth it prints: (MB,
/// its stderr).
fn rss_child(cmd: &str, path: &std::path::Path) -> (f64, String) {
    let out = Command::new(std::env::current_exe().expect("own path"))
        .arg(cmd)
        .arg(path)
        .output()
        .expect("a child of the example");
    let mb = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(f64::NAN);
    (mb, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Writes two systems of ten flux1 runs each, every run the built-in example log padded with
/// `tracked_stats` lines to about `bytes`; returns the largest file's size in MB.
fn write_big_submission(sub: &std::path::Path, bytes: usize) -> f64 {
    let base = tracing_mllog::compliance::example_log(
        tracing_mllog::Ruleset::V6_1_0,
        tracing_mllog::Benchmark::Flux1,
        tracing_mllog::Division::Open,
    )
    .expect("example log");
    let line = r#":::MLLOG {"namespace": "", "time_ms": 1767225600000, "event_type": "POINT_IN_TIME", "key": "tracked_stats", "value": {"throughput": 2.5}, "metadata": {"file": "train.py", "lineno": 1, "step": 1}}"#;
    let mut padding = String::with_capacity(bytes);
    while padding.len() + base.len() < bytes {
        padding.push_str(line);
        padding.push('\n');
    }
    let mut largest = 0;
    for sys in ["a", "b"] {
        let b = sub.join("results").join(sys).join("flux1");
        std::fs::create_dir_all(&b).expect("folder");
        for i in 0..10 {
            let p = b.join(format!("result_{i}.txt"));
            let mut f = std::io::BufWriter::new(std::fs::File::create(&p).expect("file"));
            f.write_all(base.as_bytes()).expect("write");
            f.write_all(padding.as_bytes()).expect("write");
            drop(f);
            largest = largest.max(std::fs::metadata(&p).map_or(0, |m| m.len()));
        }
    }
    largest as f64 / 1e6
}

/// In the child: the review of `sub`, and the peak RSS it added, in MB.
fn verify_rss_child(sub: &std::path::Path) -> f64 {
    use mllog_core::results::verify::{verify, VerifyOptions};
    let before = peak_rss_kb();
    let review = verify(sub, &VerifyOptions::new(tracing_mllog::Ruleset::V6_1_0))
        .expect("the generated submission is readable");
    let runs: usize = review.benchmarks.iter().map(|b| b.runs.len()).sum();
    assert_eq!(runs, 20, "{}", review.render_text());
    std::hint::black_box(&review);
    peak_rss_kb().saturating_sub(before) as f64 / 1024.0
}
