//! The environment, read once: every `MLLOG_*`, launcher (`RANK`, `WORLD_SIZE`, ...), profiler
//! and OpenTelemetry variable the crate uses goes through one [`Env`].
//!
//! An [`Env`] is either a snapshot of the process environment, taken once when a layer is
//! built, or the map given to [`crate::Builder::environment`]; the layer, rank detection,
//! every sink and the profiler read the same one, so a map given to the builder is honoured
//! everywhere. Values are parsed here, by one boolean parser and one number parser, and a bad
//! value is an [`EnvError`] naming the variable. Values shown in errors go through the crate's
//! redaction: a credential (or anything a credential variable holds) is never printed.
//!
//! # Examples
//!
//! Reading typed values from a map, as the layer and the sinks do (a map in code is what
//! [`crate::Builder::environment`] gives them; [`Env::process`] is the default):
//!
//! ```
//! use tracing_mllog::env::{Env, EnvError};
//!
//! let env = Env::from_map([
//!     ("MLLOG_APPEND", "Yes"),
//!     ("MLLOG_NAMESPACE", "  "),
//!     ("SLURM_PROCID", "3"),
//!     ("MLLOG_TRAIN_LOSS_LOG_FREQ", "lots"),
//! ]);
//! assert!(!env.is_process());
//! assert_eq!(env.flag("MLLOG_APPEND"), Ok(Some(true))); // 1/0, true/false, yes/no, on/off
//! assert_eq!(env.string("MLLOG_NAMESPACE"), Ok(None)); // blank counts as unset
//! assert_eq!(env.raw("MLLOG_NAMESPACE"), Ok(Some("  ")));
//! // The rank comes from the first launcher variable that is set.
//! assert_eq!(env.rank(), Ok(Some((3, "SLURM_PROCID"))));
//! assert_eq!(env.world_size(), Ok(None));
//!
//! // A value that does not parse is an error naming the variable, never a silent default.
//! let err = env
//!     .number::<u64>("MLLOG_TRAIN_LOSS_LOG_FREQ", 0, u64::MAX, "a number of steps")
//!     .unwrap_err();
//! assert_eq!(err.name(), "MLLOG_TRAIN_LOSS_LOG_FREQ");
//! assert!(matches!(err, EnvError::Invalid { ref value, .. } if value == "lots"));
//! ```

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt::Display;
use std::str::FromStr;

/// The submission's variables (`MLLOG_SUBMISSION_*`, the precisions, the parallelism), read by
/// the builder's overlay ([`crate::Builder::from_env`]).
pub use mllog_core::submission::SUBMISSION_VARIABLES;

/// The variables that carry the global rank, in the order they are consulted: the explicit
/// `MLLOG_RANK`, then the launcher nearest the process first, because an outer launcher's
/// variable is inherited by what it starts and numbers something else (under `srun torchrun`,
/// `SLURM_PROCID` numbers the torchrun agents; under `mpirun` in a Slurm allocation, it is
/// the batch step's): torchrun and torch elastic (`RANK`), Open MPI, PMIx, MPICH/Hydra and
/// Intel MPI (`PMI_RANK`), MVAPICH2, Slurm (`srun`), and last Kubernetes indexed jobs (the
/// pod's index, under which any of the others may run). A variable further down that disagrees
/// with the one used is a warning ([`Env::rank_detection`]).
pub const RANK_VARIABLES: [&str; 8] = [
    "MLLOG_RANK",
    "RANK",
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "MV2_COMM_WORLD_RANK",
    "SLURM_PROCID",
    "JOB_COMPLETION_INDEX",
];

/// The launcher variables that carry the number of ranks, in the order they are consulted
/// (the launchers in the order of [`RANK_VARIABLES`]).
pub const WORLD_SIZE_VARIABLES: [&str; 5] = [
    "WORLD_SIZE",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "MV2_COMM_WORLD_SIZE",
    "SLURM_NTASKS",
];

/// The variables that give a process's rank on its node, for the one drop per node.
pub const LOCAL_RANK_VARIABLES: [&str; 5] = [
    "LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID",
    "MV2_COMM_WORLD_LOCAL_RANK",
    "SLURM_LOCALID",
];

