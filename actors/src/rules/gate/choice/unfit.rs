//! Why a node does not fit a set, and the message that counts the nodes each
//! reason removed (kube-scheduler's `0/N nodes are available: ...`).

use crate::api::{NodeFacts, PodScheduling};
use crate::rules::scheduling::{Filter, failing_filter};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Why a node cannot take the set, in the order the filters run. What the
/// pods themselves rule out comes first (their node selector, affinity or
/// pin: the same whatever the node's state), so that a set pinned to one
/// node is not told again and again about nodes it could never use; then
/// the scheduler's other filters (what the pinned pods would meet), then ours.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unfit {
    /// It has none of a GPU resource the set needs: not a node for it at
    /// all, whatever else is true of it (told apart from "without room").
    NoSuchGpu(String),
    /// NodeAffinity: a pod's nodeSelector or required affinity excludes it.
    Affinity,
    NotReady,
    /// NodeUnschedulable: cordoned, and a pod does not tolerate it.
    Cordoned,
    /// TaintToleration: a NoSchedule/NoExecute taint a pod does not tolerate.
    Taint,
    /// NodeResourcesFit: no room for a pod's request of this resource (cpu,
    /// memory, pods...) next to the pods bound there.
    PodRoom(String),
    /// A class's nodeSelector excludes it.
    ClassSelector,
    /// Its lost set covers a resource of the set.
    DevicesLost,
    /// Tainted for evacuation (E2): its GPU VMs go elsewhere.
    Evacuating,
    /// Not enough free GPUs of this resource.
    NoRoom(String),
    /// O2: it fits, but could hold the head of a class whose GPUs the set
    /// would take, and that head goes first (what holds it, phrased).
    Held(String),
}

impl Unfit {
    pub(super) fn phrase(&self) -> String {
        match self {
            Unfit::NoSuchGpu(r) => format!("with no {r}"),
            Unfit::NotReady => "not Ready".into(),
            Unfit::Cordoned => "cordoned".into(),
            Unfit::Taint => "with a taint not tolerated".into(),
            Unfit::Affinity => "not matching the pods' node selector or affinity".into(),
            Unfit::PodRoom(r) | Unfit::NoRoom(r) => format!("without room for {r}"),
            Unfit::ClassSelector => "not selected by the class".into(),
            Unfit::DevicesLost => "that lost their devices".into(),
            Unfit::Evacuating => "being evacuated".into(),
            Unfit::Held(why) => why.clone(),
        }
    }

    /// One of the filters kube-scheduler would apply to the pinned pods.
    pub(super) fn is_scheduler(&self) -> bool {
        matches!(
            self,
            Unfit::Cordoned | Unfit::Taint | Unfit::Affinity | Unfit::PodRoom(_)
        )
    }
}

/// The first scheduler filter that keeps a pod off `node`, if any.
pub fn pod_unfit(s: &PodScheduling, node: &NodeFacts) -> Option<Unfit> {
    failing_filter(s, node).map(|f| match f {
        Filter::NodeAffinity => Unfit::Affinity,
        Filter::NodeUnschedulable => Unfit::Cordoned,
        Filter::TaintToleration => Unfit::Taint,
    })
}

/// "no node fits the set: 2 nodes cordoned, 1 node without room".
pub(super) fn no_node_message(unfit: &BTreeMap<Unfit, usize>) -> String {
    if unfit.is_empty() {
        return "no node fits the set: there are no nodes".into();
    }
    let mut m = String::from("no node fits the set: ");
    for (i, (u, n)) in unfit.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let nodes = if *n == 1 { "node" } else { "nodes" };
        let _ = write!(m, "{sep}{n} {nodes} {}", u.phrase());
    }
    m
}
