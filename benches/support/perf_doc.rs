//! docs/performance.md as the measuring examples write it: each example owns one block of the
//! file, between `<!-- NAME:begin -->` and `<!-- NAME:end -->`, which it replaces with the
//! Markdown it printed (`--write FILE`) or compares with what it measured (`--check FILE`).
//!
//! The check exists so that the committed figures are the measured ones, not figures typed in
//! by hand or left behind by a change: every word of the block must be the same and, where the
//! figures repeat (instruction counts), every number within a small tolerance of the measured
//! one: another build of the same sources (another folder, another machine with the same
//! toolchain) may move a count by a few instructions. Where they do not (wall clock), only the
//! words are compared: the same rows, none missing, none left over.

use std::path::Path;

/// How far a number in the committed block may be from the measured one: relative, or absolute
/// for small figures (a ratio of 0.12 against 0.13).
#[derive(Clone, Copy)]
pub struct Tolerance {
    pub relative: f64,
    pub absolute: f64,
}

/// What `--write FILE` or `--check FILE` on the command line asks for.
pub enum DocAction {
    Write(String),
    Check(String),
}

pub fn doc_action(args: &[String]) -> Option<DocAction> {
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .map(|i| args.get(i + 1).cloned().expect("a file after the flag"))
    };
    value("--write")
        .map(DocAction::Write)
        .or_else(|| value("--check").map(DocAction::Check))
}

fn markers(name: &str) -> (String, String) {
    (
        format!("<!-- {name}:begin -->\n"),
        format!("<!-- {name}:end -->"),
    )
}

/// The text between the block's markers, and where it starts and ends in `doc`.
fn block<'a>(doc: &'a str, name: &str, path: &Path) -> Result<(usize, usize, &'a str), String> {
    let (begin, end) = markers(name);
    let start = doc
        .find(&begin)
        .ok_or_else(|| format!("{}: no `{}` line", path.display(), begin.trim_end()))?
        + begin.len();
    let stop = doc[start..]
        .find(&end)
        .ok_or_else(|| format!("{}: no `{end}` line", path.display()))?
        + start;
    Ok((start, stop, &doc[start..stop]))
}

/// Replaces the block `name` of the file with `measured`.
pub fn write_block(path: &str, name: &str, measured: &str) -> Result<(), String> {
    let path = Path::new(path);
    let doc = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (start, stop, _) = block(&doc, name, path)?;
    let new = format!("{}{measured}{}", &doc[..start], &doc[stop..]);
    std::fs::write(path, new).map_err(|e| format!("{}: {e}", path.display()))
}

/// Compares the block `name` of the file with `measured`: the same words, and the same numbers
/// within the tolerance (any numbers without one). The error lists every difference.
pub fn check_block(
    path: &str,
    name: &str,
    measured: &str,
    tolerance: Option<Tolerance>,
) -> Result<(), String> {
    let path = Path::new(path);
    let doc = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (_, _, committed) = block(&doc, name, path)?;
    let mut differences = Vec::new();
    let (ours, theirs): (Vec<&str>, Vec<&str>) =
        (committed.lines().collect(), measured.lines().collect());
    if ours.len() != theirs.len() {
        differences.push(format!(
            "{} lines committed, {} measured",
            ours.len(),
            theirs.len()
        ));
    }
    for (committed, measured) in ours.iter().zip(&theirs) {
        if !same_line(committed, measured, tolerance) {
            differences.push(format!("committed: {committed}\n  measured: {measured}"));
        }
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}'s `{name}` table is not what was measured (write it again with `--write`):\n  {}",
            path.display(),
            differences.join("\n  ")
        ))
    }
}

fn same_line(committed: &str, measured: &str, tolerance: Option<Tolerance>) -> bool {
    let (a, b) = (words(committed), words(measured));
    a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|(x, y)| match (number(x), number(y), tolerance) {
                (Some(x), Some(y), Some(t)) => {
                    (x - y).abs() <= t.absolute.max(t.relative * y.abs())
                }
                (Some(_), Some(_), None) => true,
                _ => x == y,
            })
}

/// A line's words, a number with its sign and decimals being one word ("x1.96" gives "x" and
/// "1.96").
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut numeric = false;
    for c in line.chars() {
        if c.is_whitespace() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            numeric = false;
            continue;
        }
        let is_num = c.is_ascii_digit() || (c == '.' && numeric);
        if !current.is_empty() && is_num != numeric {
            out.push(std::mem::take(&mut current));
        }
        current.push(c);
        numeric = is_num;
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn number(word: &str) -> Option<f64> {
    word.parse().ok()
}
