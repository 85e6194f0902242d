//! Instruction budgets for the hot path, counted with `valgrind --tool=callgrind` (instruction
//! counts are repeatable on a shared machine; wall-clock times are not).
//!
//! `cargo run --release --example budgets` re-runs itself under callgrind once per workload and
//! repetition count, takes the calling (main) thread's instructions inside the workload's
//! counted loop (start-up, warm-up and shutdown are not collected), and reports the marginal
//! cost per operation: `(Ir(N2) - Ir(N1)) / (N2 - N1)`, so what the first operations pay once
//! (callsite registration, first allocations) cancels out. Each workload is also measured on a
//! bare `Registry` and on the `Registry` with a layer that does nothing (the floor for any
//! layer), in the same run. Exits 1 when a budget is exceeded, unless `--report-only` is given (`.ci/run` runs it
//! without).
//!
//! With the `otel` feature it also counts the per-span cost on the training thread with the
//! OpenTelemetry sink on (the SDK work happens on our worker) beside tracing-opentelemetry's
//! layer with the SDK's batch processor doing the same spans (the target: no slower), both into
//! a no-op exporter.
//!
//! With the `nvtx` feature it counts the training thread's cost with an `NvtxSink` on beside
//! the MLLOG file against the MLLOG file alone (the target: the same, the NVTX calls are made
//! on the pipeline's worker).
//!
//! Run one workload directly: `budgets run <stack>:<workload> <n>` (stacks: `mllog`,
//! `registry`, `empty_layer`, `rank1`, `mllog_barrier`, `rank1_barrier`, `mllog_nvtx`,
//! `mllog_otel`, `tracing_otel`).
//!
//! To see where a workload's instructions go, build with line tables
//! (`CARGO_PROFILE_RELEASE_DEBUG=line-tables-only`; the release profile has none, which keeps
//! CI's release builds short), run one workload under `valgrind --tool=callgrind
//! --collect-atstart=no --toggle-collect='*mllog_budget_counted*'` and read the output with
//! `callgrind_annotate --auto=yes`.

use std::process::Command;

use tracing::{info_span, Dispatch};
use tracing_mllog::barrier::Barrier;
use tracing_mllog::{keys, mllog, train_step, MllogLayer, Output, Pipeline};
use tracing_subscriber::prelude::*;

#[path = "../benches/support/perf_doc.rs"]
mod perf_doc;
#[path = "../benches/support/stacks.rs"]
mod support;

/// How a budget is set: instructions per operation, or a multiple of a bare `Registry` measured
/// on the same workload in the same run.
#[derive(Clone, Copy)]
enum Budget {
    Ir(u64),
    TimesRegistry(f64),
}

