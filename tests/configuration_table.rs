//! docs/configuration.md's table against the code: every `MLLOG_*` variable the layer's sources
//! read is in the table, every variable the table names is read by them, and every builder
//! method the table names exists. The table is what an operator reads to redirect a run; a
//! variable added without its row, or a row left behind by a rename, fails here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of every source file under these folders of the repository.
fn source_text(dirs: &[&str]) -> String {
    let mut files = Vec::new();
    for dir in dirs {
        sources(&Path::new(ROOT).join(dir), &mut files);
    }
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("read source"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names the layer reads: its sources' `"MLLOG_..."` string literals, and the submission's
/// variables, which mllog-core names (`SUBMISSION_VARIABLES`).
fn read_by_code(text: &str) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = tracing_mllog::env::SUBMISSION_VARIABLES
        .iter()
        .map(|n| n.to_string())
        .collect();
    for (i, _) in text.match_indices("\"MLLOG_") {
        let name: String = text[i + 1..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if text[i + 1 + name.len()..].starts_with('"') {
            names.insert(name);
        }
    }
    names
}

/// The table's rows: (names in the first column, builder methods in the last).
fn table() -> Vec<(Vec<String>, Vec<String>)> {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/configuration.md"))
        .expect("docs/configuration.md");
    doc.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|row| {
            let cells: Vec<&str> = row.trim_matches('|').split(" | ").collect();
            let names = backticked(cells[0])
                .iter()
                .flat_map(|n| expand(n.split('=').next().unwrap()))
                .collect();
            // `output(Output::file)`: the builder's method and the grouped value's.
            let methods = backticked(cells.last().unwrap())
                .iter()
                .flat_map(|m| m.split(['(', ')']).map(str::to_owned).collect::<Vec<_>>())
                .filter(|m| {
                    let method = m.rsplit("::").next().unwrap();
                    method.starts_with(|c: char| c.is_ascii_lowercase())
                })
                .collect();
            (names, methods)
        })
        .collect()
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// `MLLOG_X_{A,B}` as `MLLOG_X_A` and `MLLOG_X_B`.
fn expand(name: &str) -> Vec<String> {
    match (name.find('{'), name.find('}')) {
        (Some(open), Some(close)) => name[open + 1..close]
            .split(',')
            .flat_map(|part| expand(&format!("{}{part}{}", &name[..open], &name[close + 1..])))
            .collect(),
        _ => vec![name.to_owned()],
    }
}

fn documented(name: &str, rows: &[(Vec<String>, Vec<String>)]) -> bool {
    rows.iter()
        .flat_map(|(names, _)| names)
        .any(|d| match d.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => d == name,
        })
}

#[test]
fn every_variable_the_layer_reads_has_a_row() {
    let rows = table();
    assert!(rows.len() >= 20, "too few rows parsed: {}", rows.len());
    let missing: Vec<String> = read_by_code(&source_text(&["src"]))
        .into_iter()
        .filter(|name| !documented(name, &rows))
        .collect();
    assert!(
        missing.is_empty(),
        "read by src/ but not in docs/configuration.md's table: {missing:?}"
    );
}

#[test]
fn every_variable_in_the_table_is_read() {
    let code = read_by_code(&source_text(&["src"]));
    let stale: Vec<String> = table()
        .into_iter()
        .flat_map(|(names, _)| names)
        .filter(|n| n.starts_with("MLLOG_") && !n.ends_with('*'))
        .filter(|n| !code.contains(n))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/configuration.md names variables src/ never reads: {stale:?}"
    );
}

#[test]
fn every_builder_method_in_the_table_exists() {
    let layer = source_text(&["src"]);
    // `Submission` and its setters are mllog-core's: read from the workspace, which a
    // packaged copy of this crate does not have beside it.
    let core = Path::new(ROOT).join("crates/mllog-core/src");
    let core = core
        .is_dir()
        .then(|| source_text(&["crates/mllog-core/src"]));
    if core.is_none() {
        println!("skipped: the `Submission::` methods of the table (no mllog-core sources here)");
    }
    let missing: Vec<String> = table()
        .into_iter()
        .flat_map(|(_, methods)| methods)
        .filter(|m| {
            let (owner, method) = m.rsplit_once("::").unwrap_or(("", m));
            let text = match (owner, &core) {
                ("Submission", Some(core)) => core,
                ("Submission", None) => return false,
                _ => &layer,
            };
            !text.contains(&format!("pub fn {method}("))
                && !text.contains(&format!("pub fn {method}<"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md names builder methods that do not exist: {missing:?}"
    );
}
