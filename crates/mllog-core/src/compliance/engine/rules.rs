//! One rule file as the checker reads it: the `BEGIN` code, the `KEY` records by name (a
//! later record of the same name replaces an earlier one in its place), the `END` block, each
//! snippet compiled at load.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::ir::Code;
use super::python::{compile, Unsupported};
use super::yaml::{self, Node};

/// Why rules could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file or folder could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
    /// The YAML is malformed (the official checker crashes reading it).
    #[error("{path}:{line}: malformed YAML: {message}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
        /// The YAML parser's words.
        message: String,
    },
    /// The file is not laid out as the checker's rule files are.
    #[error("{path}:{line}: {what}")]
    Layout {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// A snippet uses Python the engine does not run.
    #[error("{path}:{line}: unsupported Python construct: {construct}")]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// The line in the file.
        line: usize,
        /// The construct.
        construct: String,
    },
    /// The rules folder has no rules for the usage and ruleset asked for.
    #[error("{dir}: no rules for {usage} {ruleset} (this folder has: {have})")]
    NoRuleset {
        /// The compliance checker folder.
        dir: PathBuf,
        /// `training` or `hpc`.
        usage: String,
        /// The ruleset asked for.
        ruleset: String,
        /// What it has, e.g. `training 5.0.0, hpc 3.0.0`.
        have: String,
    },
    /// A snippet needed, on a log, what the engine does not have (an integer beyond 128 bits,
    /// `%`-formatting), where Python goes on: the log has no verdict rather than a wrong one.
    #[error(
        "{file}: the {what} `{snippet}` needs what the rule engine does not have ({message}), \
         so this log has no verdict; the official checker runs it"
    )]
    Limit {
        /// The rule file.
        file: String,
        /// Which snippet of it (`CHECK`, `POST`, `BEGIN`, ...).
        what: String,
        /// The snippet's text.
        snippet: String,
        /// What the engine raised.
        message: String,
    },
    /// The package has no log parser for the ruleset (`mlp_parser/ruleset_<digits>.py`).
    #[error("{dir}: no log parser for ruleset {ruleset} (mlp_parser/ruleset_{digits}.py)")]
    NoParser {
        /// The compliance checker folder.
        dir: PathBuf,
        /// The ruleset.
        ruleset: String,
        /// The ruleset without dots.
        digits: String,
    },
}

/// A snippet: its text as the file has it (messages quote it) and its compiled form.
#[derive(Clone, Debug)]
pub(crate) struct Snippet {
    pub(crate) text: String,
    pub(crate) code: Code,
}

/// A `KEY` record.
#[derive(Clone, Debug)]
pub(crate) struct KeyRule {
    pub(crate) name: String,
    pub(crate) req: Option<String>,
    pub(crate) pre: Option<Snippet>,
    pub(crate) check: Vec<Snippet>,
    pub(crate) post: Option<Snippet>,
    pub(crate) first_check: Vec<Snippet>,
    pub(crate) atleast_one: Option<Snippet>,
}

/// The `END` block.
#[derive(Clone, Debug, Default)]
pub(crate) struct End {
    pub(crate) pre: Option<Snippet>,
    pub(crate) check: Vec<Snippet>,
}

/// A rule file.
#[derive(Clone, Debug)]
pub(crate) struct RuleFile {
    /// `None` for an empty file (the checker does nothing with it).
    pub(crate) begin: Option<Snippet>,
    pub(crate) keys: Vec<KeyRule>,
    pub(crate) end: Option<End>,
    /// What the checker reads past without a word, in file order.
    pub(crate) ignored: Vec<Ignored>,
}

/// Something in a rule file that the official checker reads past without a word (a misspelt
/// field, an entry or a `REQ` it does not know, a field beside an entry's first key): the
/// engine ignores it as the checker does, and says so, since it is most often a slip that
/// leaves a rule unchecked.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[error("{}:{line}: {what}", path.display())]
pub struct Ignored {
    /// The rule file.
    pub path: PathBuf,
    /// The line.
    pub line: usize,
    /// What is ignored, and why.
    pub what: String,
}

/// The fields the checker reads of each kind of entry.
const FIELDS: [(&str, &[&str]); 3] = [
    ("BEGIN", &["CODE"]),
    ("END", &["PRE", "CHECK"]),
    (
        "KEY",
        &[
            "NAME",
            "REQ",
            "PRE",
            "CHECK",
            "POST",
            "FIRST_CHECK",
            "ATLEAST_ONE_CHECK",
        ],
    ),
];

