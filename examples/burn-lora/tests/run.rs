//! The burn example's runs, as child processes of the release binary (`scripts/burn` runs
//! these with `cargo test --release --manifest-path examples/burn-lora/Cargo.toml`, after sourcing `scripts/venv.sh` for
//! `MLLOG_PYTHON` and `scripts/deps/otel.sh` for `MLLOG_ROTEL_BIN`; without them the tests fail
//! and say so, they never skip).
//!
//! - a run converges (`run_stop` says `success`, the eval curve reaches the target), and the
//!   official checker accepts its log with `--werror`;
//! - burn's own `tracing` output (every operation span at `TRACE`, written by a `fmt` layer in
//!   the same subscriber) neither adds nor removes an MLLOG record, and that log passes too;
//! - `MLLOG_RPD_FILE` and `MLLOG_OTEL=1` export the run: RPD rows, and spans at a real OTLP
//!   collector (rotel).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tracing_mllog::record::{parse_log, Record};

/// A fresh directory under the system's temporary directory, removed on drop (a helper of our
/// own: the `tempfile` crate would change the features of crates burn is built with).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "burn-lora-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The plain run (no trace, no export), made once for the tests that read it: each run
/// pretrains for most of a minute. `scripts/burn` makes this run itself before the tests and
/// names its directory in `BURN_LORA_PLAIN_RUN` (its `result_0.txt` and the run's `stdout.txt`);
/// without it the run is made here, in cargo's directory for test files, which outlasts the
/// test process (a static is never dropped, so a `TempDir` there would never be removed).
fn plain_run() -> (&'static str, &'static Path) {
    static RUN: std::sync::OnceLock<(String, PathBuf)> = std::sync::OnceLock::new();
    let (stdout, log) = RUN.get_or_init(|| {
        if let Some(dir) = std::env::var_os("BURN_LORA_PLAIN_RUN") {
            let dir = PathBuf::from(dir);
            let stdout = std::fs::read_to_string(dir.join("stdout.txt"))
                .expect("the plain run's stdout.txt in BURN_LORA_PLAIN_RUN");
            return (stdout, dir.join("result_0.txt"));
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("burn-lora-plain-run");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a directory for the plain run");
        let (out, log) = run_example(&dir, &[]);
        (String::from_utf8_lossy(&out.stdout).into_owned(), log)
    });
    (stdout, log)
}

fn run_example(dir: &Path, env: &[(&str, &str)]) -> (Output, PathBuf) {
    let log = dir.join("result_0.txt");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_burn-lora"));
    cmd.env("MLLOG_OUTPUT_FILE", &log).current_dir(dir);
    for var in tracing_mllog::env::SUBMISSION_VARIABLES {
        cmd.env_remove(var);
    }
    cmd.env_remove("BURN_LORA_TRACE")
        .env_remove("MLLOG_OTEL")
        .env_remove("MLLOG_RPD_FILE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run burn-lora");
    assert!(
        out.status.success(),
        "burn-lora failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, log)
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
        "MLLOG_PYTHON is not set: run these tests through scripts/burn (it sources \
         scripts/venv.sh, which installs the official checker)",
    );
    let dir = TempDir::new();
    let out = Command::new(python)
        .args([
            "-m",
            "mlperf_logging.compliance_checker",
            "--usage",
            "training",
        ])
        .args(["--ruleset", "6.1.0", "--werror", "--log_output"])
        .arg(dir.path().join("checker.log"))
        .arg(log)
        .current_dir(dir.path())
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
    let dir = TempDir::new();
    let (stdout, log) = plain_run();
    assert!(stdout.contains("run converged"), "{stdout}");

    let records = records(log);
    let stop = records.last().unwrap();
    assert_eq!(stop.key, "run_stop");
    assert_eq!(
        stop.metadata.get("status").and_then(|v| v.as_str()),
        Some("success")
    );
    for key in [
        "seed",
        "lora_rank",
        "lora_alpha",
        "global_batch_size",
        "train_loss",
    ] {
        assert!(records.iter().any(|r| r.key == key), "no {key}");
    }
    // A real curve: it starts above the target, falls, and only the last point reaches it.
    let target = 0.50;
    let evals: Vec<f64> = records
        .iter()
        .filter(|r| r.key == "eval_accuracy")
        .map(|r| r.value.as_f64().unwrap())
        .collect();
    assert!(evals.len() >= 3, "{evals:?}");
    assert!(evals[0] > evals[evals.len() - 1] + 0.1, "{evals:?}");
    assert!(
        evals[..evals.len() - 1].iter().all(|&l| l > target) && evals[evals.len() - 1] <= target,
        "{evals:?}"
    );

    let (ok, output) = official_check(log);
    assert!(ok, "official checker rejected the log:\n{output}");
    // The checker is an oracle here: without lora_rank the same log fails.
    let broken = dir.path().join("broken.txt");
    let text = std::fs::read_to_string(log).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.contains("\"key\": \"lora_rank\""))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&broken, without).unwrap();
    let (ok, output) = official_check(&broken);
    assert!(
        !ok,
        "the checker accepted a log without lora_rank:\n{output}"
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

/// One run with burn's own tracing written out at `TRACE` and the RPD and OpenTelemetry sinks
/// on (each run pretrains for most of a minute, so the three concerns share it): the MLLOG
/// records are those of the plain run, and both exports have the run's intervals.
#[test]
fn burns_own_tracing_and_the_exports_leave_the_mllog_records_alone() {
    let rotel = Rotel::start();
    let traced_dir = TempDir::new();
    let (_, plain_log) = plain_run();
    let trace = traced_dir.path().join("trace.txt");
    let rpd = traced_dir.path().join("burn-lora.rpd");
    let endpoint = format!("http://127.0.0.1:{}", rotel.grpc);
    let (_, traced_log) = run_example(
        traced_dir.path(),
        &[
            ("BURN_LORA_TRACE", trace.to_str().unwrap()),
            ("MLLOG_RPD_FILE", rpd.to_str().unwrap()),
            ("MLLOG_OTEL", "1"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
        ],
    );

    let plain = records(plain_log);
    // burn really traced, on the training thread, inside our spans: its autodiff opens a
    // `float_into_data` span whenever a value is read back, at least once per training step (the
    // step's loss), and cubecl's executor a `block_on` span around it (a name next to `block`,
    // which the layer must not confuse with its own).
    let samples = plain
        .last()
        .and_then(|r| r.metadata.get("samples_count"))
        .and_then(|v| v.as_i128())
        .unwrap() as usize;
    let steps = samples / 8;
    let trace_text = std::fs::read_to_string(&trace).unwrap();
    let opened = |name: &str| {
        trace_text
            .lines()
            .filter(|l| l.contains(" TRACE ") && l.contains(name) && l.ends_with(": new"))
            .count()
    };
    assert!(
        opened("float_into_data{") >= steps && opened("block_on: cubecl") >= steps,
        "burn's tracing in {} has {} float_into_data and {} block_on spans for {steps} steps",
        trace.display(),
        opened("float_into_data{"),
        opened("block_on: cubecl")
    );

    let traced = records(&traced_log);
    // Same seed, same records: the trace layer added none, removed none, changed none.
    assert_eq!(clockless(&plain), clockless(&traced));
    let (ok, output) = official_check(&traced_log);
    assert!(
        ok,
        "official checker rejected the traced run's log:\n{output}"
    );
    assert_rpd_rows(&rpd);
    wait_for_spans(&rotel);
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// rotel (`MLLOG_ROTEL_BIN`, installed by `scripts/deps/otel.sh`) on a free loopback port,
/// printing the spans it receives; killed by its id on drop.
struct Rotel {
    child: Child,
    dir: TempDir,
    grpc: u16,
}

impl Rotel {
    fn start() -> Rotel {
        let bin = std::env::var_os("MLLOG_ROTEL_BIN").expect(
            "MLLOG_ROTEL_BIN is not set: run these tests through scripts/burn (it sources \
             scripts/deps/otel.sh, which installs the rotel collector)",
        );
        let dir = TempDir::new();
        let (grpc, http) = (free_port(), free_port());
        let out = std::fs::File::create(dir.path().join("rotel.out")).unwrap();
        let mut child = Command::new(&bin)
            .arg("start")
            .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc}")])
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http}")])
            .args(["--exporter", "blackhole"])
            .args(["--debug-log", "traces", "--debug-log-verbosity", "detailed"])
            .arg("--pid-file")
            .arg(dir.path().join("rotel.pid"))
            .arg("--log-file")
            .arg(dir.path().join("rotel.log"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start rotel");
        let until = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", grpc)).is_err() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "rotel exited: {}",
                std::fs::read_to_string(dir.path().join("rotel.out")).unwrap_or_default()
            );
            assert!(Instant::now() < until, "rotel did not listen within 20 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        Rotel { child, dir, grpc }
    }

    /// The names of the spans received so far.
    fn span_names(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.dir.path().join("rotel.out")).unwrap_or_default();
        let mut names = Vec::new();
        let mut in_span = false;
        for line in text.lines().map(str::trim) {
            if line.starts_with("Span #") {
                in_span = true;
            } else if let Some(name) = line.strip_prefix("Name").filter(|_| in_span) {
                names.push(name.trim_start().trim_start_matches(':').trim().to_owned());
                in_span = false;
            }
        }
        names
    }
}

impl Drop for Rotel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The RPD file has a row for each of the run's intervals.
fn assert_rpd_rows(rpd: &Path) {
    let conn = rusqlite::Connection::open(rpd).unwrap();
    let labels: Vec<String> = conn
        .prepare("SELECT u.string FROM rocpd_api a JOIN rocpd_ustring u ON u.id = a.args_id")
        .and_then(|mut st| {
            st.query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        })
        .unwrap();
    for name in ["init", "run", "block", "eval"] {
        assert!(
            labels.iter().any(|l| l.starts_with(name)),
            "no {name} row in the RPD file: {labels:?}"
        );
    }
}

/// The collector receives the run's intervals as spans (within 30 s).
fn wait_for_spans(rotel: &Rotel) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let names = rotel.span_names();
        if ["init", "run", "block", "eval"]
            .iter()
            .all(|n| names.iter().any(|s| s == n))
        {
            break;
        }
        assert!(
            Instant::now() < until,
            "rotel did not receive init, run, block and eval within 30 s: {names:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
