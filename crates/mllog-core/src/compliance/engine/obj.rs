//! The Python objects a rule snippet handles: what the checker's `eval`/`exec` see (the log
//! line `ll`, its JSON `v`, the state dict `s`, numbers, strings, lists, dicts, the `math`
//! module, builtins), with Python's equality, ordering, truthiness, hashing and `str`/`repr`.
//!
//! Values read from a log keep the semantics the built-in checker follows (`py` module): the
//! JSON is turned into objects here once, and equality of mixed numbers, dict keys that are
//! one key for Python (`1`, `1.0`, `True`) and truthiness are the same rules on objects.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::rc::Rc;

use crate::compliance::py::float_is_int;
use crate::record::Value;

/// A raised Python exception: its class and message (`KeyError: 'x'`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Raise {
    pub(crate) class: &'static str,
    pub(crate) message: String,
    /// Raised where Python would not raise, for want of something the engine does not have
    /// (integers beyond 128 bits, `%`-formatting): the check it happens in has no verdict.
    pub(crate) limit: bool,
}

impl Raise {
    pub(crate) fn new(class: &'static str, message: impl Into<String>) -> Raise {
        Raise {
            class,
            message: message.into(),
            limit: false,
        }
    }
    /// A raise at one of the engine's limits (see [`Raise::limit`]).
    pub(crate) fn at_limit(class: &'static str, message: impl Into<String>) -> Raise {
        Raise {
            limit: true,
            ..Raise::new(class, message)
        }
    }
    pub(crate) fn type_error(message: impl Into<String>) -> Raise {
        Raise::new("TypeError", message)
    }
}

impl std::fmt::Display for Raise {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.class, self.message)
    }
}

/// What evaluation returns.
pub(crate) type PyResult<T> = Result<T, Raise>;

/// A function a snippet can call by name (a builtin, a `math` function, a checker helper).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Func {
    Sorted,
    Len,
    Min,
    Max,
    Abs,
    Isinstance,
    Print,
    Round,
    Sum,
    Any,
    All,
    IsInteger,
    EnqueueConfig,
    Replace,
    Math(MathFn),
}

/// The `math` functions the engine has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MathFn {
    Ceil,
    Floor,
    Isclose,
    Log,
    Log2,
    Log10,
    Sqrt,
    Exp,
    Pow,
    Fabs,
    Isnan,
    Isinf,
}

/// The types a snippet names (`isinstance(x, int)`, `type(x) == bool`); calling one converts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PyType {
    Int,
    Float,
    Bool,
    Str,
    List,
    Dict,
    Tuple,
    Set,
    NoneType,
    LogLine,
    Function,
    Module,
    Type,
}

impl PyType {
    pub(crate) fn name(self) -> &'static str {
        match self {
            PyType::Int => "int",
            PyType::Float => "float",
            PyType::Bool => "bool",
            PyType::Str => "str",
            PyType::List => "list",
            PyType::Dict => "dict",
            PyType::Tuple => "tuple",
            PyType::Set => "set",
            PyType::NoneType => "NoneType",
            PyType::LogLine => "LogLine",
            PyType::Function => "builtin_function_or_method",
            PyType::Module => "module",
            PyType::Type => "type",
        }
    }
}

/// A parsed log line as the checker's parser makes it (`LogLine`): a named tuple for the 0.6.0
/// and 0.7.0 rulesets (read-only), a dataclass since 1.0.0 (attributes can be set).
#[derive(Clone, Debug)]
pub(crate) struct LogLine {
    pub(crate) full_string: Obj,
    pub(crate) timestamp: Obj,
    pub(crate) key: Obj,
    pub(crate) value: Obj,
    pub(crate) lineno: Obj,
    /// The physical line of the log (1-based), for our reports.
    pub(crate) phys: usize,
    pub(crate) mutable: bool,
}

/// A Python dict (insertion ordered; keys compared as Python hashes them).
#[derive(Clone, Debug, Default)]
pub(crate) struct Dict {
    pub(crate) entries: Vec<(Obj, Obj)>,
}

