//! When a rule runs again, as data: for each change the world's `apply`
//! reports, who it concerns (`whom`), found through the indexes, never by
//! a scan. The supervisor tells them in `Wake`'s order.

use crate::api::{GPUClaim, NodeFacts, vmi_owner};
use crate::controller::placement::LookAt;
use crate::controller::pool_rules::PoolLook;
use crate::world::devices::DevicesChange;
use crate::world::{
    AllocationChange, Change, ClaimChange, ClassChange, NodeChange, PodChange, QuotaChange,
    VmiChange, World, key, split_key,
};
use std::sync::Arc;

/// One actor a change concerns. The variants' order is the order they
/// are told in (`whom` sorts by it, stably): the claims first, since
/// the writes a change owes are theirs (a VMI going final owes L5's
/// detach, a node failing owes G6, a node back owes L4) and they should
/// not queue behind placement's look; then the classes and quotas, whose
/// counts follow; then placement, which looks again at what waits.
/// Actors run in the order they are told, on one thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wake {
    /// This claim's actor decides again.
    Claim(String),
    /// This class's actor decides again.
    Class(String),
    /// This quota's actor decides again.
    Quota(String),
    /// D7 looks at this pool or rule again.
    Pool(PoolLook),
    /// Placement looks at this again.
    Placement(LookAt),
}

impl Wake {
    /// The place of this kind of recipient in the order they are told.
    fn rank(&self) -> u8 {
        match self {
            Wake::Claim(_) => 0,
            Wake::Class(_) => 1,
            Wake::Quota(_) => 2,
            // Before placement: a newly managed pool's rule is written
            // before its first allocation (placement waits for it).
            Wake::Pool(_) => 3,
            Wake::Placement(_) => 4,
        }
    }
}

/// Who `change` concerns, in the order they are told: by `Wake::rank`,
/// and among one rank in the order found. A recipient may appear twice
/// (two reasons); telling it twice costs a message and decides once.
pub fn whom(change: Change, w: &World) -> Vec<Wake> {
    let mut out = Vec::new();
    match change {
        Change::Nothing => {}
        Change::Claim(c) => claim(c, w, &mut out),
        Change::Class(c) => class(c, w, &mut out),
        Change::Allocation(a) => allocation(a, w, &mut out),
        Change::Quota(q) => quota(q, &mut out),
        Change::Vmi(v) => vmi(v, w, &mut out),
        Change::Pod(p) => pod(p, w, &mut out),
        Change::Node(n) => node(n, w, &mut out),
        Change::Devices(d) => devices(d, w, &mut out),
        // O1: the waiting sets are ordered again.
        Change::Priority(p) if p.moved => out.push(Wake::Placement(LookAt::Priorities)),
        Change::Priority(_) => {}
    }
    out.sort_by_key(Wake::rank);
    out
}

fn claims(keys: impl IntoIterator<Item = String>) -> impl Iterator<Item = Wake> {
    keys.into_iter().map(Wake::Claim)
}

/// D1, D2: devices published, held or let go on these nodes, or the
/// devices of these DRA classes changed: the classes count again, and the
/// sets waiting on those nodes look again.
fn devices(d: DevicesChange, w: &World, out: &mut Vec<Wake>) {
    if !d.classes.is_empty() {
        out.push(Wake::Placement(LookAt::Capacity));
    }
    out.extend(d.classes.into_iter().map(Wake::Class));
    for node in d.nodes {
        // D6: the claims there whose devices came or went.
        out.extend(claims(w.claims_on_node(&node)));
        out.push(Wake::Placement(LookAt::Node(node)));
    }
    // D5: a template or a launcher pod's ResourceClaim came or changed.
    out.extend(d.vmis.into_iter().map(|v| Wake::Placement(LookAt::Vmi(v))));
    // D4: a backing claim (or one in its way) came, changed or went: its
    // GPUClaim (L8 waits for no pod to hold it; D4 lets one being deleted
    // go), and the sets that hold the GPUClaim look again.
    for c in d.claims {
        out.push(Wake::Claim(c.clone()));
        out.push(Wake::Placement(LookAt::Claim(c)));
    }
    // D4, D8: the records naming devices whose holds moved: their claims
    // (Lost, or a device named twice said), and placement (brought back,
    // or moved off a device another took).
    out.extend(d.records.iter().cloned().map(Wake::Claim));
    out.extend(
        d.records
            .into_iter()
            .map(|r| Wake::Placement(LookAt::BackingClaim(r))),
    );
    // D7: pools that may have become managed or not, rules that changed.
    if d.all_pools {
        out.push(Wake::Pool(PoolLook::Every));
    } else {
        out.extend(d.pools.into_iter().map(|p| Wake::Pool(PoolLook::Pool(p))));
    }
    out.extend(d.rules.into_iter().map(|r| Wake::Pool(PoolLook::Rule(r))));
}

