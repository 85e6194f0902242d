//! The rocmProfileData (RPD) SQLite schema, versions 2 and 3, written from the format
//! description (tables, column order, deferred foreign keys, string indexes, utility views and
//! metadata rows), and the session claim that lets several writers share one file.

use rusqlite::{Connection, OptionalExtension, Transaction};

use super::{RpdError, RpdSchema};

/// Tables, in the column order the tracer relies on (it copies rows positionally).
const TABLES_COMMON: &str = r#"
CREATE TABLE IF NOT EXISTS "rocpd_metadata" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "tag" varchar(4096) NOT NULL,
  "value" varchar(4096) NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_string" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "string" varchar(4096) NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_api_ops" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "api_id" bigint NOT NULL REFERENCES "rocpd_api" ("id") DEFERRABLE INITIALLY DEFERRED,
  "op_id" bigint NOT NULL REFERENCES "rocpd_op" ("id") DEFERRABLE INITIALLY DEFERRED);
CREATE TABLE IF NOT EXISTS "rocpd_copyapi" (
  "api_ptr_id" bigint NOT NULL PRIMARY KEY REFERENCES "rocpd_api" ("id") DEFERRABLE INITIALLY DEFERRED,
  "stream" varchar(18) NOT NULL,
  "size" integer NOT NULL,
  "width" integer NOT NULL,
  "height" integer NOT NULL,
  "kind" integer NOT NULL,
  "dst" varchar(18) NOT NULL,
  "src" varchar(18) NOT NULL,
  "dstDevice" integer NOT NULL,
  "srcDevice" integer NOT NULL,
  "sync" bool NOT NULL,
  "pinned" bool NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_monitor" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "deviceType" varchar(16) NOT NULL,
  "deviceId" integer NOT NULL,
  "monitorType" varchar(16) NOT NULL,
  "start" integer NOT NULL,
  "end" integer NOT NULL,
  "value" varchar(255) NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_stackframe" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "api_ptr_id" bigint NOT NULL REFERENCES "rocpd_api" ("id") DEFERRABLE INITIALLY DEFERRED,
  "depth" integer NOT NULL,
  "name_id" bigint NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED);
CREATE INDEX IF NOT EXISTS "rocpd_strin_string_c7b9cd_idx" ON "rocpd_string" ("string");
"#;

const TABLES_V3: &str = r#"
CREATE TABLE IF NOT EXISTS "rocpd_ustring" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "string" varchar(4096) NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_api" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "pid" integer NOT NULL,
  "tid" integer NOT NULL,
  "start" integer NOT NULL,
  "end" integer NOT NULL,
  "apiName_id" bigint NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED,
  "category_id" bigint NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED,
  "domain_id" bigint NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED,
  "args_id" bigint NOT NULL REFERENCES "rocpd_ustring" ("id") DEFERRABLE INITIALLY DEFERRED);
CREATE TABLE IF NOT EXISTS "rocpd_kernelapi" (
  "api_ptr_id" bigint NOT NULL PRIMARY KEY REFERENCES "rocpd_api" ("id") DEFERRABLE INITIALLY DEFERRED,
  "stream" varchar(18) NOT NULL,
  "gridX" integer NOT NULL,
  "gridY" integer NOT NULL,
  "gridZ" integer NOT NULL,
  "workgroupX" integer NOT NULL,
  "workgroupY" integer NOT NULL,
  "workgroupZ" integer NOT NULL,
  "groupSegmentSize" integer NOT NULL,
  "privateSegmentSize" integer NOT NULL,
  "kernelName_id" bigint NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED);
CREATE TABLE IF NOT EXISTS "rocpd_op" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "gpuId" integer NOT NULL,
  "queueId" integer NOT NULL,
  "sequenceId" integer NOT NULL,
  "start" integer NOT NULL,
  "end" integer NOT NULL,
  "description_id" bigint NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED,
  "opType_id" bigint NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED);
