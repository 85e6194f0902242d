/// What the core types reject: an unknown benchmark name, submission metadata the rules reject,
/// a submission variable with a value that cannot be used.
///
/// Returned by `Benchmark`'s `FromStr` and [`crate::Submission::overlay_variables`] (see their
/// examples); `tracing-mllog` converts it into its own `Error` with the same variants.
///
///
/// ```
/// use mllog_core::{Benchmark, Error, Submission};
///
/// let err = "llama9_1t".parse::<Benchmark>().unwrap_err();
/// assert!(matches!(&err, Error::UnknownBenchmark(name) if name == "llama9_1t"));
///
/// let mut s = Submission::default();
/// let err = s
///     .overlay_variables(&|n: &str| (n == "MLLOG_SUBMISSION_STATUS").then(|| "hosted".to_string()))
///     .unwrap_err();
/// assert!(matches!(&err, Error::Env { name, value, .. } if name == "MLLOG_SUBMISSION_STATUS" && value == "hosted"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A variable has a value we cannot use.
    #[error("environment variable {name}={value:?}: {reason}")]
    Env {
        /// The variable.
        name: String,
        /// Its value.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// A benchmark name that no ruleset knows.
    #[error("unknown benchmark {0:?}")]
    UnknownBenchmark(String),
    /// Submission metadata that the rules reject or that a closed submission lacks.
    #[error("submission metadata: {0}")]
    Submission(String),
}

impl Error {
    pub(crate) fn env(name: &str, value: &str, reason: impl Into<String>) -> Error {
        Error::Env {
            name: name.to_owned(),
            value: value.to_owned(),
            reason: reason.into(),
        }
    }
}
