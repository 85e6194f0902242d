//! What the two quickstarts share: the model, its training task and optimizer, the
//! benchmark preset and the layer's configuration, and how a run's outcome is reported. The
//! quickstarts differ only in their training loop: synchronous (`quickstart.rs`) and on a
//! tokio runtime (`quickstart_tokio.rs`); the same seed gives both the same log, but for the
//! clock.
//!
//! The model is a frozen "pretrained" linear classifier `W0` with a rank-16 LoRA adapter
//! (`W = W0 + alpha/r * B A`, alpha 32). The fine-tuning task is generated: a teacher that
//! differs from the pretrained one by a low-rank change, so the adapter can learn it. Training
//! is real: softmax cross-entropy, hand-written backward pass, AdamW with weight decay 1e-4,
//! global gradient-norm clipping at 0.3, cosine learning-rate decay. The quality metric is the
//! eval loss (cross-entropy on a held-out set), and the run converges when it reaches the
//! benchmark's target, 0.925, exactly like the real benchmark's eval loss.

use std::time::Instant;

use tracing_mllog::presets::{Llama2_70bLora, Preset};
use tracing_mllog::Output;
use tracing_mllog::Submission;
use tracing_mllog::{
    keys, Builder, Division, Guard, MllogLayer, Report, Ruleset, RunHandle, SystemStatus,
};
use tracing_subscriber::prelude::*;

pub const DIM: usize = 64;
pub const CLASSES: usize = 8;
pub const RANK: usize = 16;
pub const LORA_ALPHA: usize = 32;
pub const TRAIN_SAMPLES: usize = 8192;
pub const EVAL_SAMPLES: usize = 1024;
pub const GLOBAL_BATCH_SIZE: usize = 8;
pub const MICRO_BATCH_SIZE: usize = 8;
pub const TRAINING_STEPS: usize = 1024;
pub const BASE_LR: f64 = 2e-3;
pub const WEIGHT_DECAY: f64 = 1e-4;
pub const CLIP_NORM: f64 = 0.3;
pub const SEED: u64 = 1234;

/// Where the log goes: `MLLOG_OUTPUT_FILE`, else `results/quickstart/result_0.txt`.
pub fn output() -> String {
    std::env::var("MLLOG_OUTPUT_FILE")
        .unwrap_or_else(|_| "results/quickstart/result_0.txt".to_owned())
}

/// The hyperparameters this run really uses, checked against the closed rules here; exits
/// with status 2 when they break them.
pub fn preset() -> Preset {
    let preset = Llama2_70bLora {
        global_batch_size: GLOBAL_BATCH_SIZE as u64,
        gradient_accumulation_steps: (GLOBAL_BATCH_SIZE / MICRO_BATCH_SIZE) as u64,
        base_learning_rate: BASE_LR,
        training_steps: TRAINING_STEPS as u64,
        gradient_clip_norm: CLIP_NORM,
        weight_decay: WEIGHT_DECAY,
        lora_alpha: LORA_ALPHA as u64,
        train_samples: TRAIN_SAMPLES as u64,
        eval_samples: EVAL_SAMPLES as u64,
        ..Default::default()
    }
    .preset(Division::Closed, Ruleset::V6_1_0)
    .unwrap_or_else(|e| {
        eprintln!("quickstart: {e}");
        std::process::exit(2);
    });
    assert_eq!(
        preset.get(keys::LORA_RANK).and_then(|v| v.as_i128()),
        Some(RANK as i128)
    );
    preset
}

/// The layer's configuration: the preset's benchmark, division, ruleset, global batch size,
/// evaluation schedule, target and hyperparameters, then the submission metadata.
pub fn builder(preset: &Preset, output: &str, config_filename: &str) -> Builder {
    MllogLayer::builder()
        .preset(preset)
        .output(Output::file(output))
        .submission(
            Submission::default()
                .status(SystemStatus::Research)
                .org("tracing-mllog")
                .platform(format!(
                    "1xCPU-{}core",
                    std::thread::available_parallelism().map_or(1, |n| n.get())
                ))
                .config_filename(config_filename)
                .precision("fp64", "fp64", "fp64")
                .parallelism(1, 1, 1, 1)
                .micro_batch_size(MICRO_BATCH_SIZE as u32),
        )
        // f64 everywhere; one process, so every parallelism dimension is 1.
        // Logged as `seed` right after init_start.
        .seed(SEED)
        // The layer counts samples from train_step spans (the preset set the batch size),
        // fills in samples_count, logs throughput per block and train_loss every 16 steps,
        // and decides run_stop's status from the preset's target.
        .train_loss_every(16)
        // The operator's MLLOG_* variables over all of this: scripts/quickstart names the
        // output with MLLOG_OUTPUT_FILE, and MLLOG_RPD_FILE, MLLOG_OTEL, ... turn sinks on.
        .from_env()
}

/// A run under way: what the training loop reads, and what reports at the end.
pub struct Session {
    pub preset: Preset,
    pub output: String,
    pub run: RunHandle,
    pub guard: Guard,
    started: Instant,
}

