//! The RPD sink and the segment profiler (feature `rpd`), without ROCm: the sink's file is read
//! back with SQL the way `rpd2tracing.py` reads it, and the profiler drives a stub
//! `librpd_tracer.so` built here from `tests/stub_rpd_tracer/stub.c` with `cc`.
#![cfg(feature = "rpd")]

use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tracing_mllog::profile::{ProfileError, Repeat, Segment, SegmentProfiler};
use tracing_mllog::record::{EventType, IntervalIds, Metadata, Record, Timestamp, Value};
use tracing_mllog::sink::{RpdConfig, RpdError, RpdSchema, RpdSink, Sink};

/// Tests change the process environment (the profiler exports RPDT_*): one at a time.
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
    std::env::set_var("RPDT_FILENAME", &export);
    std::env::set_var("RPDT_AUTOSTART", "0");
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
) -> Record {
    let mut metadata = Metadata::at("train.py", 7);
    for (k, v) in fields {
        metadata.set(k.to_string(), v.clone());
    }
    let mut r = Record::event(key.to_owned(), Value::Null)
        .with_event_type(event_type)
        .with_metadata(metadata);
    r.time = ts(ms);
    r.interval = interval.map(|(id, parent)| IntervalIds { id, parent });
    r.scope = interval.and_then(|(_, parent)| parent);
    // Sampled steps reach tracing sinks only; the RPD sink takes them like any interval.
    r.trace_only = key == "train_step";
    r.tid = 4242;
    r
}

fn start(key: &str, ms: u64, id: u64, parent: Option<u64>, fields: &[(&str, Value)]) -> Record {
    rec(
        EventType::IntervalStart,
        key,
        ms,
        Some((id, parent)),
        fields,
    )
}

fn stop(key: &str, ms: u64, id: u64, parent: Option<u64>, fields: &[(&str, Value)]) -> Record {
    rec(EventType::IntervalEnd, key, ms, Some((id, parent)), fields)
}

fn point(key: &str, ms: u64, value: Value, fields: &[(&str, Value)]) -> Record {
    let mut r = rec(EventType::PointInTime, key, ms, None, fields);
    r.value = value;
    r
}