/// Whether the checker counts a key's occurrences under `req` (any other value: never).
fn counted(req: &str) -> bool {
    matches!(req, "EXACTLY_ONE" | "AT_LEAST_ONE" | "OPTIONAL")
        || req.starts_with("AT_LEAST(")
        || req.starts_with("AT_LEAST_ONE_OR")
}

impl RuleFile {
    /// Reads and compiles `path`; `compiled` holds the snippets compiled so far, by text and
    /// mode (a ruleset's files repeat most of their snippets).
    pub(crate) fn load(path: &Path, compiled: &mut Compiled) -> Result<RuleFile, LoadError> {
        let text = std::fs::read(path).map_err(|source| LoadError::Io {
            path: path.into(),
            source,
        })?;
        // The checker opens the file as UTF-8 text (a byte that is not is its
        // UnicodeDecodeError), and PyYAML skips a byte-order mark at its start.
        let text = std::str::from_utf8(&text).map_err(|e| {
            let at = e.valid_up_to();
            LoadError::Yaml {
                path: path.into(),
                line: 1 + text[..at].iter().filter(|&&b| b == b'\n').count(),
                message: format!(
                    "not UTF-8 text: byte {:#04x} (the official checker stops with \
                     UnicodeDecodeError reading it)",
                    text[at]
                ),
            }
        })?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let doc = yaml::parse(text).map_err(|e| LoadError::Yaml {
            path: path.into(),
            line: e.line,
            message: e.message,
        })?;
        Loader {
            path,
            compiled: RefCell::new(compiled),
        }
        .file(doc)
    }
}

/// Snippets compiled, by their text and whether they are run by `exec`.
pub(crate) type Compiled = HashMap<(String, bool), Code>;

struct Loader<'a> {
    path: &'a Path,
    compiled: RefCell<&'a mut Compiled>,
}

