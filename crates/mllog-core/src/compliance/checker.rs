//! The streaming checker: runs the rule files of a ruleset over records as they arrive.

use std::collections::HashMap;
use std::io::BufRead;

use super::model::*;
use super::py::{hash_key, meta_contains, meta_item, py_same};
use super::report::{ComplianceReport, Finding, FindingKind, Severity};
use super::rulesets::{rules, RulesetFiles};
use crate::keys::Benchmark;
use crate::record::{LineError, LogReader, Metadata, Record, Str, Value};

/// How many malformed lines a report lists one by one.
const MAX_PARSE_FINDINGS: usize = 100;

/// Keys normally logged at or after `run_start`; [`Checker::pending_at_run_start`] does not
/// call them missing.
const AFTER_RUN_START: &[&str] = &[
    "run_start",
    "run_stop",
    "block_start",
    "block_stop",
    "epoch_start",
    "epoch_stop",
    "eval_start",
    "eval_stop",
    "eval_accuracy",
    "aggregated_eval_accuracy",
    "averaged_validation_loss",
];

#[derive(Clone, Debug)]
struct Tally {
    count: usize,
    first_line: usize,
    last_line: usize,
    first_value: Option<Value>,
    all_same: bool,
    distinct: Vec<String>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            count: 0,
            first_line: 0,
            last_line: 0,
            first_value: None,
            all_same: true,
            distinct: Vec::new(),
        }
    }
    fn add(&mut self, lineno: usize, v: &Value, keep_values: bool) {
        self.count += 1;
        if self.count == 1 {
            self.first_line = lineno;
        }
        self.last_line = lineno;
        if !keep_values {
            return;
        }
        match &self.first_value {
            None => self.first_value = Some(v.clone()),
            Some(first) => {
                // `all_same` is `l.count(l[0]) == len(l)` in the official checker.
                if !py_same(first, v) {
                    self.all_same = false;
                }
            }
        }
        let text = v.to_json();
        if self.distinct.len() < 8 && !self.distinct.contains(&text) {
            self.distinct.push(text);
        }
    }
}

#[derive(Clone, Debug)]
struct Raw {
    /// Key under which the official checker files the message (overwritten by a later rule file
    /// that has a rule for the same key); `None` for messages that are never overwritten.
    keyed: Option<&'static str>,
    /// For "needs X logged first": the key X.
    needs: Option<&'static str>,
    finding: Finding,
}

#[derive(Clone, Debug)]
enum Enqueue {
    Division(Value),
    Benchmark(Division, Value),
}

#[derive(Clone, Debug)]
struct AggEntry {
    id: String,
    value: Vec<(Str, Value)>,
    line: usize,
}

#[derive(Clone, Debug)]
struct Run {
    file: &'static RuleFile,
    index: HashMap<&'static str, usize>,
    state: State,
    tallies: Vec<Tally>,
    exec_done: Vec<bool>,
    first_done: Vec<bool>,
    /// (occurrences evaluated, occurrences passed, fatal reported)
    atleast: Vec<(usize, usize, bool)>,
    findings: Vec<Raw>,
    agg: Vec<AggEntry>,
    agg_fatal: bool,
}

fn line_of(h: &HistLine) -> Line<'_> {
    Line {
        key: &h.key,
        value: &h.value,
        metadata: &h.metadata,
        time_ms: h.time_ms,
        lineno: h.lineno,
    }
}

impl Run {
    fn new(file: &'static RuleFile) -> Run {
        let n = file.keys.len();
        let mut state = State::default();
        for (k, v) in &file.begin {
            state.set(k, v.clone());
        }
        Run {
            file,
            index: file
                .keys
                .iter()
                .enumerate()
                .map(|(i, k)| (k.name, i))
                .collect(),
            state,
            tallies: vec![Tally::new(); n],
            exec_done: vec![false; n],
            first_done: vec![false; n],
            atleast: vec![(0, 0, false); n],
            findings: Vec::new(),
            agg: Vec::new(),
            agg_fatal: false,
        }
    }

    fn push(
        &mut self,
        kind: FindingKind,
        severity: Severity,
        key: &'static str,
        line: Option<usize>,
        message: String,
        rule: String,
    ) {
        let needs = None;
        self.findings.push(Raw {
            keyed: Some(key),
            needs,
            finding: Finding {
                severity,
                kind,
                line,
                key: Some(key.to_string()),
                message,
                rule,
                source: self.file.name.clone(),
            },
        });
    }