/// The budgets, on the calling thread, dispatch included.
///
/// Derivation (measured on a 2-core x86_64 machine like CI's): a bare
/// `Registry` costs 124 instructions per event and 731 per span lifecycle of a root span
/// (`info_span!("train_step", step = i)` + enter + drop, no parent); tracing-subscriber's JSON
/// fmt layer about 12,600 per event.
/// - `event_3_fields`, an emitted event with 3 numeric fields: clock read + field capture +
///   channel push, with formatting and I/O on the worker: 1,000;
/// - `train_step_span`, a counted step with 2 fields that emits no line, opened with
///   `train_step!` (a root span, the shape the 731 was measured on) inside the entered `run`:
///   about 2x a bare Registry: 1,500;
/// - `train_step_child`, the same step opened with `info_span!` inside the entered `run`, so
///   a child of `run`: the `Registry`'s bookkeeping of the parent (a reference taken at open,
///   dropped through a second dispatch at close, ~500) is in neither the 731 nor the layer's
///   control, so the same "about 2x a bare Registry" is applied to a bare Registry on this
///   workload, measured in the same run;
/// - `train_step_async`, the step of an async loop: a future instrumented with a
///   `train_step!` span, polled twice (it yields once, as a step awaiting its data does), so
///   the span is entered and exited twice: the same "about 2x a bare Registry" on this
///   workload;
/// - `event_f32` (an `f32` value and a numeric field), `event_string` (a string value, a
///   string field that is no MLLOG constant, a numeric one) and `event_small_list` (a
///   two-float list value and a numeric field): the same 1,000 as any event. What they pay
///   over numbers: the `f32` conversion to its shortest decimal at the call site (~150, also
///   with a bare Registry: `tracing` widens an `f32` before any layer sees it); a string copy
///   (into a buffer the recycled record kept, no allocation: ~60 per string); a list can only
///   reach a layer as `Debug` (`tracing::Value` is sealed), so `core::fmt::write` (~50), the
///   hand-over and the list built in a kept buffer: ~110 more than a number value;
/// - `event_eval_accuracy` (with `epoch_num` and `samples_count`) and `event_custom_key` (a
///   key that is no MLLOG constant, a short string value, one numeric field): the same 1,000.
///   An `eval_accuracy` also feeds the run's convergence, looks once at its progress fields
///   and wakes the worker; a key of the program's own is kept once per key and process, so
///   its callsite's next events compare it instead of looking it up and copying it;
/// - `event_str_*`, strings as programs write them across the class the budget holds for
///   (`k<key bytes>_v<value bytes>`, then the metadata fields beside them: `s` strings, `n`
///   numbers; keys up to 32 bytes, string values, the record's and its metadata's, up to 64,
///   up to three metadata fields): the same 1,000. Each metadata field costs tracing's visit
///   of it and a raw capture (a few stores into the record's inline slots, a string also its
///   one copy into the record's text buffer, whatever its length in that range); making them
///   values is the worker's (`docs/design.md`);
/// - anything on a rank that does not write: 1.1x a bare Registry on the same workload, with
///   a barrier (`Builder::barrier`) as without one;
/// - the barrier, once per rank when `run` opens: a thread for it and a channel to wait on
///   (the wait itself is the communicator's, spent asleep), against the same `run` span
///   without a barrier: [`BARRIER_ONCE`].
const BUDGETS: &[(&str, Budget)] = &[
    ("event_3_fields", Budget::Ir(1_000)),
    ("event_string", Budget::Ir(1_000)),
    ("event_f32", Budget::Ir(1_000)),
    ("event_small_list", Budget::Ir(1_000)),
    ("event_eval_accuracy", Budget::Ir(1_000)),
    ("event_custom_key", Budget::Ir(1_000)),
    ("event_str_k1_v1", Budget::Ir(1_000)),
    ("event_str_k14_v18", Budget::Ir(1_000)),
    ("event_str_k24_v45", Budget::Ir(1_000)),
    ("event_str_k32_v64", Budget::Ir(1_000)),
    ("event_str_k8_v8", Budget::Ir(1_000)),
    ("event_str_k16_v32_s1n1", Budget::Ir(1_000)),
    ("event_str_k8_v32_s1n2", Budget::Ir(1_000)),
    ("event_str_k32_v64_n3", Budget::Ir(1_000)),
    ("event_str_k32_v64_s1n2", Budget::Ir(1_000)),
    ("event_str_k32_v64_s2n1", Budget::Ir(1_000)),
    ("event_str_k32_v64_s3", Budget::Ir(1_000)),
    ("train_step_span", Budget::Ir(1_500)),
    ("train_step_child", Budget::TimesRegistry(2.0)),
    ("train_step_async", Budget::TimesRegistry(2.0)),
];
const RANK_RATIO: f64 = 1.1;
/// How far docs/performance.md's committed counts may be from CI's: another build of the same
/// sources moves a count by a few instructions at most.
const COUNTS_MOVE: perf_doc::Tolerance = perf_doc::Tolerance {
    relative: 0.03,
    absolute: 5.0,
};
/// What passing a barrier that returns at once adds to opening the first `run` on one rank:
/// starting the barrier's thread and waiting on its channel (on a rank that writes nothing,
/// also the `run` callsite's registration with the filter that lets it through). Once per
/// process, so the budget is "well under a millisecond": about twice what it measures, so that
/// a regression (a lock held over the wait, a per-call allocation loop) shows.
const BARRIER_ONCE: u64 = 30_000;
/// The NVTX sink beside the MLLOG file against the MLLOG file alone, on the training thread:
/// the sink runs on the pipeline's worker, so nothing but measurement noise (a few
/// instructions per operation) may separate them.
const NVTX_RATIO: f64 = 1.02;

