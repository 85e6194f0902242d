//! Which MLPerf suite a results folder belongs to: Training (`results/<system>/<benchmark>/`)
//! or HPC (`results/<system>/<strong|weak>/<benchmark>/`). The result counts each wants are
//! the package's (`benchmark_meta.get_result_file_counts`): built in for Training
//! ([`super::required_runs`]), read at run time for both ([`super::package_facts`]).

use std::path::Path;

/// The `usage` argument of the official tools: whose rules, RCPs and folder layout apply.
///
/// ```
/// use mllog_core::results::usage::Usage;
///
/// use std::path::Path;
///
/// assert_eq!(Usage::from_name("hpc"), Some(Usage::Hpc));
/// assert_eq!(Usage::Hpc.system_of(Path::new("results/sys/weak/deepcam")), "sys");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Usage {
    /// MLPerf Training: `results/<system>/<benchmark>/`.
    #[default]
    Training,
    /// MLPerf HPC: `results/<system>/strong/<benchmark>/` (time to train) and
    /// `results/<system>/weak/<benchmark>/` (throughput).
    Hpc,
}

impl Usage {
    /// Every usage, in the official tools' order.
    pub const ALL: [Usage; 2] = [Usage::Training, Usage::Hpc];

    /// `training` or `hpc`, as the official tools spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Usage::Training => "training",
            Usage::Hpc => "hpc",
        }
    }

    /// The usage the official tools call `name`.
    pub fn from_name(name: &str) -> Option<Usage> {
        match name {
            "training" => Some(Usage::Training),
            "hpc" => Some(Usage::Hpc),
            _ => None,
        }
    }

    /// The system a benchmark folder belongs to: its parent's name (Training), or its
    /// grandparent's, past the `strong`/`weak` folder (HPC).
    pub fn system_of(self, benchmark_folder: &Path) -> String {
        let up = match self {
            Usage::Training => benchmark_folder.parent(),
            Usage::Hpc => benchmark_folder.parent().and_then(Path::parent),
        };
        up.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// How an HPC benchmark folder is scored: its `strong` or `weak` parent folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum HpcScaling {
    /// `strong/`: time to train, the olympic mean of the runs.
    Strong,
    /// `weak/`: throughput, every model trained at once.
    Weak,
}

impl HpcScaling {
    /// `strong` or `weak`, the folder's name.
    pub fn as_str(self) -> &'static str {
        match self {
            HpcScaling::Strong => "strong",
            HpcScaling::Weak => "weak",
        }
    }
}