    fn check_failed(
        &mut self,
        rule: &'static KeyRule,
        c: &Check,
        l: &Line<'_>,
        kind: FindingKind,
        r: Result<bool, ExecError>,
    ) {
        let label = if kind == FindingKind::FirstCheck {
            "FIRST_CHECK"
        } else {
            "CHECK"
        };
        let ctx = self.file.context();
        match r {
            Ok(true) => {}
            Ok(false) => {
                let found = c
                    .found(l, &self.state)
                    .map_or(String::new(), |f| format!(", found {f}"));
                let msg = format!("`{}` {}{ctx}{found}", rule.name, c.words());
                self.push(
                    kind,
                    Severity::Error,
                    rule.name,
                    Some(l.lineno),
                    msg,
                    format!("{label} {}", c.code()),
                );
            }
            Err(e) => {
                let needs = match &e {
                    ExecError::NeedsState { key, .. } => Some(*key),
                    _ => None,
                };
                let msg = match &e {
                    ExecError::NeedsState { .. } => format!("`{}` {e}{ctx}", rule.name),
                    ExecError::Type(t) => {
                        format!("`{}`: cannot evaluate its check{ctx}: {t}", rule.name)
                    }
                };
                self.push(
                    FindingKind::Exec,
                    Severity::Error,
                    rule.name,
                    Some(l.lineno),
                    msg,
                    format!("{label} {}", c.code()),
                );
                if let Some(last) = self.findings.last_mut() {
                    last.needs = needs;
                }
            }
        }
    }

