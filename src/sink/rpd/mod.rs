//! [`RpdSink`]: MLLOG intervals and points as ROCm RPD (rocmProfileData) `UserMarker` rows.
//!
//! Every interval becomes one `rocpd_api` row (`apiName = 'UserMarker'`, the label in `args`,
//! `start`/`end` in `CLOCK_MONOTONIC` nanoseconds, the real pid and tid), every point a mark
//! (`start == end`), exactly as `rpd_tracer` records roctx ranges and marks, so that
//! `rpd2tracing.py` shows them next to the GPU activity the tracer writes into the same file.
//! See `docs/rpd.md`.

mod schema;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use rusqlite::{Connection, TransactionBehavior};

use super::{Sink, SinkError};
use crate::record::{EventType, TracedRecord, Value};

/// Environment variable naming the RPD file the sink writes ([`RpdConfig::from_env`]).
pub const ENV_RPD_FILE: &str = "MLLOG_RPD_FILE";
/// Environment variable choosing the schema version of new RPD files: `2` or `3`.
pub const ENV_RPD_SCHEMA: &str = "MLLOG_RPD_SCHEMA";

/// The metadata fields that go into labels by default, when present, in this order.
pub const DEFAULT_LABEL_FIELDS: &[&str] = &[
    "epoch_num",
    "first_epoch_num",
    "epoch_count",
    "samples_count",
    "step_num",
    "step",
    "status",
];

/// Longest label written, in bytes (longer labels are cut at a character boundary).
const MAX_LABEL_BYTES: usize = 1024;
/// Ids of one session live in `[session << 32, (session + 1) << 32)`.
const SESSION_SPAN: i64 = 1 << 32;
/// Interned labels remembered for reuse; the cache is cleared when it grows past this.
const LABEL_CACHE_MAX: usize = 1 << 16;

/// The RPD schema version.
///
/// The default is [`RpdSchema::V3`], the schema of rocmProfileData since 2026-02: the current
/// `rpd_tracer` only writes into v3 files (its inserts into a v2 file fail silently, so GPU data
/// would be lost), and the current `rpd2tracing.py` reads v2 and v3. Choose
/// [`RpdSchema::V2`] when the file must be read by an older rocmProfileData checkout (whose
/// `rpd2tracing.py` mis-labels v3 markers) or shared with an older tracer. An existing file
/// keeps its own version.
///
/// ```
/// use tracing_mllog::sink::RpdSchema;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("trace.rpd");
/// assert_eq!(RpdSchema::default().ensure_file(&path)?, RpdSchema::V3); // created
/// assert_eq!(RpdSchema::V2.ensure_file(&path)?, RpdSchema::V3); // existing: its own version
/// assert_eq!("2".parse::<RpdSchema>()?.version(), 2); // as `MLLOG_RPD_SCHEMA=2`
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RpdSchema {
    /// Schema v2: all strings, marker text included, in `rocpd_string`.
    V2,
    /// Schema v3: marker text in `rocpd_ustring`; `rocpd_api` has `domain` and `category`.
    #[default]
    V3,
}

impl RpdSchema {
    /// The version number (`2` or `3`), as stored in `rocpd_metadata.schema_version`.
    pub const fn version(self) -> u32 {
        match self {
            RpdSchema::V2 => 2,
            RpdSchema::V3 => 3,
        }
    }

    /// The version `MLLOG_RPD_SCHEMA` asks for (`2` or `3`), if it is set; a bad value is an
    /// error naming the variable.
    pub fn from_env(env: &crate::env::Env) -> Result<Option<RpdSchema>, RpdError> {
        Ok(env.parse(ENV_RPD_SCHEMA, |v| v.parse())?)
    }

    /// Makes sure `path` holds an RPD schema, as `python3 -m rocpd.schema --create` does but
    /// without deleting anything: a file without RPD tables (missing or empty) gets the full
    /// schema of this version; a file that has them is left as it is. Returns the file's
    /// version, which may differ from `self` for an existing file.
    pub fn ensure_file(self, path: impl AsRef<Path>) -> Result<RpdSchema, RpdError> {
        let path = path.as_ref();
        create_parent(path).map_err(|e| e.at(path))?;
        schema::ensure_file(path, Some(self), Duration::from_secs(10))
            .or_else(|e| match e {
                // An existing schema of the other version is fine here.
                RpdError::Schema { .. } => schema::ensure_file(path, None, Duration::from_secs(10)),
                e => Err(e),
            })
            .map_err(|e| e.at(path))
    }
}

