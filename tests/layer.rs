//! The layer end to end: spans and events in, `:::MLLOG` records out (through the real
//! pipeline and worker thread).

use std::time::Duration;

use tracing::{info_span, Dispatch, Level};
use tracing_mllog::record::TracedRecord;
use tracing_mllog::sink::{MemoryHandle, MemorySink};
use tracing_mllog::{
    keys, mllog, Benchmark, CacheClear, Division, MllogLayer, Output, Pipeline, Ranks, Submission,
    Value,
};
use tracing_subscriber::prelude::*;

/// A layer writing into memory only, with the live checker off and no environment.
fn memory_layer<S>(
    builder: tracing_mllog::Builder,
) -> (MllogLayer<S>, tracing_mllog::Guard, MemoryHandle)
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let (sink, handle) = MemorySink::new();
    let (layer, guard) = builder
        .output(Output::Nowhere)
        .sink(sink)
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .build()
        .expect("build");
    (layer, guard, handle)
}

fn capture<F: FnOnce()>(
    builder: tracing_mllog::Builder,
    f: F,
) -> Vec<tracing_mllog::record::TracedRecord> {
    let (layer, mut guard, handle) = memory_layer(builder);
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, f);
    let report = guard.shutdown();
    assert!(report.is_clean(), "{report}");
    handle.records()
}

fn keys_of(records: &[TracedRecord]) -> Vec<&str> {
    records.iter().map(|r| &*r.key).collect()
}

