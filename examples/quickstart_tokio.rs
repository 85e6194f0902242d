//! The quickstart's run on a tokio multi-thread runtime, as an async training program is
//! written: every phase is a future instrumented with its span (`.instrument(..)`), and every
//! training step is a task spawned onto the runtime, so a step's span opens on one worker
//! thread and may close on another. Same seed, same model (`lora/mod.rs`), same log as the
//! synchronous quickstart, but for the clock.
//!
//! Run it: `cargo run --release --example quickstart_tokio`.

mod lora;

use std::sync::Arc;

use lora::*;
use tracing::{field::Empty, info_span, Instrument, Span};
use tracing_mllog::presets::Preset;
use tracing_mllog::{keys, mllog, train_step, Guard, RunHandle};

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let session = start("examples/quickstart_tokio.rs");
    let outcome = train(&session.preset, &session.run, &session.guard).await;
    session.finish(outcome);
}

/// What a step needs and gives back: the model and optimizer move into the step's task.
struct Trainer {
    model: LoraModel,
    opt: AdamW,
}

async fn train(preset: &Preset, run_state: &RunHandle, guard: &Guard) -> Outcome {
    let (task, mut trainer, mut rng) = async {
        let mut rng = Rng(SEED);
        let task = Arc::new(Task::generate(&mut rng));
        let model = LoraModel::new(task.pretrained.clone(), &mut rng);
        let opt = AdamW::new(model.params().len());
        (task, Trainer { model, opt }, rng)
    }
    .instrument(info_span!("init"))
    .await;
    preflight(guard);

    async {
        let schedule = preset.eval_schedule();
        let mut order: Vec<usize> = (0..TRAIN_SAMPLES).collect();
        let mut step = 0usize;
        let mut eval_loss = f64::INFINITY;
        while step < TRAINING_STEPS && !run_state.converged() {
            trainer = async {
                let mut trainer = trainer;
                loop {
                    let samples = step * GLOBAL_BATCH_SIZE;
                    if samples.is_multiple_of(TRAIN_SAMPLES) {
                        rng.shuffle(&mut order);
                    }
                    let lr = cosine_lr(step);
                    let start = samples % TRAIN_SAMPLES;
                    let batch = order[start..start + GLOBAL_BATCH_SIZE].to_vec();
                    let task = task.clone();
                    let mut t = trainer;
                    // The step runs as its own task, wherever the runtime puts it; its span
                    // opens here, inside the block, and closes on the thread that finishes it.
                    let step_task = async move {
                        let (loss, mut grads) =
                            t.model.gradients(&task.train_x, &task.train_y, &batch);
                        clip_global_norm(&mut grads, CLIP_NORM);
                        tokio::task::yield_now().await;
                        t.opt.step(t.model.params_mut(), &grads, lr);
                        Span::current().record("loss", loss);
                        t
                    };
                    let span = train_step!(step, lr, loss = Empty);
                    trainer = tokio::spawn(step_task.instrument(span))
                        .await
                        .expect("a training step panicked");
                    step += 1;
                    let trained = (step * GLOBAL_BATCH_SIZE) as u64;
                    if schedule.is_due(trained - GLOBAL_BATCH_SIZE as u64, trained)
                        || step == TRAINING_STEPS
                    {
                        break trainer;
                    }
                }
            }
            .instrument(info_span!("block"))
            .await;

            eval_loss = async {
                let loss = trainer.model.eval_loss(&task.eval_x, &task.eval_y);
                mllog!(keys::EVAL_ACCURACY, loss);
                loss
            }
            .instrument(info_span!("eval"))
            .await;
        }
        let samples = run_state.samples() as usize;
        if run_state.converged() {
            Outcome::Converged { samples, eval_loss }
        } else {
            Outcome::NotConverged { samples, eval_loss }
        }
    }
    .instrument(info_span!("run"))
    .await
}
