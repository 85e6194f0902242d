//! Submission metadata (the types are `mllog-core`'s) and how the layer overlays it from the
//! process environment.

pub use mllog_core::submission::*;

use crate::Error;

/// [`Submission::overlay_variables`] with the layer's error type.
pub(crate) trait OverlayEnv {
    /// Overlays the variables `get` knows; see [`Submission::overlay_variables`].
    fn overlay_env(&mut self, get: &dyn Fn(&str) -> Option<String>) -> Result<(), Error>;
}

impl OverlayEnv for Submission {
    fn overlay_env(&mut self, get: &dyn Fn(&str) -> Option<String>) -> Result<(), Error> {
        self.overlay_variables(get).map_err(Error::from)
    }
}
