//! Python's operators on objects: attributes, subscripts, arithmetic, comparisons.

use std::cell::RefCell;
use std::rc::Rc;

use super::ir::*;
use super::obj::*;

pub(crate) fn raise<T>(class: &'static str, msg: impl Into<String>) -> PyResult<T> {
    Err(Raise::new(class, msg))
}

/// Beyond the engine's integers.
pub(crate) fn overflow() -> Raise {
    Raise::at_limit(
        "OverflowError",
        "integer beyond 128 bits (the rule engine's integers stop there)",
    )
}

pub(crate) fn get_attr(o: &Obj, a: Attr) -> PyResult<Obj> {
    match (o, a) {
        (Obj::Math, Attr::Math(n)) => Ok(super::python::math_name(n)
            .map(|(_, o)| o)
            .unwrap_or(Obj::None)),
        (Obj::Line(l), a) if !matches!(a, Attr::Math(_)) => {
            let l = l.borrow();
            Ok(match a {
                Attr::FullString => l.full_string.clone(),
                Attr::Timestamp => l.timestamp.clone(),
                Attr::Key => l.key.clone(),
                Attr::Value => l.value.clone(),
                Attr::Lineno => l.lineno.clone(),
                Attr::Math(_) => unreachable!("excluded above"),
            })
        }
        (o, a) => raise(
            "AttributeError",
            format!(
                "'{}' object has no attribute '{}'",
                o.type_name(),
                attr_name(a)
            ),
        ),
    }
}

fn attr_name(a: Attr) -> &'static str {
    match a {
        Attr::FullString => "full_string",
        Attr::Timestamp => "timestamp",
        Attr::Key => "key",
        Attr::Value => "value",
        Attr::Lineno => "lineno",
        Attr::Math(n) => n,
    }
}

pub(crate) fn set_attr(o: &Obj, a: Attr, v: Obj) -> PyResult<()> {
    match (o, a) {
        (Obj::Line(l), a) if !matches!(a, Attr::Math(_)) => {
            let mut l = l.borrow_mut();
            if !l.mutable {
                return raise("AttributeError", "can't set attribute");
            }
            match a {
                Attr::FullString => l.full_string = v,
                Attr::Timestamp => l.timestamp = v,
                Attr::Key => l.key = v,
                Attr::Value => l.value = v,
                Attr::Lineno => l.lineno = v,
                Attr::Math(_) => unreachable!("excluded above"),
            }
            Ok(())
        }
        (o, a) => raise(
            "AttributeError",
            format!(
                "'{}' object has no attribute '{}'",
                o.type_name(),
                attr_name(a)
            ),
        ),
    }
}

fn index_of(len: usize, i: &Obj, what: &str) -> PyResult<usize> {
    let Some(i) = i.as_int() else {
        return raise(
            "TypeError",
            format!(
                "{what} indices must be integers or slices, not {}",
                i.type_name()
            ),
        );
    };
    let j = if i < 0 { i + len as i128 } else { i };
    if j < 0 || j >= len as i128 {
        return raise("IndexError", format!("{what} index out of range"));
    }
    Ok(j as usize)
}

pub(crate) fn get_item(c: &Obj, i: &Obj) -> PyResult<Obj> {
    match c {
        Obj::Dict(d) => d
            .borrow()
            .get(i)?
            .cloned()
            .ok_or_else(|| Raise::new("KeyError", i.repr())),
        Obj::List(l) => {
            let l = l.borrow();
            Ok(l[index_of(l.len(), i, "list")?].clone())
        }
        Obj::Tuple(t) => Ok(t[index_of(t.len(), i, "tuple")?].clone()),
        Obj::Str(s) => {
            let chars: Vec<char> = s.chars().collect();
            let j = index_of(chars.len(), i, "string")?;
            Ok(Obj::str(chars[j].encode_utf8(&mut [0; 4])))
        }
        Obj::Line(l) if !l.borrow().mutable => {
            let l = l.borrow();
            let fields = [&l.full_string, &l.timestamp, &l.key, &l.value, &l.lineno];
            Ok(fields[index_of(5, i, "tuple")?].clone())
        }
        other => raise(
            "TypeError",
            format!("'{}' object is not subscriptable", other.type_name()),
        ),
    }
}

