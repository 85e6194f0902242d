//! The compare example's round case: `mllog verify` on a whole round (a folder of submitter
//! folders: `MLLOG_COMPARE_ROUND`, or the corpus's v5.0 round) against the official review
//! script's three steps (`package_checker`, `result_summarizer`, `repo_checker`) run on each
//! submitter folder of the same round, in this run. The official tools rewrite `scaling.json`:
//! they run on a copy. Their verdict on each submitter must be the review's, so that both
//! sides did the same work.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use mllog_core::compliance::Ruleset;
use mllog_core::results::round::{choose_round_ruleset, verify_round};
use mllog_core::results::verify::VerifyOptions;

/// How much faster than the official tools the review of a round must be.
const ROUND_MIN_RATIO: f64 = 50.0;

/// The round to time: `MLLOG_COMPARE_ROUND` (with `MLLOG_COMPARE_RULESET` where its evidence
/// does not settle the ruleset), or `$MLLOG_CORPUS/submissions/5.0`.
fn round() -> Option<(PathBuf, Option<Ruleset>)> {
    let given = std::env::var("MLLOG_COMPARE_RULESET")
        .ok()
        .map(|r| Ruleset::from_name(&r).expect("MLLOG_COMPARE_RULESET: a ruleset X.Y.Z"));
    if let Some(r) = std::env::var_os("MLLOG_COMPARE_ROUND") {
        return Some((PathBuf::from(r), given));
    }
    let corpus = std::env::var_os("MLLOG_CORPUS")?;
    Some((Path::new(&corpus).join("submissions/5.0"), given))
}

/// `dst` as a fresh copy of `src` (`cp -a`), for the official tools, which rewrite
/// `scaling.json`.
pub fn fresh_copy(src: &Path, dst: &Path) {
    let _ = std::fs::remove_dir_all(dst);
    let status = Command::new("cp")
        .arg("-a")
        .arg(src)
        .arg(dst)
        .status()
        .expect("cp");
    assert!(
        status.success(),
        "cp -a {} {}",
        src.display(),
        dst.display()
    );
}

/// Times the round case into `rows` and `ratios`; `py` is `MLLOG_PYTHON`. Panics when the
/// review is less than [`ROUND_MIN_RATIO`] times faster, or when a verdict differs.
pub fn round_case(
    dir: &Path,
    py: Option<String>,
    rows: &mut Vec<(String, f64, &'static str)>,
    ratios: &mut Vec<(String, String)>,
) {
    let what = "mllog verify vs the official review script on a whole round";
    let (Some((folder, given)), Some(py)) = (round(), py) else {
        println!("skipped: {what} (set MLLOG_CORPUS or MLLOG_COMPARE_ROUND, and MLLOG_PYTHON)");
        ratios.push(("round official / mllog".into(), "skipped".into()));
        return;
    };
    let choice = choose_round_ruleset(given, &folder).unwrap_or_else(|e| {
        panic!("{e} (set MLLOG_COMPARE_RULESET)");
    });
    let opts = VerifyOptions::new(choice.ruleset);
    // The best of three: the review only reads.
    let mut ours = f64::INFINITY;
    let mut review = None;
    for _ in 0..3 {
        let t = Instant::now();
        let r = verify_round(&folder, &opts).expect("the round is readable");
        ours = ours.min(t.elapsed().as_secs_f64());
        review = Some(r);
    }
    let review = review.expect("reviewed");
    let files: usize = review
        .submitters
        .iter()
        .flat_map(|s| &s.benchmarks)
        .map(|b| b.runs.len())
        .sum();
    let copy = dir.join("round-official");
    fresh_copy(&folder, &copy);
    let ruleset = choice.ruleset.as_str();
    let t = Instant::now();
    for sub in &review.submitters {
        let name = sub.dir.file_name().expect("a submitter folder's name");
        let c = copy.join(name);
        let log = dir.join("round-package_checker.log");
        let _ = std::fs::remove_file(&log);
        let step = |module: &str, extra: &[&std::ffi::OsStr]| {
            Command::new(&py)
                .args(["-m", module])
                .arg(&c)
                .args(["training", ruleset])
                .args(extra)
                .current_dir(dir)
                .output()
                .expect("an official tool runs")
        };
        step(
            "mlperf_logging.package_checker",
            &["--log_output".as_ref(), log.as_os_str()],
        );
        let csv = dir.join("round-out.csv");
        step(
            "mlperf_logging.result_summarizer",
            &["--csv".as_ref(), csv.as_os_str()],
        );
        let repo_log = dir.join("round-repo_checker.log");
        step(
            "mlperf_logging.repo_checker",
            &["--log_output".as_ref(), repo_log.as_os_str()],
        );
        let official_pass = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("FOUND NO ERRORS");
        assert_eq!(
            official_pass,
            sub.passed(),
            "{}: the official package checker and mllog verify disagree",
            c.display()
        );
    }
    let official = t.elapsed().as_secs_f64();
    // The folder's last two names (`submissions/5.0`): where the corpus lies is the
    // machine's, not the measurement's.
    let mut names: Vec<String> = folder
        .components()
        .rev()
        .take(2)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    names.reverse();
    let label = format!(
        "{} ({} submitters, {files} result files)",
        names.join("/"),
        review.submitters.len()
    );
    rows.push((format!("mllog verify, round {label}"), ours * 1e3, "ms"));
    rows.push((
        "the official review script's steps, each submitter of the same round".into(),
        official * 1e3,
        "ms",
    ));
    let ratio = official / ours;
    ratios.push(("round official / mllog".into(), format!("{ratio:.0}")));
    assert!(
        ratio >= ROUND_MIN_RATIO,
        "mllog verify on a round is only {ratio:.1}x faster than the official tools (at least \
         {ROUND_MIN_RATIO}x wanted)"
    );
}

/// The review of the round `dir` under 6.1.0 (the generated submissions' ruleset), for the
/// memory measurement: every submitter reviewed, the round's table built.
pub fn review_round(dir: &Path) {
    let r = verify_round(dir, &VerifyOptions::new(Ruleset::V6_1_0)).expect("the round is readable");
    let runs: usize = r
        .submitters
        .iter()
        .flat_map(|s| &s.benchmarks)
        .map(|b| b.runs.len())
        .sum();
    assert_eq!(runs, 60, "{}", r.render_text());
    std::hint::black_box(&r);
}
