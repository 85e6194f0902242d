//! rustc-style diagnostics for `mllog check`: the offending line as a snippet with the key
//! underlined, `= rule:` and `help:` lines, then the verdict line; a cargo-like summary at the
//! end. Rendered with ANSI styles; the caller's `anstream` stream strips them when colour is off.

use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::path::Path;

use annotate_snippets::{AnnotationKind, Group, Level, Origin, Renderer, Snippet};
use anstyle::{AnsiColor, Style};
use mllog_core::compliance::{required_value, setter_of, ComplianceReport, FindingKind, Severity};
use mllog_core::Benchmark;

/// Longest part of a line shown (a line may be megabytes long).
const MAX_SHOWN: usize = 4096;

/// The text of lines `wanted` (1-based) of `path`, each cut at [`MAX_SHOWN`] bytes; empty for
/// standard input (read once, by the checker), a device or FIFO (`/dev/zero` never ends) or an
/// unreadable file. At most the file's length at open is read, and no line is held whole.
pub fn lines_of(path: &Path, wanted: &[usize]) -> BTreeMap<usize, String> {
    let mut out = BTreeMap::new();
    let Some(&last) = wanted.iter().max() else {
        return out;
    };
    if path.as_os_str() == "-" {
        return out;
    }
    let Ok(f) = std::fs::File::open(path) else {
        return out;
    };
    let len = match f.metadata() {
        Ok(m) if m.is_file() => m.len(),
        _ => return out,
    };
    let mut r = std::io::BufReader::with_capacity(1 << 16, f.take(len));
    for n in 1..=last {
        let keep = wanted.contains(&n).then(Vec::new);
        match read_line_capped(&mut r, keep) {
            Ok(Some(Some(buf))) => {
                let text = String::from_utf8_lossy(&buf);
                out.insert(n, text.trim_end_matches(['\n', '\r']).to_string());
            }
            Ok(Some(None)) => {}
            _ => break,
        }
    }
    out
}

/// Reads one line, keeping its first [`MAX_SHOWN`] bytes in `keep` if given; `None` at the end
/// of the input.
fn read_line_capped(
    r: &mut impl BufRead,
    mut keep: Option<Vec<u8>>,
) -> std::io::Result<Option<Option<Vec<u8>>>> {
    let mut any = false;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(any.then_some(keep));
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if let Some(k) = keep.as_mut() {
            let room = MAX_SHOWN.saturating_sub(k.len());
            k.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        let n = done.unwrap_or(buf.len());
        r.consume(n);
        if done.is_some() {
            return Ok(Some(keep));
        }
    }
}

/// The byte range of the key's name in `"key": "NAME"`, else of the record after `:::MLLOG `.
fn key_span(line: &str, key: Option<&str>) -> std::ops::Range<usize> {
    if let Some(k) = key {
        for pat in [format!("\"key\": \"{k}\""), format!("\"key\":\"{k}\"")] {
            if let Some(i) = line.find(&pat) {
                let start = i + pat.len() - k.len() - 2;
                return start..start + k.len() + 2;
            }
        }
    }
    let start = line.find(":::MLLOG ").map_or(0, |i| i + ":::MLLOG ".len());
    start..line.len().max(start)
}

/// State variables a rule reads (`s['init_started']`) that another key's line sets.
const STATE_VARS: [&str; 12] = [
    "eval_interval_samples",
    "first_eval_samples",
    "lr_min",
    "lr_max",
    "learning_rate",
    "validation_start_samples",
    "next_validation_samples",
    "init_started",
    "first_init_start",
    "init_stopped",
    "run_started",
    "compile_time_mins",
];

/// The key whose line sets the state a rule reads, if it reads one.
fn state_setter(rule: &str) -> Option<&'static str> {
    STATE_VARS
        .iter()
        .find(|v| rule.contains(&format!("s['{v}']")))
        .map(|v| setter_of(v))
}

/// What to do about a finding, when there is something more to say than its message.
fn help(report: &ComplianceReport, f: &mllog_core::compliance::Finding) -> Option<String> {
    let key = f.key.as_deref();
    if let Some(i) = f.message.find("needs `") {
        let rest = &f.message[i + "needs `".len()..];
        if let Some(j) = rest.find('`') {
            let first = &rest[..j];
            return Some(match f.line {
                Some(l) => {
                    format!("log `{first}` before line {l}: that line should have come first")
                }
                None => format!("log `{first}` first"),
            });
        }
    }
    // A limit on the time since a state was set: the state is there, the time is the problem.
    if f.rule.contains("ll.timestamp - s['first_init_start']") {
        return Some(
            "initialization (from the first `init_start` to `init_stop`) took longer than the \
             ruleset's init time limit: make it shorter than the limit (30 min in the closed \
             division, 240 min in the open one); logging order is not the problem"
                .into(),
        );
    }
    if let (Some(first), Some(l)) = (state_setter(&f.rule), f.line)
        && Some(first) != key
    {
        return Some(format!(
            "log `{first}` before line {l}: that line should have come first"
        ));
    }
    match f.kind {
        FindingKind::Check | FindingKind::FirstCheck => {
            let bench = report.benchmark.as_deref().and_then(Benchmark::from_name)?;
            let lit = required_value(report.ruleset, bench, key?)?;
            Some(format!(
                "the rule wants `\"value\": {}` for `{}`",
                lit.to_value().to_json(),
                key?
            ))
        }
        FindingKind::Missing => Some(format!("log `{}` ({})", key?, f.rule)),
        FindingKind::Duplicate => Some(format!("log `{}` once", key?)),
        _ => None,
    }
}

