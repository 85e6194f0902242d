//! The ways a training process ends, each in a real child process whose MLLOG file the parent
//! reads afterwards: `process::exit` with the guard alive, a panic in a `panic = "abort"`
//! build, SIGTERM and SIGINT (handled, and not), a guard dropped while the run is open, a
//! guard dropped at once (`let (layer, _) = ..`), and a build that fails (the previous log
//! must survive it).
//!
//! The children are this binary's ignored `child` test, run with the case in an environment
//! variable (as in tests/filter_check.rs), except the `panic = "abort"` program, which cargo
//! cannot build as a test (see [`panic_abort_child`]).

mod common;
mod training;

use std::fs::{self, File};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tracing::info_span;
use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::presets::Llama2_70bLora;
use tracing_mllog::record::EventType;
use tracing_mllog::record::{parse_log, ParsedLine};
use tracing_mllog::Output;
use tracing_mllog::Pipeline;
use tracing_mllog::Submission;
use tracing_mllog::{
    keys, mllog, Division, Interval, MllogLayer, Record, Ruleset, SystemStatus, Target, Value,
};
use tracing_subscriber::prelude::*;

const CASE: &str = "MLLOG_TEST_EXIT_CASE";
const LOG: &str = "MLLOG_TEST_EXIT_LOG";

/// Far longer than any case needs, even on a loaded machine: only a hung child reaches it.
const CHILD_TIMEOUT: Duration = Duration::from_secs(120);

/// What a child left behind.
struct Outcome {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    log: PathBuf,
}

impl Outcome {
    fn records(&self) -> Vec<Record> {
        let text = fs::read_to_string(&self.log)
            .unwrap_or_else(|e| panic!("{}: {e}\n{}", self.log.display(), self.stderr));
        let (lines, errors) = parse_log(&text);
        assert!(errors.is_empty(), "{errors:?}\n{text}");
        lines.into_iter().map(|l: ParsedLine| l.record).collect()
    }

