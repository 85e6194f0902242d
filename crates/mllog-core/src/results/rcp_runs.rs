//! `submission_runs` of the official `rcp_checker.py`: the number of runs a submission has per
//! usage and benchmark, which the RCP statistics use. It is a Python dict literal of string
//! keys and integers in the checker's source, not a data file, so it is read from that literal
//! ([`super::py_literal`]).

/// `submission_runs[usage]` as `(benchmark, runs)` in source order; `None` when the source has
/// no such literal, it holds anything else, or it lacks `usage`.
pub(super) fn parse_submission_runs(source: &str, usage: &str) -> Option<Vec<(String, usize)>> {
    super::py_literal::usage_counts(source, "submission_runs", usage)
}

#[cfg(test)]
mod tests {
    use super::parse_submission_runs;

    #[test]
    fn the_literal_with_comments_and_trailing_commas() {
        let src = "x = 1\nsubmission_runs = {\n  \"training\": {\n    'bert': 10, # ten\n    'gpt3': 3,\n  },\n  'hpc': {'oc20' : 5}\n}\n";
        assert_eq!(
            parse_submission_runs(src, "training").unwrap(),
            [("bert".to_string(), 10), ("gpt3".to_string(), 3)]
        );
        assert_eq!(
            parse_submission_runs(src, "hpc").unwrap(),
            [("oc20".to_string(), 5)]
        );
        assert!(parse_submission_runs(src, "inference").is_none());
        assert!(parse_submission_runs("submission_runs = f()", "hpc").is_none());
        let computed = "\nsubmission_runs = {'training': {'bert': 2 * 5}}";
        assert!(parse_submission_runs(computed, "training").is_none());
    }
}
