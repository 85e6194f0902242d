//! The quickstart's log passes the official checker with `--werror`, and the
//! checker is a real oracle here (a copy with one required key removed fails).

mod common;

use std::path::PathBuf;
use std::process::Command;

fn run_quickstart(
    dir: &std::path::Path,
    extra_env: &[(&str, &str)],
) -> (std::process::Output, PathBuf) {
    run_example("quickstart", dir, extra_env)
}

fn run_example(
    name: &str,
    dir: &std::path::Path,
    extra_env: &[(&str, &str)],
) -> (std::process::Output, PathBuf) {
    let log = dir.join("result_0.txt");
    let mut cmd = Command::new(common::example_exe(name));
    cmd.env("MLLOG_OUTPUT_FILE", &log).current_dir(dir);
    for var in tracing_mllog::env::SUBMISSION_VARIABLES {
        cmd.env_remove(var);
    }
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    (cmd.output().unwrap(), log)
}

#[test]
fn quickstart_log_passes_the_official_checker_and_a_broken_copy_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (out, log) = run_quickstart(dir.path(), &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("run converged"), "{stdout}");
    assert!(
        stdout.contains("compliance: the log passes ruleset 6.1.0"),
        "{stdout}"
    );
    assert!(stdout.contains(&log.display().to_string()), "{stdout}");

    let text = std::fs::read_to_string(&log).unwrap();
    let (records, errors) = tracing_mllog::record::parse_log(&text);
    assert!(errors.is_empty(), "{errors:?}");
    let last = records.last().unwrap();
    assert_eq!(last.record.key, "run_stop");
    assert_eq!(
        last.record.metadata.get("status").and_then(|v| v.as_str()),
        Some("success")
    );
    let evals: Vec<f64> = records
        .iter()
        .filter(|r| r.record.key == "eval_accuracy")
        .map(|r| r.record.value.as_f64().unwrap())
        .collect();
    // A real curve: several evaluations, decreasing, the last one crossing the target.
    assert!(evals.len() >= 3, "{evals:?}");
    assert!(evals.windows(2).all(|w| w[1] < w[0]), "{evals:?}");
    assert!(evals[..evals.len() - 1].iter().all(|&l| l > 0.925) && *evals.last().unwrap() <= 0.925);

    let (ok, output) = common::official_check(&log, "6.1.0", true);
    assert!(
        ok,
        "official checker rejected the quickstart log:\n{output}"
    );

    let broken = dir.path().join("broken.txt");
    let without_lora_rank: String = text
        .lines()
        .filter(|l| !l.contains("\"key\": \"lora_rank\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&broken, without_lora_rank).unwrap();
    let (ok, output) = common::official_check(&broken, "6.1.0", true);
    assert!(!ok, "the checker accepted a log without lora_rank");
    assert!(output.contains("lora_rank"), "{output}");
}

#[test]
fn quickstart_takes_submission_metadata_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let (out, log) = run_quickstart(
        dir.path(),
        &[
            ("MLLOG_SUBMISSION_ORG", "EnvOrg"),
            ("MLLOG_SUBMISSION_PLATFORM", "8xTest"),
        ],
    );
    assert!(out.status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(r#""key": "submission_org", "value": "EnvOrg""#));
    assert!(text.contains(r#""key": "submission_platform", "value": "8xTest""#));

    let (out, _) = run_quickstart(dir.path(), &[("MLLOG_SUBMISSION_DIVISION", "closd")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("MLLOG_SUBMISSION_DIVISION"), "{stderr}");
}

/// `MLLOG_RPD_FILE` works in the quickstart when it is built with the `rpd` feature.
#[cfg(feature = "rpd")]
#[test]
fn quickstart_writes_rpd_markers_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let rpd = dir.path().join("quickstart.rpd");
    let (out, _) = run_quickstart(dir.path(), &[("MLLOG_RPD_FILE", rpd.to_str().unwrap())]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let conn = rusqlite::Connection::open(&rpd).unwrap();
    let labels: Vec<String> = conn
        // Schema v3 (the default) keeps labels in rocpd_ustring, as rpd2tracing reads them.
        .prepare("SELECT u.string FROM rocpd_api a JOIN rocpd_ustring u ON u.id = a.args_id")
        .and_then(|mut st| {
            st.query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .unwrap();
    assert!(labels.iter().any(|l| l.starts_with("run")), "{labels:?}");
    assert!(
        labels.iter().filter(|l| l.starts_with("block")).count() >= 3,
        "{labels:?}"
    );
}

/// `MLLOG_UPLOAD_URL` works in the quickstart when it is built with the `object-store` feature:
/// after the run the remote copy is byte-identical to the local log.
#[cfg(feature = "object-store")]
#[test]
fn quickstart_uploads_its_log_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("bucket");
    std::fs::create_dir_all(&remote).unwrap();
    let url = format!("file://{}/", remote.display());
    let (out, log) = run_quickstart(dir.path(), &[("MLLOG_UPLOAD_URL", url.as_str())]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let local = std::fs::read(&log).unwrap();
    let copy = std::fs::read(remote.join("result_0.txt")).unwrap();
    assert_eq!(copy, local);

    // A bad URL is an error naming the problem, before training starts.
    let (out, _) = run_quickstart(dir.path(), &[("MLLOG_UPLOAD_URL", "ftp://nowhere/x")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ftp://"));
}

/// The tokio quickstart (instrumented futures, every step a spawned task that may finish on
/// another worker thread) writes the same log as the synchronous one, but for the clock: the
/// same records with the same values, samples counts and statistics, and the official checker
/// accepts it with `--werror`.
#[test]
fn the_tokio_quickstart_logs_what_the_synchronous_one_logs() {
    let sync_dir = tempfile::tempdir().unwrap();
    let async_dir = tempfile::tempdir().unwrap();
    let (out, sync_log) = run_example("quickstart", sync_dir.path(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (out, async_log) = run_example("quickstart_tokio", async_dir.path(), &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (ok, output) = common::official_check(&async_log, "6.1.0", true);
    assert!(
        ok,
        "official checker rejected the tokio quickstart log:\n{output}"
    );

    // Everything but what depends on the clock, the source line and the program's name.
    let clockless = |path: &std::path::Path| -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap();
        let (records, errors) = tracing_mllog::record::parse_log(&text);
        assert!(errors.is_empty(), "{errors:?}");
        records
            .into_iter()
            .filter(|r| !matches!(&*r.record.key, "config_filename" | "submission_platform"))
            .map(|r| {
                let mut r = r.record;
                r.time = tracing_mllog::record::Timestamp {
                    wall_ns: 0,
                    mono_ns: 0,
                };
                r.metadata.file = None;
                r.metadata.lineno = None;
                if r.key == "tracked_stats" {
                    r.value = tracing_mllog::Value::Null;
                }
                let mut line = String::new();
                r.encode(&mut line);
                line
            })
            .collect()
    };
    let (sync_records, async_records) = (clockless(&sync_log), clockless(&async_log));
    assert!(sync_records.len() > 50, "{sync_records:?}");
    assert_eq!(sync_records, async_records);
    assert!(
        async_records
            .iter()
            .any(|l| l.contains(r#""key": "run_stop""#) && l.contains(r#""samples_count": 3072"#)),
        "{async_records:#?}"
    );
}
