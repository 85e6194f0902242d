//! The snippets as the engine runs them: the part of Python's syntax the rule files use,
//! lowered from the parser's tree at load (see `python`), so that evaluation meets only
//! constructs it implements.

use super::obj::{Func, Obj};

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
    BitOr,
    BitAnd,
    BitXor,
}

impl BinOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::Mod => "%",
            BinOp::Pow => "** or pow()",
            BinOp::BitOr => "|",
            BinOp::BitAnd => "&",
            BinOp::BitXor => "^",
        }
    }
}

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    NotEq,
    Lt,
    LtE,
    Gt,
    GtE,
    In,
    NotIn,
    Is,
    IsNot,
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UnOp {
    Not,
    Neg,
    Pos,
    Invert,
}

/// The methods the engine has, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    Format,
    Update,
    Get,
    Values,
    Keys,
    Items,
    Extend,
    Append,
    Lower,
    Upper,
    Strip,
    Startswith,
    Endswith,
    Count,
}

/// The attributes a snippet reads or sets: a log line's fields and the `math` module's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attr {
    FullString,
    Timestamp,
    Key,
    Value,
    Lineno,
    /// `math.<name>` as a value (a function or a constant).
    Math(&'static str),
}

/// An expression.
#[derive(Clone, Debug)]
pub(crate) enum Expr {
    Const(Obj),
    Name(Box<str>),
    Attr(Box<Expr>, Attr),
    Subscript(Box<Expr>, Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Unary(UnOp, Box<Expr>),
    /// `and` (true) or `or` (false) over the operands.
    Bool(bool, Vec<Expr>),
    Compare(Box<Expr>, Vec<(CmpOp, Expr)>),
    IfExp(Box<Expr>, Box<Expr>, Box<Expr>),
    List(Vec<Expr>),
    Tuple(Vec<Expr>),
    Set(Vec<Expr>),
    Dict(Vec<(Expr, Expr)>),
    /// A call of a named function or type (resolved at run time: a name can be rebound), its
    /// positional and keyword arguments.
    Call(Box<Expr>, Vec<Expr>, Vec<(Box<str>, Expr)>),
    /// A method call on an object.
    MethodCall(Box<Expr>, Method, Vec<Expr>),
}

/// An assignment target.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    Name(Box<str>),
    Subscript(Expr, Expr),
    Attr(Expr, Attr),
    Tuple(Vec<Target>),
}

/// A statement.
#[derive(Clone, Debug)]
pub(crate) enum Stmt {
    Expr(Expr),
    Assign(Vec<Target>, Expr),
    AugAssign(Target, BinOp, Expr),
    If(Expr, Vec<Stmt>, Vec<Stmt>),
    For(Target, Expr, Vec<Stmt>),
    /// `from MODULE import NAME as ALIAS`: the objects bound.
    Import(Vec<(Box<str>, Obj)>),
    Pass,
}

/// A compiled snippet: what `eval` or `exec` runs, or the SyntaxError Python raises when it
/// is run (the checker catches it like any other error).
#[derive(Clone, Debug)]
pub(crate) enum Code {
    Eval(Expr),
    Exec(Vec<Stmt>),
    SyntaxError(String),
}

/// The builtins the engine has, by name (a name not here that Python has as a builtin is an
/// unsupported construct at load).
pub(crate) fn builtin(name: &str) -> Option<Obj> {
    use super::obj::PyType as T;
    Some(match name {
        "sorted" => Obj::Func(Func::Sorted),
        "len" => Obj::Func(Func::Len),
        "min" => Obj::Func(Func::Min),
        "max" => Obj::Func(Func::Max),
        "abs" => Obj::Func(Func::Abs),
        "isinstance" => Obj::Func(Func::Isinstance),
        "print" => Obj::Func(Func::Print),
        "round" => Obj::Func(Func::Round),
        "sum" => Obj::Func(Func::Sum),
        "any" => Obj::Func(Func::Any),
        "all" => Obj::Func(Func::All),
        "int" => Obj::Type(T::Int),
        "float" => Obj::Type(T::Float),
        "bool" => Obj::Type(T::Bool),
        "str" => Obj::Type(T::Str),
        "list" => Obj::Type(T::List),
        "dict" => Obj::Type(T::Dict),
        "tuple" => Obj::Type(T::Tuple),
        "set" => Obj::Type(T::Set),
        "type" => Obj::Type(T::Type),
        "None" => Obj::None,
        "True" => Obj::Bool(true),
        "False" => Obj::Bool(false),
        _ => return None,
    })
}

/// Python's other builtins: a snippet that names one uses what the engine does not have.
pub(crate) const UNSUPPORTED_BUILTINS: &[&str] = &[
    "bin",
    "breakpoint",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "compile",
    "complex",
    "delattr",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "filter",
    "format",
    "frozenset",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "hex",
    "id",
    "input",
    "iter",
    "locals",
    "map",
    "memoryview",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "property",
    "range",
    "repr",
    "reversed",
    "setattr",
    "slice",
    "staticmethod",
    "super",
    "vars",
    "zip",
    "__import__",
];
