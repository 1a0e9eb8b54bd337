//! Index maintenance: every cache write goes through here so that the
//! indexes and aggregates always match the cached objects.

mod lookups;

use super::{World, key};
use crate::api::{
    GPUAllocation, GPUClaim, GPUClass, GPUQuota, LauncherPod, NodeFacts, Vmi, vmi_owner,
};
use dashmap::DashMap;
use std::collections::BTreeSet;
use std::sync::Arc;

/// What the claims of a class hold: kept incrementally so that a class
/// actor's decision costs O(1), not a pass over its claims.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassUsage {
    /// GPUs of claims in a phase that counts against the budget.
    pub allocated: u64,
    /// Such claims that have not been released (L11's "held").
    pub holders: u64,
}

/// Sets are ordered: a change fans out to its actors in the same order on
/// every run, so `plan` prints the same writes for the same snapshot.
#[derive(Default)]
pub(crate) struct Indexes {
    pub claims_by_vmi: DashMap<String, BTreeSet<String>>,
    pub claims_by_node: DashMap<String, BTreeSet<String>>,
    pub claims_by_class: DashMap<String, BTreeSet<String>>,
    pub class_usage: DashMap<String, ClassUsage>,
    pub launchers_by_vmi: DashMap<String, BTreeSet<String>>,
    pub allocated: DashMap<(String, String), u64>,
    pub allocated_by_class: DashMap<String, u64>,
    /// Per resource: the classes that serve it.
    pub classes_by_resource: DashMap<String, BTreeSet<String>>,
    /// Per device resource: the VMIs whose spec requests it (G2 reads
    /// their request again when a class of it comes or goes).
    pub vmis_by_device: DashMap<String, BTreeSet<String>>,
    /// Per ResourceClaimTemplate (`ns/name`): the VMIs whose
    /// `spec.resourceClaims` name it (D5).
    pub vmis_by_template: DashMap<String, BTreeSet<String>>,
    /// Per node: what the pods bound to it use.
    pub node_use: DashMap<String, super::NodeUse>,
    /// Per namespace: its GPUQuotas' keys.
    pub quotas_by_namespace: DashMap<String, BTreeSet<String>>,
    /// Per class: the GPUQuotas whose `spec.hard` names it.
    pub quotas_by_class: DashMap<String, BTreeSet<String>>,
    /// Per (namespace, class), and per namespace: GPUs its claims hold or
    /// owe (a quota's status, Q2).
    pub namespace_usage: DashMap<(String, String), u64>,
    pub namespace_usage_total: DashMap<String, u64>,
    /// Per (namespace, class), and per namespace: GPUs recorded (Q1).
    pub allocated_by_namespace: DashMap<(String, String), u64>,
    pub allocated_by_namespace_total: DashMap<String, u64>,
    /// Per value of the `kubernetes.io/hostname` label: the nodes that
    /// carry it (one, where the kubelet set it). A set pinned by hostname
    /// is judged on these nodes alone (G3), much as kube-scheduler's
    /// NodeAffinity PreFilter narrows a pod to the nodes its
    /// `metadata.name` fields name.
    pub nodes_by_hostname: DashMap<String, BTreeSet<String>>,
    /// The nodes tainted for evacuation (E2).
    pub evacuating: DashMap<String, ()>,
    /// The nodes that keep restarts under way (E2's `RestartMark`s),
    /// whether or not they are still evacuated.
    pub restarting: DashMap<String, ()>,
}

/// Whether an object's terms go into the indexes (it was stored) or
/// come out of them (it was replaced or removed).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Shift {
    Add,
    Remove,
}

impl Shift {
    /// A sum with `d` added or taken away; saturating, as every count
    /// a tenant or a node writes is hostile.
    pub(super) fn apply(self, sum: u64, d: u64) -> u64 {
        match self {
            Shift::Add => sum.saturating_add(d),
            Shift::Remove => sum.saturating_sub(d),
        }
    }