    /// Stable diffusion's `BEGIN` code, one `eval_accuracy` line at a time:
    /// `if 'metric' in md: agg[md['samples_count']]['value'][md['metric']] = v['value']`.
    /// It runs outside any `try`, so a Python error here crashes the official checker.
    fn aggregate(&mut self, l: &Line<'_>, fatal: &mut Vec<Finding>) {
        if self.agg_fatal {
            return;
        }
        let step = || -> Result<Option<(String, Value, Str)>, ExecError> {
            if !meta_contains(l.metadata, "metric")? {
                return Ok(None);
            }
            let sc = meta_item(l.metadata, "samples_count")?;
            let id = hash_key(&sc)?;
            let metric = meta_item(l.metadata, "metric")?;
            let metric_key: Str = match metric.as_ref() {
                Value::Str(s) => s.clone(),
                other => hash_key(other)?.into(),
            };
            Ok(Some((id, sc.into_owned(), metric_key)))
        };
        let (id, sc, metric_key) = match step() {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                self.agg_fatal = true;
                fatal.push(Finding {
                    severity: Severity::Error,
                    kind: FindingKind::Fatal,
                    line: Some(l.lineno),
                    key: Some("eval_accuracy".into()),
                    message: format!(
                        "`eval_accuracy` with a `metric` cannot be aggregated by `samples_count`: {e} (the official checker crashes here)"
                    ),
                    rule: "BEGIN (aggregation of eval_accuracy by samples_count)".into(),
                    source: self.file.name.clone(),
                });
                return;
            }
        };
        let entry = match self.agg.iter_mut().position(|e| e.id == id) {
            Some(i) => &mut self.agg[i],
            None => {
                self.agg.push(AggEntry {
                    id,
                    value: vec![("samples_count".into(), sc)],
                    line: l.lineno,
                });
                self.agg.last_mut().expect("just pushed")
            }
        };
        entry.line = l.lineno;
        match entry.value.iter_mut().find(|(k, _)| *k == metric_key) {
            Some(slot) => slot.1 = l.value.clone(),
            None => entry.value.push((metric_key, l.value.clone())),
        }
    }

    fn line(&mut self, l: &Line<'_>, enq: &mut Vec<Enqueue>, fatal: &mut Vec<Finding>) {
        if self.file.aggregate_eval && l.key == "eval_accuracy" {
            self.aggregate(l, fatal);
        }
        let Some(&ki) = self.index.get(l.key) else {
            return;
        };
        let file: &'static RuleFile = self.file;
        let rule: &'static KeyRule = &file.keys[ki];
        self.tallies[ki].add(l.lineno, l.value, rule.req == Some(Req::ExactlyOne));
        if !self.exec_done[ki] {
            for c in &rule.checks {
                let r = c.eval(l, &self.state);
                self.check_failed(rule, c, l, FindingKind::Check, r);
            }
            for p in &rule.post {
                if let Err(e) = self.post(p, l, enq) {
                    let msg = format!("`{}`: its POST action failed: {e}", rule.name);
                    self.push(
                        FindingKind::Post,
                        Severity::Error,
                        rule.name,
                        Some(l.lineno),
                        msg,
                        "POST".into(),
                    );
                    break;
                }
            }
        }
        if !rule.first_check.is_empty() && !self.first_done[ki] {
            self.first_done[ki] = true;
            for c in &rule.first_check {
                let r = c.eval(l, &self.state);
                self.check_failed(rule, c, l, FindingKind::FirstCheck, r);
            }
        }
        if let Some(c) = &rule.atleast_one {
            let slot = &mut self.atleast[ki];
            slot.0 += 1;
            match c.eval(l, &self.state) {
                Ok(true) => slot.1 += 1,
                Ok(false) => {}
                Err(e) => {
                    if !slot.2 {
                        slot.2 = true;
                        fatal.push(Finding {
                            severity: Severity::Error,
                            kind: FindingKind::Fatal,
                            line: Some(l.lineno),
                            key: Some(rule.name.into()),
                            message: format!(
                                "`{}` {} cannot be compared with the target: {e} (the official checker crashes here)",
                                rule.name,
                                l.value.to_json()
                            ),
                            rule: format!("ATLEAST_ONE_CHECK {}", c.code()),
                            source: file.name.clone(),
                        });
                    }
                }
            }
        }
        if l.key.contains("submission_") {
            self.exec_done[ki] = true;
        }
    }

    fn post(&mut self, p: &Post, l: &Line<'_>, enq: &mut Vec<Enqueue>) -> Result<(), ExecError> {
        let s = &mut self.state;
        match p {
            Post::Store(name) => s.set(name, l.value.clone()),
            Post::SetTrue(name) => s.set(name, Value::Bool(true)),
            Post::MinTimestamp(name) => {
                let cur = s.num(name)?;
                s.set(name, Value::Float(cur.min(l.time_ms)));
            }
            Post::EnqueueDivision => {
                enq.push(Enqueue::Division(l.value.clone()));
                let open = matches!(l.value, Value::Str(v) if v == "open");
                s.set("compile_time_mins", Value::Int(if open { 240 } else { 30 }));
            }
            Post::EnqueueBenchmark => {
                let d = match self.file.scope {
                    Scope::Division(d) | Scope::Benchmark(d, _) => d,
                    Scope::Common => Division::Closed,
                };
                enq.push(Enqueue::Benchmark(d, l.value.clone()));
            }
            Post::Custom(f) => f(l, s)?,
        }
        Ok(())
    }

    /// The end-of-log part: aggregated lines (stable diffusion), occurrence requirements,
    /// `ATLEAST_ONE_CHECK` verdicts.
    fn finish(mut self) -> Vec<Raw> {
        if self.file.aggregate_eval {
            let entries = std::mem::take(&mut self.agg);
            let md = Metadata::default();
            let mut enq = Vec::new();
            let mut fatal = Vec::new();
            for e in entries {
                let v = Value::Object(e.value);
                let l = Line {
                    key: "aggregated_eval_accuracy",
                    value: &v,
                    metadata: &md,
                    time_ms: 0.0,
                    lineno: e.line,
                };
                self.line(&l, &mut enq, &mut fatal);
            }
            for f in fatal {
                self.findings.push(Raw {
                    keyed: None,
                    needs: None,
                    finding: f,
                });
            }
        }
        let file = self.file;
        let mut alternatives: Vec<Vec<&'static str>> = Vec::new();
        for (ki, rule) in file.keys.iter().enumerate() {
            let t = &self.tallies[ki];
            let (_, passed, crashed) = self.atleast[ki];
            if let Some(c) = &rule.atleast_one
                && t.count > 0
                && passed == 0
                && !crashed
            {
                self.findings.push(Raw {
                    keyed: None,
                    needs: None,
                    finding: Finding {
                        severity: Severity::Error,
                        kind: FindingKind::Target,
                        line: Some(t.last_line),
                        key: Some(rule.name.into()),
                        message: format!(
                            "no `{}` reached the target{}: {} (of {} logged)",
                            rule.name,
                            file.context(),
                            c.words(),
                            t.count
                        ),
                        rule: format!("ATLEAST_ONE_CHECK {}", c.code()),
                        source: file.name.clone(),
                    },
                });
            }
            let Some(req) = rule.req else { continue };
            let rule_text = format!("REQ {req}");
            let ctx = file.context();
            match req {
                Req::Optional => {}
                Req::ExactlyOne if t.count != 1 => {
                    if t.count > 1 && t.all_same {
                        let msg = format!(
                            "`{}` must be logged exactly once{ctx}, found {} times with the same value (first at line {}; an error under --werror)",
                            rule.name, t.count, t.first_line
                        );
                        self.push(
                            FindingKind::Duplicate,
                            Severity::Warning,
                            rule.name,
                            Some(t.last_line),
                            msg,
                            rule_text,
                        );
                    } else if t.count > 1 {
                        let msg = format!(
                            "`{}` must be logged exactly once{ctx}, found {} times with different values: {} (first at line {})",
                            rule.name,
                            t.count,
                            t.distinct.join(", "),
                            t.first_line
                        );
                        self.push(
                            FindingKind::Duplicate,
                            Severity::Error,
                            rule.name,
                            Some(t.last_line),
                            msg,
                            rule_text,
                        );
                    } else {
                        let msg =
                            format!("`{}` must be logged exactly once{ctx}, found 0", rule.name);
                        self.push(
                            FindingKind::Missing,
                            Severity::Error,
                            rule.name,
                            None,
                            msg,
                            rule_text,
                        );
                    }
                }
                Req::AtLeastOne if t.count < 1 => {
                    let msg = format!("`{}` must be logged at least once{ctx}, found 0", rule.name);
                    self.push(
                        FindingKind::Missing,
                        Severity::Error,
                        rule.name,
                        None,
                        msg,
                        rule_text,
                    );
                }
                Req::AtLeast(n) if t.count < n as usize => {
                    let msg = format!(
                        "`{}` must be logged at least {n} times{ctx}, found {}",
                        rule.name, t.count
                    );
                    self.push(
                        FindingKind::Missing,
                        Severity::Error,
                        rule.name,
                        None,
                        msg,
                        rule_text,
                    );
                }
                Req::AtLeastOneOr(alts) => {
                    let mut set: Vec<&'static str> = alts.to_vec();
                    set.push(rule.name);
                    set.sort_unstable();
                    set.dedup();
                    if !alternatives.contains(&set) {
                        alternatives.push(set);
                    }
                }
                _ => {}
            }
        }
        for set in alternatives {
            let seen = set.iter().any(|k| {
                self.index
                    .get(k)
                    .is_some_and(|&i| self.tallies[i].count > 0)
            });
            if !seen {
                let names = set
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(" or ");
                self.findings.push(Raw {
                    keyed: None,
                    needs: None,
                    finding: Finding {
                        severity: Severity::Error,
                        kind: FindingKind::Alternatives,
                        line: None,
                        key: Some(set.join("|")),
                        message: format!("at least one of {names} must be logged"),
                        rule: format!("REQ AT_LEAST_ONE_OR({})", set.join(",")),
                        source: file.name.clone(),
                    },
                });
            }
        }
        self.findings
    }
}

