//! [`MllogLayer`]: spans become MLLOG intervals, events with an `mllog.key` field become
//! `POINT_IN_TIME` records.
//!
//! Hot path: each callsite is classified once per thread (what it is, what its fields mean;
//! `callsite.rs`), so spans and events cost one pointer comparison to recognise; a counted
//! `train_step` keeps its state in a sharded table keyed by span id (no span lookup, no
//! allocation, and it may close on any thread); spans that are not ours are rejected on
//! creation by their class and on close by bucket counts of open steps and intervals, so
//! they never cost a lookup. On a rank with nothing to write the
//! layer becomes a per-layer-filtered no-op whose filter says `Interest::never` for every
//! callsite: other layers still see everything, and with no other layer tracing disables the
//! callsites outright.

mod builder;
mod callsite;
mod entered;
pub(crate) mod fields;
mod filter;
mod filter_check;
mod inactive;
mod otel;
mod output;
mod plan;
mod ranks;
mod step;

pub use builder::{Builder, Interval};
pub use filter::{filter, MllogFilter};
pub use output::Output;
pub use ranks::Ranks;

use std::borrow::Cow;
use std::mem::{forget, replace};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tracing_core::span::{Attributes, Id, Record as SpanValues};
use tracing_core::subscriber::Interest;
use tracing_core::{Event, Metadata as CallsiteMeta, Subscriber};
use tracing_subscriber::filter::Filtered;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::keys;
use crate::pipeline::{lock_until, EndOfRun, Ending, Pending, RecordSender};
use crate::record::{EventType, IntervalIds, Metadata, Str, Timestamp, TracedRecord, Value};
use crate::run::{RunHandle, RunStats, Throughput};
use crate::sink::accounting::on_worker_thread;
use callsite::{Class, MAPPED_FIELDS};
use fields::{EventFields, Role as FieldRole, SpanFields, KEY_FIELD, STATUS_FIELD};
use step::{OpenSteps, StepField, StepFields, StepFrame, StepVisitor, SHARDS};

/// Which span names become which interval keys.
#[derive(Clone, Debug)]
pub(crate) struct IntervalSpec {
    pub(crate) span_name: Cow<'static, str>,
    pub(crate) start_key: Str,
    pub(crate) stop_key: Str,
    pub(crate) kind: Interval,
}

/// Targets whose spans and events are never ours, whatever their names: the crates our sinks
/// use, and this crate itself (a crate name followed by `::`, `_` or nothing: `hyper_util`
/// and `opentelemetry_sdk` count). Keeps their diagnostics out of the MLLOG stream.
const FOREIGN_TARGETS: &[&str] = &[
    "tracing_mllog",
    "object_store",
    "reqwest",
    "hyper",
    "h2",
    "tonic",
    "tower",
    "opentelemetry",
    "rusqlite",
];

/// Metadata keys that already say where in training a record is; when none is present the
/// layer adds `samples_count` (if it counts samples).
const PROGRESS_KEYS: [&str; 4] = [
    keys::SAMPLES_COUNT,
    keys::EPOCH_NUM,
    keys::EPOCH_COUNT,
    keys::FIRST_EPOCH_NUM,
];

/// Whether the metadata says where in training the record is (one of [`PROGRESS_KEYS`]), and
/// its `samples_count` if it has one: one pass, each name compared only where its length
/// matches (an `eval_accuracy` pays this on every call).
fn progress_of(md: &Metadata) -> Option<Option<&Value>> {
    let mut progress = false;
    let mut samples = None;
    for (name, value) in &md.fields {
        let is = |key: &str| name.len() == key.len() && **name == *key;
        if is(keys::SAMPLES_COUNT) {
            samples = samples.or(Some(value));
            progress = true;
        } else if !progress && PROGRESS_KEYS.iter().any(|k| is(k)) {
            progress = true;
        }
    }
    progress.then_some(samples)
}

/// [`progress_of`] for an event whose metadata is partly raw (the raw fields come after the
/// settled ones), its `samples_count` as a number.
fn progress_of_event(
    md: &Metadata,
    capture: &crate::pipeline::Capture,
    (progress_bits, samples_bits): (u16, u16),
) -> Option<Option<f64>> {
    let settled = progress_of(md);
    let mut progress = settled.is_some();
    let mut samples = settled.flatten().map(Value::as_f64);
    for raw in capture.fields() {
        let bit = 1u16.checked_shl(raw.index.into()).unwrap_or(0);
        if samples_bits & bit != 0 {
            samples = samples.or(Some(raw.number()));
        }
        progress |= progress_bits & bit != 0;
    }
    progress.then(|| samples.flatten())
}

/// Whether `meta` comes from a crate whose spans and events are never ours.
pub(crate) fn is_foreign_target(meta: &CallsiteMeta<'_>) -> bool {
    let target = meta.target();
    // Most targets are the user's own crates: one byte rules them out.
    if !matches!(target.as_bytes().first(), Some(b't' | b'o' | b'r' | b'h')) {
        return false;
    }
    FOREIGN_TARGETS.iter().any(|t| {
        target.starts_with(t)
            && target[t.len()..]
                .chars()
                .next()
                .is_none_or(|c| c == ':' || c == '_')
    })
}

pub(crate) struct Shared {
    /// Unique per layer in this process (never 0): keys the per-thread callsite cache.
    pub(crate) id: u64,
    pub(crate) pipeline: RecordSender,
    pub(crate) intervals: Vec<IntervalSpec>,
    pub(crate) step_span: Cow<'static, str>,
    pub(crate) warmup_span: Cow<'static, str>,
    pub(crate) namespace: Str,
    pub(crate) root_dir: Option<String>,
    pub(crate) cache_clear: bool,
    /// What the `cache_clear` record says (`crate::cache_clear`).
    pub(crate) cache_cleared: crate::cache_clear::CacheCleared,
    /// Passed by every rank when `run` opens, before `run_start` is stamped.
    pub(crate) barrier: Option<crate::barrier::ArmedBarrier>,
    /// Passed by every rank when `run` closes, before `run_stop` is stamped (on request).
    pub(crate) stop_barrier: Option<crate::barrier::ArmedBarrier>,
    /// The program's device synchronisation, at interval ends and step ends (on request).
    pub(crate) device: crate::device_sync::DeviceSyncs,
    /// Wall-clock steps, looked for at each interval's end.
    pub(crate) clock: crate::clock_step::ClockWatch,
    /// Records written right after `init_start` (submission metadata, `config_filename`).
    pub(crate) after_init_start: Vec<(Str, Value)>,
    pub(crate) writes: bool,
    /// Whether any sink receives records in this process (false on a non-writing rank
    /// without every-rank sinks).
    pub(crate) active: bool,
    /// Samples a `train_step` trains when its span has no `samples` field; when set, the
    /// layer also fills in missing `samples_count` metadata.
    pub(crate) samples_per_step: Option<u64>,
    /// `train_loss` every this many steps (0: never).
    pub(crate) train_loss_every: u64,
    /// `tracked_stats {"throughput": ..}` at the end of each block and of the run.
    pub(crate) throughput_stats: bool,
    /// Send counted steps as trace-only `train_step` interval records (for OTel and RPD).
    pub(crate) trace_steps: bool,
    /// Other spans inside the run exported to OTel (`MLLOG_OTEL_SPANS`).
    // Read by the OpenTelemetry bridge only.
    #[cfg_attr(not(feature = "otel-sdk"), allow(dead_code))]
    pub(crate) traced_spans: crate::sink::TracedSpans,
    pub(crate) stats: Arc<RunStats>,
    /// Called for every span (the segment profiler).
    pub(crate) span_hooks: Box<[Arc<dyn crate::sink::plug::SpanHook>]>,
    pub(crate) state: LayerState,
}

