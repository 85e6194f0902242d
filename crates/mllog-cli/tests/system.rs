//! `mllog system`: the system description from the machine. With `nvidia-smi` and `amd-smi`
//! stand-ins on `PATH` that print those tools' documented output formats, and on the machine
//! the tests run on as it is; the file written is checked by MLCommons' `system_desc_checker`
//! (through `$MLLOG_PYTHON`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use mllog_core::compliance::{example_log, Division, Ruleset};
use mllog_core::Benchmark;
use serde_json::Value;

/// Runs `mllog system` with `path` as `PATH` (the real one when `None`): (exit code, the JSON
/// document, the file written).
fn system(dir: &Path, path: Option<&str>, logs: &[PathBuf]) -> (i32, Value, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mllog"));
    cmd.args(["system", "--name", "sys", "--format", "json", "--out"])
        .arg(dir)
        .args(logs)
        .env_remove("NVIDIA_PYTORCH_VERSION");
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let doc: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    let file = std::fs::read_to_string(dir.join("systems/sys.json")).unwrap();
    (
        out.status.code().unwrap(),
        doc,
        serde_json::from_str(&file).unwrap(),
    )
}

/// `system_desc_checker`'s verdict on `file`: (passed, its log); `None` (with the one skip
/// line) without `MLLOG_PYTHON`.
fn official(file: &Path, work: &Path) -> Option<(bool, String)> {
    if std::env::var_os("MLLOG_PYTHON").is_none() {
        println!("skipped: system_desc_checker on the file written (MLLOG_PYTHON not set)");
        return None;
    }
    let log = work.join("system_desc_checker.log");
    let out = Command::new(common::python())
        .args(["-m", "mlperf_logging.system_desc_checker"])
        .arg(file)
        .args(["training", "5.1.0", "--log_output"])
        .arg(&log)
        .current_dir(work)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let all = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
    Some((text.contains("System description checker passed"), all))
}

fn script(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `PATH` with `bin` first, then the system's folders (for `sh` and `lscpu`).
fn path_with(bin: &Path) -> String {
    format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display())
}

fn log_file(dir: &Path) -> PathBuf {
    let p = dir.join("result_0.txt");
    let log = example_log(Ruleset::V5_1_0, Benchmark::Flux1, Division::Closed).unwrap();
    std::fs::write(&p, log).unwrap();
    p
}

/// What the log records under `key`.
fn logged(log: &Path, key: &str) -> String {
    let text = std::fs::read_to_string(log).unwrap();
    text.lines()
        .filter_map(|l| l.split_once(":::MLLOG ").map(|(_, j)| j))
        .filter_map(|j| serde_json::from_str::<Value>(j).ok())
        .find(|v| v["key"] == key)
        .and_then(|v| v["value"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{key} not in {}", log.display()))
}

fn field<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no {name}: {doc:#}"))
}

/// Every required field is in the file; a field with no value is `TODO` there and named in
/// `todo`; one with a value has a source.
fn assert_sourced(doc: &Value, file: &Value, code: i32) {
    let todo: Vec<&str> = doc["todo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["command"], "system");
    assert_eq!(doc["complete"], todo.is_empty());
    let fields = doc["fields"].as_array().unwrap();
    assert_eq!(fields.len(), 33, "{doc:#}");
    assert_eq!(file.as_object().unwrap().len(), 33, "{file:#}");
    for f in fields {
        let name = f["name"].as_str().unwrap();
        assert!(!f["source"].as_str().unwrap().is_empty(), "{f}");
        match f["value"].as_str() {
            Some(v) => {
                assert_eq!(file[name], v, "{name}");
                assert!(!todo.contains(&name), "{name}");
            }
            None => {
                assert_eq!(file[name], "TODO", "{name}");
                assert!(todo.contains(&name), "{name}");
            }
        }
    }
    assert_eq!(code, if todo.is_empty() { 0 } else { 1 }, "{doc:#}");
}

/// The stand-in prints each field `--query-gpu` asks for, in its order, `, `-separated, one
/// line per GPU (`--format=csv,noheader,nounits`), and the banner without arguments.
const NVIDIA_SMI: &str = r#"case "$1" in
--query-gpu=*)
  [ "$2" = "--format=csv,noheader,nounits" ] || exit 2
  for gpu in 0 1 2 3 4 5 6 7; do
    line=""
    for f in $(echo "${1#--query-gpu=}" | tr ',' ' '); do
      case "$f" in
        name) v="NVIDIA H100 80GB HBM3";;
        memory.total) v="81559";;
        driver_version) v="550.54.15";;
        pcie.link.gen.max) v="5";;
        pcie.link.width.max) v="16";;
        clocks.max.sm) v="1980";;
        *) v="[N/A]";;
      esac
      line="${line:+$line, }$v"
    done
    echo "$line"
  done;;
"")
  cat <<'EOF'
Sun Dec  6 10:00:00 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
EOF
  ;;
*) exit 2;;
esac
"#;

