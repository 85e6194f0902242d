//! Log sync to object storage that never blocks training (feature `object-store`).
//!
//! [`UploadSink`] sits after the MLLOG file sink. Its [`Sink::write`] only looks at the record
//! key and its [`Sink::flush`] only sets a flag and wakes the uploader; every network call runs
//! on a background tokio task (its own `mllog-upload` thread, or the application's
//! multi-threaded tokio runtime when one is current at [`UploadSink::for_file`]). The uploader
//! re-uploads the whole local log with one atomic `PUT` per sync (object stores have no
//! append): at an interval, promptly after important records (`eval_accuracy`, `run_stop`),
//! and a last time in [`Sink::close`], bounded by the close deadline. Failures are counted in
//! the [`UploadReport`]; they never reach the training thread. See `docs/object-store.md`.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutPayload, RetryConfig};
use tokio::sync::Notify;
use url::Url;

use super::{saturating_deadline, Sink, SinkError};
use crate::record::TracedRecord;
use crate::redact::{self, redact};

/// The variable naming the upload URL (`s3://bucket/run/mllog.log`, `gs://…`, `az://…`,
/// `abfs://…`, `file:///…`, `memory:///…`). Unset: no upload.
pub const ENV_UPLOAD_URL: &str = "MLLOG_UPLOAD_URL";
/// Seconds between periodic uploads (decimal allowed; `0` disables periodic uploads).
pub const ENV_UPLOAD_INTERVAL_SECS: &str = "MLLOG_UPLOAD_INTERVAL_SECS";
/// Upper bound, in seconds, for the final upload at shutdown (also bounded by the pipeline's
/// shutdown deadline).
pub const ENV_UPLOAD_DEADLINE_SECS: &str = "MLLOG_UPLOAD_DEADLINE_SECS";
/// Keys after which the log is uploaded promptly (at the next flush).
pub const DEFAULT_IMPORTANT_KEYS: &[&str] = &["eval_accuracy", "run_stop"];

/// Shortest periodic interval (a shorter one would re-upload the log back to back).
const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Longest periodic interval and longest backoff between retries: one week.
const MAX_INTERVAL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Longest final-upload deadline: one day.
const MAX_DEADLINE: Duration = Duration::from_secs(24 * 3600);

const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);
/// Time kept back from the close deadline so the reply reaches the worker in time.
const DEADLINE_MARGIN: Duration = Duration::from_millis(20);

/// Why upload configuration or start-up failed. Messages never contain option values or
/// credentials.
///
/// Returned by [`UploadConfig::new`] (a URL it cannot use) and [`UploadSink::for_file`]; through
/// the layer it is the source of [`crate::Error::Start`]. Upload failures during the run are
/// not errors: they are retried and counted in the [`UploadReport`].
///
/// ```
/// use std::time::Duration;
/// use tracing_mllog::sink::{RetryPolicy, UploadConfig, UploadError, UploadSink};
///
/// let err = UploadConfig::new("ftp://example.org/run/result_0.txt").unwrap_err();
/// assert!(matches!(err, UploadError::InvalidUrl { .. }), "{err}");
///
/// // Settings are checked when the uploader starts, before any upload.
/// let dir = tempfile::tempdir()?;
/// let url = format!("file://{}", dir.path().join("remote.txt").display());
/// let backwards = RetryPolicy {
///     max_attempts: 3,
///     initial_backoff: Duration::from_secs(10),
///     max_backoff: Duration::from_secs(1),
/// };
/// let config = UploadConfig::new(&url)?.retry(backwards);
/// let err = UploadSink::for_file(config, dir.path().join("result_0.txt")).unwrap_err();
/// assert!(
///     matches!(err, UploadError::InvalidSetting { setting: "UploadConfig::retry", .. }),
///     "{err}"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// The URL does not parse or names an unsupported scheme.
    #[error("invalid upload URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL without user info, query or fragment.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// An option key the store for this URL does not know (the value is not shown).
    #[error("unknown object store option `{key}` for {scheme} URLs")]
    InvalidOption {
        /// The key as given.
        key: String,
        /// The URL scheme.
        scheme: String,
    },
    /// An environment variable has a bad value (shown redacted).
    #[error(transparent)]
    Env(#[from] crate::env::EnvError),
    /// A setting made in code is out of its range (named as the method that sets it).
    #[error("invalid {setting}: {reason}")]
    InvalidSetting {
        /// The setting, e.g. `UploadConfig::interval`.
        setting: &'static str,
        /// What is wrong and the allowed range.
        reason: String,
    },
    /// The object store could not be built (credentials, endpoint, ...), secrets redacted.
    #[error("object store: {0}")]
    Store(String),
    /// The uploader thread or runtime could not start.
    #[error("uploader: {0}")]
    Runtime(String),
}

/// Retries of one upload: exponential backoff from `initial_backoff`, doubling up to
/// `max_backoff`, at most `max_attempts` attempts in all (the final upload also stops at its
/// deadline). Set it with [`UploadConfig::retry`]; failures after the last attempt are
/// counted in the [`UploadReport`], never raised to the training code.
///
/// ```
/// use std::time::{Duration, Instant};
/// use tracing_mllog::sink::{RetryPolicy, Sink, UploadConfig, UploadSink};
///
/// let dir = tempfile::tempdir()?;
/// let local = dir.path().join("result_0.txt");
/// std::fs::write(&local, ":::MLLOG {}\n")?;
/// // A destination that cannot be written: its "bucket" is a regular file.
/// std::fs::write(dir.path().join("bucket"), "")?;
/// let url = format!("file://{}", dir.path().join("bucket/result_0.txt").display());
/// let retry = RetryPolicy {
///     max_attempts: 3,
///     initial_backoff: Duration::from_millis(1),
///     max_backoff: Duration::from_millis(4),
/// };
/// let (mut sink, handle) = UploadSink::for_file(UploadConfig::new(&url)?.retry(retry), local)?;
/// // The final upload, retried; its failure is the sink's error (the pipeline counts it).
/// assert!(sink.close(Instant::now() + Duration::from_secs(30)).is_err());
/// let report = handle.report();
/// assert_eq!((report.uploads_ok, report.uploads_failed), (0, 1), "{report}");
/// assert_eq!(report.retries, 2, "{report}"); // three attempts in all
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per upload, the first included (at least 1).
    pub max_attempts: u32,
    /// Wait before the first retry.
    pub initial_backoff: Duration,
    /// Longest wait between attempts.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(20)).unwrap_or(u32::MAX);
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }
}

