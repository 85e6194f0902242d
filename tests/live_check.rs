//! Live compliance checking inside the pipeline: problems reported at `run_start`, before the
//! timed run, and the full verdict in the guard's report.

use std::sync::{Arc, Mutex};

use tracing::info_span;
use tracing_mllog::compliance::{LivePolicy, Severity};
use tracing_mllog::{keys, mllog, Benchmark, CacheClear, Division, MllogLayer, Output, Submission};
use tracing_subscriber::prelude::*;

fn closed_llama2(policy: LivePolicy) -> tracing_mllog::Builder {
    MllogLayer::builder()
        .output(Output::Nowhere)
        .submission(
            Submission::default()
                .benchmark(Benchmark::Llama2_70bLora)
                .division(Division::Closed)
                .org("Org")
                .platform("1xTest")
                .config_filename("cfg.sh")
                .precision("bfloat16", "bfloat16", "bfloat16")
                .parallelism(1, 1, 1, 1)
                .micro_batch_size(1),
        )
        .global_batch_size(8)
        .live_check(policy)
        // The page cache is the launcher's business here; `cache_clear_false_is_said_...`
        // shows the default.
        .cache_clear(CacheClear::ByLauncher)
}

/// With neither the layer nor the program saying the cache was cleared, `cache_clear` is
/// `false` and the live check says so plainly before the clock starts (a note, which
/// `--werror` lets pass: the official rules only need the record).
#[test]
fn cache_clear_false_is_said_before_the_clock_starts() {
    let (layer, mut guard) = closed_llama2(LivePolicy::Warn)
        .cache_clear(CacheClear::NotCleared)
        .seed(7)
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        {
            let _init = info_span!("init").entered();
            log_hyperparameters();
        }
        let verdict = guard.preflight().expect("live checking is on");
        assert!(verdict.passed(true), "{}", messages(&verdict));
        assert_eq!(verdict.findings.len(), 1, "{}", messages(&verdict));
        assert_eq!(verdict.findings[0].severity, Severity::Note);
        assert_eq!(verdict.findings[0].key.as_deref(), Some(keys::CACHE_CLEAR));
        assert!(
            verdict.findings[0]
                .message
                .contains("nothing was cleared by this process"),
            "{}",
            messages(&verdict)
        );
    });
    let report = guard.shutdown();
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("cache_clear is logged `false`")),
        "{report}"
    );
}

#[test]
fn missing_and_wrong_keys_are_reported_at_run_start() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = seen.clone();
    let policy = LivePolicy::Callback(Box::new(move |report| {
        let mut seen = sink.lock().unwrap();
        seen.extend(report.findings.iter().map(|f| f.message.clone()));
    }));
    let (layer, mut guard) = closed_llama2(policy).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        {
            let _init = info_span!("init").entered();
            mllog!(keys::GLOBAL_BATCH_SIZE, 8);
            mllog!(keys::LORA_RANK, 8); // the closed rules fix 16
        }
        let _run = info_span!("run").entered();
        // The callback has run by the time the worker saw run_start.
        assert!(guard.flush(std::time::Duration::from_secs(5)));
        let seen = seen.lock().unwrap();
        let all = seen.join("\n");
        assert!(all.contains("lora_rank") && all.contains("16"), "{all}");
        assert!(
            all.contains("train_samples"),
            "missing keys are named: {all}"
        );
        // Keys that belong after run_start are not reported yet.
        assert!(!all.contains("eval_accuracy"), "{all}");
    });
    let report = guard.shutdown();
    let verdict = report
        .compliance
        .as_ref()
        .expect("live checking is on by default");
    assert!(!verdict.passed(true));
    assert!(report.to_string().contains("NOT compliant"), "{report}");
}

#[test]
fn a_complete_run_is_compliant_and_off_means_no_checker() {
    let (layer, mut guard) = closed_llama2(LivePolicy::Warn).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        {
            let _init = info_span!("init").entered();
            log_hyperparameters();
        }
        let _run = info_span!("run", status = "success").entered();
        {
            let _b = info_span!("block").entered();
            for _ in 0..3 {
                let _s = info_span!("train_step").entered();
            }
        }
        mllog!(keys::EVAL_ACCURACY, 0.92);
    });
    let report = guard.shutdown();
    let verdict = report.compliance.unwrap();
    assert!(
        verdict.passed(true),
        "{}",
        verdict.render_text("live", true)
    );

    let (layer, mut guard) = closed_llama2(LivePolicy::Off)
        .build::<tracing_subscriber::Registry>()
        .unwrap();
    drop(layer);
    assert!(guard.shutdown().compliance.is_none());
}

/// The closed llama2_70b_lora hyperparameters, as a complete set-up logs them inside `init`.
fn log_hyperparameters() {
    for (k, v) in [
        (keys::GLOBAL_BATCH_SIZE, 8.0),
        (keys::TRAIN_SAMPLES, 3901.0),
        (keys::EVAL_SAMPLES, 173.0),
        (keys::GRADIENT_ACCUMULATION_STEPS, 1.0),
        (keys::OPT_ADAMW_WEIGHT_DECAY, 1e-4),
        (keys::OPT_GRADIENT_CLIP_NORM, 0.3),
        (keys::OPT_LR_TRAINING_STEPS, 1024.0),
        (keys::OPT_BASE_LR, 4e-4),
        (keys::LORA_RANK, 16.0),
        (keys::LORA_ALPHA, 32.0),
    ] {
        mllog!(k, v);
    }
}

