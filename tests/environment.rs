//! One environment for the whole build: settings given to `Builder::environment` reach every
//! reader (the OTel sink's exporter included, checked against a real HTTP server on a
//! loopback port), every reader rejects a bad boolean or number with the same error naming
//! the variable, a secret in a bad value is never printed, and a non-UTF-8 value is an error
//! naming the variable (checked in a child process that has one).
#![cfg(all(
    feature = "otel-http",
    feature = "object-store",
    feature = "rpd",
    feature = "nvtx"
))]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tracing::info_span;
use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::sink::OtelReport;
use tracing_mllog::{Error, MllogLayer, Output};
use tracing_subscriber::prelude::*;

/// One HTTP request as the server read it.
#[derive(Clone, Debug)]
struct Request {
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// A minimal OTLP/HTTP collector on a loopback port of its own: answers every request
/// `200 OK` with an empty (valid) protobuf response and keeps what it was sent.
struct Collector {
    port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Collector {
    fn start() -> Collector {
        // Bound here, on a port the system picks, and kept: no other process can take it
        // between choosing and binding (other processes may be binding ports meanwhile).
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let mut writer = stream.try_clone().unwrap();
                    let mut reader = BufReader::new(stream);
                    // Keep-alive: several requests per connection.
                    while let Some(req) = read_request(&mut reader) {
                        seen.lock().unwrap().push(req);
                        let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\n\
                                     content-length: 0\r\n\r\n";
                        if writer.write_all(reply.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Collector { port, requests }
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn read_request(reader: &mut impl BufRead) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let path = line.split_whitespace().nth(1)?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        path,
        headers,
        body,
    })
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The OTel sink is configured from the builder's map only: switched on, pointed at the
/// collector, given a header and a service name there, none of it in the process environment.
#[test]
fn otel_settings_come_from_the_builders_map() {
    for var in [
        "MLLOG_OTEL",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_SERVICE_NAME",
    ] {
        assert!(
            std::env::var_os(var).is_none(),
            "{var} is set in the test process"
        );
    }
    let collector = Collector::start();
    let port = collector.port;
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .live_check(LivePolicy::Off)
        .environment([
            ("MLLOG_OTEL", "1".to_owned()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".to_owned()),
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{port}"),
            ),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-mllog-test=from-the-map".to_owned(),
            ),
            ("OTEL_METRICS_EXPORTER", "none".to_owned()),
            ("OTEL_SERVICE_NAME", "service-from-the-map".to_owned()),
            ("MLLOG_OTEL_QUEUE_SIZE", "128".to_owned()),
        ])
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        let _init = info_span!("init").entered();
    });
    let report = guard.shutdown();
    let otel = guard
        .detail::<tracing_mllog::sink::OtelReport>()
        .expect("the OTel sink was built");
    assert!(otel.spans_exported >= 1, "{otel:?}");
    assert_eq!(otel.export_errors, 0, "{otel:?}");
    // The same report through the generic per-sink report.
    let sink = report
        .sinks
        .iter()
        .find(|s| s.name == "otel")
        .unwrap_or_else(|| panic!("{report}"));
    let detail = sink.detail.as_ref().expect("the OTel sink keeps a report");
    assert_eq!(
        detail.get::<OtelReport>().unwrap().spans_exported,
        otel.spans_exported
    );

