//! The system description (`systems/<system>.json`) from what the machine and the logs say:
//! every field `system_desc_checker` requires ([`SYSTEM_DESC_FIELDS`]), each with its source,
//! or `TODO` where no source gives it. Nothing is guessed: a field no source states (the
//! storage, the networking, the cooling, the interconnects...) stays `TODO`, and
//! [`Description::todo`] names it.
//!
//! This module reads text, never the machine: the caller collects the sources (`/proc/cpuinfo`
//! or `lscpu`, `/proc/meminfo`, `/etc/os-release`, `nvidia-smi` or `amd-smi` output, the
//! result logs' `submission_*` records) into [`Sources`], so that every parser is tested on the
//! tools' documented formats.
//!
//! ```
//! use mllog_core::results::system_desc::{describe, Sources};
//!
//! let mut s = Sources::default();
//! s.os_release = Some(("/etc/os-release".into(), "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n".into()));
//! s.nvidia_smi = Some(("nvidia-smi --query-gpu=...".into(), "NVIDIA H100 80GB HBM3, 81559, 550.54.15, 5, 16, 1980\nNVIDIA H100 80GB HBM3, 81559, 550.54.15, 5, 16, 1980\n".into()));
//! let d = describe("my_system", &s);
//! assert_eq!(d.get("operating_system"), Some("Debian GNU/Linux 12 (bookworm)"));
//! assert_eq!(d.get("accelerators_per_node"), Some("2"));
//! assert_eq!(d.get("accelerator_model_name"), Some("NVIDIA H100 80GB HBM3"));
//! assert!(d.todo().contains(&"cooling"));
//! ```

use serde_json::Value as Json;

pub use super::package::SYSTEM_DESC_FIELDS;

/// One source: what was read (a path or a command line) and its text.
pub type Source = (String, String);

/// The facts of the result logs that a description repeats.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogFacts {
    /// `submission_org` values, with the log.
    pub org: Vec<(String, String)>,
    /// `submission_division` values, with the log.
    pub division: Vec<(String, String)>,
    /// `submission_status` values, with the log.
    pub status: Vec<(String, String)>,
}

/// What the machine and the logs say, as collected by the caller; `None` where a source is
/// missing (no such file, the tool not on `PATH`).
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// `/proc/cpuinfo`.
    pub cpuinfo: Option<Source>,
    /// `lscpu` output (`LC_ALL=C`).
    pub lscpu: Option<Source>,
    /// `/proc/meminfo`.
    pub meminfo: Option<Source>,
    /// `/etc/os-release`.
    pub os_release: Option<Source>,
    /// `nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.max,
    /// pcie.link.width.max,clocks.max.sm --format=csv,noheader,nounits`: one GPU a line.
    pub nvidia_smi: Option<Source>,
    /// `nvidia-smi` without arguments: its banner holds the CUDA version.
    pub nvidia_smi_banner: Option<Source>,
    /// `amd-smi static --asic --vram --driver --json`.
    pub amd_smi: Option<Source>,
    /// `amd-smi version`: its line holds the ROCm version.
    pub amd_smi_version: Option<Source>,
    /// The framework an environment names (`NVIDIA_PYTORCH_VERSION` of NGC containers), as
    /// (variable, value).
    pub framework_env: Option<Source>,
    /// The result logs.
    pub logs: LogFacts,
}

impl LogFacts {
    /// Adds what the log `shown`, read from `input` (streamed), records: its
    /// `submission_org`, `submission_division` and `submission_status`.
    pub fn read(&mut self, shown: &str, input: impl std::io::BufRead) -> std::io::Result<()> {
        let mut reader = crate::record::LogReader::new(input);
        for line in reader.by_ref().flatten() {
            let r = &line.record;
            let to = match &*r.key {
                "submission_org" => &mut self.org,
                "submission_division" => &mut self.division,
                "submission_status" => &mut self.status,
                _ => continue,
            };
            if let Some(v) = r.value.as_str() {
                to.push((v.to_string(), shown.to_string()));
            }
        }
        match reader.io_error() {
            Some(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
            None => Ok(()),
        }
    }
}

/// One field of the description.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Field {
    /// The field name.
    pub name: &'static str,
    /// Its value; `None`: no source gives it (written as `TODO`).
    pub value: Option<String>,
    /// Where the value comes from, or why there is none.
    pub source: String,
}

/// A system description: [`describe`]'s result.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Description {
    /// Every required field, in MLCommons' template order.
    pub fields: Vec<Field>,
}

