//! The RPD sink and the segment profiler (feature `rpd`), without ROCm: the sink's file is read
//! back with SQL the way `rpd2tracing.py` reads it, and the profiler drives a stub
//! `librpd_tracer.so` built here from `tests/stub_rpd_tracer/stub.c` with `cc`.
#![cfg(feature = "rpd")]

mod layer;
mod profiler;
mod sink;

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tracing_mllog::profile::{ProfileError, Repeat, Segment, SegmentProfiler};
use tracing_mllog::record::{
    EventType, IntervalIds, Metadata, Record, Timestamp, TracedRecord, Value,
};
use tracing_mllog::sink::{RpdConfig, RpdError, RpdSchema, RpdSink, Sink};

/// Tests change the process environment (the profiler exports RPDT_*): one at a time.
///
/// Every change to the environment in this binary (`std::env::set_var`, `remove_var`: unsafe,
/// since another thread may read it meanwhile) is made by a test that holds this lock. The
/// tests read it through `std::env`, which takes std's own lock, and the stub tracer's
/// constructor, which reads it with C's `getenv`, is loaded only by tests that hold this lock.
fn env_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets `RPDT_FILENAME` (to the file the profiler will export, canonical) and
/// `RPDT_AUTOSTART=0` as a launcher would: the test process runs several threads, where the
/// profiler refuses to set them itself. Hold `env_lock()`.
fn tracer_env(rpd_file: &Path) -> PathBuf {
    let parent = rpd_file.parent().unwrap();
    std::fs::create_dir_all(parent).unwrap();
    let export = std::fs::canonicalize(parent)
        .unwrap()
        .join(rpd_file.file_name().unwrap());
    // SAFETY: see `env_lock`.
    unsafe { std::env::set_var("RPDT_FILENAME", &export) };
    unsafe { std::env::set_var("RPDT_AUTOSTART", "0") };
    rpd_file.to_path_buf()
}

// ---------------------------------------------------------------------------------------------
// Records

const BASE: u64 = 5_000_000_000_000; // 5000 s of monotonic time, in ns

fn ts(ms: u64) -> Timestamp {
    Timestamp {
        wall_ns: 1_700_000_000_000_000_000 + (ms * 1_000_000) as i64,
        mono_ns: BASE + ms * 1_000_000,
    }
}

fn rec(
    event_type: EventType,
    key: &str,
    ms: u64,
    interval: Option<(u64, Option<u64>)>,
    fields: &[(&str, Value)],
) -> TracedRecord {
    let mut metadata = Metadata::at("train.py", 7);
    for (k, v) in fields {
        metadata.set(k.to_string(), v.clone());
    }
    let mut r = TracedRecord::from(
        Record::event(key.to_owned(), Value::Null)
            .with_event_type(event_type)
            .with_metadata(metadata),
    );
    r.time = ts(ms);
    r.interval = interval.map(|(id, parent)| IntervalIds { id, parent });
    r.scope = interval.and_then(|(_, parent)| parent);
    // Sampled steps reach tracing sinks only; the RPD sink takes them like any interval.
    r.trace_only = key == "train_step";
    r.tid = 4242;
    r
}

fn start(
    key: &str,
    ms: u64,
    id: u64,
    parent: Option<u64>,
    fields: &[(&str, Value)],
) -> TracedRecord {
    rec(
        EventType::IntervalStart,
        key,
        ms,
        Some((id, parent)),
        fields,
    )
}

fn stop(
    key: &str,
    ms: u64,
    id: u64,
    parent: Option<u64>,
    fields: &[(&str, Value)],
) -> TracedRecord {
    rec(EventType::IntervalEnd, key, ms, Some((id, parent)), fields)
}

fn point(key: &str, ms: u64, value: Value, fields: &[(&str, Value)]) -> TracedRecord {
    let mut r = rec(EventType::PointInTime, key, ms, None, fields);
    r.value = value;
    r
}

