//! The check that keeps docs/performance.md's tables equal to what the measuring examples
//! measured (`benches/support/perf_doc.rs`, used by the `budgets` and `compare` examples), on
//! files of its own: what it lets through and what it refuses.

#[allow(dead_code)] // `doc_action` is the examples' command line, not used here
#[path = "../benches/support/perf_doc.rs"]
mod perf_doc;

use perf_doc::{check_block, write_block, Tolerance};

const TOLERANCE: Option<Tolerance> = Some(Tolerance {
    relative: 0.03,
    absolute: 5.0,
});

fn doc(dir: &tempfile::TempDir, table: &str) -> String {
    let path = dir.path().join("performance.md");
    let text = format!("# Figures\n\n<!-- t:begin -->\n{table}<!-- t:end -->\n\nAfter.\n");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

const TABLE: &str = "| case | instructions |\n|---|---|\n| event, 3 fields | 977 |\n| span | 4825.5 |\n| ratio | 12 |\n";

#[test]
fn the_same_words_and_numbers_within_the_tolerance_pass() {
    let dir = tempfile::tempdir().unwrap();
    let path = doc(&dir, TABLE);
    assert_eq!(check_block(&path, "t", TABLE, TOLERANCE), Ok(()));
    // 3 % of a large count, or 5 of a small one.
    let near = TABLE
        .replace("977", "1003")
        .replace("4825.5", "4950")
        .replace("12", "16");
    assert_eq!(check_block(&path, "t", &near, TOLERANCE), Ok(()));
    // Without a tolerance only the words count: a wall-clock table's rows.
    let far = TABLE.replace("977", "12").replace("4825.5", "1");
    assert_eq!(check_block(&path, "t", &far, None), Ok(()));
}

#[test]
fn a_number_past_the_tolerance_a_word_or_a_row_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = doc(&dir, TABLE);
    for (what, measured) in [
        ("a count 10 % off", TABLE.replace("4825.5", "5310")),
        ("a small count 6 off", TABLE.replace("12", "18")),
        ("another word", TABLE.replace("span", "spans")),
        ("a row missing", TABLE.replace("| span | 4825.5 |\n", "")),
        ("a row more", format!("{TABLE}| event, 4 fields | 990 |\n")),
        ("a number where a word was", TABLE.replace("span", "7")),
    ] {
        let err = check_block(&path, "t", &measured, TOLERANCE).expect_err(what);
        assert!(err.contains("performance.md"), "{what}: {err}");
    }
    assert!(check_block(&path, "t", &TABLE.replace("span", "spans"), None).is_err());
}

#[test]
fn write_replaces_the_block_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let path = doc(&dir, TABLE);
    let new = TABLE.replace("977", "990");
    write_block(&path, "t", &new).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("# Figures\n\n<!-- t:begin -->\n"));
    assert!(text.ends_with("<!-- t:end -->\n\nAfter.\n"));
    assert!(text.contains("| 990 |") && !text.contains("| 977 |"));
    assert_eq!(check_block(&path, "t", &new, TOLERANCE), Ok(()));
}

#[test]
fn a_block_without_its_markers_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = doc(&dir, TABLE);
    let err = check_block(&path, "other", TABLE, TOLERANCE).unwrap_err();
    assert!(
        err.contains("performance.md") && err.contains("<!-- other:begin -->"),
        "{err}"
    );
    let err = write_block(&path, "other", TABLE).unwrap_err();
    assert!(err.contains("<!-- other:begin -->"), "{err}");
}
