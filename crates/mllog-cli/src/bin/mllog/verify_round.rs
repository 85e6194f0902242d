//! `mllog verify ROUND`: every submitter folder of a round in one pass, one table of final
//! scores for the round.

use mllog_core::results::round::{choose_round_ruleset, verify_round, RoundReview};
use mllog_core::results::usage::Usage;
use serde_json::Value;

use crate::machine;
use crate::verify::{Args, Format};

pub fn run(a: &Args) -> u8 {
    let chosen = match a.usage {
        Usage::Hpc => a.rcps.choose_hpc(a.ruleset.as_deref()),
        Usage::Training => a.rcps.choose_round(a.ruleset.as_deref(), &a.dir, |given| {
            choose_round_ruleset(given, &a.dir).map_err(|e| e.to_string())
        }),
    };
    let chosen = match chosen {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mllog verify: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let (opts, evidence, rcps) = match a.prepared(&chosen, chosen.evidence.clone()) {
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