/// A small MLPerf run: init, run { block { 2 steps, eval { eval_accuracy } } x2 }, plus a span
/// whose name needs sanitising and one interval without ids.
fn run_records() -> Vec<TracedRecord> {
    let i = Value::Int;
    let mut v = vec![
        start("init_start", 0, 1, None, &[]),
        point("global_batch_size", 1, i(3072), &[]),
        stop("init_stop", 100, 1, None, &[]),
        start("run_start", 200, 2, None, &[]),
    ];
    let mut id = 10;
    for b in 0..2u64 {
        let t = 300 + b * 1000;
        let block = id;
        v.push(start(
            "block_start",
            t,
            block,
            Some(2),
            &[
                ("first_epoch_num", i(b as i128)),
                ("epoch_count", i(1)),
                ("samples_count", i(3072)),
            ],
        ));
        for s in 0..2u64 {
            let step = id + 1 + s;
            v.push(start(
                "train_step",
                t + 10 + s * 100,
                step,
                Some(block),
                &[],
            ));
            v.push(stop("train_step", t + 60 + s * 100, step, Some(block), &[]));
        }
        let eval = id + 5;
        v.push(start(
            "eval_start",
            t + 500,
            eval,
            Some(block),
            &[("epoch_num", i(b as i128))],
        ));
        v.push(point(
            "eval_accuracy",
            t + 890,
            Value::Float(0.5 + b as f64 / 10.0),
            &[("epoch_num", i(b as i128))],
        ));
        v.push(stop(
            "eval_stop",
            t + 900,
            eval,
            Some(block),
            &[("epoch_num", i(b as i128))],
        ));
        v.push(stop(
            "block_stop",
            t + 950,
            block,
            Some(2),
            &[("first_epoch_num", i(b as i128))],
        ));
        id += 10;
    }
    v.push(start("we\\ird\tspan\n\"x\"", 2400, 90, Some(2), &[]));
    v.push(stop("we\\ird\tspan\n\"x\"", 2410, 90, Some(2), &[]));
    // Parsed records carry no interval ids: paired by name.
    v.push(rec(
        EventType::IntervalStart,
        "checkpoint_start",
        2500,
        None,
        &[],
    ));
    v.push(rec(
        EventType::IntervalEnd,
        "checkpoint_stop",
        2600,
        None,
        &[],
    ));
    v.push(stop(
        "run_stop",
        3000,
        2,
        None,
        &[("status", Value::Str(Cow::Borrowed("success")))],
    ));
    v
}

// ---------------------------------------------------------------------------------------------
// Reading back, as tools/rpd2tracing.py does

#[derive(Debug, Clone, PartialEq)]
struct Marker {
    id: i64,
    pid: i64,
    tid: i64,
    start: i64,
    end: i64,
    api_name: String,
    args: String,
}

/// rpd2tracing: schema_version <= 2 (or missing) gets a temporary `rocpd_ustring` view over
/// `rocpd_string`; then `rocpd_api ⋈ rocpd_string (apiName) ⋈ rocpd_ustring (args)` ordered by
/// id.
fn read_markers(path: &Path) -> (u32, Vec<Marker>) {
    let conn = Connection::open(path).unwrap();
    let version: u32 = conn
        .query_row(
            "SELECT value FROM rocpd_metadata WHERE tag = 'schema_version'",
            [],
            |r| r.get::<_, String>(0),
        )
        .map(|v| v.parse().unwrap())
        .unwrap_or(2);
    if version <= 2 {
        conn.execute_batch("CREATE TEMPORARY VIEW rocpd_ustring AS SELECT * FROM rocpd_string")
            .unwrap();
    }
    let mut st = conn
        .prepare(
            "SELECT A.id, A.pid, A.tid, A.start, A.\"end\", S.string, U.string FROM rocpd_api A \
             JOIN rocpd_string S ON S.id = A.apiName_id \
             JOIN rocpd_ustring U ON U.id = A.args_id ORDER BY A.id",
        )
        .unwrap();
    let rows = st
        .query_map([], |r| {
            Ok(Marker {
                id: r.get(0)?,
                pid: r.get(1)?,
                tid: r.get(2)?,
                start: r.get(3)?,
                end: r.get(4)?,
                api_name: r.get(5)?,
                args: r.get(6)?,
            })
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    (version, rows)
}

fn foreign_key_violations(path: &Path) -> usize {
    let conn = Connection::open(path).unwrap();
    let mut st = conn.prepare("PRAGMA foreign_key_check").unwrap();

    st.query_map([], |_| Ok(())).unwrap().count()
}

fn count(path: &Path, sql: &str) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

fn ns(ms: u64) -> i64 {
    (BASE + ms * 1_000_000) as i64
}

fn write_all(sink: &mut RpdSink, records: &[TracedRecord]) {
    for (n, r) in records.iter().enumerate() {
        sink.write(r).unwrap();
        if n % 5 == 4 {
            sink.flush().unwrap(); // the channel ran dry now and then
        }
    }
    sink.close(Instant::now() + Duration::from_secs(5)).unwrap();
}

fn find<'a>(markers: &'a [Marker], args: &str) -> &'a Marker {
    markers
        .iter()
        .find(|m| m.args == args)
        .unwrap_or_else(|| panic!("no marker {args:?} in {markers:#?}"))
}

