//! Configuration: output errors, environment overlay, rank gating.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing_mllog::barrier::Barrier;
use tracing_mllog::record::TracedRecord;
use tracing_mllog::sink::{MemorySink, Sink, SinkError};
use tracing_mllog::{
    keys, mllog, CacheClear, Error, MllogLayer, Output, Pipeline, Ranks, Submission,
};
use tracing_subscriber::prelude::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn unwritable_output_path_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "x").unwrap();
    let path = blocker.join("sub/result.txt");
    let err = MllogLayer::builder()
        .output(Output::file(&path))
        .environment(env(&[]))
        .build::<tracing_subscriber::Registry>()
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(err, Error::Output { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );

    // The same through MLLOG_OUTPUT_FILE.
    let err = MllogLayer::builder()
        .environment(env(&[("MLLOG_OUTPUT_FILE", path.to_str().unwrap())]))
        .build::<tracing_subscriber::Registry>()
        .map(|_| ())
        .unwrap_err();
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn bad_environment_values_name_the_variable() {
    for (name, value) in [
        ("MLLOG_SAVE_TO_FILE", "maybe"),
        ("MLLOG_SUBMISSION_BENCHMARK", "llama9"),
        ("MLLOG_SUBMISSION_DIVISION", "closd"),
        ("MLLOG_SUBMISSION_STATUS", "on-prem"),
        ("MLLOG_SUBMISSION_ORG", ""),
        ("MLLOG_CONFIG_FILENAME", " "),
        ("MLLOG_CACHE_CLEAR", "2"),
        ("MLLOG_MAX_DELAY_MS", "2.5"),
        ("RANK", "zero"),
        ("SLURM_PROCID", "-1"),
    ] {
        let err = MllogLayer::builder()
            .output(Output::Nowhere)
            .environment(env(&[(name, value)]))
            .build::<tracing_subscriber::Registry>()
            .map(|_| ())
            .unwrap_err();
        assert!(err.to_string().contains(name), "{name}={value}: {err}");
    }
}

#[test]
fn environment_overrides_the_builder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out/log.txt");
    let (layer, guard) = MllogLayer::builder()
        .submission(Submission::default().org("BuilderOrg"))
        .environment(env(&[
            ("MLLOG_OUTPUT_FILE", path.to_str().unwrap()),
            ("MLLOG_SUBMISSION_ORG", "EnvOrg"),
            ("MLLOG_SUBMISSION_BENCHMARK", "llama31_8b"),
            ("MLLOG_CONFIG_FILENAME", "cfg.sh"),
            ("MLLOG_CACHE_CLEAR", "off"),
            ("MLLOG_NAMESPACE", "ns"),
        ]))
        .build()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let _init = tracing::info_span!("init").entered();
    });
    drop(guard);
    let text = std::fs::read_to_string(&path).unwrap();
    let keys: Vec<String> = tracing_mllog::record::parse_log(&text)
        .0
        .into_iter()
        .map(|r| r.record.key.to_string())
        .collect();
    assert_eq!(
        keys,
        [
            "init_start",
            "submission_benchmark",
            "submission_org",
            "config_filename",
            "init_stop"
        ]
    );
    assert!(text.contains(r#""namespace": "ns""#));
    assert!(text.contains(r#""value": "EnvOrg""#) && !text.contains("BuilderOrg"));
}

#[test]
fn a_rank_other_than_zero_writes_nothing() {
    for var in tracing_mllog::env::RANK_VARIABLES {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.txt");
        let (sink, handle) = MemorySink::new();
        let (layer, mut guard) = MllogLayer::builder()
            .output(Output::file(&path))
            .sink(sink)
            .environment(env(&[(var, "3")]))
            .build()
            .unwrap();
        assert!(!layer.writes());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let _run = tracing::info_span!("run").entered();
            mllog!(keys::SEED, 1);
        });
        let report = guard.shutdown();
        assert_eq!(report.records, 0, "{var}");
        assert!(handle.records().is_empty(), "{var}");
        // The file is not even created: rank 0 owns it (and may share the path).
        assert!(!path.exists(), "{var}");
    }
    // Rank 0 from the environment, and an explicit rank beats the environment.
    let (layer, _g) = MllogLayer::builder()
        .output(Output::Nowhere)
        .environment(env(&[("RANK", "0")]))
        .build()
        .unwrap();
    let _: &MllogLayer<tracing_subscriber::Registry> = &layer;
    assert!(layer.writes());
    let (layer, _g) = MllogLayer::builder()
        .output(Output::Nowhere)
        .ranks(Ranks::default().rank(0))
        .environment(env(&[("RANK", "5")]))
        .build()
        .unwrap();
    let _: &MllogLayer<tracing_subscriber::Registry> = &layer;
    assert!(layer.writes());
}

/// A sink that fails every write: the failures are counted and reported, nothing panics.
struct FailingSink(Arc<Mutex<u32>>);
impl Sink for FailingSink {
    fn name(&self) -> &str {
        "failing"
    }
    fn write(&mut self, _: &TracedRecord) -> Result<(), SinkError> {
        *self.0.lock().unwrap() += 1;
        Err(SinkError::Other("disk full".into()))
    }
}

#[test]
fn sink_failures_are_counted_not_hidden() {
    let calls = Arc::new(Mutex::new(0));
    let (ok_sink, handle) = MemorySink::new();
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .sink(FailingSink(calls.clone()))
        .sink(ok_sink)
        .environment(env(&[]))
        .build()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        mllog!(keys::SEED, 1);
        mllog!(keys::SEED, 2);
    });
    let report = guard.shutdown();
    assert_eq!(*calls.lock().unwrap(), 2);
    assert_eq!(
        handle.records().len(),
        2,
        "a failing sink must not starve the others"
    );
    let failing = report.sinks.iter().find(|s| s.name == "failing").unwrap();
    assert_eq!((failing.written, failing.errors), (0, 2));
    assert_eq!(failing.last_error.as_deref(), Some("disk full"));
    assert!(!report.is_clean());
    assert!(report.to_string().contains("disk full"));
}

