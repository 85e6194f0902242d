//! Warns early when the subscriber's filters hide `INFO` from every layer.
//!
//! A filter on the whole subscriber (`registry().with(LevelFilter::WARN)`, an `EnvFilter` at
//! `warn`) disables `info_span!` and `mllog!` callsites for every layer, this one included, and
//! the MLLOG log comes out empty without a single error on the way. The layer cannot see this
//! when it is registered: it is not told about callsites a filter outside it disabled, the
//! stack's level hint is not public, and the global maximum level is updated only after the
//! layers have been told about their dispatcher. So a short-lived thread looks at the global
//! maximum a moment later; below `INFO`, `mllog!` events (always `INFO`) certainly never
//! arrive, which is said on stderr at once instead of at the end of a multi-hour run. The
//! guard's report says it again at shutdown ([`crate::Report::received_nothing`]).
//!
//! Filters that keep `INFO` for some targets only (`RUST_LOG=hyper=debug`, `EnvFilter::new(
//! "my_crate::data=info")`) disable the MLLOG callsites one by one. The layer learns of every
//! callsite before the filters inside it decide, so each callsite it maps is put to the whole
//! subscriber afterwards, on a short-lived thread ([`CallsiteCheck`]): one the subscriber
//! disables is named on stderr when it is first reached.
//!
//! The layer learns its subscriber from `on_register_dispatch`, which `Option<L>` and `Vec<L>`
//! do not pass on (tracing-subscriber 0.3). The checks start when the subscriber is put
//! together (`on_layer`, which they do pass on), and without a subscriber of its own the layer
//! puts the callsites to the global one, if it is part of it. A scoped subscriber holding the
//! layer that way gets the level check only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tracing_core::dispatcher::WeakDispatch;
use tracing_core::{LevelFilter, Metadata};

/// How long after registration the global maximum level is read (registration finishes in
/// microseconds; this leaves a wide margin).
const SETTLE: Duration = Duration::from_millis(500);

/// How long a maximum level of `OFF` is taken for a subscriber put together but not installed
/// yet (no dispatcher exists, so nothing is enabled) before it is believed.
const PATIENCE: Duration = Duration::from_secs(30);

/// Starts the check for a layer whose state is `alive` (nothing is said once the layer is
/// gone); `then` runs on the same thread once the subscriber is in place. Never fails:
/// without a thread there is simply no early warning.
pub(crate) fn spawn<T: Send + Sync + 'static>(
    alive: Weak<T>,
    then: impl FnOnce() + Send + 'static,
) {
    let _ = std::thread::Builder::new()
        .name("mllog-filter-check".into())
        .spawn(move || {
            std::thread::sleep(SETTLE);
            let mut max = LevelFilter::current();
            let mut waited = SETTLE;
            while max == LevelFilter::OFF && waited < PATIENCE && alive.strong_count() > 0 {
                std::thread::sleep(SETTLE);
                waited += SETTLE;
                max = LevelFilter::current();
            }
            if alive.strong_count() > 0 && max < LevelFilter::INFO {
                stderr_line!("tracing-mllog: warning: {}", level_cause(max));
            }
            then();
        });
}

/// The cause and the fix for a global maximum level of `max`.
pub(crate) fn level_cause(max: LevelFilter) -> String {
    let level = max.to_string().to_uppercase();
    format!(
        "a filter on the whole subscriber enables nothing above {max} (`registry().with(\
         EnvFilter)`, `fmt().with_env_filter(..)`, `.with(LevelFilter::{level})` or `RUST_LOG`), \
         so the `init`, `run`, `block` and `eval` spans and every `mllog!` (all INFO) never \
         reach the MLLOG layer and the log is missing them. Filter the console only: \
         `registry().with(fmt::layer().with_filter(EnvFilter::from_default_env())).with(mllog)`"
    )
}

/// Puts each mapped callsite to the whole subscriber once it is registered, and warns when
/// the subscriber disables it.
#[derive(Default)]
pub(crate) struct CallsiteCheck {
    dispatch: OnceLock<WeakDispatch>,
    pending: Mutex<Vec<&'static Metadata<'static>>>,
    running: AtomicBool,
    /// The callsites found disabled so far, for the preflight.
    disabled: Mutex<Vec<&'static Metadata<'static>>>,
    /// Held while a batch is checked and said, so that [`CallsiteCheck::check_now`] returns
    /// only once everything queued before it has been said.
    busy: Mutex<()>,
}