/// A small MLPerf run: init, run { block { 2 steps, eval { eval_accuracy } } x2 }, plus a span
/// whose name needs sanitising and one interval without ids.
fn run_records() -> Vec<Record> {
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
    let n = st.query_map([], |_| Ok(())).unwrap().count();
    n
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

fn write_all(sink: &mut RpdSink, records: &[Record]) {
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

#[test]
fn sink_v3_reads_back_like_rpd2tracing() {
    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/run.rpd");
    let mut sink = RpdSink::create(&path).unwrap();
    assert_eq!(sink.schema(), RpdSchema::V3, "default schema");
    assert_eq!(sink.session(), 0);
    write_all(&mut sink, &run_records());
    assert_eq!(sink.rows_written(), 15);
    drop(sink);
    check_run_file(&path, RpdSchema::V3);
    // Views of v3 only.
    assert_eq!(count(&path, "SELECT count(*) FROM napi WHERE node = 0"), 15);
}

#[test]
fn sink_v2_reads_back_like_rpd2tracing() {
    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.rpd");
    let mut sink = RpdConfig::new(&path)
        .schema(RpdSchema::V2)
        .batch_rows(3)
        .open()
        .unwrap();
    assert_eq!(sink.schema(), RpdSchema::V2);
    write_all(&mut sink, &run_records());
    drop(sink);
    check_run_file(&path, RpdSchema::V2);
    let conn = Connection::open(&path).unwrap();
    let ustring: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'rocpd_ustring'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(ustring, 0, "v2 has no rocpd_ustring");
}

#[test]
fn sink_writes_large_batches() {
    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    for schema in [RpdSchema::V3, RpdSchema::V2] {
        let path = dir.path().join(format!("big-{schema}.rpd"));
        let mut sink = RpdConfig::new(&path)
            .schema(schema)
            .batch_rows(1000)
            .open()
            .unwrap();
        for i in 0..2_345u64 {
            let fields = [("step_num", Value::Int(i as i128))];
            sink.write(&start("train_step", i, i + 1, None, &fields))
                .unwrap();
            sink.write(&stop("train_step", i + 1, i + 1, None, &[]))
                .unwrap();
            if i % 100 == 0 {
                let p = point("train_loss", i, Value::Float(1.5), &[]);
                sink.write(&p).unwrap();
            }
        }
        sink.close(Instant::now()).unwrap();
        assert_eq!(sink.rows_written(), 2_345 + 24);
        drop(sink);
        let (_, markers) = read_markers(&path);
        assert_eq!(markers.len(), 2_345 + 24);
        let steps: Vec<&Marker> = markers
            .iter()
            .filter(|m| m.args != "train_loss=1.5")
            .collect();
        for (i, m) in steps.iter().enumerate() {
            assert_eq!(m.args, format!("train_step step_num={i}"));
            assert_eq!((m.start, m.end), (ns(i as u64), ns(i as u64 + 1)));
        }
        let ids: Vec<i64> = markers.iter().map(|m| m.id).collect();
        assert_eq!(ids, (1..=markers.len() as i64).collect::<Vec<_>>());
        assert_eq!(foreign_key_violations(&path), 0);
    }
}

#[test]
fn sink_writes_unclosed_intervals_at_close() {
    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("abort.rpd");
    let mut sink = RpdSink::create(&path).unwrap();
    sink.write(&start("run_start", 0, 1, None, &[])).unwrap();
    sink.write(&start(
        "block_start",
        10,
        2,
        Some(1),
        &[("samples_count", Value::Int(64))],
    ))
    .unwrap();
    sink.flush().unwrap();
    sink.close(Instant::now() + Duration::from_secs(1)).unwrap();
    let (_, markers) = read_markers(&path);
    let labels: Vec<&str> = markers.iter().map(|m| m.args.as_str()).collect();
    assert_eq!(
        labels,
        ["run unclosed=true", "block samples_count=64 unclosed=true"]
    );
    assert!(markers.iter().all(|m| m.end >= m.start));
}

/// What `rpd_tracer` (session 0) leaves in a file: its own '' and strings, a roctx marker with
/// a `(1 << 31) + n` id, a HIP API row with its GPU op and the correlation row.
fn write_foreign_session(path: &Path, schema: RpdSchema) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
    conn.execute(
        "INSERT INTO rocpd_metadata (tag, value) VALUES ('session_count', '1')",
        [],
    )
    .unwrap();
    for (id, s) in [
        (1, ""),
        (2, "UserMarker"),
        (3, "hipLaunchKernel"),
        (4, "my_kernel"),
        (5, "KernelExecution"),
    ] {
        conn.execute(
            "INSERT INTO rocpd_string (id, string) VALUES (?1, ?2)",
            rusqlite::params![id, s],
        )
        .unwrap();
    }
    let roctx = (1i64 << 31) + 1;
    match schema {
        RpdSchema::V3 => {
            conn.execute_batch(
                "INSERT INTO rocpd_ustring (id, string) VALUES (1, ''), (2, 'foreign marker');",
            )
            .unwrap();
            conn.execute(
                "INSERT INTO rocpd_api VALUES (?1, 100, 101, 10, 20, 2, 1, 2, 2)",
                [roctx],
            )
            .unwrap();
            conn.execute_batch(
                "INSERT INTO rocpd_api VALUES (7, 100, 101, 12, 13, 3, 1, 1, 1);
                 INSERT INTO rocpd_op VALUES (1, 0, 0, 0, 14, 19, 4, 5);
                 INSERT INTO rocpd_api_ops (id, api_id, op_id) VALUES (1, 7, 1);",
            )
            .unwrap();
        }
        RpdSchema::V2 => {
            conn.execute_batch(
                "INSERT INTO rocpd_string (id, string) VALUES (6, 'foreign marker');",
            )
            .unwrap();
            conn.execute(
                "INSERT INTO rocpd_api VALUES (?1, 100, 101, 10, 20, 2, 6)",
                [roctx],
            )
            .unwrap();
            conn.execute_batch(
                "INSERT INTO rocpd_api VALUES (7, 100, 101, 12, 13, 3, 1);
                 INSERT INTO rocpd_op VALUES (1, 0, 0, 0, '', 14, 19, 4, 5);
                 INSERT INTO rocpd_api_ops (id, api_id, op_id) VALUES (1, 7, 1);",
            )
            .unwrap();
        }
    }
    conn.execute_batch("COMMIT").unwrap();
}

fn appends_to_a_foreign_session(schema: RpdSchema) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.rpd");
    assert_eq!(schema.ensure_file(&path).unwrap(), schema);
    write_foreign_session(&path, schema);

    // Another connection holds the write lock for a moment: the sink waits (busy timeout).
    let locker = {
        let path = path.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
            tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            conn.execute_batch("COMMIT").unwrap();
        });
        rx.recv().unwrap();
        t
    };
    // The configured schema is only for new files; an existing file keeps its own.
    let mut a = RpdSink::create(&path).unwrap();
    locker.join().unwrap();
    let mut b = RpdSink::create(&path).unwrap();
    assert_eq!((a.session(), b.session()), (1, 2));
    assert_eq!(a.schema(), schema);
    // Two writers interleaved, each committing its own transactions.
    let records = run_records();
    for (n, r) in records.iter().enumerate() {
        a.write(r).unwrap();
        b.write(r).unwrap();
        if n % 3 == 0 {
            a.flush().unwrap();
            b.flush().unwrap();
        }
    }
    a.close(Instant::now()).unwrap();
    b.close(Instant::now()).unwrap();
    drop((a, b));

    assert_eq!(foreign_key_violations(&path), 0);
    assert_eq!(
        count(
            &path,
            "SELECT CAST(value AS integer) FROM rocpd_metadata WHERE tag = 'session_count'"
        ),
        3
    );
    let (_, markers) = read_markers(&path);
    // The foreign session is intact.
    let foreign: Vec<&Marker> = markers.iter().filter(|m| m.id < 1 << 32).collect();
    assert_eq!(foreign.len(), 2);
    assert_eq!(foreign[0].args, "");
    assert_eq!(foreign[0].api_name, "hipLaunchKernel");
    assert_eq!(foreign[1].id, (1 << 31) + 1);
    assert_eq!(foreign[1].args, "foreign marker");
    assert_eq!((foreign[1].start, foreign[1].end), (10, 20));
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM op WHERE description = 'my_kernel'"
        ),
        1
    );
    assert_eq!(count(&path, "SELECT count(*) FROM rocpd_api_ops"), 1);
    // Each session's rows lie in its own id range and read back completely.
    for session in [1i64, 2] {
        let lo = session << 32;
        let mine: Vec<&Marker> = markers
            .iter()
            .filter(|m| m.id > lo && m.id < lo + (1 << 32))
            .collect();
        assert_eq!(mine.len(), 15, "session {session}");
        assert_eq!(mine[0].id, lo + 1);
        assert_eq!(mine.last().unwrap().args, "run status=success");
        assert!(mine.iter().all(|m| m.api_name == "UserMarker"));
    }
    // Every string row of ours is in our ranges, and '' exists once per session.
    assert_eq!(
        count(&path, "SELECT count(*) FROM rocpd_string WHERE string = ''"),
        3
    );
    assert_eq!(markers.len(), 32);
}