#[derive(Clone)]
enum Destination {
    Url(Url),
    Store {
        store: Arc<dyn ObjectStore>,
        path: String,
    },
}

/// Where and how to upload: URL, interval, important keys, retries, store options, extra
/// artefacts and the final-upload deadline.
///
/// Hand [`UploadSink::new`] of it to [`crate::Builder::sink`] (or set `MLLOG_UPLOAD_URL`
/// under [`crate::Builder::from_env`]): the layer then keeps a copy of its MLLOG file in
/// object storage, re-uploaded in the background and a last time at shutdown, when it is read
/// back and compared; [`crate::Report::detail`]`::<UploadReport>()` says how that went.
/// Credentials come from the provider's usual variables or [`UploadConfig::option`]s and are
/// never printed: `Debug` shows option keys but never option values, and URLs are shown
/// without credentials or query string.
///
/// A `file://` URL is the same path through the same code as a bucket, which is how this
/// example checks what reached the "remote" copy:
///
/// ```
/// use std::time::Duration;
/// use tracing_mllog::sink::{UploadConfig, UploadSink};
/// use tracing_mllog::{keys, mllog, MllogLayer, Output};
/// use tracing_subscriber::prelude::*;
///
/// let dir = tempfile::tempdir()?;
/// let local = dir.path().join("result_0.txt");
/// let remote = dir.path().join("bucket/run-42/result_0.txt");
/// let url = format!("file://{}", remote.display());
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::file(&local))
///     .sink(UploadSink::new(UploadConfig::new(&url)?.interval(Duration::from_secs(60))))
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     mllog!(keys::SEED, 7);
/// });
/// guard.shutdown(); // the final upload, read back and compared
/// let upload = guard.detail::<tracing_mllog::sink::UploadReport>().expect("an uploader");
/// assert_eq!(upload.final_remote_matches_local, Some(true), "{upload}");
/// assert_eq!(std::fs::read(&remote)?, std::fs::read(&local)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct UploadConfig {
    target: Destination,
    interval: Option<Duration>,
    important_keys: Vec<String>,
    retry: RetryPolicy,
    options: Vec<(String, String)>,
    artefacts: Vec<PathBuf>,
    deadline: Duration,
    from_env: bool,
    own_runtime: bool,
    /// Secret values of the environment the configuration was read from (a builder's map
    /// is not the process environment), masked like the process's.
    env_secrets: Vec<String>,
}

impl fmt::Debug for UploadConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<&str> = self.options.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("UploadConfig")
            .field("url", &self.display_url())
            .field("interval", &self.interval)
            .field("important_keys", &self.important_keys)
            .field("retry", &self.retry)
            .field("option_keys", &keys)
            .field("artefacts", &self.artefacts)
            .field("deadline", &self.deadline)
            .field("from_env", &self.from_env)
            .field("own_runtime", &self.own_runtime)
            .finish()
    }
}

impl UploadConfig {
    /// Uploads to `url`: `s3://bucket/key`, `gs://bucket/key`, `az://container/key` (also
    /// `abfs[s]://`, `adl://`, `azure://` and the `https://` forms of S3 and Azure),
    /// `file:///abs/path` or `memory:///key`. A URL ending in `/` names a directory: the local
    /// file's name is appended.
    ///
    /// Credentials and endpoints come from the provider's environment variables (`AWS_*`,
    /// `GOOGLE_*`/`SERVICE_ACCOUNT`, `AZURE_*`) plus [`UploadConfig::option`]s.
    pub fn new(url: &str) -> Result<UploadConfig, UploadError> {
        let parsed = Url::parse(url).map_err(|e| UploadError::InvalidUrl {
            url: redact_url_str(url),
            reason: e.to_string(),
        })?;
        let cloud = matches!(
            parsed.scheme(),
            "s3" | "s3a" | "gs" | "az" | "adl" | "azure" | "abfs" | "abfss"
        );
        if cloud && parsed.host_str().is_none_or(str::is_empty) {
            let what = if parsed.scheme().starts_with('s') || parsed.scheme() == "gs" {
                "bucket"
            } else {
                "container"
            };
            return Err(UploadError::InvalidUrl {
                url: redact_url(&parsed),
                reason: format!(
                    "the URL names no {what}: write {}://{}/path/to/log",
                    parsed.scheme(),
                    what.to_ascii_uppercase()
                ),
            });
        }
        let (scheme, _) =
            ObjectStoreScheme::parse(&parsed).map_err(|_| UploadError::InvalidUrl {
                url: redact_url(&parsed),
                reason: format!(
                "unsupported scheme `{}` (use s3://, gs://, az://, abfs://, file:// or memory://)",
                parsed.scheme()
            ),
            })?;
        if scheme == ObjectStoreScheme::Http {
            return Err(UploadError::InvalidUrl {
                url: redact_url(&parsed),
                reason: "plain http(s) stores are not supported; use s3://, gs://, az://, \
                         file:// or memory://"
                    .into(),
            });
        }
        Ok(UploadConfig::with_target(Destination::Url(parsed)))
    }

    /// Uploads into a store you built yourself (a wrapped, throttled or in-memory store) at
    /// `object_path` (`"runs/42/mllog.log"`; ending in `/` appends the local file's name).
    pub fn from_store(store: Arc<dyn ObjectStore>, object_path: &str) -> UploadConfig {
        UploadConfig::with_target(Destination::Store {
            store,
            path: object_path.to_string(),
        })
    }

    /// Reads [`ENV_UPLOAD_URL`], [`ENV_UPLOAD_INTERVAL_SECS`] and [`ENV_UPLOAD_DEADLINE_SECS`]
    /// from `env` (`Env::process()` for the process environment): `None` unless
    /// `MLLOG_UPLOAD_URL` is set (and not empty); a bad value (one that is not UTF-8 too) is
    /// an error naming the variable.
    pub fn from_env(env: &crate::env::Env) -> Result<Option<UploadConfig>, UploadError> {
        let Some(mut config) = env.parse(ENV_UPLOAD_URL, |url| {
            UploadConfig::new(url).map_err(|e| e.to_string())
        })?
        else {
            return Ok(None);
        };
        if let Some(secs) = env.parse(ENV_UPLOAD_INTERVAL_SECS, |v| {
            parse_secs(v).and_then(check_interval)
        })? {
            config.interval = (secs > Duration::ZERO).then_some(secs);
        }
        if let Some(secs) = env.parse(ENV_UPLOAD_DEADLINE_SECS, |v| {
            parse_secs(v).and_then(check_deadline)
        })? {
            config.deadline = secs;
        }
        config.env_secrets = env.secrets();
        Ok(Some(config))
    }

