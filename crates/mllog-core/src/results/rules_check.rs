//! The compliance step of `score` and `verify` under rules read at run time: each result file
//! checked by the rule engine running the official rule files of one ruleset of a package
//! (`mllog score --rules`, `mllog verify --rules`), so that a ruleset this build has no rules
//! for (an older round, a release candidate of the next one) is scored and reviewed as the
//! official tools do, whose result summarizer and package checker run the package's own
//! compliance checker.
//!
//! The engine is not `Send` (its objects are reference-counted), and `verify` checks files on
//! several threads: a [`RulesCheck`] names the rules, and each thread loads its own engine the
//! first time it checks a file (the load is checked once, when the [`RulesCheck`] is made).

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::compliance::engine::{rulesets, EngineReport, LoadError, RuleEngine};
use crate::rules_source::RulesSource;

/// The rules of one usage and ruleset of a package, for checking result files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RulesCheck {
    root: PathBuf,
    compliance_dir: PathBuf,
    usage: String,
    ruleset: String,
    described: String,
}

thread_local! {
    /// The engines this thread loaded, by (folder, usage, ruleset).
    static ENGINES: RefCell<Vec<(RulesCheck, Rc<RuleEngine>)>> = const { RefCell::new(Vec::new()) };
}

impl RulesCheck {
    /// The rules of `<usage>_<ruleset>` in the source's `compliance_checker` folder, loaded once
    /// to tell whether they can be run (a ruleset the source lacks, a rule file that does not
    /// load: the error names the folder or the file and line).
    pub fn load(source: &RulesSource, usage: &str, ruleset: &str) -> Result<RulesCheck, LoadError> {
        let check = RulesCheck {
            root: source.root.clone(),
            compliance_dir: source.compliance_dir(),
            usage: usage.to_owned(),
            ruleset: ruleset.to_owned(),
            described: source.describe(),
        };
        check.engine()?;
        Ok(check)
    }

    /// The ruleset, `X.Y.Z`.
    pub fn ruleset(&self) -> &str {
        &self.ruleset
    }

    /// The usage (`training`).
    pub fn usage(&self) -> &str {
        &self.usage
    }

    /// The `mlperf_logging` package folder the rules are read from.
    pub fn package_root(&self) -> &Path {
        &self.root
    }

    /// Where the rules come from, in words (`mlperf-logging 4.1.68 at …`).
    pub fn describe(&self) -> &str {
        &self.described
    }

    /// Whether the ruleset has rules for `benchmark` (a `closed_<benchmark>.yaml`), as the
    /// checker's `submission_benchmark` rule lets a log through to them.
    pub fn allows(&self, benchmark: &str) -> bool {
        allows(&self.compliance_dir, &self.usage, &self.ruleset, benchmark)
    }

    fn engine(&self) -> Result<Rc<RuleEngine>, LoadError> {
        if let Some(e) =
            ENGINES.with_borrow(|v| v.iter().find(|(k, _)| k == self).map(|(_, e)| e.clone()))
        {
            return Ok(e);
        }
        let e = RuleEngine::load(&self.compliance_dir, &self.usage, &self.ruleset)?;
        // Every file of the ruleset, not only those a first log reaches: a review stops on a
        // rule file that does not load before it reads any folder, naming the file.
        e.load_all()?;
        let e = Rc::new(e);
        ENGINES.with_borrow_mut(|v| v.push((self.clone(), e.clone())));
        Ok(e)
    }

    /// The official verdict on one result file (not `--werror`, as the result summarizer and
    /// the package checker check). The file is read as a stream.
    pub fn check_file(&self, path: &Path) -> std::io::Result<EngineReport> {
        let engine = self.engine().map_err(std::io::Error::other)?;
        engine.check_file(path, false).map_err(|e| match e {
            LoadError::Io { source, .. } => source,
            other => std::io::Error::other(other),
        })
    }
}

/// Whether `<usage>_<ruleset>` of the compliance folder has rules for `benchmark`.
fn allows(compliance_dir: &Path, usage: &str, ruleset: &str, benchmark: &str) -> bool {
    !benchmark.is_empty()
        && !benchmark.contains(['/', '\\'])
        && compliance_dir
            .join(format!("{usage}_{ruleset}"))
            .join(format!("closed_{benchmark}.yaml"))
            .is_file()
}

/// The rulesets of `usage` the source ships (its `<usage>_<X.Y.Z>` folders), oldest first.
pub fn source_rulesets(source: &RulesSource, usage: &str) -> Vec<String> {
    rulesets(&source.compliance_dir())
        .into_iter()
        .filter(|(u, _)| u == usage)
        .map(|(_, r)| r)
        .collect()
}

/// The rulesets of `usage` the source ships that have rules for `benchmark`, oldest first.
pub fn rulesets_allowing(source: &RulesSource, usage: &str, benchmark: &str) -> Vec<String> {
    let dir = source.compliance_dir();
    source_rulesets(source, usage)
        .into_iter()
        .filter(|r| allows(&dir, usage, r, benchmark))
        .collect()
}
