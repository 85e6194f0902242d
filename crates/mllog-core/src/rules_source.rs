//! Where the official rules are read from at run time: an `mlperf_logging` package folder
//! given as a path, or the one a Python interpreter has installed. The compliance rules are
//! read from [`RulesSource::compliance_dir`] (by the rule engine, feature `rules`), the RCP
//! tables from [`RulesSource::rcp_dir`] (feature `review`).
//!
//! A spec is `DIR` (the package folder, or its `compliance_checker` or `rcp_checker` folder),
//! `python` (the interpreter named by the caller: `$MLLOG_PYTHON`, else `python3`, for
//! [`RulesSource::from_env`]) or `python:PATH`. The package version is the interpreter's
//! `importlib.metadata`, or for a folder the `mlperf_logging-<version>.dist-info` installed
//! beside it; unknown otherwise, and said so. Finding the package through Python starts that
//! interpreter once, as a child process.
//!
//! ```
//! use mllog_core::rules_source::{RulesOrigin, RulesSource};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let pkg = dir.path().join("mlperf_logging");
//! std::fs::create_dir_all(pkg.join("compliance_checker")).unwrap();
//! std::fs::create_dir_all(pkg.join("rcp_checker")).unwrap();
//! std::fs::create_dir_all(dir.path().join("mlperf_logging-4.1.68.dist-info")).unwrap();
//! let src = RulesSource::resolve(pkg.join("compliance_checker").to_str().unwrap(), "python3").unwrap();
//! assert_eq!(src.root, pkg);
//! assert_eq!(src.version.as_deref(), Some("4.1.68"));
//! assert_eq!(src.origin, RulesOrigin::Folder);
//! assert_eq!(src.rcp_dir(), pkg.join("rcp_checker"));
//! assert!(RulesSource::resolve(dir.path().join("nothing").to_str().unwrap(), "python3").is_err());
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable that names a spec when no `--rules` is given.
pub const RULES_ENV: &str = "MLLOG_RULES";

/// The environment variable naming the interpreter of the spec `python`.
pub const PYTHON_ENV: &str = "MLLOG_PYTHON";

/// How the package folder was found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", rename_all = "snake_case"))]
pub enum RulesOrigin {
    /// A path given.
    Folder,
    /// Asked of a Python interpreter.
    Python {
        /// The interpreter.
        python: String,
    },
}

/// An official package folder to read rules from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RulesSource {
    /// The `mlperf_logging` package folder.
    #[cfg_attr(feature = "serde", serde(serialize_with = "display_path"))]
    pub root: PathBuf,
    /// How it was found.
    pub origin: RulesOrigin,
    /// The mlperf-logging version, when known.
    pub version: Option<String>,
}

/// Why a spec names no usable package folder.
#[derive(Debug, thiserror::Error)]
pub enum RulesSourceError {
    /// The folder is not an `mlperf_logging` package folder or one of its checker folders.
    #[error("{}: not an mlperf_logging package folder, nor its compliance_checker or rcp_checker folder (neither folder is in or beside it)", .0.display())]
    NotAPackage(PathBuf),
    /// The interpreter cannot be run.
    #[error("{python}: cannot run it to find the mlperf_logging package: {source}")]
    Spawn {
        /// The interpreter.
        python: String,
        /// Why.
        source: std::io::Error,
    },
    /// The interpreter has no `mlperf_logging` package.
    #[error("{python}: no mlperf_logging package found: {why}")]
    NoPackage {
        /// The interpreter.
        python: String,
        /// What it said.
        why: String,
    },
}

#[cfg(feature = "serde")]
fn display_path<S: serde::Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&p.display())
}

const FIND: &str = "import os, mlperf_logging as p\n\
print(os.path.dirname(os.path.abspath(p.__file__)))\n\
try:\n    import importlib.metadata as m; print(m.version('mlperf-logging'))\n\
except Exception:\n    print('')\n";

impl RulesSource {
    /// The source a spec names (see the module's documentation); `python` is the interpreter
    /// of the spec `python`.
    pub fn resolve(spec: &str, python: &str) -> Result<RulesSource, RulesSourceError> {
        match spec.strip_prefix("python") {
            Some("") => Self::from_python(python),
            Some(rest) if rest.starts_with(':') => Self::from_python(&rest[1..]),
            _ => Self::from_folder(Path::new(spec)),
        }
    }

    /// The source `spec` names, else the one `$MLLOG_RULES` names (`None`: neither, or
    /// empty); the spec `python` means `$MLLOG_PYTHON`, else `python3`. The one place that
    /// reads these variables.
    pub fn from_env(spec: Option<&str>) -> Option<Result<RulesSource, RulesSourceError>> {
        let from_env = std::env::var(RULES_ENV).ok();
        let spec = spec.or(from_env.as_deref()).filter(|s| !s.is_empty())?;
        let python = std::env::var(PYTHON_ENV).unwrap_or_else(|_| "python3".into());
        Some(Self::resolve(spec, &python))
    }

