//! Log sync to object storage (feature `object-store`): real servers on free loopback ports
//! (moto for S3, Azurite for Azure, fake-gcs-server for GCS reads), `file://`, `memory://`, a
//! slow (throttled) store and an unreachable endpoint. Servers are started and killed by PID
//! by the tests; the tools come from `scripts/deps/object-store.sh` (run `scripts/test`).
#![cfg(feature = "object-store")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::throttle::{ThrottleConfig, ThrottledStore};
use object_store::{ObjectStore, ObjectStoreExt};
use tracing::info_span;
use tracing_mllog::sink::{
    RetryPolicy, Sink, UploadConfig, UploadError, UploadHandle, UploadReport, UploadSink,
    ENV_UPLOAD_INTERVAL_SECS, ENV_UPLOAD_URL,
};
use tracing_mllog::{keys, mllog, MllogLayer, Record};
use tracing_subscriber::prelude::*;

const SECRET: &str = "SeCrEt-7f3a9b2c-do-not-leak";
const ENV_SECRET: &str = "EnvSecret-41d8cd98-do-not-leak";
/// Azurite's published well-known development key (not a secret).
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

// ---------------------------------------------------------------------------------------------
// Servers

/// A child process killed (by its PID) and reaped on drop.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool(var: &str) -> String {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() && Path::new(&v).exists() => v,
        _ => panic!(
            "{var} is not set or does not exist: the object-store tests need their servers; run \
             `scripts/test` (or `VENV=... MLLOG_PYTHON=...; . scripts/deps/object-store.sh` \
             before `cargo test --features object-store`)"
        ),
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn(mut cmd: Command, port: u16, dir: &Path, name: &str) -> Server {
    let log = dir.join(format!("{name}.log"));
    let out = std::fs::File::create(&log).unwrap();
    cmd.current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("starting {name}: {e}"));
    let mut server = Server { child, port, log };
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!(
                "{name} exited ({status}): {}",
                std::fs::read_to_string(&server.log).unwrap_or_default()
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{name} did not listen on port {port}: {}",
            std::fs::read_to_string(&server.log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server.port = port;
    server
}

fn start_moto(dir: &Path) -> Server {
    let python = tool("MLLOG_MOTO_PYTHON");
    let port = free_port();
    let mut cmd = Command::new(python);
    cmd.args([
        "-m",
        "moto.server",
        "-H",
        "127.0.0.1",
        "-p",
        &port.to_string(),
    ]);
    spawn(cmd, port, dir, "moto")
}

fn start_azurite(dir: &Path) -> Server {
    let bin = tool("MLLOG_AZURITE_BIN");
    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.args([
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        &port.to_string(),
        "--inMemoryPersistence",
        "--disableTelemetry",
        "--skipApiVersionCheck",
        "--loose",
        "-s",
    ]);
    spawn(cmd, port, dir, "azurite")
}

fn start_fake_gcs(dir: &Path) -> Server {
    let bin = tool("MLLOG_FAKE_GCS_BIN");
    let port = free_port();
    let host = format!("127.0.0.1:{port}");
    let mut cmd = Command::new(bin);
    cmd.args([
        "-scheme",
        "http",
        "-backend",
        "memory",
        "-host",
        "127.0.0.1",
    ])
    .args(["-port", &port.to_string(), "-public-host", &host])
    .args(["-external-url", &format!("http://{host}")]);
    spawn(cmd, port, dir, "fake-gcs-server")
}

/// A minimal HTTP/1.1 request over loopback; returns the status code and body.
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn try_get_remote(store: &Arc<dyn ObjectStore>, path: &ObjectPath) -> Option<Vec<u8>> {
    block_on(async { store.get(path).await?.bytes().await })
        .ok()
        .map(|b| b.to_vec())
}

fn get_remote(store: &Arc<dyn ObjectStore>, path: &ObjectPath) -> Vec<u8> {
    block_on(async { store.get(path).await?.bytes().await })
        .unwrap_or_else(|e| panic!("reading back {path}: {e}"))
        .to_vec()
}

// ---------------------------------------------------------------------------------------------
// A small training run through the real layer and pipeline

struct Run {
    local: PathBuf,
    report: UploadReport,
    pipeline: tracing_mllog::Report,
    /// The remote copy read while the run was still going (after the first `eval_accuracy`).
    mid_run_remote: Option<Vec<u8>>,
    mid_run_uploads: u64,
    elapsed_shutdown: Duration,
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a short training through the layer with the MLLOG file in `dir` and this upload
/// config; `reader` reads the remote log (for the mid-run check).
fn train(dir: &Path, config: UploadConfig, reader: Option<&dyn Fn() -> Option<Vec<u8>>>) -> Run {
    let local = dir.join("mllog.log");
    let (sink, handle) = UploadSink::start(config, local.clone()).expect("start uploader");
    let (layer, mut guard) = MllogLayer::builder()
        .output_file(&local)
        .sink(sink)
        .shutdown_timeout(Duration::from_secs(20))
        .environment(Vec::<(String, String)>::new())
        .build()
        .expect("build layer");
    let subscriber = tracing_subscriber::registry().with(layer);
    let mut mid_run_remote = None;
    let mut mid_run_uploads = 0;
    tracing::subscriber::with_default(subscriber, || {
        {
            let _init = info_span!("init").entered();
            mllog!(keys::GLOBAL_BATCH_SIZE, 8);
        }
        let run = info_span!("run").entered();
        for epoch in 0..3u64 {
            {
                let _b = info_span!("block", samples_count = 0u64).entered();
            }
            let _e = info_span!("eval", samples_count = 384 * (epoch + 1)).entered();
            mllog!(
                keys::EVAL_ACCURACY,
                0.5 + epoch as f64 / 10.0,
                samples_count = 384 * (epoch + 1)
            );
            if epoch == 0 {
                wait_for(
                    "an upload after eval_accuracy",
                    Duration::from_secs(20),
                    || handle.report().uploads_ok >= 1,
                );
                if let Some(read) = reader {
                    // The prompt upload after eval_accuracy (a periodic one may come first).
                    wait_for(
                        "eval_accuracy in the remote copy",
                        Duration::from_secs(20),
                        || {
                            mid_run_remote = read();
                            mid_run_remote.as_deref().is_some_and(|b| {
                                String::from_utf8_lossy(b).contains("eval_accuracy")
                            })
                        },
                    );
                }
                mid_run_uploads = handle.report().uploads_ok;
            }
        }
        drop(run);
    });
    let start = Instant::now();
    let pipeline = guard.shutdown();
    let elapsed_shutdown = start.elapsed();
    Run {
        local,
        report: handle.report(),
        pipeline,
        mid_run_remote,
        mid_run_uploads,
        elapsed_shutdown,
    }
}

fn assert_synced(run: &Run, remote: &[u8]) {
    let local = std::fs::read(&run.local).unwrap();
    assert!(
        String::from_utf8_lossy(&local).contains(":::MLLOG") && local.ends_with(b"\n"),
        "local file incomplete"
    );
    assert!(String::from_utf8_lossy(&local).contains("\"run_stop\""));
    assert_eq!(remote, &local[..], "remote differs from local");
    assert_eq!(
        run.report.final_remote_matches_local,
        Some(true),
        "{}",
        run.report
    );
    assert_eq!(run.report.uploads_failed, 0, "{}", run.report);
    assert!(run.report.uploads_ok >= 2, "{}", run.report);
    assert!(run.mid_run_uploads >= 1);
    assert!(run.pipeline.is_clean(), "{}", run.pipeline);
    assert!(
        run.elapsed_shutdown < Duration::from_secs(20),
        "{:?}",
        run.elapsed_shutdown
    );
    if let Some(mid) = &run.mid_run_remote {
        let mid = String::from_utf8_lossy(mid);
        assert!(
            mid.contains("eval_accuracy"),
            "mid-run copy lacks eval_accuracy: {mid}"
        );
        assert!(
            !mid.contains("run_stop"),
            "mid-run copy already has run_stop"
        );
    }
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
    }
}

// ---------------------------------------------------------------------------------------------
// Backends

#[test]
fn file_url_syncs_during_and_after_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let remote_dir = dir.path().join("remote");
    std::fs::create_dir_all(&remote_dir).unwrap();
    let rpd = dir.path().join("trace.rpd");
    std::fs::write(&rpd, b"fake rpd bytes").unwrap();
    let url = format!("file://{}/", remote_dir.display());
    let config = UploadConfig::new(&url)
        .unwrap()
        .interval(Duration::from_millis(100))
        .artefact(&rpd);
    let remote_file = remote_dir.join("mllog.log");
    let read = || std::fs::read(&remote_file).ok();
    let run = train(dir.path(), config, Some(&read));
    assert_synced(&run, &std::fs::read(&remote_file).unwrap());
    assert_eq!(
        std::fs::read(remote_dir.join("trace.rpd")).unwrap(),
        b"fake rpd bytes"
    );
    assert_eq!(run.report.artefacts_ok, 1, "{}", run.report);
}

