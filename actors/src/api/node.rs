//! The facts about a node that gpu-claims decides on. Kept instead of the
//! Node so that heartbeats, which change none of them, reach no actor.

use super::DEVICES_LOST_TAINT;
use k8s_openapi::api::core::v1::Node;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NodeFacts {
    pub name: String,
    pub ready: bool,
    pub labels: BTreeMap<String, String>,
    /// Whole-number allocatable quantities per resource.
    pub allocatable: BTreeMap<String, u64>,
    /// Values of the devices-lost taints ("" covers every resource).
    pub lost_taints: Vec<String>,
}

impl NodeFacts {
    pub fn from_node(node: &Node) -> Option<Self> {
        let name = node.metadata.name.clone()?;
        let status = node.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let allocatable = status
            .and_then(|s| s.allocatable.as_ref())
            .map(|a| {
                a.iter()
                    .filter_map(|(k, q)| Some((k.clone(), parse_count(&q.0)?)))
                    .collect()
            })
            .unwrap_or_default();
        let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
        let lost_taints = taints
            .map(|t| {
                t.iter()
                    .filter(|t| t.key == DEVICES_LOST_TAINT)
                    .map(|t| t.value.clone().unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default();
        Some(Self {
            name,
            ready,
            labels: node.metadata.labels.clone().unwrap_or_default(),
            allocatable,
            lost_taints,
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

/// A device count: a whole number, possibly with a decimal SI suffix ("1k").
fn parse_count(q: &str) -> Option<u64> {
    let q = q.trim();
    if let Ok(n) = q.parse() {
        return Some(n);
    }
    let (num, mult) = match q.strip_suffix('k') {
        Some(n) => (n, 1000),
        None => (q, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}
