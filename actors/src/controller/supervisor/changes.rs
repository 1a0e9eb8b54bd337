//! How each watched change reaches, through the world's `apply` (which
//! stores it, indexes it, marks the watch's progress and says what
//! changed), exactly the actors it concerns.

use super::Supervisor;
use crate::api::{DecodeError, GPUClaim, NodeFacts, vmi_owner};
use crate::controller::placement::{LookAt, Relisted};
use crate::controller::{ClaimRole, ClassRole, QuotaRole};
use crate::ports::{Kind, Obj};
use crate::world::devices::DevicesChange;
use crate::world::{
    AllocationChange, Change, ClaimChange, ClassChange, NodeChange, PodChange, QuotaChange,
    VmiChange, key, split_key,
};
use actix::prelude::*;
use std::collections::HashSet;

impl Supervisor {
    pub(super) fn on_event(&mut self, obj: Obj, deleted: bool, ctx: &mut Context<Self>) {
        let change = self.env.world.apply(obj, deleted);
        self.fan_out(change, ctx);
    }

    fn fan_out(&mut self, change: Change, ctx: &mut Context<Self>) {
        match change {
            Change::Nothing => {}
            Change::Claim(c) => self.claim_changed(c, ctx),
            Change::Class(c) => self.class_changed(c, ctx),
            Change::Allocation(a) => self.allocation_changed(a, ctx),
            Change::Quota(q) => self.quota_changed(q, ctx),
            Change::Vmi(v) => self.vmi_changed(v, ctx),
            Change::Pod(p) => self.pod_changed(p, ctx),
            Change::Node(n) => self.node_changed(n, ctx),
            Change::Devices(d) => self.devices_changed(d, ctx),
        }
    }

    /// D1, D2: devices published, held or let go on these nodes, or the
    /// devices of these DRA classes changed: the classes count again, and
    /// the sets waiting on those nodes look again.
    fn devices_changed(&mut self, d: DevicesChange, ctx: &mut Context<Self>) {
        for c in &d.classes {
            self.decide_again::<ClassRole>(c, ctx);
        }
        if !d.classes.is_empty() {
            self.place(LookAt::Capacity);
        }
        for node in d.nodes {
            // D6: the claims there whose devices came or went first.
            for c in self.env.world.claims_on_node(&node) {
                self.decide_again::<ClaimRole>(&c, ctx);
            }
            self.place(LookAt::Node(node));
        }
        // D5: a template or a launcher pod's ResourceClaim came or changed.
        for v in d.vmis {
            self.place(LookAt::Vmi(v));
        }
    }

    /// Whether the API server serves a DRA kind (its watch listed, or
    /// answered 404): the DRA classes say DRAUnavailable, or stop saying it.
    pub(super) fn served(&mut self, kind: Kind, served: bool, ctx: &mut Context<Self>) {
        if !Kind::DRA.contains(&kind) {
            return;
        }
        let classes = self.env.world.set_served(kind, served);
        self.devices_changed(
            DevicesChange {
                classes,
                ..Default::default()
            },
            ctx,
        );
    }

    fn claim_changed(&mut self, c: ClaimChange, ctx: &mut Context<Self>) {
        // E2: a claim moved or waiting may end or block an evacuation.
        if c.new_version && self.env.world.evacuation_has_work() {
            self.place(LookAt::Evacuation);
        }
        if c.new_version {
            self.decide_again::<ClaimRole>(&c.key, ctx);
            self.claim_to_placement(&c.key, c.old.as_deref(), c.now.as_deref());
            self.place(LookAt::Claim(c.key.clone()));
        }
        if !c.usage_changed.is_empty() {
            // Q2: the namespace's quotas show what its claims hold.
            for q in self.env.world.quota_keys_in(split_key(&c.key).0) {
                self.decide_again::<QuotaRole>(&q, ctx);
            }
        }
        for class in c.usage_changed {
            self.decide_again::<ClassRole>(&class, ctx);
        }
    }

    /// An object the watch brought that cannot be read. Its cached version
    /// stays; a GPUQuota's namespace is also told, as Q1 fails closed on a
    /// quota it cannot read (and opens again once it can, or it is gone).
    pub(super) fn unreadable(
        &mut self,
        kind: Kind,
        name: &str,
        error: &DecodeError,
        gone: bool,
        ctx: &mut Context<Self>,
    ) {
        if gone {
            tracing::info!(kind = kind.name(), object = %name, "an object that could not be read is gone");
            // Its cached version (from before it became unreadable) goes too.
            let change = self.env.world.forget(kind, name);
            self.fan_out(change, ctx);
        } else {
            tracing::warn!(kind = kind.name(), object = %name, %error, "an object that cannot be read; its cached version stays");
        }
        let why = (!gone).then(|| error.to_string());
        if self.env.world.set_unreadable(kind, name, why) {
            self.place(LookAt::Namespace(split_key(name).0.to_string()));
        }
    }