#[test]
fn records_after_shutdown_are_counted_as_dropped() {
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .sink(MemorySink::new().0)
        .environment(env(&[]))
        .build()
        .unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || mllog!(keys::SEED, 1));
    let report = guard.shutdown();
    assert_eq!((report.records, report.dropped()), (1, 0));
    // A global subscriber outlives the guard: what it logs afterwards is counted, not lost
    // silently.
    tracing::dispatcher::with_default(&dispatch, || mllog!(keys::SEED, 2));
    let report = guard.report();
    assert_eq!((report.records, report.dropped_after_shutdown), (1, 1));
    assert!(!report.is_clean());
}

#[test]
fn every_rank_sinks_still_receive_on_other_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.txt");
    let (every, every_handle) = MemorySink::new();
    let (rank0_only, rank0_handle) = MemorySink::new();
    let (layer, guard) = MllogLayer::builder()
        .output(Output::file(&path))
        .sink(rank0_only)
        .sink_on_every_rank(every)
        .ranks(Ranks::default().rank(2))
        .environment(env(&[]))
        .build()
        .unwrap();
    assert!(!layer.writes());
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let _run = tracing::info_span!("run").entered();
        mllog!(keys::SEED, 1);
    });
    drop(guard);
    assert_eq!(every_handle.keys(), ["run_start", "seed", "run_stop"]);
    assert!(rank0_handle.records().is_empty());
    assert!(!path.exists());
}

