//! `mllog dry-run`: the log a run of a benchmark preset would produce, checked.

use std::path::PathBuf;

use crate::machine;
use mllog_cli::dry_run::{self, DryRun};
use mllog_core::compliance::Ruleset;
use mllog_core::presets::Preset;
use mllog_core::{Benchmark, Division};

fn benchmark(s: &str) -> Result<Benchmark, String> {
    Benchmark::from_name(s).ok_or_else(|| format!("unknown benchmark {s:?}"))
}

fn division(s: &str) -> Result<Division, String> {
    Division::from_name(s).ok_or_else(|| format!("unknown division {s:?} (closed or open)"))
}

fn list<T: std::str::FromStr, const N: usize>(s: &str) -> Result<[T; N], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() != N {
        return Err(format!("needs {N} comma-separated values, got {s:?}"));
    }
    let v: Vec<T> = parts
        .iter()
        .map(|p| p.parse().map_err(|_| format!("bad value {p:?}")))
        .collect::<Result<_, _>>()?;
    v.try_into().map_err(|_| format!("needs {N} values"))
}

/// Output formats of `mllog dry-run`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// What was written, then the check's diagnostics.
    Text,
    /// One JSON document: `{"schema_version", "command", "benchmark", ..., "files": [report]}`.
    Json,
}

/// Options of `mllog dry-run`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Exit status: 0 the log complies, 1 it does not, 2 usage, preset or I/O error."
)]
pub struct Args {
    /// The benchmark: llama2_70b_lora, llama31_8b, llama31_405b, deepseekv3_671b, gpt_oss_20b,
    /// flux1, qwen35_397b_grpo, dlrmv4, dlrm_dcnv2.
    #[arg(long, value_name = "NAME", value_parser = benchmark)]
    benchmark: Benchmark,
    /// The log to write.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// The division: closed or open.
    #[arg(long, value_name = "D", default_value = "closed", value_parser = division)]
    division: Division,
    /// Global batch size [default: the preset's].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    gbs: Option<u64>,
    /// The ruleset.
    #[arg(long, value_name = "X.Y.Z", default_value_t = Ruleset::DEFAULT)]
    ruleset: Ruleset,
    /// submission_org.
    #[arg(long, default_value = "DryRunOrg")]
    org: String,
    /// submission_platform.
    #[arg(long, default_value = "DryRunPlatform")]
    platform: String,
    /// config_filename (default: dry_run_BENCHMARK.sh, BENCHMARK the benchmark's name).
    #[arg(long, value_name = "NAME")]
    config_filename: Option<String>,
    /// Lowest numerical precisions in linear, attention and communication layers.
    #[arg(long, value_name = "L,A,C", default_value = "bfloat16,bfloat16,bfloat16", value_parser = list::<String, 3>)]
    precision: [String; 3],
    /// Tensor, pipeline, context and expert parallelism.
    #[arg(long, value_name = "T,P,C,E", default_value = "1,1,1,1", value_parser = list::<u32, 4>)]
    parallelism: [u32; 4],
    /// micro_batch_size.
    #[arg(long, value_name = "N", default_value_t = 1)]
    micro_batch_size: u32,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

pub fn run(a: Args) -> u8 {
    let preset = match Preset::for_benchmark(a.ruleset, a.benchmark, a.division, a.gbs) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("mllog dry-run: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let mut opts = DryRun::new(
        a.org,
        a.platform,
        a.config_filename
            .unwrap_or_else(|| format!("dry_run_{}.sh", a.benchmark)),
    );
    opts.precision = a.precision;
    opts.parallelism = a.parallelism;
    opts.micro_batch_size = a.micro_batch_size;
    match dry_run::run(&preset, &opts, &a.out) {
        Ok(o) => {
            let shown = a.out.display().to_string();
            let text = match a.format {
                Format::Json => machine::Document::new(
                    "dry-run",
                    "files",
                    vec![machine::value(&o.report.json(&shown, true))],
                )
                .with("benchmark", preset.benchmark().to_string().into())
                .with("division", preset.division().as_str().into())
                .with("ruleset", preset.ruleset().to_string().into())
                .with("global_batch_size", preset.global_batch_size().into())
                .with("evaluations", o.evals.into())
                .with("samples", o.samples.into())
                .with("converged", o.converged.into())
                .with("lines", o.lines.into())
                .render(),
                Format::Text => format!(
                    "dry run: {} {} division, ruleset {}, global batch size {}: {} evaluation(s), \
                     {} samples, {}; wrote {} MLLOG lines to {shown}\n{}",
                    preset.benchmark(),
                    preset.division().as_str(),
                    preset.ruleset(),
                    preset.global_batch_size(),
                    o.evals,
                    o.samples,
                    if o.converged {
                        "converged"
                    } else {
                        "did not converge"
                    },
                    o.lines,
                    crate::diag::render(&o.report, &a.out, &shown, true)
                ),
            };
            if !crate::emit(&text) {
                return crate::USAGE_OR_IO;
            }
            if o.report.passed(true) {
                crate::OK
            } else {
                crate::FAILED
            }
        }
        Err(e) => {
            eprintln!("mllog dry-run: {e}");
            crate::USAGE_OR_IO
        }
    }
}