fn claim(c: ClaimChange, w: &World, out: &mut Vec<Wake>) {
    if c.new_version {
        // E2: a claim moved or waiting may end or block an evacuation.
        if w.evacuation_has_work() {
            out.push(Wake::Placement(LookAt::Evacuation));
        }
        out.push(Wake::Claim(c.key.clone()));
        claim_to_placement(&c.key, c.old.as_deref(), c.now.as_deref(), out);
        out.push(Wake::Placement(LookAt::Claim(c.key.clone())));
    }
    if !c.usage_changed.is_empty() {
        // Q2: the namespace's quotas show what its claims hold.
        out.extend(
            w.quota_keys_in(split_key(&c.key).0)
                .into_iter()
                .map(Wake::Quota),
        );
    }
    out.extend(c.usage_changed.into_iter().map(Wake::Class));
}

/// A claim changed: the VMI that owns a template claim may need a new one
/// (G2), and a claim gone may leave its allocation without a claim.
fn claim_to_placement(
    k: &str,
    old: Option<&GPUClaim>,
    now: Option<&GPUClaim>,
    out: &mut Vec<Wake>,
) {
    let (ns, _) = split_key(k);
    for c in old.into_iter().chain(now) {
        if let (true, Some((owner, _))) = (c.is_template(), vmi_owner(&c.metadata)) {
            out.push(Wake::Placement(LookAt::Vmi(key(ns, owner))));
        }
    }
    if now.map(|c| &c.metadata.uid) != old.map(|c| &c.metadata.uid) {
        out.push(Wake::Placement(LookAt::Allocation(k.to_string())));
    }
}

fn quota(q: QuotaChange, out: &mut Vec<Wake>) {
    out.push(Wake::Quota(q.key.clone()));
    // Q1: a quota made, removed or given other limits: the namespace's
    // waiting sets look again (its own status writes are no such change).
    if q.spec_changed {
        out.push(Wake::Placement(LookAt::Namespace(
            split_key(&q.key).0.to_string(),
        )));
    }
}

fn class(c: ClassChange, w: &World, out: &mut Vec<Wake>) {
    out.push(Wake::Class(c.name.clone()));
    if c.spec_changed {
        // Q2: quotas naming a class say whether it exists.
        out.extend(w.quotas_naming(&c.name).into_iter().map(Wake::Quota));
        // A class made, removed, or given more budget or other nodes:
        // waiting sets look again (its own status writes are no such change).
        out.push(Wake::Placement(LookAt::Capacity));
    }
    // G2: a VMI that asks for GPUs in its spec alone asks for a class that
    // serves them; a class made, deleted or changed may change which (or
    // whether any).
    for r in &c.serving_changed {
        out.extend(
            w.vmis_requesting(r)
                .into_iter()
                .map(|v| Wake::Placement(LookAt::Vmi(v))),
        );
        // G2: the other classes of the resource say whether they share
        // it. A sibling's SharedResource turns only where it is left
        // alone (one live class after a class went) or gains its first
        // sibling (two after one came): with three or more, every
        // sibling shares before and after, and its message names none, so
        // none is woken (at 150 classes of one resource, waking them all
        // put 150 decisions before the deleted class's own write).
        let live = w.live_classes_serving(r);
        if live.len() <= 2 {
            out.extend(live.into_iter().filter(|n| *n != c.name).map(Wake::Class));
        }
    }
    out.extend(
        c.dra_vmis
            .into_iter()
            .map(|v| Wake::Placement(LookAt::Vmi(v))),
    );
    // L4 asks whether the class's resource is covered by a node's lost set.
    if c.resource_changed {
        out.extend(claims(w.claims_of_class(&c.name)));
    }
    // D7: the pools the class serves a device of may have moved anywhere.
    if c.dra_devices_moved {
        out.push(Wake::Pool(PoolLook::Every));
    }
}

