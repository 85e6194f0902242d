//! The rule model: rule files, key rules, requirement kinds, checks and state, as data.
//!
//! A [`RuleFile`] mirrors one YAML file of the official checker (`common.yaml`,
//! `closed_common.yaml`, `closed_<benchmark>.yaml`, ...). Checks are a small enum of kinds whose
//! constants are plain data ([`Check::Equals`], [`Check::Within`], ...), so other code (presets,
//! example logs) can read "the value the closed division requires"; the few checks that read
//! state written by another key are [`Check::Custom`] functions.

use std::fmt;

pub use super::py::ExecError;
use super::py::{is_integer, meta_contains, num, py_eq, py_num, py_truthy};
use crate::keys::Benchmark;
use crate::record::{Metadata, Value};

/// A training ruleset version of the official checker (mlperf-logging 4.1.68).
///
/// Each version has its own rule files: which benchmarks exist, which keys each must log and
/// with which values. [`Ruleset::DEFAULT`] is the official checker's default; a log for a
/// benchmark the default no longer has is checked under [`detect_ruleset`](super::detect_ruleset)'s
/// choice.
///
/// ```
/// use mllog_core::compliance::Ruleset;
///
/// assert_eq!(Ruleset::from_name("training_6.0.0"), Some(Ruleset::V6_0_0));
/// assert_eq!(Ruleset::from_name("6.1"), Some(Ruleset::DEFAULT));
/// assert_eq!(Ruleset::V5_1_0.as_str(), "5.1.0");
/// assert!(Ruleset::ALL.windows(2).all(|w| w[0] < w[1])); // oldest first
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ruleset {
    /// `training_5.0.0`
    V5_0_0,
    /// `training_5.1.0`
    V5_1_0,
    /// `training_6.0.0`
    V6_0_0,
    /// `training_6.1.0` (the official checker's default)
    V6_1_0,
}

impl Ruleset {
    /// Every supported ruleset, oldest first.
    pub const ALL: [Ruleset; 4] = [
        Ruleset::V5_0_0,
        Ruleset::V5_1_0,
        Ruleset::V6_0_0,
        Ruleset::V6_1_0,
    ];
    /// The default, as in the official checker.
    pub const DEFAULT: Ruleset = Ruleset::V6_1_0;

    /// `"6.1.0"` etc.
    pub const fn as_str(self) -> &'static str {
        match self {
            Ruleset::V5_0_0 => "5.0.0",
            Ruleset::V5_1_0 => "5.1.0",
            Ruleset::V6_0_0 => "6.0.0",
            Ruleset::V6_1_0 => "6.1.0",
        }
    }

    /// Parses `"6.1.0"` (also `"6.1"` and `"training_6.1.0"`).
    pub fn from_name(name: &str) -> Option<Ruleset> {
        let n = name.trim().trim_start_matches("training_");
        Ruleset::ALL
            .iter()
            .copied()
            .find(|r| r.as_str() == n || r.as_str().strip_suffix(".0") == Some(n))
    }

    /// Whether `name` is written as a ruleset is, known to this build or not: `X.Y.Z`, three
    /// runs of ASCII digits joined by dots, as after `<usage>_` in the official checker's
    /// folder names (`training_6.2.0`). A folder of a rules source is a ruleset's when its
    /// name ends so, and a ruleset to run from such a source must be named so; whether this
    /// build has rules of its own for it is [`Ruleset::from_name`]'s answer.
    ///
    /// ```
    /// use mllog_core::compliance::Ruleset;
    ///
    /// assert!(Ruleset::is_well_formed("6.2.0")); // the next round: no build knows it yet
    /// assert!(Ruleset::is_well_formed("10.0.12"));
    /// assert!(!Ruleset::is_well_formed("6.2")); // `from_name` reads it; a folder is never so named
    /// assert!(!Ruleset::is_well_formed("training_6.2.0"));
    /// assert!(!Ruleset::is_well_formed("6.2.0/../6.1.0"));
    /// ```
    pub fn is_well_formed(name: &str) -> bool {
        let mut parts = 0;
        for part in name.split('.') {
            if part.is_empty() || !part.bytes().all(|c| c.is_ascii_digit()) {
                return false;
            }
            parts += 1;
        }
        parts == 3
    }
}

