//! Training loops that are not one synchronous thread: the loop in a tokio runtime (multi-
//! and current-thread, steps awaited in place or spawned, one at a time or all at once), a
//! data-loader thread logging while the trainer holds `run`, steps closed on another thread
//! than the one that opened them. Each must give the statistics of the same loop run
//! synchronously: step state is keyed by span id, so a step counts wherever it closes.
//! Also: warmup steps inside `run` count for nothing, and which ranks write.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tracing::field::Empty;
use tracing::{info_span, Dispatch, Instrument, Span};
use tracing_mllog::compliance::LivePolicy;
use tracing_mllog::record::parse_log;
use tracing_mllog::record::TracedRecord;
use tracing_mllog::sink::MemorySink;
use tracing_mllog::Output;
use tracing_mllog::Ranks;
use tracing_mllog::{
    keys, mllog, train_step, Builder, MllogLayer, Record, RunHandle, Target, Value,
};
use tracing_subscriber::prelude::*;

const BLOCKS: u64 = 3;
const STEPS_PER_BLOCK: u64 = 20;
const STEPS: u64 = BLOCKS * STEPS_PER_BLOCK;
const SAMPLES: u64 = 32;
const LOSS_EVERY: u64 = 10;

fn loss_of(step: u64) -> f64 {
    1.0 / (step + 1) as f64
}

/// The eval metric after block `b`: the target (0.5) is reached after the last block.
fn eval_of(b: u64) -> f64 {
    [0.9, 0.7, 0.45][b as usize]
}

fn steps_of(block: u64) -> std::ops::Range<u64> {
    block * STEPS_PER_BLOCK..(block + 1) * STEPS_PER_BLOCK
}

/// An MLLOG "file" in memory: what the worker writes, readable after the guard is dropped.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn builder() -> Builder {
    MllogLayer::builder()
        .global_batch_size(SAMPLES)
        .train_loss_every(LOSS_EVERY)
        .target(Target::at_most(0.5))
        .live_check(LivePolicy::Off)
}

/// Runs `f` with a fresh layer (writing MLLOG text into memory) as its dispatcher, checks the
/// run handle, and returns the records parsed back from the text.
fn run(f: impl FnOnce(&Dispatch)) -> Vec<TracedRecord> {
    let buffer = Buffer::default();
    let (layer, guard) = builder()
        .output(Output::writer(buffer.clone()))
        .build()
        .unwrap();
    let handle = layer.run_handle();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    f(&dispatch);
    drop(dispatch);
    let report = drop_guard(guard);
    assert!(report.is_clean(), "{report}");
    assert_handle(&handle);
    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    let (lines, errors) = parse_log(&text);
    assert!(errors.is_empty(), "{errors:?}");
    lines.into_iter().map(|l| l.record.into()).collect()
}

fn drop_guard(mut guard: tracing_mllog::Guard) -> tracing_mllog::Report {
    guard.shutdown()
}

fn assert_handle(handle: &RunHandle) {
    assert_eq!(handle.steps(), STEPS);
    assert_eq!(handle.samples(), STEPS * SAMPLES);
    assert!(handle.converged());
}

fn int(r: &Record, name: &str) -> Option<i128> {
    r.metadata.get(name).and_then(Value::as_i128)
}

/// What the layer counted, as the log shows it.
#[derive(Debug, PartialEq)]
struct Stats {
    run_stop: (Option<i128>, Option<String>),
    /// The run's `tracked_stats`: steps and samples_count.
    overall: (Option<i128>, Option<i128>),
    /// Per block: `block_stop` samples_count, and the block's `tracked_stats` steps.
    blocks: Vec<(Option<i128>, Option<i128>)>,
    /// `eval_accuracy` samples_count.
    evals: Vec<Option<i128>>,
    /// `train_loss`: step, value, samples_count.
    train_loss: Vec<(Option<i128>, Option<f64>, Option<i128>)>,
}