impl FromStr for RpdSchema {
    type Err = String;

    /// Accepts `2`, `v2`, `3` and `v3` (any case).
    fn from_str(s: &str) -> Result<RpdSchema, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "2" | "v2" => Ok(RpdSchema::V2),
            "3" | "v3" => Ok(RpdSchema::V3),
            _ => Err(format!("{s:?} is not an RPD schema version (use 2 or 3)")),
        }
    }
}

impl std::fmt::Display for RpdSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v{}", self.version())
    }
}

/// Why an RPD file could not be opened or written.
///
/// Opening ([`RpdConfig::open`], [`RpdSink::create`]) fails early with the path and the
/// reason; through the layer it is the source of [`crate::Error::Start`]. Write failures
/// later in the run are counted in the sink's [`crate::sink::SinkReport`], never raised.
///
/// ```
/// use tracing_mllog::sink::{RpdError, RpdSink};
///
/// let dir = tempfile::tempdir()?;
/// let not_a_dir = dir.path().join("profiles");
/// std::fs::write(&not_a_dir, "a file where a directory should be")?;
/// let err = RpdSink::create(not_a_dir.join("trace.rpd")).err().expect("no such directory");
/// assert!(matches!(&err, RpdError::Io { path, .. } if path.ends_with("profiles/trace.rpd")));
/// assert!(err.to_string().contains("trace.rpd"), "{err}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, thiserror::Error)]
pub enum RpdError {
    /// An environment variable has a value that cannot be used.
    #[error(transparent)]
    Env(#[from] crate::env::EnvError),
    /// SQLite failed.
    #[error("RPD file{}: {context}: {message}", shown(.path))]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// What was being done.
        context: &'static str,
        /// SQLite's message.
        message: String,
    },
    /// The file's schema cannot be used (unknown version, or not the one asked for).
    #[error("RPD file{}: {message}", shown(.path))]
    Schema {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An I/O error (creating the parent directory).
    #[error("RPD file{}: {source}", shown(.path))]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// ` <path>`, or nothing for errors not tied to a file yet.
fn shown(path: &Path) -> String {
    if path.as_os_str().is_empty() {
        String::new()
    } else {
        format!(" {}", path.display())
    }
}

impl From<std::io::Error> for RpdError {
    fn from(source: std::io::Error) -> RpdError {
        RpdError::Io {
            path: PathBuf::new(),
            source,
        }
    }
}

impl RpdError {
    pub(crate) fn schema(message: String) -> RpdError {
        RpdError::Schema {
            path: PathBuf::new(),
            message,
        }
    }

    /// The same error, naming `file` (errors are built deep inside without it).
    fn at(mut self, file: &Path) -> RpdError {
        match &mut self {
            RpdError::Sqlite { path, .. }
            | RpdError::Schema { path, .. }
            | RpdError::Io { path, .. } => {
                if path.as_os_str().is_empty() {
                    *path = file.to_path_buf();
                }
            }
            RpdError::Env(_) => {}
        }
        self
    }
}

/// How to open an [`RpdSink`].
///
/// Hand [`RpdSink::new`] of it to [`crate::Builder::sink`] to have the layer write the file
/// on the writing rank, opened when the layer starts (`MLLOG_RPD_FILE` does the same from the
/// environment, with [`crate::Builder::from_env`]), or open a sink now with
/// [`RpdConfig::open`]. The defaults fit a file shared with `rpd_tracer`: schema v3 for a new
/// file, a 10 s SQLite busy timeout, a commit every 4096 rows and on every flush.
///
/// ```
/// use tracing_mllog::sink::{RpdConfig, RpdSchema, RpdSink};
/// use tracing_mllog::{MllogLayer, Output};
/// use tracing_subscriber::prelude::*;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("trace.rpd");
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(RpdSink::new(RpdConfig::new(&path).schema(RpdSchema::V2).batch_rows(256)))
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     let _epoch = tracing::info_span!("epoch", epoch_num = 1u64).entered();
/// });
/// let report = guard.shutdown();
/// let rpd = report.sinks.iter().find(|s| s.name == "rpd").expect("the RPD sink");
/// assert_eq!((rpd.written, rpd.errors), (2, 0)); // epoch_start, epoch_stop
///
/// // The file keeps its v2 schema; the layer's sink had session 0, the next writer gets 1.
/// let next = RpdSink::create(&path)?;
/// assert_eq!((next.schema(), next.session()), (RpdSchema::V2, 1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct RpdConfig {
    path: PathBuf,
    schema: Option<RpdSchema>,
    busy_timeout: Duration,
    batch_rows: usize,
    max_pending_rows: usize,
    label_fields: Vec<String>,
}

impl RpdConfig {
    /// Writes `path`; schema v3 for a new file, 10 s busy timeout, commits every 4096 rows and
    /// on every flush, [`DEFAULT_LABEL_FIELDS`] in labels.
    pub fn new(path: impl Into<PathBuf>) -> RpdConfig {
        RpdConfig {
            path: path.into(),
            schema: None,
            busy_timeout: Duration::from_secs(10),
            batch_rows: 4096,
            max_pending_rows: 1 << 20,
            label_fields: DEFAULT_LABEL_FIELDS.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// The configuration the environment asks for: `None` unless `MLLOG_RPD_FILE` is set (and
    /// not empty); `MLLOG_RPD_SCHEMA` (`2` or `3`) chooses the schema. A bad value is an error
    /// naming the variable.
    pub fn from_env(env: &crate::env::Env) -> Result<Option<RpdConfig>, RpdError> {
        let Some(path) = env.string(ENV_RPD_FILE)? else {
            return Ok(None);
        };
        let mut config = RpdConfig::new(path);
        config.schema = RpdSchema::from_env(env)?;
        Ok(Some(config))
    }

    /// The schema version for a new file. An existing file keeps its version; asking for the
    /// other one explicitly makes [`RpdConfig::open`] fail.
    pub fn schema(mut self, schema: RpdSchema) -> RpdConfig {
        self.schema = Some(schema);
        self
    }

    /// How long to wait for another writer's lock (SQLite busy timeout).
    pub fn busy_timeout(mut self, timeout: Duration) -> RpdConfig {
        self.busy_timeout = timeout;
        self
    }

    /// Commits a transaction whenever this many rows are pending, besides every flush.
    pub fn batch_rows(mut self, rows: usize) -> RpdConfig {
        self.batch_rows = rows.max(1);
        self
    }

    /// Rows kept for a retry while the file cannot be written (locked too long, disk full);
    /// past this they are dropped and the failure reported.
    pub fn max_pending_rows(mut self, rows: usize) -> RpdConfig {
        self.max_pending_rows = rows.max(1);
        self
    }

    /// The metadata fields copied into labels (`name field=value ...`), in this order.
    pub fn label_fields<I, S>(mut self, fields: I) -> RpdConfig
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.label_fields = fields.into_iter().map(Into::into).collect();
        self
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the sink (see [`RpdSink::open`]).
    pub fn open(self) -> Result<RpdSink, RpdError> {
        RpdSink::open(self)
    }
}

fn create_parent(path: &Path) -> Result<(), RpdError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    Ok(())
}

/// An interval whose start has been seen.
struct OpenRange {
    label: String,
    start: i64,
    tid: i64,
    /// Timed by the wall clock (a parsed record has no monotonic time), not `CLOCK_MONOTONIC`.
    wall_clock: bool,
}

/// One `rocpd_api` row waiting for the next commit.
struct ApiRow {
    id: i64,
    tid: i64,
    start: i64,
    end: i64,
    args_id: i64,
}

/// Writes MLLOG intervals and points into an RPD (rocmProfileData SQLite) file as `UserMarker`
/// rows.
///
/// Opening claims a session number through `rocpd_metadata.session_count`, inside an exclusive
/// transaction, the way `rpd_tracer` does, and every id this sink writes is offset by
/// `session << 32`: it can append to a file that a tracer or other ranks are writing. Rows are
/// buffered and committed in one transaction per [`Sink::flush`] (and every
/// [`RpdConfig::batch_rows`] rows), on the pipeline's worker thread.
///
/// Each interval becomes one marker row spanning its start and stop, labelled with its name
/// and the [`DEFAULT_LABEL_FIELDS`] found in its metadata; each point is a marker labelled
/// `key=value`. Viewers of RPD files (`rpd2tracing.py`, Perfetto) then show training phases on the
/// same timeline as the GPU kernels. See [`RpdConfig`] for an example through the layer.
///
/// By hand, e.g. to add the intervals of an MLLOG file written earlier to a trace:
///
/// ```
/// use tracing_mllog::record::parse_log;
/// use tracing_mllog::sink::{RpdSchema, RpdSink, Sink};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("trace.rpd");
/// let mut sink = RpdSink::create(&path)?; // a new file gets the current schema
/// assert_eq!(sink.schema(), RpdSchema::V3);
/// let log = r#":::MLLOG {"namespace": "", "time_ms": 1000, "event_type": "INTERVAL_START", "key": "epoch_start", "value": null, "metadata": {"epoch_num": 1}}
/// :::MLLOG {"namespace": "", "time_ms": 1500, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", "value": 0.75, "metadata": {"epoch_num": 1}}
/// :::MLLOG {"namespace": "", "time_ms": 2000, "event_type": "INTERVAL_END", "key": "epoch_stop", "value": null, "metadata": {"epoch_num": 1}}"#;
/// let (lines, malformed) = parse_log(log);
/// assert!(malformed.is_empty());
/// for line in &lines {
///     sink.write(&line.record.clone().into())?;
/// }
/// sink.flush()?; // one transaction
/// assert_eq!(sink.rows_written(), 2); // the epoch's marker and the point's
///
/// // Another writer of the same file (a rank, the tracer) appends under its own session.
/// let other = RpdSink::create(&path)?;
/// assert_ne!(other.session(), sink.session());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RpdSink {
    path: PathBuf,
    state: RpdState,
}

impl std::fmt::Debug for RpdSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpdSink")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// An [`RpdSink`] made from its config opens its file when it starts (or at its first record
/// when used by hand); one that could not open says why at every record it cannot write.
enum RpdState {
    Closed(RpdConfig),
    Open(Box<RpdFile>),
    Failed(String),
}

impl RpdSink {
    /// A sink for the file `config` names, opened when the layer starts it ([`Sink::start`]),
    /// on the rank that runs it: hand it to [`crate::Builder::sink`]. [`RpdSink::open`] opens
    /// it now.
    pub fn new(config: RpdConfig) -> RpdSink {
        RpdSink {
            path: config.path.clone(),
            state: RpdState::Closed(config),
        }
    }