    fn with_target(target: Destination) -> UploadConfig {
        UploadConfig {
            target,
            interval: Some(DEFAULT_INTERVAL),
            important_keys: DEFAULT_IMPORTANT_KEYS
                .iter()
                .map(|k| k.to_string())
                .collect(),
            retry: RetryPolicy::default(),
            options: Vec::new(),
            artefacts: Vec::new(),
            deadline: DEFAULT_DEADLINE,
            from_env: true,
            own_runtime: false,
            env_secrets: Vec::new(),
        }
    }

    /// Periodic upload interval (default 30 s); `Duration::ZERO` disables periodic uploads
    /// (important records and the final upload remain). Unchanged files are not re-uploaded.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = (interval > Duration::ZERO).then_some(interval);
        self
    }

    /// Replaces the keys that trigger a prompt upload (default [`DEFAULT_IMPORTANT_KEYS`]).
    pub fn important_keys<I, S>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.important_keys = keys.into_iter().map(Into::into).collect();
        self
    }

    /// Retry policy of each upload.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// An object_store option, e.g. `("aws_endpoint", "http://127.0.0.1:9000")`,
    /// `("allow_http", "true")`, `("google_service_account_key", json)`. Keys are those of the
    /// store's builder (`AmazonS3ConfigKey`, `GoogleConfigKey`, `AzureConfigKey`, plus client
    /// keys such as `timeout`); an unknown key fails [`UploadSink::for_file`]. Explicit options
    /// override environment variables. Values are never printed.
    pub fn option(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.options.push((key.into(), value.into()));
        self
    }

    /// Another file (e.g. the RPD profile) uploaded next to the log at shutdown, after the
    /// final log upload, under its own file name and within the same deadline.
    pub fn artefact(mut self, path: impl Into<PathBuf>) -> Self {
        self.artefacts.push(path.into());
        self
    }

    /// Upper bound for the final upload (default 30 s); the close deadline bounds it too.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Whether the store builder starts from the provider's environment variables (default
    /// `true`). With `false` only explicit options count.
    pub fn read_provider_env(mut self, on: bool) -> Self {
        self.from_env = on;
        self
    }

    /// Always run the uploader on its own thread, even inside a tokio runtime (default
    /// `false`: a current multi-threaded runtime is used when there is one).
    pub fn own_runtime(mut self, on: bool) -> Self {
        self.own_runtime = on;
        self
    }

    /// The destination for reports: the URL without user info, query or fragment.
    pub fn display_url(&self) -> String {
        match &self.target {
            Destination::Url(url) => redact_url(url),
            // A store's `Display` is its own; it may name an endpoint with user info.
            Destination::Store { store, path } => redact(&format!("{store}/{path}"), &[]),
        }
    }

    /// Builds the store this configuration describes and the object path of a log whose
    /// local file is `local_file` (what the uploader uses; handy to read the remote copy back).
    pub fn open_store(
        &self,
        local_file: &FsPath,
    ) -> Result<(Arc<dyn ObjectStore>, ObjectPath), UploadError> {
        let (store, dir_or_key) = match &self.target {
            Destination::Store { store, path } => (store.clone(), path.clone()),
            Destination::Url(url) => {
                let store = build_store(url, &self.options, self.from_env, &self.secrets())?;
                // The key within the bucket as object_store reads the URL: for the path-style
                // https forms (`https://s3.<region>.amazonaws.com/bucket/key`, R2, Azure
                // `https://<account>.blob.core.windows.net/container/key`) the first path
                // segment is the bucket, not part of the key.
                let (_, key) =
                    ObjectStoreScheme::parse(url).map_err(|e| UploadError::InvalidUrl {
                        url: self.display_url(),
                        reason: redact(&e.to_string(), &self.secrets()),
                    })?;
                let dir = key.as_ref().is_empty() || url.path().ends_with('/');
                let key = if dir {
                    key.join(self.file_name(local_file)?)
                } else {
                    key
                };
                return Ok((store, key));
            }
        };
        let mut key = dir_or_key;
        if key.is_empty() || key.ends_with('/') {
            key.push_str(self.file_name(local_file)?);
        }
        let path = ObjectPath::parse(&key).map_err(|e| UploadError::InvalidUrl {
            url: self.display_url(),
            reason: e.to_string(),
        })?;
        Ok((store, path))
    }

    fn file_name<'a>(&self, local_file: &'a FsPath) -> Result<&'a str, UploadError> {
        local_file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| UploadError::InvalidUrl {
                url: self.display_url(),
                reason: "the URL names a directory and the local file has no usable name".into(),
            })
    }

    /// Every value that must never be shown: secret options, credentials and endpoint user
    /// info from the provider variables (read even with `read_provider_env(false)`: object_store
    /// may still read some, and an operator's variables must not leak either way).
    fn secrets(&self) -> Vec<String> {
        let mut secrets = redact::env_secrets();
        secrets.extend(self.env_secrets.iter().cloned());
        for (k, v) in &self.options {
            redact::secret_parts(k, v, &mut secrets);
        }
        redact::normalize(&mut secrets);
        secrets
    }

    /// Ranges of the settings made in code (the variables are checked when read).
    fn validate(&self) -> Result<(), UploadError> {
        let bad = |setting, reason| Err(UploadError::InvalidSetting { setting, reason });
        if let Some(interval) = self.interval
            && let Err(reason) = check_interval(interval)
        {
            return bad("UploadConfig::interval", reason);
        }
        if let Err(reason) = check_deadline(self.deadline) {
            return bad("UploadConfig::deadline", reason);
        }
        let RetryPolicy {
            initial_backoff,
            max_backoff,
            ..
        } = self.retry;
        if max_backoff > MAX_INTERVAL || initial_backoff > max_backoff {
            return bad(
                "UploadConfig::retry",
                format!(
                    "backoffs must satisfy initial_backoff <= max_backoff <= {} s \
                     (got {initial_backoff:?} and {max_backoff:?})",
                    MAX_INTERVAL.as_secs()
                ),
            );
        }
        Ok(())
    }
}

