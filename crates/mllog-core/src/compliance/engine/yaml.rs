//! The rule files' YAML, read as PyYAML's `BaseLoader` reads them: every scalar a string
//! (`REQ: 1` is `'1'`, `CHECK: true` is `'true'`), mappings and sequences as they are, with
//! the line each node starts on for messages.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// A YAML node and the line (1-based) it starts on.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    Str(String, usize),
    Seq(Vec<Node>, usize),
    /// Keys in file order; a repeated key keeps its first place and its last value, as a
    /// Python dict built from the file does.
    Map(Vec<(String, Node)>, usize),
}

impl Node {
    pub(crate) fn line(&self) -> usize {
        match self {
            Node::Str(_, l) | Node::Seq(_, l) | Node::Map(_, l) => *l,
        }
    }
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(m, _) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Why a YAML text could not be read: the line and the parser's words.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct YamlError {
    pub(crate) line: usize,
    pub(crate) message: String,
}

enum Open {
    Seq(Vec<Node>, usize),
    Map(Vec<(String, Node)>, usize, Option<String>),
}

#[derive(Default)]
struct Builder {
    stack: Vec<(Open, usize)>,
    anchors: HashMap<usize, Node>,
    docs: Vec<Node>,
    error: Option<YamlError>,
}

impl Builder {
    fn finish(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        let line = node.line();
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some((Open::Seq(items, _), _)) => items.push(node),
            Some((Open::Map(entries, _, key), _)) => match key.take() {
                None => match node {
                    Node::Str(k, _) => *key = Some(k),
                    _ => {
                        self.error.get_or_insert(YamlError {
                            line,
                            message: "a mapping key that is not a scalar".into(),
                        });
                        *key = Some(String::new());
                    }
                },
                Some(k) => match entries.iter_mut().find(|(e, _)| *e == k) {
                    Some(slot) => slot.1 = node,
                    None => entries.push((k, node)),
                },
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        match ev {
            // A block scalar's mark is its first line of text, past its `|` or `>`.
            Event::Scalar(text, _, anchor, _) => self.finish(Node::Str(text, line), anchor),
            Event::SequenceStart(anchor, _) => {
                self.stack.push((Open::Seq(Vec::new(), line), anchor))
            }
            Event::MappingStart(anchor, _) => {
                self.stack.push((Open::Map(Vec::new(), line, None), anchor))
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((open, anchor)) = self.stack.pop() {
                    let node = match open {
                        Open::Seq(items, l) => Node::Seq(items, l),
                        Open::Map(entries, l, _) => Node::Map(entries, l),
                    };
                    self.finish(node, anchor);
                }
            }
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some(node) => self.finish(node, 0),
                None => {
                    self.error.get_or_insert(YamlError {
                        line,
                        message: "an alias to an unknown anchor".into(),
                    });
                }
            },
            _ => {}
        }
    }
}

/// The single document of a YAML text (`None` for an empty file, as `yaml.load` returns).
pub(crate) fn parse(text: &str) -> Result<Option<Node>, YamlError> {
    let mut b = Builder::default();
    let mut parser = Parser::new_from_str(text);
    parser.load(&mut b, true).map_err(|e| YamlError {
        line: e.marker().line(),
        message: e.info().to_string(),
    })?;
    if let Some(e) = b.error {
        return Err(e);
    }
    if b.docs.len() > 1 {
        return Err(YamlError {
            line: b.docs[1].line(),
            message: "expected a single document in the stream, but found another document".into(),
        });
    }
    Ok(b.docs.pop())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scalar_is_a_string() {
        let doc = parse("- KEY:\n    NAME: x\n    REQ: 1\n    CHECK:\n      - \"v['value'] > 0\"\n      - true\n").unwrap().unwrap();
        let Node::Seq(items, _) = doc else { panic!() };
        let key = items[0].get("KEY").unwrap();
        assert_eq!(key.get("REQ"), Some(&Node::Str("1".into(), 3)));
        let Some(Node::Seq(checks, 5)) = key.get("CHECK") else {
            panic!("{key:?}")
        };
        assert_eq!(checks[1], Node::Str("true".into(), 6));
        assert_eq!(parse("").unwrap(), None);
        assert!(parse("- a: [").is_err());
    }
}