#[test]
fn memory_url_and_injected_memory_store() {
    // memory:// builds a private InMemory store: the read-back check is the uploader's own.
    let dir = tempfile::tempdir().unwrap();
    let config = UploadConfig::new("memory:///runs/1/").unwrap();
    let run = train(dir.path(), config, None);
    assert_eq!(
        run.report.final_remote_matches_local,
        Some(true),
        "{}",
        run.report
    );
    assert!(run.report.uploads_ok >= 2, "{}", run.report);

    // An injected store lets the test read the object itself.
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let config = UploadConfig::from_store(store.clone(), "runs/2/log.txt");
    let path = ObjectPath::from("runs/2/log.txt");
    let s2 = store.clone();
    let p2 = path.clone();
    let read = move || try_get_remote(&s2, &p2);
    let run = train(dir.path(), config, Some(&read));
    assert_synced(&run, &get_remote(&store, &path));
}

#[test]
fn s3_moto_syncs_during_and_after_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let moto = start_moto(dir.path());
    let (status, body) = http(moto.port, "PUT", "/mllog-bucket", &[], b"");
    assert_eq!(status, 200, "create bucket: {body}");
    let rpd = dir.path().join("trace.rpd");
    std::fs::write(&rpd, vec![7u8; 100_000]).unwrap();
    let endpoint = format!("http://127.0.0.1:{}", moto.port);
    let config = || {
        UploadConfig::new("s3://mllog-bucket/runs/7/")
            .unwrap()
            .read_provider_env(false)
            .option("aws_endpoint", &endpoint)
            .option("aws_allow_http", "true")
            .option("aws_access_key_id", "test")
            .option("aws_secret_access_key", SECRET)
            .option("aws_region", "us-east-1")
            .option("aws_virtual_hosted_style_request", "false")
            .interval(Duration::from_millis(200))
            .retry(fast_retry())
    };
    let (store, path) = config().open_store(&dir.path().join("mllog.log")).unwrap();
    assert_eq!(path.as_ref(), "runs/7/mllog.log");
    let (s2, p2) = (store.clone(), path.clone());
    let read = move || try_get_remote(&s2, &p2);
    let run = train(dir.path(), config().artefact(&rpd), Some(&read));
    assert_synced(&run, &get_remote(&store, &path));
    assert_eq!(
        get_remote(&store, &ObjectPath::from("runs/7/trace.rpd")),
        vec![7u8; 100_000]
    );
    assert!(!format!("{:?} {}", run.report, run.report).contains(SECRET));
}

