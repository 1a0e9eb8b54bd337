//! The facts about a node that gpu-claims decides on. Kept instead of the
//! Node so that heartbeats, which change none of them, reach no actor.

use super::quantity::QuantityError;
use super::{
    DEVICES_LOST_TAINT, EVACUATE_TAINT, EVACUATION_FINALIZER, HOSTNAME_LABEL, RESTART_MARK_PREFIX,
};
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// E2: a restart under way, as the node it moves a VM off keeps it (an
/// annotation `RESTART_MARK_PREFIX` + the deleted VMI's uid), so that the
/// restarts under way are the cluster's to read, not one process's to
/// remember: a controller that restarts or takes over counts them as its
/// predecessor did (I10).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartMark {
    /// namespace/name of the VirtualMachine restarted.
    pub vm: String,
    /// When its VMI was deleted (the start of `evacuation.timeout`).
    pub at: Time,
}

impl RestartMark {
    /// The annotation that keeps this restart of the VMI `old_uid`.
    pub fn annotation(old_uid: &str) -> String {
        format!("{RESTART_MARK_PREFIX}{old_uid}")
    }

    /// The annotation's value.
    pub fn value(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A mark as written on a node; None when it is not one (an edited
    /// value, a VM key that is not namespace/name).
    pub fn parse(value: &str) -> Option<Self> {
        let m: Self = serde_json::from_str(value).ok()?;
        let (ns, name) = m.vm.split_once('/')?;
        (!ns.is_empty() && !name.is_empty()).then_some(m)
    }
}

/// The restart marks on a node, by the uid of the VMI deleted; None for
/// a value that cannot be read.
fn restart_marks(node: &Node) -> BTreeMap<String, Option<RestartMark>> {
    node.metadata
        .annotations
        .iter()
        .flatten()
        .filter_map(|(k, v)| {
            let uid = k.strip_prefix(RESTART_MARK_PREFIX)?;
            Some((uid.to_string(), RestartMark::parse(v)))
        })
        .collect()
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct NodeFacts {
    pub name: String,
    /// For the Events the controller writes about the node.
    pub uid: Option<String>,
    pub ready: bool,
    /// Cordoned (`spec.unschedulable`): the scheduler's NodeUnschedulable filter.
    pub unschedulable: bool,
    pub labels: BTreeMap<String, String>,
    /// Allocatable per resource as the scheduler counts it: cpu in
    /// millicores, devices (extended resources) in whole numbers, the rest
    /// in units.
    pub allocatable: BTreeMap<String, u64>,
    /// Allocatable quantities that cannot be read (devices that are not a
    /// whole number): they count as none, and the supervisor says why.
    pub unreadable: BTreeMap<String, (String, QuantityError)>,
    /// The taints the scheduler filters on (NoSchedule, NoExecute).
    pub taints: Vec<Taint>,
    /// Values of the devices-lost taints ("" covers every resource).
    pub lost_taints: Vec<String>,
    /// Tainted `gpu.cozystack.io/evacuate`, whatever the effect (E2): no
    /// placement here, and its GPU VMs restart elsewhere.
    pub evacuating: bool,
    /// The evacuate taint's value, where it is a count of at least one:
    /// at most this many of the node's VMs restarting at once (`drain
    /// --max-concurrent`), within `evacuation.maxConcurrent`. A count past
    /// u32 is no limit of the node's; 0 or words are none either.
    pub evacuation_limit: Option<u32>,
    /// E2's restarts under way off this node (`RestartMark`), by the uid
    /// of the VMI deleted.
    pub restarts: BTreeMap<String, Option<RestartMark>>,
    /// E2's finalizer is on the node: it stays, once deleted, until E2
    /// takes it off with the last mark.
    pub evacuation_finalizer: bool,
    /// Deleted, and held by a finalizer.
    pub deleting: bool,
}

impl NodeFacts {
    pub fn from_node(node: &Node) -> Option<Self> {
        let name = node.metadata.name.clone()?;
        let status = node.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let (allocatable, unreadable) =
            super::resources::allocatable(status.and_then(|s| s.allocatable.as_ref()));
        let spec = node.spec.as_ref();
        let all_taints = spec.and_then(|s| s.taints.as_deref()).unwrap_or_default();
        let lost_taints = all_taints
            .iter()
            .filter(|t| t.key == DEVICES_LOST_TAINT)
            .map(|t| t.value.clone().unwrap_or_default())
            .collect();
        let taints = all_taints
            .iter()
            .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
            .map(|t| Taint {
                // When it was added changes nothing the scheduler decides.
                time_added: None,
                ..t.clone()
            })
            .collect();
        let mut labels = node.metadata.labels.clone().unwrap_or_default();
        // The kubelet labels every node with its hostname; G4 pins pods by
        // it. A node object without the label (hand-made) is read as
        // labelled with its name, which is what the kubelet would set.
        labels
            .entry(HOSTNAME_LABEL.to_string())
            .or_insert_with(|| name.clone());
        Some(Self {
            name,
            uid: node.metadata.uid.clone(),
            ready,
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            labels,
            allocatable,
            unreadable,
            taints,
            lost_taints,
            evacuating: all_taints.iter().any(|t| t.key == EVACUATE_TAINT),
            evacuation_limit: all_taints
                .iter()
                .find(|t| t.key == EVACUATE_TAINT)
                .and_then(|t| t.value.as_deref())
                .and_then(|v| v.parse::<u32>().ok())
                .filter(|n| *n > 0),
            restarts: restart_marks(node),
            evacuation_finalizer: node
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == EVACUATION_FINALIZER),
            deleting: node.metadata.deletion_timestamp.is_some(),
        })
    }

    pub fn allocatable(&self, resource: &str) -> u64 {
        self.allocatable.get(resource).copied().unwrap_or(0)
    }

    /// The devices-lost taint covers `resource` when its value is the resource or empty.
    pub fn tainted_lost(&self, resource: &str) -> bool {
        self.lost_taints
            .iter()
            .any(|v| v.is_empty() || v == resource)
    }

    /// Why placement puts no new set here, whatever its free GPUs: not
    /// Ready, being evacuated (E2), cordoned, or a NoSchedule/NoExecute
    /// taint (a launcher pod tolerates none it was not given). None: a
    /// set can go here.
    pub fn skipped(&self) -> Option<String> {
        if !self.ready {
            return Some("not Ready".into());
        }
        if self.evacuating {
            return Some("being evacuated".into());
        }
        if self.unschedulable {
            return Some("cordoned".into());
        }
        self.taints.first().map(|t| {
            let value = t
                .value
                .as_deref()
                .map(|v| format!("={v}"))
                .unwrap_or_default();
            format!("tainted {}{value}:{}", t.key, t.effect)
        })
    }

    pub fn matches(&self, selector: Option<&BTreeMap<String, String>>) -> bool {
        selector.is_none_or(|s| s.iter().all(|(k, v)| self.labels.get(k) == Some(v)))
    }
}