    /// The package folder `dir` is, or whose checker folder (`compliance_checker`,
    /// `rcp_checker`) it is.
    pub fn from_folder(dir: &Path) -> Result<RulesSource, RulesSourceError> {
        let is_package =
            |d: &Path| d.join("compliance_checker").is_dir() || d.join("rcp_checker").is_dir();
        let root = if is_package(dir) {
            dir.to_path_buf()
        } else {
            match dir.parent() {
                Some(p) if is_package(p) && dir.is_dir() => p.to_path_buf(),
                Some(p)
                    if p.as_os_str().is_empty() && is_package(Path::new(".")) && dir.is_dir() =>
                {
                    PathBuf::from(".")
                }
                _ => return Err(RulesSourceError::NotAPackage(dir.to_path_buf())),
            }
        };
        let version = installed_version(&root);
        Ok(RulesSource {
            root,
            origin: RulesOrigin::Folder,
            version,
        })
    }

    /// The package folder `python` imports.
    pub fn from_python(python: &str) -> Result<RulesSource, RulesSourceError> {
        let out = Command::new(python)
            .arg("-c")
            .arg(FIND)
            .output()
            .map_err(|source| RulesSourceError::Spawn {
                python: python.into(),
                // Running a folder fails as a permission error: say what it is instead.
                source: if Path::new(python).is_dir() {
                    std::io::Error::other("it is a folder, not a Python interpreter")
                } else {
                    source
                },
            })?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let (Some(root), true) = (lines.next().filter(|l| !l.is_empty()), out.status.success())
        else {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(RulesSourceError::NoPackage {
                python: python.into(),
                why: err
                    .lines()
                    .rfind(|l| !l.trim().is_empty())
                    .unwrap_or("no output")
                    .trim()
                    .to_owned(),
            });
        };
        Ok(RulesSource {
            root: PathBuf::from(root),
            origin: RulesOrigin::Python {
                python: python.into(),
            },
            version: lines
                .next()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned),
        })
    }

    /// `<root>/compliance_checker`: the rule files, by `<usage>_<ruleset>/`.
    pub fn compliance_dir(&self) -> PathBuf {
        self.root.join("compliance_checker")
    }

    /// `<root>/rcp_checker`: the RCP tables, by `<usage>_<ruleset>/`.
    pub fn rcp_dir(&self) -> PathBuf {
        self.root.join("rcp_checker")
    }

    /// Where the rules come from, in words: `mlperf-logging 4.1.68 at PATH (imported by
    /// python3)`.
    pub fn describe(&self) -> String {
        let version = self.version.as_deref().unwrap_or("(version unknown)");
        let how = match &self.origin {
            RulesOrigin::Folder => String::new(),
            RulesOrigin::Python { python } => format!(" (imported by {python})"),
        };
        format!("mlperf-logging {version} at {}{how}", self.root.display())
    }
}

/// The version of the `mlperf_logging-<version>.dist-info` beside a package folder, when
/// exactly one is there.
fn installed_version(root: &Path) -> Option<String> {
    let parent = root.canonicalize().ok()?.parent()?.to_path_buf();
    let mut found = std::fs::read_dir(parent).ok()?.filter_map(|e| {
        let n = e.ok()?.file_name().to_string_lossy().into_owned();
        let v = n
            .strip_prefix("mlperf_logging-")?
            .strip_suffix(".dist-info")?;
        Some(v.to_owned())
    });
    let v = found.next()?;
    found.next().is_none().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The package folder, its compliance_checker and its rcp_checker folders name the same
    /// package, whose version is the dist-info's beside it; anything else is refused.
    #[test]
    fn a_folder_names_its_package() {
        let tmp = tempfile::tempdir().unwrap();
        let pkg = tmp.path().join("mlperf_logging");
        for d in ["rcp_checker", "compliance_checker"] {
            std::fs::create_dir_all(pkg.join(d)).unwrap();
        }
        std::fs::create_dir_all(tmp.path().join("mlperf_logging-9.9.1rc2.dist-info")).unwrap();
        for dir in [
            pkg.clone(),
            pkg.join("compliance_checker"),
            pkg.join("rcp_checker"),
        ] {
            let s = RulesSource::resolve(dir.to_str().unwrap(), "python3").unwrap();
            assert_eq!(s.root, pkg, "{}", dir.display());
            assert_eq!(s.rcp_dir(), pkg.join("rcp_checker"));
            assert_eq!(s.version.as_deref(), Some("9.9.1rc2"));
            assert_eq!(s.origin, RulesOrigin::Folder);
        }
        let e = RulesSource::resolve(tmp.path().to_str().unwrap(), "python3").unwrap_err();
        assert!(matches!(e, RulesSourceError::NotAPackage(_)), "{e}");
        let e = RulesSource::resolve("python:/nonexistent/python3", "python3").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/nonexistent/python3: cannot run it"),
            "{e}"
        );
    }
}
