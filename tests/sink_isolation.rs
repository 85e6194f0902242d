//! A sink that stalls never holds up the MLLOG file or the training thread: the RPD file
//! locked by another SQLite connection (`BEGIN EXCLUSIVE`, as a second `rpd_tracer` process
//! or `sqlite3` can), an OTLP collector that accepts connections and never answers, an object
//! store that never answers, and a user sink that blocks. In each case the MLLOG file is
//! complete while the stall lasts (the stall is only lifted after that check), and the stalled
//! sink's drops or its missed shutdown deadline are in the report.
//!
//! The pipeline's queue is kept small with `Overflow::Block`: if the worker waited on the
//! stalled sink, the training thread would wait with it and the file would stay incomplete.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tracing_mllog::record::parse_log;
use tracing_mllog::record::TracedRecord;
use tracing_mllog::sink::SinkReport;
use tracing_mllog::sink::{Delivery, MemorySink, Sink, SinkError};
use tracing_mllog::{mllog, Guard, MllogLayer, Output, Pipeline, Report};
use tracing_subscriber::prelude::*;

/// Only a broken pipeline gets anywhere near it: a liveness bound, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

/// The `train_loss` lines in the MLLOG file, by `samples_count`, checked to parse.
fn loss_lines(log: &Path) -> Vec<i128> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    // A line being written may be cut short: only whole lines count.
    let whole = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    let (lines, errors) = parse_log(whole);
    assert!(errors.is_empty(), "{errors:?}\n{whole}");
    lines
        .into_iter()
        .filter(|l| l.record.key == "train_loss")
        .filter_map(|l| match l.record.metadata.get("samples_count") {
            Some(tracing_mllog::Value::Int(n)) => Some(*n),
            _ => None,
        })
        .collect()
}

/// Waits until the MLLOG file holds `from..to` in order (after whatever came before).
fn wait_for_file(log: &Path, to: i128, stalled: &str) {
    let start = Instant::now();
    loop {
        let lines = loss_lines(log);
        if lines.len() as i128 >= to {
            assert_eq!(lines, (0..to).collect::<Vec<_>>(), "complete and in order");
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "the MLLOG file has {} of {to} lines while {stalled} is stalled: the stall holds \
             up the MLLOG file",
            lines.len()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Logs `from..to` train_loss records on this thread, through `dispatch`.
fn log_range(dispatch: &tracing::Dispatch, from: i128, to: i128) {
    tracing::dispatcher::with_default(dispatch, || {
        for i in from..to {
            mllog!("train_loss", 0.5, samples_count = i);
        }
    });
}

/// [`log_range`] on a training thread of its own, so that a pipeline that makes the training
/// thread wait fails the file check instead of hanging the test.
fn train(dispatch: &tracing::Dispatch, from: i128, to: i128) -> std::thread::JoinHandle<()> {
    let dispatch = dispatch.clone();
    std::thread::spawn(move || log_range(&dispatch, from, to))
}

fn sink<'a>(report: &'a Report, name: &str) -> &'a SinkReport {
    report
        .sinks
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no sink {name} in {report}"))
}

fn builder(log: &Path) -> tracing_mllog::Builder {
    MllogLayer::builder()
        .output(Output::file(log))
        // Small, and blocking: a worker held up by a sink would hold up the training thread.
        .pipeline(
            Pipeline::default()
                .capacity(8)
                .shutdown_timeout(Duration::from_secs(2)),
        )
}

fn start(builder: tracing_mllog::Builder) -> (tracing::Dispatch, Guard) {
    let (layer, guard) = builder.build().expect("build");
    (
        tracing::Dispatch::new(tracing_subscriber::registry().with(layer)),
        guard,
    )
}

// ---------------------------------------------------------------------------------------------
// A user sink that blocks until the test lets it go

#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<Gated>, Condvar)>);

/// Opens the gate when the test ends, failed or not, so that nothing stays stuck behind it.
struct OpenOnDrop(Gate);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

#[derive(Default)]
struct Gated {
    closed: bool,
    blocked: bool,
}

impl Gate {
    fn close(&self) {
        self.0 .0.lock().unwrap().closed = true;
    }
    fn open(&self) {
        self.0 .0.lock().unwrap().closed = false;
        self.0 .1.notify_all();
    }
    /// Waits until the sink is blocked at the gate.
    fn wait_blocked(&self) {
        let (lock, cv) = &*self.0;
        let g = lock.lock().unwrap();
        let (g, _) = cv.wait_timeout_while(g, PATIENCE, |g| !g.blocked).unwrap();
        assert!(g.blocked, "the sink never reached the gate");
    }
    fn pass(&self) {
        let (lock, cv) = &*self.0;
        let mut g = lock.lock().unwrap();
        if g.closed {
            g.blocked = true;
            cv.notify_all();
            g = cv.wait_while(g, |g| g.closed).unwrap();
            g.blocked = false;
        }
    }
}

struct GatedSink {
    gate: Gate,
    written: Arc<Mutex<Vec<TracedRecord>>>,
}

impl Sink for GatedSink {
    fn name(&self) -> &str {
        "gated"
    }
    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
        self.gate.pass();
        self.written.lock().unwrap().push(record.clone());
        Ok(())
    }
}

