//! Per-record cost of the sink path (MLLOG file sink, then the upload sink: `write` + `flush`
//! for every record, as on the pipeline's worker when the channel runs dry after each record)
//! with upload off and on against a healthy (in-memory), a slow (ThrottledStore, 2 s per PUT)
//! and a dead (S3 endpoint where nothing listens) store, in the same run. Every 100th record is
//! an `eval_accuracy`, which asks for a prompt upload; periodic uploads run every 50 ms.
//! Prints the on/off ratios at the end.
//!
//! `cargo bench --features object-store --bench upload`

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use object_store::memory::InMemory;
use object_store::throttle::{ThrottleConfig, ThrottledStore};
use object_store::ObjectStore;
use tracing_mllog::sink::{MllogFileSink, RetryPolicy, Sink, UploadConfig, UploadSink};
use tracing_mllog::{Record, Value};

/// A log file that starts over every 4 MiB so that long benchmark runs do not make every
/// background upload bigger and bigger.
struct Wrapping {
    file: File,
    written: usize,
}

impl Write for Wrapping {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.written > 4 << 20 {
            self.file.set_len(0)?;
            self.file.seek(SeekFrom::Start(0))?;
            self.written = 0;
        }
        let n = self.file.write(buf)?;
        self.written += n;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

fn file_sink(path: &Path) -> MllogFileSink {
    let file = File::create(path).expect("log file");
    MllogFileSink::writer(Wrapping { file, written: 0 })
}

fn upload_config(kind: &str, port: u16) -> Option<UploadConfig> {
    let retry = RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
    };
    let config = match kind {
        "off" => return None,
        "healthy" => UploadConfig::from_store(Arc::new(InMemory::new()), "bench/"),
        "slow" => {
            let t = ThrottleConfig {
                wait_put_per_call: Duration::from_secs(2),
                ..ThrottleConfig::default()
            };
            let store: Arc<dyn ObjectStore> = Arc::new(ThrottledStore::new(InMemory::new(), t));
            UploadConfig::from_store(store, "bench/")
        }
        "dead" => UploadConfig::new("s3://bench-bucket/run/")
            .expect("url")
            .read_provider_env(false)
            .option("aws_endpoint", format!("http://127.0.0.1:{port}"))
            .option("aws_allow_http", "true")
            .option("aws_access_key_id", "bench")
            .option("aws_secret_access_key", "bench-secret")
            .option("aws_region", "us-east-1"),
        _ => unreachable!(),
    };
    Some(config.interval(Duration::from_millis(50)).retry(retry))
}

struct Path2 {
    file: MllogFileSink,
    upload: Option<UploadSink>,
    records: [tracing_mllog::record::TracedRecord; 2],
    i: usize,
}

impl Path2 {
    fn new(kind: &str, dir: &Path, port: u16) -> Path2 {
        let local = dir.join(format!("{kind}.log"));
        let file = file_sink(&local);
        let upload =
            upload_config(kind, port).map(|c| UploadSink::for_file(c, local).expect("uploader").0);
        let mut step = Record::event("tracked_stats", Value::from(0.5));
        step.metadata.set("step", 1u64);
        let eval = Record::event("eval_accuracy", Value::from(0.75));
        Path2 {
            file,
            upload,
            records: [step.into(), eval.into()],
            i: 0,
        }
    }

    #[inline]
    fn one(&mut self) {
        self.i += 1;
        let r = &self.records[usize::from(self.i.is_multiple_of(100))];
        self.file.write(r).unwrap();
        self.file.flush().unwrap();
        if let Some(u) = &mut self.upload {
            u.write(r).unwrap();
            u.flush().unwrap();
        }
    }

    fn close(mut self) {
        let _ = self.file.close(Instant::now());
        if let Some(mut u) = self.upload.take() {
            let _ = u.close(Instant::now() + Duration::from_millis(100));
        }
    }
}

const KINDS: [&str; 4] = ["off", "healthy", "slow", "dead"];

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let dead_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut group = c.benchmark_group("upload_sink_path");
    for kind in KINDS {
        let mut p = Path2::new(kind, dir.path(), dead_port);
        group.bench_function(kind, |b| b.iter(|| p.one()));
        p.close();
    }
    group.finish();

    // The ratio, measured in one go and interleaved so that machine noise hits every variant.
    const N: usize = 50_000;
    let mut best = [f64::MAX; 4];
    for _round in 0..5 {
        for (k, kind) in KINDS.iter().enumerate() {
            let mut p = Path2::new(kind, dir.path(), dead_port);
            for _ in 0..1_000 {
                p.one();
            }
            let t = Instant::now();
            for _ in 0..N {
                p.one();
            }
            let ns = t.elapsed().as_nanos() as f64 / N as f64;
            best[k] = best[k].min(ns);
            p.close();
        }
    }
    println!("\nper-record write+flush cost (best of 5 x {N} records):");
    for (k, kind) in KINDS.iter().enumerate() {
        println!(
            "  {kind:>8}: {:8.1} ns/record   ratio vs off: {:.3}",
            best[k],
            best[k] / best[0]
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