#[test]
fn with_an_nvidia_smi_stand_in() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    script(&bin, "nvidia-smi", NVIDIA_SMI);
    script(&bin, "amd-smi", "exit 127\n");
    let log = log_file(tmp.path());
    let sub = tmp.path().join("sub");
    let (code, doc, file) = system(&sub, Some(&path_with(&bin)), std::slice::from_ref(&log));
    assert_sourced(&doc, &file, code);
    let want = [
        ("accelerators_per_node", "8"),
        ("accelerator_model_name", "NVIDIA H100 80GB HBM3"),
        ("accelerator_memory_capacity", "81559 MiB"),
        ("accelerator_host_interconnect", "PCIe Gen5 x16"),
        ("accelerator_frequency", "1980 MHz"),
        ("other_software_stack", "NVIDIA driver 550.54.15, CUDA 12.4"),
        ("system_name", "sys"),
    ];
    for (k, v) in want {
        assert_eq!(file[k], v, "{k}: {doc:#}");
    }
    assert!(field(&doc, "accelerator_model_name")["source"]
        .as_str()
        .unwrap()
        .starts_with("nvidia-smi --query-gpu="));
    assert_eq!(file["submitter"], logged(&log, "submission_org"));
    assert_eq!(file["division"], logged(&log, "submission_division"));
    // Never a guess: what no source states stays TODO, and is named.
    for k in [
        "cooling",
        "host_storage_type",
        "number_of_nodes",
        "accelerator_interconnect",
    ] {
        assert_eq!(file[k], "TODO", "{k}");
    }
    // The official checker accepts the file: every field is there, status from the log.
    if let Some((passed, log)) = official(&sub.join("systems/sys.json"), tmp.path()) {
        assert!(passed, "{log}");
    }
    // An existing description is not replaced without --force.
    let out = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(["system", "--name", "sys", "--out"])
        .arg(&sub)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exists; not replaced"));
}

#[test]
fn with_an_amd_smi_stand_in() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // amd-smi's JSON (ROCm 6.1 and later): quantities as {"value", "unit"}.
    let gpu = |i: usize| {
        format!(
            r#"{{"gpu": {i}, "asic": {{"market_name": "AMD Instinct MI300X", "vendor_id": "0x1002", "device_id": "0x74a1"}}, "vram": {{"type": "HBM3", "vendor": "N/A", "size": {{"value": 196592, "unit": "MB"}}, "bit_width": 8192}}, "driver": {{"name": "amdgpu", "version": "6.8.5"}}}}"#
        )
    };
    let list = (0..8).map(gpu).collect::<Vec<_>>().join(",\n");
    script(
        &bin,
        "amd-smi",
        &format!(
            "case \"$1\" in\nstatic) [ \"$*\" = \"static --asic --vram --driver --json\" ] || exit 2\ncat <<'END'\n[\n{list}\n]\nEND\n;;\nversion) echo 'AMDSMI Tool: 24.6.2+2b02a07 | AMDSMI Library version: 24.6.2.0 | ROCm version: 6.2.0';;\n*) exit 2;;\nesac\n"
        ),
    );
    script(
        &bin,
        "nvidia-smi",
        "echo 'NVIDIA-SMI has failed' >&2; exit 9\n",
    );
    let sub = tmp.path().join("sub");
    // No logs: submitter, division and status have no source.
    let (code, doc, file) = system(&sub, Some(&path_with(&bin)), &[]);
    assert_sourced(&doc, &file, code);
    let want = [
        ("accelerators_per_node", "8"),
        ("accelerator_model_name", "AMD Instinct MI300X"),
        ("accelerator_memory_capacity", "196592 MB"),
        ("accelerator_memory_configuration", "HBM3"),
        ("other_software_stack", "amdgpu driver 6.8.5, ROCm 6.2.0"),
    ];
    for (k, v) in want {
        assert_eq!(file[k], v, "{k}: {doc:#}");
    }
    // The failing nvidia-smi is said, not used.
    assert!(
        doc["notes"].to_string().contains("nvidia-smi --query-gpu="),
        "{doc:#}"
    );
    for k in ["submitter", "division", "status"] {
        assert_eq!(file[k], "TODO", "{k}");
    }
    // status TODO: the official checker refuses the file, as the TODO list says.
    if let Some((passed, log)) = official(&sub.join("systems/sys.json"), tmp.path()) {
        assert!(
            !passed && log.contains("Field status contains a non valid value: TODO"),
            "{log}"
        );
    }
}

/// `KEY=value` of /etc/os-release, unquoted.
fn os_release(key: &str) -> Option<String> {
    let text = std::fs::read_to_string("/etc/os-release").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(|v| v.trim_matches('"').to_string())
}

#[test]
fn on_this_machine_as_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let log = log_file(tmp.path());
    let sub = tmp.path().join("sub");
    let (code, doc, file) = system(&sub, None, &[log]);
    assert_sourced(&doc, &file, code);
    if let Some(name) = os_release("PRETTY_NAME") {
        assert_eq!(file["operating_system"], name);
    }
    if let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") {
        let cpus = cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count();
        if cpus > 0 {
            assert_eq!(
                file["host_processor_vcpu_count"],
                cpus.to_string(),
                "{doc:#}"
            );
        }
    }
    if let Ok(meminfo) = std::fs::read_to_string("/proc/meminfo") {
        let kb: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        let gib = format!("{:.1} GiB", kb / 1024.0 / 1024.0);
        assert_eq!(file["host_memory_capacity"], gib.as_str());
    }
    // Where the machine has NVIDIA GPUs, as many as nvidia-smi lists.
    if let Ok(out) = Command::new("nvidia-smi").arg("-L").output()
        && out.status.success()
    {
        let n = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("GPU "))
            .count();
        assert_eq!(file["accelerators_per_node"], n.to_string(), "{doc:#}");
        println!("nvidia-smi: {n} GPU(s): {}", file["accelerator_model_name"]);
    }
    if let Some((passed, log)) = official(&sub.join("systems/sys.json"), tmp.path()) {
        assert!(passed, "{log}");
    }
}
