//! Where the RCP check's records come from: the tables built into mllog, or an official
//! `rcp_checker/<usage>_<ruleset>/` folder read at run time, either with a custom RCP file over
//! it as the RCP checker's `--custom_rcps` has it.
//!
//! The official checker reads `rcps_<benchmark>.json` of the folder when it checks a benchmark,
//! so a folder's file that is missing or malformed is an error of that benchmark only. A custom
//! file replaces the benchmark's file as a whole (its records are the table; nothing is merged).
//! The official command checks one benchmark folder, so its custom file is that benchmark's
//! whatever its records name ([`RcpTables::custom_for_one_folder`] checks so, for a command
//! given one benchmark folder). Checking many benchmarks, a custom file stands for each
//! benchmark one of its records names, and the others keep the folder's (or the built-in)
//! tables, which their check says. Records naming another benchmark stay in the table, as in
//! the official checker, which warns about them.
//!
//! The number of runs a submission has per benchmark (`submission_runs`, which the statistics
//! use) is Python code of `rcp_checker.py`, not data: it is read from the `rcp_checker.py` next
//! to the folder when there is one, else taken from the built-in table.

use std::path::{Path, PathBuf};

use super::rcp_data::{RCP_FILES, SUBMISSION_RUNS};
use super::rcp_file::{read_rcp_file, shown_benchmark, RcpFileError, RcpRecord};
use super::rcp_runs::parse_submission_runs;
use super::verify_data::PACKAGE_VERSION;

/// Where the tables come from.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RcpOrigin {
    /// Built into mllog, from mlperf-logging [`PACKAGE_VERSION`].
    BuiltIn {
        /// The package version the tables were generated from.
        package_version: String,
    },
    /// A `<usage>_<ruleset>` folder read at run time.
    Folder {
        /// The folder.
        #[serde(serialize_with = "display_path")]
        dir: PathBuf,
        /// The mlperf-logging version that folder belongs to, when known.
        package_version: Option<String>,
    },
}

/// A custom RCP file (`--custom-rcps`).
#[derive(Clone, Debug, PartialEq)]
pub struct CustomRcps {
    /// The file.
    pub path: PathBuf,
    /// Its records, in file order.
    pub records: Vec<RcpRecord>,
    /// Whether the file is the table of every benchmark checked (one benchmark folder, as the
    /// official command has it), not only of the benchmarks its records name.
    pub for_every_benchmark: bool,
}

/// The RCP tables of one usage and ruleset.
#[derive(Clone, Debug, PartialEq)]
pub struct RcpTables {
    /// `training` or `hpc`.
    pub usage: String,
    /// `X.Y.Z`.
    pub ruleset: String,
    /// Where the tables come from.
    pub origin: RcpOrigin,
    /// The custom file over them.
    pub custom: Option<CustomRcps>,
    /// `submission_runs[usage]`.
    runs: Vec<(String, usize)>,
    /// The `rcp_checker.py` the run counts were read from (`None`: built in).
    runs_from: Option<PathBuf>,
}

/// The records of one benchmark, with where they come from.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchmarkRcps {
    /// The records, in file order.
    pub records: Vec<RcpRecord>,
    /// The file, as the decisions name it.
    pub file: String,
    /// What the official checker warns about them.
    pub warnings: Vec<String>,
}

/// Why a source of RCP tables cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum RcpSourceError {
    /// No `<usage>_<ruleset>` folder.
    #[error("{}: no such RCP folder (the RCP checker there has: {})", dir.display(), if available.is_empty() { "none".to_string() } else { available.join(", ") })]
    NoRuleset {
        /// The folder looked for.
        dir: PathBuf,
        /// The `<usage>_<ruleset>` folders next to it.
        available: Vec<String>,
    },
    /// The built-in tables lack the ruleset.
    #[error("no built-in RCPs for {usage} {ruleset} (built in: training {}); read them from the official package with --rules", built_in_rulesets().join(", "))]
    NotBuiltIn {
        /// The usage.
        usage: String,
        /// The ruleset.
        ruleset: String,
    },
    /// `rcp_checker.py` is there but its `submission_runs` cannot be read.
    #[error("{}: no `submission_runs` table for {usage} that can be read", path.display())]
    Runs {
        /// The file.
        path: PathBuf,
        /// The usage.
        usage: String,
    },
    /// The custom file.
    #[error(transparent)]
    Custom(#[from] RcpFileError),
}