impl Dict {
    pub(crate) fn get(&self, key: &Obj) -> PyResult<Option<&Obj>> {
        check_hashable(key)?;
        Ok(self
            .entries
            .iter()
            .find(|(k, _)| key_eq(k, key))
            .map(|(_, v)| v))
    }
    pub(crate) fn set(&mut self, key: Obj, value: Obj) -> PyResult<()> {
        check_hashable(&key)?;
        match self.entries.iter_mut().find(|(k, _)| key_eq(k, &key)) {
            Some(slot) => slot.1 = value,
            None => self.entries.push((key, value)),
        }
        Ok(())
    }
}

/// A Python object.
#[derive(Clone, Debug)]
pub(crate) enum Obj {
    None,
    Bool(bool),
    /// Python ints are unbounded; beyond 128 bits the engine raises an OverflowError.
    Int(i128),
    Float(f64),
    Str(Rc<str>),
    List(Rc<RefCell<Vec<Obj>>>),
    Tuple(Rc<[Obj]>),
    Dict(Rc<RefCell<Dict>>),
    /// A set, held as a dict whose values are `None`.
    Set(Rc<RefCell<Dict>>),
    Line(Rc<RefCell<LogLine>>),
    Func(Func),
    Type(PyType),
    /// The `math` module.
    Math,
}

impl Obj {
    pub(crate) fn str(s: &str) -> Obj {
        Obj::Str(Rc::from(s))
    }
    pub(crate) fn list(v: Vec<Obj>) -> Obj {
        Obj::List(Rc::new(RefCell::new(v)))
    }
    pub(crate) fn dict(d: Dict) -> Obj {
        Obj::Dict(Rc::new(RefCell::new(d)))
    }

    /// The object `json.loads` makes of a JSON value.
    pub(crate) fn from_value(v: &Value) -> Obj {
        match v {
            Value::Null => Obj::None,
            Value::Bool(b) => Obj::Bool(*b),
            Value::Int(i) => Obj::Int(*i),
            // Beyond i128 (rare): kept as the nearest float.
            Value::UInt(u) => Obj::Float(*u as f64),
            Value::Float(f) => Obj::Float(*f),
            Value::Str(s) => Obj::str(s),
            Value::Array(a) => Obj::list(a.iter().map(Obj::from_value).collect()),
            Value::Object(o) => {
                let mut d = Dict::default();
                for (k, v) in o {
                    // JSON keys are strings: always hashable, last duplicate wins.
                    let _ = d.set(Obj::str(k), Obj::from_value(v));
                }
                Obj::dict(d)
            }
        }
    }

    pub(crate) fn type_of(&self) -> PyType {
        match self {
            Obj::None => PyType::NoneType,
            Obj::Bool(_) => PyType::Bool,
            Obj::Int(_) => PyType::Int,
            Obj::Float(_) => PyType::Float,
            Obj::Str(_) => PyType::Str,
            Obj::List(_) => PyType::List,
            Obj::Tuple(_) => PyType::Tuple,
            Obj::Dict(_) => PyType::Dict,
            Obj::Set(_) => PyType::Set,
            Obj::Line(_) => PyType::LogLine,
            Obj::Func(_) => PyType::Function,
            Obj::Type(_) => PyType::Type,
            Obj::Math => PyType::Module,
        }
    }