/// The two operation counts whose difference is measured: for spans, many (a bare `Registry`
/// grows its slab as closed spans are never released, so its cost per span moves with the
/// count; these are the counts its figures were always taken at); for events, fewer than the
/// queue holds (see `events`).
fn counts(workload: &str) -> (u64, u64) {
    if workload.starts_with("event") {
        (1_000, 3_500)
    } else {
        (2_000, 12_000)
    }
}
/// The queue's capacity in the measured stack.
const QUEUE: u64 = 1 << 14;
/// Events that cycle the record pool (`QUEUE` + 2 records) before the counted ones.
const POOL_WARMUP: u64 = 2 * QUEUE;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 4 && args[1] == "run" {
        let n: u64 = args[3].parse().expect("count");
        let (stack, workload) = args[2].split_once(':').expect("<stack>:<workload>");
        return run(stack, workload, n);
    }
    let exe = std::env::current_exe().expect("own path");
    // Several tables compare with the same run (a bare `Registry`, the MLLOG file alone).
    // Each (stack, workload, counts) is counted once: counting it again would give the same
    // count, and the callgrind runs are most of what this example costs.
    let counted = std::cell::RefCell::new(std::collections::HashMap::new());
    let measure_at = |stack: &str, workload: &str, (n1, n2): (u64, u64)| -> f64 {
        let key = (stack.to_string(), workload.to_string(), n1, n2);
        if let Some(&per_op) = counted.borrow().get(&key) {
            return per_op;
        }
        let ir = |n: u64| -> u64 {
            let dir = tempfile_dir();
            let out = dir.join("cg.out");
            let status = Command::new("valgrind")
                .args([
                    "--tool=callgrind",
                    "--separate-threads=yes",
                    "--collect-atstart=no",
                    "--toggle-collect=*mllog_budget_counted*",
                ])
                .arg(format!("--callgrind-out-file={}", out.display()))
                .arg(&exe)
                .args(["run", &format!("{stack}:{workload}"), &n.to_string()])
                .env("RANK", if stack.starts_with("rank1") { "1" } else { "0" })
                .output()
                .expect("valgrind (apt-get install valgrind)");
            assert!(
                status.status.success(),
                "{}",
                String::from_utf8_lossy(&status.stderr)
            );
            // Thread 1 is the main (calling) thread.
            let text = std::fs::read_to_string(dir.join("cg.out-01")).expect("callgrind output");
            let _ = std::fs::remove_dir_all(&dir);
            text.lines()
                .find_map(|l| {
                    l.strip_prefix("summary: ")
                        .or_else(|| l.strip_prefix("totals: "))
                })
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .expect("callgrind summary line")
        };
        let per_op = (ir(n2) as f64 - ir(n1) as f64) / (n2 - n1) as f64;
        counted.borrow_mut().insert(key, per_op);
        per_op
    };
    let measure = |stack: &str, workload: &str| measure_at(stack, workload, counts(workload));

    let report_only = args.iter().any(|a| a == "--report-only");
    let mut failed = false;
    let mut verdict = |ok: bool| -> String {
        failed |= !ok;
        if ok { "ok" } else { "OVER BUDGET" }.to_string()
    };
    let mut tables = Vec::new();

    let mut events = Table::new(
        vec![
            "workload",
            "Ir/op",
            "Registry",
            "EmptyLayer",
            "ratio",
            "budget",
            "verdict",
        ],
        "Instructions per operation on the calling thread, dispatch included. Registry: a bare \
         tracing_subscriber::Registry; EmptyLayer: the Registry plus a layer that does nothing, \
         the floor for any layer; ratio: ours over the Registry.",
    );
    for &(workload, budget) in BUDGETS {
        let got = measure("mllog", workload);
        let base = measure("registry", workload);
        let floor = measure("empty_layer", workload);
        let (ok, shown) = match budget {
            Budget::Ir(limit) => (got <= limit as f64, limit.to_string()),
            Budget::TimesRegistry(x) => (got / base <= x, format!("x{x:.1}")),
        };
        events.push(
            vec![
                workload.into(),
                format!("{got:.0}"),
                format!("{base:.0}"),
                format!("{floor:.0}"),
                format!("{:.2}", got / base),
                shown,
                verdict(ok),
            ],
            what(workload),
        );
    }
    // A rank that writes nothing, without and with a barrier (then only `run` reaches the
    // layer).
    for (stack, workloads) in [
        (
            "rank1",
            &[
                "event_3_fields",
                "train_step_span",
                "train_step_child",
                "train_step_async",
            ][..],
        ),
        (
            "rank1_barrier",
            &["event_3_fields", "train_step_span", "train_step_child"][..],
        ),
    ] {
        for &workload in workloads {
            let (o, b) = (measure(stack, workload), measure("registry", workload));
            let ratio = o / b;
            events.push(
                vec![
                    format!("{stack}_{workload}"),
                    format!("{o:.0}"),
                    format!("{b:.0}"),
                    String::new(),
                    format!("{ratio:.2}"),
                    format!("x{RANK_RATIO}"),
                    verdict(ratio <= RANK_RATIO),
                ],
                format!("{}, on a rank that writes nothing{}", what(workload), {
                    if stack.ends_with("barrier") {
                        ", with a barrier"
                    } else {
                        ""
                    }
                }),
            );
        }
    }
    tables.push(("budgets", events, Some(COUNTS_MOVE)));

    let mut barrier = Table::new(
        vec![
            "barrier, once per rank",
            "with",
            "without",
            "barrier",
            "budget",
            "verdict",
        ],
        "Instructions on the rank's thread to open the first `run`, with and without a barrier \
         that returns at once: the barrier's thread is started and waited for once per process; \
         steps pay nothing for it.",
    );
    for (with, without) in [("mllog_barrier", "mllog"), ("rank1_barrier", "rank1")] {
        let a = measure_at(with, "run_span", (0, 1));
        let b = measure_at(without, "run_span", (0, 1));
        barrier.push(
            vec![
                with.into(),
                format!("{a:.0}"),
                format!("{b:.0}"),
                format!("{:.0}", a - b),
                BARRIER_ONCE.to_string(),
                verdict(a - b <= BARRIER_ONCE as f64),
            ],
            if with == "mllog_barrier" {
                "the first `run` on a rank that writes".into()
            } else {
                "the first `run` on a rank that writes nothing".into()
            },
        );
    }
    // Starting a thread and waiting on it, and tracing-opentelemetry's batch processor handing
    // spans to its own thread, cost the calling thread what the scheduler makes of them: the
    // counts move by several percent from run to run, so the check holds these rows, not
    // their figures (the budget verdicts above still hold them).
    tables.push(("budgets-barrier", barrier, None));

    if cfg!(feature = "otel-sdk") {
        let mut otel = Table::new(
            vec![
                "OTel export on",
                "ours",
                "tracing-opentelemetry",
                "ratio",
                "target",
                "verdict",
            ],
            "Instructions on the training thread per span, the SDK's work included where it runs \
             there: on our worker for ours, on the calling thread for tracing-opentelemetry. Our \
             train_step spans are traced: MLLOG_TRACE_STEPS.",
        );
        for workload in ["block_span", "train_step_child"] {
            let ours = measure("mllog_otel", workload);
            let theirs = measure("tracing_otel", workload);
            let ratio = ours / theirs;
            otel.push(
                vec![
                    workload.into(),
                    format!("{ours:.0}"),
                    format!("{theirs:.0}"),
                    format!("{ratio:.2}"),
                    "<= 1.00".into(),
                    verdict(ratio <= 1.0),
                ],
                what(workload),
            );
        }
        tables.push(("budgets-otel", otel, None));
    }
    if cfg!(feature = "nvtx") {
        let mut nvtx = Table::new(
            vec![
                "NVTX sink on",
                "ours",
                "without",
                "ratio",
                "target",
                "verdict",
            ],
            "Instructions on the training thread per operation with an NvtxSink beside the MLLOG \
             file, against the MLLOG file alone: the ranges and marks are made on the pipeline's \
             worker.",
        );
        // Few enough blocks (two records each) that the worker is never woken (see `events`).
        for (workload, n) in [
            ("event_3_fields", counts("event_3_fields")),
            ("block_span", (1_000, 3_500)),
        ] {
            let with = measure_at("mllog_nvtx", workload, n);
            let without = measure_at("mllog", workload, n);
            let ratio = with / without;
            nvtx.push(
                vec![
                    workload.into(),
                    format!("{with:.0}"),
                    format!("{without:.0}"),
                    format!("{ratio:.2}"),
                    format!("<= {NVTX_RATIO:.2}"),
                    verdict(ratio <= NVTX_RATIO),
                ],
                what(workload),
            );
        }
        tables.push(("budgets-nvtx", nvtx, Some(COUNTS_MOVE)));
    }

    for (_, table, _) in &tables {
        println!("{}", table.text());
    }
    let mut doc_failed = false;
    if let Some(action) = perf_doc::doc_action(&args) {
        for (name, table, tolerance) in &tables {
            let result = match &action {
                perf_doc::DocAction::Write(file) => {
                    perf_doc::write_block(file, name, &table.markdown())
                }
                perf_doc::DocAction::Check(file) => {
                    perf_doc::check_block(file, name, &table.markdown(), *tolerance)
                }
            };
            if let Err(e) = result {
                eprintln!("{e}");
                doc_failed = true;
            }
        }
    }
    if (failed && !report_only) || doc_failed {
        std::process::exit(1);
    }
}

