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
    let (opts, evidence, rcps) = match a.prepared(choice.ruleset, choice.evidence) {
        Ok(x) => x,
        Err(status) => return status,
    };
    let review = match verify_round(&a.dir, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mllog verify: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let text = match a.format {
        Format::Text => format!("{}\n{}", evidence.join("\n"), review.render_text()),
        Format::Json => json(&review, &evidence, rcps),
        Format::Csv => review.render_csv(),
    };
    a.said(
        &text,
        review.passed,
        review.io_errors(),
        "the round does not pass review",
    )
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
