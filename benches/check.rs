//! Throughput of the compliance checker: MB/s over a large log (a real submission log's train
//! portion repeated, or a generated one when the corpus is not there).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tracing_mllog::compliance::{check_reader, example_log, Division, Ruleset};
use tracing_mllog::keys::Benchmark;

/// A log of about `target` bytes: the header up to `run_start`, then the lines after it
/// repeated, then the last line (`run_stop`).
fn big_log(target: usize) -> String {
    let corpus = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/corpus/real/v5.1_HPE_llama31_8b_XD670-H200-n8_result_8.txt"
    );
    let text = std::fs::read_to_string(corpus).unwrap_or_else(|_| {
        example_log(Ruleset::V6_1_0, Benchmark::Llama31_8b, Division::Closed).expect("example")
    });
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.contains("\"run_start\""))
        .map_or(0, |i| i + 1);
    let stop = lines
        .iter()
        .rposition(|l| l.contains("\"run_stop\""))
        .unwrap_or(lines.len());
    let (head, body, tail) = (&lines[..start], &lines[start..stop], &lines[stop..]);
    let mut out = String::with_capacity(target + text.len());
    for l in head {
        out.push_str(l);
        out.push('\n');
    }
    while out.len() < target && !body.is_empty() {
        for l in body {
            out.push_str(l);
            out.push('\n');
        }
    }
    for l in tail {
        out.push_str(l);
        out.push('\n');
    }
    out
}

fn bench(c: &mut Criterion) {
    let log = big_log(16 << 20);
    let mut g = c.benchmark_group("check");
    g.throughput(Throughput::Bytes(log.len() as u64));
    g.sample_size(10);
    g.bench_function("llama31_8b_16MiB", |b| {
        b.iter(|| {
            let report = check_reader(Ruleset::V5_1_0, log.as_bytes()).expect("in memory");
            assert!(report.records > 0);
            report
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