fn check_run_file(path: &Path, schema: RpdSchema) {
    let (version, markers) = read_markers(path);
    assert_eq!(version, schema.version());
    let labels: Vec<&str> = markers.iter().map(|m| m.args.as_str()).collect();
    assert_eq!(
        labels,
        [
            "global_batch_size=3072",
            "init",
            "train_step",
            "train_step",
            "eval_accuracy=0.5 epoch_num=0",
            "eval epoch_num=0",
            "block first_epoch_num=0 epoch_count=1 samples_count=3072",
            "train_step",
            "train_step",
            "eval_accuracy=0.6 epoch_num=1",
            "eval epoch_num=1",
            "block first_epoch_num=1 epoch_count=1 samples_count=3072",
            "we/ird span 'x'",
            "checkpoint",
            "run status=success",
        ],
        "rows in id order = end order"
    );
    let pid = std::process::id() as i64;
    for m in &markers {
        assert_eq!(m.api_name, "UserMarker");
        assert_eq!(m.pid, pid);
        assert_eq!(m.tid, 4242);
        assert!(m.end >= m.start);
        for c in m.args.chars() {
            assert!(c != '\\' && !c.is_control(), "unsanitised {:?}", m.args);
        }
    }
    // Ids: session 0, consecutive from 1.
    let ids: Vec<i64> = markers.iter().map(|m| m.id).collect();
    assert_eq!(ids, (1..=markers.len() as i64).collect::<Vec<_>>());
    // Durations and marks.
    let run = find(&markers, "run status=success");
    assert_eq!((run.start, run.end), (ns(200), ns(3000)));
    let init = find(&markers, "init");
    assert_eq!((init.start, init.end), (ns(0), ns(100)));
    let gbs = find(&markers, "global_batch_size=3072");
    assert_eq!((gbs.start, gbs.end), (ns(1), ns(1)));
    let acc = find(&markers, "eval_accuracy=0.6 epoch_num=1");
    assert_eq!(
        (acc.start, acc.end),
        (ns(1000 + 300 + 890), ns(1000 + 300 + 890))
    );
    let b1 = find(
        &markers,
        "block first_epoch_num=1 epoch_count=1 samples_count=3072",
    );
    assert_eq!((b1.start, b1.end), (ns(1300), ns(2250)));
    let e1 = find(&markers, "eval epoch_num=1");
    assert_eq!(e1.end - e1.start, 400_000_000);
    let cp = find(&markers, "checkpoint");
    assert_eq!((cp.start, cp.end), (ns(2500), ns(2600)));
    // Nesting: every step and eval lies inside a block, every block inside the run.
    let blocks: Vec<&Marker> = markers
        .iter()
        .filter(|m| m.args.starts_with("block"))
        .collect();
    assert_eq!(blocks.len(), 2);
    for m in markers
        .iter()
        .filter(|m| m.args == "train_step" || m.args.starts_with("eval "))
    {
        assert_eq!(
            m.end - m.start,
            if m.args == "train_step" {
                50_000_000
            } else {
                400_000_000
            }
        );
        assert!(
            blocks.iter().any(|b| b.start <= m.start && m.end <= b.end),
            "{m:?} not inside a block"
        );
    }
    for b in &blocks {
        assert!(run.start <= b.start && b.end <= run.end);
    }
    assert_eq!(foreign_key_violations(path), 0);
    assert_eq!(
        count(
            path,
            "SELECT CAST(value AS integer) FROM rocpd_metadata WHERE tag = 'session_count'"
        ),
        1
    );
    // The utility view agrees with the raw tables.
    assert_eq!(
        count(path, "SELECT count(*) FROM api"),
        markers.len() as i64
    );
    if schema == RpdSchema::V3 {
        assert_eq!(
            count(
                path,
                "SELECT count(*) FROM api WHERE domain = 'UserMarker' AND category = ''"
            ),
            markers.len() as i64
        );
        assert_eq!(
            count(
                path,
                "SELECT count(*) FROM rocpd_ustring WHERE id = 1 AND string = ''"
            ),
            1
        );
    }
    assert_eq!(
        count(
            path,
            "SELECT count(*) FROM rocpd_string WHERE id = 1 AND string = ''"
        ),
        1
    );
}

