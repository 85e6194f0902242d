//! Differential tests: our compliance checker against the official one (mlperf-logging 4.1.68).
//!
//! The interpreter comes from `MLLOG_PYTHON` (default `python3`); it must be able to
//! `import mlperf_logging` — run `.ci/run` (which sets up the pinned checker) or set
//! `MLLOG_PYTHON`. These tests never skip; the comparisons on published logs need the corpus
//! (`MLLOG_CORPUS`, set by `scripts/test`) and say on stderr what they did not check without it.
//!
//! `MLLOG_DIFF_CASES` sets the number of mutated logs (default 2000), `MLLOG_DIFF_SEED` the seed
//! (default: from the clock; always printed).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use mllog_core::compliance::{
    check_reader, example_log, rules, ComplianceReport, Division, Ruleset,
};
use mllog_core::record::{parse_line, EventType, Value};

/// The official verdicts (passed, passed with `--werror`; a crash is a failure) of training
/// logs.
fn official(dir: &Path, cases: &[(PathBuf, Ruleset)]) -> Vec<(bool, bool)> {
    let cases: Vec<_> = cases
        .iter()
        .map(|(path, r)| common::Case {
            path,
            usage: "training",
            ruleset: r.as_str(),
        })
        .collect();
    common::official_verdicts(dir, &cases)
}

fn ours(path: &Path, r: Ruleset) -> ComplianceReport {
    let bytes = std::fs::read(path).unwrap();
    check_reader(r, &bytes[..]).unwrap()
}

/// (file, ruleset, recorded official rc) from the published logs' MANIFEST.tsv; empty, with a
/// line on stderr saying what `what` was not checked, without the corpus.
fn corpus(what: &str) -> Vec<(PathBuf, Ruleset, i32)> {
    let Some(dir) = common::corpus("real", what) else {
        return Vec::new();
    };
    let manifest = std::fs::read_to_string(dir.join("MANIFEST.tsv")).expect("corpus MANIFEST.tsv");
    manifest
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                dir.join(f[0]),
                f[4].parse::<Ruleset>().unwrap(),
                f[5].parse().unwrap(),
            )
        })
        .collect()
}

fn compare(
    cases: &[(PathBuf, Ruleset)],
    what: &[String],
    verdicts: &[(bool, bool)],
) -> Vec<String> {
    let mut bad = Vec::new();
    for (i, ((p, r), (off_plain, off_strict))) in cases.iter().zip(verdicts).enumerate() {
        let rep = ours(p, *r);
        let (plain, strict) = (rep.passed(false), rep.passed(true));
        if (plain, strict) != (*off_plain, *off_strict) {
            let findings: Vec<String> = rep
                .findings
                .iter()
                .take(4)
                .map(|f| format!("{:?} {}", f.severity, f.message))
                .collect();
            bad.push(format!(
                "{} [{}] ruleset {r}: official (plain, werror) = ({off_plain}, {off_strict}), ours = ({plain}, {strict}); ours: {findings:?}",
                what[i],
                p.display()
            ));
        }
    }
    bad
}

