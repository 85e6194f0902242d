//! Checks a preset's records against the rule files, the way the checker will read them: in
//! logging order, with each file's state, `CHECK`s and `POST`s; then every required key; then
//! the first evaluation points against the target key's rule (`FIRST_CHECK`, grid checks).

use super::{run_target, Draft, EvalProgress, Preset, PresetError};
use crate::compliance::{self, Check, ExecError, Line, Post, Req, RuleFile, State};
use crate::keys;
use crate::record::{Metadata, Value};
use crate::run::EvalSchedule;

/// Keys the layer or the run logs, never a preset.
fn run_time_key(key: &str) -> bool {
    key.starts_with("submission_")
        || key.starts_with("block_")
        || key.starts_with("epoch_")
        || matches!(
            key,
            "cache_clear"
                | "init_start"
                | "init_stop"
                | "run_start"
                | "run_stop"
                | "eval_start"
                | "eval_stop"
                | "eval_accuracy"
                | "averaged_validation_loss"
                | "aggregated_eval_accuracy"
        )
        || compliance::DISCLOSURE_KEYS.contains(&key)
}

fn line<'a>(key: &'a str, value: &'a Value, md: &'a Metadata) -> Line<'a> {
    Line {
        key,
        value,
        metadata: md,
        time_ms: 0.0,
        lineno: 0,
    }
}

fn begin(file: &RuleFile) -> State {
    let mut s = State::default();
    for (k, v) in &file.begin {
        s.set(k, v.clone());
    }
    s
}

/// Runs one `POST` action.
fn post(p: &Post, l: &Line<'_>, s: &mut State) -> Result<(), ExecError> {
    match p {
        Post::Store(name) => s.set(name, l.value.clone()),
        Post::SetTrue(name) => s.set(name, Value::Bool(true)),
        Post::Custom(f) => f(l, s)?,
        Post::MinTimestamp(_) | Post::EnqueueDivision | Post::EnqueueBenchmark => {}
    }
    Ok(())
}

