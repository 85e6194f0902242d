//! Python's semantics for what a log record carries, in one place.
//!
//! The official checker `eval`s the YAML expressions of its rule files in Python over whatever
//! JSON a record holds: its parser checks no types. So `'samples_count' in v['metadata']` is a
//! substring test when the metadata is a string and a TypeError when it is `null`;
//! `v['value'] == 16` is true for `16.0` and `True`; `v['value'] > 0` is a TypeError on a
//! string. Every rule reads values, metadata and state through these functions, and nothing
//! else; a TypeError, KeyError or ValueError is an [`ExecError`], which the checker reports the
//! way the official one does (a failed check, or a crash where the official checker does not
//! catch it).

use std::borrow::Cow;
use std::fmt;

use crate::record::{Metadata, Value};

/// Why a check could not be evaluated (the official "Failed executing CHECK code").
///
/// You meet it when evaluating a [`Check`](super::Check) by hand ([`Check::eval`](super::Check::eval),
/// [`State::num`](super::State::num)); the checker reports it as a
/// [`FindingKind::Exec`](super::FindingKind::Exec) finding (a
/// [`FindingKind::Fatal`](super::FindingKind::Fatal) one where the official checker crashes).
///
/// ```
/// use mllog_core::compliance::{Check, Cmp, ExecError, Line, State};
/// use mllog_core::record::Metadata;
/// use mllog_core::Value;
///
/// // A state variable read before the key that writes it.
/// let err = State::default().num("lr_max").unwrap_err();
/// assert_eq!(err, ExecError::NeedsState { var: "lr_max", key: "global_batch_size" });
/// assert_eq!(err.to_string(), "needs `global_batch_size` logged first");
///
/// // `v['value'] > 0` on a string is a TypeError in Python.
/// let value = Value::from("sixteen");
/// let line = Line { key: "lora_rank", value: &value, metadata: &Metadata::default(), time_ms: 0.0, lineno: 1 };
/// let err = Check::Compare(Cmp::Gt, 0.0).eval(&line, &State::default()).unwrap_err();
/// assert!(matches!(&err, ExecError::Type(msg) if msg.starts_with("TypeError")), "{err}");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum ExecError {
    /// A state variable was read before the key that writes it was logged.
    NeedsState {
        /// The state variable.
        var: &'static str,
        /// The key whose POST sets it.
        key: &'static str,
    },
    /// A value of the wrong type or a missing field, in words.
    Type(String),
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::NeedsState { key, .. } => write!(f, "needs `{key}` logged first"),
            ExecError::Type(s) => f.write_str(s),
        }
    }
}

/// Python's type name, for messages.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Int(_) | Value::UInt(_) => "int",
        Value::Float(_) => "float",
        Value::Str(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

fn type_error(msg: String) -> ExecError {
    ExecError::Type(format!("TypeError: {msg}"))
}

/// `needle in container` for a string needle: a key of a dict, a substring of a string, an
/// element of a list; a TypeError for `None`, numbers and booleans.
pub(crate) fn contains(container: &Value, needle: &str) -> Result<bool, ExecError> {
    match container {
        Value::Object(_) => Ok(container.get(needle).is_some()),
        Value::Str(s) => Ok(s.contains(needle)),
        Value::Array(items) => Ok(items
            .iter()
            .any(|x| matches!(x, Value::Str(s) if s == needle))),
        other => Err(type_error(format!(
            "argument of type '{}' is not iterable",
            type_name(other)
        ))),
    }
}

/// `container[name]` for a string subscript: a dict's member (KeyError when absent); a
/// TypeError for everything else.
pub(crate) fn item<'a>(container: &'a Value, name: &str) -> Result<&'a Value, ExecError> {
    match container {
        Value::Object(_) => container
            .get(name)
            .ok_or_else(|| ExecError::Type(format!("KeyError: '{name}'"))),
        other => Err(not_subscriptable(other)),
    }
}

fn not_subscriptable(v: &Value) -> ExecError {
    type_error(match v {
        Value::Str(_) => "string indices must be integers, not 'str'".into(),
        Value::Array(_) => "list indices must be integers or slices, not str".into(),
        other => format!("'{}' object is not subscriptable", type_name(other)),
    })
}

