//! Live compliance checking inside the pipeline: problems reported at `run_start`, before the
//! timed run, and the full verdict in the guard's report.

use std::sync::{Arc, Mutex};

use tracing::info_span;
use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::{keys, mllog, Benchmark, Division, MllogLayer};
use tracing_subscriber::prelude::*;

fn closed_llama2(policy: LivePolicy) -> tracing_mllog::Builder {
    MllogLayer::builder()
        .no_output()
        .benchmark(Benchmark::Llama2_70bLora)
        .division(Division::Closed)
        .org("Org")
        .platform("1xTest")
        .config_filename("cfg.sh")
        .precision("bfloat16", "bfloat16", "bfloat16")
        .parallelism(1, 1, 1, 1)
        .micro_batch_size(1)
        .global_batch_size(8)
        .live_check(policy)
        .environment(Vec::<(String, String)>::new())
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