/// A table printed both ways: aligned text for the terminal, Markdown for the docs, where each
/// row also says what it measures (the second column).
struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
    what: Vec<String>,
    /// A sentence under the table.
    note: &'static str,
}

impl Table {
    fn new(header: Vec<&'static str>, note: &'static str) -> Self {
        Table {
            header,
            rows: Vec::new(),
            what: Vec::new(),
            note,
        }
    }

    fn push(&mut self, row: Vec<String>, what: String) {
        self.rows.push(row);
        self.what.push(what);
    }

    fn text(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.len()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: Vec<&str>| -> String {
            let mut out = String::new();
            for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
                // The first column left-aligned, the figures right-aligned.
                if i == 0 {
                    out.push_str(&format!("{cell:<w$}"));
                } else {
                    out.push_str(&format!("  {cell:>w$}"));
                }
            }
            out.trim_end().to_string() + "\n"
        };
        let mut out = line(self.header.clone());
        for row in &self.rows {
            out.push_str(&line(row.iter().map(String::as_str).collect()));
        }
        out + "(" + self.note + ")\n"
    }

    fn markdown(&self) -> String {
        let mut header = self.header.clone();
        header.insert(1, "what it measures");
        let mut out = format!("| {} |\n|", header.join(" | "));
        for i in 0..header.len() {
            out.push_str(if i < 2 { "---|" } else { "---:|" });
        }
        out.push('\n');
        for (row, what) in self.rows.iter().zip(&self.what) {
            let mut cells = row.clone();
            cells.insert(1, what.clone());
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out + "\n" + self.note + "\n"
    }
}

