//! The rule engine: the official checker's rule files, read at run time from an installed
//! `mlperf_logging` package (or any folder laid out as its `compliance_checker`), run as the
//! official checker runs them.
//!
//! The YAML is read as PyYAML's `BaseLoader` reads it (every scalar a string), the Python
//! snippets are parsed by `rustpython-parser` and lowered at load to the forms the rule files
//! use; anything else is a [`LoadError::Unsupported`] naming the file, the line and the
//! construct, never a silent pass. The log is parsed by the form of the official parser the
//! package has for the ruleset, and the checker's algorithm is followed step for step (see
//! `docs/compliance.md`, "The rule engine").
//!
//! ```no_run
//! use mllog_core::compliance::engine::RuleEngine;
//! use std::path::Path;
//!
//! let dir = Path::new("venv/lib/python3.11/site-packages/mlperf_logging/compliance_checker");
//! let engine = RuleEngine::load(dir, "training", "4.1.0").unwrap();
//! let report = engine.check_file(Path::new("result_0.txt"), false).unwrap();
//! println!("{}", if report.passed() { "SUCCESS" } else { "FAILED" });
//! ```

mod builtins;
mod eval;
mod ir;
mod lines;
mod log;
mod methods;
mod obj;
mod ops;
mod python;
mod rules;
mod run;
mod shapes;
mod skim;
mod stream;
mod token_lines;
mod yaml;

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

pub use log::LogFormat;
pub use rules::{Ignored, LoadError};

use super::report::{Finding, Severity};

use rules::RuleFile;
use stream::LogText;

/// The rule files of a compliance checker folder, loaded once each (by the name the checker
/// enqueues them under, e.g. `training_4.1.0/closed_bert.yaml`).
pub(crate) struct Library {
    pub(crate) dir: PathBuf,
    files: RefCell<HashMap<String, Rc<RuleFile>>>,
    /// The snippets compiled so far, shared by the files.
    compiled: RefCell<rules::Compiled>,
}

impl Library {
    /// The rule file `name` (joined to the folder as the checker joins it); `None` when there
    /// is no such file.
    pub(crate) fn file(&self, name: &str) -> Result<Option<Rc<RuleFile>>, LoadError> {
        if let Some(f) = self.files.borrow().get(name) {
            return Ok(Some(f.clone()));
        }
        let path = self.dir.join(name);
        if !path.exists() {
            return Ok(None);
        }
        let f = Rc::new(RuleFile::load(&path, &mut self.compiled.borrow_mut())?);
        self.files.borrow_mut().insert(name.to_string(), f.clone());
        Ok(Some(f))
    }
}

/// The `(usage, ruleset)` pairs a compliance checker folder has rules for: its folders named
/// `<usage>_<X.Y.Z>` (as the official CLI lists its choices), sorted.
pub fn rulesets(compliance_dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(compliance_dir) else {
        return out;
    };
    for e in entries.flatten() {
        if !e.path().is_dir() {
            continue;
        }
        let name = e.file_name().to_string_lossy().to_string();
        if let Some((usage, ruleset)) = name.split_once('_')
            && super::Ruleset::is_well_formed(ruleset)
            && !usage.is_empty()
            && usage.chars().all(|c| c.is_alphanumeric())
        {
            out.push((usage.to_string(), ruleset.to_string()));
        }
    }
    out.sort_by(|a, b| (&a.0, version_key(&a.1)).cmp(&(&b.0, version_key(&b.1))));
    out
}

fn version_key(v: &str) -> Vec<u32> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// The official rules of one usage and ruleset, loaded and compiled, ready to check logs.
pub struct RuleEngine {
    lib: Library,
    usage: String,
    ruleset: String,
    format: LogFormat,
    start: String,
}

impl std::fmt::Debug for RuleEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleEngine")
            .field("dir", &self.lib.dir)
            .field("usage", &self.usage)
            .field("ruleset", &self.ruleset)
            .field("start", &self.start)
            .finish()
    }
}