fn stats(records: &[TracedRecord]) -> Stats {
    let of = |key: &'static str| records.iter().filter(move |r| r.key == key);
    let run_stop = of("run_stop").collect::<Vec<_>>();
    assert_eq!(
        run_stop.len(),
        1,
        "{:?}",
        records.iter().map(|r| &*r.key).collect::<Vec<_>>()
    );
    let (overall, per_block): (Vec<&TracedRecord>, Vec<&TracedRecord>) =
        of("tracked_stats").partition(|r| r.metadata.get("overall") == Some(&Value::Bool(true)));
    assert_eq!(overall.len(), 1);
    Stats {
        run_stop: (
            int(run_stop[0], "samples_count"),
            run_stop[0]
                .metadata
                .get("status")
                .and_then(Value::as_str)
                .map(str::to_owned),
        ),
        overall: (int(overall[0], "steps"), int(overall[0], "samples_count")),
        blocks: of("block_stop")
            .zip(&per_block)
            .map(|(stop, stats)| (int(stop, "samples_count"), int(stats, "steps")))
            .collect(),
        evals: of("eval_accuracy")
            .map(|r| int(r, "samples_count"))
            .collect(),
        train_loss: of("train_loss")
            .map(|r| (int(r, "step"), r.value.as_f64(), int(r, "samples_count")))
            .collect(),
    }
}

/// The reference: the loop on one thread, no runtime.
fn synchronous() -> Stats {
    stats(&run(|dispatch| {
        tracing::dispatcher::with_default(dispatch, || {
            let _run = info_span!("run").entered();
            for b in 0..BLOCKS {
                {
                    let _block = info_span!("block").entered();
                    for i in steps_of(b) {
                        let s = info_span!("train_step", step = i, samples = SAMPLES, loss = Empty)
                            .entered();
                        s.record("loss", loss_of(i));
                    }
                }
                let _eval = info_span!("eval").entered();
                mllog!(keys::EVAL_ACCURACY, eval_of(b));
            }
        })
    }))
}

#[test]
fn the_synchronous_reference_is_what_the_layer_should_count() {
    let s = synchronous();
    let total = (STEPS * SAMPLES) as i128;
    assert_eq!(s.run_stop, (Some(total), Some("success".into())));
    assert_eq!(s.overall, (Some(STEPS as i128), Some(total)));
    let per_block = (STEPS_PER_BLOCK * SAMPLES) as i128;
    assert_eq!(
        s.blocks,
        (1..=BLOCKS as i128)
            .map(|b| (Some(b * per_block), Some(STEPS_PER_BLOCK as i128)))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        s.evals,
        (1..=BLOCKS as i128)
            .map(|b| Some(b * per_block))
            .collect::<Vec<_>>()
    );
    // Steps 0, 10, .., 50, each with the samples trained after it.
    assert_eq!(
        s.train_loss,
        (0..STEPS)
            .step_by(LOSS_EVERY as usize)
            .map(|i| (
                Some(i as i128),
                Some(loss_of(i)),
                Some(((i + 1) * SAMPLES) as i128)
            ))
            .collect::<Vec<_>>()
    );
}

/// How the async loop runs its steps.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Steps {
    /// Awaited in place, inside the block's future.
    InPlace,
    /// Each spawned as a task of its own and awaited before the next one.
    SpawnedInTurn,
}

/// One step: yields, computes its loss on the blocking pool (whose wake-up lets any worker
/// resume the task), records the loss on whatever thread it is then; counts in `moved`
/// whether it ended on another thread than it began.
async fn step(i: u64, moved: Arc<AtomicU64>) {
    let first = std::thread::current().id();
    tokio::task::yield_now().await;
    let loss = tokio::task::spawn_blocking(move || loss_of(i))
        .await
        .unwrap();
    Span::current().record("loss", loss);
    tokio::task::yield_now().await;
    if std::thread::current().id() != first {
        moved.fetch_add(1, Ordering::Relaxed);
    }
}

async fn training(steps: Steps, moved: Arc<AtomicU64>) {
    for b in 0..BLOCKS {
        async {
            for i in steps_of(b) {
                let span = info_span!("train_step", step = i, samples = SAMPLES, loss = Empty);
                let step = step(i, moved.clone()).instrument(span);
                match steps {
                    Steps::InPlace => step.await,
                    Steps::SpawnedInTurn => tokio::spawn(step).await.unwrap(),
                }
            }
        }
        .instrument(info_span!("block"))
        .await;
        async {
            tokio::task::yield_now().await;
            mllog!(keys::EVAL_ACCURACY, eval_of(b));
        }
        .instrument(info_span!("eval"))
        .await;
    }
}

