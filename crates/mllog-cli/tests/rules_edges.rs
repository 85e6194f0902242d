//! `mllog check --rules` at the edges a user reaches without meaning to, each against the
//! official checker where it runs: the ruleset inferred from a round's own list of benchmarks,
//! a log of the other usage, rule files with a byte-order mark or not in UTF-8, nesting beyond
//! Python's tokenizer and beyond the engine, snippets that need what the engine does not have,
//! and a usage the rules do not have.
//!
//! The official checker is the one `MLLOG_PYTHON` (default `python3`) imports; the rules the
//! engine loads are that installation's.

mod common;

use std::path::{Path, PathBuf};

use mllog_core::compliance::{example_log, Division, Ruleset};
use mllog_core::rules_source::RulesSource;
use mllog_core::Benchmark;

/// The compliance checker folder of the installed package, as `--rules` takes it.
fn rules() -> String {
    RulesSource::from_python(&common::python().to_string_lossy())
        .expect("locate mlperf_logging")
        .compliance_dir()
        .to_string_lossy()
        .into_owned()
}

fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `mllog check --rules <package> --ruleset 6.1.0 --config <config> <log>`.
fn with_config(config: &Path, log: &Path) -> (i32, String, String) {
    with_config_and(config, &[log.as_os_str()])
}

/// `mllog check --rules <package> --ruleset 6.1.0 --config <config> <more>...`.
fn with_config_and(config: &Path, more: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let rules = rules();
    let mut args: Vec<&std::ffi::OsStr> = [
        "check".as_ref(),
        "--rules".as_ref(),
        rules.as_ref(),
        "--ruleset".as_ref(),
        "6.1.0".as_ref(),
        "--config".as_ref(),
        config.as_os_str(),
    ]
    .into();
    args.extend_from_slice(more);
    common::mllog(args)
}

/// A compliant 6.1.0 log, written to `dir`.
fn log_6_1(dir: &Path) -> PathBuf {
    let text = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
    write(dir, "result_0.txt", text)
}

/// A rule file of one `CHECK` on `submission_org`.
fn one_check(check: &str) -> String {
    format!("- KEY:\n    NAME: submission_org\n    REQ: EXACTLY_ONE\n    CHECK: \" {check} \"\n")
}

/// A folder may keep the rule file of a benchmark its round dropped (5.1.0 keeps
/// `closed_bert.yaml`, its `closed_common.yaml` refuses bert): a bert log is inferred to be
/// of 5.0.0, the newest round whose own list has it, and gets that round's official verdict.
#[test]
fn the_inferred_ruleset_is_the_newest_whose_round_has_the_benchmark() {
    let tmp = tempfile::tempdir().unwrap();
    let text = example_log(Ruleset::V5_0_0, Benchmark::Bert, Division::Closed).unwrap();
    let log = write(tmp.path(), "result_0.txt", text);
    let (code, out, err) = common::mllog(["check", "--rules", &rules(), &log.to_string_lossy()]);
    let said = format!("{out}{err}");
    assert!(said.contains("ruleset 5.0.0:"), "{said}");
    assert!(
        said.contains("the closed_common.yaml of 5.1.0 does not accept it"),
        "{said}"
    );
    let (under_5_0, text_5_0) = common::official_check(&log, "5.0.0", false);
    let (under_5_1, _) = common::official_check(&log, "5.1.0", false);
    assert!(!under_5_1, "the official checker refuses bert under 5.1.0");
    assert_eq!(code == 0, under_5_0, "{said}\n{text_5_0}");
}