pub(super) fn finish(
    d: Draft,
    global_batch_size: u64,
    schedule: EvalSchedule,
) -> Result<Preset, PresetError> {
    let (r, b, div) = (d.ruleset, d.benchmark, d.division);
    let set = compliance::rules(r);
    let invalid = |key: &'static str, requirement: String, found: &Value| PresetError::Invalid {
        key,
        requirement,
        found: found.clone(),
        benchmark: b,
        division: div,
        ruleset: r,
    };
    let bench = set
        .benchmark_file(div, b)
        .ok_or(PresetError::NotInRuleset {
            benchmark: b,
            ruleset: r,
        })?;
    let files = [&set.common, set.division_file(div), bench];

    // Every key is one the rules or the constants know (a misspelt key is never logged).
    for (k, _) in &d.values {
        let known = set.files().any(|f| f.rule(k).is_some()) || keys::intern(k).is_some();
        if !known || run_time_key(k) {
            return Err(PresetError::UnknownKey {
                key: (*k).to_string(),
                benchmark: b,
                known: d.values.iter().map(|(k, _)| *k).collect(),
            });
        }
    }

    // CHECK and POST of each file, in logging order, each file with its own state.
    let md = Metadata::default();
    let mut bench_state = begin(bench);
    for (fi, file) in files.iter().enumerate() {
        let mut s = begin(file);
        for (key, value) in &d.values {
            let Some(rule) = file.rule(key) else {
                continue;
            };
            let l = line(key, value, &md);
            for c in &rule.checks {
                match c.eval(&l, &s) {
                    Ok(true) => {}
                    Ok(false) => return Err(invalid(rule.name, c.words(), value)),
                    Err(ExecError::NeedsState { key: after, .. }) => {
                        return Err(PresetError::Order {
                            key: rule.name,
                            after,
                            benchmark: b,
                        })
                    }
                    Err(ExecError::Type(t)) => {
                        return Err(invalid(rule.name, format!("{} ({t})", c.words()), value))
                    }
                }
            }
            for p in &rule.post {
                post(p, &l, &mut s).map_err(|e| invalid(rule.name, e.to_string(), value))?;
            }
        }
        // Every required key is there.
        for rule in &file.keys {
            let required = matches!(
                rule.req,
                Some(Req::ExactlyOne | Req::AtLeastOne | Req::AtLeast(_))
            );
            if required
                && !run_time_key(rule.name)
                && !d.values.iter().any(|(k, _)| *k == rule.name)
            {
                return Err(PresetError::Missing {
                    key: rule.name,
                    benchmark: b,
                    division: div,
                    ruleset: r,
                });
            }
        }
        if fi == 2 {
            bench_state = s;
        }
    }

    // Target and schedule.
    let t = compliance::target(r, b, div).ok_or_else(|| PresetError::Schedule {
        reason: "the rules define no quality target".into(),
        benchmark: b,
        division: div,
        ruleset: r,
    })?;
    let (target, range) = run_target(&t).ok_or_else(|| PresetError::Schedule {
        reason: format!("the target of `{}` is not a single bound", t.key),
        benchmark: b,
        division: div,
        ruleset: r,
    })?;
    let schedule_err = |reason: String| PresetError::Schedule {
        reason,
        benchmark: b,
        division: div,
        ruleset: r,
    };
    let logged = d
        .values
        .iter()
        .find(|(k, _)| *k == keys::GLOBAL_BATCH_SIZE)
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    if logged.as_i128() != Some(global_batch_size.into()) {
        return Err(invalid(
            keys::GLOBAL_BATCH_SIZE,
            format!("must be the preset's global_batch_size field ({global_batch_size})"),
            &logged,
        ));
    }
    if global_batch_size == 0 {
        return Err(invalid(
            keys::GLOBAL_BATCH_SIZE,
            "must be at least 1".into(),
            &logged,
        ));
    }
    if schedule.first == 0 || schedule.every == 0 {
        return Err(schedule_err(format!(
            "first point {} and interval {} must be positive",
            schedule.first, schedule.every
        )));
    }
    let rule = bench.rule(t.key);
    let progress = if rule.is_some_and(|r| {
        r.checks
            .iter()
            .any(|c| matches!(c, Check::MetaHas("epoch_num")))
    }) {
        let train = d
            .values
            .iter()
            .find(|(k, _)| *k == keys::TRAIN_SAMPLES)
            .and_then(|(_, v)| v.as_i128())
            .filter(|v| *v > 0)
            .ok_or_else(|| schedule_err("epoch_num needs a positive `train_samples`".into()))?;
        EvalProgress::EpochNum {
            samples_per_epoch: train as u64,
        }
    } else {
        EvalProgress::SamplesCount
    };
    // The first evaluation points must satisfy the target key's rule (FIRST_CHECK, grid).
    let metric = Value::Float(super::dry_run::converged_value(target, range));
    for n in 0..4u64 {
        let point = schedule.point(n);
        if !point.is_multiple_of(global_batch_size) {
            return Err(schedule_err(format!(
                "evaluation point {point} is not a whole number of steps of {global_batch_size} samples"
            )));
        }
        let Some(rule) = rule else { break };
        let mut md = Metadata::default();
        md.set(keys::SAMPLES_COUNT, Value::Int(point.into()));
        if let EvalProgress::EpochNum { samples_per_epoch } = progress {
            md.set(
                keys::EPOCH_NUM,
                Value::Float(point as f64 / samples_per_epoch as f64),
            );
        }
        let l = line(t.key, &metric, &md);
        let first = if n == 0 { &rule.first_check[..] } else { &[] };
        for c in rule.checks.iter().chain(first) {
            match c.eval(&l, &bench_state) {
                Ok(true) => {}
                Ok(false) | Err(_) => {
                    return Err(schedule_err(format!(
                        "evaluation {} at samples_count {point}: `{}` {}",
                        n + 1,
                        t.key,
                        c.words()
                    )))
                }
            }
        }
        for p in &rule.post {
            post(p, &l, &mut bench_state).map_err(|e| schedule_err(e.to_string()))?;
        }
    }

    Ok(Preset {
        benchmark: b,
        division: div,
        ruleset: r,
        hyperparameters: d.values,
        target,
        target_key: t.key,
        target_range: range,
        schedule,
        global_batch_size,
        progress,
    })
}