impl fmt::Display for Ruleset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Ruleset {
    type Err = String;
    fn from_str(s: &str) -> Result<Ruleset, String> {
        Ruleset::from_name(s)
            .ok_or_else(|| format!("unknown ruleset {s:?} (supported: 5.0.0, 5.1.0, 6.0.0, 6.1.0)"))
    }
}

/// The submission division (the crate's [`crate::Division`]).
pub use crate::submission::Division;

/// How many times a key must occur (`REQ`).
///
/// Read it from [`KeyRule::req`] (e.g. to list the keys a benchmark must log); its `Display` is
/// the official YAML spelling, which findings quote.
///
/// ```
/// use mllog_core::compliance::{rules, Division, Req, Ruleset};
/// use mllog_core::Benchmark;
///
/// let set = rules(Ruleset::V6_1_0);
/// let file = set.benchmark_file(Division::Closed, Benchmark::Llama2_70bLora).unwrap();
/// assert_eq!(file.rule("lora_rank").unwrap().req, Some(Req::ExactlyOne));
/// assert_eq!(set.common.rule("block_start").unwrap().req, Some(Req::AtLeastOneOr(&["epoch_start"])));
/// assert_eq!(Req::AtLeast(3).to_string(), "AT_LEAST(3)");
/// assert_eq!(Req::AtLeastOneOr(&["epoch_start"]).to_string(), "AT_LEAST_ONE_OR(epoch_start)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Req {
    /// `EXACTLY_ONE`: a duplicate with an identical value is a warning, a different value an error.
    ExactlyOne,
    /// `AT_LEAST_ONE`
    AtLeastOne,
    /// `AT_LEAST(n)`
    AtLeast(u32),
    /// `AT_LEAST_ONE_OR(k, ...)`: this key or one of the others must occur.
    AtLeastOneOr(&'static [&'static str]),
    /// `OPTIONAL`
    Optional,
}

impl fmt::Display for Req {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Req::ExactlyOne => f.write_str("EXACTLY_ONE"),
            Req::AtLeastOne => f.write_str("AT_LEAST_ONE"),
            Req::AtLeast(n) => write!(f, "AT_LEAST({n})"),
            Req::AtLeastOneOr(alts) => write!(f, "AT_LEAST_ONE_OR({})", alts.join(",")),
            Req::Optional => f.write_str("OPTIONAL"),
        }
    }
}

/// A constant a check compares against.
///
/// What [`Check::Equals`] holds and [`required_value`](super::required_value) returns: the value
/// the closed division fixes for a key. [`Lit::to_value`] turns it into the [`Value`] to log;
/// `Display` is its spelling in the official rule (strings quoted).
///
/// ```
/// use mllog_core::compliance::{required_value, Lit, Ruleset};
/// use mllog_core::{Benchmark, Value};
///
/// let beta2 = required_value(Ruleset::V6_1_0, Benchmark::Llama31_8b, "opt_adamw_beta_2").unwrap();
/// assert_eq!(beta2, Lit::Float(0.95));
/// assert_eq!(beta2.to_value(), Value::Float(0.95));
/// assert_eq!(Lit::Int(16).to_string(), "16");
/// assert_eq!(Lit::Str("adamw").to_string(), "'adamw'");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lit {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(&'static str),
}

impl Lit {
    /// As a log [`Value`].
    pub fn to_value(self) -> Value {
        match self {
            Lit::Int(i) => Value::Int(i as i128),
            Lit::Float(f) => Value::Float(f),
            Lit::Str(s) => Value::from(s),
        }
    }
}

impl fmt::Display for Lit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lit::Str(s) => write!(f, "'{s}'"),
            other => f.write_str(&other.to_value().to_json()),
        }
    }
}

/// One end of an [`ValueRange`].
///
/// Rule targets and [`Check::Integer`] bounds are made of these; read
/// [`Bound::inclusive`] to tell `>=` from `>`.
///
/// ```
/// use mllog_core::compliance::{Bound, ValueRange};
///
/// let min = Bound { value: 0.0, inclusive: false };
/// let range = ValueRange { min: Some(min), max: None };
/// assert!(!range.contains(0.0) && range.contains(1e-9));
/// assert_eq!(range.to_string(), "> 0");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    /// The limit.
    pub value: f64,
    /// Whether the limit itself is allowed.
    pub inclusive: bool,
}

