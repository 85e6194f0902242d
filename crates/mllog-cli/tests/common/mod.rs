//! Shared by `mllog-cli`'s integration tests: the Python interpreter with the pinned
//! `mlperf-logging`, the official compliance checker, the corpus of published results and the
//! `mllog` binary. It lives inside this package (not beside the layer's `tests/common`) so
//! that the tests build from the packaged crate alone; docs/development.md says what the two
//! share and why.
#![allow(dead_code)]

mod checker;

// Each test file compiles this module and uses part of it.
#[allow(unused_imports)]
pub use checker::{official_check, official_check_with_config, official_verdicts, Case};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The interpreter from `MLLOG_PYTHON` (set by `.ci/run` and `scripts/test`), else `python3`.
/// Panics (fails the test, never skips it) when `mlperf_logging` cannot be imported.
pub fn python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let py = std::env::var_os("MLLOG_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("python3"));
        let ok = Command::new(&py)
            .args([
                "-c",
                "import mlperf_logging.mllog, mlperf_logging.compliance_checker",
            ])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "the official mlperf-logging package is not importable from {}: run `scripts/test` \
             (or `.ci/run`), or set MLLOG_PYTHON to a Python that has mlperf-logging==4.1.68",
            py.display()
        );
        py
    })
}

/// A folder of the corpus of published MLPerf results (`real` for single result logs,
/// `submissions` for whole submitter folders, `rounds` for older rounds), which lives outside
/// the repository: `MLLOG_CORPUS` names it (`scripts/test` sets it to `../shared/corpus` when
/// that exists). Without the variable it says on stderr, past the test harness's capture, what
/// `what` was not checked, and returns `None`; a variable naming a folder without `part` fails
/// the test.
pub fn corpus(part: &str, what: &str) -> Option<PathBuf> {
    use std::io::Write as _;
    let Some(root) = std::env::var_os("MLLOG_CORPUS") else {
        let line = format!("skipped: {what} (MLLOG_CORPUS not set)\n");
        let _ = std::io::stderr().write_all(line.as_bytes());
        return None;
    };
    let dir = Path::new(&root).join(part);
    assert!(
        dir.is_dir(),
        "MLLOG_CORPUS={} has no {part}/ folder",
        Path::new(&root).display()
    );
    Some(dir)
}

/// Runs this package's `mllog` binary with `args`, colour off: (exit code, stdout, stderr).
pub fn mllog<I, S>(args: I) -> (i32, String, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("run mllog");
    (
        out.status
            .code()
            .expect("mllog exits, never dies of a signal"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A TCP port on 127.0.0.1 that was free a moment ago, for a server a test starts (the
/// listener is closed at once; the server binds it next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port on 127.0.0.1")
        .port()
}
