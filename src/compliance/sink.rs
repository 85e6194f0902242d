//! [`ComplianceSink`]: checks the record stream live, inside the pipeline.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use super::checker::Checker;
use super::model::Ruleset;
use super::report::Report;
use crate::record::Record;
use crate::sink::{Sink, SinkError};

/// What to do when `run_start` is logged (the end of the part of the log a submitter controls
/// before the clock starts).
#[derive(Default)]
pub enum LivePolicy {
    /// Nothing.
    Off,
    /// Print what is missing or wrong so far to stderr (never into the MLLOG stream).
    #[default]
    Warn,
    /// Call a function with [`Checker::pending_at_run_start`]'s report.
    Callback(Box<dyn Fn(&Report) + Send>),
}

impl fmt::Debug for LivePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LivePolicy::Off => f.write_str("Off"),
            LivePolicy::Warn => f.write_str("Warn"),
            LivePolicy::Callback(_) => f.write_str("Callback(..)"),
        }
    }
}

/// A cloneable view of a [`ComplianceSink`]'s checker, usable from any thread.
#[derive(Clone, Debug)]
pub struct ComplianceHandle {
    inner: Arc<Mutex<Checker>>,
}

impl ComplianceHandle {
    fn lock(&self) -> MutexGuard<'_, Checker> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The report of the records seen so far, as if the log ended here.
    pub fn report(&self) -> Report {
        self.lock().report()
    }

    /// What is missing or wrong so far, ignoring keys that normally come after `run_start`.
    pub fn pending(&self) -> Report {
        self.lock().pending_at_run_start()
    }
}

/// A [`Sink`] that feeds every record to a [`Checker`] and applies a [`LivePolicy`] at the
/// first `run_start`. Records are numbered 1, 2, ... as the lines of the MLLOG file they form.
#[derive(Debug)]
pub struct ComplianceSink {
    inner: Arc<Mutex<Checker>>,
    policy: LivePolicy,
    lines: usize,
    fired: bool,
}

impl ComplianceSink {
    /// A sink checking against `ruleset`, with the default policy ([`LivePolicy::Warn`]).
    pub fn new(ruleset: Ruleset) -> ComplianceSink {
        ComplianceSink {
            inner: Arc::new(Mutex::new(Checker::new(ruleset))),
            policy: LivePolicy::default(),
            lines: 0,
            fired: false,
        }
    }

    /// Sets the policy applied at `run_start`.
    pub fn with_policy(mut self, policy: LivePolicy) -> ComplianceSink {
        self.policy = policy;
        self
    }

    /// A handle to the checker's state.
    pub fn handle(&self) -> ComplianceHandle {
        ComplianceHandle {
            inner: Arc::clone(&self.inner),
        }
    }

    fn on_run_start(&self, pending: &Report) {
        match &self.policy {
            LivePolicy::Off => {}
            LivePolicy::Warn => {
                if !pending.findings.is_empty() {
                    eprint!(
                        "mllog compliance: at run_start ({} records, ruleset {}):\n{}",
                        pending.records,
                        pending.ruleset,
                        pending.render_text("<mllog stream>", false)
                    );
                }
            }
            LivePolicy::Callback(f) => f(pending),
        }
    }
}

impl Sink for ComplianceSink {
    fn name(&self) -> &str {
        "compliance"
    }

    fn write(&mut self, record: &Record) -> Result<(), SinkError> {
        if record.trace_only {
            return Ok(()); // not an MLLOG line
        }
        self.lines += 1;
        let pending = {
            let mut checker = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            checker.feed(self.lines, record);
            if !self.fired && record.key == "run_start" {
                self.fired = true;
                Some(checker.pending_at_run_start())
            } else {
                None
            }
        };
        if let Some(p) = pending {
            if !matches!(self.policy, LivePolicy::Off) {
                self.on_run_start(&p);
            }
        }
        Ok(())
    }
}
