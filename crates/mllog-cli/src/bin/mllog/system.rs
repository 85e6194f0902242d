//! `mllog system`: `systems/<system>.json` from what the machine and the logs say, each field
//! with its source, `TODO` where none gives it.

use std::path::{Path, PathBuf};
use std::process::Command;

use mllog_core::results::system_desc::{describe, Description, Source, Sources};
use serde_json::json;

use crate::machine;

/// Output formats of `mllog system`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Each field with its value and source, then the fields left TODO.
    Text,
    /// One JSON document: `{"schema_version", "command", "path", "complete", "todo",
    /// "notes", "fields": [{"name", "value", "source"}]}`.
    Json,
}

/// Options of `mllog system`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Writes DIR/systems/NAME.json with every field system_desc_checker \
requires, from the machine it runs on: the processor from lscpu or /proc/cpuinfo, the memory \
from /proc/meminfo, the OS from /etc/os-release, the accelerators from nvidia-smi or amd-smi when \
on PATH, the framework from NVIDIA_PYTORCH_VERSION; submitter, division and status from the \
result logs given. A field no source gives is written as TODO and named; nothing is guessed.\n\
Exit status: 0 written and complete, 1 written with TODO fields, 2 usage or I/O error (the file \
exists: --force)."
)]
pub struct Args {
    /// The system name (systems/NAME.json, its system_name).
    #[arg(long, value_name = "NAME", value_parser = crate::package::system_name)]
    name: String,
    /// The submission folder to write into.
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// Replace an existing systems/NAME.json.
    #[arg(long)]
    force: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Result logs, for submitter, division and status.
    #[arg(value_name = "FILE")]
    logs: Vec<PathBuf>,
}

/// A file's text, or `None` when it cannot be read (said in `notes`).
fn file(path: &str, notes: &mut Vec<String>) -> Option<Source> {
    match std::fs::read_to_string(path) {
        Ok(t) => Some((path.to_string(), t)),
        Err(e) => {
            notes.push(format!("{path}: not read: {e}"));
            None
        }
    }
}

/// A tool's output, or `None` when it is not on PATH or fails (said in `notes`).
fn tool(program: &str, args: &[&str], notes: &mut Vec<String>) -> Option<Source> {
    let line = std::iter::once(program)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    match Command::new(program).args(args).env("LC_ALL", "C").output() {
        Ok(o) if o.status.success() => {
            Some((line, String::from_utf8_lossy(&o.stdout).into_owned()))
        }
        Ok(o) => {
            notes.push(format!(
                "{line}: {} ({}): not used",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ));
            None
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            notes.push(format!("{line}: {e}: not used"));
            None
        }
    }
}

fn collect(logs: &[PathBuf], notes: &mut Vec<String>) -> Result<Sources, String> {
    let mut s = Sources {
        cpuinfo: file("/proc/cpuinfo", notes),
        lscpu: tool("lscpu", &[], notes),
        meminfo: file("/proc/meminfo", notes),
        os_release: file("/etc/os-release", notes),
        nvidia_smi: tool(
            "nvidia-smi",
            &[
                "--query-gpu=name,memory.total,driver_version,pcie.link.gen.max,\
                 pcie.link.width.max,clocks.max.sm",
                "--format=csv,noheader,nounits",
            ],
            notes,
        ),
        ..Sources::default()
    };
    if s.nvidia_smi.is_some() {
        s.nvidia_smi_banner = tool("nvidia-smi", &[], notes);
    }
    s.amd_smi = tool(
        "amd-smi",
        &["static", "--asic", "--vram", "--driver", "--json"],
        notes,
    );
    if s.amd_smi.is_some() {
        s.amd_smi_version = tool("amd-smi", &["version"], notes);
    }
    if let Ok(v) = std::env::var("NVIDIA_PYTORCH_VERSION")
        && !v.is_empty()
    {
        s.framework_env = Some(("NVIDIA_PYTORCH_VERSION".into(), v));
    }
    for log in logs {
        let f = std::fs::File::open(log).map_err(|e| format!("{}: {e}", log.display()))?;
        s.logs
            .read(&log.display().to_string(), std::io::BufReader::new(f))
            .map_err(|e| format!("{}: {e}", log.display()))?;
    }
    Ok(s)
}

pub fn run(a: Args) -> u8 {
    let mut notes = Vec::new();
    let sources = match collect(&a.logs, &mut notes) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mllog system: {e}");
            return crate::USAGE_OR_IO;
        }
    };
    let desc = describe(&a.name, &sources);
    let path = a.out.join("systems").join(format!("{}.json", a.name));
    if let Err(e) = write(&path, &desc, a.force) {
        eprintln!("mllog system: {e}");
        return crate::USAGE_OR_IO;
    }
    let todo = desc.todo();
    let text = match a.format {
        Format::Text => text(&path, &desc, &notes),
        Format::Json => {
            let fields = desc.fields.iter().map(machine::value).collect();
            machine::Document::new("system", "fields", fields)
                .with("path", json!(path.display().to_string()))
                .with("complete", json!(todo.is_empty()))
                .with("todo", json!(todo))
                .with("notes", json!(notes))
                .render()
        }
    };
    if !crate::emit(&text) {
        return crate::USAGE_OR_IO;
    }
    if todo.is_empty() {
        crate::OK
    } else {
        crate::FAILED
    }
}

fn write(path: &Path, desc: &Description, force: bool) -> Result<(), String> {
    if path.exists() && !force {
        return Err(format!(
            "{}: exists; not replaced (--force replaces it)",
            path.display()
        ));
    }
    let dir = path.parent().expect("systems/NAME.json has a parent");
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(path, desc.to_json()).map_err(|e| format!("{}: {e}", path.display()))
}

fn text(path: &Path, desc: &Description, notes: &[String]) -> String {
    let mut out = format!("wrote {}\n", path.display());
    let width = desc.fields.iter().map(|f| f.name.len()).max().unwrap_or(0);
    for f in &desc.fields {
        let v = f.value.as_deref().unwrap_or("TODO");
        out.push_str(&format!("  {:width$}  {v}  ({})\n", f.name, f.source));
    }
    for n in notes {
        out.push_str(&format!("note: {n}\n"));
    }
    let todo = desc.todo();
    if todo.is_empty() {
        out.push_str("every field from a source\n");
    } else {
        out.push_str(&format!(
            "{} field(s) no source gives, left TODO: {}\n",
            todo.len(),
            todo.join(", ")
        ));
    }
    out
}
