//! The sink driven in process: spans, events, attributes, resource and metrics, field by field.

use super::*;
use tracing_mllog::Output;

#[test]
fn spans_events_attributes_resource_and_metrics() {
    let spans_out = Collect::keeping();
    let metrics_out = MetricCollect::default();
    let config = OtelConfig::new()
        .benchmark(Benchmark::Llama2_70bLora)
        .rank(3)
        .world_size(4)
        .host("node-7")
        .resource_attribute("deployment.environment.name", "ci");
    let mut sink =
        OtelSink::with_exporters(spans_out.clone(), metrics_out.clone(), config).unwrap();
    let handle = sink.handle();
    let records = run_stream();
    drive(&mut sink, &records, Duration::from_secs(10));
    let spans = spans_out.spans();
    let report = handle.report();

    // Names: every interval, every sampled train_step, and the point outside any interval.
    let mut names: Vec<&str> = spans.iter().map(|s| &*s.name).collect();
    names.sort_unstable();
    let mut expected = vec!["block", "eval", "init", "mllog.point", "run"];
    expected.extend(std::iter::repeat_n("train_step", STEPS as usize));
    expected.sort_unstable();
    assert_eq!(names, expected);

    // Parent/child structure, one trace.
    let (init, run, block, eval) = (
        one(&spans, "init"),
        one(&spans, "run"),
        one(&spans, "block"),
        one(&spans, "eval"),
    );
    let trace = run.span_context.trace_id();
    assert!(
        spans.iter().all(|s| s.span_context.trace_id() == trace),
        "one trace per sink"
    );
    assert_eq!(init.parent_span_id, SpanId::INVALID);
    assert_eq!(run.parent_span_id, SpanId::INVALID);
    assert_eq!(block.parent_span_id, run.span_context.span_id());
    assert_eq!(eval.parent_span_id, run.span_context.span_id());
    let steps: Vec<&SpanData> = spans.iter().filter(|s| s.name == "train_step").collect();
    assert!(steps
        .iter()
        .all(|s| s.parent_span_id == block.span_context.span_id()));

    // Start and end times are the records' times, to the nanosecond.
    let time_of = |key: &str, id: u64| {
        records
            .iter()
            .find(|r| r.key == key && r.interval.map(|i| i.id) == Some(id))
            .map(|r| system_time(r.time))
            .unwrap()
    };
    for (span, name, id) in [
        (init, "init", INIT),
        (run, "run", RUN),
        (block, "block", BLOCK),
        (eval, "eval", EVAL),
    ] {
        assert_eq!(
            span.start_time,
            time_of(&format!("{name}_start"), id),
            "{name} start"
        );
        assert_eq!(
            span.end_time,
            time_of(&format!("{name}_stop"), id),
            "{name} end"
        );
    }
    for step in &steps {
        let n = match attr(&step.attributes, "mllog.step") {
            Some(OValue::I64(n)) => *n as u64,
            other => panic!("mllog.step: {other:?}"),
        };
        assert_eq!(step.start_time, time_of("train_step_start", STEP0 + n));
        assert_eq!(step.end_time, time_of("train_step_stop", STEP0 + n));
        assert_eq!(
            attr(&step.attributes, "mllog.trace_only"),
            Some(&OValue::Bool(true))
        );
        // The tracked_stats point of the step is an event on the step.
        let ev: Vec<_> = step.events.iter().collect();
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].name, "tracked_stats");
        assert_eq!(
            attr(&ev[0].attributes, "mllog.value").map(|v| v.to_string()),
            Some(format!(
                "{{\"throughput\": {:?}, \"train_loss\": {:?}}}",
                100.0 + n as f64,
                2.0 - n as f64 / 10.0
            ))
        );
    }

    // Interval attributes: start key, metadata of start and stop, source location, status.
    assert_eq!(
        attr(&run.attributes, "mllog.key"),
        Some(&OValue::from("run_start"))
    );
    assert_eq!(
        attr(&run.attributes, "mllog.stop_key"),
        Some(&OValue::from("run_stop"))
    );
    assert_eq!(
        attr(&run.attributes, "mllog.status"),
        Some(&OValue::from("success"))
    );
    assert_eq!(run.status, opentelemetry::trace::Status::Unset);
    assert_eq!(
        attr(&block.attributes, "mllog.epoch_count"),
        Some(&OValue::I64(1))
    );
    // A stop field equal to the start's is not repeated; a different one is `mllog.stop.*`.
    let n = block
        .attributes
        .iter()
        .filter(|kv| kv.key.as_str() == "mllog.first_epoch_num")
        .count();
    assert_eq!(n, 1);
    assert_eq!(
        attr(&block.attributes, "mllog.stop.epoch_count"),
        Some(&OValue::I64(2))
    );
    assert_eq!(
        attr(&block.attributes, "code.file.path"),
        Some(&OValue::from("train.py"))
    );
    assert_eq!(
        attr(&block.attributes, "code.line.number"),
        Some(&OValue::I64(42))
    );
    assert_eq!(
        attr(&block.attributes, "thread.id"),
        Some(&OValue::I64(4242))
    );

    // Point records are events on their interval, in order, at their times, with values.
    let init_events: Vec<&str> = init.events.iter().map(|e| &*e.name).collect();
    assert_eq!(
        init_events,
        [
            "submission_benchmark",
            "submission_org",
            "submission_division",
            "global_batch_size",
            "opt_base_learning_rate"
        ]
    );
    let gbs = init
        .events
        .iter()
        .find(|e| e.name == "global_batch_size")
        .unwrap();
    assert_eq!(gbs.timestamp, system_time(ts(30)));
    assert_eq!(attr(&gbs.attributes, "mllog.value"), Some(&OValue::I64(8)));
    assert_eq!(
        attr(&gbs.attributes, "mllog.key"),
        Some(&OValue::from("global_batch_size"))
    );
    let lr = init
        .events
        .iter()
        .find(|e| e.name == "opt_base_learning_rate")
        .unwrap();
    assert_eq!(
        attr(&lr.attributes, "mllog.value"),
        Some(&OValue::F64(2e-3))
    );
    let acc = eval.events.iter().next().expect("eval_accuracy event");
    assert_eq!(acc.name, "eval_accuracy");
    assert_eq!(acc.timestamp, system_time(ts(11_500)));
    assert_eq!(
        attr(&acc.attributes, "mllog.value"),
        Some(&OValue::F64(0.9312))
    );
    assert_eq!(
        attr(&acc.attributes, "mllog.samples_count"),
        Some(&OValue::I64(64))
    );
    assert_eq!(
        attr(&acc.attributes, "mllog.epoch_num"),
        Some(&OValue::I64(1))
    );
    let lone = one(&spans, "mllog.point");
    assert_eq!(lone.start_time, system_time(ts(0)));
    assert_eq!(lone.events.iter().next().unwrap().name, "cache_clear");

    // Resource.
    let resource = spans_out
        .resource
        .lock()
        .unwrap()
        .clone()
        .expect("resource");
    let rget = |k: &str| {
        resource
            .get(&opentelemetry::Key::from(k.to_owned()))
            .map(|v| v.to_string())
    };
    assert_eq!(rget("service.name").as_deref(), Some("llama2_70b_lora"));
    assert_eq!(rget("mllog.benchmark").as_deref(), Some("llama2_70b_lora"));
    assert_eq!(rget("mllog.rank").as_deref(), Some("3"));
    assert_eq!(rget("mllog.world_size").as_deref(), Some("4"));
    assert_eq!(rget("host.name").as_deref(), Some("node-7"));
    assert_eq!(rget("deployment.environment.name").as_deref(), Some("ci"));

    // Metrics: last values, with benchmark, rank and (learned from the stream) submission.
    let points = metrics_out.last.lock().unwrap().clone();
    let get =
        |name: &str| -> Vec<Point> { points.iter().filter(|p| p.name == name).cloned().collect() };
    let acc = get("mllog.eval_accuracy");
    assert_eq!(acc.len(), 1, "{points:#?}");
    assert_eq!(acc[0].value, 0.9312);
    assert_eq!(
        acc[0].attrs.get("mllog.benchmark").map(String::as_str),
        Some("llama2_70b_lora")
    );
    assert_eq!(
        acc[0].attrs.get("mllog.rank").map(String::as_str),
        Some("3")
    );
    assert_eq!(
        acc[0].attrs.get("mllog.submission.org").map(String::as_str),
        Some("tracing-mllog")
    );
    assert_eq!(
        acc[0]
            .attrs
            .get("mllog.submission.division")
            .map(String::as_str),
        Some("closed")
    );
    assert_eq!(
        acc[0].attrs.get("mllog.samples_count").map(String::as_str),
        Some("64")
    );
    let thr = get("mllog.throughput");
    assert_eq!(thr.len(), 1);
    assert_eq!(thr[0].value, 107.0);
    // Every throughput figure also lands in the per-rank distribution.
    let dist = get("mllog.throughput.distribution");
    assert_eq!(dist.len(), 1);
    assert_eq!(dist[0].count, STEPS);
    assert_eq!(
        dist[0].value,
        (0..STEPS).map(|i| 100.0 + i as f64).sum::<f64>()
    );
    assert_eq!(
        dist[0].attrs.get("mllog.rank").map(String::as_str),
        Some("3")
    );
    let loss = get("mllog.train_loss");
    assert_eq!(loss.len(), 1);
    assert!((loss[0].value - 1.3).abs() < 1e-12);
    let step_time = get("mllog.train_step.duration");
    assert_eq!(step_time.len(), 1);
    assert_eq!(step_time[0].count, STEPS);
    assert!(
        (step_time[0].value - STEPS as f64 * 750e-6).abs() < 1e-9,
        "{:?}",
        step_time[0]
    );
    let mres = metrics_out.resource.lock().unwrap().clone().unwrap();
    assert_eq!(
        mres.get(&opentelemetry::Key::from_static_str("service.name"))
            .map(|v| v.to_string())
            .as_deref(),
        Some("llama2_70b_lora")
    );

    // Report.
    let total_spans = 5 + STEPS;
    assert_eq!(
        report,
        OtelReport {
            spans_started: total_spans,
            spans_ended: total_spans,
            spans_exported: total_spans,
            sampled_out: 0,
            events: 1 + 5 + STEPS + 1,
            events_dropped: 0,
            // eval_accuracy; throughput (gauge and histogram) and loss per step; step time.
            metrics_points: 1 + 3 * STEPS + STEPS,
            dropped: 0,
            dropped_queue_full: 0,
            export_errors: 0,
            trace_export_errors: 0,
            metric_export_errors: 0,
            last_trace_error: None,
            last_metric_error: None,
            unmatched: 0,
            last_error: None,
            delivery_tracked: true,
        }
    );
}

