//! A stalled sink during training: the training thread's worst single call and the MLLOG
//! file's completeness while a sink cannot deliver. Three stalls, as an operator meets them:
//! another SQLite connection holds `BEGIN EXCLUSIVE` on the RPD file mid-run (as a second
//! `rpd_tracer` process or `sqlite3` can); an OpenTelemetry collector that accepts connections
//! and never answers; an object store that does the same. Targets: no call on the training
//! thread ever waits, worst call < 1 ms, the MLLOG file current through the stall and complete
//! at the end, the stalled sink's drops or errors reported with their reason.
//!
//! Waits are counted as the training thread's voluntary context switches inside its calls: a
//! call that blocks (a full queue under `Overflow::Block`, a lock the worker holds) gives up the
//! CPU voluntarily. The worst call is judged over the calls the thread ran through without any
//! context switch: wall-clock latencies also hold the time a thread was preempted, which on a
//! machine whose cores are busy with other work reaches several milliseconds with or without a
//! sink (the worst call over all calls is printed too; on a quiet machine the two agree).
//!
//! `cargo bench --all-features --bench stall [-- SECONDS_STALLED]` (default 3). The runs: no
//! stall (the reference), the RPD file locked with the RPD sink isolated (the default) and, for
//! comparison, inline on the pipeline's worker (`Delivery::Inline`, the behaviour before
//! isolation: the commit waits for the lock, the worker with it, and the training thread once
//! the queue is full); with `otel`, a silent collector; with `object-store`, a silent store.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tracing::info_span;
use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::sink::{Delivery, RpdConfig, RpdSink};
use tracing_mllog::{mllog, train_step, MllogLayer, Output, Pipeline};
use tracing_subscriber::prelude::*;

/// A step every 100 µs: ten times the step rate of a fast real benchmark.
const STEP_EVERY: Duration = Duration::from_micros(100);

struct Outcome {
    calls: u64,
    /// Calls during which the training thread gave up the CPU (blocked) at least once.
    waited: u64,
    /// The worst call the thread ran through without a context switch.
    worst_unpreempted: Duration,
    worst: Duration,
    p9999: Duration,
    /// Calls over 1 ms.
    over_1ms: usize,
    wall: Duration,
    /// MLLOG lines in the file just before the lock was released, and lines logged by then.
    current_at_release: (usize, u64),
    lines: usize,
    /// Whether every `train_loss` logged is in the file, and the `run_stop` after them.
    complete: bool,
    /// MLLOG lines logged (one per step; the `train_step` records go to RPD only).
    logged: u64,
    report: String,
}

