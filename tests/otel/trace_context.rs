//! Joining a trace: TRACEPARENT, the application's spans, `otel.*` fields.

use super::*;
use tracing_mllog::Output;

const LAUNCHER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const LAUNCHER_SPAN: &str = "b7ad6b7169203331";

fn launcher_traceparent() -> String {
    format!("00-{LAUNCHER_TRACE}-{LAUNCHER_SPAN}-01")
}

/// A launcher's traceparent: every root span (init, run, the standalone point) continues it,
/// as a remote parent, with its trace state; the rest hang on them, in the same trace. Both
/// ways spans are made (the sink's own queue, your providers) agree.
#[test]
fn traceparent_is_the_parent_of_every_root_span() {
    use opentelemetry::trace::TraceId;
    let records = run_stream();
    let config = || {
        OtelConfig::new()
            .traceparent(&launcher_traceparent(), Some("vendor=abc"))
            .unwrap()
    };
    let direct = Collect::keeping();
    let mut sink = OtelSink::with_span_exporter(direct.clone(), config()).unwrap();
    drive(&mut sink, &records, Duration::from_secs(10));
    let through_sdk = Collect::keeping();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(through_sdk.clone())
        .build();
    let mut sink = OtelSink::with_providers(provider.clone(), None, config());
    drive(&mut sink, &records, Duration::from_secs(10));
    provider.shutdown().unwrap();
    for spans in [direct.spans(), through_sdk.spans()] {
        assert!(spans.len() > 4, "{spans:#?}");
        let trace = TraceId::from_hex(LAUNCHER_TRACE).unwrap();
        let launcher = SpanId::from_hex(LAUNCHER_SPAN).unwrap();
        let ids: Vec<SpanId> = spans.iter().map(|s| s.span_context.span_id()).collect();
        for s in &spans {
            assert_eq!(s.span_context.trace_id(), trace, "{}", s.name);
            if ["init", "run", "mllog.point"].contains(&s.name.as_ref()) {
                assert_eq!(s.parent_span_id, launcher, "{}", s.name);
                assert!(s.parent_span_is_remote, "{}", s.name);
            } else {
                assert!(
                    ids.contains(&s.parent_span_id),
                    "{} hangs on one of ours",
                    s.name
                );
            }
        }
        assert_eq!(
            one(&spans, "run").span_context.trace_state().get("vendor"),
            Some("abc")
        );
    }
    // Not a traceparent: refused in code, named.
    let err = OtelConfig::new()
        .traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", None)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("traceparent"), "{err}");
    for bad in [
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
    ] {
        assert!(OtelConfig::new().traceparent(bad, None).is_err(), "{bad}");
    }
}

/// With tracing-opentelemetry in the same subscriber, the interval spans with no enclosing
/// interval continue the application's span around them (same trace, that span as parent);
/// `otel.name`, `otel.kind` and `otel.status_code` work as with tracing-opentelemetry. In
/// process: the application's spans and ours go to two collecting exporters.
#[test]
fn application_span_is_the_parent_of_the_run() {
    use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
    use tracing::info_span;
    use tracing_mllog::{keys, mllog, MllogLayer};
    use tracing_subscriber::prelude::*;

    let app_out = Collect::keeping();
    let app_provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(app_out.clone())
        .build();
    let ours = Collect::keeping();
    let sink = OtelSink::with_span_exporter(ours.clone(), OtelConfig::new()).unwrap();
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .sink(sink)
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .build()
        .unwrap();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(app_provider.tracer("app")))
        .with(layer);
    tracing::subscriber::with_default(subscriber, || {
        let _job = info_span!("job").entered();
        {
            let _init = info_span!("init").entered();
            mllog!(keys::SEED, 1);
        }
        let _run = info_span!("run", otel.name = "training", otel.kind = "server").entered();
        let block = info_span!(
            "block",
            samples_count = 0u64,
            otel.status_code = tracing::field::Empty
        );
        block.in_scope(|| mllog!(keys::EVAL_ACCURACY, 0.1, samples_count = 0u64));
        block.record("otel.status_code", "error");
        drop(block);
    });
    guard.shutdown();
    app_provider.shutdown().unwrap();
    let app = app_out.spans();
    let job = one(&app, "job");
    let spans = ours.spans();
    assert!(spans.len() >= 3, "{spans:#?}");
    for s in &spans {
        assert_eq!(
            s.span_context.trace_id(),
            job.span_context.trace_id(),
            "{} is in the application's trace",
            s.name
        );
    }
    let run = one(&spans, "training");
    assert_eq!(run.parent_span_id, job.span_context.span_id());
    assert_eq!(run.span_kind, SpanKind::Server);
    let init = one(&spans, "init");
    assert_eq!(init.parent_span_id, job.span_context.span_id());
    let block = one(&spans, "block");
    assert_eq!(block.parent_span_id, run.span_context.span_id());
    assert!(
        matches!(block.status, Status::Error { .. }),
        "{:?}",
        block.status
    );
}

