//! Device-true intervals against a simulated asynchronous device: a worker thread that runs
//! the work queued on it, as a GPU stream does, and a synchronisation that waits until the
//! queue is empty. A step that queues its work and returns measures the enqueue; with
//! `Builder::device_sync` the block ends when the device is done, and at `SyncAt::Steps`
//! throughput is the device's.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tracing::info_span;
use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::record::TracedRecord;
use tracing_mllog::sink::{Delivery, MemorySink};
use tracing_mllog::{keys, mllog, CacheClear, MllogLayer, Output, SyncAt};
use tracing_subscriber::prelude::*;

/// What one step runs on the device.
const KERNEL: Duration = Duration::from_millis(20);
const STEPS: u64 = 15;
const BATCH: u64 = 8;

#[derive(Default)]
struct Queue {
    work: VecDeque<Duration>,
    queued: u64,
    done: u64,
    /// Time the device spent running work.
    busy: Duration,
}

/// A device that runs queued work on its own thread, in order.
#[derive(Default)]
struct Device {
    queue: Mutex<Queue>,
    changed: Condvar,
}

impl Device {
    fn start() -> Arc<Device> {
        let device = Arc::new(Device::default());
        let d = device.clone();
        std::thread::spawn(move || loop {
            let job = {
                let mut q = d.queue.lock().unwrap();
                loop {
                    if let Some(job) = q.work.pop_front() {
                        break job;
                    }
                    q = d.changed.wait(q).unwrap();
                }
            };
            let started = Instant::now();
            std::thread::sleep(job);
            let ran = started.elapsed();
            let mut q = d.queue.lock().unwrap();
            q.done += 1;
            q.busy += ran;
            d.changed.notify_all();
        });
        device
    }

    /// Queues work and returns at once, as a kernel launch does.
    fn launch(&self, work: Duration) {
        let mut q = self.queue.lock().unwrap();
        q.work.push_back(work);
        q.queued += 1;
        self.changed.notify_all();
    }

    /// Returns once everything queued so far has run.
    fn synchronize(&self) {
        let mut q = self.queue.lock().unwrap();
        while q.done < q.queued {
            q = self.changed.wait(q).unwrap();
        }
    }

    fn pending(&self) -> u64 {
        let q = self.queue.lock().unwrap();
        q.queued - q.done
    }

    fn busy(&self) -> Duration {
        self.queue.lock().unwrap().busy
    }
}

/// What one run showed.
struct Seen {
    /// The block's `tracked_stats` throughput, samples per second.
    throughput: f64,
    /// The device's own: samples per second of the time it ran work.
    device_throughput: f64,
    /// Samples per second over the host's time around each step (span and enqueue).
    enqueue_throughput: f64,
    /// Work still queued on the device when the block's span had closed.
    pending_at_block_end: u64,
    /// Device synchronisations the layer called.
    syncs: u32,
    records: Vec<TracedRecord>,
}

/// `init`, then a run with one warmup step, one block of [`STEPS`] steps each queueing a
/// [`KERNEL`], and an evaluation.
fn train(
    configure: impl FnOnce(
        tracing_mllog::Builder,
        Arc<Device>,
        Arc<AtomicU32>,
    ) -> tracing_mllog::Builder,
) -> Seen {
    let device = Device::start();
    let syncs = Arc::new(AtomicU32::new(0));
    let (sink, records) = MemorySink::new();
    let builder = MllogLayer::builder()
        .output(Output::Nowhere)
        .sink_with(sink, Delivery::Inline)
        .cache_clear(CacheClear::Off)
        .live_check(LivePolicy::Off)
        .global_batch_size(BATCH)
        .environment(Vec::<(String, String)>::new());
    let (layer, mut guard) = configure(builder, device.clone(), syncs.clone())
        .build()
        .expect("build");
    let mut host = Duration::ZERO;
    let mut pending_at_block_end = u64::MAX;
    tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
        drop(info_span!("init").entered());
        let run = info_span!("run").entered();
        {
            let _warmup = info_span!("warmup").entered();
            drop(info_span!("train_step").entered());
        }
        let block = info_span!("block").entered();
        for step in 0..STEPS {
            let started = Instant::now();
            {
                let _step = info_span!("train_step", step).entered();
                device.launch(KERNEL);
            }
            host += started.elapsed();
        }
        drop(block);
        pending_at_block_end = device.pending();
        let eval = info_span!("eval").entered();
        device.launch(KERNEL / 4);
        mllog!(keys::EVAL_ACCURACY, 0.5);
        drop(eval);
        drop(run);
    });
    guard.shutdown();
    device.synchronize();
    let records = records.records();
    let stats = records
        .iter()
        .find(|r| r.key == keys::TRACKED_STATS)
        .expect("the block's tracked_stats");
    let samples = (STEPS * BATCH) as f64;
    // The device ran the steps' work and the evaluation's quarter kernel.
    let step_busy = device.busy().as_secs_f64() * STEPS as f64 / (STEPS as f64 + 0.25);
    Seen {
        throughput: stats.value.get("throughput").unwrap().as_f64().unwrap(),
        device_throughput: samples / step_busy,
        enqueue_throughput: samples / host.as_secs_f64(),
        pending_at_block_end,
        syncs: syncs.load(Ordering::Relaxed),
        records,
    }
}