/// What a workload measures, in words, for docs/performance.md.
fn what(workload: &str) -> String {
    match workload {
        "event_3_fields" => "emitted MLLOG event, 3 numeric fields".into(),
        "event_string" => "emitted event, string value + string field + numeric field".into(),
        "event_f32" => "emitted event, `f32` value + numeric field".into(),
        "event_small_list" => "emitted event, two-float list value + numeric field".into(),
        "event_eval_accuracy" => {
            "emitted `eval_accuracy` with `epoch_num` + `samples_count` metadata".into()
        }
        "event_custom_key" => {
            "emitted event, custom key, short string value + numeric field".into()
        }
        "train_step_span" => {
            "`train_step!` span, 2 fields, counted inside `run` (a root span)".into()
        }
        "train_step_child" => {
            "`info_span!(\"train_step\")`, 2 fields, counted, child of `run`".into()
        }
        "train_step_async" => {
            "an async step: a future instrumented with `train_step!`, polled twice".into()
        }
        "block_span" => "a `block` interval (two records) inside `run`".into(),
        other => match other.strip_prefix("event_str_") {
            // `k<key bytes>_v<value bytes>[_s<string fields>n<numeric fields> | _n<numeric>]`
            Some(shape) => {
                let mut parts = shape.split('_');
                let key = parts.next().unwrap_or("").trim_start_matches('k');
                let value = parts.next().unwrap_or("").trim_start_matches('v');
                let fields = parts.next().unwrap_or("");
                let fields = match fields.split_once('n') {
                    _ if other == "event_str_k8_v8" => "no metadata field".into(),
                    Some((s, n)) => {
                        let s = s.trim_start_matches('s');
                        let s = if s.is_empty() { "0" } else { s };
                        format!("{s} string and {n} numeric metadata fields")
                    }
                    None => match fields.strip_prefix('s') {
                        Some(s) => format!("{s} string metadata fields"),
                        None => "numeric metadata fields".into(),
                    },
                };
                format!(
                    "emitted event, a key of the program's own ({key} bytes), a string value \
                     ({value} bytes), {fields}"
                )
            }
            None => other.into(),
        },
    }
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mllog-budgets-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A layer that does nothing: what any layer costs on top of the `Registry` (`Layered`'s
/// dispatch, the close guard), the floor for every layer.
struct EmptyLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for EmptyLayer {}

/// Whatever needs to live until the workload is done (guards, providers).
type KeepAlive = Box<dyn std::any::Any>;

fn stack(name: &str) -> (Dispatch, Option<KeepAlive>) {
    let ours = |builder: tracing_mllog::Builder| {
        let (layer, guard) = builder.global_batch_size(8).build().expect("layer");
        let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
        (dispatch, Some(Box::new(guard) as KeepAlive))
    };
    match name {
        "registry" => (Dispatch::new(tracing_subscriber::registry()), None),
        "empty_layer" => (
            Dispatch::new(tracing_subscriber::registry().with(EmptyLayer)),
            None,
        ),
        // A queue the counted events never fill a quarter of, and a worker that waits for
        // them (see `events`).
        "mllog" | "rank1" => ours(
            MllogLayer::builder()
                .output(Output::writer(std::io::sink()))
                .pipeline(
                    Pipeline::default()
                        .capacity(QUEUE as usize)
                        .max_delay(std::time::Duration::from_secs(3600)),
                ),
        ),
        // The same, with a barrier that returns at once.
        "mllog_barrier" | "rank1_barrier" => ours(
            MllogLayer::builder()
                .output(Output::writer(std::io::sink()))
                .pipeline(
                    Pipeline::default()
                        .capacity(QUEUE as usize)
                        .max_delay(std::time::Duration::from_secs(3600)),
                )
                .barrier(Barrier::new(|| {})),
        ),
        #[cfg(feature = "nvtx")]
        "mllog_nvtx" => ours(
            MllogLayer::builder()
                .output(Output::writer(std::io::sink()))
                .pipeline(
                    Pipeline::default()
                        .capacity(QUEUE as usize)
                        .max_delay(std::time::Duration::from_secs(3600)),
                )
                .sink(tracing_mllog::sink::NvtxSink::new()),
        ),
        #[cfg(feature = "otel-sdk")]
        "mllog_otel" => {
            use tracing_mllog::sink::{OtelConfig, OtelSink};
            let sink = OtelSink::with_span_exporter(otel::Nop, OtelConfig::new()).expect("sink");
            ours(
                MllogLayer::builder()
                    .output(Output::Nowhere)
                    .sink(sink)
                    .trace_steps(true),
            )
        }
        #[cfg(feature = "otel-sdk")]
        "tracing_otel" => {
            use opentelemetry::trace::TracerProvider as _;
            let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
                .with_batch_exporter(otel::Nop)
                .build();
            let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("budgets"));
            let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
            (dispatch, Some(Box::new(provider) as KeepAlive))
        }
        other => panic!("unknown stack {other}"),
    }
}

#[cfg(feature = "otel-sdk")]
mod otel {
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SpanData, SpanExporter};

    /// Takes spans and does nothing with them.
    #[derive(Debug)]
    pub struct Nop;

    impl SpanExporter for Nop {
        fn export(
            &self,
            _: Vec<SpanData>,
        ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
            std::future::ready(Ok(()))
        }
    }
}

