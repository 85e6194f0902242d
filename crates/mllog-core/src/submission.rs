//! Submission metadata: who submits what, on which system. Logged right after `init_start`.

use std::borrow::Cow;

use crate::keys::{self, Benchmark};
use crate::record::{Str, Value};
use crate::Error;

/// `submission_division`: `closed` (the reference model and fixed hyperparameters) or `open`.
/// See the [`Submission`] example.
///
/// The division decides which rule files apply (`closed_*.yaml` or `open_*.yaml`), so presets,
/// example logs and the checker all take one.
///
/// ```
/// use mllog_core::compliance::{check_text, example_log, Ruleset};
/// use mllog_core::{Benchmark, Division};
///
/// assert_eq!(Division::from_name("open"), Some(Division::Open));
/// assert_eq!(Division::Closed.as_str(), "closed");
/// assert_eq!(Division::from_name("Closed"), None); // the logged spelling is lower case
///
/// let log = example_log(Ruleset::V6_1_0, Benchmark::Flux1, Division::Open).unwrap();
/// let report = check_text(Ruleset::V6_1_0, &log);
/// assert_eq!(report.division, Some(Division::Open));
/// assert!(report.rule_files.iter().any(|f| f == "open_common"), "{:?}", report.rule_files);
/// ```
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

/// `submission_status`: where the system is available. See the [`Submission`] example.
///
///
/// ```
/// use mllog_core::{Submission, SystemStatus};
///
/// let mut s = Submission::default();
/// s.overlay_variables(&|n: &str| (n == "MLLOG_SUBMISSION_STATUS").then(|| "research".to_string()))
///     .unwrap();
/// assert_eq!(s.status, Some(SystemStatus::Research));
/// assert_eq!(SystemStatus::Research.as_str(), "research");
/// assert_eq!(SystemStatus::from_name("on-prem"), None);
/// ```
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
///
/// Built with its chained setters ([`Submission::org`], [`Submission::division`], ...) or as
/// a struct literal; the layer's builder takes it whole (`Builder::submission`) and then
/// overlays the
/// [`SUBMISSION_VARIABLES`] from the environment, so a launcher script can fill in what the
/// code leaves open. [`Division`] and [`SystemStatus`] are the two closed vocabularies.
///
/// ```
/// use mllog_core::keys::Benchmark;
/// use mllog_core::{Division, Submission, SystemStatus};
///
/// let mut s = Submission {
///     benchmark: Some(Benchmark::Llama2_70bLora),
///     division: Some(Division::Closed),
///     ..Default::default()
/// };
/// // The launcher's variables win over what the code set.
/// let env = |name: &str| match name {
///     "MLLOG_SUBMISSION_ORG" => Some("ExampleOrg".to_string()),
///     "MLLOG_SUBMISSION_STATUS" => Some("cloud".to_string()),
///     "MLLOG_SUBMISSION_DIVISION" => Some("open".to_string()),
///     _ => None,
/// };
/// s.overlay_variables(&env).unwrap();
/// assert_eq!(s.org.as_deref(), Some("ExampleOrg"));
/// assert_eq!((s.division, s.status), (Some(Division::Open), Some(SystemStatus::Cloud)));
///
/// // An empty value is an error naming the variable (the checker rejects empty values).
/// let err = s.overlay_variables(&|n: &str| (n == "MLLOG_SUBMISSION_ORG").then(String::new));
/// assert!(err.unwrap_err().to_string().contains("MLLOG_SUBMISSION_ORG"));
/// assert_eq!(Division::from_name("closed").map(Division::as_str), Some("closed"));
/// assert_eq!(SystemStatus::from_name("onprem"), Some(SystemStatus::Onprem));
/// ```
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
    /// `lowest_numerical_precision_in_linear` (e.g. `fp8`, `bfloat16`)
    pub precision_linear: Option<String>,
    /// `lowest_numerical_precision_in_attn`
    pub precision_attn: Option<String>,
    /// `lowest_numerical_precision_in_comm`
    pub precision_comm: Option<String>,
    /// `tensor_parallelism` (unused dimensions are logged as 1)
    pub tensor_parallelism: Option<u32>,
    /// `pipeline_parallelism`
    pub pipeline_parallelism: Option<u32>,
    /// `context_parallelism`
    pub context_parallelism: Option<u32>,
    /// `expert_parallelism`
    pub expert_parallelism: Option<u32>,
    /// `micro_batch_size`
    pub micro_batch_size: Option<u32>,
}