    /// The key added to or removed from the set of a term.
    fn index(self, map: &DashMap<String, BTreeSet<String>>, term: &str, k: &str) {
        match self {
            Shift::Add => add(map, term, k),
            Shift::Remove => remove(map, term, k),
        }
    }
}

fn shift<K: std::hash::Hash + Eq>(map: &DashMap<K, u64>, k: K, d: u64, by: Shift) {
    let mut e = map.entry(k).or_default();
    *e = by.apply(*e, d);
}

/// The index terms of one claim.
struct ClaimTerms {
    vmis: Vec<String>,
    node: Option<String>,
    class: String,
    usage: ClassUsage,
}

fn claim_terms(c: &GPUClaim) -> ClaimTerms {
    let ns = c.metadata.namespace.as_deref().unwrap_or_default();
    let mut vmis = Vec::with_capacity(2);
    if let Some(v) = c.attached_vmi_name() {
        vmis.push(key(ns, v));
    }
    if let Some((owner, _)) = vmi_owner(&c.metadata) {
        let k = key(ns, owner);
        if !vmis.contains(&k) {
            vmis.push(k);
        }
    }
    let counts = c.phase().counts_against_budget();
    let usage = ClassUsage {
        allocated: if counts { u64::from(c.spec.count) } else { 0 },
        holders: u64::from(counts && !c.is_released()),
    };
    ClaimTerms {
        vmis,
        node: c.node_name().map(str::to_string),
        class: c.spec.class_name.clone(),
        usage,
    }
}

/// Stores `new` at `k` (None removes it); returns what was there.
fn put<T>(map: &DashMap<String, Arc<T>>, k: &str, new: &Option<Arc<T>>) -> Option<Arc<T>> {
    match new {
        Some(v) => map.insert(k.to_string(), v.clone()),
        None => map.remove(k).map(|(_, v)| v),
    }
}

fn add(map: &DashMap<String, BTreeSet<String>>, term: &str, k: &str) {
    map.entry(term.to_string())
        .or_default()
        .insert(k.to_string());
}

/// `k` is indexed under the terms `after` instead of `before`.
fn move_terms<T: AsRef<str> + PartialEq>(
    map: &DashMap<String, BTreeSet<String>>,
    before: &[T],
    after: &[T],
    k: &str,
) {
    for t in before.iter().filter(|t| !after.contains(t)) {
        remove(map, t.as_ref(), k);
    }
    for t in after {
        add(map, t.as_ref(), k);
    }
}

fn remove(map: &DashMap<String, BTreeSet<String>>, term: &str, k: &str) {
    if let Some(mut set) = map.get_mut(term) {
        set.remove(k);
        if set.is_empty() {
            drop(set);
            map.remove_if(term, |_, s| s.is_empty());
        }
    }
}

fn shift_usage(map: &DashMap<String, ClassUsage>, class: &str, u: ClassUsage, by: Shift) {
    let mut e = map.entry(class.to_string()).or_default();
    e.allocated = by.apply(e.allocated, u.allocated);
    e.holders = by.apply(e.holders, u.holders);
}

/// What storing a claim replaced, and the classes whose usage it moved.
pub struct ClaimStored {
    pub old: Option<Arc<GPUClaim>>,
    /// Classes whose usage changed.
    pub usage_changed: Vec<String>,
}

impl World {
    fn index_claim(&self, k: &str, c: &GPUClaim, by: Shift) {
        let t = claim_terms(c);
        let idx = &self.idx;
        for v in &t.vmis {
            by.index(&idx.claims_by_vmi, v, k);
        }
        if let Some(n) = &t.node {
            by.index(&idx.claims_by_node, n, k);
        }
        by.index(&idx.claims_by_class, &t.class, k);
        shift_usage(&idx.class_usage, &t.class, t.usage, by);
        if t.usage.allocated > 0 {
            let ns = super::split_key(k).0.to_string();
            let gpus = t.usage.allocated;
            shift(
                &idx.namespace_usage,
                (ns.clone(), t.class.clone()),
                gpus,
                by,
            );
            shift(&idx.namespace_usage_total, ns, gpus, by);
        }
    }