fn messages(report: &tracing_mllog::compliance::ComplianceReport) -> String {
    report
        .findings
        .iter()
        .map(|f| format!("{:?} {}", f.severity, f.message))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `Guard::preflight` between `init` and `run` gives the verdict on the set-up while the
/// clock has not started: a wrong or missing key fails it, a complete set-up passes, and a
/// missing seed is a warning (fails under `--werror`).
#[test]
fn preflight_judges_the_set_up_before_the_clock_starts() {
    let (layer, mut guard) = closed_llama2(LivePolicy::Off)
        .build::<tracing_subscriber::Registry>()
        .unwrap();
    assert!(
        guard.preflight().is_none(),
        "no checker, no verdict (live checking off)"
    );
    drop(layer);
    let _ = guard.shutdown();

    // Incomplete: lora_rank wrong, the rest missing.
    let (layer, mut guard) = closed_llama2(LivePolicy::Warn).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        {
            let _init = info_span!("init").entered();
            mllog!(keys::LORA_RANK, 8);
        }
        let verdict = guard.preflight().expect("live checking is on");
        assert!(!verdict.passed(false), "{}", messages(&verdict));
        let all = messages(&verdict);
        assert!(
            all.contains("lora_rank") && all.contains("train_samples"),
            "{all}"
        );
        assert!(all.contains("no `seed` logged"), "{all}");
    });
    let _ = guard.shutdown();

    // Complete but for the seed: passes, with a warning.
    let (layer, mut guard) = closed_llama2(LivePolicy::Warn).build().unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        {
            let _init = info_span!("init").entered();
            log_hyperparameters();
        }
        let verdict = guard.preflight().expect("live checking is on");
        assert!(verdict.passed(false), "{}", messages(&verdict));
        assert!(!verdict.passed(true), "{}", messages(&verdict));
        assert_eq!(verdict.findings.len(), 1, "{}", messages(&verdict));
        assert_eq!(verdict.findings[0].key.as_deref(), Some(keys::SEED));
    });
    let _ = guard.shutdown();

    // Complete, the seed from the builder: passes under --werror, and no run_start yet.
    let (sink, records) = tracing_mllog::sink::MemorySink::new();
    let (layer, mut guard) = closed_llama2(LivePolicy::Warn)
        .seed(7)
        .sink(sink)
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        {
            let _init = info_span!("init").entered();
            log_hyperparameters();
        }
        let verdict = guard.preflight().expect("live checking is on");
        assert!(verdict.passed(true), "{}", messages(&verdict));
    });
    let report = guard.shutdown();
    let keys = records.keys();
    assert!(keys.contains(&"seed".to_owned()), "{keys:?}");
    assert!(!keys.contains(&"run_start".to_owned()), "{keys:?}");
    assert!(report.is_clean(), "{report}");
}

/// With the benchmark's evaluation schedule (a preset sets it), an `eval_accuracy` whose
/// `samples_count` is not an evaluation point is a warning as soon as it is logged; one on the
/// schedule is not.
#[test]
fn an_evaluation_off_the_schedule_is_a_warning_when_it_is_logged() {
    let schedule = tracing_mllog::run::EvalSchedule::every_skipping(48, 2);
    let (layer, mut guard) = closed_llama2(LivePolicy::Warn)
        .seed(7)
        .eval_schedule(schedule)
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        {
            let _init = info_span!("init").entered();
            log_hyperparameters();
        }
        let _run = info_span!("run").entered();
        mllog!(keys::EVAL_ACCURACY, 0.95, samples_count = 144); // the first point: 3 * 48
        let verdict = guard.preflight().unwrap();
        assert!(verdict.passed(true), "{}", messages(&verdict));
        mllog!(keys::EVAL_ACCURACY, 0.94, samples_count = 150);
        let verdict = guard.preflight().unwrap();
        let all = messages(&verdict);
        assert!(!verdict.passed(true), "{all}");
        assert!(
            all.contains("samples_count 150 is off the benchmark's evaluation schedule")
                && all.contains("nearest points are 144 and 192"),
            "{all}"
        );
    });
    let _ = guard.shutdown();
}

/// A build without the `rules` feature cannot read the rules `MLLOG_RULES` names: the guard's
/// report says so, once, and the built-in rules check the run as always (nothing of the
/// variable is silently dropped).
#[cfg(not(feature = "rules"))]
#[test]
fn mllog_rules_without_the_rules_feature_is_said() {
    let (layer, mut guard) = closed_llama2(LivePolicy::Warn)
        .seed(7)
        .environment([("MLLOG_RULES", "python")])
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        {
            let _init = info_span!("init").entered();
            log_hyperparameters();
        }
        drop(info_span!("run").entered());
    });
    let report = guard.shutdown();
    let said: Vec<&String> = report
        .warnings
        .iter()
        .filter(|w| w.contains("MLLOG_RULES=python"))
        .collect();
    assert_eq!(said.len(), 1, "{report}");
    assert!(said[0].contains("lacks its `rules` feature"), "{}", said[0]);
    assert!(report.live_rules.is_none());
    assert!(report.compliance.is_some(), "the built-in check runs");
}