#[test]
fn a_blocked_user_sink_drops_and_catches_up_while_the_file_stays_current() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mllog.log");
    let gate = Gate::default();
    let written = Arc::new(Mutex::new(Vec::new()));
    let gated = GatedSink {
        gate: gate.clone(),
        written: written.clone(),
    };
    // A lossless sink next to it: isolated sinks do not take records from the others.
    let (memory, memory_handle) = MemorySink::new();
    let (dispatch, mut guard) = start(
        builder(&log)
            .sink_with(gated, Delivery::Isolated { capacity: 16 })
            .sink_with(memory, Delivery::Inline),
    );
    gate.close();
    let _open = OpenOnDrop(gate.clone());
    log_range(&dispatch, 0, 1);
    gate.wait_blocked();
    // The sink is stuck in a write: 16 records fit in its queue, the rest are dropped.
    let training = train(&dispatch, 1, 500);
    wait_for_file(&log, 500, "a user sink");
    training.join().unwrap();
    assert!(
        !guard.flush(Duration::from_millis(50)),
        "a flush cannot complete while a sink is blocked"
    );
    let report = guard.report();
    let gated_report = sink(&report, "gated");
    assert_eq!(gated_report.delivery, Delivery::Isolated { capacity: 16 });
    assert_eq!(gated_report.dropped, 500 - 1 - 16, "{report}");
    let reason = gated_report.drop_reason.as_deref().unwrap();
    assert!(
        reason.starts_with("queue full (16 records) while the sink was blocked in write for "),
        "{reason}"
    );
    assert!(report
        .to_string()
        .contains("gated: 0 written, 483 dropped: queue full"));
    assert!(!report.is_clean());
    assert_eq!(sink(&report, "mllog-file").dropped, 0);

    // Unblocked, it catches up with what its queue held, in order.
    gate.open();
    assert!(guard.flush(PATIENCE), "{}", guard.report());
    let got: Vec<i128> = written
        .lock()
        .unwrap()
        .iter()
        .map(|r| match r.metadata.get("samples_count") {
            Some(tracing_mllog::Value::Int(n)) => *n,
            _ => -1,
        })
        .collect();
    assert_eq!(got, (0..17).collect::<Vec<_>>());
    log_range(&dispatch, 500, 510);
    let report = guard.shutdown();
    assert_eq!(sink(&report, "gated").written, 27, "{report}");
    assert_eq!(
        memory_handle.records().len(),
        510,
        "the inline sink is lossless"
    );
    assert_eq!(sink(&report, "memory").delivery, Delivery::Inline);
    assert_eq!(loss_lines(&log), (0..510).collect::<Vec<_>>());
    assert!(!report.shutdown_timed_out, "{report}");
}

