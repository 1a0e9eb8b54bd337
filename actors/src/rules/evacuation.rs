//! E2: evacuating a node. The taint `gpu.cozystack.io/evacuate` (any
//! effect) keeps placements off a node (G3's filters) and restarts its GPU
//! VMs elsewhere: each live VMI attached to a claim held there, owned by a
//! VirtualMachine, is deleted (so its VM starts a new VMI, which comes to
//! the gate and moves, E1), a few at a time. A VMI without a VM owner is
//! never deleted: it would not come back. A restart under way is kept on
//! the node it moves a VM off (`RestartMark`), written before the delete,
//! so that the count survives the controller: these are the decisions,
//! and what each mark stands for now; placement writes them.

use crate::api::{ClaimPhase, RestartMark, Vmi, is_deleting};
use crate::world::{World, key, split_key};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use std::collections::{BTreeMap, BTreeSet};

/// A live VMI holding GPUs on an evacuating node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evacuee {
    /// namespace/name of the VMI.
    pub vmi: String,
    pub uid: String,
    pub resource_version: String,
    /// The evacuating node its claims hold.
    pub node: String,
    /// namespace/name of the VirtualMachine that owns it, if one does.
    pub vm: Option<String>,
}

/// A restart under way: a VM whose VMI E2 deleted, until its next VMI
/// runs or `evacuation.timeout` passes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    /// The uid of the VMI that was deleted.
    pub old_uid: String,
    /// The node it was moved off.
    pub node: String,
}

/// What E2 does now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EvacuationStep {
    /// VMIs to delete now (their VMs restart elsewhere), at most as many
    /// as `maxConcurrent` leaves room for.
    pub restart: Vec<Evacuee>,
    /// VMIs that would not come back once deleted, and why (no
    /// VirtualMachine owner; a VM whose runStrategy starts no deleted
    /// VMI): kept, and said so.
    pub bare: Vec<(Evacuee, String)>,
    /// A restarted VM whose new set waits at the gate: no further VM is
    /// stopped. Its VM and why it waits.
    pub blocked: Option<(String, String)>,
    /// VMs whose set could not be placed on another node at once: not
    /// stopped (stopped, they would only wait), and why. Tried again as
    /// the cluster changes.
    pub nowhere: Vec<(Evacuee, String)>,
    /// VMs left to restart once there is room (for progress reports).
    pub left: usize,
    /// Per evacuating node, its GPU VMs live there (the metric's `live`).
    pub live: BTreeMap<String, usize>,
}

/// The VirtualMachine (namespace/name) that controls `v`, if one does.
pub fn vm_owner(v: &Vmi) -> Option<String> {
    let ns = v.metadata.namespace.as_deref()?;
    v.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| {
            o.kind == "VirtualMachine"
                && o.api_version.starts_with("kubevirt.io/")
                && o.controller == Some(true)
        })
        .map(|o| key(ns, &o.name))
}

/// The live VMIs attached to claims held on `node`, by VMI key.
pub fn evacuees(w: &World, node: &str) -> Vec<Evacuee> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for ck in w.claims_on_node(node) {
        let Some(c) = w.claim(&ck) else { continue };
        if !matches!(c.phase(), ClaimPhase::Bound | ClaimPhase::Attached)
            || c.node_name() != Some(node)
        {
            continue;
        }
        let Some(vmi) = c.attached_vmi_name() else {
            continue;
        };
        let vk = key(split_key(&ck).0, vmi);
        let Some(v) = w.vmi(&vk) else { continue };
        // L2: a VMI-owned claim is attached only to the VMI of its uid.
        let owned_by_other = crate::api::vmi_owner(&c.metadata).is_some_and(|(_, u)| u != v.uid());
        if v.is_final() || is_deleting(&v.metadata) || owned_by_other || !seen.insert(vk.clone()) {
            continue;
        }
        out.push(Evacuee {
            vm: vm_owner(&v),
            uid: v.uid().to_string(),
            resource_version: v.metadata.resource_version.clone().unwrap_or_default(),
            node: node.to_string(),
            vmi: vk,
        });
    }
    out
}

/// Why the set of a restarted VM waits at the gate, if it does: the VM's
/// new VMI (another uid than the deleted one) and a Waiting claim of it.
pub fn restart_waits(w: &World, vm: &str, r: &Restart) -> Option<String> {
    let v = w
        .vmi(vm)
        .filter(|v| v.uid() != r.old_uid && !v.is_final())?;
    let (ns, _) = split_key(vm);
    super::requested_claims(&v, w)
        .iter()
        .filter_map(|n| w.claim(&key(ns, n)))
        .find_map(|c| c.waiting().map(|k| format!("{}: {}", k.reason, k.message)))
}

/// What a restart mark on a node stands for now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MarkState {
    /// Its value cannot be read (edited by hand): it counts for nothing,
    /// and goes.
    Unreadable,
    /// The VMI it names is live and not deleting: the delete did not
    /// happen (the controller stopped between the mark and the delete,
    /// or the delete met a newer VMI). Still one to move: the restart is
    /// under way and its delete is made again.
    NotBegun(Evacuee),
    /// The VMI it names is live but no longer one to move (its VM was
    /// stopped and started again, its claims moved): no restart began;
    /// the mark goes.
    Abandoned,
    /// The VM's new VMI runs: the restart is over; the mark goes.
    Ran,
    /// Under way: counted against `maxConcurrent`.
    UnderWay,
    /// Not run again within `evacuation.timeout`: counted no more; kept
    /// while the VM's new set waits at the gate (it still blocks further
    /// restarts), else it goes.
    TimedOut { waits: bool },
}

