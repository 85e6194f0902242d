//! The builtins, `math` and the checker's helpers as a snippet calls them, and calls of the
//! types (`int(x)`, `float(x)`, `type(x)`, ...).

use std::cell::RefCell;
use std::rc::Rc;

use super::eval::Env;
use super::ir::BinOp;
use super::ir::CmpOp;
use super::obj::*;
use super::ops::{binop, compare, overflow, raise};

impl Env<'_> {
    pub(crate) fn call(&mut self, f: &Obj, args: Vec<Obj>, kw: &[(&str, Obj)]) -> PyResult<Obj> {
        let kwarg = |name: &str| kw.iter().find(|(n, _)| *n == name).map(|(_, v)| v);
        let func = match f {
            Obj::Func(func) => *func,
            Obj::Type(t) => return convert(*t, args),
            other => {
                return raise(
                    "TypeError",
                    format!("'{}' object is not callable", other.type_name()),
                )
            }
        };
        let nargs = |n: usize, name: &str| -> PyResult<()> {
            if args.len() != n {
                return raise(
                    "TypeError",
                    format!(
                        "{name}() takes exactly {n} argument(s) ({} given)",
                        args.len()
                    ),
                );
            }
            Ok(())
        };
        match func {
            Func::Sorted => {
                nargs(1, "sorted")?;
                let mut items = iterate(&args[0])?;
                let reverse = kwarg("reverse").is_some_and(Obj::truthy);
                sort(&mut items, reverse)?;
                Ok(Obj::list(items))
            }
            Func::Len => {
                nargs(1, "len")?;
                len(&args[0]).map(|n| Obj::Int(n as i128))
            }
            Func::Min | Func::Max => {
                let is_max = func == Func::Max;
                let name = if is_max { "max" } else { "min" };
                let items = match args.len() {
                    0 => {
                        return raise(
                            "TypeError",
                            format!("{name} expected at least 1 argument, got 0"),
                        )
                    }
                    1 => iterate(&args[0])?,
                    _ => args,
                };
                let mut it = items.into_iter();
                let Some(mut best) = it.next() else {
                    return raise("ValueError", format!("{name}() arg is an empty sequence"));
                };
                for x in it {
                    let better = if is_max {
                        compare(CmpOp::Gt, &x, &best)?
                    } else {
                        compare(CmpOp::Lt, &x, &best)?
                    };
                    if better {
                        best = x;
                    }
                }
                Ok(best)
            }
            Func::Abs => {
                nargs(1, "abs")?;
                unary_abs(&args[0])
            }
            Func::Isinstance => {
                nargs(2, "isinstance")?;
                let types: Vec<Obj> = match &args[1] {
                    Obj::Tuple(t) => t.to_vec(),
                    other => vec![other.clone()],
                };
                let have = args[0].type_of();
                let mut hit = false;
                for t in types {
                    let Obj::Type(t) = t else {
                        return raise(
                            "TypeError",
                            "isinstance() arg 2 must be a type, a tuple of types, or a union",
                        );
                    };
                    hit |= t == have || (t == PyType::Int && have == PyType::Bool);
                }
                Ok(Obj::Bool(hit))
            }
            // What a rule prints is not part of the verdict; the arguments are evaluated (they
            // can raise) and the text dropped.
            Func::Print => Ok(Obj::None),
            Func::Round => match args.as_slice() {
                [x] => round_int(x),
                [x, n] => {
                    let Some(n) = n.as_int() else {
                        return raise(
                            "TypeError",
                            "'float' object cannot be interpreted as an integer",
                        );
                    };
                    match x {
                        Obj::Float(f) => {
                            let p = 10f64.powi(n as i32);
                            Ok(Obj::Float((f * p).round_ties_even() / p))
                        }
                        x if x.as_int().is_some() => Ok(x.clone()),
                        x => raise(
                            "TypeError",
                            format!("type {} doesn't define __round__ method", x.type_name()),
                        ),
                    }
                }
                _ => raise("TypeError", "round() takes 1 or 2 arguments"),
            },
            Func::Sum => {
                let (items, start) = match args.as_slice() {
                    [xs] => (iterate(xs)?, Obj::Int(0)),
                    [xs, s] => (iterate(xs)?, s.clone()),
                    _ => return raise("TypeError", "sum() takes 1 or 2 arguments"),
                };
                items
                    .iter()
                    .try_fold(start, |acc, x| binop(BinOp::Add, &acc, x))
            }
            Func::Any | Func::All => {
                nargs(1, if func == Func::Any { "any" } else { "all" })?;
                let items = iterate(&args[0])?;
                Ok(Obj::Bool(if func == Func::Any {
                    items.iter().any(Obj::truthy)
                } else {
                    items.iter().all(Obj::truthy)
                }))
            }
            Func::IsInteger => {
                nargs(1, "is_integer")?;
                let r = round_int(&args[0])?;
                let d = binop(BinOp::Sub, &r, &args[0])?;
                let d = unary_abs(&d)?;
                compare(CmpOp::Lt, &d, &Obj::Float(0.00001)).map(Obj::Bool)
            }
            Func::EnqueueConfig => {
                nargs(1, "enqueue_config")?;
                self.enqueued.push(args[0].clone());
                Ok(Obj::None)
            }
            Func::Replace => {
                nargs(1, "replace")?;
                match &args[0] {
                    Obj::Line(l) if l.borrow().mutable => {
                        Ok(Obj::Line(Rc::new(RefCell::new(l.borrow().clone()))))
                    }
                    _ => raise(
                        "TypeError",
                        "replace() should be called on dataclass instances",
                    ),
                }
            }
            Func::Math(m) => math(m, &args, kwarg("rel_tol"), kwarg("abs_tol")),
        }
    }
}

