//! The quickstart: a real (small) LoRA fine-tuning run, instrumented only through `tracing`,
//! that writes an MLPerf Training log in the closed `llama2_70b_lora` shape (ruleset 6.1.0).
//!
//! The hyperparameters go through the `llama2_70b_lora` preset, which validates them against
//! the closed rules and logs every key the rules require, in order; the preset also gives the
//! evaluation schedule and the target. The training code itself only opens spans (`init`,
//! `run`, `block`, `train_step`, `eval`) and logs `eval_accuracy` events; the seed goes
//! through the builder. Between `init` and `run`, the live checker's verdict on the set-up
//! decides whether the run starts at all. The model and its task: `lora/mod.rs`.
//!
//! Run it: `cargo run --release --example quickstart`. `MLLOG_*` variables override the
//! output file and the submission metadata. `quickstart_tokio.rs` is the same run on a tokio
//! runtime.

mod lora;

use lora::*;
use tracing::{field::Empty, info_span};
use tracing_mllog::presets::Preset;
use tracing_mllog::{keys, mllog, train_step, Guard, RunHandle};

fn main() {
    let session = start("examples/quickstart.rs");
    let outcome = train(&session.preset, &session.run, &session.guard);
    session.finish(outcome);
}

fn train(preset: &Preset, run_state: &RunHandle, guard: &Guard) -> Outcome {
    // init_start, the submission metadata, the seed and the preset's hyperparameters are
    // logged when this span opens.
    let init = info_span!("init").entered();
    let mut rng = Rng(SEED);
    let task = Task::generate(&mut rng);
    let mut model = LoraModel::new(task.pretrained.clone(), &mut rng);
    let mut opt = AdamW::new(model.params().len());
    drop(init);
    preflight(guard);

    let _run = info_span!("run").entered();
    // Every ceil(384 / gbs) * gbs samples after skipping the first floor(0.125 * gbs + 2)
    // evaluations, as the llama2_70b_lora rules prescribe.
    let schedule = preset.eval_schedule();
    let mut order: Vec<usize> = (0..TRAIN_SAMPLES).collect();
    let mut step = 0usize;
    let mut eval_loss = f64::INFINITY;
    while step < TRAINING_STEPS && !run_state.converged() {
        let block = info_span!("block").entered();
        loop {
            let samples = step * GLOBAL_BATCH_SIZE;
            if samples.is_multiple_of(TRAIN_SAMPLES) {
                rng.shuffle(&mut order);
            }
            let lr = cosine_lr(step);
            // `info_span!("train_step", ..)` as a root span: the layer places it in its block
            // itself, and the `Registry` skips the parent bookkeeping (docs/performance.md).
            let train_step = train_step!(step, lr, loss = Empty).entered();
            let start = samples % TRAIN_SAMPLES;
            let batch = &order[start..start + GLOBAL_BATCH_SIZE];
            let (loss, mut grads) = model.gradients(&task.train_x, &task.train_y, batch);
            clip_global_norm(&mut grads, CLIP_NORM);
            opt.step(model.params_mut(), &grads, lr);
            train_step.record("loss", loss);
            drop(train_step);
            step += 1;
            let trained = (step * GLOBAL_BATCH_SIZE) as u64;
            if schedule.is_due(trained - GLOBAL_BATCH_SIZE as u64, trained)
                || step == TRAINING_STEPS
            {
                break;
            }
        }
        drop(block);

        let _eval = info_span!("eval").entered();
        eval_loss = model.eval_loss(&task.eval_x, &task.eval_y);
        mllog!(keys::EVAL_ACCURACY, eval_loss);
    }
    let samples = run_state.samples() as usize;
    if run_state.converged() {
        Outcome::Converged { samples, eval_loss }
    } else {
        Outcome::NotConverged { samples, eval_loss }
    }
}
