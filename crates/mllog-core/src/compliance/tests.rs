//! Unit tests per rule kind.

use super::*;
use crate::keys::Benchmark;
use crate::record::{Record, Value};

fn rec(key: &'static str, value: Value) -> Record {
    Record::event(key, value).at_millis(1_767_225_600_000)
}

fn llama2() -> String {
    example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap()
}

fn edit(log: &str, from: &str, to: &str) -> String {
    assert!(log.contains(from), "{from} not in log");
    log.replacen(from, to, 1)
}

fn drop_key(log: &str, key: &str) -> String {
    let pat = format!("\"key\": \"{key}\"");
    log.lines()
        .filter(|l| !l.contains(&pat))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn errors(r: &ComplianceReport) -> Vec<String> {
    r.errors().map(|f| f.message.clone()).collect()
}

#[test]
fn examples_pass_for_every_benchmark() {
    for r in Ruleset::ALL {
        for b in rules(r).benchmarks() {
            for d in [Division::Closed, Division::Open] {
                let log = example_log(r, b, d).unwrap();
                let rep = check_text(r, &log);
                assert!(
                    rep.passed(true),
                    "{r} {b} {}: {:#?}",
                    d.as_str(),
                    rep.findings
                );
                assert_eq!(rep.rule_files.len(), 3, "{r} {b}");
            }
        }
    }
}

#[test]
fn exactly_one_missing_and_duplicates() {
    let log = llama2();
    let r = check_text(Ruleset::V6_1_0, &drop_key(&log, "lora_rank"));
    assert!(!r.passed(false));
    assert!(errors(&r)
        .iter()
        .any(|m| m.contains("`lora_rank` must be logged exactly once") && m.contains("found 0")));
    // Same value twice: warning, error under werror.
    let line = log
        .lines()
        .find(|l| l.contains("\"key\": \"train_samples\""))
        .unwrap();
    let dup = edit(&log, line, &format!("{line}\n{line}"));
    let r = check_text(Ruleset::V6_1_0, &dup);
    assert!(r.passed(false));
    assert!(!r.passed(true));
    assert_eq!(r.warnings().count(), 1);
    // Different value: error.
    let other = line.replace("\"value\": 1000000", "\"value\": 7");
    let r = check_text(
        Ruleset::V6_1_0,
        &edit(&log, line, &format!("{line}\n{other}")),
    );
    assert!(!r.passed(false));
    assert!(errors(&r)[0].contains("different values"));
}

#[test]
fn equals_check_message() {
    let log = edit(
        &llama2(),
        "\"lora_rank\", \"value\": 16",
        "\"lora_rank\", \"value\": 8",
    );
    let r = check_text(Ruleset::V6_1_0, &log);
    let e: Vec<_> = r.errors().collect();
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(
        e[0].message,
        "`lora_rank` must be 16 in the closed division (llama2_70b_lora), found 8"
    );
    assert_eq!(e[0].rule, "CHECK v['value'] == 16");
    assert!(e[0].line.is_some());
    // 16.0 passes, "16" fails.
    let ok = edit(
        &llama2(),
        "\"lora_rank\", \"value\": 16",
        "\"lora_rank\", \"value\": 16.0",
    );
    assert!(check_text(Ruleset::V6_1_0, &ok).passed(true));
    let bad = edit(
        &llama2(),
        "\"lora_rank\", \"value\": 16",
        "\"lora_rank\", \"value\": \"16\"",
    );
    assert!(!check_text(Ruleset::V6_1_0, &bad).passed(false));
}

#[test]
fn state_read_before_write() {
    let log = example_log(Ruleset::V6_1_0, Benchmark::Llama31_8b, Division::Closed).unwrap();
    let warm = log
        .lines()
        .find(|l| l.contains("\"opt_learning_rate_warmup_steps\""))
        .unwrap();
    let decay = log
        .lines()
        .find(|l| l.contains("\"opt_learning_rate_decay_steps\""))
        .unwrap();
    let swapped = log
        .replace(warm, "@@W")
        .replace(decay, warm)
        .replace("@@W", decay);
    let r = check_text(Ruleset::V6_1_0, &swapped);
    let e: Vec<_> = r.errors().collect();
    assert_eq!(e.len(), 1, "{e:#?}");
    assert_eq!(e[0].kind, FindingKind::Exec);
    assert!(
        e[0].message
            .contains("needs `opt_learning_rate_warmup_steps` logged first"),
        "{}",
        e[0].message
    );
    assert!(e[0].message.contains("(line "), "{}", e[0].message);
}

#[test]
fn first_check_only_on_first_occurrence() {
    let log = example_log(
        Ruleset::V6_1_0,
        Benchmark::Deepseekv3_671b,
        Division::Closed,
    )
    .unwrap();
    assert!(check_text(Ruleset::V6_1_0, &log).passed(true));
    // Moving the first eval off the required point fails; 6.0.0 has no FIRST_CHECK.
    let moved = log.replace("\"samples_count\": 704512", "\"samples_count\": 704000");
    let r = check_text(Ruleset::V6_1_0, &moved);
    assert!(
        r.findings.iter().any(|f| f.kind == FindingKind::FirstCheck),
        "{:#?}",
        r.findings
    );
}

#[test]
fn atleast_one_check_and_null_accuracy() {
    let log = llama2();
    let far = log.replace(
        "\"key\": \"eval_accuracy\", \"value\": 0.9158",
        "\"key\": \"eval_accuracy\", \"value\": 0.95",
    );
    assert!(far != log);
    let r = check_text(Ruleset::V6_1_0, &far);
    assert!(
        r.findings.iter().any(|f| f.kind == FindingKind::Target),
        "{:#?}",
        r.findings
    );
    let null = log.replacen(
        "\"key\": \"eval_accuracy\", \"value\": 0.9158",
        "\"key\": \"eval_accuracy\", \"value\": null",
        1,
    );
    let r = check_text(Ruleset::V6_1_0, &null);
    assert!(!r.passed(false));
    assert!(
        r.findings.iter().any(|f| f.kind == FindingKind::Fatal),
        "{:#?}",
        r.findings
    );
}

#[test]
fn alternatives_and_metadata_checks() {
    let log = llama2();
    let r = check_text(
        Ruleset::V6_1_0,
        &drop_key(&drop_key(&log, "block_start"), "epoch_start"),
    );
    assert!(r
        .findings
        .iter()
        .any(|f| f.kind == FindingKind::Alternatives));
    let r = check_text(
        Ruleset::V6_1_0,
        &log.replace("\"status\": \"success\"", "\"state\": \"success\""),
    );
    assert!(
        errors(&r)
            .iter()
            .any(|m| m.contains("`run_stop` needs metadata `status`")),
        "{:?}",
        errors(&r)
    );
}

#[test]
fn submission_keys_checked_once_and_unknown_benchmark() {
    let log = llama2();
    let r = check_text(
        Ruleset::V6_1_0,
        &log.replace("\"llama2_70b_lora\"", "\"llama31_405b\""),
    );
    assert!(!r.passed(false));
    assert!(r.findings.iter().any(|f| f.kind == FindingKind::Fatal));
    assert!(r
        .findings
        .iter()
        .any(|f| f.message.contains("must be one of")));
    let r = check_text(
        Ruleset::V6_1_0,
        &log.replace("\"value\": \"closed\"", "\"value\": \"semi\""),
    );
    assert!(r.findings.iter().any(|f| f.kind == FindingKind::Fatal));
}

#[test]
fn init_time_limit() {
    let log = llama2();
    let late = log.replace(
        "1767225660000",
        &(1_767_225_600_000i64 + 31 * 60_000).to_string(),
    );
    let r = check_text(Ruleset::V6_1_0, &late);
    assert!(
        errors(&r).iter().any(|m| m.contains("init time limit")),
        "{:?}",
        errors(&r)
    );
    let open = late.replace("\"value\": \"closed\"", "\"value\": \"open\"");
    let r = check_text(Ruleset::V6_1_0, &open);
    assert!(r.passed(true), "{:#?}", r.findings);
}

#[test]
fn later_file_overrides_keyed_messages() {
    // closed_common wants gradient_accumulation_steps > 0, closed_llama2_70b_lora has no
    // check: the official checker drops the closed_common message.
    let log = edit(
        &llama2(),
        "\"gradient_accumulation_steps\", \"value\": 1",
        "\"gradient_accumulation_steps\", \"value\": 0",
    );
    assert!(check_text(Ruleset::V6_1_0, &log).passed(true));
    // llama31_8b's file keeps the check: it fails there.
    let log = example_log(Ruleset::V6_1_0, Benchmark::Llama31_8b, Division::Closed).unwrap();
    let log = edit(
        &log,
        "\"gradient_accumulation_steps\", \"value\": 1",
        "\"gradient_accumulation_steps\", \"value\": 0",
    );
    assert!(!check_text(Ruleset::V6_1_0, &log).passed(false));
}

#[test]
fn parse_errors_and_empty_logs_fail() {
    let log = llama2() + ":::MLLOG {\"key\": \n";
    let r = check_text(Ruleset::V6_1_0, &log);
    assert!(r.findings.iter().any(|f| f.kind == FindingKind::Parse));
    let r = check_text(Ruleset::V6_1_0, "hello\n");
    assert!(r.findings.iter().any(|f| f.kind == FindingKind::NoLines));
}

#[test]
fn optional_keys_6_0_vs_6_1() {
    let log = example_log(Ruleset::V6_0_0, Benchmark::Llama31_8b, Division::Closed).unwrap();
    let stripped = drop_key(&log, "micro_batch_size");
    assert!(check_text(Ruleset::V6_0_0, &stripped).passed(true));
    assert!(!check_text(Ruleset::V6_1_0, &stripped).passed(false));
}

#[test]
fn rule_data_lookups() {
    assert_eq!(
        required_value(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, "lora_rank"),
        Some(Lit::Int(16))
    );
    assert_eq!(
        required_value(Ruleset::V6_1_0, Benchmark::Llama31_8b, "opt_adamw_beta_2"),
        Some(Lit::Float(0.95))
    );
    let t = target(Ruleset::V6_1_0, Benchmark::Llama31_8b, Division::Closed).unwrap();
    assert_eq!(t.key, "eval_accuracy");
    assert!(!t.higher_is_better);
    assert!(t.range.unwrap().contains(3.3) && !t.range.unwrap().contains(3.31));
    assert!(
        target(Ruleset::V6_1_0, Benchmark::Dlrmv4, Division::Closed)
            .unwrap()
            .higher_is_better
    );
    assert!(!rules(Ruleset::V6_1_0).allows(Benchmark::Llama31_405b));
    assert_eq!(
        detect_ruleset(
            &example_log(
                Ruleset::V5_0_0,
                Benchmark::StableDiffusion,
                Division::Closed
            )
            .unwrap()
        ),
        (Ruleset::V5_0_0, true)
    );
    assert_eq!(detect_ruleset(&llama2()), (Ruleset::V6_1_0, false));
}

#[test]
fn streaming_report_and_pending() {
    let mut c = Checker::new(Ruleset::V6_1_0);
    c.feed(1, &rec("cache_clear", Value::Bool(true)));
    c.feed(2, &rec("init_start", Value::Null));
    let p = c.pending_at_run_start();
    assert!(p.findings.iter().any(|f| f.severity == Severity::Note));
    assert!(p
        .findings
        .iter()
        .any(|f| f.key.as_deref() == Some("submission_org")));
    assert!(!p
        .findings
        .iter()
        .any(|f| f.key.as_deref() == Some("run_stop")));
    c.feed(3, &rec("submission_division", Value::from("closed")));
    c.feed(
        4,
        &rec("submission_benchmark", Value::from("llama2_70b_lora")),
    );
    c.feed(5, &rec("lora_rank", Value::Int(8)));
    let p = c.pending_at_run_start();
    assert!(p
        .findings
        .iter()
        .any(|f| f.message.contains("`lora_rank` must be 16")));
    assert!(p
        .findings
        .iter()
        .any(|f| f.key.as_deref() == Some("lora_alpha")));
    assert_eq!(
        c.report().rule_files,
        ["common", "closed_common", "closed_llama2_70b_lora"]
    );
}

#[test]
fn text_output() {
    let log = edit(
        &llama2(),
        "\"lora_rank\", \"value\": 16",
        "\"lora_rank\", \"value\": 8",
    );
    let r = check_text(Ruleset::V6_1_0, &log);
    let text = r.render_text("x.log", false);
    assert!(text.contains("error: `lora_rank` must be 16"));
    assert!(text.contains("  --> x.log:"));
    assert!(text.contains("NOT COMPLIANT"));
}

#[cfg(feature = "serde")]
#[test]
fn json_output() {
    let log = edit(
        &llama2(),
        "\"lora_rank\", \"value\": 16",
        "\"lora_rank\", \"value\": 8",
    );
    let r = check_text(Ruleset::V6_1_0, &log);
    let json: serde_json::Value = serde_json::from_str(&r.render_json("x.log", false)).unwrap();
    assert_eq!(json["file"], "x.log");
    assert_eq!(json["passed"], false);
    assert_eq!(json["ruleset"], "6.1.0");
    assert_eq!(json["division"], "closed");
    assert_eq!(json["errors"], r.errors().count());
    let lora = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == "lora_rank")
        .expect("a finding for lora_rank");
    assert_eq!(lora["kind"], "check");
    assert_eq!(lora["severity"], "error");
    assert!(lora["line"].is_u64());
    // Escapes: a path with a quote and a control character comes back as written.
    let path = "a\"b\u{1}.log";
    let json: serde_json::Value = serde_json::from_str(&r.render_json(path, true)).unwrap();
    assert_eq!(json["file"], path);
    assert_eq!(json["werror"], true);
}