    fn context(&self) -> String {
        format!(
            "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// This binary's `child` test, with `case`, writing its log into `dir`; nothing of the
/// parent's environment leaks in (`MLLOG_*`, `RANK`, `OTEL_*`) but `PATH` and `extra_env`.
fn child_command(case: &str, dir: &Path, extra_env: &[(&str, &str)]) -> Command {
    let mut cmd = common::child_test("child");
    cmd.env(CASE, case)
        .env(LOG, dir.join("result_0.txt"))
        .envs(extra_env.iter().copied())
        .current_dir(dir);
    cmd
}

/// Starts `cmd` with stdout and stderr going to files in `dir` (no pipe to drain, so a child
/// that prints a lot cannot block), and returns it with the log path.
fn spawn(mut cmd: Command, dir: &Path) -> std::process::Child {
    let out = File::create(dir.join("stdout.txt")).unwrap();
    let err = File::create(dir.join("stderr.txt")).unwrap();
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("start the child")
}

/// Waits for the child (killing it past the timeout, which fails the test).
fn finish(mut child: std::process::Child, dir: &Path) -> Outcome {
    let deadline = Instant::now() + CHILD_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the child did not end within {CHILD_TIMEOUT:?}; stderr:\n{}",
                fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Outcome {
        status,
        stdout: fs::read_to_string(dir.join("stdout.txt")).unwrap_or_default(),
        stderr: fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default(),
        log: dir.join("result_0.txt"),
    }
}

fn run_case(case: &str, dir: &Path, extra_env: &[(&str, &str)]) -> Outcome {
    finish(spawn(child_command(case, dir, extra_env), dir), dir)
}

fn keys_of(records: &[Record]) -> Vec<&str> {
    records.iter().map(|r| &*r.key).collect()
}

fn find<'a>(records: &'a [Record], key: &str) -> Vec<&'a Record> {
    records.iter().filter(|r| r.key == key).collect()
}

fn status_of(run_stop: &Record) -> &str {
    run_stop
        .metadata
        .get("status")
        .and_then(Value::as_str)
        .expect("run_stop has a status")
}

fn samples_count(r: &Record) -> Option<i128> {
    r.metadata.get("samples_count").and_then(Value::as_i128)
}

/// Every `*_start` has its `*_stop`, properly nested (a stop closes the innermost open start),
/// and the records are in time order.
fn assert_balanced_and_ordered(records: &[Record]) {
    let mut open: Vec<&str> = Vec::new();
    for r in records {
        match r.event_type {
            EventType::IntervalStart => {
                open.push(r.key.strip_suffix("_start").expect("a *_start key"));
            }
            EventType::IntervalEnd => {
                let name = r.key.strip_suffix("_stop").expect("a *_stop key");
                assert_eq!(open.pop(), Some(name), "{:?}", keys_of(records));
            }
            EventType::PointInTime => {}
        }
    }
    assert!(open.is_empty(), "left open: {open:?}");
    assert!(
        records
            .windows(2)
            .all(|w| w[0].time.wall_ns <= w[1].time.wall_ns),
        "records out of time order"
    );
}

/// The interval records (start and stop keys) in order.
fn intervals(records: &[Record]) -> Vec<&str> {
    records
        .iter()
        .filter(|r| r.event_type != EventType::PointInTime)
        .map(|r| &*r.key)
        .collect()
}

/// Blocks until `path` holds `needle` (the child reached a point of its run).
fn wait_for_line(path: &Path, needle: &str, child: &mut std::process::Child) {
    let deadline = Instant::now() + CHILD_TIMEOUT;
    loop {
        if fs::read_to_string(path).is_ok_and(|t| t.contains(needle)) {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the child ended ({status:?}) before logging {needle}");
        }
        assert!(
            Instant::now() < deadline,
            "no {needle} in {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------------
// process::exit right after the last eval_accuracy of a converged run.

#[test]
fn exit_right_after_convergence_writes_a_complete_compliant_log() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_case("converged_exit", dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", out.context());
    let records = out.records();
    assert_balanced_and_ordered(&records);
    let keys = keys_of(&records);
    // The last evaluation, then what the exit hook adds: the eval and the run end.
    let last_eval = keys.iter().rposition(|k| *k == "eval_accuracy").unwrap();
    assert_eq!(
        intervals(&records[last_eval..]),
        ["eval_stop", "run_stop"],
        "{keys:?}"
    );
    // Every evaluation and block of the run is there.
    assert_eq!(find(&records, "eval_accuracy").len(), 3, "{keys:?}");
    assert_eq!(find(&records, "block_stop").len(), 3, "{keys:?}");
    let run_stop = records.last().unwrap();
    assert_eq!(run_stop.key, "run_stop", "{keys:?}");
    assert_eq!(status_of(run_stop), "success");
    assert_eq!(
        samples_count(run_stop),
        samples_count(&records[last_eval]),
        "run_stop carries the samples trained"
    );
    assert!(
        out.stderr.contains(
            "the process is exiting with intervals open; written now: eval_stop, run_stop\n"
        ),
        "{}",
        out.context()
    );
    let (ok, text) = common::official_check(&out.log, "6.1.0", true);
    assert!(ok, "the official checker rejected the log:\n{text}");
}

/// A converged `llama2_70b_lora` run (closed division, every required key) that calls
/// `process::exit(0)` right after its last `eval_accuracy`, inside the `eval` span.
fn converged_exit(log: &Path) -> ! {
    const CONVERGE_AT: u64 = 3;
    let preset = Llama2_70bLora::default()
        .preset(Division::Closed, Ruleset::V6_1_0)
        .expect("preset");
    let (layer, _guard) = MllogLayer::builder()
        .preset(&preset)
        .output(Output::file(log))
        .submission(
            Submission::default()
                .status(SystemStatus::Research)
                .org("ExitPathsOrg")
                .platform("1xTestNode-8xGPU")
                .config_filename("exit_paths.rs")
                .precision("bfloat16", "bfloat16", "bfloat16")
                .parallelism(1, 1, 1, 1)
                .micro_batch_size(1),
        )
        .seed(1234)
        .build()
        .expect("build");
    let handle = layer.run_handle();
    tracing_subscriber::registry().with(layer).init();

    drop(info_span!("init").entered());
    let _run = info_span!("run").entered();
    let mut trained = 0;
    for n in 0..CONVERGE_AT {
        let _eval = training::block_and_eval(&preset, n, CONVERGE_AT, &mut trained);
        if handle.converged() {
            // No flush, no sleep, the guard alive: the exit hook must do it all.
            std::process::exit(0);
        }
    }
    panic!("the synthetic run did not converge");
}

// ---------------------------------------------------------------------------------------------
// process::exit in the middle of a block, not converged.

#[test]
fn exit_mid_block_ends_the_block_then_the_run_aborted() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_case("exit_mid_block", dir.path(), &[]);
    assert_eq!(out.status.code(), Some(3), "{}", out.context());
    let records = out.records();
    assert_balanced_and_ordered(&records);
    assert_eq!(
        intervals(&records),
        [
            "init_start",
            "init_stop",
            "run_start",
            "block_start",
            "block_stop",
            "eval_start",
            "eval_stop",
            "block_start",
            "block_stop",
            "run_stop"
        ],
        "{:?}",
        keys_of(&records)
    );
    let run_stop = records.last().unwrap();
    assert_eq!(run_stop.key, "run_stop");
    assert_eq!(status_of(run_stop), "aborted");
    // Six steps closed (the seventh was open at the exit): 48 samples.
    assert_eq!(samples_count(run_stop), Some(48));
    assert_eq!(samples_count(find(&records, "block_stop")[1]), Some(48));
}

fn exit_mid_block(log: &Path) -> ! {
    let (layer, _guard) = small_builder(log).build().expect("build");
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
        mllog!(keys::EVAL_ACCURACY, 0.9); // the target (0.5) is not reached
    }
    let _block = info_span!("block").entered();
    for step in 4..6u64 {
        drop(info_span!("train_step", step).entered());
    }
    let _step = info_span!("train_step", step = 6u64).entered();
    std::process::exit(3);
}

/// File output, 8 samples per step, loss target 0.5, no live checking, no environment.
fn small_builder(log: &Path) -> tracing_mllog::Builder {
    MllogLayer::builder()
        .output(Output::file(log))
        .global_batch_size(8)
        .target(Target::at_most(0.5))
        .live_check(LivePolicy::Off)
}

// ---------------------------------------------------------------------------------------------
// A panic in a `panic = "abort"` build.

/// Builds tests/panic_abort/child.rs with `panic = "abort"` and returns the executable.
///
/// Cargo builds every test target, and the library it links, with `panic = "unwind"` whatever
/// the profile says (`cargo test --profile panic-abort` still gives `cfg!(panic = "unwind")`
/// in both; libtest needs unwinding), so neither this test binary nor an ignored test in it
/// can be the aborting program. The program is therefore a package of its own, generated
/// under `CARGO_TARGET_TMPDIR`: a `[[bin]]` at tests/panic_abort/child.rs, a path dependency
/// on this crate (no default features), `panic = "abort"` in its dev profile, this crate's
/// `Cargo.lock` (the same dependency versions), built `--offline` into its own target
/// directory. The first build compiles the dependencies once; later ones are incremental.
fn panic_abort_child() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let root = common::crate_dir();
        // One package per checkout: worktrees that share a target directory must not build
        // each other's sources.
        let checkout = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            root.hash(&mut h);
            h.finish()
        };
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("panic-abort-child-{checkout:016x}"));
        fs::create_dir_all(&dir).unwrap();
        let toml_path = |p: &Path| format!("{:?}", p.display().to_string());
        let manifest = format!(
            r#"# Generated by tests/exit_paths.rs: the panic = "abort" child program.
[package]
name = "mllog-panic-abort-child"
version = "0.0.0"
edition = "2021"
publish = false

[[bin]]
name = "panic_abort_child"
path = {child}

[dependencies]
tracing-mllog = {{ path = {root}, default-features = false }}
tracing = {{ version = "0.1.44", default-features = false, features = ["std"] }}
tracing-subscriber = {{ version = "0.3.23", default-features = false, features = ["registry", "std"] }}

[profile.dev]
panic = "abort"

[workspace]
"#,
            child = toml_path(&root.join("tests/panic_abort/child.rs")),
            root = toml_path(&root),
        );
        write_if_changed(&dir.join("Cargo.toml"), manifest.as_bytes());
        if let Ok(lock) = fs::read(root.join("Cargo.lock")) {
            // Only when it changed: cargo prunes it to this package's dependencies, and
            // rewriting it each time would only make that happen again.
            let stamp = dir.join("Cargo.lock.source");
            if fs::read(&stamp).ok().as_deref() != Some(&lock[..]) {
                fs::write(dir.join("Cargo.lock"), &lock).unwrap();
                fs::write(&stamp, &lock).unwrap();
            }
        }
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args(["build", "--offline", "--manifest-path"])
            .arg(dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(dir.join("target"))
            .output()
            .expect("run cargo");
        assert!(
            out.status.success(),
            "building the panic = \"abort\" child failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir.join("target/debug/panic_abort_child")
    })
}

