//! Bursts and failures: exact counts.

use super::*;

const BURST: u64 = 1_000_000;

fn burst(sink: &mut OtelSink) {
    sink.write(&start("run_start", 0, RUN, None, &[])).unwrap();
    let mut a = rec(
        EventType::IntervalStart,
        "train_step_start",
        0,
        Some((0, Some(RUN))),
        Some(RUN),
        Value::Null,
        &[],
        true,
    );
    for i in 0..BURST {
        let id = 1_000 + i;
        a.event_type = EventType::IntervalStart;
        a.key = Cow::Borrowed("train_step_start");
        a.interval = Some(IntervalIds {
            id,
            parent: Some(RUN),
        });
        a.time = ts(10 + i as i64);
        sink.write(&a).unwrap();
        a.event_type = EventType::IntervalEnd;
        a.key = Cow::Borrowed("train_step_stop");
        a.time = ts(10 + i as i64);
        a.time.wall_ns += 500;
        sink.write(&a).unwrap();
    }
    sink.write(&stop("run_stop", 10 + BURST as i64, RUN, None, &[]))
        .unwrap();
}

#[test]
fn burst_of_a_million_steps_with_backpressure_loses_nothing() {
    let out = Collect::default();
    let config = OtelConfig::new()
        .queue_size(2048)
        .backpressure(Backpressure::Wait(Duration::from_secs(60)));
    let mut sink = OtelSink::with_span_exporter(out.clone(), config).unwrap();
    let handle = sink.handle();
    let t = Instant::now();
    burst(&mut sink);
    sink.close(Instant::now() + Duration::from_secs(60))
        .unwrap();
    let report = handle.report();
    eprintln!(
        "burst (backpressure): {:?} for {} spans: {report:?}",
        t.elapsed(),
        BURST + 1
    );
    assert_eq!(out.count(), BURST + 1, "every span reached the exporter");
    assert_eq!(report.spans_exported, BURST + 1);
    assert_eq!(report.spans_ended, BURST + 1);
    assert_eq!(report.dropped, 0);
}

#[test]
fn burst_of_a_million_steps_with_drop_policy_counts_every_loss() {
    // A slow collector (20 ms per 512-span request ≈ 25 k spans/s) and a small queue that
    // drops instead of waiting: much is lost, and the report says exactly how much.
    let out = Collect {
        delay: Duration::from_millis(20),
        ..Collect::default()
    };
    let config = OtelConfig::new()
        .queue_size(1024)
        .backpressure(Backpressure::Drop);
    let mut sink = OtelSink::with_span_exporter(out.clone(), config).unwrap();
    let handle = sink.handle();
    burst(&mut sink);
    sink.close(Instant::now() + Duration::from_secs(60))
        .unwrap();
    let report = handle.report();
    eprintln!("burst (drop): {report:?}");
    let total = BURST + 1;
    assert!(
        report.dropped > 0,
        "the burst must overflow the queue: {report:?}"
    );
    assert_eq!(report.spans_ended, total);
    assert_eq!(
        report.spans_exported,
        out.count(),
        "exported = what the exporter received"
    );
    assert_eq!(
        report.dropped,
        total - out.count(),
        "dropped = what did not reach the exporter"
    );
    assert_eq!(report.dropped_queue_full, report.dropped);
}

#[test]
fn failed_exports_are_counted_as_dropped() {
    let out = Collect {
        fail: true,
        ..Collect::default()
    };
    let mut sink =
        OtelSink::with_span_exporter(out.clone(), OtelConfig::new().batch_size(4)).unwrap();
    let handle = sink.handle();
    let records = run_stream();
    for r in &records {
        sink.write(r).unwrap();
    }
    sink.close(Instant::now() + Duration::from_secs(10))
        .unwrap();
    let report = handle.report();
    assert_eq!(report.spans_exported, 0);
    assert_eq!(report.dropped, report.spans_ended);
    assert_eq!(report.dropped, 5 + STEPS);
    assert_eq!(report.export_errors, (5 + STEPS).div_ceil(4));
    assert!(
        report
            .last_error
            .as_deref()
            .unwrap()
            .contains("collector says no"),
        "{report:?}"
    );
}

#[test]
fn shutdown_keeps_the_deadline_and_counts_what_was_left() {
    // Each export takes 1 s; the guard gives 300 ms.
    let out = Collect {
        delay: Duration::from_secs(1),
        ..Collect::default()
    };
    let config = OtelConfig::new()
        .batch_size(5)
        .batch_delay(Duration::from_millis(1));
    let mut sink = OtelSink::with_span_exporter(out.clone(), config).unwrap();
    let handle = sink.handle();
    for r in &run_stream() {
        sink.write(r).unwrap();
    }
    let t = Instant::now();
    let result = sink.close(Instant::now() + Duration::from_millis(300));
    let took = t.elapsed();
    assert!(result.is_err(), "the deadline passed");
    assert!(took < Duration::from_millis(900), "close took {took:?}");
    let report = handle.report();
    assert_eq!(
        report.spans_exported + report.dropped,
        report.spans_ended,
        "{report:?}"
    );
    assert!(report.dropped > 0);
    // Once the in-flight request returns, the counts settle and still add up.
    std::thread::sleep(Duration::from_millis(1500));
    let report = handle.report();
    assert_eq!(report.spans_exported, out.count());
    assert_eq!(
        report.spans_exported + report.dropped,
        report.spans_ended,
        "{report:?}"
    );
}
