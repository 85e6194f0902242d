//! The segment profiler against the stub tracer: segments, repeats, the environment, failures.

use super::*;

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
        // SAFETY: see `env_lock`.
        unsafe { std::env::remove_var(k) };
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
