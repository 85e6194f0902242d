//! Shared by the layer's integration tests: the Python interpreter of the CI venv (with the
//! pinned `mlperf-logging`), the official compliance checker, the examples and free ports.
//! `mllog-cli` has its own (crates/mllog-cli/tests/common): a package's tests build only from
//! files inside it; docs/development.md says what the two share and why.
#![allow(dead_code)]

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

/// Runs the official checker on `log`; returns (passed, combined output).
pub fn official_check(log: &Path, ruleset: &str, werror: bool) -> (bool, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(python());
    cmd.args([
        "-m",
        "mlperf_logging.compliance_checker",
        "--usage",
        "training",
        "--ruleset",
        ruleset,
    ]);
    if werror {
        cmd.arg("--werror");
    }
    cmd.arg("--log_output")
        .arg(dir.path().join("checker.log"))
        .arg(log);
    cmd.current_dir(dir.path());
    let out = cmd.output().expect("run the official checker");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// This test binary's ignored test `name`, to run as a child process: alone, its output not
/// captured, with nothing of the parent's environment (`MLLOG_*`, `RANK`, `OTEL_*`) but
/// `PATH`.
pub fn child_test(name: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args([
        "--exact",
        name,
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env_clear()
    .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd
}

/// The crate's root directory.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The quickstart example, as `cargo test` builds it next to the test binaries (with the same
/// features); built on demand when missing.
pub fn quickstart_exe() -> PathBuf {
    example_exe("quickstart")
}

/// The built example `name` (debug profile, all features), built now if `cargo test` did not.
#[allow(dead_code)]
pub fn example_exe(name: &str) -> PathBuf {
    let me = std::env::current_exe().unwrap();
    let exe = me
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name);
    if !exe.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let ok = Command::new(cargo)
            .args(["build", "--all-features", "--example", name])
            .current_dir(crate_dir())
            .status()
            .unwrap()
            .success();
        assert!(ok, "building the example {name} failed");
    }
    exe
}

/// A TCP port on 127.0.0.1 that was free a moment ago, for a server a test starts (the
/// listener is closed at once; the server binds it next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port on 127.0.0.1")
        .port()
}