    /// The sink `MLLOG_RPD_FILE` asks for ([`RpdConfig::from_env`]), not opened yet, or
    /// `None`.
    pub fn from_env(env: &crate::env::Env) -> Result<Option<RpdSink>, RpdError> {
        Ok(RpdConfig::from_env(env)?.map(RpdSink::new))
    }

    /// Opens `path` with the default [`RpdConfig`]: a new file gets the schema, an existing one
    /// is appended to under a newly claimed session.
    pub fn create(path: impl Into<PathBuf>) -> Result<RpdSink, RpdError> {
        RpdSink::open(RpdConfig::new(path))
    }

    /// Opens the file `config` names, creating its parent directory, the file and the schema
    /// as needed, and claims a session. Fails now, not at the first record.
    pub fn open(config: RpdConfig) -> Result<RpdSink, RpdError> {
        let mut sink = RpdSink::new(config);
        sink.open_if_closed()?;
        Ok(sink)
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's schema version, once open (before: the version a new file would get).
    pub fn schema(&self) -> RpdSchema {
        match &self.state {
            RpdState::Open(file) => file.schema,
            RpdState::Closed(config) => config.schema.unwrap_or(RpdSchema::V3),
            RpdState::Failed(_) => RpdSchema::V3,
        }
    }

    /// The session number claimed (0 until open); this sink's ids are `(session << 32) + n`.
    pub fn session(&self) -> u32 {
        match &self.state {
            RpdState::Open(file) => file.session,
            _ => 0,
        }
    }

    /// `rocpd_api` rows committed so far.
    pub fn rows_written(&self) -> u64 {
        match &self.state {
            RpdState::Open(file) => file.rows_written,
            _ => 0,
        }
    }

    /// Opens the file unless it is open (or failed to open).
    fn open_if_closed(&mut self) -> Result<(), RpdError> {
        let RpdState::Closed(config) = &self.state else {
            return Ok(());
        };
        match RpdFile::open(config.clone()).map_err(|e| e.at(&self.path)) {
            Ok(file) => {
                self.state = RpdState::Open(Box::new(file));
                Ok(())
            }
            Err(e) => {
                self.state = RpdState::Failed(e.to_string());
                Err(e)
            }
        }
    }

    /// The open file, opened first if need be; a file that could not open is that error,
    /// for every record.
    fn file(&mut self) -> Result<&mut RpdFile, SinkError> {
        let _ = self.open_if_closed();
        match &mut self.state {
            RpdState::Open(file) => Ok(file),
            RpdState::Failed(why) => Err(SinkError::Other(why.clone())),
            RpdState::Closed(_) => unreachable!("opened or failed above"),
        }
    }
}

/// The open file: the session claimed, the ids used, the rows waiting for a commit.
struct RpdFile {
    conn: Connection,
    path: PathBuf,
    schema: RpdSchema,
    session: u32,
    pid: i64,
    batch_rows: usize,
    max_pending_rows: usize,
    label_fields: Vec<String>,
    /// `rocpd_string` id of `''` and of `'UserMarker'`.
    empty_id: i64,
    marker_id: i64,
    /// Last id used per table.
    last_api: i64,
    last_string: i64,
    last_ustring: i64,
    open: HashMap<u64, OpenRange>,
    /// Intervals without ids (parsed records), paired by name, innermost last.
    open_by_name: HashMap<String, Vec<OpenRange>>,
    labels: HashMap<String, i64>,
    pending_strings: Vec<(i64, String)>,
    pending_ustrings: Vec<(i64, String)>,
    pending_api: Vec<ApiRow>,
    dropped_rows: u64,
    rows_written: u64,
    /// The latest wall-clock time of a record without a monotonic one: where a parsed run
    /// that never closed its intervals is known to have got to.
    last_wall_ns: i64,
}

impl RpdFile {
    fn open(config: RpdConfig) -> Result<RpdFile, RpdError> {
        create_parent(&config.path)?;
        let mut conn = schema::open(&config.path, config.busy_timeout)?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Exclusive)
            .map_err(|e| sqlite("locking the RPD file", e))?;
        let version = schema::ensure_schema(&tx, config.schema)?;
        let session = schema::claim_session(&tx)?;
        tx.commit()
            .map_err(|e| sqlite("committing the session claim", e))?;

