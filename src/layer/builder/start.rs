//! The build's last steps: the settings, with the environment applied, become the sinks at
//! their places, the pipeline and the layer.

use std::borrow::Cow;
use std::sync::Arc;

use super::Builder;
use crate::barrier::At;
use crate::cache_clear::CacheClear;
use crate::compliance::{ComplianceHandle, ComplianceSink, LivePolicy, LiveRulesHandle};
use crate::device_sync::DeviceSyncs;
use crate::env::Env;
use crate::keys;
use crate::layer::plan::{Place, SinkPlan};
use crate::layer::{IntervalSpec, MllogLayer, Shared};
use crate::pipeline::{Guard, RecordSender, Start};
use crate::record::Value;
use crate::sink::plug::SpanHook;
use crate::sink::{Delivery, LayerAsks, MllogFileSink, Sink, SinkStart};
use crate::{Error, Output};

/// A builder with the environment applied and validated: what the sinks and the layer are
/// made of.
pub(super) struct Settings {
    pub(super) builder: Builder,
    pub(super) env: Env,
    pub(super) rank: u32,
    pub(super) writes: bool,
    pub(super) intervals: Vec<IntervalSpec>,
    /// Rank variables that disagree with the rank used, said once the pipeline runs.
    pub(super) rank_conflicts: Vec<crate::env::RankConflict>,
}

/// The sinks of one build, started, and what they ask of the layer and the guard.
pub(super) struct Planned {
    pub(super) plan: SinkPlan,
    /// The live checker's handle, and whether its failing verdict is printed at shutdown.
    pub(super) compliance: Option<(ComplianceHandle, bool)>,
    /// The live check against rules read at run time.
    pub(super) live_rules: Option<LiveRulesHandle>,
    pub(super) asks: LayerAsks,
    /// Called for every span on the training thread (the segment profiler).
    pub(super) span_hooks: Vec<Arc<dyn SpanHook>>,
}

impl Settings {
    /// Every sink at its place, started: the profiler first (an RPD profiler may have to
    /// export variables before any thread starts); the sinks given in code (on every rank
    /// where asked) and those the environment asks for (`crate::registry::FACTORIES`; one
    /// replaces a given sink of its name: code, then the environment), each started
    /// ([`Sink::start`]); the live checker; and last, once nothing else can fail, the MLLOG
    /// output, opened (a file truncated) now.
    pub(super) fn plan(&mut self) -> Result<Planned, Error> {
        let b = &mut self.builder;
        let writes = self.writes;
        let output = if writes {
            std::mem::take(&mut b.output)
        } else {
            Output::Nowhere
        };
        let file_path = output.file_path().cloned();
        #[allow(unused_mut)] // pushed to with the `profiling` feature only
        let mut span_hooks: Vec<Arc<dyn SpanHook>> = Vec::new();
        #[cfg(feature = "profiling")]
        if writes {
            span_hooks.extend(crate::registry::profiler(&self.env, b.profiler.take())?);
        }
        for (sink, _, chosen) in &b.sinks {
            let named = b.deliveries.iter().rev().find(|(n, _)| n == sink.name());
            if let (Some(chosen), Some((name, by_name))) = (chosen, named)
                && chosen != by_name
            {
                return Err(Error::Config(format!(
                        "the sink `{name}` is given with {chosen:?} (Builder::sink_with) and                          {by_name:?} (Builder::sink_delivery): give one"
                    )));
            }
        }
        let mut sinks: Vec<(Place, Box<dyn Sink>, Delivery)> = std::mem::take(&mut b.sinks)
            .into_iter()
            .filter(|(_, every_rank, _)| writes || *every_rank)
            .map(|(sink, _, chosen)| (Place::Given, sink, chosen.unwrap_or_default()))
            .collect();
        for factory in crate::registry::FACTORIES {
            let Some(found) = factory(&self.env, self.rank, &b.submission)? else {
                continue;
            };
            if writes || found.every_rank {
                sinks.retain(|(_, given, _)| given.name() != found.sink.name());
                sinks.push((Place::Optional, found.sink, found.delivery));
            }
        }
        let mut asks = LayerAsks {
            trace_steps: b.trace_steps,
            ..LayerAsks::default()
        };
        let mut plan = SinkPlan::default();
        for (place, mut sink, delivery) in sinks {
            let mut start = SinkStart::new(
                self.rank,
                writes,
                file_path.as_deref(),
                &b.submission,
                &mut asks,
            );
            if let Err(source) = sink.start(&mut start) {
                let what = format!("the sink `{}`", sink.name());
                return Err(Error::Start { what, source });
            }
            let place = if start.reads_log() {
                Place::AfterLog
            } else {
                place
            };
            plan.add(place, sink, delivery);
        }
        let mut compliance = None;
        #[allow(unused_mut)] // set with the `rules` feature only
        let mut live_rules = None;
        if writes && !matches!(b.live_check, LivePolicy::Off) {
            let warn_at_shutdown = matches!(b.live_check, LivePolicy::Warn);
            let policy = std::mem::take(&mut b.live_check);
            // With rules read at run time, their check follows the built-in one, under the
            // same policy (a callback shared by both).
            #[cfg(feature = "rules")]
            let (policy, rules_sink) = match b.live_rules.take() {
                Some(rules) => {
                    let (policy, shared) = crate::compliance::split_policy(policy);
                    let ruleset = b.live_rules_ruleset.take();
                    let (sink, handle) =
                        crate::compliance::RulesSink::start(rules, b.ruleset, ruleset, shared)
                            .map_err(Error::Worker)?;
                    live_rules = Some(handle);
                    (policy, Some(sink))
                }
                None => (policy, None),
            };
            let sink = ComplianceSink::new(b.ruleset).with_policy(policy);
            let sink = match b.eval_schedule.take() {
                Some(schedule) => sink.with_eval_schedule(schedule),
                None => sink,
            };
            compliance = Some((sink.handle(), warn_at_shutdown));
            plan.add(Place::Checker, Box::new(sink), Delivery::Inline);
            #[cfg(feature = "rules")]
            if let Some(sink) = rules_sink {
                plan.add(Place::Checker, Box::new(sink), Delivery::Inline);
            }
        }
        let sink: Option<Box<dyn Sink>> = match output {
            Output::Stdout => Some(Box::new(MllogFileSink::stdout())),
            Output::File { path, append } => Some(Box::new(
                MllogFileSink::create(&path, append)
                    .map_err(|source| Error::Output { path, source })?,
            )),
            Output::Writer(w) => Some(Box::new(MllogFileSink::writer(w))),
            Output::Nowhere | Output::Followed(_) => None,
        };
        if let Some(sink) = sink {
            plan.add(Place::Output, sink, Delivery::Inline);
        }
        Ok(Planned {
            plan,
            compliance,
            live_rules,
            asks,
            span_hooks,
        })
    }

