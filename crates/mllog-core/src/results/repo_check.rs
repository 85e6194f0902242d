//! The official review script's last step, `mlperf_logging.repo_checker` (4.1.68): what git
//! refuses or mangles in a submitter folder before it is pushed to the results repository.
//!
//! It walks the folder as Python's `os.walk` does (symbolic links to folders are neither
//! followed nor checked) and finds, in the checker's words:
//! - names with a space or starting with `.` (every folder walked, the folder given included,
//!   and every other entry);
//! - files over 50 MiB (`50 * 1024 * 1024` bytes; symbolic links are not measured);
//! - broken symbolic links.
//!
//! Two places where the official tool misleads, and this check does not follow it:
//! - it resolves a relative link's target from the folder it is run in, not from the link's
//!   folder, so its verdict on a relative link depends on where it runs; here a link is broken
//!   when the file system cannot follow it (what git and every reader of the link see);
//! - it exits with status 0 whatever it finds; its verdict is only in its log.
//!
//! ```
//! use mllog_core::results::repo_check::{repo_check, RepoFinding};
//!
//! let tmp = tempfile::tempdir()?;
//! // The folder's own name counts: a temporary folder's `.tmp…` would be found.
//! let dir = tmp.path().join("Submitter");
//! std::fs::create_dir(&dir)?;
//! std::fs::write(dir.join("my notes.txt"), "")?;
//! std::fs::write(dir.join(".DS_Store"), "")?;
//! let found = repo_check(&dir);
//! assert_eq!(found.len(), 2);
//! assert!(found.iter().all(|f| matches!(f, RepoFinding::BadName { .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::{Path, PathBuf};

/// The size above which the official checker refuses a file: `file_size_limit_mb=50`, in
/// bytes.
pub const FILE_SIZE_LIMIT: u64 = 50 * 1024 * 1024;

/// One finding of [`repo_check`].
#[derive(Debug)]
pub enum RepoFinding {
    /// A name with a space, or starting with `.`.
    BadName {
        /// The file or folder.
        path: PathBuf,
        /// Whether the name holds a space (else it starts with `.`).
        space: bool,
    },
    /// A file over [`FILE_SIZE_LIMIT`].
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
    },
    /// A symbolic link the file system cannot follow.
    BrokenLink {
        /// The link.
        path: PathBuf,
        /// What it points to, as written in the link.
        target: PathBuf,
    },
    /// A folder the walk could not list (the official checker skips it without a word).
    Unreadable {
        /// The folder.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

impl RepoFinding {
    /// The file or folder the finding is about.
    pub fn path(&self) -> &Path {
        match self {
            RepoFinding::BadName { path, .. }
            | RepoFinding::TooLarge { path, .. }
            | RepoFinding::BrokenLink { path, .. }
            | RepoFinding::Unreadable { path, .. } => path,
        }
    }

    /// The finding in the official checker's words (`root` is the folder checked, which its
    /// broken-link message names).
    pub fn message(&self, root: &Path) -> String {
        match self {
            RepoFinding::BadName { path, space } => format!(
                "Files with git-unfriendly name: {} ({}; Please remove spaces from filenamed \
                 and make sure they do not start with \".\", or \"/.\")",
                path.display(),
                if *space {
                    "the name holds a space"
                } else {
                    "the name starts with \".\""
                }
            ),
            RepoFinding::TooLarge { path, size } => format!(
                "Files > 50MB: {} ({size} bytes; Please remove or reduce the size of these \
                 files.)",
                path.display()
            ),
            RepoFinding::BrokenLink { path, target } => format!(
                "{} contains broken symbolic links: {} (-> {})",
                root.display(),
                path.display(),
                target.display()
            ),
            RepoFinding::Unreadable { error, .. } => format!(
                "cannot list the folder: {error} (the official repo_checker skips it without a \
                 word)"
            ),
        }
    }
}

/// The name as `os.path.basename` takes it from the path as given: what follows the last
/// `/` (nothing for a path ending in `/`).
fn basename(p: &Path) -> &[u8] {
    let b = p.as_os_str().as_encoded_bytes();
    match b.iter().rposition(|&c| c == b'/') {
        Some(i) => &b[i + 1..],
        None => b,
    }
}

fn bad_name(path: &Path, out: &mut Vec<RepoFinding>) {
    let name = basename(path);
    let space = name.contains(&b' ');
    if space || name.starts_with(b".") {
        out.push(RepoFinding::BadName {
            path: path.to_path_buf(),
            space,
        });
    }
}

/// Checks `dir` as `repo_checker` does (see the module documentation). Findings in walk
/// order: folders before what they hold, names sorted.
pub fn repo_check(dir: &Path) -> Vec<RepoFinding> {
    let mut out = Vec::new();
    walk(dir, &mut out);
    out
}

fn walk(dir: &Path, out: &mut Vec<RepoFinding>) {
    let list = match std::fs::read_dir(dir) {
        Ok(l) => l,
        Err(error) => {
            // os.walk drops a folder it cannot list before yielding it: not even its name is
            // checked.
            out.push(RepoFinding::Unreadable {
                path: dir.to_path_buf(),
                error,
            });
            return;
        }
    };
    bad_name(dir, out);
    let mut names: Vec<_> = list.filter_map(Result::ok).map(|e| e.file_name()).collect();
    names.sort();
    let mut subdirs = Vec::new();
    for name in names {
        let path = dir.join(&name);
        let link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        let followed = std::fs::metadata(&path);
        if followed.as_ref().is_ok_and(|m| m.is_dir()) {
            // A link to a folder is neither walked nor checked, as with os.walk.
            if !link {
                subdirs.push(path);
            }
            continue;
        }
        bad_name(&path, out);
        match (link, followed) {
            (true, Err(_)) => out.push(RepoFinding::BrokenLink {
                target: std::fs::read_link(&path).unwrap_or_default(),
                path,
            }),
            (false, Ok(m)) if m.len() > FILE_SIZE_LIMIT => out.push(RepoFinding::TooLarge {
                path,
                size: m.len(),
            }),
            _ => {}
        }
    }
    for d in subdirs {
        walk(&d, out);
    }
}