/// Set by torchrun in the processes it starts: the variables of the launcher that started
/// torchrun number the agents (one per node), not the workers, so they are not compared with
/// `RANK`.
pub(crate) const TORCHRUN_MARKERS: [&str; 2] = ["TORCHELASTIC_RUN_ID", "GROUP_RANK"];

/// Whether `name` is a variable a launcher sets to say which process this is: the global
/// rank, the number of ranks, the rank on its node, torchrun's own markers. A builder reads
/// these whether or not it reads the rest of the environment (`Builder::from_env`).
pub(crate) fn is_launcher_variable(name: &str) -> bool {
    RANK_VARIABLES.contains(&name)
        || WORLD_SIZE_VARIABLES.contains(&name)
        || LOCAL_RANK_VARIABLES.contains(&name)
        || TORCHRUN_MARKERS.contains(&name)
}

/// The rank found in the environment, and every launcher variable that disagrees with it.
///
/// ```
/// use tracing_mllog::env::Env;
///
/// let env = Env::from_map([("RANK", "0"), ("SLURM_PROCID", "1")]);
/// let found = env.rank_detection()?;
/// assert_eq!(found.rank, Some((0, "RANK")));
/// let warning = found.conflicts[0].to_string();
/// assert!(warning.contains("RANK=0 is used, but SLURM_PROCID=\"1\""), "{warning}");
///
/// // Under torchrun, the outer launcher's variables number the agents: no conflict.
/// let env = Env::from_map([("RANK", "9"), ("SLURM_PROCID", "1"), ("TORCHELASTIC_RUN_ID", "j")]);
/// assert!(env.rank_detection()?.conflicts.is_empty());
/// # Ok::<(), tracing_mllog::env::EnvError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RankDetection {
    /// The rank and the variable it came from (the first of [`RANK_VARIABLES`] that is set).
    pub rank: Option<(u32, &'static str)>,
    /// Every other set rank variable whose value is not that rank.
    pub conflicts: Vec<RankConflict>,
}

/// Two rank variables that disagree: the one used and another.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "rank variables disagree: {used}={rank} is used, but {other}={other_value:?} is also set; \
     if {other} is this process's rank, set MLLOG_RANK (or `Ranks::rank`)"
)]
pub struct RankConflict {
    /// The variable the rank came from.
    pub used: &'static str,
    /// The rank it gave.
    pub rank: u32,
    /// The variable that disagrees.
    pub other: &'static str,
    /// Its value (redacted), as set.
    pub other_value: String,
}

/// What the boolean parser accepts, for messages.
const FLAG_WORDS: &str = "expected 1/0, true/false, yes/no or on/off";

/// A variable with a value the crate cannot use.
///
/// Returned by the [`Env`] parsers; [`crate::Builder::build`] turns it into
/// [`crate::Error::Env`]. [`EnvError::name`] says which variable to fix; see the
/// [module example](self).
///
/// Its message names the variable and what was expected; the value shown is redacted, so a
/// credential put in the wrong variable never reaches a log:
///
/// ```
/// use tracing_mllog::env::{Env, EnvError};
///
/// let env = Env::from_map([("MLLOG_APPEND", "perhaps"), ("MY_API_TOKEN", "hunter2-abc")]);
/// let err = env.flag("MLLOG_APPEND").unwrap_err();
/// assert_eq!(err.name(), "MLLOG_APPEND");
/// assert!(err.to_string().contains("expected 1/0, true/false"), "{err}");
///
/// let err = env.flag("MY_API_TOKEN").unwrap_err();
/// assert!(matches!(&err, EnvError::Invalid { value, .. } if value == "***"));
/// assert!(!err.to_string().contains("hunter2"), "{err}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// The value does not parse or is out of range. `value` is redacted.
    #[error("environment variable {name}={value:?}: {reason}")]
    Invalid {
        /// The variable.
        name: String,
        /// Its value, with secrets masked.
        value: String,
        /// What was expected.
        reason: String,
    },
    /// The variable is set but its value is not valid UTF-8.
    #[error("environment variable {name}={value:?}: the value is not valid UTF-8")]
    NotUnicode {
        /// The variable.
        name: String,
        /// Its value with each invalid byte sequence as U+FFFD, secrets masked.
        value: String,
    },
}

