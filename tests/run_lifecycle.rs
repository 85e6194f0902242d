//! Run lifecycle driven by spans: throughput over in-step time only, train_loss, warmup,
//! convergence-aware run_stop, filled-in samples_count, NaN metrics.

use std::time::Duration;

use tracing::{field::Empty, info_span};
use tracing_mllog::record::TracedRecord;
use tracing_mllog::sink::MemorySink;
use tracing_mllog::{keys, mllog, train_step, MllogLayer, Output, RunHandle, Target, Value};
use tracing_subscriber::prelude::*;
use tracing_subscriber::registry::LookupSpan;

fn run<F: FnOnce(&RunHandle)>(builder: tracing_mllog::Builder, f: F) -> Vec<TracedRecord> {
    let (sink, handle) = MemorySink::new();
    let (layer, guard) = builder
        .output(Output::Nowhere)
        .sink(sink)
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .build()
        .unwrap();
    let run_handle = layer.run_handle();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        f(&run_handle)
    });
    drop(guard);
    handle.records()
}

fn find<'a>(records: &'a [TracedRecord], key: &str) -> Vec<&'a TracedRecord> {
    records.iter().filter(|r| r.key == key).collect()
}

fn status(records: &[TracedRecord]) -> String {
    find(records, "run_stop")[0]
        .metadata
        .get("status")
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn throughput_counts_in_step_time_only() {
    let step = Duration::from_millis(20);
    let records = run(MllogLayer::builder().global_batch_size(32), |_| {
        let _run = info_span!("run").entered();
        for _ in 0..2 {
            let block = info_span!("block").entered();
            for _ in 0..5 {
                let _s = info_span!("train_step").entered();
                std::thread::sleep(step);
                drop(_s);
                std::thread::sleep(Duration::from_millis(30)); // a gap between steps
            }
            drop(block);
            let _eval = info_span!("eval").entered();
            std::thread::sleep(Duration::from_millis(200)); // evaluation is not training
        }
    });
    let stats = find(&records, "tracked_stats");
    assert_eq!(stats.len(), 3, "two blocks and the whole run");
    let ideal = 32.0 / step.as_secs_f64(); // 1600 samples/s if only step time counts
    for s in &stats {
        let t = s.value.get("throughput").unwrap().as_f64().unwrap();
        // Sleeping overshoots a little; counting gaps or eval would give < 700 samples/s.
        assert!(
            t > ideal * 0.7 && t <= ideal * 1.01,
            "throughput {t} vs {ideal}"
        );
    }
    assert_eq!(stats[2].metadata.get("overall"), Some(&Value::Bool(true)));
    assert_eq!(
        stats[2].metadata.get("samples_count"),
        Some(&Value::Int(320))
    );
    assert_eq!(stats[0].metadata.get("steps"), Some(&Value::Int(5)));
    // samples_count filled in where the rules need it, from the counted steps.
    let blocks = find(&records, "block_stop");
    assert_eq!(
        blocks[0].metadata.get("samples_count"),
        Some(&Value::Int(160))
    );
    assert_eq!(
        find(&records, "block_start")[1]
            .metadata
            .get("samples_count"),
        Some(&Value::Int(160))
    );
    assert_eq!(
        find(&records, "run_stop")[0].metadata.get("samples_count"),
        Some(&Value::Int(320))
    );
}

#[test]
fn warmup_steps_count_for_nothing_and_train_loss_has_the_count_after_the_step() {
    let records = run(
        MllogLayer::builder()
            .global_batch_size(8)
            .train_loss_every(2),
        |handle| {
            {
                let _w = info_span!("warmup").entered();
                for i in 0..3u64 {
                    let s = info_span!("train_step", step = i, loss = Empty).entered();
                    s.record("loss", 9.0);
                }
            }
            let _run = info_span!("run").entered();
            for i in 0..4u64 {
                let s = info_span!("train_step", step = i, lr = 0.01, loss = Empty).entered();
                s.record("loss", 1.0 / (i + 1) as f64);
            }
            assert_eq!(handle.steps(), 4);
            assert_eq!(handle.samples(), 32);
        },
    );
    let losses = find(&records, "train_loss");
    assert_eq!(losses.len(), 2, "steps 0 and 2, none from warmup");
    assert_eq!(losses[0].value, Value::Float(1.0));
    assert_eq!(
        losses[0].metadata.get("samples_count"),
        Some(&Value::Int(8))
    );
    assert_eq!(
        losses[1].metadata.get("samples_count"),
        Some(&Value::Int(24))
    );
    assert_eq!(losses[1].metadata.get("lr"), Some(&Value::Float(0.01)));
}

/// `train_step!`'s first argument is the step, whatever expression it is; a field written as
/// `name = value` or shorthand is still a field.
#[test]
fn the_macro_takes_any_expression_as_the_step() {
    let records = run(
        MllogLayer::builder()
            .global_batch_size(8)
            .train_loss_every(1),
        |handle| {
            let _run = info_span!("run").entered();
            let lr = 0.5;
            for i in 0..3u64 {
                let s = train_step!(i * 10 + 1, lr, loss = Empty).entered();
                s.record("loss", 2.0);
            }
            let step = 7u64;
            drop(train_step!(step, loss = 1.0).entered());
            drop(train_step!(step = 9u64, loss = 1.0).entered());
            assert_eq!(handle.steps(), 5);
        },
    );
    let steps: Vec<_> = find(&records, "train_loss")
        .iter()
        .map(|r| {
            (
                r.metadata.get("step").cloned(),
                r.metadata.get("lr").cloned(),
            )
        })
        .collect();
    let lr = Some(Value::Float(0.5));
    assert_eq!(
        steps,
        [
            (Some(Value::Int(1)), lr.clone()),
            (Some(Value::Int(11)), lr.clone()),
            (Some(Value::Int(21)), lr),
            (Some(Value::Int(7)), None),
            (Some(Value::Int(9)), None),
        ]
    );
}

/// Nothing follows `run_stop`: a root `block` span still open when `run` closes ends first,
/// and its own close later writes nothing.
#[test]
fn intervals_still_open_when_the_run_closes_end_before_it() {
    let records = run(MllogLayer::builder().global_batch_size(8), |_| {
        let run = info_span!("run");
        let block = run.in_scope(|| info_span!(parent: None, "block"));
        let eval = block.in_scope(|| info_span!("eval"));
        drop(run);
        drop(eval);
        drop(block);
    });
    let keys: Vec<&str> = records
        .iter()
        .filter(|r| r.key.ends_with("_start") || r.key.ends_with("_stop"))
        .map(|r| &*r.key)
        .collect();
    assert_eq!(
        keys,
        [
            "run_start",
            "block_start",
            "eval_start",
            "eval_stop",
            "block_stop",
            "run_stop"
        ]
    );
}

/// A step whose body panics trained nothing: unwinding closes its span, which is not counted.
#[test]
fn a_step_that_panics_is_not_counted() {
    let records = run(MllogLayer::builder().global_batch_size(8), |handle| {
        let _run = info_span!("run").entered();
        drop(info_span!("train_step", step = 0u64).entered());
        let unwound = std::panic::catch_unwind(|| {
            let _step = train_step!(step = 1u64).entered();
            panic!("out of memory in the step");
        });
        assert!(unwound.is_err());
        drop(info_span!("train_step", step = 2u64).entered());
        assert_eq!(handle.steps(), 2);
        assert_eq!(handle.samples(), 16);
    });
    assert_eq!(
        find(&records, "run_stop")[0].metadata.get("samples_count"),
        Some(&Value::Int(16))
    );
}

/// Steps on one thread that close out of order, or nest, are each counted once with their own
/// fields (the innermost-first fast path and the search below it).
#[test]
fn steps_that_do_not_nest_are_each_counted_with_their_own_fields() {
    let records = run(MllogLayer::builder().train_loss_every(1), |handle| {
        let _run = info_span!("run").entered();
        let a = info_span!("train_step", step = 1u64, samples = 3u64, loss = Empty);
        let b = info_span!("train_step", step = 2u64, samples = 5u64, loss = Empty);
        a.record("loss", 0.5);
        b.record("loss", 0.25);
        drop(a); // b, opened later, is still open
        assert_eq!((handle.steps(), handle.samples()), (1, 3));
        drop(b);
        assert_eq!((handle.steps(), handle.samples()), (2, 8));
        {
            let _outer =
                info_span!("train_step", step = 3u64, samples = 7u64, loss = 0.125).entered();
            let _inner = info_span!("train_step", step = 4u64, samples = 11u64).entered();
        }
        assert_eq!((handle.steps(), handle.samples()), (4, 26));
        // Nothing is left open: a later step is counted as usual.
        drop(info_span!(
            "train_step",
            step = 5u64,
            samples = 1u64,
            loss = 1.0
        ));
        assert_eq!((handle.steps(), handle.samples()), (5, 27));
    });
    let losses: Vec<_> = find(&records, "train_loss")
        .iter()
        .map(|r| {
            (
                r.metadata.get("step").cloned(),
                r.value.clone(),
                r.metadata.get("samples_count").cloned(),
            )
        })
        .collect();
    assert_eq!(
        losses,
        [
            (Some(Value::Int(1)), Value::Float(0.5), Some(Value::Int(3))),
            (Some(Value::Int(2)), Value::Float(0.25), Some(Value::Int(8))),
            (
                Some(Value::Int(3)),
                Value::Float(0.125),
                Some(Value::Int(26))
            ),
            (Some(Value::Int(5)), Value::Float(1.0), Some(Value::Int(27))),
        ]
    );
}

/// A step opened with `train_step!` (or `#[instrument(parent = None)]`) is a root span for the
/// `Registry`; the layer does not read the span tree for steps, so it is counted, reported and
/// traced (parent: its block) exactly like a step opened as a child of its block.
#[test]
fn root_steps_from_the_macro_are_recorded_like_child_steps() {
    #[tracing::instrument(name = "train_step", parent = None, skip_all, fields(step = step, loss))]
    fn instrumented_step(step: u64) {
        tracing::Span::current().record("loss", 1.0 / (step + 1) as f64);
    }
    #[derive(Clone, Copy, Debug)]
    enum Form {
        Child,
        Macro,
        Instrument,
    }
    let workload = |form: Form| {
        let builder = MllogLayer::builder()
            .global_batch_size(4)
            .train_loss_every(1)
            .trace_steps(true);
        let records = run(builder, |handle| {
            let _run = info_span!("run").entered();
            let _block = info_span!("block").entered();
            for i in 0..3u64 {
                let s = match form {
                    Form::Child => info_span!("train_step", step = i, loss = Empty),
                    Form::Macro => train_step!(step = i, loss = Empty),
                    Form::Instrument => {
                        instrumented_step(i);
                        continue;
                    }
                };
                // What the `Registry` holds: the macro's step has no parent, the other one does.
                let has_parent = tracing::dispatcher::get_default(|d| {
                    let registry = d.downcast_ref::<tracing_subscriber::Registry>().unwrap();
                    let id = s.id().unwrap();
                    registry.span(&id).unwrap().parent().is_some()
                });
                assert_eq!(has_parent, matches!(form, Form::Child), "{form:?}");
                let s = s.entered();
                s.record("loss", 1.0 / (i + 1) as f64);
            }
            assert_eq!((handle.steps(), handle.samples()), (3, 12), "{form:?}");
        });
        // Everything but times, source lines and measured throughput.
        records
            .into_iter()
            .map(|mut r| {
                r.metadata.lineno = None;
                if r.key == "tracked_stats" {
                    r.value = Value::Null;
                }
                let (interval, trace_only) = (r.interval, r.trace_only);
                let line = r.record;
                (line.key, line.value, line.metadata, interval, trace_only)
            })
            .collect::<Vec<_>>()
    };
    let children = workload(Form::Child);
    assert_eq!(
        children
            .iter()
            .filter(|r| r.0 == "train_step_start" && r.3.unwrap().parent == Some(1))
            .count(),
        3,
        "traced under the block (interval 1; the run is 0): {children:#?}"
    );
    assert_eq!(workload(Form::Macro), children);
    assert_eq!(workload(Form::Instrument), children);
}

#[test]
fn convergence_decides_run_stop() {
    let target = Target::at_most(0.925);
    // Reached: success, and the loop learns it through the handle.
    let records = run(MllogLayer::builder().target(target), |h| {
        let _run = info_span!("run").entered();
        for (i, loss) in [1.2, 0.95, 0.91, 0.5].into_iter().enumerate() {
            mllog!(keys::EVAL_ACCURACY, loss, samples_count = i * 100);
            if h.converged() {
                break;
            }
        }
    });
    assert_eq!(status(&records), "success");
    assert_eq!(
        find(&records, "eval_accuracy").len(),
        3,
        "the loop stopped at the target"
    );
    assert_eq!(find(&records, "run_stop")[0].value, Value::Float(0.91));

    // Never reached: aborted.
    let records = run(MllogLayer::builder().target(target), |_| {
        let _run = info_span!("run").entered();
        mllog!(keys::EVAL_ACCURACY, 0.99, samples_count = 10);
    });
    assert_eq!(status(&records), "aborted");

    // An explicit status wins over convergence.
    let records = run(MllogLayer::builder().target(target), |_| {
        let run = info_span!("run", status = Empty).entered();
        mllog!(keys::EVAL_ACCURACY, 0.5, samples_count = 10);
        run.record("status", "aborted");
    });
    assert_eq!(status(&records), "aborted");
}

#[test]
fn target_from_the_environment() {
    let (sink, handle) = MemorySink::new();
    let (layer, guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .sink(sink)
        .target(Target::at_most(0.925))
        .environment([("MLLOG_TARGET_EVAL_LOSS", "2.0")])
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _run = info_span!("run").entered();
        mllog!(keys::EVAL_ACCURACY, 1.5, samples_count = 10);
    });
    drop(guard);
    assert_eq!(status(&handle.records()), "success");
}