#[test]
fn sink_appends_to_a_foreign_v3_session() {
    let _env = env_lock();
    appends_to_a_foreign_session(RpdSchema::V3);
}

#[test]
fn sink_appends_to_a_foreign_v2_session() {
    let _env = env_lock();
    appends_to_a_foreign_session(RpdSchema::V2);
}

#[test]
fn sink_reopens_its_own_file_without_collisions() {
    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("again.rpd");
    for round in 0..3u32 {
        let mut sink = RpdSink::create(&path).unwrap();
        assert_eq!(sink.session(), round);
        write_all(&mut sink, &run_records());
    }
    let (_, markers) = read_markers(&path);
    assert_eq!(markers.len(), 45);
    assert_eq!(foreign_key_violations(&path), 0);
}

#[test]
fn sink_refuses_a_schema_mismatch_and_bad_env() {
    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.rpd");
    RpdSchema::V2.ensure_file(&path).unwrap();
    let err = RpdConfig::new(&path)
        .schema(RpdSchema::V3)
        .open()
        .err()
        .unwrap();
    assert!(matches!(err, RpdError::Schema { .. }), "{err}");
    // The error names the file.
    assert!(err.to_string().contains(path.to_str().unwrap()), "{err}");
    assert!(err.to_string().contains("v2"), "{err}");

    std::env::set_var("MLLOG_RPD_FILE", dir.path().join("env.rpd"));
    std::env::set_var("MLLOG_RPD_SCHEMA", "4");
    let err = RpdConfig::from_env(&tracing_mllog::env::Env::process())
        .err()
        .unwrap();
    assert!(err.to_string().contains("MLLOG_RPD_SCHEMA"), "{err}");
    std::env::set_var("MLLOG_RPD_SCHEMA", "v2");
    let config = RpdConfig::from_env(&tracing_mllog::env::Env::process())
        .unwrap()
        .unwrap();
    let sink = config.open().unwrap();
    assert_eq!(sink.schema(), RpdSchema::V2);
    std::env::remove_var("MLLOG_RPD_FILE");
    std::env::remove_var("MLLOG_RPD_SCHEMA");
    assert!(RpdConfig::from_env(&tracing_mllog::env::Env::process())
        .unwrap()
        .is_none());

    // Not a database at all.
    let junk = dir.path().join("junk.rpd");
    std::fs::write(
        &junk,
        b"this is not sqlite, not at all, not even close......",
    )
    .unwrap();
    assert!(RpdSink::create(&junk).is_err());
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

// Span ids in the loop: init#1, warmup train_step#2 (forward#3), train_step#4 (forward#5),
// warmup eval#6, run#7, block#8 { train_step#9 (forward#10), train_step#11 (forward#12),
// eval#13 { eval#14 } }, block#15 { #16 (#17), #18 (#19), eval#20 { #21 } }, block#22 {
// #23 (#24), #25 (#26), eval#27 { #28 } }.

#[test]
fn profile_train_is_the_run_span() {
    let _env = env_lock();
    check_segment("train", Repeat::default(), &["open run#7"]);
}

#[test]
fn profile_train_step_never_profiles_warmup() {
    let _env = env_lock();
    check_segment("train_step", Repeat::default(), &["open train_step#9"]);
    check_segment("train_step:3", Repeat::default(), &["open train_step#16"]);
    check_segment(
        "train_step:2",
        Repeat::Times(3),
        &[
            "open train_step#11",
            "open train_step#16",
            "open train_step#18",
        ],
    );
}

#[test]
fn profile_nested_eval_stops() {
    let _env = env_lock();
    // The outer eval starts and stops recording; the nested one changes nothing.
    check_segment("eval", Repeat::default(), &["open eval#13"]);
    check_segment("eval:3", Repeat::default(), &["open eval#27"]);
    check_segment(
        "eval",
        Repeat::Always,
        &["open eval#13", "open eval#20", "open eval#27"],
    );
}

#[test]
fn profile_block_and_any_span() {
    let _env = env_lock();
    check_segment("block:2", Repeat::default(), &["open block#15"]);
    // Other span names count wherever they are, warmup included.
    check_segment("forward", Repeat::default(), &["open forward#3"]);
    check_segment(
        "forward:3",
        Repeat::Times(2),
        &["open forward#10", "open forward#12"],
    );
    check_segment("init", Repeat::default(), &["open init#1"]);
    check_segment("no_such_span", Repeat::default(), &[]);
}

#[test]
fn profile_drop_mid_segment_stops_and_flushes() {
    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    let (p, calls) = profiler(dir.path(), Segment::Train, Repeat::default());
    p.on_span_open(1, "run", false);
    p.on_span_open(2, "block", true);
    assert!(p.report().active);
    drop(p); // the run aborted
    assert_eq!(
        lines(&calls),
        [
            "init autostart=0 file_exists=1",
            "rpdstart",
            "rpdstop",
            "rpdflush"
        ]
    );
}

/// Sets the profiling variables for one test and removes them after.
struct Env(Vec<&'static str>);

impl Env {
    fn set(vars: &[(&'static str, &str)]) -> Env {
        for (k, v) in vars {
            std::env::set_var(k, v);
        }
        Env(vars.iter().map(|(k, _)| *k).collect())
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        for k in &self.0 {
            std::env::remove_var(k);
        }
        for k in ["RPDT_FILENAME", "RPDT_AUTOSTART"] {
            std::env::remove_var(k);
        }
    }
}

#[test]
fn profile_from_env() {
    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    let (lib, calls) = fresh_stub(dir.path(), "");
    let file = dir.path().join("deep/mllog.rpd");

    // Not asked for: nothing loaded, even with a library path that does not exist.
    {
        let _e = Env::set(&[("RPD_TRACER_LIB", "/nonexistent/librpd_tracer.so")]);
        assert!(
            SegmentProfiler::from_env(&tracing_mllog::env::Env::process())
                .unwrap()
                .is_none()
        );
        let _e2 = Env::set(&[("PROFILER", "")]);
        assert!(
            SegmentProfiler::from_env(&tracing_mllog::env::Env::process())
                .unwrap()
                .is_none()
        );
        // An unknown profiler is an error naming the variable, not profiling silently off.
        let _e3 = Env::set(&[("PROFILER", "nsys")]);
        let err = SegmentProfiler::from_env(&tracing_mllog::env::Env::process())
            .err()
            .unwrap();
        assert!(err.to_string().contains("PROFILER"), "{err}");
    }
    // Bad values name their variable.
    for (var, value) in [
        ("PROFILE_SEGMENT", "train_step:0"),
        ("PROFILE_SEGMENT", "block:x"),
        ("PROFILE_SEGMENT", "train:2"),
        ("PROFILE_REPEAT", "0"),
        ("PROFILE_REPEAT", "many"),
        ("MLLOG_RPD_SCHEMA", "7"),
    ] {
        let _e = Env::set(&[
            ("PROFILER", "rpd"),
            ("RPD_TRACER_LIB", lib.to_str().unwrap()),
            (var, value),
        ]);
        let err = SegmentProfiler::from_env(&tracing_mllog::env::Env::process())
            .err()
            .unwrap();
        assert!(matches!(err, ProfileError::Env(_)), "{err}");
        assert!(err.to_string().contains(var), "{err}");
    }
    assert!(lines(&calls).is_empty(), "not loaded on bad values");

    let _e = Env::set(&[
        ("PROFILER", "RPD"),
        ("PROFILE_SEGMENT", "train_step:2"),
        ("PROFILE_REPEAT", "2"),
        ("RPD_TRACER_LIB", lib.to_str().unwrap()),
        ("MLLOG_RPD_FILE", file.to_str().unwrap()),
        ("MLLOG_RPD_SCHEMA", "2"),
    ]);
    // Several threads run here: the profiler does not change the environment under them
    // (unsound), it says what the launcher should set, and loads nothing.
    let err = SegmentProfiler::from_env(&tracing_mllog::env::Env::process())
        .err()
        .unwrap();
    match &err {
        ProfileError::TracerEnvironment { filename, threads } => {
            assert_eq!(filename, &std::fs::canonicalize(&file).unwrap());
            assert!(*threads > 1, "{threads}");
        }
        other => panic!("{other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("RPDT_FILENAME=") && msg.contains("RPDT_AUTOSTART=0"),
        "{msg}"
    );
    assert!(std::env::var_os("RPDT_FILENAME").is_none());
    assert!(std::env::var_os("RPDT_AUTOSTART").is_none());
    assert!(lines(&calls).is_empty(), "not loaded without the variables");
    // Set as a launcher would: the profiler uses them as they are.
    tracer_env(&file);
    let p = SegmentProfiler::from_env(&tracing_mllog::env::Env::process())
        .unwrap()
        .unwrap();
    assert_eq!(p.segment(), &Segment::TrainStep(2));
    assert_eq!(std::env::var("RPDT_AUTOSTART").unwrap(), "0");
    assert_eq!(
        PathBuf::from(std::env::var("RPDT_FILENAME").unwrap()),
        std::fs::canonicalize(&file).unwrap()
    );
    let got = run_loop(&p, &calls);
    assert_eq!(
        got,
        expected(&loop_lines(), &["open train_step#11", "open train_step#16"])
    );
    let r = p.report();
    assert_eq!(r.segment, "train_step:2");
    assert_eq!(r.rpd_file.as_deref(), Some(file.as_path()));
    assert_eq!((r.occurrences, r.starts, r.stops, r.flushes), (3, 2, 2, 2));
    assert_eq!(
        read_markers(&file).0,
        2,
        "MLLOG_RPD_SCHEMA chose v2 for the new file"
    );
}

#[test]
fn profile_missing_or_broken_library_never_breaks_training() {
    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    let train_without = || {
        let mut l = Loop {
            p: None,
            log: dir.path().join("loop"),
            next_id: 0,
            run_open: false,
        };
        l.train();
    };

    // Missing: a clear error naming the library and how to fix it.
    let _e = Env::set(&[
        ("PROFILER", "rpd"),
        ("RPD_TRACER_LIB", "/nonexistent/librpd_tracer.so"),
        ("MLLOG_RPD_FILE", dir.path().join("a.rpd").to_str().unwrap()),
    ]);
    tracer_env(&dir.path().join("a.rpd"));
    let err = SegmentProfiler::from_env(&tracing_mllog::env::Env::process())
        .err()
        .unwrap();
    assert!(matches!(err, ProfileError::Library { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("/nonexistent/librpd_tracer.so") && msg.contains("RPD_TRACER_LIB"),
        "{msg}"
    );
    train_without();
    drop(_e);

    // Not a library.
    let junk = dir.path().join("libjunk.so");
    std::fs::write(&junk, b"not an ELF file").unwrap();
    let err = SegmentProfiler::builder()
        .library(&junk)
        .rpd_file(tracer_env(&dir.path().join("b.rpd")))
        .build()
        .err()
        .unwrap();
    assert!(matches!(err, ProfileError::Library { .. }), "{err}");
    train_without();

    // A library without rpdflush.
    let sub = dir.path().join("noflush");
    std::fs::create_dir_all(&sub).unwrap();
    let (lib, _) = fresh_stub(&sub, "-noflush");
    let err = SegmentProfiler::builder()
        .library(&lib)
        .rpd_file(tracer_env(&dir.path().join("c.rpd")))
        .build()
        .err()
        .unwrap();
    match &err {
        ProfileError::Symbol { symbol, .. } => assert_eq!(*symbol, "rpdflush"),
        other => panic!("{other}"),
    }
    train_without();

    // An RPD file that cannot be created.
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, b"x").unwrap();
    let sub = dir.path().join("ok");
    std::fs::create_dir_all(&sub).unwrap();
    let (lib, _) = fresh_stub(&sub, "");
    let err = SegmentProfiler::builder()
        .library(&lib)
        .rpd_file(blocker.join("trace.rpd"))
        .build()
        .err()
        .unwrap();
    assert!(matches!(err, ProfileError::File { .. }), "{err}");
    train_without();
    for k in ["RPDT_FILENAME", "RPDT_AUTOSTART"] {
        std::env::remove_var(k);
    }
}

#[test]
fn profile_hot_path_is_cheap() {
    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    let (p, _) = profiler(dir.path(), Segment::Eval(1), Repeat::default());
    let t = Instant::now();
    for id in 1..=1_000_000u64 {
        p.on_span_open(id, "train_step", true);
        p.on_span_close(id);
    }
    let per = t.elapsed().as_nanos() as f64 / 1e6;
    // Generous even for a debug build on a loaded machine.
    assert!(per < 2_000.0, "{per} ns per open+close");
    assert_eq!(p.report().occurrences, 0);
}

#[test]
fn segment_and_repeat_parse() {
    assert_eq!("train".parse::<Segment>().unwrap(), Segment::Train);
    assert_eq!("eval".parse::<Segment>().unwrap(), Segment::Eval(1));
    assert_eq!(
        " train_step:5 ".parse::<Segment>().unwrap(),
        Segment::TrainStep(5)
    );
    assert_eq!("block:2".parse::<Segment>().unwrap(), Segment::Block(2));
    assert_eq!(
        "my_span:3".parse::<Segment>().unwrap(),
        Segment::Span {
            name: "my_span".into(),
            nth: 3
        }
    );
    assert!("".parse::<Segment>().is_err());
    assert!(":2".parse::<Segment>().is_err());
    assert_eq!("all".parse::<Repeat>().unwrap(), Repeat::Always);
    assert_eq!("3".parse::<Repeat>().unwrap(), Repeat::Times(3));
    assert_eq!("once".parse::<Repeat>().unwrap(), Repeat::Times(1));
    assert_eq!(Segment::TrainStep(5).to_string(), "train_step:5");
    assert_eq!("v2".parse::<RpdSchema>().unwrap(), RpdSchema::V2);
    assert!("4".parse::<RpdSchema>().is_err());
}

#[test]
fn types_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send + 'static>() {}
    send_sync::<SegmentProfiler>();
    send::<RpdSink>();
}

// ---------------------------------------------------------------------------------------------
// Through the layer: spans in, profiler calls and RPD rows out

#[test]
fn the_layer_drives_the_profiler_and_the_rpd_sink() {
    layer_drives_profiler_and_rpd_sink(false);
}

/// Warmup steps inside the run are not the timed run either: never the profiled step.
#[test]
fn warmup_steps_inside_the_run_are_never_profiled() {
    layer_drives_profiler_and_rpd_sink(true);
}

/// Warm-up steps (before the run, or inside it), then two blocks of two steps; the second
/// real step is profiled.
fn layer_drives_profiler_and_rpd_sink(warmup_in_run: bool) {
    use tracing::info_span;
    use tracing_mllog::compliance::LivePolicy;
    use tracing_mllog::MllogLayer;
    use tracing_subscriber::prelude::*;

    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    let (lib, calls) = fresh_stub(dir.path(), "");
    let profiler = SegmentProfiler::builder()
        .segment("train_step:2".parse().unwrap())
        .library(&lib)
        .rpd_file(tracer_env(&dir.path().join("trace.rpd")))
        .build()
        .unwrap();
    let rpd = dir.path().join("mllog.rpd");
    let (layer, mut guard) = MllogLayer::builder()
        .no_output()
        .live_check(LivePolicy::Off)
        .global_batch_size(8)
        .profiler(profiler)
        .environment([("MLLOG_RPD_FILE", rpd.to_str().unwrap())])
        .build()
        .unwrap();
    let note = |line: &str| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&calls)
            .unwrap();
        writeln!(f, "{line}").unwrap();
    };
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let early_run = warmup_in_run.then(|| info_span!("run").entered());
        {
            let _w = info_span!("warmup").entered();
            for _ in 0..3 {
                let _s = info_span!("train_step").entered();
                note("warmup step");
            }
        }
        let _run = early_run.unwrap_or_else(|| info_span!("run").entered());
        for b in 0..2 {
            let _b = info_span!("block").entered();
            for s in 0..2 {
                let _s = info_span!("train_step").entered();
                note(&format!("step {}", b * 2 + s + 1));
            }
        }
        let _e = info_span!("eval").entered();
    });
    let report = guard.shutdown();
    assert!(report.is_clean(), "{report}");

    // Exactly the second real step is profiled: never a warmup step.
    let log: Vec<String> = lines(&calls).into_iter().skip(1).collect();
    let at = |s: &str| {
        log.iter()
            .position(|l| l == s)
            .unwrap_or_else(|| panic!("{s} in {log:?}"))
    };
    assert_eq!(
        log.iter().filter(|l| *l == "rpdstart").count(),
        1,
        "{log:?}"
    );
    assert!(
        at("step 1") < at("rpdstart") && at("rpdstart") < at("step 2"),
        "{log:?}"
    );
    assert!(
        at("step 2") < at("rpdstop")
            && at("rpdstop") < at("rpdflush")
            && at("rpdflush") < at("step 3"),
        "{log:?}"
    );
    let profile = guard.profile_report().unwrap();
    assert_eq!((profile.starts, profile.stops, profile.flushes), (1, 1, 1));

    // The RPD sink got the run's intervals from the same stream, nested in time.
    let (_, markers) = read_markers(&rpd);
    let names: Vec<&str> = markers.iter().map(|m| m.args.as_str()).collect();
    let run = markers
        .iter()
        .find(|m| m.args.starts_with("run"))
        .unwrap_or_else(|| panic!("{names:?}"));
    let blocks: Vec<&Marker> = markers
        .iter()
        .filter(|m| m.args.starts_with("block"))
        .collect();
    assert_eq!(blocks.len(), 2, "{names:?}");
    assert!(
        blocks
            .iter()
            .all(|b| run.start <= b.start && b.end <= run.end),
        "{names:?}"
    );
    assert!(
        markers.iter().any(|m| m.args.starts_with("eval")),
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("warmup")),
        "warmup is not an MLLOG interval"
    );
}

