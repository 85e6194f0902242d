//! `--rules` and `--custom-rcps` of `mllog rcp`, `score` and `verify`: which RCP tables the
//! check reads.

use std::path::PathBuf;
use std::sync::Arc;

use mllog_core::compliance::Ruleset;
use mllog_core::results::rcp_tables::RcpTables;
use mllog_core::rules_source::{RulesSource, RULES_ENV};

/// Where the RCPs come from.
#[derive(clap::Args, Debug)]
pub struct RcpSourceArgs {
    /// Read the RCPs at run time from the official package: DIR is the mlperf_logging package
    /// folder or its compliance_checker folder (the RCPs are `rcp_checker/training_<ruleset>/`
    /// beside it); `python` or `python:PATH` asks that Python (default $MLLOG_PYTHON, else
    /// python3) where its mlperf_logging is installed [default: $MLLOG_RULES, else the
    /// built-in RCPs].
    #[arg(long, value_name = "DIR|python|python:PATH")]
    pub rules: Option<String>,
    /// An RCP file in the official format (the RCP checker's --custom_rcps): it replaces the
    /// RCPs of each benchmark one of its records names.
    #[arg(long, value_name = "FILE")]
    pub custom_rcps: Option<PathBuf>,
}

impl RcpSourceArgs {
    /// Whether the RCPs are read at run time (`--rules` or `MLLOG_RULES`).
    pub fn read_at_run_time(&self) -> bool {
        self.rules.is_some() || std::env::var(RULES_ENV).is_ok_and(|s| !s.is_empty())
    }

    /// The tables of a training ruleset, or the error naming the folder or file.
    pub fn open(&self, ruleset: Ruleset) -> Result<Arc<RcpTables>, String> {
        self.open_named("training", ruleset.as_str())
    }

    /// The tables of `<usage>_<ruleset>`, or the error naming the folder or file.
    pub fn open_named(&self, usage: &str, ruleset: &str) -> Result<Arc<RcpTables>, String> {
        let named = if self.rules.is_some() {
            "--rules"
        } else {
            RULES_ENV
        };
        let source = RulesSource::from_env(self.rules.as_deref())
            .map(|r| r.map_err(|e| format!("{named}: {e}")));
        let tables = match source.transpose()? {
            Some(s) => RcpTables::open(&s.rcp_dir(), usage, ruleset, s.version),
            None if usage == "training" => RcpTables::built_in(ruleset),
            None => Err(
                mllog_core::results::rcp_tables::RcpSourceError::NotBuiltIn {
                    usage: usage.into(),
                    ruleset: ruleset.into(),
                },
            ),
        }
        .map_err(|e| e.to_string())?;
        let tables = match &self.custom_rcps {
            Some(f) => tables.with_custom(f).map_err(|e| e.to_string())?,
            None => tables,
        };
        Ok(Arc::new(tables))
    }
}