    fn quota_changed(&mut self, q: QuotaChange, ctx: &mut Context<Self>) {
        // A quota that can be read again is no longer unreadable.
        if self.env.world.set_unreadable(Kind::Quota, &q.key, None) {
            self.place(LookAt::Namespace(split_key(&q.key).0.to_string()));
        }
        self.decide_again::<QuotaRole>(&q.key, ctx);
        // Q1: a quota made, removed or given other limits: the namespace's
        // waiting sets look again (its own status writes are no such change).
        if q.spec_changed {
            self.place(LookAt::Namespace(split_key(&q.key).0.to_string()));
        }
    }

    /// A claim changed: the VMI that owns a template claim may need a new
    /// one (G2), and a claim gone may leave its allocation without a claim.
    fn claim_to_placement(&self, k: &str, old: Option<&GPUClaim>, now: Option<&GPUClaim>) {
        let (ns, _) = split_key(k);
        for c in old.into_iter().chain(now) {
            if let (true, Some((owner, _))) = (c.is_template(), vmi_owner(&c.metadata)) {
                self.place(LookAt::Vmi(key(ns, owner)));
            }
        }
        if now.map(|c| &c.metadata.uid) != old.map(|c| &c.metadata.uid) {
            self.place(LookAt::Allocation(k.to_string()));
        }
    }

    fn class_changed(&mut self, c: ClassChange, ctx: &mut Context<Self>) {
        self.decide_again::<ClassRole>(&c.name, ctx);
        // Q2: quotas naming a class say whether it exists.
        if c.spec_changed {
            for q in self.env.world.quotas_naming(&c.name) {
                self.decide_again::<QuotaRole>(&q, ctx);
            }
        }
        // A class made, removed, or given more budget or other nodes:
        // waiting sets look again (its own status writes are no such change).
        if c.spec_changed {
            self.place(LookAt::Capacity);
        }
        // G2: a VMI that asks for GPUs in its spec alone asks for a class
        // that serves them; a class made, deleted or changed may change
        // which (or whether any).
        for r in &c.serving_changed {
            for v in self.env.world.vmis_requesting(r) {
                self.place(LookAt::Vmi(v));
            }
        }
        for v in c.dra_vmis.iter().cloned() {
            self.place(LookAt::Vmi(v));
        }
        // L4 asks whether the class's resource is covered by a node's lost set.
        if c.resource_changed {
            for k in self.env.world.claims_of_class(&c.name) {
                self.decide_again::<ClaimRole>(&k, ctx);
            }
        }
    }

    fn allocation_changed(&mut self, a: AllocationChange, ctx: &mut Context<Self>) {
        // Its claim first: whether it holds GPUs without an allocation.
        self.decide_again::<ClaimRole>(&a.key, ctx);
        // An orphan to delete, or (deleted) one placement deleted itself.
        self.place(LookAt::Allocation(a.key.clone()));
        if let Some(f) = a.freed {
            let namespace = split_key(&a.key).0.to_string();
            self.place(LookAt::Freed {
                node: f.node,
                class: f.class,
                namespace,
            });
        }
        if let Some(node) = a.taken {
            self.place(LookAt::Node(node));
        }
        if let Some(class) = a.budget_used {
            self.place(LookAt::BudgetUsed(class));
        }
        // Q1 is checked before the nodes: the namespace's sets waiting on
        // nodes may now wait OverQuota (a fresh controller would say so).
        if let Some(ns) = a.quota_used {
            self.place(LookAt::Namespace(ns));
        }
        // D2: a DRA record's devices held or let go: the classes count
        // again, the sets waiting on those nodes look again.
        self.devices_changed(a.devices, ctx);
        for node in a.lost_changed {
            for c in self.env.world.claims_on_node(&node) {
                self.decide_again::<ClaimRole>(&c, ctx);
            }
            // The node lost (or got back) devices: the sets waiting on it
            // count it under another filter (G3's DevicesLost).
            self.place(LookAt::Node(node));
        }
    }

    fn vmi_changed(&mut self, v: VmiChange, ctx: &mut Context<Self>) {
        // Its claims first (L5's detach is the write a VMI going final
        // owes), then placement's look: actors run in the order they are
        // told, on one thread.
        if v.life_changed {
            for c in self.env.world.claims_of_vmi(&v.key) {
                self.decide_again::<ClaimRole>(&c, ctx);
            }
        }
        if v.life_changed || v.request_changed {
            self.place(LookAt::Vmi(v.key.clone()));
        }
        // E2: a VM restarted off an evacuating node runs again (a phase
        // change: any new version), or a VMI holding GPUs there came or went.
        if self.env.world.evacuation_has_work() {
            self.place(LookAt::Evacuation);
        }
    }

