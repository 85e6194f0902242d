//! `mllog watch` following a run that the real Python writer (`mlperf_logging.mllog`, from the
//! venv `MLLOG_PYTHON` names) writes line by line, with pauses: a relaunch that truncates the
//! file, a file that does not exist yet, lines written in pieces, rank prefixes, CRLF, noise,
//! standard input, a writer that exits, SIGTERM; the sinks (upload to a folder and to S3 on
//! moto, OpenTelemetry to the rotel collector), all on loopback. The final verdict must be what
//! `mllog check` and the official checker say of the finished file.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The writer: re-emits the records of a dry run through `mlperf_logging.mllog`, one at a
/// time. Options (one JSON argument): `out` (the file, else stdout), `pause` (seconds between
/// records), `skip` (keys left out), `gate` (run_stop waits for this file to exist),
/// `gate_at` (the key that waits for the gate instead), `strip` (`{key: field}`: the first
/// record of that key loses that metadata field), `relaunch_after` (write that many records,
/// truncate the file, write the whole run), `replace_after` (write that many, then the whole
/// run into a new file moved over the old one after its first three records),
/// `prefix` and `eol` (what a launcher adds), `pieces` (each line in two writes), `noise`
/// (a line of other output after each record), `copy` (every byte also to this file),
/// `no_run_stop`.
const WRITER: &str = r#"
import json, logging, os, sys, time
from mlperf_logging import mllog

args = json.loads(sys.argv[1])
records = [json.loads(l.split(":::MLLOG", 1)[1]) for l in open(args["source"]) if ":::MLLOG" in l]

class Pieces:
    """A stream that writes each line in two parts, a pause between them."""
    def __init__(self, f, pieces):
        self.f, self.pieces = f, pieces
    def write(self, s):
        if self.pieces and len(s) > 2:
            h = len(s) // 2
            self.f.write(s[:h]); self.f.flush(); time.sleep(0.15)
            s = s[h:]
        self.f.write(s); self.f.flush()
    def flush(self):
        self.f.flush()

out = args.get("out")
target = open(out, "a") if out else sys.stdout
streams = [Pieces(target, args.get("pieces", False))]
if args.get("copy"):
    streams.append(Pieces(open(args["copy"], "a"), False))
lg = logging.getLogger("watch_test_writer")
lg.setLevel(logging.INFO)
lg.propagate = False
for s in streams:
    h = logging.StreamHandler(s)
    h.terminator = args.get("eol", "\n")
    h.setFormatter(logging.Formatter(args.get("prefix", "") + "%(message)s"))
    lg.addHandler(h)
mllog.config(logger=lg)
logger = mllog.get_mllogger()
emit = {"INTERVAL_START": logger.start, "INTERVAL_END": logger.end, "POINT_IN_TIME": logger.event}

stripped = set()

def run(recs):
    for r in recs:
        if r["key"] in args.get("skip", []):
            continue
        if r["key"] == "run_stop" and args.get("no_run_stop"):
            continue
        gate = args.get("gate")
        while gate and r["key"] == args.get("gate_at", "run_stop") and not os.path.exists(gate):
            time.sleep(0.02)
        meta = {k: v for k, v in r["metadata"].items() if k not in ("file", "lineno")}
        field = args.get("strip", {}).get(r["key"])
        if field and r["key"] not in stripped:
            stripped.add(r["key"])
            meta.pop(field, None)
        emit[r["event_type"]](key=r["key"], value=r["value"], metadata=meta, time_ms=r["time_ms"])
        if args.get("noise"):
            for s in streams:
                s.write("step done, loss falling\n")
        time.sleep(args.get("pause", 0.01))

time.sleep(args.get("start_after", 0))
if "relaunch_after" in args:
    run(records[:args["relaunch_after"]])
    time.sleep(0.6)
    open(out, "w").close()  # the relaunch opens the file with O_TRUNC
    time.sleep(0.6)
    run(records)
elif "replace_after" in args:
    # The relaunch writes a new file and moves it over the old one (`mv new.log out`), then
    # goes on writing to it.
    run(records[:args["replace_after"]])
    time.sleep(0.6)
    streams[0].f = open(out + ".new", "w")
    run(records[:3])
    os.replace(out + ".new", out)
    time.sleep(0.3)
    run(records[3:])
else:
    run(records)
"#;

struct Dir {
    tmp: tempfile::TempDir,
}

impl Dir {
    /// A folder with the writer script and a closed llama2_70b_lora dry run (6.1.0) as its
    /// source of records.
    fn new() -> Dir {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::write(tmp.path().join("writer.py"), WRITER).expect("write writer.py");
        let (code, _, err) = common::mllog([
            "dry-run",
            "--benchmark",
            "llama2_70b_lora",
            "--division",
            "closed",
            "--ruleset",
            "6.1.0",
            "--out",
            tmp.path().join("dry.txt").to_str().expect("utf-8 path"),
        ]);
        assert_eq!(code, 0, "dry run: {err}");
        Dir { tmp }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// Starts the writer with `options` (the source is added).
    fn writer(&self, mut options: serde_json::Value, stdout: Stdio) -> Child {
        options["source"] = self.path("dry.txt").to_str().expect("utf-8").into();
        Command::new(common::python())
            .arg(self.path("writer.py"))
            .arg(options.to_string())
            .stdout(stdout)
            .spawn()
            .expect("start the Python writer")
    }
}

/// `mllog watch ARGS`, colour off, stdout and stderr piped.
fn watch(args: &[&str], stdin: Stdio) -> Child {
    Command::new(env!("CARGO_BIN_EXE_mllog"))
        .arg("watch")
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mllog watch")
}

/// The watcher's stderr, line by line, on a channel (and kept whole).
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let err = child.stderr.take().expect("piped stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits for the first stderr line that `pred` accepts; every line seen is added to `seen`.
fn wait_for(
    rx: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    pred: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if pred(&line) {
                    return line;
                }
            }
            Err(_) => panic!(
                "no such line on the watcher's stderr; it said:\n{}",
                seen.join("\n")
            ),
        }
    }
}

/// Waits for the watcher to exit: (code, stdout, the rest of stderr).
fn finish(
    mut child: Child,
    rx: mpsc::Receiver<String>,
    mut seen: Vec<String>,
) -> (i32, String, String) {
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().expect("piped stdout"), &mut out)
        .expect("read stdout");
    let status = child.wait().expect("wait for mllog watch");
    seen.extend(rx.iter());
    (
        status
            .code()
            .expect("mllog watch exits, never dies of a signal"),
        out,
        seen.join("\n"),
    )
}

/// `mllog check FILE` on the finished file: (code, stdout).
fn check(file: &Path) -> (i32, String) {
    let (code, out, _) = common::mllog([std::ffi::OsStr::new("check"), file.as_os_str()]);
    (code, out)
}

fn records_in(file: &Path) -> usize {
    std::fs::read_to_string(file)
        .expect("read the log")
        .matches(":::MLLOG ")
        .count()
}