/// `0` (off) or [`MIN_INTERVAL`]..=[`MAX_INTERVAL`].
fn check_interval(d: Duration) -> Result<Duration, String> {
    if d.is_zero() || (MIN_INTERVAL..=MAX_INTERVAL).contains(&d) {
        Ok(d)
    } else {
        Err(format!(
            "{} s is out of range: 0 (off) or {}..={} seconds",
            d.as_secs_f64(),
            MIN_INTERVAL.as_secs_f64(),
            MAX_INTERVAL.as_secs()
        ))
    }
}

/// 0..=[`MAX_DEADLINE`].
fn check_deadline(d: Duration) -> Result<Duration, String> {
    if d <= MAX_DEADLINE {
        Ok(d)
    } else {
        Err(format!(
            "{} s is out of range: 0..={} seconds",
            d.as_secs_f64(),
            MAX_DEADLINE.as_secs()
        ))
    }
}

/// A number of seconds (decimals allowed), shown back only when it is a plain number.
fn parse_secs(v: &str) -> Result<Duration, String> {
    let t = v.trim();
    let shown = if t.len() <= 32 && t.bytes().all(|b| b.is_ascii_graphic()) {
        format!("`{t}`")
    } else {
        "the value".to_string()
    };
    let secs: f64 = t
        .parse()
        .map_err(|_| format!("{shown} is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("{shown} is not a finite, non-negative number of seconds"))
}

/// The URL without password, query or fragment. The user name stays for the Azure forms
/// (`abfs://container@account.dfs.core.windows.net/...` needs it); any other is masked.
fn redact_url(url: &Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.set_fragment(None);
    redact(u.as_str(), &[])
}

fn redact_url_str(url: &str) -> String {
    let cut = url.find(['?', '#']).unwrap_or(url.len());
    redact(&url[..cut], &[])
}

fn build_store(
    url: &Url,
    options: &[(String, String)],
    from_env: bool,
    secrets: &[String],
) -> Result<Arc<dyn ObjectStore>, UploadError> {
    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
    use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
    use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};

    let (scheme, _) = ObjectStoreScheme::parse(url).map_err(|_| UploadError::InvalidUrl {
        url: redact_url(url),
        reason: format!("unsupported scheme `{}`", url.scheme()),
    })?;
    let scheme_name = url.scheme().to_string();
    let bad_key = |key: &str| UploadError::InvalidOption {
        key: key.to_string(),
        scheme: scheme_name.clone(),
    };
    // User info in an endpoint (`http://user:pass@host`) is removed before the store sees
    // it: S3 and Azure authenticate with their own credentials, and the HTTP client would
    // otherwise carry the password into its connection-pool keys and their trace events.
    // Our own retries (counted, deadline-aware) replace object_store's.
    let no_retry = RetryConfig {
        max_retries: 0,
        ..RetryConfig::default()
    };
    let store_err = |e: object_store::Error| UploadError::Store(redact(&e.to_string(), secrets));
    match scheme {
        ObjectStoreScheme::Local | ObjectStoreScheme::Memory => {
            if let Some((key, _)) = options.first() {
                return Err(bad_key(key));
            }
            let store: Arc<dyn ObjectStore> = if scheme == ObjectStoreScheme::Local {
                Arc::new(object_store::local::LocalFileSystem::new())
            } else {
                Arc::new(object_store::memory::InMemory::new())
            };
            Ok(store)
        }
        ObjectStoreScheme::AmazonS3 => {
            install_crypto_provider();
            let mut b = if from_env {
                AmazonS3Builder::from_env()
            } else {
                AmazonS3Builder::new()
            };
            b = b.with_url(url.as_str()).with_retry(no_retry);
            for (k, v) in options {
                let key: AmazonS3ConfigKey =
                    k.to_ascii_lowercase().parse().map_err(|_| bad_key(k))?;
                b = b.with_config(key, v.clone());
            }
            for key in [
                AmazonS3ConfigKey::Endpoint,
                AmazonS3ConfigKey::S3Endpoint,
                AmazonS3ConfigKey::StsEndpoint,
                AmazonS3ConfigKey::MetadataEndpoint,
                AmazonS3ConfigKey::ContainerCredentialsFullUri,
            ] {
                if let Some(clean) = b
                    .get_config_value(&key)
                    .and_then(|e| redact::strip_userinfo(&e))
                {
                    b = b.with_config(key, clean);
                }
            }
            Ok(Arc::new(b.build().map_err(store_err)?))
        }
        ObjectStoreScheme::GoogleCloudStorage => {
            install_crypto_provider();
            let mut b = if from_env {
                GoogleCloudStorageBuilder::from_env()
            } else {
                GoogleCloudStorageBuilder::new()
            };
            b = b.with_url(url.as_str()).with_retry(no_retry);
            for (k, v) in options {
                let key: GoogleConfigKey =
                    k.to_ascii_lowercase().parse().map_err(|_| bad_key(k))?;
                b = b.with_config(key, v.clone());
            }
            Ok(Arc::new(b.build().map_err(store_err)?))
        }
        ObjectStoreScheme::MicrosoftAzure => {
            install_crypto_provider();
            let mut b = if from_env {
                MicrosoftAzureBuilder::from_env()
            } else {
                MicrosoftAzureBuilder::new()
            };
            b = b.with_url(url.as_str()).with_retry(no_retry);
            for (k, v) in options {
                let key: AzureConfigKey = k.to_ascii_lowercase().parse().map_err(|_| bad_key(k))?;
                b = b.with_config(key, v.clone());
            }
            for key in [
                AzureConfigKey::Endpoint,
                AzureConfigKey::MsiEndpoint,
                AzureConfigKey::FabricTokenServiceUrl,
            ] {
                if let Some(clean) = b
                    .get_config_value(&key)
                    .and_then(|e| redact::strip_userinfo(&e))
                {
                    b = b.with_config(key, clean);
                }
            }
            Ok(Arc::new(b.build().map_err(store_err)?))
        }
        _ => Err(UploadError::InvalidUrl {
            url: redact_url(url),
            reason: "unsupported scheme".into(),
        }),
    }
}

/// Errors a retry cannot fix (missing bucket, bad credentials): reported at once.
fn is_permanent(e: &object_store::Error) -> bool {
    matches!(
        e,
        object_store::Error::NotFound { .. }
            | object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. }
    )
}