    pub(crate) fn type_name(&self) -> &'static str {
        self.type_of().name()
    }

    /// Python truthiness.
    pub(crate) fn truthy(&self) -> bool {
        match self {
            Obj::None => false,
            Obj::Bool(b) => *b,
            Obj::Int(i) => *i != 0,
            Obj::Float(f) => *f != 0.0,
            Obj::Str(s) => !s.is_empty(),
            Obj::List(l) => !l.borrow().is_empty(),
            Obj::Tuple(t) => !t.is_empty(),
            Obj::Dict(d) | Obj::Set(d) => !d.borrow().entries.is_empty(),
            _ => true,
        }
    }

    /// An int or bool as Python's exact integer.
    pub(crate) fn as_int(&self) -> Option<i128> {
        match *self {
            Obj::Int(i) => Some(i),
            Obj::Bool(b) => Some(i128::from(b)),
            _ => None,
        }
    }

    /// A number as a float (ints, floats, bools).
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match *self {
            Obj::Int(i) => Some(i as f64),
            Obj::Bool(b) => Some(if b { 1.0 } else { 0.0 }),
            Obj::Float(f) => Some(f),
            _ => None,
        }
    }

    /// `str(x)`.
    pub(crate) fn to_str(&self) -> String {
        match self {
            Obj::Str(s) => s.to_string(),
            other => other.repr(),
        }
    }

    /// `repr(x)`.
    pub(crate) fn repr(&self) -> String {
        let mut out = String::new();
        self.write_repr(&mut out);
        out
    }

    fn write_repr(&self, out: &mut String) {
        match self {
            Obj::None => out.push_str("None"),
            Obj::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
            Obj::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Obj::Float(f) => out.push_str(&float_repr(*f)),
            Obj::Str(s) => out.push_str(&str_repr(s)),
            Obj::List(l) => seq_repr(out, "[", &l.borrow(), "]"),
            Obj::Tuple(t) if t.len() == 1 => seq_repr(out, "(", t, ",)"),
            Obj::Tuple(t) => seq_repr(out, "(", t, ")"),
            Obj::Dict(d) => {
                out.push('{');
                for (i, (k, v)) in d.borrow().entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    k.write_repr(out);
                    out.push_str(": ");
                    v.write_repr(out);
                }
                out.push('}');
            }
            Obj::Set(d) => {
                let keys: Vec<Obj> = d.borrow().entries.iter().map(|(k, _)| k.clone()).collect();
                if keys.is_empty() {
                    out.push_str("set()");
                } else {
                    seq_repr(out, "{", &keys, "}");
                }
            }
            Obj::Line(l) => {
                let l = l.borrow();
                let _ = write!(
                    out,
                    "LogLine(full_string={}, timestamp={}, key={}, value={}, lineno={})",
                    l.full_string.repr(),
                    l.timestamp.repr(),
                    l.key.repr(),
                    l.value.repr(),
                    l.lineno.repr()
                );
            }
            Obj::Func(f) => {
                let _ = write!(out, "<built-in function {f:?}>");
            }
            Obj::Type(t) => {
                let _ = write!(out, "<class '{}'>", t.name());
            }
            Obj::Math => out.push_str("<module 'math' (built-in)>"),
        }
    }
}

fn seq_repr(out: &mut String, open: &str, items: &[Obj], close: &str) {
    out.push_str(open);
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        x.write_repr(out);
    }
    out.push_str(close);
}

/// `float.__repr__`.
pub(crate) fn float_repr(f: f64) -> String {
    if f.is_nan() {
        "nan".into()
    } else if f.is_infinite() {
        if f > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        Value::Float(f).to_json()
    }
}

/// `str.__repr__`: single quotes unless the text holds one and no double quote.
fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

fn check_hashable(key: &Obj) -> PyResult<()> {
    match key {
        Obj::List(_) | Obj::Dict(_) | Obj::Set(_) => Err(Raise::type_error(format!(
            "unhashable type: '{}'",
            key.type_name()
        ))),
        Obj::Line(l) if l.borrow().mutable => Err(Raise::type_error("unhashable type: 'LogLine'")),
        Obj::Tuple(t) => t.iter().try_for_each(check_hashable),
        _ => Ok(()),
    }
}

/// Two dict keys are one key: equal, as Python compares hashable keys.
fn key_eq(a: &Obj, b: &Obj) -> bool {
    same(a, b)
}

