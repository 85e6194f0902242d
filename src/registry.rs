//! The optional sinks and the segment profiler, each registered once, under its feature: the
//! one place a feature flag decides what the environment can turn on in `Builder::build`. It
//! sits outside `sink` and `profile` so that neither imports the other's registration.

use crate::env::{Env, EnvError};
use crate::sink::plug::Factory;

/// The optional sinks the environment can turn on, each by its `from_env`, each registered
/// once, under its feature: `Builder::build` calls them in this order (after the profiler,
/// which may have to export variables before any thread starts). Adding a sink is a module
/// with a [`Factory`] and one line here.
pub(crate) const FACTORIES: &[Factory] = &[
    #[cfg(feature = "object-store")]
    crate::sink::upload_plug,
    #[cfg(feature = "rpd")]
    crate::sink::rpd_plug,
    #[cfg(feature = "nvtx")]
    crate::sink::nvtx_plug,
    #[cfg(feature = "otel-sdk")]
    crate::sink::otel_plug,
];

/// The segment profiler: the one given to `Builder::profiler`, else the one `PROFILER` asks
/// for. Not a sink but a span hook: it starts and stops the profiler on the training thread,
/// at the span's own edges, which a sink on the worker could not.
#[cfg(feature = "profiling")]
pub(crate) fn profiler(
    env: &Env,
    given: Option<crate::profile::SegmentProfiler>,
) -> Result<Option<std::sync::Arc<dyn crate::sink::plug::SpanHook>>, crate::Error> {
    let profiler = match given {
        Some(p) => Some(p),
        None => crate::profile::SegmentProfiler::from_env(env)
            .map_err(|e| crate::Error::start("segment profiling", e))?,
    };
    Ok(profiler.map(|p| std::sync::Arc::new(p) as _))
}

/// Variables that turn on an optional sink or the profiler. In a build without the feature
/// that reads one, nothing would: an operator who sets `MLLOG_OTEL=1` would get no export and
/// no word. `build()` says so instead, naming the variable and the feature. The names are
/// spelled out here: the modules' constants for them exist only with their features.
pub(crate) fn check_features(env: &Env) -> Result<(), EnvError> {
    let needs = |on: bool, name: &str, feature: &str, compiled: bool| {
        if on && !compiled {
            return Err(env.invalid(
                name,
                format!(
                    "nothing reads it: this build of tracing-mllog lacks its `{feature}` \
                     feature (enable it, or unset the variable)"
                ),
            ));
        }
        Ok(())
    };
    let otel = env.flag("MLLOG_OTEL")? == Some(true);
    needs(otel, "MLLOG_OTEL", "otel", cfg!(feature = "otel-sdk"))?;
    let nvtx = env.flag("MLLOG_NVTX")? == Some(true);
    needs(nvtx, "MLLOG_NVTX", "nvtx", cfg!(feature = "nvtx"))?;
    let rpd = env.string("MLLOG_RPD_FILE")?.is_some();
    needs(rpd, "MLLOG_RPD_FILE", "rpd", cfg!(feature = "rpd"))?;
    let upload = env.string("MLLOG_UPLOAD_URL")?.is_some();
    needs(
        upload,
        "MLLOG_UPLOAD_URL",
        "object-store",
        cfg!(feature = "object-store"),
    )?;
    // `PROFILER` is a common name: only the two values this crate reads are its business.
    let profiler = env
        .string("PROFILER")?
        .map(|p| p.trim().to_ascii_lowercase());
    if matches!(profiler.as_deref(), Some("rpd" | "cuda")) {
        needs(
            true,
            "PROFILER",
            "rpd` or `nvtx",
            cfg!(feature = "profiling"),
        )?;
    }
    Ok(())
}

/// The variables that turn on the output or an optional sink, where a builder that does not
/// read the environment finds them set: an operator who set one expects an effect, so
/// `build()` names them (never their values) rather than ignore them without a word.
pub(crate) fn switches_set(process: &Env) -> Vec<&'static str> {
    [
        "MLLOG_OUTPUT_FILE",
        "MLLOG_SAVE_TO_FILE",
        "MLLOG_OTEL",
        "MLLOG_NVTX",
        "MLLOG_RPD_FILE",
        "MLLOG_UPLOAD_URL",
        "MLLOG_RULES",
    ]
    .into_iter()
    .filter(|name| match process.raw(name) {
        Ok(value) => value.is_some_and(|v| !v.trim().is_empty()),
        // Set, but not UTF-8: set all the same.
        Err(_) => true,
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::check_features;
    use crate::env::Env;

    /// Each variable that turns on an optional part is an error in a build without its
    /// feature, and passes in one with it; switched off, it is never an error.
    #[test]
    fn a_variable_whose_feature_is_missing_is_an_error() {
        for (name, value, compiled) in [
            ("MLLOG_OTEL", "1", cfg!(feature = "otel-sdk")),
            ("MLLOG_NVTX", "yes", cfg!(feature = "nvtx")),
            ("MLLOG_RPD_FILE", "/tmp/run.rpd", cfg!(feature = "rpd")),
            (
                "MLLOG_UPLOAD_URL",
                "s3://bucket/run",
                cfg!(feature = "object-store"),
            ),
            ("PROFILER", "cuda", cfg!(feature = "profiling")),
        ] {
            let result = check_features(&Env::from_map([(name, value)]));
            match result {
                Ok(()) => assert!(compiled, "{name}={value} passed without its feature"),
                Err(e) => {
                    assert!(!compiled, "{name}: {e}");
                    assert_eq!(e.name(), name);
                    assert!(e.to_string().contains("feature"), "{e}");
                }
            }
        }
        for (name, value) in [
            ("MLLOG_OTEL", "0"),
            ("MLLOG_NVTX", "off"),
            ("PROFILER", "nsys"),
        ] {
            assert!(
                check_features(&Env::from_map([(name, value)])).is_ok(),
                "{name}"
            );
        }
    }
}