impl EnvError {
    /// The variable the error is about.
    pub fn name(&self) -> &str {
        match self {
            EnvError::Invalid { name, .. } | EnvError::NotUnicode { name, .. } => name,
        }
    }
}

impl From<EnvError> for crate::Error {
    fn from(e: EnvError) -> crate::Error {
        match e {
            EnvError::Invalid {
                name,
                value,
                reason,
            } => crate::Error::Env {
                name,
                value,
                reason,
            },
            EnvError::NotUnicode { name, value } => crate::Error::Env {
                name,
                value,
                reason: "the value is not valid UTF-8".into(),
            },
        }
    }
}

/// A set of environment variables: a snapshot of the process environment ([`Env::process`])
/// or a map of your own ([`Env::from_map`], what [`crate::Builder::environment`] gives).
///
/// Every read goes through one of its parsers: [`Env::string`] (trimmed, blank is unset),
/// [`Env::flag`], [`Env::number`] (with a range) or [`Env::parse`], so every variable accepts
/// the same spellings and every bad value is an [`EnvError`] that names it. A value that is
/// not UTF-8 is an error only when that variable is read. The [module
/// example](self#examples) shows each parser.
///
/// ```
/// use std::time::Duration;
/// use tracing_mllog::env::Env;
///
/// let env = Env::from_map([("MLLOG_MAX_DELAY_MS", "5"), ("MLLOG_NAMESPACE", "worker0")]);
/// let delay = env.number::<u64>("MLLOG_MAX_DELAY_MS", 0, 60_000, "milliseconds")?;
/// assert_eq!(delay.map(Duration::from_millis), Some(Duration::from_millis(5)));
/// // A parser of your own: its `Err` becomes the reason in an error naming the variable.
/// let upper = env.parse("MLLOG_NAMESPACE", |v| Ok::<_, String>(v.to_uppercase()))?;
/// assert_eq!(upper.as_deref(), Some("WORKER0"));
/// assert_eq!(env.string("UNSET_VARIABLE")?, None);
/// assert_eq!(env.vars().count(), 2);
///
/// assert!(Env::process().is_process()); // the default of every layer
/// # Ok::<(), tracing_mllog::env::EnvError>(())
/// ```
#[derive(Clone, Default)]
pub struct Env {
    /// `Err` holds a value that is not UTF-8 (an error only when the variable is read).
    vars: HashMap<String, Result<String, OsString>>,
    process: bool,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: values may be credentials.
        let mut names: Vec<&str> = self.vars.keys().map(String::as_str).collect();
        names.sort_unstable();
        f.debug_struct("Env")
            .field("process", &self.process)
            .field("names", &names)
            .finish()
    }
}

impl Env {
    /// A snapshot of the process environment, now. Never panics: a name that is not UTF-8 is
    /// left out (no variable the crate reads has one); a value that is not UTF-8 is an error
    /// only when that variable is read.
    pub fn process() -> Env {
        let vars = std::env::vars_os()
            .filter_map(|(k, v)| {
                let k = k.into_string().ok()?;
                Some((k, v.into_string()))
            })
            .collect();
        Env {
            vars,
            process: true,
        }
    }

    /// The variables of this one whose name `keep` accepts (still the process's, if it was).
    pub fn only(mut self, keep: impl Fn(&str) -> bool) -> Env {
        self.vars.retain(|name, _| keep(name));
        self
    }