/// The calling thread's context switches so far: voluntary (it blocked: a lock, a condition
/// variable, a full queue, I/O) and involuntary (it was preempted).
fn switches() -> (i64, i64) {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` fills the struct it is given; RUSAGE_THREAD is Linux's, for the
    // calling thread.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage(RUSAGE_THREAD)");
    // SAFETY: initialised by the successful call above.
    let usage = unsafe { usage.assume_init() };
    (usage.ru_nvcsw, usage.ru_nivcsw)
}

fn count_lines(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|t| t.lines().filter(|l| l.contains(":::MLLOG")).count())
        .unwrap_or(0)
}

/// What stalls during the run.
enum Stall {
    /// Nothing: the machine's own worst call, for reference (an isolated RPD sink is on).
    Nothing,
    /// The RPD file locked by another connection, the RPD sink delivered this way.
    RpdLocked(Delivery),
    /// An OTLP/HTTP collector that accepts connections and never answers.
    #[cfg(feature = "otel")]
    SilentCollector,
    /// An S3 endpoint that accepts connections and never answers.
    #[cfg(feature = "object-store")]
    SilentStore,
}

/// A server on 127.0.0.1 that accepts connections and never answers; they stay open until it
/// is dropped.
#[cfg(any(feature = "otel", feature = "object-store"))]
struct Silent {
    port: u16,
    conns: Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

#[cfg(any(feature = "otel", feature = "object-store"))]
impl Silent {
    fn start() -> Silent {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("local address").port();
        let conns = Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = conns.clone();
        std::thread::spawn(move || {
            for c in listener.incoming().flatten() {
                keep.lock().expect("connections").push(c);
            }
        });
        Silent { port, conns }
    }
}

#[cfg(any(feature = "otel", feature = "object-store"))]
impl Drop for Silent {
    fn drop(&mut self) {
        for c in self.conns.lock().expect("connections").drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// The layer for a run: the MLLOG file, traced steps, and the sink that will stall. What must
/// live as long as the run (a silent server) comes back beside the builder.
fn builder(log: &Path, stall: &Stall) -> (tracing_mllog::Builder, Box<dyn std::any::Any>) {
    let base = MllogLayer::builder()
        .output(Output::file(log))
        .live_check(LivePolicy::Off)
        .global_batch_size(8)
        .trace_steps(true)
        // A bounded shutdown: a silent server is given up on at the deadline.
        .pipeline(Pipeline::default().shutdown_timeout(Duration::from_secs(2)));
    let rpd = log.with_extension("rpd");
    match stall {
        Stall::Nothing => (base.sink(RpdSink::new(RpdConfig::new(&rpd))), Box::new(())),
        Stall::RpdLocked(delivery) => (
            base.sink(RpdSink::new(RpdConfig::new(&rpd)))
                .sink_delivery("rpd", *delivery),
            Box::new(()),
        ),
        #[cfg(feature = "otel")]
        Stall::SilentCollector => {
            use opentelemetry_otlp::{Protocol, WithExportConfig};
            use tracing_mllog::sink::{OtelConfig, OtelSink};
            // With `object-store`, the exporter's HTTP client uses rustls without a default
            // crypto provider.
            #[cfg(feature = "object-store")]
            let _ = rustls::crypto::ring::default_provider().install_default();
            let collector = Silent::start();
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(format!("http://127.0.0.1:{}/v1/traces", collector.port))
                .with_timeout(Duration::from_secs(1))
                .build()
                .expect("OTLP exporter");
            let sink =
                OtelSink::with_span_exporter(exporter, OtelConfig::new()).expect("OTel sink");
            (base.sink(sink), Box::new(collector))
        }
        #[cfg(feature = "object-store")]
        Stall::SilentStore => {
            let store = Silent::start();
            let config = tracing_mllog::sink::UploadConfig::new("s3://mllog-bench/runs/1/")
                .expect("upload URL")
                .read_provider_env(false)
                .option("aws_endpoint", format!("http://127.0.0.1:{}", store.port))
                .option("aws_allow_http", "true")
                .option("aws_access_key_id", "bench")
                .option("aws_secret_access_key", "bench")
                .option("aws_region", "us-east-1")
                .option("aws_virtual_hosted_style_request", "false")
                .interval(Duration::from_millis(10));
            (
                base.sink(tracing_mllog::sink::UploadSink::new(config)),
                Box::new(store),
            )
        }
    }
}

/// Runs steps for a second, then through the stall (`held` long; the RPD lock is taken and
/// released, the silent servers are silent from the start), then a second more.
fn run(dir: &Path, name: &str, stall: Stall, held: Duration) -> Outcome {
    let log = dir.join(format!("{name}.log"));
    let rpd = log.with_extension("rpd");
    let lock_rpd = matches!(stall, Stall::RpdLocked(_));
    let (builder, server) = builder(&log, &stall);
    let (layer, mut guard) = builder.build().expect("build");
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let lead = Duration::from_secs(1);
    let logged = Arc::new(AtomicU64::new(0));
    let (lock_tx, lock_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<(usize, u64)>();
    let (log_for_staller, logged_seen) = (log.clone(), logged.clone());
    // Another SQLite connection, as `sqlite3` or a second `rpd_tracer` process would hold it.
    let staller = std::thread::spawn(move || {
        let conn = lock_rpd.then(|| Connection::open(&rpd).expect("open rpd"));
        lock_rx.recv().expect("stall signal");
        if held.is_zero() {
            let _ = done_tx.send((0, 0));
            return;
        }
        if let Some(conn) = &conn {
            conn.execute_batch("BEGIN EXCLUSIVE").expect("lock");
        }
        std::thread::sleep(held);
        // What the MLLOG file holds at the end of the stall: written through it, or not.
        let logged_by_now = logged_seen.load(Ordering::Relaxed);
        let lines = count_lines(&log_for_staller);
        if let Some(conn) = &conn {
            conn.execute_batch("ROLLBACK").expect("unlock");
        }
        let _ = done_tx.send((lines, logged_by_now));
    });
    let mut latencies: Vec<Duration> = Vec::with_capacity(1 << 20);
    let mut waited = 0u64;
    let mut worst_unpreempted = Duration::ZERO;
    // Times one call and whether the thread blocked or was preempted inside it.
    let mut timed = |latencies: &mut Vec<Duration>, call: &mut dyn FnMut()| {
        let (voluntary, involuntary) = switches();
        let t = Instant::now();
        call();
        let took = t.elapsed();
        latencies.push(took);
        let after = switches();
        waited += u64::from(after.0 != voluntary);
        if after == (voluntary, involuntary) {
            worst_unpreempted = worst_unpreempted.max(took);
        }
    };
    let mut lock_sent = false;
    let mut current_at_release = None;
    // A second after the lock is gone (the catching up included).
    let mut end = None;
    let start = Instant::now();
    tracing::dispatcher::with_default(&dispatch, || {
        let _run = info_span!("run").entered();
        let mut next = start;
        let mut step = 0u64;
        while end.is_none_or(|e| Instant::now() < e) {
            if !lock_sent && start.elapsed() >= lead {
                lock_sent = true;
                let _ = lock_tx.send(());
            }
            if end.is_none()
                && let Ok(seen) = done_rx.try_recv()
            {
                current_at_release = Some(seen);
                end = Some(Instant::now() + Duration::from_secs(1));
            }
            let mut s = None;
            timed(&mut latencies, &mut || {
                s = Some(train_step!(step, samples = 8u64).entered())
            });
            timed(&mut latencies, &mut || drop(s.take()));
            timed(&mut latencies, &mut || {
                mllog!("train_loss", 0.5, samples_count = step * 8)
            });
            logged.fetch_add(1, Ordering::Relaxed);
            step += 1;
            next += STEP_EVERY;
            while Instant::now() < next {
                std::hint::spin_loop();
            }
        }
    });
    let wall = start.elapsed();
    staller.join().expect("staller");
    let current_at_release = current_at_release.unwrap_or_default();
    let report = guard.shutdown();
    drop(server);
    // `run_start`/`run_stop` and the other set-up lines come on top of the logged ones.
    let lines = count_lines(&log);
    let losses = std::fs::read_to_string(&log)
        .map(|t| {
            t.lines()
                .filter(|l| l.contains("\"key\": \"train_loss\""))
                .count()
        })
        .unwrap_or(0);
    let run_stop = std::fs::read_to_string(&log).is_ok_and(|t| t.contains("\"key\": \"run_stop\""));
    latencies.sort_unstable();
    let p9999 = latencies[(latencies.len() * 9999 / 10000).min(latencies.len() - 1)];
    Outcome {
        calls: latencies.len() as u64,
        waited,
        worst_unpreempted,
        worst: *latencies.last().unwrap(),
        p9999,
        over_1ms: latencies.len() - latencies.partition_point(|l| *l <= Duration::from_millis(1)),
        wall,
        current_at_release,
        lines,
        complete: run_stop && losses as u64 == logged.load(Ordering::Relaxed),
        logged: logged.load(Ordering::Relaxed),
        report: report.to_string(),
    }
}

fn main() {
    let held = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<f64>().ok())
        .map_or(Duration::from_secs(3), Duration::from_secs_f64);
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "Each stall lasts {:.1} s mid-run; a train_step every {} µs, each traced (a span for \
         the RPD or OTel sink)",
        held.as_secs_f64(),
        STEP_EVERY.as_micros()
    );
    let mut runs: Vec<(&str, Stall, Duration)> = vec![
        ("reference: no stall", Stall::Nothing, Duration::ZERO),
        (
            "RPD file locked, RPD sink isolated (default)",
            Stall::RpdLocked(Delivery::isolated()),
            held,
        ),
        (
            "RPD file locked, RPD sink inline (before isolation)",
            Stall::RpdLocked(Delivery::Inline),
            held,
        ),
    ];
    #[cfg(feature = "otel")]
    runs.push(("OTel collector silent", Stall::SilentCollector, held));
    #[cfg(feature = "object-store")]
    runs.push(("object store silent", Stall::SilentStore, held));
    let mut missed = 0;
    for (i, (name, stall, held)) in runs.into_iter().enumerate() {
        let comparison = matches!(stall, Stall::RpdLocked(Delivery::Inline));
        let o = run(dir.path(), &format!("run-{i}"), stall, held);
        let (at_release, logged_then) = o.current_at_release;
        println!("\n{name}:");
        println!(
            "  training thread: {} calls, {} waited, worst {:.3} ms ({:.3} ms without a context \
             switch), p99.99 {:.3} ms, {} over 1 ms, wall {:.2} s",
            o.calls,
            o.waited,
            o.worst.as_secs_f64() * 1e3,
            o.worst_unpreempted.as_secs_f64() * 1e3,
            o.p9999.as_secs_f64() * 1e3,
            o.over_1ms,
            o.wall.as_secs_f64()
        );
        if !held.is_zero() {
            println!(
                "  MLLOG file at the end of the stall: {at_release} lines; {logged_then} were \
                 logged just before they were counted (+ the `run_start` line)"
            );
        }
        println!(
            "  MLLOG file at the end: {} lines, {} `train_loss` logged (+ the run's own lines)",
            o.lines, o.logged
        );
        println!("  report: {}", o.report.replace('\n', "\n          "));
        let checks = [
            ("no call waits".to_owned(), o.waited == 0),
            (
                "worst call without a context switch < 1 ms".to_owned(),
                o.worst_unpreempted < Duration::from_millis(1),
            ),
            (
                "the MLLOG file current through the stall (within 100 steps)".to_owned(),
                held.is_zero() || at_release as u64 + 100 > logged_then,
            ),
            ("the MLLOG file complete".to_owned(), o.complete),
        ];
        for (target, ok) in checks {
            let verdict = if ok { "met" } else { "MISSED" };
            println!("  target {target}: {verdict}");
            missed += usize::from(!ok && !comparison);
        }
    }
    println!(
        "\n{}",
        if missed == 0 {
            "all targets met (the inline run is shown for comparison only)".to_owned()
        } else {
            format!("{missed} targets MISSED")
        }
    );
}