#[test]
fn a_sink_stuck_at_shutdown_is_left_behind_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mllog.log");
    let gate = Gate::default();
    let gated = GatedSink {
        gate: gate.clone(),
        written: Arc::default(),
    };
    let (dispatch, mut guard) = start(builder(&log).sink(gated));
    gate.close();
    let _open = OpenOnDrop(gate.clone());
    let training = train(&dispatch, 0, 100);
    gate.wait_blocked();
    wait_for_file(&log, 100, "a user sink");
    training.join().unwrap();
    // Shutdown returns (at the deadline) although the sink never comes back.
    let report = guard.shutdown();
    assert!(report.shutdown_timed_out, "{report}");
    let gated_report = sink(&report, "gated");
    assert_eq!(gated_report.delivery, Delivery::isolated());
    let error = gated_report.last_error.as_deref().unwrap();
    assert!(
        error.starts_with("did not close within the shutdown deadline: blocked in write for "),
        "{error}"
    );
    assert!(error.ends_with("; 100 record(s) not delivered"), "{error}");
    // The MLLOG file was closed first, complete.
    assert_eq!(loss_lines(&log), (0..100).collect::<Vec<_>>());
    assert_eq!(sink(&report, "mllog-file").errors, 0);
}

// ---------------------------------------------------------------------------------------------
// RPD: another connection holds the file's exclusive lock

