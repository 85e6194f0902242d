//! The benchmark folders of an HPC results folder, as `result_summarizer` walks them for
//! `--usage hpc`: `results/<system>/strong/<benchmark>/` and `results/<system>/weak/<benchmark>/`.

use std::path::{Path, PathBuf};

use super::score::{results_root, subdirs};
use super::usage::HpcScaling;

/// The HPC benchmark folders under `dir`, sorted, each with its scaling: `dir` is a submitter
/// folder (holding `results/`), its `results/`, one system's folder, its `strong/` or `weak/`
/// folder, or one benchmark folder below `strong/` or `weak/`. Other folders under a system
/// are not walked, as the result summarizer reads only these two.
///
/// ```
/// use mllog_core::results::hpc_folders::hpc_benchmark_folders;
/// use mllog_core::results::usage::HpcScaling;
///
/// let sub = tempfile::tempdir()?;
/// let sys = sub.path().join("results/sys");
/// for f in ["strong/deepcam", "strong/openfold", "weak/deepcam", "other/deepcam"] {
///     std::fs::create_dir_all(sys.join(f))?;
/// }
/// let all = hpc_benchmark_folders(sub.path())?;
/// let names: Vec<_> = all.iter().map(|(s, p)| (*s, p.strip_prefix(&sys).unwrap().to_owned())).collect();
/// assert_eq!(names, [
///     (HpcScaling::Strong, "strong/deepcam".into()),
///     (HpcScaling::Strong, "strong/openfold".into()),
///     (HpcScaling::Weak, "weak/deepcam".into()),
/// ]);
/// assert_eq!(hpc_benchmark_folders(&sys)?, all);
/// assert_eq!(hpc_benchmark_folders(&sys.join("weak"))?, all[2..]);
/// assert_eq!(hpc_benchmark_folders(&sys.join("strong/openfold"))?, all[1..2]);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn hpc_benchmark_folders(dir: &Path) -> std::io::Result<Vec<(HpcScaling, PathBuf)>> {
    let scaling_of = |p: &Path| match p.file_name().and_then(|n| n.to_str()) {
        Some("strong") => Some(HpcScaling::Strong),
        Some("weak") => Some(HpcScaling::Weak),
        _ => None,
    };
    let real = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if let Some(s) = real.parent().and_then(scaling_of) {
        return Ok(vec![(s, dir.to_path_buf())]);
    }
    let benchmarks =
        |scaling_dir: &Path, s: HpcScaling| -> std::io::Result<Vec<(HpcScaling, PathBuf)>> {
            Ok(subdirs(scaling_dir)?.into_iter().map(|b| (s, b)).collect())
        };
    if let Some(s) = scaling_of(&real) {
        return benchmarks(dir, s);
    }
    let system = |sys: &Path| -> std::io::Result<Vec<(HpcScaling, PathBuf)>> {
        let mut out = Vec::new();
        for s in [HpcScaling::Strong, HpcScaling::Weak] {
            let d = sys.join(s.as_str());
            if d.is_dir() {
                out.extend(benchmarks(&d, s)?);
            }
        }
        Ok(out)
    };
    if ["strong", "weak"].iter().any(|s| dir.join(s).is_dir()) {
        return system(dir);
    }
    let mut out = Vec::new();
    for sys in subdirs(&results_root(dir))? {
        out.extend(system(&sys)?);
    }
    Ok(out)
}
