//! Every write the in-memory cluster answered, in order: what `plan`
//! prints, and what the I5 checks count.

use serde::Serialize;
use std::time::Duration;

/// One write, in `plan`'s output format.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Entry {
    /// Elapsed simulated time, humantime.
    pub at: String,
    #[serde(skip)]
    pub elapsed: Duration,
    pub op: &'static str,
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
    /// The rule that decided the write.
    pub rule: &'static str,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusFields>,
    /// D4: for a ResourceClaim's status, the devices its allocation names
    /// (`driver/pool/device`, sorted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<String>>,
    /// False for a write that changed nothing (I5).
    #[serde(skip)]
    pub changed: bool,
    /// The write was refused (409, 404, invalid).
    #[serde(skip)]
    pub error: Option<String>,
    /// Refused as invalid (422: a name, a schema, a rule): a write a real
    /// API server would refuse too, so a controller bug.
    #[serde(skip)]
    pub invalid: bool,
    /// The store's resourceVersion the write made (0 when refused).
    #[serde(skip)]
    pub resource_version: u64,
}

/// For update_status: what the claim status says after the write.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusFields {
    pub phase: Option<String>,
    pub node_name: Option<String>,
    pub attached_to: Option<String>,
    pub conditions: Vec<String>,
}

#[derive(Default, Debug)]
pub struct Journal {
    pub entries: Vec<Entry>,
}

impl Journal {
    /// Writes that took effect.
    pub fn effective(&self) -> impl Iterator<Item = &Entry> {
        self.entries
            .iter()
            .filter(|e| e.changed && e.error.is_none())
    }
}
