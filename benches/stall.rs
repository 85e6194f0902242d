//! A stalled sink during training: the training thread's worst single call and the MLLOG
//! file's completeness while another SQLite connection holds `BEGIN EXCLUSIVE` on the RPD file
//! mid-run (as a second `rpd_tracer` process or `sqlite3` can). Targets: worst call < 1 ms,
//! the MLLOG file current through the lock and complete at the end, the RPD sink's drops
//! reported with their reason.
//!
//! `cargo bench --features rpd --bench stall [-- SECONDS_LOCKED]` (default 3). The run is
//! measured twice: with the RPD sink isolated (the default) and, for comparison, inline on the
//! pipeline's worker (`Delivery::Inline`, the behaviour before isolation), where the commit
//! waits for the lock, the worker with it, and the training thread once the queue is full.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tracing::info_span;
use tracing_mllog::sink::{Delivery, RpdConfig};
use tracing_mllog::{mllog, train_step, MllogLayer};
use tracing_subscriber::prelude::*;

/// A step every 100 µs: ten times the step rate of a fast real benchmark.
const STEP_EVERY: Duration = Duration::from_micros(100);

struct Outcome {
    calls: u64,
    worst: Duration,
    p9999: Duration,
    wall: Duration,
    /// Lines in the file when the lock was released, of the lines logged by then.
    current_at_release: (usize, u64),
    lines: usize,
    logged: u64,
    report: String,
}

fn count_lines(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|t| t.lines().filter(|l| l.contains(":::MLLOG")).count())
        .unwrap_or(0)
}

fn run(dir: &Path, delivery: Delivery, locked: Duration) -> Outcome {
    let log = dir.join(format!("{delivery:?}.log").replace([' ', '{', '}', ':'], ""));
    let rpd = log.with_extension("rpd");
    let (layer, mut guard) = MllogLayer::builder()
        .output_file(&log)
        .environment(std::iter::empty::<(String, String)>())
        .global_batch_size(8)
        .trace_steps(true)
        .rpd(RpdConfig::new(&rpd))
        .sink_delivery("rpd", delivery)
        .build()
        .expect("build");
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let lead = Duration::from_secs(1);
    let total = lead + locked + Duration::from_secs(1);
    let (lock_tx, lock_rx) = std::sync::mpsc::channel::<()>();
    let (released_tx, released_rx) = std::sync::mpsc::channel::<()>();
    let rpd_for_locker = rpd.clone();
    let locker = std::thread::spawn(move || {
        let conn = Connection::open(&rpd_for_locker).expect("open rpd");
        lock_rx.recv().expect("lock signal");
        conn.execute_batch("BEGIN EXCLUSIVE").expect("lock");
        std::thread::sleep(locked);
        conn.execute_batch("ROLLBACK").expect("unlock");
        let _ = released_tx.send(());
    });
    let mut latencies: Vec<Duration> = Vec::with_capacity(1 << 20);
    let mut logged = 0u64;
    let mut current_at_release = None;
    let mut lock_sent = false;
    let start = Instant::now();
    tracing::dispatcher::with_default(&dispatch, || {
        let _run = info_span!("run").entered();
        let mut next = start;
        let mut step = 0u64;
        while start.elapsed() < total {
            if !lock_sent && start.elapsed() >= lead {
                lock_sent = true;
                let _ = lock_tx.send(());
            }
            if current_at_release.is_none() && released_rx.try_recv().is_ok() {
                // What the file holds at the moment the lock goes away: written through it.
                current_at_release = Some((count_lines(&log), logged));
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
            // train_step start and stop, and the event.
            logged += 3;
            step += 1;
            next += STEP_EVERY;
            while Instant::now() < next {
                std::hint::spin_loop();
            }
        }
    });
    let wall = start.elapsed();
    locker.join().expect("locker");
    let report = guard.shutdown();
    // `run_start`/`run_stop` and the other set-up lines come on top of the logged ones.
    let lines = count_lines(&log);
    latencies.sort_unstable();
    let p9999 = latencies[(latencies.len() * 9999 / 10000).min(latencies.len() - 1)];
    Outcome {
        calls: latencies.len() as u64,
        worst: *latencies.last().unwrap(),
        p9999,
        wall,
        current_at_release: current_at_release.unwrap_or((0, 0)),
        lines,
        logged,
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
    for (name, delivery) in [
        ("isolated (default)", Delivery::isolated()),
        ("inline (before)", Delivery::Inline),
    ] {
        let o = run(dir.path(), delivery, locked);
        let (at_release, logged_then) = o.current_at_release;
        println!("\nRPD sink {name}:");
        println!(
            "  training thread: {} calls, worst {:.3} ms, p99.99 {:.3} ms, wall {:.2} s",
            o.calls,
            o.worst.as_secs_f64() * 1e3,
            o.p9999.as_secs_f64() * 1e3,
            o.wall.as_secs_f64()
        );
        println!(
            "  MLLOG file at the lock's release: {at_release} lines for {logged_then} logged \
             records (+ set-up lines); at the end: {} lines for {} logged",
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