fn unary_abs(x: &Obj) -> PyResult<Obj> {
    match x {
        Obj::Float(f) => Ok(Obj::Float(f.abs())),
        x => match x.as_int() {
            Some(i) => i.checked_abs().map(Obj::Int).ok_or_else(overflow),
            None => raise(
                "TypeError",
                format!("bad operand type for abs(): '{}'", x.type_name()),
            ),
        },
    }
}

/// `round(x)`: an int, halves to even.
fn round_int(x: &Obj) -> PyResult<Obj> {
    match x {
        Obj::Float(f) if f.is_nan() => raise("ValueError", "cannot convert float NaN to integer"),
        Obj::Float(f) if f.is_infinite() => {
            raise("OverflowError", "cannot convert float infinity to integer")
        }
        Obj::Float(f) => float_to_int(f.round_ties_even()),
        x => match x.as_int() {
            Some(i) => Ok(Obj::Int(i)),
            None => raise(
                "TypeError",
                format!("type {} doesn't define __round__ method", x.type_name()),
            ),
        },
    }
}

fn float_to_int(f: f64) -> PyResult<Obj> {
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if (-LIMIT..LIMIT).contains(&f) {
        Ok(Obj::Int(f as i128))
    } else {
        Err(overflow())
    }
}

fn real(x: &Obj) -> PyResult<f64> {
    x.as_f64()
        .ok_or_else(|| Raise::type_error(format!("must be real number, not {}", x.type_name())))
}