    /// Starts the pipeline with its sinks and the layer over it, ties the guard to the layer
    /// and the process's exit paths.
    pub(super) fn start<S>(self, planned: Planned) -> Result<(MllogLayer<S>, Guard), Error> {
        let Settings {
            builder: b,
            writes,
            intervals,
            env,
            rank_conflicts,
            ..
        } = self;
        let (cache_cleared, cache_note) = crate::cache_clear::settle(b.cache_clear, &env, writes);
        let Planned {
            plan,
            compliance,
            live_rules,
            asks,
            span_hooks,
        } = planned;
        if b.handle_signals && writes {
            crate::pipeline::handle_signals().map_err(Error::Worker)?;
        }
        // A rank with nothing to feed disables every callsite (see `MllogLayer`); a span hook
        // (the profiler) alone needs the spans too.
        let active = !plan.is_empty() || !span_hooks.is_empty();
        let (pipeline, guard) = RecordSender::start(Start {
            sinks: plan.into_ordered(&b.deliveries),
            settings: b.pipeline,
            compliance,
            live_rules,
            writes,
            hooks: span_hooks.clone(),
        })
        .map_err(Error::Worker)?;
        for warning in rank_conflicts.iter().map(ToString::to_string) {
            stderr_line!("tracing-mllog: warning: {warning}");
            pipeline.warn(warning);
        }
        #[cfg(not(feature = "rules"))]
        say_rules_unread(&b, writes, &pipeline);
        // Said by the report at the end and by the live check at `run_start`, where a
        // reviewer of the run looks; a drop that failed is said now as well.
        if let Some(note) = cache_note {
            if b.cache_clear == CacheClear::Drop {
                stderr_line!("tracing-mllog: warning: {note}");
            }
            pipeline.warn(note);
        }
        // Process-wide: the intervals a thread has entered are kept per thread for every
        // layer at once (`entered`), and each layer finds its own by this id.
        static LAYERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let shared = Arc::new(Shared {
            id: LAYERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
            pipeline,
            intervals,
            step_span: Cow::Owned(b.step_span),
            warmup_span: Cow::Owned(b.warmup_span),
            // Leaked once per layer, so that every record borrows it instead of cloning a String.
            namespace: Cow::Borrowed(Box::leak(b.namespace.into_boxed_str())),
            root_dir: b.root_dir,
            cache_clear: b.cache_clear.records(),
            cache_cleared,
            barrier: b.barrier.as_ref().and_then(|b| b.arm(At::RunStart)),
            stop_barrier: b.barrier.as_ref().and_then(|b| b.arm(At::RunStop)),
            device: DeviceSyncs::new(b.device_sync, b.device_sync_at.unwrap_or_default()),
            clock: crate::clock_step::ClockWatch::new(b.clock_step),
            after_init_start: {
                let mut records = b.submission.records();
                if let Some(seed) = b.seed {
                    records.push((Cow::Borrowed(keys::SEED), Value::Int(seed)));
                }
                records.extend(b.hyperparameters);
                records
            },
            writes,
            active,
            samples_per_step: b.samples_per_step,
            train_loss_every: b.train_loss_every,
            throughput_stats: b.throughput_stats,
            trace_steps: asks.trace_steps,
            traced_spans: asks.traced_spans,
            stats: Arc::new(crate::run::RunStats::new(b.target)),
            span_hooks: span_hooks.into_boxed_slice(),
            state: Default::default(),
        });
        guard.arm(&shared);
        Ok((MllogLayer::new(shared), guard))
    }
}

/// What a build that cannot read rules says when `MLLOG_RULES` names some, once, on the rank
/// that writes, on stderr and in the guard's report: the operator expects a check that will
/// not happen.
#[cfg(not(feature = "rules"))]
pub(super) fn say_rules_unread(b: &Builder, writes: bool, pipeline: &RecordSender) {
    let (true, Some(spec)) = (writes, &b.rules_unread) else {
        return;
    };
    let note = format!(
        "MLLOG_RULES={spec} is set, but this build of tracing-mllog lacks its `rules` feature: \
         the live check uses the built-in rules only (enable the feature, or unset the variable)"
    );
    stderr_line!("tracing-mllog: warning: {note}");
    pipeline.warn(note);
}