/// What the mark `m` (None: unreadable) for the VMI `old_uid`, on `node`,
/// stands for at `now`, with restarts timing out after `timeout`.
pub fn judge_mark(
    w: &World,
    node: &str,
    old_uid: &str,
    m: Option<&RestartMark>,
    now: Timestamp,
    timeout: std::time::Duration,
) -> MarkState {
    let Some(m) = m else {
        return MarkState::Unreadable;
    };
    let r = Restart {
        old_uid: old_uid.to_string(),
        node: node.to_string(),
    };
    if let Some(v) = w.vmi(&m.vm).filter(|v| v.uid() == old_uid)
        && !v.is_final()
        && !is_deleting(&v.metadata)
    {
        // Moved still only off a node still evacuated, by the VM the mark
        // names.
        let still = match w.node(node) {
            Some(n) if n.evacuating => evacuees(w, node).into_iter().find(|e| e.uid == old_uid),
            _ => None,
        };
        return match still {
            Some(e) if e.vm.as_deref() == Some(m.vm.as_str()) => MarkState::NotBegun(e),
            _ => MarkState::Abandoned,
        };
    }
    if restart_done(w, &m.vm, &r) {
        return MarkState::Ran;
    }
    if now < timed_out_at(m, timeout) {
        return MarkState::UnderWay;
    }
    MarkState::TimedOut {
        waits: restart_waits(w, &m.vm, &r).is_some(),
    }
}

/// When the restart `m` stops counting: `timeout` after its VMI was
/// deleted (a timeout past what a timestamp holds never comes).
pub fn timed_out_at(m: &RestartMark, timeout: std::time::Duration) -> Timestamp {
    let timeout = SignedDuration::try_from(timeout).unwrap_or(SignedDuration::MAX);
    m.at.0.checked_add(timeout).unwrap_or(Timestamp::MAX)
}

/// Whether the restart of `vm` is over: its new VMI runs.
pub fn restart_done(w: &World, vm: &str, r: &Restart) -> bool {
    w.vmi(vm).is_some_and(|v| {
        v.uid() != r.old_uid
            && v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
}

/// Why a VMI without a VirtualMachine owner is kept.
pub const NO_VM_OWNER: &str = "has no VirtualMachine owner";

/// What E2 counts with: the VMs restarted (by VM key) whose new VMI does
/// not run yet; how many of them still count as under way (not timed
/// out), in all and off each node; how many may be in all (each node's
/// taint may allow fewer of its own, `NodeFacts::evacuation_limit`); and
/// the VMIs (by uid) whose VM, read live, would not start them again.
pub struct EvacuationCounts<'a> {
    pub restarted: &'a BTreeMap<String, Restart>,
    pub under_way: usize,
    pub under_way_by_node: &'a BTreeMap<String, usize>,
    pub max_concurrent: u32,
    pub would_not_restart: &'a std::collections::HashMap<String, String>,
    /// Whether a live VMI's set could be placed on another node at once
    /// (`rules::could_move_off`), else why not.
    pub could_move: &'a dyn Fn(&Evacuee) -> Result<(), String>,
}

/// E2 across the evacuating nodes: which VMIs to delete now.
pub fn decide_evacuation(w: &World, counts: &EvacuationCounts) -> EvacuationStep {
    let EvacuationCounts {
        restarted,
        under_way,
        under_way_by_node,
        max_concurrent,
        would_not_restart,
        could_move,
    } = *counts;
    let mut step = EvacuationStep::default();
    let mut candidates = Vec::new();
    for node in w.evacuating_nodes() {
        // A node being deleted begins no restart: it takes no new
        // finalizer (the API server refuses one on an object being
        // deleted), so a restart off it could not be counted past its
        // deletion (I10), and its VMs go with it (KubeVirt starts them
        // again). Restarts already under way off it are counted until
        // they end, its finalizer holding it until then.
        if w.node(&node).is_some_and(|n| n.deleting) {
            continue;
        }
        let on_node = evacuees(w, &node);
        step.live.insert(node.clone(), on_node.len());
        let limit = w.node(&node).and_then(|n| n.evacuation_limit);
        let mut room = limit.map_or(usize::MAX, |l| {
            (l as usize).saturating_sub(under_way_by_node.get(&node).copied().unwrap_or(0))
        });
        for e in on_node {
            match &e.vm {
                None => step.bare.push((e, NO_VM_OWNER.to_string())),
                Some(_) if would_not_restart.contains_key(&e.uid) => {
                    let why = would_not_restart[&e.uid].clone();
                    step.bare.push((e, why));
                }
                // Being restarted already (the cache may still show it).
                Some(vm) if restarted.contains_key(vm) => {}
                // The node's own limit is reached: left for later.
                Some(_) if room == 0 => step.left += 1,
                Some(_) => {
                    room -= 1;
                    candidates.push(e);
                }
            }
        }
    }
    // Stopping more VMs with nowhere to go helps no one: while a VM it
    // restarted waits at the gate with a reason, even one timed out, no
    // further VM is stopped.
    step.blocked = restarted
        .iter()
        .find_map(|(vm, r)| restart_waits(w, vm, r).map(|why| (vm.clone(), why)));
    let room = usize::try_from(max_concurrent)
        .unwrap_or(usize::MAX)
        .saturating_sub(under_way);
    let take = if step.blocked.is_some() { 0 } else { room };
    // A VM is stopped only while its set could be placed elsewhere at
    // once: one with nowhere to go keeps running, counted as blocked. Only
    // as many are tried as may be stopped now.
    let mut candidates = candidates.into_iter();
    while step.restart.len() < take {
        let Some(e) = candidates.next() else { break };
        match could_move(&e) {
            Ok(()) => step.restart.push(e),
            Err(why) => step.nowhere.push((e, why)),
        }
    }
    step.left += candidates.len();
    step
}