/// Logs `n` events the way a training loop past its first few thousand does: the record pool
/// is cycled once first (every record then has the buffers a string or a list keeps) and the
/// worker has drained it, the same in every run so that it cancels. What is counted is the
/// training thread's own work, the clock read, the capture and the queue push, and never the
/// wake-up of a sleeping worker (a system call a real loop pays once per idle stretch, not per
/// event, `docs/design.md`): the stack's worker drains only when told to, and `n` stays below
/// the quarter-full mark at which a producer wakes it. Without this, whether callgrind, which
/// runs one thread at a time, had let the worker go idle moved every event workload by up to
/// 100 instructions from run to run.
fn events(keep: &Option<KeepAlive>, n: u64, log: impl Fn(u64)) {
    assert!(n < QUEUE / 4, "{n} events would wake the worker");
    let guard = keep
        .as_ref()
        .and_then(|k| k.downcast_ref::<tracing_mllog::Guard>());
    // The warm-up is counted in both runs, so it must cost the same in both: in chunks the
    // worker drains on request, never filling the queue to where a producer would wake it.
    let chunk = QUEUE / 8;
    for c in 0..POOL_WARMUP / chunk {
        for i in c * chunk..(c + 1) * chunk {
            log(i);
        }
        if let Some(guard) = guard {
            assert!(guard.flush(std::time::Duration::from_secs(60)));
        }
    }
    // Let the worker finish its round and fall asleep, as it is between the events of a real
    // loop: otherwise whether it had, which callgrind's scheduling decides, moved the short run
    // by the ~25 instructions per event a push pays to look at a sleeping worker's queue.
    std::thread::sleep(std::time::Duration::from_millis(200));
    counted(|| {
        for i in 0..n {
            log(i);
        }
    });
}