impl RuleEngine {
    /// Opens the rules of `<compliance_dir>/<usage>_<ruleset>/` and picks the log parser the
    /// package has for the ruleset. Checks start from `<usage>_<ruleset>/common.yaml`, as the
    /// official CLI's default `--config`; that file is loaded here (an error in it is an error
    /// here, naming the file and line), and every other file when a check first reaches it,
    /// as the official checker reads them: a log is checked by the few files its chain of
    /// `enqueue_config` names, not the whole folder. [`RuleEngine::load_all`] loads the rest.
    pub fn load(
        compliance_dir: &Path,
        usage: &str,
        ruleset: &str,
    ) -> Result<RuleEngine, LoadError> {
        let folder = format!("{usage}_{ruleset}");
        let dir = compliance_dir.join(&folder);
        if !dir.is_dir() {
            let have: Vec<String> = rulesets(compliance_dir)
                .into_iter()
                .map(|(u, r)| format!("{u} {r}"))
                .collect();
            return Err(LoadError::NoRuleset {
                dir: compliance_dir.into(),
                usage: usage.into(),
                ruleset: ruleset.into(),
                have: if have.is_empty() {
                    "no rulesets".into()
                } else {
                    have.join(", ")
                },
            });
        }
        let format = LogFormat::of(compliance_dir, ruleset).ok_or_else(|| LoadError::NoParser {
            dir: compliance_dir.into(),
            ruleset: ruleset.into(),
            digits: ruleset.replace('.', ""),
        })?;
        let lib = Library {
            dir: compliance_dir.into(),
            files: RefCell::new(HashMap::new()),
            compiled: RefCell::new(HashMap::new()),
        };
        let start = format!("{folder}/common.yaml");
        lib.file(&start)?;
        Ok(RuleEngine {
            lib,
            usage: usage.into(),
            ruleset: ruleset.into(),
            format,
            start,
        })
    }

