//! `mllog`: command-line tools for MLPerf Training MLLOG files.
//!
//! Exit status, for every subcommand: 0 ok (compliant, scored, packaged, written), 1 not
//! compliant or failed (a log fails its check, a benchmark has no score, a seed check failed),
//! 2 usage or I/O error (a bad option, an unreadable file). `mllog help COMMAND` lists each
//! command's options with their defaults.

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod check;
mod check_rules;
mod completions;
mod diag;
mod dry_run;
mod machine;
mod package;
mod progress;
mod rcp;
mod rcp_source;
mod score;
mod score_hpc;
mod summary;
mod system;
mod verify;
mod verify_round;
mod watch;

/// Exit status: success.
pub const OK: u8 = 0;
/// Exit status: not compliant, no score, seed check failed.
pub const FAILED: u8 = 1;
/// Exit status: usage or I/O error (clap uses 2 for usage errors too).
pub const USAGE_OR_IO: u8 = 2;

const AFTER_HELP: &str = "\
Exit status: 0 ok, 1 not compliant / failed, 2 usage or I/O error.
FILE `-` reads standard input.";

/// Tools for MLPerf Training MLLOG files: compliance check (with the verdicts of the official
/// checker, mlperf-logging 4.1.68), dry runs of the benchmark presets, run summaries, scores
/// and submission packaging.
#[derive(Parser, Debug)]
#[command(name = "mllog", version, after_help = AFTER_HELP, arg_required_else_help = true)]
pub struct Cli {
    /// When to colour the output (`auto`: on a terminal, unless NO_COLOR is set).
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto)]
    color: Color,
    #[command(subcommand)]
    command: Command,
}

/// `--color`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Color {
    /// On a terminal, unless NO_COLOR is set (CLICOLOR_FORCE forces it).
    Auto,
    /// Always, even into a pipe or with NO_COLOR.
    Always,
    /// Never.
    Never,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check MLLOG files for compliance with the MLPerf Training rules.
    Check(check::Args),
    /// Write the complete log a run of a benchmark preset would produce, and check it.
    DryRun(dry_run::Args),
    /// Summarise runs: status, time to train, samples to converge, evals, step times.
    Summary(summary::Args),
    /// Score a results folder as MLCommons' result_summarizer does.
    Score(score::Args),
    /// Lay result logs out as the package checker expects, and check their seeds.
    Package(package::Args),
    /// Check convergence against the reference convergence points (RCPs), as MLCommons'
    /// rcp_checker does, and say what factor the score is normalised by.
    Rcp(rcp::Args),
    /// Review a submitter folder as the official tools do: package checker, system
    /// descriptions, seeds, RCP, and the summarizer's table with the final scores.
    Verify(verify::Args),
    /// Write systems/NAME.json from what the machine and the logs say, each field with its
    /// source, TODO where none gives it.
    System(system::Args),
    /// Follow a log another process is writing (or standard input), check it as it grows,
    /// and end with the verdict `mllog check` gives the finished file.
    Watch(watch::Args),
    /// Print a shell completion script (e.g. `mllog completions bash > /etc/bash_completion.d/mllog`).
    Completions(completions::Args),
}

/// The exit status of a review: [`USAGE_OR_IO`] when something could not be read, else
/// [`OK`] or [`FAILED`].
pub fn review_status(io_errors: bool, passed: bool) -> u8 {
    if io_errors {
        USAGE_OR_IO
    } else if passed {
        OK
    } else {
        FAILED
    }
}

/// Writes `text` to stdout, without its ANSI styles when colour is off; false when stdout is
/// closed (`mllog ... | head`).
pub fn emit(text: &str) -> bool {
    let mut out = anstream::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .is_ok()
}

/// How a path is shown in messages (`-` is standard input).
pub fn shown(path: &std::path::Path) -> String {
    if path.as_os_str() == "-" {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    anstream::ColorChoice::write_global(match cli.color {
        Color::Auto => anstream::ColorChoice::Auto,
        Color::Always => anstream::ColorChoice::Always,
        Color::Never => anstream::ColorChoice::Never,
    });
    let code = match cli.command {
        Command::Check(a) => match check_rules::source(&a) {
            Some(src) => check_rules::run(&a, src),
            None => check::run(a),
        },
        Command::DryRun(a) => dry_run::run(a),
        Command::Summary(a) => summary::run(a),
        Command::Score(a) if a.usage == mllog_core::results::usage::Usage::Hpc => {
            score_hpc::run(&a)
        }
        Command::Score(a) => score::run(a),
        Command::Package(a) => package::run(a),
        Command::Rcp(a) => rcp::run(a),
        Command::Verify(a) if a.is_round() => verify_round::run(&a),
        Command::Verify(a) => verify::run(a),
        Command::System(a) => system::run(a),
        Command::Watch(a) => watch::run(a),
        Command::Completions(a) => completions::run(a, &mut Cli::command()),
    };
    ExitCode::from(code)
}