#[derive(Clone, Debug)]
struct HistLine {
    lineno: usize,
    key: Str,
    value: Value,
    metadata: Metadata,
    time_ms: f64,
}

/// A streaming MLPerf Training compliance checker with the official checker's verdicts.
///
/// Feed records in log order with [`Checker::feed`] (and malformed lines with
/// [`Checker::feed_error`]); ask for a [`ComplianceReport`] at any point.
///
/// [`check_text`] and [`check_reader`] drive one for a whole log; use a `Checker` yourself
/// to check records as they are produced (the layer's live check does) or to read a log
/// that arrives piece by piece. Memory stays bounded once the benchmark is known: only what
/// the rules still need is kept. A report taken before the end says what is missing so far
/// (`run_stop` not logged yet is an error until it is).
///
/// ```
/// use mllog_core::compliance::{example_log, Checker, Division, Ruleset};
/// use mllog_core::keys::Benchmark;
/// use mllog_core::record::LogReader;
///
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// let mut checker = Checker::new(Ruleset::V6_1_0);
/// let mut reader = LogReader::new(log.as_bytes());
/// for line in reader.by_ref().take(5) {
///     let line = line.unwrap();
///     checker.feed(line.lineno, &line.record);
/// }
/// assert!(!checker.report().passed(false)); // the run has not even started
/// for line in reader {
///     let line = line.unwrap();
///     checker.feed(line.lineno, &line.record);
/// }
/// assert!(checker.run_started());
/// assert_eq!(checker.division(), Some(Division::Closed));
/// let report = checker.report();
/// assert!(report.passed(true), "{}", report.render_text("example", true));
/// ```
#[derive(Clone, Debug)]
pub struct Checker {
    set: &'static RulesetFiles,
    runs: Vec<Run>,
    /// Records of known keys, kept while a division or benchmark file may still be enqueued
    /// (an enqueued file is run over the whole log from its start, as the official checker does).
    history: Option<Vec<HistLine>>,
    other: Vec<Finding>,
    /// Malformed lines seen; the first [`MAX_PARSE_FINDINGS`] are findings of their own.
    parse_errors: usize,
    records: usize,
    division: Option<Division>,
    benchmark: Option<String>,
    first_seen: HashMap<&'static str, usize>,
    run_started: bool,
}

impl Checker {
    /// A checker for `ruleset`.
    pub fn new(ruleset: Ruleset) -> Checker {
        let set = rules(ruleset);
        Checker {
            set,
            runs: vec![Run::new(&set.common)],
            history: Some(Vec::new()),
            other: Vec::new(),
            parse_errors: 0,
            records: 0,
            division: None,
            benchmark: None,
            first_seen: HashMap::new(),
            run_started: false,
        }
    }

    /// The ruleset.
    pub fn ruleset(&self) -> Ruleset {
        self.set.ruleset
    }

    /// The division, once known.
    pub fn division(&self) -> Option<Division> {
        self.division
    }

    /// Whether a `run_start` record has been fed.
    pub fn run_started(&self) -> bool {
        self.run_started
    }

    /// Checks one record; `lineno` is its physical line number (1-based) for diagnostics.
    pub fn feed(&mut self, lineno: usize, record: &Record) {
        self.records += 1;
        let time_ms = match record.loose.as_deref().and_then(|l| l.time_ms) {
            Some(t) => t,
            None => record.time.wall_ns as f64 / 1e6,
        };
        if record.loose.as_deref().is_some_and(|l| l.key.is_some()) {
            // A key that is not a string matches no rule (the official checker's lookup of it
            // fails and it moves on), and `record.key` holds only its JSON text.
            return;
        }
        let key: &str = &record.key;
        if key == "run_start" {
            self.run_started = true;
        }
        let Ok(i) = self.set.all_keys.binary_search(&key) else {
            // No rule file of the ruleset has a rule for this key (and it is not
            // `eval_accuracy`, which aggregation reads): no run would do anything with it.
            return;
        };
        self.first_seen
            .entry(self.set.all_keys[i])
            .or_insert(lineno);
        if let Some(h) = &mut self.history {
            h.push(HistLine {
                lineno,
                key: record.key.clone(),
                value: record.value.clone(),
                metadata: record.metadata.clone(),
                time_ms,
            });
        }
        let line = Line {
            key,
            value: &record.value,
            metadata: &record.metadata,
            time_ms,
            lineno,
        };
        let mut enq = Vec::new();
        for run in &mut self.runs {
            run.line(&line, &mut enq, &mut self.other);
        }
        self.enqueue(enq);
    }