fn write_if_changed(path: &Path, content: &[u8]) {
    if fs::read(path).ok().as_deref() != Some(content) {
        fs::write(path, content).unwrap();
    }
}

#[test]
fn a_panic_in_an_abort_build_ends_the_run_aborted_before_the_abort() {
    let exe = panic_abort_child();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("result_0.txt");
    let mut cmd = Command::new(exe);
    cmd.arg(&log)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(dir.path());
    let out = finish(spawn(cmd, dir.path()), dir.path());
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "{}",
        out.context()
    );
    // The program's own panic hook still ran (the layer's hook chains to it).
    assert!(
        out.stderr.contains("boom in the second block"),
        "{}",
        out.context()
    );
    assert!(
        out.stderr.contains("a panic is aborting the process"),
        "{}",
        out.context()
    );
    let records = out.records();
    assert_balanced_and_ordered(&records);
    assert_eq!(
        intervals(&records)[intervals(&records).len() - 3..],
        ["block_start", "block_stop", "run_stop"],
        "{:?}",
        keys_of(&records)
    );
    let run_stop = records.last().unwrap();
    // The run had converged: only the panic makes it `aborted`.
    assert_eq!(
        records
            .iter()
            .filter(|r| r.key == "eval_accuracy")
            .map(|r| r.value.as_f64())
            .collect::<Vec<_>>(),
        [Some(0.25)]
    );
    assert_eq!(status_of(run_stop), "aborted");
    assert_eq!(samples_count(run_stop), Some(32));
}

