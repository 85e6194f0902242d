//! A program built with `panic = "abort"` by tests/exit_paths.rs (as a package of its own, see
//! `panic_abort_child` there): cargo builds test targets, and the library they link, with
//! unwinding whatever the profile says, so a test binary cannot show what a `panic = "abort"`
//! training program does.
//!
//! The run converges, then a new block panics: the panic hook must end the block and the run
//! (`aborted`, converged or not) and flush the log before the process aborts.

use tracing::info_span;
use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::{keys, mllog, MllogLayer, Output, Target};
use tracing_subscriber::prelude::*;

fn main() {
    const { assert!(cfg!(panic = "abort"), "built without panic = \"abort\"") };
    let log = std::env::args_os().nth(1).expect("usage: child LOG");
    let (layer, _guard) = MllogLayer::builder()
        .output(Output::file(log))
        .global_batch_size(8)
        .target(Target::at_most(0.5))
        .live_check(LivePolicy::Off)
        .build()
        .expect("build the layer");
    let handle = layer.run_handle();
    tracing_subscriber::registry().with(layer).init();

    drop(info_span!("init").entered());
    let _run = info_span!("run").entered();
    {
        let _block = info_span!("block").entered();
        for step in 0..4u64 {
            drop(info_span!("train_step", step).entered());
        }
    }
    {
        let _eval = info_span!("eval").entered();
        mllog!(keys::EVAL_ACCURACY, 0.25);
    }
    assert!(handle.converged());
    let _block = info_span!("block").entered();
    let _step = info_span!("train_step", step = 4u64).entered();
    panic!("boom in the second block");
}