#[test]
fn azure_azurite_syncs_during_and_after_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let azurite = start_azurite(dir.path());
    // Container creation with the official SDK (object_store cannot create containers).
    let python = tool("MLLOG_MOTO_PYTHON");
    let conn = format!(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};\
         BlobEndpoint=http://127.0.0.1:{}/devstoreaccount1;",
        azurite.port
    );
    let out = Command::new(python)
        .args([
            "-c",
            "import sys; from azure.storage.blob import BlobServiceClient as C; \
             C.from_connection_string(sys.argv[1]).create_container('mllog')",
            &conn,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "create container: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let endpoint = format!("http://127.0.0.1:{}/devstoreaccount1", azurite.port);
    let config = || {
        UploadConfig::new("az://mllog/runs/8/")
            .unwrap()
            .read_provider_env(false)
            .option("azure_storage_account_name", "devstoreaccount1")
            .option("azure_storage_account_key", AZURITE_KEY)
            .option("azure_storage_endpoint", &endpoint)
            .option("allow_http", "true")
            .interval(Duration::from_millis(200))
            .retry(fast_retry())
    };
    let (store, path) = config().open_store(&dir.path().join("mllog.log")).unwrap();
    let (s2, p2) = (store.clone(), path.clone());
    let read = move || try_get_remote(&s2, &p2);
    let run = train(dir.path(), config(), Some(&read));
    assert_synced(&run, &get_remote(&store, &path));
}

#[test]
fn gcs_configuration_and_reads_against_fake_gcs_server() {
    let dir = tempfile::tempdir().unwrap();
    let gcs = start_fake_gcs(dir.path());
    let base = format!("http://127.0.0.1:{}", gcs.port);
    let (status, body) = http(
        gcs.port,
        "POST",
        "/storage/v1/b",
        &[("Content-Type", "application/json")],
        br#"{"name":"mllog-bucket"}"#,
    );
    assert_eq!(status, 200, "create bucket: {body}");
    // An object written through the emulator's JSON API, read through our configuration.
    let content = b":::MLLOG {\"key\": \"run_stop\"}\n";
    let (status, body) = http(
        gcs.port,
        "POST",
        "/upload/storage/v1/b/mllog-bucket/o?uploadType=media&name=runs/9/mllog.log",
        &[("Content-Type", "text/plain")],
        content,
    );
    assert_eq!(status, 200, "upload through JSON API: {body}");
    // Explicit credentials that never leave loopback (no metadata server): the private key
    // field carries our marker so that we can check it never shows up.
    let key = format!(
        r#"{{"gcs_base_url":"{base}","disable_oauth":true,"client_email":"","private_key":"{SECRET}","private_key_id":""}}"#
    );
    let config = || {
        UploadConfig::new("gs://mllog-bucket/runs/9/")
            .unwrap()
            .read_provider_env(false)
            .option("google_service_account_key", &key)
            .option("allow_http", "true")
            .retry(fast_retry())
            .interval(Duration::ZERO)
    };
    assert!(!format!("{:?}", config()).contains(SECRET));
    let local = dir.path().join("mllog.log");
    let (store, path) = config().open_store(&local).unwrap();
    assert_eq!(path.as_ref(), "runs/9/mllog.log");
    assert_eq!(get_remote(&store, &path), content);

    // Writes: object_store 0.14 PUTs through the GCS XML API, which fake-gcs-server does not
    // implement. The uploader must reach the emulator, fail cleanly and say so.
    std::fs::write(&local, ":::MLLOG {\"key\": \"x\"}\n").unwrap();
    let (mut sink, handle) = UploadSink::start(config(), local.clone()).unwrap();
    let result = sink.close(Instant::now() + Duration::from_secs(10));
    let report = handle.report();
    eprintln!("GCS write against fake-gcs-server (expected to fail): {report}");
    assert!(result.is_err());
    assert_eq!(report.final_remote_matches_local, Some(false), "{report}");
    let err = report.last_error.clone().unwrap();
    assert!(err.contains("runs/9/mllog.log"), "{err}");
    assert!(!format!("{report} {report:?} {result:?}").contains(SECRET));
}

// ---------------------------------------------------------------------------------------------
// Slow and dead stores: the training side never waits

fn record(key: &'static str) -> Record {
    Record::event(key, 1.0)
}

/// Calls write+flush like the pipeline does and returns the slowest call.
fn hammer(sink: &mut UploadSink, n: usize) -> Duration {
    let mut slowest = Duration::ZERO;
    for i in 0..n {
        let key = if i.is_multiple_of(10) {
            "eval_accuracy"
        } else {
            "tracked_stats"
        };
        let r = record(key);
        let t = Instant::now();
        sink.write(&r).unwrap();
        sink.flush().unwrap();
        slowest = slowest.max(t.elapsed());
        if i.is_multiple_of(50) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    eprintln!("slowest write+flush of {n}: {slowest:?}");
    slowest
}

fn local_log(dir: &Path) -> PathBuf {
    let local = dir.join("mllog.log");
    std::fs::write(&local, ":::MLLOG {\"key\": \"run_start\"}\n").unwrap();
    local
}

#[test]
fn slow_store_never_blocks_and_shutdown_keeps_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let local = local_log(dir.path());
    let throttle = ThrottleConfig {
        wait_put_per_call: Duration::from_secs(3),
        ..ThrottleConfig::default()
    };
    let store: Arc<dyn ObjectStore> = Arc::new(ThrottledStore::new(InMemory::new(), throttle));
    let config = UploadConfig::from_store(store, "slow/")
        .interval(Duration::from_millis(50))
        .retry(fast_retry());
    let (mut sink, handle) = UploadSink::start(config, local).unwrap();
    let slowest = hammer(&mut sink, 500);
    assert!(
        slowest < Duration::from_millis(100),
        "write+flush took {slowest:?}"
    );
    let report = handle.report();
    assert!(report.skipped_or_coalesced > 0, "{report}");
    assert_eq!(report.uploads_ok, 0, "{report}");
    let t = Instant::now();
    let result = sink.close(Instant::now() + Duration::from_secs(1));
    let took = t.elapsed();
    assert!(took < Duration::from_millis(1300), "close took {took:?}");
    let report = handle.report();
    assert!(result.is_err(), "{report}");
    assert_eq!(report.final_remote_matches_local, Some(false), "{report}");
    assert!(report.last_error.unwrap().contains("deadline"));
}

#[test]
fn dead_endpoint_never_blocks_and_reports_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let local = local_log(dir.path());
    let port = free_port(); // nothing listens there
    let config = UploadConfig::new("s3://dead-bucket/x/")
        .unwrap()
        .read_provider_env(false)
        .option("aws_endpoint", format!("http://127.0.0.1:{port}"))
        .option("aws_allow_http", "true")
        .option("aws_access_key_id", "AKIDEXAMPLE")
        .option("aws_secret_access_key", SECRET)
        .option("aws_region", "us-east-1")
        .interval(Duration::from_millis(20))
        .retry(fast_retry());
    let debug = format!("{config:?}");
    assert!(!debug.contains(SECRET), "{debug}");
    let (mut sink, handle) = UploadSink::start(config, local).unwrap();
    let slowest = hammer(&mut sink, 500);
    assert!(
        slowest < Duration::from_millis(100),
        "write+flush took {slowest:?}"
    );
    wait_for("a failed upload", Duration::from_secs(10), || {
        handle.report().uploads_failed > 0
    });
    let t = Instant::now();
    let result = sink.close(Instant::now() + Duration::from_secs(2));
    assert!(
        t.elapsed() < Duration::from_millis(2300),
        "close took {:?}",
        t.elapsed()
    );
    let report = handle.report();
    let err = result.unwrap_err().to_string();
    assert_eq!(report.final_remote_matches_local, Some(false), "{report}");
    assert!(report.retries > 0, "{report}");
    let last = report.last_error.clone().unwrap();
    assert!(last.contains("x/mllog.log"), "{last}");
    let all = format!("{report} {report:?} {err} {last}");
    assert!(!all.contains(SECRET), "{all}");
}