/// reqwest is built without a default TLS crypto provider (to avoid aws-lc-sys); install
/// rustls' `ring` provider unless the application installed one.
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// What the uploader did (read it with [`crate::Guard::detail`]`::<UploadReport>()` or
/// [`UploadHandle::report`]; the [`UploadConfig`] example checks it after shutdown).
/// `final_remote_matches_local` is `None` until the final upload ran,
/// then `Some(true)` only when the remote object was read back byte-identical to the local
/// file (`Some(false)`: the final upload failed, timed out or the read-back differed).
///
/// An upload that fails is retried and reported, never raised; the training goes on:
///
/// ```
/// use std::time::{Duration, Instant};
/// use tracing_mllog::sink::{RetryPolicy, Sink, UploadConfig, UploadSink};
///
/// let dir = tempfile::tempdir()?;
/// let local = dir.path().join("result_0.txt");
/// std::fs::write(&local, ":::MLLOG {}\n")?;
/// std::fs::write(dir.path().join("bucket"), "")?; // a file where the "bucket" should be
/// let url = format!("file://{}", dir.path().join("bucket/result_0.txt").display());
/// let retry = RetryPolicy { max_attempts: 1, ..RetryPolicy::default() };
/// let (mut sink, handle) = UploadSink::for_file(UploadConfig::new(&url)?.retry(retry), local)?;
/// assert_eq!(handle.report().final_remote_matches_local, None); // not run yet
/// let closed = sink.close(Instant::now() + Duration::from_secs(30));
/// assert!(closed.is_err()); // a sink error, counted by the pipeline in its `SinkReport`
/// let report = handle.report();
/// assert_eq!(report.final_remote_matches_local, Some(false));
/// assert_eq!(report.uploads_failed, 1);
/// assert!(report.last_error.is_some());
/// assert!(report.to_string().contains("remote NOT confirmed to match local"), "{report}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UploadReport {
    /// The destination (no credentials, no query string).
    pub url: String,
    /// Successful uploads of the log (intermediate and final).
    pub uploads_ok: u64,
    /// Uploads of the log that failed after all retries (or ran out of time).
    pub uploads_failed: u64,
    /// Attempts repeated after a failure.
    pub retries: u64,
    /// Upload requests merged into an already pending one, plus intermediate uploads cut
    /// short by shutdown.
    pub skipped_or_coalesced: u64,
    /// The latest failure, secrets redacted.
    pub last_error: Option<String>,
    /// Whether the remote copy is confirmed identical to the local file after the final upload.
    pub final_remote_matches_local: Option<bool>,
    /// Size in bytes of the latest successful log upload.
    pub last_uploaded_bytes: u64,
    /// Extra artefacts uploaded at shutdown.
    pub artefacts_ok: u64,
    /// Extra artefacts that could not be uploaded.
    pub artefacts_failed: u64,
}

impl fmt::Display for UploadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "upload to {}: {} ok, {} failed, {} retries, {} skipped/coalesced",
            self.url, self.uploads_ok, self.uploads_failed, self.retries, self.skipped_or_coalesced
        )?;
        match self.final_remote_matches_local {
            Some(true) => write!(f, ", remote matches local")?,
            Some(false) => write!(f, ", remote NOT confirmed to match local")?,
            None => write!(f, ", final upload not run yet")?,
        }
        if self.artefacts_ok + self.artefacts_failed > 0 {
            write!(
                f,
                ", artefacts {} ok / {} failed",
                self.artefacts_ok, self.artefacts_failed
            )?;
        }
        if let Some(e) = &self.last_error {
            write!(f, "; last error: {e}")?;
        }
        Ok(())
    }
}

struct UploadState {
    report: Mutex<UploadReport>,
    coalesced: AtomicU64,
    urgent: AtomicBool,
    wake: Notify,
    finish: Notify,
    /// `Some(deadline)`: final upload requested; set before `finish` is notified.
    final_deadline: Mutex<Option<Instant>>,
    /// Stop without a final upload (the sink was dropped without `close`).
    abort: AtomicBool,
    final_done: AtomicBool,
}

impl UploadState {
    fn update(&self, f: impl FnOnce(&mut UploadReport)) {
        f(&mut self.report.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// Reads an [`UploadSink`]'s progress from any thread. Through the layer,
/// [`crate::Guard::detail`]`::<UploadReport>()` gives the same report.
///
/// ```
/// use std::time::{Duration, Instant};
/// use tracing_mllog::sink::{Sink, UploadConfig, UploadSink};
///
/// let dir = tempfile::tempdir()?;
/// let local = dir.path().join("result_0.txt");
/// std::fs::write(&local, ":::MLLOG {}\n")?;
/// let url = format!("file://{}", dir.path().join("bucket/result_0.txt").display());
/// let (mut sink, handle) = UploadSink::for_file(UploadConfig::new(&url)?, local)?;
/// let watcher = handle.clone();
/// std::thread::spawn(move || sink.close(Instant::now() + Duration::from_secs(30)))
///     .join()
///     .unwrap()?;
/// let report = watcher.report();
/// assert_eq!(report.url, url);
/// assert!(report.uploads_ok >= 1, "{report}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct UploadHandle {
    shared: Arc<UploadState>,
}

impl fmt::Debug for UploadHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UploadHandle")
            .field("report", &self.report())
            .finish()
    }
}

impl UploadHandle {
    /// A snapshot of the counters.
    pub fn report(&self) -> UploadReport {
        let mut report = self
            .shared
            .report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        report.skipped_or_coalesced += self.shared.coalesced.load(Ordering::Relaxed);
        report
    }
}