fn math(m: MathFn, args: &[Obj], rel_tol: Option<&Obj>, abs_tol: Option<&Obj>) -> PyResult<Obj> {
    let domain = || raise("ValueError", "math domain error");
    let one = || -> PyResult<f64> {
        match args {
            [x] => real(x),
            _ => raise(
                "TypeError",
                format!(
                    "math function takes exactly one argument ({} given)",
                    args.len()
                ),
            ),
        }
    };
    match m {
        MathFn::Ceil | MathFn::Floor => {
            let [x] = args else {
                return raise("TypeError", "math.ceil/floor take exactly one argument");
            };
            if let Some(i) = x.as_int() {
                return Ok(Obj::Int(i));
            }
            let f = real(x)?;
            if f.is_nan() {
                return raise("ValueError", "cannot convert float NaN to integer");
            }
            if f.is_infinite() {
                return raise("OverflowError", "cannot convert float infinity to integer");
            }
            float_to_int(if m == MathFn::Ceil {
                f.ceil()
            } else {
                f.floor()
            })
        }
        MathFn::Isclose => {
            let [a, b] = args else {
                return raise(
                    "TypeError",
                    "isclose() takes exactly 2 positional arguments",
                );
            };
            let (a, b) = (real(a)?, real(b)?);
            let rel = rel_tol.map(real).transpose()?.unwrap_or(1e-9);
            let abs = abs_tol.map(real).transpose()?.unwrap_or(0.0);
            if rel < 0.0 || abs < 0.0 {
                return raise("ValueError", "tolerances must be non-negative");
            }
            if a == b {
                return Ok(Obj::Bool(true));
            }
            if a.is_infinite() || b.is_infinite() {
                return Ok(Obj::Bool(false));
            }
            let diff = (b - a).abs();
            Ok(Obj::Bool(
                diff <= (rel * b).abs() || diff <= (rel * a).abs() || diff <= abs,
            ))
        }
        MathFn::Log => {
            let (x, base) = match args {
                [x] => (real(x)?, None),
                [x, b] => (real(x)?, Some(real(b)?)),
                _ => return raise("TypeError", "log expected 1 or 2 arguments"),
            };
            if x <= 0.0 || base.is_some_and(|b| b <= 0.0) {
                return domain();
            }
            match base {
                None => Ok(Obj::Float(x.ln())),
                Some(1.0) => raise("ZeroDivisionError", "float division by zero"),
                Some(b) => Ok(Obj::Float(x.ln() / b.ln())),
            }
        }
        MathFn::Log2 | MathFn::Log10 => {
            let x = one()?;
            if x <= 0.0 {
                return domain();
            }
            Ok(Obj::Float(if m == MathFn::Log2 {
                x.log2()
            } else {
                x.log10()
            }))
        }
        MathFn::Sqrt => {
            let x = one()?;
            if x < 0.0 {
                return domain();
            }
            Ok(Obj::Float(x.sqrt()))
        }
        MathFn::Exp => {
            let y = one()?.exp();
            if y.is_infinite() {
                return raise("OverflowError", "math range error");
            }
            Ok(Obj::Float(y))
        }
        MathFn::Pow => {
            let [a, b] = args else {
                return raise("TypeError", "pow expected 2 arguments");
            };
            let (a, b) = (real(a)?, real(b)?);
            if a == 0.0 && b < 0.0 || a < 0.0 && b.fract() != 0.0 && b.is_finite() {
                return domain();
            }
            Ok(Obj::Float(a.powf(b)))
        }
        MathFn::Fabs => Ok(Obj::Float(one()?.abs())),
        MathFn::Isnan => Ok(Obj::Bool(one()?.is_nan())),
        MathFn::Isinf => Ok(Obj::Bool(one()?.is_infinite())),
    }
}

/// Calling a type: `int(x)`, `float(x)`, `str(x)`, `type(x)`, ...
fn convert(t: PyType, args: Vec<Obj>) -> PyResult<Obj> {
    let Some(x) = args.first() else {
        return Ok(match t {
            PyType::Int => Obj::Int(0),
            PyType::Float => Obj::Float(0.0),
            PyType::Bool => Obj::Bool(false),
            PyType::Str => Obj::str(""),
            PyType::List => Obj::list(Vec::new()),
            PyType::Dict => Obj::dict(Dict::default()),
            PyType::Tuple => Obj::Tuple(Rc::from(Vec::new())),
            PyType::Set => Obj::Set(Rc::new(RefCell::new(Dict::default()))),
            other => {
                return raise(
                    "TypeError",
                    format!("cannot create '{}' instances", other.name()),
                )
            }
        });
    };
    if args.len() > 1 {
        return raise(
            "TypeError",
            format!("{}() takes at most 1 argument", t.name()),
        );
    }
    match t {
        PyType::Type => Ok(Obj::Type(x.type_of())),
        PyType::Bool => Ok(Obj::Bool(x.truthy())),
        PyType::Str => Ok(Obj::str(&x.to_str())),
        PyType::Int => match x {
            Obj::Float(f) if f.is_nan() => raise("ValueError", "cannot convert float NaN to integer"),
            Obj::Float(f) if f.is_infinite() => raise("OverflowError", "cannot convert float infinity to integer"),
            Obj::Float(f) => float_to_int(f.trunc()),
            Obj::Str(s) => parse_int(s)
                .map(Obj::Int)
                .ok_or_else(|| Raise::new("ValueError", format!("invalid literal for int() with base 10: {}", x.repr()))),
            x => match x.as_int() {
                Some(i) => Ok(Obj::Int(i)),
                None => raise(
                    "TypeError",
                    format!("int() argument must be a string, a bytes-like object or a real number, not '{}'", x.type_name()),
                ),
            },
        },
        PyType::Float => match x {
            Obj::Str(s) => py_float(s)
                .map(Obj::Float)
                .ok_or_else(|| Raise::new("ValueError", format!("could not convert string to float: {}", x.repr()))),
            x => match x.as_f64() {
                Some(f) => Ok(Obj::Float(f)),
                None => raise("TypeError", format!("float() argument must be a string or a real number, not '{}'", x.type_name())),
            },
        },
        PyType::List => Ok(Obj::list(iterate(x)?)),
        PyType::Tuple => Ok(Obj::Tuple(iterate(x)?.into())),
        PyType::Set => {
            let mut d = Dict::default();
            for k in iterate(x)? {
                d.set(k, Obj::None)?;
            }
            Ok(Obj::Set(Rc::new(RefCell::new(d))))
        }
        PyType::Dict => match x {
            Obj::Dict(d) => Ok(Obj::dict(d.borrow().clone())),
            other => raise("TypeError", format!("cannot convert '{}' to a dict", other.type_name())),
        },
        other => raise("TypeError", format!("cannot create '{}' instances", other.name())),
    }
}

