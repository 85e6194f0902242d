//! Evaluation of the lowered snippets with Python's semantics: expressions, the statement
//! forms, the builtins, `math`, the methods and the checker's helpers (`is_integer`,
//! `enqueue_config`, and `dataclasses.replace` for the log lines).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use super::ir::*;
use super::obj::*;

/// A namespace (`globals` or `locals` of `eval`/`exec`).
pub(crate) type Names = HashMap<Box<str>, Obj>;

/// Where a snippet runs: the globals (the checker's `state`), the locals when `exec`/`eval`
/// get their own (`{'ll': ..., 'v': ...}`), and the configs `enqueue_config` queued.
pub(crate) struct Env<'a> {
    pub(crate) globals: &'a mut Names,
    pub(crate) locals: Option<&'a mut Names>,
    pub(crate) enqueued: &'a mut Vec<Obj>,
}

fn raise<T>(class: &'static str, msg: impl Into<String>) -> PyResult<T> {
    Err(Raise::new(class, msg))
}

fn overflow() -> Raise {
    Raise::new(
        "OverflowError",
        "integer beyond 128 bits (the rule engine's integers stop there)",
    )
}

impl Env<'_> {
    /// Runs a compiled snippet: the value of an expression, `None` after statements.
    pub(crate) fn run(&mut self, code: &Code) -> PyResult<Obj> {
        match code {
            Code::Eval(e) => self.eval(e),
            Code::Exec(body) => {
                self.exec(body)?;
                Ok(Obj::None)
            }
            Code::SyntaxError(m) => raise(
                "SyntaxError",
                m.trim_start_matches("SyntaxError: ").to_string(),
            ),
        }
    }

    fn lookup(&self, name: &str) -> PyResult<Obj> {
        if let Some(v) = self.locals.as_ref().and_then(|l| l.get(name)) {
            return Ok(v.clone());
        }
        if let Some(v) = self.globals.get(name) {
            return Ok(v.clone());
        }
        builtin(name)
            .ok_or_else(|| Raise::new("NameError", format!("name '{name}' is not defined")))
    }

    fn store(&mut self, name: &str, value: Obj) {
        match self.locals.as_mut() {
            Some(l) => l.insert(name.into(), value),
            None => self.globals.insert(name.into(), value),
        };
    }

    fn exec(&mut self, body: &[Stmt]) -> PyResult<()> {
        for s in body {
            match s {
                Stmt::Expr(e) => {
                    self.eval(e)?;
                }
                Stmt::Assign(targets, e) => {
                    let v = self.eval(e)?;
                    for t in targets {
                        self.assign(t, v.clone())?;
                    }
                }
                Stmt::AugAssign(t, op, e) => self.aug_assign(t, *op, e)?,
                Stmt::If(c, then, orelse) => {
                    if self.eval(c)?.truthy() {
                        self.exec(then)?;
                    } else {
                        self.exec(orelse)?;
                    }
                }
                Stmt::For(t, it, body) => {
                    let items = iterate(&self.eval(it)?)?;
                    for x in items {
                        self.assign(t, x)?;
                        self.exec(body)?;
                    }
                }
                Stmt::Import(bound) => {
                    for (n, o) in bound {
                        self.store(n, o.clone());
                    }
                }
                Stmt::Pass => {}
            }
        }
        Ok(())
    }

    fn assign(&mut self, t: &Target, v: Obj) -> PyResult<()> {
        match t {
            Target::Name(n) => {
                self.store(n, v);
                Ok(())
            }
            Target::Subscript(c, i) => {
                let c = self.eval(c)?;
                let i = self.eval(i)?;
                set_item(&c, i, v)
            }
            Target::Attr(o, a) => {
                let o = self.eval(o)?;
                set_attr(&o, *a, v)
            }
            Target::Tuple(ts) => {
                let items = iterate(&v)?;
                if items.len() != ts.len() {
                    return raise(
                        "ValueError",
                        format!(
                            "expected {} values to unpack, got {}",
                            ts.len(),
                            items.len()
                        ),
                    );
                }
                for (t, x) in ts.iter().zip(items) {
                    self.assign(t, x)?;
                }
                Ok(())
            }
        }
    }

    fn aug_assign(&mut self, t: &Target, op: BinOp, e: &Expr) -> PyResult<()> {
        match t {
            Target::Name(n) => {
                let cur = self.lookup(n)?;
                let rhs = self.eval(e)?;
                let new = inplace(op, &cur, &rhs)?;
                self.store(n, new);
                Ok(())
            }
            Target::Subscript(c, i) => {
                let c = self.eval(c)?;
                let i = self.eval(i)?;
                let cur = get_item(&c, &i)?;
                let rhs = self.eval(e)?;
                set_item(&c, i, inplace(op, &cur, &rhs)?)
            }
            Target::Attr(o, a) => {
                let o = self.eval(o)?;
                let cur = get_attr(&o, *a)?;
                let rhs = self.eval(e)?;
                set_attr(&o, *a, inplace(op, &cur, &rhs)?)
            }
            Target::Tuple(_) => raise("SyntaxError", "illegal expression for augmented assignment"),
        }
    }

    pub(crate) fn eval(&mut self, e: &Expr) -> PyResult<Obj> {
        match e {
            Expr::Const(c) => Ok(c.clone()),
            Expr::Name(n) => self.lookup(n),
            Expr::Attr(o, a) => {
                let o = self.eval(o)?;
                get_attr(&o, *a)
            }
            Expr::Subscript(c, i) => {
                let c = self.eval(c)?;
                let i = self.eval(i)?;
                get_item(&c, &i)
            }
            Expr::Bin(op, a, b) => {
                let a = self.eval(a)?;
                let b = self.eval(b)?;
                binop(*op, &a, &b)
            }
            Expr::Unary(op, a) => unary(*op, &self.eval(a)?),
            Expr::Bool(and, items) => {
                let mut last = Obj::None;
                for x in items {
                    last = self.eval(x)?;
                    if last.truthy() != *and {
                        return Ok(last);
                    }
                }
                Ok(last)
            }
            Expr::Compare(first, rest) => {
                let mut left = self.eval(first)?;
                for (op, r) in rest {
                    let right = self.eval(r)?;
                    if !compare(*op, &left, &right)? {
                        return Ok(Obj::Bool(false));
                    }
                    left = right;
                }
                Ok(Obj::Bool(true))
            }
            Expr::IfExp(c, a, b) => {
                if self.eval(c)?.truthy() {
                    self.eval(a)
                } else {
                    self.eval(b)
                }
            }
            Expr::List(items) => Ok(Obj::list(self.eval_all(items)?)),
            Expr::Tuple(items) => Ok(Obj::Tuple(self.eval_all(items)?.into())),
            Expr::Set(items) => {
                let mut d = Dict::default();
                for x in self.eval_all(items)? {
                    d.set(x, Obj::None)?;
                }
                Ok(Obj::Set(Rc::new(RefCell::new(d))))
            }
            Expr::Dict(items) => {
                let mut d = Dict::default();
                for (k, v) in items {
                    let k = self.eval(k)?;
                    let v = self.eval(v)?;
                    d.set(k, v)?;
                }
                Ok(Obj::dict(d))
            }
            Expr::Call(f, args, kwargs) => {
                let f = self.eval(f)?;
                let args = self.eval_all(args)?;
                let mut kw = Vec::with_capacity(kwargs.len());
                for (n, e) in kwargs {
                    kw.push((&**n, self.eval(e)?));
                }
                self.call(&f, args, &kw)
            }
            Expr::MethodCall(o, m, args) => {
                let o = self.eval(o)?;
                let args = self.eval_all(args)?;
                call_method(&o, *m, args)
            }
        }
    }

    fn eval_all(&mut self, items: &[Expr]) -> PyResult<Vec<Obj>> {
        items.iter().map(|x| self.eval(x)).collect()
    }

    fn call(&mut self, f: &Obj, args: Vec<Obj>, kw: &[(&str, Obj)]) -> PyResult<Obj> {
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
                match &args[0] {
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

fn len(x: &Obj) -> PyResult<usize> {
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

fn get_attr(o: &Obj, a: Attr) -> PyResult<Obj> {
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

fn set_attr(o: &Obj, a: Attr, v: Obj) -> PyResult<()> {
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

fn set_item(c: &Obj, i: Obj, v: Obj) -> PyResult<()> {
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
fn inplace(op: BinOp, a: &Obj, b: &Obj) -> PyResult<Obj> {
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
        (BinOp::Mod, Obj::Str(_), _) => raise(
            "TypeError",
            "%-formatting is not supported by the rule engine",
        ),
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

fn unary(op: UnOp, a: &Obj) -> PyResult<Obj> {
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

fn no_method(o: &Obj, m: Method) -> Raise {
    Raise::new(
        "AttributeError",
        format!(
            "'{}' object has no attribute '{}'",
            o.type_name(),
            format!("{m:?}").to_lowercase()
        ),
    )
}

fn call_method(o: &Obj, m: Method, args: Vec<Obj>) -> PyResult<Obj> {
    let arity = |lo: usize, hi: usize| -> PyResult<()> {
        if args.len() < lo || args.len() > hi {
            return raise(
                "TypeError",
                format!("wrong number of arguments ({} given)", args.len()),
            );
        }
        Ok(())
    };
    match (o, m) {
        (Obj::Str(s), Method::Format) => format_str(s, &args).map(|t| Obj::str(&t)),
        (Obj::Str(s), Method::Lower) => arity(0, 0).map(|_| Obj::str(&s.to_lowercase())),
        (Obj::Str(s), Method::Upper) => arity(0, 0).map(|_| Obj::str(&s.to_uppercase())),
        (Obj::Str(s), Method::Strip) => {
            arity(0, 0)?;
            Ok(Obj::str(s.trim()))
        }
        (Obj::Str(s), Method::Startswith | Method::Endswith) => {
            arity(1, 1)?;
            let prefixes = match &args[0] {
                Obj::Str(p) => vec![p.to_string()],
                Obj::Tuple(t) => t
                    .iter()
                    .map(|p| match p {
                        Obj::Str(p) => Ok(p.to_string()),
                        other => raise(
                            "TypeError",
                            format!(
                                "tuple for startswith must only contain str, not {}",
                                other.type_name()
                            ),
                        ),
                    })
                    .collect::<PyResult<_>>()?,
                other => {
                    return raise(
                        "TypeError",
                        format!(
                            "startswith first arg must be str or a tuple of str, not {}",
                            other.type_name()
                        ),
                    )
                }
            };
            let hit = prefixes.iter().any(|p| {
                if m == Method::Startswith {
                    s.starts_with(p.as_str())
                } else {
                    s.ends_with(p.as_str())
                }
            });
            Ok(Obj::Bool(hit))
        }
        (Obj::Str(s), Method::Count) => {
            arity(1, 1)?;
            match &args[0] {
                Obj::Str(n) if n.is_empty() => Ok(Obj::Int(s.chars().count() as i128 + 1)),
                Obj::Str(n) => Ok(Obj::Int(s.matches(&**n).count() as i128)),
                other => raise(
                    "TypeError",
                    format!("must be str, not {}", other.type_name()),
                ),
            }
        }
        (Obj::List(l), Method::Count) => {
            arity(1, 1)?;
            Ok(Obj::Int(
                l.borrow().iter().filter(|x| same(x, &args[0])).count() as i128,
            ))
        }
        (Obj::List(l), Method::Append) => {
            arity(1, 1)?;
            l.borrow_mut().push(args[0].clone());
            Ok(Obj::None)
        }
        (Obj::List(l), Method::Extend) => {
            arity(1, 1)?;
            let items = iterate(&args[0])?;
            l.borrow_mut().extend(items);
            Ok(Obj::None)
        }
        (Obj::Dict(d), Method::Update) => {
            arity(0, 1)?;
            if let Some(other) = args.first() {
                let entries = match other {
                    Obj::Dict(x) => x.borrow().entries.clone(),
                    other => {
                        return raise(
                            "TypeError",
                            format!("'{}' object is not a mapping", other.type_name()),
                        )
                    }
                };
                let mut d = d.borrow_mut();
                for (k, v) in entries {
                    d.set(k, v)?;
                }
            }
            Ok(Obj::None)
        }
        (Obj::Dict(d), Method::Get) => {
            arity(1, 2)?;
            let v = d.borrow().get(&args[0])?.cloned();
            Ok(v.unwrap_or_else(|| args.get(1).cloned().unwrap_or(Obj::None)))
        }
        (Obj::Dict(d), Method::Values) => {
            arity(0, 0)?;
            Ok(Obj::list(
                d.borrow().entries.iter().map(|(_, v)| v.clone()).collect(),
            ))
        }
        (Obj::Dict(d), Method::Keys) => {
            arity(0, 0)?;
            Ok(Obj::list(
                d.borrow().entries.iter().map(|(k, _)| k.clone()).collect(),
            ))
        }
        (Obj::Dict(d), Method::Items) => {
            arity(0, 0)?;
            Ok(Obj::list(
                d.borrow()
                    .entries
                    .iter()
                    .map(|(k, v)| Obj::Tuple(vec![k.clone(), v.clone()].into()))
                    .collect(),
            ))
        }
        (o, m) => Err(no_method(o, m)),
    }
}

/// `'...'.format(*args)` for plain fields (`{}`, `{0}`; the loader refuses the rest).
fn format_str(s: &str, args: &[Obj]) -> PyResult<String> {
    let mut out = String::new();
    let mut auto = 0;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let field: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let i = if field.is_empty() {
                    auto += 1;
                    auto - 1
                } else {
                    match field.parse::<usize>() {
                        Ok(i) => i,
                        Err(_) => return raise("KeyError", format!("'{field}'")),
                    }
                };
                match args.get(i) {
                    Some(a) => out.push_str(&a.to_str()),
                    None => {
                        return raise(
                            "IndexError",
                            format!("Replacement index {i} out of range for positional args tuple"),
                        )
                    }
                }
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::python::compile;
    use super::*;

    fn run(code: &str, exec: bool, names: &mut Names) -> PyResult<Obj> {
        let c = compile(code, exec).unwrap();
        let mut enq = Vec::new();
        let mut env = Env {
            globals: names,
            locals: None,
            enqueued: &mut enq,
        };
        env.run(&c)
    }

    #[test]
    fn evaluates_as_python_does() {
        let mut g = Names::new();
        g.insert("s".into(), Obj::dict(Dict::default()));
        g.insert("math".into(), Obj::Math);
        run(
            "s.update({'a': 1, 'b': [1, 2]}); s['a'] += 2; s['b'] += [3]",
            true,
            &mut g,
        )
        .unwrap();
        assert!(run("s['a'] == 3.0 and len(s['b']) == 3", false, &mut g)
            .unwrap()
            .truthy());
        assert!(run("sorted(['b', 'a']) == ['a', 'b']", false, &mut g)
            .unwrap()
            .truthy());
        assert!(run(
            "7 // -2 == -4 and 7 % -2 == -1 and -7 % 2 == 1",
            false,
            &mut g
        )
        .unwrap()
        .truthy());
        assert!(run("(True | False) is True and 1 < 2 <= 2", false, &mut g)
            .unwrap()
            .truthy());
        assert!(run(
            "math.isclose(1.0, 1.0 + 1e-12) and math.ceil(2.1) == 3",
            false,
            &mut g
        )
        .unwrap()
        .truthy());
        g.insert("is_integer".into(), Obj::Func(Func::IsInteger));
        assert!(run(
            "is_integer(4.000001) and not is_integer(4.5)",
            false,
            &mut g
        )
        .unwrap()
        .truthy());
        assert_eq!(
            run("is_integer('4')", false, &mut g).unwrap_err().class,
            "TypeError"
        );
        assert_eq!(
            run("s['missing']", false, &mut g).unwrap_err().class,
            "KeyError"
        );
        assert_eq!(
            run("'x' > 1", false, &mut g).unwrap_err().class,
            "TypeError"
        );
        assert_eq!(
            run("'a_{}.yaml'.format('b')", false, &mut g)
                .unwrap()
                .to_str(),
            "a_b.yaml"
        );
        assert!(run(
            "isinstance(True, int) and type(True) == bool",
            false,
            &mut g
        )
        .unwrap()
        .truthy());
        assert_eq!(
            run("int('12') + int(3.9) + round(2.5)", false, &mut g)
                .unwrap()
                .as_int(),
            Some(17)
        );
        run(
            "from math import ceil\nx = ceil(2.5)\nif x == 3:\n    s['c'] = x",
            true,
            &mut g,
        )
        .unwrap();
        assert_eq!(run("s['c']", false, &mut g).unwrap().as_int(), Some(3));
    }
}
