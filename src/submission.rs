//! Submission metadata: who submits what, on which system. Logged right after `init_start`.

use std::borrow::Cow;

use crate::keys::{self, Benchmark};
use crate::record::{Str, Value};
use crate::Error;

/// `submission_division`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Division {
    /// `closed`: the reference model and the rules' fixed hyperparameters.
    Closed,
    /// `open`: free model and hyperparameters.
    Open,
}

impl Division {
    /// The logged value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Division::Closed => keys::CLOSED,
            Division::Open => keys::OPEN,
        }
    }

    /// Parses `closed` / `open`.
    pub fn from_name(s: &str) -> Option<Division> {
        match s {
            "closed" => Some(Division::Closed),
            "open" => Some(Division::Open),
            _ => None,
        }
    }
}

/// `submission_status`: where the system is available.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SystemStatus {
    /// `onprem`
    Onprem,
    /// `cloud`
    Cloud,
    /// `research`
    Research,
}

impl SystemStatus {
    /// The logged value.
    pub const fn as_str(self) -> &'static str {
        match self {
            SystemStatus::Onprem => keys::ONPREM,
            SystemStatus::Cloud => keys::CLOUD,
            SystemStatus::Research => keys::RESEARCH,
        }
    }

    /// Parses `onprem` / `cloud` / `research`.
    pub fn from_name(s: &str) -> Option<SystemStatus> {
        match s {
            "onprem" => Some(SystemStatus::Onprem),
            "cloud" => Some(SystemStatus::Cloud),
            "research" => Some(SystemStatus::Research),
            _ => None,
        }
    }
}

/// The `submission_*` keys (and `config_filename`). Every field is optional; the layer logs
/// the ones that are set, in this order, right after `init_start`. Nothing has a default:
/// organisation, platform and benchmark come from the caller or the environment, never from us.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Submission {
    /// `submission_benchmark`
    pub benchmark: Option<Benchmark>,
    /// `submission_org`
    pub org: Option<String>,
    /// `submission_division`
    pub division: Option<Division>,
    /// `submission_status`
    pub status: Option<SystemStatus>,
    /// `submission_platform`
    pub platform: Option<String>,
    /// `submission_poc_name`
    pub poc_name: Option<String>,
    /// `submission_poc_email`
    pub poc_email: Option<String>,
    /// `submission_entry`
    pub entry: Option<String>,
    /// `config_filename` (required by ruleset 6.1.0)
    pub config_filename: Option<String>,
}

/// `MLLOG_SUBMISSION_*` and `MLLOG_CONFIG_FILENAME`, the names primus-mllog uses.
pub const SUBMISSION_VARIABLES: [&str; 9] = [
    "MLLOG_SUBMISSION_BENCHMARK",
    "MLLOG_SUBMISSION_ORG",
    "MLLOG_SUBMISSION_DIVISION",
    "MLLOG_SUBMISSION_STATUS",
    "MLLOG_SUBMISSION_PLATFORM",
    "MLLOG_SUBMISSION_POC_NAME",
    "MLLOG_SUBMISSION_POC_EMAIL",
    "MLLOG_SUBMISSION_ENTRY",
    "MLLOG_CONFIG_FILENAME",
];

impl Submission {
    /// Overlays the environment: each variable that is set replaces the builder's value.
    /// An empty value is an error (the checker rejects empty `submission_org` and friends).
    pub(crate) fn overlay_env(
        &mut self,
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), Error> {
        for name in SUBMISSION_VARIABLES {
            let Some(raw) = get(name) else { continue };
            let value = raw.trim();
            if value.is_empty() {
                return Err(Error::env(name, &raw, "must not be empty"));
            }
            match name {
                "MLLOG_SUBMISSION_BENCHMARK" => {
                    self.benchmark = Some(Benchmark::from_name(value).ok_or_else(|| {
                        let known: Vec<_> = Benchmark::ALL.iter().map(|b| b.as_str()).collect();
                        Error::env(
                            name,
                            &raw,
                            format!("unknown benchmark; known: {}", known.join(", ")),
                        )
                    })?)
                }
                "MLLOG_SUBMISSION_DIVISION" => {
                    self.division = Some(
                        Division::from_name(value)
                            .ok_or_else(|| Error::env(name, &raw, "expected `closed` or `open`"))?,
                    )
                }
                "MLLOG_SUBMISSION_STATUS" => {
                    self.status = Some(SystemStatus::from_name(value).ok_or_else(|| {
                        Error::env(name, &raw, "expected `onprem`, `cloud` or `research`")
                    })?)
                }
                "MLLOG_SUBMISSION_ORG" => self.org = Some(value.to_owned()),
                "MLLOG_SUBMISSION_PLATFORM" => self.platform = Some(value.to_owned()),
                "MLLOG_SUBMISSION_POC_NAME" => self.poc_name = Some(value.to_owned()),
                "MLLOG_SUBMISSION_POC_EMAIL" => self.poc_email = Some(value.to_owned()),
                "MLLOG_SUBMISSION_ENTRY" => self.entry = Some(value.to_owned()),
                "MLLOG_CONFIG_FILENAME" => self.config_filename = Some(value.to_owned()),
                _ => unreachable!("every listed variable is handled"),
            }
        }
        Ok(())
    }

    /// The records to log, in order.
    pub(crate) fn records(&self) -> Vec<(Str, Value)> {
        let mut out: Vec<(Str, Value)> = Vec::new();
        let mut push = |key: &'static str, v: Option<Value>| {
            if let Some(v) = v {
                out.push((Cow::Borrowed(key), v));
            }
        };
        let owned = |s: &Option<String>| s.clone().map(Value::from);
        push(
            keys::SUBMISSION_BENCHMARK,
            self.benchmark.map(|b| b.as_str().into()),
        );
        push(keys::SUBMISSION_ORG, owned(&self.org));
        push(
            keys::SUBMISSION_DIVISION,
            self.division.map(|d| d.as_str().into()),
        );
        push(
            keys::SUBMISSION_STATUS,
            self.status.map(|s| s.as_str().into()),
        );
        push(keys::SUBMISSION_PLATFORM, owned(&self.platform));
        push(keys::SUBMISSION_POC_NAME, owned(&self.poc_name));
        push(keys::SUBMISSION_POC_EMAIL, owned(&self.poc_email));
        push(keys::SUBMISSION_ENTRY, owned(&self.entry));
        push(keys::CONFIG_FILENAME, owned(&self.config_filename));
        out
    }
}