/// What the layer tracks while spans open and close.
pub(crate) struct LayerState {
    next_id: AtomicU64,
    run_open: AtomicBool,
    warmup_depth: AtomicU32,
    /// Whether the subscriber-filter check was started (once per layer).
    filter_checked: AtomicBool,
    /// The layer was put into a subscriber (`on_layer` or `on_register_dispatch`).
    layered: AtomicBool,
    /// Lost steps were said (once per layer).
    lost_steps_said: AtomicBool,
    /// Held while an interval's records are queued and the open list changes, so that an exit
    /// path ending the run sees every interval whose start is queued, and no interval record
    /// lands after the `run_stop` it writes.
    order: Mutex<()>,
    /// An exit path has ended the run: intervals that open later are not written.
    ended: AtomicBool,
    /// Each mapped callsite, put to the whole subscriber once registered.
    callsites: Arc<filter_check::CallsiteCheck>,
    /// Open interval and warmup spans, counted per bucket of their span id, so entering,
    /// closing or recording a span that is none of them needs no lookup (a zero bucket proves
    /// it).
    open_buckets: [AtomicU32; SHARDS],
    /// Open counted steps, likewise; apart from the intervals' so that entering a step (every
    /// poll of an instrumented step future) never looks for an interval.
    step_buckets: [AtomicU32; SHARDS],
    /// Counted steps that are open.
    steps: OpenSteps,
    /// Interval spans that are open, in the order they opened. Kept here rather than in span
    /// extensions so that the exit paths (`process::exit`, a signal, an early guard drop),
    /// which have no span to look up, can close them, innermost first.
    intervals: Mutex<Vec<OpenInterval>>,
    /// The subscriber, for the OTel bridge.
    dispatch: otel::OtelDispatch,
}

impl Default for LayerState {
    fn default() -> Self {
        LayerState {
            next_id: AtomicU64::new(0),
            run_open: AtomicBool::new(false),
            warmup_depth: AtomicU32::new(0),
            filter_checked: AtomicBool::new(false),
            layered: AtomicBool::new(false),
            lost_steps_said: AtomicBool::new(false),
            order: Mutex::new(()),
            ended: AtomicBool::new(false),
            callsites: Arc::default(),
            open_buckets: [const { AtomicU32::new(0) }; SHARDS],
            step_buckets: [const { AtomicU32::new(0) }; SHARDS],
            steps: OpenSteps::default(),
            intervals: Mutex::new(Vec::new()),
            dispatch: otel::OtelDispatch::default(),
        }
    }
}

impl Shared {
    #[inline]
    fn bucket(&self, id: &Id) -> &AtomicU32 {
        &self.state.open_buckets[step::shard_of(id.into_u64())]
    }

    /// Whether `id` may be an open interval or warmup span (false: certainly not).
    #[inline]
    fn maybe_tracked(&self, id: &Id) -> bool {
        self.bucket(id).load(Ordering::Relaxed) != 0
    }

    #[inline]
    fn step_bucket(&self, id: &Id) -> &AtomicU32 {
        &self.state.step_buckets[step::shard_of(id.into_u64())]
    }

    /// Whether `id` may be an open counted step (false: certainly not).
    #[inline]
    fn maybe_step(&self, id: &Id) -> bool {
        self.step_bucket(id).load(Ordering::Relaxed) != 0
    }

    /// Whether steps count now: a run is open and no warmup span is (wherever they are).
    #[inline]
    fn in_timed_run(&self) -> bool {
        self.state.run_open.load(Ordering::Relaxed)
            && self.state.warmup_depth.load(Ordering::Relaxed) == 0
    }

    /// See [`LayerState::order`]. Nothing panics while it is held.
    fn order(&self) -> MutexGuard<'_, ()> {
        self.state.order.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn open_intervals(&self) -> MutexGuard<'_, Vec<OpenInterval>> {
        // Nothing panics while the list is locked; a poisoned one is still consistent.
        self.state
            .intervals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The interval id of the open interval span `span`, if it is one.
    fn open_interval_id(&self, span: u64) -> Option<u64> {
        self.open_intervals()
            .iter()
            .find(|o| o.span == span)
            .map(|o| o.ids.id)
    }

    /// What `meta` is to this layer, decided once per callsite and thread.
    #[inline]
    fn class(&self, meta: &'static CallsiteMeta<'static>) -> Class {
        callsite::class(self.id, meta, || self.decide(meta))
    }

    #[cold]
    #[inline(never)]
    fn decide(&self, meta: &'static CallsiteMeta<'static>) -> Class {
        // Nothing the worker does (our sinks' dependencies) is ever recorded; classes are
        // cached per thread, so the worker's own cache says so and no hook has to ask.
        if is_foreign_target(meta) || on_worker_thread() {
            return Class::Ignored;
        }
        let names = || meta.fields().iter().map(|f| f.name());
        if meta.is_event() {
            if meta.fields().field(KEY_FIELD).is_none() {
                return Class::Ignored;
            }
            let mut roles = [FieldRole::Metadata; MAPPED_FIELDS];
            let (mut progress, mut samples) = (0u16, 0u16);
            for (i, (role, name)) in roles.iter_mut().zip(names()).enumerate() {
                *role = fields::role_of(name);
                if name == keys::SAMPLES_COUNT {
                    samples |= 1 << i;
                }
                if name == keys::SAMPLES_COUNT || PROGRESS_KEYS.contains(&name) {
                    progress |= 1 << i;
                }
            }
            return Class::Event {
                roles,
                progress,
                samples,
                file: self.file_of(meta),
            };
        }
        let name = meta.name();
        if *self.step_span == *name {
            let mut slots = [StepField::Other; MAPPED_FIELDS];
            for (slot, name) in slots.iter_mut().zip(names()) {
                *slot = StepField::of(name);
            }
            Class::Step(slots)
        } else if let Some(i) = self.intervals.iter().position(|s| *s.span_name == *name) {
            Class::Interval(i)
        } else if *self.warmup_span == *name {
            Class::Warmup
        } else {
            Class::Ignored
        }
    }

