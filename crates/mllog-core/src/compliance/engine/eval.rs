//! Evaluation of the lowered snippets with Python's semantics: expressions, the statement
//! forms, the builtins, `math`, the methods and the checker's helpers (`is_integer`,
//! `enqueue_config`, and `dataclasses.replace` for the log lines).

use std::cell::RefCell;
use std::rc::Rc;

use super::ir::*;
use super::methods::call_method;
use super::obj::*;
use super::ops::*;

/// A namespace (`globals` or `locals` of `eval`/`exec`).
pub(crate) type Names = rustc_hash::FxHashMap<Box<str>, Obj>;

/// Where a snippet runs: the globals (the checker's `state`), the locals when `exec`/`eval`
/// get their own (`{'ll': ..., 'v': ...}`), and the configs `enqueue_config` queued.
pub(crate) struct Env<'a> {
    pub(crate) globals: &'a mut Names,
    pub(crate) locals: Option<&'a mut Names>,
    pub(crate) enqueued: &'a mut Vec<Obj>,
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
        let mut g = Names::default();
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