#[test]
fn train_step_sampling_is_deterministic_and_metrics_see_every_step() {
    let spans_out = Collect::keeping();
    let metrics_out = MetricCollect::default();
    let config = OtelConfig::new().train_step_sampling(0.25);
    let mut sink =
        OtelSink::with_exporters(spans_out.clone(), metrics_out.clone(), config).unwrap();
    let handle = sink.handle();
    drive(&mut sink, &run_stream(), Duration::from_secs(10));
    let spans = spans_out.spans();
    let steps: Vec<_> = spans.iter().filter(|s| s.name == "train_step").collect();
    assert_eq!(steps.len(), 2, "every 4th of 8 steps");
    let block = one(&spans, "block");
    // The tracked_stats of the six sampled-out steps land on the enclosing block.
    let on_block = block
        .events
        .iter()
        .filter(|e| e.name == "tracked_stats")
        .count();
    assert_eq!(on_block, 6);
    let report = handle.report();
    assert_eq!(report.sampled_out, 6);
    assert_eq!(report.spans_exported, 5 + 2);
    assert_eq!(report.dropped, 0);
    let points = metrics_out.last.lock().unwrap().clone();
    let st = points
        .iter()
        .find(|p| p.name == "mllog.train_step.duration")
        .unwrap();
    assert_eq!(st.count, STEPS);
    assert_eq!(
        OtelConfig::new()
            .train_step_sampling(0.0)
            .effective_service_name(),
        "mllog"
    );
}

