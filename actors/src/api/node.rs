//! The facts about a node that gpu-claims decides on. Kept instead of the
//! Node so that heartbeats, which change none of them, reach no actor.

use super::quantity::QuantityError;
use super::{DEVICES_LOST_TAINT, EVACUATE_TAINT, HOSTNAME_LABEL};
use k8s_openapi::api::core::v1::{Node, Taint};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Default)]
pub struct NodeFacts {
    pub name: String,
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
            ready,
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            labels,
            allocatable,
            unreadable,
            taints,
            lost_taints,
            evacuating: all_taints.iter().any(|t| t.key == EVACUATE_TAINT),
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

    pub fn matches(&self, selector: Option<&BTreeMap<String, String>>) -> bool {
        selector.is_none_or(|s| s.iter().all(|(k, v)| self.labels.get(k) == Some(v)))
    }
}