fn allocation(a: AllocationChange, w: &World, out: &mut Vec<Wake>) {
    // Its claim: whether it holds GPUs without an allocation.
    out.push(Wake::Claim(a.key.clone()));
    // An orphan to delete, or (deleted) one placement deleted itself.
    out.push(Wake::Placement(LookAt::Allocation(a.key.clone())));
    if let Some(f) = a.freed {
        out.push(Wake::Placement(LookAt::Freed {
            node: f.node,
            class: f.class,
            namespace: split_key(&a.key).0.to_string(),
        }));
    }
    if let Some(node) = a.taken {
        out.push(Wake::Placement(LookAt::Node(node)));
    }
    if let Some(class) = a.budget_used {
        out.push(Wake::Placement(LookAt::BudgetUsed(class)));
    }
    // Q1 is checked before the nodes: the namespace's sets waiting on
    // nodes may now wait OverQuota (a fresh controller would say so).
    if let Some(ns) = a.quota_used {
        out.push(Wake::Placement(LookAt::Namespace(ns)));
    }
    // D2: a DRA allocation's devices held or let go.
    devices(a.devices, w, out);
    for node in a.lost_changed {
        out.extend(claims(w.claims_on_node(&node)));
        // The node lost (or got back) devices: the sets waiting on it
        // count it under another filter (G3's DevicesLost).
        out.push(Wake::Placement(LookAt::Node(node)));
    }
}

fn vmi(v: VmiChange, w: &World, out: &mut Vec<Wake>) {
    // Its claims (L5's detach is the write a VMI going final owes).
    if v.life_changed {
        out.extend(claims(w.claims_of_vmi(&v.key)));
    }
    if v.life_changed || v.request_changed {
        out.push(Wake::Placement(LookAt::Vmi(v.key.clone())));
    }
    // E2: a VM restarted off an evacuating node runs again (a phase
    // change: any new version), or a VMI holding GPUs there came or went.
    if w.evacuation_has_work() {
        out.push(Wake::Placement(LookAt::Evacuation));
    }
}

fn pod(p: PodChange, w: &World, out: &mut Vec<Wake>) {
    // The claims of the VMIs whose launcher changed (L9 and L12 read
    // launcher pods).
    for v in &p.vmis {
        out.extend(claims(w.claims_of_vmi(v)));
    }
    // A pod's use of a node changed: the sets waiting on nodes for which
    // the node matters look again, as for a node's change. Room freed may
    // let one be placed; room taken changes what their Waiting message
    // counts (a fresh controller would say it, and a converged cluster
    // gets no writes on restart, I5).
    for node in p.use_changed {
        out.push(Wake::Placement(LookAt::Node(node.to_string())));
    }
    out.extend(p.vmis.into_iter().map(|v| Wake::Placement(LookAt::Vmi(v))));
}

fn node(n: NodeChange, w: &World, out: &mut Vec<Wake>) {
    // E2: a node tainted for evacuation, or no longer, or the restarts it
    // keeps changed.
    let evacuating = |f: &Option<Arc<NodeFacts>>| f.as_ref().is_some_and(|f| f.evacuating);
    let restarts_changed =
        n.old.as_ref().map(|f| &f.restarts) != n.now.as_ref().map(|f| &f.restarts);
    if evacuating(&n.old) || evacuating(&n.now) || restarts_changed {
        out.push(Wake::Placement(LookAt::Evacuation));
    }
    // The node's claims: G6 and L4 are the writes this change owes.
    out.extend(claims(w.claims_on_node(&n.name)));
    // Only the classes whose capacity this node moved (the world keeps
    // each class's capacity as nodes change).
    out.extend(n.moved.into_iter().map(Wake::Class));
    // Sets waiting on nodes look again: a node may take them now, and
    // their Waiting message counts the nodes each filter removed. Which
    // nodes pass a set's affinity changes only with nodes made, deleted
    // or relabelled; any other change matters to the sets it may take.
    if n.old.as_ref().map(|f| &f.labels) != n.now.as_ref().map(|f| &f.labels) {
        out.push(Wake::Placement(LookAt::NodesChanged));
    } else {
        out.push(Wake::Placement(LookAt::Node(n.name)));
    }
}