    /// Loads every rule file of the ruleset's folder now, so that an error in any of them
    /// (naming the file and line) is known before a log is checked, whether or not a log's
    /// chain of configs reaches the file.
    pub fn load_all(&self) -> Result<(), LoadError> {
        let folder = format!("{}_{}", self.usage, self.ruleset);
        let dir = self.lib.dir.join(&folder);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|source| LoadError::Io {
                path: dir.clone(),
                source,
            })?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.ends_with(".yaml"))
            .collect();
        names.sort();
        for n in names {
            self.lib.file(&format!("{folder}/{n}"))?;
        }
        Ok(())
    }

    /// Starts checks from one custom rule file instead (the official `--config FILE`): a
    /// relative path is joined to the compliance folder as the official checker joins it,
    /// and, when no such file is there, taken from the current directory. A file found in
    /// neither place is the official "Could not find config file" when a log is checked.
    pub fn with_config(mut self, config: &Path) -> Result<RuleEngine, LoadError> {
        let joined = self.lib.dir.join(config);
        let name = if joined.exists() || !config.exists() {
            config.to_string_lossy().to_string()
        } else {
            std::path::absolute(config)
                .unwrap_or_else(|_| config.into())
                .to_string_lossy()
                .to_string()
        };
        self.lib.file(&name)?;
        self.start = name;
        Ok(self)
    }

    /// Whether the ruleset's round has `benchmark`, as its own rules say: the `CHECK`s of
    /// the `submission_benchmark` rule in `<usage>_<ruleset>/closed_common.yaml`, run on a
    /// record with that value. A folder may keep the rule file of a benchmark its round has
    /// dropped (5.1.0 keeps `closed_bert.yaml`); this list is the one a log is checked
    /// against. `None` when the folder has no such rule, or its check reads more than the
    /// value.
    pub fn accepts_benchmark(&self, benchmark: &str) -> Option<bool> {
        let name = format!("{}_{}/closed_common.yaml", self.usage, self.ruleset);
        let file = self.lib.file(&name).ok()??;
        run::checks_hold(&file, "submission_benchmark", obj::Obj::str(benchmark))
    }

    /// The usage (`training`, `hpc`).
    pub fn usage(&self) -> &str {
        &self.usage
    }

    /// The ruleset, e.g. `4.1.0`.
    pub fn ruleset(&self) -> &str {
        &self.ruleset
    }

    /// The compliance checker folder the rules come from.
    pub fn dir(&self) -> &Path {
        &self.lib.dir
    }

    /// The parser the logs are read with.
    pub fn log_format(&self) -> LogFormat {
        self.format
    }

    /// The rule files loaded so far, by the names the checker enqueues them under.
    pub fn rule_files(&self) -> Vec<String> {
        let mut v: Vec<String> = self.lib.files.borrow().keys().cloned().collect();
        v.sort();
        v
    }

    /// What the rule files loaded so far hold that the official checker reads past without a
    /// word (a misspelt field, an entry or a `REQ` it does not know), by file name and line.
    /// The verdicts ignore it as the checker does; a tool says it as a warning.
    pub fn ignored(&self) -> Vec<Ignored> {
        let files = self.lib.files.borrow();
        let mut names: Vec<&String> = files.keys().collect();
        names.sort();
        names
            .into_iter()
            .flat_map(|n| files[n].ignored.iter().cloned())
            .collect()
    }

    /// Checks a whole log as the official checker does (with `werror`, as its `--werror`).
    /// A rule file the check reaches that cannot be loaded (malformed, or Python the engine
    /// does not run) is an error: the log gets no verdict.
    pub fn check_bytes(&self, log: &[u8], werror: bool) -> Result<EngineReport, LoadError> {
        let parsed = self.scan(|scan| {
            scan.feed(log, 0);
            Ok(())
        })?;
        self.check_parsed(parsed, LogText::Bytes(log), werror)
    }

    /// [`RuleEngine::check_bytes`] of a file, read as a stream: the engine holds the records'
    /// places and keys and the objects of the records the rules read, not the file; the text of
    /// a record a later rule file reads is read again from the file.
    pub fn check_file(&self, path: &Path, werror: bool) -> Result<EngineReport, LoadError> {
        let io = |source| LoadError::Io {
            path: path.into(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let parsed = self.scan(|scan| stream::scan_reader(&file, scan).map_err(io))?;
        self.check_parsed(parsed, LogText::File(&file), werror)
    }

    /// Runs the official parser through `feed`, building as it goes the records the first rule
    /// file reads.
    fn scan(
        &self,
        feed: impl FnOnce(&mut log::Scan) -> Result<(), LoadError>,
    ) -> Result<log::Parsed, LoadError> {
        let first = self.lib.file(&self.start)?;
        let wanted = |key: &str| {
            first
                .as_ref()
                .is_some_and(|f| f.keys.iter().any(|k| k.name == key))
        };
        let mut scan = log::Scan::new(self.format, &wanted);
        feed(&mut scan)?;
        Ok(scan.finish())
    }

    fn check_parsed(
        &self,
        mut parsed: log::Parsed,
        text: LogText,
        werror: bool,
    ) -> Result<EngineReport, LoadError> {
        let mut msgs = run::Messages::new(werror);
        let mut report = EngineReport {
            usage: self.usage.clone(),
            ruleset: self.ruleset.clone(),
            werror,
            rule_files: Vec::new(),
            records: parsed.records.len(),
            findings: Vec::new(),
            crashed: false,
        };
        if let Some((phys, why)) = parsed.crash.take() {
            report.crashed = true;
            let mut f = run::crash_finding(&run::Crash(why));
            f.line = Some(phys);
            f.source = "mlp_parser".into();
            report.findings.push(f);
            return Ok(report);
        }
        run::parse_findings(&mut msgs, &parsed.errors, parsed.error_count);
        let mut lines = lines::Lines::new(text, self.format, parsed);
        let mut r = run::Run {
            lib: &self.lib,
            msgs,
            applied: Vec::new(),
            load_error: None,
            locals: Default::default(),
        };
        let crash = r.check_loglines(&mut lines, &self.start).err();
        if let Some(e) = r.load_error {
            return Err(e);
        }
        report.rule_files = r.applied;
        report.findings = r.msgs.into_findings();
        if let Some(c) = crash {
            report.crashed = true;
            report.findings.push(run::crash_finding(&c));
        }
        Ok(report)
    }
}

/// The verdict of the official rules on a log, with the checker's messages as findings.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct EngineReport {
    /// `training` or `hpc`.
    pub usage: String,
    /// The ruleset.
    pub ruleset: String,
    /// Whether warnings were errors (the official `--werror`).
    pub werror: bool,
    /// The rule files applied, in order.
    pub rule_files: Vec<String>,
    /// Records parsed.
    pub records: usize,
    /// The checker's messages, in the order it logs them (warnings, messages about keys,
    /// the others), and a `fatal` finding where it raises.
    pub findings: Vec<Finding>,
    /// Whether the official checker raises on this log (a traceback; it fails the log).
    pub crashed: bool,
}

impl EngineReport {
    /// The official verdict: `SUCCESS` (true) or `FAILED` (a message, a warning under
    /// `werror`, or a crash).
    pub fn passed(&self) -> bool {
        !self.crashed
            && !self.findings.iter().any(|f| {
                f.severity == Severity::Error || (self.werror && f.severity == Severity::Warning)
            })
    }

    /// The errors (warnings included under `werror`).
    pub fn errors(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| {
            f.severity == Severity::Error || (self.werror && f.severity == Severity::Warning)
        })
    }

    /// The warnings (none under `werror`: they are errors there).
    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| !self.werror && f.severity == Severity::Warning)
    }
}