/// `check_reader` (which skips building records of keys no rule reads) gives the same report
/// as feeding every record in full, on the real corpus and on mutated examples.
#[test]
fn check_reader_matches_full_feed() {
    let full = |r: Ruleset, text: &str| {
        let mut c = Checker::new(r);
        let mut reader = crate::record::LogReader::new(text.as_bytes());
        for item in reader.by_ref() {
            match item {
                Ok(p) => c.feed(p.lineno, &p.record),
                Err(e) => c.feed_error(&e),
            }
        }
        c.report()
    };
    let mut logs: Vec<String> = Vec::new();
    for path in
        crate::published_logs("the streaming checker against the whole-file one on published logs")
    {
        let bytes = std::fs::read(path).unwrap();
        logs.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    let base = llama2();
    logs.push(edit(
        &base,
        "\"key\": \"run_start\"",
        "\"k\\u0065y\": \"run_start\"",
    ));
    logs.push(edit(&base, "\"value\": 16", "\"value\": 16, \"value\": 8"));
    logs.push(edit(
        &base,
        "\"key\": \"run_stop\"",
        "\"key\": \"run_stop\" ,",
    ));
    logs.push(format!("{base}:::MLLOG {{\"key\": \"train_loss\", \"time_ms\": 1, \"value\": [1,], \"metadata\": {{}}}}\n"));
    logs.push(base);
    for log in &logs {
        for r in [Ruleset::V5_1_0, Ruleset::V6_1_0] {
            let fast = check_reader(r, log.as_bytes()).unwrap();
            assert_eq!(fast, full(r, log));
        }
    }
}

/// A log of nothing but malformed lines fails without a finding per line in memory: the first
/// 100 are listed, the rest counted in one finding.
#[test]
fn parse_errors_are_listed_up_to_a_bound() {
    let log = ":::MLLOG {\"key\": \n".repeat(250);
    let rep = check_text(Ruleset::V6_1_0, &log);
    assert!(!rep.passed(false));
    let parse: Vec<&Finding> = rep
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::Parse)
        .collect();
    assert_eq!(parse.len(), 101);
    assert!(
        parse[100].message.contains("150 more lines") && parse[100].message.contains("250 in all"),
        "{}",
        parse[100].message
    );
}

