//! Through the layer: spans in, profiler calls and RPD rows out.

use super::*;
use tracing_mllog::Output;
use tracing_mllog::Ranks;

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
        .output(Output::Nowhere)
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
    let profile = guard
        .detail::<tracing_mllog::profile::ProfileReport>()
        .unwrap();
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
        .output(Output::file(dir.path().join("log.txt")))
        .ranks(Ranks::default().rank(1))
        .profiler(profiler)
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _run = info_span!("run").entered();
    });
    assert!(guard
        .detail::<tracing_mllog::profile::ProfileReport>()
        .is_none());
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

/// The profiler's settings given only to `Builder::environment` are the ones used, the RPD
/// file included (it once came from the process environment even with a map).
#[test]
fn profiler_settings_come_from_the_builders_map() {
    use tracing::info_span;
    use tracing_mllog::compliance::LivePolicy;
    use tracing_mllog::profile::ProfileReport;
    use tracing_mllog::MllogLayer;
    use tracing_subscriber::prelude::*;

    let _env = env_lock();
    for var in [
        "PROFILER",
        "PROFILE_SEGMENT",
        "RPD_TRACER_LIB",
        "MLLOG_RPD_FILE",
    ] {
        assert!(
            std::env::var_os(var).is_none(),
            "{var} is set in the test process"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let (lib, calls) = fresh_stub(dir.path(), "");
    let file = dir.path().join("from-the-map.rpd");
    // The tracer itself reads the process environment: exported as a launcher would.
    tracer_env(&file);
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .live_check(LivePolicy::Off)
        .environment([
            ("PROFILER", "rpd"),
            ("PROFILE_SEGMENT", "train_step:2"),
            ("RPD_TRACER_LIB", lib.to_str().unwrap()),
            ("MLLOG_RPD_FILE", file.to_str().unwrap()),
        ])
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _run = info_span!("run").entered();
        for _ in 0..3 {
            let _s = info_span!("train_step").entered();
        }
    });
    let report = guard.shutdown();
    assert!(report.is_clean(), "{report}");
    let profile = guard
        .detail::<tracing_mllog::profile::ProfileReport>()
        .expect("profiling is on");
    assert_eq!(profile.rpd_file.as_deref(), Some(file.as_path()));
    assert_eq!(profile.segment, "train_step:2");
    assert_eq!(
        (profile.occurrences, profile.starts, profile.stops),
        (2, 1, 1)
    );
    assert_eq!(guard.detail::<ProfileReport>(), Some(profile));
    let log = lines(&calls);
    assert_eq!(
        log.iter().filter(|l| *l == "rpdstart").count(),
        1,
        "{log:?}"
    );
    for k in ["RPDT_FILENAME", "RPDT_AUTOSTART"] {
        // SAFETY: see `env_lock`.
        unsafe { std::env::remove_var(k) };
    }
}

/// Given to the builder like any sink, the RPD sink opens its file when the layer starts it,
/// on the writing rank only: a rank that does not write never creates the file, and a path
/// that cannot be opened fails the build, naming the sink and the file, before the MLLOG file
/// is opened.
#[test]
fn a_given_rpd_sink_opens_its_file_on_the_writing_rank_only() {
    use tracing_mllog::compliance::LivePolicy;
    use tracing_mllog::MllogLayer;
    use tracing_subscriber::prelude::*;

    let dir = tempfile::tempdir().unwrap();
    for rank in [1, 0] {
        let rpd = dir.path().join(format!("rank{rank}.rpd"));
        let (layer, mut guard) = MllogLayer::builder()
            .output(Output::Nowhere)
            .live_check(LivePolicy::Off)
            .ranks(Ranks::default().rank(rank))
            .sink(RpdSink::new(RpdConfig::new(&rpd)))
            .build()
            .unwrap();
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            let _epoch = tracing::info_span!("epoch", epoch_num = 1u64).entered();
        });
        let report = guard.shutdown();
        assert_eq!(rpd.exists(), rank == 0, "rank {rank}: {report}");
        if rank == 0 {
            let (_, markers) = read_markers(&rpd);
            assert_eq!(markers.len(), 1, "{markers:?}");
            assert!(markers[0].args.starts_with("epoch"), "{markers:?}");
            assert!(report.is_clean(), "{report}");
        }
    }

    let log = dir.path().join("result_0.txt");
    std::fs::write(&log, "the previous run's log\n").unwrap();
    let not_sqlite = dir.path().join("not-sqlite.rpd");
    std::fs::write(&not_sqlite, vec![b'x'; 4096]).unwrap();
    let err = MllogLayer::builder()
        .output(Output::file(&log))
        .sink(RpdSink::new(RpdConfig::new(&not_sqlite)))
        .build::<tracing_subscriber::Registry>()
        .expect_err("a file that is not SQLite");
    let message = err.to_string();
    assert!(
        message.starts_with("cannot start the sink `rpd`"),
        "{message}"
    );
    assert!(message.contains(not_sqlite.to_str().unwrap()), "{message}");
    let tracing_mllog::Error::Start { source, .. } = err else {
        panic!("not a start error: {message}");
    };
    assert!(source.downcast_ref::<RpdError>().is_some(), "{source:?}");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "the previous run's log\n",
        "a failed build truncated the previous log"
    );
}

/// A sink the environment turns on replaces a given sink of the same name (the environment
/// overrides the code, as for every setting): one RPD sink, writing the file the variable
/// names.
#[test]
fn an_rpd_sink_from_the_environment_replaces_the_given_one() {
    use tracing_mllog::compliance::LivePolicy;
    use tracing_mllog::MllogLayer;
    use tracing_subscriber::prelude::*;

    let dir = tempfile::tempdir().unwrap();
    let (in_code, from_env) = (dir.path().join("code.rpd"), dir.path().join("env.rpd"));
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .live_check(LivePolicy::Off)
        .sink(RpdSink::new(RpdConfig::new(&in_code)))
        .environment([("MLLOG_RPD_FILE", from_env.to_str().unwrap())])
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _epoch = tracing::info_span!("epoch", epoch_num = 1u64).entered();
    });
    let report = guard.shutdown();
    let names: Vec<&str> = report.sinks.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["rpd"], "{report}");
    assert!(!in_code.exists());
    assert_eq!(read_markers(&from_env).1.len(), 1);
}