        let lo = (session as i64) << 32;
        let hi = lo + SESSION_SPAN;
        let last_api = schema::max_id_in(&conn, "rocpd_api", "id", lo, hi)?;
        let last_string = schema::max_id_in(&conn, "rocpd_string", "id", lo, hi)?;
        let last_ustring = match version {
            RpdSchema::V3 => schema::max_id_in(&conn, "rocpd_ustring", "id", lo, hi)?,
            RpdSchema::V2 => lo,
        };
        let mut sink = RpdFile {
            conn,
            path: config.path,
            schema: version,
            session,
            pid: std::process::id() as i64,
            batch_rows: config.batch_rows,
            max_pending_rows: config.max_pending_rows,
            label_fields: config.label_fields,
            empty_id: 0,
            marker_id: 0,
            last_api,
            last_string,
            last_ustring,
            open: HashMap::new(),
            open_by_name: HashMap::new(),
            labels: HashMap::new(),
            pending_strings: Vec::new(),
            pending_ustrings: Vec::new(),
            pending_api: Vec::with_capacity(config.batch_rows.min(1 << 16)),
            dropped_rows: 0,
            rows_written: 0,
            last_wall_ns: i64::MIN,
        };
        // The session's own '' (id offset + 1, as the tracer's "empty string is id=1") and
        // 'UserMarker', committed right away so that the file is consistent from the start.
        sink.empty_id = sink.new_string(String::new());
        if version == RpdSchema::V3 {
            sink.last_ustring += 1;
            let id = sink.last_ustring;
            sink.pending_ustrings.push((id, String::new()));
            sink.labels.insert(String::new(), id);
        }
        sink.marker_id = sink.new_string("UserMarker".to_string());
        sink.commit().map_err(|e| RpdError::Sqlite {
            path: PathBuf::new(),
            context: "writing the session's strings",
            message: e.to_string(),
        })?;
        Ok(sink)
    }