/// A numeral without its `_` separators, which Python allows only singly between digits.
fn without_underscores(s: &str) -> Option<String> {
    if s.is_empty() || s.starts_with('_') || s.ends_with('_') || s.contains("__") {
        return None;
    }
    Some(s.chars().filter(|&c| c != '_').collect())
}

/// Python's `int(str)`: surrounding whitespace, a sign, digits with single `_` between them.
fn parse_int(s: &str) -> Option<i128> {
    let t = s.trim();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let clean = without_underscores(digits)?;
    if !clean.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let v: i128 = clean.parse().ok()?;
    Some(if neg { -v } else { v })
}

/// Python's `float(str)`: decimal and exponent forms, `inf`, `infinity`, `nan`, underscores
/// between digits.
pub(crate) fn py_float(s: &str) -> Option<f64> {
    let t = s.trim();
    let body = t.trim_start_matches(['+', '-']);
    let lower = body.to_ascii_lowercase();
    if t.len() - body.len() > 1 {
        return None;
    }
    let neg = t.starts_with('-');
    let v = match lower.as_str() {
        "inf" | "infinity" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => {
            let clean = without_underscores(body)?;
            if !clean
                .chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
            {
                return None;
            }
            clean.parse::<f64>().ok()?
        }
    };
    Some(if neg { -v } else { v })
}

pub(crate) fn len(x: &Obj) -> PyResult<usize> {
    Ok(match x {
        Obj::Str(s) => s.chars().count(),
        Obj::List(l) => l.borrow().len(),
        Obj::Tuple(t) => t.len(),
        Obj::Dict(d) | Obj::Set(d) => d.borrow().entries.len(),
        Obj::Line(l) if !l.borrow().mutable => 5,
        other => {
            return raise(
                "TypeError",
                format!("object of type '{}' has no len()", other.type_name()),
            )
        }
    })
}

/// `list.sort()`: stable, by `<` only, the first TypeError raised.
fn sort(items: &mut [Obj], reverse: bool) -> PyResult<()> {
    let mut err = None;
    items.sort_by(|a, b| {
        if err.is_some() {
            return std::cmp::Ordering::Equal;
        }
        let (x, y) = if reverse { (b, a) } else { (a, b) };
        match compare(CmpOp::Lt, x, y) {
            Ok(true) => std::cmp::Ordering::Less,
            Ok(false) => match compare(CmpOp::Lt, y, x) {
                Ok(true) => std::cmp::Ordering::Greater,
                Ok(false) => std::cmp::Ordering::Equal,
                Err(e) => {
                    err = Some(e);
                    std::cmp::Ordering::Equal
                }
            },
            Err(e) => {
                err = Some(e);
                std::cmp::Ordering::Equal
            }
        }
    });
    err.map_or(Ok(()), Err)
}