#[test]
fn spans_become_intervals_and_events_become_points() {
    let records = capture(
        MllogLayer::builder().submission(
            Submission::default()
                .benchmark(Benchmark::Llama2_70bLora)
                .division(Division::Open)
                .org("ExampleOrg"),
        ),
        || {
            {
                let _init = info_span!("init").entered();
                mllog!(keys::GLOBAL_BATCH_SIZE, 8);
                mllog!(keys::OPT_BASE_LR, 4e-4);
            }
            let run = info_span!(
                "run",
                samples_count = tracing::field::Empty,
                status = tracing::field::Empty
            );
            let _r = run.enter();
            {
                let block = info_span!("block", samples_count = 0u64).entered();
                block.record("samples_count", 384u64);
            }
            {
                let _eval = info_span!("eval", samples_count = 384u64).entered();
                mllog!(keys::EVAL_ACCURACY, 0.91, samples_count = 384u64);
                tracing::info!(
                    mllog.key = keys::TRACKED_STATS,
                    value.throughput = 2.5,
                    value.loss = 0.7,
                    step = 48u64
                );
            }
            run.record("samples_count", 384u64);
            run.record("status", "success");
        },
    );
    assert_eq!(
        keys_of(&records),
        [
            "cache_clear",
            "init_start",
            "submission_benchmark",
            "submission_org",
            "submission_division",
            "global_batch_size",
            "opt_base_learning_rate",
            "init_stop",
            "run_start",
            "block_start",
            "block_stop",
            "eval_start",
            "eval_accuracy",
            "tracked_stats",
            "eval_stop",
            "run_stop",
        ]
    );
    let by_key = |k: &str| records.iter().find(|r| r.key == k).unwrap();
    assert_eq!(
        by_key("block_start").metadata.get("samples_count"),
        Some(&Value::Int(0))
    );
    assert_eq!(
        by_key("block_stop").metadata.get("samples_count"),
        Some(&Value::Int(384))
    );
    let stop = by_key("run_stop");
    assert_eq!(
        stop.metadata.get("status").and_then(Value::as_str),
        Some("success")
    );
    assert_eq!(stop.metadata.get("samples_count"), Some(&Value::Int(384)));
    assert!(by_key("run_start").metadata.get("status").is_none());
    let stats = by_key("tracked_stats");
    assert_eq!(stats.value.to_json(), r#"{"throughput": 2.5, "loss": 0.7}"#);
    assert_eq!(stats.metadata.get("step"), Some(&Value::Int(48)));
    // file/lineno point at this test file.
    assert_eq!(stats.metadata.file.as_deref(), Some("tests/layer.rs"));
    assert!(stats.metadata.lineno.unwrap() > 0);
    // Interval pairing: block's parent is run.
    let run_id = by_key("run_start").interval.unwrap().id;
    assert_eq!(by_key("block_start").interval.unwrap().parent, Some(run_id));
    assert_eq!(
        by_key("block_stop").interval,
        by_key("block_start").interval
    );
    assert_eq!(by_key("init_start").interval.unwrap().parent, None);
    // Point records know the interval they happened in.
    let eval_id = by_key("eval_start").interval.unwrap().id;
    assert_eq!(by_key("eval_accuracy").scope, Some(eval_id));
    assert_eq!(by_key("tracked_stats").scope, Some(eval_id));
    let init_id = by_key("init_start").interval.unwrap().id;
    assert_eq!(by_key("global_batch_size").scope, Some(init_id));
    assert_eq!(by_key("submission_org").scope, Some(init_id));
    assert_eq!(by_key("cache_clear").scope, None);
    let line = by_key("eval_accuracy").to_line();
    assert!(
        line.starts_with(":::MLLOG {\"namespace\": \"\", \"time_ms\": "),
        "{line}"
    );
    assert!(line.contains("\"event_type\": \"POINT_IN_TIME\", \"key\": \"eval_accuracy\", \"value\": 0.91, \"metadata\": {\"file\": \"tests/layer.rs\", \"lineno\": "), "{line}");
}

#[test]
fn other_events_and_spans_are_ignored() {
    let records = capture(MllogLayer::builder().cache_clear(CacheClear::Off), || {
        tracing::info!(value = 3, "plain event");
        let _s = info_span!("train_step", step = 1).entered();
        tracing::event!(Level::WARN, key = "not_ours");
        // A key field left empty: nothing to log.
        tracing::info!(mllog.key = tracing::field::Empty, value = 1);
        mllog!("custom_key", "text", note = "x");
    });
    assert_eq!(keys_of(&records), ["custom_key"]);
    assert_eq!(records[0].value, Value::from("text"));
}

#[test]
fn run_without_success_is_aborted() {
    let records = capture(MllogLayer::builder(), || {
        let _r = info_span!("run", status = tracing::field::Empty).entered();
    });
    let stop = records.iter().find(|r| r.key == "run_stop").unwrap();
    assert_eq!(
        stop.metadata.get("status").and_then(Value::as_str),
        Some("aborted")
    );
}

#[test]
fn brackets_balance_on_early_return_and_panic() {
    fn train(fail_at: usize) -> Result<(), String> {
        let _run = info_span!("run", status = "success").entered();
        for i in 0..3 {
            let _block = info_span!("block", samples_count = i * 10).entered();
            let _eval = info_span!("eval", samples_count = i * 10).entered();
            if i == fail_at {
                return Err("diverged".into());
            }
        }
        Ok(())
    }
    let records = capture(MllogLayer::builder(), || {
        assert!(train(1).is_err());
        let panicked = std::panic::catch_unwind(|| {
            let _run = info_span!("run", status = "success").entered();
            let _block = info_span!("block", samples_count = 0).entered();
            let _eval = info_span!("eval", samples_count = 0).entered();
            panic!("boom");
        });
        assert!(panicked.is_err());
    });
    let k = keys_of(&records);
    for (open, close) in [
        ("run_start", "run_stop"),
        ("block_start", "block_stop"),
        ("eval_start", "eval_stop"),
    ] {
        assert_eq!(
            k.iter().filter(|x| **x == open).count(),
            k.iter().filter(|x| **x == close).count(),
            "{k:?}"
        );
    }
    // The early-return run said success and ended normally: success. The panicking one did not.
    let statuses: Vec<_> = records
        .iter()
        .filter(|r| r.key == "run_stop")
        .map(|r| {
            r.metadata
                .get("status")
                .and_then(Value::as_str)
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(statuses, ["success", "aborted"]);
    // Nesting is closed inner-first.
    let tail: Vec<_> = k[k.len() - 3..].to_vec();
    assert_eq!(tail, ["eval_stop", "block_stop", "run_stop"]);
}

#[test]
fn guard_flush_makes_records_visible() {
    let (sink, handle) = MemorySink::new();
    let (layer, guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .sink(sink)
        .build()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, || mllog!(keys::SEED, 42));
    assert!(guard.flush(Duration::from_secs(5)));
    assert_eq!(handle.keys(), ["seed"]);
    assert_eq!(guard.report().records, 1);
}

#[test]
fn file_is_relative_to_root_dir_and_foreign_targets_never_enter() {
    let records = capture(
        MllogLayer::builder()
            .cache_clear(CacheClear::Off)
            .root_dir("tests"),
        || {
            mllog!(keys::SEED, 1);
            // Diagnostics of the crates our sinks use, even with an MLLOG key, are not records.
            tracing::event!(target: "object_store::client", tracing::Level::INFO, { mllog.key = "seed", value = 2 });
            tracing::event!(target: "opentelemetry_sdk", tracing::Level::INFO, { mllog.key = "seed", value = 3 });
            tracing::event!(target: "tracing_mllog::pipeline", tracing::Level::INFO, { mllog.key = "seed", value = 4 });
            let _run = tracing::info_span!(target: "hyper::proto", "run").entered();
        },
    );
    assert_eq!(keys_of(&records), ["seed"]);
    assert_eq!(records[0].metadata.file.as_deref(), Some("layer.rs"));
}

/// The same callsites seen by two layers with different span names: each layer classifies
/// them for itself (the per-thread callsite cache is keyed by layer).
#[test]
fn callsites_are_classified_per_layer() {
    fn steps() {
        let _run = info_span!("run").entered();
        for i in 1..=2u64 {
            let _a = info_span!("train_step", step = i, loss = 1.5).entered();
        }
        for i in 1..=2u64 {
            let _b = info_span!("optimizer_step", step = i, loss = 2.5).entered();
        }
    }
    let losses = |records: &[TracedRecord]| -> Vec<Value> {
        records
            .iter()
            .filter(|r| r.key == keys::TRAIN_LOSS)
            .map(|r| r.value.clone())
            .collect()
    };
    let builder = || {
        MllogLayer::builder()
            .cache_clear(CacheClear::Off)
            .global_batch_size(4)
            .train_loss_every(1)
    };
    let by_default = capture(builder(), steps);
    let renamed = capture(builder().train_step_span("optimizer_step"), steps);
    assert_eq!(losses(&by_default), [Value::Float(1.5), Value::Float(1.5)]);
    assert_eq!(losses(&renamed), [Value::Float(2.5), Value::Float(2.5)]);
}

/// Fields past the ones classified per callsite are classified by name when recorded.
#[test]
fn fields_past_the_sixteenth_still_count() {
    // The field lists are spelled out: tracing's macros take field names literally.
    #[rustfmt::skip]
    let records = capture(
        MllogLayer::builder().cache_clear(CacheClear::Off).global_batch_size(4).train_loss_every(1),
        || {
            mllog!(
                "custom_key", 1,
                m02 = 2, m03 = 3, m04 = 4, m05 = 5, m06 = 6, m07 = 7, m08 = 8, m09 = 9,
                m10 = 10, m11 = 11, m12 = 12, m13 = 13, m14 = 14, m15 = 15,
                m16 = 16, mllog.namespace = "late", m18 = 18
            );
            tracing::info!(
                mllog.key = "object_key",
                m01 = 1, m02 = 2, m03 = 3, m04 = 4, m05 = 5, m06 = 6, m07 = 7, m08 = 8,
                m09 = 9, m10 = 10, m11 = 11, m12 = 12, m13 = 13, m14 = 14, m15 = 15,
                value.a = 1, value.b = true
            );
            let _run = info_span!("run").entered();
            let _s = info_span!(
                "train_step",
                f00 = 0, f01 = 1, f02 = 2, f03 = 3, f04 = 4, f05 = 5, f06 = 6, f07 = 7,
                f08 = 8, f09 = 9, f10 = 10, f11 = 11, f12 = 12, f13 = 13, f14 = 14, f15 = 15,
                step = 3u64, loss = 0.25
            )
            .entered();
        },
    );
    let custom = records.iter().find(|r| r.key == "custom_key").unwrap();
    assert_eq!(custom.namespace, "late");
    for name in ["m02", "m15", "m16", "m18"] {
        assert!(custom.metadata.get(name).is_some(), "{name}: {custom:?}");
    }
    assert!(custom.metadata.get("mllog.namespace").is_none());
    let object = records.iter().find(|r| r.key == "object_key").unwrap();
    assert_eq!(object.value.to_json(), r#"{"a": 1, "b": true}"#);
    let loss = records
        .iter()
        .find(|r| r.key == keys::TRAIN_LOSS)
        .expect("train_loss from fields 16 and 17");
    assert_eq!(loss.value, Value::Float(0.25));
    assert_eq!(loss.metadata.get("step"), Some(&Value::Int(3)));
}

/// The worker is not woken for every record (that wake-up is a system call on the training
/// thread): point records wait for its timer; interval records, a quarter-full channel and a
/// worker gone idle wake it at once. Each case is observable as "arrives well before the
/// timer would fire".
#[test]
fn a_sleeping_worker_is_woken_by_intervals_and_a_filling_channel_and_its_timer() {
    fn build(max_delay: Duration) -> (Dispatch, tracing_mllog::Guard, MemoryHandle) {
        let (sink, handle) = MemorySink::new();
        let (layer, guard) = MllogLayer::builder()
            .output(Output::Nowhere)
            .sink(sink)
            .cache_clear(CacheClear::Off)
            .pipeline(Pipeline::default().capacity(64).max_delay(max_delay))
            .live_check(tracing_mllog::compliance::LivePolicy::Off)
            .build()
            .expect("build");
        (
            Dispatch::new(tracing_subscriber::registry().with(layer)),
            guard,
            handle,
        )
    }
    fn arrives(handle: &MemoryHandle, n: usize, within: Duration) -> bool {
        let until = std::time::Instant::now() + within;
        while std::time::Instant::now() < until {
            if handle.records().len() >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    }
    // Far beyond the test's patience: only a wake-up can deliver early.
    let never = Duration::from_secs(600);
    let soon = Duration::from_secs(20);

    // An interval record wakes the worker, and everything queued before it comes along.
    let (dispatch, mut guard, handle) = build(never);
    tracing::dispatcher::with_default(&dispatch, || {
        std::thread::sleep(Duration::from_millis(50));
        for i in 0..5u64 {
            mllog!("custom_key", i);
        }
        let _init = info_span!("init").entered();
        assert!(
            arrives(&handle, 6, soon),
            "{:?}",
            keys_of(&handle.records())
        );
    });
    guard.shutdown();

    // A quarter-full channel (16 of 64) wakes it.
    let (dispatch, mut guard, handle) = build(never);
    tracing::dispatcher::with_default(&dispatch, || {
        std::thread::sleep(Duration::from_millis(50));
        for i in 0..16u64 {
            mllog!("custom_key", i);
        }
        assert!(arrives(&handle, 16, soon));
    });
    guard.shutdown();

    // Otherwise the timer delivers, with no flush.
    let (dispatch, mut guard, handle) = build(Duration::from_millis(20));
    tracing::dispatcher::with_default(&dispatch, || {
        std::thread::sleep(Duration::from_millis(50));
        mllog!("custom_key", 1);
        assert!(arrives(&handle, 1, soon));
        // After 50 empty rounds (1 s here) the worker stops polling and sleeps until woken
        // (10 s at most): the next record wakes it.
        std::thread::sleep(Duration::from_millis(1500));
        mllog!("custom_key", 2);
        assert!(arrives(&handle, 2, Duration::from_secs(5)));
    });
    guard.shutdown();
}

/// A filter on the whole subscriber hides spans and events from every layer, this one
/// included: the whole log would be missing without any error on the way. The report names
/// the cause; the same filter on the other layer leaves ours whole; a rank that does not write
/// expects nothing.
#[test]
fn a_subscriber_wide_filter_that_hides_everything_is_named_in_the_report() {
    use tracing_subscriber::filter::LevelFilter;
    let workload = || {
        drop(info_span!("init").entered());
        mllog!(keys::EVAL_ACCURACY, 0.5);
    };
    fn build<S>(builder: tracing_mllog::Builder) -> (MllogLayer<S>, tracing_mllog::Guard)
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        builder
            .output(Output::Nowhere)
            .sink(MemorySink::new().0)
            .live_check(tracing_mllog::compliance::LivePolicy::Off)
            .build()
            .expect("build")
    }

    let (layer, mut guard) = build(MllogLayer::builder());
    let hidden = tracing_subscriber::registry()
        .with(LevelFilter::WARN)
        .with(layer);
    tracing::subscriber::with_default(hidden, workload);
    let report = guard.shutdown();
    assert!(report.received_nothing(), "{report}");
    let text = report.to_string();
    assert!(
        text.contains("no span or event reached the layer"),
        "{text}"
    );
    assert!(text.contains("filter the other layers instead"), "{text}");

    let (layer, mut guard) = build(MllogLayer::builder());
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::sink)
        .with_filter(LevelFilter::WARN);
    tracing::subscriber::with_default(
        tracing_subscriber::registry().with(fmt).with(layer),
        workload,
    );
    let report = guard.shutdown();
    // cache_clear, init_start, init_stop, eval_accuracy
    assert_eq!(report.records, 4, "{report}");
    assert!(!report.received_nothing());
    assert!(!report.to_string().contains("reached"), "{report}");

    let (layer, mut guard) = build(MllogLayer::builder().ranks(Ranks::default().rank(1)));
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), workload);
    let report = guard.shutdown();
    assert_eq!(report.records, 0);
    assert!(
        !report.received_nothing(),
        "rank 1 writes nothing by design: {report}"
    );
}

/// A sink's own dependencies may log through the application's subscriber on the worker
/// thread (an HTTP client, a database driver); none of it may become a record, or one record
/// would beget another.
#[test]
fn nothing_logged_on_the_worker_thread_becomes_a_record() {
    use std::sync::{Arc, OnceLock};
    use tracing::dispatcher::WeakDispatch;
    use tracing_mllog::sink::{Sink, SinkError};

    /// Logs our kinds of spans and events through the application's dispatcher while it writes
    /// (its first 100 records: were they recorded, the cascade would still end).
    struct Chatty(Arc<OnceLock<WeakDispatch>>, u32);
    impl Sink for Chatty {
        fn name(&self) -> &str {
            "chatty"
        }
        fn write(&mut self, _: &tracing_mllog::record::TracedRecord) -> Result<(), SinkError> {
            self.1 += 1;
            if self.1 > 100 {
                return Ok(());
            }
            if let Some(dispatch) = self.0.get().and_then(WeakDispatch::upgrade) {
                tracing::dispatcher::with_default(&dispatch, || {
                    mllog!("from_the_worker", 1);
                    let _block = info_span!("block", samples_count = 1).entered();
                    let _step = info_span!("train_step", samples = 1u64).entered();
                });
            }
            Ok(())
        }
    }

    let app = Arc::new(OnceLock::new());
    let (memory, handle) = MemorySink::new();
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .sink(Chatty(app.clone(), 0))
        .sink(memory)
        .cache_clear(CacheClear::Off)
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .build()
        .expect("build");
    let run = layer.run_handle();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    app.set(dispatch.downgrade()).ok();
    tracing::dispatcher::with_default(&dispatch, || {
        let _run = info_span!("run").entered();
        for i in 0..20u64 {
            mllog!("on_the_training_thread", i);
            // The worker writes (and chats) while the run goes on.
            assert!(guard.flush(Duration::from_secs(5)));
        }
    });
    drop(dispatch);
    let report = guard.shutdown();
    assert!(report.is_clean(), "{report}");
    let records = handle.records();
    let keys = keys_of(&records);
    assert_eq!(keys.len(), 22, "{keys:?}");
    assert!(
        keys.iter()
            .all(|k| *k != "from_the_worker" && !k.starts_with("block")),
        "{keys:?}"
    );
    assert_eq!(run.steps(), 0, "no step opened on the worker counts");
}

/// Each layer scopes records to its own intervals, whatever other layers on the thread do:
/// two layers in one subscriber that track different spans, two subscribers whose span ids
/// coincide, and a layer that shut down with intervals entered before another one starts.
#[test]
fn records_are_scoped_to_their_own_layers_intervals() {
    use tracing_mllog::record::EventType;
    use tracing_mllog::{Interval, Record};
    fn probe(tag: &'static str) {
        mllog!("scope_probe", 0, tag);
    }
    /// Each probe's scope, by the `tag` of the interval it names.
    fn scopes(records: &[TracedRecord]) -> Vec<(String, Option<String>)> {
        let tag = |r: &Record| match r.metadata.get("tag") {
            Some(Value::Str(s)) => s.to_string(),
            other => panic!("tag {other:?}"),
        };
        let names: std::collections::HashMap<u64, String> = records
            .iter()
            .filter(|r| r.event_type == EventType::IntervalStart)
            .filter_map(|r| Some((r.interval?.id, tag(r))))
            .collect();
        records
            .iter()
            .filter(|r| r.key == "scope_probe")
            .map(|r| (tag(r), r.scope.map(|id| names[&id].clone())))
            .collect()
    }
    let want = |pairs: &[(&str, Option<&str>)]| -> Vec<(String, Option<String>)> {
        pairs
            .iter()
            .map(|(t, s)| (t.to_string(), s.map(str::to_string)))
            .collect()
    };

    // Two layers in one subscriber: A's blocks are `block` spans, B's are `blk` spans.
    let (a, mut guard_a, handle_a) = memory_layer(MllogLayer::builder());
    let (b, mut guard_b, handle_b) =
        memory_layer(MllogLayer::builder().span_name(Interval::Block, "blk"));
    let both = Dispatch::new(tracing_subscriber::registry().with(a).with(b));
    tracing::dispatcher::with_default(&both, || {
        let run = info_span!("run", tag = "R").entered();
        probe("x1");
        let block = info_span!("block", tag = "BA").entered();
        probe("x2");
        let blk = info_span!("blk", tag = "BB").entered();
        probe("x3");
        drop(blk);
        probe("x4");
        drop(block);
        probe("x5");
        drop(run);
    });
    guard_a.shutdown();
    guard_b.shutdown();
    let a_sees = [("x1", Some("R")), ("x2", Some("BA")), ("x3", Some("BA"))];
    let a_sees = [&a_sees[..], &[("x4", Some("BA")), ("x5", Some("R"))]].concat();
    assert_eq!(scopes(&handle_a.records()), want(&a_sees));
    let b_sees = [("x1", Some("R")), ("x2", Some("R")), ("x3", Some("BB"))];
    let b_sees = [&b_sees[..], &[("x4", Some("R")), ("x5", Some("R"))]].concat();
    assert_eq!(scopes(&handle_b.records()), want(&b_sees));

    // Two subscribers: both `run` spans get the same id from their registries.
    let (a, mut guard_a, handle_a) = memory_layer(MllogLayer::builder());
    let (b, mut guard_b, handle_b) = memory_layer(MllogLayer::builder());
    let da = Dispatch::new(tracing_subscriber::registry().with(a));
    let db = Dispatch::new(tracing_subscriber::registry().with(b));
    let run_a = tracing::dispatcher::with_default(&da, || info_span!("run", tag = "RA"));
    let run_b = tracing::dispatcher::with_default(&db, || info_span!("run", tag = "RB"));
    assert_eq!(run_a.id(), run_b.id());
    let entered_a = run_a.enter();
    let entered_b = run_b.enter();
    drop(entered_a);
    tracing::dispatcher::with_default(&da, || probe("c1"));
    tracing::dispatcher::with_default(&db, || probe("c2"));
    drop(entered_b);
    tracing::dispatcher::with_default(&db, || probe("c3"));
    drop((run_a, run_b));
    guard_a.shutdown();
    guard_b.shutdown();
    assert_eq!(scopes(&handle_a.records()), want(&[("c1", None)]));
    assert_eq!(
        scopes(&handle_b.records()),
        want(&[("c2", Some("RB")), ("c3", None)])
    );

    // A layer shut down with its intervals entered, then another one on the same thread.
    let (first, mut guard_first, _) = memory_layer(MllogLayer::builder());
    let first = Dispatch::new(tracing_subscriber::registry().with(first));
    tracing::dispatcher::with_default(&first, || {
        let run = info_span!("run", tag = "R1").entered();
        let block = info_span!("block", tag = "B1").entered();
        guard_first.shutdown();
        drop((block, run));
    });
    let (second, mut guard_second, handle) = memory_layer(MllogLayer::builder());
    let second = Dispatch::new(tracing_subscriber::registry().with(second));
    tracing::dispatcher::with_default(&second, || {
        probe("q1");
        let run = info_span!("run", tag = "R2").entered();
        let _block = info_span!("block", tag = "B2");
        probe("q2");
        drop(run);
        probe("q3");
    });
    guard_second.shutdown();
    assert_eq!(
        scopes(&handle.records()),
        want(&[("q1", None), ("q2", Some("R2")), ("q3", None)])
    );
}
