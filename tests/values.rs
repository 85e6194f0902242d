//! `mllog!`'s field forms: what each reaches the record as (the encoding of each type is
//! checked against `mlperf_logging` in `tests/encoding_parity.rs`).

use tracing_mllog::sink::MemorySink;
use tracing_mllog::{mllog, MllogLayer, Output, Record, Value};
use tracing_subscriber::prelude::*;

fn capture(f: impl FnOnce()) -> Vec<Record> {
    let (sink, handle) = MemorySink::new();
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .sink(sink)
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f);
    let report = guard.shutdown();
    assert!(report.is_clean(), "{report}");
    handle
        .records()
        .into_iter()
        .filter(|r| r.metadata.file.is_some())
        .map(|r| r.record)
        .collect()
}

/// A generic `tracing::Value` that is no `LogValue` still goes through, unchanged.
fn generic<T: tracing::Value>(v: T) {
    mllog!("generic", v, also = v);
}

struct Shown;

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("shown")
    }
}

#[test]
fn every_field_form_reaches_the_record() {
    let records = capture(|| {
        let samples_count = 64u64;
        let list = vec![1, 2];
        let shown = Shown;
        mllog!(
            "forms",
            vec![0.5f32],
            samples_count,
            dbg = ?list,
            disp = %shown,
            empty = tracing::field::Empty,
            "nested.name" = (1, None::<u8>),
            a.b = 0.1f32,
        );
        mllog!("shorthand_debug", 1, ?list, %shown);
        mllog!("message", 2, n = 3, "free text {}", 4);
        mllog!("trailing_comma", 3,);
        generic(7u8);
    });
    let get = |r: &Record, k: &str| r.metadata.get(k).cloned();
    let forms = &records[0];
    assert_eq!(forms.value, Value::Array(vec![Value::Float(0.5)]));
    assert_eq!(get(forms, "samples_count"), Some(Value::Int(64)));
    assert_eq!(get(forms, "dbg"), Some(Value::from("[1, 2]".to_owned())));
    assert_eq!(get(forms, "disp"), Some(Value::from("shown".to_owned())));
    assert_eq!(get(forms, "empty"), None);
    assert_eq!(
        get(forms, "nested.name"),
        Some(Value::Array(vec![Value::Int(1), Value::Null]))
    );
    assert_eq!(get(forms, "a.b"), Some(Value::Float(0.1)));
    let shorthand = &records[1];
    assert_eq!(
        get(shorthand, "list"),
        Some(Value::from("[1, 2]".to_owned()))
    );
    assert_eq!(
        get(shorthand, "shown"),
        Some(Value::from("shown".to_owned()))
    );
    let message = &records[2];
    assert_eq!(message.value, Value::Int(2));
    assert_eq!(get(message, "n"), Some(Value::Int(3)));
    assert_eq!(get(message, "message"), None, "the message is no metadata");
    assert_eq!(records[3].value, Value::Int(3));
    let generic = &records[4];
    assert_eq!(generic.value, Value::Int(7));
    assert_eq!(get(generic, "also"), Some(Value::Int(7)));
    assert_eq!(records.len(), 5);
}

/// Other layers see a composite as its JSON text.
#[test]
fn other_layers_see_json_text() {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let writer = buf.clone();
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(move || writer.clone())
        .with_ansi(false);
    tracing::subscriber::with_default(tracing_subscriber::registry().with(fmt), || {
        mllog!("k", vec![("a", 0.1f32)], m = [Some(1), None]);
    });
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains(r#"value=[["a", 0.1]]"#), "{text}");
    assert!(text.contains("m=[1, null]"), "{text}");
}

/// A callsite remembers the key it logged last; a key that changes from event to event (here
/// known keys of one length, one of them built at run time, and unknown ones) is still logged
/// as written.
#[test]
fn a_callsite_logs_each_events_own_key() {
    use tracing_mllog::keys;
    assert_eq!(keys::EVAL_START.len(), keys::EPOCH_STOP.len());
    let mut written = Vec::new();
    let records = capture(|| {
        for i in 0..12u64 {
            let key = match i % 4 {
                0 => keys::EVAL_START.to_owned(),
                1 => keys::EPOCH_STOP.to_owned(),
                2 => format!("run_key_{}", i % 10),
                _ => format!("{}_stop", "epoch"),
            };
            written.push(key.clone());
            mllog!(key.as_str(), i);
        }
    });
    let logged: Vec<&str> = records.iter().map(|r| r.key.as_ref()).collect();
    assert_eq!(logged, written);
}

/// The key (and namespace) given through `%` or `?`, as `tracing`'s own macros allow, is the
/// same text as given as a `&str`: not its JSON, nor its quoted `Debug` form.
#[test]
fn a_key_given_by_display_or_debug_is_its_text() {
    let key = String::from("eval_start");
    let namespace = String::from("worker_1");
    let records = capture(|| {
        tracing::info!(mllog.key = %key, value = 1);
        tracing::info!(mllog.key = ?key, value = 2);
        tracing::info!(mllog.key = key.as_str(), value = 3);
        tracing::info!(mllog.key = %key, mllog.namespace = ?namespace, value = 4);
    });
    let keys: Vec<&str> = records.iter().map(|r| r.key.as_ref()).collect();
    assert_eq!(keys, ["eval_start"; 4]);
    assert_eq!(records[3].namespace, "worker_1");
}