/// A numeric range; `None` ends are open.
///
/// What [`Check::Within`] tests and what a benchmark's convergence target is
/// ([`RuleTarget::range`](super::RuleTarget::range)); `Display` shows it in interval notation
/// (`(0, 0.925]`), as findings do.
///
/// ```
/// use mllog_core::compliance::{target, Bound, Division, Ruleset, ValueRange};
/// use mllog_core::Benchmark;
///
/// let loss = ValueRange {
///     min: Some(Bound { value: 0.0, inclusive: false }),
///     max: Some(Bound { value: 0.925, inclusive: true }),
/// };
/// assert!(loss.contains(0.925) && !loss.contains(0.93) && !loss.contains(f64::NAN));
/// assert_eq!(loss.to_string(), "(0, 0.925]");
///
/// // The same range, from the rules.
/// let goal = target(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// assert_eq!(goal.range, Some(loss));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValueRange {
    /// Lower end.
    pub min: Option<Bound>,
    /// Upper end.
    pub max: Option<Bound>,
}

impl ValueRange {
    /// Whether `x` lies inside (NaN never does).
    pub fn contains(&self, x: f64) -> bool {
        let lo = self.min.is_none_or(|b| {
            if b.inclusive {
                x >= b.value
            } else {
                x > b.value
            }
        });
        let hi = self.max.is_none_or(|b| {
            if b.inclusive {
                x <= b.value
            } else {
                x < b.value
            }
        });
        lo && hi
    }
}

impl fmt::Display for ValueRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max) {
            (Some(lo), Some(hi)) => write!(
                f,
                "{}{}, {}{}",
                if lo.inclusive { '[' } else { '(' },
                lo.value,
                hi.value,
                if hi.inclusive { ']' } else { ')' }
            ),
            (Some(lo), None) => write!(f, "{} {}", if lo.inclusive { ">=" } else { ">" }, lo.value),
            (None, Some(hi)) => write!(f, "{} {}", if hi.inclusive { "<=" } else { "<" }, hi.value),
            (None, None) => f.write_str("any number"),
        }
    }
}

/// A comparison operator.
///
/// The operator of a [`Check::Compare`] (`v['value'] > 0`).
///
/// ```
/// use mllog_core::compliance::{Check, Cmp, Line, State};
/// use mllog_core::record::Metadata;
/// use mllog_core::Value;
///
/// let check = Check::Compare(Cmp::Ge, 15360.0);
/// assert_eq!(check.code(), "v['value'] >= 15360");
/// let value = Value::from(16384u64);
/// let line = Line { key: "global_batch_size", value: &value, metadata: &Metadata::default(), time_ms: 0.0, lineno: 1 };
/// assert_eq!(check.eval(&line, &State::default()), Ok(true));
/// assert_eq!(Cmp::Lt.as_str(), "<");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Cmp {
    /// The operator's spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }
    fn apply(self, a: f64, b: f64) -> bool {
        match self {
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
        }
    }
}

/// The line a check looks at (the official checker's `v` and `ll`).
///
/// Build one to evaluate a [`Check`] by hand with [`Check::eval`], e.g. to test a value before
/// logging it; the checker builds one for every record.
///
/// ```
/// use mllog_core::compliance::{Check, Lit, Line, State};
/// use mllog_core::record::Metadata;
/// use mllog_core::Value;
///
/// let value = Value::Float(16.0);
/// let metadata = Metadata::default().with("samples_count", 0u64);
/// let line = Line { key: "lora_rank", value: &value, metadata: &metadata, time_ms: 1e12, lineno: 7 };
/// // Python's equality: 16.0 == 16.
/// assert_eq!(Check::Equals(Lit::Int(16)).eval(&line, &State::default()), Ok(true));
/// assert_eq!(Check::MetaHas("samples_count").eval(&line, &State::default()), Ok(true));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Line<'a> {
    /// The key.
    pub key: &'a str,
    /// `v['value']`
    pub value: &'a Value,
    /// `v['metadata']`
    pub metadata: &'a Metadata,
    /// `ll.timestamp` (milliseconds, as a float).
    pub time_ms: f64,
    /// Physical line number (1-based).
    pub lineno: usize,
}

