//! The `mllog summary`, `mllog score` and `mllog package` commands (argument parsing and
//! output), called by the `mllog` binary.

use std::io::Write;
use std::path::PathBuf;

use crate::compliance::Ruleset;

/// Usage lines of the three commands (for the binary's help).
pub const USAGE: &str = "\
       mllog summary [--format text|json|csv] [--plot OUT.svg|OUT.png] FILE...
       mllog score [--ruleset X.Y.Z] [--format text|json] DIR
       mllog package --system NAME [--out DIR] [--system-desc FILE] [--force] FILE...";

const SUMMARY_HELP: &str = "\
usage: mllog summary [--format text|json|csv] [--plot OUT.svg|OUT.png] FILE...

Per run: benchmark, run_stop status, time to train in minutes ((run_stop - run_start) / 60000),
samples to converge, number of evals and the eval curve, throughput, init time.
--plot writes eval metric vs samples for each run with the target line (and step times when
the logs have them), as SVG, or PNG when OUT ends in .png.
exit status: 0 done, 2 usage or I/O error";

const SCORE_HELP: &str = "\
usage: mllog score [--ruleset X.Y.Z] [--format text|json] DIR

Scores results/<system>/<benchmark>/result_*.txt as MLCommons' result_summarizer does:
compliance of every file, olympic mean (drop fastest and slowest; one dropped
non-converged/non-compliant run stands in for the slowest; more than one: no score),
times scaling.json's factor when present. DIR: a submission, its results/, a system
folder or one benchmark folder. --ruleset defaults to detection from each file.
exit status: 0 every benchmark has a score, 1 some has none, 2 usage or I/O error";

const PACKAGE_HELP: &str = "\
usage: mllog package --system NAME [--out DIR] [--system-desc FILE] [--force] FILE...

Copies result logs to DIR/results/NAME/<benchmark>/result_<i>.txt (the benchmark from each
log's submission_benchmark; DIR defaults to .), and DIR/systems/NAME.json from --system-desc
(or a TODO template when absent). Checks the seeds as the package checker's seed checker
does: every run logs an integer seed with file and lineno, no two runs the same seed on the
same line. Nothing is written for a benchmark whose seeds fail, unless --force.
exit status: 0 packaged, 1 seed check failed or files without submission_benchmark,
2 usage or I/O error";

struct Args {
    flags: Vec<(String, Option<String>)>,
    free: Vec<String>,
}

fn parse(args: &[String], with_value: &[&str]) -> Result<Args, String> {
    let mut a = Args {
        flags: vec![],
        free: vec![],
    };
    let mut it = args.iter();
    let mut only_free = false;
    while let Some(x) = it.next() {
        if only_free || x == "-" || !x.starts_with('-') {
            a.free.push(x.clone());
            continue;
        }
        if x == "--" {
            only_free = true;
            continue;
        }
        let (name, inline) = match x.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (x.clone(), None),
        };
        if with_value.contains(&name.as_str()) {
            let v = inline
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{name} needs a value"))?;
            a.flags.push((name, Some(v)));
        } else {
            a.flags.push((name, inline));
        }
    }
    Ok(a)
}

impl Args {
    fn get(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }
    fn has(&self, name: &str) -> bool {
        self.flags.iter().any(|(n, _)| n == name)
    }
    fn only(&self, allowed: &[&str]) -> Result<(), String> {
        match self
            .flags
            .iter()
            .find(|(n, _)| !allowed.contains(&n.as_str()))
        {
            Some((n, _)) => Err(format!("unknown option {n}")),
            None => Ok(()),
        }
    }
}

fn emit(s: &str) -> u8 {
    let mut out = std::io::stdout().lock();
    if out
        .write_all(s.as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        return 2;
    }
    0
}

fn usage_error(cmd: &str, e: &str, help: &str) -> u8 {
    eprintln!("mllog {cmd}: {e}\n\n{help}");
    2
}

/// Runs `mllog <command> <args>` for `summary`, `score` or `package`; returns the exit status.
/// `None` for another command.
pub fn run(command: &str, args: &[String]) -> Option<u8> {
    Some(match command {
        "summary" => summary(args),
        "score" => score(args),
        "package" => package(args),
        _ => return None,
    })
}

