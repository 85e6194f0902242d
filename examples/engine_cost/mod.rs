//! `mllog check --rules <installed package>` (the rule engine running the official rule files)
//! against the official checker, on the same logs in the same run: the largest published log of
//! the corpus and that log fifty times over (per-record cost rather than start-up), each through
//! both tools as processes, start-up and rule loading included.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// How much faster than the official checker the rule engine must be, on each log.
pub const ENGINE_MIN_RATIO: f64 = 100.0;

/// The log timed, from `MLLOG_CORPUS`, and its ruleset.
const LOG: (&str, &str) = (
    "real/v5.1_HPE_llama31_8b_XD670-H200-n8_result_8.txt",
    "5.1.0",
);

/// Where the installed `mlperf_logging` package is, as `py` imports it.
fn package(py: &str) -> Option<PathBuf> {
    let out = Command::new(py)
        .args([
            "-c",
            "import os, mlperf_logging; print(os.path.dirname(mlperf_logging.__file__))",
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// The best wall time of `runs` runs of `cmd`, in seconds.
fn best(runs: usize, mut cmd: impl FnMut() -> Command) -> f64 {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            let _ = cmd().output().expect("the command runs");
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Adds the rows and the ratios (official / engine); returns the smallest ratio, for the
/// caller to hold against [`ENGINE_MIN_RATIO`] once the table is printed; `None` when skipped.
pub fn engine_case(
    dir: &Path,
    bin: Option<PathBuf>,
    py: Option<String>,
    rows: &mut Vec<(String, f64, &'static str)>,
    ratios: &mut Vec<(String, String)>,
) -> Option<f64> {
    let what = "mllog check --rules vs the official checker";
    let skip = |why: &str, ratios: &mut Vec<(String, String)>| {
        println!("skipped: {what} ({why})");
        ratios.push(("check --rules official / mllog".into(), "skipped".into()));
        None
    };
    let Ok(corpus) = std::env::var("MLLOG_CORPUS") else {
        return skip("MLLOG_CORPUS not set", ratios);
    };
    let Some(py) = py else {
        return skip("MLLOG_PYTHON not set", ratios);
    };
    let Some(bin) = bin else {
        return skip("no release mllog beside this example", ratios);
    };
    let Some(pkg) = package(&py) else {
        return skip("mlperf_logging does not import", ratios);
    };
    let one = Path::new(&corpus).join(LOG.0);
    let text = std::fs::read(&one).expect("the corpus log is readable");
    let fifty = dir.join("engine-fifty.txt");
    std::fs::write(&fifty, text.repeat(50)).expect("write");
    let mut worst = f64::INFINITY;
    for (name, log, runs) in [("one log", &one, 5), ("the log 50 times", &fifty, 3)] {
        let mb = std::fs::metadata(log).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
        let ours = best(runs, || {
            let mut c = Command::new(&bin);
            c.args(["check", "-q", "--rules"])
                .arg(&pkg)
                .args(["--ruleset", LOG.1])
                .arg(log);
            c
        });
        let official = best(1.max(runs / 3), || {
            let mut c = Command::new(&py);
            c.args([
                "-m",
                "mlperf_logging.compliance_checker",
                "--usage",
                "training",
            ])
            .args(["--ruleset", LOG.1, "--log_output"])
            .arg(dir.join("engine-official.log"))
            .arg(log);
            c
        });
        rows.push((
            format!("mllog check --rules <package>, {name} ({mb:.1} MB)"),
            ours * 1e3,
            "ms",
        ));
        rows.push((
            format!("official compliance checker, {name}"),
            official * 1e3,
            "ms",
        ));
        let ratio = official / ours;
        ratios.push((
            format!("check --rules official / mllog, {name}"),
            format!("{ratio:.0}"),
        ));
        worst = worst.min(ratio);
    }
    let _ = std::fs::remove_file(&fifty);
    Some(worst)
}

/// Panics when the smallest ratio [`engine_case`] measured is below [`ENGINE_MIN_RATIO`].
pub fn hold_target(ratio: Option<f64>) {
    if let Some(ratio) = ratio {
        assert!(
            ratio >= ENGINE_MIN_RATIO,
            "mllog check --rules is only {ratio:.1}x faster than the official checker (at least \
             {ENGINE_MIN_RATIO}x wanted)"
        );
    }
}
