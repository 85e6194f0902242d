//! What the `cache_clear` record says, and the page-cache drop the layer does when asked.
//!
//! The rules need a `cache_clear` record (with a value) and the reader takes `true` to mean
//! that the page cache was dropped before the run, so the value says what happened:
//! `true` when the layer dropped it ([`CacheClear::Drop`]) or the program states that its
//! launcher did ([`CacheClear::ByLauncher`]), `false` otherwise, and the default is `false`
//! ([`CacheClear::NotCleared`]), said in the guard's report and by the live check.
//! The record's `cleared_by` metadata (`"tracing-mllog"`, `"launcher"`, `"nobody"`) says who.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

use crate::env::{Env, EnvError};
use crate::record::{Metadata, Value};

/// Where the kernel takes the request to drop clean caches.
const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

/// Who cleared the page cache before the run: what the `cache_clear` record says, or that
/// there is no such record ([`crate::Builder::cache_clear`], `MLLOG_CACHE_CLEAR`).
///
/// ```
/// use tracing_mllog::{sink::MemorySink, CacheClear, MllogLayer, Output};
/// use tracing_subscriber::prelude::*;
///
/// let (memory, records) = MemorySink::new();
/// let (layer, mut guard) = MllogLayer::builder()
///     .output(Output::Nowhere)
///     .sink(memory)
///     .environment([("MLLOG_CACHE_CLEAR", "launcher")]) // the job script dropped it
///     .build()?;
/// tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
///     drop(tracing::info_span!("init").entered());
/// });
/// guard.shutdown();
/// let line = &records.lines()[0];
/// assert!(line.contains(r#""key": "cache_clear", "value": true"#), "{line}");
/// assert!(line.contains(r#""cleared_by": "launcher""#), "{line}");
/// # let _ = CacheClear::default();
/// # Ok::<(), tracing_mllog::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheClear {
    /// Nothing was cleared by this process and nobody said the launcher did: `cache_clear` is
    /// logged `false`, and the guard's report and the live check say so (the default).
    #[default]
    NotCleared,
    /// The launcher or the job script dropped the page cache before the process started (as
    /// NVIDIA's launch scripts do): logged `true`. `MLLOG_CACHE_CLEAR=launcher`.
    ByLauncher,
    /// The layer drops the page cache at `build()`: `sync`, then `3` into
    /// `/proc/sys/vm/drop_caches`, once per node (on the process whose local rank is 0, or on
    /// every process when no local rank is set). Logged `true` when that worked; where it is
    /// not permitted (it needs root or `CAP_SYS_ADMIN`) the error is said on stderr and in the
    /// report, and `false` is logged. `MLLOG_CACHE_CLEAR=drop`.
    Drop,
    /// No `cache_clear` record at all, for a program that logs its own (`MLLOG_CACHE_CLEAR=0`;
    /// `=1` turns the record back on, saying [`CacheClear::NotCleared`]).
    Off,
}

impl CacheClear {
    /// Whether the layer writes the `cache_clear` record.
    pub(crate) fn records(self) -> bool {
        self != CacheClear::Off
    }
}

/// `MLLOG_CACHE_CLEAR` over the code's choice: a mode, or a flag (whether the record is
/// written at all; turned on, it keeps the code's mode unless that was [`CacheClear::Off`]).
pub(crate) fn from_env(env: &Env, code: CacheClear) -> Result<Option<CacheClear>, EnvError> {
    env.parse("MLLOG_CACHE_CLEAR", |v| {
        match (v.to_ascii_lowercase().as_str(), crate::env::parse_flag(v)) {
            ("launcher", _) => Ok(CacheClear::ByLauncher),
            ("drop", _) => Ok(CacheClear::Drop),
            (_, Some(false)) => Ok(CacheClear::Off),
            (_, Some(true)) if code == CacheClear::Off => Ok(CacheClear::NotCleared),
            (_, Some(true)) => Ok(code),
            _ => Err("expected on/off (1/0, true/false, yes/no), `launcher` or `drop`".to_owned()),
        }
    })
}

/// What the record says, settled at `build()`.
#[derive(Clone, Debug, Default)]
pub(crate) struct CacheCleared {
    pub(crate) value: bool,
    by: &'static str,
}

impl CacheCleared {
    /// Puts who cleared it into the record's metadata.
    pub(crate) fn annotate(&self, md: &mut Metadata) {
        md.fields.push((
            Cow::Borrowed("cleared_by"),
            Value::Str(Cow::Borrowed(self.by)),
        ));
    }
}