thread_local! {
    static WORKER_DEFAULT: std::cell::RefCell<Option<tracing::subscriber::DefaultGuard>> =
        const { std::cell::RefCell::new(None) };
}

/// A 4-worker runtime whose threads have `dispatch` as their default, as they would with a
/// global subscriber (`.init()`), which a test cannot install: the `Registry` closes a span's
/// parent through the default dispatcher of the thread where the span closes, so a child span
/// closed on a thread without it leaves its parent (the block, and so the run) open forever.
fn multi_thread(dispatch: &Dispatch) -> tokio::runtime::Runtime {
    let start = dispatch.clone();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .on_thread_start(move || {
            let guard = tracing::dispatcher::set_default(&start);
            WORKER_DEFAULT.with(|d| *d.borrow_mut() = Some(guard));
        })
        .on_thread_stop(|| WORKER_DEFAULT.with(|d| drop(d.borrow_mut().take())))
        .build()
        .unwrap()
}

/// The whole loop as a task of a 4-worker runtime (not on the thread that blocks on it);
/// also returns how many steps ended on another thread than they began.
fn in_multi_thread_runtime(steps: Steps) -> (Stats, u64) {
    let moved = Arc::new(AtomicU64::new(0));
    let stats = stats(&run(|dispatch| {
        let rt = multi_thread(dispatch);
        let run = tracing::dispatcher::with_default(dispatch, || info_span!("run"));
        let task = training(steps, moved.clone()).instrument(run);
        rt.block_on(async { tokio::spawn(task).await.unwrap() });
    }));
    (stats, moved.load(Ordering::Relaxed))
}

/// Runs `attempt` (which returns what it counted and how many steps moved between threads)
/// until a step has moved at least once, comparing every attempt with the synchronous loop.
/// Steps nearly always move in the first attempt; the retries only keep the test from
/// passing without ever having moved one.
fn until_a_step_moved(mut attempt: impl FnMut() -> (Stats, u64)) {
    let reference = synchronous();
    for _ in 0..50 {
        let (stats, moved) = attempt();
        assert_eq!(stats, reference);
        if moved > 0 {
            return;
        }
    }
    panic!("in 50 runs no step ever ended on another thread than it began");
}

#[test]
fn a_multi_thread_runtime_counts_like_a_synchronous_loop() {
    until_a_step_moved(|| in_multi_thread_runtime(Steps::InPlace));
}

#[test]
fn spawned_steps_count_like_a_synchronous_loop() {
    until_a_step_moved(|| in_multi_thread_runtime(Steps::SpawnedInTurn));
}

#[test]
fn a_current_thread_runtime_counts_like_a_synchronous_loop() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for steps in [Steps::InPlace, Steps::SpawnedInTurn] {
        let s = stats(&run(|dispatch| {
            tracing::dispatcher::with_default(dispatch, || {
                let moved = Arc::new(AtomicU64::new(0));
                rt.block_on(training(steps, moved).instrument(info_span!("run")))
            })
        }));
        assert_eq!(s, synchronous(), "{steps:?}");
    }
}