pub(crate) fn set_item(c: &Obj, i: Obj, v: Obj) -> PyResult<()> {
    match c {
        Obj::Dict(d) => d.borrow_mut().set(i, v),
        Obj::List(l) => {
            let mut l = l.borrow_mut();
            let j = index_of(l.len(), &i, "list assignment")?;
            l[j] = v;
            Ok(())
        }
        other => raise(
            "TypeError",
            format!(
                "'{}' object does not support item assignment",
                other.type_name()
            ),
        ),
    }
}

/// `x op= y`: lists grow in place (`+=`), everything else is `x = x op y`.
pub(crate) fn inplace(op: BinOp, a: &Obj, b: &Obj) -> PyResult<Obj> {
    if let (BinOp::Add, Obj::List(l)) = (op, a) {
        let items = iterate(b)?;
        l.borrow_mut().extend(items);
        return Ok(a.clone());
    }
    binop(op, a, b)
}

fn unsupported_operands(op: BinOp, a: &Obj, b: &Obj) -> Raise {
    Raise::type_error(format!(
        "unsupported operand type(s) for {}: '{}' and '{}'",
        op.symbol(),
        a.type_name(),
        b.type_name()
    ))
}

pub(crate) fn binop(op: BinOp, a: &Obj, b: &Obj) -> PyResult<Obj> {
    // Both exact integers (ints or bools).
    if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
        if matches!(op, BinOp::BitOr | BinOp::BitAnd | BinOp::BitXor) {
            let r = match op {
                BinOp::BitOr => x | y,
                BinOp::BitAnd => x & y,
                _ => x ^ y,
            };
            return Ok(if matches!((a, b), (Obj::Bool(_), Obj::Bool(_))) {
                Obj::Bool(r != 0)
            } else {
                Obj::Int(r)
            });
        }
        return int_op(op, x, y);
    }
    if let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) {
        return float_op(op, x, y).unwrap_or_else(|| Err(unsupported_operands(op, a, b)));
    }
    match (op, a, b) {
        (BinOp::Add, Obj::Str(x), Obj::Str(y)) => Ok(Obj::str(&format!("{x}{y}"))),
        (BinOp::Add, Obj::List(x), Obj::List(y)) => {
            let mut v = x.borrow().clone();
            v.extend(y.borrow().iter().cloned());
            Ok(Obj::list(v))
        }
        (BinOp::Add, Obj::Tuple(x), Obj::Tuple(y)) => {
            Ok(Obj::Tuple(x.iter().chain(y.iter()).cloned().collect()))
        }
        (BinOp::Mul, Obj::Str(s), n) | (BinOp::Mul, n, Obj::Str(s)) if n.as_int().is_some() => {
            Ok(Obj::str(&s.repeat(n.as_int().unwrap_or(0).max(0) as usize)))
        }
        (BinOp::Mul, Obj::List(l), n) | (BinOp::Mul, n, Obj::List(l)) if n.as_int().is_some() => {
            let k = n.as_int().unwrap_or(0).max(0) as usize;
            let l = l.borrow();
            Ok(Obj::list(
                l.iter().cloned().cycle().take(l.len() * k).collect(),
            ))
        }
        (BinOp::BitOr, Obj::Set(x), Obj::Set(y)) => {
            let mut d = x.borrow().clone();
            for (k, _) in y.borrow().entries.iter() {
                d.set(k.clone(), Obj::None)?;
            }
            Ok(Obj::Set(Rc::new(RefCell::new(d))))
        }
        (BinOp::BitOr, Obj::Dict(x), Obj::Dict(y)) => {
            let mut d = x.borrow().clone();
            for (k, v) in y.borrow().entries.iter() {
                d.set(k.clone(), v.clone())?;
            }
            Ok(Obj::dict(d))
        }
        (BinOp::Mod, Obj::Str(_), _) => Err(Raise::at_limit(
            "TypeError",
            "%-formatting is not supported by the rule engine",
        )),
        _ => Err(unsupported_operands(op, a, b)),
    }
}

