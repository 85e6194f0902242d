//! `--rules` and `--custom-rcps` of `mllog rcp`, `score` and `verify`: which RCP tables the
//! check reads, and for `score` and `verify` which rules check the result files and which
//! ruleset the folder is reviewed under.

use std::path::PathBuf;
use std::sync::Arc;

use mllog_core::compliance::Ruleset;
use mllog_core::results::rcp_tables::RcpTables;
use mllog_core::results::round::submitter_folders;
use mllog_core::results::rules_check::RulesCheck;
use mllog_core::results::rules_ruleset::{
    choose_source_round_ruleset, choose_source_ruleset, SourceChoice,
};
use mllog_core::results::ruleset::RulesetChoice;
use mllog_core::results::usage::Usage;
use mllog_core::rules_source::{RulesSource, RULES_ENV};

/// The `--usage` of `rcp`, `score` and `verify`: `training` or `hpc`, read into [`Usage`] (the
/// help lists the values).
pub fn usage_parser() -> impl clap::builder::TypedValueParser<Value = Usage> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Usage::ALL.map(Usage::as_str))
        .map(|name| Usage::from_name(&name).expect("one of the possible values"))
}

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
    /// An RCP file in the official format (the RCP checker's --custom_rcps). Given one
    /// benchmark folder, its records are that folder's RCPs whatever benchmark they name, as
    /// the official checker has it (with its warning); checking several folders, it replaces
    /// the RCPs of each benchmark one of its records names, and each other benchmark's check
    /// says that its own RCPs are used.
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
        self.open_named(Usage::Training, ruleset.as_str())
    }

    /// The package `--rules` (else `MLLOG_RULES`) names; `None` when neither is set, the error
    /// naming the option when it cannot be used.
    pub fn source(&self) -> Option<Result<RulesSource, String>> {
        let named = if self.rules.is_some() {
            "--rules"
        } else {
            RULES_ENV
        };
        RulesSource::from_env(self.rules.as_deref()).map(|r| r.map_err(|e| format!("{named}: {e}")))
    }

    /// The tables of `<usage>_<ruleset>`, or the error naming the folder or file.
    pub fn open_named(&self, usage: Usage, ruleset: &str) -> Result<Arc<RcpTables>, String> {
        let tables = match self.source().transpose()? {
            Some(s) => RcpTables::open(&s.rcp_dir(), usage.as_str(), ruleset, s.version),
            None if usage == Usage::Training => RcpTables::built_in(ruleset),
            None => Err(
                mllog_core::results::rcp_tables::RcpSourceError::NotBuiltIn {
                    usage: usage.as_str().into(),
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

/// The ruleset a `score` or `verify` folder is checked under, how it was chosen, and the rules
/// that check its files: the built-in ones, or (with `--rules` or `MLLOG_RULES`) the rule
/// engine running the source's rule files.
pub struct Chosen {
    /// The ruleset, `X.Y.Z`.
    pub ruleset: String,
    /// The built-in ruleset (without `--rules`).
    pub built_in: Option<Ruleset>,
    /// The source's rules (with `--rules`).
    pub rules: Option<Arc<RulesCheck>>,
    /// Whether it was given (`--ruleset`).
    pub given: bool,
    /// How it was chosen, in lines (the evidence when inferred).
    pub evidence: Vec<String>,
    /// The choice as JSON (`ruleset`, `given`, `candidates`, `evidence`, `unreadable`).
    pub json: serde_json::Value,
    /// Files or folders that could not be read while inferring (exit status 2).
    pub unreadable: Vec<String>,
}

impl RcpSourceArgs {
    /// The ruleset of `dir`: `given` or inferred, from the built-in tables, or under `--rules`
    /// from what the source ships (an error naming the source and its rulesets when it has
    /// none that fits). `infer` is the built-in inference (a folder's or a round's).
    pub fn choose(
        &self,
        given: Option<&str>,
        dir: &std::path::Path,
        infer: impl FnOnce(Option<Ruleset>) -> Result<RulesetChoice, String>,
    ) -> Result<Chosen, String> {
        self.choose_with(given, infer, |src| choose_source_ruleset(src, given, dir))
    }

    /// [`RcpSourceArgs::choose`] for a round (a folder of submitter folders): under `--rules`,
    /// the one ruleset of the source every submitter folder's evidence leaves.
    pub fn choose_round(
        &self,
        given: Option<&str>,
        dir: &std::path::Path,
        infer: impl FnOnce(Option<Ruleset>) -> Result<RulesetChoice, String>,
    ) -> Result<Chosen, String> {
        self.choose_with(given, infer, |src| {
            let (subs, _) =
                submitter_folders(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            choose_source_round_ruleset(src, given, dir, &subs)
        })
    }

    fn choose_with(
        &self,
        given: Option<&str>,
        infer: impl FnOnce(Option<Ruleset>) -> Result<RulesetChoice, String>,
        infer_source: impl FnOnce(&RulesSource) -> Result<SourceChoice, String>,
    ) -> Result<Chosen, String> {
        match self.source().transpose()? {
            None => {
                let built_in = given
                    .map(|g| {
                        Ruleset::from_name(g).ok_or_else(|| {
                            format!(
                                "unknown ruleset {g:?} (built in: {}); the rules of other \
                                 rulesets are read from the official package with --rules",
                                Ruleset::ALL.map(Ruleset::as_str).join(", ")
                            )
                        })
                    })
                    .transpose()?;
                let c = infer(built_in)?;
                Ok(Chosen {
                    ruleset: c.ruleset.as_str().to_owned(),
                    built_in: Some(c.ruleset),
                    rules: None,
                    given: c.given,
                    evidence: c.evidence.clone(),
                    json: crate::machine::value(&c),
                    unreadable: c.unreadable,
                })
            }
            Some(src) => {
                let c = infer_source(&src)?;
                let rules =
                    RulesCheck::load(&src, "training", &c.ruleset).map_err(|e| e.to_string())?;
                Ok(Chosen {
                    ruleset: c.ruleset.clone(),
                    built_in: None,
                    rules: Some(Arc::new(rules)),
                    given: c.given,
                    evidence: c.evidence.clone(),
                    json: crate::machine::value(&c),
                    unreadable: c.unreadable,
                })
            }
        }
    }
}

impl RcpSourceArgs {
    /// The HPC ruleset `given`, with the package's `hpc_<ruleset>` rules: no HPC rules are
    /// built in, so they are read at run time (`--rules` or `MLLOG_RULES`), and the ruleset is
    /// given, as only training rulesets are inferred.
    pub fn choose_hpc(&self, given: Option<&str>) -> Result<Chosen, String> {
        let Some(src) = self.source().transpose()? else {
            return Err(
                "--usage hpc: no HPC rules are built in; read them from the official \
                 package with --rules python (or MLLOG_RULES)"
                    .into(),
            );
        };
        let Some(ruleset) = given else {
            return Err(
                "--usage hpc: give the ruleset (--ruleset X.Y.Z); only training rulesets are \
                 inferred"
                    .into(),
            );
        };
        if !Ruleset::is_well_formed(ruleset) {
            return Err(format!(
                "--ruleset {ruleset:?}: with rules read from a package the ruleset is written \
                 X.Y.Z (e.g. 3.0.0), as its hpc_X.Y.Z folders are named"
            ));
        }
        let rules = RulesCheck::load(&src, "hpc", ruleset).map_err(|e| e.to_string())?;
        let evidence = vec![format!("ruleset {ruleset}: given (--ruleset)")];
        Ok(Chosen {
            ruleset: ruleset.to_owned(),
            built_in: None,
            rules: Some(Arc::new(rules)),
            given: true,
            json: serde_json::json!({
                "ruleset": ruleset, "usage": "hpc", "given": true, "candidates": [ruleset],
                "evidence": evidence, "unreadable": [],
            }),
            evidence: Vec::new(),
            unreadable: Vec::new(),
        })
    }
}

impl Chosen {
    /// The line naming the rules the files are checked with (none for the built-in ones).
    pub fn rules_line(&self) -> Option<String> {
        self.rules.as_ref().map(|r| {
            format!(
                "compliance: the rules of {}_{} read from {}",
                r.usage(),
                r.ruleset(),
                r.describe()
            )
        })
    }

    /// One result file's compliance verdict, for the score: the first error's first line (the
    /// official messages go on with the log line and the checker's state).
    pub fn verdict(
        rules: &RulesCheck,
        file: &std::path::Path,
    ) -> std::io::Result<mllog_core::results::score::FileVerdict> {
        let report = rules.check_file(file)?;
        let first_error = report
            .errors()
            .next()
            .map(|f| f.message.lines().next().unwrap_or_default().to_owned());
        Ok(mllog_core::results::score::FileVerdict {
            ruleset: report.ruleset.clone(),
            passed: report.passed(),
            first_error,
        })
    }
}
