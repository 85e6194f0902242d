//! `mllog verify ROUND`: every submitter folder of a round in one pass, one table of final
//! scores for the round.

use mllog_core::results::round::{choose_round_ruleset, verify_round, RoundReview};
use serde_json::Value;

use crate::machine;
use crate::verify::{Args, Format};

pub fn run(a: &Args) -> u8 {
    let choice = match choose_round_ruleset(a.ruleset, &a.dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mllog verify: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let opts = match a.options(choice.ruleset) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("mllog verify: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let rcps = opts.rcp_tables.clone().expect("options carry the tables");
    let mut evidence = choice.evidence.clone();
    evidence.push(rcps.describe());
    let review = match verify_round(&a.dir, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mllog verify: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let text = match a.format {
        Format::Text => {
            let mut t = evidence.join("\n");
            t.push('\n');
            t.push_str(&review.render_text());
            t
        }
        Format::Json => json(&review, &evidence, machine::value(&*rcps)),
        Format::Csv => review.render_csv(),
    };
    if !crate::emit(&text) {
        return crate::USAGE_OR_IO;
    }
    if a.format != Format::Text && !review.passed {
        eprintln!(
            "mllog verify: {}: the round does not pass review",
            a.dir.display()
        );
    }
    crate::review_status(review.io_errors(), review.passed)
}

fn json(review: &RoundReview, how: &[String], rcps: Value) -> String {
    let table: Vec<Value> = review.table().map(machine::value).collect();
    machine::document_of(
        "verify",
        "submitters",
        review,
        vec![
            ("round", true.into()),
            ("ruleset_evidence", how.to_vec().into()),
            ("rcps", rcps),
            ("table", table.into()),
        ],
    )
}
