//! [`Output`]: where the MLLOG lines go, one value for the builder.

use std::io::Write;
use std::path::PathBuf;

/// Where the layer writes the MLLOG lines: [`crate::Builder::output`] takes one, and the last
/// one given is the one used. `MLLOG_OUTPUT_FILE`, `MLLOG_SAVE_TO_FILE` and `MLLOG_APPEND`
/// override it under [`crate::Builder::from_env`] (except [`Output::Followed`]).
///
/// ```
/// use tracing_mllog::{MllogLayer, Output};
///
/// let dir = tempfile::tempdir()?;
/// let (_layer, guard) = MllogLayer::builder()
///     .output(Output::file(dir.path().join("result_0.txt")))
///     .build::<tracing_subscriber::Registry>()?;
/// drop(guard);
/// assert!(dir.path().join("result_0.txt").exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub enum Output {
    /// Standard output, as `mlperf_logging` does (the default).
    #[default]
    Stdout,
    /// A file, created with its parent directories; truncated at `build()` unless `append`.
    File {
        /// The file.
        path: PathBuf,
        /// Append to what the file holds instead of truncating it (`MLLOG_APPEND`).
        append: bool,
    },
    /// Any writer, owned by the worker thread.
    Writer(Box<dyn Write + Send>),
    /// Another process writes this MLLOG file (a Python job followed by `mllog watch`): the
    /// pipeline writes no MLLOG text, and the sinks that read the log file (the object-store
    /// uploader) read this one. The environment never overrides it, so a watcher started
    /// inside a job never truncates a file of the job's. Use it with
    /// [`crate::Builder::build_feed`].
    Followed(PathBuf),
    /// No MLLOG text at all; only the [`crate::Builder::sink`]s receive records.
    Nowhere,
}

impl Output {
    /// A file, truncated at `build()`.
    pub fn file(path: impl Into<PathBuf>) -> Output {
        Output::File {
            path: path.into(),
            append: false,
        }
    }

    /// A file appended to (created when missing).
    pub fn append_to(path: impl Into<PathBuf>) -> Output {
        Output::File {
            path: path.into(),
            append: true,
        }
    }

    /// Any writer, owned by the worker thread.
    pub fn writer(w: impl Write + Send + 'static) -> Output {
        Output::Writer(Box::new(w))
    }

    /// A file another process writes ([`Output::Followed`]).
    pub fn followed(path: impl Into<PathBuf>) -> Output {
        Output::Followed(path.into())
    }

    /// The file the sinks that read the log (the uploader) read, when there is one.
    pub(crate) fn file_path(&self) -> Option<&PathBuf> {
        match self {
            Output::File { path, .. } | Output::Followed(path) => Some(path),
            _ => None,
        }
    }
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::Stdout => f.write_str("Stdout"),
            Output::File { path, append } => f
                .debug_struct("File")
                .field("path", path)
                .field("append", append)
                .finish(),
            Output::Writer(_) => f.write_str("Writer(..)"),
            Output::Followed(path) => f.debug_tuple("Followed").field(path).finish(),
            Output::Nowhere => f.write_str("Nowhere"),
        }
    }
}