    let requests = collector.requests();
    let traces: Vec<&Request> = requests.iter().filter(|r| r.path == "/v1/traces").collect();
    assert!(!traces.is_empty(), "{requests:?}");
    for r in &traces {
        assert!(
            r.headers
                .iter()
                .any(|(k, v)| k == "x-mllog-test" && v == "from-the-map"),
            "{:?}",
            r.headers
        );
    }
    assert!(
        traces
            .iter()
            .any(|r| contains(&r.body, "service-from-the-map")),
        "the resource carries the map's service name"
    );
}

/// What must be set beside it for a reader to run, the variable, its bad value.
type BadValue = (
    Vec<(&'static str, &'static str)>,
    &'static str,
    &'static str,
);

/// The variables each reader of the build parses, with a bad value, and what must be set
/// beside it for that reader to run.
fn bad_values() -> Vec<BadValue> {
    vec![
        (vec![], "MLLOG_APPEND", "maybe"),
        (vec![], "MLLOG_TRACE_STEPS", "2"),
        (vec![], "MLLOG_NVTX", "maybe"),
        (vec![], "MLLOG_OTEL", "maybe"),
        (vec![], "MLLOG_MAX_DELAY_MS", "soon"),
        (vec![], "MLLOG_MAX_DELAY_MS", "86400000"),
        (vec![], "MLLOG_TRAIN_LOSS_LOG_FREQ", "-1"),
        (vec![], "RANK", "first"),
        (vec![("MLLOG_OTEL", "1")], "MLLOG_OTEL_QUEUE_SIZE", "0"),
        (vec![("MLLOG_OTEL", "1")], "MLLOG_OTEL_STEP_EVERY", "0"),
        (vec![("MLLOG_OTEL", "1")], "MLLOG_OTEL_TRAIN_STEP_RATE", "2"),
        (vec![("MLLOG_OTEL", "1")], "WORLD_SIZE", "many"),
        (
            vec![("MLLOG_OTEL", "1")],
            "OTEL_EXPORTER_OTLP_TIMEOUT",
            "soon",
        ),
        (
            vec![("MLLOG_UPLOAD_URL", "memory:///runs/")],
            "MLLOG_UPLOAD_INTERVAL_SECS",
            "soon",
        ),
        (vec![("PROFILER", "cuda")], "PROFILE_REPEAT", "many"),
        (vec![("MLLOG_RPD_FILE", "x.rpd")], "MLLOG_RPD_SCHEMA", "7"),
    ]
}

const FLAG_WORDS: &str = "expected 1/0, true/false, yes/no or on/off";

/// Every reader (the layer, rank detection, each sink, the profiler) rejects a bad value with
/// the same error naming the variable and its value; booleans and numbers say what they
/// accept. The build fails before the output file is opened.
#[test]
fn a_bad_value_is_the_same_error_naming_the_variable_in_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("result_0.txt");
    for (with, var, value) in bad_values() {
        let mut vars = with.clone();
        vars.push((var, value));
        let err = MllogLayer::builder()
            .output(Output::file(&out))
            .environment(vars)
            .build::<tracing_subscriber::Registry>()
            .map(|_| ())
            .expect_err(var);
        let text = err.to_string();
        assert!(
            text.contains(&format!("environment variable {var}={value:?}: ")),
            "{var}: {text}"
        );
        if [
            "MLLOG_APPEND",
            "MLLOG_TRACE_STEPS",
            "MLLOG_NVTX",
            "MLLOG_OTEL",
        ]
        .contains(&var)
        {
            assert!(text.contains(FLAG_WORDS), "{text}");
        }
        if [
            "MLLOG_MAX_DELAY_MS",
            "MLLOG_TRAIN_LOSS_LOG_FREQ",
            "RANK",
            "MLLOG_OTEL_QUEUE_SIZE",
            "MLLOG_OTEL_STEP_EVERY",
            "MLLOG_OTEL_TRAIN_STEP_RATE",
            "WORLD_SIZE",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ]
        .contains(&var)
        {
            assert!(text.contains(" in ") && text.contains("..="), "{text}");
        }
        match &err {
            Error::Env { name, .. } => assert_eq!(name, var),
            // A sink's own typed error, kept as the source.
            Error::Start { source, .. } => {
                assert!(source.to_string().contains(var), "{source}");
                assert!(std::error::Error::source(&err).is_some());
            }
            other => panic!("{var}: {other:?}"),
        }
        assert!(!out.exists(), "{var}: a failed build opened the output");
    }
}

/// A credential that ends up in the wrong variable (or a URL with a password) is masked in
/// the error, in `Display` and in `Debug`.
#[test]
fn a_secret_in_a_bad_value_is_never_printed() {
    const SECRET: &str = "Sup3rSecretValue";
    let url = format!("https://user:{SECRET}@collector.example");
    let cases: Vec<Vec<(&str, String)>> = vec![
        vec![
            ("AWS_SECRET_ACCESS_KEY", SECRET.into()),
            ("MLLOG_MAX_DELAY_MS", SECRET.into()),
        ],
        vec![
            ("MLLOG_OTEL", "1".into()),
            ("MLLOG_OTEL_QUEUE_SIZE", url.clone()),
        ],
        vec![
            ("MLLOG_OTEL", "1".into()),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                format!("authorization=Bearer {SECRET}"),
            ),
            ("MLLOG_OTEL_TRACE_ID", SECRET.into()),
        ],
        vec![("MLLOG_UPLOAD_URL", format!("ftp://user:{SECRET}@host/x"))],
        vec![("RANK", url.clone())],
        vec![
            ("MLLOG_SECRET_TOKEN", SECRET.into()),
            ("MLLOG_APPEND", SECRET.into()),
        ],
    ];
    let dir = tempfile::tempdir().unwrap();
    for vars in cases {
        let err = MllogLayer::builder()
            .output(Output::file(dir.path().join("result_0.txt")))
            .environment(vars.clone())
            .build::<tracing_subscriber::Registry>()
            .map(|_| ())
            .expect_err("a bad value");
        let shown = format!("{err} / {err:?}");
        assert!(!shown.contains(SECRET), "{vars:?}: {shown}");
        assert!(shown.contains("environment variable"), "{shown}");
    }
}

