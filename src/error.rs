use std::path::PathBuf;

/// Everything that can go wrong while configuring the layer. Logging itself never returns
/// errors to the training code: failures after start-up are counted in the [`crate::Report`].
///
/// [`crate::Builder::build`] returns it. Each variant names what to fix: the path, the
/// environment variable, the benchmark or the setting; the sink-specific start errors are kept
/// as the [`Error::Start`] source, typed, for callers that match on them. The enum is
/// `#[non_exhaustive]`: match the variants you handle and keep a `_` arm.
///
/// ```
/// use tracing_mllog::{Error, MllogLayer, Output};
///
/// let dir = tempfile::tempdir()?;
/// let blocker = dir.path().join("not-a-dir");
/// std::fs::write(&blocker, "")?;
/// // The log cannot go under a regular file: the error names the path.
/// let err = MllogLayer::builder()
///     .output(Output::file(blocker.join("mllog.txt")))
///     .build::<tracing_subscriber::Registry>()
///     .err()
///     .expect("cannot be created");
/// match &err {
///     Error::Output { path, .. } => assert_eq!(path, &blocker.join("mllog.txt")),
///     other => panic!("unexpected: {other}"),
/// }
/// assert!(err.to_string().starts_with("cannot write the MLLOG output"));
/// assert!(err.to_string().ends_with("not-a-dir is a file, not a directory"), "{err}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The MLLOG output file cannot be created or written.
    #[error("cannot write the MLLOG output {}: {source}", path.display())]
    Output {
        /// The path that was asked for.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// An environment variable has a value we cannot use.
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
    /// An optional sink or the profiler could not start (bad file, missing library, ...).
    #[error("cannot start {what}: {source}")]
    Start {
        /// What failed (`"the RPD sink"`, `"segment profiling"`, "the sink `upload`", ...).
        what: String,
        /// The sink's own error (`RpdError`, `UploadError`, `OtelError`, `ProfileError`,
        /// `NvtxError`): downcast it to match on it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// Contradictory or incomplete builder settings.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The worker thread could not be started.
    #[error("cannot start the MLLOG worker thread: {0}")]
    Worker(#[source] std::io::Error),
}

impl Error {
    /// A sink's (or the profiler's) typed error, kept as the source.
    // Used by the optional sinks and the profiler only.
    #[cfg_attr(
        not(any(feature = "profiling", feature = "otel-sdk", feature = "object-store")),
        allow(dead_code)
    )]
    pub(crate) fn start(
        what: &str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::Start {
            what: what.to_owned(),
            source: Box::new(source),
        }
    }
}

impl From<mllog_core::Error> for Error {
    fn from(e: mllog_core::Error) -> Error {
        match e {
            mllog_core::Error::Env {
                name,
                value,
                reason,
            } => Error::Env {
                name,
                value,
                reason,
            },
            mllog_core::Error::UnknownBenchmark(name) => Error::UnknownBenchmark(name),
            mllog_core::Error::Submission(message) => Error::Submission(message),
            // `mllog_core::Error` is non-exhaustive: a later variant keeps its message.
            other => Error::Config(other.to_string()),
        }
    }
}
