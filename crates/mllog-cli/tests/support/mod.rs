//! Shared by `mllog-cli`'s oracle tests: the official tools run as Python snippets and
//! modules (forked from one interpreter that has imported them: [`forkserver`]), and copies of
//! folders (the official tools write into the folders they check, so they run on copies).
#![allow(dead_code)]

pub mod forkserver;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs `code` with `args` in the interpreter of `common::python` (forked from
/// [`forkserver`]'s); its last stdout line, as JSON. Fails the test when Python fails, with
/// what it printed.
pub fn python(code: &str, args: &[&std::ffi::OsStr]) -> Value {
    let mut all = vec!["-c", code];
    all.extend(args.iter().map(|a| a.to_str().expect("a UTF-8 argument")));
    let cwd = std::env::current_dir().expect("the working folder");
    let o = forkserver::run(&all, &cwd);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "python failed:\n{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(out.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Runs `f` on every item, spread over as many threads as the machine has cores: the official
/// tools that these tests wait on are slow Python using one core each, and a long test is often
/// the last of its binary to run, with the other cores idle. A panic in `f` fails the test with
/// its own message, as in a loop.
pub fn each<T: Sync>(items: &[T], f: impl Fn(&T) + Sync) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.min(items.len()))
            .map(|_| {
                s.spawn(|| {
                    while let Some(item) =
                        items.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                    {
                        f(item);
                    }
                })
            })
            .collect();
        for w in workers {
            if let Err(panic) = w.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

/// Copies the folder `from` to `to`, recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// The command prefix that runs a command as an unprivileged user here (empty when not
/// root; `setpriv` as nobody when root, who reads a mode-000 file); `None` when root has no
/// `setpriv`.
pub fn as_nobody() -> Option<Vec<String>> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some(Vec::new());
    }
    let ok = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "true",
        ])
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| {
        [
            "setpriv",
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
        ]
        .map(String::from)
        .to_vec()
    })
}