/// A span as an exporter sees it, minus its random ids: name, parent's name, times, status,
/// attributes and events.
fn comparable(spans: &[SpanData]) -> Vec<String> {
    let name_of = |id: SpanId| {
        spans
            .iter()
            .find(|s| s.span_context.span_id() == id)
            .map_or("-".to_owned(), |s| s.name.to_string())
    };
    let mut out: Vec<String> = spans
        .iter()
        .map(|s| {
            format!(
                "{} parent={} {:?}..{:?} {:?} kind={:?} sampled={} attrs={:?} events={:?}",
                s.name,
                name_of(s.parent_span_id),
                s.start_time,
                s.end_time,
                s.status,
                s.span_kind,
                s.span_context.is_sampled(),
                s.attributes,
                s.events
                    .iter()
                    .map(|e| (&e.name, e.timestamp, &e.attributes))
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    out.sort();
    out
}

/// The sink assembles spans itself when it owns the span queue and goes through the tracer
/// of your providers otherwise: an exporter sees the same spans either way.
#[test]
fn own_queue_and_your_providers_export_the_same_spans() {
    let records = run_stream();

    let direct = Collect::keeping();
    let mut sink = OtelSink::with_span_exporter(direct.clone(), OtelConfig::new()).unwrap();
    drive(&mut sink, &records, Duration::from_secs(10));

    let through_sdk = Collect::keeping();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(through_sdk.clone())
        .build();
    let mut sink = OtelSink::with_providers(provider.clone(), None, OtelConfig::new());
    drive(&mut sink, &records, Duration::from_secs(10));
    provider.shutdown().unwrap();

    let (a, b) = (direct.spans(), through_sdk.spans());
    assert!(!a.is_empty());
    assert_eq!(comparable(&a), comparable(&b));
    // Ids and scope are real: valid span ids, the sink's scope name; one trace per sink when
    // it owns the ids (your provider's id generator decides otherwise).
    for spans in [&a, &b] {
        assert!(spans
            .iter()
            .all(|s| s.span_context.span_id() != SpanId::INVALID
                && s.instrumentation_scope.name() == tracing_mllog::sink::OTEL_SCOPE));
    }
    let trace = a[0].span_context.trace_id();
    assert!(a.iter().all(|s| s.span_context.trace_id() == trace));
}

#[test]
fn aborted_run_and_unmatched_records() {
    let spans_out = Collect::keeping();
    let mut sink = OtelSink::with_span_exporter(spans_out.clone(), OtelConfig::new()).unwrap();
    let handle = sink.handle();
    let records = vec![
        start("run_start", 0, RUN, None, &[]),
        start("block_start", 10, BLOCK, Some(RUN), &[]),
        point("eval_accuracy", 20, Some(BLOCK), Value::Float(0.5), &[]),
        stop("epoch_stop", 30, 77, Some(RUN), &[]),
        stop("run_stop", 40, RUN, None, &[("status", s("aborted"))]),
    ];
    // run_stop before block_stop: the run ends; the block stays open until close.
    drive(&mut sink, &records, Duration::from_secs(10));
    let spans = spans_out.spans();
    let run = one(&spans, "run");
    assert!(
        matches!(run.status, opentelemetry::trace::Status::Error { ref description } if description == "aborted")
    );
    let block = one(&spans, "block");
    assert_eq!(
        attr(&block.attributes, "mllog.incomplete"),
        Some(&OValue::Bool(true))
    );
    assert_eq!(
        block.end_time,
        system_time(ts(40)),
        "ended at the last record's time"
    );
    let report = handle.report();
    assert_eq!(report.unmatched, 1);
    assert_eq!(report.spans_exported, 2);
}

#[test]
fn events_beyond_the_per_span_limit_are_counted() {
    let spans_out = Collect::keeping();
    let mut sink =
        OtelSink::with_span_exporter(spans_out.clone(), OtelConfig::new().max_events_per_span(10))
            .unwrap();
    let handle = sink.handle();
    let mut records = vec![start("run_start", 0, RUN, None, &[])];
    for i in 0..25 {
        records.push(point(
            "tracked_stats",
            1 + i,
            Some(RUN),
            Value::Int(i as i128),
            &[],
        ));
    }
    records.push(stop("run_stop", 100, RUN, None, &[]));
    drive(&mut sink, &records, Duration::from_secs(10));
    assert_eq!(one(&spans_out.spans(), "run").events.len(), 10);
    let report = handle.report();
    assert_eq!((report.events, report.events_dropped), (10, 15));
}

/// Given to the builder in code, the sink asks the layer for what its configuration exports
/// when it starts: `train_step_every` turns step tracing on (as `MLLOG_OTEL_STEP_EVERY` does),
/// `export_spans` the named spans (as `MLLOG_OTEL_SPANS` does), with no builder setting.
#[test]
fn a_sink_given_in_code_asks_the_layer_for_the_steps_and_spans_it_exports() {
    use tracing::info_span;
    use tracing_mllog::compliance::LivePolicy;
    use tracing_mllog::MllogLayer;
    use tracing_subscriber::prelude::*;

    for asked in [false, true] {
        let spans_out = Collect::keeping();
        let config = if asked {
            OtelConfig::new()
                .train_step_every(2)
                .export_spans(["data_load"])
        } else {
            OtelConfig::new()
        };
        let sink = OtelSink::with_span_exporter(spans_out.clone(), config).unwrap();
        let (layer, mut guard) = MllogLayer::builder()
            .output(Output::Nowhere)
            .live_check(LivePolicy::Off)
            .sink(sink)
            .build()
            .unwrap();
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            let _run = info_span!("run").entered();
            for _ in 0..4 {
                let _step = info_span!("train_step").entered();
                let _load = info_span!("data_load").entered();
            }
        });
        let report = guard.shutdown();
        let names: Vec<String> = spans_out
            .spans()
            .iter()
            .map(|s| s.name.to_string())
            .collect();
        let count = |name: &str| names.iter().filter(|n| *n == name).count();
        if asked {
            assert_eq!(count("train_step"), 2, "one in two: {names:?} {report}");
            assert_eq!(count("data_load"), 4, "{names:?}");
        } else {
            assert_eq!(
                (count("train_step"), count("data_load")),
                (0, 0),
                "{names:?}"
            );
        }
        assert_eq!(count("run"), 1, "{names:?}");
    }
}
