//! `--rules` and `--custom-rcps` of `mllog rcp`, `score` and `verify`: which RCP tables the
//! check reads.

use std::path::PathBuf;
use std::sync::Arc;

use mllog_core::compliance::Ruleset;
use mllog_core::results::rcp_tables::RcpTables;
use mllog_core::results::rules_source::{RulesSource, RULES_ENV};

/// Where the RCPs come from.
#[derive(clap::Args, Debug)]
pub struct RcpSourceArgs {
    /// Read the RCPs at run time from the official package: DIR is the mlperf_logging package
    /// folder or its compliance_checker folder (the RCPs are rcp_checker/training_<ruleset>/
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
    /// The tables of `ruleset`, or the error naming the folder or file.
    pub fn open(&self, ruleset: Ruleset) -> Result<Arc<RcpTables>, String> {
        let source = match &self.rules {
            Some(spec) => Some(RulesSource::resolve(spec).map_err(|e| format!("--rules: {e}"))),
            None => RulesSource::from_env().map(|r| r.map_err(|e| format!("{RULES_ENV}: {e}"))),
        };
        let tables = match source.transpose()? {
            Some(s) => RcpTables::open(&s.rcp_dir(), "training", ruleset.as_str(), s.version),
            None => RcpTables::built_in(ruleset.as_str()),
        }
        .map_err(|e| e.to_string())?;
        let tables = match &self.custom_rcps {
            Some(f) => tables.with_custom(f).map_err(|e| e.to_string())?,
            None => tables,
        };
        Ok(Arc::new(tables))
    }
}
