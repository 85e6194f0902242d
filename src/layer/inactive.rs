//! The filter of a rank that writes nothing.
//!
//! Such a rank's layer must cost (almost) nothing, so every callsite is `never` to it, except
//! the two it needs: the `run` span, when there is a barrier to pass when `run` opens (and,
//! with the barrier before `run_stop`, when it closes), and
//! `mllog!`'s `eval_accuracy` callsite ([`crate::EVAL_EVENT`]), so that its
//! [`crate::RunHandle`] says `converged` and `diverged` at the same evaluation as rank 0's and
//! a loop `while !run.converged()` ends on every rank. Evaluations are few; every other event
//! and every step of the rank stays disabled at its callsite.

use tracing_core::subscriber::Interest;
use tracing_core::Metadata;
use tracing_subscriber::layer::{Context, Filter};

/// `never` for every callsite but `run` (the name given, when a barrier is to be passed) and
/// the `eval_accuracy` events. Boxed: one pointer, so the layer's enum keeps the layout the hot
/// hooks were measured with (a `String` or `&str` here costs every step instructions); the
/// extra allocation is once per layer.
#[allow(clippy::box_collection)]
pub(crate) struct InactiveFilter(pub(crate) Option<Box<String>>);

impl InactiveFilter {
    fn matches(&self, meta: &Metadata<'_>) -> bool {
        if meta.is_event() {
            return meta.name() == crate::EVAL_EVENT;
        }
        self.0
            .as_deref()
            .is_some_and(|run| meta.name() == run.as_str())
    }
}

impl<S> Filter<S> for InactiveFilter {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        self.matches(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.matches(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }
}
