//! The optional sinks and the segment profiler, each registered once, under its feature: the
//! one place a feature flag decides what `Builder::build` can plug in. It sits outside `sink`
//! and `profile` so that neither imports the other's registration.

use crate::sink::plug::Factory;

/// The optional sinks (and the segment profiler), each registered once, under its feature:
/// `Builder::build` calls them in this order. Adding a sink is a module with a
/// [`Factory`] and one line here.
pub(crate) const FACTORIES: &[Factory] = &[
    // First: an RPD profiler may have to export variables before any thread starts.
    #[cfg(feature = "profiling")]
    crate::profile::plug,
    #[cfg(feature = "object-store")]
    crate::sink::upload_plug,
    #[cfg(feature = "rpd")]
    crate::sink::rpd_plug,
    #[cfg(feature = "nvtx")]
    crate::sink::nvtx_plug,
    #[cfg(feature = "otel-sdk")]
    crate::sink::otel_plug,
];
