//! No allocation on the calling thread in the steady state: an emitted event with numeric
//! fields, with string fields (copied into the text buffer the recycled records keep), with
//! up to three metadata fields, strings and numbers, beside a 32-byte key and a 64-byte string
//! value (captured raw into the record's inline slots), with `f32`
//! values and with small lists (built in list buffers the records keep), and counted
//! `train_step` spans (root or child of `run`) cost no heap allocation there (formatting and
//! I/O happen on the worker, records are recycled). Proven with a counting global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use tracing::info_span;
use tracing_mllog::{keys, mllog, train_step, MllogLayer, Output};
use tracing_subscriber::prelude::*;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|a| a.set(a.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|a| a.set(a.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCS.with(Cell::get)
}

#[test]
fn steady_state_events_and_steps_do_not_allocate_on_the_calling_thread() {
    let (layer, mut guard) = MllogLayer::builder()
        .output(Output::writer(std::io::sink()))
        .global_batch_size(8)
        .train_loss_every(0)
        .live_check(tracing_mllog::compliance::LivePolicy::Off)
        .build()
        .unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        let _run = info_span!("run").entered();
        let work = |n: u64| {
            for i in 0..n {
                drop(train_step!(step = i, samples = 8u64).entered());
                let _s = info_span!("train_step", step = i, samples = 8u64).entered();
                mllog!(keys::TRACKED_STATS, 1.25, samples_count = i, step = i);
                mllog!(keys::TRAIN_LOSS, 0.5, converged = false);
                mllog!(keys::SUBMISSION_PLATFORM, "8xH100 SXM5", host = "node-017");
                mllog!(keys::OPT_ADAMW_WEIGHT_DECAY, 0.1f32, betas = [0.9f32, 0.95]);
                mllog!(keys::TRACKED_STATS, [0.5, 0.25], step = i);
                // Keys of the program's own and string values, short to the longest of the
                // class the event budget holds for (32-byte keys, 64-byte strings).
                mllog!("k", "v", step = i);
                mllog!("my_custom_note", "checkpoint written", step = i);
                mllog!(
                    "data_loader_worker_restart_notes",
                    "worker 3 restarted after a read timeout on shard 0007 of the set",
                    host = "node-017.cluster.example.org",
                    reason = "read timeout on /datasets/c4/en/train/shard-00007-of-01024",
                    step = i
                );
                // Up to three metadata fields, strings and numbers, beside the longest key
                // and value of the class, and none at all.
                mllog!(
                    "data_loader_worker_restart_notes",
                    "worker 3 restarted after a read timeout on shard 0007 of the set",
                    host = "node-017.cluster.example.org",
                    reason = "read timeout on /datasets/c4/en/train/shard-00007-of-01024",
                    path = "/datasets/c4/en/train/shard-00007-of-01024.json.gz.tmp.partial"
                );
                mllog!(
                    "data_loader_worker_restart_notes",
                    "worker 3 restarted after a read timeout on shard 0007 of the set",
                    step = i,
                    samples_count = i,
                    epoch_num = 2
                );
                mllog!(
                    "shard_id",
                    "/scratch/ckpt/step-000123/s07.pt",
                    reason = "read timeout on /datasets/c4/en/train/shard-00007-of-01024",
                    step = i,
                    loss = 0.25
                );
                mllog!("shard_id", "complete");
            }
        };
        // Warm up: callsites registered, thread-locals and the record pool in use.
        work(20_000);
        let before = allocations();
        work(20_000);
        let during = allocations() - before;
        assert_eq!(
            during, 0,
            "allocations on the calling thread in the steady state"
        );
    });
    let report = guard.shutdown();
    assert!(report.is_clean(), "{report}");
    assert_eq!(
        report.records,
        3 + 2 * 20_000 * 12,
        "run_start, the run's tracked_stats, run_stop and every event"
    );
}