/// Every step of a block spawned at once and joined: they finish in any order on any worker,
/// so which samples count each `train_loss` sees is not fixed, but everything counted is.
#[test]
fn concurrent_spawned_steps_are_each_counted_once() {
    let s = stats(&run(|dispatch| {
        let rt = multi_thread(dispatch);
        let moved = Arc::new(AtomicU64::new(0));
        let task = async move {
            for b in 0..BLOCKS {
                async {
                    let tasks: Vec<_> = steps_of(b)
                        .map(|i| {
                            let span =
                                info_span!("train_step", step = i, samples = SAMPLES, loss = Empty);
                            tokio::spawn(step(i, moved.clone()).instrument(span))
                        })
                        .collect();
                    for t in tasks {
                        t.await.unwrap();
                    }
                }
                .instrument(info_span!("block"))
                .await;
                let _eval = info_span!("eval").entered();
                mllog!(keys::EVAL_ACCURACY, eval_of(b));
            }
        };
        let run = tracing::dispatcher::with_default(dispatch, || info_span!("run"));
        rt.block_on(async { tokio::spawn(task.instrument(run)).await.unwrap() });
    }));
    let reference = synchronous();
    assert_eq!(s.run_stop, reference.run_stop);
    assert_eq!(s.overall, reference.overall);
    assert_eq!(s.blocks, reference.blocks);
    assert_eq!(s.evals, reference.evals);
    let mut losses: Vec<_> = s.train_loss.iter().map(|(i, v, _)| (*i, *v)).collect();
    losses.sort_by_key(|(i, _)| *i);
    let expected: Vec<_> = reference
        .train_loss
        .iter()
        .map(|(i, v, _)| (*i, *v))
        .collect();
    assert_eq!(losses, expected);
    // Each counts the samples of at least its own step, within its block.
    for (i, _, count) in &s.train_loss {
        let block = i.unwrap() as u64 / STEPS_PER_BLOCK;
        let count = count.unwrap() as u64;
        assert!(
            count > block * STEPS_PER_BLOCK * SAMPLES
                && count <= (block + 1) * STEPS_PER_BLOCK * SAMPLES
                && count.is_multiple_of(SAMPLES),
            "{:?}",
            s.train_loss
        );
    }
}

/// A data-loader thread logs an event for every batch it hands over, while the trainer holds
/// `run` on its own thread: the loader's records land in the run, and the counts stay those
/// of the synchronous loop.
#[test]
fn a_data_loader_thread_logs_while_the_trainer_holds_the_run() {
    const LOADED: &str = "data_loader_batch";
    let records = run(|dispatch| {
        tracing::dispatcher::with_default(dispatch, || {
            let _run = info_span!("run").entered();
            let (tx, rx) = mpsc::sync_channel::<u64>(1);
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    tracing::dispatcher::with_default(dispatch, || {
                        for i in 0..STEPS {
                            mllog!(LOADED, i);
                            tx.send(i).unwrap();
                        }
                    })
                });
                for b in 0..BLOCKS {
                    {
                        let _block = info_span!("block").entered();
                        for i in steps_of(b) {
                            assert_eq!(rx.recv().unwrap(), i);
                            let s =
                                info_span!("train_step", step = i, samples = SAMPLES, loss = Empty)
                                    .entered();
                            s.record("loss", loss_of(i));
                        }
                    }
                    let _eval = info_span!("eval").entered();
                    mllog!(keys::EVAL_ACCURACY, eval_of(b));
                }
            });
        })
    });
    assert_eq!(stats(&records), synchronous());
    let keys: Vec<&str> = records.iter().map(|r| &*r.key).collect();
    let run_start = keys.iter().position(|k| *k == "run_start").unwrap();
    let run_stop = keys.iter().position(|k| *k == "run_stop").unwrap();
    let loaded: Vec<usize> = (0..keys.len()).filter(|&i| keys[i] == LOADED).collect();
    assert_eq!(loaded.len(), STEPS as usize);
    assert!(
        loaded.iter().all(|&i| run_start < i && i < run_stop),
        "{keys:?}"
    );
    let values: Vec<_> = loaded.iter().map(|&i| records[i].value.as_i128()).collect();
    assert_eq!(values, (0..STEPS as i128).map(Some).collect::<Vec<_>>());
}