// ---------------------------------------------------------------------------------------------
// SIGTERM and SIGINT.

/// A run that trains until a signal kills it (or gives up after a minute, exit status 3).
fn train_until_killed(log: &Path, how: &str) -> ! {
    let builder = small_builder(log);
    let builder = match how {
        "builder" => builder.handle_signals(true),
        // The variable turns it on through the builder's environment.
        "env" => builder.environment([("MLLOG_HANDLE_SIGNALS", "1")]),
        _ => builder,
    };
    let (layer, guard) = builder.build().expect("build");
    tracing_subscriber::registry().with(layer).init();
    drop(info_span!("init").entered());
    let _run = info_span!("run").entered();
    let _block = info_span!("block").entered();
    assert!(guard.flush(CHILD_TIMEOUT), "flush");
    if how != "builder" {
        // Signalled by itself (the parent signals the "builder" child by its PID).
        let sig = if how == "env" {
            libc::SIGINT
        } else {
            libc::SIGTERM
        };
        // SAFETY: raise(3) has no preconditions.
        unsafe { libc::raise(sig) };
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut step = 0u64;
    while Instant::now() < deadline {
        drop(info_span!("train_step", step).entered());
        step += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    eprintln!("no signal ended the process");
    std::process::exit(3);
}

#[test]
fn sigterm_with_handling_on_ends_the_run_aborted_then_terminates() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn(child_command("signal_builder", dir.path(), &[]), dir.path());
    wait_for_line(&dir.path().join("result_0.txt"), "block_start", &mut child);
    // SAFETY: kill(2) on our own child's PID.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = finish(child, dir.path());
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGTERM),
        "{}",
        out.context()
    );
    assert!(
        out.stderr.contains("signal SIGTERM arrived"),
        "{}",
        out.context()
    );
    let records = out.records();
    assert_balanced_and_ordered(&records);
    assert_eq!(
        intervals(&records)[3..],
        ["block_start", "block_stop", "run_stop"]
    );
    assert_eq!(status_of(records.last().unwrap()), "aborted");
}

#[test]
fn sigint_with_handling_from_the_environment_ends_the_run_aborted_then_terminates() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_case("signal_env", dir.path(), &[]);
    assert_eq!(out.status.signal(), Some(libc::SIGINT), "{}", out.context());
    assert!(
        out.stderr.contains("signal SIGINT arrived"),
        "{}",
        out.context()
    );
    let records = out.records();
    assert_balanced_and_ordered(&records);
    assert_eq!(
        intervals(&records)[3..],
        ["block_start", "block_stop", "run_stop"]
    );
    assert_eq!(status_of(records.last().unwrap()), "aborted");
}

/// The default: signals are the program's business; SIGTERM kills the process as it comes, and
/// the log ends where the run was (no `run_stop`).
#[test]
fn sigterm_with_handling_off_leaves_the_run_open() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_case("signal_off", dir.path(), &[]);
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGTERM),
        "{}",
        out.context()
    );
    let records = out.records();
    assert_eq!(
        intervals(&records),
        ["init_start", "init_stop", "run_start", "block_start"],
        "{}",
        out.context()
    );
}

// ---------------------------------------------------------------------------------------------
// The guard dropped while the run is open.

#[test]
fn a_guard_dropped_in_the_run_ends_it_aborted_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_case("guard_dropped_in_run", dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", out.context());
    assert!(
        out.stderr
            .contains("the guard was dropped (or shut down) with intervals open; written now: block_stop, run_stop (status `aborted`)"),
        "{}",
        out.context()
    );
    let records = out.records();
    assert_balanced_and_ordered(&records);
    assert_eq!(
        find(&records, "run_stop").len(),
        1,
        "{:?}",
        keys_of(&records)
    );
    assert_eq!(find(&records, "block_stop").len(), 2);
    let run_stop = records.last().unwrap();
    assert_eq!(run_stop.key, "run_stop");
    // Converged before the drop: `aborted` comes from the run being cut short.
    assert_eq!(status_of(run_stop), "aborted");
    assert_eq!(samples_count(run_stop), Some(40));
    // Nothing logged after the drop reached the file.
    assert_eq!(find(&records, "eval_accuracy").len(), 1);
}