/// The one-pass detection picks the ruleset `detect_ruleset` picks and gives the report of
/// checking under it.
#[test]
fn check_reader_detect_matches_detect_then_check() {
    let mut logs = vec![String::new(), "noise\n".into()];
    for (r, b) in [
        (Ruleset::V5_0_0, Benchmark::StableDiffusion),
        (Ruleset::V5_1_0, Benchmark::Rgat),
        (Ruleset::V6_0_0, Benchmark::Llama31_405b),
        (Ruleset::V6_1_0, Benchmark::Llama2_70bLora),
    ] {
        let log = example_log(r, b, Division::Closed).unwrap();
        logs.push(drop_key(&log, "submission_benchmark"));
        logs.push(log);
    }
    for log in &logs {
        let (want, detected) = detect_ruleset(log);
        let (rep, got_detected) = check_reader_detect(log.as_bytes()).unwrap();
        assert_eq!((rep.ruleset, got_detected), (want, detected));
        let direct = check_text(want, log);
        assert_eq!(
            format!("{:?}", rep.findings),
            format!("{:?}", direct.findings)
        );
        assert_eq!(rep.records, direct.records);
    }
}

/// Records whose fields are not of the usual JSON types are kept and read with Python's
/// semantics: string metadata on a key whose rules read only the value passes; `null`
/// metadata on a key whose rules test it fails that check; a key that is not a string matches
/// no rule.
#[test]
fn fields_of_other_types_follow_python() {
    let log = llama2();
    let line = |key: &str| {
        log.lines()
            .find(|l| l.contains(&format!("\"key\": \"{key}\"")))
            .unwrap()
            .to_string()
    };
    let set_metadata = |l: &str, json: &str| {
        let at = l.find("\"metadata\": ").unwrap();
        format!("{}\"metadata\": {json}}}", &l[..at])
    };
    let tp = line("tensor_parallelism");
    let rep = check_text(
        Ruleset::V6_1_0,
        &log.replace(&tp, &set_metadata(&tp, "\"\"")),
    );
    assert!(rep.passed(true), "{:?}", errors(&rep));
    let stop = line("run_stop");
    let rep = check_text(
        Ruleset::V6_1_0,
        &log.replace(&stop, &set_metadata(&stop, "null")),
    );
    assert!(!rep.passed(false));
    assert!(
        errors(&rep)
            .iter()
            .any(|e| e.contains("'NoneType' is not iterable")),
        "{:?}",
        errors(&rep)
    );
    let rep = check_text(
        Ruleset::V6_1_0,
        &log.replace(&stop, &set_metadata(&stop, "\"status: success\"")),
    );
    assert!(rep.passed(true), "{:?}", errors(&rep));
    let rank = line("lora_rank");
    let rep = check_text(
        Ruleset::V6_1_0,
        &log.replace(
            &rank,
            &rank.replace("\"key\": \"lora_rank\"", "\"key\": [\"lora_rank\"]"),
        ),
    );
    assert_eq!(rep.records, check_text(Ruleset::V6_1_0, &log).records);
    assert!(
        errors(&rep)
            .iter()
            .any(|e| e.contains("`lora_rank` must be logged exactly once")),
        "{:?}",
        errors(&rep)
    );
}
