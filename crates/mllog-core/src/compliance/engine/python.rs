//! Snippets parsed by `rustpython-parser` (Python's grammar, maintained outside this project)
//! and lowered to the engine's forms (`ir`). Whatever the engine cannot run faithfully is
//! refused here, at load, with the construct and its line: never skipped at run time.

use rustpython_parser::ast::{self, Constant, Ranged};
use rustpython_parser::Mode;

use super::ir::*;
use super::obj::{Func, MathFn, Obj};

/// A construct the engine does not run, and the line of the snippet it is on (1-based).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Unsupported {
    pub(crate) line: usize,
    pub(crate) construct: String,
}

/// Compiles a snippet as the checker runs it: `eval(text.strip())` or `exec(text.strip())`.
pub(crate) fn compile(text: &str, exec: bool) -> Result<Code, Unsupported> {
    let src = text.trim();
    let mode = if exec { Mode::Module } else { Mode::Expression };
    let tree = match rustpython_parser::parse(src, mode, "<string>") {
        Ok(t) => t,
        // Python raises the SyntaxError when the snippet runs, and the checker reports it there.
        Err(e) => return Ok(Code::SyntaxError(format!("SyntaxError: {}", e.error))),
    };
    if too_deep_brackets(src, mode) {
        return Ok(Code::SyntaxError(
            "SyntaxError: too many nested parentheses".into(),
        ));
    }
    let l = Lower {
        src,
        depth: Default::default(),
    };
    match tree {
        ast::Mod::Expression(e) => Ok(Code::Eval(l.expr(&e.body)?)),
        ast::Mod::Module(m) => Ok(Code::Exec(l.stmts(&m.body)?)),
        _ => Err(Unsupported {
            line: 1,
            construct: "this kind of snippet".into(),
        }),
    }
}

/// The `math` names the engine has: functions, and the constants `pi`, `e`, `inf`, `nan`.
pub(crate) fn math_name(name: &str) -> Option<(&'static str, Obj)> {
    let f = |m| Obj::Func(Func::Math(m));
    Some(match name {
        "ceil" => ("ceil", f(MathFn::Ceil)),
        "floor" => ("floor", f(MathFn::Floor)),
        "isclose" => ("isclose", f(MathFn::Isclose)),
        "log" => ("log", f(MathFn::Log)),
        "log2" => ("log2", f(MathFn::Log2)),
        "log10" => ("log10", f(MathFn::Log10)),
        "sqrt" => ("sqrt", f(MathFn::Sqrt)),
        "exp" => ("exp", f(MathFn::Exp)),
        "pow" => ("pow", f(MathFn::Pow)),
        "fabs" => ("fabs", f(MathFn::Fabs)),
        "isnan" => ("isnan", f(MathFn::Isnan)),
        "isinf" => ("isinf", f(MathFn::Isinf)),
        "pi" => ("pi", Obj::Float(std::f64::consts::PI)),
        "e" => ("e", Obj::Float(std::f64::consts::E)),
        "inf" => ("inf", Obj::Float(f64::INFINITY)),
        "nan" => ("nan", Obj::Float(f64::NAN)),
        _ => return None,
    })
}

fn method(name: &str) -> Option<Method> {
    Some(match name {
        "format" => Method::Format,
        "update" => Method::Update,
        "get" => Method::Get,
        "values" => Method::Values,
        "keys" => Method::Keys,
        "items" => Method::Items,
        "extend" => Method::Extend,
        "append" => Method::Append,
        "lower" => Method::Lower,
        "upper" => Method::Upper,
        "strip" => Method::Strip,
        "startswith" => Method::Startswith,
        "endswith" => Method::Endswith,
        "count" => Method::Count,
        _ => return None,
    })
}

fn line_attr(name: &str) -> Option<Attr> {
    Some(match name {
        "full_string" => Attr::FullString,
        "timestamp" => Attr::Timestamp,
        "key" => Attr::Key,
        "value" => Attr::Value,
        "lineno" => Attr::Lineno,
        _ => return None,
    })
}