/// The per-rule-file state (the official checker's `s`). Rule files never share it.
///
/// `POST` actions ([`Post`]) write it; [`Check::StateIs`] and custom checks read it. Pass one to
/// [`Check::eval`] when evaluating a check by hand.
///
/// ```
/// use mllog_core::compliance::{Check, ExecError, Line, State};
/// use mllog_core::record::Metadata;
/// use mllog_core::Value;
///
/// let mut s = State::default();
/// assert!(matches!(s.num("global_batch_size"), Err(ExecError::NeedsState { .. })));
/// s.set("global_batch_size", Value::from(32u64));
/// assert_eq!(s.num("global_batch_size"), Ok(32.0));
///
/// // `run_start` must come after `init_stop`, which sets `init_stopped`.
/// let check = Check::StateIs("init_stopped", true);
/// let value = Value::Null;
/// let line = Line { key: "run_start", value: &value, metadata: &Metadata::default(), time_ms: 0.0, lineno: 3 };
/// assert!(check.eval(&line, &s).is_err()); // unset: the official checker fails to evaluate it
/// s.set("init_stopped", Value::Bool(true));
/// assert_eq!(check.eval(&line, &s), Ok(true));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    vars: Vec<(&'static str, Value)>,
}

impl State {
    /// A state variable, if set.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }

    /// Sets a state variable.
    pub fn set(&mut self, name: &'static str, value: Value) {
        match self.vars.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => self.vars.push((name, value)),
        }
    }

    /// A numeric state variable, or the error of reading it before the key that sets it.
    pub fn num(&self, name: &'static str) -> Result<f64, ExecError> {
        match self.get(name) {
            Some(v) => num(v),
            None => Err(ExecError::NeedsState {
                var: name,
                key: setter_of(name),
            }),
        }
    }

    /// Python truthiness of a state variable (unset is an error).
    pub fn truthy(&self, name: &'static str) -> Result<bool, ExecError> {
        match self.get(name) {
            Some(v) => Ok(py_truthy(v)),
            None => Err(ExecError::NeedsState {
                var: name,
                key: setter_of(name),
            }),
        }
    }
}

/// The key whose POST writes a state variable.
pub fn setter_of(var: &'static str) -> &'static str {
    match var {
        "eval_interval_samples"
        | "first_eval_samples"
        | "lr_min"
        | "lr_max"
        | "learning_rate"
        | "validation_start_samples"
        | "next_validation_samples" => "global_batch_size",
        "init_started" | "first_init_start" => "init_start",
        "init_stopped" => "init_stop",
        "run_started" => "run_start",
        "compile_time_mins" => "submission_division",
        other => other,
    }
}

/// A custom check: a function over the line and the state.
///
/// The checks that are not plain data (they read state or several metadata fields) are
/// [`Check::Custom`]; [`Custom::code`] quotes the official expression and [`Custom::words`]
/// says it for people.
///
/// ```
/// use mllog_core::compliance::{rules, Check, Line, Ruleset, State};
/// use mllog_core::record::Metadata;
/// use mllog_core::Value;
///
/// let block_start = rules(Ruleset::V6_1_0).common.rule("block_start").unwrap();
/// let custom = block_start
///     .checks
///     .iter()
///     .find_map(|c| match c {
///         Check::Custom(c) if c.code.starts_with("v['metadata']['epoch_count'] > 0") => Some(*c),
///         _ => None,
///     })
///     .unwrap();
/// assert_eq!(custom.words, "needs metadata `epoch_count` > 0");
///
/// let value = Value::Null;
/// let zero = Metadata::default().with("first_epoch_num", 0u64).with("epoch_count", 0u64);
/// let line = Line { key: "block_start", value: &value, metadata: &zero, time_ms: 0.0, lineno: 9 };
/// assert_eq!((custom.f)(&line, &State::default()), Ok(false));
/// ```
#[derive(Clone, Copy)]
pub struct Custom {
    /// The official checker's expression.
    pub code: &'static str,
    /// What it requires, in words (completes "`key` ...").
    pub words: &'static str,
    /// The check.
    pub f: fn(&Line<'_>, &State) -> Result<bool, ExecError>,
}

impl fmt::Debug for Custom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Custom")
            .field("code", &self.code)
            .finish_non_exhaustive()
    }
}

