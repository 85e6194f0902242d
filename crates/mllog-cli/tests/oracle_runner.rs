//! The oracle tests run the official tools forked from one Python ([`support::forkserver`]),
//! not in a fresh interpreter each. Each case here runs in both, and what a caller sees must be
//! the same: exit status, stdout and stderr (an exception's traceback, `SystemExit` with a code
//! or a message), `sys.argv`, the working folder, `-m` as `__main__`.

mod common;
mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use support::forkserver;

fn fresh(args: &[&str], cwd: &Path) -> Output {
    Command::new(common::python())
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("run python")
}

/// Runs `args` in `cwd` both ways; status, stdout and stderr must be the same, byte for byte.
fn assert_same(args: &[&str], cwd: &Path) -> Output {
    let forked = forkserver::run(args, cwd);
    let fresh = fresh(args, cwd);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert_eq!(forked.status.code(), fresh.status.code(), "{args:?}");
    assert_eq!(text(&forked.stdout), text(&fresh.stdout), "{args:?}");
    assert_eq!(text(&forked.stderr), text(&fresh.stderr), "{args:?}");
    forked
}

#[test]
fn a_forked_run_is_what_a_fresh_interpreter_gives() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    std::fs::write(cwd.join("doc.json"), r#"{"b": [1, 2], "a": null}"#).unwrap();
    let code = |args: &[&str]| assert_same(args, cwd).status.code();
    assert_eq!(
        code(&[
            "-c",
            "print('out'); import sys; print('err', file=sys.stderr)"
        ]),
        Some(0)
    );
    assert_eq!(code(&["-c", "raise ValueError('no such rule')"]), Some(1));
    assert_eq!(code(&["-c", "import sys; sys.exit(3)"]), Some(3));
    assert_eq!(code(&["-c", "import sys; sys.exit('a message')"]), Some(1));
    assert_eq!(code(&["-c", "import sys; sys.exit()"]), Some(0));
    assert_eq!(
        code(&[
            "-c",
            "import os, sys; print(sys.argv, os.getcwd(), __name__)",
            "a",
            "b c"
        ]),
        Some(0)
    );
    assert_eq!(
        code(&["-c", "import sys; print(repr(sys.stdin.read()))"]),
        Some(0)
    );
    assert_eq!(
        code(&["-m", "json.tool", "--sort-keys", "doc.json"]),
        Some(0)
    );
    assert_eq!(code(&["-m", "json.tool", "missing.json"]), Some(2));
    std::fs::write(
        cwd.join("probe.py"),
        "import os, sys\nprint(sys.argv, os.getcwd(), sys.path[0], __name__)\n",
    )
    .unwrap();
    assert_eq!(code(&["-m", "probe", "x"]), Some(0));
    // The official checker as a module: its usage error (whose list of rulesets comes from a
    // set, in an order that differs from one interpreter to the next: only the status and the
    // error line are compared), and a log it refuses.
    let usage = ["-m", "mlperf_logging.compliance_checker"];
    let (forked, fresh) = (forkserver::run(&usage, cwd), fresh(&usage, cwd));
    assert_eq!(
        (forked.status.code(), fresh.status.code()),
        (Some(2), Some(2))
    );
    let last = |o: &Output| {
        String::from_utf8_lossy(&o.stderr)
            .lines()
            .last()
            .map(str::to_owned)
    };
    assert_eq!(last(&forked), last(&fresh));
    std::fs::write(cwd.join("result_0.txt"), ":::MLLOG {}\n").unwrap();
    let refused = assert_same(
        &[
            "-m",
            "mlperf_logging.compliance_checker",
            "--usage",
            "training",
            "--ruleset",
            "6.1.0",
            "result_0.txt",
        ],
        cwd,
    );
    assert!(!refused.status.success());
}

/// Runs made at once do not mix: each gets its own output and status.
#[test]
fn concurrent_runs_keep_their_own_output_and_status() {
    let cwd = std::env::temp_dir();
    std::thread::scope(|s| {
        for i in 0..6 {
            let cwd = &cwd;
            s.spawn(move || {
                let code = format!("import sys, time; time.sleep(0.2); print({i}); sys.exit({i})");
                let o = forkserver::run(&["-c", &code], cwd);
                assert_eq!(o.status.code(), Some(i));
                assert_eq!(String::from_utf8_lossy(&o.stdout), format!("{i}\n"));
            });
        }
    });
}