const CHILD: &str = "MLLOG_ENVIRONMENT_TEST_CHILD";

/// A set variable that is not UTF-8 is an error naming it, for the layer's own output file
/// (once ignored) and a sink's variable alike; an unrelated one does not matter.
#[test]
fn a_value_that_is_not_utf8_is_an_error_naming_the_variable() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let bad = std::ffi::OsStr::from_bytes(b"run-\xff.txt");
    for (var, fails) in [
        ("MLLOG_OUTPUT_FILE", true),
        ("MLLOG_NVTX", true),
        ("PROFILER", true),
        ("SOME_UNRELATED_VARIABLE", false),
    ] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_builds_a_layer",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD, dir.path())
            .env(var, bad)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        if fails {
            let line = text
                .lines()
                .find(|l| l.contains("CHILD-ERR"))
                .unwrap_or_else(|| panic!("{var}: no error:\n{text}"));
            assert!(
                line.contains(var) && line.contains("not valid UTF-8"),
                "{line}"
            );
        } else {
            assert!(text.contains("CHILD-OK"), "{text}");
        }
    }
}

#[test]
#[ignore = "child process of a_value_that_is_not_utf8_is_an_error_naming_the_variable"]
fn child_builds_a_layer() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let mut builder = MllogLayer::builder()
        .output(Output::file(Path::new(&dir).join("default.txt")))
        .live_check(LivePolicy::Off);
    if std::env::var_os(CHILD_CODE_ONLY).is_none() {
        builder = builder.from_env();
    }
    match builder.build::<tracing_subscriber::Registry>() {
        Ok((_, mut guard)) => {
            let report = guard.shutdown();
            println!("CHILD-OK writes={}", report.writes);
        }
        Err(e) => println!("CHILD-ERR {e}"),
    }
}

/// Set for the child: its builder does not call `from_env`.
const CHILD_CODE_ONLY: &str = "MLLOG_ENVIRONMENT_TEST_CODE_ONLY";

/// A builder that does not call `from_env` does what its code says: the output file the
/// operator set is not applied, and it is named on stderr (its value never); the launcher's
/// rank is read all the same, so rank 1 does not write. With `from_env` the same variables
/// apply.
#[test]
fn without_from_env_only_the_launchers_rank_is_read_and_an_ignored_switch_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("operator.txt");
    let child = |code_only: bool, rank: &str| {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "child_builds_a_layer",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD, dir.path())
        .env("MLLOG_OUTPUT_FILE", &elsewhere)
        .env("MLLOG_NAMESPACE", "operator")
        .env("RANK", rank);
        if code_only {
            cmd.env(CHILD_CODE_ONLY, "1");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    let (stdout, stderr) = child(true, "0");
    assert!(stdout.contains("CHILD-OK writes=true"), "{stdout}{stderr}");
    assert!(dir.path().join("default.txt").exists(), "the code's output");
    assert!(!elsewhere.exists(), "MLLOG_OUTPUT_FILE was applied");
    let warning = stderr
        .lines()
        .find(|l| l.contains("does not read the environment"))
        .unwrap_or_else(|| panic!("no word of the ignored variable:\n{stderr}"));
    assert!(warning.contains("MLLOG_OUTPUT_FILE"), "{warning}");
    assert!(warning.contains("Builder::from_env"), "{warning}");
    assert!(
        !warning.contains("operator.txt"),
        "a value was printed: {warning}"
    );
    // Only the variables that turn on the output or a sink are named.
    assert!(!warning.contains("MLLOG_NAMESPACE"), "{warning}");

    let (stdout, stderr) = child(true, "1");
    assert!(stdout.contains("CHILD-OK writes=false"), "{stdout}{stderr}");

    std::fs::remove_file(dir.path().join("default.txt")).unwrap();
    let (stdout, stderr) = child(false, "0");
    assert!(stdout.contains("CHILD-OK writes=true"), "{stdout}{stderr}");
    assert!(elsewhere.exists(), "MLLOG_OUTPUT_FILE under from_env");
    assert!(!dir.path().join("default.txt").exists());
    assert!(
        !stderr.contains("does not read the environment"),
        "{stderr}"
    );
}
