//! How each watched change reaches the cache and, through the indexes,
//! exactly the actors it concerns.

use super::Supervisor;
use crate::api::{
    GPUAllocation, GPUClaim, GPUClass, LauncherPod, NodeFacts, PodUse, Vmi, is_deleting,
};
use crate::controller::placement::{PlacementPoke, Relisted};
use crate::ports::{Kind, Obj};
use crate::world::{key, vmi_key_of};
use actix::prelude::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

impl Supervisor {
    /// The cache has a change of `kind` at `rv`: memory of our own writes
    /// up to it can be let go (I6). Called after the cache update and
    /// before the pokes, so no actor sees the mark ahead of the cache.
    fn observed(
        &self,
        kind: Kind,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) {
        self.env.world.observe_rv(kind, crate::api::rv_number(meta));
    }

    pub(super) fn on_event(&mut self, obj: Obj, deleted: bool, ctx: &mut Context<Self>) {
        let (kind, rv) = (obj.kind(), crate::api::rv_number(obj.meta()));
        match obj {
            Obj::Claim(c) => self.on_claim(c, deleted, ctx),
            Obj::Class(c) => self.on_class(c, deleted, ctx),
            Obj::Allocation(r) => self.on_allocation(r, deleted, ctx),
            Obj::Vmi(v) => self.on_vmi(v, deleted, ctx),
            Obj::Pod(p) => self.on_pod(p, deleted, ctx),
            Obj::Node(n) => self.on_node(n, deleted, ctx),
        }
        // Every kind's mark (claims, allocations and pods set theirs
        // before their pokes, where placement's memory depends on it).
        self.env.world.observe_rv(kind, rv);
    }

    fn on_claim(&mut self, c: GPUClaim, deleted: bool, ctx: &mut Context<Self>) {
        let Some(k) = namespaced_key(&c.metadata) else {
            return;
        };
        let rv = c.metadata.resource_version.clone();
        let meta = c.metadata.clone();
        let change = self
            .env
            .world
            .put_claim(&k, (!deleted).then(|| Arc::new(c)));
        self.observed(Kind::Claim, &meta);
        let same = !deleted
            && change
                .old
                .as_ref()
                .is_some_and(|o| o.metadata.resource_version == rv);
        if !same {
            self.poke_claim(&k, ctx);
            self.claim_to_placement(&k, change.old.as_deref());
            self.place(PlacementPoke::Claim(k.clone()));
        }
        for class in change.usage_changed {
            self.poke_class(&class, ctx);
        }
    }

    /// A claim changed: the VMI that owns a template claim may need a new
    /// one (G2), and a claim gone may leave its record without a claim.
    fn claim_to_placement(&self, k: &str, old: Option<&GPUClaim>) {
        let now = self.env.world.claim(k);
        let (ns, _) = crate::world::split_key(k);
        for c in old.into_iter().chain(now.as_deref()) {
            if let (true, Some((owner, _))) = (c.is_template(), crate::api::vmi_owner(&c.metadata))
            {
                self.place(PlacementPoke::Vmi(key(ns, owner)));
            }
        }
        if now.as_ref().map(|c| &c.metadata.uid) != old.map(|c| &c.metadata.uid) {
            self.place(PlacementPoke::Allocation(k.to_string()));
        }
    }

    fn on_class(&mut self, c: GPUClass, deleted: bool, ctx: &mut Context<Self>) {
        let Some(name) = c.metadata.name.clone() else {
            return;
        };
        let resource = c.spec.resource_name.clone();
        let old = self
            .env
            .world
            .put_class(&name, (!deleted).then(|| Arc::new(c)));
        self.poke_class(&name, ctx);
        // A class made, removed, or given more budget or other nodes:
        // waiting sets look again (its own status writes are no such change).
        let now = self.env.world.class(&name);
        if old.as_ref().map(|o| &o.spec) != now.as_ref().map(|c| &c.spec) {
            self.place(PlacementPoke::Capacity);
        }
        // G2: a VMI that asks for GPUs in its spec alone asks for a class
        // that serves them; a class made, deleted or changed may change
        // which (or whether any).
        let life = |c: &GPUClass| (c.spec.resource_name.clone(), is_deleting(&c.metadata));
        if old.as_deref().map(life) != now.as_deref().map(life) {
            let resources: BTreeSet<String> = old
                .iter()
                .chain(now.iter())
                .map(|c| c.spec.resource_name.clone())
                .collect();
            for r in resources {
                for v in self.env.world.vmis_requesting(&r) {
                    self.place(PlacementPoke::Vmi(v));
                }
            }
        }
        // L4 asks whether the class's resource is covered by a node's lost set.
        if deleted
            || old
                .as_ref()
                .is_none_or(|o| o.spec.resource_name != resource)
        {
            for k in self.env.world.claims_of_class(&name) {
                self.poke_claim(&k, ctx);
            }
        }
    }