    fn pod_changed(&mut self, p: PodChange, ctx: &mut Context<Self>) {
        // The claims of the VMIs whose launcher changed first (L9 and L12
        // read launcher pods), then placement's looks.
        for v in &p.vmis {
            for c in self.env.world.claims_of_vmi(v) {
                self.decide_again::<ClaimRole>(&c, ctx);
            }
        }
        // A pod's use of a node changed: the sets waiting on nodes for
        // which the node matters look again, as for a node's change. Room
        // freed may let one be placed; room taken changes what their
        // Waiting message counts (a fresh controller would say it, and a
        // converged cluster gets no writes on restart, I5).
        for node in p.use_changed {
            self.place(LookAt::Node(node.to_string()));
        }
        for v in p.vmis {
            self.place(LookAt::Vmi(v));
        }
    }

    fn node_changed(&mut self, n: NodeChange, ctx: &mut Context<Self>) {
        if let Some(now) = &n.now {
            self.report_unreadable(now, n.old.as_deref());
        }
        // E2: a node tainted for evacuation, or no longer, or the restarts
        // it keeps changed.
        let evacuating =
            |f: &Option<std::sync::Arc<NodeFacts>>| f.as_ref().is_some_and(|f| f.evacuating);
        let restarts_changed =
            n.old.as_ref().map(|f| &f.restarts) != n.now.as_ref().map(|f| &f.restarts);
        if evacuating(&n.old) || evacuating(&n.now) || restarts_changed {
            self.place(LookAt::Evacuation);
        }
        // The node's claims first: G6 and L4 are the writes this change
        // owes, and they should not queue behind placement's look.
        for c in self.env.world.claims_on_node(&n.name) {
            self.decide_again::<ClaimRole>(&c, ctx);
        }
        // Only the classes whose capacity this node moved (the world keeps
        // each class's capacity as nodes change).
        for c in n.moved {
            self.decide_again::<ClassRole>(&c, ctx);
        }
        // Sets waiting on nodes look again: a node may take them now, and
        // their Waiting message counts the nodes each filter removed. Which
        // nodes pass a set's affinity changes only with nodes made, deleted
        // or relabelled; any other change matters to the sets it may take.
        if n.old.as_ref().map(|f| &f.labels) != n.now.as_ref().map(|f| &f.labels) {
            self.place(LookAt::NodesChanged);
        } else {
            self.place(LookAt::Node(n.name));
        }
    }

    /// A GPU resource a node advertises that is not a whole number of
    /// devices counts as none: said once per value, for the resources of
    /// the classes (cpu "3500m" is no business of ours).
    fn report_unreadable(&self, n: &NodeFacts, old: Option<&NodeFacts>) {
        for (resource, (quantity, error)) in &n.unreadable {
            let said =
                old.is_some_and(|o| o.unreadable.get(resource) == n.unreadable.get(resource));
            if self.env.world.serves(resource) && !said {
                tracing::warn!(node = %n.name, %resource, %quantity, %error, "the node's allocatable GPUs are not a whole number of devices; counted as none");
            }
        }
    }

    pub(super) fn relisted(
        &mut self,
        kind: Kind,
        objs: Vec<Obj>,
        list_rv: Option<u64>,
        unreadable: &[(String, String)],
        ctx: &mut Context<Self>,
    ) {
        // What cannot be read is not gone: its cached version stays.
        let keep: HashSet<String> = objs
            .iter()
            .filter_map(|o| object_key(kind, o.meta()))
            .chain(unreadable.iter().map(|(k, _)| k.clone()))
            .collect();
        let w = self.env.world.clone();
        for k in w.keys(kind).into_iter().filter(|k| !keep.contains(k)) {
            let change = w.forget(kind, &k);
            self.fan_out(change, ctx);
        }
        for o in objs {
            self.on_event(o, false, ctx);
        }
        w.relisted(kind, list_rv);
        if let Some(p) = &self.placement {
            p.do_send(Relisted(kind));
        }
        let next = self.readiness.clone().listed(kind);
        self.move_to(next, ctx);
    }
}

fn object_key(
    kind: Kind,
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<String> {
    if kind.namespaced() {
        Some(key(m.namespace.as_deref()?, m.name.as_deref()?))
    } else {
        m.name.clone()
    }
}
