//! `mllog score --usage hpc`: result_summarizer's scores of an HPC results folder, strong
//! scaling (`results/<system>/strong/<benchmark>/`: time to train, as for Training) and weak
//! scaling (`results/<system>/weak/<benchmark>/`: models trained, accelerators per model,
//! time to train them all).

use std::path::PathBuf;

use crate::machine;
use crate::progress::Progress;
use crate::rcp_source::Chosen;
use crate::score::{Args, Format};
use mllog_core::results::hpc_folders::hpc_benchmark_folders;
use mllog_core::results::package_facts::read_usage_facts;
use mllog_core::results::rcp::{self, FinalScore};
use mllog_core::results::required_runs_in;
use mllog_core::results::score::{benchmark_of, score_benchmark_as, BenchmarkScore};
use mllog_core::results::usage::{HpcScaling, Usage};
use mllog_core::results::weak_score::{score_weak, WeakScore};

/// One folder's score: strong (with its final score after the RCP step) or weak.
enum Scored {
    Strong(Box<(BenchmarkScore, FinalScore)>),
    Weak(Box<WeakScore>),
}

impl Scored {
    fn has_score(&self) -> bool {
        match self {
            Scored::Strong(b) => b.1.score.is_some(),
            Scored::Weak(w) => w.scored(),
        }
    }

    fn json(&self, ruleset: &str) -> serde_json::Value {
        let (mut v, scaling) = match self {
            Scored::Strong(b) => {
                let (s, f) = &**b;
                let mut v = machine::value(s);
                if let serde_json::Value::Object(m) = &mut v {
                    m.insert("final".into(), machine::value(f));
                }
                (v, HpcScaling::Strong)
            }
            Scored::Weak(w) => (machine::value(&**w), HpcScaling::Weak),
        };
        if let serde_json::Value::Object(m) = &mut v {
            m.insert("usage".into(), "hpc".into());
            m.insert("scaling".into(), scaling.as_str().into());
            m.insert("ruleset".into(), ruleset.into());
        }
        v
    }
}