fn watch_args(file: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![
        file.to_str().expect("utf-8").into(),
        "--quiet-period".into(),
        "1".into(),
        "--timeout".into(),
        "120".into(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn follows_a_relaunched_run_to_the_verdict_of_check_and_the_official_checker() {
    let d = Dir::new();
    let log = d.path("result_0.txt");
    // The watcher starts first: the file does not exist yet.
    let args = watch_args(&log, &["--werror"]);
    let mut w = watch(&strs(&args), Stdio::null());
    let rx = stderr_lines(&mut w);
    let mut writer = d.writer(
        serde_json::json!({"out": log, "relaunch_after": 12, "start_after": 0.5}),
        Stdio::null(),
    );
    let mut seen = Vec::new();
    wait_for(&rx, &mut seen, |l| l.contains("waiting for"));
    wait_for(&rx, &mut seen, |l| {
        l.contains("truncated") && l.contains("starting over")
    });
    assert!(writer.wait().expect("writer").success());
    let (code, out, err) = finish(w, rx, seen);
    let (check_code, check_out) = check(&log);
    assert_eq!(out, check_out, "watch and check differ; watch said:\n{err}");
    assert_eq!(code, check_code);
    assert_eq!(code, 0, "{out}\n{err}");
    let (official, text) = common::official_check(&log, "6.1.0", true);
    assert!(official, "{text}");
    assert!(
        err.contains("ended (run_stop and the quiet period)"),
        "{err}"
    );
    assert!(
        out.contains(&format!("{} records", records_in(&log))),
        "{out}"
    );
}

#[test]
fn the_set_up_verdict_names_a_missing_hyperparameter_before_run_stop_is_written() {
    let d = Dir::new();
    let log = d.path("result_0.txt");
    let gate = d.path("gate");
    let mut writer = d.writer(
        serde_json::json!({"out": log, "skip": ["lora_rank"], "gate": gate}),
        Stdio::null(),
    );
    let args = watch_args(&log, &[]);
    let mut w = watch(&strs(&args), Stdio::null());
    let rx = stderr_lines(&mut w);
    let mut seen = Vec::new();
    wait_for(&rx, &mut seen, |l| l.contains("set-up at run_start"));
    let named = wait_for(&rx, &mut seen, |l| l.contains("lora_rank"));
    // The writer is held before run_stop until the gate exists.
    let written = std::fs::read_to_string(&log).expect("read the log");
    assert!(
        !written.contains("\"run_stop\""),
        "run_stop already written"
    );
    assert!(named.starts_with("error:"), "{named}");
    std::fs::write(&gate, "").expect("open the gate");
    assert!(writer.wait().expect("writer").success());
    let (code, out, err) = finish(w, rx, seen);
    let (check_code, check_out) = check(&log);
    assert_eq!(out, check_out, "{err}");
    assert_eq!((code, check_code), (1, 1), "{out}\n{err}");
    let (official, text) = common::official_check(&log, "6.1.0", true);
    assert!(
        !official,
        "the official checker passes a log without lora_rank: {text}"
    );
    assert!(err.contains("run_stop at line"), "{err}");
}

#[test]
fn fail_fast_exits_at_the_first_error_before_the_run_ends() {
    let d = Dir::new();
    let log = d.path("result_0.txt");
    let gate = d.path("gate");
    let mut writer = d.writer(
        serde_json::json!({"out": log, "skip": ["lora_rank"], "gate": gate}),
        Stdio::null(),
    );
    let args = watch_args(&log, &["--fail-fast"]);
    let w = watch(&strs(&args), Stdio::null());
    let started = Instant::now();
    let out = w.wait_with_output().expect("watch");
    // It ended without the gate: run_stop was never written.
    assert!(!gate.exists());
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ended (--fail-fast: an error)"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("lora_rank"));
    writer.kill().expect("stop the writer");
    let _ = writer.wait();
}

/// The 1-based number of the first line of `file` that holds `needle`.
fn line_of(file: &Path, needle: &str) -> usize {
    std::fs::read_to_string(file)
        .expect("read the log")
        .lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("no line holds {needle}"))
}

#[test]
fn a_problem_during_the_run_is_said_with_its_line_while_the_writer_waits() {
    let d = Dir::new();
    let log = d.path("result_0.txt");
    let gate = d.path("gate");
    // The first eval_accuracy lacks samples_count, which the closed llama2_70b_lora rules
    // need; the writer then waits before that evaluation's eval_stop.
    let mut writer = d.writer(
        serde_json::json!({"out": log, "strip": {"eval_accuracy": "samples_count"},
                           "gate": gate, "gate_at": "eval_stop"}),
        Stdio::null(),
    );
    let args = watch_args(&log, &[]);
    let mut w = watch(&strs(&args), Stdio::null());
    let rx = stderr_lines(&mut w);
    let mut seen = Vec::new();
    let setup = wait_for(&rx, &mut seen, |l| l.contains("set-up at run_start"));
    assert!(setup.ends_with("nothing missing or wrong before the clock starts"));
    let said = wait_for(&rx, &mut seen, |l| l.contains("eval_accuracy"));
    let at = wait_for(&rx, &mut seen, |l| l.trim_start().starts_with("-->"));
    // Said while the writer is held: nothing after the faulty record is written yet.
    let written = std::fs::read_to_string(&log).expect("read the log");
    assert!(
        !written.contains("\"eval_stop\""),
        "eval_stop already written"
    );
    assert!(!gate.exists());
    assert_eq!(
        said,
        "mllog watch: error: `eval_accuracy` needs metadata `samples_count` in the closed \
         division (llama2_70b_lora)"
    );
    let line = line_of(&log, "\"eval_accuracy\"");
    assert!(
        at.ends_with(&format!("result_0.txt:{line}")),
        "the problem is named by its line ({line}): {at}"
    );
    std::fs::write(&gate, "").expect("open the gate");
    assert!(writer.wait().expect("writer").success());
    let (code, out, err) = finish(w, rx, seen);
    // Said once, not again at each later look.
    assert_eq!(
        err.matches("needs metadata `samples_count`").count(),
        1,
        "{err}"
    );
    let (check_code, check_out) = check(&log);
    assert_eq!(out, check_out, "{err}");
    assert_eq!((code, check_code), (1, 1), "{out}\n{err}");
    assert!(out.contains(&format!("result_0.txt:{line}:")), "{out}");
    let (official, text) = common::official_check(&log, "6.1.0", true);
    assert!(!official, "the official checker passes it: {text}");
}

#[test]
fn a_file_replaced_by_a_new_one_is_followed_as_a_relaunch() {
    let d = Dir::new();
    let log = d.path("result_0.txt");
    let args = watch_args(&log, &[]);
    let mut w = watch(&strs(&args), Stdio::null());
    let rx = stderr_lines(&mut w);
    let mut writer = d.writer(
        serde_json::json!({"out": log, "replace_after": 30}),
        Stdio::null(),
    );
    let mut seen = Vec::new();
    // The first run reached the clock before it was replaced.
    wait_for(&rx, &mut seen, |l| l.contains("set-up at run_start"));
    let inode =
        |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).expect("stat"));
    let first = inode(&log);
    wait_for(&rx, &mut seen, |l| {
        l.contains("result_0.txt was replaced by a new file: a new run; starting over")
    });
    assert_ne!(inode(&log), first, "the path names another file");
    assert!(writer.wait().expect("writer").success());
    let (code, out, err) = finish(w, rx, seen);
    let (check_code, check_out) = check(&log);
    assert_eq!(out, check_out, "{err}");
    assert_eq!((code, check_code), (0, 0), "{out}\n{err}");
    // The verdict is the new file's alone: its records, counted once.
    let records = records_in(&log);
    assert_eq!(records, records_in(&d.path("dry.txt")));
    assert!(out.contains(&format!("{records} records")), "{out}");
    assert!(err.contains("1 restart of the file"), "{err}");
    assert_eq!(err.matches("set-up at run_start").count(), 2, "{err}");
    let (official, text) = common::official_check(&log, "6.1.0", true);
    assert!(official, "{text}");
}