/// The `{}` fields of a format string are the plain ones the engine formats (`{}`, `{0}`,
/// `{name}`): no conversion, no format spec.
pub(crate) fn plain_format(s: &str) -> bool {
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
            }
            '{' => {
                for c in chars.by_ref() {
                    match c {
                        '}' => break,
                        '!' | ':' | '[' | '.' | '{' => return false,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    true
}

struct Lower<'a> {
    src: &'a str,
    /// How deep the expression being lowered is nested.
    depth: std::cell::Cell<usize>,
}

/// How deep an expression may nest. Python compiles a few thousand levels (then raises
/// RecursionError); lowering, evaluating and dropping a tree recurse once per level, so the
/// engine stops well within a thread's stack, far beyond any rule file's nesting.
const MAX_NESTING: usize = 500;

/// How deep brackets may nest: CPython's tokenizer raises "too many nested parentheses"
/// beyond this.
const MAX_BRACKETS: usize = 200;

/// Whether `src` nests brackets deeper than Python's tokenizer takes (brackets inside strings
/// and comments are not counted: the tokens are).
fn too_deep_brackets(src: &str, mode: Mode) -> bool {
    use rustpython_parser::Tok;
    // Cheap first: fewer opening brackets than the limit cannot nest beyond it.
    if src
        .bytes()
        .filter(|b| matches!(b, b'(' | b'[' | b'{'))
        .count()
        <= MAX_BRACKETS
    {
        return false;
    }
    let mut depth = 0usize;
    for tok in rustpython_parser::lexer::lex(src, mode).flatten() {
        match tok.0 {
            Tok::Lpar | Tok::Lsqb | Tok::Lbrace => {
                depth += 1;
                if depth > MAX_BRACKETS {
                    return true;
                }
            }
            Tok::Rpar | Tok::Rsqb | Tok::Rbrace => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

type R<T> = Result<T, Unsupported>;

impl Lower<'_> {
    fn no(&self, at: &impl Ranged, what: impl Into<String>) -> Unsupported {
        let off = usize::from(at.range().start()).min(self.src.len());
        Unsupported {
            line: self.src[..off].matches('\n').count() + 1,
            construct: what.into(),
        }
    }

    fn stmts(&self, body: &[ast::Stmt]) -> R<Vec<Stmt>> {
        body.iter().map(|s| self.stmt(s)).collect()
    }

    fn stmt(&self, s: &ast::Stmt) -> R<Stmt> {
        Ok(match s {
            ast::Stmt::Expr(e) => Stmt::Expr(self.expr(&e.value)?),
            ast::Stmt::Assign(a) => Stmt::Assign(
                a.targets.iter().map(|t| self.target(t)).collect::<R<_>>()?,
                self.expr(&a.value)?,
            ),
            ast::Stmt::AugAssign(a) => Stmt::AugAssign(
                self.target(&a.target)?,
                self.binop(s, a.op)?,
                self.expr(&a.value)?,
            ),
            ast::Stmt::If(i) => Stmt::If(
                self.expr(&i.test)?,
                self.stmts(&i.body)?,
                self.stmts(&i.orelse)?,
            ),
            ast::Stmt::For(f) => {
                if !f.orelse.is_empty() {
                    return Err(self.no(s, "`for ... else`"));
                }
                Stmt::For(
                    self.target(&f.target)?,
                    self.expr(&f.iter)?,
                    self.stmts(&f.body)?,
                )
            }
            ast::Stmt::ImportFrom(i) => {
                let module = i.module.as_deref().unwrap_or("");
                if i.level.is_some_and(|l| l.to_u32() > 0) {
                    return Err(self.no(s, "a relative import"));
                }
                let mut bound = Vec::new();
                for a in &i.names {
                    let obj = match (module, a.name.as_str()) {
                        ("math", n) => math_name(n).map(|(_, o)| o),
                        ("dataclasses", "replace") => Some(Obj::Func(Func::Replace)),
                        _ => None,
                    };
                    let Some(obj) = obj else {
                        return Err(
                            self.no(s, format!("`from {module} import {}`", a.name.as_str()))
                        );
                    };
                    let name = a.asname.as_deref().unwrap_or(a.name.as_str());
                    bound.push((name.into(), obj));
                }
                Stmt::Import(bound)
            }
            ast::Stmt::Pass(_) => Stmt::Pass,
            other => return Err(self.no(s, format!("the statement `{}`", stmt_kind(other)))),
        })
    }

    fn target(&self, t: &ast::Expr) -> R<Target> {
        Ok(match t {
            ast::Expr::Name(n) => Target::Name(n.id.as_str().into()),
            ast::Expr::Subscript(sub) => {
                Target::Subscript(self.expr(&sub.value)?, self.index(&sub.slice)?)
            }
            ast::Expr::Attribute(a) => match line_attr(a.attr.as_str()) {
                Some(attr) => Target::Attr(self.expr(&a.value)?, attr),
                None => {
                    return Err(self.no(t, format!("setting the attribute `.{}`", a.attr.as_str())))
                }
            },
            ast::Expr::Tuple(tu) => {
                Target::Tuple(tu.elts.iter().map(|e| self.target(e)).collect::<R<_>>()?)
            }
            ast::Expr::List(li) => {
                Target::Tuple(li.elts.iter().map(|e| self.target(e)).collect::<R<_>>()?)
            }
            other => return Err(self.no(other, "this assignment target")),
        })
    }

    fn binop(&self, at: &impl Ranged, op: ast::Operator) -> R<BinOp> {
        Ok(match op {
            ast::Operator::Add => BinOp::Add,
            ast::Operator::Sub => BinOp::Sub,
            ast::Operator::Mult => BinOp::Mul,
            ast::Operator::Div => BinOp::Div,
            ast::Operator::FloorDiv => BinOp::FloorDiv,
            ast::Operator::Mod => BinOp::Mod,
            ast::Operator::Pow => BinOp::Pow,
            ast::Operator::BitOr => BinOp::BitOr,
            ast::Operator::BitAnd => BinOp::BitAnd,
            ast::Operator::BitXor => BinOp::BitXor,
            other => return Err(self.no(at, format!("the operator {other:?}"))),
        })
    }

    fn index(&self, e: &ast::Expr) -> R<Expr> {
        if let ast::Expr::Slice(_) = e {
            return Err(self.no(e, "a slice"));
        }
        self.expr(e)
    }

    fn constant(&self, at: &impl Ranged, c: &Constant) -> R<Obj> {
        Ok(match c {
            Constant::None => Obj::None,
            Constant::Bool(b) => Obj::Bool(*b),
            Constant::Str(s) => Obj::str(s),
            Constant::Int(i) => match i128::try_from(i) {
                Ok(i) => Obj::Int(i),
                Err(_) => return Err(self.no(at, "an integer beyond 128 bits")),
            },
            Constant::Float(f) => Obj::Float(*f),
            Constant::Tuple(t) => Obj::Tuple(
                t.iter()
                    .map(|c| self.constant(at, c))
                    .collect::<R<Vec<_>>>()?
                    .into(),
            ),
            Constant::Bytes(_) => return Err(self.no(at, "a bytes literal")),
            Constant::Complex { .. } => return Err(self.no(at, "a complex number")),
            Constant::Ellipsis => return Err(self.no(at, "`...`")),
        })
    }

    fn exprs(&self, es: &[ast::Expr]) -> R<Vec<Expr>> {
        es.iter().map(|e| self.expr(e)).collect()
    }

    fn expr(&self, e: &ast::Expr) -> R<Expr> {
        let depth = self.depth.get();
        if depth >= MAX_NESTING {
            return Err(self.no(
                e,
                format!("an expression nested more than {MAX_NESTING} levels deep"),
            ));
        }
        self.depth.set(depth + 1);
        let lowered = self.expr_at(e);
        self.depth.set(depth);
        lowered
    }

    fn expr_at(&self, e: &ast::Expr) -> R<Expr> {
        Ok(match e {
            ast::Expr::Constant(c) => Expr::Const(self.constant(e, &c.value)?),
            ast::Expr::Name(n) => {
                let id = n.id.as_str();
                if UNSUPPORTED_BUILTINS.contains(&id) {
                    return Err(self.no(e, format!("the builtin `{id}`")));
                }
                Expr::Name(id.into())
            }
            ast::Expr::Attribute(a) => {
                let name = a.attr.as_str();
                if is_math(&a.value) {
                    match math_name(name) {
                        Some((n, _)) => Expr::Attr(Box::new(self.expr(&a.value)?), Attr::Math(n)),
                        None => return Err(self.no(e, format!("`math.{name}`"))),
                    }
                } else {
                    match line_attr(name) {
                        Some(attr) => Expr::Attr(Box::new(self.expr(&a.value)?), attr),
                        None => return Err(self.no(e, format!("the attribute `.{name}`"))),
                    }
                }
            }
            ast::Expr::Subscript(s) => Expr::Subscript(
                Box::new(self.expr(&s.value)?),
                Box::new(self.index(&s.slice)?),
            ),
            ast::Expr::BinOp(b) => Expr::Bin(
                self.binop(e, b.op)?,
                Box::new(self.expr(&b.left)?),
                Box::new(self.expr(&b.right)?),
            ),
            ast::Expr::UnaryOp(u) => Expr::Unary(
                match u.op {
                    ast::UnaryOp::Not => UnOp::Not,
                    ast::UnaryOp::USub => UnOp::Neg,
                    ast::UnaryOp::UAdd => UnOp::Pos,
                    ast::UnaryOp::Invert => UnOp::Invert,
                },
                Box::new(self.expr(&u.operand)?),
            ),
            ast::Expr::BoolOp(b) => {
                Expr::Bool(matches!(b.op, ast::BoolOp::And), self.exprs(&b.values)?)
            }
            ast::Expr::Compare(c) => {
                let mut rest = Vec::new();
                for (op, right) in c.ops.iter().zip(&c.comparators) {
                    let op = match op {
                        ast::CmpOp::Eq => CmpOp::Eq,
                        ast::CmpOp::NotEq => CmpOp::NotEq,
                        ast::CmpOp::Lt => CmpOp::Lt,
                        ast::CmpOp::LtE => CmpOp::LtE,
                        ast::CmpOp::Gt => CmpOp::Gt,
                        ast::CmpOp::GtE => CmpOp::GtE,
                        ast::CmpOp::In => CmpOp::In,
                        ast::CmpOp::NotIn => CmpOp::NotIn,
                        ast::CmpOp::Is => CmpOp::Is,
                        ast::CmpOp::IsNot => CmpOp::IsNot,
                    };
                    rest.push((op, self.expr(right)?));
                }
                Expr::Compare(Box::new(self.expr(&c.left)?), rest)
            }
            ast::Expr::IfExp(i) => Expr::IfExp(
                Box::new(self.expr(&i.test)?),
                Box::new(self.expr(&i.body)?),
                Box::new(self.expr(&i.orelse)?),
            ),
            ast::Expr::List(l) => Expr::List(self.exprs(&l.elts)?),
            ast::Expr::Tuple(t) => Expr::Tuple(self.exprs(&t.elts)?),
            ast::Expr::Set(s) => Expr::Set(self.exprs(&s.elts)?),
            ast::Expr::Dict(d) => {
                let mut items = Vec::new();
                for (k, v) in d.keys.iter().zip(&d.values) {
                    let Some(k) = k else {
                        return Err(self.no(e, "`**` in a dict display"));
                    };
                    items.push((self.expr(k)?, self.expr(v)?));
                }
                Expr::Dict(items)
            }
            ast::Expr::Call(c) => self.call(e, c)?,
            ast::Expr::Starred(_) => return Err(self.no(e, "`*` unpacking")),
            other => return Err(self.no(e, format!("the expression form `{}`", expr_kind(other)))),
        })
    }

    fn call(&self, e: &ast::Expr, c: &ast::ExprCall) -> R<Expr> {
        if c.args.iter().any(|a| matches!(a, ast::Expr::Starred(_))) {
            return Err(self.no(e, "`*` arguments"));
        }
        if let ast::Expr::Attribute(a) = &*c.func
            && !is_math(&a.value)
        {
            let name = a.attr.as_str();
            let Some(m) = method(name) else {
                // What the method is called on is said first when it is itself refused
                // (`__import__('os').getcwd()` is refused for `__import__`).
                self.expr(&a.value)?;
                return Err(self.no(e, format!("the method `.{name}()`")));
            };
            if !c.keywords.is_empty() {
                return Err(self.no(e, format!("keyword arguments to `.{name}()`")));
            }
            if m == Method::Format
                && !matches!(&*a.value, ast::Expr::Constant(k) if matches!(&k.value, Constant::Str(s) if plain_format(s)))
            {
                return Err(self.no(
                    e,
                    "`.format()` of anything but a string literal with plain `{}` fields",
                ));
            }
            return Ok(Expr::MethodCall(
                Box::new(self.expr(&a.value)?),
                m,
                self.exprs(&c.args)?,
            ));
        }
        let allowed: &[&str] = match &*c.func {
            ast::Expr::Name(n) => match n.id.as_str() {
                "sorted" => &["reverse"],
                "print" => &["sep", "end"],
                _ => &[],
            },
            ast::Expr::Attribute(a) if a.attr.as_str() == "isclose" => &["rel_tol", "abs_tol"],
            _ => &[],
        };
        let mut kwargs = Vec::new();
        for k in &c.keywords {
            match k.arg.as_deref() {
                Some(name) if allowed.contains(&name) => {
                    kwargs.push((name.into(), self.expr(&k.value)?))
                }
                Some(name) => return Err(self.no(e, format!("the keyword argument `{name}=`"))),
                None => return Err(self.no(e, "`**` arguments")),
            }
        }
        Ok(Expr::Call(
            Box::new(self.expr(&c.func)?),
            self.exprs(&c.args)?,
            kwargs,
        ))
    }
}

fn is_math(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Name(n) if n.id.as_str() == "math")
}

fn stmt_kind(s: &ast::Stmt) -> &'static str {
    match s {
        ast::Stmt::FunctionDef(_) | ast::Stmt::AsyncFunctionDef(_) => "def",
        ast::Stmt::ClassDef(_) => "class",
        ast::Stmt::Return(_) => "return",
        ast::Stmt::Delete(_) => "del",
        ast::Stmt::AnnAssign(_) => "annotated assignment",
        ast::Stmt::While(_) => "while",
        ast::Stmt::With(_) | ast::Stmt::AsyncWith(_) => "with",
        ast::Stmt::Raise(_) => "raise",
        ast::Stmt::Try(_) | ast::Stmt::TryStar(_) => "try",
        ast::Stmt::Assert(_) => "assert",
        ast::Stmt::Import(_) => "import",
        ast::Stmt::Global(_) => "global",
        ast::Stmt::Nonlocal(_) => "nonlocal",
        ast::Stmt::Break(_) => "break",
        ast::Stmt::Continue(_) => "continue",
        ast::Stmt::Match(_) => "match",
        _ => "statement",
    }
}

fn expr_kind(e: &ast::Expr) -> &'static str {
    match e {
        ast::Expr::Lambda(_) => "lambda",
        ast::Expr::ListComp(_) => "list comprehension",
        ast::Expr::SetComp(_) => "set comprehension",
        ast::Expr::DictComp(_) => "dict comprehension",
        ast::Expr::GeneratorExp(_) => "generator expression",
        ast::Expr::JoinedStr(_) | ast::Expr::FormattedValue(_) => "f-string",
        ast::Expr::NamedExpr(_) => ":=",
        ast::Expr::Await(_) => "await",
        ast::Expr::Yield(_) | ast::Expr::YieldFrom(_) => "yield",
        _ => "expression",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowers_the_rule_forms_and_refuses_the_rest() {
        assert!(matches!(
            compile(" v['value'] in ['closed', 'open'] ", false),
            Ok(Code::Eval(_))
        ));
        assert!(matches!(
            compile("s['a'] = 1; s['b'] += 2\nif s['a']:\n    print(1)", true),
            Ok(Code::Exec(_))
        ));
        let e = compile("x = 1\ny = [i for i in s]", true).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.construct.contains("list comprehension"),
            "{}",
            e.construct
        );
        assert!(compile("v['value'].split(',')", false)
            .unwrap_err()
            .construct
            .contains(".split()"));
        assert!(compile("'{:.2f}'.format(v['value'])", false).is_err());
        assert!(compile("math.tau", false).is_err());
        assert!(matches!(
            compile("v['value'] ==", false),
            Ok(Code::SyntaxError(_))
        ));
    }
}
