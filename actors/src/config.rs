//! The configuration file's shape (docs/operations.md, "Config and reload") and its reading from
//! text ([`Config::parse`]). Reading and watching the file belong to the
//! operator; the actors read [`Config`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::time::Duration;

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub kubevirt: KubevirtConfig,
    /// How long an attachment whose VMI never appeared is kept (L6, L9).
    #[serde(default = "default_grace", with = "humantime_serde")]
    pub attachment_grace: Duration,
    /// How long a launcher pod placement pinned may stay Unschedulable
    /// before its VMI is deleted to start again at the gate (G7).
    #[serde(default = "default_unschedulable_grace", with = "humantime_serde")]
    pub unschedulable_grace: Duration,
    #[serde(default)]
    pub log: LogConfig,
    #[serde(default)]
    pub trace: TraceConfig,
    #[serde(default)]
    pub api: ApiConfig,
    #[serde(default)]
    pub evacuation: EvacuationConfig,
    #[serde(default)]
    pub placement: PlacementConfig,
    #[serde(default)]
    pub dra: DraConfig,
    #[serde(default)]
    pub queueing: QueueingConfig,
}

/// O2: how long the set at the head of a class waits before later sets
/// are held back for it.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueueingConfig {
    /// `5m` by default; `0s`: strict order at once; `off`: no set is ever
    /// held back (O1 still orders the decisions).
    #[serde(default = "default_head_of_line_after", with = "off_or_duration")]
    pub head_of_line_after: Option<Duration>,
}

fn default_head_of_line_after() -> Option<Duration> {
    Some(Duration::from_secs(300))
}

impl Default for QueueingConfig {
    fn default() -> Self {
        Self {
            head_of_line_after: default_head_of_line_after(),
        }
    }
}

/// A duration in humantime (`90s`, `5m`), or `off`.
mod off_or_duration {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            None => s.serialize_str("off"),
            Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(d)?;
        match text.trim() {
            "off" => Ok(None),
            t => humantime::parse_duration(t).map(Some).map_err(|e| {
                serde::de::Error::custom(format!(
                    "{t:?} is neither a duration (`90s`, `5m`) nor `off`: {e}"
                ))
            }),
        }
    }
}

/// D1-D8: how gpu-claims allocates DRA devices.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DraConfig {
    /// D7: close the pools gpu-claims allocates in to kube-scheduler with
    /// DeviceTaintRules, so that no device is given out twice.
    #[serde(default = "yes")]
    pub exclusive_devices: bool,
}

impl Default for DraConfig {
    fn default() -> Self {
        Self {
            exclusive_devices: true,
        }
    }
}

/// G4: how placement writes.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementConfig {
    /// How many sets' writes may be under way at once (kube-scheduler's
    /// asynchronous bind): a set's own writes stay in G4's order, sets of
    /// different VMIs overlap. More helps a slow API server; 1 makes the
    /// writes' order the decisions' order.
    #[serde(default = "default_writes_in_flight")]
    pub writes_in_flight: u32,
}

/// The most writes in flight a file may ask for: each holds a connection
/// and a task; past this an API server is slower, not faster.
pub const MAX_PLACEMENT_WRITES_IN_FLIGHT: u32 = 256;

fn default_writes_in_flight() -> u32 {
    16
}

impl Default for PlacementConfig {
    fn default() -> Self {
        Self {
            writes_in_flight: default_writes_in_flight(),
        }
    }
}

/// E2: how a node tainted `gpu.cozystack.io/evacuate` is emptied of its
/// GPU VMs.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvacuationConfig {
    /// How many VM restarts may be under way at once, cluster-wide.
    #[serde(default = "one")]
    pub max_concurrent: u32,
    /// How long a restart counts as under way when the VM's new VMI does
    /// not run.
    #[serde(default = "default_evacuation_timeout", with = "humantime_serde")]
    pub timeout: Duration,
}

fn one() -> u32 {
    1
}

fn default_evacuation_timeout() -> Duration {
    Duration::from_secs(600)
}

