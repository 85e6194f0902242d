//! Where official rules come from: an installed `mlperf_logging` package (its folder, or the
//! one a Python interpreter imports), with its version when the installation says it. The
//! compliance rules are read from [`RulesSource::compliance_dir`], the RCP tables from
//! [`RulesSource::rcp_dir`].
//!
//! ```
//! use mllog_core::compliance::source::{Origin, RulesSource};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let pkg = dir.path().join("mlperf_logging");
//! std::fs::create_dir_all(pkg.join("compliance_checker")).unwrap();
//! std::fs::create_dir_all(dir.path().join("mlperf_logging-4.1.68.dist-info")).unwrap();
//! std::fs::write(dir.path().join("mlperf_logging-4.1.68.dist-info/METADATA"), "Name: mlperf-logging\nVersion: 4.1.68\n").unwrap();
//! let src = RulesSource::resolve(pkg.join("compliance_checker").to_str().unwrap(), "python3").unwrap();
//! assert_eq!(src.root, pkg);
//! assert_eq!(src.version.as_deref(), Some("4.1.68"));
//! assert_eq!(src.origin, Origin::Folder);
//! assert_eq!(src.rcp_dir(), pkg.join("rcp_checker"));
//! assert!(RulesSource::resolve(dir.path().join("nothing").to_str().unwrap(), "python3").is_err());
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

/// How the package was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A folder given by path.
    Folder,
    /// The package a Python interpreter imports.
    Python(String),
}

/// Why no rules source could be resolved.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The folder is neither an `mlperf_logging` package nor its `compliance_checker` folder.
    #[error("{0}: not an mlperf_logging package folder nor its compliance_checker folder")]
    NotAPackage(PathBuf),
    /// The interpreter could not be run or could not import `mlperf_logging`.
    #[error("{python}: cannot locate the mlperf_logging package: {why}")]
    Python {
        /// The interpreter.
        python: String,
        /// What went wrong.
        why: String,
    },
}

/// An installed `mlperf_logging` package the official rules are read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RulesSource {
    /// The package folder (`.../site-packages/mlperf_logging`).
    pub root: PathBuf,
    /// How it was found.
    pub origin: Origin,
    /// The installed distribution's version (`4.1.68`), when its metadata is beside it.
    pub version: Option<String>,
}

/// What the interpreter prints: the package folder, then its version (or nothing).
const LOCATE: &str = "import os, mlperf_logging as m\n\
print(os.path.dirname(os.path.abspath(m.__file__)))\n\
try:\n    from importlib.metadata import version\n    print(version('mlperf-logging'))\n\
except Exception:\n    print('')\n";

impl RulesSource {
    /// Resolves `spec`: `python` (the package `default_python` imports), `python:PATH` (the
    /// one that interpreter imports), or a folder (the package, or its `compliance_checker`).
    pub fn resolve(spec: &str, default_python: &str) -> Result<RulesSource, SourceError> {
        match spec.strip_prefix("python") {
            Some("") => RulesSource::from_python(default_python),
            Some(rest) if rest.starts_with(':') => RulesSource::from_python(&rest[1..]),
            _ => RulesSource::from_dir(Path::new(spec)),
        }
    }

    /// The package at `dir` (the `mlperf_logging` folder or its `compliance_checker`).
    pub fn from_dir(dir: &Path) -> Result<RulesSource, SourceError> {
        let root = if dir.join("compliance_checker").is_dir() {
            dir.to_path_buf()
        } else if dir.file_name().is_some_and(|n| n == "compliance_checker") && dir.is_dir() {
            dir.parent().map(Path::to_path_buf).unwrap_or_default()
        } else {
            return Err(SourceError::NotAPackage(dir.into()));
        };
        let version = dist_version(&root);
        Ok(RulesSource {
            root,
            origin: Origin::Folder,
            version,
        })
    }

    /// The package `python` imports, and the version its installation metadata gives.
    pub fn from_python(python: &str) -> Result<RulesSource, SourceError> {
        let err = |why: String| SourceError::Python {
            python: python.into(),
            why,
        };
        let out = Command::new(python)
            .args(["-c", LOCATE])
            .output()
            .map_err(|e| err(e.to_string()))?;
        if !out.status.success() {
            let text = String::from_utf8_lossy(&out.stderr);
            return Err(err(text.lines().last().unwrap_or("failed").to_string()));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let root = PathBuf::from(lines.next().unwrap_or_default().trim());
        if !root.join("compliance_checker").is_dir() {
            return Err(err(format!(
                "{} has no compliance_checker folder",
                root.display()
            )));
        }
        let version = lines
            .next()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .or_else(|| dist_version(&root));
        Ok(RulesSource {
            root,
            origin: Origin::Python(python.into()),
            version,
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

    /// In words: `mlperf-logging 4.1.68 at PATH (imported by python3)`.
    pub fn describe(&self) -> String {
        let version = self.version.as_deref().unwrap_or("(version unknown)");
        let how = match &self.origin {
            Origin::Folder => String::new(),
            Origin::Python(p) => format!(" (imported by {p})"),
        };
        format!("mlperf-logging {version} at {}{how}", self.root.display())
    }
}

/// The `Version:` of an `mlperf_logging-*.dist-info` beside the package folder.
fn dist_version(root: &Path) -> Option<String> {
    let parent = root.parent()?;
    for e in std::fs::read_dir(parent).ok()?.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !(name.starts_with("mlperf_logging-") && name.ends_with(".dist-info")) {
            continue;
        }
        let meta = std::fs::read_to_string(e.path().join("METADATA")).ok()?;
        return meta
            .lines()
            .find_map(|l| l.strip_prefix("Version:"))
            .map(|v| v.trim().to_string());
    }
    None
}
