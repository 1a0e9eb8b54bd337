//! G3's node choice: the node the set's placed claims hold, or the best
//! fit among the nodes that pass every filter; and, when none is left,
//! which filter removed how many nodes.

mod best_fit;
mod unfit;

use unfit::no_node_message;
pub use unfit::{Unfit, pod_unfit};

use super::written::WrittenAllocations;
use super::{WaitReason, Waiting};
use crate::api::amount::total;
use crate::api::{GPUClass, LauncherPod, NodeFacts};
use crate::rules::scheduling::fit::{NodeRoom, fits_request};
use crate::world::World;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The nodes whose change can change a waiting set's decision. A set
/// whose pods' node selector or affinity leaves a few nodes (a VM pinned
/// to its host, or held on its node) is decided again only when one of
/// those changes: the others fail the affinity filter whatever their
/// state, and stay counted as such in its message. Which nodes pass that
/// filter changes only with a node's labels, or a node made or deleted,
/// which every waiting set looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodesThatMatter {
    All,
    Only(BTreeSet<String>),
}

impl NodesThatMatter {
    /// At most this many nodes are remembered; past it, all matter.
    const MOST: usize = 32;

    pub fn touched_by(&self, changed: &BTreeSet<String>) -> bool {
        match self {
            NodesThatMatter::All => !changed.is_empty(),
            NodesThatMatter::Only(nodes) => !nodes.is_disjoint(changed),
        }
    }

    fn only(node: &str) -> Self {
        NodesThatMatter::Only(BTreeSet::from([node.to_string()]))
    }
}

/// What the choice looks at.
pub struct Ask<'a> {
    pub w: &'a World,
    pub written: &'a WrittenAllocations,
    pub pods: &'a [Arc<LauncherPod>],
    pub classes: Vec<Arc<GPUClass>>,
    /// Every resource of the set: a node that lost any of them is out.
    pub resources: Vec<String>,
    /// GPUs needed per resource by the claims that still need a node.
    pub need: BTreeMap<String, u64>,
    /// Allocations those claims already have (node, resource, GPUs): a
    /// Lost claim whose node is back takes no more room there.
    pub own: Vec<(String, String, u64)>,
    /// D3: what the unplaced members of DRA classes ask of a node's devices.
    pub devices: Vec<super::devices::DeviceAsk>,
    /// D2: devices our writes name that the cache does not show yet.
    pub held_devices: std::collections::HashSet<crate::world::devices::DeviceId>,
    /// O2: the heads of the set's classes that go first: a node that could
    /// hold one is not the set's.
    pub held: Vec<&'a crate::rules::queueing::Held>,
}

