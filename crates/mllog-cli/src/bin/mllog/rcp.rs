//! `mllog rcp`: the RCP checker of a benchmark folder (or of every one under a folder).

use std::path::{Path, PathBuf};

use crate::machine;
use mllog_core::compliance::Ruleset;
use mllog_core::results::rcp::{self, RcpOptions, RcpResult};
use mllog_core::results::rcp_tables::RcpTables;
use mllog_core::results::rules_ruleset::choose_source_ruleset;
use mllog_core::results::ruleset::{self, RulesetChoice};
use mllog_core::results::score;
use mllog_core::results::usage::Usage;

/// Output formats of `mllog rcp`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Each decision explained.
    Text,
    /// One JSON document: `{"schema_version", "command", "ruleset", "passed", "benchmarks": [...]}`.
    Json,
}

/// Options of `mllog rcp`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Checks the convergence of results/<system>/<benchmark>/result_*.txt against the \
ruleset's reference convergence points as MLCommons' rcp_checker does (pruned RCPs, exact record \
or interpolation between the neighbouring batch sizes, the t-test's minimum acceptable mean), and \
says what factor the score is normalised by. Nothing in the folder is modified unless \
--set-scaling is given.\n\
With --forecast, a folder with fewer runs than the benchmark requires is a campaign in progress: \
its check so far reads \"passing so far\" or \"failing so far\" (no verdict), the forecast follows, \
and it does not change the exit status, also when no forecast can be made (fewer than two \
converged runs); a finished folder is judged as without --forecast.\n\
Exit status: 0 every finished folder passes, 1 some finished folder fails, 2 usage or I/O error \
(an unreadable file or folder, an RCP file that cannot be read or is a directory, scaling.json not written, or the ruleset cannot be inferred)."
)]
pub struct Args {
    /// The ruleset whose RCPs apply [default: inferred once for the whole folder, with the
    /// evidence shown; refused when the evidence does not settle it]. With --rules, any ruleset
    /// the package has RCPs for, written X.Y.Z.
    #[arg(long, value_name = "X.Y.Z")]
    pub ruleset: Option<String>,
    /// Whose RCPs: training, or hpc (with --rules) (the RCP checker's --rcp_usage).
    #[arg(long, value_name = "USAGE", default_value = "training", value_parser = crate::rcp_source::usage_parser())]
    pub usage: Usage,
    /// As the package checker's --rcp-bypass: a failed "RCP found", "RCP Interpolation" or
    /// "Missing RCP" passes (a package_checker_params file whose last line is `rcp-bypass`
    /// does the same for its folder).
    #[arg(long)]
    pub rcp_bypass: bool,
    /// Check against every RCP record, not the pruned ones (the official --rcp_pass full_rcps).
    #[arg(long)]
    pub full_rcps: bool,
    /// bert: samples to converge from train_samples, not epoch_num (--bert_train_samples).
    #[arg(long)]
    pub bert_train_samples: bool,
    /// Write scaling.json into each folder as the official tools do (deleted, then written
    /// when the score is normalised).
    #[arg(long)]
    pub set_scaling: bool,
    /// A campaign in progress: with fewer runs than the benchmark requires, the probability
    /// that the finished set passes the RCP test (with and without normalisation).
    #[arg(long)]
    pub forecast: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub rcps: crate::rcp_source::RcpSourceArgs,
    /// A benchmark folder, a system folder, results/ or a submitter folder.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `system/benchmark` of a folder under `results/<system>/`; any other folder by its name
/// (its parent is no system then).
pub fn label(folder: &Path) -> String {
    // The real path, so that `sys/bench` given from inside results/ is still labelled so.
    let real = folder
        .canonicalize()
        .unwrap_or_else(|_| folder.to_path_buf());
    let folder = real.as_path();
    let parent = folder.parent().filter(|p| !name(p).is_empty());
    let under_results = parent
        .and_then(Path::parent)
        .is_some_and(|g| name(g) == "results");
    match parent {
        Some(p) if under_results => format!("{}/{}", name(p), name(folder)),
        _ if name(folder).is_empty() => folder.display().to_string(),
        _ => name(folder),
    }
}

/// The ruleset lines of the text output.
pub fn ruleset_text(choice: &RulesetChoice) -> String {
    ruleset_lines(
        choice.ruleset.as_str(),
        choice.given,
        &choice.evidence,
        &choice.unreadable,
    )
}

/// The ruleset lines of the text output, from the parts of a choice.
pub fn ruleset_lines(
    ruleset: &str,
    given: bool,
    evidence: &[String],
    unreadable: &[String],
) -> String {
    let mut out = format!(
        "ruleset {} ({})\n",
        ruleset,
        if given { "given" } else { "inferred" }
    );
    if !given {
        for e in evidence {
            out.push_str(&format!("  - {e}\n"));
        }
    }
    for u in unreadable {
        out.push_str(&format!("  - error: {u} (left out of the inference)\n"));
    }
    out.push('\n');
    out
}

/// The text of one folder's check; `in_progress` (runs present, runs required) for a campaign
/// in progress under `--forecast`, whose check is no verdict yet.
pub fn result_text(
    r: &RcpResult,
    note: Option<&str>,
    in_progress: Option<(usize, usize)>,
) -> String {
    let shown = r.folder.display().to_string();
    let mut out = if label(&r.folder) == shown {
        format!("{shown}\n")
    } else {
        format!("{}  ({shown})\n", label(&r.folder))
    };
    let w = r
        .runs
        .iter()
        .map(|x| name(&x.file).len())
        .max()
        .unwrap_or(0);
    for run in &r.runs {
        out.push_str(&format!(
            "  {:w$}  {}\n",
            name(&run.file),
            if run.converged {
                format!("{} {}", rcp::show(run.to_converge), run.unit)
            } else {
                "did not converge (counts as 1e9)".into()
            }
        ));
    }
    for d in &r.decisions {
        out.push_str(&format!("  - {d}\n"));
    }
    if let Some(n) = note {
        out.push_str(&format!("  - note: {n}\n"));
    }
    let message = match (r.official_message.trim(), &r.error) {
        ("", Some(e)) => e.as_str(),
        ("", None) => "no RCP message",
        (m, _) => m,
    };
    let verdict = match in_progress {
        Some((n, req)) => format!(
            "{} so far ({n} of {req} runs; the finished set decides)",
            if r.passed { "passing" } else { "failing" }
        ),
        None if r.io_error => "ERROR".into(),
        None if r.passed => "PASSED".into(),
        None => "FAILED".into(),
    };
    out.push_str(&format!(
        "  RCP {}: {verdict} ({message}){}\n\n",
        label(&r.folder),
        match r.scaling {
            rcp::Scaling::Write(f) => format!(", score normalised by {}", rcp::py_float(f)),
            rcp::Scaling::Delete => ", no normalisation".into(),
            rcp::Scaling::Untouched => String::new(),
        }
    ));
    out
}

/// The ruleset chosen for `mllog rcp`: its lines for the text output, its JSON, whether a
/// file could not be read while inferring it.
struct RcpChoice {
    text: String,
    json: serde_json::Value,
    unreadable: bool,
}

/// The ruleset (a built-in one, given or inferred; with `--rules`, one the package has, given
/// or inferred among the package's) and its RCP tables.
fn choose(a: &Args) -> Result<(RcpChoice, std::sync::Arc<RcpTables>), String> {
    // The package's RCPs are read from its `<usage>_X.Y.Z` folders, and its checker refuses
    // any other name; the short forms `from_name` reads are the built-in tables' only.
    if let Some(name) = a.ruleset.as_deref()
        && a.rcps.read_at_run_time()
        && !Ruleset::is_well_formed(name)
    {
        return Err(format!(
            "--ruleset {name:?}: with RCPs read from a package the ruleset is written \
                 X.Y.Z (e.g. 5.0.0), as its rcp_checker/<usage>_X.Y.Z folders are named and as \
                 the official rcp_checker requires"
        ));
    }
    let built_in = a.ruleset.as_deref().map(Ruleset::from_name);
    if a.usage == Usage::Training && a.ruleset.is_none() && a.rcps.read_at_run_time() {
        let src = a.rcps.source().transpose()?.expect("read at run time");
        let c = choose_source_ruleset(&src, None, &a.dir)?;
        let tables = a.rcps.open_named(Usage::Training, &c.ruleset)?;
        let choice = RcpChoice {
            text: ruleset_lines(&c.ruleset, c.given, &c.evidence, &c.unreadable),
            json: machine::value(&c),
            unreadable: !c.unreadable.is_empty(),
        };
        return Ok((choice, tables));
    }
    if a.usage == Usage::Training && !matches!(built_in, Some(None)) {
        let choice =
            ruleset::choose_ruleset(built_in.flatten(), &a.dir).map_err(|e| e.to_string())?;
        let tables = a.rcps.open(choice.ruleset)?;
        let c = RcpChoice {
            text: ruleset_text(&choice),
            json: machine::value(&choice),
            unreadable: !choice.unreadable.is_empty(),
        };
        return Ok((c, tables));
    }
    let Some(name) = &a.ruleset else {
        return Err(format!(
            "--usage {}: give the ruleset (--ruleset X.Y.Z); only training rulesets are inferred",
            a.usage.as_str()
        ));
    };
    if !a.rcps.read_at_run_time() && a.usage == Usage::Training {
        return Err(format!(
            "unknown ruleset {name:?} (built in: {}); the RCPs of other rulesets are read from \
             the official package with --rules",
            Ruleset::ALL.map(Ruleset::as_str).join(", ")
        ));
    }
    let tables = a.rcps.open_named(a.usage, name)?;
    let text = if tables.usage == "training" {
        format!("ruleset {name} (given)\n\n")
    } else {
        format!("ruleset {name} (given, {})\n\n", tables.usage)
    };
    let json = serde_json::json!({
        "ruleset": name, "given": true, "candidates": [name],
        "evidence": [format!("ruleset {name}: given (--ruleset)")],
        "unreadable": [],
    });
    Ok((
        RcpChoice {
            text,
            json,
            unreadable: false,
        },
        tables,
    ))
}

pub fn run(a: Args) -> u8 {
    let dir = a.dir.display().to_string();
    let folders = match score::benchmark_folders(&a.dir) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("mllog rcp: {dir}: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    if folders.is_empty() {
        eprintln!("mllog rcp: {}", ruleset::no_results_words(&a.dir));
        return crate::USAGE_OR_IO;
    }
    let (choice, mut tables) = match choose(&a) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mllog rcp: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    // Given one benchmark folder, a custom RCP file is its table, as the official command has
    // it; checking several, it stands for the benchmarks its records name.
    if folders == [a.dir.clone()] {
        tables = std::sync::Arc::new((*tables).clone().custom_for_one_folder());
    }
    let mut text = choice.text.clone();
    text.insert_str(text.len() - 1, &format!("{}\n", tables.describe()));
    let mut items = Vec::new();
    let mut failed = false;
    let mut io_error = choice.unreadable;
    for folder in &folders {
        let (params_bypass, note) = rcp::package_bypass(folder);
        let opts = RcpOptions {
            bypass: a.rcp_bypass || params_bypass,
            full_rcps: a.full_rcps,
            bert_train_samples: a.bert_train_samples,
            ..RcpOptions::with_tables(tables.clone())
        };
        let (mut r, fc) = if a.forecast {
            let (r, f) = rcp::forecast(folder, &opts);
            (r, Some(f))
        } else {
            (rcp::check_benchmark(folder, &opts), None)
        };
        if params_bypass && !a.rcp_bypass {
            r.decisions.push(
                "package_checker_params asks for the RCP bypass (as the package checker reads it)"
                    .into(),
            );
        }
        if a.set_scaling {
            match rcp::write_scaling(folder, &r) {
                Ok(()) => r.decisions.push(match r.scaling {
                    rcp::Scaling::Write(f) => {
                        format!("scaling.json written: {}", rcp::scaling_json(f))
                    }
                    rcp::Scaling::Delete => "scaling.json removed (if there was one)".into(),
                    rcp::Scaling::Untouched => "scaling.json left as it is".into(),
                }),
                Err(e) => {
                    let p = folder.join("scaling.json");
                    eprintln!("mllog rcp: {}: {e}", p.display());
                    r.decisions
                        .push(format!("error: {}: {e} (not written)", p.display()));
                    io_error = true;
                }
            }
        }
        // Under --forecast a folder with fewer runs than the benchmark requires is a campaign
        // in progress: its check so far is no verdict, so it never makes the exit status 1.
        let in_progress = fc
            .as_ref()
            .filter(|f| f.required > 0 && f.present + f.not_converged < f.required)
            .map(|f| (f.present + f.not_converged, f.required));
        if r.io_error {
            io_error = true;
        } else if !r.passed && in_progress.is_none() {
            failed = true;
        }
        text.push_str(&result_text(&r, note.as_deref(), in_progress));
        if let Some(f) = &fc {
            for d in &f.decisions {
                text.push_str(&format!("  - forecast: {d}\n"));
            }
            text.push_str(&format!(
                "  FORECAST {}: {}\n\n",
                label(folder),
                match (f.p_pass, f.p_pass_unscaled) {
                    (Some(p), Some(u)) => format!(
                        "mean so far {}, minimum acceptable mean {}; P(pass) = {p:.3}, \
                         P(pass without normalisation) = {u:.3} ({} draws)",
                        f.mean_so_far.map_or("-".into(), rcp::show),
                        f.min_acceptable_mean.map_or("-".into(), rcp::show),
                        f.draws
                    ),
                    _ => "none".into(),
                }
            ));
        }
        let mut v = machine::value(&r);
        if let (serde_json::Value::Object(m), Some(f)) = (&mut v, &fc) {
            m.insert("forecast".into(), machine::value(f));
            m.insert("in_progress".into(), in_progress.is_some().into());
        }
        if let (serde_json::Value::Object(m), Some(n)) = (&mut v, &note) {
            m.insert("note".into(), n.clone().into());
        }
        items.push(v);
    }
    let worst = if io_error {
        crate::USAGE_OR_IO
    } else if failed {
        crate::FAILED
    } else {
        crate::OK
    };
    let out = match a.format {
        Format::Text => text,
        Format::Json => machine::Document::new("rcp", "benchmarks", items)
            .with("ruleset", choice.json)
            .with("rcps", machine::value(&*tables))
            .with("passed", (worst == crate::OK).into())
            .render(),
    };
    if !crate::emit(&out) {
        return crate::USAGE_OR_IO;
    }
    worst
}