fn int_op(op: BinOp, x: i128, y: i128) -> PyResult<Obj> {
    let ok = |r: Option<i128>| r.map(Obj::Int).ok_or_else(overflow);
    match op {
        BinOp::Add => ok(x.checked_add(y)),
        BinOp::Sub => ok(x.checked_sub(y)),
        BinOp::Mul => ok(x.checked_mul(y)),
        BinOp::Div => {
            if y == 0 {
                return raise("ZeroDivisionError", "division by zero");
            }
            Ok(Obj::Float(x as f64 / y as f64))
        }
        BinOp::FloorDiv | BinOp::Mod => {
            if y == 0 {
                return raise(
                    "ZeroDivisionError",
                    if op == BinOp::Mod {
                        "integer modulo by zero"
                    } else {
                        "integer division or modulo by zero"
                    },
                );
            }
            let q = x.checked_div_euclid(y).ok_or_else(overflow)?;
            let r = x.rem_euclid(y);
            // Python rounds the quotient down and gives the remainder the divisor's sign.
            let (q, r) = if y < 0 && r != 0 {
                (q - 1, r + y)
            } else {
                (q, r)
            };
            Ok(Obj::Int(if op == BinOp::Mod { r } else { q }))
        }
        BinOp::Pow => {
            if y < 0 {
                if x == 0 {
                    return raise(
                        "ZeroDivisionError",
                        "0.0 cannot be raised to a negative power",
                    );
                }
                return Ok(Obj::Float((x as f64).powf(y as f64)));
            }
            let e = u32::try_from(y).map_err(|_| overflow())?;
            ok(x.checked_pow(e))
        }
        BinOp::BitOr | BinOp::BitAnd | BinOp::BitXor => unreachable!("handled by the caller"),
    }
}

fn float_op(op: BinOp, x: f64, y: f64) -> Option<PyResult<Obj>> {
    let f = |v: f64| Some(Ok(Obj::Float(v)));
    match op {
        BinOp::Add => f(x + y),
        BinOp::Sub => f(x - y),
        BinOp::Mul => f(x * y),
        BinOp::Div if y == 0.0 => Some(raise("ZeroDivisionError", "float division by zero")),
        BinOp::Div => f(x / y),
        BinOp::FloorDiv | BinOp::Mod if y == 0.0 => {
            Some(raise("ZeroDivisionError", "float modulo"))
        }
        BinOp::Mod => {
            let mut r = x % y;
            if r != 0.0 && (r < 0.0) != (y < 0.0) {
                r += y;
            }
            f(r)
        }
        BinOp::FloorDiv => {
            let mut r = x % y;
            if r != 0.0 && (r < 0.0) != (y < 0.0) {
                r += y;
            }
            f(((x - r) / y).round())
        }
        BinOp::Pow => {
            if x == 0.0 && y < 0.0 {
                return Some(raise(
                    "ZeroDivisionError",
                    "0.0 cannot be raised to a negative power",
                ));
            }
            if x < 0.0 && y.fract() != 0.0 && y.is_finite() {
                return Some(raise(
                    "ValueError",
                    "a negative number to a fractional power is complex",
                ));
            }
            let r = x.powf(y);
            if r.is_infinite() && x.is_finite() && y.is_finite() {
                return Some(raise(
                    "OverflowError",
                    "(34, 'Numerical result out of range')",
                ));
            }
            f(r)
        }
        BinOp::BitOr | BinOp::BitAnd | BinOp::BitXor => None,
    }
}

