//! Log sync to object storage (feature `object-store`): real servers on free loopback ports
//! (moto for S3, Azurite for Azure, fake-gcs-server behind an XML-API shim for GCS), `file://`,
//! `memory://`, a slow (throttled) store and an unreachable endpoint. Servers are started and
//! killed by PID by the tests; the tools come from `scripts/deps/object-store.sh` (run
//! `scripts/test`).
#![cfg(feature = "object-store")]

mod common;

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
use tracing_mllog::record::TracedRecord;
use tracing_mllog::sink::{
    RetryPolicy, Sink, UploadConfig, UploadError, UploadHandle, UploadReport, UploadSink,
    ENV_UPLOAD_DEADLINE_SECS, ENV_UPLOAD_INTERVAL_SECS, ENV_UPLOAD_URL,
};
use tracing_mllog::{keys, mllog, MllogLayer, Output, Pipeline, Ranks, Record};
use tracing_subscriber::prelude::*;

const SECRET: &str = "SeCrEt-7f3a9b2c-do-not-leak";
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
    let port = common::free_port();
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
    let port = common::free_port();
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
    let port = common::free_port();
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
    let (sink, handle) = UploadSink::for_file(config, local.clone()).expect("start uploader");
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::file(&local))
        .sink(sink)
        .pipeline(Pipeline::default().shutdown_timeout(Duration::from_secs(20)))
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

/// Creates the container `mllog` with the official SDK (object_store cannot create one).
fn create_azurite_container(port: u16) {
    let python = tool("MLLOG_MOTO_PYTHON");
    let conn = format!(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};\
         BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;"
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
}

#[test]
fn azure_azurite_syncs_during_and_after_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let azurite = start_azurite(dir.path());
    create_azurite_container(azurite.port);
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

/// The GCS XML-API calls object_store makes, in front of fake-gcs-server (which serves the
/// XML-API reads but answers the XML-API `PUT /bucket/object` with `400 invalid uploadType`):
/// a `PUT` becomes the JSON API's media upload (`POST /upload/storage/v1/b/B/o?
/// uploadType=media&name=O`) and its `etag`/`generation` become the `ETag` and
/// `x-goog-generation` headers the XML API returns; every other request passes through
/// unchanged. The object is stored by fake-gcs-server itself, so the test reads it back
/// through the JSON API, independently of object_store.
struct GcsXmlShim {
    port: u16,
    puts: Arc<std::sync::atomic::AtomicU64>,
}

/// Method, target, headers (lowercase names) and body of one HTTP/1.1 request.
type Request = (String, String, Vec<(String, String)>, Vec<u8>);

fn read_request(s: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target) = (first.next()?.to_string(), first.next()?.to_string());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap_or(0));
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    Some((method, target, headers, body))
}

fn raw_exchange(port: u16, request: &[u8]) -> Vec<u8> {
    let mut up = TcpStream::connect(("127.0.0.1", port)).unwrap();
    up.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    up.write_all(request).unwrap();
    let mut resp = Vec::new();
    let _ = up.read_to_end(&mut resp);
    resp
}

fn json_field(json: &str, name: &str) -> Option<String> {
    let at = json.find(&format!("\"{name}\""))?;
    let rest = &json[at + name.len() + 2..];
    let rest = &rest[rest.find(':')? + 1..];
    let rest = rest.trim_start().strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
}