// ---------------------------------------------------------------------------------------------
// Configuration

#[test]
fn configuration_from_variables_and_options() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    };
    assert!(UploadConfig::from_vars(vars(&[])).unwrap().is_none());
    assert!(UploadConfig::from_vars(vars(&[(ENV_UPLOAD_URL, " ")]))
        .unwrap()
        .is_none());
    let c = UploadConfig::from_vars(vars(&[
        (ENV_UPLOAD_URL, "gs://bucket/run/"),
        (ENV_UPLOAD_INTERVAL_SECS, "2.5"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(c.display_url(), "gs://bucket/run/");
    let e = UploadConfig::from_vars(vars(&[
        (ENV_UPLOAD_URL, "s3://b/k"),
        (ENV_UPLOAD_INTERVAL_SECS, "soon"),
    ]))
    .unwrap_err();
    assert!(e.to_string().contains(ENV_UPLOAD_INTERVAL_SECS), "{e}");
    let e = UploadConfig::from_vars(vars(&[(ENV_UPLOAD_URL, "ftp://user:pw@host/x")])).unwrap_err();
    assert!(e.to_string().contains(ENV_UPLOAD_URL), "{e}");
    assert!(!e.to_string().contains("pw"), "{e}");
    for url in [
        "s3://b/k",
        "s3a://b/k",
        "gs://b/k",
        "az://c/k",
        "abfs://c@acct.dfs.core.windows.net/k",
        "file:///tmp/x",
        "memory:///x",
    ] {
        UploadConfig::new(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    }
    assert!(matches!(
        UploadConfig::new("https://example.com/x"),
        Err(UploadError::InvalidUrl { .. })
    ));
    // Unknown option keys fail at start, naming the key but not the value.
    let dir = tempfile::tempdir().unwrap();
    let err = UploadSink::start(
        UploadConfig::new("s3://b/k")
            .unwrap()
            .option("aws_secret_acess_key", SECRET),
        dir.path().join("l"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("aws_secret_acess_key") && !err.contains(SECRET),
        "{err}"
    );
    // GCS: the service-account key is taken as configured (no network at build time).
    let key = format!(
        r#"{{"gcs_base_url":"http://127.0.0.1:1","disable_oauth":true,"client_email":"","private_key":"{SECRET}","private_key_id":""}}"#
    );
    let c = UploadConfig::new("gs://bucket/runs/")
        .unwrap()
        .read_provider_env(false)
        .option("google_service_account_key", key);
    let (store, path) = c.open_store(Path::new("/x/mllog_1.log")).unwrap();
    assert_eq!(path.as_ref(), "runs/mllog_1.log");
    assert!(!format!("{store} {store:?} {c:?}").contains(SECRET));
}

// ---------------------------------------------------------------------------------------------
// No secret anywhere: a child process runs a whole training with upload to a dead endpoint
// and every tracing event (object_store, reqwest, hyper at TRACE) printed to stderr.

const CHILD_VAR: &str = "MLLOG_UPLOAD_TEST_CHILD_DIR";

#[test]
fn no_secret_in_stderr_errors_report_or_log() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args([
            "--exact",
            "child_run_with_dead_store",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_VAR, dir.path())
        .env("AWS_SECRET_ACCESS_KEY", ENV_SECRET)
        .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        .env("AWS_ALLOW_HTTP", "true")
        .env("RUST_LOG", "trace")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("CHILD-REPORT"),
        "child did not run:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("upload of"),
        "the failure is not named:\n{stdout}"
    );
    let log = std::fs::read_to_string(dir.path().join("mllog.log")).unwrap();
    assert!(log.contains("run_stop"));
    for (what, text) in [("stdout", &*stdout), ("stderr", &*stderr), ("mllog", &*log)] {
        assert!(!text.contains(SECRET), "secret in {what}");
        assert!(!text.contains(ENV_SECRET), "env secret in {what}");
    }
    // The uploader's own tracing events never become MLLOG records.
    for line in log.lines() {
        assert!(line.starts_with(":::MLLOG "), "{line}");
        assert!(
            !line.contains("object_store") && !line.contains("hyper"),
            "{line}"
        );
    }
}

#[test]
fn child_run_with_dead_store() {
    let Ok(dir) = std::env::var(CHILD_VAR) else {
        return; // only meaningful as the child of the test above
    };
    let dir = PathBuf::from(dir);
    let local = dir.join("mllog.log");
    let port = free_port();
    let config = UploadConfig::new("s3://dead-bucket/run/")
        .unwrap()
        .option("aws_endpoint", format!("http://127.0.0.1:{port}"))
        .option("aws_session_token", SECRET)
        .option("aws_region", "us-east-1")
        .interval(Duration::from_millis(20))
        .retry(fast_retry());
    eprintln!("config: {config:?}");
    let (sink, handle): (UploadSink, UploadHandle) =
        UploadSink::start(config, local.clone()).unwrap();
    let (layer, mut guard) = MllogLayer::builder()
        .output_file(&local)
        .sink(sink)
        .shutdown_timeout(Duration::from_secs(3))
        .environment(Vec::<(String, String)>::new())
        .build()
        .unwrap();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(tracing_subscriber::filter::LevelFilter::TRACE);
    let subscriber = tracing_subscriber::registry().with(layer).with(fmt);
    tracing::subscriber::set_global_default(subscriber).unwrap();
    {
        let _run = info_span!("run").entered();
        mllog!(keys::EVAL_ACCURACY, 0.5, samples_count = 1u64);
        std::thread::sleep(Duration::from_millis(300));
    }
    let report = guard.shutdown();
    println!("CHILD-REPORT pipeline: {report}");
    println!("CHILD-REPORT pipeline debug: {report:?}");
    println!("CHILD-REPORT upload: {}", handle.report());
    println!("CHILD-REPORT upload debug: {:?}", handle.report());
}

#[test]
fn hung_endpoint_never_blocks_and_shutdown_keeps_its_deadline() {
    // A socket that accepts connections (kernel backlog) but never answers: requests hang.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let local = local_log(dir.path());
    let config = UploadConfig::new("s3://hung-bucket/x/")
        .unwrap()
        .read_provider_env(false)
        .option("aws_endpoint", format!("http://127.0.0.1:{port}"))
        .option("aws_allow_http", "true")
        .option("aws_access_key_id", "AKIDEXAMPLE")
        .option("aws_secret_access_key", SECRET)
        .option("aws_region", "us-east-1")
        .interval(Duration::from_millis(20))
        .retry(fast_retry());
    let (mut sink, handle) = UploadSink::start(config, local).unwrap();
    let slowest = hammer(&mut sink, 300);
    assert!(
        slowest < Duration::from_millis(100),
        "write+flush took {slowest:?}"
    );
    let t = Instant::now();
    let result = sink.close(Instant::now() + Duration::from_millis(1500));
    let took = t.elapsed();
    assert!(took < Duration::from_millis(1800), "close took {took:?}");
    let report = handle.report();
    assert!(result.is_err(), "{report}");
    assert_eq!(report.final_remote_matches_local, Some(false), "{report}");
    assert!(
        report.last_error.clone().unwrap().contains("deadline"),
        "{report}"
    );
    assert!(!format!("{report:?} {result:?}").contains(SECRET));
    drop(listener);
}

#[test]
fn runs_on_the_applications_tokio_runtime_when_there_is_one() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local = local_log(dir.path());
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let config = UploadConfig::from_store(store.clone(), "app/").interval(Duration::ZERO);
    let (mut sink, handle) = {
        let _enter = rt.enter();
        UploadSink::start(config, local.clone()).unwrap()
    };
    // No `mllog-upload` thread: the task runs on the application's runtime.
    sink.write(&record("eval_accuracy")).unwrap();
    sink.flush().unwrap();
    wait_for("an upload", Duration::from_secs(10), || {
        handle.report().uploads_ok >= 1
    });
    std::fs::write(&local, ":::MLLOG {\"key\": \"run_stop\"}\n").unwrap();
    sink.close(Instant::now() + Duration::from_secs(5)).unwrap();
    assert_eq!(
        get_remote(&store, &ObjectPath::from("app/mllog.log")),
        std::fs::read(&local).unwrap()
    );
    assert_eq!(handle.report().final_remote_matches_local, Some(true));
}