    /// These variables and no others (an empty map: nothing is set).
    pub fn from_map<K: Into<String>, V: Into<String>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Env {
        Env {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.into(), Ok(v.into())))
                .collect(),
            process: false,
        }
    }

    /// Whether this is the process environment (not a map given in code).
    pub fn is_process(&self) -> bool {
        self.process
    }

    /// The value as set (untrimmed; empty included), or `None` when unset.
    pub fn raw(&self, name: &str) -> Result<Option<&str>, EnvError> {
        match self.vars.get(name) {
            None => Ok(None),
            Some(Ok(v)) => Ok(Some(v)),
            Some(Err(v)) => Err(EnvError::NotUnicode {
                name: name.to_owned(),
                value: self.redact_value(name, &v.to_string_lossy()),
            }),
        }
    }

    /// The value, trimmed; unset, empty and blank are all `None`.
    pub fn string(&self, name: &str) -> Result<Option<&str>, EnvError> {
        Ok(self.raw(name)?.map(str::trim).filter(|v| !v.is_empty()))
    }

    /// The one boolean parser: `1`/`true`/`yes`/`on` and `0`/`false`/`no`/`off` in any case;
    /// unset or blank is `None`; anything else is an error naming the variable.
    pub fn flag(&self, name: &str) -> Result<Option<bool>, EnvError> {
        let Some(v) = self.string(name)? else {
            return Ok(None);
        };
        match parse_flag(v) {
            Some(b) => Ok(Some(b)),
            None => Err(self.invalid(name, FLAG_WORDS)),
        }
    }

    /// The one number parser: a number in `min..=max` (unset or blank: `None`). Anything else
    /// is an error naming the variable, `what` it should be and the range, e.g. "expected a
    /// whole number of spans in 1..=16777216". A floating-point value must also be finite.
    pub fn number<T>(&self, name: &str, min: T, max: T, what: &str) -> Result<Option<T>, EnvError>
    where
        T: FromStr + PartialOrd + Display + Copy,
    {
        let Some(v) = self.string(name)? else {
            return Ok(None);
        };
        match v.parse::<T>() {
            // `NaN` fails both comparisons, infinities the range (for finite bounds).
            Ok(n) if n >= min && n <= max => Ok(Some(n)),
            _ => Err(self.invalid(name, format!("expected {what} in {min}..={max}"))),
        }
    }

    /// Parses the value with `parse`, whose `Err` is the reason (unset or blank: `None`).
    pub fn parse<T>(
        &self,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Option<T>, EnvError> {
        let Some(v) = self.string(name)? else {
            return Ok(None);
        };
        parse(v)
            .map(Some)
            .map_err(|reason| self.invalid(name, reason))
    }

    /// An error about `name`'s value, the value redacted with this environment's secrets.
    pub fn invalid(&self, name: &str, reason: impl Into<String>) -> EnvError {
        let value = match self.vars.get(name) {
            Some(Ok(v)) => self.redact_value(name, v),
            Some(Err(v)) => self.redact_value(name, &v.to_string_lossy()),
            None => String::new(),
        };
        EnvError::Invalid {
            name: name.to_owned(),
            value,
            reason: reason.into(),
        }
    }

    /// The global rank from the first of [`RANK_VARIABLES`] that is set, with its name.
    /// A set variable that is not a non-negative integer is an error naming it: guessing 0
    /// would make every rank write.
    pub fn rank(&self) -> Result<Option<(u32, &'static str)>, EnvError> {
        self.first_number(&RANK_VARIABLES, 0, "a non-negative integer rank")
    }

    /// The number of ranks from the first of [`WORLD_SIZE_VARIABLES`] that is set.
    pub fn world_size(&self) -> Result<Option<(u32, &'static str)>, EnvError> {
        self.first_number(&WORLD_SIZE_VARIABLES, 1, "a whole number of ranks")
    }

    /// The rank, as [`Env::rank`] finds it, and every other rank variable that disagrees with
    /// it (see [`RankDetection`]). Under torchrun (`TORCHELASTIC_RUN_ID` or `GROUP_RANK` set)
    /// with the rank from `RANK`, the variables of the launchers that started torchrun are
    /// not compared: they number the agents.
    pub fn rank_detection(&self) -> Result<RankDetection, EnvError> {
        let rank = self.rank()?;
        let Some((rank_value, used)) = rank else {
            return Ok(RankDetection::default());
        };
        let under_torchrun = used == "RANK"
            && TORCHRUN_MARKERS
                .iter()
                .any(|m| self.string(m).ok().flatten().is_some());
        let mut conflicts = Vec::new();
        for &other in RANK_VARIABLES.iter().filter(|&&n| n != used) {
            if under_torchrun && other != "MLLOG_RANK" {
                continue;
            }
            // An unreadable value further down is no rank either: said, never an error, since
            // the rank in use is sound.
            let Ok(Some(value)) = self.string(other) else {
                continue;
            };
            if value.parse::<u32>() != Ok(rank_value) {
                conflicts.push(RankConflict {
                    used,
                    rank: rank_value,
                    other,
                    other_value: self.redact_value(other, value),
                });
            }
        }
        Ok(RankDetection { rank, conflicts })
    }

    fn first_number(
        &self,
        names: &[&'static str],
        min: u32,
        what: &str,
    ) -> Result<Option<(u32, &'static str)>, EnvError> {
        for &name in names {
            if let Some(n) = self.number(name, min, u32::MAX, what)? {
                return Ok(Some((n, name)));
            }
        }
        Ok(None)
    }

    /// Every variable with a UTF-8 value.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.as_deref().ok()?)))
    }

    /// Known secret values in this environment (the providers' credential and endpoint
    /// variables, any variable named like a credential, OTLP header values), longest first:
    /// what redaction masks.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let mut secrets = crate::redact::secrets_from_vars(self.vars.iter().map(|(k, v)| {
            (
                OsString::from(k),
                v.clone().map_or_else(|v| v, OsString::from),
            )
        }));
        for (k, v) in self.vars() {
            // Any variable named like a credential (`*_TOKEN`, `*_PASSWORD`, ...), not only the
            // providers' own: its value must not surface through another variable.
            if crate::redact::is_secret_name(k) {
                crate::redact::secret_parts(k, v, &mut secrets);
            }
            if k.starts_with("OTEL_EXPORTER_OTLP_") && k.ends_with("HEADERS") {
                for pair in v.split(',') {
                    if let Some((_, value)) = pair.split_once('=') {
                        secrets.push(value.trim().to_owned());
                        if let Some(token) = value.split_whitespace().last() {
                            secrets.push(token.to_owned());
                        }
                    }
                }
            }
        }
        crate::redact::normalize(&mut secrets);
        secrets
    }

    /// `text` with this environment's secrets masked.
    pub(crate) fn redact(&self, text: &str) -> String {
        crate::redact::redact(text, &self.secrets())
    }

    fn redact_value(&self, name: &str, value: &str) -> String {
        if crate::redact::is_secret_name(name) && !value.trim().is_empty() {
            return crate::redact::MASK.to_owned();
        }
        self.redact(value)
    }
}

