//! `Builder::build_feed`: records made outside the layer (a log another process writes, read
//! back) through the pipeline, as they are.

use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::record::parse_log;
use tracing_mllog::sink::{Delivery, MemorySink};
use tracing_mllog::{MllogLayer, Output};

fn line(key: &str, time_ms: u64, value: u64) -> String {
    format!(
        ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {time_ms}, \"event_type\": \"POINT_IN_TIME\", \
         \"key\": \"{key}\", \"value\": {value}, \"metadata\": {{\"file\": \"train.py\", \"lineno\": 7}}}}"
    )
}

#[test]
fn pushed_records_reach_the_sinks_in_order_with_their_own_time() {
    let lines: Vec<String> = (0..10_000u64)
        .map(|i| line("train_loss", 1_700_000_000_000 + i, i))
        .collect();
    let (memory, seen) = MemorySink::new();
    let (feed, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        // Inline, as the MLLOG file is: an isolated sink would lose records to its own full
        // queue on a loaded machine, which is not what this test is about.
        .sink_with(memory, Delivery::Inline)
        .live_check(LivePolicy::Off)
        .validate_submission(false)
        .build_feed()
        .expect("build_feed");
    for parsed in parse_log(&lines.join("\n")).0 {
        feed.push(parsed.record);
    }
    let report = guard.shutdown();
    assert_eq!(report.dropped(), 0, "{report}");
    assert_eq!(seen.lines(), lines);
}

#[test]
fn a_followed_file_is_never_written_even_with_mllog_output_file_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let followed = dir.path().join("result_0.txt");
    let other = dir.path().join("job_output.txt");
    std::fs::write(&followed, "the other process's log\n").expect("write");
    std::fs::write(&other, "a file of the job's\n").expect("write");
    let (feed, mut guard) = MllogLayer::builder()
        .output(Output::followed(&followed))
        .live_check(LivePolicy::Off)
        .validate_submission(false)
        .environment([
            ("MLLOG_OUTPUT_FILE", other.to_str().expect("utf-8")),
            ("MLLOG_SAVE_TO_FILE", "1"),
        ])
        .build_feed()
        .expect("build_feed");
    for parsed in parse_log(&line("seed", 1, 7)).0 {
        feed.push(parsed.record);
    }
    guard.shutdown();
    assert_eq!(
        std::fs::read_to_string(&followed).expect("read"),
        "the other process's log\n"
    );
    assert_eq!(
        std::fs::read_to_string(&other).expect("read"),
        "a file of the job's\n"
    );
}