/// Steps opened (and entered, and given their loss) on the trainer thread, and closed, by
/// dropping the span, on another thread: child spans of the block, closed on a thread that
/// has the subscriber as its default (as with a global one), and root steps (`train_step!`),
/// closed on a thread that has no subscriber at all (a root span has no parent for the
/// `Registry` to close through that thread's default).
#[test]
fn steps_closed_on_another_thread_count_like_a_synchronous_loop() {
    for root in [false, true] {
        let records = run(|dispatch| {
            let (to_closer, spans) = mpsc::channel::<Span>();
            let (closed, done) = mpsc::channel::<()>();
            std::thread::scope(|scope| {
                let closer = scope.spawn(move || {
                    let close_all = || {
                        for span in spans {
                            drop(span);
                            closed.send(()).unwrap();
                        }
                    };
                    if root {
                        close_all()
                    } else {
                        tracing::dispatcher::with_default(dispatch, close_all)
                    }
                });
                tracing::dispatcher::with_default(dispatch, || {
                    let _run = info_span!("run").entered();
                    for b in 0..BLOCKS {
                        {
                            let _block = info_span!("block").entered();
                            for i in steps_of(b) {
                                let span = if root {
                                    train_step!(step = i, samples = SAMPLES, loss = Empty)
                                } else {
                                    info_span!(
                                        "train_step",
                                        step = i,
                                        samples = SAMPLES,
                                        loss = Empty
                                    )
                                };
                                span.in_scope(|| {
                                    Span::current().record("loss", loss_of(i));
                                });
                                to_closer.send(span).unwrap();
                                // In turn, as a loop would: a step ends before the next begins.
                                done.recv().unwrap();
                            }
                        }
                        let _eval = info_span!("eval").entered();
                        mllog!(keys::EVAL_ACCURACY, eval_of(b));
                    }
                });
                drop(to_closer);
                closer.join().unwrap();
            });
        });
        assert_eq!(stats(&records), synchronous(), "root steps: {root}");
    }
}

// ---------------------------------------------------------------------------------------------
// Warmup inside the run.

/// Runs `f` with a layer that traces steps and logs every step's loss; returns what a
/// [`MemorySink`] received (trace-only records included) and the run handle.
fn run_traced(f: impl FnOnce(&Dispatch)) -> (Vec<TracedRecord>, RunHandle) {
    let (sink, records) = MemorySink::new();
    let (layer, guard) = builder()
        .output(Output::Nowhere)
        .sink(sink)
        .train_loss_every(1)
        .trace_steps(true)
        .build()
        .unwrap();
    let handle = layer.run_handle();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    f(&dispatch);
    drop(dispatch);
    drop_guard(guard);
    (records.records(), handle)
}

const WARMUP_LOSS: f64 = 9.0;

fn assert_warmup_not_counted(records: &[TracedRecord], handle: &RunHandle, counted: u64) {
    assert_eq!(handle.steps(), counted);
    assert_eq!(handle.samples(), counted * SAMPLES);
    let count = |key: &str| records.iter().filter(|r| r.key == key).count() as u64;
    assert_eq!(
        count("train_step_start"),
        counted,
        "warmup steps are not traced"
    );
    assert_eq!(count("train_step_stop"), counted);
    let losses: Vec<f64> = records
        .iter()
        .filter(|r| r.key == "train_loss")
        .map(|r| r.value.as_f64().unwrap())
        .collect();
    assert_eq!(losses.len() as u64, counted);
    assert!(!losses.contains(&WARMUP_LOSS), "{losses:?}");
    let overall = records
        .iter()
        .find(|r| r.key == "tracked_stats" && r.metadata.get("overall").is_some())
        .unwrap();
    assert_eq!(int(overall, "steps"), Some(counted as i128));
    let run_stop = records.iter().find(|r| r.key == "run_stop").unwrap();
    assert_eq!(
        int(run_stop, "samples_count"),
        Some((counted * SAMPLES) as i128)
    );
}

#[test]
fn warmup_steps_inside_the_run_are_neither_counted_nor_traced() {
    let (records, handle) = run_traced(|dispatch| {
        tracing::dispatcher::with_default(dispatch, || {
            let _run = info_span!("run").entered();
            {
                let _warmup = info_span!("warmup").entered();
                for i in 0..5u64 {
                    drop(
                        info_span!(
                            "train_step",
                            step = i,
                            samples = SAMPLES,
                            loss = WARMUP_LOSS
                        )
                        .entered(),
                    );
                }
            }
            let _block = info_span!("block").entered();
            for i in 0..10u64 {
                drop(
                    info_span!("train_step", step = i, samples = SAMPLES, loss = loss_of(i))
                        .entered(),
                );
            }
        })
    });
    assert_warmup_not_counted(&records, &handle, 10);
}

