//! The official checker's algorithm (`mlp_compliance.ComplianceChecker`), step for step: the
//! config queue, for each config the `BEGIN` code, one pass over the log lines (`PRE`,
//! `CHECK`, `POST` for every occurrence, or once for `submission_*` keys; `FIRST_CHECK`;
//! `ATLEAST_ONE_CHECK`), the `REQ` counts, `AT_LEAST_ONE_OR` groups and the `END` block; the
//! messages kept as the checker keeps them (one per key, dropped when a later config has a
//! rule for the key; warnings apart unless `--werror`).

use super::eval::{Env, Names};
use super::ir::Code;
use super::lines::Lines;
use super::obj::{pretty_json, Dict, Func, Obj, Raise};
use super::ops::get_item;
use super::rules::{RuleFile, Snippet};
use super::Library;
use crate::compliance::report::{Finding, FindingKind, Severity};

/// How many unparsable lines are listed one by one (the scan keeps as many).
const MAX_PARSE_FINDINGS: usize = super::log::MAX_BAD_LINES;

/// The official checker raised: the check ends with what it had.
pub(crate) struct Crash(pub(crate) String);

/// The checker's message store.
pub(crate) struct Messages {
    werror: bool,
    warnings: Vec<(String, Finding)>,
    overwritable: Vec<(String, Finding)>,
    not_overwritable: Vec<Finding>,
}

impl Messages {
    pub(crate) fn new(werror: bool) -> Messages {
        Messages {
            werror,
            warnings: Vec::new(),
            overwritable: Vec::new(),
            not_overwritable: Vec::new(),
        }
    }

    fn put(&mut self, f: Finding, key: Option<&str>) {
        match key {
            // `if key:`: an empty key is no key.
            Some(k) if !k.is_empty() => match self.overwritable.iter_mut().find(|(x, _)| x == k) {
                Some(slot) => slot.1 = f,
                None => self.overwritable.push((k.to_string(), f)),
            },
            _ => self.not_overwritable.push(f),
        }
    }

    fn warn(&mut self, f: Finding, key: &str) {
        if self.werror {
            self.put(f, Some(key));
        } else {
            match self.warnings.iter_mut().find(|(x, _)| x == key) {
                Some(slot) => slot.1 = f,
                None => self.warnings.push((key.to_string(), f)),
            }
        }
    }

    pub(crate) fn add(&mut self, f: Finding) {
        self.not_overwritable.push(f);
    }

    /// The findings in the order the checker logs its messages.
    pub(crate) fn into_findings(self) -> Vec<Finding> {
        let mut out: Vec<Finding> = self.warnings.into_iter().map(|(_, f)| f).collect();
        out.extend(self.overwritable.into_iter().map(|(_, f)| f));
        out.extend(self.not_overwritable);
        out
    }
}

fn finding(
    kind: FindingKind,
    line: Option<usize>,
    key: Option<&str>,
    message: String,
    rule: String,
    source: &str,
) -> Finding {
    Finding {
        severity: if kind == FindingKind::Duplicate {
            Severity::Warning
        } else {
            Severity::Error
        },
        kind,
        line,
        key: key.map(str::to_string),
        message,
        rule,
        source: source.to_string(),
    }
}

/// A log line's fields the run reads (the text ones only for messages).
struct LineView {
    obj: Obj,
    key: Obj,
    value: Obj,
    phys: usize,
}

impl LineView {
    fn of(obj: &Obj) -> LineView {
        let Obj::Line(l) = obj else {
            unreachable!("the log lines are LogLine objects")
        };
        let b = l.borrow();
        LineView {
            obj: obj.clone(),
            key: b.key.clone(),
            value: b.value.clone(),
            phys: b.phys,
        }
    }

    fn field(&self, f: fn(&super::obj::LogLine) -> &Obj) -> String {
        match &self.obj {
            Obj::Line(l) => f(&l.borrow()).to_str(),
            _ => String::new(),
        }
    }

    fn full(&self) -> String {
        self.field(|l| &l.full_string)
    }

    fn lineno(&self) -> String {
        self.field(|l| &l.lineno)
    }
}