    /// `file` as the caller wrote it, relative to the configured root directory.
    fn file_of(&self, meta: &'static CallsiteMeta<'static>) -> &'static str {
        let file = meta.file().unwrap_or("<unknown>");
        if let Some(root) = &self.root_dir
            && let Some(rest) = file.strip_prefix(root.as_str())
        {
            return rest.trim_start_matches('/');
        }
        file
    }

    /// A record from the pipeline's spare ones, filled in place (no allocation, no copy of
    /// the whole record).
    fn record(
        &self,
        meta: &'static CallsiteMeta<'static>,
        time: Timestamp,
        event_type: EventType,
        key: Str,
        value: Value,
    ) -> Box<Pending> {
        let mut r = self.pipeline.record();
        r.namespace = self.namespace.clone();
        r.time = time;
        r.event_type = event_type;
        r.key = key;
        r.value = value;
        r.metadata.file = Some(Cow::Borrowed(self.file_of(meta)));
        r.metadata.lineno = Some(meta.line().unwrap_or(0));
        r.tid = crate::os_thread::id();
        r
    }

    /// A traced step's start or end record, for tracing sinks (OTel, RPD) only: the MLLOG
    /// file and the checker skip it.
    fn step_trace_record(
        &self,
        meta: &'static CallsiteMeta<'static>,
        time: Timestamp,
        event_type: EventType,
        ids: IntervalIds,
        fields: &StepFields,
    ) -> Box<Pending> {
        let key = match event_type {
            EventType::IntervalStart => "train_step_start",
            _ => "train_step_stop",
        };
        let mut r = self.record(meta, time, event_type, Cow::Borrowed(key), Value::Null);
        r.trace_only = true;
        r.interval = Some(ids);
        r.scope = ids.parent;
        if let Some(step_no) = fields.step() {
            r.metadata.set("step", step_no);
        }
        r
    }

    /// A traced step's trace-only end record, now.
    fn step_end_record(&self, frame: &StepFrame, ids: IntervalIds) -> Box<Pending> {
        self.step_trace_record(
            frame.meta,
            Timestamp::now(),
            EventType::IntervalEnd,
            ids,
            &frame.fields,
        )
    }

    /// Adds `samples_count` when the record says nothing about progress and the layer counts
    /// samples (a global batch size is configured). For a record that reports progress
    /// (`checked`: a block's or the run's end, an `eval_accuracy`), also looks at the figure.
    fn fill_progress(&self, md: &mut Metadata, checked: Option<&str>) {
        let given = || progress_of(md).map(|v| v.and_then(Value::as_f64));
        if let Some(counted) = self.missing_progress(given, checked) {
            md.fields.push((
                Cow::Borrowed(keys::SAMPLES_COUNT),
                Value::Int(counted.into()),
            ));
        }
    }

    /// [`Shared::fill_progress`] for an event whose fields may still be raw: the
    /// `samples_count` it lacks is added after them when they are settled.
    fn fill_event_progress(&self, r: &mut Pending, bits: (u16, u16), checked: Option<&str>) {
        let Pending { traced, capture } = r;
        let md = &traced.record.metadata;
        let given = || progress_of_event(md, capture, bits);
        if let Some(counted) = self.missing_progress(given, checked) {
            capture.add_after(keys::SAMPLES_COUNT, counted);
        }
    }

    /// The samples counted, when a record that `given` says nothing about progress must carry
    /// them; `given`: `Some` when the record says where it is itself (with its
    /// `samples_count`, if it has one). Nothing when the layer counts no samples (no global
    /// batch size is configured).
    fn missing_progress(
        &self,
        given: impl FnOnce() -> Option<Option<f64>>,
        checked: Option<&str>,
    ) -> Option<u64> {
        self.samples_per_step?;
        let counted = self.stats.samples();
        let given = given();
        // Said once: after that the check has nothing left to say.
        if let Some(key) = checked
            && !self.state.lost_steps_said.load(Ordering::Relaxed)
        {
            self.check_progress(key, counted, given);
        }
        given.is_none().then_some(counted)
    }

    /// Steps that never reach the layer leave no trace of their own: no filter names them
    /// when they sit above the subscriber's maximum level, a per-layer filter on this layer
    /// hides them from it, a scoped subscriber (`set_default`) does not follow them to other
    /// threads. What shows is the count, so the first record whose figure proves it is said
    /// on stderr, once: samples counted 0 after an evaluation, or an `eval_accuracy` whose own
    /// `samples_count` disagrees with the count.
    #[cold]
    fn check_progress(&self, key: &str, counted: u64, given: Option<Option<f64>>) {
        let lost = match given {
            None => counted == 0 && self.stats.evals() > 0,
            Some(Some(given)) => key == keys::EVAL_ACCURACY && given != counted as f64,
            Some(None) => false,
        };
        if !lost || !self.writes || self.state.lost_steps_said.swap(true, Ordering::Relaxed) {
            return;
        }
        let figure = match given {
            Some(Some(given)) => format!(
                "`{key}` says samples_count {given}, but the layer has counted {counted} samples \
                 from `train_step` spans, the figure `block_stop` and `run_stop` carry"
            ),
            _ => format!(
                "`{key}` gets samples_count 0: an evaluation was logged, but no `train_step` \
                 span has reached the layer since `run` opened, so `block_stop` and `run_stop` \
                 say 0 samples and no throughput or `train_loss` is logged"
            ),
        };
        let warning = format!(
            "{figure}. Steps are lost when a filter disables their span (one above the \
             subscriber's maximum level, e.g. `debug_span!(\"train_step\")` under an `info` \
             filter; a per-layer filter on this layer), when they run on a thread a scoped \
             subscriber (`set_default`, `with_default`) does not reach, or when a step's \
             `samples` is not the global figure. docs/guide.md, \"Filters\"."
        );
        stderr_line!("tracing-mllog: warning: {warning}");
        self.pipeline.warn(warning);
    }

    /// `tracked_stats {"throughput": samples/s, "train_step_time": s}` for a stretch of steps.
    fn throughput_record(
        &self,
        meta: &'static CallsiteMeta<'static>,
        time: Timestamp,
        t: Throughput,
        scope: Option<u64>,
        overall: bool,
    ) -> Box<Pending> {
        let value = Value::Object(vec![
            (Cow::Borrowed("throughput"), Value::Float(t.samples_per_s)),
            (
                Cow::Borrowed("train_step_time"),
                Value::Float(t.mean_step_s),
            ),
        ]);
        let mut r = self.record(
            meta,
            time,
            EventType::PointInTime,
            Cow::Borrowed(keys::TRACKED_STATS),
            value,
        );
        r.metadata.set(keys::SAMPLES_COUNT, self.stats.samples());
        r.metadata.set("steps", t.steps);
        if overall {
            r.metadata.set("overall", true);
        }
        r.scope = scope;
        r
    }
}