/// A check on one line (`CHECK`, `FIRST_CHECK` or `ATLEAST_ONE_CHECK`).
///
/// A [`KeyRule`] holds them; [`Check::eval`] runs one on a [`Line`] with Python's semantics,
/// [`Check::code`] and [`Check::words`] give the official expression and the requirement in words
/// that findings show. The constants are plain data, so code can read e.g. the range a rule
/// demands.
///
/// ```
/// use mllog_core::compliance::{Bound, Check, Line, State, ValueRange};
/// use mllog_core::record::Metadata;
/// use mllog_core::Value;
///
/// let check = Check::Within(ValueRange {
///     min: Some(Bound { value: 0.0, inclusive: false }),
///     max: Some(Bound { value: 0.925, inclusive: true }),
/// });
/// assert_eq!(check.words(), "must be in (0, 0.925]");
/// assert_eq!(check.code(), "v['value'] in (0, 0.925]");
/// let value = Value::Float(0.91);
/// let line = Line { key: "eval_accuracy", value: &value, metadata: &Metadata::default(), time_ms: 0.0, lineno: 40 };
/// assert_eq!(check.eval(&line, &State::default()), Ok(true));
/// assert_eq!(Check::NotEmpty.words(), "must not be empty");
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Check {
    /// `v['value'] == c` (Python equality: `16 == 16.0`, `"16" != 16`).
    Equals(Lit),
    /// `v['value'] != ''`
    NotEmpty,
    /// `v['value'] in [...]`
    OneOf(&'static [&'static str]),
    /// `v['value'] OP x` (a non-number cannot be evaluated).
    Compare(Cmp, f64),
    /// The value lies in a range (a non-number cannot be evaluated).
    Within(ValueRange),
    /// `is_integer(v['value'])`, optionally `and v['value'] >= min` (or `> min`).
    Integer(Option<Bound>),
    /// `'name' in v['metadata']`
    MetaHas(&'static str),
    /// One of the metadata fields is present.
    MetaHasAny(&'static [&'static str]),
    /// `s['name'] == expected` (truthiness).
    StateIs(&'static str, bool),
    /// Anything else.
    Custom(Custom),
}