/// `a == b` in Python.
pub(crate) fn eq(a: &Obj, b: &Obj) -> bool {
    match (a, b) {
        (Obj::Str(x), Obj::Str(y)) => x == y,
        (Obj::None, Obj::None) => true,
        (Obj::List(x), Obj::List(y)) => {
            if Rc::ptr_eq(x, y) {
                return true;
            }
            let (x, y) = (x.borrow(), y.borrow());
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
        }
        (Obj::Tuple(x), Obj::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
        }
        (Obj::Dict(x), Obj::Dict(y)) => {
            if Rc::ptr_eq(x, y) {
                return true;
            }
            let (x, y) = (x.borrow(), y.borrow());
            x.entries.len() == y.entries.len()
                && x.entries.iter().all(|(k, v)| {
                    y.entries
                        .iter()
                        .find(|(k2, _)| key_eq(k, k2))
                        .is_some_and(|(_, w)| same(v, w))
                })
        }
        (Obj::Set(x), Obj::Set(y)) => {
            let (x, y) = (x.borrow(), y.borrow());
            x.entries.len() == y.entries.len()
                && x.entries
                    .iter()
                    .all(|(k, _)| y.entries.iter().any(|(k2, _)| key_eq(k, k2)))
        }
        (Obj::Line(x), Obj::Line(y)) => {
            if Rc::ptr_eq(x, y) {
                return true;
            }
            let (x, y) = (x.borrow(), y.borrow());
            eq(&x.full_string, &y.full_string)
                && eq(&x.timestamp, &y.timestamp)
                && eq(&x.key, &y.key)
                && eq(&x.value, &y.value)
                && eq(&x.lineno, &y.lineno)
        }
        (Obj::Func(x), Obj::Func(y)) => x == y,
        (Obj::Type(x), Obj::Type(y)) => x == y,
        (Obj::Math, Obj::Math) => true,
        _ => match (a.as_int(), b.as_int()) {
            (Some(i), Some(j)) => i == j,
            (Some(i), None) => matches!(b, Obj::Float(f) if float_is_int(*f, i)),
            (None, Some(j)) => matches!(a, Obj::Float(f) if float_is_int(*f, j)),
            (None, None) => matches!((a, b), (Obj::Float(x), Obj::Float(y)) if x == y),
        },
    }
}

/// How Python compares elements inside containers and in `list.count`: identity first, then
/// `==`. Every NaN that `json.loads` makes is one object, so there a NaN equals a NaN.
pub(crate) fn same(a: &Obj, b: &Obj) -> bool {
    matches!((a, b), (Obj::Float(x), Obj::Float(y)) if x.is_nan() && y.is_nan()) || eq(a, b)
}

/// `needle in container`.
pub(crate) fn contains(container: &Obj, needle: &Obj) -> PyResult<bool> {
    match container {
        Obj::Str(s) => match needle {
            Obj::Str(n) => Ok(s.contains(&**n)),
            other => Err(Raise::type_error(format!(
                "'in <string>' requires string as left operand, not {}",
                other.type_name()
            ))),
        },
        Obj::List(l) => Ok(l.borrow().iter().any(|x| same(x, needle))),
        Obj::Tuple(t) => Ok(t.iter().any(|x| same(x, needle))),
        Obj::Dict(d) | Obj::Set(d) => Ok(d.borrow().get(needle)?.is_some()),
        Obj::Line(l) if !l.borrow().mutable => {
            let l = l.borrow();
            Ok([&l.full_string, &l.timestamp, &l.key, &l.value, &l.lineno]
                .iter()
                .any(|x| same(x, needle)))
        }
        other => Err(Raise::type_error(format!(
            "argument of type '{}' is not iterable",
            other.type_name()
        ))),
    }
}

/// The items `for x in obj` visits (a snapshot: the rule files never change a list while
/// iterating over it).
pub(crate) fn iterate(obj: &Obj) -> PyResult<Vec<Obj>> {
    match obj {
        Obj::List(l) => Ok(l.borrow().clone()),
        Obj::Tuple(t) => Ok(t.to_vec()),
        Obj::Dict(d) | Obj::Set(d) => {
            Ok(d.borrow().entries.iter().map(|(k, _)| k.clone()).collect())
        }
        Obj::Str(s) => Ok(s
            .chars()
            .map(|c| Obj::str(c.encode_utf8(&mut [0; 4])))
            .collect()),
        other => Err(Raise::type_error(format!(
            "'{}' object is not iterable",
            other.type_name()
        ))),
    }
}

