//! The builder's grouped settings: each group is one value set whole (`Output`, `Ranks`,
//! `Pipeline`, `Barrier`, `CacheClear`, `Submission`), the environment's rows apply over it, and
//! two settings that would contradict each other are an error at `build()`, never one silently
//! winning.

use std::path::Path;

use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::record::parse_log;
use tracing_mllog::sink::{Delivery, MemorySink};
use tracing_mllog::{
    Benchmark, CacheClear, Division, MllogLayer, Output, Ranks, Ruleset, Submission,
};
use tracing_subscriber::prelude::*;

/// Runs an `init` span through a layer built from `builder` and returns the keys written.
fn init_keys(builder: tracing_mllog::Builder, path: &Path) -> Vec<String> {
    let (layer, guard) = builder
        .live_check(LivePolicy::Off)
        .validate_submission(false)
        .build()
        .expect("build");
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        drop(tracing::info_span!("init").entered());
    });
    drop(guard);
    let text = std::fs::read_to_string(path).expect("log");
    parse_log(&text)
        .0
        .into_iter()
        .map(|l| l.record.key.to_string())
        .collect()
}

#[test]
fn an_appended_file_keeps_what_it_held_and_a_truncated_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.txt");
    let none = || Vec::<(String, String)>::new();
    let quiet = || {
        MllogLayer::builder()
            .cache_clear(CacheClear::Off)
            .environment(none())
    };
    assert_eq!(
        init_keys(quiet().output(Output::file(&path)), &path),
        ["init_start", "init_stop"]
    );
    assert_eq!(
        init_keys(quiet().output(Output::append_to(&path)), &path).len(),
        4
    );
    assert_eq!(
        init_keys(quiet().output(Output::file(&path)), &path).len(),
        2
    );
    // MLLOG_APPEND speaks of the code's file, and of the one MLLOG_OUTPUT_FILE names.
    let appended = quiet()
        .output(Output::file(&path))
        .environment([("MLLOG_APPEND", "1")]);
    assert_eq!(init_keys(appended, &path).len(), 4);
    let other = dir.path().join("other.txt");
    std::fs::write(&other, "").unwrap();
    let redirected = quiet()
        .output(Output::append_to(&path))
        .environment([("MLLOG_OUTPUT_FILE", other.to_str().unwrap())]);
    assert_eq!(init_keys(redirected, &other).len(), 2);
    let again = quiet()
        .output(Output::append_to(&path))
        .environment([("MLLOG_OUTPUT_FILE", other.to_str().unwrap())]);
    assert_eq!(
        init_keys(again, &other).len(),
        4,
        "the code's append is kept"
    );
}

#[test]
fn the_cache_clear_record_is_off_or_says_who_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.txt");
    let with = |mode, vars: &[(&str, &str)]| {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let builder = MllogLayer::builder()
            .output(Output::file(&path))
            .cache_clear(mode)
            .environment(vars);
        let keys = init_keys(builder, &path);
        let text = std::fs::read_to_string(&path).unwrap();
        (keys.first().cloned(), text)
    };
    let (first, _) = with(CacheClear::Off, &[]);
    assert_eq!(first.as_deref(), Some("init_start"));
    let (first, text) = with(CacheClear::ByLauncher, &[]);
    assert_eq!(first.as_deref(), Some("cache_clear"));
    assert!(text.contains(r#""cleared_by": "launcher""#), "{text}");
    // `1` over Off turns the record back on, saying nothing was cleared.
    let (first, text) = with(CacheClear::Off, &[("MLLOG_CACHE_CLEAR", "1")]);
    assert_eq!(first.as_deref(), Some("cache_clear"));
    assert!(text.contains(r#""cleared_by": "nobody""#), "{text}");
    // `1` over the launcher keeps what the code said; `0` turns it off.
    let (_, text) = with(CacheClear::ByLauncher, &[("MLLOG_CACHE_CLEAR", "1")]);
    assert!(text.contains(r#""cleared_by": "launcher""#), "{text}");
    let (first, _) = with(CacheClear::ByLauncher, &[("MLLOG_CACHE_CLEAR", "0")]);
    assert_eq!(first.as_deref(), Some("init_start"));
}

#[test]
fn a_submission_given_after_a_preset_keeps_the_presets_fields() {
    let preset = tracing_mllog::presets::Llama2_70bLora::default()
        .preset(Division::Open, Ruleset::V6_1_0)
        .unwrap();
    let (memory, records) = MemorySink::new();
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .sink(memory)
        .submission(Submission::default().platform("early"))
        .preset(&preset)
        .submission(Submission::default().org("Org"))
        .live_check(LivePolicy::Off)
        .environment(Vec::<(String, String)>::new())
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        drop(tracing::info_span!("init").entered());
    });
    guard.shutdown();
    let lines = records.lines().join("\n");
    for (key, value) in [
        (
            "submission_benchmark",
            Benchmark::Llama2_70bLora.to_string(),
        ),
        ("submission_division", "open".to_string()),
        ("submission_org", "Org".to_string()),
        ("submission_platform", "early".to_string()),
    ] {
        let line = format!(r#""key": "{key}", "value": "{value}""#);
        assert!(lines.contains(&line), "{line} missing from\n{lines}");
    }
}

#[test]
fn ranks_decide_who_writes() {
    let build = |ranks: Ranks| {
        MllogLayer::builder()
            .output(Output::Nowhere)
            .ranks(ranks)
            .environment([("RANK", "2")])
            .build::<tracing_subscriber::Registry>()
            .unwrap()
            .0
            .writes()
    };
    assert!(!build(Ranks::default()), "rank 2 from RANK, writer 0");
    assert!(build(Ranks::default().writer(2)));
    assert!(build(Ranks::default().all_write(true)));
    assert!(build(Ranks::default().rank(0)), "the code's rank wins");
    let all = MllogLayer::builder()
        .output(Output::Nowhere)
        .environment([("RANK", "2"), ("MLLOG_ALL_RANKS", "1")])
        .build::<tracing_subscriber::Registry>()
        .unwrap()
        .0;
    assert!(all.writes());
}

#[test]
fn a_sinks_delivery_given_twice_differently_is_an_error() {
    let inline_and_isolated = MllogLayer::builder()
        .output(Output::Nowhere)
        .sink_with(MemorySink::new().0, Delivery::Inline)
        .sink_delivery("memory", Delivery::default())
        .build::<tracing_subscriber::Registry>();
    let Err(err) = inline_and_isolated else {
        panic!("two deliveries for one sink built");
    };
    let err = err.to_string();
    assert!(
        err.contains("`memory`") && err.contains("sink_with") && err.contains("sink_delivery"),
        "{err}"
    );
    // The same delivery twice, or a delivery by name for a sink given without one, builds.
    assert!(MllogLayer::builder()
        .output(Output::Nowhere)
        .sink_with(MemorySink::new().0, Delivery::Inline)
        .sink_delivery("memory", Delivery::Inline)
        .build::<tracing_subscriber::Registry>()
        .is_ok());
    assert!(MllogLayer::builder()
        .output(Output::Nowhere)
        .sink(MemorySink::new().0)
        .sink_delivery("memory", Delivery::Inline)
        .build::<tracing_subscriber::Registry>()
        .is_ok());
}