    fn new_string(&mut self, s: String) -> i64 {
        self.last_string += 1;
        let id = self.last_string;
        self.pending_strings.push((id, s));
        id
    }

    /// The id of `label` in the args table (`rocpd_ustring` in v3, `rocpd_string` in v2).
    fn intern_label(&mut self, label: &str) -> i64 {
        if let Some(&id) = self.labels.get(label) {
            return id;
        }
        if self.labels.len() >= LABEL_CACHE_MAX {
            // Only a cache: a label seen again gets a new row, which readers do not mind
            // (the tracer itself never deduplicates `rocpd_ustring`).
            self.labels.clear();
        }
        let id = match self.schema {
            RpdSchema::V3 => {
                self.last_ustring += 1;
                self.pending_ustrings
                    .push((self.last_ustring, label.to_owned()));
                self.last_ustring
            }
            RpdSchema::V2 => self.new_string(label.to_owned()),
        };
        self.labels.insert(label.to_owned(), id);
        id
    }

    fn push_row(&mut self, label: &str, tid: i64, start: i64, end: i64) -> Result<(), SinkError> {
        let args_id = self.intern_label(label);
        self.last_api += 1;
        self.pending_api.push(ApiRow {
            id: self.last_api,
            tid,
            start,
            end: end.max(start),
            args_id,
        });
        if self.pending_api.len() >= self.batch_rows {
            return self.commit_or_keep();
        }
        Ok(())
    }

