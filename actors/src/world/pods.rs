//! The pods bound to nodes and what each node's pods use (docs/design.md, "Objects"): what
//! NodeResourcesFit counts as requested on a node, and the GPUs that G3
//! subtracts from a node's allocatable beyond its allocations. One entry
//! per pod (its node and request), one sum per node, kept as pods change:
//! a question about a node costs what that node's launcher pods cost.

use super::indexes::Shift;
use super::{World, key};
use crate::api::amount::{Tally, total};
use crate::api::{PodUse, ResourceName};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What the pods bound to one node use.
#[derive(Debug, Default)]
pub struct NodeUse {
    /// The node's name, shared by its pods' entries.
    name: Arc<str>,
    /// Their requests summed, per resource (a hostile pod's huge request
    /// taken away again leaves the others' exact).
    requested: HashMap<ResourceName, Tally>,
    pods: u64,
    /// The launcher pods among them, pod key to VMI key: their GPUs may be
    /// covered by their VMI's allocations.
    launchers: BTreeMap<String, String>,
}

impl World {
    /// Stores what a pod bound to a node uses (None: it is not, or no
    /// longer, bound or running); `vmi` names the VMI (`ns/name`) of a
    /// launcher pod. Returns the old use.
    pub(super) fn put_pod_use(
        &self,
        k: &str,
        new: Option<PodUse>,
        vmi: Option<&str>,
    ) -> Option<PodUse> {
        let old = self.bound.remove(k).map(|(_, u)| u);
        if let Some(o) = &old {
            self.shift_node_use(k, o, None, Shift::Remove);
            self.free_moved(&o.node, o.requests.iter().map(|(r, _)| r));
        }
        if let Some(mut n) = new {
            n.node = self.shift_node_use(k, &n, vmi, Shift::Add);
            self.free_moved(&n.node, n.requests.iter().map(|(r, _)| r));
            self.bound.insert(k.to_string(), n);
        }
        old
    }

    /// Adds (or takes away) one pod's use on its node; returns the node's
    /// shared name.
    fn shift_node_use(&self, k: &str, u: &PodUse, vmi: Option<&str>, by: Shift) -> Arc<str> {
        let mut e = self.idx.node_use.entry(u.node.to_string()).or_default();
        if e.name.is_empty() {
            e.name = u.node.clone();
        }
        for (r, a) in u.requests.iter() {
            e.requested
                .entry(ResourceName::new(r))
                .or_default()
                .shift(a, by == Shift::Add);
        }
        e.pods = by.apply(e.pods, 1);
        match (by, vmi) {
            (Shift::Add, Some(v)) => {
                e.launchers.insert(k.to_string(), v.to_string());
            }
            (Shift::Add, None) => {}
            (Shift::Remove, _) => {
                e.launchers.remove(k);
            }
        }
        let name = e.name.clone();
        let empty = e.pods == 0;
        drop(e);
        if empty {
            self.idx.node_use.remove_if(&*name, |_, e| e.pods == 0);
        }
        name
    }

    /// What the pods bound to `node` request of `resource`, summed.
    pub fn pods_requested(&self, node: &str, resource: &str) -> u64 {
        self.idx.node_use.get(node).map_or(0, |e| {
            e.requested
                .get(&ResourceName::new(resource))
                .map_or(0, |t| t.get())
        })
    }

    /// How many pods are bound to `node` (not Succeeded or Failed).
    pub fn pods_on(&self, node: &str) -> u64 {
        self.idx.node_use.get(node).map_or(0, |e| e.pods)
    }

    /// G3: the `resource` that pods bound to `node` use beyond what
    /// allocations cover. A launcher pod of a VMI whose claims hold
    /// allocations there of the resource is covered up to them; every
    /// other pod's request counts in full.
    pub fn used_beyond_allocations(&self, node: &str, resource: &str) -> u64 {
        let Some(e) = self.idx.node_use.get(node) else {
            return 0;
        };
        let requested = e
            .requested
            .get(&ResourceName::new(resource))
            .map_or(0, |t| t.get());
        if requested == 0 {
            return 0;
        }
        let mut by_vmi: BTreeMap<&str, u64> = BTreeMap::new();
        for (pod, vmi) in &e.launchers {
            let asks = self.bound.get(pod).map_or(0, |u| u.requests.get(resource));
            let sum = by_vmi.entry(vmi).or_default();
            *sum = sum.saturating_add(asks);
        }
        let covered = total(
            by_vmi
                .into_iter()
                .filter(|(_, asks)| *asks > 0)
                .map(|(vmi, asks)| asks.min(self.allocated_to_vmi(vmi, node, resource))),
        );
        requested.saturating_sub(covered)
    }

    /// GPUs of `resource` that the claims of the VMI `ns/name` hold on `node`.
    fn allocated_to_vmi(&self, vmi: &str, node: &str, resource: &str) -> u64 {
        total(
            self.claims_of_vmi(vmi)
                .iter()
                .filter_map(|c| self.allocation(c))
                .filter(|r| r.spec.node_name == node && r.spec.resource_name == resource)
                .map(|r| u64::from(r.spec.count)),
        )
    }

    /// The pods whose use is kept, by key (for a relist).
    pub(super) fn bound_pod_keys(&self) -> Vec<String> {
        self.bound.iter().map(|e| e.key().clone()).collect()
    }

    /// What one pod uses, if it is kept.
    pub fn pod_use(&self, k: &str) -> Option<PodUse> {
        self.bound.get(k).map(|u| u.clone())
    }

    /// How many pods' use is kept.
    pub fn bound_pods(&self) -> usize {
        self.bound.len()
    }
}

/// The key of a pod's VMI, for a launcher.
pub fn vmi_key_of(l: &crate::api::LauncherPod) -> String {
    key(&l.namespace, &l.vmi)
}