#[test]
fn sigterm_mid_run_reports_everything_written_so_far() {
    let d = Dir::new();
    let log = d.path("result_0.txt");
    let gate = d.path("gate-never");
    let mut writer = d.writer(serde_json::json!({"out": log, "gate": gate}), Stdio::null());
    let args = watch_args(&log, &[]);
    let mut w = watch(&strs(&args), Stdio::null());
    let rx = stderr_lines(&mut w);
    let mut seen = Vec::new();
    wait_for(&rx, &mut seen, |l| l.contains("set-up at run_start"));
    // Let the writer reach its gate (everything but run_stop written), then stop the watch.
    let deadline = Instant::now() + Duration::from_secs(60);
    let before = records_in(&d.path("dry.txt")) - 1;
    while records_in(&log) < before {
        assert!(
            Instant::now() < deadline,
            "the writer did not reach run_stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling a child this test started.
    assert_eq!(unsafe { libc::kill(w.id() as i32, libc::SIGTERM) }, 0);
    let (code, out, err) = finish(w, rx, seen);
    writer.kill().expect("stop the writer");
    let _ = writer.wait();
    assert!(err.contains("ended (a signal"), "{err}");
    assert!(err.contains(&format!("{before} records")), "{err}");
    let (check_code, check_out) = check(&log);
    assert_eq!(out, check_out, "{err}");
    assert_eq!((code, check_code), (1, 1));
}

#[test]
fn standard_input_with_rank_prefixes_and_crlf_and_a_local_copy() {
    let d = Dir::new();
    let copy = d.path("copy.txt");
    let written = d.path("written.txt");
    let mut writer = d.writer(
        serde_json::json!({"prefix": "0: ", "eol": "\r\n", "noise": true, "copy": written}),
        Stdio::piped(),
    );
    let stdout = writer.stdout.take().expect("writer stdout");
    let args = [
        "-",
        "--output",
        copy.to_str().expect("utf-8"),
        "--quiet-period",
        "30",
    ];
    let w = watch(&args, Stdio::from(stdout));
    let out = w.wait_with_output().expect("watch");
    assert!(writer.wait().expect("writer").success());
    let err = String::from_utf8_lossy(&out.stderr);
    // End of input ends it, not the (long) quiet period.
    assert!(err.contains("ended (end of input)"), "{err}");
    let copied = std::fs::read(&copy).expect("copy");
    assert_eq!(copied, std::fs::read(&written).expect("written"));
    let text = String::from_utf8_lossy(&copied);
    assert!(
        text.contains("0: :::MLLOG") && text.contains("\r\n"),
        "{text}"
    );
    let check = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(["check", "-"])
        .env("NO_COLOR", "1")
        .stdin(std::fs::File::open(&copy).expect("copy"))
        .output()
        .expect("mllog check -");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&check.stdout)
    );
    assert_eq!(out.status.code(), check.status.code());
    assert_eq!(out.status.code(), Some(0), "{err}");
    let (official, text) = common::official_check(&copy, "6.1.0", true);
    assert!(official, "{text}");
}

/// A job piped into the watcher goes on printing after `run_stop` (saving a checkpoint, say),
/// longer than the quiet period: standard input is read to its end, so the job never writes
/// into a closed pipe (a shell's `echo` would die of SIGPIPE), and the copy holds every line.
#[test]
fn standard_input_is_read_to_its_end_after_run_stop() {
    let d = Dir::new();
    let log = dry_log(&d);
    let copy = d.path("copy.txt");
    let mut job = job(
        "cat \"$1\"; sleep 1.5; echo 'saving a checkpoint'; echo 'job done'",
        &log,
    );
    let stdout = job.stdout.take().expect("job stdout");
    let args = [
        "-",
        "--output",
        copy.to_str().expect("utf-8"),
        "--quiet-period",
        "0.2",
    ];
    let out = watch(&args, Stdio::from(stdout))
        .wait_with_output()
        .expect("watch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        job.wait().expect("job").success(),
        "the job met a closed pipe: {err}"
    );
    assert!(err.contains("ended (end of input)"), "{err}");
    let copied = std::fs::read_to_string(&copy).expect("copy");
    assert!(
        copied.ends_with("saving a checkpoint\njob done\n"),
        "{copied}"
    );
    assert_eq!(out.status.code(), Some(0), "{err}");
}

#[test]
fn lines_in_pieces_with_launcher_prefixes_crlf_and_noise_in_a_file() {
    let d = Dir::new();
    let log = d.path("result_0.txt");
    let mut writer = d.writer(
        serde_json::json!({"out": log, "prefix": "[1,0]<stdout>:", "eol": "\r\n",
                           "pieces": true, "noise": true, "pause": 0.0}),
        Stdio::null(),
    );
    let args = watch_args(&log, &["--poll-ms", "20"]);
    let w = watch(&strs(&args), Stdio::null());
    let out = w.wait_with_output().expect("watch");
    assert!(writer.wait().expect("writer").success());
    let err = String::from_utf8_lossy(&out.stderr);
    let (check_code, check_out) = check(&log);
    assert_eq!(String::from_utf8_lossy(&out.stdout), check_out, "{err}");
    assert_eq!(out.status.code(), Some(check_code));
    assert_eq!(check_code, 0, "{check_out}");
    // No line was read half-written: every record counted, none malformed.
    assert!(
        err.contains(&format!("{} records", records_in(&log))),
        "{err}"
    );
    assert!(!err.contains("malformed"), "{err}");
}