/// An interval span that is open.
pub(crate) struct OpenInterval {
    /// The span's id.
    span: u64,
    spec: usize,
    ids: IntervalIds,
    fields: SpanFields,
    /// The span's callsite: its end record names the same line as its start.
    meta: &'static CallsiteMeta<'static>,
    otel: otel::IntervalOtel,
}

/// Turns our spans and events into records.
pub(crate) struct Core {
    shared: Arc<Shared>,
}

impl Core {
    fn open_step(&self, attrs: &Attributes<'_>, id: &Id, slots: &[StepField]) {
        let shared = &*self.shared;
        // Warmup steps and steps outside the run are not the timed run: no throughput, no
        // train_loss, no samples.
        if !shared.in_timed_run() {
            return;
        }
        let meta = attrs.metadata();
        let mut fields = StepFields::default();
        attrs.record(&mut StepVisitor {
            fields: &mut fields,
            slots,
        });
        let (start_mono, traced) = if shared.trace_steps {
            self.trace_step_start(meta, &fields)
        } else {
            (Timestamp::mono_now(), None)
        };
        shared.state.steps.open(StepFrame {
            span: id.into_u64(),
            meta,
            start_mono,
            fields,
            traced,
        });
        shared.step_bucket(id).fetch_add(1, Ordering::Relaxed);
    }

    /// A traced step's trace-only start record (for OTel and RPD); the step starts at its time.
    #[inline(never)]
    fn trace_step_start(
        &self,
        meta: &'static CallsiteMeta<'static>,
        fields: &StepFields,
    ) -> (u64, Option<IntervalIds>) {
        let shared = &*self.shared;
        let time = Timestamp::now();
        let ids = IntervalIds {
            id: shared.state.next_id.fetch_add(1, Ordering::Relaxed),
            parent: entered::current_interval(shared.id),
        };
        let r = shared.step_trace_record(meta, time, EventType::IntervalStart, ids, fields);
        shared.pipeline.push(r);
        (time.mono_ns, Some(ids))
    }

    /// The end of a counted step: a clock read and a few atomic adds; the step's records, if
    /// any, are made out of line so that this stays small.
    #[inline]
    fn close_step(&self, frame: &StepFrame) {
        let shared = &*self.shared;
        if std::thread::panicking() {
            // The step ended by unwinding: it trained nothing.
            return self.unwound_step(frame);
        }
        if let Some(sync) = &shared.device.steps {
            sync();
        }
        let end_mono = Timestamp::mono_now();
        let f = &frame.fields;
        let samples = f.samples().or(shared.samples_per_step).unwrap_or(0);
        let total = shared
            .stats
            .on_step(end_mono.saturating_sub(frame.start_mono), samples);
        if frame.traced.is_some() || (shared.train_loss_every != 0 && f.loss().is_some()) {
            self.step_records(frame, total);
        }
    }

    /// A step that ended by unwinding: not counted; a traced one still ends in the trace.
    #[cold]
    fn unwound_step(&self, frame: &StepFrame) {
        let shared = &*self.shared;
        if let Some(ids) = frame.traced {
            let mut r = shared.step_end_record(frame, ids);
            r.metadata.set("unwound", true);
            shared.pipeline.push(r);
        }
    }

    /// A closing step's records: its trace-only end (when steps are traced) and `train_loss`
    /// every `train_loss_every` steps. `total` is the samples count after the step.
    #[inline(never)]
    fn step_records(&self, frame: &StepFrame, total: u64) {
        let shared = &*self.shared;
        let f = &frame.fields;
        if let Some(ids) = frame.traced {
            let mut r = shared.step_end_record(frame, ids);
            r.metadata.set(keys::SAMPLES_COUNT, total);
            if let Some(loss) = f.loss() {
                r.metadata.set("loss", loss);
            }
            shared.pipeline.push(r);
        }
        if shared.train_loss_every == 0 {
            return;
        }
        let Some(loss) = f.loss() else {
            return;
        };
        let step_no = f.step().unwrap_or_else(|| shared.stats.steps());
        if !step_no.is_multiple_of(shared.train_loss_every) {
            return;
        };
        let mut r = shared.record(
            frame.meta,
            Timestamp::now(),
            EventType::PointInTime,
            Cow::Borrowed(keys::TRAIN_LOSS),
            Value::Float(loss),
        );
        // The count after this step: the samples the loss was computed with are trained.
        r.metadata
            .set(keys::SAMPLES_COUNT, f.samples_count().unwrap_or(total));
        if let Some(lr) = f.lr() {
            r.metadata.set("lr", lr);
        }
        r.metadata.set("step", step_no);
        r.scope = entered::current_interval(shared.id);
        shared.pipeline.push(r);
    }