    fn pending_rows(&self) -> usize {
        self.pending_api.len() + self.pending_strings.len() + self.pending_ustrings.len()
    }

    /// Commits, keeping the rows for a retry when that fails (dropping them past the limit).
    fn commit_or_keep(&mut self) -> Result<(), SinkError> {
        match self.commit() {
            Ok(()) => Ok(()),
            Err(e) => {
                let mut msg = format!("RPD file {}: {e}", self.path.display());
                if self.pending_rows() > self.max_pending_rows {
                    let n = self.pending_api.len() as u64;
                    self.dropped_rows += n;
                    self.pending_api.clear();
                    // Strings stay pending (they are small and later rows may use them).
                    msg.push_str(&format!(
                        "; dropped {n} rows ({} in total)",
                        self.dropped_rows
                    ));
                }
                Err(SinkError::Other(msg))
            }
        }
    }

    /// Writes everything pending in one transaction.
    fn commit(&mut self) -> rusqlite::Result<()> {
        if self.pending_rows() == 0 {
            return Ok(());
        }
        let tx = self.conn.transaction()?;
        let strings = "INSERT INTO rocpd_string (id, string) VALUES ";
        insert_rows(&tx, strings, 2, &self.pending_strings, |st, i, (id, s)| {
            st.raw_bind_parameter(i, id)?;
            st.raw_bind_parameter(i + 1, s.as_str())
        })?;
        let ustrings = "INSERT INTO rocpd_ustring (id, string) VALUES ";
        insert_rows(
            &tx,
            ustrings,
            2,
            &self.pending_ustrings,
            |st, i, (id, s)| {
                st.raw_bind_parameter(i, id)?;
                st.raw_bind_parameter(i + 1, s.as_str())
            },
        )?;
        let (pid, marker, empty) = (self.pid, self.marker_id, self.empty_id);
        // The columns both schemas share, first in each row.
        let common = |st: &mut rusqlite::Statement<'_>, i: usize, r: &ApiRow| {
            st.raw_bind_parameter(i, r.id)?;
            st.raw_bind_parameter(i + 1, pid)?;
            st.raw_bind_parameter(i + 2, r.tid)?;
            st.raw_bind_parameter(i + 3, r.start)?;
            st.raw_bind_parameter(i + 4, r.end)?;
            st.raw_bind_parameter(i + 5, marker)
        };
        match self.schema {
            RpdSchema::V3 => {
                let head = "INSERT INTO rocpd_api (id, pid, tid, start, \"end\", apiName_id, \
                            category_id, domain_id, args_id) VALUES ";
                insert_rows(&tx, head, 9, &self.pending_api, |st, i, r| {
                    common(st, i, r)?;
                    st.raw_bind_parameter(i + 6, empty)?;
                    st.raw_bind_parameter(i + 7, marker)?;
                    st.raw_bind_parameter(i + 8, r.args_id)
                })?;
            }
            RpdSchema::V2 => {
                let head = "INSERT INTO rocpd_api (id, pid, tid, start, \"end\", apiName_id, \
                            args_id) VALUES ";
                insert_rows(&tx, head, 7, &self.pending_api, |st, i, r| {
                    common(st, i, r)?;
                    st.raw_bind_parameter(i + 6, r.args_id)
                })?;
            }
        }
        tx.commit()?;
        self.rows_written += self.pending_api.len() as u64;
        self.pending_api.clear();
        self.pending_strings.clear();
        self.pending_ustrings.clear();
        Ok(())
    }

