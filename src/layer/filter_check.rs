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

use std::sync::Weak;
use std::time::Duration;

use tracing_core::LevelFilter;

/// How long after registration the global maximum level is read (registration finishes in
/// microseconds; this leaves a wide margin).
const SETTLE: Duration = Duration::from_millis(500);

/// Starts the check for a layer whose state is `alive` (nothing is said once the layer is
/// gone). Never fails: without a thread there is simply no early warning.
pub(crate) fn spawn<T: Send + Sync + 'static>(alive: Weak<T>) {
    let _ = std::thread::Builder::new()
        .name("mllog-filter-check".into())
        .spawn(move || {
            std::thread::sleep(SETTLE);
            let max = LevelFilter::current();
            if alive.strong_count() > 0 && max < LevelFilter::INFO {
                eprintln!("tracing-mllog: {}", warning(max));
            }
        });
}

/// The warning for a global maximum level of `max`.
fn warning(max: LevelFilter) -> String {
    format!(
        "warning: the subscriber enables no level above {max}, so INFO spans and events \
         (`info_span!`, every `mllog!`) never reach this layer and the MLLOG log will miss \
         them. Put filters on the other layers (`fmt::layer().with_filter(..)`), not on the \
         whole subscriber."
    )
}