/// primus profiled the `train` segment on every rank: here only the writing rank profiles.
#[test]
fn only_the_writing_rank_profiles() {
    use tracing::info_span;
    use tracing_mllog::MllogLayer;
    use tracing_subscriber::prelude::*;

    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    let (lib, calls) = fresh_stub(dir.path(), "");
    let profiler = SegmentProfiler::builder()
        .segment(Segment::Train)
        .library(&lib)
        .rpd_file(tracer_env(&dir.path().join("trace.rpd")))
        .build()
        .unwrap();
    let (layer, guard) = MllogLayer::builder()
        .output_file(dir.path().join("log.txt"))
        .rank(1)
        .profiler(profiler)
        .environment(Vec::<(String, String)>::new())
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _run = info_span!("run").entered();
    });
    assert!(guard.profile_report().is_none());
    drop(guard);
    let log = lines(&calls);
    assert!(!log.iter().any(|l| l == "rpdstart"), "{log:?}");
}

#[test]
fn open_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    // Not an SQLite file: SQLite's own message says nothing about which file.
    let path = dir.path().join("not-sqlite.rpd");
    std::fs::write(&path, vec![b'x'; 4096]).unwrap();
    let err = RpdConfig::new(&path).open().err().unwrap().to_string();
    assert!(err.contains(path.to_str().unwrap()), "{err}");
    let err = RpdSchema::V3.ensure_file(&path).unwrap_err().to_string();
    assert!(err.contains(path.to_str().unwrap()), "{err}");
    // A parent that is a file.
    let path = dir.path().join("not-sqlite.rpd/sub/trace.rpd");
    let err = RpdSink::create(&path).err().unwrap().to_string();
    assert!(err.contains(path.to_str().unwrap()), "{err}");
}