#[test]
fn a_closed_submission_must_be_complete_and_valid() {
    use tracing_mllog::{Benchmark, Division};
    let complete = || {
        MllogLayer::builder()
            .output(Output::Nowhere)
            .submission(
                Submission::default()
                    .benchmark(Benchmark::Llama31_8b)
                    .division(Division::Closed)
                    .org("Org")
                    .platform("8xGPU")
                    .config_filename("cfg.sh")
                    .precision("fp8", "bfloat16", "bfloat16")
                    .parallelism(1, 1, 1, 1)
                    .micro_batch_size(1),
            )
            .environment(env(&[]))
    };
    assert!(complete().build::<tracing_subscriber::Registry>().is_ok());

    // Each required field, missing, is named with its builder method and variable.
    let err = MllogLayer::builder()
        .output(Output::Nowhere)
        .submission(
            Submission::default()
                .benchmark(Benchmark::Llama31_8b)
                .division(Division::Closed)
                .org("Org"),
        )
        .environment(env(&[]))
        .build::<tracing_subscriber::Registry>()
        .map(|_| ())
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("submission_platform") && text.contains("MLLOG_SUBMISSION_PLATFORM"),
        "{text}"
    );

    let err = MllogLayer::builder()
        .output(Output::Nowhere)
        .submission(
            Submission::default()
                .benchmark(Benchmark::Llama31_8b)
                .division(Division::Closed)
                .org("Org")
                .platform("p")
                .config_filename("c")
                .precision("fp8", "bfloat16", "bfloat16")
                .micro_batch_size(1),
        )
        .environment(env(&[]))
        .build::<tracing_subscriber::Registry>()
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("tensor_parallelism"), "{err}");

    // Under 6.0.0 those nine keys are optional.
    let ok = MllogLayer::builder()
        .output(Output::Nowhere)
        .submission(
            Submission::default()
                .benchmark(Benchmark::Llama31_8b)
                .division(Division::Closed)
                .org("Org")
                .platform("p"),
        )
        .ruleset(tracing_mllog::compliance::Ruleset::V6_0_0)
        .environment(env(&[]))
        .build::<tracing_subscriber::Registry>();
    assert!(ok.is_ok());

    // A precision the rules do not know, and a benchmark the ruleset dropped.
    let err = complete()
        .environment(env(&[("MLLOG_LOWEST_NUMERICAL_PRECISION_LINEAR", "fp7")]))
        .build::<tracing_subscriber::Registry>()
        .map(|_| ())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("lowest_numerical_precision_in_linear"),
        "{err}"
    );
    let err = complete()
        .submission(Submission::default().benchmark(Benchmark::Llama31_405b))
        .build::<tracing_subscriber::Registry>()
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("llama31_405b"), "{err}");

    // The variables use primus-mllog's names but log the keys the rules check.
    let (sink, handle) = MemorySink::new();
    let (layer, guard) = complete()
        .sink(sink)
        .environment(env(&[
            ("MLLOG_LOWEST_NUMERICAL_PRECISION_LINEAR", "fp8"),
            ("MLLOG_TENSOR_PARALLELISM", "4"),
        ]))
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _init = tracing::info_span!("init").entered();
    });
    drop(guard);
    let records = handle.records();
    let tp = records
        .iter()
        .find(|r| r.key == "tensor_parallelism")
        .unwrap();
    assert_eq!(tp.value, tracing_mllog::Value::Int(4));
    assert!(records
        .iter()
        .any(|r| r.key == "lowest_numerical_precision_in_linear"));
    assert!(!records
        .iter()
        .any(|r| r.key == "lowest_numerical_precision_linear"));
}

#[test]
fn an_unbounded_shutdown_timeout_never_overflows() {
    // `Duration::MAX` means "wait as long as it takes": the deadline saturates instead of
    // overflowing `Instant + Duration` (a panic in the guard, an abort when dropped).
    for timeout in [Duration::MAX, Duration::from_secs(u64::MAX / 4)] {
        let (handle_sink, handle) = MemorySink::new();
        let (layer, mut guard) = MllogLayer::builder()
            .output(Output::Nowhere)
            .sink(handle_sink)
            .pipeline(Pipeline::default().shutdown_timeout(timeout))
            .environment(env(&[]))
            .build()
            .unwrap();
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            mllog!(keys::SEED, 1);
        });
        let report = guard.shutdown();
        assert!(report.is_clean(), "{report}");
        assert_eq!(handle.records().len(), 1);
        drop(guard);
    }
}