/// The variables that overlay [`Submission`]: `MLLOG_SUBMISSION_*`, `MLLOG_CONFIG_FILENAME`
/// and the parallelism/precision names primus-mllog uses (logged here under the keys the rules
/// check, e.g. `lowest_numerical_precision_in_linear`).
pub const SUBMISSION_VARIABLES: [&str; 17] = [
    "MLLOG_SUBMISSION_BENCHMARK",
    "MLLOG_SUBMISSION_ORG",
    "MLLOG_SUBMISSION_DIVISION",
    "MLLOG_SUBMISSION_STATUS",
    "MLLOG_SUBMISSION_PLATFORM",
    "MLLOG_SUBMISSION_POC_NAME",
    "MLLOG_SUBMISSION_POC_EMAIL",
    "MLLOG_SUBMISSION_ENTRY",
    "MLLOG_CONFIG_FILENAME",
    "MLLOG_LOWEST_NUMERICAL_PRECISION_LINEAR",
    "MLLOG_LOWEST_NUMERICAL_PRECISION_ATTN",
    "MLLOG_LOWEST_NUMERICAL_PRECISION_COMM",
    "MLLOG_TENSOR_PARALLELISM",
    "MLLOG_PIPELINE_PARALLELISM",
    "MLLOG_CONTEXT_PARALLELISM",
    "MLLOG_EXPERT_PARALLELISM",
    "MLLOG_MICRO_BATCH_SIZE",
];

/// One key that [`Submission`] supplies: the log key, the [`Submission`] method and the
/// variable that set it, and whether it is set.
pub(crate) struct Field {
    pub(crate) key: &'static str,
    pub(crate) builder: &'static str,
    pub(crate) variable: &'static str,
    pub(crate) set: bool,
}

impl Submission {
    /// `submission_benchmark` (`MLLOG_SUBMISSION_BENCHMARK`).
    pub fn benchmark(mut self, benchmark: Benchmark) -> Self {
        self.benchmark = Some(benchmark);
        self
    }

    /// `submission_org` (`MLLOG_SUBMISSION_ORG`).
    pub fn org(mut self, org: impl Into<String>) -> Self {
        self.org = Some(org.into());
        self
    }

    /// `submission_division` (`MLLOG_SUBMISSION_DIVISION`).
    pub fn division(mut self, division: Division) -> Self {
        self.division = Some(division);
        self
    }