fn built_in_rulesets() -> Vec<&'static str> {
    let mut v: Vec<&str> = RCP_FILES.iter().map(|(r, _, _)| *r).collect();
    v.dedup();
    v
}

fn display_path<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&p.display())
}

impl RcpTables {
    /// The built-in tables of a training ruleset.
    pub fn built_in(ruleset: &str) -> Result<RcpTables, RcpSourceError> {
        if !RCP_FILES.iter().any(|(r, _, _)| *r == ruleset) {
            return Err(RcpSourceError::NotBuiltIn {
                usage: "training".into(),
                ruleset: ruleset.into(),
            });
        }
        Ok(RcpTables {
            usage: "training".into(),
            ruleset: ruleset.into(),
            origin: RcpOrigin::BuiltIn {
                package_version: PACKAGE_VERSION.into(),
            },
            custom: None,
            runs: built_in_runs(),
            runs_from: None,
        })
    }

    /// The tables of `<rcp_checker>/<usage>_<ruleset>/`, where `rcp_checker` is the official
    /// package's `rcp_checker` folder; `package_version` is said in the output.
    pub fn open(
        rcp_checker: &Path,
        usage: &str,
        ruleset: &str,
        package_version: Option<String>,
    ) -> Result<RcpTables, RcpSourceError> {
        let dir = rcp_checker.join(format!("{usage}_{ruleset}"));
        if !dir.is_dir() {
            return Err(RcpSourceError::NoRuleset {
                available: rcp_folders(rcp_checker),
                dir,
            });
        }
        let py = rcp_checker.join("rcp_checker.py");
        let (runs, runs_from) = match std::fs::read_to_string(&py) {
            Ok(text) => match parse_submission_runs(&text, usage) {
                Some(r) => (r, Some(py)),
                None => {
                    return Err(RcpSourceError::Runs {
                        path: py,
                        usage: usage.into(),
                    })
                }
            },
            Err(_) if usage == "training" => (built_in_runs(), None),
            Err(_) => {
                return Err(RcpSourceError::Runs {
                    path: py,
                    usage: usage.into(),
                })
            }
        };
        Ok(RcpTables {
            usage: usage.into(),
            ruleset: ruleset.into(),
            origin: RcpOrigin::Folder {
                dir,
                package_version,
            },
            custom: None,
            runs,
            runs_from,
        })
    }

    /// The same tables with the custom RCP file `path` over them.
    pub fn with_custom(mut self, path: &Path) -> Result<RcpTables, RcpSourceError> {
        let records = read_rcp_file(path)?;
        if records.is_empty() {
            return Err(RcpFileError::Format {
                path: path.to_path_buf(),
                why: "no record".into(),
            }
            .into());
        }
        self.custom = Some(CustomRcps {
            path: path.to_path_buf(),
            records,
            for_every_benchmark: false,
        });
        Ok(self)
    }

    /// The same tables for the check of one benchmark folder, as the official command checks
    /// one: the custom file (if any) is the table whatever benchmark its records name.
    pub fn custom_for_one_folder(mut self) -> RcpTables {
        if let Some(c) = &mut self.custom {
            c.for_every_benchmark = true;
        }
        self
    }

    /// `submission_runs[usage][benchmark]`; `None` for a benchmark the RCP checker does not
    /// know (it stops with a KeyError).
    pub fn submission_runs(&self, benchmark: &str) -> Option<usize> {
        self.runs
            .iter()
            .find(|(b, _)| b == benchmark)
            .map(|(_, n)| *n)
    }