/// The sink that keeps a remote copy of the MLLOG file current.
///
/// Made from its [`UploadConfig`] ([`UploadSink::new`], or [`UploadSink::from_env`] for
/// `MLLOG_UPLOAD_URL`) and handed to [`crate::Builder::sink`]: it starts on the writing rank
/// with the layer's MLLOG file, right after the file sink (see the [`UploadConfig`]
/// example); a layer whose output is not a file fails to build. [`UploadSink::for_file`]
/// starts one by hand, for a file the layer does not write. Its [`UploadHandle`] reads the
/// [`UploadReport`] from any thread.
///
/// ```
/// use std::time::{Duration, Instant};
/// use tracing_mllog::sink::{Sink, UploadConfig, UploadSink};
///
/// let dir = tempfile::tempdir()?;
/// let local = dir.path().join("result_0.txt"); // written by another sink or process
/// std::fs::write(&local, ":::MLLOG {\"key\": \"seed\"}\n")?;
/// let remote = dir.path().join("bucket/run-42/result_0.txt");
/// let config = UploadConfig::new(&format!("file://{}", remote.display()))?;
/// let (mut sink, handle) = UploadSink::for_file(config, local.clone())?;
/// sink.close(Instant::now() + Duration::from_secs(30))?; // the final upload, read back
/// let report = handle.report();
/// assert_eq!(report.final_remote_matches_local, Some(true), "{report}");
/// assert_eq!(std::fs::read(&remote)?, std::fs::read(&local)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct UploadSink {
    state: UploadRun,
}

/// An [`UploadSink`] made from its config starts its uploader when the layer starts it,
/// with the file the layer writes.
enum UploadRun {
    Waiting(Box<UploadConfig>),
    Running(Uploading),
}

/// A started uploader, as the worker sees it.
struct Uploading {
    shared: Arc<UploadState>,
    important: HashSet<String>,
    pending_urgent: bool,
    done_rx: mpsc::Receiver<Result<(), String>>,
    closed: bool,
}

impl fmt::Debug for UploadSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("UploadSink");
        match &self.state {
            UploadRun::Waiting(config) => d.field("config", config),
            UploadRun::Running(run) => d.field("important", &run.important),
        };
        d.finish_non_exhaustive()
    }
}

struct Uploader {
    shared: Arc<UploadState>,
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    local_file: PathBuf,
    artefacts: Vec<PathBuf>,
    retry: RetryPolicy,
    interval: Option<Duration>,
    deadline: Duration,
    secrets: Vec<String>,
    last_uploaded: Option<Vec<u8>>,
    done_tx: mpsc::SyncSender<Result<(), String>>,
}

impl UploadSink {
    /// A sink that uploads the layer's MLLOG file as `config` says, started by the layer
    /// ([`Sink::start`]) on the rank that writes the file: hand it to
    /// [`crate::Builder::sink`].
    pub fn new(config: UploadConfig) -> UploadSink {
        UploadSink {
            state: UploadRun::Waiting(Box::new(config)),
        }
    }

    /// The sink `MLLOG_UPLOAD_URL` asks for ([`UploadConfig::from_env`]), or `None`.
    pub fn from_env(env: &crate::env::Env) -> Result<Option<UploadSink>, UploadError> {
        Ok(UploadConfig::from_env(env)?.map(UploadSink::new))
    }

    /// Builds the store (configuration errors surface here, not later) and starts the
    /// uploader for `local_file`, the MLLOG file an earlier sink writes.
    pub fn for_file(
        config: UploadConfig,
        local_file: PathBuf,
    ) -> Result<(UploadSink, UploadHandle), UploadError> {
        config.validate()?;
        let (store, path) = config.open_store(&local_file)?;
        let url = config.display_url();
        let report = UploadReport {
            url,
            ..UploadReport::default()
        };
        let shared = Arc::new(UploadState {
            report: Mutex::new(report),
            coalesced: AtomicU64::new(0),
            urgent: AtomicBool::new(false),
            wake: Notify::new(),
            finish: Notify::new(),
            final_deadline: Mutex::new(None),
            abort: AtomicBool::new(false),
            final_done: AtomicBool::new(false),
        });
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        let panic_tx = done_tx.clone();
        let secrets = config.secrets();
        let uploader = Uploader {
            shared: shared.clone(),
            store,
            path,
            local_file,
            artefacts: config.artefacts.clone(),
            retry: RetryPolicy {
                max_attempts: config.retry.max_attempts.max(1),
                ..config.retry
            },
            interval: config.interval,
            deadline: config.deadline,
            secrets: secrets.clone(),
            last_uploaded: None,
            done_tx,
        };
        let app_runtime = tokio::runtime::Handle::try_current()
            .ok()
            .filter(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        match app_runtime {
            Some(handle) if !config.own_runtime => {
                handle.spawn(CatchPanic::new(uploader.run(), panic_tx, secrets));
            }
            _ => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .thread_name("mllog-upload")
                    .build()
                    .map_err(|e| UploadError::Runtime(e.to_string()))?;
                std::thread::Builder::new()
                    .name("mllog-upload".into())
                    .spawn(move || {
                        runtime.block_on(CatchPanic::new(uploader.run(), panic_tx, secrets))
                    })
                    .map_err(|e| UploadError::Runtime(e.to_string()))?;
            }
        }
        let run = Uploading {
            shared: shared.clone(),
            important: config.important_keys.into_iter().collect(),
            pending_urgent: false,
            done_rx,
            closed: false,
        };
        let sink = UploadSink {
            state: UploadRun::Running(run),
        };
        Ok((sink, UploadHandle { shared }))
    }
}

impl super::SinkStatus for UploadHandle {
    fn detail(&self) -> super::Detail {
        super::Detail::new(self.report())
    }
}

/// The registration (see `crate::registry::FACTORIES`): `MLLOG_UPLOAD_URL`, on the writing
/// rank.
pub(crate) fn plug(
    env: &crate::env::Env,
    _rank: u32,
    _submission: &crate::submission::Submission,
) -> Result<Option<super::plug::EnvSink>, crate::Error> {
    let sink =
        UploadSink::from_env(env).map_err(|e| crate::Error::start("the object-store upload", e))?;
    Ok(sink.map(super::plug::EnvSink::isolated))
}

impl Sink for UploadSink {
    fn name(&self) -> &str {
        "object-store-upload"
    }

    /// Starts the uploader for the layer's MLLOG file, called right after the file sink (it
    /// uploads what that sink has just flushed).
    fn start(
        &mut self,
        start: &mut super::SinkStart<'_>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let path = start.read_log_file();
        let UploadRun::Waiting(config) = &self.state else {
            return Ok(()); // started by hand, for its own file
        };
        let Some(path) = path else {
            return Err(Box::new(UploadError::InvalidSetting {
                setting: "the MLLOG output",
                reason: "it uploads the MLLOG file: set MLLOG_OUTPUT_FILE or Output::file".into(),
            }));
        };
        let (started, _handle) = UploadSink::for_file((**config).clone(), path.to_path_buf())?;
        *self = started;
        Ok(())
    }