pub fn run(a: &Args) -> u8 {
    let dir = a.dir.display();
    let folders = match hpc_benchmark_folders(&a.dir) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("mllog score: {dir}: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    if folders.is_empty() {
        eprintln!(
            "mllog score: {dir}: no HPC benchmark folder found (expected \
             results/<system>/strong/<benchmark>/ or results/<system>/weak/<benchmark>/ below a \
             submitter folder, its results/, a system folder, or one such folder)"
        );
        return crate::USAGE_OR_IO;
    }
    // The rules, then the RCPs and the result counts of the same package and ruleset.
    let prepared = a.rcps.choose_hpc(a.ruleset.as_deref()).and_then(|c| {
        let tables = a.rcps.open_named(Usage::Hpc, &c.ruleset)?;
        let rules = c.rules.as_deref().expect("HPC rules are read at run time");
        let facts = read_usage_facts(rules.package_root(), Usage::Hpc, &c.ruleset)?;
        Ok((c, tables, facts.result_file_counts))
    });
    let (chosen, tables, counts) = match prepared {
        Ok(x) => x,
        Err(e) => {
            eprintln!("mllog score: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let rcp_opts = rcp::RcpOptions::with_tables(tables.clone());
    let rules = chosen
        .rules
        .as_deref()
        .expect("HPC rules are read at run time");
    let verdict = |f: &std::path::Path| Chosen::verdict(rules, f);
    let files: Vec<Vec<PathBuf>> = folders
        .iter()
        .map(|(_, f)| mllog_core::results::score::result_files(f).unwrap_or_default())
        .collect();
    let progress = Progress::new(&files.concat());
    let mut scored = Vec::with_capacity(folders.len());
    let mut io_error = false;
    for ((scaling, folder), files) in folders.iter().zip(&files) {
        progress.working_on(folder);
        let required = required_runs_in(counts, &benchmark_of(folder));
        let s = match scaling {
            HpcScaling::Strong => {
                score_benchmark_as(folder, Usage::Hpc, required, &verdict).map(|s| {
                    let f = rcp::final_score(&s, &rcp_opts);
                    Scored::Strong(Box::new((s, f)))
                })
            }
            HpcScaling::Weak => {
                score_weak(folder, required, &verdict).map(|w| Scored::Weak(Box::new(w)))
            }
        };
        match s {
            Ok(s) => {
                let (unreadable, error) = match &s {
                    Scored::Strong(b) => (&b.0.unreadable, None),
                    Scored::Weak(w) => (&w.unreadable, w.error.as_ref()),
                };
                for u in unreadable {
                    eprintln!("mllog score: {u}");
                }
                if let Some(e) = error {
                    eprintln!("mllog score: {e}");
                }
                io_error |= !unreadable.is_empty();
                scored.push(s);
            }
            Err(e) => {
                eprintln!("mllog score: {e}");
                io_error = true;
            }
        }
        progress.done_files(files);
    }
    progress.finish();
    let ruleset = chosen.ruleset.as_str();
    let text = match a.format {
        Format::Json => machine::Document::new(
            "score",
            "benchmarks",
            scored.iter().map(|s| s.json(ruleset)).collect(),
        )
        .with("ruleset", chosen.json.clone())
        .with("rcps", machine::value(&*tables))
        .render(),
        Format::Jsonl => scored
            .iter()
            .map(|s| machine::line(s.json(ruleset)))
            .collect(),
        Format::Csv => csv(&scored, ruleset),
        Format::Text => {
            let mut out = format!("ruleset {ruleset} (given, hpc)\n{}\n", tables.describe());
            out.extend(chosen.rules_line().map(|l| format!("{l}\n")));
            out.push('\n');
            for s in &scored {
                out.push_str(&match s {
                    Scored::Strong(b) => crate::score::text(&b.0, &b.1),
                    Scored::Weak(w) => weak_text(w),
                });
            }
            out
        }
    };
    if !crate::emit(&text) {
        return crate::USAGE_OR_IO;
    }
    if io_error {
        crate::USAGE_OR_IO
    } else if scored.iter().all(Scored::has_score) {
        crate::OK
    } else {
        crate::FAILED
    }
}

/// One weak-scaling folder's text: each file's part, the decisions, the score tuple.
fn weak_text(w: &WeakScore) -> String {
    let mut out = format!(
        "{}/weak/{}  ({})\n",
        w.system,
        w.benchmark,
        w.folder.display()
    );
    for r in &w.runs {
        let name = r.file.file_name().unwrap_or_default().to_string_lossy();
        out.push_str(&format!("  {name}  {}\n", r.decision));
    }
    for d in &w.decisions {
        out.push_str(&format!("  - {d}\n"));
    }
    out.push_str(&format!(
        "  WEAK SCORE {}/{}: {}\n\n",
        w.system,
        w.benchmark,
        w.describe()
    ));
    out
}

/// One table: the Training columns with a leading `scaling` column, and the weak-scaling
/// tuple at the end (empty for strong-scaling rows, as the strong columns are for weak ones).
fn csv(scored: &[Scored], ruleset: &str) -> String {
    let mut out = String::new();
    let strong = crate::score::csv(&[], &[], ruleset);
    out.push_str(&format!(
        "scaling,{},number_of_models,instance_scale,time_to_train_all_min\n",
        strong.trim_end()
    ));
    let blanks = strong.trim_end().matches(',').count();
    for s in scored {
        match s {
            Scored::Strong(b) => {
                let (b, f) = &**b;
                let row =
                    crate::score::csv(std::slice::from_ref(b), std::slice::from_ref(f), ruleset);
                let row = row.lines().nth(1).unwrap_or_default();
                out.push_str(&format!("strong,{row},,,\n"));
            }
            Scored::Weak(w) => {
                // system, benchmark, folder, runs, required_runs; ruleset; the rest empty.
                let mut cells = vec![String::new(); blanks + 1];
                cells[0] = machine::csv_field(&w.system);
                cells[1] = machine::csv_field(&w.benchmark);
                cells[2] = machine::csv_field(&w.folder.display().to_string());
                cells[3] = w.runs.len().to_string();
                cells[4] = w.required_runs.map_or(String::new(), |n| n.to_string());
                cells[10] = ruleset.to_owned();
                out.push_str(&format!(
                    "weak,{},{},{},{}\n",
                    cells.join(","),
                    w.number_of_models,
                    w.instance_scale.map_or(String::new(), |n| n.to_string()),
                    w.time_to_train_all.map_or(String::new(), |t| t.to_string()),
                ));
            }
        }
    }
    out
}
