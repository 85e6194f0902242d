//! Intervals per second the RPD sink sustains into SQLite (target: at least 200,000/s).
//!
//! `cargo bench --features rpd --bench rpd`. Each iteration writes 10,000 intervals (a start
//! and an end record each, as the pipeline's worker hands them over) and commits them with one
//! `flush`, into a file on disk; criterion reports elements/s = intervals/s. `unique` labels
//! carry a step number (one new `rocpd_ustring` row per interval, the realistic worst case);
//! `repeated` labels are interned once.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use tracing_mllog::record::{
    EventType, IntervalIds, Metadata, Record, Timestamp, TracedRecord, Value,
};
use tracing_mllog::sink::{RpdConfig, RpdSchema, Sink};

const INTERVALS: u64 = 10_000;

fn records(unique: bool, round: u64) -> Vec<TracedRecord> {
    let mut out = Vec::with_capacity(2 * INTERVALS as usize);
    for i in 0..INTERVALS {
        let mut metadata = Metadata::at("train.py", 42);
        if unique {
            metadata.set("step_num", Value::Int((round * INTERVALS + i) as i128));
        }
        let rec = |event_type, key: &'static str, t: u64| {
            let mut r = TracedRecord::from(
                Record::event(key, Value::Null)
                    .with_event_type(event_type)
                    .with_metadata(metadata.clone()),
            );
            r.time = Timestamp {
                wall_ns: 0,
                mono_ns: 1_000_000_000 + t,
            };
            r.interval = Some(IntervalIds {
                id: i + 1,
                parent: Some(0),
            });
            r.tid = 7;
            r
        };
        out.push(rec(EventType::IntervalStart, "train_step", i * 1000));
        out.push(rec(EventType::IntervalEnd, "train_step", i * 1000 + 500));
    }
    out
}

fn bench(c: &mut Criterion) {
    let disk = tempfile::tempdir().expect("tempdir");
    // tmpfs, where there is one: the sink's own cost without the disk's syncs.
    let tmpfs = tempfile::tempdir_in("/dev/shm").ok();
    let mut places = vec![("disk", disk.path())];
    if let Some(t) = &tmpfs {
        places.push(("tmpfs", t.path()));
    }
    let mut group = c.benchmark_group("rpd_sink");
    group.throughput(Throughput::Elements(INTERVALS));
    group.sample_size(10);
    for (place, dir) in places {
        for schema in [RpdSchema::V3, RpdSchema::V2] {
            for unique in [true, false] {
                let name = format!(
                    "{place}_{schema}_{}_labels",
                    if unique { "unique" } else { "repeated" }
                );
                let path = dir.join(format!("{name}.rpd"));
                let mut sink = RpdConfig::new(&path)
                    .schema(schema)
                    .batch_rows(1 << 20)
                    .open()
                    .expect("open");
                let mut round = 0;
                group.bench_function(&name, |b| {
                    b.iter_batched(
                        || {
                            // Fresh step numbers every round, so that unique labels stay unique.
                            round += 1;
                            records(unique, round)
                        },
                        |records| {
                            for r in &records {
                                sink.write(r).expect("write");
                            }
                            sink.flush().expect("flush");
                            records
                        },
                        BatchSize::PerIteration,
                    )
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