/// The counted part of a workload: callgrind collects only inside this function
/// (`--toggle-collect`), so neither start-up, the warm-up, the waits for the worker in it (a
/// blocking wait spins a scheduling-dependent number of times first) nor shutdown is in the
/// count. Counting the whole thread instead moved an event workload by several hundred
/// instructions per event from run to run.
#[inline(never)]
fn mllog_budget_counted(work: &mut dyn FnMut()) {
    work();
}

fn counted(mut work: impl FnMut()) {
    mllog_budget_counted(&mut work);
}

fn run(stack_name: &str, workload: &str, n: u64) {
    let (dispatch, keep) = stack(stack_name);
    tracing::dispatcher::with_default(&dispatch, || match workload {
        "event_3_fields" => events(&keep, n, |i| {
            mllog!("tracked_stats", 1.25, samples_count = i, step = i)
        }),
        // Strings that are no MLLOG constant: copied into buffers the recycled records keep.
        "event_string" => events(&keep, n, |i| {
            mllog!("tracked_stats", "8xH100 SXM5", host = "node-017", step = i)
        }),
        "event_f32" => events(&keep, n, |i| {
            mllog!("tracked_stats", 0.1f32, samples_count = i)
        }),
        // Built in list buffers the recycled records keep.
        "event_small_list" => events(&keep, n, |i| {
            mllog!("tracked_stats", [0.9, 0.95], samples_count = i)
        }),
        // The evaluation the run's convergence and progress checks read.
        "event_eval_accuracy" => events(&keep, n, |i| {
            mllog!(keys::EVAL_ACCURACY, 0.5, epoch_num = i, samples_count = i)
        }),
        // A key of the program's own, no MLLOG constant, with a short string value.
        "event_custom_key" => events(&keep, n, |i| mllog!("data_shard", "shard-07", step = i)),
        // Strings as programs write them, across the class the budget holds for: keys up to
        // 32 bytes, string values (the record's and its metadata's) up to 64, up to three
        // metadata fields.
        "event_str_k14_v18" => events(&keep, n, |i| {
            mllog!("my_custom_note", "checkpoint written", step = i)
        }),
        "event_str_k1_v1" => events(&keep, n, |i| mllog!("k", "v", step = i)),
        "event_str_k24_v45" => events(&keep, n, |i| {
            mllog!(
                "checkpoint_shard_written",
                "/scratch/checkpoints/step-000123/shard-07.bin",
                step = i,
                samples_count = i
            )
        }),
        "event_str_k32_v64" => events(&keep, n, |i| {
            mllog!(
                "data_loader_worker_restart_notes",
                "worker 3 restarted after a read timeout on shard 0007 of the set",
                step = i
            )
        }),
        "event_str_k8_v8" => events(&keep, n, |_| mllog!("shard_id", "complete")),
        "event_str_k16_v32_s1n1" => events(&keep, n, |i| {
            mllog!(
                "checkpoint_saved",
                "/scratch/ckpt/step-000123/s07.pt",
                host = "node-017",
                step = i
            )
        }),
        "event_str_k8_v32_s1n2" => events(&keep, n, |i| {
            mllog!(
                "shard_id",
                "/scratch/ckpt/step-000123/s07.pt",
                reason = "read timeout on /datasets/c4/en/train/shard-00007-of-01024",
                step = i,
                loss = 0.25
            )
        }),
        "event_str_k32_v64_s3" => events(&keep, n, |_| {
            mllog!(
                "data_loader_worker_restart_notes",
                "worker 3 restarted after a read timeout on shard 0007 of the set",
                host = "node-017.cluster.example.org",
                reason = "read timeout on /datasets/c4/en/train/shard-00007-of-01024",
                path = "/datasets/c4/en/train/shard-00007-of-01024.json.gz.tmp.partial"
            )
        }),
        "event_str_k32_v64_n3" => events(&keep, n, |i| {
            mllog!(
                "data_loader_worker_restart_notes",
                "worker 3 restarted after a read timeout on shard 0007 of the set",
                step = i,
                samples_count = i,
                epoch_num = 2
            )
        }),
        "event_str_k32_v64_s1n2" => events(&keep, n, |i| {
            mllog!(
                "data_loader_worker_restart_notes",
                "worker 3 restarted after a read timeout on shard 0007 of the set",
                reason = "read timeout on /datasets/c4/en/train/shard-00007-of-01024",
                step = i,
                samples_count = i
            )
        }),
        "event_str_k32_v64_s2n1" => events(&keep, n, |i| {
            mllog!(
                "data_loader_worker_restart_notes",
                "worker 3 restarted after a read timeout on shard 0007 of the set",
                host = "node-017.cluster.example.org",
                reason = "read timeout on /datasets/c4/en/train/shard-00007-of-01024",
                step = i
            )
        }),
        "train_step_span" => {
            // Inside the run: steps are counted (throughput, samples), the real case; a root
            // span, as `train_step!` opens it.
            let _run = info_span!("run").entered();
            counted(|| {
                for i in 0..n {
                    let _s = train_step!(step = i, samples = 8u64).entered();
                }
            });
        }
        "train_step_child" => {
            // The same step as a child of the entered run.
            let _run = info_span!("run").entered();
            counted(|| {
                for i in 0..n {
                    let _s = info_span!("train_step", step = i, samples = 8u64).entered();
                }
            });
        }
        "train_step_async" => {
            // An async loop's step: a future instrumented with its span, polled on this
            // thread until it is done (it yields once).
            let _run = info_span!("run").entered();
            counted(|| {
                for i in 0..n {
                    support::async_step(i);
                }
            });
        }
        "run_span" => counted(|| {
            for _ in 0..n {
                drop(info_span!("run").entered());
            }
        }),
        "block_span" => {
            // An MLLOG interval (two records) inside the run.
            let _run = info_span!("run").entered();
            counted(|| {
                for i in 0..n {
                    let _s = info_span!("block", samples_count = i, first_epoch_num = 1).entered();
                }
            });
        }
        other => panic!("unknown workload {other}"),
    });
    drop(keep);
}