fn guard_dropped_in_run(log: &Path) {
    let (layer, guard) = small_builder(log).build().expect("build");
    let handle = layer.run_handle();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        drop(info_span!("init").entered());
        let run = info_span!("run").entered();
        {
            let _block = info_span!("block").entered();
            for step in 0..3u64 {
                drop(info_span!("train_step", step).entered());
            }
        }
        mllog!(keys::EVAL_ACCURACY, 0.25);
        assert!(handle.converged());
        let block = info_span!("block").entered();
        for step in 3..5u64 {
            drop(info_span!("train_step", step).entered());
        }
        drop(guard);
        for step in 5..7u64 {
            drop(info_span!("train_step", step).entered());
        }
        drop(block);
        mllog!(keys::EVAL_ACCURACY, 0.2);
        drop(run);
    });
}

// ---------------------------------------------------------------------------------------------
// The guard discarded at once: `let (layer, _) = ..`.

/// Twice: the run ends before the process does (the exit hook only has to flush), and the
/// process exits with the run open (the exit hook writes `run_stop` through the pipeline the
/// dropped guard left running).
#[test]
fn a_discarded_guard_warns_and_the_log_is_still_complete_at_exit() {
    for case in ["guard_discarded", "guard_discarded_exit_in_run"] {
        let dir = tempfile::tempdir().unwrap();
        let out = run_case(case, dir.path(), &[]);
        assert_eq!(out.status.code(), Some(0), "{case}: {}", out.context());
        assert!(
            out.stderr
                .contains("the guard was dropped before any record was logged"),
            "{case}: {}",
            out.context()
        );
        let records = out.records();
        assert_balanced_and_ordered(&records);
        assert_eq!(
            intervals(&records),
            [
                "init_start",
                "init_stop",
                "run_start",
                "block_start",
                "block_stop",
                "run_stop"
            ],
            "{case}"
        );
        let run_stop = records.last().unwrap();
        assert_eq!(status_of(run_stop), "success", "{case}");
        assert_eq!(samples_count(run_stop), Some(24), "{case}");
    }
}

fn guard_discarded(log: &Path, exit_in_run: bool) {
    let (layer, _) = small_builder(log).build().expect("build");
    tracing_subscriber::registry().with(layer).init();
    drop(info_span!("init").entered());
    let _run = info_span!("run").entered();
    {
        let _block = info_span!("block").entered();
        for step in 0..3u64 {
            drop(info_span!("train_step", step).entered());
        }
    }
    mllog!(keys::EVAL_ACCURACY, 0.25);
    if exit_in_run {
        std::process::exit(0);
    }
    // The run ends here; the process exits when the test returns.
}

// ---------------------------------------------------------------------------------------------
// A build that fails leaves the previous log as it was.

/// Environment variables of one case.
type Vars<'a> = Vec<(&'a str, &'a str)>;

const PREVIOUS: &[u8] = b":::MLLOG {\"previous\": \"run\"}\nnot to be truncated\n";

/// Builds with output to `log` (holding [`PREVIOUS`]); returns the error, or `None` if the
/// build succeeded.
fn try_build(log: &Path, env: &[(&str, &str)], dup_span: bool) -> Option<String> {
    let mut builder = MllogLayer::builder()
        .output(Output::file(log))
        .live_check(LivePolicy::Off)
        .environment(env.iter().copied());
    if dup_span {
        builder = builder.span_name(Interval::Block, "run");
    }
    match builder.build::<tracing_subscriber::Registry>() {
        Ok((_layer, mut guard)) => {
            guard.shutdown();
            None
        }
        Err(e) => Some(e.to_string()),
    }
}

#[test]
fn a_failed_build_keeps_the_previous_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("result_0.txt");
    let rpd = dir.path().join("trace.rpd");
    let rpd = rpd.to_str().unwrap();
    let mut cases: Vec<(&str, Vars, bool)> = vec![
        (
            "MLLOG_TRAIN_LOSS_LOG_FREQ",
            vec![("MLLOG_TRAIN_LOSS_LOG_FREQ", "often")],
            false,
        ),
        (
            "MLLOG_SUBMISSION_DIVISION",
            vec![("MLLOG_SUBMISSION_DIVISION", "closd")],
            false,
        ),
        ("RANK", vec![("RANK", "first")], false),
        // The last check before the output opens.
        ("mapped to two intervals", vec![], true),
    ];
    if cfg!(feature = "rpd") {
        cases.push((
            "MLLOG_RPD_SCHEMA",
            vec![("MLLOG_RPD_FILE", rpd), ("MLLOG_RPD_SCHEMA", "9")],
            false,
        ));
    }
    if cfg!(feature = "object-store") {
        cases.push((
            "ftp://",
            vec![("MLLOG_UPLOAD_URL", "ftp://x/mllog/")],
            false,
        ));
    }
    for (expect, env, dup_span) in cases {
        fs::write(&log, PREVIOUS).unwrap();
        let err = try_build(&log, &env, dup_span)
            .unwrap_or_else(|| panic!("{env:?}: the build should fail"));
        assert!(err.contains(expect), "{env:?}: {err}");
        assert_eq!(
            String::from_utf8_lossy(&fs::read(&log).unwrap()),
            String::from_utf8_lossy(PREVIOUS),
            "{env:?} truncated the log"
        );
    }
    assert!(!Path::new(rpd).exists(), "no RPD file for a failed build");

    // The control: the same output with nothing wrong is truncated.
    assert_eq!(try_build(&log, &[], false), None);
    assert!(fs::read(&log).unwrap().is_empty());
}