fn start_gcs_xml_shim(upstream: u16) -> GcsXmlShim {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let puts = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = puts.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { break };
            let puts = counted.clone();
            std::thread::spawn(move || {
                // One request per connection: every response says `Connection: close`.
                if let Some((method, target, headers, body)) = read_request(&mut conn) {
                    let response = if method == "PUT" {
                        let (bucket, object) = target
                            .trim_start_matches('/')
                            .split_once('/')
                            .expect("PUT /bucket/object");
                        let object = object.split('?').next().unwrap();
                        let req = format!(
                            "POST /upload/storage/v1/b/{bucket}/o?uploadType=media&name={object} HTTP/1.1\r\n\
                             Host: 127.0.0.1:{upstream}\r\nConnection: close\r\n\
                             Content-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
                            body.len()
                        );
                        let resp = raw_exchange(upstream, &[req.as_bytes(), &body].concat());
                        let text = String::from_utf8_lossy(&resp).to_string();
                        let status = text.split_whitespace().nth(1).unwrap_or("502").to_string();
                        if status == "200" {
                            puts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let etag = json_field(&text, "etag").unwrap_or_default();
                            let generation = json_field(&text, "generation").unwrap_or_default();
                            format!(
                                "HTTP/1.1 200 OK\r\nETag: \"{etag}\"\r\nx-goog-generation: {generation}\r\n\
                                 Content-Length: 0\r\nConnection: close\r\n\r\n"
                            )
                            .into_bytes()
                        } else {
                            resp
                        }
                    } else {
                        let mut req = format!("{method} {target} HTTP/1.1\r\n");
                        for (k, v) in &headers {
                            if k != "connection" && k != "host" {
                                req.push_str(&format!("{k}: {v}\r\n"));
                            }
                        }
                        req.push_str(&format!(
                            "Host: 127.0.0.1:{upstream}\r\nConnection: close\r\n\r\n"
                        ));
                        raw_exchange(upstream, &[req.as_bytes(), &body].concat())
                    };
                    let _ = conn.write_all(&response);
                }
            });
        }
    });
    GcsXmlShim { port, puts }
}

#[test]
fn gcs_writes_and_reads_against_fake_gcs_server() {
    let dir = tempfile::tempdir().unwrap();
    let gcs = start_fake_gcs(dir.path());
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
        "/upload/storage/v1/b/mllog-bucket/o?uploadType=media&name=runs/0/seed.log",
        &[("Content-Type", "text/plain")],
        content,
    );
    assert_eq!(status, 200, "upload through JSON API: {body}");
    let shim = start_gcs_xml_shim(gcs.port);
    let base = format!("http://127.0.0.1:{}", shim.port);
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
            .interval(Duration::from_millis(200))
    };
    assert!(!format!("{:?}", config()).contains(SECRET));
    let (store, path) = config().open_store(&dir.path().join("seed.log")).unwrap();
    assert_eq!(path.as_ref(), "runs/9/seed.log");
    assert_eq!(
        get_remote(&store, &ObjectPath::from("runs/0/seed.log")),
        content
    );

    // Writes: a training run uploads through object_store's GCS client; the object lands in
    // fake-gcs-server and is read back through its JSON API, byte-identical.
    let (store, path) = config().open_store(&dir.path().join("mllog.log")).unwrap();
    assert_eq!(path.as_ref(), "runs/9/mllog.log");
    let (s2, p2) = (store.clone(), path.clone());
    let read = move || try_get_remote(&s2, &p2);
    let run = train(dir.path(), config(), Some(&read));
    let (status, remote) = http(
        gcs.port,
        "GET",
        "/storage/v1/b/mllog-bucket/o/runs%2F9%2Fmllog.log?alt=media",
        &[],
        b"",
    );
    assert_eq!(status, 200, "{remote}");
    let remote_body = remote.split_once("\r\n\r\n").unwrap().1.to_string();
    let local = std::fs::read_to_string(&run.local).unwrap();
    assert!(
        remote_body == local || dechunk(&remote_body) == local,
        "remote differs from local:\n{remote_body}\n---\n{local}"
    );
    assert_synced(&run, &get_remote(&store, &path));
    assert!(shim.puts.load(std::sync::atomic::Ordering::Relaxed) >= 2);
    assert!(!format!("{} {:?}", run.report, run.report).contains(SECRET));
}

/// The body of a chunked HTTP/1.1 response.
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Every URL form of docs/object-store.md lands at the key it names

/// Uploads `local` once (start + close) with `config`; returns the report.
fn upload_once(config: UploadConfig, local: &Path) -> UploadReport {
    let (mut sink, handle) = UploadSink::for_file(config, local.to_path_buf()).expect("start");
    let result = sink.close(Instant::now() + Duration::from_secs(15));
    let report = handle.report();
    assert!(result.is_ok(), "{result:?}: {report}");
    assert_eq!(report.final_remote_matches_local, Some(true), "{report}");
    report
}