#[test]
fn a_writer_that_exits_ends_the_watch() {
    let d = Dir::new();
    let log = d.path("result_0.txt");
    let mut writer = d.writer(
        serde_json::json!({"out": log, "no_run_stop": true}),
        Stdio::null(),
    );
    let pid = writer.id().to_string();
    // Reap the writer when it exits, as a shell does.
    let reaper = std::thread::spawn(move || writer.wait().expect("writer").success());
    let args = [
        log.to_str().expect("utf-8"),
        "--pid",
        pid.as_str(),
        "--timeout",
        "120",
    ];
    let started = Instant::now();
    let out = watch(&args, Stdio::null())
        .wait_with_output()
        .expect("watch");
    assert!(reaper.join().expect("reaper"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ended (the writer exited)"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(1), "no run_stop: not compliant");
    let (_, check_out) = check(&log);
    assert_eq!(String::from_utf8_lossy(&out.stdout), check_out);
}

#[test]
fn the_upload_keeps_a_byte_identical_copy_of_a_relaunched_log() {
    let d = Dir::new();
    let log = d.path("result_0.txt");
    let remote = d.path("remote");
    std::fs::create_dir_all(&remote).expect("remote dir");
    let url = format!("file://{}/", remote.display());
    let mut writer = d.writer(
        serde_json::json!({"out": log, "relaunch_after": 8, "noise": true}),
        Stdio::null(),
    );
    let args = watch_args(&log, &["--upload", &url]);
    let out = watch(&strs(&args), Stdio::null())
        .wait_with_output()
        .expect("watch");
    assert!(writer.wait().expect("writer").success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let uploaded = std::fs::read(remote.join("result_0.txt")).expect("the uploaded copy");
    assert_eq!(uploaded, std::fs::read(&log).expect("the log"), "{err}");
    // The report of the pipeline names the uploader and what it was given.
    assert!(err.contains("object-store-upload"), "{err}");
    assert!(
        err.contains(&format!("{} records", records_in(&log))),
        "{err}"
    );
}

#[test]
fn the_upload_of_standard_input_is_the_local_copy() {
    let d = Dir::new();
    let copy = d.path("copy.txt");
    let remote = d.path("remote");
    std::fs::create_dir_all(&remote).expect("remote dir");
    let url = format!("file://{}/", remote.display());
    let mut writer = d.writer(
        serde_json::json!({"prefix": "[0,0]<stdout>:"}),
        Stdio::piped(),
    );
    let stdout = writer.stdout.take().expect("writer stdout");
    let args = [
        "-",
        "--output",
        copy.to_str().expect("utf-8"),
        "--upload",
        &url,
    ];
    let out = watch(&args, Stdio::from(stdout))
        .wait_with_output()
        .expect("watch");
    assert!(writer.wait().expect("writer").success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let uploaded = std::fs::read(remote.join("copy.txt")).expect("the uploaded copy");
    assert_eq!(uploaded, std::fs::read(&copy).expect("the copy"), "{err}");
    assert!(!uploaded.is_empty());
}

#[test]
fn upload_of_standard_input_without_a_local_copy_is_a_usage_error() {
    let out = watch(&["-", "--upload", "file:///tmp/nowhere/"], Stdio::null())
        .wait_with_output()
        .expect("watch");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--output"));
}

/// The watcher's peak resident memory, in KiB (`VmHWM`).
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[test]
fn a_line_of_100_mb_keeps_memory_bounded_and_the_verdict_is_checks() {
    use std::io::Write as _;
    let d = Dir::new();
    let log = d.path("result_0.txt");
    let dry = std::fs::read_to_string(d.path("dry.txt")).expect("dry run");
    let lines: Vec<&str> = dry.lines().collect();
    let mut f = std::fs::File::create(&log).expect("create");
    for l in &lines[..30] {
        writeln!(f, "{l}").expect("write");
    }
    let mut w = watch(
        &[log.to_str().expect("utf-8"), "--timeout", "120"],
        Stdio::null(),
    );
    let rx = stderr_lines(&mut w);
    let mut seen = Vec::new();
    wait_for(&rx, &mut seen, |l| l.contains("set-up at run_start"));
    // 100 MB without a line end, written in pieces, then the rest of the run.
    let chunk = vec![b'x'; 1 << 20];
    write!(f, ":::MLLOG ").expect("write");
    for _ in 0..100 {
        f.write_all(&chunk).expect("write");
    }
    writeln!(f).expect("write");
    for l in &lines[30..] {
        writeln!(f, "{l}").expect("write");
    }
    drop(f);
    std::thread::sleep(Duration::from_secs(3));
    let peak = peak_kib(w.id());
    eprintln!("peak RSS of the watcher: {peak} KiB");
    // SAFETY: signalling a child this test started.
    assert_eq!(unsafe { libc::kill(w.id() as i32, libc::SIGTERM) }, 0);
    let (code, out, err) = finish(w, rx, seen);
    assert!(
        peak < 80 * 1024,
        "peak RSS {peak} KiB while following a 100 MB line"
    );
    let (check_code, check_out) = check(&log);
    assert_eq!(out, check_out, "{err}");
    assert_eq!((code, check_code), (1, 1));
    assert!(out.contains("longer than"), "{out}");
    assert!(
        err.contains(":31"),
        "the overlong line is named by its number: {err}"
    );
}

/// moto's S3 server on a free loopback port, killed (by its PID) and reaped on drop.
struct Moto {
    child: Child,
    port: u16,
    python: PathBuf,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// Needs moto in the interpreter of `MLLOG_MOTO_PYTHON` (`scripts/deps/object-store.sh`
    /// installs it into the checker venv), else `MLLOG_PYTHON`'s.
    fn start(dir: &Path) -> Moto {
        let python = std::env::var_os("MLLOG_MOTO_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| common::python().to_path_buf());
        let port = common::free_port();
        let log = std::fs::File::create(dir.join("moto.log")).expect("moto log");
        let child = Command::new(&python)
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start moto");
        let mut moto = Moto {
            child,
            port,
            python,
        };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!(
                    "moto exited ({status}): {}",
                    std::fs::read_to_string(dir.join("moto.log")).unwrap_or_default()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "moto did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        moto
    }

    /// One plain HTTP/1.1 request: (status, body).
    fn http(&self, method: &str, path: &str) -> (u16, Vec<u8>) {
        use std::io::{Read as _, Write as _};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )
        .expect("request");
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).expect("response");
        let split = resp
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("headers end");
        let head = String::from_utf8_lossy(&resp[..split]).into_owned();
        assert!(!head.to_ascii_lowercase().contains("chunked"), "{head}");
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status");
        (status, resp[split + 4..].to_vec())
    }
}

#[test]
fn the_upload_to_s3_on_moto_is_byte_identical_after_a_relaunch() {
    let d = Dir::new();
    let moto = Moto::start(d.tmp.path());
    let (status, body) = moto.http("PUT", "/mllog-bucket");
    assert_eq!(
        status,
        200,
        "create bucket: {}",
        String::from_utf8_lossy(&body)
    );
    let log = d.path("result_0.txt");
    let mut writer = d.writer(
        serde_json::json!({"out": log, "relaunch_after": 10, "noise": true}),
        Stdio::null(),
    );
    let args = watch_args(&log, &["--upload", "s3://mllog-bucket/runs/1/"]);
    let out = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .arg("watch")
        .args(&args)
        .env("NO_COLOR", "1")
        .env("AWS_ENDPOINT", format!("http://127.0.0.1:{}", moto.port))
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false")
        .output()
        .expect("watch");
    assert!(writer.wait().expect("writer").success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // Read back with boto3 (moto's own dependency), signed as a client does.
    let fetched = d.path("fetched.txt");
    let get = Command::new(moto.python.as_path())
        .args([
            "-c",
            "import boto3, sys\n\
             s3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id='test', \
             aws_secret_access_key='test', region_name='us-east-1')\n\
             open(sys.argv[2], 'wb').write(s3.get_object(Bucket='mllog-bucket', \
             Key='runs/1/result_0.txt')['Body'].read())",
            &format!("http://127.0.0.1:{}", moto.port),
            fetched.to_str().expect("utf-8"),
        ])
        .output()
        .expect("boto3");
    assert!(
        get.status.success(),
        "{}",
        String::from_utf8_lossy(&get.stderr)
    );
    let remote = std::fs::read(&fetched).expect("fetched");
    assert_eq!(remote, std::fs::read(&log).expect("the log"), "{err}");
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn a_run_of_another_benchmark_than_asked_fails() {
    let d = Dir::new();
    let mut writer = d.writer(serde_json::json!({"pause": 0.0}), Stdio::piped());
    let stdout = writer.stdout.take().expect("writer stdout");
    let out = watch(&["-", "--benchmark", "llama31_8b"], Stdio::from(stdout))
        .wait_with_output()
        .expect("watch");
    assert!(writer.wait().expect("writer").success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not a llama31_8b run (its submission_benchmark: llama2_70b_lora)"),
        "{err}"
    );
    // The verdict itself is the log's, which passes.
    assert!(String::from_utf8_lossy(&out.stdout).contains(": COMPLIANT"));
}

/// A rotel collector (`MLLOG_ROTEL_BIN`, installed by `scripts/deps/otel.sh`) on free loopback
/// ports, printing every span and metric it receives to a file; killed by its PID on drop.
#[cfg(feature = "otel")]
struct Rotel {
    child: Child,
    out: PathBuf,
    http: u16,
}

#[cfg(feature = "otel")]
impl Drop for Rotel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One span as rotel prints it.
#[cfg(feature = "otel")]
#[derive(Debug, Default)]
struct RSpan {
    name: String,
    trace: String,
    id: String,
    parent: String,
    start: String,
    attrs: Vec<(String, String)>,
    events: Vec<String>,
}

#[cfg(feature = "otel")]
impl RSpan {
    fn attr(&self, k: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
}

/// What rotel printed: the spans, and each metric data point's (metric name, value).
#[cfg(feature = "otel")]
#[derive(Debug, Default)]
struct Received {
    spans: Vec<RSpan>,
    points: Vec<(String, String)>,
}

#[cfg(feature = "otel")]
impl Rotel {
    fn start(dir: &Path) -> Rotel {
        let bin = std::env::var_os("MLLOG_ROTEL_BIN")
            .map(PathBuf::from)
            .expect("MLLOG_ROTEL_BIN names the rotel collector (`. scripts/deps/otel.sh`)");
        let (grpc, http) = (common::free_port(), common::free_port());
        let out = dir.join("rotel.out");
        let file = std::fs::File::create(&out).expect("rotel output");
        let mut child = Command::new(&bin)
            .arg("start")
            .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc}")])
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http}")])
            .args(["--exporter", "blackhole"])
            .args(["--debug-log", "traces", "--debug-log", "metrics"])
            .args(["--debug-log-verbosity", "detailed"])
            .arg("--pid-file")
            .arg(dir.join("rotel.pid"))
            .arg("--log-file")
            .arg(dir.join("rotel.log"))
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("rotel output"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let until = Instant::now() + Duration::from_secs(20);
        for port in [grpc, http] {
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "rotel exited ({status}): {}",
                        std::fs::read_to_string(&out).unwrap_or_default()
                    );
                }
                assert!(Instant::now() < until, "rotel did not listen on {port}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Rotel { child, out, http }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits (30 s at most) until what rotel printed satisfies `done`.
    fn wait_for(&self, what: &str, done: impl Fn(&Received) -> bool) -> Received {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let got = parse_rotel(&self.output());
            if done(&got) {
                return got;
            }
            assert!(
                Instant::now() < until,
                "rotel did not receive {what}; it printed:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Reads rotel's detailed debug output: `Span #` blocks (their fields, `Attributes:` and the
/// names of their `SpanEvent #`s) and `Metric #` blocks (the name, each data point's `Value:`).
#[cfg(feature = "otel")]
fn parse_rotel(text: &str) -> Received {
    #[derive(PartialEq)]
    enum At {
        Span,
        Attrs,
        Event,
        Metric,
        Other,
    }
    fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
        let rest = line.strip_prefix(name)?.trim_start().strip_prefix(':')?;
        Some(rest.trim())
    }
    let mut got = Received::default();
    let mut at = At::Other;
    let mut metric = String::new();
    for line in text.lines() {
        let t = line.trim();
        let arrow = t
            .strip_prefix("-> ")
            .and_then(|kv| {
                kv.split_once(": ")
                    .or_else(|| kv.strip_suffix(':').map(|k| (k, "")))
            })
            .map(|(k, v)| (k.trim(), v.trim()));
        if t.starts_with("Span #") {
            got.spans.push(RSpan::default());
            at = At::Span;
        } else if t.starts_with("Metric #") {
            metric.clear();
            at = At::Metric;
        } else if t.starts_with("ResourceSpans #") || t.starts_with("ResourceMetrics #") {
            at = At::Other;
        } else if at == At::Metric {
            match (arrow, t.strip_prefix("Value: ")) {
                (Some(("Name", v)), _) if metric.is_empty() => metric = v.to_owned(),
                (_, Some(v)) => got.points.push((metric.clone(), v.to_owned())),
                _ => {}
            }
        } else if let Some(span) = got.spans.last_mut().filter(|_| at != At::Other) {
            if t == "Attributes:" && at == At::Span {
                at = At::Attrs;
            } else if t == "Events:" {
                at = At::Span;
            } else if t.starts_with("SpanEvent #") {
                at = At::Event;
            } else if at == At::Span {
                for (name, slot) in [
                    ("Trace ID", &mut span.trace),
                    ("Parent ID", &mut span.parent),
                    ("ID", &mut span.id),
                    ("Name", &mut span.name),
                    ("Start time", &mut span.start),
                ] {
                    if let Some(v) = field(t, name) {
                        *slot = v.to_owned();
                    }
                }
            } else if let Some((k, v)) = arrow {
                match at {
                    At::Attrs => span.attrs.push((k.to_owned(), v.to_owned())),
                    At::Event if k == "Name" => span.events.push(v.to_owned()),
                    _ => {}
                }
            }
        }
    }
    got
}

/// `MLLOG_OTEL=1` with a launcher's `TRACEPARENT`: the run the Python writer writes reaches a
/// real collector as spans under the launcher's trace (run, init, block, eval, their parents,
/// the records' own times), its point records as events, and eval_accuracy as a metric.
#[cfg(feature = "otel")]
#[test]
fn otel_exports_the_watched_run_to_a_real_collector_under_the_launchers_trace() {
    const TRACE: &str = "4d4c4c4f470000000000000000077a7c";
    const LAUNCHER_SPAN: &str = "00f067aa0ba902b7";
    let d = Dir::new();
    let rotel = Rotel::start(d.tmp.path());
    let log = d.path("result_0.txt");
    let mut writer = d.writer(
        serde_json::json!({"out": log, "start_after": 0.3}),
        Stdio::null(),
    );
    let args = watch_args(&log, &[]);
    let out = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .arg("watch")
        .args(&args)
        .env("NO_COLOR", "1")
        .env("MLLOG_OTEL", "1")
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{}", rotel.http),
        )
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .env("TRACEPARENT", format!("00-{TRACE}-{LAUNCHER_SPAN}-01"))
        .env_remove("MLLOG_UPLOAD_URL")
        .env_remove("MLLOG_RPD_FILE")
        .output()
        .expect("watch");
    assert!(writer.wait().expect("writer").success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let records = records_in(&log);
    assert!(
        err.contains(&format!("otel: {records} written")),
        "every record reached the OTel sink: {err}"
    );

    // What the log holds, as the collector must show it.
    let text = std::fs::read_to_string(&log).expect("the log");
    let parsed: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| l.split_once(":::MLLOG ").map(|(_, j)| j))
        .map(|j| serde_json::from_str(j).expect("a JSON record"))
        .collect();
    let count = |key: &str| parsed.iter().filter(|r| r["key"] == key).count();
    let (blocks, evals) = (count("block_start"), count("eval_start"));
    assert!(blocks >= 3 && evals >= 3, "{blocks} blocks, {evals} evals");
    let mut accuracies: Vec<f64> = parsed
        .iter()
        .filter(|r| r["key"] == "eval_accuracy")
        .map(|r| r["value"].as_f64().expect("a number"))
        .collect();
    let run_start_ms = parsed
        .iter()
        .find(|r| r["key"] == "run_start")
        .and_then(|r| r["time_ms"].as_u64())
        .expect("run_start's time_ms");

    let got = rotel.wait_for("the run's spans and eval_accuracy", |g| {
        g.spans.iter().any(|s| s.name == "run")
            && g.points.iter().any(|(m, _)| m == "mllog.eval_accuracy")
    });
    let named = |n: &str| -> Vec<&RSpan> { got.spans.iter().filter(|s| s.name == n).collect() };
    assert!(
        got.spans.iter().all(|s| s.trace == TRACE),
        "every span is in the launcher's trace: {:#?}",
        got.spans
    );
    let run = named("run");
    assert_eq!(run.len(), 1, "{:#?}", got.spans);
    let run = run[0];
    assert_eq!(
        run.parent, LAUNCHER_SPAN,
        "the run hangs on the launcher's span"
    );
    assert_eq!(run.attr("mllog.status"), Some("Str(success)"), "{run:?}");
    assert_eq!(
        run.start,
        (u128::from(run_start_ms) * 1_000_000).to_string(),
        "the span starts at run_start's own time_ms"
    );
    let init = named("init");
    assert_eq!(init.len(), 1);
    assert_eq!(init[0].parent, LAUNCHER_SPAN);
    for key in ["submission_benchmark", "lora_rank", "global_batch_size"] {
        assert!(
            init[0].events.iter().any(|e| e == key),
            "init carries the {key} event: {:?}",
            init[0]
        );
    }
    assert_eq!(named("block").len(), blocks);
    assert_eq!(named("eval").len(), evals);
    for s in named("block").into_iter().chain(named("eval")) {
        assert_eq!(s.parent, run.id, "{} is a child of run: {s:?}", s.name);
    }
    assert!(
        named("eval")
            .iter()
            .all(|e| e.events.iter().any(|n| n == "eval_accuracy")),
        "each eval carries its eval_accuracy: {:#?}",
        named("eval")
    );
    let mut exported: Vec<f64> = got
        .points
        .iter()
        .filter(|(m, _)| m == "mllog.eval_accuracy")
        .map(|(_, v)| v.parse().expect("a number"))
        .collect();
    exported.sort_by(f64::total_cmp);
    accuracies.sort_by(f64::total_cmp);
    assert_eq!(
        exported, accuracies,
        "one eval_accuracy point per evaluation"
    );
}

/// `MLLOG_RPD_FILE`: the watched run in a ROCm RPD file (SQLite), every interval one
/// `UserMarker` range from its start record's `time_ms` to its stop's, every point record a
/// mark, all with the watcher's pid.
#[cfg(feature = "rpd")]
#[test]
fn rpd_file_holds_the_watched_runs_intervals_as_user_marker_ranges() {
    let d = Dir::new();
    let log = d.path("result_0.txt");
    let rpd = d.path("trace.rpd");
    let mut writer = d.writer(serde_json::json!({"out": log}), Stdio::null());
    let args = watch_args(&log, &[]);
    let w = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .arg("watch")
        .args(&args)
        .env("NO_COLOR", "1")
        .env("MLLOG_RPD_FILE", &rpd)
        .env_remove("MLLOG_OTEL")
        .env_remove("MLLOG_UPLOAD_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("watch");
    let pid = i64::from(w.id());
    let out = w.wait_with_output().expect("watch");
    assert!(writer.wait().expect("writer").success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let records = records_in(&log);
    assert!(err.contains(&format!("rpd: {records} written")), "{err}");

    // The log's intervals (paired by name, innermost first) and points, in ns.
    let text = std::fs::read_to_string(&log).expect("the log");
    let mut open: std::collections::HashMap<String, Vec<i64>> = Default::default();
    let mut ranges = Vec::new();
    let mut marks = 0;
    for line in text.lines() {
        let Some((_, json)) = line.split_once(":::MLLOG ") else {
            continue;
        };
        let r: serde_json::Value = serde_json::from_str(json).expect("a JSON record");
        let key = r["key"].as_str().expect("key");
        let ns = r["time_ms"].as_i64().expect("time_ms") * 1_000_000;
        match r["event_type"].as_str().expect("event_type") {
            "INTERVAL_START" => open
                .entry(key.trim_end_matches("_start").to_owned())
                .or_default()
                .push(ns),
            "INTERVAL_END" => {
                let name = key.trim_end_matches("_stop").to_owned();
                let start = open.get_mut(&name).and_then(Vec::pop).expect("started");
                ranges.push((name, start, ns));
            }
            _ => marks += 1,
        }
    }
    ranges.sort();
    assert!(ranges.iter().filter(|r| r.0 == "eval").count() >= 3);

    let conn = rusqlite::Connection::open(&rpd).expect("open the RPD file");
    let mut st = conn
        .prepare(
            "SELECT A.pid, A.start, A.\"end\", S.string, U.string FROM rocpd_api A \
             JOIN rocpd_string S ON S.id = A.apiName_id \
             JOIN rocpd_ustring U ON U.id = A.args_id ORDER BY A.id",
        )
        .expect("rocpd_api with its strings (schema v3)");
    let rows: Vec<(i64, i64, i64, String, String)> = st
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    assert!(
        rows.iter().all(|r| r.0 == pid && r.3 == "UserMarker"),
        "{rows:?}"
    );
    let mut got: Vec<(String, i64, i64)> = rows
        .iter()
        .map(|(_, start, end, _, label)| {
            let name = label.split([' ', '=']).next().unwrap_or_default();
            (name.to_owned(), *start, *end)
        })
        .filter(|(name, _, _)| ["init", "run", "block", "eval"].contains(&name.as_str()))
        .collect();
    got.sort();
    assert_eq!(
        got, ranges,
        "one range per interval, at the records' own times"
    );
    assert_eq!(rows.len(), ranges.len() + marks, "and one mark per point");
    let run = rows
        .iter()
        .find(|r| r.4.starts_with("run "))
        .expect("the run's range");
    assert!(run.4.contains("status=success"), "{run:?}");
    assert!(
        rows.iter()
            .filter(|r| r.4.starts_with("eval_accuracy="))
            .all(|r| r.1 == r.2),
        "eval_accuracy is a mark"
    );
}

/// About 1 GB of valid MLLOG lines (a closed llama2_70b_lora run whose first block holds
/// about 5.7 million `train_loss` records) streamed into `mllog watch -` by a thread of this test,
/// never written to disk: the watcher's peak resident memory, from `wait4`'s rusage, stays
/// under 64 MiB (the stream is checked, not held), and its verdict counts every record. In the
/// debug build this takes about 45 s on two cores.
#[test]
fn a_1_gb_stream_keeps_memory_bounded_and_every_record_is_checked() {
    use std::io::{Read as _, Write as _};
    const TOTAL: usize = 1 << 30;
    let d = Dir::new();
    let dry = std::fs::read_to_string(d.path("dry.txt")).expect("dry run");
    let lines: Vec<&str> = dry.lines().collect();
    let first_block = lines
        .iter()
        .position(|l| l.contains("\"block_start\""))
        .expect("a block")
        + 1;
    let head = lines[..first_block].join("\n") + "\n";
    let tail = lines[first_block..].join("\n") + "\n";
    let time_ms = lines[first_block - 1]
        .split("\"time_ms\": ")
        .nth(1)
        .and_then(|t| t.split(',').next())
        .expect("block_start's time_ms")
        .to_owned();
    // One MiB or so of records, sent again and again.
    let mut chunk = String::new();
    let mut per_chunk = 0;
    while chunk.len() < (1 << 20) {
        chunk.push_str(&format!(
            ":::MLLOG {{\"namespace\": \"\", \"time_ms\": {time_ms}, \"event_type\": \
             \"POINT_IN_TIME\", \"key\": \"train_loss\", \"value\": {}.{per_chunk:04}, \
             \"metadata\": {{\"file\": \"train.py\", \"lineno\": {}, \"step_num\": {per_chunk}}}}}\n",
            per_chunk % 7,
            100 + per_chunk % 50
        ));
        per_chunk += 1;
    }
    let chunks = TOTAL / chunk.len();
    let streamed = head.len() + chunks * chunk.len() + tail.len();
    let records = lines.len() + chunks * per_chunk;

    // Reaped by wait4 below, which also gives its rusage.
    #[allow(clippy::zombie_processes)]
    let mut w = watch(&["-", "--timeout", "600"], Stdio::piped());
    let pid = w.id() as i32;
    let mut stdin = w.stdin.take().expect("piped stdin");
    let feeder = std::thread::spawn(move || {
        stdin.write_all(head.as_bytes())?;
        for _ in 0..chunks {
            stdin.write_all(chunk.as_bytes())?;
        }
        stdin.write_all(tail.as_bytes())
    });
    let mut stdout = w.stdout.take().expect("piped stdout");
    let mut stderr = w.stderr.take().expect("piped stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).map(|_| s)
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        stderr.read_to_string(&mut s).map(|_| s)
    });
    let started = Instant::now();
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value to be written over; waiting for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    let elapsed = started.elapsed();
    feeder
        .join()
        .expect("feeder")
        .expect("the watcher read the whole stream");
    let out = out.join().expect("stdout").expect("stdout");
    let err = err.join().expect("stderr").expect("stderr");
    let peak_kib = usage.ru_maxrss;
    eprintln!(
        "{streamed} bytes, {records} records in {elapsed:?}; peak RSS of the watcher: {peak_kib} KiB"
    );
    assert!(streamed >= 1_000_000_000, "{streamed} bytes");
    assert!(
        libc::WIFEXITED(status),
        "the watcher died: {status:#x}\n{err}"
    );
    assert_eq!(libc::WEXITSTATUS(status), 0, "{out}\n{err}");
    assert!(
        peak_kib < 64 * 1024,
        "peak RSS {peak_kib} KiB while following a 1 GB stream"
    );
    assert!(
        out.contains(&format!(
            ": COMPLIANT (0 errors, 0 warnings) — ruleset 6.1.0, {records} records"
        )),
        "{out}"
    );
    assert!(
        err.contains(&format!("ended (end of input): {records} records")),
        "{err}"
    );
    assert!(!err.contains("malformed"), "{err}");
}

// -------------------------------------------------------------------------------------------
// Mistakes a user makes, and a watcher beside a job that must never break it. The writer here
// is a shell job replaying the log `mllog dry-run` writes: what is tested is the watcher.

/// The dry run's compliant llama2_70b_lora log, in `d`.
fn dry_log(d: &Dir) -> PathBuf {
    let log = d.path("dry.txt");
    let dry = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args([
            "dry-run",
            "--benchmark",
            "llama2_70b_lora",
            "--division",
            "closed",
        ])
        .args(["--ruleset", "6.1.0", "--out"])
        .arg(&log)
        .output()
        .expect("mllog dry-run");
    assert!(dry.status.success(), "{dry:?}");
    log
}

/// A shell job running `script` with `$1` = `arg`, its stdout piped.
fn job(script: &str, arg: &Path) -> Child {
    Command::new("sh")
        .args(["-c", script, "job"])
        .arg(arg)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the job")
}

#[test]
fn a_closed_stderr_ends_neither_the_watch_nor_the_job() {
    let d = Dir::new();
    let log = dry_log(&d);
    let copy = d.path("copy.txt");
    let mut job = job("cat \"$1\"; sleep 0.3; cat \"$1\"", &log);
    let mut w = Command::new(env!("CARGO_BIN_EXE_mllog"))
        .args(["watch", "-", "--output"])
        .arg(&copy)
        .stdin(Stdio::from(job.stdout.take().expect("job stdout")))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mllog watch");
    // What `mllog watch - 2>&1 | head -1` does to it: the reader of stderr goes away.
    drop(w.stderr.take());
    let status = w.wait().expect("watch");
    assert!(
        job.wait().expect("job").success(),
        "the job met a closed pipe"
    );
    // Not a panic (101): the log holds two runs, so the verdict is "not compliant".
    assert_eq!(status.code(), Some(1));
    let twice = std::fs::read_to_string(&log).expect("log").repeat(2);
    assert_eq!(std::fs::read_to_string(&copy).expect("copy"), twice);
}

#[test]
fn a_watch_refused_at_start_passes_standard_input_through() {
    let d = Dir::new();
    let log = dry_log(&d);
    for args in [
        vec!["-", "--upload", "file:///tmp/nowhere/"],
        vec!["-", "--benchmark", "llama2_70b_lorra"],
        vec!["-", "--pid", "0"],
    ] {
        let mut job = job("cat \"$1\"", &log);
        let out = watch(&args, Stdio::from(job.stdout.take().expect("job stdout")))
            .wait_with_output()
            .expect("watch");
        assert!(job.wait().expect("job").success(), "{args:?}: broken pipe");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("passing standard input through"), "{err}");
        assert_eq!(
            out.stdout,
            std::fs::read(&log).expect("log"),
            "{args:?}: the job's output was not passed through"
        );
    }
}

#[test]
fn unknown_benchmarks_pids_and_negative_numbers_are_said_plainly() {
    let d = Dir::new();
    let log = dry_log(&d);
    let shown = log.to_str().expect("utf-8");
    let mut gone = Command::new("true").spawn().expect("true");
    let gone_pid = gone.id().to_string();
    gone.wait().expect("reaped");
    for (args, says) in [
        (vec![shown, "--benchmark", "llama2_70b_lorra"], "known: "),
        (vec![shown, "--pid", &gone_pid], "no such process"),
        (vec![shown, "--pid", "-5"], "no such process"),
        (vec![shown, "--quiet-period", "-1"], "0 or more"),
        (vec![shown, "--timeout", "-1"], "0 or more"),
    ] {
        let out = watch(&args, Stdio::null())
            .wait_with_output()
            .expect("watch");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn a_file_never_created_is_an_io_error_not_a_verdict() {
    let d = Dir::new();
    let missing = d.path("results/result_0.txt");
    let args = [missing.to_str().expect("utf-8"), "--timeout", "0.3"];
    let out = watch(&args, Stdio::null())
        .wait_with_output()
        .expect("watch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("waiting for"), "{err}");
    assert!(err.contains("never created"), "{err}");
    assert!(out.stdout.is_empty(), "a verdict on nothing");
}

/// With `--pid`, what the writer appends after `run_stop` and the quiet period is still read,
/// copied and uploaded: the watch ends when the writer does.
#[test]
fn with_pid_the_watch_ends_when_the_writer_does() {
    let d = Dir::new();
    let dry = dry_log(&d);
    let log = d.path("results/result_0.txt");
    let remote = d.path("remote");
    std::fs::create_dir_all(log.parent().expect("parent")).expect("results");
    let mut writer = Command::new("sh")
        .args([
            "-c",
            "cat \"$1\" > \"$2\"; sleep 1.5; echo 'checkpoint saved' >> \"$2\"",
            "job",
        ])
        .arg(&dry)
        .arg(&log)
        .spawn()
        .expect("the writer");
    let pid = writer.id().to_string();
    let url = format!("file://{}/", remote.display());
    let args = [
        log.to_str().expect("utf-8"),
        "--pid",
        &pid,
        "--quiet-period",
        "0.2",
        "--upload",
        &url,
    ];
    let w = watch(&args, Stdio::null());
    assert!(writer.wait().expect("writer").success());
    let out = w.wait_with_output().expect("watch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("ended (the writer exited)"), "{err}");
    let local = std::fs::read(&log).expect("log");
    assert!(String::from_utf8_lossy(&local).ends_with("checkpoint saved\n"));
    assert_eq!(
        std::fs::read(remote.join("result_0.txt")).expect("remote"),
        local
    );
}

#[test]
fn an_upload_that_leaves_no_whole_copy_is_an_io_error() {
    let d = Dir::new();
    let log = dry_log(&d);
    let args = [
        log.to_str().expect("utf-8"),
        "--quiet-period",
        "0",
        "--upload",
        "file:///proc/no-such-dir/",
    ];
    let out = watch(&args, Stdio::null())
        .wait_with_output()
        .expect("watch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is not the whole log"), "{err}");
    // The verdict on the log itself is still given, and is check's.
    assert!(String::from_utf8_lossy(&out.stdout).contains(": COMPLIANT"));
}

/// The log names another benchmark than `--benchmark`: said on that line, and with
/// `--fail-fast` the watch ends there rather than at the end of the run.
#[test]
fn another_benchmark_is_said_on_its_line_and_fails_fast() {
    let d = Dir::new();
    let log = dry_log(&d);
    let mut job = job("head -n 5 \"$1\"; sleep 30; cat \"$1\"", &log);
    let started = Instant::now();
    let args = ["-", "--benchmark", "llama31_8b", "--fail-fast"];
    let out = watch(&args, Stdio::from(job.stdout.take().expect("job stdout")))
        .wait_with_output()
        .expect("watch");
    let took = started.elapsed();
    let _ = job.kill();
    let _ = job.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let line = std::fs::read_to_string(&log)
        .expect("log")
        .lines()
        .position(|l| l.contains("\"submission_benchmark\""))
        .expect("a submission_benchmark line")
        + 1;
    assert!(
        err.contains(&format!("not a llama31_8b run (its submission_benchmark: llama2_70b_lora)\n  --> <stdin>:{line}")),
        "{err}"
    );
    assert!(err.contains("ended (--fail-fast"), "{err}");
    assert!(
        took < Duration::from_secs(25),
        "the watch waited for the run: {took:?}"
    );
}

#[test]
fn a_second_run_appended_to_the_file_is_named() {
    let d = Dir::new();
    let log = dry_log(&d);
    let both = d.path("appended.txt");
    let text = std::fs::read_to_string(&log).expect("log");
    std::fs::write(&both, text.repeat(2)).expect("appended");
    let second = text.lines().count()
        + text
            .lines()
            .position(|l| l.contains("\"init_start\""))
            .expect("init_start")
        + 1;
    let args = [both.to_str().expect("utf-8"), "--quiet-period", "0"];
    let out = watch(&args, Stdio::null())
        .wait_with_output()
        .expect("watch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let said = format!("a second run begins at line {second}");
    assert_eq!(err.matches(&said).count(), 1, "{err}");
}