/// The sinks that read the process environment whatever `Builder::environment` says
/// (OpenTelemetry, `PROFILER`): a bad value fails the build in a child that has it, and the
/// previous log survives.
#[cfg(any(feature = "otel-sdk", feature = "rpd"))]
#[test]
fn a_failed_build_from_process_variables_keeps_the_previous_log() {
    let mut cases: Vec<(&str, Vars)> = Vec::new();
    if cfg!(feature = "otel-sdk") {
        cases.push((
            "MLLOG_OTEL_TRAIN_STEP_RATE",
            vec![("MLLOG_OTEL", "1"), ("MLLOG_OTEL_TRAIN_STEP_RATE", "7")],
        ));
        cases.push((
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            vec![
                ("MLLOG_OTEL", "1"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ],
        ));
    }
    if cfg!(feature = "rpd") {
        cases.push((
            "PROFILE_SEGMENT",
            vec![("PROFILER", "rpd"), ("PROFILE_SEGMENT", "block:0")],
        ));
    }
    for (expect, env) in cases {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("result_0.txt");
        fs::write(&log, PREVIOUS).unwrap();
        let out = run_case("build_fails", dir.path(), &env);
        assert_eq!(out.status.code(), Some(0), "{env:?}: {}", out.context());
        assert!(out.stdout.contains(expect), "{env:?}: {}", out.context());
        assert_eq!(
            String::from_utf8_lossy(&fs::read(&log).unwrap()),
            String::from_utf8_lossy(PREVIOUS),
            "{env:?} truncated the log"
        );
        // Nothing else appeared either (no RPD file, no log elsewhere).
        let mut names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["result_0.txt", "stderr.txt", "stdout.txt"],
            "{env:?}"
        );
    }
}

/// Builds from the process environment (`Builder::from_env`); the build must fail.
fn build_fails(log: &Path) {
    let err = MllogLayer::builder()
        .output(Output::file(log))
        .live_check(LivePolicy::Off)
        .from_env()
        .build::<tracing_subscriber::Registry>()
        .expect_err("the build should fail");
    println!("build failed: {err}");
}

// ---------------------------------------------------------------------------------------------
// An evaluation is in the file at once.