CREATE TABLE IF NOT EXISTS "rocpd_counter" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "value" real NOT NULL,
  "op_id" bigint NOT NULL REFERENCES "rocpd_op" ("id") DEFERRABLE INITIALLY DEFERRED,
  "name_id" bigint NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED);
CREATE INDEX IF NOT EXISTS "rocpd_ustri_string_84d4a7_idx" ON "rocpd_ustring" ("string");
"#;

const TABLES_V2: &str = r#"
CREATE TABLE IF NOT EXISTS "rocpd_api" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "pid" integer NOT NULL,
  "tid" integer NOT NULL,
  "start" integer NOT NULL,
  "end" integer NOT NULL,
  "apiName_id" integer NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED,
  "args_id" integer NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED);
CREATE TABLE IF NOT EXISTS "rocpd_kernelcodeobject" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "vgpr" integer NOT NULL,
  "sgpr" integer NOT NULL,
  "fbar" integer NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_kernelapi" (
  "api_ptr_id" integer NOT NULL PRIMARY KEY REFERENCES "rocpd_api" ("id") DEFERRABLE INITIALLY DEFERRED,
  "stream" varchar(18) NOT NULL,
  "gridX" integer NOT NULL,
  "gridY" integer NOT NULL,
  "gridZ" integer NOT NULL,
  "workgroupX" integer NOT NULL,
  "workgroupY" integer NOT NULL,
  "workgroupZ" integer NOT NULL,
  "groupSegmentSize" integer NOT NULL,
  "privateSegmentSize" integer NOT NULL,
  "kernelArgAddress" varchar(18) NOT NULL,
  "aquireFence" varchar(8) NOT NULL,
  "releaseFence" varchar(8) NOT NULL,
  "codeObject_id" integer NOT NULL REFERENCES "rocpd_kernelcodeobject" ("id") DEFERRABLE INITIALLY DEFERRED,
  "kernelName_id" integer NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED);
CREATE TABLE IF NOT EXISTS "rocpd_op" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "gpuId" integer NOT NULL,
  "queueId" integer NOT NULL,
  "sequenceId" integer NOT NULL,
  "completionSignal" varchar(18) NOT NULL,
  "start" integer NOT NULL,
  "end" integer NOT NULL,
  "description_id" integer NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED,
  "opType_id" integer NOT NULL REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED);
CREATE TABLE IF NOT EXISTS "rocpd_barrierop" (
  "op_ptr_id" integer NOT NULL PRIMARY KEY REFERENCES "rocpd_op" ("id") DEFERRABLE INITIALLY DEFERRED,
  "signalCount" integer NOT NULL,
  "aquireFence" varchar(8) NOT NULL,
  "releaseFence" varchar(8) NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_op_inputSignals" (
  "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT,
  "from_op_id" integer NOT NULL REFERENCES "rocpd_op" ("id") DEFERRABLE INITIALLY DEFERRED,
  "to_op_id" integer NOT NULL REFERENCES "rocpd_op" ("id") DEFERRABLE INITIALLY DEFERRED);
"#;

/// Views both versions share (the `api` view differs and is added per version).
const VIEWS_COMMON: &str = r#"
CREATE VIEW IF NOT EXISTS "op" AS
  SELECT O.id, O.gpuId, O.queueId, O.sequenceId, O.start, O."end",
         D.string AS description, T.string AS opType
  FROM rocpd_op O
  JOIN rocpd_string D ON D.id = O.description_id
  JOIN rocpd_string T ON T.id = O.opType_id;
CREATE VIEW IF NOT EXISTS "busy" AS
  SELECT gpuId, sum("end" - start) AS GpuTime,
         (SELECT max("end") - min(start) FROM rocpd_op) AS WallTime,
         sum("end" - start) * 1.0 / (SELECT max("end") - min(start) FROM rocpd_op) AS Busy
  FROM rocpd_op GROUP BY gpuId;
