//! The synthetic training loop the child processes of the layer's tests run: blocks of
//! `train_step` spans up to each evaluation point of a preset's schedule, each followed by an
//! evaluation whose metric converges at a chosen evaluation.

use tracing::info_span;
use tracing_mllog::presets::{dry_run, Preset};
use tracing_mllog::{keys, mllog};

/// The `n`-th block (the steps from `*trained` samples up to the `n`-th evaluation point),
/// then the `n`-th evaluation, whose metric reaches the target at `converge_at`. The
/// evaluation is left open: it ends when the caller drops what this returns (a process that
/// exits first leaves it to the exit hook).
#[must_use = "the evaluation ends when this is dropped"]
pub fn block_and_eval(
    preset: &Preset,
    n: u64,
    converge_at: u64,
    trained: &mut u64,
) -> tracing::span::EnteredSpan {
    {
        let _block = info_span!("block").entered();
        while *trained < preset.eval_schedule().point(n) {
            drop(info_span!("train_step").entered());
            *trained += preset.global_batch_size();
        }
    }
    let eval = info_span!("eval").entered();
    mllog!(
        keys::EVAL_ACCURACY,
        dry_run::synthetic_metric(preset, n, converge_at)
    );
    eval
}
