//! `submission_runs` of the official `rcp_checker.py`: the number of runs a submission has per
//! usage and benchmark, which the RCP statistics use. It is a Python dict literal of string
//! keys and integers in the checker's source, not a data file, so it is read from that literal:
//! strings, integers, `{`, `}`, `:`, `,` and comments, nothing else.

/// `submission_runs[usage]` as `(benchmark, runs)` in source order; `None` when the source has
/// no such literal, it holds anything else, or it lacks `usage`.
pub(super) fn parse_submission_runs(source: &str, usage: &str) -> Option<Vec<(String, usize)>> {
    let start = source.find("\nsubmission_runs = {")? + "\nsubmission_runs = ".len();
    let mut tokens = Tokens {
        rest: &source[start..],
    };
    let Value::Dict(top) = value(&mut tokens)? else {
        return None;
    };
    let (_, inner) = top.into_iter().find(|(k, _)| k == usage)?;
    let Value::Dict(entries) = inner else {
        return None;
    };
    entries
        .into_iter()
        .map(|(k, v)| match v {
            Value::Int(n) => Some((k, n)),
            Value::Dict(_) => None,
        })
        .collect()
}

enum Value {
    Int(usize),
    Dict(Vec<(String, Value)>),
}

#[derive(Debug, PartialEq)]
enum Token {
    Open,
    Close,
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
            '{' => (Token::Open, 1),
            '}' => (Token::Close, 1),
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

fn value(t: &mut Tokens) -> Option<Value> {
    match t.next()? {
        Token::Int(n) => Some(Value::Int(n)),
        Token::Open => {
            let mut entries = Vec::new();
            loop {
                let key = match t.next()? {
                    Token::Close => return Some(Value::Dict(entries)),
                    Token::Str(s) => s,
                    _ => return None,
                };
                if t.next()? != Token::Colon {
                    return None;
                }
                entries.push((key, value(t)?));
                match t.next()? {
                    Token::Comma => {}
                    Token::Close => return Some(Value::Dict(entries)),
                    _ => return None,
                }
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::parse_submission_runs;

    #[test]
    fn the_literal_with_comments_and_trailing_commas() {
        let src = "x = 1\nsubmission_runs = {\n  \"training\": {\n    'bert': 10, # ten\n    'gpt3': 3,\n  },\n  'hpc': {'oc20' : 5}\n}\n";
        assert_eq!(
            parse_submission_runs(src, "training").unwrap(),
            [("bert".to_string(), 10), ("gpt3".to_string(), 3)]
        );
        assert_eq!(
            parse_submission_runs(src, "hpc").unwrap(),
            [("oc20".to_string(), 5)]
        );
        assert!(parse_submission_runs(src, "inference").is_none());
        assert!(parse_submission_runs("submission_runs = f()", "hpc").is_none());
        let computed = "\nsubmission_runs = {'training': {'bert': 2 * 5}}";
        assert!(parse_submission_runs(computed, "training").is_none());
    }
}