/// The same with the warmup as a future and its steps spawned on other workers: the warmup
/// span is open on no thread in particular, yet its steps count for nothing.
#[test]
fn warmup_steps_spawned_on_other_threads_are_neither_counted_nor_traced() {
    let (records, handle) = run_traced(|dispatch| {
        let rt = multi_thread(dispatch);
        let task = async {
            async {
                for i in 0..5u64 {
                    let span = info_span!(
                        "train_step",
                        step = i,
                        samples = SAMPLES,
                        loss = WARMUP_LOSS
                    );
                    tokio::spawn(tokio::task::yield_now().instrument(span))
                        .await
                        .unwrap();
                }
            }
            .instrument(info_span!("warmup"))
            .await;
            async {
                for i in 0..10u64 {
                    let span = info_span!("train_step", step = i, samples = SAMPLES, loss = Empty);
                    tokio::spawn(step(i, Arc::default()).instrument(span))
                        .await
                        .unwrap();
                }
            }
            .instrument(info_span!("block"))
            .await;
        };
        let run = tracing::dispatcher::with_default(dispatch, || info_span!("run"));
        rt.block_on(async { tokio::spawn(task.instrument(run)).await.unwrap() });
    });
    assert_warmup_not_counted(&records, &handle, 10);
}

// ---------------------------------------------------------------------------------------------
// Which ranks write.

/// Builds with output to `dir/name`, runs a short run, and returns whether the layer wrote
/// and the file's text (`None`: no file).
fn rank_run(dir: &Path, name: &str, builder: Builder) -> (bool, Option<String>) {
    let path = dir.join(name);
    let (layer, mut guard) = builder
        .output(Output::file(&path))
        .live_check(LivePolicy::Off)
        .build()
        .unwrap();
    let writes = layer.writes();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        drop(info_span!("init").entered());
        let _run = info_span!("run").entered();
        drop(info_span!("train_step", samples = 4u64).entered());
    });
    let report = guard.shutdown();
    assert_eq!(report.writes, writes, "{name}");
    (writes, std::fs::read_to_string(&path).ok())
}

#[test]
fn the_writer_rank_writes_and_other_ranks_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let no_env = MllogLayer::builder;
    let env = |vars: &[(&str, &str)]| MllogLayer::builder().environment(vars.iter().copied());
    let cases: Vec<(&str, Builder, bool)> = vec![
        (
            "rank1_writer1",
            no_env().ranks(Ranks::default().rank(1).writer(1)),
            true,
        ),
        (
            "rank0_writer1",
            no_env().ranks(Ranks::default().rank(0).writer(1)),
            false,
        ),
        (
            "rank1_writer0",
            no_env().ranks(Ranks::default().rank(1)),
            false,
        ),
        (
            "all_rank0",
            no_env().ranks(Ranks::default().rank(0).writer(1).all_write(true)),
            true,
        ),
        (
            "all_rank1",
            no_env().ranks(Ranks::default().rank(1).all_write(true)),
            true,
        ),
        (
            "env_rank1_writer1",
            env(&[("RANK", "1")]).ranks(Ranks::default().writer(1)),
            true,
        ),
        ("env_slurm1", env(&[("SLURM_PROCID", "1")]), false),
        // RANK comes first among the rank variables.
        (
            "env_rank0_slurm1",
            env(&[("RANK", "0"), ("SLURM_PROCID", "1")]),
            true,
        ),
        (
            "env_slurm1_all",
            env(&[("SLURM_PROCID", "1"), ("MLLOG_ALL_RANKS", "1")]),
            true,
        ),
        (
            "env_rank2_all",
            env(&[("RANK", "2"), ("MLLOG_ALL_RANKS", "true")]),
            true,
        ),
    ];
    for (name, builder, expect) in cases {
        let (writes, text) = rank_run(dir.path(), name, builder);
        assert_eq!(writes, expect, "{name}");
        if expect {
            let text = text.unwrap_or_else(|| panic!("{name}: no file"));
            assert!(text.contains("\"key\": \"run_start\""), "{name}: {text}");
            assert!(text.contains("\"key\": \"run_stop\""), "{name}: {text}");
        } else {
            assert_eq!(text, None, "{name}: a rank that does not write made a file");
        }
    }
}