/// A log whose benchmark only the other usage has rules for is pointed to that usage, and is
/// an item of the JSON output (as an unreadable file is) and a count of the closing line.
#[test]
fn a_log_of_the_other_usage_is_pointed_there_and_kept_in_every_output() {
    let tmp = tempfile::tempdir().unwrap();
    let log = write(
        tmp.path(),
        "result_0.txt",
        ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"POINT_IN_TIME\", \
         \"key\": \"submission_benchmark\", \"value\": \"deepcam\", \"metadata\": {}}\n",
    );
    let missing = tmp.path().join("missing.txt");
    let (code, out, err) = common::mllog([
        "check".as_ref(),
        "--rules".as_ref(),
        rules().as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        log.as_os_str(),
        missing.as_os_str(),
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("pass --usage hpc"), "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let files = doc["files"].as_array().unwrap();
    assert_eq!(files.len(), 2, "{out}");
    assert!(
        files[0]["error"].as_str().unwrap().contains("--usage hpc"),
        "{out}"
    );
    assert!(files[1]["error"].is_string(), "{out}");
    let (code, out, err) = common::mllog([
        "check".as_ref(),
        "--rules".as_ref(),
        rules().as_ref(),
        log.as_os_str(),
        missing.as_os_str(),
    ]);
    assert_eq!(code, 2);
    assert!(
        out.contains("1 unreadable, 1 with no ruleset"),
        "{out}{err}"
    );
}

/// A snippet that needs what the engine does not have (`%`-formatting, integers beyond 128
/// bits) leaves the log without a verdict, where Python runs it: never a failed check.
#[test]
fn a_snippet_beyond_the_engine_gives_no_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let log = log_6_1(tmp.path());
    for check in ["'%s' % 'a' == 'a'", "10 ** 400 > 0"] {
        let config = write(tmp.path(), "beyond.yaml", one_check(check));
        let (official, text) = common::official_check_with_config(&log, "6.1.0", false, &config);
        assert!(official, "Python runs `{check}`: {text}");
        let (code, out, err) = with_config(&config, &log);
        assert_eq!(code, 2, "{check}: {out}{err}");
        assert!(err.contains("no verdict"), "{check}: {err}");
        assert!(!out.contains("NOT COMPLIANT"), "{check}: {out}");
    }
}

/// A log without a verdict does not stop the others: a snippet that is beyond the engine only
/// on one log's value leaves that log without a verdict, and the next is checked as the
/// official checker checks it; the closing line and the JSON output count the first apart.
#[test]
fn a_log_without_a_verdict_does_not_stop_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let good = log_6_1(tmp.path());
    let text = std::fs::read_to_string(&good).unwrap();
    let org = text
        .lines()
        .find(|l| l.contains("\"submission_org\""))
        .unwrap();
    let value: serde_json::Value =
        serde_json::from_str(org.trim_start_matches(":::MLLOG ")).unwrap();
    let was = value["value"].as_str().unwrap();
    let beyond = write(
        tmp.path(),
        "result_1.txt",
        text.replace(&format!("\"value\": \"{was}\""), "\"value\": \"%s\""),
    );
    // `%`-formatting runs only where the organisation is "%s".
    let config = write(
        tmp.path(),
        "per_log.yaml",
        one_check("v['value'] != '%s' or (v['value'] % 'a') == 'a'"),
    );
    for log in [&beyond, &good] {
        let (official, text) = common::official_check_with_config(log, "6.1.0", false, &config);
        assert!(official, "{}: {text}", log.display());
    }
    let args = |format: &str| {
        with_config_and(
            &config,
            &[
                "--format".as_ref(),
                format.as_ref(),
                beyond.as_os_str(),
                good.as_os_str(),
            ],
        )
    };
    let (code, out, err) = args("text");
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("no verdict"), "{err}");
    assert!(out.contains("result_0.txt: COMPLIANT"), "{out}");
    assert!(
        out.contains("0 of 2 files not compliant, 1 with no verdict"),
        "{out}"
    );
    let (code, out, _) = args("json");
    assert_eq!(code, 2);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let files = doc["files"].as_array().unwrap();
    assert!(
        files[0]["error"].as_str().unwrap().contains("no verdict"),
        "{out}"
    );
    assert_eq!(files[1]["passed"], true, "{out}");
}

/// What the official checker reads past without a word in a rule file (a misspelt field, an
/// entry kind or a `REQ` it does not know, a field beside an entry's first key, a second
/// record of a key) changes no verdict, as there, and is said with its line on stderr and in
/// the JSON output; spelt right, the same rule fails the log in both tools.
#[test]
fn what_the_checker_reads_past_is_said_with_its_line() {
    let tmp = tempfile::tempdir().unwrap();
    let log = log_6_1(tmp.path());
    let slips = "\
- KEY:
    NAME: submission_org
    REQ: EXACTLY ONE
    CHEK: \" v['value'] == 'nobody' \"
- KEY:
    NAME: submission_platform
  CHECK: \" v['value'] == 'nobody' \"
- KYE:
    NAME: submission_division
    CHECK: \" False \"
- KEY:
    NAME: submission_platform
    REQ: EXACTLY_ONE
";
    let config = write(tmp.path(), "slips.yaml", slips);
    let (official, text) = common::official_check_with_config(&log, "6.1.0", true, &config);
    assert!(
        official,
        "the official checker reads past each slip: {text}"
    );
    let (code, out, err) = with_config_and(&config, &["--werror".as_ref(), log.as_os_str()]);
    assert_eq!(code, 0, "{out}{err}");
    let shown = config.display().to_string();
    for (line, words) in [
        (3, "REQ `EXACTLY ONE` is none the checker counts"),
        (4, "`CHEK` is no field of a KEY entry"),
        (7, "`CHECK` beside `KEY` in one entry"),
        (8, "an entry `KYE`"),
        (12, "a second KEY record for `submission_platform`"),
    ] {
        assert!(
            err.contains(&format!("mllog: note: {shown}:{line}: {words}")),
            "line {line}: {err}"
        );
    }
    assert_eq!(err.matches("mllog: note: ").count(), 5, "{err}");
    let (_, out, _) = with_config(&config, &log);
    assert!(out.contains("COMPLIANT"), "{out}");
    let (code, out, _) = with_config_and(
        &config,
        &["--format".as_ref(), "json".as_ref(), log.as_os_str()],
    );
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["rules_ignored"].as_array().unwrap().len(), 5, "{out}");
    assert_eq!(doc["rules_ignored"][1]["line"], 4, "{out}");

    // Spelt right, the rule is read and fails the log in both tools.
    let fixed = write(tmp.path(), "fixed.yaml", slips.replace("CHEK", "CHECK"));
    let (official, _) = common::official_check_with_config(&log, "6.1.0", false, &fixed);
    assert!(!official);
    let (code, out, err) = with_config(&fixed, &log);
    assert_eq!(code, 1, "{out}{err}");
}