// ---------------------------------------------------------------------------------------------
// The profiler, against a stub librpd_tracer.so

/// Compiles the stub once per test process; returns its path.
fn stub_library(variant: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<(String, PathBuf)>>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(Vec::new()));
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = built.iter().find(|(v, _)| v == variant) {
        return p.clone();
    }
    let dir = std::env::temp_dir().join(format!("tracing-mllog-stub-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("librpd_tracer{variant}.so"));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stub_rpd_tracer/stub.c");
    let mut cmd = std::process::Command::new("cc");
    cmd.args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&src);
    if variant == "-noflush" {
        cmd.arg("-DSTUB_NO_FLUSH");
    }
    let status = cmd.arg("-ldl").status().expect("run cc");
    assert!(status.success(), "cc failed for the stub librpd_tracer.so");
    built.push((variant.to_owned(), out.clone()));
    out
}

/// A fresh copy of the stub in `dir` (a new file is a new library for the loader, with its own
/// state and its own call log).
fn fresh_stub(dir: &Path, variant: &str) -> (PathBuf, PathBuf) {
    let lib = dir.join("librpd_tracer.so");
    std::fs::copy(stub_library(variant), &lib).unwrap();
    let calls = dir.join("librpd_tracer.so.calls");
    (lib, calls)
}

fn lines(calls: &Path) -> Vec<String> {
    std::fs::read_to_string(calls)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Drives the profiler as the layer does for a training loop, and writes the loop's own steps
/// into the stub's call log, so that the log shows where each library call happened.
struct Loop<'a> {
    p: Option<&'a SegmentProfiler>,
    log: PathBuf,
    next_id: u64,
    run_open: bool,
}

impl Loop<'_> {
    fn note(&self, line: String) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }

    fn open(&mut self, name: &'static str) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let warm = if name == "train_step" && !self.run_open {
            " warmup"
        } else {
            ""
        };
        self.note(format!("open {name}#{id}{warm}"));
        if let Some(p) = self.p {
            p.on_span_open(id, name, self.run_open);
        }
        if name == "run" {
            self.run_open = true;
        }
        id
    }

    fn close(&mut self, id: u64, name: &str) {
        self.note(format!("close {name}#{id}"));
        if let Some(p) = self.p {
            p.on_span_close(id);
        }
        if name == "run" {
            self.run_open = false;
        }
    }

    fn span(&mut self, name: &'static str, body: impl FnOnce(&mut Self)) {
        let id = self.open(name);
        body(self);
        self.close(id, name);
    }

    /// init; 2 warmup steps (and a warmup eval); run { 3 x block { 2 steps with a `forward`
    /// each; eval { nested eval } } }.
    fn train(&mut self) {
        self.span("init", |_| {});
        for _ in 0..2 {
            self.span("train_step", |l| l.span("forward", |_| {}));
        }
        self.span("eval", |_| {});
        self.span("run", |l| {
            for _ in 0..3 {
                l.span("block", |l| {
                    for _ in 0..2 {
                        l.span("train_step", |l| l.span("forward", |_| {}));
                    }
                    l.span("eval", |l| l.span("eval", |_| {}));
                });
            }
        });
    }
}