    /// Appends the label fields found in `record` and not yet in `label`.
    fn append_fields(&self, label: &mut String, record: &TracedRecord) {
        for field in &self.label_fields {
            if let Some(value) = record.metadata.get(field) {
                if label_has_field(label, field) {
                    continue;
                }
                label.push(' ');
                label.push_str(field);
                label.push('=');
                push_value(label, value);
            }
        }
    }

    fn tid_of(&self, record: &TracedRecord) -> i64 {
        if record.tid == 0 {
            self.pid
        } else {
            record.tid as i64
        }
    }
}

/// Rows per multi-row `INSERT` (far below SQLite's limit on bound parameters).
const ROWS_PER_INSERT: usize = 64;

/// Inserts `rows` with multi-row `INSERT ... VALUES (...), (...)` statements: `head` is the
/// statement up to `VALUES `, `cols` the values per row, `bind` binds one row's values from
/// the given 1-based parameter index.
fn insert_rows<T>(
    tx: &rusqlite::Transaction<'_>,
    head: &str,
    cols: usize,
    rows: &[T],
    bind: impl Fn(&mut rusqlite::Statement<'_>, usize, &T) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    let sql = |n: usize| {
        let tuple = format!("({})", vec!["?"; cols].join(", "));
        let mut sql = String::with_capacity(head.len() + n * (tuple.len() + 2));
        sql.push_str(head);
        for k in 0..n {
            if k > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&tuple);
        }
        sql
    };
    let mut chunks = rows.chunks_exact(ROWS_PER_INSERT);
    if rows.len() >= ROWS_PER_INSERT {
        let mut st = tx.prepare(&sql(ROWS_PER_INSERT))?;
        for chunk in &mut chunks {
            for (k, row) in chunk.iter().enumerate() {
                bind(&mut st, 1 + k * cols, row)?;
            }
            st.raw_execute()?;
        }
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut st = tx.prepare(&sql(rest.len()))?;
        for (k, row) in rest.iter().enumerate() {
            bind(&mut st, 1 + k * cols, row)?;
        }
        st.raw_execute()?;
    }
    Ok(())
}

fn sqlite(context: &'static str, e: rusqlite::Error) -> RpdError {
    RpdError::Sqlite {
        path: PathBuf::new(),
        context,
        message: sqlite_message(&e),
    }
}

/// SQLite's message, and for a lock, whose it is likely to be: "database is locked" alone
/// sends a user looking at the setting that was being changed.
pub(super) fn sqlite_message(e: &rusqlite::Error) -> String {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => format!(
            "{e}: another writer (rpd_tracer, another rank, a viewer) held the file's lock \
             past the busy timeout (`RpdConfig::busy_timeout`)"
        ),
        _ => e.to_string(),
    }
}

/// `CLOCK_MONOTONIC` ns, or the wall clock for records that carry no monotonic time (parsed
/// from a log); such rows do not line up with GPU activity.
fn time_of(record: &TracedRecord) -> i64 {
    if record.time.mono_ns != 0 {
        record.time.mono_ns.min(i64::MAX as u64) as i64
    } else {
        record.time.wall_ns
    }
}

/// `block_start` → `block`; `run_stop` → `run`; other keys unchanged.
pub(crate) fn interval_name(key: &str) -> &str {
    key.strip_suffix("_start")
        .or_else(|| key.strip_suffix("_stop"))
        .filter(|s| !s.is_empty())
        .unwrap_or(key)
}

fn label_has_field(label: &str, field: &str) -> bool {
    label
        .split(' ')
        .skip(1)
        .any(|part| part.strip_prefix(field).is_some_and(|r| r.starts_with('=')))
}