    /// What [`Checker::feed`] does with a record whose key no rule file has a rule for.
    fn count(&mut self, key: &str) {
        debug_assert!(self.set.all_keys.binary_search(&key).is_err());
        self.records += 1;
        if key == "run_start" {
            self.run_started = true;
        }
    }

    /// Records a line that holds `:::MLLOG ` but could not be parsed (the official checker
    /// fails such a log: "Log lines had parsing errors").
    pub fn feed_error(&mut self, error: &LineError) {
        self.parse_errors += 1;
        // One malformed line fails the log; a log of nothing but malformed lines must not
        // hold a finding per line in memory.
        if self.parse_errors > MAX_PARSE_FINDINGS {
            return;
        }
        self.other.push(Finding {
            severity: Severity::Error,
            kind: FindingKind::Parse,
            line: Some(error.lineno),
            key: None,
            message: format!("not a valid MLLOG record: {}", error.message),
            rule: "parser".into(),
            source: "mlp_parser".into(),
        });
    }

    fn enqueue(&mut self, mut queue: Vec<Enqueue>) {
        while !queue.is_empty() {
            let item = queue.remove(0);
            let (file, what) = match item {
                Enqueue::Division(v) => match v.as_str().and_then(Division::from_name) {
                    Some(d) => {
                        self.division = Some(d);
                        (Some(self.set.division_file(d)), String::new())
                    }
                    None => (
                        None,
                        format!(
                            "`submission_division` {} names no division rule file",
                            v.to_json()
                        ),
                    ),
                },
                Enqueue::Benchmark(d, v) => {
                    if let Some(name) = v.as_str() {
                        self.benchmark = Some(name.to_string());
                    }
                    match v.as_str().and_then(Benchmark::from_name).and_then(|b| self.set.benchmark_file(d, b)) {
                        Some(f) => (Some(f), String::new()),
                        None => (
                            None,
                            format!(
                                "`submission_benchmark` {} has no {} rules in ruleset {} (allowed: {})",
                                v.to_json(),
                                d.as_str(),
                                self.set.ruleset,
                                self.set.benchmarks().iter().map(|b| b.as_str()).collect::<Vec<_>>().join(", ")
                            ),
                        ),
                    }
                }
            };
            let Some(file) = file else {
                self.other.push(Finding {
                    severity: Severity::Error,
                    kind: FindingKind::Fatal,
                    line: None,
                    key: None,
                    message: format!("{what}; the remaining rules cannot be checked (the official checker crashes with FileNotFoundError)"),
                    rule: "enqueue_config".into(),
                    source: self.set.common.name.clone(),
                });
                self.history = None;
                continue;
            };
            let mut run = Run::new(file);
            if let Some(h) = &self.history {
                for hl in h {
                    run.line(&line_of(hl), &mut queue, &mut self.other);
                }
            }
            if matches!(file.scope, Scope::Benchmark(..)) {
                self.history = None;
            }
            self.runs.push(run);
        }
    }

    /// The report of the log so far, as if it ended here.
    pub fn report(&self) -> ComplianceReport {
        let mut raws: Vec<(usize, Raw)> = Vec::new();
        for (i, run) in self.runs.iter().enumerate() {
            raws.extend(run.clone().finish().into_iter().map(|r| (i, r)));
        }
        let mut findings: Vec<Finding> = raws
            .into_iter()
            .filter(|(i, r)| match r.keyed {
                // The official checker drops a keyed message when a later rule file has a rule
                // for the same key.
                Some(k) => !self.runs[i + 1..]
                    .iter()
                    .any(|later| later.index.contains_key(k)),
                None => true,
            })
            .map(|(_, mut r)| {
                if let Some(k) = r.needs {
                    match self.first_seen.get(k) {
                        Some(l) => r.finding.message.push_str(&format!(" (line {l})")),
                        None => r
                            .finding
                            .message
                            .push_str(&format!(" (`{k}` is never logged)")),
                    }
                }
                r.finding
            })
            .collect();
        findings.extend(self.other.iter().cloned());
        if self.parse_errors > MAX_PARSE_FINDINGS {
            findings.push(Finding {
                severity: Severity::Error,
                kind: FindingKind::Parse,
                line: None,
                key: None,
                message: format!(
                    "{} more lines are not valid MLLOG records ({} in all; the first {MAX_PARSE_FINDINGS} are listed)",
                    self.parse_errors - MAX_PARSE_FINDINGS,
                    self.parse_errors
                ),
                rule: "parser".into(),
                source: "mlp_parser".into(),
            });
        }
        if self.records == 0 {
            findings.push(Finding {
                severity: Severity::Error,
                kind: FindingKind::NoLines,
                line: None,
                key: None,
                message: "no MLLOG lines found (lines must contain `:::MLLOG ` followed by a JSON record)".into(),
                rule: "No log lines detected".into(),
                source: "mlp_compliance".into(),
            });
        }
        findings.sort_by_key(|f| f.line.unwrap_or(usize::MAX));
        ComplianceReport {
            ruleset: self.set.ruleset,
            division: self.division,
            benchmark: self.benchmark.clone(),
            rule_files: self
                .runs
                .iter()
                .map(|r| r.file.short_name().to_string())
                .collect(),
            records: self.records,
            findings,
        }
    }