CREATE VIEW IF NOT EXISTS "top" AS
  SELECT CASE WHEN D.string = '' THEN T.string ELSE D.string END AS Name,
         count(*) AS TotalCalls,
         sum(O."end" - O.start) / 1000 AS TotalDuration_us,
         (sum(O."end" - O.start) / count(*)) / 1000.0 AS Ave_us,
         sum(O."end" - O.start) * 100.0 / (SELECT sum("end" - start) FROM rocpd_op) AS Percentage
  FROM rocpd_op O
  JOIN rocpd_string D ON D.id = O.description_id
  JOIN rocpd_string T ON T.id = O.opType_id
  GROUP BY Name ORDER BY TotalDuration_us DESC;
CREATE VIEW IF NOT EXISTS "kernel" AS
  SELECT O.id, O.gpuId, O.queueId, O.sequenceId, O.start, O."end", O."end" - O.start AS duration,
         K.stream, K.gridX, K.gridY, K.gridZ, K.workgroupX, K.workgroupY, K.workgroupZ,
         K.groupSegmentSize, K.privateSegmentSize, S.string AS kernelName
  FROM rocpd_api_ops AO
  JOIN rocpd_op O ON O.id = AO.op_id
  JOIN rocpd_kernelapi K ON K.api_ptr_id = AO.api_id
  JOIN rocpd_string S ON S.id = K.kernelName_id;
CREATE VIEW IF NOT EXISTS "copy" AS
  SELECT A.id, A.pid, A.tid, A.start, A."end", S.string AS apiName, C.stream, C.size, C.width,
         C.height, C.kind, C.dst, C.src, C.dstDevice, C.srcDevice, C.sync, C.pinned
  FROM rocpd_copyapi C
  JOIN rocpd_api A ON A.id = C.api_ptr_id
  JOIN rocpd_string S ON S.id = A.apiName_id;
CREATE VIEW IF NOT EXISTS "copyop" AS
  SELECT O.id, O.gpuId, O.queueId, O.sequenceId, O.start, O."end", O."end" - O.start AS duration,
         C.stream, C.size, C.width, C.height, C.kind, C.dst, C.src, C.dstDevice, C.srcDevice,
         C.sync, C.pinned, S.string AS apiName
  FROM rocpd_api_ops AO
  JOIN rocpd_op O ON O.id = AO.op_id
  JOIN rocpd_copyapi C ON C.api_ptr_id = AO.api_id
  JOIN rocpd_api A ON A.id = AO.api_id
  JOIN rocpd_string S ON S.id = A.apiName_id;
CREATE VIEW IF NOT EXISTS "stackframe" AS
  SELECT A.id, N.string AS apiName, F.depth, S.string AS name
  FROM rocpd_stackframe F
  JOIN rocpd_api A ON A.id = F.api_ptr_id
  JOIN rocpd_string N ON N.id = A.apiName_id
  JOIN rocpd_string S ON S.id = F.name_id;
"#;

const VIEWS_V3: &str = r#"
CREATE VIEW IF NOT EXISTS "api" AS
  SELECT A.id, A.pid, A.tid, A.start, A."end", D.string AS domain, C.string AS category,
         N.string AS apiName, G.string AS args
  FROM rocpd_api A
  JOIN rocpd_string D ON D.id = A.domain_id
  JOIN rocpd_string C ON C.id = A.category_id
  JOIN rocpd_string N ON N.id = A.apiName_id
  JOIN rocpd_ustring G ON G.id = A.args_id;
CREATE VIEW IF NOT EXISTS "napi" AS
  SELECT A.id, A.pid / P.stride AS node, A.pid % P.stride AS pid, A.tid % P.stride AS tid,
         A.start, A."end", D.string AS domain, C.string AS category, N.string AS apiName,
         G.string AS args
  FROM rocpd_api A
  JOIN (SELECT CAST(value AS integer) AS stride FROM rocpd_metadata WHERE tag = 'pid_stride') P
  JOIN rocpd_string D ON D.id = A.domain_id
  JOIN rocpd_string C ON C.id = A.category_id
  JOIN rocpd_string N ON N.id = A.apiName_id
  JOIN rocpd_ustring G ON G.id = A.args_id;
