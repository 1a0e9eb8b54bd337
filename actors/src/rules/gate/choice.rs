//! G3's node choice: the node the set's placed claims hold, or the best
//! fit among the nodes that pass every filter; and, when none is left,
//! which filter removed how many nodes.

use super::written::WrittenAllocations;
use super::{WaitReason, Waiting};
use crate::api::amount::total;
use crate::api::{GPUClass, LauncherPod, NodeFacts, PodScheduling};
use crate::rules::scheduling::fit::{NodeRoom, fits_request};
use crate::rules::scheduling::{affinity_matches, tolerates_cordon, untolerated};
use crate::world::World;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

/// Why a node cannot take the set, in the order the filters run. What the
/// pods themselves rule out comes first (their node selector, affinity or
/// pin: the same whatever the node's state), so that a set pinned to one
/// node is not told again and again about nodes it could never use; then
/// the scheduler's other filters (what the pinned pods would meet), then ours.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unfit {
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
}

impl Unfit {
    fn phrase(&self) -> String {
        match self {
            Unfit::NotReady => "not Ready".into(),
            Unfit::Cordoned => "cordoned".into(),
            Unfit::Taint => "with a taint not tolerated".into(),
            Unfit::Affinity => "not matching the pods' node selector or affinity".into(),
            Unfit::PodRoom(r) | Unfit::NoRoom(r) => format!("without room for {r}"),
            Unfit::ClassSelector => "not selected by the class".into(),
            Unfit::DevicesLost => "that lost their devices".into(),
            Unfit::Evacuating => "being evacuated".into(),
        }
    }

    /// One of the filters kube-scheduler would apply to the pinned pods.
    fn is_scheduler(&self) -> bool {
        matches!(
            self,
            Unfit::Cordoned | Unfit::Taint | Unfit::Affinity | Unfit::PodRoom(_)
        )
    }
}

