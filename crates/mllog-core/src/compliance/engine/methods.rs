//! The methods of strings, lists and dicts a snippet calls.

use super::ir::Method;
use super::obj::*;
use super::ops::raise;

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

pub(crate) fn call_method(o: &Obj, m: Method, args: Vec<Obj>) -> PyResult<Obj> {
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
