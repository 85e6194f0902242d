//! Our `:::MLLOG` lines against the lines the real `mlperf_logging.mllog` (4.1.68) writes for
//! the same inputs, byte for byte. The expected lines are produced by calling the package's
//! public logger from Python in this test, never written by hand.

mod common;

use std::borrow::Cow;
use std::fmt::Write;
use std::process::Command;

use tracing_mllog::record::EventType;
use tracing_mllog::record::{Metadata, Record};
use tracing_mllog::{Output, Value};

fn s(v: &str) -> Value {
    Value::Str(Cow::Owned(v.to_owned()))
}

fn obj(members: Vec<(&str, Value)>) -> Value {
    Value::Object(
        members
            .into_iter()
            .map(|(k, v)| (Cow::Owned(k.to_owned()), v))
            .collect(),
    )
}

/// A Python literal for `v` that reproduces it exactly (floats through their bit pattern).
fn py(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Value::Int(i) => write!(out, "{i}").unwrap(),
        Value::UInt(u) => write!(out, "{u}").unwrap(),
        Value::Float(f) => write!(out, "_f('{:016x}')", f.to_bits()).unwrap(),
        Value::Str(s) => py_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for i in items {
                py(i, out);
                out.push_str(", ");
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (k, v) in members {
                py_str(k, out);
                out.push_str(": ");
                py(v, out);
                out.push_str(", ");
            }
            out.push('}');
        }
    }
}

fn py_str(s: &str, out: &mut String) {
    out.push('\'');
    for c in s.chars() {
        write!(out, "\\U{:08x}", c as u32).unwrap();
    }
    out.push('\'');
}