/// Profiling settings come from the builder's environment like every other setting, and
/// `PROFILER` set to an unknown value is an error naming it: a typo must not turn profiling
/// off without a word.
#[cfg(feature = "rpd")]
#[test]
fn profiler_settings_are_read_from_the_builders_environment() {
    for (vars, named) in [
        (&[("PROFILER", "rdp")][..], "PROFILER"),
        (
            &[("PROFILER", "rpd"), ("PROFILE_SEGMENT", "block:0")][..],
            "PROFILE_SEGMENT",
        ),
        (
            &[("PROFILER", "rpd"), ("PROFILE_REPEAT", "often")][..],
            "PROFILE_REPEAT",
        ),
        (
            &[("PROFILER", "rpd"), ("MLLOG_RPD_SCHEMA", "9")][..],
            "MLLOG_RPD_SCHEMA",
        ),
    ] {
        let err = MllogLayer::builder()
            .output(Output::Nowhere)
            .sink(MemorySink::new().0)
            .environment(env(vars))
            .build::<tracing_subscriber::Registry>()
            .map(|_| ())
            .unwrap_err();
        assert!(err.to_string().contains(named), "{vars:?}: {err}");
    }
    // Empty or absent: no profiler, no error.
    for vars in [&[("PROFILER", "")][..], &[][..]] {
        let (_layer, guard) = MllogLayer::builder()
            .output(Output::Nowhere)
            .sink(MemorySink::new().0)
            .environment(env(vars))
            .build::<tracing_subscriber::Registry>()
            .unwrap();
        assert!(
            guard
                .detail::<tracing_mllog::profile::ProfileReport>()
                .is_none(),
            "{vars:?}"
        );
    }
}

/// Rank variables that disagree are said in the report, naming both; the rank is the first
/// variable's.
#[test]
fn disagreeing_rank_variables_are_a_warning_naming_both() {
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .environment(env(&[("RANK", "0"), ("SLURM_PROCID", "1")]))
        .build::<tracing_subscriber::Registry>()
        .unwrap();
    assert!(layer.writes(), "RANK comes first");
    drop(layer);
    let report = guard.shutdown();
    let warning = report
        .warnings
        .iter()
        .find(|w| w.contains("rank variables disagree"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        warning.contains("RANK=0 is used") && warning.contains("SLURM_PROCID=\"1\""),
        "{warning}"
    );
}

/// A barrier that fails: said in the report and the run starts (the default), or no
/// `run_start` at all under `BarrierFailure::Panic`. On a rank that writes nothing, the
/// barrier is called too, and nothing else reaches the layer.
#[test]
fn a_failed_barrier_is_reported_and_the_run_starts_unless_asked_otherwise() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use tracing_mllog::barrier::BarrierFailure;

    for on_failure in [BarrierFailure::Continue, BarrierFailure::Panic] {
        let (sink, records) = MemorySink::new();
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let (layer, mut guard) = MllogLayer::builder()
            .output(Output::Nowhere)
            .sink_with(sink, tracing_mllog::sink::Delivery::Inline)
            .cache_clear(CacheClear::Off)
            .barrier(
                Barrier::fallible(move || {
                    c.fetch_add(1, Ordering::Relaxed);
                    Err("peer 2 is gone".into())
                })
                .on_failure(on_failure),
            )
            .environment(env(&[]))
            .build()
            .unwrap();
        let opened =
            tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
                std::panic::catch_unwind(|| {
                    let _run = tracing::info_span!("run").entered();
                })
                .is_ok()
            });
        let report = guard.shutdown();
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        assert!(
            report.warnings.iter().any(|w| w.contains("peer 2 is gone")),
            "{report}"
        );
        let keys = records.keys();
        match on_failure {
            BarrierFailure::Continue => {
                assert!(opened);
                assert_eq!(keys, ["run_start", "run_stop"]);
            }
            _ => {
                assert!(!opened, "the run's creation panics");
                assert!(!keys.contains(&"run_start".to_owned()), "{keys:?}");
            }
        }
    }

    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .barrier(Barrier::new(move || {
            c.fetch_add(1, Ordering::Relaxed);
        }))
        .environment(env(&[("RANK", "3")]))
        .build()
        .unwrap();
    assert!(!layer.writes());
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _init = tracing::info_span!("init").entered();
        drop(_init);
        let _run = tracing::info_span!("run").entered();
        drop(tracing::info_span!("train_step").entered());
        mllog!(keys::SEED, 1);
    });
    let report = guard.shutdown();
    assert_eq!(calls.load(Ordering::Relaxed), 1);
    assert_eq!(report.records, 0, "{report}");
}