CREATE VIEW IF NOT EXISTS "nop" AS
  SELECT O.id, O.gpuId / G.stride AS node, O.gpuId % G.stride AS gpuId,
         O.queueId % G.stride AS queueId, O.sequenceId, O.start, O."end",
         D.string AS description, T.string AS opType
  FROM rocpd_op O
  JOIN (SELECT CAST(value AS integer) AS stride FROM rocpd_metadata WHERE tag = 'gpu_stride') G
  JOIN rocpd_string D ON D.id = O.description_id
  JOIN rocpd_string T ON T.id = O.opType_id;
INSERT INTO rocpd_metadata (tag, value) VALUES ('gpu_stride', '1000');
INSERT INTO rocpd_metadata (tag, value) VALUES ('pid_stride', '10000000');
INSERT INTO rocpd_metadata (tag, value) VALUES ('schema_version', '3');
"#;

const VIEWS_V2: &str = r#"
CREATE VIEW IF NOT EXISTS "api" AS
  SELECT A.id, A.pid, A.tid, A.start, A."end", N.string AS apiName, G.string AS args
  FROM rocpd_api A
  JOIN rocpd_string N ON N.id = A.apiName_id
  JOIN rocpd_string G ON G.id = A.args_id;
INSERT INTO rocpd_metadata (tag, value) VALUES ('schema_version', '2');
"#;

fn sql_err(context: &'static str) -> impl FnOnce(rusqlite::Error) -> RpdError {
    move |e| RpdError::Sqlite {
        path: std::path::PathBuf::new(),
        context,
        message: super::sqlite_message(&e),
    }
}

fn table_exists(tx: &Connection, name: &str) -> Result<bool, RpdError> {
    tx.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .map_err(sql_err("reading the file's tables"))
}

