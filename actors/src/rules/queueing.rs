//! O1 and O2: the order in which sets waiting at the gate take the GPUs
//! that free, and what a set at the head of a class asks of a node.
//!
//! O1 orders sets by their VMI's priority (higher first), then by when
//! the set started waiting (older first: its oldest launcher pod's
//! creation, or, for a VM an evacuation stopped, the stop), then by
//! namespace and name. O2 lets the first set of a class that could ever
//! be placed (the head) hold back later sets, once it has waited
//! `queueing.headOfLineAfter`, from the nodes that could hold it and, for
//! a head over budget, from the class's budget. These are the pure parts:
//! the key, and a head's ask; placement keeps who is at the head.

use super::evacuation::vm_owner;
use super::scheduling::failing_filter;
use crate::api::{GPUClass, NodeFacts, PodScheduling, Vmi};
use crate::world::{World, key};
use k8s_openapi::jiff::Timestamp;
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::Arc;

/// O1: a set's place in the order; smaller comes first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OrderKey {
    /// Higher priority first.
    pub priority: Reverse<i32>,
    /// Then the set that has waited longer.
    pub since: Timestamp,
    /// Then `namespace/name`.
    pub vmi: String,
}

impl OrderKey {
    pub fn priority(&self) -> i32 {
        self.priority.0
    }
}

/// O1: where the set of `v` stands. Its priority: its
/// `spec.priorityClassName`'s value (`World::priority_of`). Since when it
/// waits: for a VM an evacuation stopped (its node keeps the restart's
/// mark), the stop (E2: its new set's wait counts from it); else its
/// oldest launcher pod's creation; else the VMI's.
pub fn order_key(v: &Vmi, w: &World) -> OrderKey {
    let ns = v.metadata.namespace.as_deref().unwrap_or_default();
    let name = v.metadata.name.as_deref().unwrap_or_default();
    let k = key(ns, name);
    let class = v
        .spec
        .as_ref()
        .and_then(|s| s.priority_class_name.as_deref());
    let stopped = vm_owner(v).and_then(|vm| {
        w.restart_marks()
            .into_iter()
            .filter_map(|(_, _, m)| m.filter(|m| m.vm == vm))
            .map(|m| m.at.0)
            .min()
    });
    let created = || {
        w.launchers(&k)
            .iter()
            .filter_map(|p| p.created)
            .min()
            .or_else(|| v.metadata.creation_timestamp.as_ref().map(|t| t.0))
    };
    OrderKey {
        priority: Reverse(w.priority_of(class)),
        since: stopped.or_else(created).unwrap_or(Timestamp::MAX),
        vmi: k,
    }
}

/// What a waiting set asks of a node, as O2 judges whether the node could
/// hold it were the node's GPUs of the set's classes all free: its pods'
/// scheduling (the scheduler's filters), its classes (their node
/// selectors), and the GPUs its unplaced claims need, per device plugin
/// resource and per DRA class.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadAsk {
    pub pods: Vec<PodScheduling>,
    pub classes: Vec<Arc<GPUClass>>,
    /// Every device plugin resource of the set (a node that lost one is out).
    pub resources: Vec<String>,
    /// GPUs per device plugin resource.
    pub need: BTreeMap<String, u64>,
    /// Devices per DRA class.
    pub devices: BTreeMap<String, u64>,
    /// GPUs per class (the budgets O2 holds for a head over budget).
    pub by_class: BTreeMap<String, u64>,
}

/// Nodes taken from an index at a time.
const BATCH: usize = 64;

impl HeadAsk {
    /// Whether `node` could hold the set were its GPUs of the set's
    /// classes all free: Ready, not evacuated, the pods' node selector,
    /// affinity, cordon and taints passed, the classes' node selectors
    /// matched, none of its resources lost there, and as many GPUs (or
    /// devices serving each DRA class) as the set asks.
    pub fn could_hold(&self, w: &World, node: &NodeFacts) -> bool {
        node.ready
            && !node.evacuating
            && self.pods.iter().all(|p| failing_filter(p, node).is_none())
            && self
                .classes
                .iter()
                .all(|c| node.matches(c.spec.node_selector.as_ref()))
            && !self.resources.iter().any(|r| w.lost_covers(&node.name, r))
            && self
                .need
                .iter()
                .all(|(r, want)| node.allocatable(r) >= *want)
            && self.devices.iter().all(|(class, want)| {
                u64::try_from(w.serving_count(class, &node.name)).unwrap_or(u64::MAX) >= *want
            })
    }

    /// Whether some node could hold the set: through the index of nodes
    /// by what they have of the set's largest ask (most first), never a
    /// pass over every node of the cluster.
    pub fn some_node_could_hold(&self, w: &World) -> bool {
        let by_resource = self.need.iter().max_by_key(|(_, n)| **n);
        let by_class = self.devices.iter().max_by_key(|(_, n)| **n);
        let batch = |skip: usize| match (by_resource, by_class) {
            (Some((r, n)), _) => w.nodes_by_allocatable(r, *n, skip, BATCH),
            (None, Some((c, n))) => {
                let n = usize::try_from(*n).unwrap_or(usize::MAX);
                w.nodes_by_serving(c, n, skip, BATCH)
            }
            // A set that asks no GPU of a node is never at a head.
            (None, None) => Vec::new(),
        };
        let mut skip = 0;
        loop {
            let nodes = batch(skip);
            if nodes.is_empty() {
                return false;
            }
            skip += nodes.len();
            if nodes
                .iter()
                .filter_map(|n| w.node(n))
                .any(|n| self.could_hold(w, &n))
            {
                return true;
            }
        }
    }

    /// Whether `class`'s budget could hold what the set asks of it.
    pub fn budget_could_hold(&self, w: &World, class: &str) -> bool {
        let want = self.by_class.get(class).copied().unwrap_or(0);
        w.class(class)
            .and_then(|c| c.spec.budget)
            .is_none_or(|b| u64::from(b) >= want)
    }
}

/// O2: a head a set being decided lets go first: the class, the head's
/// VMI, since when it is the head (the claims' `QueueHead` condition),
/// what it asks, and whether it waits over the class's budget.
#[derive(Clone, Debug, PartialEq)]
pub struct Held {
    pub class: String,
    pub head: String,
    pub since: Timestamp,
    pub over_budget: bool,
    pub ask: Arc<HeadAsk>,
}

impl Held {
    /// How it is named where it holds a set back.
    pub fn phrase(&self) -> String {
        format!(
            "held for VMI {}, at the head of GPUClass {} since {}",
            self.head, self.class, self.since
        )
    }
}
