//! The official compliance checker, run as its command line does for one log, and through
//! its Python API for many logs at once (one interpreter per core, each checking its share in
//! turn: starting Python and importing the checker costs more than checking a log, and so does
//! parsing the rule files, which each interpreter does once per file).

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs `python -m mlperf_logging.compliance_checker` on `log`; (passed, combined output).
pub fn official_check(log: &Path, ruleset: &str, werror: bool) -> (bool, String) {
    run_cli(log, ruleset, werror, None)
}

/// As [`official_check`], with the checker's `--config` (a rule file of the caller's).
pub fn official_check_with_config(
    log: &Path,
    ruleset: &str,
    werror: bool,
    config: &Path,
) -> (bool, String) {
    run_cli(log, ruleset, werror, Some(config))
}

fn run_cli(log: &Path, ruleset: &str, werror: bool, config: Option<&Path>) -> (bool, String) {
    // The checker writes its log file, and may leave other files, in its working folder.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(super::python());
    cmd.args([
        "-m",
        "mlperf_logging.compliance_checker",
        "--usage",
        "training",
        "--ruleset",
        ruleset,
    ]);
    if werror {
        cmd.arg("--werror");
    }
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    cmd.arg("--log_output")
        .arg(dir.path().join("checker.log"))
        .arg(log)
        .current_dir(dir.path());
    let out = cmd.output().expect("run the official checker");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// One log for [`official_verdicts`]: its path, usage (`training`, `hpc`) and ruleset.
pub struct Case<'a> {
    pub path: &'a Path,
    pub usage: &'a str,
    pub ruleset: &'a str,
}

/// Checks each log as the command line does (`{usage}_{ruleset}/common.yaml`; a crash is a
/// failure), printing `plain strict` per log (1 passed, 0 failed). `--werror` is run only
/// where the plain check passed with warnings: otherwise its verdict is the plain one.
const DRIVER: &str = r#"
import sys, io, logging, contextlib, copy, yaml
logging.disable(logging.CRITICAL)
from mlperf_logging.compliance_checker import mlp_compliance

# Every check parses its rule files again, and on a short log that parsing is most of the
# checker's time: here each text is parsed once, and each check gets a copy of its own, as if
# it had parsed the file itself (a malformed file raises as before).
yaml_load, parsed = yaml.load, {}
def load_once(stream, Loader):
    key = (Loader, stream.read())
    if key not in parsed:
        parsed[key] = yaml_load(key[1], Loader)
    return copy.deepcopy(parsed[key])
yaml.load = load_once

def run(path, usage, ruleset, werror):
    del mlp_compliance.enqueued_configs[:]
    checker = mlp_compliance.make_checker(usage, ruleset, False, werror)
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            ok = checker.check_file(path, '%s_%s/common.yaml' % (usage, ruleset))
        return (1 if ok else 0), checker
    except Exception:
        return 0, checker

for line in open(sys.argv[1]):
    path, usage, ruleset = line.rstrip('\n').split('\t')
    plain, checker = run(path, usage, ruleset, False)
    strict = run(path, usage, ruleset, True)[0] if plain == 1 and checker.warnings else plain
    sys.stdout.write('%d %d\n' % (plain, strict))
    sys.stdout.flush()
"#;

/// The official verdicts `(passed, passed with --werror)` of `cases`, in order. `dir` holds
/// the driver and the job lists (and is the checkers' working folder).
pub fn official_verdicts(dir: &Path, cases: &[Case]) -> Vec<(bool, bool)> {
    let py = super::python();
    let driver = dir.join("driver.py");
    std::fs::write(&driver, DRIVER).unwrap();
    // A process for fewer than about 50 logs costs more to start than it saves.
    let procs = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(cases.len().div_ceil(50).max(1));
    let per = cases.len().div_ceil(procs).max(1);
    let children: Vec<_> = cases
        .chunks(per)
        .enumerate()
        .map(|(i, chunk)| {
            let jobs = dir.join(format!("jobs{i}.tsv"));
            let mut list = String::new();
            for c in chunk {
                let _ = writeln!(list, "{}\t{}\t{}", c.path.display(), c.usage, c.ruleset);
            }
            std::fs::write(&jobs, list).unwrap();
            Command::new(py)
                .arg(&driver)
                .arg(&jobs)
                .current_dir(dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run the official checker")
        })
        .collect();
    let mut v = Vec::with_capacity(cases.len());
    for child in children {
        let out = child.wait_with_output().expect("run the official checker");
        assert!(
            out.status.success(),
            "the checker's driver failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for l in String::from_utf8(out.stdout).unwrap().lines() {
            let (plain, strict) = l.split_once(' ').expect("`plain strict`");
            v.push((plain == "1", strict == "1"));
        }
    }
    assert_eq!(v.len(), cases.len(), "one verdict per log");
    v
}