    fn status(&self) -> Option<Arc<dyn super::SinkStatus>> {
        match &self.state {
            UploadRun::Running(run) => Some(Arc::new(UploadHandle {
                shared: run.shared.clone(),
            })),
            UploadRun::Waiting(_) => None,
        }
    }

    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
        match &mut self.state {
            UploadRun::Running(run) => run.write(record),
            UploadRun::Waiting(_) => Err(not_started()),
        }
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        match &mut self.state {
            UploadRun::Running(run) => run.flush(),
            UploadRun::Waiting(_) => Ok(()),
        }
    }

    fn close(&mut self, deadline: Instant) -> Result<(), SinkError> {
        match &mut self.state {
            UploadRun::Running(run) => run.close(deadline),
            UploadRun::Waiting(_) => Ok(()),
        }
    }
}

/// A sink written to before it started has no file to upload.
fn not_started() -> SinkError {
    SinkError::Other(
        "the uploader never started: hand the sink to Builder::sink, or use \
         UploadSink::for_file"
            .into(),
    )
}

impl Uploading {
    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
        if !record.trace_only && self.important.contains(record.key.as_ref()) {
            self.pending_urgent = true;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        if self.pending_urgent {
            self.pending_urgent = false;
            if self.shared.urgent.swap(true, Ordering::AcqRel) {
                self.shared.coalesced.fetch_add(1, Ordering::Relaxed);
            }
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    fn close(&mut self, deadline: Instant) -> Result<(), SinkError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        *self
            .shared
            .final_deadline
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(deadline);
        self.shared.finish.notify_one();
        let wait = deadline.saturating_duration_since(Instant::now());
        let outcome = match self.done_rx.recv_timeout(wait) {
            Ok(result) => result,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                Err("final upload did not finish within the shutdown deadline".to_string())
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(
                "the uploader stopped before the final upload (its tokio runtime was \
                     shut down)"
                    .into(),
            ),
        };
        if let Err(message) = &outcome
            && !self.shared.final_done.swap(true, Ordering::AcqRel)
        {
            self.shared.update(|r| {
                r.uploads_failed += 1;
                r.final_remote_matches_local = Some(false);
                r.last_error = Some(message.clone());
            });
        }
        outcome.map_err(SinkError::Other)
    }
}

impl Drop for Uploading {
    fn drop(&mut self) {
        if !self.closed {
            self.shared.abort.store(true, Ordering::Release);
            self.shared.finish.notify_one();
        }
    }
}

/// Runs the uploader and turns a panic into the final outcome `close` reports (instead of a
/// silently vanished task).
struct CatchPanic {
    inner: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    done_tx: Option<mpsc::SyncSender<Result<(), String>>>,
    secrets: Vec<String>,
}

impl CatchPanic {
    fn new(
        inner: impl std::future::Future<Output = ()> + Send + 'static,
        done_tx: mpsc::SyncSender<Result<(), String>>,
        secrets: Vec<String>,
    ) -> CatchPanic {
        CatchPanic {
            inner: Box::pin(inner),
            done_tx: Some(done_tx),
            secrets,
        }
    }
}

impl std::future::Future for CatchPanic {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        let this = &mut *self;
        let inner = &mut this.inner;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                if let Some(tx) = this.done_tx.take() {
                    let message = redact(&format!("the uploader panicked: {what}"), &this.secrets);
                    let _ = tx.try_send(Err(message));
                }
                std::task::Poll::Ready(())
            }
        }
    }
}

enum Attempt {
    Ok,
    Failed(String),
    OutOfTime(String),
}

