//! Submission metadata checked against the rules. It lives here, not in `submission`, so that
//! the rules depend on the submission types and never the other way round.

use super::{rules, Check, Req, Ruleset};
use crate::keys;
use crate::submission::{Division, Submission};
use crate::Error;

impl Submission {
    /// Checks the submission against `ruleset`'s rules (the compliance module is the one
    /// source of truth): allowed precision names, an allowed benchmark, and, for the closed
    /// division, every key the common and closed rules require. Errors name the field, the
    /// builder method and the variable.
    pub fn validate(&self, ruleset: Ruleset) -> Result<(), Error> {
        let rules = rules(ruleset);
        for (key, value) in [
            (
                keys::LOWEST_NUMERICAL_PRECISION_IN_LINEAR,
                &self.precision_linear,
            ),
            (
                keys::LOWEST_NUMERICAL_PRECISION_IN_ATTN,
                &self.precision_attn,
            ),
            (
                keys::LOWEST_NUMERICAL_PRECISION_IN_COMM,
                &self.precision_comm,
            ),
        ] {
            let (Some(value), Some(rule)) = (value, rules.common.rule(key)) else {
                continue;
            };
            for check in &rule.checks {
                if let Check::OneOf(allowed) = check
                    && !allowed.contains(&value.as_str())
                {
                    return Err(Error::Submission(format!(
                        "`{key}` must be one of {} under ruleset {ruleset}, found {value:?}",
                        allowed.join(", ")
                    )));
                }
            }
        }
        if let Some(b) = self.benchmark
            && self.division.is_some()
            && !rules.allows(b)
        {
            return Err(Error::Submission(format!(
                "benchmark `{b}` is not part of ruleset {ruleset} (allowed: {})",
                rules
                    .benchmarks()
                    .iter()
                    .map(|b| b.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if self.division != Some(Division::Closed) {
            return Ok(());
        }
        for field in self.fields() {
            let required = [&rules.common, &rules.closed_common].iter().any(|file| {
                file.rule(field.key)
                    .and_then(|r| r.req)
                    .is_some_and(|req| matches!(req, Req::ExactlyOne | Req::AtLeastOne))
            });
            if required && !field.set {
                return Err(Error::Submission(format!(
                    "closed submission under ruleset {ruleset}: `{}` is required but not set \
                     (Submission::{} or {})",
                    field.key, field.builder, field.variable
                )));
            }
        }
        Ok(())
    }
}