    /// `submission_status` (`MLLOG_SUBMISSION_STATUS`).
    pub fn status(mut self, status: SystemStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// `submission_platform` (`MLLOG_SUBMISSION_PLATFORM`).
    pub fn platform(mut self, platform: impl Into<String>) -> Self {
        self.platform = Some(platform.into());
        self
    }

    /// `submission_poc_name` (`MLLOG_SUBMISSION_POC_NAME`).
    pub fn poc_name(mut self, name: impl Into<String>) -> Self {
        self.poc_name = Some(name.into());
        self
    }

    /// `submission_poc_email` (`MLLOG_SUBMISSION_POC_EMAIL`).
    pub fn poc_email(mut self, email: impl Into<String>) -> Self {
        self.poc_email = Some(email.into());
        self
    }

    /// `submission_entry` (`MLLOG_SUBMISSION_ENTRY`).
    pub fn entry(mut self, entry: impl Into<String>) -> Self {
        self.entry = Some(entry.into());
        self
    }

    /// `config_filename` (`MLLOG_CONFIG_FILENAME`).
    pub fn config_filename(mut self, name: impl Into<String>) -> Self {
        self.config_filename = Some(name.into());
        self
    }

    /// The lowest numerical precisions in linear layers, attention and communication
    /// (`lowest_numerical_precision_in_{linear,attn,comm}`, e.g. `"fp8"`, `"bfloat16"`;
    /// `MLLOG_LOWEST_NUMERICAL_PRECISION_{LINEAR,ATTN,COMM}`).
    pub fn precision(
        mut self,
        linear: impl Into<String>,
        attn: impl Into<String>,
        comm: impl Into<String>,
    ) -> Self {
        self.precision_linear = Some(linear.into());
        self.precision_attn = Some(attn.into());
        self.precision_comm = Some(comm.into());
        self
    }

    /// Tensor, pipeline, context and expert parallelism (1 for an unused dimension;
    /// `MLLOG_{TENSOR,PIPELINE,CONTEXT,EXPERT}_PARALLELISM`).
    pub fn parallelism(mut self, tensor: u32, pipeline: u32, context: u32, expert: u32) -> Self {
        self.tensor_parallelism = Some(tensor);
        self.pipeline_parallelism = Some(pipeline);
        self.context_parallelism = Some(context);
        self.expert_parallelism = Some(expert);
        self
    }

    /// `micro_batch_size` (`MLLOG_MICRO_BATCH_SIZE`).
    pub fn micro_batch_size(mut self, n: u32) -> Self {
        self.micro_batch_size = Some(n);
        self
    }

    /// Overlays `other`: each field it sets replaces this one's; a field it leaves `None`
    /// keeps its value here.
    ///
    /// ```
    /// use mllog_core::submission::Submission;
    ///
    /// let mut s = Submission { org: Some("MyOrg".into()), ..Default::default() };
    /// s.overlay(Submission { platform: Some("8xMI355X".into()), ..Default::default() });
    /// assert_eq!((s.org.as_deref(), s.platform.as_deref()), (Some("MyOrg"), Some("8xMI355X")));
    /// ```
    pub fn overlay(&mut self, other: Submission) {
        let Submission {
            benchmark,
            org,
            division,
            status,
            platform,
            poc_name,
            poc_email,
            entry,
            config_filename,
            precision_linear,
            precision_attn,
            precision_comm,
            tensor_parallelism,
            pipeline_parallelism,
            context_parallelism,
            expert_parallelism,
            micro_batch_size,
        } = other;
        fn keep<T>(here: &mut Option<T>, new: Option<T>) {
            if new.is_some() {
                *here = new;
            }
        }
        keep(&mut self.benchmark, benchmark);
        keep(&mut self.org, org);
        keep(&mut self.division, division);
        keep(&mut self.status, status);
        keep(&mut self.platform, platform);
        keep(&mut self.poc_name, poc_name);
        keep(&mut self.poc_email, poc_email);
        keep(&mut self.entry, entry);
        keep(&mut self.config_filename, config_filename);
        keep(&mut self.precision_linear, precision_linear);
        keep(&mut self.precision_attn, precision_attn);
        keep(&mut self.precision_comm, precision_comm);
        keep(&mut self.tensor_parallelism, tensor_parallelism);
        keep(&mut self.pipeline_parallelism, pipeline_parallelism);
        keep(&mut self.context_parallelism, context_parallelism);
        keep(&mut self.expert_parallelism, expert_parallelism);
        keep(&mut self.micro_batch_size, micro_batch_size);
    }

    /// Overlays the [`SUBMISSION_VARIABLES`] that `get` knows (the layer passes the process
    /// environment): each variable that is set replaces the current value. An empty value is an
    /// error (the checker rejects empty `submission_org` and friends).
    pub fn overlay_variables(&mut self, get: &dyn Fn(&str) -> Option<String>) -> Result<(), Error> {
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
                "MLLOG_LOWEST_NUMERICAL_PRECISION_LINEAR" => {
                    self.precision_linear = Some(value.to_owned())
                }
                "MLLOG_LOWEST_NUMERICAL_PRECISION_ATTN" => {
                    self.precision_attn = Some(value.to_owned())
                }
                "MLLOG_LOWEST_NUMERICAL_PRECISION_COMM" => {
                    self.precision_comm = Some(value.to_owned())
                }
                _ => {
                    let n: u32 =
                        value.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                            Error::env(name, &raw, "expected a whole number >= 1")
                        })?;
                    match name {
                        "MLLOG_TENSOR_PARALLELISM" => self.tensor_parallelism = Some(n),
                        "MLLOG_PIPELINE_PARALLELISM" => self.pipeline_parallelism = Some(n),
                        "MLLOG_CONTEXT_PARALLELISM" => self.context_parallelism = Some(n),
                        "MLLOG_EXPERT_PARALLELISM" => self.expert_parallelism = Some(n),
                        "MLLOG_MICRO_BATCH_SIZE" => self.micro_batch_size = Some(n),
                        _ => unreachable!("every listed variable is handled"),
                    }
                }
            }
        }
        Ok(())
    }

    /// The records to log, in order.
    #[doc(hidden)]
    pub fn records(&self) -> Vec<(Str, Value)> {
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
        push(
            keys::LOWEST_NUMERICAL_PRECISION_IN_LINEAR,
            owned(&self.precision_linear),
        );
        push(
            keys::LOWEST_NUMERICAL_PRECISION_IN_ATTN,
            owned(&self.precision_attn),
        );
        push(
            keys::LOWEST_NUMERICAL_PRECISION_IN_COMM,
            owned(&self.precision_comm),
        );
        let int = |v: Option<u32>| v.map(Value::from);
        push(keys::TENSOR_PARALLELISM, int(self.tensor_parallelism));
        push(keys::PIPELINE_PARALLELISM, int(self.pipeline_parallelism));
        push(keys::CONTEXT_PARALLELISM, int(self.context_parallelism));
        push(keys::EXPERT_PARALLELISM, int(self.expert_parallelism));
        push(keys::MICRO_BATCH_SIZE, int(self.micro_batch_size));
        out
    }

    pub(crate) fn fields(&self) -> [Field; 17] {
        let f = |key, builder, variable, set| Field {
            key,
            builder,
            variable,
            set,
        };
        [
            f(
                keys::SUBMISSION_BENCHMARK,
                "benchmark",
                "MLLOG_SUBMISSION_BENCHMARK",
                self.benchmark.is_some(),
            ),
            f(
                keys::SUBMISSION_ORG,
                "org",
                "MLLOG_SUBMISSION_ORG",
                self.org.is_some(),
            ),
            f(
                keys::SUBMISSION_DIVISION,
                "division",
                "MLLOG_SUBMISSION_DIVISION",
                self.division.is_some(),
            ),
            f(
                keys::SUBMISSION_STATUS,
                "status",
                "MLLOG_SUBMISSION_STATUS",
                self.status.is_some(),
            ),
            f(
                keys::SUBMISSION_PLATFORM,
                "platform",
                "MLLOG_SUBMISSION_PLATFORM",
                self.platform.is_some(),
            ),
            f(
                keys::SUBMISSION_POC_NAME,
                "poc_name",
                "MLLOG_SUBMISSION_POC_NAME",
                self.poc_name.is_some(),
            ),
            f(
                keys::SUBMISSION_POC_EMAIL,
                "poc_email",
                "MLLOG_SUBMISSION_POC_EMAIL",
                self.poc_email.is_some(),
            ),
            f(
                keys::SUBMISSION_ENTRY,
                "entry",
                "MLLOG_SUBMISSION_ENTRY",
                self.entry.is_some(),
            ),
            f(
                keys::CONFIG_FILENAME,
                "config_filename",
                "MLLOG_CONFIG_FILENAME",
                self.config_filename.is_some(),
            ),
            f(
                keys::LOWEST_NUMERICAL_PRECISION_IN_LINEAR,
                "precision",
                "MLLOG_LOWEST_NUMERICAL_PRECISION_LINEAR",
                self.precision_linear.is_some(),
            ),
            f(
                keys::LOWEST_NUMERICAL_PRECISION_IN_ATTN,
                "precision",
                "MLLOG_LOWEST_NUMERICAL_PRECISION_ATTN",
                self.precision_attn.is_some(),
            ),
            f(
                keys::LOWEST_NUMERICAL_PRECISION_IN_COMM,
                "precision",
                "MLLOG_LOWEST_NUMERICAL_PRECISION_COMM",
                self.precision_comm.is_some(),
            ),
            f(
                keys::TENSOR_PARALLELISM,
                "parallelism",
                "MLLOG_TENSOR_PARALLELISM",
                self.tensor_parallelism.is_some(),
            ),
            f(
                keys::PIPELINE_PARALLELISM,
                "parallelism",
                "MLLOG_PIPELINE_PARALLELISM",
                self.pipeline_parallelism.is_some(),
            ),
            f(
                keys::CONTEXT_PARALLELISM,
                "parallelism",
                "MLLOG_CONTEXT_PARALLELISM",
                self.context_parallelism.is_some(),
            ),
            f(
                keys::EXPERT_PARALLELISM,
                "parallelism",
                "MLLOG_EXPERT_PARALLELISM",
                self.expert_parallelism.is_some(),
            ),
            f(
                keys::MICRO_BATCH_SIZE,
                "micro_batch_size",
                "MLLOG_MICRO_BATCH_SIZE",
                self.micro_batch_size.is_some(),
            ),
        ]
    }
}