    /// The benchmarks with an RCP file in the tables (not counting the custom file), sorted.
    pub fn benchmarks(&self) -> std::io::Result<Vec<String>> {
        let mut v: Vec<String> = match &self.origin {
            RcpOrigin::BuiltIn { .. } => RCP_FILES
                .iter()
                .filter(|(r, _, _)| *r == self.ruleset)
                .map(|(_, b, _)| (*b).to_owned())
                .collect(),
            RcpOrigin::Folder { dir, .. } => std::fs::read_dir(dir)?
                .filter_map(|e| {
                    let n = e.ok()?.file_name().to_string_lossy().into_owned();
                    Some(n.strip_prefix("rcps_")?.strip_suffix(".json")?.to_owned())
                })
                .collect(),
        };
        v.sort();
        Ok(v)
    }

    /// The records the check of `benchmark` uses: the custom file's when it is the table of
    /// every benchmark or one of its records names the benchmark, else the tables' file (the
    /// check then says the custom file was passed over); `Ok(None)` when there is no such file.
    pub fn records(&self, benchmark: &str) -> Result<Option<BenchmarkRcps>, RcpFileError> {
        let mut passed_over = None;
        if let Some(c) = &self.custom {
            if c.for_every_benchmark || c.records.iter().any(|r| r.benchmark == benchmark) {
                return Ok(Some(BenchmarkRcps {
                    records: c.records.clone(),
                    file: format!("{} (custom RCPs)", c.path.display()),
                    warnings: custom_warnings(c, benchmark),
                }));
            }
            passed_over = Some(format!(
                "{}: no record for {benchmark}, so {benchmark} is checked against {} (the \
                 custom file stands for the benchmarks its records name when several are \
                 checked; given one benchmark folder, it is that folder's table)",
                c.path.display(),
                match self.origin {
                    RcpOrigin::BuiltIn { .. } => "the built-in RCPs",
                    RcpOrigin::Folder { .. } => "the package's RCPs",
                }
            ));
        }
        let found = self.own_records(benchmark)?;
        Ok(found.map(|mut b| {
            b.warnings.extend(passed_over);
            b
        }))
    }

    /// The records of `benchmark` in the tables themselves (no custom file).
    fn own_records(&self, benchmark: &str) -> Result<Option<BenchmarkRcps>, RcpFileError> {
        let file = format!("{}_{}/rcps_{benchmark}.json", self.usage, self.ruleset);
        match &self.origin {
            RcpOrigin::BuiltIn { .. } => Ok(RCP_FILES
                .iter()
                .find(|(r, b, _)| *r == self.ruleset && *b == benchmark)
                .map(|(_, _, recs)| BenchmarkRcps {
                    records: recs
                        .iter()
                        .map(|r| RcpRecord {
                            name: r.name.into(),
                            benchmark: r.benchmark.into(),
                            bs: r.bs,
                            converge: r.converge.to_vec(),
                        })
                        .collect(),
                    file: format!("{file} (built in)"),
                    warnings: Vec::new(),
                })),
            RcpOrigin::Folder { dir, .. } => {
                let path = dir.join(format!("rcps_{benchmark}.json"));
                match std::fs::metadata(&path) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Ok(m) if m.is_dir() => return Err(RcpFileError::Directory { path }),
                    // Anything else the read itself says (e.g. permission denied).
                    _ => {}
                }
                let records = read_rcp_file(&path)?;
                if records.is_empty() {
                    return Err(RcpFileError::Format {
                        path,
                        why: "no record (the official rcp_checker stops with a ValueError)".into(),
                    });
                }
                Ok(Some(BenchmarkRcps {
                    records,
                    file: path.display().to_string(),
                    warnings: Vec::new(),
                }))
            }
        }
    }

    /// Where the tables come from, in words.
    pub fn describe(&self) -> String {
        let mut s = match &self.origin {
            RcpOrigin::BuiltIn { package_version } => format!(
                "built-in RCPs {}_{} (mlperf-logging {package_version})",
                self.usage, self.ruleset
            ),
            RcpOrigin::Folder {
                dir,
                package_version,
            } => format!(
                "RCPs read from {}{}",
                dir.display(),
                package_version
                    .as_ref()
                    .map_or(String::new(), |v| format!(" (mlperf-logging {v})"))
            ),
        };
        if let Some(p) = &self.runs_from {
            s.push_str(&format!("; run counts from {}", p.display()));
        } else if matches!(self.origin, RcpOrigin::Folder { .. }) {
            s.push_str("; run counts built in (no rcp_checker.py next to the folder)");
        }
        if let Some(c) = &self.custom {
            s.push_str(&format!("; custom RCPs {} ", c.path.display()));
            if c.for_every_benchmark {
                s.push_str("(the folder's table, whatever benchmark its records name)");
            } else {
                let mut named: Vec<&str> = c.records.iter().map(|r| r.benchmark.as_str()).collect();
                named.sort_unstable();
                named.dedup();
                s.push_str(&format!(
                    "(for {}; any other benchmark keeps its RCPs)",
                    named.join(", ")
                ));
            }
        }
        s
    }
}