impl Check {
    /// The official checker's expression for this check.
    pub fn code(&self) -> String {
        match self {
            Check::Equals(l) => format!("v['value'] == {l}"),
            Check::NotEmpty => "v['value'] != ''".into(),
            Check::OneOf(list) => format!(
                "v['value'] in [{}]",
                list.iter()
                    .map(|s| format!("'{s}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Check::Compare(op, x) => format!("v['value'] {} {x}", op.as_str()),
            Check::Within(iv) => format!("v['value'] in {iv}"),
            Check::Integer(None) => "is_integer(v['value'])".into(),
            Check::Integer(Some(b)) => format!(
                "is_integer(v['value']) and v['value'] {} {}",
                if b.inclusive { ">=" } else { ">" },
                b.value
            ),
            Check::MetaHas(k) => format!("'{k}' in v['metadata']"),
            Check::MetaHasAny(ks) => ks
                .iter()
                .map(|k| format!("('{k}' in v['metadata'])"))
                .collect::<Vec<_>>()
                .join(" | "),
            Check::StateIs(name, true) => format!("s['{name}']"),
            Check::StateIs(name, false) => format!("not s['{name}']"),
            Check::Custom(c) => c.code.into(),
        }
    }

    /// What the check requires, in words, completing "`key` ...".
    pub fn words(&self) -> String {
        match self {
            Check::Equals(l) => format!("must be {}", l.to_value().to_json()),
            Check::NotEmpty => "must not be empty".into(),
            Check::OneOf(list) => format!("must be one of {}", list.join(", ")),
            Check::Compare(op, x) => format!("must be {} {x}", op.as_str()),
            Check::Within(iv) => format!("must be in {iv}"),
            Check::Integer(None) => "must be an integer".into(),
            Check::Integer(Some(b)) => {
                format!(
                    "must be an integer {} {}",
                    if b.inclusive { ">=" } else { ">" },
                    b.value
                )
            }
            Check::MetaHas(k) => format!("needs metadata `{k}`"),
            Check::MetaHasAny(ks) => format!(
                "needs metadata {}",
                ks.iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
            Check::StateIs(name, want) => match (*name, want) {
                ("init_started", true) => "must come after `init_start`".into(),
                ("init_stopped", true) => "must come after `init_stop`".into(),
                ("init_stopped", false) => "must come before `init_stop`".into(),
                ("run_started", true) => "must come after `run_start`".into(),
                ("run_started", false) => "must come before `run_start`".into(),
                (n, true) => format!("needs state `{n}` set"),
                (n, false) => format!("needs state `{n}` unset"),
            },
            Check::Custom(c) => c.words.into(),
        }
    }

    /// Whether the check reports the value it found (not for metadata/state checks).
    pub(crate) fn shows_value(&self) -> bool {
        !matches!(
            self,
            Check::MetaHas(_) | Check::MetaHasAny(_) | Check::StateIs(..)
        )
    }

    /// What a failed check found, in words: the record's value for a check of the value; for a
    /// custom check, the quantities its expression reads (a time difference in minutes, the
    /// metadata items and state variables it compares), since the record's `value` alone may
    /// be no part of it (`init_stop`'s is null).
    pub(crate) fn found(&self, l: &Line<'_>, s: &State) -> Option<String> {
        match self {
            Check::Custom(c) => custom_found(c.code, l, s),
            _ if self.shows_value() => Some(l.value.to_json()),
            _ => None,
        }
    }

    /// Evaluates the check on a line, with Python's semantics (see `docs/compliance.md`): an
    /// `Err` is what the official checker reports as "Failed executing CHECK code".
    pub fn eval(&self, line: &Line<'_>, s: &State) -> Result<bool, ExecError> {
        let v = line.value;
        match self {
            Check::Equals(l) => Ok(py_eq(v, &l.to_value())),
            Check::NotEmpty => Ok(!py_eq(v, &Value::from(""))),
            Check::OneOf(list) => Ok(list.iter().any(|x| py_eq(v, &Value::from(*x)))),
            Check::Compare(op, x) => Ok(op.apply(num(v)?, *x)),
            Check::Within(iv) => Ok(iv.contains(num(v)?)),
            Check::Integer(min) => {
                // `is_integer(v) and v >= min`: `and` does not evaluate its right side when
                // the left one is false.
                Ok(is_integer(v)?
                    && min.is_none_or(|b| {
                        let x = py_num(v).unwrap_or(f64::NAN);
                        if b.inclusive {
                            x >= b.value
                        } else {
                            x > b.value
                        }
                    }))
            }
            Check::MetaHas(k) => meta_contains(line.metadata, k),
            // `(a in md) | (b in md)`: both sides are evaluated.
            Check::MetaHasAny(ks) => {
                let mut any = false;
                for k in *ks {
                    any |= meta_contains(line.metadata, k)?;
                }
                Ok(any)
            }
            Check::StateIs(name, want) => Ok(s.truthy(name)? == *want),
            Check::Custom(c) => (c.f)(line, s),
        }
    }
}

/// A `POST` action.
///
/// Read from [`KeyRule::post`]: what a key's occurrences write into the [`State`] (or which rule
/// files they enqueue) for the checks of later keys.
///
/// ```
/// use mllog_core::compliance::{rules, Post, Ruleset};
///
/// let common = &rules(Ruleset::V6_1_0).common;
/// let division = common.rule("submission_division").unwrap();
/// assert!(matches!(division.post[..], [Post::EnqueueDivision]));
/// let init_start = common.rule("init_start").unwrap();
/// assert!(matches!(init_start.post[..], [Post::SetTrue("init_started"), Post::MinTimestamp("first_init_start")]));
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Post {
    /// `s[name] = v['value']`
    Store(&'static str),
    /// `s[name] = True`
    SetTrue(&'static str),
    /// `s[name] = min(s[name], ll.timestamp)`
    MinTimestamp(&'static str),
    /// `submission_division`: enqueue `<division>_common.yaml` and set the init time limit
    /// (`compile_time_mins`: 240 open, 30 otherwise).
    EnqueueDivision,
    /// `submission_benchmark`: enqueue `<division>_<benchmark>.yaml`.
    EnqueueBenchmark,
    /// Anything else.
    Custom(fn(&Line<'_>, &mut State) -> Result<(), ExecError>),
}

/// The rule for one key (a `KEY` record).
///
/// Look one up with [`RuleFile::rule`] to learn what the rules demand of a key (how often, which
/// checks); the builder methods make rules for tests or for experimenting with a check.
///
/// ```
/// use mllog_core::compliance::{rules, Check, Cmp, Division, KeyRule, Req, Ruleset};
/// use mllog_core::Benchmark;
///
/// let file = rules(Ruleset::V6_1_0).benchmark_file(Division::Closed, Benchmark::Llama2_70bLora).unwrap();
/// let rule = file.rule("lora_rank").unwrap();
/// assert_eq!(rule.req, Some(Req::ExactlyOne));
/// assert_eq!(rule.checks[0].words(), "must be 16");
///
/// let mine = KeyRule::new("global_batch_size").req(Req::ExactlyOne).check(Check::Compare(Cmp::Gt, 0.0));
/// assert_eq!((mine.name, mine.checks.len(), mine.atleast_one.is_none()), ("global_batch_size", 1, true));
/// ```
#[derive(Clone, Debug)]
pub struct KeyRule {
    /// `NAME`
    pub name: &'static str,
    /// `REQ` (none: occurrences not counted)
    pub req: Option<Req>,
    /// `CHECK` (every occurrence; first only for `submission_*` keys)
    pub checks: Vec<Check>,
    /// `POST` (run after `CHECK`, same occurrences)
    pub post: Vec<Post>,
    /// `FIRST_CHECK` (first occurrence only)
    pub first_check: Vec<Check>,
    /// `ATLEAST_ONE_CHECK` (must hold for at least one occurrence)
    pub atleast_one: Option<Check>,
}

impl KeyRule {
    /// A rule without requirement or checks.
    pub fn new(name: &'static str) -> KeyRule {
        KeyRule {
            name,
            req: None,
            checks: Vec::new(),
            post: Vec::new(),
            first_check: Vec::new(),
            atleast_one: None,
        }
    }
    /// Sets `REQ`.
    pub fn req(mut self, req: Req) -> KeyRule {
        self.req = Some(req);
        self
    }
    /// Adds a `CHECK`.
    pub fn check(mut self, c: Check) -> KeyRule {
        self.checks.push(c);
        self
    }
    /// Adds a `POST` action.
    pub fn post(mut self, p: Post) -> KeyRule {
        self.post.push(p);
        self
    }
    /// Adds a `FIRST_CHECK`.
    pub fn first(mut self, c: Check) -> KeyRule {
        self.first_check.push(c);
        self
    }
    /// Sets `ATLEAST_ONE_CHECK`.
    pub fn atleast(mut self, c: Check) -> KeyRule {
        self.atleast_one = Some(c);
        self
    }
}

/// Which file of a ruleset a [`RuleFile`] is.
///
/// Read from [`RuleFile::scope`], e.g. to tell the benchmark file of a ruleset from its common
/// files.
///
/// ```
/// use mllog_core::compliance::{rules, Division, Ruleset, Scope};
/// use mllog_core::Benchmark;
///
/// let set = rules(Ruleset::V6_1_0);
/// assert_eq!(set.common.scope, Scope::Common);
/// assert_eq!(set.division_file(Division::Open).scope, Scope::Division(Division::Open));
/// let file = set.benchmark_file(Division::Closed, Benchmark::Flux1).unwrap();
/// assert_eq!(file.scope, Scope::Benchmark(Division::Closed, Benchmark::Flux1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `common.yaml`
    Common,
    /// `closed_common.yaml` / `open_common.yaml`
    Division(Division),
    /// `<division>_<benchmark>.yaml`
    Benchmark(Division, Benchmark),
}

/// One rule file (one YAML file of the official checker); see the [`RulesetFiles`](super::RulesetFiles)
/// example.
///
/// Findings name it ([`Finding::source`](super::Finding::source)), and a report lists the files
/// applied by [`RuleFile::short_name`].
///
/// ```
/// use mllog_core::compliance::{rules, Division, Ruleset};
/// use mllog_core::Benchmark;
///
/// let file = rules(Ruleset::V6_1_0).benchmark_file(Division::Closed, Benchmark::Llama31_8b).unwrap();
/// assert_eq!(file.short_name(), "closed_llama31_8b");
/// assert!(file.rule("opt_adamw_beta_2").is_some());
/// assert!(file.rule("not_a_key").is_none());
/// assert!(!file.aggregate_eval);
/// ```
#[derive(Clone, Debug)]
pub struct RuleFile {
    /// The official file name, e.g. `training_6.1.0/closed_llama2_70b_lora.yaml`.
    pub name: String,
    /// Which file this is.
    pub scope: Scope,
    /// `BEGIN`: initial state.
    pub begin: Vec<(&'static str, Value)>,
    /// The key rules, in file order.
    pub keys: Vec<KeyRule>,
    /// Stable diffusion (5.0.0): `BEGIN` aggregates `eval_accuracy` lines that carry a `metric`
    /// into one `aggregated_eval_accuracy` line per `samples_count`, checked at the end of the log.
    pub aggregate_eval: bool,
}

impl RuleFile {
    /// The rule for `key`, if this file has one.
    pub fn rule(&self, key: &str) -> Option<&KeyRule> {
        self.keys.iter().find(|k| k.name == key)
    }

    /// The short name used in reports: `common`, `closed_common`, `closed_llama2_70b_lora`.
    pub fn short_name(&self) -> &str {
        let base = self.name.rsplit('/').next().unwrap_or(&self.name);
        base.strip_suffix(".yaml").unwrap_or(base)
    }

    /// " in the closed division" etc., for messages.
    pub(crate) fn context(&self) -> String {
        match self.scope {
            Scope::Common => String::new(),
            Scope::Division(d) => format!(" in the {} division", d.as_str()),
            Scope::Benchmark(d, b) => format!(" in the {} division ({b})", d.as_str()),
        }
    }
}

/// The names `prefix` indexes in a Python expression: `s['lr_min']` gives `lr_min` for `s['`.
fn indexed<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        rest = &rest[i + prefix.len()..];
        if let Some(j) = rest.find('\'') {
            let name = &rest[..j];
            if !out.contains(&name) {
                out.push(name);
            }
            rest = &rest[j..];
        }
    }
    out
}

/// See [`Check::found`].
fn custom_found(code: &str, l: &Line<'_>, s: &State) -> Option<String> {
    let mut parts = Vec::new();
    let mut skip_state: Vec<&str> = Vec::new();
    if code.contains("ll.timestamp - s['first_init_start']") {
        if let Some(start) = s.get("first_init_start").and_then(Value::as_f64) {
            parts.push(format!(
                "{:.1} min after the first `init_start`",
                (l.time_ms - start) / 60_000.0
            ));
            skip_state.push("first_init_start");
        }
        if let Some(limit) = s.get("compile_time_mins").and_then(Value::as_f64) {
            parts.push(format!("the limit is {limit} min"));
            skip_state.push("compile_time_mins");
        }
    } else if code.contains("ll.timestamp") {
        parts.push(format!("timestamp {}", l.time_ms));
    }
    let reads_value = code.contains("v['value']");
    let metadata = indexed(code, "v['metadata']['");
    let state: Vec<&str> = indexed(code, "s['")
        .into_iter()
        .chain(indexed(code, "s.get('"))
        .filter(|n| !skip_state.contains(n))
        .collect();
    if reads_value && parts.is_empty() && metadata.is_empty() && state.is_empty() {
        return Some(l.value.to_json());
    }
    if reads_value {
        parts.push(format!("value {}", l.value.to_json()));
    }
    for m in metadata {
        parts.push(match l.metadata.get(m) {
            Some(v) => format!("metadata `{m}` {}", v.to_json()),
            None => format!("no metadata `{m}`"),
        });
    }
    let mut seen = Vec::new();
    for n in state {
        if seen.contains(&n) {
            continue;
        }
        seen.push(n);
        parts.push(match s.get(n) {
            Some(v) => format!("`{n}` {}", v.to_json()),
            None => format!("`{n}` unset"),
        });
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::Ruleset;

    #[test]
    fn a_ruleset_name_is_three_runs_of_digits() {
        for good in ["5.0.0", "6.1.0", "6.2.0", "10.20.30", "0.0.0"] {
            assert!(Ruleset::is_well_formed(good), "{good}");
        }
        for bad in [
            "",
            "6",
            "6.2",
            "6.2.0.1",
            "6..0",
            ".6.2",
            "6.2.",
            "v6.2.0",
            "6.2.0-rc1",
            " 6.2.0",
            "6.2.0\n",
            "training_6.2.0",
            "6.2.0/x",
            "../6.1.0",
            "6.².0",
            "٦.2.0",
        ] {
            assert!(!Ruleset::is_well_formed(bad), "{bad:?}");
        }
        // Every ruleset of this build is one.
        assert!(Ruleset::ALL
            .iter()
            .all(|r| Ruleset::is_well_formed(r.as_str())));
    }
}
