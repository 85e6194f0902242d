//! The [`Report`]: what the pipeline delivered and what it lost, per sink, and the live
//! checker's verdict, as the guard gives it.

use crate::sink::{Detail, SinkReport};

/// What the pipeline delivered and what it lost, and the live compliance verdict.
///
/// [`Guard::report`](crate::Guard::report) gives it as it stands, [`Guard::shutdown`](crate::Guard::shutdown) at the end; a guard that is
/// dropped prints it to stderr when something was lost. `Display` gives a one-line summary
/// for a training log:
///
/// ```
/// use tracing_mllog::sink::MemorySink;
/// use tracing_mllog::{keys, mllog, MllogLayer, Output};
/// use tracing_subscriber::prelude::*;
///
/// let (sink, _records) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(sink)
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     mllog!(keys::SEED, 42);
///     mllog!(keys::GLOBAL_BATCH_SIZE, 256);
/// });
/// let report = guard.shutdown();
/// assert_eq!(report.records, 2);
/// assert!(report.is_clean(), "{report}");
/// let memory = report.sinks.iter().find(|s| s.name == "memory").unwrap();
/// assert_eq!((memory.written, memory.errors), (2, 0));
/// assert!(report.to_string().starts_with("2 records"), "{report}");
///
/// // A layer that never became part of the subscriber in use says so.
/// let (_unused, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .build::<tracing_subscriber::Registry>()?;
/// let report = guard.shutdown();
/// assert!(report.received_nothing(), "{report}");
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Whether this layer writes MLLOG records (false on the ranks that do not write, whose
    /// reports are empty by design).
    pub writes: bool,
    /// Records that reached the worker.
    pub records: u64,
    /// Records dropped because the channel stayed full (only with [`Overflow::DropAfter`](crate::Overflow::DropAfter)).
    pub dropped_queue_full: u64,
    /// Records produced after the pipeline shut down (e.g. logging after the guard dropped).
    pub dropped_after_shutdown: u64,
    /// Whether shutdown gave up waiting for a sink.
    pub shutdown_timed_out: bool,
    /// Per sink.
    pub sinks: Vec<SinkReport>,
    /// The own reports of what watches the spans without being a sink (the segment
    /// profiler's `ProfileReport`); read them with [`Report::detail`].
    pub hooks: Vec<Detail>,
    /// The compliance checker's verdict on the records so far (the whole log after
    /// shutdown), when live checking is on.
    pub compliance: Option<crate::compliance::ComplianceReport>,
    /// The live check against the official rule files read at run time, when it is on
    /// (`Builder::live_rules`, `MLLOG_RULES`; feature `rules`): where the rules came
    /// from and their verdicts, or why they could not be run.
    pub live_rules: Option<crate::compliance::LiveRulesReport>,
    /// What the layer found wrong with the run's own figures, which no rule checks (steps it
    /// never saw: a count of 0 after an evaluation, an `eval_accuracy` whose `samples_count`
    /// disagrees with the count). Said on stderr when found, and again in the report.
    pub warnings: Vec<String>,
}

impl Report {
    /// The own report of the first sink (or span hook) that keeps one of type `T`, as it was
    /// when this report was taken: `report.detail::<UploadReport>()`, `::<OtelReport>()`,
    /// `::<ProfileReport>()`, or a custom sink's (see [`crate::sink::SinkStatus`]). The one
    /// way to read a sink's own report; [`crate::Guard::detail`] reads it as it stands now.
    pub fn detail<T: std::any::Any>(&self) -> Option<&T> {
        self.sinks
            .iter()
            .filter_map(|s| s.detail.as_ref())
            .chain(&self.hooks)
            .find_map(Detail::get::<T>)
    }

    /// Records lost before reaching the worker.
    pub fn dropped(&self) -> u64 {
        self.dropped_queue_full + self.dropped_after_shutdown
    }

    /// A writing layer that received no span or event at all: it is not in the subscriber in
    /// use, or a filter on the whole subscriber hid everything from it (see [`Display`]).
    ///
    /// [`Display`]: std::fmt::Display
    pub fn received_nothing(&self) -> bool {
        self.writes && self.records == 0
    }

    /// Nothing dropped, no sink error, shutdown in time.
    pub fn is_clean(&self) -> bool {
        self.dropped() == 0
            && !self.shutdown_timed_out
            && self.sinks.iter().all(|s| s.errors == 0 && s.dropped == 0)
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} records", self.records)?;
        if self.received_nothing() {
            // The two ways a whole log goes missing without any error on the way.
            write!(
                f,
                " (no span or event reached the layer: is it part of the subscriber in use \
                 (`.init()`, `set_global_default`, `with_default`)? A filter on the whole \
                 subscriber (`EnvFilter`, `LevelFilter`, `RUST_LOG`) hides spans from every \
                 layer, this one included, and a per-layer filter on this layer \
                 (`layer.with_filter(..)`) hides them from it: filter the other layers instead \
                 (`fmt::layer().with_filter(..)`); the highest level enabled now is {})",
                tracing_core::LevelFilter::current()
            )?;
        }
        if self.dropped_queue_full > 0 {
            write!(f, ", {} dropped (queue full)", self.dropped_queue_full)?;
        }
        if self.dropped_after_shutdown > 0 {
            write!(
                f,
                ", {} dropped (after shutdown)",
                self.dropped_after_shutdown
            )?;
        }
        if self.shutdown_timed_out {
            write!(f, ", shutdown timed out")?;
        }
        if let Some(c) = &self.compliance {
            let verdict = if c.passed(true) {
                "compliant"
            } else {
                "NOT compliant"
            };
            write!(f, "; compliance ({}): {verdict}", c.ruleset)?;
        }
        if let Some(r) = &self.live_rules {
            let verdict = match (&r.error, &r.report) {
                (Some(e), _) => format!("not checked: {e}"),
                (None, Some(c)) if c.passed(true) => "compliant".to_owned(),
                (None, Some(_)) => "NOT compliant".to_owned(),
                (None, None) => "not checked yet".to_owned(),
            };
            write!(
                f,
                "; compliance ({}, rules of {}): {verdict}",
                r.ruleset, r.source
            )?;
        }
        for s in &self.sinks {
            write!(f, "; {}: {} written", s.name, s.written)?;
            if s.dropped > 0 {
                write!(f, ", {} dropped", s.dropped)?;
                if let Some(r) = &s.drop_reason {
                    write!(f, ": {r}")?;
                }
            }
            if s.errors > 0 {
                write!(f, ", {} errors", s.errors)?;
                if let Some(e) = &s.last_error {
                    write!(f, " (last: {e})")?;
                }
            }
        }
        for w in &self.warnings {
            write!(f, "\n  warning: {w}")?;
        }
        Ok(())
    }
}
