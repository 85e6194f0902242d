//! Device-true intervals: the program's device synchronisation
//! ([`crate::Builder::device_sync`]), called where an interval's end must be the device's.
//!
//! GPU backends (candle's CUDA and Metal devices, burn's `cuda` and `wgpu`, `tch`) queue
//! kernels and return, so a span's end measures the host's enqueue, and the kernels' time lands
//! in whichever later span reads a value back. With a synchronisation given, the layer waits
//! for the device before it stamps the end of every `block`, `eval` and `run`, and, at
//! [`SyncAt::Steps`], of every counted `train_step` as well, so that `train_step_time` and the
//! throughput of `tracked_stats` are the device's. Nothing is called without one; the cost on
//! the training thread is the synchronisation itself. docs/devices.md says what to pass for
//! each framework.

use std::sync::Arc;

use crate::env::{Env, EnvError};

/// The variable that chooses where the device is synchronised (`off`, `intervals`, `steps`).
pub(crate) const VARIABLE: &str = "MLLOG_DEVICE_SYNC";

/// A device synchronisation: returns once the work queued on the device so far has finished.
pub(crate) type Sync = Arc<dyn Fn() + Send + std::marker::Sync>;

/// Where the layer calls the device synchronisation ([`crate::Builder::device_sync_at`],
/// `MLLOG_DEVICE_SYNC=off|intervals|steps`).
///
/// ```
/// use tracing_mllog::{MllogLayer, Output, SyncAt};
///
/// let (_layer, _guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .device_sync(|| { /* e.g. candle: device.synchronize().unwrap() */ })
///     .device_sync_at(SyncAt::Steps) // step-exact train_step_time and throughput
///     .build::<tracing_subscriber::Registry>()?;
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncAt {
    /// Never, even with a synchronisation given (`off`): the host's times, as without one.
    Off,
    /// Before the end of every `block`, `eval` and `run` is stamped (`intervals`, the
    /// default): those intervals and time to train are the device's; steps keep the host's
    /// enqueue times.
    #[default]
    Intervals,
    /// Also before the end of every counted `train_step` (`steps`): `train_step_time` and
    /// throughput are the device's, at the price of the overlap between the host queueing the
    /// next step and the device running this one.
    Steps,
}

/// The synchronisations the layer calls: at interval ends, and at step ends.
#[derive(Clone, Default)]
pub(crate) struct DeviceSyncs {
    pub(crate) intervals: Option<Sync>,
    pub(crate) steps: Option<Sync>,
}

impl DeviceSyncs {
    pub(crate) fn new(sync: Option<Sync>, at: SyncAt) -> DeviceSyncs {
        DeviceSyncs {
            intervals: sync.clone().filter(|_| at != SyncAt::Off),
            steps: sync.filter(|_| at == SyncAt::Steps),
        }
    }
}

/// `MLLOG_DEVICE_SYNC`, if set.
pub(crate) fn from_env(env: &Env) -> Result<Option<SyncAt>, EnvError> {
    env.parse(VARIABLE, |v| match v.trim().to_ascii_lowercase().as_str() {
        "off" | "0" | "false" | "no" => Ok(SyncAt::Off),
        "intervals" => Ok(SyncAt::Intervals),
        "steps" => Ok(SyncAt::Steps),
        _ => Err("expected `off`, `intervals` or `steps`".to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variable_names_the_place() {
        for (v, at) in [
            ("off", SyncAt::Off),
            ("0", SyncAt::Off),
            ("intervals", SyncAt::Intervals),
            ("Steps", SyncAt::Steps),
        ] {
            assert_eq!(from_env(&Env::from_map([(VARIABLE, v)])), Ok(Some(at)));
        }
        assert_eq!(from_env(&Env::from_map([("OTHER", "1")])), Ok(None));
        let err = from_env(&Env::from_map([(VARIABLE, "always")])).unwrap_err();
        assert_eq!(err.name(), VARIABLE);
        assert!(err.to_string().contains("`intervals` or `steps`"), "{err}");
    }

    #[test]
    fn each_place_calls_where_it_says() {
        let sync: Sync = Arc::new(|| {});
        let at = |a| {
            let s = DeviceSyncs::new(Some(sync.clone()), a);
            (s.intervals.is_some(), s.steps.is_some())
        };
        assert_eq!(at(SyncAt::Off), (false, false));
        assert_eq!(at(SyncAt::Intervals), (true, false));
        assert_eq!(at(SyncAt::Steps), (true, true));
        let none = DeviceSyncs::new(None, SyncAt::Steps);
        assert!(none.intervals.is_none() && none.steps.is_none());
    }
}