fn push_value(out: &mut String, value: &Value) {
    use std::fmt::Write;
    match value {
        Value::Str(s) => out.push_str(s),
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// Makes a label safe for `rpd2tracing.py`, which writes names into JSON unescaped: backslashes
/// become `/`, double quotes `'`, control characters a space; at most 1 KiB.
pub fn sanitize_label(label: &str) -> String {
    let mut out = String::with_capacity(label.len().min(MAX_LABEL_BYTES));
    for c in label.chars() {
        let c = match c {
            '\\' => '/',
            '"' => '\'',
            c if c.is_control() => ' ',
            c => c,
        };
        if out.len() + c.len_utf8() > MAX_LABEL_BYTES {
            break;
        }
        out.push(c);
    }
    out
}

fn sanitize_in_place(label: &mut String) {
    let clean = label.len() <= MAX_LABEL_BYTES
        && !label
            .chars()
            .any(|c| c == '\\' || c == '"' || c.is_control());
    if !clean {
        *label = sanitize_label(label);
    }
}

/// The registration (see `crate::registry::FACTORIES`): `MLLOG_RPD_FILE`, on the writing rank.
pub(crate) fn plug(
    env: &crate::env::Env,
    _rank: u32,
    _submission: &crate::submission::Submission,
) -> Result<Option<super::plug::EnvSink>, crate::Error> {
    let sink = RpdSink::from_env(env).map_err(|e| crate::Error::start("the RPD sink", e))?;
    Ok(sink.map(super::plug::EnvSink::isolated))
}

impl Sink for RpdSink {
    fn name(&self) -> &str {
        "rpd"
    }

    /// Opens the file: on the rank that runs the sink, before the MLLOG file is opened.
    fn start(
        &mut self,
        _: &mut super::SinkStart<'_>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.open_if_closed()?)
    }

    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
        self.file()?.write(record)
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        match &mut self.state {
            RpdState::Open(file) => file.commit_or_keep(),
            _ => Ok(()),
        }
    }

    /// Writes intervals still open (an aborted run) as ending now (a parsed run: at its last
    /// record), marked `unclosed=true`, then commits.
    fn close(&mut self, _deadline: Instant) -> Result<(), SinkError> {
        match &mut self.state {
            RpdState::Open(file) => file.close(),
            _ => Ok(()),
        }
    }
}

impl RpdFile {
    fn write(&mut self, record: &TracedRecord) -> Result<(), SinkError> {
        if record.time.mono_ns == 0 {
            self.last_wall_ns = self.last_wall_ns.max(record.time.wall_ns);
        }
        match record.event_type {
            EventType::IntervalStart => {
                let mut label = String::with_capacity(48);
                label.push_str(interval_name(&record.key));
                self.append_fields(&mut label, record);
                let open = OpenRange {
                    label,
                    wall_clock: record.time.mono_ns == 0,
                    start: time_of(record),
                    tid: self.tid_of(record),
                };
                match record.interval {
                    Some(ids) => {
                        self.open.insert(ids.id, open);
                    }
                    None => self
                        .open_by_name
                        .entry(interval_name(&record.key).to_owned())
                        .or_default()
                        .push(open),
                }
                Ok(())
            }
            EventType::IntervalEnd => {
                let found = match record.interval {
                    Some(ids) => self.open.remove(&ids.id),
                    None => None,
                }
                .or_else(|| {
                    self.open_by_name
                        .get_mut(interval_name(&record.key))
                        .and_then(Vec::pop)
                });
                let end = time_of(record);
                let (mut label, start, tid) = match found {
                    Some(o) => (o.label, o.start, o.tid),
                    // An end without a start (the sink was added late): a mark at the end.
                    None => (
                        interval_name(&record.key).to_owned(),
                        end,
                        self.tid_of(record),
                    ),
                };
                self.append_fields(&mut label, record);
                sanitize_in_place(&mut label);
                self.push_row(&label, tid, start, end)
            }
            EventType::PointInTime => {
                let mut label = String::with_capacity(48);
                label.push_str(&record.key);
                if !record.value.is_null() {
                    label.push('=');
                    push_value(&mut label, &record.value);
                }
                self.append_fields(&mut label, record);
                sanitize_in_place(&mut label);
                let t = time_of(record);
                let tid = self.tid_of(record);
                self.push_row(&label, tid, t, t)
            }
        }
    }

    fn close(&mut self) -> Result<(), SinkError> {
        let now = crate::record::Timestamp::now().mono_ns as i64;
        let mut open: Vec<OpenRange> = self.open.drain().map(|(_, o)| o).collect();
        for (_, v) in self.open_by_name.drain() {
            open.extend(v);
        }
        open.sort_by_key(|o| o.start);
        for o in open {
            let mut label = o.label;
            label.push_str(" unclosed=true");
            sanitize_in_place(&mut label);
            let args_id = self.intern_label(&label);
            self.last_api += 1;
            self.pending_api.push(ApiRow {
                id: self.last_api,
                tid: o.tid,
                start: o.start,
                // A live run ends now; a parsed one where its last record was (the time the
                // watch ends says nothing of the run's).
                end: if o.wall_clock { self.last_wall_ns } else { now }.max(o.start),
                args_id,
            });
        }
        self.commit_or_keep()
    }
}