/// `name in v['metadata']`.
pub(crate) fn meta_contains(md: &Metadata, name: &str) -> Result<bool, ExecError> {
    if let Some(other) = &md.other {
        return contains(other, name);
    }
    Ok(match name {
        "file" => md.file.is_some() || md.get(name).is_some(),
        "lineno" => md.lineno.is_some() || md.get(name).is_some(),
        _ => md.get(name).is_some(),
    })
}

/// `v['metadata'][name]`.
pub(crate) fn meta_item<'a>(md: &'a Metadata, name: &str) -> Result<Cow<'a, Value>, ExecError> {
    if let Some(other) = &md.other {
        return item(other, name).map(Cow::Borrowed);
    }
    if let Some(v) = md.get(name) {
        return Ok(Cow::Borrowed(v));
    }
    match (name, &md.file, md.lineno) {
        ("file", Some(f), _) => Ok(Cow::Owned(Value::Str(f.clone()))),
        ("lineno", _, Some(l)) => Ok(Cow::Owned(Value::Int(l.into()))),
        _ => Err(ExecError::Type(format!("KeyError: '{name}'"))),
    }
}

/// A number as Python sees it in arithmetic: ints, floats and booleans.
pub(crate) fn py_num(v: &Value) -> Option<f64> {
    match *v {
        Value::Int(i) => Some(i as f64),
        Value::UInt(u) => Some(u as f64),
        Value::Float(f) => Some(f),
        Value::Bool(b) => Some(if b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

/// An operand of arithmetic or of an ordering comparison with a number, or the TypeError
/// Python raises (`'<' not supported between instances of 'str' and 'float'`).
pub(crate) fn num(v: &Value) -> Result<f64, ExecError> {
    py_num(v).ok_or_else(|| {
        type_error(format!(
            "{} is a {}, not a number",
            v.to_json(),
            type_name(v)
        ))
    })
}

/// Python's `int(x)` for the values a log can hold.
pub(crate) fn py_int(v: &Value) -> Result<f64, ExecError> {
    match v {
        Value::Int(i) => Ok(*i as f64),
        Value::UInt(u) => Ok(*u as f64),
        Value::Bool(b) => Ok(if *b { 1.0 } else { 0.0 }),
        Value::Float(f) if f.is_finite() => Ok(f.trunc()),
        Value::Str(s) => s
            .trim()
            .replace('_', "")
            .parse::<i128>()
            .map(|i| i as f64)
            .map_err(|_| ExecError::Type(format!("ValueError: int({}) fails", v.to_json()))),
        Value::Float(_) => Err(ExecError::Type(format!(
            "ValueError: int({}) fails",
            v.to_json()
        ))),
        other => Err(type_error(format!(
            "int() argument must be a string or a number, not '{}'",
            type_name(other)
        ))),
    }
}

/// `is_integer(x)` of the official checker: `abs(round(x) - x) < 0.00001`.
pub(crate) fn is_integer(v: &Value) -> Result<bool, ExecError> {
    let x = num(v)?;
    if !x.is_finite() {
        // round(nan) is a ValueError, round(inf) an OverflowError.
        return Err(ExecError::Type(format!("cannot round {}", v.to_json())));
    }
    Ok((x.round() - x).abs() < 0.00001)
}

/// Python truthiness.
pub(crate) fn py_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Int(i) => *i != 0,
        // Only integers above i128::MAX are held as UInt.
        Value::UInt(_) => true,
        Value::Float(f) => *f != 0.0,
        Value::Str(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Python `==` between two JSON values (`1 == 1.0 == True`, `'16' != 16`, a NaN not equal to
/// itself; elements of lists and dicts compared as Python compares them, see [`py_same`]).
pub(crate) fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::UInt(x), Value::UInt(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Null, Value::Null) => true,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|w| py_same(v, w)))
        }
        _ => match (py_int_of(a), py_int_of(b)) {
            // Python compares an int with a float exactly, not through a float conversion.
            (Some(i), None) => py_num(b).is_some_and(|f| float_is_int(f, i)),
            (None, Some(i)) => py_num(a).is_some_and(|f| float_is_int(f, i)),
            (Some(i), Some(j)) => i == j,
            (None, None) => matches!((py_num(a), py_num(b)), (Some(x), Some(y)) if x == y),
        },
    }
}