    /// Stores a claim (None removes it) and keeps the indexes in step.
    pub(super) fn put_claim(&self, k: &str, new: Option<Arc<GPUClaim>>) -> ClaimStored {
        let old = put(&self.claims, k, &new);
        let holding = super::meter::Holding::of;
        self.meter.moved(
            old.as_deref().and_then(holding),
            new.as_deref().and_then(holding),
            std::time::Instant::now(),
        );
        if let Some(o) = &old {
            self.index_claim(k, o, Shift::Remove);
        }
        if let Some(n) = &new {
            self.index_claim(k, n, Shift::Add);
        }
        let mut usage_changed = Vec::new();
        let (ot, nt) = (
            old.as_deref().map(claim_terms),
            new.as_deref().map(claim_terms),
        );
        // The VMIs it names decide which launchers its allocation covers.
        if ot.as_ref().map(|t| &t.vmis) != nt.as_ref().map(|t| &t.vmis)
            && let Some(r) = self.allocation(k)
        {
            self.free_moved(&r.spec.node_name, [r.spec.resource_name.as_str()]);
        }
        match (&ot, &nt) {
            (Some(o), Some(n)) if o.class == n.class => {
                if o.usage != n.usage {
                    usage_changed.push(n.class.clone());
                }
            }
            _ => usage_changed.extend(ot.iter().chain(nt.iter()).map(|t| t.class.clone())),
        }
        ClaimStored { old, usage_changed }
    }

    pub(super) fn put_class(
        &self,
        name: &str,
        new: Option<Arc<GPUClass>>,
    ) -> Option<Arc<GPUClass>> {
        let old = put(&self.classes, name, &new);
        // DRA classes serve no device plugin's resource (theirs is empty).
        if let Some(o) = old.as_ref().filter(|o| !o.spec.resource_name.is_empty()) {
            remove(&self.idx.classes_by_resource, &o.spec.resource_name, name);
        }
        if let Some(n) = new.as_ref().filter(|n| !n.spec.resource_name.is_empty()) {
            add(&self.idx.classes_by_resource, &n.spec.resource_name, name);
        }
        self.class_capacity_changed(name, old.as_deref(), new.as_deref());
        old
    }

    fn shift_allocated(&self, r: &GPUAllocation, by: Shift) {
        let (s, idx) = (&r.spec, &self.idx);
        let gpus = u64::from(s.count);
        shift(&idx.allocated_by_class, s.class_name.clone(), gpus, by);
        let place = (s.node_name.clone(), s.resource_name.clone());
        shift(&idx.allocated, place, gpus, by);
        let ns = r.metadata.namespace.clone().unwrap_or_default();
        let by_class = (ns.clone(), s.class_name.clone());
        shift(&idx.allocated_by_namespace, by_class, gpus, by);
        shift(&idx.allocated_by_namespace_total, ns, gpus, by);
    }

    /// Stores a quota (None removes it); returns the old one.
    pub(super) fn put_quota(&self, k: &str, new: Option<Arc<GPUQuota>>) -> Option<Arc<GPUQuota>> {
        let old = put(&self.quotas, k, &new);
        let ns = super::split_key(k).0;
        let idx = &self.idx;
        if let Some(o) = &old {
            remove(&idx.quotas_by_namespace, ns, k);
            for class in o.spec.hard.keys() {
                remove(&idx.quotas_by_class, class, k);
            }
        }
        if let Some(n) = &new {
            add(&idx.quotas_by_namespace, ns, k);
            for class in n.spec.hard.keys() {
                add(&idx.quotas_by_class, class, k);
            }
        }
        old
    }

