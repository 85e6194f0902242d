//! `mllog verify ROUND`: every submitter folder of a round in one pass, one table of final
//! scores for the round.

use mllog_core::results::round::{choose_round_ruleset, verify_round, RoundReview};
use mllog_core::results::verify::VerifyOptions;
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
    let opts = VerifyOptions {
        ruleset: choice.ruleset,
        set_scaling: a.set_scaling,
        rcp_bypass: a.rcp_bypass,
        seed_checker_bypass: a.seed_checker_bypass,
        threads: a.threads,
    };
    let review = match verify_round(&a.dir, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mllog verify: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let text = match a.format {
        Format::Text => {
            let mut t = choice.evidence.join("\n");
            t.push('\n');
            t.push_str(&review.render_text());
            t
        }
        Format::Json => json(&review, &choice.evidence),
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
    if review.io_errors() {
        crate::USAGE_OR_IO
    } else if review.passed {
        crate::OK
    } else {
        crate::FAILED
    }
}

fn json(review: &RoundReview, how: &[String]) -> String {
    let Value::Object(mut all) = machine::value(review) else {
        unreachable!("a round review serialises to an object")
    };
    let submitters = match all.remove("submitters") {
        Some(Value::Array(s)) => s,
        _ => Vec::new(),
    };
    let table: Vec<Value> = review.table().map(machine::value).collect();
    let mut doc = machine::Document::new("verify", "submitters", submitters)
        .with("round", true.into())
        .with("ruleset_evidence", how.to_vec().into())
        .with("table", table.into());
    for (k, v) in all {
        doc = doc.with(&k, v);
    }
    doc.render()
}