impl Description {
    /// The value of `name`, when a source gave it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .and_then(|f| f.value.as_deref())
    }

    /// The fields no source gives.
    pub fn todo(&self) -> Vec<&'static str> {
        self.fields
            .iter()
            .filter(|f| f.value.is_none())
            .map(|f| f.name)
            .collect()
    }

    /// The description as `systems/<system>.json`: every field, `TODO` where no source gave
    /// it, in the template's order.
    pub fn to_json(&self) -> String {
        let map: serde_json::Map<String, Json> = self
            .fields
            .iter()
            .map(|f| {
                let v = f.value.clone().unwrap_or_else(|| "TODO".into());
                (f.name.to_string(), Json::String(v))
            })
            .collect();
        serde_json::to_string_pretty(&map).expect("strings serialise") + "\n"
    }
}

/// `key: value` lines (`/proc/cpuinfo`, `lscpu`, `/proc/meminfo`): the values of `key`.
fn values<'a>(text: &'a str, key: &str) -> impl Iterator<Item = &'a str> + use<'a> {
    let key = key.to_string();
    text.lines().filter_map(move |l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

fn first<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    values(text, key).next().filter(|v| !v.is_empty())
}

/// `/etc/os-release`'s `KEY="value"` (shell quoting, as os-release(5) says).
fn os_release_value(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let v = l.strip_prefix(key)?.strip_prefix('=')?;
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(v);
        let v = v.replace("\\\"", "\"").replace("\\\\", "\\");
        (!v.is_empty()).then_some(v)
    })
}

/// The GPUs of `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`: one line each,
/// fields separated by `, `.
fn nvidia_gpus(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').map(|f| f.trim().to_string()).collect())
        .collect()
}

/// The GPUs of `amd-smi static --json`: a list of per-GPU objects, or one object holding it
/// under `gpu_data` (newer releases).
fn amd_gpus(text: &str) -> Option<Vec<Json>> {
    match serde_json::from_str(text).ok()? {
        Json::Array(a) => Some(a),
        Json::Object(mut o) => match o.remove("gpu_data")? {
            Json::Array(a) => Some(a),
            _ => None,
        },
        _ => None,
    }
}