#[test]
fn s3_url_forms_land_at_the_right_key_in_moto() {
    use object_store::aws::AmazonS3Builder;
    let dir = tempfile::tempdir().unwrap();
    let moto = start_moto(dir.path());
    let (status, body) = http(moto.port, "PUT", "/mllog-bucket", &[], b"");
    assert_eq!(status, 200, "create bucket: {body}");
    let endpoint = format!("http://127.0.0.1:{}", moto.port);
    let local = dir.path().join("mllog.log");
    // (URL, endpoint option, the key the URL names)
    let forms = [
        (
            "s3://mllog-bucket/runs/s3/",
            endpoint.clone(),
            "runs/s3/mllog.log",
        ),
        (
            "s3a://mllog-bucket/runs/s3a/x.txt",
            endpoint.clone(),
            "runs/s3a/x.txt",
        ),
        (
            "https://s3.us-east-1.amazonaws.com/mllog-bucket/runs/path/x.txt",
            endpoint.clone(),
            "runs/path/x.txt",
        ),
        (
            "https://s3.us-east-1.amazonaws.com/mllog-bucket/runs/pathdir/",
            endpoint.clone(),
            "runs/pathdir/mllog.log",
        ),
        // Virtual-hosted: the endpoint is the bucket's own (moto serves the bucket under
        // `/mllog-bucket`), so requests carry only the key.
        (
            "https://mllog-bucket.s3.us-east-1.amazonaws.com/runs/vhost/x.txt",
            format!("{endpoint}/mllog-bucket"),
            "runs/vhost/x.txt",
        ),
    ];
    // An independent reader: the bucket named directly, path-style, keys as given.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let reader: Arc<dyn ObjectStore> = Arc::new(
        AmazonS3Builder::new()
            .with_bucket_name("mllog-bucket")
            .with_endpoint(endpoint.clone())
            .with_allow_http(true)
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_region("us-east-1")
            .build()
            .unwrap(),
    );
    for (i, (url, endpoint, key)) in forms.iter().enumerate() {
        let content = format!(":::MLLOG {{\"form\": {i}}}\n");
        std::fs::write(&local, &content).unwrap();
        let config = UploadConfig::new(url)
            .unwrap()
            .read_provider_env(false)
            .option("aws_endpoint", endpoint)
            .option("aws_allow_http", "true")
            .option("aws_access_key_id", "test")
            .option("aws_secret_access_key", SECRET)
            .interval(Duration::ZERO)
            .retry(fast_retry());
        let (_, path) = config.open_store(&local).unwrap();
        assert_eq!(path.as_ref(), *key, "{url}");
        upload_once(config, &local);
        assert_eq!(
            get_remote(&reader, &ObjectPath::from(*key)),
            content.as_bytes(),
            "{url}"
        );
        assert!(
            try_get_remote(&reader, &ObjectPath::from(format!("mllog-bucket/{key}"))).is_none(),
            "{url}: the bucket is repeated in the key"
        );
    }
    // R2 names its own endpoint in the URL (no emulator): the key is still right.
    let (_, path) =
        UploadConfig::new("https://acct.r2.cloudflarestorage.com/mllog-bucket/runs/r2/")
            .unwrap()
            .read_provider_env(false)
            .option("aws_access_key_id", "test")
            .option("aws_secret_access_key", SECRET)
            .open_store(&local)
            .unwrap();
    assert_eq!(path.as_ref(), "runs/r2/mllog.log");
}