/// Builds the layer (exiting with status 2 and the reason when it cannot start), installs it
/// as the global subscriber, and starts the clock.
pub fn start(config_filename: &str) -> Session {
    let output = output();
    let preset = preset();
    let (layer, guard) = builder(&preset, &output, config_filename)
        // Slurm's SIGTERM at a time limit ends the run `aborted`, with a complete log.
        .handle_signals(true)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("quickstart: {e}");
            std::process::exit(2);
        });
    let run = layer.run_handle();
    tracing_subscriber::registry().with(layer).init();
    Session {
        preset,
        output,
        run,
        guard,
        started: Instant::now(),
    }
}

impl Session {
    /// Shuts the pipeline down and reports (see [`conclude`]).
    pub fn finish(mut self, outcome: Outcome) {
        let report = self.guard.shutdown();
        let secs = self.started.elapsed().as_secs_f64();
        conclude(&self.preset, &self.output, outcome, secs, report);
    }
}

/// The live checker's verdict on the set-up, asked for between `init` and `run`: a set-up
/// that is not compliant stops here, before any training time is spent.
pub fn preflight(guard: &Guard) {
    if let Some(verdict) = guard.preflight()
        && !verdict.passed(true)
    {
        eprint!(
            "{}",
            verdict.render_text("MLLOG output (before run_start)", true)
        );
        eprintln!("quickstart: the set-up is not compliant; not starting the run");
        std::process::exit(1);
    }
}

pub enum Outcome {
    Converged { samples: usize, eval_loss: f64 },
    NotConverged { samples: usize, eval_loss: f64 },
}

/// Prints the outcome, the pipeline's report and the built-in checker's verdict; exits with
/// status 1 if anything was lost or the log is not compliant.
fn conclude(preset: &Preset, output: &str, outcome: Outcome, secs: f64, report: Report) {
    let target = preset.target();
    println!("MLLOG written to {output}");
    match outcome {
        Outcome::Converged { samples, eval_loss } => println!(
            "run converged: eval loss {eval_loss:.4} (target {target}) after {samples} samples \
             ({secs:.2} s)"
        ),
        Outcome::NotConverged { samples, eval_loss } => println!(
            "run aborted: eval loss {eval_loss:.4} (target {target}) not reached after {samples} \
             samples"
        ),
    }
    println!("pipeline: {report}");
    // The built-in checker saw every line as it was written (live checking is on by default).
    let compliant = match &report.compliance {
        Some(verdict) if verdict.passed(true) => {
            println!(
                "compliance: the log passes ruleset {} (built-in checker, --werror)",
                verdict.ruleset
            );
            true
        }
        Some(verdict) => {
            print!("{}", verdict.render_text(output, true));
            false
        }
        None => true, // MLLOG_LIVE_CHECK=off
    };
    if !report.is_clean() || !compliant {
        std::process::exit(1);
    }
}

pub fn cosine_lr(step: usize) -> f64 {
    let progress = step as f64 / TRAINING_STEPS as f64;
    BASE_LR * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
}

/// The generated fine-tuning task.
pub struct Task {
    pub pretrained: Vec<f64>,
    pub train_x: Vec<f64>,
    pub train_y: Vec<usize>,
    pub eval_x: Vec<f64>,
    pub eval_y: Vec<usize>,
}

impl Task {
    pub fn generate(rng: &mut Rng) -> Task {
        // The "pretrained" classifier, and a teacher for the new task that differs from it by a
        // rank-4 change: the part a LoRA adapter has to learn.
        let pretrained: Vec<f64> = (0..CLASSES * DIM).map(|_| rng.normal() * 0.6).collect();
        let u: Vec<f64> = (0..CLASSES * 4).map(|_| rng.normal()).collect();
        let v: Vec<f64> = (0..4 * DIM).map(|_| rng.normal() * 0.45).collect();
        let mut teacher = pretrained.clone();
        for c in 0..CLASSES {
            for d in 0..DIM {
                teacher[c * DIM + d] += (0..4).map(|k| u[c * 4 + k] * v[k * DIM + d]).sum::<f64>();
            }
        }
        let mut sample = |n: usize| {
            let mut xs = Vec::with_capacity(n * DIM);
            let mut ys = Vec::with_capacity(n);
            for _ in 0..n {
                let x: Vec<f64> = (0..DIM).map(|_| rng.normal()).collect();
                let mut logits = matvec(&teacher, &x);
                for l in &mut logits {
                    *l += rng.normal() * 0.6; // label noise: the loss cannot reach zero
                }
                ys.push(argmax(&logits));
                xs.extend(x);
            }
            (xs, ys)
        };
        let (train_x, train_y) = sample(TRAIN_SAMPLES);
        let (eval_x, eval_y) = sample(EVAL_SAMPLES);
        Task {
            pretrained,
            train_x,
            train_y,
            eval_x,
            eval_y,
        }
    }
}