/// An amd-smi quantity: `{"value": 196592, "unit": "MB"}`, or the older `"196592 MB"`.
fn amd_quantity(v: &Json) -> Option<String> {
    match v {
        Json::Object(o) => {
            let value = o.get("value")?;
            let unit = o.get("unit").and_then(Json::as_str).unwrap_or("");
            let value = match value {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            };
            Some(format!("{value} {unit}").trim().to_string())
        }
        Json::String(s) if !s.is_empty() && s != "N/A" => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// One value for every GPU, or why not: all must agree (a description has one model).
fn same_for_all(values: Vec<Option<String>>, what: &str) -> Result<String, String> {
    let mut it = values.into_iter();
    let first = it.next().flatten().ok_or(format!("no {what} given"))?;
    for v in it {
        match v {
            Some(v) if v == first => {}
            Some(v) => return Err(format!("the GPUs differ in {what}: {first} and {v}")),
            None => return Err(format!("not every GPU gives its {what}")),
        }
    }
    Ok(first)
}

/// The one value of a log fact, or why not.
fn log_value(facts: &[(String, String)], key: &str) -> Result<(String, String), String> {
    let Some((v, log)) = facts.first() else {
        return Err(format!("no log given, or none records {key}"));
    };
    if let Some((other, olog)) = facts.iter().find(|(o, _)| o != v) {
        return Err(format!(
            "the logs disagree on {key}: `{v}` in {log}, `{other}` in {olog}"
        ));
    }
    Ok((v.clone(), format!("{key} in {log}")))
}

/// The availability the checker accepts for a log's `submission_status` (its four values).
fn availability(status: &str) -> Option<&'static str> {
    Some(match status {
        "onprem" => "Available on-premise",
        "cloud" => "Available cloud",
        "research" => "Research, Development, or Internal (RDI)",
        "preview" => "Preview",
        _ => return None,
    })
}

struct Builder {
    fields: Vec<Field>,
}

impl Builder {
    fn set(&mut self, name: &str, value: impl Into<String>, source: impl Into<String>) {
        if let Some(f) = self.fields.iter_mut().find(|f| f.name == name)
            && f.value.is_none()
        {
            f.value = Some(value.into());
            f.source = source.into();
        }
    }

    fn why_not(&mut self, name: &str, why: impl Into<String>) {
        if let Some(f) = self.fields.iter_mut().find(|f| f.name == name)
            && f.value.is_none()
        {
            f.source = why.into();
        }
    }

    fn result(&mut self, name: &str, r: Result<(String, String), String>) {
        match r {
            Ok((v, src)) => self.set(name, v, src),
            Err(why) => self.why_not(name, why),
        }
    }
}

/// The description of `system` from `sources` (see the module documentation).
pub fn describe(system: &str, sources: &Sources) -> Description {
    let mut b = Builder {
        fields: SYSTEM_DESC_FIELDS
            .iter()
            .map(|&name| Field {
                name,
                value: None,
                source: "no source gives it".into(),
            })
            .collect(),
    };
    b.set("system_name", system, "the system name given");
    b.result("submitter", log_value(&sources.logs.org, "submission_org"));
    b.result(
        "division",
        log_value(&sources.logs.division, "submission_division"),
    );
    b.result(
        "status",
        log_value(&sources.logs.status, "submission_status").and_then(|(v, src)| {
            availability(&v)
                .map(|a| (a.to_string(), format!("{src} (`{v}`)")))
                .ok_or(format!(
                    "submission_status `{v}` is none of the four the rules allow"
                ))
        }),
    );
    host(&mut b, sources);
    accelerators(&mut b, sources);
    if let Some((var, v)) = &sources.framework_env {
        b.set(
            "framework",
            format!("NVIDIA PyTorch Release {v}"),
            format!("environment variable {var} (set by NVIDIA's PyTorch containers)"),
        );
    } else {
        b.why_not(
            "framework",
            "MLPerf logs record no framework, and no NVIDIA_PYTORCH_VERSION is set",
        );
    }
    Description { fields: b.fields }
}

fn host(b: &mut Builder, s: &Sources) {
    // lscpu first: it states sockets, cores per socket and the maximum frequency, which
    // /proc/cpuinfo does only in part.
    if let Some((src, text)) = &s.lscpu {
        if let Some(v) = first(text, "Model name") {
            b.set("host_processor_model_name", v, format!("{src}: Model name"));
        }
        if let Some(v) = first(text, "Socket(s)") {
            b.set("host_processors_per_node", v, format!("{src}: Socket(s)"));
        }
        if let Some(v) = first(text, "Core(s) per socket") {
            b.set(
                "host_processor_core_count",
                v,
                format!("{src}: Core(s) per socket"),
            );
        }
        if let Some(v) = first(text, "CPU(s)") {
            b.set("host_processor_vcpu_count", v, format!("{src}: CPU(s)"));
        }
        if let Some(v) = first(text, "CPU max MHz") {
            let mhz = v
                .parse::<f64>()
                .map_or(v.to_string(), |m| format!("{m:.0}"));
            b.set(
                "host_processor_frequency",
                format!("{mhz} MHz"),
                format!("{src}: CPU max MHz"),
            );
        }
        let caches: Vec<String> = ["L1d", "L1i", "L2", "L3"]
            .iter()
            .filter_map(|c| first(text, &format!("{c} cache")).map(|v| format!("{c}: {v}")))
            .collect();
        if !caches.is_empty() {
            b.set(
                "host_processor_caches",
                caches.join(", "),
                format!("{src}: L1d/L1i/L2/L3 cache"),
            );
        }
    }
    if let Some((src, text)) = &s.cpuinfo {
        if let Some(v) = first(text, "model name") {
            b.set("host_processor_model_name", v, format!("{src}: model name"));
        }
        let mut sockets: Vec<&str> = values(text, "physical id").collect();
        sockets.sort();
        sockets.dedup();
        if !sockets.is_empty() {
            b.set(
                "host_processors_per_node",
                sockets.len().to_string(),
                format!("{src}: distinct physical id"),
            );
        }
        if let Some(v) = first(text, "cpu cores") {
            b.set("host_processor_core_count", v, format!("{src}: cpu cores"));
        }
        let cpus = values(text, "processor").count();
        if cpus > 0 {
            b.set(
                "host_processor_vcpu_count",
                cpus.to_string(),
                format!("{src}: processor entries"),
            );
        }
    }
    if let Some((src, text)) = &s.meminfo
        && let Some(kb) = first(text, "MemTotal")
            .and_then(|v| v.strip_suffix("kB"))
            .and_then(|v| v.trim().parse::<u64>().ok())
    {
        b.set(
            "host_memory_capacity",
            format!("{:.1} GiB", kb as f64 / (1024.0 * 1024.0)),
            format!("{src}: MemTotal ({kb} kB, the memory the kernel manages)"),
        );
    }
    if let Some((src, text)) = &s.os_release
        && let Some(v) = os_release_value(text, "PRETTY_NAME")
    {
        b.set("operating_system", v, format!("{src}: PRETTY_NAME"));
    }
}

/// `other_software_stack` from the driver and the runtime (CUDA, ROCm), each (value,
/// source), as far as they are known.
fn software_stack(b: &mut Builder, parts: [Option<(String, String)>; 2]) {
    let (values, sources): (Vec<String>, Vec<String>) = parts.into_iter().flatten().unzip();
    if !values.is_empty() {
        b.set(
            "other_software_stack",
            values.join(", "),
            sources.join("; "),
        );
    }
}

fn accelerators(b: &mut Builder, s: &Sources) {
    if let Some((src, text)) = &s.nvidia_smi {
        let gpus = nvidia_gpus(text);
        if !gpus.is_empty() {
            b.set(
                "accelerators_per_node",
                gpus.len().to_string(),
                format!("{src}: one line per GPU"),
            );
        }
        let col = |i: usize| -> Vec<Option<String>> {
            gpus.iter()
                .map(|g| {
                    g.get(i)
                        .filter(|v| !v.is_empty() && !v.starts_with('['))
                        .cloned()
                })
                .collect()
        };
        let with = |r: Result<String, String>, what: &str| r.map(|v| (v, format!("{src}: {what}")));
        b.result(
            "accelerator_model_name",
            with(same_for_all(col(0), "name"), "name"),
        );
        b.result(
            "accelerator_memory_capacity",
            with(
                same_for_all(col(1), "memory.total").map(|m| format!("{m} MiB")),
                "memory.total",
            ),
        );
        let pcie: Vec<Option<String>> = col(3)
            .into_iter()
            .zip(col(4))
            .map(|(g, w)| Some(format!("PCIe Gen{} x{}", g?, w?)))
            .collect();
        b.result(
            "accelerator_host_interconnect",
            with(
                same_for_all(pcie, "pcie.link.gen.max and pcie.link.width.max"),
                "pcie.link.gen.max, pcie.link.width.max",
            ),
        );
        b.result(
            "accelerator_frequency",
            with(
                same_for_all(col(5), "clocks.max.sm").map(|m| format!("{m} MHz")),
                "clocks.max.sm",
            ),
        );
        let driver = same_for_all(col(2), "driver_version").ok().map(|d| {
            (
                format!("NVIDIA driver {d}"),
                format!("{src}: driver_version"),
            )
        });
        let cuda = s.nvidia_smi_banner.as_ref().and_then(|(bsrc, t)| {
            let v = t.split("CUDA Version:").nth(1)?.split_whitespace().next()?;
            let v = v.trim_end_matches('|');
            Some((format!("CUDA {v}"), format!("{bsrc}: CUDA Version")))
        });
        software_stack(b, [driver, cuda]);
    }
    if let Some((src, text)) = &s.amd_smi {
        let Some(gpus) = amd_gpus(text) else {
            b.why_not(
                "accelerator_model_name",
                format!("{src}: not the JSON amd-smi documents"),
            );
            return;
        };
        if !gpus.is_empty() {
            b.set(
                "accelerators_per_node",
                gpus.len().to_string(),
                format!("{src}: one object per GPU"),
            );
        }
        let at = |path: &[&str]| -> Vec<Option<String>> {
            gpus.iter()
                .map(|g| {
                    let mut v = g;
                    for p in path {
                        v = v.get(p)?;
                    }
                    amd_quantity(v)
                })
                .collect()
        };
        let with = |r: Result<String, String>, what: &str| r.map(|v| (v, format!("{src}: {what}")));
        b.result(
            "accelerator_model_name",
            with(
                same_for_all(at(&["asic", "market_name"]), "asic.market_name"),
                "asic.market_name",
            ),
        );
        b.result(
            "accelerator_memory_capacity",
            with(
                same_for_all(at(&["vram", "size"]), "vram.size"),
                "vram.size",
            ),
        );
        b.result(
            "accelerator_memory_configuration",
            with(
                same_for_all(at(&["vram", "type"]), "vram.type"),
                "vram.type",
            ),
        );
        let driver = same_for_all(at(&["driver", "version"]), "driver.version")
            .ok()
            .map(|d| {
                (
                    format!("amdgpu driver {d}"),
                    format!("{src}: driver.version"),
                )
            });
        let rocm = s.amd_smi_version.as_ref().and_then(|(vsrc, t)| {
            let v = t
                .split("ROCm version:")
                .nth(1)?
                .split(['|', '\n'])
                .next()?
                .trim();
            (!v.is_empty() && v != "N/A")
                .then(|| (format!("ROCm {v}"), format!("{vsrc}: ROCm version")))
        });
        software_stack(b, [driver, rocm]);
    }
    if s.nvidia_smi.is_none() && s.amd_smi.is_none() {
        for f in [
            "accelerators_per_node",
            "accelerator_model_name",
            "accelerator_memory_capacity",
            "accelerator_host_interconnect",
            "accelerator_frequency",
        ] {
            b.why_not(f, "neither nvidia-smi nor amd-smi is on PATH");
        }
    }
}
