//! The environment over the builder's settings, as one table: a row per variable, applied in
//! the table's order at `build()` (under `Builder::from_env` or `Builder::environment`).
//! docs/configuration.md's table is checked against these rows.

use std::path::PathBuf;
use std::time::Duration;

use super::{Builder, MAX_DELAY_MS};
use crate::compliance::LivePolicy;
use crate::device_sync::SyncAt;
use crate::env::Env;
use crate::run::Target;
use crate::submission::OverlayEnv;
use crate::{Error, Output};

/// One variable and how it changes the settings.
pub(super) struct Variable {
    /// The variable, as docs/configuration.md names it.
    pub(super) name: &'static str,
    /// Reads `name` from the environment and, when it is set, applies it.
    apply: fn(&mut Builder, &Env, &'static str) -> Result<(), Error>,
}

const fn row(
    name: &'static str,
    apply: fn(&mut Builder, &Env, &'static str) -> Result<(), Error>,
) -> Variable {
    Variable { name, apply }
}

/// Every variable the builder reads besides the submission's (`SUBMISSION_VARIABLES`, read
/// by mllog-core's `Submission`) and the optional sinks' (`crate::registry`). The output's
/// come first: `MLLOG_SAVE_TO_FILE` and `MLLOG_APPEND` speak of the file `MLLOG_OUTPUT_FILE`
/// names.
pub(super) const OVERLAY: &[Variable] = &[
    row("MLLOG_OUTPUT_FILE", |b, env, name| {
        let Some(path) = env.raw(name)? else {
            return Ok(());
        };
        // A followed file is another process's: the variable is read, so that a value that
        // is not UTF-8 is still an error, but never applied.
        if matches!(b.output, Output::Followed(_)) {
            return Ok(());
        }
        if path.trim().is_empty() {
            return Err(env.invalid(name, "must not be empty").into());
        }
        let append = matches!(b.output, Output::File { append: true, .. });
        b.output = Output::File {
            path: PathBuf::from(path),
            append,
        };
        Ok(())
    }),
    row("MLLOG_SAVE_TO_FILE", |b, env, name| {
        match (env.flag(name)?, &b.output) {
            (_, Output::Followed(_)) | (None, _) | (Some(true), Output::File { .. }) => {}
            (Some(false), _) => b.output = Output::Stdout,
            (Some(true), _) => {
                return Err(env
                    .invalid(
                        name,
                        "no file to save to: set MLLOG_OUTPUT_FILE or Output::file",
                    )
                    .into())
            }
        }
        Ok(())
    }),
    row("MLLOG_APPEND", |b, env, name| {
        if let (Some(on), Output::File { append, .. }) = (env.flag(name)?, &mut b.output) {
            *append = on;
        }
        Ok(())
    }),
    row("MLLOG_CACHE_CLEAR", |b, env, _| {
        if let Some(mode) = crate::cache_clear::from_env(env, b.cache_clear)? {
            b.cache_clear = mode;
        }
        Ok(())
    }),
    row(crate::device_sync::VARIABLE, |b, env, name| {
        if let Some(at) = crate::device_sync::from_env(env)? {
            if at != SyncAt::Off && b.device_sync.is_none() {
                return Err(env
                    .invalid(
                        name,
                        "no device synchronisation was given in code (Builder::device_sync)",
                    )
                    .into());
            }
            b.device_sync_at = Some(at);
        }
        Ok(())
    }),
    row("MLLOG_RUN_STOP_BARRIER", |b, env, name| {
        let Some(on) = env.flag(name)? else {
            return Ok(());
        };
        match &mut b.barrier {
            Some(barrier) => barrier.at_run_stop = on,
            None if on => {
                return Err(env
                    .invalid(name, "no barrier was given in code (Builder::barrier)")
                    .into())
            }
            None => {}
        }
        Ok(())
    }),
    row("MLLOG_CLOCK_STEP_MS", |b, env, name| {
        let what = "whole milliseconds (0: every divergence)";
        if let Some(ms) = env.number(name, 0, u64::MAX, what)? {
            b.clock_step = Duration::from_millis(ms);
        }
        Ok(())
    }),
    row("MLLOG_ALL_RANKS", |b, env, name| {
        if let Some(on) = env.flag(name)? {
            b.ranks.all_write = on;
        }
        Ok(())
    }),
    row("MLLOG_LIVE_CHECK", |b, env, name| {
        let policy = env.parse(name, |v| {
            match (v.eq_ignore_ascii_case("warn"), crate::env::parse_flag(v)) {
                (true, _) | (_, Some(true)) => Ok(LivePolicy::Warn),
                (_, Some(false)) => Ok(LivePolicy::Off),
                _ => Err("expected `off` or `warn`".to_owned()),
            }
        })?;
        if let Some(policy) = policy {
            b.live_check = policy;
        }
        Ok(())
    }),
    row(crate::rules_source::RULES_ENV, |b, env, name| {
        let Some(spec) = env.string(name)? else {
            return Ok(());
        };
        #[cfg(feature = "rules")]
        {
            let python = env.string(crate::rules_source::PYTHON_ENV)?;
            b.live_rules = Some(crate::compliance::RulesSpec::Env {
                spec: spec.to_owned(),
                python: python.unwrap_or("python3").to_owned(),
            });
        }
        #[cfg(not(feature = "rules"))]
        {
            b.rules_unread = Some(spec.to_owned());
        }
        Ok(())
    }),
    row("MLLOG_RULES_RULESET", |b, env, name| {
        let Some(ruleset) = env.string(name)? else {
            return Ok(());
        };
        if !crate::Ruleset::is_well_formed(ruleset) {
            return Err(env.invalid(name, crate::compliance::RULESET_FORM).into());
        }
        // Without the `rules` feature, MLLOG_RULES itself is said to be unread.
        #[cfg(feature = "rules")]
        {
            b.live_rules_ruleset = Some(ruleset.to_owned());
        }
        #[cfg(not(feature = "rules"))]
        let _ = b;
        Ok(())
    }),
    row("MLLOG_HANDLE_SIGNALS", |b, env, name| {
        if let Some(on) = env.flag(name)? {
            b.handle_signals = on;
        }
        Ok(())
    }),
    row("MLLOG_TRACE_STEPS", |b, env, name| {
        if let Some(on) = env.flag(name)? {
            b.trace_steps = on;
        }
        Ok(())
    }),
    row("MLLOG_BLOCK_TPUT_LOG", |b, env, name| {
        if let Some(on) = env.flag(name)? {
            b.throughput_stats = on;
        }
        Ok(())
    }),
    row("MLLOG_TRAIN_LOSS_LOG_FREQ", |b, env, name| {
        if let Some(n) = env.number(name, 0, u64::MAX, "a number of steps (0 = off)")? {
            b.train_loss_every = n;
        }
        Ok(())
    }),
    row("MLLOG_MAX_DELAY_MS", |b, env, name| {
        let what = "whole milliseconds (0 = wake the worker for every record)";
        if let Some(ms) = env.number(name, 0, MAX_DELAY_MS, what)? {
            b.pipeline = b.pipeline.max_delay(Duration::from_millis(ms));
        }
        Ok(())
    }),
    row("MLLOG_TARGET_EVAL_LOSS", |b, env, name| {
        let value = env.parse(name, |v| {
            v.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| "expected a finite number".to_owned())
        })?;
        if let Some(value) = value {
            b.target = Some(Target::at_most(value));
        }
        Ok(())
    }),
    row("MLLOG_NAMESPACE", |b, env, name| {
        if let Some(ns) = env.raw(name)? {
            b.namespace = ns.to_owned();
        }
        Ok(())
    }),
    row("MLLOG_ROOT_DIR", |b, env, name| {
        if let Some(root) = env.raw(name)? {
            b.root_dir = Some(root.to_owned());
        }
        Ok(())
    }),
];

impl Builder {
    /// Applies every row of [`OVERLAY`], then the submission's variables.
    pub(super) fn overlay_env(&mut self, env: &Env) -> Result<(), Error> {
        for variable in OVERLAY {
            (variable.apply)(self, env, variable.name)?;
        }
        // The submission module reads through a plain lookup: a value that is not UTF-8 is an
        // error here, before it could look like "unset" there.
        for name in crate::env::SUBMISSION_VARIABLES {
            env.raw(name)?;
        }
        self.submission
            .overlay_env(&|name| env.raw(name).ok().flatten().map(str::to_owned))
    }
}

#[cfg(test)]
mod tests {
    use super::OVERLAY;

    /// The operator's table names every row, so a variable added here without its
    /// documentation fails (the integration test `configuration_table` checks the other way,
    /// and the sinks' variables).
    #[test]
    fn every_row_is_in_the_configuration_table() {
        let doc = include_str!("../../../docs/configuration.md");
        let table: Vec<&str> = doc.lines().filter(|l| l.starts_with("| `")).collect();
        let missing: Vec<&str> = OVERLAY
            .iter()
            .map(|v| v.name)
            .filter(|name| {
                !table.iter().any(|row| {
                    row.split(" | ")
                        .next()
                        .is_some_and(|cell| cell.contains(&format!("`{name}")))
                })
            })
            .collect();
        assert!(
            missing.is_empty(),
            "not in docs/configuration.md: {missing:?}"
        );
        let mut names: Vec<&str> = OVERLAY.iter().map(|v| v.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), OVERLAY.len(), "a variable has two rows");
    }
}