    /// What is missing or wrong so far, for a report at `run_start`: every finding so far except
    /// missing keys that are normally logged after `run_start` (blocks, evals, `run_stop`) and
    /// unmet targets; notes when the division or benchmark rules are not known yet.
    pub fn pending_at_run_start(&self) -> ComplianceReport {
        let mut report = self.report();
        report.findings.retain(counts_at_run_start);
        let note = |msg: &str| Finding {
            severity: Severity::Note,
            kind: FindingKind::Info,
            line: None,
            key: None,
            message: msg.into(),
            rule: String::new(),
            source: String::new(),
        };
        if self.division.is_none() {
            report.findings.push(note(
                "`submission_division` not logged yet: division and benchmark rules not checked",
            ));
        } else if self.runs.len() < 3 && self.history.is_some() {
            report.findings.push(note(
                "`submission_benchmark` not logged yet: benchmark rules not checked",
            ));
        }
        report
    }
}

/// Whether a finding of a check of the log so far still counts when the log ends at
/// `run_start`: a key missing that normally comes later does not (`run_stop`, the
/// evaluations, the blocks), nor a target not reached, nor alternatives of which none came
/// yet. [`Checker::pending_at_run_start`] keeps these; so does the layer's live check with
/// the rules read at run time, on the rule engine's findings.
pub fn counts_at_run_start(f: &Finding) -> bool {
    match f.kind {
        FindingKind::Missing => !f
            .key
            .as_deref()
            .is_some_and(|k| AFTER_RUN_START.contains(&k)),
        FindingKind::Target | FindingKind::Alternatives | FindingKind::NoLines => false,
        _ => true,
    }
}

/// Checks a whole log held in memory.
pub fn check_text(ruleset: Ruleset, text: &str) -> ComplianceReport {
    check_reader(ruleset, text.as_bytes()).unwrap_or_else(|_| Checker::new(ruleset).report())
}

/// Checks a log from a reader (streaming; constant memory once the benchmark is known).
pub fn check_reader<R: BufRead>(ruleset: Ruleset, input: R) -> std::io::Result<ComplianceReport> {
    let (mut checkers, _) = drive(vec![Checker::new(ruleset)], false, input)?;
    Ok(checkers.remove(0).report())
}

/// Checks a log from a reader under each of `rulesets` in one streaming pass: one report per
/// ruleset, in the order given (what a ruleset inference compares).
pub fn check_reader_each<R: BufRead>(
    rulesets: &[Ruleset],
    input: R,
) -> std::io::Result<Vec<ComplianceReport>> {
    let all = rulesets.iter().map(|&r| Checker::new(r)).collect();
    let (checkers, _) = drive(all, false, input)?;
    Ok(checkers.iter().map(Checker::report).collect())
}

/// Checks a log from a reader under the ruleset [`detect_ruleset`] would pick, in one streaming
/// pass (standard input cannot be read twice): every ruleset's checker reads the log until its
/// first `submission_benchmark` record decides, then only the chosen one goes on. Returns the
/// report and whether the ruleset was detected (false: the default).
pub fn check_reader_detect<R: BufRead>(input: R) -> std::io::Result<(ComplianceReport, bool)> {
    let all = Ruleset::ALL.iter().map(|&r| Checker::new(r)).collect();
    let (checkers, detected) = drive(all, true, input)?;
    let chosen = checkers
        .iter()
        .position(|c| c.ruleset() == Ruleset::DEFAULT)
        .unwrap_or(0);
    Ok((checkers[chosen].report(), detected))
}

/// [`check_reader_detect`], and in the same pass the log under every older ruleset that allows
/// its benchmark too: `(report, detected, older reports, oldest first)`. What `mllog check`
/// without `--ruleset` tells: which ruleset it used, and where else the log would pass.
pub fn check_reader_detect_older<R: BufRead>(
    input: R,
) -> std::io::Result<(ComplianceReport, bool, Vec<ComplianceReport>)> {
    let all = Ruleset::ALL.iter().map(|&r| Checker::new(r)).collect();
    let (checkers, detected) = drive_keep(all, true, true, input)?;
    let mut reports: Vec<ComplianceReport> = checkers.iter().map(Checker::report).collect();
    reports.sort_by_key(|r| r.ruleset);
    let chosen = reports.pop().expect("the chosen ruleset's checker is kept");
    Ok((chosen, detected, reports))
}