/// What the official checker warns about a custom file used for `benchmark`: a record of
/// another benchmark (once per such record, as it logs it), and records of several benchmarks.
fn custom_warnings(c: &CustomRcps, benchmark: &str) -> Vec<String> {
    let other = c
        .records
        .iter()
        .filter(|r| r.benchmark != benchmark)
        .count();
    // `first_bmark`, as the official loop sets it: the first record's, unless that is "".
    let mut first = "";
    let mut several = false;
    for r in &c.records {
        if first.is_empty() {
            first = &r.benchmark;
        } else if first != r.benchmark {
            several = true;
        }
    }
    let mut warnings = Vec::new();
    if other > 0 {
        let mut named: Vec<&str> = Vec::new();
        for r in &c.records {
            let b = shown_benchmark(&r.benchmark);
            if !named.contains(&b) {
                named.push(b);
            }
        }
        let mut said = format!(
            "{}: {other} of {} records are not for {benchmark} (records of {}); they stay in \
             the table, as the official checker keeps them (it warns: \"RCP in specified json \
             file does not match benchmark name in results.\"",
            c.path.display(),
            c.records.len(),
            named.join(", ")
        );
        if several {
            said.push_str(", \"RCPs in specified json file are for different benchmarks.\"");
        }
        said.push(')');
        warnings.push(said);
    }
    warnings
}

/// The machine-readable form of where the tables come from.
#[derive(serde::Serialize)]
struct Described<'a> {
    usage: &'a str,
    ruleset: &'a str,
    #[serde(flatten)]
    origin: &'a RcpOrigin,
    #[serde(serialize_with = "opt_path")]
    submission_runs_from: Option<&'a PathBuf>,
    #[serde(serialize_with = "opt_path")]
    custom_rcps: Option<&'a PathBuf>,
}

fn opt_path<S: serde::Serializer>(p: &Option<&PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.collect_str(&p.display()),
        None => s.serialize_none(),
    }
}

impl serde::Serialize for RcpTables {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Described {
            usage: &self.usage,
            ruleset: &self.ruleset,
            origin: &self.origin,
            submission_runs_from: self.runs_from.as_ref(),
            custom_rcps: self.custom.as_ref().map(|c| &c.path),
        }
        .serialize(s)
    }
}

fn built_in_runs() -> Vec<(String, usize)> {
    SUBMISSION_RUNS
        .iter()
        .map(|(b, n)| ((*b).to_owned(), *n))
        .collect()
}

/// The `<usage>_<ruleset>` folders of an `rcp_checker` folder, sorted.
pub fn rcp_folders(rcp_checker: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(rcp_checker)
        .map(|d| {
            d.filter_map(|e| {
                let e = e.ok()?;
                let n = e.file_name().to_string_lossy().into_owned();
                (e.path().is_dir() && n.contains('_') && !n.starts_with("__")).then_some(n)
            })
            .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