    /// Stores a record; returns the old one. Keeps recorded sums per node and resource.
    pub(super) fn put_allocation(
        &self,
        k: &str,
        new: Option<Arc<GPUAllocation>>,
    ) -> Option<Arc<GPUAllocation>> {
        let old = put(&self.allocations, k, &new);
        if let Some(o) = &old {
            self.shift_allocated(o, Shift::Remove);
        }
        if let Some(n) = &new {
            self.shift_allocated(n, Shift::Add);
        }
        for r in old.iter().chain(&new) {
            self.free_moved(&r.spec.node_name, [r.spec.resource_name.as_str()]);
        }
        old
    }

    pub(super) fn put_vmi(&self, k: &str, new: Option<Arc<Vmi>>) -> Option<Arc<Vmi>> {
        let devices = |v: &Vmi| v.device_request().into_keys().collect::<Vec<_>>();
        let added = new.as_deref().map(devices).unwrap_or_default();
        let old = put(&self.vmis, k, &new);
        let removed = old.as_deref().map(devices).unwrap_or_default();
        move_terms(&self.idx.vmis_by_device, &removed, &added, k);
        let templates = |v: &Vmi| -> Vec<String> {
            let ns = v.metadata.namespace.as_deref().unwrap_or_default();
            v.spec
                .iter()
                .flat_map(|s| &s.resource_claims)
                .filter_map(|c| c.resource_claim_template_name.as_deref())
                .map(|t| key(ns, t))
                .collect()
        };
        let added = new.as_deref().map(templates).unwrap_or_default();
        let removed = old.as_deref().map(templates).unwrap_or_default();
        move_terms(&self.idx.vmis_by_template, &removed, &added, k);
        old
    }

    pub(super) fn put_pod(
        &self,
        k: &str,
        new: Option<Arc<LauncherPod>>,
    ) -> Option<Arc<LauncherPod>> {
        let old = put(&self.pods, k, &new);
        if let Some(o) = &old {
            remove(&self.idx.launchers_by_vmi, &key(&o.namespace, &o.vmi), k);
        }
        if let Some(n) = &new {
            add(&self.idx.launchers_by_vmi, &key(&n.namespace, &n.vmi), k);
        }
        old
    }

    /// Puts a node; returns the old one and the classes whose capacity moved.
    pub(super) fn put_node(
        &self,
        name: &str,
        new: Option<Arc<NodeFacts>>,
    ) -> (Option<Arc<NodeFacts>>, Vec<String>) {
        let old = put(&self.nodes, name, &new);
        let hostname = |n: &Option<Arc<NodeFacts>>| -> Vec<String> {
            n.iter()
                .filter_map(|n| n.labels.get(crate::api::HOSTNAME_LABEL).cloned())
                .collect()
        };
        let (was, is) = (hostname(&old), hostname(&new));
        if was != is {
            move_terms(&self.idx.nodes_by_hostname, &was, &is, name);
        }
        if new.as_ref().is_some_and(|n| n.evacuating) {
            self.idx.evacuating.insert(name.to_string(), ());
        } else {
            self.idx.evacuating.remove(name);
        }
        if new
            .as_ref()
            .is_some_and(|n| !n.restarts.is_empty() || n.evacuation_finalizer)
        {
            self.idx.restarting.insert(name.to_string(), ());
        } else {
            self.idx.restarting.remove(name);
        }
        let allocatable = |n: &Option<Arc<NodeFacts>>| n.as_ref().map(|n| n.allocatable.clone());
        if allocatable(&old) != allocatable(&new) {
            self.allocatable.moved(name, old.as_deref(), new.as_deref());
            let resources = old.iter().chain(&new).flat_map(|n| n.allocatable.keys());
            self.free_moved(name, resources.map(String::as_str));
        }
        let moved = if old != new {
            self.node_capacity_changed(old.as_ref(), new.as_ref())
        } else {
            Vec::new()
        };
        (old, moved)
    }
}