/// Feeds a log to `checkers`; with `detect`, keeps only the checker of the ruleset the first
/// `submission_benchmark` picks (see [`ruleset_for_benchmark`]).
fn drive<R: BufRead>(
    checkers: Vec<Checker>,
    detect: bool,
    input: R,
) -> std::io::Result<(Vec<Checker>, bool)> {
    drive_keep(checkers, detect, false, input)
}

/// [`drive`]; with `keep_older`, detection also keeps the checkers of older rulesets that
/// allow the benchmark.
fn drive_keep<R: BufRead>(
    checkers: Vec<Checker>,
    detect: bool,
    keep_older: bool,
    input: R,
) -> std::io::Result<(Vec<Checker>, bool)> {
    let mut stream = StreamCheck::with(checkers, detect, keep_older);
    let mut reader = LogReader::new(input);
    let mut record = Record::empty();
    loop {
        let item = {
            let mut wanted = |key: &str| stream.wants(key);
            reader.next_record_into(&mut record, &mut wanted)
        };
        match item {
            None => break,
            Some(Ok((lineno, true))) => stream.feed(lineno, &record),
            Some(Ok((_, false))) => stream.count(&record.key),
            Some(Err(e)) => stream.feed_error(&e),
        }
    }
    if let Some(e) = reader.io_error() {
        return Err(std::io::Error::new(e.kind(), e.to_string()));
    }
    Ok(stream.into_checkers())
}

/// A log checked as it arrives, with the ruleset chosen as `mllog check` chooses it: what
/// [`check_reader_detect_older`] (or, with a ruleset given, [`check_reader`]) does for a whole
/// reader, one record at a time, for a log another process is still writing.
///
/// Without a ruleset, every ruleset's checker reads the log until its first
/// `submission_benchmark` decides (see [`detect_ruleset`]); then the chosen one goes on, with
/// the older rulesets that allow the benchmark too. The whole-log functions are this type
/// driven over a reader, so its verdicts are theirs.
///
/// ```
/// use mllog_core::compliance::{example_log, check_reader_detect_older, Division, Ruleset, StreamCheck};
/// use mllog_core::keys::Benchmark;
/// use mllog_core::record::LogReader;
///
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Llama2_70bLora, Division::Closed).unwrap();
/// let mut live = StreamCheck::new(None);
/// for line in LogReader::new(log.as_bytes()) {
///     match line {
///         Ok(line) => live.feed(line.lineno, &line.record),
///         Err(e) => live.feed_error(&e),
///     }
/// }
/// assert!(live.current().run_started());
/// let (report, detected, older) = live.finish();
/// let (whole, whole_detected, whole_older) = check_reader_detect_older(log.as_bytes()).unwrap();
/// assert_eq!((report.findings, detected), (whole.findings, whole_detected));
/// assert_eq!(older.len(), whole_older.len());
/// ```
#[derive(Clone, Debug)]
pub struct StreamCheck {
    checkers: Vec<Checker>,
    /// The keys the rules read, by length: a key is looked up among the few of its length.
    by_len: Vec<Vec<&'static str>>,
    undecided: bool,
    detected: bool,
    keep_older: bool,
}

impl StreamCheck {
    /// Checks against `ruleset`, or, with `None`, the ruleset the log's first
    /// `submission_benchmark` picks (and the older ones that allow its benchmark).
    pub fn new(ruleset: Option<Ruleset>) -> StreamCheck {
        match ruleset {
            Some(r) => StreamCheck::with(vec![Checker::new(r)], false, false),
            None => StreamCheck::with(
                Ruleset::ALL.iter().map(|&r| Checker::new(r)).collect(),
                true,
                true,
            ),
        }
    }

    fn with(checkers: Vec<Checker>, detect: bool, keep_older: bool) -> StreamCheck {
        let mut by_len: Vec<Vec<&'static str>> = Vec::new();
        for c in &checkers {
            for &k in &c.set.all_keys {
                if by_len.len() <= k.len() {
                    by_len.resize(k.len() + 1, Vec::new());
                }
                if !by_len[k.len()].contains(&k) {
                    by_len[k.len()].push(k);
                }
            }
        }
        StreamCheck {
            checkers,
            by_len,
            undecided: detect,
            detected: false,
            keep_older,
        }
    }

    /// Whether any rule reads records of `key`. A record of another key need not be parsed
    /// beyond its key ([`LogReader::next_record_into`](crate::record::LogReader::next_record_into)
    /// with this as its filter): give it to [`StreamCheck::count`] instead of
    /// [`StreamCheck::feed`], with the same verdict.
    pub fn wants(&self, key: &str) -> bool {
        self.by_len
            .get(key.len())
            .is_some_and(|ks| ks.contains(&key))
    }