    fn on_allocation(&mut self, r: GPUAllocation, deleted: bool, ctx: &mut Context<Self>) {
        let Some(k) = namespaced_key(&r.metadata) else {
            return;
        };
        let w = self.env.world.clone();
        let old = w.allocation(&k);
        let places: BTreeSet<(String, String)> = old
            .iter()
            .map(|o| &o.spec)
            .chain(std::iter::once(&r.spec))
            .map(|s| (s.node_name.clone(), s.resource_name.clone()))
            .collect();
        let before: Vec<bool> = places
            .iter()
            .map(|(n, res)| w.lost_covers(n, res))
            .collect();
        let freed = deleted
            || old
                .as_ref()
                .is_some_and(|o| o.spec.node_name != r.spec.node_name);
        let budget_used = (!deleted && old.is_none())
            .then(|| r.spec.class_name.clone())
            .filter(|c| w.class(c).is_some_and(|c| c.spec.budget.is_some()));
        let meta = r.metadata.clone();
        w.put_allocation(&k, (!deleted).then(|| Arc::new(r)));
        self.observed(Kind::Allocation, &meta);
        // An orphan to delete, or (deleted) one placement deleted itself.
        self.place(PlacementPoke::Allocation(k.clone()));
        // Its claim: whether it holds GPUs without a record (records rule).
        self.poke_claim(&k, ctx);
        if freed {
            self.place(PlacementPoke::Capacity);
        }
        if let Some(class) = budget_used {
            self.place(PlacementPoke::BudgetUsed(class));
        }
        for ((node, res), was) in places.iter().zip(before) {
            if w.lost_covers(node, res) != was {
                for c in w.claims_on_node(node) {
                    self.poke_claim(&c, ctx);
                }
            }
        }
    }

    fn on_vmi(&mut self, v: Vmi, deleted: bool, ctx: &mut Context<Self>) {
        let Some(k) = namespaced_key(&v.metadata) else {
            return;
        };
        let facts = |v: &Vmi| (v.uid().to_string(), v.is_final(), is_deleting(&v.metadata));
        let new_facts = (!deleted).then(|| facts(&v));
        let request = |v: &Vmi| (v.gpu_request(), v.device_request());
        let new_request = (!deleted).then(|| request(&v));
        let old = self.env.world.put_vmi(&k, (!deleted).then(|| Arc::new(v)));
        if old.as_deref().map(facts) != new_facts || old.as_deref().map(request) != new_request {
            self.place(PlacementPoke::Vmi(k.clone()));
        }
        if old.as_deref().map(facts) != new_facts {
            for c in self.env.world.claims_of_vmi(&k) {
                self.poke_claim(&c, ctx);
            }
        }
    }

    fn on_pod(&mut self, p: Pod, deleted: bool, ctx: &mut Context<Self>) {
        let Some(k) = namespaced_key(&p.metadata) else {
            return;
        };
        let new = if deleted {
            None
        } else {
            LauncherPod::from_pod(&p).map(Arc::new)
        };
        let w = self.env.world.clone();
        let vmi = new.as_deref().map(vmi_key_of);
        let using = (!deleted).then(|| PodUse::from_pod(&p)).flatten();
        let was_using = w.put_pod_use(&k, using.clone(), vmi.as_deref());
        let old = w.put_pod(&k, new.clone());
        self.observed(Kind::Pod, &p.metadata);
        self.pod_use_changed(was_using.as_ref(), using.as_ref());
        let facts = |p: &LauncherPod| {
            (
                p.vmi.clone(),
                p.gated,
                p.pinned.clone(),
                p.node_name.clone(),
                p.scheduling.clone(),
                p.requests.clone(),
                p.unschedulable.clone(),
                p.terminal,
            )
        };
        if old.as_deref().map(facts) == new.as_deref().map(facts) {
            return;
        }
        let vmis: BTreeSet<String> = old
            .iter()
            .chain(new.iter())
            .map(|p| key(&p.namespace, &p.vmi))
            .collect();
        for v in vmis {
            self.place(PlacementPoke::Vmi(v.clone()));
            for c in self.env.world.claims_of_vmi(&v) {
                self.poke_claim(&c, ctx);
            }
        }
    }

    /// A pod's use of a node changed: the sets waiting on nodes look
    /// again, as for a node's change. Room freed may let one be placed;
    /// room taken changes what their Waiting message counts (a fresh
    /// controller would say it, and a converged cluster gets no writes on
    /// restart, I5).
    fn pod_use_changed(&self, old: Option<&PodUse>, new: Option<&PodUse>) {
        if old != new {
            self.place(PlacementPoke::NodesChanged);
        }
    }