/// `eval_accuracy` wakes the worker at once, so its line is in the file when the run stops
/// right after it, even if the process is then killed in a way no hook sees (SIGKILL). With a
/// worker timer of ten minutes only that wake-up can have written it in time.
#[test]
fn an_eval_accuracy_line_reaches_the_file_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("result_0.txt");
    let (layer, mut guard) = small_builder(&log)
        .pipeline(Pipeline::default().max_delay(Duration::from_secs(600)))
        .build()
        .unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let has = |needle: &str| {
        let deadline = Instant::now() + CHILD_TIMEOUT;
        while Instant::now() < deadline {
            if fs::read_to_string(&log).is_ok_and(|t| t.contains(needle)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    };
    tracing::dispatcher::with_default(&dispatch, || {
        let _run = info_span!("run").entered();
        // An interval record wakes the worker too; after it, the worker sleeps on its timer.
        assert!(has("\"run_start\""));
        drop(info_span!("train_step").entered());
        mllog!(keys::EVAL_ACCURACY, 0.9);
        assert!(
            has("\"eval_accuracy\""),
            "the eval line waited for the timer"
        );
    });
    drop(dispatch);
    assert!(guard.shutdown().is_clean());
}

// ---------------------------------------------------------------------------------------------
// Exit paths that meet: a signal while `exit` writes the log, a worker stuck in a sink, other
// threads still logging while one thread ends the process.

/// A sink that takes `per_record` for every record (a slow or hung output, inline so that it
/// holds up the MLLOG file as a slow file system would).
struct SlowSink {
    per_record: Duration,
    /// From this record on, every write blocks for good.
    hang_from: Option<u64>,
    written: u64,
}

impl tracing_mllog::sink::Sink for SlowSink {
    fn name(&self) -> &str {
        "slow"
    }
    fn write(
        &mut self,
        _: &tracing_mllog::record::TracedRecord,
    ) -> Result<(), tracing_mllog::sink::SinkError> {
        self.written += 1;
        if self.hang_from.is_some_and(|n| self.written >= n) {
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        std::thread::sleep(self.per_record);
        Ok(())
    }
}

/// [`small_builder`] with a [`SlowSink`] beside the MLLOG file.
fn behind_slow_sink(
    log: &Path,
    per_record: Duration,
    hang_from: Option<u64>,
) -> tracing_mllog::Builder {
    small_builder(log).sink_with(
        SlowSink {
            per_record,
            hang_from,
            written: 0,
        },
        tracing_mllog::sink::Delivery::Inline,
    )
}

const POINTS: u64 = 1500;

/// `POINTS` events in a block behind a slow output, then `process::exit` while the worker is
/// still writing them; a file named `exiting` says when.
fn exit_behind_slow_output(log: &Path) -> ! {
    let (layer, _guard) = behind_slow_sink(log, Duration::from_millis(1), None)
        .handle_signals(true)
        .build()
        .expect("build");
    tracing_subscriber::registry().with(layer).init();
    drop(info_span!("init").entered());
    let _run = info_span!("run").entered();
    let _block = info_span!("block").entered();
    for i in 0..POINTS {
        mllog!("probe_point", i);
    }
    fs::write(log.with_file_name("exiting"), "").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    std::process::exit(0);
}

/// SIGTERM arrives while `process::exit` is still writing the log: the signal's handling waits
/// for the exit hook instead of ending the process under it, so every line is in the file.
#[test]
fn a_signal_during_exit_waits_for_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let child = spawn(
        child_command("exit_behind_slow_output", dir.path(), &[]),
        dir.path(),
    );
    let marker = dir.path().join("exiting");
    let deadline = Instant::now() + CHILD_TIMEOUT;
    while !marker.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    // The exit hook is draining 1 500 records at 1 ms each by now.
    std::thread::sleep(Duration::from_millis(400));
    // SAFETY: kill(2) on our own child's PID.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = finish(child, dir.path());
    let records = out.records();
    assert_balanced_and_ordered(&records);
    assert_eq!(
        find(&records, "probe_point").len() as u64,
        POINTS,
        "{}",
        out.context()
    );
    assert_eq!(records.last().unwrap().key, "run_stop", "{}", out.context());
}

/// A worker stuck in a sink (a hung file system) with the queue full and another thread
/// blocked logging into it: `process::exit` still ends within the shutdown timeout, and says
/// that it gave up.
fn exit_with_hung_output(log: &Path) -> ! {
    let (layer, _guard) = behind_slow_sink(log, Duration::ZERO, Some(20))
        .pipeline(
            Pipeline::default()
                .capacity(64)
                .shutdown_timeout(Duration::from_secs(1)),
        )
        .build()
        .expect("build");
    tracing_subscriber::registry().with(layer).init();
    drop(info_span!("init").entered());
    let run = info_span!("run");
    let block = info_span!(parent: &run, "block");
    // A logger that fills the queue and then blocks in it (the default overflow policy).
    std::thread::spawn(move || {
        let _run = run.entered();
        let _block = block.entered();
        for i in 0u64.. {
            mllog!("probe_point", i);
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    std::process::exit(3);
}

#[test]
fn a_hung_output_does_not_hang_the_exit() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = run_case("exit_with_hung_output", dir.path(), &[]);
    assert_eq!(out.status.code(), Some(3), "{}", out.context());
    // 1 s of shutdown timeout, twice at most (the exit hook, then the wait for its lock).
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert!(
        out.stderr.contains("shutdown timed out"),
        "{}",
        out.context()
    );
}

/// One thread calls `process::exit` while others go on: one opens and closes blocks and evals
/// in a tight loop, one logs points. `run_stop` is the last line and every interval before it
/// is closed.
fn exit_while_others_log(log: &Path) -> ! {
    let (layer, _guard) = small_builder(log).build().expect("build");
    tracing_subscriber::registry().with(layer).init();
    drop(info_span!("init").entered());
    let run = info_span!("run");
    let (run_a, run_b) = (run.clone(), run.clone());
    std::thread::spawn(move || {
        let _run = run_a.entered();
        loop {
            let _block = info_span!("block").entered();
            drop(info_span!("train_step").entered());
            let _eval = info_span!("eval").entered();
            mllog!(keys::EVAL_ACCURACY, 0.9);
        }
    });
    std::thread::spawn(move || {
        let _run = run_b.entered();
        for i in 0u64.. {
            mllog!("probe_point", i);
            std::thread::sleep(Duration::from_micros(100));
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    std::process::exit(7);
}

#[test]
fn an_exit_from_one_thread_ends_the_log_while_others_log() {
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let out = run_case("exit_while_others_log", dir.path(), &[]);
        assert_eq!(out.status.code(), Some(7), "{}", out.context());
        let records = out.records();
        assert_eq!(records.last().unwrap().key, "run_stop", "{}", out.context());
        assert_eq!(find(&records, "run_stop").len(), 1);
        let mut open = 0i64;
        for r in &records {
            match r.event_type {
                EventType::IntervalStart => open += 1,
                EventType::IntervalEnd => open -= 1,
                EventType::PointInTime => {}
            }
        }
        assert_eq!(open, 0, "{:?}", intervals(&records));
    }
}

/// An output that fails (a full disk) is said on stderr at its first failure, while the run
/// goes on, not only in the report at the end.
fn output_on_a_full_disk(_log: &Path) {
    let (layer, guard) = small_builder(Path::new("/dev/full"))
        .build()
        .expect("build");
    tracing_subscriber::registry().with(layer).init();
    drop(info_span!("init").entered());
    let _run = info_span!("run").entered();
    assert!(guard.flush(CHILD_TIMEOUT));
    eprintln!("child: the run goes on");
}

#[test]
fn a_failing_output_is_said_at_its_first_failure() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_case("output_on_a_full_disk", dir.path(), &[]);
    let said = out
        .stderr
        .find("error: sink `mllog-file` failed")
        .unwrap_or_else(|| panic!("{}", out.context()));
    let goes_on = out.stderr.find("child: the run goes on").unwrap();
    assert!(said < goes_on, "{}", out.context());
    assert!(
        out.stderr.contains("No space left on device"),
        "{}",
        out.context()
    );
    // Once: the report at the end counts the rest.
    assert_eq!(
        out.stderr.matches("failed:").count(),
        1,
        "{}",
        out.context()
    );
}

/// Records logged after the guard was dropped are not written; the report printed as the guard
/// drops cannot know of those that come later, so the process says them as it exits.
fn logs_after_the_guard(log: &Path) {
    let (layer, guard) = small_builder(log).build().expect("build");
    tracing_subscriber::registry().with(layer).init();
    drop(info_span!("init").entered());
    drop(guard);
    for i in 0..5u64 {
        mllog!("late_point", i);
    }
}

#[test]
fn records_logged_after_the_guard_are_said_at_exit() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_case("logs_after_the_guard", dir.path(), &[]);
    assert!(out.status.success(), "{}", out.context());
    assert!(
        out.stderr
            .contains("5 records were logged after the MLLOG pipeline shut down"),
        "{}",
        out.context()
    );
    assert!(find(&out.records(), "late_point").is_empty());
}

/// A program that handles SIGTERM itself, with the layer's signal handling turned on too: it is
/// told at `build()` that the two do not go together.
fn own_handler_and_signal_handling(log: &Path) {
    extern "C" fn on_term(_: libc::c_int) {}
    // SAFETY: installs an async-signal-safe handler (it does nothing).
    unsafe { libc::signal(libc::SIGTERM, on_term as *const () as libc::sighandler_t) };
    let (_layer, _guard) = small_builder(log)
        .handle_signals(true)
        .build::<tracing_subscriber::Registry>()
        .expect("build");
}

#[test]
fn a_program_with_its_own_sigterm_handler_is_told_at_build() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_case("own_handler_and_signal_handling", dir.path(), &[]);
    assert!(out.status.success(), "{}", out.context());
    assert!(
        out.stderr.contains("the program handles SIGTERM itself"),
        "{}",
        out.context()
    );
    assert!(!out.stderr.contains("handles SIGINT"), "{}", out.context());
    // Without a handler of the program's own, not a word.
    let quiet = run_case("signal_off_quiet", dir.path(), &[]);
    assert!(!quiet.stderr.contains("handles"), "{}", quiet.context());
}

fn signal_handling_without_own_handler(log: &Path) {
    let (_layer, _guard) = small_builder(log)
        .handle_signals(true)
        .build::<tracing_subscriber::Registry>()
        .expect("build");
}

// ---------------------------------------------------------------------------------------------

/// The child process of the tests above; started by them, never on its own.
#[test]
#[ignore = "the child process of the exit-path tests"]
fn child() {
    let case = std::env::var(CASE).expect("started by a parent test");
    let log = PathBuf::from(std::env::var_os(LOG).expect("log path"));
    match case.as_str() {
        "converged_exit" => converged_exit(&log),
        "exit_mid_block" => exit_mid_block(&log),
        "signal_builder" => train_until_killed(&log, "builder"),
        "signal_env" => train_until_killed(&log, "env"),
        "signal_off" => train_until_killed(&log, "off"),
        "guard_dropped_in_run" => guard_dropped_in_run(&log),
        "guard_discarded" => guard_discarded(&log, false),
        "guard_discarded_exit_in_run" => guard_discarded(&log, true),
        "build_fails" => build_fails(&log),
        "exit_behind_slow_output" => exit_behind_slow_output(&log),
        "exit_with_hung_output" => exit_with_hung_output(&log),
        "exit_while_others_log" => exit_while_others_log(&log),
        "output_on_a_full_disk" => output_on_a_full_disk(&log),
        "logs_after_the_guard" => logs_after_the_guard(&log),
        "own_handler_and_signal_handling" => own_handler_and_signal_handling(&log),
        "signal_off_quiet" => signal_handling_without_own_handler(&log),
        other => panic!("unknown case {other}"),
    }
}
