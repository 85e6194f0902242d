//! A stalled sink during training: the training thread's worst single call and the MLLOG
//! file's completeness while another SQLite connection holds `BEGIN EXCLUSIVE` on the RPD file
//! mid-run (as a second `rpd_tracer` process or `sqlite3` can). Targets: worst call < 1 ms,
//! the MLLOG file current through the lock and complete at the end, the RPD sink's drops
//! reported with their reason.
//!
//! `cargo bench --features rpd --bench stall [-- SECONDS_LOCKED]` (default 3). Three runs:
//! without a lock (the machine's own worst call, for reference: a preempted thread shows up
//! there too), with the RPD sink isolated (the default), and, for comparison, inline on the
//! pipeline's worker (`Delivery::Inline`, the behaviour before isolation), where the commit
//! waits for the lock, the worker with it, and the training thread once the queue is full.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tracing::info_span;
use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::sink::{Delivery, RpdConfig};
use tracing_mllog::{mllog, train_step, MllogLayer};
use tracing_subscriber::prelude::*;

/// A step every 100 µs: ten times the step rate of a fast real benchmark.
const STEP_EVERY: Duration = Duration::from_micros(100);

struct Outcome {
    calls: u64,
    worst: Duration,
    p9999: Duration,
    /// Calls over 1 ms.
    over_1ms: usize,
    wall: Duration,
    /// MLLOG lines in the file just before the lock was released, and lines logged by then.
    current_at_release: (usize, u64),
    lines: usize,
    /// MLLOG lines logged (one per step; the `train_step` records go to RPD only).
    logged: u64,
    report: String,
}

fn count_lines(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|t| t.lines().filter(|l| l.contains(":::MLLOG")).count())
        .unwrap_or(0)
}

/// Runs steps for a second, then while the RPD file is locked for `locked` (not at all when
/// zero), then a second more.
fn run(dir: &Path, name: &str, delivery: Delivery, locked: Duration) -> Outcome {
    let log = dir.join(format!("{name}.log"));
    let rpd = log.with_extension("rpd");
    let (layer, mut guard) = MllogLayer::builder()
        .output_file(&log)
        .live_check(LivePolicy::Off)
        .environment(std::iter::empty::<(String, String)>())
        .global_batch_size(8)
        .trace_steps(true)
        .rpd(RpdConfig::new(&rpd))
        .sink_delivery("rpd", delivery)
        .build()
        .expect("build");
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let lead = Duration::from_secs(1);
    let logged = Arc::new(AtomicU64::new(0));
    let (lock_tx, lock_rx) = std::sync::mpsc::channel::<()>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<(usize, u64)>();
    let (rpd_for_locker, log_for_locker, logged_seen) = (rpd.clone(), log.clone(), logged.clone());
    // Another SQLite connection, as `sqlite3` or a second `rpd_tracer` process would hold it.
    let locker = std::thread::spawn(move || {
        let conn = Connection::open(&rpd_for_locker).expect("open rpd");
        lock_rx.recv().expect("lock signal");
        if locked.is_zero() {
            let _ = done_tx.send((0, 0));
            return;
        }
        conn.execute_batch("BEGIN EXCLUSIVE").expect("lock");
        std::thread::sleep(locked);
        // What the MLLOG file holds at the end of the lock: written through it, or not.
        let logged_by_now = logged_seen.load(Ordering::Relaxed);
        let lines = count_lines(&log_for_locker);
        conn.execute_batch("ROLLBACK").expect("unlock");
        let _ = done_tx.send((lines, logged_by_now));
    });
    let mut latencies: Vec<Duration> = Vec::with_capacity(1 << 20);
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
            if end.is_none() {
                if let Ok(seen) = done_rx.try_recv() {
                    current_at_release = Some(seen);
                    end = Some(Instant::now() + Duration::from_secs(1));
                }
            }
            let t = Instant::now();
            let s = train_step!(step, samples = 8u64).entered();
            latencies.push(t.elapsed());
            let t = Instant::now();
            drop(s);
            latencies.push(t.elapsed());
            let t = Instant::now();
            mllog!("train_loss", 0.5, samples_count = step * 8);
            latencies.push(t.elapsed());
            logged.fetch_add(1, Ordering::Relaxed);
            step += 1;
            next += STEP_EVERY;
            while Instant::now() < next {
                std::hint::spin_loop();
            }
        }
    });
    let wall = start.elapsed();
    locker.join().expect("locker");
    let current_at_release = current_at_release.unwrap_or_default();
    let report = guard.shutdown();
    // `run_start`/`run_stop` and the other set-up lines come on top of the logged ones.
    let lines = count_lines(&log);
    latencies.sort_unstable();
    let p9999 = latencies[(latencies.len() * 9999 / 10000).min(latencies.len() - 1)];
    Outcome {
        calls: latencies.len() as u64,
        worst: *latencies.last().unwrap(),
        p9999,
        over_1ms: latencies.len() - latencies.partition_point(|l| *l <= Duration::from_millis(1)),
        wall,
        current_at_release,
        lines,
        logged: logged.load(Ordering::Relaxed),
        report: report.to_string(),
    }
}

fn main() {
    let locked = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<f64>().ok())
        .map_or(Duration::from_secs(3), Duration::from_secs_f64);
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "RPD file locked (BEGIN EXCLUSIVE) for {:.1} s mid-run, a train_step every {} µs",
        locked.as_secs_f64(),
        STEP_EVERY.as_micros()
    );
    for (name, delivery, locked) in [
        (
            "isolated, no lock (reference)",
            Delivery::isolated(),
            Duration::ZERO,
        ),
        ("isolated (default)", Delivery::isolated(), locked),
        ("inline (before isolation)", Delivery::Inline, locked),
    ] {
        let file = name.split([' ', ',']).next().unwrap_or(name);
        let o = run(
            dir.path(),
            &format!("{file}-{}", locked.as_millis()),
            delivery,
            locked,
        );
        let (at_release, logged_then) = o.current_at_release;
        println!("\nRPD sink {name}:");
        println!(
            "  training thread: {} calls, worst {:.3} ms, p99.99 {:.3} ms, {} over 1 ms, \
             wall {:.2} s",
            o.calls,
            o.worst.as_secs_f64() * 1e3,
            o.p9999.as_secs_f64() * 1e3,
            o.over_1ms,
            o.wall.as_secs_f64()
        );
        if !locked.is_zero() {
            println!(
                "  MLLOG file at the end of the lock: {at_release} lines; {logged_then} were \
                 logged just before they were counted (+ the `run_start` line)"
            );
        }
        println!(
            "  MLLOG file at the end: {} lines, {} logged (+ `run_start`, `run_stop`)",
            o.lines, o.logged
        );
        println!("  report: {}", o.report);
        let target = if o.worst < Duration::from_millis(1) {
            "met"
        } else {
            "MISSED"
        };
        println!("  target worst call < 1 ms: {target}");
    }
}