#[cfg(feature = "rpd")]
#[test]
fn a_locked_rpd_file_drops_rpd_rows_not_mllog_lines() {
    use rusqlite::Connection;
    use tracing_mllog::sink::{RpdConfig, RpdSink};

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mllog.log");
    let rpd = dir.path().join("trace.rpd");
    let (dispatch, mut guard) = start(
        builder(&log)
            // Longer than the test holds the lock: the sink waits in SQLite the whole time.
            .sink(RpdSink::new(
                RpdConfig::new(&rpd).busy_timeout(PATIENCE * 2),
            ))
            .sink_delivery("rpd", Delivery::Isolated { capacity: 16 }),
    );
    log_range(&dispatch, 0, 10);
    assert!(guard.flush(PATIENCE), "{}", guard.report());

    let other = Connection::open(&rpd).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    log_range(&dispatch, 10, 20);
    // The flush reaches the RPD sink, whose commit now waits for the lock.
    assert!(!guard.flush(Duration::from_millis(200)));
    let training = train(&dispatch, 20, 1000);
    wait_for_file(&log, 1000, "the RPD file");
    training.join().unwrap();
    let report = guard.report();
    let rpd_report = sink(&report, "rpd");
    assert!(rpd_report.dropped > 0, "{report}");
    let reason = rpd_report.drop_reason.as_deref().unwrap();
    assert!(
        reason.starts_with("queue full (16 records) while the sink was blocked in flush for "),
        "{reason}"
    );
    assert!(
        report.to_string().contains(" dropped: queue full"),
        "{report}"
    );
    let dropped = rpd_report.dropped;

    // Lock released: the RPD sink commits what it has and catches up with its queue.
    other.execute_batch("ROLLBACK").unwrap();
    drop(other);
    let report = guard.shutdown();
    let rpd_report = sink(&report, "rpd");
    assert_eq!(rpd_report.written + rpd_report.dropped, 1000, "{report}");
    assert_eq!(rpd_report.dropped, dropped, "no drops after the stall");
    assert!(!report.shutdown_timed_out, "{report}");
    let rows: i64 = Connection::open(&rpd)
        .unwrap()
        .query_row("SELECT count(*) FROM rocpd_api", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        rows as u64, rpd_report.written,
        "one RPD row per record written"
    );
    assert_eq!(loss_lines(&log), (0..1000).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------------
// Network peers that accept connections and never answer

/// A TCP listener on a free loopback port that accepts connections, reads nothing and never
/// answers; the connections stay open until it is dropped.
#[cfg(any(feature = "otel", feature = "object-store"))]
struct Silent {
    port: u16,
    conns: Arc<Mutex<Vec<std::net::TcpStream>>>,
}

#[cfg(any(feature = "otel", feature = "object-store"))]
impl Silent {
    fn start() -> Silent {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let conns = Arc::new(Mutex::new(Vec::new()));
        let keep = conns.clone();
        std::thread::spawn(move || {
            for c in listener.incoming().flatten() {
                keep.lock().unwrap().push(c);
            }
        });
        Silent { port, conns }
    }
}

#[cfg(any(feature = "otel", feature = "object-store"))]
impl Drop for Silent {
    fn drop(&mut self) {
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

#[cfg(feature = "otel")]
#[test]
fn a_silent_otel_collector_drops_spans_not_mllog_lines() {
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    use tracing_mllog::sink::{Backpressure, OtelConfig, OtelSink};

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mllog.log");
    let collector = Silent::start();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("http://127.0.0.1:{}/v1/traces", collector.port))
        .with_timeout(PATIENCE * 2)
        .build()
        .unwrap();
    // A tiny span queue whose writer waits for room: once the export hangs, the sink's
    // writes block, as they would behind any collector that stops answering.
    let config = OtelConfig::new()
        .queue_size(4)
        .batch_size(2)
        .batch_delay(Duration::from_millis(1))
        .backpressure(Backpressure::Wait(PATIENCE * 2));
    let otel = OtelSink::with_span_exporter(exporter, config).unwrap();
    let name = otel.name().to_owned();
    let (dispatch, mut guard) =
        start(builder(&log).sink_with(otel, Delivery::Isolated { capacity: 16 }));
    let training = train(&dispatch, 0, 1000);
    wait_for_file(&log, 1000, "the OTel collector");
    training.join().unwrap();
    let report = guard.report();
    let otel_report = sink(&report, &name);
    assert!(otel_report.dropped > 0, "{report}");
    let reason = otel_report.drop_reason.as_deref().unwrap();
    assert!(
        reason.starts_with("queue full (16 records) while the sink was blocked in write for "),
        "{reason}"
    );
    // Shutdown gives up on the collector at the deadline; the MLLOG file is complete.
    let report = guard.shutdown();
    assert!(report.shutdown_timed_out, "{report}");
    assert!(sink(&report, &name).errors > 0, "{report}");
    assert_eq!(loss_lines(&log), (0..1000).collect::<Vec<_>>());
    drop(collector);
}

#[cfg(feature = "object-store")]
#[test]
fn a_silent_object_store_does_not_hold_up_the_log_or_the_exit() {
    use tracing_mllog::sink::{UploadConfig, UploadSink};

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mllog.log");
    let store = Silent::start();
    let config = UploadConfig::new("s3://mllog-bucket/runs/1/")
        .unwrap()
        .read_provider_env(false)
        .option("aws_endpoint", format!("http://127.0.0.1:{}", store.port))
        .option("aws_allow_http", "true")
        .option("aws_access_key_id", "test")
        .option("aws_secret_access_key", "test")
        .option("aws_region", "us-east-1")
        .option("aws_virtual_hosted_style_request", "false")
        .interval(Duration::from_millis(10));
    let (dispatch, mut guard) = start(builder(&log).sink(UploadSink::new(config)));
    let training = train(&dispatch, 0, 1000);
    wait_for_file(&log, 1000, "the object store");
    training.join().unwrap();
    let report = guard.shutdown();
    // The final upload never finishes: the uploader gives up, or is left behind, at the
    // deadline.
    let upload = sink(&report, "object-store-upload");
    assert_eq!(upload.delivery, Delivery::isolated());
    assert!(upload.errors > 0, "{report}");
    assert!(
        upload.last_error.as_deref().unwrap().contains("deadline"),
        "{report}"
    );
    assert_eq!(loss_lines(&log), (0..1000).collect::<Vec<_>>());
    assert_eq!(sink(&report, "mllog-file").errors, 0);
    drop(store);
}