/// `json.dumps(x, sort_keys=True, indent=2)`, as the checker's messages show the state and the
/// line; `None` where Python's `json` raises (an object it cannot serialise, keys it cannot sort).
pub(crate) fn pretty_json(obj: &Obj) -> Option<String> {
    let mut out = String::new();
    write_json(obj, 0, &mut out)?;
    Some(out)
}

fn write_json(obj: &Obj, depth: usize, out: &mut String) -> Option<()> {
    let pad = |out: &mut String, d: usize| {
        out.push('\n');
        for _ in 0..d {
            out.push_str("  ");
        }
    };
    match obj {
        Obj::None => out.push_str("null"),
        Obj::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Obj::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Obj::Float(f) => out.push_str(&Value::Float(*f).to_json()),
        Obj::Str(s) => out.push_str(&Value::Str(s.to_string().into()).to_json()),
        Obj::List(_) | Obj::Tuple(_) => {
            let items = iterate(obj).ok()?;
            if items.is_empty() {
                out.push_str("[]");
                return Some(());
            }
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                write_json(x, depth + 1, out)?;
            }
            pad(out, depth);
            out.push(']');
        }
        Obj::Dict(d) => {
            let d = d.borrow();
            if d.entries.is_empty() {
                out.push_str("{}");
                return Some(());
            }
            let mut keyed: Vec<(String, &Obj)> = Vec::new();
            let all_str = d.entries.iter().all(|(k, _)| matches!(k, Obj::Str(_)));
            let all_num = d
                .entries
                .iter()
                .all(|(k, _)| matches!(k, Obj::Int(_) | Obj::Float(_) | Obj::Bool(_)));
            if !all_str && !all_num {
                return None;
            }
            let mut entries: Vec<&(Obj, Obj)> = d.entries.iter().collect();
            if all_num {
                entries.sort_by(|a, b| {
                    a.0.as_f64()
                        .partial_cmp(&b.0.as_f64())
                        .unwrap_or(std::cmp::Ordering::Equal)
                });
            }
            for (k, v) in entries {
                let name = match k {
                    Obj::Str(s) => s.to_string(),
                    Obj::Bool(b) => if *b { "true" } else { "false" }.to_string(),
                    Obj::Float(f) => float_repr(*f),
                    other => other.repr(),
                };
                keyed.push((name, v));
            }
            if all_str {
                keyed.sort_by(|a, b| a.0.cmp(&b.0));
            }
            out.push('{');
            for (i, (k, v)) in keyed.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                pad(out, depth + 1);
                out.push_str(&Value::Str(k.clone().into()).to_json());
                out.push_str(": ");
                write_json(v, depth + 1, out)?;
            }
            pad(out, depth);
            out.push('}');
        }
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_semantics() {
        assert!(eq(&Obj::Int(16), &Obj::Float(16.0)));
        assert!(eq(&Obj::Int(1), &Obj::Bool(true)));
        assert!(!eq(&Obj::str("16"), &Obj::Int(16)));
        assert!(!eq(&Obj::Float(f64::NAN), &Obj::Float(f64::NAN)));
        assert!(same(&Obj::Float(f64::NAN), &Obj::Float(f64::NAN)));
        assert_eq!(float_repr(1e-5), "1e-05");
        assert_eq!(float_repr(9e99), "9e+99");
        assert_eq!(
            Obj::list(vec![Obj::str("a"), Obj::Int(1)]).repr(),
            "['a', 1]"
        );
        let mut d = Dict::default();
        d.set(Obj::Int(1), Obj::str("x")).unwrap();
        d.set(Obj::Float(1.0), Obj::str("y")).unwrap();
        assert_eq!(d.entries.len(), 1);
        assert!(d.set(Obj::list(vec![]), Obj::None).is_err());
        assert!(contains(&Obj::str("samples_count"), &Obj::str("count")).unwrap());
        assert!(contains(&Obj::None, &Obj::str("x")).is_err());
        let md = Obj::from_value(&Value::Object(vec![
            ("b".into(), 1.into()),
            ("a".into(), 0.5.into()),
        ]));
        assert_eq!(pretty_json(&md).unwrap(), "{\n  \"a\": 0.5,\n  \"b\": 1\n}");
    }
}