fn summary(args: &[String]) -> u8 {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{SUMMARY_HELP}");
        return 0;
    }
    let a = match parse(args, &["--format", "--plot"]) {
        Ok(a) => a,
        Err(e) => return usage_error("summary", &e, SUMMARY_HELP),
    };
    if let Err(e) = a.only(&["--format", "--plot"]) {
        return usage_error("summary", &e, SUMMARY_HELP);
    }
    let format = a.get("--format").unwrap_or("text");
    if !matches!(format, "text" | "json" | "csv") {
        return usage_error(
            "summary",
            &format!("unknown format {format:?} (text, json or csv)"),
            SUMMARY_HELP,
        );
    }
    if a.free.is_empty() {
        return usage_error("summary", "no FILE given", SUMMARY_HELP);
    }
    let mut runs = Vec::new();
    let mut status = 0;
    for f in &a.free {
        let r = if f == "-" {
            super::summary::summarize_reader("<stdin>", std::io::stdin().lock())
        } else {
            super::summary::summarize_file(std::path::Path::new(f))
        };
        match r {
            Ok(s) => runs.push(s),
            Err(e) => {
                eprintln!("mllog summary: cannot read {f}: {e}");
                status = 2;
            }
        }
    }
    let text = match format {
        "json" => super::summary::render_json(&runs),
        "csv" => super::summary::render_csv(&runs),
        _ => super::summary::render_text(&runs),
    };
    if emit(&text) != 0 {
        return 2;
    }
    if let Some(p) = a.get("--plot") {
        if let Err(e) = super::plot::write_plot(&runs, std::path::Path::new(p)) {
            eprintln!("mllog summary: cannot write the plot {p}: {e}");
            return 2;
        }
        eprintln!("mllog summary: plot written to {p}");
    }
    status
}

fn score(args: &[String]) -> u8 {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{SCORE_HELP}");
        return 0;
    }
    let a = match parse(args, &["--format", "--ruleset"]) {
        Ok(a) => a,
        Err(e) => return usage_error("score", &e, SCORE_HELP),
    };
    if let Err(e) = a.only(&["--format", "--ruleset"]) {
        return usage_error("score", &e, SCORE_HELP);
    }
    let ruleset = match a.get("--ruleset").map(str::parse::<Ruleset>) {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => return usage_error("score", &e.to_string(), SCORE_HELP),
    };
    let format = a.get("--format").unwrap_or("text");
    if !matches!(format, "text" | "json") {
        return usage_error(
            "score",
            &format!("unknown format {format:?} (text or json)"),
            SCORE_HELP,
        );
    }
    let [dir] = a.free.as_slice() else {
        return usage_error("score", "give exactly one DIR", SCORE_HELP);
    };
    let opts = super::score::ScoreOptions { ruleset };
    let scores = match super::score::score_dir(std::path::Path::new(dir), opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mllog score: {dir}: {e}");
            return 2;
        }
    };
    if scores.is_empty() {
        eprintln!("mllog score: no result_*.txt under {dir}");
        return 2;
    }
    let text = match format {
        "json" => super::score::render_json(&scores),
        _ => super::score::render_text(&scores),
    };
    if emit(&text) != 0 {
        return 2;
    }
    if scores.iter().all(|s| s.score.is_some()) {
        0
    } else {
        1
    }
}

fn package(args: &[String]) -> u8 {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{PACKAGE_HELP}");
        return 0;
    }
    let a = match parse(args, &["--system", "--out", "--system-desc"]) {
        Ok(a) => a,
        Err(e) => return usage_error("package", &e, PACKAGE_HELP),
    };
    if let Err(e) = a.only(&["--system", "--out", "--system-desc", "--force"]) {
        return usage_error("package", &e, PACKAGE_HELP);
    }
    let Some(system) = a.get("--system") else {
        return usage_error("package", "--system NAME is required", PACKAGE_HELP);
    };
    if system.is_empty() || system.contains(['/', '\\']) || system.starts_with('.') {
        return usage_error("package", "bad --system name", PACKAGE_HELP);
    }
    if a.free.is_empty() {
        return usage_error("package", "no FILE given", PACKAGE_HELP);
    }
    let opts = super::package::PackageOptions {
        out: PathBuf::from(a.get("--out").unwrap_or(".")),
        system: system.to_string(),
        system_desc: a.get("--system-desc").map(PathBuf::from),
        force: a.has("--force"),
    };
    let files: Vec<PathBuf> = a.free.iter().map(PathBuf::from).collect();
    match super::package::package(&files, &opts) {
        Ok(rep) => {
            if emit(&rep.render_text()) != 0 {
                return 2;
            }
            if rep.ok() {
                0
            } else {
                1
            }
        }
        Err(e) => {
            eprintln!("mllog package: {e}");
            2
        }
    }
}