/// One run of the checker over parsed lines.
pub(crate) struct Run<'a> {
    pub(crate) lib: &'a Library,
    pub(crate) msgs: Messages,
    pub(crate) applied: Vec<String>,
    /// A rule file the queue reached that cannot be run: the check has no verdict.
    pub(crate) load_error: Option<super::LoadError>,
    /// The locals of a record's snippet (`ll` and `v`), kept from one snippet to the next so
    /// that each does not allocate a namespace of its own.
    pub(crate) locals: Names,
}

impl Run<'_> {
    /// `check_loglines`: the config queue.
    pub(crate) fn check_loglines(&mut self, lines: &mut Lines, start: &str) -> Result<(), Crash> {
        let empty = lines.len() == 0;
        if empty {
            self.msgs.add(finding(
                FindingKind::NoLines,
                None,
                None,
                "No log lines detected".into(),
                String::new(),
                "mlp_compliance",
            ));
        }
        let mut queue: Vec<Obj> = vec![Obj::str(start)];
        while !queue.is_empty() {
            let current = queue.remove(0);
            let Obj::Str(name) = &current else {
                return Err(Crash(format!(
                    "TypeError: join() argument must be str, bytes, or os.PathLike object, not '{}' (enqueue_config of {})",
                    current.type_name(),
                    current.repr()
                )));
            };
            let file = match self.lib.file(name) {
                Ok(Some(f)) => f,
                Ok(None) => {
                    let shown = self.lib.dir.join(&**name);
                    self.msgs.add(finding(
                        FindingKind::Fatal,
                        None,
                        None,
                        format!("Could not find config file: {}", shown.display()),
                        "enqueue_config".into(),
                        name,
                    ));
                    return Err(Crash(format!(
                        "FileNotFoundError: [Errno 2] No such file or directory: '{}'",
                        shown.display()
                    )));
                }
                Err(e) => {
                    let why = Crash(e.to_string());
                    self.load_error = Some(e);
                    return Err(why);
                }
            };
            self.applied.push(name.to_string());
            self.configured_checks(lines, &file, name, &mut queue)?;
        }
        Ok(())
    }

    fn state(&self) -> Names {
        checker_globals()
    }

    fn pretty_s(state: &Names) -> Option<String> {
        state.get("s").and_then(pretty_json)
    }

    /// `configured_checks` for one rule file.
    fn configured_checks(
        &mut self,
        lines: &mut Lines,
        file: &RuleFile,
        name: &str,
        queue: &mut Vec<Obj>,
    ) -> Result<(), Crash> {
        let mut state = self.state();
        if let Some(begin) = &file.begin {
            // `exec(CODE, state, locals())`: the checker's own locals, of which the rule files
            // read `loglines` and `s`.
            let mut locals = Names::default();
            if begin.text.contains("loglines") {
                let all = lines
                    .list()
                    .map_err(|e| Crash(format!("{e} (building the lines for {name})")))?;
                locals.insert("loglines".into(), all);
            }
            locals.insert("s".into(), state["s"].clone());
            locals.insert(
                "config_file".into(),
                Obj::str(&self.lib.dir.join(name).to_string_lossy()),
            );
            let mut env = Env {
                globals: &mut state,
                locals: Some(&mut locals),
                enqueued: queue,
            };
            let r = env.run(&begin.code);
            self.note_limit(&r, "BEGIN", begin, name);
            r.map_err(|e| Crash(format!("{e} (in the BEGIN code of {name})")))?;
        }
        let index: rustc_hash::FxHashMap<&str, usize> = file
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.name.as_str(), i))
            .collect();
        let n = file.keys.len();
        // The checker drops messages of earlier configs about keys this one has rules for.
        self.msgs
            .overwritable
            .retain(|(k, _)| !index.contains_key(k.as_str()));
        let mut reported: Vec<Vec<Obj>> = vec![Vec::new(); n];
        let mut executed = vec![false; n];
        let mut first_seen = vec![false; n];
        let mut atleast: Vec<(usize, usize)> = Vec::new(); // (key index, passes), first-seen order
        let total = lines.len();
        let value_key = Obj::str("value");
        let wanted = lines.wanted_keys(|k| index.contains_key(k));
        let mut from = 0;
        loop {
            let obj = match lines.next(from, total, &wanted) {
                Ok(Some((at, obj))) => {
                    from = at + 1;
                    obj
                }
                Ok(None) => break,
                Err(e) => return Err(Crash(e)),
            };
            let line = LineView::of(&obj);
            let Obj::Str(key) = &line.key else { continue };
            let Some(&ki) = index.get(&**key) else {
                continue;
            };
            let Ok(value) = get_item(&line.value, &value_key) else {
                continue;
            };
            reported[ki].push(value);
            let rule = &file.keys[ki];
            if !executed[ki] {
                if let Some(pre) = &rule.pre {
                    self.exec_line(&line, pre, &mut state, queue, "PRE", name);
                }
                for c in &rule.check {
                    self.check_line(&line, c, &mut state, queue, name, "CHECK")?;
                }
                if let Some(post) = &rule.post {
                    self.exec_line(&line, post, &mut state, queue, "POST", name);
                }
            }
            if !rule.first_check.is_empty() && !first_seen[ki] {
                first_seen[ki] = true;
                for c in &rule.first_check {
                    self.check_line(&line, c, &mut state, queue, name, "FIRST_CHECK")?;
                }
            }
            if let Some(c) = &rule.atleast_one {
                let slot = match atleast.iter().position(|(k, _)| *k == ki) {
                    Some(p) => p,
                    None => {
                        atleast.push((ki, 0));
                        atleast.len() - 1
                    }
                };
                // Outside any `try` in the checker: an error here ends the check.
                let r = self.eval_line(&line, &c.code, &mut state, queue);
                self.note_limit(&r, "ATLEAST_ONE_CHECK", c, name);
                let ok = r.map_err(|e| {
                    Crash(format!(
                        "{e} (ATLEAST_ONE_CHECK of '{key}' in {name}, on line {} of the log)",
                        line.phys
                    ))
                })?;
                if ok.truthy() {
                    atleast[slot].1 += 1;
                }
            }
            if key.contains("submission_") {
                executed[ki] = true;
            }
        }
        for (ki, passes) in atleast {
            if passes == 0 {
                let rule = &file.keys[ki];
                let text = rule.atleast_one.as_ref().map_or("", |c| c.text.as_str());
                self.msgs.add(finding(
                    FindingKind::Target,
                    None,
                    Some(&rule.name),
                    format!("Failed checks for {} : {}", rule.name, text),
                    format!("ATLEAST_ONE_CHECK {}", text.trim()),
                    name,
                ));
            }
        }
        self.requirements(file, name, &reported)?;
        if let Some(end) = &file.end {
            if let Some(pre) = &end.pre {
                // `exec(PRE, state)`: the state is globals and locals both; outside any `try`.
                let mut env = Env {
                    globals: &mut state,
                    locals: None,
                    enqueued: queue,
                };
                let r = env.run(&pre.code);
                self.note_limit(&r, "END PRE", pre, name);
                r.map_err(|e| Crash(format!("{e} (in the END PRE code of {name})")))?;
            }
            for c in &end.check {
                let r = {
                    let mut env = Env {
                        globals: &mut state,
                        locals: None,
                        enqueued: queue,
                    };
                    env.run(&c.code)
                };
                self.note_limit(&r, "END CHECK", c, name);
                let s = Self::pretty_s(&state);
                match r {
                    Ok(v) if v.truthy() => {}
                    Ok(_) if s.is_some() => self.msgs.add(finding(
                        FindingKind::Check,
                        None,
                        None,
                        format!(
                            "failed test: {}\ncurrent context[s]={}",
                            c.text,
                            s.unwrap_or_default()
                        ),
                        format!("END CHECK {}", c.text.trim()),
                        name,
                    )),
                    _ => {
                        let s = s.ok_or_else(|| {
                            Crash("TypeError: the state `s` is not JSON serializable".into())
                        })?;
                        self.msgs.add(finding(
                            FindingKind::Exec,
                            None,
                            None,
                            format!(
                                "Failed executing CHECK code:\n{}\ncurrent context[s]={s}",
                                c.text
                            ),
                            format!("END CHECK {}", c.text.trim()),
                            name,
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn eval_line(
        &mut self,
        line: &LineView,
        code: &Code,
        state: &mut Names,
        queue: &mut Vec<Obj>,
    ) -> Result<Obj, Raise> {
        // Each snippet sees `ll` and `v` alone, as the checker's fresh dict gives them: the
        // kept map is refilled in place, and cleared only where a snippet added or deleted a
        // name.
        let locals = &mut self.locals;
        let refilled = locals.len() == 2
            && locals
                .get_mut("ll")
                .map(|l| *l = line.obj.clone())
                .is_some()
            && locals
                .get_mut("v")
                .map(|v| *v = line.value.clone())
                .is_some();
        if !refilled {
            locals.clear();
            locals.insert("ll".into(), line.obj.clone());
            locals.insert("v".into(), line.value.clone());
        }
        let mut env = Env {
            globals: state,
            locals: Some(locals),
            enqueued: queue,
        };
        env.run(code)
    }

    /// Keeps the first raise at one of the engine's limits: the check then has no verdict.
    fn note_limit(&mut self, r: &Result<Obj, Raise>, what: &str, snippet: &Snippet, file: &str) {
        if let Err(e) = r
            && e.limit
            && self.load_error.is_none()
        {
            self.load_error = Some(super::LoadError::Limit {
                file: file.to_string(),
                what: what.to_string(),
                snippet: snippet.text.trim().to_string(),
                message: e.to_string(),
            });
        }
    }

    /// `run_check_exec`: PRE or POST.
    fn exec_line(
        &mut self,
        line: &LineView,
        code: &Snippet,
        state: &mut Names,
        queue: &mut Vec<Obj>,
        action: &str,
        name: &str,
    ) {
        let r = self.eval_line(line, &code.code, state, queue);
        self.note_limit(&r, action, code, name);
        if let Err(e) = r {
            let key = line.key.to_str();
            self.msgs.put(
                Finding {
                    severity: Severity::Error,
                    kind: FindingKind::Post,
                    line: Some(line.phys),
                    key: Some(key.clone()),
                    message: format!(
                        "Failed executing code {action} code triggered by line :\n{}\n({e})",
                        line.full()
                    ),
                    rule: format!("{action} {}", code.text.trim()),
                    source: name.to_string(),
                },
                Some(&key),
            );
        }
    }

    /// `run_check_eval`: one test of a CHECK or FIRST_CHECK.
    fn check_line(
        &mut self,
        line: &LineView,
        test: &Snippet,
        state: &mut Names,
        queue: &mut Vec<Obj>,
        name: &str,
        label: &str,
    ) -> Result<(), Crash> {
        let r = self.eval_line(line, &test.code, state, queue);
        self.note_limit(&r, label, test, name);
        if matches!(&r, Ok(v) if v.truthy()) {
            return Ok(());
        }
        let key = line.key.to_str();
        let s = Self::pretty_s(state);
        let failed = match &r {
            Ok(_) => match (&s, pretty_json(&line.value)) {
                (Some(s), Some(v)) => Some(format!(
                    "CHECK for '{key}' failed in line {}:\n{}\nfailed test: {}\ncurrent context[s]={s}\ncurrent line[v]={v}",
                    line.lineno(),
                    line.full(),
                    test.text
                )),
                // Building the message raised: the checker's `except` reports it instead.
                _ => None,
            },
            Err(_) => None,
        };
        let (kind, message) = match failed {
            Some(m) => (FindingKind::Check, m),
            None => {
                let s = s.ok_or_else(|| {
                    Crash("TypeError: the state `s` is not JSON serializable".into())
                })?;
                let why = match r {
                    Err(e) => format!("\n({e})"),
                    Ok(_) => String::new(),
                };
                (
                    FindingKind::Exec,
                    format!(
                        "Failed executing CHECK code:\n{}\ntriggered by line:\n{}\ncurrent context[s]={s}{why}",
                        test.text,
                        line.full()
                    ),
                )
            }
        };
        self.msgs.put(
            Finding {
                severity: Severity::Error,
                kind,
                line: Some(line.phys),
                key: Some(key.clone()),
                message,
                rule: format!("{label} {}", test.text.trim()),
                source: name.to_string(),
            },
            Some(&key),
        );
        Ok(())
    }

    /// The `REQ` counts and the `AT_LEAST_ONE_OR` groups.
    fn requirements(
        &mut self,
        file: &RuleFile,
        name: &str,
        reported: &[Vec<Obj>],
    ) -> Result<(), Crash> {
        let mut groups: Vec<Vec<String>> = Vec::new();
        for (ki, rule) in file.keys.iter().enumerate() {
            let Some(req) = rule.req.as_deref() else {
                continue;
            };
            let k = rule.name.as_str();
            let vals = &reported[ki];
            let n = vals.len();
            let rule_text = format!("REQ {req}");
            if req == "OPTIONAL" && n == 0 {
                continue;
            }
            if req == "EXACTLY_ONE" && n != 1 {
                let all_same = vals
                    .first()
                    .is_none_or(|first| vals.iter().all(|x| super::obj::same(x, first)));
                if n > 0 && all_same {
                    self.msgs.warn(
                        finding(
                            FindingKind::Duplicate,
                            None,
                            Some(k),
                            format!("Required EXACTLY_ONE occurrence of '{k}' but found {n}"),
                            rule_text.clone(),
                            name,
                        ),
                        k,
                    );
                } else {
                    let mut distinct: Vec<String> = Vec::new();
                    for v in vals {
                        let t = v.to_str();
                        if !distinct.contains(&t) {
                            distinct.push(t);
                        }
                    }
                    let with = if n > 0 {
                        format!(" with different values: [{}]", distinct.join(", "))
                    } else {
                        String::new()
                    };
                    let kind = if n == 0 {
                        FindingKind::Missing
                    } else {
                        FindingKind::Duplicate
                    };
                    let mut f = finding(
                        kind,
                        None,
                        Some(k),
                        format!("Required EXACTLY_ONE occurrence of '{k}' but found {n}{with}"),
                        rule_text.clone(),
                        name,
                    );
                    f.severity = Severity::Error;
                    self.msgs.put(f, Some(k));
                }
            }
            if req == "AT_LEAST_ONE" && n < 1 {
                self.msgs.put(
                    finding(
                        FindingKind::Missing,
                        None,
                        Some(k),
                        format!("Required AT_LEAST_ONE occurrence of '{k}' but found {n}"),
                        rule_text.clone(),
                        name,
                    ),
                    Some(k),
                );
            }
            if let Some(rest) = req.strip_prefix("AT_LEAST(") {
                let inner = &rest[..rest.len().saturating_sub(1)];
                let want: usize = inner
                    .trim()
                    .parse()
                    .map_err(|_| Crash(format!("ValueError: invalid literal for int() with base 10: '{inner}' (REQ {req} of '{k}' in {name})")))?;
                if n < want {
                    self.msgs.put(
                        finding(
                            FindingKind::Missing,
                            None,
                            Some(k),
                            format!("Required AT_LEAST({want}) occurrence of '{k}' but found {n}"),
                            rule_text.clone(),
                            name,
                        ),
                        Some(k),
                    );
                }
            }
            if let Some(rest) = req.strip_prefix("AT_LEAST_ONE_OR") {
                // `string[len('AT_LEAST_ONE_OR('):-1].split(',')`
                let inner = rest.get(1..rest.len().saturating_sub(1)).unwrap_or("");
                let mut set: Vec<String> = vec![k.to_string()];
                for a in inner.split(',') {
                    let a = a.trim_matches(|c: char| c.is_whitespace()).to_string();
                    if !set.contains(&a) {
                        set.push(a);
                    }
                }
                set.sort();
                if !groups.contains(&set) {
                    groups.push(set);
                }
            }
        }
        for set in groups {
            let mut any = false;
            for a in &set {
                let Some(i) = file.keys.iter().position(|r| &r.name == a) else {
                    return Err(Crash(format!(
                        "KeyError: '{a}' (AT_LEAST_ONE_OR names a key {name} has no rule for)"
                    )));
                };
                any |= !reported[i].is_empty();
            }
            if !any {
                let names: Vec<String> = set.iter().map(|s| format!("'{s}'")).collect();
                self.msgs.add(finding(
                    FindingKind::Alternatives,
                    None,
                    Some(&set.join("|")),
                    format!("Required AT_LEAST_ONE occurrence of {}", names.join(" or ")),
                    format!("REQ AT_LEAST_ONE_OR({})", set.join(",")),
                    name,
                ));
            }
        }
        Ok(())
    }
}

/// Findings for unparsable lines and the checker's one message about them.
pub(crate) fn parse_findings(msgs: &mut Messages, errors: &[super::log::BadLine], count: usize) {
    if count == 0 {
        return;
    }
    for e in errors.iter().take(MAX_PARSE_FINDINGS) {
        msgs.add(finding(
            FindingKind::Parse,
            Some(e.phys),
            None,
            format!("not a valid record: {}", e.message),
            "parser".into(),
            "mlp_parser",
        ));
    }
    if count > MAX_PARSE_FINDINGS {
        msgs.add(finding(
            FindingKind::Parse,
            None,
            None,
            format!(
                "{} more unparsable lines ({} in all)",
                count - MAX_PARSE_FINDINGS,
                count
            ),
            "parser".into(),
            "mlp_parser",
        ));
    }
    msgs.add(finding(
        FindingKind::Parse,
        None,
        None,
        "Log lines had parsing errors.".into(),
        "parser".into(),
        "mlp_compliance",
    ));
}

/// The globals a snippet sees, as the checker's `exec`/`eval` get them: the state dict `s`,
/// `enqueue_config`, `is_integer` and `math`.
fn checker_globals() -> Names {
    let mut g = Names::default();
    g.insert("enqueue_config".into(), Obj::Func(Func::EnqueueConfig));
    g.insert("s".into(), Obj::dict(Dict::default()));
    g.insert("is_integer".into(), Obj::Func(Func::IsInteger));
    g.insert("math".into(), Obj::Math);
    g
}

/// Whether the `CHECK`s of `file`'s rule for `key` all hold for a record whose value is
/// `value` (and whose metadata is empty): how a ruleset's `closed_common.yaml` says which
/// benchmarks its round has. `None` when the file has no rule for the key, or a check raises
/// on such a record (it reads more than the value).
pub(crate) fn checks_hold(file: &RuleFile, key: &str, value: Obj) -> Option<bool> {
    let rule = file.keys.iter().find(|k| k.name == key)?;
    let mut v = Dict::default();
    v.entries.push((Obj::str("value"), value.clone()));
    v.entries
        .push((Obj::str("metadata"), Obj::dict(Dict::default())));
    let v = Obj::dict(v);
    let ll = Obj::Line(std::rc::Rc::new(std::cell::RefCell::new(
        super::obj::LogLine {
            full_string: Obj::str(""),
            timestamp: Obj::Float(0.0),
            key: Obj::str(key),
            value: v.clone(),
            lineno: Obj::Int(0),
            phys: 0,
            mutable: true,
        },
    )));
    let mut globals = checker_globals();
    let mut queue = Vec::new();
    for check in &rule.check {
        let mut locals = Names::default();
        locals.insert("ll".into(), ll.clone());
        locals.insert("v".into(), v.clone());
        let mut env = Env {
            globals: &mut globals,
            locals: Some(&mut locals),
            enqueued: &mut queue,
        };
        if !env.run(&check.code).ok()?.truthy() {
            return Some(false);
        }
    }
    Some(true)
}

/// A finding for a crash of the official checker.
pub(crate) fn crash_finding(c: &Crash) -> Finding {
    finding(
        FindingKind::Fatal,
        None,
        None,
        format!("the official checker raises here and stops: {}", c.0),
        "traceback".into(),
        "mlp_compliance",
    )
}