impl Uploader {
    async fn run(mut self) {
        let mut ticker = self.interval.map(|every| {
            // `every` is at most MAX_INTERVAL (checked at start), so this cannot overflow.
            let first = tokio::time::Instant::now()
                .checked_add(every)
                .unwrap_or_else(tokio::time::Instant::now);
            let mut t = tokio::time::interval_at(first, every);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        loop {
            let shared = self.shared.clone();
            let woke = tokio::select! {
                biased;
                _ = shared.finish.notified() => false,
                _ = shared.wake.notified() => true,
                _ = async { ticker.as_mut().unwrap().tick().await }, if ticker.is_some() => true,
            };
            if !woke {
                break;
            }
            self.shared.urgent.store(false, Ordering::Release);
            let finished = tokio::select! {
                biased;
                _ = shared.finish.notified() => true,
                _ = self.upload_log(None) => false,
            };
            if finished {
                self.shared.update(|r| r.skipped_or_coalesced += 1);
                break;
            }
        }
        if self.shared.abort.load(Ordering::Acquire) {
            return;
        }
        let own_deadline = saturating_deadline(self.deadline);
        let close_deadline = self
            .shared
            .final_deadline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .unwrap_or(own_deadline);
        let deadline = close_deadline
            .checked_sub(DEADLINE_MARGIN)
            .unwrap_or(close_deadline)
            .min(own_deadline);
        let result = self.final_upload(deadline).await;
        if !self.shared.final_done.swap(true, Ordering::AcqRel) {
            let _ = self.done_tx.try_send(result);
        }
    }

    /// Reads the local log on tokio's blocking pool: a file read can stall (network file
    /// systems, a busy disk), and the runtime may be the application's.
    async fn read_local(&self, complete: bool) -> Result<Vec<u8>, String> {
        let file = self.local_file.clone();
        let read = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, String> {
            let mut bytes =
                std::fs::read(&file).map_err(|e| format!("reading {}: {e}", file.display()))?;
            if !complete {
                // An intermediate snapshot ends at the last complete line.
                let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
                bytes.truncate(end);
            }
            Ok(bytes)
        });
        match read.await {
            Ok(result) => result.map_err(|e| redact(&e, &self.secrets)),
            Err(e) => Err(format!(
                "reading {} did not complete: {e}",
                self.local_file.display()
            )),
        }
    }

    /// One intermediate (deadline `None`) or final upload of the log, with retries.
    async fn upload_log(&mut self, deadline: Option<Instant>) -> Attempt {
        let bytes = match self.read_local(deadline.is_some()).await {
            Ok(b) => b,
            Err(e) => {
                self.shared.update(|r| {
                    r.uploads_failed += 1;
                    r.last_error = Some(e.clone());
                });
                return Attempt::Failed(e);
            }
        };
        if deadline.is_none() && self.last_uploaded.as_deref() == Some(&bytes[..]) {
            return Attempt::Ok;
        }
        let path = self.path.clone();
        let attempt = self.put_with_retry(&path, bytes.clone(), deadline).await;
        match &attempt {
            Attempt::Ok => {
                let len = bytes.len() as u64;
                self.last_uploaded = Some(bytes);
                self.shared.update(|r| {
                    r.uploads_ok += 1;
                    r.last_uploaded_bytes = len;
                });
            }
            Attempt::Failed(e) | Attempt::OutOfTime(e) => {
                self.shared.update(|r| {
                    r.uploads_failed += 1;
                    r.last_error = Some(e.clone());
                });
            }
        }
        attempt
    }

    async fn put_with_retry(
        &self,
        path: &ObjectPath,
        bytes: Vec<u8>,
        deadline: Option<Instant>,
    ) -> Attempt {
        let payload = PutPayload::from(bytes);
        let mut retry = 0u32;
        loop {
            let put = self.store.put(path, payload.clone());
            let outcome = match deadline {
                Some(d) => match tokio::time::timeout_at(d.into(), put).await {
                    Ok(r) => r,
                    Err(_) => {
                        return Attempt::OutOfTime(format!(
                            "upload of {path} did not finish before the deadline"
                        ))
                    }
                },
                None => put.await,
            };
            let (message, permanent) = match outcome {
                Ok(_) => return Attempt::Ok,
                Err(e) => (
                    redact(&format!("upload of {path} failed: {e}"), &self.secrets),
                    is_permanent(&e),
                ),
            };
            if permanent || retry + 1 >= self.retry.max_attempts {
                return Attempt::Failed(message);
            }
            let pause = self.retry.backoff(retry);
            if let Some(d) = deadline
                && Instant::now().checked_add(pause).is_none_or(|t| t >= d)
            {
                return Attempt::OutOfTime(format!(
                    "{message} (no time left for a retry before the deadline)"
                ));
            }
            self.shared.update(|r| {
                r.retries += 1;
                r.last_error = Some(message);
            });
            retry += 1;
            tokio::time::sleep(pause).await;
        }
    }

    async fn final_upload(&mut self, deadline: Instant) -> Result<(), String> {
        let mut outcome = match self.upload_log(Some(deadline)).await {
            Attempt::Ok => {
                let verified = self.verify(deadline).await;
                let matches = verified.is_ok();
                self.shared
                    .update(|r| r.final_remote_matches_local = Some(matches));
                if let Err(e) = &verified {
                    self.shared.update(|r| r.last_error = Some(e.clone()));
                }
                verified
            }
            Attempt::Failed(e) | Attempt::OutOfTime(e) => {
                self.shared
                    .update(|r| r.final_remote_matches_local = Some(false));
                Err(e)
            }
        };
        let artefacts = std::mem::take(&mut self.artefacts);
        for file in artefacts {
            let result = self.upload_artefact(&file, deadline).await;
            self.shared.update(|r| match &result {
                Ok(()) => r.artefacts_ok += 1,
                Err(e) => {
                    r.artefacts_failed += 1;
                    r.last_error = Some(e.clone());
                }
            });
            if let (Err(e), Ok(())) = (&result, &outcome) {
                outcome = Err(e.clone());
            }
        }
        outcome
    }

    async fn verify(&self, deadline: Instant) -> Result<(), String> {
        let local = self.read_local(true).await?;
        let get = async {
            let got = self.store.get(&self.path).await?;
            got.bytes().await
        };
        match tokio::time::timeout_at(deadline.into(), get).await {
            Err(_) => Err(format!(
                "reading back {} did not finish before the deadline",
                self.path
            )),
            Ok(Err(e)) => Err(redact(
                &format!("reading back {} failed: {e}", self.path),
                &self.secrets,
            )),
            Ok(Ok(remote)) if remote[..] == local[..] => Ok(()),
            Ok(Ok(remote)) => Err(format!(
                "remote {} ({} bytes) differs from the local file ({} bytes)",
                self.path,
                remote.len(),
                local.len()
            )),
        }
    }

    async fn upload_artefact(&self, file: &FsPath, deadline: Instant) -> Result<(), String> {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("artefact {} has no usable file name", file.display()))?;
        let mut parts: Vec<String> = self.path.parts().map(|p| p.as_ref().to_string()).collect();
        parts.pop();
        parts.push(name.to_string());
        let path = ObjectPath::from_iter(parts);
        let owned = file.to_path_buf();
        let bytes = tokio::task::spawn_blocking(move || std::fs::read(&owned))
            .await
            .map_err(|e| format!("reading artefact {} did not complete: {e}", file.display()))?
            .map_err(|e| {
                redact(
                    &format!("reading artefact {}: {e}", file.display()),
                    &self.secrets,
                )
            })?;
        match self.put_with_retry(&path, bytes, Some(deadline)).await {
            Attempt::Ok => Ok(()),
            Attempt::Failed(e) | Attempt::OutOfTime(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let p = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(500),
        };
        assert_eq!(p.backoff(0), Duration::from_millis(100));
        assert_eq!(p.backoff(1), Duration::from_millis(200));
        assert_eq!(p.backoff(3), Duration::from_millis(500));
        assert_eq!(p.backoff(40), Duration::from_millis(500));
    }

    #[test]
    fn url_redaction() {
        assert_eq!(
            redact_url_str("s3://user:pw@bucket/x?sig=1"),
            "s3://user:***@bucket/x"
        );
        assert_eq!(redact_url_str("s3://tok3n@bucket/x"), "s3://***@bucket/x");
        let u = Url::parse("az://user:pw@container/x?sig=1").unwrap();
        assert_eq!(redact_url(&u), "az://user:***@container/x");
        let u = Url::parse("abfs://c@acct.dfs.core.windows.net/k").unwrap();
        assert_eq!(redact_url(&u), "abfs://c@acct.dfs.core.windows.net/k");
    }
}
