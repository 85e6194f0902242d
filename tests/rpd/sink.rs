//! The RPD sink: files read back as `rpd2tracing.py` reads them, foreign sessions, bad settings.

use super::*;

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

/// A parsed run (wall-clock times only: what `mllog watch` feeds) that never closed its
/// intervals: each ends where the run was last seen, not when the sink closes (a watch may end
/// long after the run did), and not at its own start.
#[test]
fn unclosed_intervals_of_a_parsed_run_end_at_its_last_record() {
    use tracing_mllog::record::parse_log;

    let _env = env_lock();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("parsed.rpd");
    let line = |ms: u64, event: &str, key: &str| {
        format!(
            ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {ms}, \"event_type\": \"{event}\", \
             \"key\": \"{key}\", \"value\": null, \"metadata\": {{}}}}"
        )
    };
    let log = [
        line(1_700_000_000_000, "INTERVAL_START", "run_start"),
        line(1_700_000_001_000, "INTERVAL_START", "block_start"),
        line(1_700_000_004_000, "POINT_IN_TIME", "tracked_stats"),
    ]
    .join("\n");
    let (lines, malformed) = parse_log(&log);
    assert!(malformed.is_empty(), "{malformed:?}");
    let mut sink = RpdSink::create(&path).unwrap();
    for l in lines {
        sink.write(&l.record.into()).unwrap();
    }
    sink.close(Instant::now() + Duration::from_secs(1)).unwrap();
    let (_, markers) = read_markers(&path);
    let ns = |ms: i64| ms * 1_000_000;
    let range = |label: &str| {
        let m = find(&markers, label);
        (m.start, m.end)
    };
    let last = ns(1_700_000_004_000);
    assert_eq!(range("run unclosed=true"), (ns(1_700_000_000_000), last));
    assert_eq!(range("block unclosed=true"), (ns(1_700_000_001_000), last));
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

    // SAFETY: see `env_lock`.
    unsafe { std::env::set_var("MLLOG_RPD_FILE", dir.path().join("env.rpd")) };
    unsafe { std::env::set_var("MLLOG_RPD_SCHEMA", "4") };
    let err = RpdConfig::from_env(&tracing_mllog::env::Env::process())
        .err()
        .unwrap();
    assert!(err.to_string().contains("MLLOG_RPD_SCHEMA"), "{err}");
    // SAFETY: see `env_lock`.
    unsafe { std::env::set_var("MLLOG_RPD_SCHEMA", "v2") };
    let config = RpdConfig::from_env(&tracing_mllog::env::Env::process())
        .unwrap()
        .unwrap();
    let sink = config.open().unwrap();
    assert_eq!(sink.schema(), RpdSchema::V2);
    // SAFETY: see `env_lock`.
    unsafe { std::env::remove_var("MLLOG_RPD_FILE") };
    unsafe { std::env::remove_var("MLLOG_RPD_SCHEMA") };
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

#[test]
fn sink_from_an_environment_map() {
    use tracing_mllog::env::Env;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("env.rpd");
    assert!(
        RpdSink::from_env(&Env::from_map([("MLLOG_RPD_SCHEMA", "2")]))
            .unwrap()
            .is_none()
    );
    let env = Env::from_map([
        ("MLLOG_RPD_FILE", path.to_str().unwrap()),
        ("MLLOG_RPD_SCHEMA", "2"),
    ]);
    let mut sink = RpdSink::from_env(&env).unwrap().unwrap();
    write_all(&mut sink, &run_records());
    drop(sink);
    assert_eq!(read_markers(&path).0, 2, "MLLOG_RPD_SCHEMA=2 from the map");
    let err = RpdSink::from_env(&Env::from_map([
        ("MLLOG_RPD_FILE", path.to_str().unwrap()),
        ("MLLOG_RPD_SCHEMA", "7"),
    ]))
    .err()
    .unwrap();
    assert!(matches!(err, RpdError::Env(_)), "{err}");
    assert!(err.to_string().contains("MLLOG_RPD_SCHEMA=\"7\""), "{err}");
}

/// A file another writer keeps locked at start-up: the sink gives up after its busy timeout,
/// and the error says that a lock held elsewhere is why.
#[test]
fn a_file_locked_at_start_names_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.rpd");
    let holder = Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = Instant::now();
    let err = RpdConfig::new(&path)
        .busy_timeout(Duration::from_millis(200))
        .open()
        .expect_err("the file is locked");
    assert!(started.elapsed() >= Duration::from_millis(200));
    let msg = err.to_string();
    assert!(msg.contains("database is locked"), "{msg}");
    assert!(msg.contains("another writer"), "{msg}");
    assert!(msg.contains("busy timeout"), "{msg}");
    holder.execute_batch("ROLLBACK").unwrap();
}