/// One finding after another, then the file's verdict line.
pub fn render(report: &ComplianceReport, path: &Path, shown: &str, werror: bool) -> String {
    let wanted: Vec<usize> = report.findings.iter().filter_map(|f| f.line).collect();
    let lines = lines_of(path, &wanted);
    let renderer = Renderer::styled();
    let mut out = String::new();
    for f in &report.findings {
        let level = match f.severity {
            Severity::Warning if werror => Level::ERROR,
            Severity::Error => Level::ERROR,
            Severity::Warning => Level::WARNING,
            Severity::Note => Level::NOTE,
        };
        let mut group: Group<'_> = Group::with_title(level.primary_title(f.message.as_str()));
        group = match (f.line, f.line.and_then(|l| lines.get(&l))) {
            (Some(l), Some(text)) => group.element(
                Snippet::source(text.as_str())
                    .line_start(l)
                    .path(shown)
                    .annotation(AnnotationKind::Primary.span(key_span(text, f.key.as_deref()))),
            ),
            (Some(l), None) => group.element(Origin::path(shown).line(l)),
            (None, _) => group.element(Origin::path(shown)),
        };
        if !f.rule.is_empty() || !f.source.is_empty() {
            group = group.element(
                Level::NOTE
                    .with_name(Some("rule"))
                    .message(format!("{} ({})", f.rule, f.source)),
            );
        }
        if let Some(h) = help(report, f) {
            group = group.element(Level::HELP.message(h));
        }
        out.push_str(&renderer.render(&[group]));
        out.push_str("\n\n");
    }
    let text = report.render_text(shown, werror);
    let verdict = text.lines().last().unwrap_or_default();
    out.push_str(&verdict_line(verdict, report.passed(werror)));
    out.push('\n');
    out
}

/// The verdict line with COMPLIANT / NOT COMPLIANT in colour.
pub fn verdict_line(line: &str, passed: bool) -> String {
    let (word, style) = if passed {
        (
            "COMPLIANT",
            Style::new().bold().fg_color(Some(AnsiColor::Green.into())),
        )
    } else {
        (
            "NOT COMPLIANT",
            Style::new().bold().fg_color(Some(AnsiColor::Red.into())),
        )
    };
    line.replacen(word, &format!("{style}{word}{style:#}"), 1)
}

/// What a check of several files came to, for its closing line.
#[derive(Default)]
pub struct Tally {
    /// Files named.
    pub files: usize,
    /// Files checked and not compliant.
    pub failed: usize,
    /// Files that could not be read.
    pub unreadable: usize,
    /// Files read but not checked: no ruleset of the rules read has rules for them.
    pub no_ruleset: usize,
    /// Files checked without a verdict: a snippet of the rules needs what the engine does not
    /// have on them.
    pub no_verdict: usize,
    /// Errors of the files checked.
    pub errors: usize,
    /// Warnings of the files checked.
    pub warnings: usize,
}

impl Tally {
    /// Cargo's closing line: `Checked N files: …` or `error: …`.
    pub fn closing_line(&self) -> String {
        let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
        let counts = format!(
            "{}, {}",
            plural(self.errors, "error"),
            plural(self.warnings, "warning")
        );
        let unchecked = [
            (self.unreadable, "unreadable"),
            (self.no_ruleset, "with no ruleset"),
            (self.no_verdict, "with no verdict"),
        ];
        if self.failed == 0 && unchecked.iter().all(|(n, _)| *n == 0) {
            let s = Style::new().bold().fg_color(Some(AnsiColor::Green.into()));
            return format!(
                "{s}{:>12}{s:#} {}: all compliant ({counts})\n",
                "Checked",
                plural(self.files, "file")
            );
        }
        let s = Style::new().bold().fg_color(Some(AnsiColor::Red.into()));
        let mut what = format!(
            "{} of {} not compliant",
            self.failed,
            plural(self.files, "file")
        );
        for (n, words) in unchecked {
            if n > 0 {
                what.push_str(&format!(", {n} {words}"));
            }
        }
        format!("{s}error{s:#}: {what} ({counts})\n")
    }
}