#[test]
fn nan_metrics_are_nan_never_null() {
    let records = run(MllogLayer::builder().target(Target::at_most(0.925)), |h| {
        let _run = info_span!("run").entered();
        mllog!(keys::EVAL_ACCURACY, f64::NAN, samples_count = 10);
        assert!(h.diverged());
        tracing::info!(mllog.key = keys::EVAL_ACCURACY, samples_count = 20); // no value at all
    });
    let evals = find(&records, "eval_accuracy");
    for e in &evals {
        assert!(e.value.as_f64().unwrap().is_nan());
        assert!(e.to_line().contains(r#""value": NaN"#), "{}", e.to_line());
    }
    assert_eq!(status(&records), "aborted");
}

#[test]
fn traced_steps_reach_tracing_sinks_but_never_the_mllog_file() {
    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let file = Shared::default();
    let (sink, handle) = MemorySink::new();
    let (layer, guard) = MllogLayer::builder()
        .output(Output::writer(file.clone()))
        .sink(sink)
        .global_batch_size(4)
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .environment([("MLLOG_TRACE_STEPS", "1")])
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _run = info_span!("run").entered();
        let _block = info_span!("block").entered();
        for i in 0..2u64 {
            let s = info_span!("train_step", step = i, loss = Empty).entered();
            s.record("loss", 0.5);
        }
    });
    drop(guard);
    let records = handle.records();
    let steps: Vec<&TracedRecord> = records
        .iter()
        .filter(|r| r.key.starts_with("train_step"))
        .collect();
    assert_eq!(steps.len(), 4);
    assert!(steps.iter().all(|r| r.trace_only));
    let block = find(&records, "block_start")[0].interval.unwrap().id;
    assert!(steps
        .iter()
        .all(|r| r.interval.unwrap().parent == Some(block)));
    assert_eq!(
        steps[1].interval, steps[0].interval,
        "start and stop are paired"
    );
    assert_eq!(steps[1].metadata.get("samples_count"), Some(&Value::Int(4)));
    let text = String::from_utf8(file.0.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("block_start") && !text.contains(r#""key": "train_step"#),
        "{text}"
    );
}

/// An `eval_accuracy` that says nothing of where in training it is gets the counted samples
/// after its own fields, which reach the record in the order they were logged (strings,
/// numbers and a list among them); one with an `epoch_num` or its own `samples_count` gets
/// none.
#[test]
fn eval_accuracy_gets_samples_count_after_its_own_fields() {
    let records = run(MllogLayer::builder().global_batch_size(8), |_| {
        let _run = info_span!("run").entered();
        for i in 0..2u64 {
            drop(train_step!(step = i, samples = 8u64).entered());
        }
        mllog!(keys::EVAL_ACCURACY, 0.5, step = 1, host = "node-017");
        mllog!(
            keys::EVAL_ACCURACY,
            0.6,
            host = "node-017",
            shape = [1, 2],
            rank = 2,
            note = "late",
            last = true
        );
        mllog!(keys::EVAL_ACCURACY, 0.7, samples_count = 16, host = "h");
        mllog!(keys::EVAL_ACCURACY, 0.8, host = "h", epoch_num = 3);
    });
    let evals = find(&records, "eval_accuracy");
    let names = |r: &TracedRecord| -> Vec<String> {
        r.metadata
            .fields
            .iter()
            .map(|(k, _)| k.to_string())
            .collect()
    };
    assert_eq!(names(evals[0]), ["step", "host", "samples_count"]);
    assert_eq!(
        evals[0].metadata.get("samples_count"),
        Some(&Value::Int(16))
    );
    assert_eq!(
        evals[0].metadata.get("host"),
        Some(&Value::from("node-017"))
    );
    assert_eq!(
        names(evals[1]),
        ["host", "shape", "rank", "note", "last", "samples_count"]
    );
    assert_eq!(evals[1].metadata.get("note"), Some(&Value::from("late")));
    assert_eq!(names(evals[2]), ["samples_count", "host"]);
    assert_eq!(evals[2].value, Value::Float(0.7));
    assert_eq!(names(evals[3]), ["host", "epoch_num"]);
}