fn synced(
    b: tracing_mllog::Builder,
    device: Arc<Device>,
    calls: Arc<AtomicU32>,
) -> tracing_mllog::Builder {
    b.device_sync(move || {
        calls.fetch_add(1, Ordering::Relaxed);
        device.synchronize();
    })
}

#[test]
fn without_a_device_sync_steps_measure_the_enqueue() {
    let seen = train(|b, _, _| b);
    assert_eq!(seen.syncs, 0);
    assert!(
        seen.throughput >= seen.enqueue_throughput,
        "{} samples/s, below the host's enqueue rate {}",
        seen.throughput,
        seen.enqueue_throughput
    );
    assert!(
        seen.throughput > 20.0 * seen.device_throughput,
        "{} samples/s is not the enqueue's, the device runs {}",
        seen.throughput,
        seen.device_throughput
    );
    assert!(
        seen.pending_at_block_end > STEPS / 2,
        "the block ended with {} kernels still queued",
        seen.pending_at_block_end
    );
}

#[test]
fn at_interval_ends_the_block_ends_with_the_device() {
    let seen = train(synced);
    assert_eq!(seen.pending_at_block_end, 0);
    // block, eval, run; init and steps are not synchronised.
    assert_eq!(seen.syncs, 3);
    // The steps still measure their enqueue.
    assert!(seen.throughput > 20.0 * seen.device_throughput);
    let keys: Vec<&str> = seen.records.iter().map(|r| &*r.key).collect();
    assert!(keys.contains(&keys::RUN_STOP), "{keys:?}");
}

#[test]
fn step_exact_throughput_is_the_devices() {
    let seen = train(|b, d, c| synced(b, d, c).device_sync_at(SyncAt::Steps));
    let off = (seen.throughput / seen.device_throughput - 1.0).abs();
    assert!(
        off <= 0.05,
        "{} samples/s against the device's {} ({:.1} % off)",
        seen.throughput,
        seen.device_throughput,
        off * 100.0
    );
    assert_eq!(seen.pending_at_block_end, 0);
    // Every counted step (not the warmup's), then block, eval and run.
    assert_eq!(seen.syncs, STEPS as u32 + 3);
    let stats = seen
        .records
        .iter()
        .find(|r| r.key == keys::TRACKED_STATS)
        .unwrap();
    let step_time = stats
        .value
        .get("train_step_time")
        .unwrap()
        .as_f64()
        .unwrap();
    assert!(step_time >= KERNEL.as_secs_f64(), "{step_time} s a step");
}

#[test]
fn the_environment_chooses_the_place_or_none() {
    let run = |vars: &[(&str, &str)]| {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        train(move |b, d, c| synced(b, d, c).environment(vars)).syncs
    };
    assert_eq!(run(&[("MLLOG_DEVICE_SYNC", "off")]), 0);
    assert_eq!(run(&[("MLLOG_DEVICE_SYNC", "steps")]), STEPS as u32 + 3);
    assert_eq!(run(&[("MLLOG_DEVICE_SYNC", "intervals")]), 3);

    // A place without a synchronisation to call is an error naming the variable.
    let Err(err) = MllogLayer::builder()
        .output(Output::Nowhere)
        .environment([("MLLOG_DEVICE_SYNC".to_owned(), "steps".to_owned())])
        .build::<tracing_subscriber::Registry>()
    else {
        panic!("MLLOG_DEVICE_SYNC=steps without a synchronisation builds");
    };
    let err = err.to_string();
    assert!(
        err.contains("MLLOG_DEVICE_SYNC") && err.contains("Builder::device_sync"),
        "{err}"
    );
}