#[test]
fn azure_url_forms_land_at_the_right_key_in_azurite() {
    use object_store::azure::MicrosoftAzureBuilder;
    let dir = tempfile::tempdir().unwrap();
    let azurite = start_azurite(dir.path());
    create_azurite_container(azurite.port);
    let endpoint = format!("http://127.0.0.1:{}/devstoreaccount1", azurite.port);
    let local = dir.path().join("mllog.log");
    let forms = [
        ("az://mllog/runs/az/", "runs/az/mllog.log"),
        ("azure://mllog/runs/azure/x.txt", "runs/azure/x.txt"),
        ("adl://mllog/runs/adl/x.txt", "runs/adl/x.txt"),
        (
            "abfs://mllog@devstoreaccount1.dfs.core.windows.net/runs/abfs/x.txt",
            "runs/abfs/x.txt",
        ),
        (
            "abfss://mllog@devstoreaccount1.dfs.core.windows.net/runs/abfss/",
            "runs/abfss/mllog.log",
        ),
        (
            "https://devstoreaccount1.blob.core.windows.net/mllog/runs/https/x.txt",
            "runs/https/x.txt",
        ),
    ];
    // An independent reader: the container named directly, keys as given.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let reader: Arc<dyn ObjectStore> = Arc::new(
        MicrosoftAzureBuilder::new()
            .with_account("devstoreaccount1")
            .with_access_key(AZURITE_KEY)
            .with_container_name("mllog")
            .with_endpoint(endpoint.clone())
            .with_allow_http(true)
            .build()
            .unwrap(),
    );
    for (i, (url, key)) in forms.iter().enumerate() {
        let content = format!(":::MLLOG {{\"form\": {i}}}\n");
        std::fs::write(&local, &content).unwrap();
        let config = UploadConfig::new(url)
            .unwrap()
            .read_provider_env(false)
            .option("azure_storage_account_name", "devstoreaccount1")
            .option("azure_storage_account_key", AZURITE_KEY)
            .option("azure_storage_endpoint", &endpoint)
            .option("allow_http", "true")
            .interval(Duration::ZERO)
            .retry(fast_retry());
        let (_, path) = config.open_store(&local).unwrap();
        assert_eq!(path.as_ref(), *key, "{url}");
        upload_once(config, &local);
        assert_eq!(
            get_remote(&reader, &ObjectPath::from(*key)),
            content.as_bytes(),
            "{url}"
        );
        assert!(
            try_get_remote(&reader, &ObjectPath::from(format!("mllog/{key}"))).is_none(),
            "{url}: the container is repeated in the key"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Slow and dead stores: the training side never waits

fn record(key: &'static str) -> TracedRecord {
    Record::event(key, 1.0).into()
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
    let (mut sink, handle) = UploadSink::for_file(config, local).unwrap();
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
    let port = common::free_port(); // nothing listens there
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
    let (mut sink, handle) = UploadSink::for_file(config, local).unwrap();
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
        tracing_mllog::env::Env::from_map(pairs.iter().copied())
    };
    assert!(UploadConfig::from_env(&vars(&[])).unwrap().is_none());
    assert!(UploadConfig::from_env(&vars(&[(ENV_UPLOAD_URL, " ")]))
        .unwrap()
        .is_none());
    let c = UploadConfig::from_env(&vars(&[
        (ENV_UPLOAD_URL, "gs://bucket/run/"),
        (ENV_UPLOAD_INTERVAL_SECS, "2.5"),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(c.display_url(), "gs://bucket/run/");
    let e = UploadConfig::from_env(&vars(&[
        (ENV_UPLOAD_URL, "s3://b/k"),
        (ENV_UPLOAD_INTERVAL_SECS, "soon"),
    ]))
    .unwrap_err();
    assert!(e.to_string().contains(ENV_UPLOAD_INTERVAL_SECS), "{e}");
    let e = UploadConfig::from_env(&vars(&[(ENV_UPLOAD_URL, "ftp://user:pw@host/x")])).unwrap_err();
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
    let err = UploadSink::for_file(
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

/// Every credential and endpoint variable of the three clouds (and OTLP's), each set to a
/// value with its own marker: URL-valued ones carry the marker as the password and in the
/// query, the others as the whole value.
fn credential_variables(dead_port: u16) -> Vec<(&'static str, String)> {
    const PLAIN: &[&str] = &[
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "GOOGLE_SERVICE_ACCOUNT",
        "GOOGLE_SERVICE_ACCOUNT_PATH",
        "GOOGLE_SERVICE_ACCOUNT_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "SERVICE_ACCOUNT",
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_ACCESS_KEY",
        "AZURE_STORAGE_MASTER_KEY",
        "AZURE_STORAGE_SAS_KEY",
        "AZURE_STORAGE_SAS_TOKEN",
        "AZURE_STORAGE_TOKEN",
        "AZURE_CLIENT_SECRET",
        "AZURE_STORAGE_CLIENT_SECRET",
        "AZURE_CLIENT_ID",
        "AZURE_TENANT_ID",
        "AZURE_FEDERATED_TOKEN_FILE",
        "MSI_SECRET",
        "IDENTITY_HEADER",
        "OTEL_EXPORTER_OTLP_HEADERS",
    ];
    // The S3 endpoints point at a dead port so that requests fail and their URLs (with the
    // user info) end up in error messages.
    const S3_URLS: &[&str] = &["AWS_ENDPOINT_URL", "AWS_ENDPOINT"];
    const OTHER_URLS: &[&str] = &[
        "AWS_ENDPOINT_URL_S3",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_METADATA_ENDPOINT",
        "AZURE_STORAGE_ENDPOINT",
        "AZURE_ENDPOINT",
        "AZURE_MSI_ENDPOINT",
        "IDENTITY_ENDPOINT",
        "GOOGLE_STORAGE_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ];
    let mut vars: Vec<(&'static str, String)> = PLAIN
        .iter()
        .map(|n| (*n, format!("{n}-m4rk3r-value")))
        .collect();
    for n in S3_URLS {
        vars.push((
            *n,
            format!("http://user:{n}-m4rk3r-pw@127.0.0.1:{dead_port}"),
        ));
    }
    for n in OTHER_URLS {
        vars.push((
            *n,
            format!("http://user:{n}-m4rk3r-pw@127.0.0.1:{dead_port}/p?token={n}-m4rk3r-q"),
        ));
    }
    vars
}

/// The markers of [`credential_variables`] found in `text`.
fn leaked_markers(text: &str) -> Vec<&str> {
    text.match_indices("-m4rk3r-")
        .map(|(i, _)| {
            let start = text[..i]
                .rfind(|c: char| !(c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()))
                .map_or(0, |p| p + 1);
            &text[start..(i + 12).min(text.len())]
        })
        .collect()
}

#[test]
fn no_secret_in_stderr_errors_report_or_log() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let dead_port = common::free_port();
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        "child_run_with_dead_store",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_VAR, dir.path())
    .env("AWS_ALLOW_HTTP", "true")
    .env("AWS_REGION", "us-east-1")
    .env("RUST_LOG", "trace");
    for (k, v) in credential_variables(dead_port) {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("CHILD-REPORT"),
        "child did not run:\n{stdout}\n{stderr}"
    );
    // The failure is named, with the endpoint it went to (user info removed).
    assert!(
        stdout.contains("upload of"),
        "the failure is not named:\n{stdout}"
    );
    assert!(
        stdout.contains(&format!("http://127.0.0.1:{dead_port}")),
        "the endpoint is not shown:\n{stdout}"
    );
    // The guard printed its report on stderr (the upload failed, so it is not clean).
    assert!(stderr.contains("tracing-mllog: "), "{stderr}");
    let log = std::fs::read_to_string(dir.path().join("mllog.log")).unwrap();
    assert!(log.contains("run_stop"));
    for (what, text) in [("stdout", &*stdout), ("stderr", &*stderr), ("mllog", &*log)] {
        assert!(!text.contains(SECRET), "secret in {what}");
        let leaked = leaked_markers(text);
        if let Some(first) = leaked.first() {
            let at = text.find(first).unwrap();
            let from = text.floor_char_boundary(at.saturating_sub(300));
            panic!(
                "{what} shows {leaked:?}: ...{}",
                &text[from..at + first.len()]
            );
        }
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
    // The endpoint comes from AWS_ENDPOINT_URL / AWS_ENDPOINT (a dead port, a password).
    let config = UploadConfig::new("s3://dead-bucket/run/")
        .unwrap()
        .option("aws_session_token", SECRET)
        .interval(Duration::from_millis(20))
        .retry(fast_retry());
    println!("config: {config:?}");
    let (sink, handle): (UploadSink, UploadHandle) =
        UploadSink::for_file(config, local.clone()).unwrap();
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::file(&local))
        .sink(sink)
        .pipeline(Pipeline::default().shutdown_timeout(Duration::from_secs(3)))
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
    println!("CHILD-REPORT handle debug: {handle:?}");
    println!(
        "CHILD-REPORT guard upload: {:?}",
        guard.detail::<tracing_mllog::sink::UploadReport>()
    );
    // Errors at configuration time go through the same redaction.
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap();
    for url in [
        format!("ftp://u:{secret}@host/x"),
        format!("https://{secret}@example.com/x?sig={secret}"),
        format!("s3://u:{secret}@/x"),
    ] {
        let err = UploadConfig::new(&url).unwrap_err();
        println!("CHILD-REPORT config error: {err} / {err:?}");
    }
    // Dropping the guard prints the (unclean) report on stderr.
    drop(guard);
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
    let (mut sink, handle) = UploadSink::for_file(config, local).unwrap();
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
        UploadSink::for_file(config, local.clone()).unwrap()
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

// ---------------------------------------------------------------------------------------------
// Settings never panic: bad values are errors naming the variable or setting and its range

#[test]
fn out_of_range_settings_are_errors_naming_the_variable_and_range() {
    let vars = |pairs: Vec<(&'static str, String)>| tracing_mllog::env::Env::from_map(pairs);
    for (variable, value) in [
        (ENV_UPLOAD_INTERVAL_SECS, "1e19"),
        (ENV_UPLOAD_INTERVAL_SECS, "0.001"),
        (ENV_UPLOAD_INTERVAL_SECS, "NaN"),
        (ENV_UPLOAD_INTERVAL_SECS, "inf"),
        (ENV_UPLOAD_INTERVAL_SECS, "-1"),
        (ENV_UPLOAD_DEADLINE_SECS, "1e19"),
        (ENV_UPLOAD_DEADLINE_SECS, "86401"),
    ] {
        let err = UploadConfig::from_env(&vars(vec![
            (ENV_UPLOAD_URL, "memory:///x/".to_string()),
            (variable, value.to_string()),
        ]))
        .map(|_| ())
        .expect_err(value)
        .to_string();
        assert!(err.contains(variable), "{value}: {err}");
        assert!(
            err.contains("out of range") || err.contains("finite, non-negative"),
            "{value}: {err}"
        );
    }
    let err = UploadConfig::from_env(&vars(vec![
        (ENV_UPLOAD_URL, "memory:///x/".to_string()),
        (ENV_UPLOAD_INTERVAL_SECS, "1e19".to_string()),
    ]))
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(err.contains("0 (off) or 0.01..=604800 seconds"), "{err}");
    // In range: accepted.
    let c = UploadConfig::from_env(&vars(vec![
        (ENV_UPLOAD_URL, "memory:///x/".to_string()),
        (ENV_UPLOAD_INTERVAL_SECS, "604800".to_string()),
        (ENV_UPLOAD_DEADLINE_SECS, "0".to_string()),
    ]));
    assert!(matches!(c, Ok(Some(_))), "{c:?}");

    // The same ranges for settings made in code, checked by `start` (before any thread).
    let dir = tempfile::tempdir().unwrap();
    let local = local_log(dir.path());
    for (config, setting) in [
        (
            UploadConfig::new("memory:///x/")
                .unwrap()
                .interval(Duration::MAX),
            "UploadConfig::interval",
        ),
        (
            UploadConfig::new("memory:///x/")
                .unwrap()
                .interval(Duration::from_secs(u64::MAX / 2)),
            "UploadConfig::interval",
        ),
        (
            UploadConfig::new("memory:///x/")
                .unwrap()
                .deadline(Duration::MAX),
            "UploadConfig::deadline",
        ),
        (
            UploadConfig::new("memory:///x/")
                .unwrap()
                .retry(RetryPolicy {
                    max_attempts: 3,
                    initial_backoff: Duration::MAX,
                    max_backoff: Duration::MAX,
                }),
            "UploadConfig::retry",
        ),
    ] {
        let err = UploadSink::for_file(config, local.clone())
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(err, UploadError::InvalidSetting { .. }), "{err:?}");
        assert!(err.to_string().contains(setting), "{err}");
    }
}

#[test]
fn url_errors_say_what_is_wrong() {
    for url in ["s3://", "s3:///runs/x", "gs://", "az:///k"] {
        let err = UploadConfig::new(url).map(|_| ()).unwrap_err().to_string();
        assert!(
            err.contains("names no bucket") || err.contains("names no container"),
            "{url}: {err}"
        );
        assert!(!err.contains("unsupported scheme"), "{url}: {err}");
    }
    let err = UploadConfig::new("ftp://host/x")
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("unsupported scheme `ftp`"), "{err}");
}

#[test]
fn file_urls_create_missing_directories() {
    let dir = tempfile::tempdir().unwrap();
    let local = local_log(dir.path());
    let remote = dir.path().join("not/yet/there");
    let config = UploadConfig::new(&format!("file://{}/", remote.display()))
        .unwrap()
        .interval(Duration::ZERO);
    upload_once(config, &local);
    assert_eq!(
        std::fs::read(remote.join("mllog.log")).unwrap(),
        std::fs::read(&local).unwrap()
    );
}

const NON_UTF8_CHILD: &str = "MLLOG_UPLOAD_TEST_NON_UTF8_DIR";

fn run_non_utf8_child(dir: &Path, vars: &[(&str, &std::ffi::OsStr)]) -> (bool, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_with_non_utf8_variables",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(NON_UTF8_CHILD, dir)
    .env("MLLOG_OUTPUT_FILE", dir.join("mllog.log"));
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn non_utf8_variables_are_errors_or_ignored_never_panics() {
    use std::os::unix::ffi::OsStrExt;
    let bad = std::ffi::OsStr::from_bytes(b"caf\xe9-\xff");
    let dir = tempfile::tempdir().unwrap();
    let remote = dir.path().join("remote");
    let url = format!("file://{}/", remote.display());
    // Unrelated and provider variables that are not UTF-8: the upload works.
    let (ok, text) = run_non_utf8_child(
        dir.path(),
        &[
            ("MLLOG_UPLOAD_URL", url.as_ref()),
            ("SOME_UNRELATED_VARIABLE", bad),
            ("AWS_SECRET_ACCESS_KEY", bad),
        ],
    );
    assert!(ok, "{text}");
    assert!(text.contains("CHILD-OK"), "{text}");
    assert!(text.contains("remote matches local"), "{text}");
    assert_eq!(
        std::fs::read(remote.join("mllog.log")).unwrap(),
        std::fs::read(dir.path().join("mllog.log")).unwrap()
    );
    // Our own variables: an error naming the variable.
    for variable in [ENV_UPLOAD_URL, ENV_UPLOAD_INTERVAL_SECS] {
        let mut vars = vec![(variable, bad)];
        if variable != ENV_UPLOAD_URL {
            vars.push((ENV_UPLOAD_URL, url.as_ref()));
        }
        let (ok, text) = run_non_utf8_child(dir.path(), &vars);
        assert!(ok, "{text}");
        let line = text
            .lines()
            .find(|l| l.contains("CHILD-ERR"))
            .unwrap_or_else(|| panic!("{variable}: no error:\n{text}"));
        assert!(
            line.contains(variable) && line.contains("not valid UTF-8"),
            "{line}"
        );
    }
}

#[test]
fn child_with_non_utf8_variables() {
    let Ok(_dir) = std::env::var(NON_UTF8_CHILD) else {
        return; // only meaningful as the child of the test above
    };
    // Everything from the process environment, as a launcher would set it.
    match MllogLayer::builder()
        .pipeline(Pipeline::default().shutdown_timeout(Duration::from_secs(10)))
        .from_env()
        .build()
    {
        Ok((layer, mut guard)) => {
            let subscriber = tracing_subscriber::registry().with(layer);
            tracing::subscriber::with_default(subscriber, || {
                let _run = info_span!("run").entered();
                mllog!(keys::EVAL_ACCURACY, 0.5, samples_count = 1u64);
            });
            guard.shutdown();
            println!(
                "CHILD-OK {}",
                guard.detail::<tracing_mllog::sink::UploadReport>().unwrap()
            );
        }
        Err(e) => println!("CHILD-ERR {e}"),
    }
}

#[test]
fn reading_the_local_file_never_blocks_the_applications_runtime() {
    // The local "file" is a FIFO without a writer: reading it blocks until one appears. The
    // uploader runs on a one-worker application runtime; another task on that runtime must
    // still run while the read is stuck.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("mllog.log");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let config = UploadConfig::from_store(store.clone(), "app/").interval(Duration::ZERO);
    let (mut sink, handle) = {
        let _enter = rt.enter();
        UploadSink::for_file(config, fifo.clone()).unwrap()
    };
    sink.write(&record("eval_accuracy")).unwrap();
    sink.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200)); // the uploader is now in the read
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(async move {
        let _ = tx.send(());
    });
    let ran = rx.recv_timeout(Duration::from_secs(3)).is_ok();
    // Let the read finish (a writer appears, writes a line, closes), then shut down.
    let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    writer.write_all(b":::MLLOG {\"key\": \"x\"}\n").unwrap();
    drop(writer);
    assert!(
        ran,
        "a task on the application's runtime was blocked by the file read"
    );
    wait_for("the upload", Duration::from_secs(10), || {
        handle.report().uploads_ok >= 1
    });
    drop(sink);
    drop(rt);
}

/// Given to the builder like any sink, the uploader starts with the layer's MLLOG file on the
/// writing rank and reports through `Report::detail`; a rank that does not write starts no
/// uploader; a layer whose output is not a file fails to build, naming the sink, and says
/// what to set.
#[test]
fn a_given_uploader_starts_with_the_layers_file_on_the_writing_rank() {
    let dir = tempfile::tempdir().unwrap();
    let remote_dir = dir.path().join("remote");
    let url = format!("file://{}/", remote_dir.display());
    for rank in [1, 0] {
        let log = dir.path().join(format!("rank{rank}.log"));
        let (layer, mut guard) = MllogLayer::builder()
            .output(Output::file(&log))
            .ranks(Ranks::default().rank(rank))
            .validate_submission(false)
            .live_check(tracing_mllog::compliance::LivePolicy::Off)
            .sink(UploadSink::new(UploadConfig::new(&url).unwrap()))
            .build()
            .unwrap();
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            mllog!(keys::SEED, 7);
        });
        let report = guard.shutdown();
        let remote = remote_dir.join(format!("rank{rank}.log"));
        if rank == 0 {
            let upload = report
                .detail::<UploadReport>()
                .expect("the uploader's report");
            assert_eq!(upload.final_remote_matches_local, Some(true), "{upload}");
            assert_eq!(
                std::fs::read(&remote).unwrap(),
                std::fs::read(&log).unwrap()
            );
            let names: Vec<&str> = report.sinks.iter().map(|s| s.name.as_str()).collect();
            assert_eq!(names, ["mllog-file", "object-store-upload"], "{report}");
        } else {
            assert!(report.detail::<UploadReport>().is_none(), "{report}");
            assert!(!remote.exists());
        }
    }
    let err = MllogLayer::builder()
        .output(Output::Stdout)
        .sink(UploadSink::new(UploadConfig::new(&url).unwrap()))
        .build::<tracing_subscriber::Registry>()
        .expect_err("no file to upload");
    let message = err.to_string();
    assert!(
        message.starts_with("cannot start the sink `object-store-upload`"),
        "{message}"
    );
    assert!(
        message.contains("MLLOG_OUTPUT_FILE or Output::file"),
        "{message}"
    );
}