/// The schema version of a file that already holds RPD tables, or `None` for a file without
/// them (new, empty, or created by a tracer that found no schema).
fn existing_version(tx: &Connection) -> Result<Option<RpdSchema>, RpdError> {
    if !table_exists(tx, "rocpd_api")? {
        return Ok(None);
    }
    if table_exists(tx, "rocpd_metadata")? {
        let v: Option<String> = tx
            .query_row(
                "SELECT CAST(value AS text) FROM rocpd_metadata WHERE tag = 'schema_version' \
                 ORDER BY id LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql_err("reading schema_version"))?;
        match v.as_deref().map(str::trim) {
            Some("2") => return Ok(Some(RpdSchema::V2)),
            Some("3") => return Ok(Some(RpdSchema::V3)),
            Some(other) => {
                return Err(RpdError::schema(format!(
                    "the file's schema_version is {other:?}; only 2 and 3 are supported"
                )))
            }
            None => {}
        }
    }
    // No version row: v3 is the version with a domain column on rocpd_api.
    let has_domain: i64 = tx
        .query_row(
            "SELECT count(*) FROM pragma_table_info('rocpd_api') WHERE name = 'domain_id'",
            [],
            |r| r.get(0),
        )
        .map_err(sql_err("reading rocpd_api's columns"))?;
    Ok(Some(if has_domain > 0 {
        RpdSchema::V3
    } else {
        RpdSchema::V2
    }))
}

/// Writes the whole schema of `version` into a file that has none.
fn write_schema(tx: &Connection, version: RpdSchema) -> Result<(), RpdError> {
    let (tables, views) = match version {
        RpdSchema::V2 => (TABLES_V2, VIEWS_V2),
        RpdSchema::V3 => (TABLES_V3, VIEWS_V3),
    };
    tx.execute_batch(TABLES_COMMON)
        .and_then(|_| tx.execute_batch(tables))
        .and_then(|_| tx.execute_batch(VIEWS_COMMON))
        .and_then(|_| tx.execute_batch(views))
        .map_err(sql_err("creating the RPD schema"))
}

/// Inside an exclusive transaction: makes sure the file has a schema (creating `wanted`, or the
/// default, when it has none) and returns the file's version. `wanted` must match an existing
/// schema when given.
pub(super) fn ensure_schema(
    tx: &Transaction<'_>,
    wanted: Option<RpdSchema>,
) -> Result<RpdSchema, RpdError> {
    match existing_version(tx)? {
        Some(found) => match wanted {
            Some(w) if w != found => Err(RpdError::schema(format!(
                "the file already holds RPD schema v{} but schema v{} was asked for",
                found.version(),
                w.version()
            ))),
            _ => Ok(found),
        },
        None => {
            let version = wanted.unwrap_or_default();
            write_schema(tx, version)?;
            Ok(version)
        }
    }
}

/// Claims a session number the way `rpd_tracer` does: reads `session_count` (inserting `1`
/// and taking number 0 when it is missing), then stores number + 1. Must run inside an
/// exclusive transaction.
pub(super) fn claim_session(tx: &Transaction<'_>) -> Result<u32, RpdError> {
    let current: Option<String> = tx
        .query_row(
            "SELECT CAST(value AS text) FROM rocpd_metadata WHERE tag = 'session_count' \
             ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql_err("reading session_count"))?;
    match current {
        None => {
            tx.execute(
                "INSERT INTO rocpd_metadata (tag, value) VALUES ('session_count', '1')",
                [],
            )
            .map_err(sql_err("writing session_count"))?;
            Ok(0)
        }
        Some(text) => {
            let number: u32 = text
                .trim()
                .parse()
                .ok()
                .filter(|n| *n < (1u32 << 31) - 1)
                .ok_or_else(|| {
                    RpdError::schema(format!("unusable session_count {text:?} in rocpd_metadata"))
                })?;
            tx.execute(
                "UPDATE rocpd_metadata SET value = ?1 WHERE tag = 'session_count'",
                [(number + 1).to_string()],
            )
            .map_err(sql_err("writing session_count"))?;
            Ok(number)
        }
    }
}

/// The largest id already used in `table` within `[lo, hi)` (or `lo` when none is), so that a
/// writer never reuses an id even in a file whose session numbers were not claimed properly.
pub(super) fn max_id_in(
    conn: &Connection,
    table: &str,
    column: &str,
    lo: i64,
    hi: i64,
) -> Result<i64, RpdError> {
    let sql = format!(
        "SELECT coalesce(max(\"{column}\"), ?1) FROM \"{table}\" WHERE \"{column}\" >= ?1 AND \"{column}\" < ?2"
    );
    conn.query_row(&sql, [lo, hi], |r| r.get(0))
        .map_err(sql_err("reading existing ids"))
}

/// Opens a connection with the busy timeout set.
pub(super) fn open(
    path: &std::path::Path,
    busy_timeout: std::time::Duration,
) -> Result<Connection, RpdError> {
    let conn = Connection::open(path).map_err(|e| RpdError::Sqlite {
        path: path.to_path_buf(),
        context: "opening",
        message: super::sqlite_message(&e),
    })?;
    conn.busy_timeout(busy_timeout)
        .map_err(sql_err("setting the busy timeout"))?;
    // Both per connection, so other writers of the file are not affected: fewer syncs per
    // commit (an application crash loses nothing committed; a power loss at the wrong moment
    // may, rarely, damage a profile), and a cache large enough for the string index of a long
    // run.
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA cache_size = -32768;")
        .map_err(sql_err("setting connection options"))?;
    Ok(conn)
}

/// Creates the schema in `path` when it has none; returns the file's version.
pub(super) fn ensure_file(
    path: &std::path::Path,
    wanted: Option<RpdSchema>,
    busy_timeout: std::time::Duration,
) -> Result<RpdSchema, RpdError> {
    let mut conn = open(path, busy_timeout)?;
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)
        .map_err(sql_err("locking the RPD file"))?;
    let version = ensure_schema(&tx, wanted)?;
    tx.commit().map_err(sql_err("committing the RPD schema"))?;
    Ok(version)
}
