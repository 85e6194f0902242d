//! Results tooling: what a submitter needs after the runs.
//!
//! - [`summary`]: per run — benchmark, status, time to train, samples to converge, the eval
//!   curve, throughput, init time — as typed structs, with text / JSON / CSV renderers.
//! - [`score`]: the benchmark score of `results/<system>/<benchmark>/result_*.txt` the way
//!   MLCommons' `result_summarizer` computes it (olympic mean, one dropped run, `scaling.json`),
//!   with every decision explained.
//! - plots (eval metric vs samples, step-time distribution) are the `mllog` command's:
//!   `mllog_cli::plot` in the `mllog-cli` package.
//! - `package` (feature `serde`): lays result files out as the package checker expects
//!   (`results/<system>/<benchmark>/result_<i>.txt`) and checks the seeds.
//!
//! ```
//! use mllog_core::compliance::{example_log, Division, Ruleset};
//! use mllog_core::results::summary::summarize_text;
//! use mllog_core::Benchmark;
//!
//! let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
//! let run = summarize_text("result_0.txt", &log);
//! assert_eq!(run.benchmark.as_deref(), Some("llama2_70b_lora"));
//! assert!(run.converged);
//! assert!(run.time_to_train_min.unwrap() > 0.0);
//! ```

#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub mod package;
pub mod score;
pub mod summary;

pub use summary::WALL_CLOCK_STEP_MS;

/// How many result files the package checker wants for `benchmark` (training, strong scaling),
/// from `mlperf_logging.benchmark_meta` 4.1.68. `None` for an unknown benchmark.
pub fn required_runs(benchmark: &str) -> Option<usize> {
    Some(match benchmark {
        "bert" | "dlrm_dcnv2" | "gnmt" | "minigo" | "stable_diffusion" | "transformer" | "ncf"
        | "rnnt" | "gnn" | "rgat" | "llama2_70b_lora" | "llama31_8b" | "flux1" | "gpt_oss_20b"
        | "dlrmv4" => 10,
        "dlrm" | "maskrcnn" | "resnet" | "ssd" | "retinanet" => 5,
        "gpt3" | "llama31_405b" | "deepseekv3_671b" | "qwen35_397b_grpo" => 3,
        "unet3d" => 40,
        _ => return None,
    })
}

/// How many runs olympic scoring may drop at each end: 4 for `unet3d`, else 1
/// (`result_summarizer._compute_strong_score_standalone`).
pub fn max_dropped_runs(benchmark: &str) -> usize {
    if benchmark == "unet3d" {
        4
    } else {
        1
    }
}