    fn on_node(&mut self, n: Node, deleted: bool, ctx: &mut Context<Self>) {
        let Some(facts) = NodeFacts::from_node(&n) else {
            return;
        };
        let name = facts.name.clone();
        let new = (!deleted).then(|| Arc::new(facts));
        let (old, moved) = self.env.world.put_node(&name, new.clone());
        if old == new {
            return; // a heartbeat: nothing any rule reads changed
        }
        if let Some(n) = &new {
            self.report_unreadable(n, old.as_deref());
        }
        // Sets waiting on nodes look again: a node may take them now, and
        // their Waiting message counts the nodes each filter removed.
        self.place(PlacementPoke::NodesChanged);
        for c in self.env.world.claims_on_node(&name) {
            self.poke_claim(&c, ctx);
        }
        // Only the classes whose capacity this node moved (the world keeps
        // each class's capacity as nodes change).
        for c in moved {
            self.poke_class(&c, ctx);
        }
    }

    /// A GPU resource a node advertises that is not a whole number of
    /// devices counts as none: said once per value, for the resources of
    /// the classes (cpu "3500m" is no business of ours).
    fn report_unreadable(&self, n: &NodeFacts, old: Option<&NodeFacts>) {
        for (resource, (quantity, error)) in &n.unreadable {
            let said =
                old.is_some_and(|o| o.unreadable.get(resource) == n.unreadable.get(resource));
            let ours = self
                .env
                .world
                .classes
                .iter()
                .any(|c| &c.spec.resource_name == resource);
            if ours && !said {
                tracing::warn!(node = %n.name, %resource, %quantity, %error, "the node's allocatable GPUs are not a whole number of devices; counted as none");
            }
        }
    }

    pub(super) fn relisted(&mut self, kind: Kind, objs: Vec<Obj>, ctx: &mut Context<Self>) {
        let keep: HashSet<String> = objs
            .iter()
            .filter_map(|o| object_key(kind, o.meta()))
            .collect();
        let w = self.env.world.clone();
        let gone: Vec<Obj> = match kind {
            Kind::Claim => stale(&w.claims, &keep, |c| Obj::Claim(GPUClaim::clone(c))),
            Kind::Class => stale(&w.classes, &keep, |c| Obj::Class(GPUClass::clone(c))),
            Kind::Allocation => stale(&w.allocations, &keep, |r| {
                Obj::Allocation(GPUAllocation::clone(r))
            }),
            Kind::Vmi => stale(&w.vmis, &keep, |v| Obj::Vmi(Vmi::clone(v))),
            Kind::Pod => stale_pods(&w, &keep),
            Kind::Node => stale(&w.nodes, &keep, |n| Obj::Node(node_named(&n.name))),
        };
        for o in gone {
            self.on_event(o, true, ctx);
        }
        for o in objs {
            self.on_event(o, false, ctx);
        }
        if let Some(p) = &self.placement {
            p.do_send(Relisted(kind));
        }
        self.env.world.mark_listed(kind);
        self.synced.insert(kind);
        self.update_ready(ctx);
    }
}

fn namespaced_key(
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<String> {
    Some(key(m.namespace.as_deref()?, m.name.as_deref()?))
}

fn object_key(
    kind: Kind,
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<String> {
    if kind.namespaced() {
        namespaced_key(m)
    } else {
        m.name.clone()
    }
}

pub(super) fn sorted_keys<T>(map: &dashmap::DashMap<String, T>) -> Vec<String> {
    let mut keys: Vec<String> = map.iter().map(|e| e.key().clone()).collect();
    keys.sort();
    keys
}

fn stale<T>(
    map: &dashmap::DashMap<String, Arc<T>>,
    keep: &HashSet<String>,
    f: impl Fn(&T) -> Obj,
) -> Vec<Obj> {
    sorted_keys(map)
        .into_iter()
        .filter(|k| !keep.contains(k))
        .filter_map(|k| map.get(&k).map(|e| f(e.value())))
        .collect()
}

/// Pods gone while the watch was down: launchers, and pods whose use of a
/// node is kept.
fn stale_pods(w: &crate::world::World, keep: &HashSet<String>) -> Vec<Obj> {
    let mut keys: BTreeSet<String> = sorted_keys(&w.pods).into_iter().collect();
    keys.extend(w.bound_pod_keys());
    keys.into_iter()
        .filter(|k| !keep.contains(k))
        .map(|k| {
            let (ns, name) = crate::world::split_key(&k);
            let mut p = Pod::default();
            p.metadata.namespace = Some(ns.to_string());
            p.metadata.name = Some(name.to_string());
            Obj::Pod(p)
        })
        .collect()
}

fn node_named(name: &str) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.to_string());
    n
}