impl Default for EvacuationConfig {
    fn default() -> Self {
        Self {
            max_concurrent: one(),
            timeout: default_evacuation_timeout(),
        }
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApiConfig {
    /// The deadline of every API request but watches (which keep their
    /// server-side timeout): an answer that does not come by then is a
    /// failure, retried with backoff. Changes only on restart.
    #[serde(default = "default_request_timeout", with = "humantime_serde")]
    pub request_timeout: Duration,
}

fn default_request_timeout() -> Duration {
    Duration::from_secs(10)
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            request_timeout: default_request_timeout(),
        }
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubevirtConfig {
    /// Off on clusters without KubeVirt: no VMI or pod caches, release by L10.
    #[serde(default = "yes")]
    pub enabled: bool,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogConfig {
    /// EnvFilter directives, e.g. `info,gpu_claims_actors=debug`.
    #[serde(default = "default_filter")]
    pub filter: String,
    #[serde(default)]
    pub format: LogFormat,
}

#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TraceConfig {
    /// `namespace/name` of claims whose actors log at TRACE.
    #[serde(default)]
    pub claims: BTreeSet<String>,
}

fn yes() -> bool {
    true
}
fn default_grace() -> Duration {
    Duration::from_secs(120)
}
fn default_unschedulable_grace() -> Duration {
    Duration::from_secs(60)
}
fn default_filter() -> String {
    "info".into()
}

impl Default for KubevirtConfig {
    fn default() -> Self {
        Self { enabled: true }
    }
}
impl Default for LogConfig {
    fn default() -> Self {
        Self {
            filter: default_filter(),
            format: LogFormat::Text,
        }
    }
}
impl Default for Config {
    fn default() -> Self {
        Self {
            kubevirt: KubevirtConfig::default(),
            attachment_grace: default_grace(),
            unschedulable_grace: default_unschedulable_grace(),
            log: LogConfig::default(),
            trace: TraceConfig::default(),
            api: ApiConfig::default(),
            evacuation: EvacuationConfig::default(),
            placement: PlacementConfig::default(),
            dra: DraConfig::default(),
            queueing: QueueingConfig::default(),
        }
    }
}

/// Why a config text is refused.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("{0}")]
    Yaml(#[from] serde_saphyr::Error),
    #[error(transparent)]
    Invalid(#[from] InvalidConfig),
    /// Nothing but blanks and comments: a ConfigMap emptied by mistake
    /// must not turn the running config back into the defaults.
    #[error("the file holds no settings (empty, or only comments); write `{{}}` for the defaults")]
    Empty,
}

impl Config {
    /// Parses and validates config text. A text with no settings at all
    /// (empty, or only comments) is refused: `{}` is the defaults.
    pub fn parse(text: &str) -> Result<Config, ParseError> {
        let settings = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or_default().trim())
            .any(|l| !l.is_empty() && l != "---" && l != "...");
        if !settings {
            return Err(ParseError::Empty);
        }
        let config: Config = crate::yaml::from_str(text)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what serde cannot: every traced claim is `namespace/name`.
    /// The log filter is checked by the operator, which owns the subscriber.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        for key in &self.trace.claims {
            match key.split_once('/') {
                Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {}
                _ => return Err(InvalidConfig::TraceKey { key: key.clone() }),
            }
        }
        if self.api.request_timeout.is_zero() {
            return Err(InvalidConfig::RequestTimeout);
        }
        if self.evacuation.max_concurrent == 0 {
            return Err(InvalidConfig::EvacuationMaxConcurrent);
        }
        if self.evacuation.timeout.is_zero() {
            return Err(InvalidConfig::EvacuationTimeout);
        }
        let writes = self.placement.writes_in_flight;
        if !(1..=MAX_PLACEMENT_WRITES_IN_FLIGHT).contains(&writes) {
            return Err(InvalidConfig::PlacementWritesInFlight { writes });
        }
        Ok(())
    }

    /// The fields a running process cannot take without a restart, that differ.
    pub fn restart_only_changes(&self, new: &Config) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.kubevirt.enabled != new.kubevirt.enabled {
            v.push("kubevirt.enabled");
        }
        if self.api != new.api {
            v.push("api.requestTimeout");
        }
        v
    }
}

/// What a config file says that cannot be: the file is refused whole.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidConfig {
    #[error("trace.claims: {key:?} is not namespace/name")]
    TraceKey { key: String },
    #[error("api.requestTimeout: must be more than 0")]
    RequestTimeout,
    #[error("evacuation.maxConcurrent: must be at least 1 (0 would never move a VM)")]
    EvacuationMaxConcurrent,
    #[error("evacuation.timeout: must be more than 0")]
    EvacuationTimeout,
    #[error(
        "placement.writesInFlight: {writes} is not between 1 and {MAX_PLACEMENT_WRITES_IN_FLIGHT}"
    )]
    PlacementWritesInFlight { writes: u32 },
}
