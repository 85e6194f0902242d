//! The data the official package keeps in its Python sources rather than in data files
//! (`rcp_checker.py`'s `submission_runs`, `benchmark_meta.py`'s allowed benchmarks and result
//! counts, `system_desc_checker.py`'s required fields), read from their literals: strings,
//! non-negative integers, `{...}` dicts, `[...]` lists, `:`, `,` and comments, nothing else.
//! A literal holding anything else (a name, a call, arithmetic) reads as `None`: the caller
//! says that the file is not as expected, never guesses.

/// A literal value.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Literal {
    /// A non-negative integer.
    Int(usize),
    /// A string (without escapes or line breaks).
    Str(String),
    /// A list.
    List(Vec<Literal>),
    /// A dict, entries in source order.
    Dict(Vec<(String, Literal)>),
}

impl Literal {
    /// The entry `key` of a dict.
    pub(super) fn get(&self, key: &str) -> Option<&Literal> {
        match self {
            Literal::Dict(e) => e.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// A list of strings.
    pub(super) fn strings(&self) -> Option<Vec<String>> {
        match self {
            Literal::List(items) => items
                .iter()
                .map(|i| match i {
                    Literal::Str(s) => Some(s.clone()),
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    }
}

/// The literal assigned by the first line `<indent><name> = ` of `source`.
pub(super) fn assigned(source: &str, name: &str) -> Option<Literal> {
    let pattern = format!("{name} = ");
    let at = source.lines().scan(0usize, |offset, line| {
        let here = *offset;
        *offset += line.len() + 1;
        Some((here, line))
    });
    for (offset, line) in at {
        let trimmed = line.trim_start();
        if trimmed.starts_with(&pattern) {
            let start = offset + (line.len() - trimmed.len()) + pattern.len();
            let mut t = Tokens {
                rest: &source[start..],
            };
            return value(&mut t);
        }
    }
    None
}

#[derive(Debug, PartialEq)]
enum Token {
    Open(char),
    Close(char),
    Colon,
    Comma,
    Str(String),
    Int(usize),
}

struct Tokens<'a> {
    rest: &'a str,
}

impl Tokens<'_> {
    fn next(&mut self) -> Option<Token> {
        loop {
            self.rest = self.rest.trim_start();
            if self.rest.starts_with('#') {
                self.rest = self.rest.find('\n').map_or("", |i| &self.rest[i..]);
            } else {
                break;
            }
        }
        let c = self.rest.chars().next()?;
        let (tok, len) = match c {
            '{' | '[' => (Token::Open(c), 1),
            '}' | ']' => (Token::Close(c), 1),
            ':' => (Token::Colon, 1),
            ',' => (Token::Comma, 1),
            '\'' | '"' => {
                let end = self.rest[1..].find(c)?;
                let s = &self.rest[1..1 + end];
                if s.contains(['\\', '\n']) {
                    return None;
                }
                (Token::Str(s.to_owned()), end + 2)
            }
            '0'..='9' => {
                let end = self
                    .rest
                    .find(|x: char| !x.is_ascii_digit())
                    .unwrap_or(self.rest.len());
                (Token::Int(self.rest[..end].parse().ok()?), end)
            }
            _ => return None,
        };
        self.rest = &self.rest[len..];
        Some(tok)
    }
}

fn value(t: &mut Tokens) -> Option<Literal> {
    match t.next()? {
        Token::Int(n) => Some(Literal::Int(n)),
        Token::Str(s) => Some(Literal::Str(s)),
        Token::Open('{') => {
            let mut entries = Vec::new();
            loop {
                let key = match t.next()? {
                    Token::Close('}') => return Some(Literal::Dict(entries)),
                    Token::Str(s) => s,
                    _ => return None,
                };
                if t.next()? != Token::Colon {
                    return None;
                }
                entries.push((key, value(t)?));
                match t.next()? {
                    Token::Comma => {}
                    Token::Close('}') => return Some(Literal::Dict(entries)),
                    _ => return None,
                }
            }
        }
        Token::Open(_) => {
            let mut items = Vec::new();
            loop {
                // A list item may follow a trailing comma's place: `]` closes it there too.
                let mut probe = Tokens { rest: t.rest };
                if probe.next()? == Token::Close(']') {
                    t.rest = probe.rest;
                    return Some(Literal::List(items));
                }
                items.push(value(t)?);
                match t.next()? {
                    Token::Comma => {}
                    Token::Close(']') => return Some(Literal::List(items)),
                    _ => return None,
                }
            }
        }
        _ => None,
    }
}

/// The counts of `usage` in the module-level literal `name = {usage: {benchmark: n}}` of a
/// Python source (`submission_runs`, `benchmark_meta._ALL_RESULT_FILE_COUNTS`), in file
/// order; `None` when there is no such literal of integers.
pub(super) fn usage_counts(source: &str, name: &str, usage: &str) -> Option<Vec<(String, usize)>> {
    let top = assigned(source, name)?;
    let Literal::Dict(entries) = top.get(usage)? else {
        return None;
    };
    entries
        .iter()
        .map(|(k, v)| match v {
            Literal::Int(n) => Some((k.clone(), *n)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_dicts_and_lists_with_comments() {
        let src = "a = 1\n_X = {\n  'training': {\n    '4.1': ['bert', # c\n      'ssd',],\n  },\n  \"hpc\": {'1.0': []},\n}\n";
        let v = assigned(src, "_X").unwrap();
        assert_eq!(
            v.get("training")
                .and_then(|t| t.get("4.1"))
                .and_then(Literal::strings),
            Some(vec!["bert".to_string(), "ssd".to_string()])
        );
        assert_eq!(
            v.get("hpc")
                .and_then(|t| t.get("1.0"))
                .and_then(Literal::strings),
            Some(vec![])
        );
        let indented = "def f():\n    fields = [\n        'a',\n        'b',\n    ]\n";
        assert_eq!(
            assigned(indented, "fields").and_then(|l| l.strings()),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert!(assigned("x = f()", "x").is_none());
        assert!(assigned("x = [1 + 2]", "x").is_none());
        assert!(assigned("y = 1", "x").is_none());
    }
}