/// An int or a bool as the exact integer Python holds.
fn py_int_of(v: &Value) -> Option<i128> {
    match *v {
        Value::Int(i) => Some(i),
        Value::Bool(b) => Some(i128::from(b)),
        _ => None,
    }
}

/// Python's exact `float == int`.
pub(crate) fn float_is_int(f: f64, i: i128) -> bool {
    // 2^127: beyond it no i128 is equal (and `as` would saturate).
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    f.fract() == 0.0 && (-LIMIT..LIMIT).contains(&f) && f as i128 == i
}

/// How Python compares two parsed values inside a list or dict, and in `list.count`
/// (`PyObject_RichCompareBool`): identity first, then `==`. Every NaN Python's `json` parser
/// makes is the same object (`json.decoder.NaN`), so there a NaN equals a NaN; the official
/// checker's "logged more than once with the same value" (`l.count(l[0])`) relies on this.
pub(crate) fn py_same(a: &Value, b: &Value) -> bool {
    matches!((a, b), (Value::Float(x), Value::Float(y)) if x.is_nan() && y.is_nan()) || py_eq(a, b)
}

/// A dict key as Python hashes it (`1`, `1.0` and `True` are one key), or the TypeError of an
/// unhashable one (a list, a dict).
pub(crate) fn hash_key(v: &Value) -> Result<String, ExecError> {
    match v {
        Value::Str(s) => Ok(format!("s{s}")),
        Value::Null => Ok("null".into()),
        Value::Array(_) | Value::Object(_) => {
            Err(type_error(format!("unhashable type: '{}'", type_name(v))))
        }
        other => Ok(match py_int_of(other) {
            Some(i) => format!("n{i}"),
            None => match py_num(other) {
                Some(f) if f.fract() == 0.0 && f.abs() < 1.7e38 => format!("n{}", f as i128),
                Some(f) => format!("f{f}"),
                None => unreachable!("every other value is a number"),
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_and_item_follow_python() {
        let s = Value::from("has samples_count in it");
        assert_eq!(contains(&s, "samples_count"), Ok(true));
        assert_eq!(contains(&Value::from(""), "status"), Ok(false));
        assert!(contains(&Value::Null, "x").is_err());
        assert!(contains(&Value::Int(3), "x").is_err());
        assert!(contains(&Value::Bool(true), "x").is_err());
        let list = Value::Array(vec![Value::from("status"), Value::Int(1)]);
        assert_eq!(contains(&list, "status"), Ok(true));
        assert_eq!(contains(&list, "stat"), Ok(false));
        assert!(item(&s, "x").is_err());
        assert!(item(&list, "x").is_err());
        let md = Metadata {
            other: Some(Box::new(Value::from("epoch_count"))),
            ..Metadata::default()
        };
        assert_eq!(meta_contains(&md, "epoch_count"), Ok(true));
        assert!(meta_item(&md, "epoch_count").is_err());
        let md = Metadata::at("a.py", 3).with("samples_count", 5);
        assert_eq!(meta_contains(&md, "file"), Ok(true));
        assert_eq!(meta_item(&md, "lineno").unwrap().as_ref(), &Value::Int(3));
        assert!(meta_item(&md, "status").is_err());
    }

    #[test]
    fn equality_and_hashing_follow_python() {
        assert!(py_eq(&Value::Int(16), &Value::Float(16.0)));
        assert!(py_eq(&Value::Int(1), &Value::Bool(true)));
        assert!(!py_eq(&Value::from("16"), &Value::Int(16)));
        assert!(!py_eq(&Value::Float(f64::NAN), &Value::Float(f64::NAN)));
        assert!(py_same(&Value::Float(f64::NAN), &Value::Float(f64::NAN)));
        assert_eq!(
            hash_key(&Value::Int(1)).unwrap(),
            hash_key(&Value::Bool(true)).unwrap()
        );
        assert_eq!(
            hash_key(&Value::Float(2.0)).unwrap(),
            hash_key(&Value::Int(2)).unwrap()
        );
        assert!(hash_key(&Value::Array(vec![])).is_err());
        assert!(num(&Value::from("1")).is_err());
        assert_eq!(num(&Value::Bool(true)), Ok(1.0));
        assert_eq!(is_integer(&Value::Float(2.000001)), Ok(true));
        assert!(is_integer(&Value::Float(f64::NAN)).is_err());
    }
}