/// The first scheduler filter that keeps a pod off `node`, if any.
pub fn pod_unfit(s: &PodScheduling, node: &NodeFacts) -> Option<Unfit> {
    if !affinity_matches(
        &s.node_selector,
        s.required.as_ref(),
        &node.name,
        &node.labels,
    ) {
        return Some(Unfit::Affinity);
    }
    if node.unschedulable && !tolerates_cordon(&s.tolerations) {
        return Some(Unfit::Cordoned);
    }
    if untolerated(&s.tolerations, &node.taints).is_some() {
        return Some(Unfit::Taint);
    }
    None
}

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

    /// Among the nodes that pass every filter, the one left with the fewest
    /// free GPUs after placement, ties by name. Through the index of nodes
    /// by free GPUs where it can answer; a pass over every node where it
    /// cannot, or no node fits (the pass says why). Test builds check
    /// every answer of the index against the pass.
    fn best_fit(&self) -> Result<String, Waiting> {
        let indexed = self.best_fit_indexed();
        if let Some(Some(node)) = &indexed
            && !cfg!(debug_assertions)
        {
            return Ok(node.clone());
        }
        let scanned = self.best_fit_scanned();
        if let Some(found) = indexed {
            debug_assert_eq!(
                found.as_deref(),
                scanned.as_deref().ok(),
                "the index of free GPUs chose otherwise than a pass over every node"
            );
        }
        scanned
    }

    /// Best fit through the world's index, for a set that needs GPUs of
    /// one resource (None for any other: not answered). The nodes where
    /// the index's count is not the set's (placement's writes under way,
    /// the set's own Lost claims' records) are judged in full; the rest
    /// in the index's order, fewest free first, and the first that passes
    /// every filter is the best of them: every node after it is left with
    /// as many free or more. Some(None): no node fits; None also when the
    /// filters turned away `MOST_JUDGED` nodes with room (the pass
    /// answers).
    fn best_fit_indexed(&self) -> Option<Option<String>> {
        let (resource, want, apart) = if self.devices.is_empty() {
            self.indexed_resource()?
        } else {
            self.indexed_devices()?
        };
        let resource = &resource;
        if want == 0 {
            return None;
        }
        let better = |left: u64, name: &str, best: &Option<(u64, String)>| {
            best.as_ref()
                .is_none_or(|(l, b)| (left, name) < (*l, b.as_str()))
        };
        let mut best: Option<(u64, String)> = None;
        for name in &apart {
            if let Some(n) = self.w.node(name)
                && let Ok(left) = self.fit(&n, true)
                && better(left, name, &best)
            {
                best = Some((left, name.clone()));
            }
        }
        /// Nodes taken from the index at a time (its lock is not held
        /// while they are judged).
        const BATCH: usize = 64;
        /// Nodes with room judged before the walk gives up for the pass:
        /// where the filters turn away the tightest nodes one after another
        /// (affinity, taints), the walk must not cost a pass and then
        /// another.
        const MOST_JUDGED: usize = 128;
        let mut judged = 0;
        let mut after = None;
        loop {
            let batch = self.w.nodes_by_free(resource, want, after.as_ref(), BATCH);
            let Some(last) = batch.last() else {
                return Some(best.map(|(_, n)| n));
            };
            after = Some(last.clone());
            for (free, name) in batch {
                if !better(free - want, &name, &best) {
                    return Some(best.map(|(_, n)| n));
                }
                if apart.contains(&name) {
                    continue;
                }
                judged += 1;
                if judged > MOST_JUDGED {
                    return None;
                }
                if let Some(n) = self.w.node(&name)
                    && let Ok(left) = self.fit(&n, true)
                {
                    debug_assert_eq!(left, free - want, "the index's count of {name}");
                    return Some(Some(name));
                }
            }
        }
    }

    /// The index's resource for a set that needs GPUs of one device
    /// plugin resource: it, the GPUs, and the nodes the index's count is
    /// not the set's on (our writes under way, the set's own records).
    fn indexed_resource(&self) -> Option<(String, u64, BTreeSet<String>)> {
        let mut need = self.need.iter();
        let (Some((resource, &want)), None) = (need.next(), need.next()) else {
            return None;
        };
        let mut apart: BTreeSet<String> = self
            .written
            .nodes_holding(self.w, resource)
            .into_iter()
            .collect();
        apart.extend(
            self.own
                .iter()
                .filter(|(_, r, _)| r == resource)
                .map(|(n, _, _)| n.clone()),
        );
        Some((resource.clone(), want, apart))
    }

    /// The same for a set whose unplaced members ask one DRA class for
    /// devices and nothing of a device plugin (D3): the class's key, the
    /// devices, and the nodes of devices our unseen writes hold or the
    /// members hold already.
    fn indexed_devices(&self) -> Option<(String, u64, BTreeSet<String>)> {
        if !self.need.is_empty() {
            return None;
        }
        let mut classes = self.devices.iter().map(|a| a.class.as_str());
        let class = classes.next()?;
        if classes.any(|c| c != class) {
            return None;
        }
        let want = self
            .devices
            .iter()
            .flat_map(|a| a.requests.iter())
            .fold(0u64, |n, r| n.saturating_add(u64::from(r.count)));
        let apart = self
            .held_devices
            .iter()
            .chain(
                self.devices
                    .iter()
                    .flat_map(|a| a.own.iter().chain(&a.recorded)),
            )
            .filter_map(|d| self.w.device(d).map(|f| f.node))
            .collect();
        Some((crate::world::dra_free_key(class), want, apart))
    }

    /// Best fit by a pass over every node, saying why none fits.
    fn best_fit_scanned(&self) -> Result<String, Waiting> {
        let mut best: Option<(u64, String)> = None;
        let mut unfit: BTreeMap<Unfit, usize> = BTreeMap::new();
        // The nodes past the affinity filter, while they are few.
        let mut matter = Some(BTreeSet::new());
        self.w.for_each_node(|n| {
            let fit = self.fit(n, true);
            if fit != Err(Unfit::Affinity)
                && let Some(m) = matter.as_mut()
            {
                m.insert(n.name.clone());
                if m.len() > NodesThatMatter::MOST {
                    matter = None;
                }
            }
            match fit {
                Ok(left) => {
                    if best
                        .as_ref()
                        .is_none_or(|(l, name)| left < *l || (left == *l && n.name < *name))
                    {
                        best = Some((left, n.name.clone()));
                    }
                }
                Err(u) => *unfit.entry(u).or_default() += 1,
            }
        });
        best.map(|(_, n)| n).ok_or_else(|| Waiting {
            reason: WaitReason::NoCapacity,
            message: no_node_message(&unfit),
            nodes: matter.map_or(NodesThatMatter::All, NodesThatMatter::Only),
        })
    }
}

/// "no node fits the set: 2 nodes cordoned, 1 node without room".
fn no_node_message(unfit: &BTreeMap<Unfit, usize>) -> String {
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