/// A launcher's `TRACEPARENT` on four ranks, two over gRPC and two over HTTP: every span the
/// collector receives from them is in the launcher's trace (it wins over
/// `MLLOG_OTEL_TRACE_ID`), each rank's roots (`init`, `run`, the standalone point) hang on the
/// launcher's span, and the rest on them.
#[test]
fn four_ranks_join_the_launchers_trace() {
    let rotel = Rotel::start();
    let work = tempfile::tempdir().unwrap();
    let traceparent = launcher_traceparent();
    let children: Vec<Child> = (0..4)
        .map(|r| {
            let (protocol, port) = if r < 2 {
                ("grpc", rotel.grpc)
            } else {
                ("http/protobuf", rotel.http)
            };
            let endpoint = format!("http://127.0.0.1:{port}");
            spawn_child(
                "rank_child",
                r,
                4,
                protocol,
                &endpoint,
                work.path(),
                &[
                    ("TRACEPARENT", &traceparent),
                    ("TRACESTATE", "launcher=job-17"),
                ],
            )
        })
        .collect();
    let sent: Vec<usize> = children
        .into_iter()
        .enumerate()
        .map(|(rank, child)| check_report(&rank_report(child, rank as u32), rank as u32))
        .collect();
    let got = rotel.wait_for("the spans of all four ranks", |g| {
        (0..4).all(|r| g.of_rank(r).len() >= sent[r as usize])
    });
    assert_eq!(got.spans.len(), sent.iter().sum::<usize>());
    for rank in 0..4 {
        let spans = got.of_rank(rank);
        let run = spans.iter().find(|s| s.name == "run").expect("run");
        let blocks: Vec<&str> = spans
            .iter()
            .filter(|s| s.name == "block")
            .map(|s| s.id.as_str())
            .collect();
        assert_eq!(blocks.len(), 2, "rank {rank}");
        for s in &spans {
            assert_eq!(s.trace, LAUNCHER_TRACE, "rank {rank}: {s:?}");
            let want = match s.name.as_str() {
                "init" | "run" | "mllog.point" => LAUNCHER_SPAN,
                "block" | "eval" => run.id.as_str(),
                "train_step" => {
                    assert!(blocks.contains(&s.parent.as_str()), "rank {rank}: {s:?}");
                    continue;
                }
                other => panic!("rank {rank}: unexpected span {other}"),
            };
            assert_eq!(s.parent, want, "rank {rank}: {} parent", s.name);
        }
    }
}
/// An application with tracing-opentelemetry and the MLLOG layer in one subscriber: the
/// collector gets one trace. The run (named by `otel.name`) and init are children of the
/// application's `job` span; `MLLOG_OTEL_SPANS` spans are exported under the block, others
/// not; one step in two with `MLLOG_OTEL_STEP_EVERY=2`; `otel.status_code` is honoured.
#[test]
fn application_and_mllog_spans_are_one_trace_in_the_collector() {
    let rotel = Rotel::start();
    let work = tempfile::tempdir().unwrap();
    let app = format!("http://127.0.0.1:{}/v1/traces", rotel.http);
    let child = spawn_child(
        "app_child",
        0,
        1,
        "grpc",
        &format!("http://127.0.0.1:{}", rotel.grpc),
        work.path(),
        &[
            ("APP_OTLP_TRACES", &app),
            ("MLLOG_OTEL_SPANS", "data_load, checkpoint*"),
            ("MLLOG_OTEL_STEP_EVERY", "2"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ],
    );
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("APP_DONE"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let service = |s: &RSpan| s.res("service.name").unwrap_or("").to_owned();
    let got = rotel.wait_for("the application's and our spans", |g| {
        g.spans
            .iter()
            .any(|s| service(s) == "Str(app)" && s.name == "job")
            && g.spans
                .iter()
                .any(|s| service(s).contains("llama2") && s.name == "training")
    });
    let job = got
        .spans
        .iter()
        .find(|s| service(s) == "Str(app)" && s.name == "job")
        .unwrap();
    let ours: Vec<&RSpan> = got
        .spans
        .iter()
        .filter(|s| service(s).contains("llama2"))
        .collect();
    let trace_ids: std::collections::BTreeSet<&str> =
        got.spans.iter().map(|s| s.trace.as_str()).collect();
    assert_eq!(trace_ids.len(), 1, "one trace: {trace_ids:?}");
    let named = |n: &str| -> Vec<&RSpan> { ours.iter().copied().filter(|s| s.name == n).collect() };
    let run = named("training");
    assert_eq!(run.len(), 1, "{ours:#?}");
    assert_eq!(
        run[0].parent, job.id,
        "run under the application's job span"
    );
    assert_eq!(named("init")[0].parent, job.id);
    let block = &named("block")[0];
    assert_eq!(block.parent, run[0].id);
    assert_eq!(named("data_load").len(), 4);
    assert_eq!(named("checkpoint_save").len(), 1);
    for s in named("data_load")
        .iter()
        .chain(named("checkpoint_save").iter())
    {
        assert_eq!(s.parent, block.id, "{s:?}");
    }
    assert_eq!(
        named("checkpoint_save")[0].attr("mllog.path"),
        Some("Str(/tmp/ckpt)")
    );
    assert!(named("logging_only").is_empty(), "not in MLLOG_OTEL_SPANS");
    assert_eq!(named("train_step").len(), 2, "one step in two");
    // MLLOG lines are unchanged: no line for the exported spans.
    let log = std::fs::read_to_string(work.path().join("result_0.txt")).unwrap();
    assert!(
        !log.contains("data_load") && !log.contains("checkpoint"),
        "{log}"
    );
    // `otel.*` fields are not MLLOG metadata.
    assert!(
        log.contains("run_start") && !log.contains("\"otel."),
        "{log}"
    );
    // The tree as docs/otel.md shows it.
    let tree = span_tree(&got.spans);
    eprintln!("{tree}");
    assert!(tree.starts_with("job [app]\n"), "{tree}");
    assert!(tree.contains("\n  logging_only [app]\n"), "{tree}");
    assert_eq!(tree.matches("[app]").count(), 2, "{tree}");
    let text = rotel.output();
    assert!(
        text.contains("SPAN_KIND_SERVER") || text.contains("Server"),
        "{text}"
    );
    assert!(
        text.contains("STATUS_CODE_ERROR") || text.contains("Error"),
        "{text}"
    );
}

/// A collector that is not there: the report says which endpoint, for which signal, and why
/// (connection refused), over gRPC and HTTP; credentials in the endpoint are masked.
#[test]
fn dead_endpoint_is_named_in_the_report() {
    for (protocol, endpoint_of) in [
        (
            "grpc",
            (|p: u16| format!("http://127.0.0.1:{p}")) as fn(u16) -> String,
        ),
        ("http/protobuf", |p: u16| {
            format!("http://mllog:pa55word-xyz@127.0.0.1:{p}")
        }),
    ] {
        let work = tempfile::tempdir().unwrap();
        // Bound and dropped: nothing listens there.
        let port = common::free_port();
        let endpoint = endpoint_of(port);
        let child = spawn_child(
            "rank_child",
            0,
            1,
            protocol,
            &endpoint,
            work.path(),
            &[("OTEL_EXPORTER_OTLP_TIMEOUT", "2000")],
        );
        let line = rank_report(child, 0);
        eprintln!("{protocol}: {line}");
        assert!(!line.contains("pa55word"), "{line}");
        let want = format!("127.0.0.1:{port}");
        for (signal, field) in [
            ("traces", "last_trace_error"),
            ("metrics", "last_metric_error"),
        ] {
            let at = line.find(&format!("{field}=")).expect(field);
            let msg = &line[at..];
            let msg = &msg[..msg.find("\")").map_or(msg.len(), |e| e + 2)];
            assert!(
                msg.contains(&format!("{signal} to ")) && msg.contains(&want),
                "{protocol}: {msg}"
            );
            assert!(msg.contains("connection refused"), "{protocol}: {msg}");
        }
        assert!(!line.contains("trace_errors=0 "), "{line}");
        assert!(!line.contains("metric_errors=0 "), "{line}");
    }
}

/// The received spans as an indented tree (name, service), children in arrival order.
fn span_tree(spans: &[RSpan]) -> String {
    fn walk(spans: &[RSpan], parent: &str, depth: usize, out: &mut String) {
        for s in spans.iter().filter(|s| s.parent == parent) {
            let service = s
                .res("service.name")
                .unwrap_or("")
                .trim_start_matches("Str(")
                .trim_end_matches(')');
            out.push_str(&format!("{}{} [{service}]\n", "  ".repeat(depth), s.name));
            walk(spans, &s.id, depth + 1, out);
        }
    }
    let mut out = String::new();
    walk(spans, "", 0, &mut out);
    out
}

/// A collector that accepts connections and never answers: the report says the export timed
/// out after the exporter's timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`), over gRPC and HTTP.
#[test]
fn silent_endpoint_times_out_in_words() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Holds every connection open without reading or writing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            held.extend(conn.ok());
        }
    });
    for protocol in ["grpc", "http/protobuf"] {
        let work = tempfile::tempdir().unwrap();
        let child = spawn_child(
            "rank_child",
            0,
            1,
            protocol,
            &format!("http://127.0.0.1:{port}"),
            work.path(),
            &[
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000"),
                ("OTEL_METRICS_EXPORTER", "none"),
            ],
        );
        let line = rank_report(child, 0);
        eprintln!("{protocol}: {line}");
        let at = line.find("last_trace_error=").expect("last_trace_error");
        let msg = &line[at..];
        assert!(
            msg.contains(&format!("traces to http://127.0.0.1:{port}"))
                && msg.contains("timed out after 1 s"),
            "{protocol}: {msg}"
        );
    }
}
