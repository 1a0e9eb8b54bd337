//! O2: whether a waiting set could be at the head of its classes, and
//! what it then asks of a node (`HeadAsk`): a set that waits
//! `NoCapacity` leads the classes of its unplaced claims where some node
//! could hold it were that node's GPUs of its classes all free; a set
//! that waits `OverBudget` leads those whose budget could hold it. A set
//! that waits for anything else (`OverQuota`, its own tenant's limit,
//! among them) leads nothing.

use super::members::{self, Member};
use super::written::WrittenAllocations;
use super::{WaitReason, classes_of, needs, resources_of, unplaced};
use crate::api::amount::add_to;
use crate::api::{GPUClaim, LauncherPod, Vmi};
use crate::rules::queueing::HeadAsk;
use crate::world::World;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The classes a waiting set could lead, and what it asks.
#[derive(Clone, Debug, PartialEq)]
pub struct Lead {
    pub classes: Vec<String>,
    pub ask: Arc<HeadAsk>,
    /// It waits over a class's budget (holds that budget), not for nodes.
    pub over_budget: bool,
}

/// What a set whose members are `members` asks of a node.
fn head_ask(w: &World, members: &[Member], pods: &[Arc<LauncherPod>]) -> HeadAsk {
    let unplaced = unplaced(members);
    let mut devices = BTreeMap::new();
    let mut by_class = BTreeMap::new();
    for m in &unplaced {
        let count = u64::from(m.claim.spec.count);
        add_to(&mut by_class, m.claim.spec.class_name.clone(), count);
        if m.dra.is_some() {
            add_to(&mut devices, m.claim.spec.class_name.clone(), count);
        }
    }
    HeadAsk {
        pods: pods.iter().map(|p| p.scheduling.clone()).collect(),
        classes: classes_of(w, members),
        resources: resources_of(members),
        need: needs(&unplaced),
        devices,
        by_class,
    }
}

/// O2: what a set that waits with `reason` could lead.
pub(super) fn lead(
    v: &Vmi,
    w: &World,
    written: &WrittenAllocations,
    names: &[String],
    found: &[Arc<GPUClaim>],
    pods: &[Arc<LauncherPod>],
    reason: WaitReason,
) -> Option<Lead> {
    if !matches!(reason, WaitReason::NoCapacity | WaitReason::OverBudget) {
        return None;
    }
    let members = members::members(v, w, written, names, found, pods).ok()?;
    let ask = head_ask(w, &members, pods);
    let classes: Vec<String> = match reason {
        WaitReason::OverBudget => ask
            .by_class
            .keys()
            .filter(|c| ask.budget_could_hold(w, c))
            .cloned()
            .collect(),
        _ if ask.some_node_could_hold(w) => ask.by_class.keys().cloned().collect(),
        _ => Vec::new(),
    };
    (!classes.is_empty()).then(|| Lead {
        classes,
        ask: Arc::new(ask),
        over_budget: reason == WaitReason::OverBudget,
    })
}