/// Brackets nested beyond Python's tokenizer are its SyntaxError, as the official checker
/// reports it; expressions nested beyond the engine's limit are refused at load, never a
/// crash, however deep.
#[test]
fn nesting_is_pythons_syntax_error_or_refused_at_load() {
    let tmp = tempfile::tempdir().unwrap();
    let log = log_6_1(tmp.path());
    for depth in [200, 201, 250] {
        let check = format!("{}1{} == 1", "(".repeat(depth), ")".repeat(depth));
        let config = write(tmp.path(), "parens.yaml", one_check(&check));
        let (official, text) = common::official_check_with_config(&log, "6.1.0", false, &config);
        let (code, out, err) = with_config(&config, &log);
        assert_eq!(code == 0, official, "{depth}: {out}{err}\n{text}");
        assert_eq!(official, depth <= 200, "{depth}: {text}");
    }
    for (op, depth) in [("not ", 600), ("-", 20_000), ("not ", 50_000)] {
        let check = format!("{}1 != 2", op.repeat(depth));
        let config = write(tmp.path(), "deep.yaml", one_check(&check));
        let (code, out, err) = with_config(&config, &log);
        assert_eq!(code, 2, "{op:?} x {depth}: {out}{err}");
        assert!(err.contains("nested more than 500 levels deep"), "{err}");
        assert!(err.contains("deep.yaml:4"), "{err}");
    }
}

/// A rule file is UTF-8 text, as the checker opens it: a byte-order mark is skipped (PyYAML
/// does), a byte that is not UTF-8 is an error naming the file and line (the checker's
/// UnicodeDecodeError).
#[test]
fn rule_files_are_read_as_the_checker_reads_them() {
    let tmp = tempfile::tempdir().unwrap();
    let log = log_6_1(tmp.path());
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend(one_check("v['value'] != ''").as_bytes());
    let config = write(tmp.path(), "bom.yaml", bom);
    let (official, text) = common::official_check_with_config(&log, "6.1.0", false, &config);
    let (code, out, err) = with_config(&config, &log);
    assert!(official, "{text}");
    assert_eq!(code, 0, "{out}{err}");
    let mut latin1 = b"# caf\xe9\n".to_vec();
    latin1.extend(one_check("v['value'] != ''").as_bytes());
    let config = write(tmp.path(), "latin1.yaml", latin1);
    let (official, text) = common::official_check_with_config(&log, "6.1.0", false, &config);
    let (code, out, err) = with_config(&config, &log);
    assert!(!official, "{text}");
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("latin1.yaml:1") && err.contains("not UTF-8"),
        "{err}"
    );
}

/// A usage the rules have no folder for is refused at once, naming those they have; a
/// refused call names the first refused part of the chain it is in.
#[test]
fn a_usage_or_a_call_the_rules_cannot_run_is_said_plainly() {
    let tmp = tempfile::tempdir().unwrap();
    let log = log_6_1(tmp.path());
    let (code, _, err) = common::mllog([
        "check",
        "--rules",
        &rules(),
        "--usage",
        "inference",
        &log.to_string_lossy(),
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no inference rules") && err.contains("hpc, training"),
        "{err}"
    );
    let config = write(
        tmp.path(),
        "import.yaml",
        one_check("__import__('os').getcwd() != ''"),
    );
    let (code, _, err) = with_config(&config, &log);
    assert_eq!(code, 2);
    assert!(err.contains("`__import__`"), "{err}");
}

/// A record's JSON nests as deep as Python's `json.loads` reads it inside the official
/// checker (about 985 levels; deeper it raises RecursionError): the same verdicts, with the
/// rules read at run time and built in.
#[test]
fn records_nest_as_deep_as_pythons_json_reads_them() {
    let tmp = tempfile::tempdir().unwrap();
    let good = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
    for depth in [300, 980, 995] {
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let extra = format!(
            ":::MLLOG {{\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"POINT_IN_TIME\", \
             \"key\": \"deep\", \"value\": {nested}, \"metadata\": {{}}}}\n"
        );
        let log = write(tmp.path(), "deep.txt", format!("{extra}{good}"));
        let (official, text) = common::official_check(&log, "6.1.0", false);
        assert_eq!(official, depth < 985, "{depth}: {text}");
        for rules_arg in [Some(rules()), None] {
            let mut args = vec!["check".to_string()];
            if let Some(r) = &rules_arg {
                args.extend(["--rules".into(), r.clone()]);
            }
            args.extend(["--ruleset".into(), "6.1.0".into()]);
            args.push(log.to_string_lossy().into_owned());
            let (code, out, err) = common::mllog(&args);
            assert_eq!(
                code == 0,
                official,
                "{depth} {rules_arg:?}: {out}{err}\n{text}"
            );
        }
    }
}