/// Settles what `cache_clear` says, dropping the cache first for [`CacheClear::Drop`]; the
/// second value is what the report and stderr must say (the drop's error, or that nothing was
/// cleared). `writes`: whether this rank writes the log.
pub(crate) fn settle(mode: CacheClear, env: &Env, writes: bool) -> (CacheCleared, Option<String>) {
    let said = |v: bool, by| CacheCleared { value: v, by };
    match mode {
        CacheClear::Off => (said(false, "nobody"), None),
        CacheClear::ByLauncher => (said(true, "launcher"), None),
        CacheClear::NotCleared => {
            let note = writes.then(|| {
                "cache_clear is logged `false`: nothing was cleared by this process \
                 (MLLOG_CACHE_CLEAR=launcher if the job script drops the page cache, =drop to \
                 have the layer drop it)"
                    .to_owned()
            });
            (said(false, "nobody"), note)
        }
        CacheClear::Drop => {
            let local_rank = crate::env::LOCAL_RANK_VARIABLES
                .iter()
                .find_map(|n| env.number::<u32>(n, 0, u32::MAX, "a rank").ok().flatten());
            if local_rank.is_some_and(|r| r != 0) {
                // The node's local rank 0 drops it; this process did not.
                return (said(false, "nobody"), None);
            }
            match drop_page_cache(Path::new(DROP_CACHES)) {
                Ok(()) => (said(true, "tracing-mllog"), None),
                Err(e) => (
                    said(false, "nobody"),
                    Some(format!(
                        "cache_clear is logged `false`: the page cache could not be dropped \
                         ({DROP_CACHES}: {e}); it needs root or CAP_SYS_ADMIN, or the job \
                         script can drop it (then say `CacheClear::ByLauncher`)"
                    )),
                ),
            }
        }
    }
}

/// `sync`, then `3` (page cache, dentries and inodes) into `path`.
fn drop_page_cache(path: &Path) -> std::io::Result<()> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.write_all(b"3\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drop_writes_3_and_a_refusal_is_an_error_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("drop_caches");
        std::fs::write(&file, "").unwrap();
        drop_page_cache(&file).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "3\n");
        // A path that cannot be written (a directory; a missing file) is an error.
        assert!(drop_page_cache(dir.path()).is_err());
        assert!(drop_page_cache(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn the_value_says_who_cleared() {
        let env = Env::from_map(Vec::<(String, String)>::new());
        let (c, note) = settle(CacheClear::ByLauncher, &env, true);
        assert!(c.value && note.is_none());
        let (c, note) = settle(CacheClear::NotCleared, &env, true);
        assert!(!c.value);
        assert!(note
            .unwrap()
            .contains("nothing was cleared by this process"));
        // Nothing to say on a rank that writes no log, or with no record.
        assert!(settle(CacheClear::NotCleared, &env, false).1.is_none());
        assert!(settle(CacheClear::Off, &env, true).1.is_none());
        // Not the node's first process: it leaves the drop to local rank 0.
        let env = Env::from_map([("LOCAL_RANK", "3")]);
        let (c, note) = settle(CacheClear::Drop, &env, false);
        assert!(!c.value && note.is_none());
        let mut md = Metadata::default();
        c.annotate(&mut md);
        assert_eq!(md.fields[0].0, "cleared_by");
    }

    #[test]
    fn the_variable_takes_a_flag_or_a_mode() {
        let read = |v: &str, code| {
            from_env(&Env::from_map([("MLLOG_CACHE_CLEAR", v)]), code).map_err(|e| e.to_string())
        };
        let code = CacheClear::ByLauncher;
        assert_eq!(read("off", code), Ok(Some(CacheClear::Off)));
        // On: the code's mode stays, or the record comes back saying nothing was cleared.
        assert_eq!(read("1", code), Ok(Some(CacheClear::ByLauncher)));
        assert_eq!(read("1", CacheClear::Off), Ok(Some(CacheClear::NotCleared)));
        assert_eq!(read("Launcher", CacheClear::Off), Ok(Some(code)));
        assert_eq!(read("drop", code), Ok(Some(CacheClear::Drop)));
        let err = read("2", code).unwrap_err();
        assert!(
            err.contains("MLLOG_CACHE_CLEAR") && err.contains("launcher"),
            "{err}"
        );
    }
}