    /// An interval span opens: its start record (and, for `init`, the records that follow
    /// it). Kept out of `on_new_span` so that the step path stays small.
    #[inline(never)]
    fn open_interval<S>(
        &self,
        attrs: &Attributes<'_>,
        id: &Id,
        spec_index: usize,
        ctx: Context<'_, S>,
    ) where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if self.shared.intervals[spec_index].kind == Interval::Run {
            if let Some(barrier) = &self.shared.barrier {
                barrier.pass_reported(|w| self.shared.pipeline.warn(w));
            }
            // A rank that writes nothing sees `run` only to pass the barriers: counted in its
            // bucket when there is one at its close, so that its close reaches the layer.
            if !self.shared.active {
                if self.shared.stop_barrier.is_some() {
                    self.shared.bucket(id).fetch_add(1, Ordering::Relaxed);
                }
                return;
            }
        }
        let meta = attrs.metadata();
        let time = Timestamp::now();
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut fields = SpanFields::default();
        attrs.record(&mut fields);
        let parent = span
            .scope()
            .skip(1)
            .find_map(|s| self.shared.open_interval_id(s.id().into_u64()));
        let ids = IntervalIds {
            id: self.shared.state.next_id.fetch_add(1, Ordering::Relaxed),
            parent,
        };
        let otel_fields = otel::IntervalOtel::open(
            attrs,
            parent.is_none().then_some(&span),
            &self.shared.state.dispatch,
        );
        let shared = &*self.shared;
        let spec = &shared.intervals[spec_index];
        let _order = shared.order();
        if shared.state.ended.load(Ordering::Relaxed) {
            return shared.pipeline.discard_after_end();
        }
        if spec.kind == Interval::Init && shared.cache_clear {
            let mut r = shared.record(
                meta,
                time,
                EventType::PointInTime,
                Cow::Borrowed(keys::CACHE_CLEAR),
                Value::Bool(shared.cache_cleared.value),
            );
            shared.cache_cleared.annotate(&mut r.metadata);
            r.scope = parent;
            otel_fields.copy_to(&mut r);
            shared.pipeline.push(r);
        }
        match spec.kind {
            Interval::Run => shared.state.run_open.store(true, Ordering::Relaxed),
            Interval::Block => shared.stats.start_block(),
            _ => {}
        }
        let mut start = shared.record(
            meta,
            time,
            EventType::IntervalStart,
            spec.start_key.clone(),
            Value::Null,
        );
        start.interval = Some(ids);
        start.scope = parent;
        otel_fields.copy_to(&mut start);
        // The run's `status` decides run_stop's status; it is no metadata.
        let skip_status = spec.kind == Interval::Run;
        if let Some(ns) = fields.start_parts(skip_status, &mut start.metadata.fields) {
            start.namespace = ns;
        }
        if matches!(spec.kind, Interval::Block | Interval::Eval) {
            shared.fill_progress(&mut start.metadata, None);
        }
        shared.pipeline.push(start);
        if spec.kind == Interval::Init {
            for (key, value) in &shared.after_init_start {
                let mut r = shared.record(
                    meta,
                    time,
                    EventType::PointInTime,
                    key.clone(),
                    value.clone(),
                );
                r.scope = Some(ids.id);
                shared.pipeline.push(r);
            }
        }
        shared.open_intervals().push(OpenInterval {
            span: id.into_u64(),
            spec: spec_index,
            ids,
            fields,
            meta,
            otel: otel_fields,
        });
        shared.bucket(id).fetch_add(1, Ordering::Relaxed);
    }

    /// A span that may be an interval or warmup span closes (its bucket says it may be).
    #[inline(never)]
    fn close_interval<S>(&self, id: Id, ctx: Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let shared = &*self.shared;
        if (shared.stop_barrier.is_some() || shared.device.intervals.is_some())
            && shared.before_end(&id)
        {
            return;
        }
        let order = shared.order();
        let (open, inside) = {
            let mut list = shared.open_intervals();
            match list.iter().rposition(|o| o.span == id.into_u64()) {
                Some(at) => {
                    // Nothing may follow `run_stop`: what opened inside the run and is still
                    // open (a root span, a phase on another task) ends first.
                    let inside = if shared.intervals[list[at].spec].kind == Interval::Run {
                        list.split_off(at + 1)
                    } else {
                        Vec::new()
                    };
                    (Some(list.remove(at)), inside)
                }
                None => (None, Vec::new()),
            }
        };
        if let Some(open) = open {
            for o in inside.into_iter().rev() {
                shared
                    .bucket(&Id::from_u64(o.span))
                    .fetch_sub(1, Ordering::Relaxed);
                let spec = &shared.intervals[o.spec];
                let (span, stop) = (spec.span_name.clone(), spec.stop_key.clone());
                shared.end_interval(o, Ending::Closed);
                stderr_line!(
                    "tracing-mllog: warning: `run` closed while a `{span}` span opened inside \
                     it was still open; its `{stop}` is written now, before `run_stop` (the \
                     span's own close writes nothing)"
                );
            }
            shared.bucket(&id).fetch_sub(1, Ordering::Relaxed);
            return shared.end_interval(open, Ending::Closed);
        }
        drop(order);
        // Not an open interval (an exit path may have closed it already): a warmup span?
        let Some(span) = ctx.span(&id) else {
            return;
        };
        if otel::close_traced(shared, &id, &span) {
            return;
        }
        if shared.class(span.metadata()) == Class::Warmup {
            shared.state.warmup_depth.fetch_sub(1, Ordering::Relaxed);
            shared.bucket(&id).fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Shared {
    /// What must happen before an interval's end is stamped: the device's work done (a block,
    /// an eval, the run) and every rank at the end of its run (the barrier before `run_stop`).
    /// Neither while unwinding: a rank that fails is one the others are told of by their
    /// timeout, and its device or communicator may be in no state to be called. True when the
    /// close is done with: a rank that writes nothing sees only its `run`, for the barrier.
    #[cold]
    fn before_end(&self, id: &Id) -> bool {
        let kind = if self.active {
            self.open_intervals()
                .iter()
                .rfind(|o| o.span == id.into_u64())
                .map(|o| self.intervals[o.spec].kind)
        } else {
            self.bucket(id).fetch_sub(1, Ordering::Relaxed);
            Some(Interval::Run)
        };
        if std::thread::panicking() {
            return !self.active;
        }
        if let (Some(sync), true) = (
            &self.device.intervals,
            self.active && matches!(kind, Some(Interval::Block | Interval::Eval | Interval::Run)),
        ) {
            sync();
        }
        if let (Some(barrier), Some(Interval::Run)) = (&self.stop_barrier, kind) {
            barrier.pass_reported(|w| self.pipeline.warn(w));
        }
        !self.active
    }

    /// Writes the end record of an interval taken out of the open list (and, for a block or
    /// the run, the throughput figures that go with it).
    fn end_interval(&self, open: OpenInterval, ending: Ending) {
        let time = Timestamp::now();
        let meta = open.meta;
        let spec = &self.intervals[open.spec];
        let recorded_status = open
            .fields
            .get(STATUS_FIELD)
            .and_then(Value::as_str)
            .map(str::to_owned);
        let parts = open.fields.into_parts(spec.kind == Interval::Run);
        let mut value = parts.value;
        if spec.kind == Interval::Run
            && value.is_null()
            && let Some(last) = self.stats.last_eval()
        {
            value = Value::Float(last);
        }
        let mut end = self.record(
            meta,
            time,
            EventType::IntervalEnd,
            spec.stop_key.clone(),
            value,
        );
        end.interval = Some(open.ids);
        end.scope = open.ids.parent;
        open.otel.move_to(&mut end);
        end.metadata.fields = parts.metadata;
        if let Some(ms) = self.clock.observe(time.wall_ns) {
            self.clock_stepped(&mut end, ms);
        }
        if matches!(spec.kind, Interval::Block | Interval::Eval | Interval::Run) {
            self.fill_progress(&mut end.metadata, Some(&spec.stop_key));
        }
        if let Some(ns) = parts.namespace {
            end.namespace = ns;
        }
        match spec.kind {
            Interval::Block if self.throughput_stats => {
                if let Some(t) = self.stats.take_block() {
                    let stats = self.throughput_record(meta, time, t, Some(open.ids.id), false);
                    self.pipeline.push(stats);
                }
            }
            Interval::Run => {
                if self.throughput_stats
                    && let Some(t) = self.stats.run_throughput_stats()
                {
                    let stats = self.throughput_record(meta, time, t, Some(open.ids.id), true);
                    self.pipeline.push(stats);
                }
                // An explicit status wins; without one, convergence decides. Unwinding and a
                // run cut short are always `aborted`. Never missing.
                let status: Str = if std::thread::panicking() || ending == Ending::Aborted {
                    Cow::Borrowed(keys::ABORTED)
                } else {
                    match recorded_status {
                        Some(s) => crate::layer::fields::intern_str(&s),
                        None if self.stats.converged() => Cow::Borrowed(keys::SUCCESS),
                        None => Cow::Borrowed(keys::ABORTED),
                    }
                };
                end.metadata
                    .fields
                    .push((Cow::Borrowed(keys::STATUS), Value::Str(status)));
                self.state.run_open.store(false, Ordering::Relaxed);
            }
            _ => {}
        }
        self.pipeline.push(end);
    }
}

impl Shared {
    /// The wall clock moved away from the log's: on the end record, stderr and the report.
    #[cold]
    fn clock_stepped(&self, end: &mut TracedRecord, ms: f64) {
        end.metadata.set(crate::WALL_CLOCK_STEP_MS, ms);
        let warning = crate::clock_step::warning(ms, &end.key);
        stderr_line!("tracing-mllog: warning: {warning}");
        self.pipeline.warn(warning);
    }
}

impl EndOfRun for Shared {
    /// Ends every interval still open, innermost first, as the process or the pipeline goes
    /// away while spans are open (their own close will find nothing left to end). Returns the
    /// end keys written, in order.
    fn end_open_intervals(&self, ending: Ending, deadline: std::time::Instant) -> Vec<Str> {
        // Waits for an interval being opened or closed on another thread to be queued whole;
        // a thread stuck there (its push blocked on a worker stuck in a sink) is not waited
        // for past the deadline.
        let _order = lock_until(&self.state.order, deadline);
        self.state.ended.store(true, Ordering::Relaxed);
        let _sealing = self.pipeline.seal(deadline);
        let open = std::mem::take(&mut *self.open_intervals());
        let mut written = Vec::with_capacity(open.len());
        for o in open.into_iter().rev() {
            self.bucket(&Id::from_u64(o.span))
                .fetch_sub(1, Ordering::Relaxed);
            written.push(self.intervals[o.spec].stop_key.clone());
            self.end_interval(o, ending);
        }
        written
    }

    fn finish_checks(&self, deadline: std::time::Instant) {
        self.state.callsites.check_now(deadline);
    }

    fn placement(&self, deadline: std::time::Instant) -> crate::pipeline::Placement {
        let in_subscriber = self.state.layered.load(Ordering::Relaxed);
        let mut hidden = Vec::new();
        if in_subscriber {
            // Below INFO no MLLOG callsite is even registered: the level says it all.
            let max = tracing_core::LevelFilter::current();
            if max < tracing_core::LevelFilter::INFO {
                hidden.push(filter_check::level_cause(max));
            }
            self.state.callsites.check_now(deadline);
            let disabled = self.state.callsites.disabled();
            hidden.extend(
                disabled
                    .iter()
                    .map(|meta| filter_check::disabled_cause(meta)),
            );
        }
        crate::pipeline::Placement {
            in_subscriber,
            hidden,
        }
    }
}

/// Entering a span that may be an open interval: it becomes the scope of what this thread
/// records until it is exited. Out of line: most spans entered are steps or not ours.
#[inline(never)]
fn enter_tracked(shared: &Shared, id: &Id) {
    if let Some(interval) = shared.open_interval_id(id.into_u64()) {
        entered::enter_interval(shared.id, id.into_u64(), interval);
    }
}

/// An `eval_accuracy` value feeds the run's convergence. A null one crashes the official
/// checker; a missing metric is NaN (logged as Python writes it), which simply does not
/// converge.
fn feed_eval(stats: &RunStats, value: &mut Value) {
    if value.is_null() {
        *value = Value::Float(f64::NAN);
    }
    if let Some(metric) = value.as_f64() {
        stats.on_eval(metric);
    }
}

/// An `eval_accuracy` on a rank that writes nothing: read as the writing rank reads it, for
/// the run handle only. Rare (once per evaluation), so its fields go into buffers of its own.
#[cold]
#[inline(never)]
fn inactive_eval(shared: &Shared, event: &Event<'_>, roles: &[FieldRole]) {
    let (mut metadata, mut stash) = (smallvec::SmallVec::new(), crate::record::Stash::default());
    let mut capture = crate::pipeline::Capture::default();
    let mut parts = EventFields::new(&mut metadata, &mut stash, &mut capture, roles, "");
    event.record(&mut parts);
    if parts.key.as_deref() == Some(keys::EVAL_ACCURACY) {
        feed_eval(&shared.stats, &mut parts.take_value());
    }
}

/// Starts the filter checks, once per layer, from whichever hook reaches the layer first:
/// `on_layer` when the subscriber is put together (`Option<L>` and `Vec<L>` pass on nothing
/// else before the first callsite, which an INFO callsite below the level filter never is),
/// `on_register_dispatch`, or a callsite's registration. When no `on_register_dispatch` told
/// the layer its subscriber by the time the level is read, the callsites are put to the global
/// subscriber, if this layer is part of it.
fn start_filter_checks(shared: &Arc<Shared>) {
    if !shared.writes || shared.state.filter_checked.swap(true, Ordering::Relaxed) {
        return;
    }
    let weak = Arc::downgrade(shared);
    filter_check::spawn(Arc::downgrade(shared), move || {
        if let Some(shared) = weak.upgrade() {
            adopt_default_subscriber(&shared);
        }
    });
}

/// Without a subscriber of its own (`on_register_dispatch`, which `Option<L>` and `Vec<L>` do
/// not pass on), the layer takes the default one for its checks, if it is part of it.
fn adopt_default_subscriber(shared: &Arc<Shared>) {
    if shared.state.callsites.has_dispatch() {
        return;
    }
    let global = tracing_core::dispatcher::get_default(tracing_core::Dispatch::clone);
    let ours = global
        .downcast_ref::<Core>()
        .is_some_and(|core| Arc::ptr_eq(&core.shared, shared));
    if ours {
        shared.state.dispatch.set(&global);
        shared.state.callsites.set_dispatch(&global);
    }
}

impl<S> Layer<S> for Core
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_layer(&mut self, _subscriber: &mut S) {
        self.shared.state.layered.store(true, Ordering::Relaxed);
        start_filter_checks(&self.shared);
    }

    fn on_register_dispatch(&self, dispatch: &tracing_core::Dispatch) {
        let shared = &self.shared;
        shared.state.layered.store(true, Ordering::Relaxed);
        shared.state.dispatch.set(dispatch);
        if shared.writes {
            shared.state.callsites.set_dispatch(dispatch);
        }
        start_filter_checks(shared);
    }

    fn register_callsite(&self, meta: &'static CallsiteMeta<'static>) -> Interest {
        let shared = &self.shared;
        if !shared.state.filter_checked.load(Ordering::Relaxed) {
            start_filter_checks(shared);
        }
        if shared.writes && shared.class(meta) != Class::Ignored {
            shared.state.callsites.queue(meta);
        }
        // Never `never`: that would disable the callsite for every other layer too. Callsites
        // that are not ours are rejected cheaply in the hooks instead.
        Interest::always()
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        // The profiled segment may be any span, ours or not; warmup steps open while no run
        // is open, so they never count as the Nth step.
        for hook in &*self.shared.span_hooks {
            hook.on_span_open(id.into_u64(), meta.name(), self.shared.in_timed_run());
        }
        let spec_index = match self.shared.class(meta) {
            Class::Ignored | Class::Event { .. } => {
                otel::open_traced(&self.shared, attrs, id, &ctx);
                return;
            }
            Class::Interval(i) => i,
            Class::Step(slots) => return self.open_step(attrs, id, &slots),
            Class::Warmup => {
                self.shared
                    .state
                    .warmup_depth
                    .fetch_add(1, Ordering::Relaxed);
                self.shared.bucket(id).fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        self.open_interval(attrs, id, spec_index, ctx);
    }

    fn on_enter(&self, id: &Id, _ctx: Context<'_, S>) {
        if self.shared.maybe_tracked(id) {
            enter_tracked(&self.shared, id);
        }
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        if self.shared.maybe_tracked(id) {
            entered::exit_interval(self.shared.id, id.into_u64());
        }
    }

    fn on_record(&self, id: &Id, values: &SpanValues<'_>, _ctx: Context<'_, S>) {
        let shared = &*self.shared;
        if shared.maybe_step(id)
            && shared
                .state
                .steps
                .update(id.into_u64(), |v| values.record(v))
        {
            return;
        }
        if !shared.maybe_tracked(id) {
            return;
        }
        let span = id.into_u64();
        if let Some(open) = shared.open_intervals().iter_mut().find(|o| o.span == span) {
            values.record(&mut open.fields);
            open.otel.record(values);
        }
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let shared = &*self.shared;
        let Class::Event {
            roles,
            progress,
            samples,
            file,
        } = shared.class(meta)
        else {
            return;
        };
        if !shared.active {
            // Only `eval_accuracy` events get here (`inactive::InactiveFilter`).
            return inactive_eval(shared, event, &roles);
        }
        let time = Timestamp::now();
        let mut r = shared.pipeline.record();
        let Pending { traced, capture } = &mut *r;
        capture.set_fields(meta.fields());
        let metadata = &mut traced.record.metadata;
        let mut parts = EventFields::new(
            &mut metadata.fields,
            &mut metadata.stash,
            capture,
            &roles,
            callsite::key_hint(meta),
        );
        event.record(&mut parts);
        if let Some(learned) = parts.learned_key {
            callsite::remember_key(meta, learned);
        }
        let (key, value, namespace) = (parts.key, parts.value, parts.namespace);
        let Some(key) = key else {
            // `mllog.key = field::Empty`: nothing to log.
            return shared.pipeline.recycle(r);
        };
        // Cheap bytes first: most keys are not `eval_accuracy`, and this runs for every event.
        let is_eval = key.len() == keys::EVAL_ACCURACY.len()
            && key.as_bytes()[0] == b'e'
            && key == keys::EVAL_ACCURACY;
        // The spare record was cleared on the worker: nothing to drop in these fields.
        forget(replace(
            &mut r.namespace,
            namespace.unwrap_or_else(|| shared.namespace.clone()),
        ));
        r.time = time;
        r.event_type = EventType::PointInTime;
        forget(replace(&mut r.key, key));
        forget(replace(&mut r.value, value));
        if is_eval {
            // The layer reads the value itself: a string one is settled here (the metadata
            // stays raw; `fill_event_progress` reads it as it is).
            let Pending { traced, capture } = &mut *r;
            let record = &mut traced.record;
            if let Some(v) = capture.take_value(&mut record.metadata.stash) {
                record.value = v;
            }
            feed_eval(&shared.stats, &mut record.value);
            shared.fill_event_progress(&mut r, (progress, samples), Some(keys::EVAL_ACCURACY));
        }
        r.metadata.file = Some(Cow::Borrowed(file));
        r.metadata.lineno = Some(meta.line().unwrap_or(0));
        r.tid = crate::os_thread::id();
        r.scope = entered::current_interval(shared.id);
        if is_eval {
            shared.pipeline.push_urgent(r);
        } else {
            shared.pipeline.push(r);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        for hook in &*self.shared.span_hooks {
            hook.on_span_close(id.into_u64());
        }
        let shared = &*self.shared;
        // Counted steps first, the hot path: found by id in their table, no span lookup.
        if shared.maybe_step(&id)
            && let Some(frame) = shared.state.steps.close(id.into_u64())
        {
            shared.step_bucket(&id).fetch_sub(1, Ordering::Relaxed);
            return self.close_step(&frame);
        }
        if shared.maybe_tracked(&id) {
            self.close_interval(id, ctx);
        }
    }
}

/// The layer returned by [`MllogLayer::builder`]: add it to a `tracing_subscriber::Registry`.
///
/// Keep the [`crate::Guard`] alive for the whole run: dropping it (or
/// [`crate::Guard::shutdown`]) ends the run's open intervals and flushes the file.
///
/// ```
/// use tracing_mllog::{keys, mllog, MllogLayer, Output};
/// use tracing_subscriber::prelude::*;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("mllog.txt");
/// let (layer, guard) = MllogLayer::builder()
///     .output(Output::file(&path))
///     .build()
///     .expect("MLLOG output");
/// tracing_subscriber::registry().with(layer).init();
///
/// mllog!(keys::SEED, 42);
/// drop(guard); // at the end of training: everything is in the file
///
/// let log = std::fs::read_to_string(&path)?;
/// let seed = log.lines().find(|l| l.contains(r#""key": "seed""#)).expect("the seed line");
/// assert!(seed.starts_with(":::MLLOG {") && seed.contains(r#""value": 42"#), "{seed}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MllogLayer<S> {
    inner: Inner<S>,
    shared: Arc<Shared>,
}

impl<S> std::fmt::Debug for MllogLayer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MllogLayer")
            .field("writes", &self.shared.writes)
            .field("active", &self.shared.active)
            .finish_non_exhaustive()
    }
}

enum Inner<S> {
    /// Turns spans and events into records.
    Active(Core),
    /// Nothing to write on this rank: a per-layer filter that says `never` to every callsite
    /// but the `eval_accuracy` events' and, when there is a barrier to pass, the `run` span's. One variant for both, and the
    /// filter one pointer wide: a third variant, or a wider one, changes the enum's layout
    /// and every hook's match costs each step more (`examples/budgets.rs`).
    Inactive(Filtered<Core, inactive::InactiveFilter, S>),
}

impl MllogLayer<tracing_subscriber::Registry> {
    /// Starts configuring a layer. (The subscriber type is inferred at [`Builder::build`].)
    pub fn builder() -> Builder {
        Builder::default()
    }
}

impl<S> MllogLayer<S> {
    pub(crate) fn new(shared: Arc<Shared>) -> MllogLayer<S> {
        let core = Core {
            shared: shared.clone(),
        };
        let run_span = shared
            .barrier
            .as_ref()
            .and_then(|_| shared.intervals.iter().find(|s| s.kind == Interval::Run))
            .map(|s| s.span_name.to_string());
        let inner = if shared.active {
            Inner::Active(core)
        } else {
            Inner::Inactive(Filtered::new(
                core,
                inactive::InactiveFilter(run_span.map(Box::new)),
            ))
        };
        MllogLayer { inner, shared }
    }

    /// Whether this process writes MLLOG lines (its rank is the writing rank, or all ranks write).
    pub fn writes(&self) -> bool {
        self.shared.writes
    }

    /// A handle for the training loop: convergence, samples, throughput.
    pub fn run_handle(&self) -> RunHandle {
        RunHandle {
            stats: self.shared.stats.clone(),
        }
    }

    /// Whether a `run` span is open right now.
    pub fn run_open(&self) -> bool {
        self.shared.state.run_open.load(Ordering::Relaxed)
    }
}

macro_rules! delegate {
    ($self:ident, $layer:ident => $call:expr) => {
        match &$self.inner {
            Inner::Active($layer) => $call,
            Inner::Inactive($layer) => $call,
        }
    };
}

// The hot hooks are marked `#[inline]`: left to itself, LLVM stopped inlining these one-line
// delegations into `Layered` once the hooks behind them grew a little (it showed in every
// step of `examples/budgets.rs`).
impl<S> Layer<S> for MllogLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_register_dispatch(&self, subscriber: &tracing_core::Dispatch) {
        delegate!(self, l => Layer::<S>::on_register_dispatch(l, subscriber))
    }
    fn on_layer(&mut self, subscriber: &mut S) {
        match &mut self.inner {
            Inner::Active(l) => Layer::<S>::on_layer(l, subscriber),
            Inner::Inactive(l) => l.on_layer(subscriber),
        }
    }
    fn register_callsite(&self, meta: &'static CallsiteMeta<'static>) -> Interest {
        delegate!(self, l => Layer::<S>::register_callsite(l, meta))
    }
    fn enabled(&self, meta: &CallsiteMeta<'_>, ctx: Context<'_, S>) -> bool {
        delegate!(self, l => l.enabled(meta, ctx))
    }
    #[inline]
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        delegate!(self, l => l.on_new_span(attrs, id, ctx))
    }
    fn max_level_hint(&self) -> Option<tracing_core::LevelFilter> {
        delegate!(self, l => Layer::<S>::max_level_hint(l))
    }
    fn on_record(&self, span: &Id, values: &SpanValues<'_>, ctx: Context<'_, S>) {
        delegate!(self, l => l.on_record(span, values, ctx))
    }
    fn on_follows_from(&self, span: &Id, follows: &Id, ctx: Context<'_, S>) {
        delegate!(self, l => l.on_follows_from(span, follows, ctx))
    }
    fn event_enabled(&self, event: &Event<'_>, ctx: Context<'_, S>) -> bool {
        delegate!(self, l => l.event_enabled(event, ctx))
    }
    #[inline]
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        delegate!(self, l => l.on_event(event, ctx))
    }
    #[inline]
    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        delegate!(self, l => l.on_enter(id, ctx))
    }
    #[inline]
    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        delegate!(self, l => l.on_exit(id, ctx))
    }
    #[inline]
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        delegate!(self, l => l.on_close(id, ctx))
    }
    fn on_id_change(&self, old: &Id, new: &Id, ctx: Context<'_, S>) {
        delegate!(self, l => l.on_id_change(old, new, ctx))
    }
    #[doc(hidden)]
    unsafe fn downcast_raw(&self, id: std::any::TypeId) -> Option<*const ()> {
        if id == std::any::TypeId::of::<Self>() {
            return Some(self as *const Self as *const ());
        }
        // SAFETY: forwarded unchanged to the wrapped layer, which upholds the contract; the
        // per-layer filter machinery of an inactive layer finds its `FilterId` this way.
        match &self.inner {
            Inner::Active(l) => unsafe { Layer::<S>::downcast_raw(l, id) },
            Inner::Inactive(l) => unsafe { l.downcast_raw(id) },
        }
    }
}
