//! The candle example's runs, as child processes of the example's binary (`scripts/candle` runs
//! these with `cargo test --release --manifest-path examples/candle-flow/Cargo.toml`, after
//! sourcing `scripts/venv.sh` for `MLLOG_PYTHON`; without it the checker test fails and says
//! so, it never skips). A run takes seconds, so each test makes its own.
//!
//! - a run converges (`run_stop` says `success`, the eval curve falls to the target), and the
//!   official checker accepts its log with `--werror`, and rejects it without a key the rules
//!   require;
//! - candle's device synchronisation is wired: `MLLOG_DEVICE_SYNC=steps` (an error at `build()`
//!   when the program gives no synchronisation) runs, and the seeded run repeats record for
//!   record; an unknown place is refused with exit status 2.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tracing_mllog::record::{parse_log, Record};

/// An empty directory of this name in cargo's directory for test files.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the run");
    dir
}

/// The example in `dir`, its log in `dir/result_0.txt`, none of the caller's MLLOG settings.
fn run_example(dir: &Path, env: &[(&str, &str)]) -> (Output, PathBuf) {
    let log = dir.join("result_0.txt");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_candle-flow"));
    cmd.env("MLLOG_OUTPUT_FILE", &log).current_dir(dir);
    for var in tracing_mllog::env::SUBMISSION_VARIABLES {
        cmd.env_remove(var);
    }
    cmd.env_remove("MLLOG_DEVICE_SYNC");
    for (k, v) in env {
        cmd.env(k, v);
    }
    (cmd.output().expect("run candle-flow"), log)
}

fn succeeded(out: &Output) -> &Output {
    assert!(
        out.status.success(),
        "candle-flow failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn records(log: &Path) -> Vec<Record> {
    let text = std::fs::read_to_string(log).unwrap();
    let (records, errors) = parse_log(&text);
    assert!(errors.is_empty(), "{errors:?}");
    records.into_iter().map(|r| r.record).collect()
}

/// The official checker (`MLLOG_PYTHON`, mlperf-logging 4.1.68), ruleset 6.1.0, `--werror`.
fn official_check(log: &Path) -> (bool, String) {
    let python = std::env::var_os("MLLOG_PYTHON").expect(
        "MLLOG_PYTHON is not set: run these tests through scripts/candle (it sources \
         scripts/venv.sh, which installs the official checker)",
    );
    let checker_log = log.with_extension("checker.log");
    let out = Command::new(python)
        .args(["-m", "mlperf_logging.compliance_checker"])
        .args(["--usage", "training", "--ruleset", "6.1.0", "--werror"])
        .arg("--log_output")
        .arg(&checker_log)
        .arg(log)
        .current_dir(log.parent().unwrap())
        .output()
        .expect("run the official checker");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn the_run_converges_and_its_log_passes_the_official_checker() {
    let dir = fresh_dir("candle-flow-plain");
    let (out, log) = run_example(&dir, &[]);
    let stdout = String::from_utf8_lossy(&succeeded(&out).stdout).into_owned();
    assert!(stdout.contains("run converged"), "{stdout}");

    let records = records(&log);
    let stop = records.last().unwrap();
    assert_eq!(stop.key, "run_stop");
    assert_eq!(
        stop.metadata.get("status").and_then(|v| v.as_str()),
        Some("success")
    );
    for key in [
        "submission_benchmark",
        "seed",
        "global_batch_size",
        "evaluation_frequency",
        "opt_adamw_weight_decay",
        "opt_gradient_clip_norm",
        "block_start",
        "epoch_start",
        "epoch_stop",
        "eval_start",
        "train_loss",
    ] {
        assert!(records.iter().any(|r| r.key == key), "no {key}");
    }
    let benchmark = records
        .iter()
        .find(|r| r.key == "submission_benchmark")
        .and_then(|r| r.value.as_str().map(str::to_owned));
    assert_eq!(benchmark.as_deref(), Some("flux1"));
    // Two epochs in each block, numbered on.
    let epochs: Vec<i128> = records
        .iter()
        .filter(|r| r.key == "epoch_start")
        .filter_map(|r| r.metadata.get("epoch_num").and_then(|v| v.as_i128()))
        .collect();
    let blocks = records.iter().filter(|r| r.key == "block_start").count();
    assert_eq!(epochs, (0..2 * blocks as i128).collect::<Vec<_>>());

    // A real curve: it starts well above the target, falls, and only the last point reaches it.
    let target = 0.50;
    let evals: Vec<f64> = records
        .iter()
        .filter(|r| r.key == "eval_accuracy")
        .map(|r| r.value.as_f64().unwrap())
        .collect();
    assert!(evals.len() >= 3, "{evals:?}");
    assert!(evals[0] > evals[evals.len() - 1] + 0.05, "{evals:?}");
    assert!(
        evals[..evals.len() - 1].iter().all(|&l| l > target) && evals[evals.len() - 1] <= target,
        "{evals:?}"
    );

    let (ok, output) = official_check(&log);
    assert!(ok, "official checker rejected the log:\n{output}");
    // The checker is an oracle here: without evaluation_frequency the same log fails.
    let broken = dir.join("broken.txt");
    let text = std::fs::read_to_string(&log).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.contains("\"key\": \"evaluation_frequency\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&broken, without).unwrap();
    let (ok, output) = official_check(&broken);
    assert!(
        !ok,
        "the checker accepted a log without evaluation_frequency:\n{output}"
    );
}

/// What a record says, less what depends on the clock: its key, value and metadata, with the
/// throughput statistics (time per step) reduced to their key.
fn clockless(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| match &*r.key {
            "tracked_stats" => "tracked_stats".to_owned(),
            _ => format!("{} {:?} {:?}", r.key, r.value, r.metadata),
        })
        .collect()
}

#[test]
fn candles_device_synchronisation_is_the_layers() {
    // The layer refuses `MLLOG_DEVICE_SYNC=steps` at `build()` when the program handed it no
    // synchronisation, so a run that succeeds with it has candle's `Device::synchronize` wired
    // in; on the CPU it returns at once, so the seeded run's records are those of a run with
    // the default place (intervals), the clock aside.
    let intervals = fresh_dir("candle-flow-sync-intervals");
    let (out, intervals_log) = run_example(&intervals, &[]);
    succeeded(&out);
    let steps = fresh_dir("candle-flow-sync-steps");
    let (out, steps_log) = run_example(&steps, &[("MLLOG_DEVICE_SYNC", "steps")]);
    succeeded(&out);
    assert_eq!(
        clockless(&records(&intervals_log)),
        clockless(&records(&steps_log))
    );

    let wrong = fresh_dir("candle-flow-sync-wrong");
    let (out, _) = run_example(&wrong, &[("MLLOG_DEVICE_SYNC", "always")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("MLLOG_DEVICE_SYNC"), "{stderr}");
}