impl CallsiteCheck {
    /// The subscriber the layer is part of; the callsites registered before it was known are
    /// checked now.
    pub(crate) fn set_dispatch(self: &Arc<Self>, dispatch: &tracing_core::Dispatch) {
        let _ = self.dispatch.set(dispatch.downgrade());
        if !self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
        {
            self.start();
        }
    }

    /// Whether the subscriber is known.
    pub(crate) fn has_dispatch(&self) -> bool {
        self.dispatch.get().is_some()
    }

    /// Checks `meta` soon, on a thread of its own: the filters inside the layer decide
    /// about the callsite only after this call returns.
    pub(crate) fn queue(self: &Arc<Self>, meta: &'static Metadata<'static>) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(meta);
        self.start();
    }

    /// Starts the checking thread unless it runs (or the subscriber is not known yet).
    fn start(self: &Arc<Self>) {
        if self.dispatch.get().is_some() && !self.running.swap(true, Ordering::AcqRel) {
            let this = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name("mllog-filter-check".into())
                .spawn(move || this.run());
            if spawned.is_err() {
                self.running.store(false, Ordering::Release);
            }
        }
    }

    /// Checks what is still queued on this thread, and waits (up to `deadline`) for a batch
    /// being checked: the process may be about to exit, which would cut the checking thread
    /// short and leave a disabled callsite unsaid.
    pub(crate) fn check_now(&self, deadline: std::time::Instant) {
        let _busy = crate::pipeline::lock_until(&self.busy, deadline);
        let batch = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if let Some(dispatch) = self.dispatch.get().and_then(WeakDispatch::upgrade) {
            self.keep(say_disabled(&dispatch, batch));
        }
    }

    fn keep(&self, disabled: Vec<&'static Metadata<'static>>) {
        if !disabled.is_empty() {
            self.disabled
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(disabled);
        }
    }

    /// The callsites found disabled so far (call [`CallsiteCheck::check_now`] first).
    pub(crate) fn disabled(&self) -> Vec<&'static Metadata<'static>> {
        self.disabled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn run(&self) {
        loop {
            let busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
            let batch =
                std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
            if batch.is_empty() {
                self.running.store(false, Ordering::Release);
                // A callsite queued between the take and the store: go on if no other
                // thread has taken over.
                let more = !self
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_empty();
                drop(busy);
                if more && !self.running.swap(true, Ordering::AcqRel) {
                    continue;
                }
                return;
            }
            let Some(dispatch) = self.dispatch.get().and_then(WeakDispatch::upgrade) else {
                return self.running.store(false, Ordering::Release);
            };
            self.keep(say_disabled(&dispatch, batch));
        }
    }
}

/// Names on stderr each callsite of `batch` that `dispatch` disables; returns them.
fn say_disabled(
    dispatch: &tracing_core::Dispatch,
    batch: Vec<&'static Metadata<'static>>,
) -> Vec<&'static Metadata<'static>> {
    let mut disabled = Vec::new();
    for meta in batch {
        if !dispatch.enabled(meta) {
            stderr_line!("tracing-mllog: warning: {}", disabled_cause(meta));
            disabled.push(meta);
        }
    }
    disabled
}

/// The cause and the fix for a mapped callsite the subscriber disables.
pub(crate) fn disabled_cause(meta: &Metadata<'_>) -> String {
    let what = if meta.is_event() {
        "the `mllog!` event".to_owned()
    } else {
        format!("the span `{}`", meta.name())
    };
    format!(
        "a filter on the whole subscriber disables {what} at {}:{} (target `{}`, level {}) for \
         every layer, the MLLOG layer included, so its records are missing from the log. \
         Filter the console only: `registry().with(fmt::layer().with_filter(EnvFilter::\
         from_default_env())).with(mllog)`, or wrap the filter so that MLLOG spans and events \
         pass: `.with(tracing_mllog::filter(EnvFilter::from_default_env()))`.",
        meta.file().unwrap_or("<unknown>"),
        meta.line().unwrap_or(0),
        meta.target(),
        meta.level(),
    )
}