impl Ask<'_> {
    /// The first filter `node` fails, or the GPUs it would have left free.
    /// The classes' nodeSelectors choose new nodes only: claims that hold
    /// GPUs on a node keep them there if a selector changes later.
    fn fit(&self, node: &NodeFacts, new_node: bool) -> Result<u64, Unfit> {
        let unfit = self
            .pods
            .iter()
            .filter_map(|p| pod_unfit(&p.scheduling, node))
            .min();
        if let Some(Unfit::Affinity) = unfit {
            return Err(Unfit::Affinity);
        }
        // Past the pods' affinity (what they could never use), a node with
        // none of a GPU the set needs is no node for it; one that lost its
        // devices says so (DevicesLost, below).
        let none = |r: &&String| node.allocatable(r) == 0 && !self.w.lost_covers(&node.name, r);
        if let Some(res) = self.need.keys().find(none) {
            return Err(Unfit::NoSuchGpu(res.clone()));
        }
        if !node.ready {
            return Err(Unfit::NotReady);
        }
        // E2: whatever the pods tolerate, an evacuating node takes no set.
        if node.evacuating {
            return Err(Unfit::Evacuating);
        }
        if let Some(u) = unfit {
            return Err(u);
        }
        if let Some(r) = self.pod_room(node) {
            return Err(Unfit::PodRoom(r));
        }
        let selected = |c: &Arc<GPUClass>| node.matches(c.spec.node_selector.as_ref());
        if new_node && !self.classes.iter().all(selected) {
            return Err(Unfit::ClassSelector);
        }
        if self
            .resources
            .iter()
            .any(|r| self.w.lost_covers(&node.name, r))
        {
            return Err(Unfit::DevicesLost);
        }
        // Every amount here is one a node or a pod wrote: summed
        // saturating, so a hostile pod's request reads as "more than the
        // node has", never wraps to a small use (and "left" to a tight fit).
        let mut left = 0u64;
        for (res, want) in &self.need {
            let own = total(
                self.own
                    .iter()
                    .filter(|(n, r, _)| *n == node.name && r == res)
                    .map(|(_, _, c)| *c),
            );
            // Capacity as the node really has it: its allocations (ours
            // not yet seen included) and what other pods use beyond them.
            let used = total([
                self.w.allocated_on(&node.name, res),
                self.written.on(self.w, &node.name, res),
            ])
            .saturating_sub(own)
            .saturating_add(self.w.used_beyond_allocations(&node.name, res));
            let free = node.allocatable(res).saturating_sub(used);
            let after = free
                .checked_sub(*want)
                .ok_or_else(|| Unfit::NoRoom(res.clone()))?;
            left = left.saturating_add(after);
        }
        if !self.devices.is_empty() {
            let (_, free) =
                super::devices::choose(self.w, &node.name, &self.devices, &self.held_devices)
                    .ok_or_else(|| {
                        let classes: BTreeSet<&str> =
                            self.devices.iter().map(|d| d.class.as_str()).collect();
                        let names: Vec<&str> = classes.into_iter().collect();
                        Unfit::NoRoom(format!("GPUClass {} devices", names.join(", ")))
                    })?;
            left = left.saturating_add(free);
        }
        // O2: a node that fits, but could hold a head that goes first.
        if let Some(h) = self.held.iter().find(|h| h.ask.could_hold(self.w, node)) {
            return Err(Unfit::Held(h.phrase()));
        }
        Ok(left)
    }

    /// G3, NodeResourcesFit: the first resource (in the scheduler's order)
    /// that a launcher pod of the set requests and the node has no room
    /// for next to its bound pods. The set's GPU resources are counted
    /// against allocations instead.
    fn pod_room(&self, node: &NodeFacts) -> Option<String> {
        // The node's pods, and those we pinned that the cache does not show yet.
        let requested = |r: &str| {
            self.w
                .pods_requested(&node.name, r)
                .saturating_add(self.written.pinned_requests(self.w, &node.name, r))
        };
        let room = NodeRoom {
            allocatable: &node.allocatable,
            requested: &requested,
            pods: self
                .w
                .pods_on(&node.name)
                .saturating_add(self.written.pinned_pods(self.w, &node.name)),
        };
        let gpus = |r: &str| self.resources.iter().any(|g| g == r);
        self.pods.iter().find_map(|p| {
            fits_request(&p.requests, room, &gpus)
                .into_iter()
                .next()
                .map(|i| i.resource)
        })
    }

    /// The node the set goes to, or why it waits.
    pub(super) fn choose(&self, held: Option<&str>) -> Result<String, Waiting> {
        match held {
            Some(h) => self.held(h).map_err(|(reason, message)| Waiting {
                reason,
                message,
                // Only the held node is looked at (its making included).
                nodes: NodesThatMatter::only(h),
                roomless: None,
            }),
            None => self.best_fit(),
        }
    }

    /// The node the set's placed claims hold: it must still take the set.
    pub(super) fn held(&self, h: &str) -> Result<String, (WaitReason, String)> {
        let Some(node) = self.w.node(h) else {
            return Err((
                WaitReason::NoCapacity,
                format!("its claims hold GPUs on {h}, which does not exist"),
            ));
        };
        match self.fit(&node, false) {
            Ok(_) => Ok(h.to_string()),
            Err(u @ Unfit::Held(_)) => Err((
                WaitReason::Queued,
                format!("its claims hold GPUs on {h}, a node {}", u.phrase()),
            )),
            Err(u) if u.is_scheduler() => Err((
                WaitReason::PinnedElsewhere,
                format!(
                    "its claims hold GPUs on {h}, where its pods cannot run: node {}",
                    u.phrase()
                ),
            )),
            Err(u) => Err((
                WaitReason::NoCapacity,
                format!("its claims hold GPUs on {h}, a node {}", u.phrase()),
            )),
        }
    }
}