fn profiler(dir: &Path, segment: Segment, repeat: Repeat) -> (SegmentProfiler, PathBuf) {
    let (lib, calls) = fresh_stub(dir, "");
    let p = SegmentProfiler::builder()
        .segment(segment)
        .repeat(repeat)
        .library(&lib)
        .rpd_file(tracer_env(&dir.join("trace.rpd")))
        .build()
        .unwrap();
    (p, calls)
}

/// Runs the loop and returns the call log without the loader line, after checking that line.
fn run_loop(p: &SegmentProfiler, calls: &Path) -> Vec<String> {
    let mut l = Loop {
        p: Some(p),
        log: calls.to_path_buf(),
        next_id: 0,
        run_open: false,
    };
    l.train();
    let mut all = lines(calls);
    assert_eq!(
        all[0], "init autostart=0 file_exists=1",
        "env set before loading"
    );
    all.remove(0);
    all
}

/// The expected log: the loop's lines with `rpdstart` after each listed open and
/// `rpdstop`, `rpdflush` after the matching close.
fn expected(loop_lines: &[String], profiled_opens: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut closes = Vec::new();
    for line in loop_lines {
        out.push(line.clone());
        if profiled_opens.contains(&line.as_str()) {
            out.push("rpdstart".into());
            let id = line.split('#').nth(1).unwrap().split(' ').next().unwrap();
            let name = line[5..].split('#').next().unwrap();
            closes.push(format!("close {name}#{id}"));
        }
        if closes.contains(line) {
            out.push("rpdstop".into());
            out.push("rpdflush".into());
        }
    }
    out
}

fn loop_lines() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("plain");
    let mut l = Loop {
        p: None,
        log: log.clone(),
        next_id: 0,
        run_open: false,
    };
    l.train();
    lines(&log)
}

fn check_segment(segment: &str, repeat: Repeat, profiled_opens: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (p, calls) = profiler(dir.path(), segment.parse().unwrap(), repeat);
    let got = run_loop(&p, &calls);
    assert_eq!(
        got,
        expected(&loop_lines(), profiled_opens),
        "segment {segment} repeat {repeat:?}"
    );
    let r = p.report();
    let k = profiled_opens.len() as u64;
    assert_eq!(
        (r.starts, r.stops, r.flushes, r.active, r.errors),
        (k, k, k, false, 0)
    );
    drop(p);
    assert_eq!(lines(&calls).len(), got.len() + 1, "nothing more at drop");
    // The file the tracer writes was pre-created with the schema.
    let (version, markers) = read_markers(&dir.path().join("trace.rpd"));
    assert_eq!((version, markers.len()), (3, 0));
}

/// Sets the profiling variables for one test and removes them after.
struct Env(Vec<&'static str>);

impl Env {
    fn set(vars: &[(&'static str, &str)]) -> Env {
        for (k, v) in vars {
            // SAFETY: see `env_lock`.
            unsafe { std::env::set_var(k, v) };
        }
        Env(vars.iter().map(|(k, _)| *k).collect())
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        for k in &self.0 {
            // SAFETY: see `env_lock`.
            unsafe { std::env::remove_var(k) };
        }
        for k in ["RPDT_FILENAME", "RPDT_AUTOSTART"] {
            // SAFETY: see `env_lock`.
            unsafe { std::env::remove_var(k) };
        }
    }
}