#[test]
fn corpus_verdicts_match_official() {
    let tmp = tempfile::tempdir().unwrap();
    let items = corpus("the official checker's verdicts on the published logs");
    if items.is_empty() {
        return;
    }
    assert!(items.len() >= 20, "corpus has {} files", items.len());
    let cases: Vec<(PathBuf, Ruleset)> = items.iter().map(|(p, r, _)| (p.clone(), *r)).collect();
    let verdicts = official(tmp.path(), &cases);
    for ((p, _, rc), (plain, _)) in items.iter().zip(&verdicts) {
        assert_eq!(
            *plain,
            *rc == 0,
            "the official checker disagrees with MANIFEST.tsv on {}",
            p.display()
        );
    }
    let what: Vec<String> = items
        .iter()
        .map(|(p, _, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let bad = compare(&cases, &what, &verdicts);
    assert!(
        bad.is_empty(),
        "{} disagreements:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

fn examples() -> Vec<(String, Ruleset, String)> {
    let mut v = Vec::new();
    for r in Ruleset::ALL {
        for b in rules(r).benchmarks() {
            for d in [Division::Closed, Division::Open] {
                let log = example_log(r, b, d).unwrap();
                v.push((format!("{r}_{}_{b}", d.as_str()), r, log));
            }
        }
    }
    v
}

#[test]
fn generated_examples_pass_both_checkers() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    let mut what = Vec::new();
    for (name, r, log) in examples() {
        let p = tmp.path().join(format!("{name}.txt"));
        std::fs::write(&p, log).unwrap();
        cases.push((p, r));
        what.push(name);
    }
    let verdicts = official(tmp.path(), &cases);
    let failing: Vec<&String> = what
        .iter()
        .zip(&verdicts)
        .filter(|(_, v)| !(v.0 && v.1))
        .map(|(w, _)| w)
        .collect();
    assert!(
        failing.is_empty(),
        "the official checker rejects generated logs: {failing:?}"
    );
    let bad = compare(&cases, &what, &verdicts);
    assert!(
        bad.is_empty(),
        "{} disagreements:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The mutation seed: `MLLOG_DIFF_SEED` when set (to reproduce a failing run), else a new one
/// from the clock each run. Every test that draws from it prints it.
fn seed() -> u64 {
    std::env::var("MLLOG_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
}

/// SplitMix64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate_value(v: &Value, rng: &mut Rng) -> Value {
    match (v, rng.below(9)) {
        (_, 6) => Value::Float(f64::NAN),
        (_, 7) => Value::Bool(true),
        (_, 8) => Value::Array(vec![v.clone()]),
        (Value::Int(i), 0) => Value::Int(i * 2),
        (Value::Int(i), 1) => Value::Int(i + 1),
        (Value::Int(i), 2) => Value::Str(i.to_string().into()),
        (Value::Int(_), 3) => Value::Int(0),
        (Value::Int(i), 4) => Value::Float(*i as f64),
        (Value::Float(f), 0) => Value::Float(f * 2.0),
        (Value::Float(f), 1) => Value::Float(f + 1.0),
        (Value::Float(f), 2) => Value::Float(*f as f32 as f64),
        (Value::Float(_), 3) => Value::Float(0.0),
        (Value::Float(f), 4) => Value::Float(-f),
        (Value::Str(_), 0) => Value::Str("".into()),
        (Value::Str(s), 1) => Value::Str(format!("{s}x").into()),
        (Value::Str(s), 2) => Value::Str(s.to_uppercase().into()),
        (Value::Null, 0 | 1) => Value::Int(1),
        (Value::Bool(b), _) => Value::Bool(!b),
        (_, 5) => Value::Null,
        (_, _) => Value::Int(16),
    }
}

/// One seeded mutation of `log`; returns the new log and what was done.
fn mutate(log: &str, rng: &mut Rng) -> (String, String) {
    let mut lines: Vec<String> = log.lines().map(str::to_string).collect();
    let mll: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains(":::MLLOG "))
        .collect();
    if mll.is_empty() {
        return (log.to_string(), "none".into());
    }
    let pick = |rng: &mut Rng| mll[rng.below(mll.len())];
    let key_of = |l: &str| {
        parse_line(l)
            .ok()
            .flatten()
            .map(|r| r.key.to_string())
            .unwrap_or_default()
    };
    let desc;
    match rng.below(12) {
        0 => {
            let i = pick(rng);
            desc = format!("dropped line {} ({})", i + 1, key_of(&lines[i]));
            lines.remove(i);
        }
        1 => {
            let (i, j) = (pick(rng), pick(rng));
            desc = format!(
                "swapped lines {} ({}) and {} ({})",
                i + 1,
                key_of(&lines[i]),
                j + 1,
                key_of(&lines[j])
            );
            lines.swap(i, j);
        }
        2 | 3 => {
            let i = pick(rng);
            match parse_line(&lines[i]) {
                Ok(Some(mut rec)) => {
                    let old = rec.value.to_json();
                    rec.value = mutate_value(&rec.value, rng);
                    desc = format!(
                        "line {} ({}): value {old} -> {}",
                        i + 1,
                        rec.key,
                        rec.value.to_json()
                    );
                    let mut s = String::new();
                    rec.encode(&mut s);
                    lines[i] = s;
                }
                _ => desc = "unparsable line left alone".into(),
            }
        }
        4 => {
            let i = pick(rng);
            desc = format!("duplicated line {} ({})", i + 1, key_of(&lines[i]));
            let l = lines[i].clone();
            let at = i + 1 + rng.below(lines.len() - i);
            lines.insert(at.min(lines.len()), l);
        }
        5 => {
            let i = pick(rng);
            match parse_line(&lines[i]) {
                Ok(Some(mut rec)) => {
                    let extra: Vec<String> = rec
                        .metadata
                        .fields
                        .iter()
                        .map(|(k, _)| k.to_string())
                        .collect();
                    if extra.is_empty() || rng.below(4) == 0 {
                        let s = lines[i].clone();
                        let cut = s
                            .find(", \"metadata\"")
                            .unwrap_or(s.len().saturating_sub(1));
                        lines[i] = format!("{}}}", &s[..cut]);
                        desc = format!("line {} ({}): metadata removed", i + 1, rec.key);
                    } else {
                        let k = extra[rng.below(extra.len())].clone();
                        rec.metadata.fields.retain(|(n, _)| *n != k);
                        let mut s = String::new();
                        rec.encode(&mut s);
                        lines[i] = s;
                        desc = format!("line {} ({}): metadata `{k}` removed", i + 1, rec.key);
                    }
                }
                _ => desc = "unparsable line left alone".into(),
            }
        }
        6 => {
            let i = pick(rng);
            let n = lines[i].len();
            let cut = rng.below(n);
            desc = format!(
                "line {} ({}) truncated at {cut}/{n}",
                i + 1,
                key_of(&lines[i])
            );
            lines[i].truncate(cut);
        }
        8..=10 => {
            let i = pick(rng);
            let other = key_of(&lines[pick(rng)]);
            match parse_line(&lines[i]) {
                Ok(Some(mut rec)) => {
                    let old = rec.key.to_string();
                    desc = match rng.below(3) {
                        // Wrong key names: another key of the log, a near miss, a key the
                        // rules care about in the wrong place.
                        0 if rng.below(2) == 0 => {
                            rec.key = other.into();
                            format!("line {} ({old}): key -> {}", i + 1, rec.key)
                        }
                        0 => {
                            let near = match rng.below(3) {
                                0 => format!("{old}s"),
                                1 => {
                                    let mut k = old.clone();
                                    k.pop();
                                    k
                                }
                                _ => old.replace('_', "-"),
                            };
                            rec.key = near.into();
                            format!("line {} ({old}): key -> {}", i + 1, rec.key)
                        }
                        // The wrong bracket: start for stop, point for interval, ...
                        1 => {
                            let was = rec.event_type;
                            rec.event_type = [
                                EventType::IntervalStart,
                                EventType::IntervalEnd,
                                EventType::PointInTime,
                            ][rng.below(3)];
                            format!(
                                "line {} ({old}): event_type {was:?} -> {:?}",
                                i + 1,
                                rec.event_type
                            )
                        }
                        // A metadata value changed, or a field the rules read added.
                        _ if !rec.metadata.fields.is_empty() && rng.below(2) == 0 => {
                            let at = rng.below(rec.metadata.fields.len());
                            let (name, v) = &mut rec.metadata.fields[at];
                            let before = v.to_json();
                            *v = mutate_value(v, rng);
                            format!(
                                "line {} ({old}): metadata `{name}` {before} -> {}",
                                i + 1,
                                v.to_json()
                            )
                        }
                        _ => {
                            let (name, v) = [
                                ("samples_count", Value::Int(1024)),
                                ("epoch_num", Value::Int(1)),
                                ("first_epoch_num", Value::Int(0)),
                                ("epoch_count", Value::Int(2)),
                                ("status", Value::Str("success".into())),
                                ("status", Value::Str("aborted".into())),
                            ][rng.below(6)]
                            .clone();
                            rec.metadata.fields.retain(|(n, _)| *n != name);
                            rec.metadata.fields.push((name.into(), v.clone()));
                            format!(
                                "line {} ({old}): metadata `{name}` = {} added",
                                i + 1,
                                v.to_json()
                            )
                        }
                    };
                    let mut s = String::new();
                    rec.encode(&mut s);
                    lines[i] = s;
                }
                _ => desc = "unparsable line left alone".into(),
            }
        }
        _ => {
            let i = pick(rng);
            match parse_line(&lines[i]) {
                Ok(Some(rec)) => {
                    let shift: i64 = [31 * 60_000, -31 * 60_000, 241 * 60_000, 1][rng.below(4)];
                    let rec = rec.clone().at_millis(rec.time_ms() + shift);
                    desc = format!("line {} ({}): time shifted by {shift} ms", i + 1, rec.key);
                    let mut s = String::new();
                    rec.encode(&mut s);
                    lines[i] = s;
                }
                _ => desc = "unparsable line left alone".into(),
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    (out, desc)
}

#[test]
fn seeded_mutations_match_official() {
    let n: usize = std::env::var("MLLOG_DIFF_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let seed = seed();
    eprintln!("seeded_mutations_match_official: MLLOG_DIFF_SEED={seed} MLLOG_DIFF_CASES={n}");
    // Bases: every generated example, plus the small real logs.
    let mut bases: Vec<(String, Ruleset, String)> = examples();
    for (p, r, _) in corpus("the published logs as bases of the seeded mutations") {
        let bytes = std::fs::read(&p).unwrap();
        if bytes.len() < 40_000 {
            bases.push((
                p.file_name().unwrap().to_string_lossy().into_owned(),
                r,
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    let mut what = Vec::new();
    for i in 0..n {
        let mut rng = Rng(seed ^ (i as u64).wrapping_mul(0xA24B_AED4_963E_E407));
        let (name, r, base) = &bases[rng.below(bases.len())];
        let (mut log, mut desc) = mutate(base, &mut rng);
        // Some cases get a second mutation.
        if rng.below(4) == 0 {
            let (l2, d2) = mutate(&log, &mut rng);
            log = l2;
            desc = format!("{desc}; then {d2}");
        }
        let p = tmp.path().join(format!("case{i}.txt"));
        std::fs::write(&p, log).unwrap();
        cases.push((p, *r));
        what.push(format!("case {i} (seed {seed}) from {name}: {desc}"));
    }
    let verdicts = official(tmp.path(), &cases);
    let bad = compare(&cases, &what, &verdicts);
    let failing = verdicts.iter().filter(|v| !v.0).count();
    eprintln!(
        "{n} mutated logs, {failing} rejected by the official checker, {} disagreements",
        bad.len()
    );
    if !bad.is_empty() {
        let kept = tmp.keep();
        panic!(
            "{} disagreements with the official checker (MLLOG_DIFF_SEED={seed}; files kept in {}):\n{}",
            bad.len(),
            kept.display(),
            bad.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
        );
    }
}

/// The JSON types a mutation gives a field.
const TYPES: [&str; 7] = [
    "object",
    "string",
    "empty string",
    "null",
    "number",
    "bool",
    "list",
];

/// The fields of a record whose type the mutations change.
const FIELDS: [&str; 5] = ["key", "value", "metadata", "time_ms", "event_type"];

/// A JSON text of type `ty` for `field`, drawn from values that reach the rules' corners: a
/// string holding the names `in` finds as substrings, a numeric string where `float()` reads
/// one, numbers near the limits the rules compare with.
fn json_of_type(ty: &str, field: &str, original: &str, rng: &mut Rng) -> String {
    let pick = |rng: &mut Rng, pool: &[&str]| pool[rng.below(pool.len())].to_string();
    match ty {
        "object" => pick(
            rng,
            &[
                "{}",
                r#"{"samples_count": 2304, "epoch_num": 1, "first_epoch_num": 0, "epoch_count": 1, "status": "success"}"#,
                r#"{"FID": 10.0, "CLIP": 0.2, "samples_count": 1}"#,
                r#"{"a": [1, null]}"#,
            ],
        ),
        "string" => {
            let mut pool = vec![
                "\"samples_count\"".to_string(),
                "\"status epoch_num first_epoch_num epoch_count samples_count\"".into(),
                "\"metric samples_count\"".into(),
                "\"x\"".into(),
                "\"1024\"".into(),
                "\"closed\"".into(),
            ];
            // The original, quoted: a numeric string for numbers, a key or value as text.
            if !original.starts_with('"') {
                pool.push(format!("\"{}\"", original.replace('"', "\\\"")));
            } else {
                pool.push(original.to_string());
            }
            if field == "time_ms" {
                pool.push(format!("\" {original} \""));
                pool.push("\"1_0\"".into());
            }
            pool.swap_remove(rng.below(pool.len()))
        }
        "empty string" => "\"\"".into(),
        "null" => "null".into(),
        "number" => {
            let mut pool = vec!["0", "1", "-1", "16", "0.925", "2304", "1e300", "1.5"];
            let o = original.to_string();
            if field == "time_ms" {
                pool.push(&o);
            }
            pick(rng, &pool)
        }
        "bool" => pick(rng, &["true", "false"]),
        "list" => pick(rng, &["[]", r#"["samples_count", "status"]"#, "[1, 2]"]),
        other => unreachable!("{other}"),
    }
}

/// The line with `field` replaced by `json`. Lines are written by our encoder: the fields in
/// the fixed order namespace, time_ms, event_type, key, value, metadata.
fn with_field(line: &str, field: &str, json: &str) -> String {
    let names = [
        "namespace",
        "time_ms",
        "event_type",
        "key",
        "value",
        "metadata",
    ];
    let at = |name: &str| line.find(&format!("\"{name}\": ")).unwrap();
    let i = names.iter().position(|n| *n == field).unwrap();
    let from = at(field) + field.len() + 4;
    let to = match names.get(i + 1) {
        Some(next) => at(next) - 2,
        None => line.len() - 1,
    };
    format!("{}{json}{}", &line[..from], &line[to..])
}

/// Every field's type (object, string, empty string, null, number, bool, list) for `key`,
/// `value`, `metadata`, `time_ms` and `event_type`, on one line of every key the rules read, in
/// every ruleset: our verdicts, plain and `--werror`, are the official checker's. Which base
/// log, which line and which value of each type are drawn from the seed.
#[test]
fn field_type_mutations_match_official() {
    let seed = seed();
    eprintln!("field_type_mutations_match_official: MLLOG_DIFF_SEED={seed}");
    let mut rng = Rng(seed ^ 0x0005_EED0_F7E5);
    let bases = examples();
    let tmp = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    let mut what = Vec::new();
    let mut keys_covered = 0;
    for r in Ruleset::ALL {
        let mut keys: Vec<&'static str> = rules(r)
            .files()
            .flat_map(|f| f.keys.iter().map(|k| k.name))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let logs: Vec<&(String, Ruleset, String)> =
            bases.iter().filter(|(_, br, _)| *br == r).collect();
        for key in keys {
            let needle = format!("\"key\": \"{key}\"");
            let holders: Vec<&&(String, Ruleset, String)> = logs
                .iter()
                .filter(|(_, _, l)| l.contains(&needle))
                .collect();
            if holders.is_empty() {
                // `aggregated_eval_accuracy` is made by the checker, never logged.
                continue;
            }
            keys_covered += 1;
            for field in FIELDS {
                for ty in TYPES {
                    let (name, _, log) = holders[rng.below(holders.len())];
                    let lines: Vec<&str> = log.lines().collect();
                    let at: Vec<usize> = (0..lines.len())
                        .filter(|&i| lines[i].contains(&needle))
                        .collect();
                    let i = at[rng.below(at.len())];
                    let rec = parse_line(lines[i]).unwrap().unwrap();
                    let original = match field {
                        "key" => Value::from(key).to_json(),
                        "value" => rec.value.to_json(),
                        "time_ms" => rec.time_ms().to_string(),
                        "event_type" => Value::from(rec.event_type.as_str()).to_json(),
                        _ => String::new(),
                    };
                    let json = json_of_type(ty, field, &original, &mut rng);
                    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                    out[i] = with_field(lines[i], field, &json);
                    let p = tmp.path().join(format!("case{}.txt", cases.len()));
                    std::fs::write(&p, out.join("\n") + "\n").unwrap();
                    cases.push((p, r));
                    what.push(format!(
                        "{name}: line {} ({key}): {field} -> {json} ({ty})",
                        i + 1
                    ));
                }
            }
        }
    }
    assert!(keys_covered >= 100, "only {keys_covered} keys covered");
    let verdicts = official(tmp.path(), &cases);
    let bad = compare(&cases, &what, &verdicts);
    let failing = verdicts.iter().filter(|v| !v.0).count();
    eprintln!(
        "{} type mutations over {keys_covered} (ruleset, key) pairs, {failing} rejected by the official checker, {} disagreements",
        cases.len(),
        bad.len()
    );
    if !bad.is_empty() {
        let kept = tmp.keep();
        panic!(
            "{} disagreements with the official checker (MLLOG_DIFF_SEED={seed}; files kept in {}):\n{}",
            bad.len(),
            kept.display(),
            bad.iter().take(30).cloned().collect::<Vec<_>>().join("\n")
        );
    }
}

/// A real v6.0 submission log that passes, with `"metadata": ""` on its optional disclosure
/// keys (precision and parallelism), as a published multi-node submission logs them: the
/// official parser keeps such records and no rule reads their metadata, so both checkers pass.
#[test]
fn real_log_with_string_metadata_passes_both() {
    let Some(corpus) = common::corpus(
        "real",
        "a published log with string metadata, both checkers",
    ) else {
        return;
    };
    let src = corpus.join("v6.0_AMD_llama2_70b_lora_MI355X-primus_result_0.txt");
    let text = std::fs::read_to_string(&src).unwrap();
    let mut edited = 0;
    let out: Vec<String> = text
        .lines()
        .map(|l| {
            // The keys 6.0.0 lists, and the log's own misspelling of one of them.
            let disclosure = mllog_core::compliance::DISCLOSURE_KEYS
                .iter()
                .any(|k| l.contains(&format!("\"key\": \"{k}\"")))
                || l.contains("\"key\": \"lowest_numerical_precision");
            match l.find("\"metadata\": {") {
                Some(at) if disclosure => {
                    edited += 1;
                    format!("{}\"metadata\": \"\"}}", &l[..at])
                }
                _ => l.to_string(),
            }
        })
        .collect();
    assert_eq!(edited, 7, "the log's disclosure lines");
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("string_metadata.txt");
    std::fs::write(&p, out.join("\n") + "\n").unwrap();
    let verdicts = official(tmp.path(), &[(p.clone(), Ruleset::V6_0_0)]);
    assert_eq!(verdicts, vec![(true, true)], "the official checker");
    let rep = ours(&p, Ruleset::V6_0_0);
    assert!(
        rep.passed(true),
        "{:?}",
        rep.findings.iter().map(|f| &f.message).collect::<Vec<_>>()
    );
}

/// Hand-made edge cases (compliance-rules.md §9 and parser corners) on the closed llama2 example.
/// `KNOWN_DIVERGENCES` lists the cases where we fail a log that the official checker passes,
/// on purpose (see docs/compliance.md).
#[test]
fn edge_cases_match_official() {
    const KNOWN_DIVERGENCES: &[&str] = &[];
    let base = example_log(
        Ruleset::V6_1_0,
        mllog_core::keys::Benchmark::Llama2_70bLora,
        Division::Closed,
    )
    .unwrap();
    let lines: Vec<&str> = base.lines().collect();
    let find = |k: &str| {
        lines
            .iter()
            .position(|l| l.contains(&format!("\"key\": \"{k}\"")))
            .unwrap()
    };
    let join = |v: Vec<String>| v.join("\n") + "\n";
    let map = |f: &dyn Fn(usize, &str) -> String| {
        join(lines.iter().enumerate().map(|(i, l)| f(i, l)).collect())
    };
    // The log with one replacement on line `at`.
    let edit = |at: usize, from: &str, to: &str| {
        map(&|i, l| {
            if i == at {
                l.replace(from, to)
            } else {
                l.to_string()
            }
        })
    };
    // Line `at` logged twice, with the values `first` and `second`.
    let twice = |at: usize, first: &str, second: &str| {
        let with_value = |l: &str, v: &str| {
            let from = l.find("\"value\": ").unwrap() + "\"value\": ".len();
            let to = from + l[from..].find(", \"metadata\"").unwrap();
            format!("{}{v}{}", &l[..from], &l[to..])
        };
        map(&|i, l| {
            if i == at {
                format!("{}\n{}", with_value(l, first), with_value(l, second))
            } else {
                l.to_string()
            }
        })
    };
    let ts = find("train_samples");
    let rs = find("run_start");
    let rk = find("lora_rank");
    let ev = find("eval_accuracy");
    let stop = find("run_stop");
    let cases: Vec<(&str, String)> = vec![
        ("rank_prefix", map(&|_, l| format!("0: {l}"))),
        ("crlf", base.replace('\n', "\r\n")),
        ("noise_lines", map(&|_, l| format!("noise ☃ here\n{l}"))),
        (
            "two_records_one_line",
            map(&|i, l| {
                if i == 0 {
                    format!("{l} {}", lines[1])
                } else if i == 1 {
                    String::new()
                } else {
                    l.to_string()
                }
            }),
        ),
        ("no_space_after_token", edit(rk, ":::MLLOG ", ":::MLLOG")),
        (
            "time_ms_string",
            map(&|i, l| {
                if i == rs {
                    l.replace(
                        "\"time_ms\": 1767225660000",
                        "\"time_ms\": \"1767225660000\"",
                    )
                } else {
                    l.to_string()
                }
            }),
        ),
        (
            "time_ms_float",
            map(&|_, l| l.replace("\"time_ms\": 1767225660000", "\"time_ms\": 1767225660000.5")),
        ),
        (
            "time_ms_bool",
            edit(0, "\"time_ms\": 1767225600000", "\"time_ms\": true"),
        ),
        (
            "no_file_lineno",
            map(&|_, l| {
                l.replace("\"file\": \"/workspace/train/src/mlperf.rs\", ", "")
                    .replace("\"lineno\": 1", "\"x\": 1")
            }),
        ),
        (
            "eval_only_epoch_num",
            edit(ev, ", \"samples_count\": 2304", ""),
        ),
        (
            "status_aborted",
            base.replace("\"status\": \"success\"", "\"status\": \"aborted\""),
        ),
        (
            "run_stop_before_run_start_time",
            edit(
                stop,
                "\"time_ms\": 1767225880000",
                "\"time_ms\": 1767225000000",
            ),
        ),
        (
            "nan_unchecked",
            edit(find("seed"), "\"value\": 1234", "\"value\": NaN"),
        ),
        (
            "nan_accuracy",
            edit(ev, "\"value\": 0.9158", "\"value\": NaN"),
        ),
        (
            "null_accuracy",
            edit(ev, "\"value\": 0.9158", "\"value\": null"),
        ),
        (
            "key_not_a_string",
            edit(find("seed"), "\"key\": \"seed\"", "\"key\": 5"),
        ),
        ("value_missing", edit(find("seed"), "\"value\": 1234, ", "")),
        (
            "run_start_twice",
            map(&|i, l| {
                if i == rs {
                    format!("{l}\n{l}")
                } else {
                    l.to_string()
                }
            }),
        ),
        ("hyperparameter_after_run_start", {
            let mut v: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
            let l = v.remove(rk);
            v.insert(stop - 1, l);
            join(v)
        }),
        ("empty", String::new()),
        (
            "duplicate_keys_in_json",
            edit(rk, "\"value\": 16,", "\"value\": 8, \"value\": 16,"),
        ),
        (
            "bool_parallelism",
            map(&|_, l| {
                l.replace(
                    "\"tensor_parallelism\", \"value\": 1",
                    "\"tensor_parallelism\", \"value\": true",
                )
            }),
        ),
        (
            "float_lora_rank",
            map(&|_, l| {
                l.replace(
                    "\"lora_rank\", \"value\": 16",
                    "\"lora_rank\", \"value\": 16.0",
                )
            }),
        ),
        (
            "exponent_spelling",
            map(&|_, l| l.replace("\"value\": 0.0001,", "\"value\": 1e-4,")),
        ),
        // An EXACTLY_ONE key logged twice: the same value twice is a warning, different values
        // an error. "Same" is Python's `list.count`: 1 == 1.0 == True, and NaN equals NaN (the
        // JSON parser's NaN is one object).
        ("nan_twice", twice(ts, "NaN", "NaN")),
        ("nan_in_a_list_twice", twice(ts, "[NaN, 1]", "[NaN, 1.0]")),
        ("int_then_float", twice(ts, "1000", "1000.0")),
        ("one_then_true", twice(ts, "1", "true")),
        ("nan_then_number", twice(ts, "NaN", "1000")),
        // Python compares an int with a float exactly: 2^53 + 1 is not 2^53 as a float.
        (
            "big_int_then_float",
            twice(ts, "9007199254740993", "9007199254740992.0"),
        ),
        (
            "big_int_then_same_float",
            twice(ts, "9007199254740992", "9007199254740992.0"),
        ),
        // Fields of any JSON type, read with Python's semantics (`in` on a string is a
        // substring test, on null a TypeError; a key that is not a string matches no rule).
        ("disclosure_metadata_empty_string", {
            let tp = find("tensor_parallelism");
            map(&|i, l| {
                if i == tp {
                    with_field(l, "metadata", "\"\"")
                } else {
                    l.to_string()
                }
            })
        }),
        ("run_stop_metadata_null", {
            map(&|i, l| {
                if i == stop {
                    with_field(l, "metadata", "null")
                } else {
                    l.to_string()
                }
            })
        }),
        ("run_stop_metadata_string_holding_status", {
            map(&|i, l| {
                if i == stop {
                    with_field(l, "metadata", "\"the status\"")
                } else {
                    l.to_string()
                }
            })
        }),
        ("run_stop_metadata_list_holding_status", {
            map(&|i, l| {
                if i == stop {
                    with_field(l, "metadata", "[\"status\"]")
                } else {
                    l.to_string()
                }
            })
        }),
        ("eval_metadata_string_holding_samples_count", {
            map(&|i, l| {
                if i == ev {
                    with_field(l, "metadata", "\"samples_count\"")
                } else {
                    l.to_string()
                }
            })
        }),
        ("lora_rank_key_a_list", {
            map(&|i, l| {
                if i == rk {
                    with_field(l, "key", "[\"lora_rank\"]")
                } else {
                    l.to_string()
                }
            })
        }),
        ("time_ms_underscored_string", {
            map(&|i, l| {
                if i == rs {
                    with_field(l, "time_ms", "\" 1_767_225_660_000 \"")
                } else {
                    l.to_string()
                }
            })
        }),
        ("time_ms_null", {
            map(&|i, l| {
                if i == rk {
                    with_field(l, "time_ms", "null")
                } else {
                    l.to_string()
                }
            })
        }),
        ("event_type_object", {
            map(&|i, l| {
                if i == rs {
                    with_field(l, "event_type", "{}")
                } else {
                    l.to_string()
                }
            })
        }),
        (
            "eval_accuracy_string",
            edit(ev, "\"value\": 0.9158", "\"value\": \"0.9158\""),
        ),
    ];
    // Stable diffusion (5.0.0): its BEGIN code reads `eval_accuracy` metadata outside any
    // `try`, so a Python error there crashes the official checker.
    let sd = example_log(
        Ruleset::V5_0_0,
        mllog_core::keys::Benchmark::StableDiffusion,
        Division::Closed,
    )
    .unwrap();
    let sd_lines: Vec<&str> = sd.lines().collect();
    let fid = sd_lines
        .iter()
        .position(|l| l.contains("\"metric\""))
        .unwrap();
    let sd_edit = |json: &str| {
        let mut v: Vec<String> = sd_lines.iter().map(|l| l.to_string()).collect();
        v[fid] = with_field(sd_lines[fid], "metadata", json);
        v.join("\n") + "\n"
    };
    let sd_cases: Vec<(&str, String)> = vec![
        ("sd_unchanged", sd.clone()),
        (
            "sd_metadata_string_holding_metric",
            sd_edit("\"metric samples_count\""),
        ),
        (
            "sd_metadata_string_without_metric",
            sd_edit("\"samples_count\""),
        ),
        ("sd_metadata_null", sd_edit("null")),
        ("sd_metadata_list_holding_metric", sd_edit("[\"metric\"]")),
        (
            "sd_samples_count_a_list",
            sd_edit("{\"metric\": \"FID\", \"samples_count\": [1]}"),
        ),
        (
            "sd_metric_a_number",
            sd_edit("{\"metric\": 1, \"samples_count\": 1000}"),
        ),
    ];
    let mut cases = cases;
    cases.extend(sd_cases);
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (name, text) in &cases {
        let p = tmp.path().join(format!("{name}.txt"));
        std::fs::write(&p, text).unwrap();
        let r = if name.starts_with("sd_") {
            Ruleset::V5_0_0
        } else {
            Ruleset::V6_1_0
        };
        files.push((p, r));
    }
    let verdicts = official(tmp.path(), &files);
    let mut bad = Vec::new();
    for ((name, _), ((p, r), off)) in cases.iter().zip(files.iter().zip(&verdicts)) {
        let rep = ours(p, *r);
        let mine = (rep.passed(false), rep.passed(true));
        let expected_divergence = KNOWN_DIVERGENCES.contains(name);
        if expected_divergence {
            if mine.0 || !off.0 {
                bad.push(format!("{name}: expected a known divergence (official passes, we fail), got official {off:?}, ours {mine:?}"));
            }
        } else if mine != *off {
            bad.push(format!(
                "{name}: official {off:?}, ours {mine:?}: {:?}",
                rep.findings.iter().map(|f| &f.message).collect::<Vec<_>>()
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The bytes around a record's JSON, read as the official checker reads them: the file as
/// latin-1, the line's end stripped of Python's whitespace (which in latin-1 includes `\x1c`–`\x1f`,
/// `\x85` and `\xa0`), JSON's own whitespace alone allowed before the `{`. A UTF-8 space
/// (NBSP, U+2028, U+3000, ...) is no whitespace there, after the record or before it.
#[test]
fn bytes_around_the_record_match_official() {
    let base = example_log(
        Ruleset::V6_1_0,
        mllog_core::keys::Benchmark::Llama2_70bLora,
        Division::Closed,
    )
    .unwrap();
    let at = base
        .lines()
        .position(|l| l.contains("\"key\": \"lora_alpha\""))
        .unwrap();
    let with = |before: &[u8], after: &[u8]| -> Vec<u8> {
        let mut out = Vec::new();
        for (i, line) in base.lines().enumerate() {
            if i == at {
                let body = line.strip_prefix(":::MLLOG ").expect("a bare record line");
                out.extend_from_slice(b":::MLLOG ");
                out.extend_from_slice(before);
                out.extend_from_slice(body.as_bytes());
                out.extend_from_slice(after);
            } else {
                out.extend_from_slice(line.as_bytes());
            }
            out.push(b'\n');
        }
        out
    };
    let spaces: &[(&str, &[u8])] = &[
        ("space", b" "),
        ("tab", b"\t"),
        ("cr", b"\r"),
        ("vt", b"\x0b"),
        ("ff", b"\x0c"),
        ("fs", b"\x1c"),
        ("us", b"\x1f"),
        ("nel_byte", b"\x85"),
        ("nbsp_byte", b"\xa0"),
        ("nbsp_utf8", "\u{a0}".as_bytes()),
        ("nel_utf8", "\u{85}".as_bytes()),
        ("line_separator", "\u{2028}".as_bytes()),
        ("ideographic_space", "\u{3000}".as_bytes()),
        ("nbsp_byte_then_x", b"\xa0x"),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    let mut files = Vec::new();
    for (name, bytes) in spaces {
        for (place, text) in [("after", with(b"", bytes)), ("before", with(bytes, b""))] {
            let p = tmp.path().join(format!("{place}_{name}.txt"));
            std::fs::write(&p, text).unwrap();
            names.push(format!("{place} the record: {name}"));
            files.push((p, Ruleset::V6_1_0));
        }
    }
    let verdicts = official(tmp.path(), &files);
    // Both outcomes occur: the comparison is not one-sided.
    assert!(verdicts.iter().any(|v| v.1) && verdicts.iter().any(|v| !v.1));
    let bad = compare(&files, &names, &verdicts);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// `mllog check` and `summary` stream their input: a line longer than the 16 MiB cap is one
/// error naming its line number (and the reading stops there, without holding the line), an
/// endless input without line ends (`/dev/zero`) terminates with that error, and the ruleset
/// is detected from standard input in the one pass. (Peak memory: `benches/rss.rs`.)
#[test]
fn cli_streams_its_input() {
    use std::io::Write;
    let exe = env!("CARGO_BIN_EXE_mllog");
    let tmp = tempfile::tempdir().unwrap();
    let good = example_log(
        Ruleset::V6_1_0,
        mllog_core::keys::Benchmark::Llama31_8b,
        Division::Closed,
    )
    .unwrap();
    let lines: Vec<&str> = good.lines().collect();
    let long = tmp.path().join("long.txt");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&long).unwrap());
        writeln!(f, "{}", lines[0]).unwrap();
        write!(
            f,
            ":::MLLOG {{\"time_ms\": 1, \"key\": \"x\", \"value\": \""
        )
        .unwrap();
        f.write_all(&vec![b'a'; (16 << 20) + 10]).unwrap();
        writeln!(f, "\", \"metadata\": {{}}}}").unwrap();
        for l in &lines[1..] {
            writeln!(f, "{l}").unwrap();
        }
    }
    let out = Command::new(exe)
        .args(["check", long.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("longer than 16777216 bytes"), "{text}");
    assert!(
        text.contains(&format!("--> {}:2", long.display())),
        "{text}"
    );
    for cmd in ["check", "summary"] {
        let out = Command::new(exe).args([cmd, "/dev/zero"]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.code().is_some(),
            "{cmd} /dev/zero: {:?}",
            out.status
        );
        if cmd == "check" {
            assert_eq!(out.status.code(), Some(1), "{text}");
            assert!(text.contains("longer than"), "{text}");
        }
    }
    // Detection from standard input: a stable_diffusion log is checked under 5.0.0.
    let sd = example_log(
        Ruleset::V5_0_0,
        mllog_core::keys::Benchmark::StableDiffusion,
        Division::Closed,
    )
    .unwrap();
    let mut child = Command::new(exe)
        .args(["check", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(sd.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("ruleset 5.0.0"), "{text}");
}

/// The `mllog check` command: exit codes, formats, stdin.
#[test]
fn cli_check_exit_codes() {
    use std::io::Write;
    let exe = env!("CARGO_BIN_EXE_mllog");
    let tmp = tempfile::tempdir().unwrap();
    let good = example_log(
        Ruleset::V6_1_0,
        mllog_core::keys::Benchmark::Llama31_8b,
        Division::Closed,
    )
    .unwrap();
    let good_p = tmp.path().join("good.txt");
    std::fs::write(&good_p, &good).unwrap();
    let beta = good
        .lines()
        .find(|l| l.contains("\"opt_adamw_beta_2\""))
        .unwrap();
    let bad_p = tmp.path().join("bad.txt");
    std::fs::write(&bad_p, good.replace(beta, &beta.replace("0.95", "0.999"))).unwrap();
    let ts = good
        .lines()
        .find(|l| l.contains("\"train_samples\""))
        .unwrap();
    let dup_p = tmp.path().join("dup.txt");
    std::fs::write(&dup_p, good.replace(ts, &format!("{ts}\n{ts}"))).unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(exe).args(args).output().unwrap();
        (
            o.status.code().unwrap(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    let s = |p: &PathBuf| p.display().to_string();
    assert_eq!(run(&["check", &s(&good_p)]).0, 0);
    let (code, out) = run(&["check", &s(&bad_p)]);
    assert_eq!(code, 1);
    assert!(out.contains("error: `opt_adamw_beta_2` must be 0.95 in the closed division (llama31_8b), found 0.999"), "{out}");
    assert!(out.contains(&format!("--> {}:", s(&bad_p))), "{out}");
    assert_eq!(run(&["check", &s(&dup_p)]).0, 0);
    assert_eq!(run(&["check", "--werror", &s(&dup_p)]).0, 1);
    assert_eq!(run(&["check", &s(&good_p), &s(&bad_p)]).0, 1);
    assert_eq!(run(&["check", &s(&tmp.path().join("missing.txt"))]).0, 2);
    assert_eq!(run(&["check", "--ruleset", "9.9.9", &s(&good_p)]).0, 2);
    assert_eq!(run(&["check"]).0, 2);
    assert_eq!(run(&["frobnicate"]).0, 2);
    let (code, out) = run(&[
        "check",
        "--format",
        "jsonl",
        "--ruleset",
        "6.1.0",
        &s(&bad_p),
    ]);
    assert_eq!(code, 1);
    let line = format!(
        ":::MLLOG {{\"time_ms\": 0, \"key\": \"k\", \"value\": {}, \"metadata\": {{}}}}",
        out.trim()
    );
    let rec = parse_line(&line).unwrap().unwrap();
    assert_eq!(rec.value.get("passed"), Some(&Value::Bool(false)));
    assert_eq!(
        rec.value.get("ruleset").and_then(Value::as_str),
        Some("6.1.0")
    );
    let mut child = Command::new(exe)
        .args(["check", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(good.as_bytes())
        .unwrap();
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(0));
    // Detection: a stable_diffusion log is checked under 5.0.0 without --ruleset.
    let sd = tmp.path().join("sd.txt");
    std::fs::write(
        &sd,
        example_log(
            Ruleset::V5_0_0,
            mllog_core::keys::Benchmark::StableDiffusion,
            Division::Closed,
        )
        .unwrap(),
    )
    .unwrap();
    let (code, out) = run(&["check", &s(&sd)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("ruleset 5.0.0"), "{out}");
}