fn cases() -> Vec<Record> {
    let floats = [
        1e-5,
        2.4e-5,
        4e-4,
        1e-4,
        1.0,
        0.1,
        0.92,
        1e15,
        1e16,
        1.5e16,
        -0.0,
        1e-8,
        123456.789,
        5e-324,
        f64::MAX,
        f64::MIN_POSITIVE,
        1.0 / 3.0,
        0.9243,
        3.2981,
        -2.5e-7,
        1e22,
        1e21,
        f64::from_bits(0x4341_C379_37E0_7FFF), // just below 1e16
        0.30000000000000004,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    let mut values: Vec<Value> = vec![
        Value::Null,
        Value::Bool(true),
        Value::Bool(false),
        Value::Int(0),
        Value::Int(-5),
        Value::Int(16),
        Value::Int(2_290_835_423),
        Value::Int(1_180_591_620_717_411_303_424),
        Value::Int(-(1i128 << 100)),
        s(""),
        s("adamw"),
        s("cosine with linear warmup"),
        s("é😀中文"),
        s("quote\" back\\slash\nnew\ttab\r\u{1}\u{8}\u{c}\u{1f}"),
        s("/path/with/slashes"),
        s("\u{7f}\u{80}\u{ff}\u{ffff}\u{10ffff}"),
        Value::Array(vec![]),
        Value::Array(vec![
            Value::Int(1),
            Value::Float(2.5),
            s("x"),
            Value::Null,
            Value::Array(vec![Value::Bool(true)]),
        ]),
        obj(vec![]),
        obj(vec![("throughput", Value::Float(2.516032054352636))]),
        obj(vec![
            ("FID", Value::Float(87.3)),
            ("CLIP", Value::Float(0.161)),
            (
                "nested",
                obj(vec![(
                    "a",
                    Value::Array(vec![Value::Float(f64::NAN), Value::Int(1)]),
                )]),
            ),
        ]),
        obj(vec![("é", s("ü")), ("", Value::Null)]),
    ];
    values.extend(floats.iter().map(|f| Value::Float(*f)));

    let mut records = Vec::new();
    let types = [
        EventType::PointInTime,
        EventType::IntervalStart,
        EventType::IntervalEnd,
    ];
    for (i, v) in values.into_iter().enumerate() {
        let md = Metadata::at("/workspace/train/src/mlperf.rs", 100 + i as u32)
            .with("samples_count", 3072)
            .with("extra", v.clone());
        records.push(
            Record::event("eval_accuracy", v)
                .at_millis(1_767_225_600_000 + i as i64)
                .with_metadata(md)
                .with_event_type(types[i % 3]),
        );
    }
    // Namespaces, keys and file paths with awkward characters; metadata with no extra fields.
    records.push(
        Record::event("run_stop", Value::Float(0.9243))
            .at_millis(1_700_000_000_123)
            .with_metadata(
                Metadata::at("src/é.rs", 7)
                    .with("samples_count", 3072)
                    .with("status", "success"),
            )
            .with_event_type(EventType::IntervalEnd),
    );
    let mut r = Record::event("clé \"k\"", Value::Null)
        .at_millis(0)
        .with_metadata(Metadata::at("demo.py", 1));
    r.namespace = Cow::Borrowed("worker3 ü");
    records.push(r);
    records
}

#[test]
fn lines_match_mlperf_logging_byte_for_byte() {
    let records = cases();
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("python.log");
    let mut script = String::from(
        "import struct, sys\n\
         import mlperf_logging.mllog as mllog\n\
         import mlperf_logging.mllog.mllog as impl\n\
         def _f(h): return struct.unpack('>d', bytes.fromhex(h))[0]\n\
         where = {}\n\
         impl.get_caller = lambda *a, **k: dict(where)\n",
    );
    writeln!(
        script,
        "mllog.config(filename={:?})",
        out_path.to_str().unwrap()
    )
    .unwrap();
    script.push_str("logger = mllog.get_mllogger()\nlogger.logger.handlers = [h for h in logger.logger.handlers if h.__class__.__name__ == 'FileHandler']\n");
    for r in &records {
        let method = match r.event_type {
            EventType::PointInTime => "event",
            EventType::IntervalStart => "start",
            EventType::IntervalEnd => "end",
        };
        script.push_str("where.clear(); where['file'] = ");
        py_str(r.metadata.file.as_deref().unwrap(), &mut script);
        writeln!(script, "; where['lineno'] = {}", r.metadata.lineno.unwrap()).unwrap();
        let mut md = String::from("{");
        for (k, v) in &r.metadata.fields {
            py_str(k, &mut md);
            md.push_str(": ");
            py(v, &mut md);
            md.push_str(", ");
        }
        md.push('}');
        let mut value = String::new();
        py(&r.value, &mut value);
        let mut key = String::new();
        py_str(&r.key, &mut key);
        let mut ns = String::new();
        py_str(&r.namespace, &mut ns);
        let md = if r.metadata.fields.is_empty() {
            "None".to_owned()
        } else {
            md
        };
        writeln!(
            script,
            "logger.{method}({key}, {value}, metadata={md}, namespace={ns}, time_ms={})",
            r.time_ms()
        )
        .unwrap();
    }
    let script_path = dir.path().join("emit.py");
    std::fs::write(&script_path, script).unwrap();
    let status = Command::new(common::python())
        .arg(&script_path)
        .output()
        .expect("run python");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let expected = std::fs::read_to_string(&out_path).unwrap();
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(expected.len(), records.len(), "python wrote {expected:#?}");
    for (r, want) in records.iter().zip(expected) {
        assert_eq!(r.to_line(), want);
        // And the parser reads Python's line back to the same line.
        let back = tracing_mllog::record::parse_line(want).unwrap().unwrap();
        assert_eq!(back.to_line(), want);
    }
}

/// Every kind of value `mllog!` accepts, logged through the layer, against Python's
/// `mlperf_logging` given the Python value written out by hand (never derived from ours):
/// lists (nested, empty, of floats with NaN and infinities), tuples, `f32` (Python is given
/// `float(str(numpy.float32(x)))`, the shortest decimal), 128-bit integer extremes, `Option`,
/// objects (`BTreeMap`, `serde_json::Value`), in value position and in metadata.
#[test]
fn macro_values_match_mlperf_logging_byte_for_byte() {
    use std::collections::BTreeMap;
    use tracing_mllog::{log_value, mllog, sink::MemorySink, MllogLayer};
    use tracing_subscriber::prelude::*;

    // (key, Python value, Python metadata without file/lineno)
    let mut want: Vec<(&str, &str, &str)> = Vec::new();
    let (sink, handle) = MemorySink::new();
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::Nowhere)
        .sink(sink)
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .build()
        .unwrap();
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        mllog!("list", vec![1, 2]);
        want.push(("list", "[1, 2]", "None"));
        mllog!("nested", vec![vec![1, 2], vec![], vec![3]]);
        want.push(("nested", "[[1, 2], [], [3]]", "None"));
        mllog!("deep", vec![(1, vec![Some("a"), None]), (2, vec![])]);
        want.push(("deep", "[(1, ['a', None]), (2, [])]", "None"));
        mllog!("tuple", (1, "a", 2.5, true));
        want.push(("tuple", "(1, 'a', 2.5, True)", "None"));
        mllog!("empty", Vec::<i32>::new());
        want.push(("empty", "[]", "None"));
        mllog!("empty_md", 0, shape = [0u8; 0]);
        want.push(("empty_md", "0", "{'shape': []}"));
        let floats = [
            0.1,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            1e-5,
            1e16,
        ];
        mllog!("floats", floats, also = &floats[..2]);
        want.push((
            "floats",
            "[0.1, float('nan'), float('inf'), float('-inf'), -0.0, 1e-05, 1e16]",
            "{'also': [0.1, float('nan')]}",
        ));
        mllog!("array", [1u8, 2, 3], slice = &[1.5, 2.5][..]);
        want.push(("array", "[1, 2, 3]", "{'slice': [1.5, 2.5]}"));
        mllog!("strings", vec!["é", "a\"b", ""], s = String::from("x\ny"));
        want.push(("strings", "['\\u00e9', 'a\"b', '']", "{'s': 'x\\ny'}"));
        // f32: the value, in metadata, inside lists.
        mllog!("f32", 0.1f32, wd = 1e-4f32, betas = vec![0.9f32, 0.95f32]);
        want.push((
            "f32",
            "f32('3dcccccd')",
            "{'wd': f32('38d1b717'), 'betas': [f32('3f666666'), f32('3f733333')]}",
        ));
        let f32s = [
            2.5e-5f32,
            0.9243,
            1.0 / 3.0,
            16_777_217.0,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-45,
            -0.0,
            1e30,
            2.4414062e-4, // 2^-12, an exact tie between two shortest spellings
            f32::NAN,
            f32::NEG_INFINITY,
        ];
        for (i, v) in f32s.iter().enumerate() {
            mllog!("f32_more", *v, i = i);
        }
        let f32_py = [
            "f32('37d1b717')",
            "f32('3f6c9eed')",
            "f32('3eaaaaab')",
            "f32('4b800000')",
            "f32('7f7fffff')",
            "f32('00800000')",
            "f32('00000001')",
            "f32('80000000')",
            "f32('7149f2ca')",
            "f32('39800000')",
            "f32('7fc00000')",
            "f32('ff800000')",
        ];
        let md_py = [
            "{'i': 0}",
            "{'i': 1}",
            "{'i': 2}",
            "{'i': 3}",
            "{'i': 4}",
            "{'i': 5}",
            "{'i': 6}",
            "{'i': 7}",
            "{'i': 8}",
            "{'i': 9}",
            "{'i': 10}",
            "{'i': 11}",
        ];
        for (v, md) in f32_py.iter().zip(md_py) {
            want.push(("f32_more", v, md));
        }
        // 128-bit integers, exact.
        mllog!("u128", u128::MAX, min = i128::MIN, max = i128::MAX);
        want.push((
            "u128",
            "340282366920938463463374607431768211455",
            "{'min': -170141183460469231731687303715884105728, \
              'max': 170141183460469231731687303715884105727}",
        ));
        mllog!(
            "ints",
            vec![u64::MAX as u128, u128::MAX],
            lo = (i64::MIN, u64::MAX)
        );
        want.push((
            "ints",
            "[18446744073709551615, 340282366920938463463374607431768211455]",
            "{'lo': [-9223372036854775808, 18446744073709551615]}",
        ));
        // Option: None is null, in value position and in metadata.
        mllog!("none", None::<u32>, some = Some(3), gone = None::<f32>);
        want.push(("none", "None", "{'some': 3, 'gone': None}"));
        mllog!("some", Some(vec![0.5]));
        want.push(("some", "[0.5]", "None"));
        // Objects, keys in the map's order.
        let map: BTreeMap<&str, Vec<u8>> = [("b", vec![1]), ("a", vec![])].into();
        mllog!("map", map);
        want.push(("map", "{'a': [], 'b': [1]}", "None"));
        #[cfg(feature = "serde_json")]
        {
            let cfg = serde_json::json!({
                "a": [1.5, null, "x", -3],
                "b": {"c": true, "d": 18446744073709551615u64},
                "e": 2.0,
            });
            mllog!("json", cfg, inner = serde_json::json!([{"k": "é"}]));
            want.push((
                "json",
                "{'a': [1.5, None, 'x', -3], 'b': {'c': True, 'd': 18446744073709551615}, 'e': 2.0}",
                "{'inner': [{'k': '\\u00e9'}]}",
            ));
        }
        // Metadata captured raw and made values on the worker: strings, numbers and booleans
        // past the three inline slots, and around a list (made a value on the calling
        // thread), keep their order; a string value with quotes and a non-ASCII letter.
        mllog!(
            "raw_mix",
            "a \"quoted\" é value",
            host = "node-017",
            step = 3u64,
            ok = true,
            loss = 0.25,
            tail = "x\ny",
            n = -5i64
        );
        want.push((
            "raw_mix",
            "'a \"quoted\" \\u00e9 value'",
            "{'host': 'node-017', 'step': 3, 'ok': True, 'loss': 0.25, 'tail': 'x\\ny', 'n': -5}",
        ));
        mllog!(
            "raw_list_between",
            1,
            a = "s",
            l = [1, 2],
            b = 2,
            c = "t",
            d = false
        );
        want.push((
            "raw_list_between",
            "1",
            "{'a': 's', 'l': [1, 2], 'b': 2, 'c': 't', 'd': False}",
        ));
        mllog!("raw_empty", "", e = "");
        want.push(("raw_empty", "''", "{'e': ''}"));
        // Plain tracing: `log_value` does what the macro does; a `?` field stays Debug text.
        tracing::info!(
            mllog.key = "plain",
            value = log_value(&vec![1, 2]),
            x = log_value(&0.1f32)
        );
        want.push(("plain", "[1, 2]", "{'x': f32('3dcccccd')}"));
        tracing::info!(mllog.key = "debug", value = ?vec![1, 2]);
        want.push(("debug", "'[1, 2]'", "None"));
    });
    let report = guard.shutdown();
    assert!(report.is_clean(), "{report}");
    let records = handle.records();
    let records: Vec<&tracing_mllog::record::TracedRecord> = records
        .iter()
        .filter(|r| r.event_type == EventType::PointInTime && r.metadata.file.is_some())
        .collect();
    let keys: Vec<&str> = records.iter().map(|r| &*r.key).collect();
    let want_keys: Vec<&str> = want.iter().map(|w| w.0).collect();
    assert_eq!(keys, want_keys);

    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("python.log");
    let mut script = String::from(
        "import numpy as np\n\
         import mlperf_logging.mllog as mllog\n\
         import mlperf_logging.mllog.mllog as impl\n\
         def f32(h): return float(str(np.frombuffer(bytes.fromhex(h), dtype='>f4')[0]))\n\
         where = {}\n\
         impl.get_caller = lambda *a, **k: dict(where)\n",
    );
    writeln!(
        script,
        "mllog.config(filename={:?})",
        out_path.to_str().unwrap()
    )
    .unwrap();
    script.push_str("logger = mllog.get_mllogger()\nlogger.logger.handlers = [h for h in logger.logger.handlers if h.__class__.__name__ == 'FileHandler']\n");
    for (r, (key, value, md)) in records.iter().zip(&want) {
        script.push_str("where.clear(); where['file'] = ");
        py_str(r.metadata.file.as_deref().unwrap(), &mut script);
        writeln!(script, "; where['lineno'] = {}", r.metadata.lineno.unwrap()).unwrap();
        writeln!(
            script,
            "logger.event('{key}', {value}, metadata={md}, namespace='', time_ms={})",
            r.time_ms()
        )
        .unwrap();
    }
    let script_path = dir.path().join("emit.py");
    std::fs::write(&script_path, script).unwrap();
    let status = Command::new(common::python())
        .arg(&script_path)
        .output()
        .expect("run python");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let expected = std::fs::read_to_string(&out_path).unwrap();
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(expected.len(), records.len(), "python wrote {expected:#?}");
    for (r, want) in records.iter().zip(expected) {
        assert_eq!(r.to_line(), want);
        let back = tracing_mllog::record::parse_line(want).unwrap().unwrap();
        assert_eq!(back.to_line(), want);
    }
}