pub(crate) fn unary(op: UnOp, a: &Obj) -> PyResult<Obj> {
    let bad = |sym: &str| {
        raise(
            "TypeError",
            format!("bad operand type for unary {sym}: '{}'", a.type_name()),
        )
    };
    match op {
        UnOp::Not => Ok(Obj::Bool(!a.truthy())),
        UnOp::Neg => match a {
            Obj::Float(f) => Ok(Obj::Float(-f)),
            x => match x.as_int() {
                Some(i) => i.checked_neg().map(Obj::Int).ok_or_else(overflow),
                None => bad("-"),
            },
        },
        UnOp::Pos => match a {
            Obj::Float(f) => Ok(Obj::Float(*f)),
            x => x.as_int().map(Obj::Int).map_or_else(|| bad("+"), Ok),
        },
        UnOp::Invert => a
            .as_int()
            .map(|i| Obj::Int(!i))
            .map_or_else(|| bad("~"), Ok),
    }
}

fn identical(a: &Obj, b: &Obj) -> bool {
    match (a, b) {
        (Obj::None, Obj::None) => true,
        (Obj::Bool(x), Obj::Bool(y)) => x == y,
        (Obj::List(x), Obj::List(y)) => Rc::ptr_eq(x, y),
        (Obj::Dict(x), Obj::Dict(y)) | (Obj::Set(x), Obj::Set(y)) => Rc::ptr_eq(x, y),
        (Obj::Line(x), Obj::Line(y)) => Rc::ptr_eq(x, y),
        (Obj::Tuple(x), Obj::Tuple(y)) => Rc::ptr_eq(x, y),
        (Obj::Type(x), Obj::Type(y)) => x == y,
        (Obj::Func(x), Obj::Func(y)) => x == y,
        (Obj::Math, Obj::Math) => true,
        // Small ints and short strings are shared objects in CPython; the rule files only ask
        // `is None` / `is not None`.
        (Obj::Int(x), Obj::Int(y)) => x == y,
        (Obj::Str(x), Obj::Str(y)) => x == y,
        _ => false,
    }
}

/// One comparison of a chain.
pub(crate) fn compare(op: CmpOp, a: &Obj, b: &Obj) -> PyResult<bool> {
    let order = |sym: &str, f: fn(std::cmp::Ordering) -> bool| -> PyResult<bool> {
        // Numbers: exact for two ints, as floats otherwise (NaN compares false).
        if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
            return Ok(f(x.cmp(&y)));
        }
        if let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) {
            return Ok(x.partial_cmp(&y).is_some_and(f));
        }
        match (a, b) {
            (Obj::Str(x), Obj::Str(y)) => Ok(f(x.cmp(y))),
            (Obj::List(_), Obj::List(_)) | (Obj::Tuple(_), Obj::Tuple(_)) => {
                let (x, y) = (iterate(a)?, iterate(b)?);
                for (p, q) in x.iter().zip(&y) {
                    if !same(p, q) {
                        return compare_sym(sym, p, q);
                    }
                }
                Ok(f(x.len().cmp(&y.len())))
            }
            _ => raise(
                "TypeError",
                format!(
                    "'{sym}' not supported between instances of '{}' and '{}'",
                    a.type_name(),
                    b.type_name()
                ),
            ),
        }
    };
    match op {
        CmpOp::Eq => Ok(eq(a, b)),
        CmpOp::NotEq => Ok(!eq(a, b)),
        CmpOp::Lt => order("<", |o| o.is_lt()),
        CmpOp::LtE => order("<=", |o| o.is_le()),
        CmpOp::Gt => order(">", |o| o.is_gt()),
        CmpOp::GtE => order(">=", |o| o.is_ge()),
        CmpOp::In => contains(b, a),
        CmpOp::NotIn => contains(b, a).map(|x| !x),
        CmpOp::Is => Ok(identical(a, b)),
        CmpOp::IsNot => Ok(!identical(a, b)),
    }
}

fn compare_sym(sym: &str, a: &Obj, b: &Obj) -> PyResult<bool> {
    let op = match sym {
        "<" => CmpOp::Lt,
        "<=" => CmpOp::LtE,
        ">" => CmpOp::Gt,
        _ => CmpOp::GtE,
    };
    compare(op, a, b)
}