/// `1`/`true`/`yes`/`on` → `true`, `0`/`false`/`no`/`off` → `false` (any case, trimmed).
pub(crate) fn parse_flag(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// The global rank from the first launcher variable that is set (see [`RANK_VARIABLES`]),
/// with that variable's name, read from the process environment.
///
/// `Ok(None)` when none is set (a single-process run). A variable that is set but is not a
/// non-negative integer is an error naming it: guessing rank 0 would make every rank write.
pub fn detect_rank() -> Result<Option<(u32, &'static str)>, crate::Error> {
    Env::process().rank().map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_launcher_variable_is_read() {
        for name in RANK_VARIABLES {
            let env = Env::from_map([(name, "3")]);
            assert_eq!(env.rank().unwrap(), Some((3, name)));
        }
        assert_eq!(
            Env::from_map(Vec::<(String, String)>::new())
                .rank()
                .unwrap(),
            None
        );
    }

    #[test]
    fn first_variable_wins_and_garbage_is_an_error() {
        let env = Env::from_map([("SLURM_PROCID", "5"), ("RANK", "2")]);
        assert_eq!(env.rank().unwrap(), Some((2, "RANK")));
        let err = Env::from_map([("OMPI_COMM_WORLD_RANK", "x1")])
            .rank()
            .unwrap_err();
        assert!(err.to_string().contains("OMPI_COMM_WORLD_RANK"), "{err}");
    }

    #[test]
    fn the_documented_order_decides_and_disagreements_are_named() {
        // Each variable beats every one after it.
        for (i, &first) in RANK_VARIABLES.iter().enumerate() {
            let mut vars = vec![(first.to_owned(), "7".to_owned())];
            vars.extend(
                RANK_VARIABLES[i + 1..]
                    .iter()
                    .map(|n| (n.to_string(), "7".into())),
            );
            let env = Env::from_map(vars);
            let found = env.rank_detection().unwrap();
            assert_eq!(found.rank, Some((7, first)));
            assert!(found.conflicts.is_empty(), "{:?}", found.conflicts);
        }
        let env = Env::from_map([
            ("RANK", "0"),
            ("SLURM_PROCID", "1"),
            ("PMI_RANK", "0"),
            ("JOB_COMPLETION_INDEX", "x"),
        ]);
        let found = env.rank_detection().unwrap();
        assert_eq!(found.rank, Some((0, "RANK")));
        let named: Vec<_> = found.conflicts.iter().map(|c| c.other).collect();
        assert_eq!(named, ["SLURM_PROCID", "JOB_COMPLETION_INDEX"]);
        let text = found.conflicts[0].to_string();
        assert!(
            text.contains("RANK=0 is used") && text.contains("SLURM_PROCID=\"1\""),
            "{text}"
        );
        // Under torchrun only MLLOG_RANK is compared with RANK.
        let env = Env::from_map([
            ("RANK", "3"),
            ("GROUP_RANK", "0"),
            ("SLURM_PROCID", "0"),
            ("MLLOG_RANK", "2"),
        ]);
        let found = env.rank_detection().unwrap();
        assert_eq!(found.rank, Some((2, "MLLOG_RANK")));
        assert_eq!(found.conflicts.len(), 2, "{:?}", found.conflicts);
        let env = Env::from_map([("RANK", "3"), ("GROUP_RANK", "0"), ("SLURM_PROCID", "0")]);
        assert!(env.rank_detection().unwrap().conflicts.is_empty());
    }

    #[test]
    fn one_flag_parser() {
        let env = Env::from_map([("A", " On "), ("B", "0"), ("C", ""), ("D", "maybe")]);
        assert_eq!(env.flag("A").unwrap(), Some(true));
        assert_eq!(env.flag("B").unwrap(), Some(false));
        assert_eq!(env.flag("C").unwrap(), None);
        assert_eq!(env.flag("unset").unwrap(), None);
        let err = env.flag("D").unwrap_err().to_string();
        assert!(
            err.contains("D=\"maybe\"") && err.contains(FLAG_WORDS),
            "{err}"
        );
    }

    #[test]
    fn numbers_are_range_checked() {
        let env = Env::from_map([("N", "0"), ("F", "NaN"), ("G", "inf"), ("H", "2.5")]);
        let err = env.number::<u64>("N", 1, 10, "a count").unwrap_err();
        assert!(
            err.to_string().contains("expected a count in 1..=10"),
            "{err}"
        );
        assert!(env.number("F", 0.0, f64::MAX, "a number").is_err());
        assert!(env.number("G", 0.0, f64::MAX, "a number").is_err());
        assert_eq!(env.number("H", 0.0, 3.0, "a number").unwrap(), Some(2.5));
    }

    #[test]
    fn secrets_in_bad_values_are_masked() {
        let env = Env::from_map([
            ("AWS_SECRET_ACCESS_KEY", "hunter2-very-secret"),
            ("MLLOG_MAX_DELAY_MS", "hunter2-very-secret"),
            ("MLLOG_UPLOAD_URL", "s3://user:pa55word@host/x"),
            ("MY_API_TOKEN", "abc"),
        ]);
        let e = env
            .number::<u64>("MLLOG_MAX_DELAY_MS", 0, 9, "ms")
            .unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
        let e = env.invalid("MLLOG_UPLOAD_URL", "bad").to_string();
        assert!(!e.contains("pa55word") && e.contains("host"), "{e}");
        let e = env.invalid("MY_API_TOKEN", "bad").to_string();
        assert!(!e.contains("abc"), "{e}");
    }

    #[test]
    fn non_utf8_values_name_the_variable() {
        use std::os::unix::ffi::OsStringExt;
        let mut env = Env::from_map([("A", "1")]);
        env.vars
            .insert("B".into(), Err(OsString::from_vec(vec![b'x', 0xff])));
        let err = env.flag("B").unwrap_err();
        assert_eq!(
            err,
            EnvError::NotUnicode {
                name: "B".into(),
                value: "x\u{FFFD}".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "environment variable B=\"x\u{FFFD}\": the value is not valid UTF-8"
        );
        assert_eq!(env.flag("A").unwrap(), Some(true));
    }
}