/// `submission(..)` after `org(..)` (or before it) loses nothing: each setter changes only the
/// fields it names.
#[test]
fn the_order_of_the_submission_setters_loses_nothing() {
    use tracing_mllog::{Division, Submission};
    let platform = || Submission {
        platform: Some("8xMI355X".into()),
        division: Some(Division::Open),
        ..Default::default()
    };
    for org_first in [true, false] {
        let (sink, handle) = MemorySink::new();
        let builder = MllogLayer::builder()
            .output(Output::Nowhere)
            .sink(sink)
            .live_check(tracing_mllog::compliance::LivePolicy::Off);
        let builder = if org_first {
            builder
                .submission(Submission::default().org("MyOrg"))
                .submission(platform())
        } else {
            builder
                .submission(platform())
                .submission(Submission::default().org("MyOrg"))
        };
        let (layer, mut guard) = builder.build().unwrap();
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            drop(tracing::info_span!("init").entered());
        });
        guard.shutdown();
        let value = |key: &str| {
            let records = handle.records();
            let r = records.iter().find(|r| r.key == key);
            r.and_then(|r| r.value.as_str().map(str::to_owned))
        };
        assert_eq!(value(keys::SUBMISSION_ORG).as_deref(), Some("MyOrg"));
        assert_eq!(
            value(keys::SUBMISSION_PLATFORM).as_deref(),
            Some("8xMI355X")
        );
        assert_eq!(value(keys::SUBMISSION_DIVISION).as_deref(), Some("open"));
    }
}

/// The barrier before `run_stop` calls the same collective a second time, when `run` closes
/// and before `run_stop` is stamped, on a rank that writes nothing too; asked for without a
/// barrier it is an error naming the variable.
#[test]
fn the_barrier_before_run_stop_is_called_once_more_when_run_closes() {
    use std::sync::atomic::{AtomicU32, Ordering};

    for rank in ["0", "3"] {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let (sink, records) = MemorySink::new();
        let (layer, mut guard) = MllogLayer::builder()
            .output(Output::Nowhere)
            .sink_with(sink, tracing_mllog::sink::Delivery::Inline)
            .cache_clear(CacheClear::Off)
            .barrier(Barrier::new(move || {
                c.fetch_add(1, Ordering::Relaxed);
            }))
            .environment(env(&[("RANK", rank), ("MLLOG_RUN_STOP_BARRIER", "yes")]))
            .build()
            .unwrap();
        let seen = Arc::new(AtomicU32::new(u32::MAX));
        let (calls_in, seen_in) = (calls.clone(), seen.clone());
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            let run = tracing::info_span!("run").entered();
            drop(tracing::info_span!("train_step").entered());
            seen_in.store(calls_in.load(Ordering::Relaxed), Ordering::Relaxed);
            drop(run);
        });
        guard.shutdown();
        assert_eq!(
            seen.load(Ordering::Relaxed),
            1,
            "rank {rank}: once at run_start"
        );
        assert_eq!(
            calls.load(Ordering::Relaxed),
            2,
            "rank {rank}: again at run_stop"
        );
        if rank == "0" {
            assert_eq!(records.keys(), ["run_start", "run_stop"]);
        }
    }

    let Err(err) = MllogLayer::builder()
        .output(Output::Nowhere)
        .environment(env(&[("MLLOG_RUN_STOP_BARRIER", "1")]))
        .build::<tracing_subscriber::Registry>()
    else {
        panic!("a barrier before run_stop without a barrier builds");
    };
    let err = err.to_string();
    assert!(
        err.contains("MLLOG_RUN_STOP_BARRIER") && err.contains("no barrier was given"),
        "{err}"
    );
}