impl Loader<'_> {
    fn layout(&self, line: usize, what: impl Into<String>) -> LoadError {
        LoadError::Layout {
            path: self.path.into(),
            line,
            what: what.into(),
        }
    }

    fn file(&self, doc: Option<Node>) -> Result<RuleFile, LoadError> {
        let mut file = RuleFile {
            begin: None,
            keys: Vec::new(),
            end: None,
            ignored: Vec::new(),
        };
        let Some(doc) = doc else {
            return Ok(file);
        };
        let Node::Seq(items, _) = doc else {
            return Err(self.layout(
                doc.line(),
                "a rule file is a list of BEGIN, KEY and END entries",
            ));
        };
        let mut begins = 0;
        let mut ends = 0;
        for item in &items {
            let Node::Map(entries, line) = item else {
                return Err(self.layout(
                    item.line(),
                    "each entry of a rule file is a mapping (BEGIN, KEY or END)",
                ));
            };
            // The checker looks at an entry's first key only.
            let Some((kind, body)) = entries.first() else {
                return Err(self.layout(*line, "an empty entry"));
            };
            file.ignored
                .extend(self.ignored(kind, body, &entries[1..], *line));
            match kind.as_str() {
                "BEGIN" => {
                    begins += 1;
                    if begins > 1 {
                        return Err(self.layout(
                            *line,
                            "more than one BEGIN block (the official checker asserts at most one)",
                        ));
                    }
                    let code = body
                        .get("CODE")
                        .ok_or_else(|| self.layout(body.line(), "a BEGIN block without CODE"))?;
                    file.begin = Some(self.snippet(code, true)?);
                }
                "END" => {
                    ends += 1;
                    if ends > 1 {
                        return Err(self.layout(
                            *line,
                            "more than one END block (the official checker asserts at most one)",
                        ));
                    }
                    file.end = Some(End {
                        pre: body.get("PRE").map(|n| self.snippet(n, true)).transpose()?,
                        check: self.checks(body.get("CHECK"))?,
                    });
                }
                "KEY" => {
                    let rule = self.key(body)?;
                    match file.keys.iter_mut().find(|k| k.name == rule.name) {
                        Some(slot) => {
                            file.ignored.push(self.note(
                                body.line(),
                                format!(
                                    "a second KEY record for `{}` in the file: it replaces the \
                                     first, as the checker's dict does",
                                    rule.name
                                ),
                            ));
                            *slot = rule;
                        }
                        None => file.keys.push(rule),
                    }
                }
                _ => {}
            }
        }
        Ok(file)
    }

    fn note(&self, line: usize, what: String) -> Ignored {
        Ignored {
            path: self.path.into(),
            line,
            what,
        }
    }

    /// What the checker reads past in one entry: the entry itself when its first key is no
    /// kind it knows, else the fields it does not read, the keys beside the first, a `REQ` it
    /// does not count.
    fn ignored(
        &self,
        kind: &str,
        body: &Node,
        beside: &[(String, Node)],
        line: usize,
    ) -> Vec<Ignored> {
        let Some((_, fields)) = FIELDS.iter().find(|(k, _)| *k == kind) else {
            return vec![self.note(
                line,
                format!(
                    "an entry `{kind}`: the checker reads only BEGIN, KEY and END entries, and \
                     ignores it"
                ),
            )];
        };
        let mut out = Vec::new();
        if let Node::Map(entries, _) = body {
            for (field, value) in entries {
                if !fields.contains(&field.as_str()) {
                    out.push(self.note(
                        value.line(),
                        format!(
                            "`{field}` is no field of a {kind} entry ({}): the checker ignores it",
                            fields.join(", ")
                        ),
                    ));
                }
            }
        }
        for (key, value) in beside {
            out.push(self.note(
                value.line(),
                format!(
                    "`{key}` beside `{kind}` in one entry: the checker reads an entry's first key \
                     only, and ignores it (indent it under {kind}?)"
                ),
            ));
        }
        if let Some(Node::Str(req, at)) = body.get("REQ")
            && kind == "KEY"
            && !counted(req)
        {
            out.push(self.note(
                *at,
                format!(
                    "REQ `{req}` is none the checker counts (EXACTLY_ONE, AT_LEAST_ONE, \
                         AT_LEAST(n), AT_LEAST_ONE_OR(a, b), OPTIONAL): the key's occurrences \
                         are not counted"
                ),
            ));
        }
        out.sort_by_key(|i| i.line);
        out
    }

    fn key(&self, body: &Node) -> Result<KeyRule, LoadError> {
        let Some(Node::Str(name, _)) = body.get("NAME") else {
            return Err(self.layout(body.line(), "a KEY record without a NAME"));
        };
        let req = match body.get("REQ") {
            None => None,
            Some(Node::Str(r, _)) => Some(r.clone()),
            Some(other) => return Err(self.layout(other.line(), "REQ is not a string")),
        };
        Ok(KeyRule {
            name: name.clone(),
            req,
            pre: body.get("PRE").map(|n| self.snippet(n, true)).transpose()?,
            check: self.checks(body.get("CHECK"))?,
            post: body
                .get("POST")
                .map(|n| self.snippet(n, true))
                .transpose()?,
            first_check: self.checks(body.get("FIRST_CHECK"))?,
            atleast_one: body
                .get("ATLEAST_ONE_CHECK")
                .map(|n| self.snippet(n, false))
                .transpose()?,
        })
    }

    /// A CHECK: one expression or a list of them.
    fn checks(&self, node: Option<&Node>) -> Result<Vec<Snippet>, LoadError> {
        match node {
            None => Ok(Vec::new()),
            Some(Node::Seq(items, _)) => items.iter().map(|n| self.snippet(n, false)).collect(),
            Some(n) => Ok(vec![self.snippet(n, false)?]),
        }
    }

    fn snippet(&self, node: &Node, exec: bool) -> Result<Snippet, LoadError> {
        let Node::Str(text, line) = node else {
            return Err(self.layout(node.line(), "code that is not a string"));
        };
        if let Some(code) = self.compiled.borrow().get(&(text.clone(), exec)) {
            return Ok(Snippet {
                text: text.clone(),
                code: code.clone(),
            });
        }
        let code = compile(text, exec).map_err(
            |Unsupported {
                 line: at,
                 construct,
             }| {
                // Lines of the stripped snippet, counted from the scalar's first line.
                let lead = text.len() - text.trim_start().len();
                let skipped = text[..lead].matches('\n').count();
                LoadError::Unsupported {
                    path: self.path.into(),
                    line: line + skipped + at - 1,
                    construct,
                }
            },
        )?;
        self.compiled
            .borrow_mut()
            .insert((text.clone(), exec), code.clone());
        Ok(Snippet {
            text: text.clone(),
            code,
        })
    }
}
