use std::borrow::Cow;

use super::float32::f32_shortest;

use super::Str;

/// A JSON value as MLLOG carries it.
///
/// Unlike `serde_json::Value` it keeps NaN and ±Infinity (Python writes them as bare `NaN`,
/// `Infinity`, `-Infinity`; turning them into `null` crashes the official checker), keeps
/// integers and floats apart (`16` and `16.0` are different spellings), holds integers up to
/// 128 bits (Python ints are unbounded; logs contain values beyond `u64`), and keeps object keys
/// in insertion order.
///
/// Every `value` and metadata field of a [`Record`](super::Record) is one. Build it with
/// `From` (numbers, bools, strings) and read it with [`Value::as_f64`], [`Value::as_i128`],
/// [`Value::as_str`], [`Value::get`] (object fields), or write it out with
/// [`Value::to_json`]; see the [`record`](super) module example for values in a record.
///
/// ```
/// use mllog_core::Value;
///
/// assert_eq!(Value::from(16u32).to_json(), "16");
/// assert_eq!(Value::from(16.0).to_json(), "16.0"); // an int and a float stay apart
/// assert_eq!(Value::from(f64::NAN).to_json(), "NaN"); // as Python writes it
/// assert_eq!(Value::from(0.1f32).as_f64(), Some(0.1)); // shortest decimal of the f32
/// assert_eq!(Value::from(u128::MAX).as_i128(), None); // too large for i128, kept exactly
/// assert_eq!(Value::from(u128::MAX).to_json(), u128::MAX.to_string());
/// let obj = Value::Object(vec![("throughput".into(), 2.5.into())]);
/// assert_eq!(obj.get("throughput").and_then(Value::as_f64), Some(2.5));
/// ```
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Value {
    /// `null`
    #[default]
    Null,
    /// `true` / `false`
    Bool(bool),
    /// An integer.
    Int(i128),
    /// An integer above `i128::MAX` (a `u128`); every smaller integer is an [`Value::Int`], so
    /// each number has one representation. Build it with `Value::from(u)`.
    UInt(u128),
    /// A float, written with Python's `repr` spelling.
    Float(f64),
    /// A string.
    Str(Str),
    /// A list.
    Array(Vec<Value>),
    /// An object with keys in insertion order.
    Object(Vec<(Str, Value)>),
}

impl Value {
    /// The number as `f64`, for integers and floats.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Int(i) => Some(i as f64),
            Value::UInt(u) => Some(u as f64),
            Value::Float(f) => Some(f),
            _ => None,
        }
    }

    /// The integer, for integers and for floats with an integral value (as Python compares
    /// `16.0 == 16`).
    pub fn as_i128(&self) -> Option<i128> {
        match *self {
            Value::Int(i) => Some(i),
            Value::Float(f) if f.fract() == 0.0 && f.is_finite() => Some(f as i128),
            _ => None,
        }
    }

    /// The string, for strings.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The boolean, for booleans.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// A member of an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Whether this is a number (integer or float, NaN included).
    pub fn is_number(&self) -> bool {
        matches!(self, Value::Int(_) | Value::UInt(_) | Value::Float(_))
    }

    /// Sets `path` (dot-separated, e.g. `"a.b"`) inside an object value, creating nested
    /// objects as needed; a non-object value is replaced by an object.
    pub fn set_path(&mut self, path: &str, value: Value) {
        if !matches!(self, Value::Object(_)) {
            *self = Value::Object(Vec::new());
        }
        let Value::Object(members) = self else {
            unreachable!("made an object above")
        };
        let (head, rest) = match path.split_once('.') {
            Some((h, r)) => (h, Some(r)),
            None => (path, None),
        };
        let slot = match members.iter().position(|(k, _)| k == head) {
            Some(i) => &mut members[i].1,
            None => {
                members.push((Cow::Owned(head.to_owned()), Value::Null));
                &mut members.last_mut().expect("just pushed").1
            }
        };
        match rest {
            Some(rest) => slot.set_path(rest, value),
            None => *slot = value,
        }
    }
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value { Value::Int(v as i128) }
        }
    )*};
}
from_int!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, usize);

impl From<u128> for Value {
    fn from(v: u128) -> Value {
        match i128::try_from(v) {
            Ok(i) => Value::Int(i),
            Err(_) => Value::UInt(v),
        }
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

/// Widening an `f32` keeps its binary value, which prints as e.g. `0.10000000149011612` and
/// fails rules such as `opt_adamw_weight_decay == 0.1`. We convert through the shortest decimal
/// spelling instead, so `0.1f32` logs as `0.1`.
impl From<f32> for Value {
    fn from(v: f32) -> Value {
        Value::Float(f32_shortest(v))
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl From<&'static str> for Value {
    fn from(v: &'static str) -> Value {
        Value::Str(Cow::Borrowed(v))
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Str(Cow::Owned(v))
    }
}

impl From<Str> for Value {
    fn from(v: Str) -> Value {
        Value::Str(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(v: Vec<T>) -> Value {
        Value::Array(v.into_iter().map(Into::into).collect())
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_json())
    }
}