    /// Checks one record; `lineno` is its physical line number (1-based).
    pub fn feed(&mut self, lineno: usize, record: &Record) {
        if self.undecided
            && record.key == "submission_benchmark"
            && record.loose.as_deref().is_none_or(|l| l.key.is_none())
        {
            self.undecided = false;
            let (r, d) = ruleset_for_benchmark(&record.value);
            self.detected = d;
            let bench = record.value.as_str().and_then(Benchmark::from_name);
            let keep_older = self.keep_older;
            self.checkers.retain(|c| {
                c.ruleset() == r
                    || (keep_older
                        && c.ruleset() < r
                        && bench.is_some_and(|b| rules(c.ruleset()).allows(b)))
            });
        }
        for c in &mut self.checkers {
            c.feed(lineno, record);
        }
    }

    /// A record that no rule reads ([`StreamCheck::wants`] is false for its key), only
    /// counted: what [`StreamCheck::feed`] does with it.
    pub fn count(&mut self, key: &str) {
        for c in &mut self.checkers {
            c.count(key);
        }
    }

    /// A line that holds `:::MLLOG ` but is not a valid record.
    pub fn feed_error(&mut self, error: &LineError) {
        for c in &mut self.checkers {
            c.feed_error(error);
        }
    }

    /// The checker of the ruleset in use: the chosen one, or the default while no
    /// `submission_benchmark` has decided.
    pub fn current(&self) -> &Checker {
        let want = if self.undecided {
            Ruleset::DEFAULT
        } else {
            self.checkers
                .iter()
                .map(Checker::ruleset)
                .max()
                .unwrap_or(Ruleset::DEFAULT)
        };
        self.checkers
            .iter()
            .find(|c| c.ruleset() == want)
            .unwrap_or(&self.checkers[0])
    }

    /// Whether the ruleset was picked from the log's `submission_benchmark` (false: given, or
    /// the default).
    pub fn detected(&self) -> bool {
        self.detected
    }

    fn into_checkers(mut self) -> (Vec<Checker>, bool) {
        if self.undecided {
            self.checkers.retain(|c| c.ruleset() == Ruleset::DEFAULT);
        }
        (self.checkers, self.detected)
    }

    /// The verdict on the log as it ends here: `(report, detected, older reports, oldest
    /// first)`, as [`check_reader_detect_older`] returns them (with a ruleset given, the
    /// older reports are empty).
    pub fn finish(self) -> (ComplianceReport, bool, Vec<ComplianceReport>) {
        let (checkers, detected) = self.into_checkers();
        let mut reports: Vec<ComplianceReport> = checkers.iter().map(Checker::report).collect();
        reports.sort_by_key(|r| r.ruleset);
        let chosen = reports
            .pop()
            .expect("a stream check keeps the chosen ruleset's checker");
        (chosen, detected, reports)
    }
}

/// The ruleset for a log whose first `submission_benchmark` has `value`: the default unless it
/// names a benchmark the default does not allow, then the newest ruleset that allows it.
fn ruleset_for_benchmark(value: &Value) -> (Ruleset, bool) {
    match value.as_str().and_then(Benchmark::from_name) {
        Some(b) => ruleset_of(b),
        None => (Ruleset::DEFAULT, false),
    }
}

/// The ruleset a log of `benchmark` is checked against when none is given, as `mllog check`
/// picks it: the default, unless the default does not allow the benchmark, then the newest
/// ruleset that does; and whether it is not the default.
///
/// ```
/// use mllog_core::compliance::{ruleset_of, Ruleset};
/// use mllog_core::keys::Benchmark;
///
/// assert_eq!(ruleset_of(Benchmark::Llama2_70bLora), (Ruleset::DEFAULT, false));
/// ```
pub fn ruleset_of(benchmark: Benchmark) -> (Ruleset, bool) {
    if rules(Ruleset::DEFAULT).allows(benchmark) {
        return (Ruleset::DEFAULT, false);
    }
    match Ruleset::ALL
        .iter()
        .rev()
        .copied()
        .find(|r| rules(*r).allows(benchmark))
    {
        Some(r) => (r, true),
        None => (Ruleset::DEFAULT, false),
    }
}

/// Picks the ruleset for a log, conservatively: the default (6.1.0) unless the log's first
/// `submission_benchmark` names a benchmark that 6.1.0 does not allow, in which case the newest
/// ruleset that allows it (`llama31_405b`, `dlrm_dcnv2` → 6.0.0; `bert`, `retinanet`, `rgat` →
/// 5.1.0; `stable_diffusion` → 5.0.0). Returns the ruleset and whether it was detected (false:
/// default).
pub fn detect_ruleset(text: &str) -> (Ruleset, bool) {
    for line in text.lines() {
        if !line.contains("submission_benchmark") {
            continue;
        }
        let Ok(Some(rec)) = crate::record::parse_line(line) else {
            continue;
        };
        if rec.loose.is_some_and(|l| l.key.is_some()) || rec.key != "submission_benchmark" {
            continue;
        }
        return ruleset_for_benchmark(&rec.value);
    }
    (Ruleset::DEFAULT, false)
}