/// `logits = (W0 + alpha/r * B A) x` with `W0` frozen; parameters are `A` (r x d) then `B` (c x r).
pub struct LoraModel {
    w0: Vec<f64>,
    params: Vec<f64>,
}

impl LoraModel {
    pub fn new(w0: Vec<f64>, rng: &mut Rng) -> LoraModel {
        let mut params = vec![0.0; RANK * DIM + CLASSES * RANK];
        // LoRA initialisation: A random, B zero, so training starts from the pretrained model.
        for a in &mut params[..RANK * DIM] {
            *a = rng.normal() / (DIM as f64).sqrt();
        }
        LoraModel { w0, params }
    }

    pub fn params(&self) -> &[f64] {
        &self.params
    }

    pub fn params_mut(&mut self) -> &mut [f64] {
        &mut self.params
    }

    fn forward(&self, x: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let (a, b) = self.params.split_at(RANK * DIM);
        let ax = matvec(a, x);
        let bax = matvec(b, &ax);
        let scale = LORA_ALPHA as f64 / RANK as f64;
        let mut logits = matvec(&self.w0, x);
        for (l, d) in logits.iter_mut().zip(&bax) {
            *l += scale * d;
        }
        (logits, ax)
    }

    /// The batch's mean loss and the gradient of it.
    pub fn gradients(&self, xs: &[f64], ys: &[usize], batch: &[usize]) -> (f64, Vec<f64>) {
        let (_, b) = self.params.split_at(RANK * DIM);
        let scale = LORA_ALPHA as f64 / RANK as f64 / batch.len() as f64;
        let mut grads = vec![0.0; self.params.len()];
        let mut loss = 0.0;
        for &i in batch {
            let x = &xs[i * DIM..(i + 1) * DIM];
            let (logits, ax) = self.forward(x);
            let mut g = softmax(&logits);
            loss -= g[ys[i]].max(1e-300).ln();
            g[ys[i]] -= 1.0;
            let (ga, gb) = grads.split_at_mut(RANK * DIM);
            // dB = s * g (A x)^T ; dA = s * (B^T g) x^T
            for c in 0..CLASSES {
                for r in 0..RANK {
                    gb[c * RANK + r] += scale * g[c] * ax[r];
                }
            }
            for r in 0..RANK {
                let btg: f64 = (0..CLASSES).map(|c| b[c * RANK + r] * g[c]).sum();
                for d in 0..DIM {
                    ga[r * DIM + d] += scale * btg * x[d];
                }
            }
        }
        (loss / batch.len() as f64, grads)
    }

    pub fn eval_loss(&self, xs: &[f64], ys: &[usize]) -> f64 {
        let n = ys.len();
        let total: f64 = (0..n)
            .map(|i| {
                let (logits, _) = self.forward(&xs[i * DIM..(i + 1) * DIM]);
                -softmax(&logits)[ys[i]].max(1e-300).ln()
            })
            .sum();
        total / n as f64
    }
}

pub struct AdamW {
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl AdamW {
    const BETA1: f64 = 0.9;
    const BETA2: f64 = 0.999;
    const EPS: f64 = 1e-8;

    pub fn new(n: usize) -> AdamW {
        AdamW {
            m: vec![0.0; n],
            v: vec![0.0; n],
            t: 0,
        }
    }

    pub fn step(&mut self, params: &mut [f64], grads: &[f64], lr: f64) {
        self.t += 1;
        let c1 = 1.0 - Self::BETA1.powi(self.t);
        let c2 = 1.0 - Self::BETA2.powi(self.t);
        for i in 0..params.len() {
            self.m[i] = Self::BETA1 * self.m[i] + (1.0 - Self::BETA1) * grads[i];
            self.v[i] = Self::BETA2 * self.v[i] + (1.0 - Self::BETA2) * grads[i] * grads[i];
            let update = (self.m[i] / c1) / ((self.v[i] / c2).sqrt() + Self::EPS);
            params[i] -= lr * (update + WEIGHT_DECAY * params[i]);
        }
    }
}

pub fn clip_global_norm(grads: &mut [f64], max_norm: f64) {
    let norm = grads.iter().map(|g| g * g).sum::<f64>().sqrt();
    if norm > max_norm {
        let k = max_norm / norm;
        grads.iter_mut().for_each(|g| *g *= k);
    }
}

fn matvec(m: &[f64], x: &[f64]) -> Vec<f64> {
    m.chunks_exact(x.len())
        .map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum())
        .collect()
}

fn softmax(logits: &[f64]) -> Vec<f64> {
    let max = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
    let sum: f64 = exps.iter().sum();
    exps.into_iter().map(|e| e / sum).collect()
}

fn argmax(v: &[f64]) -> usize {
    (0..v.len()).fold(0, |best, i| if v[i] > v[best] { i } else { best })
}

/// SplitMix64 with Box-Muller normals: deterministic data from `SEED` without dependencies.
pub struct Rng(pub u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(f64::MIN_POSITIVE);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    pub fn shuffle(&mut self, v: &mut [usize]) {
        for i in (1..v.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}
