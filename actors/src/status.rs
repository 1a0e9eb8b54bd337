//! "Where are my GPUs": what `gpu-claims status` shows (README, "Commands"), read off
//! a world loaded from the cluster's lists in one pass, with the same
//! indexes and counts the controller decides by.

use crate::api::GPUClaim;
use crate::rules::{at_the_gate, requested_claims};
use crate::world::{World, key};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

mod dra;
pub use dra::{ClaimDevicesRow, DeviceRow};

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub classes: Vec<ClassRow>,
    pub nodes: Vec<NodeRow>,
    /// DRA classes' devices per node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceRow>,
    /// DRA claims' devices (D3, D4), those of stopped VMs too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub claim_devices: Vec<ClaimDevicesRow>,
    pub quotas: Vec<QuotaRow>,
    /// The sets at the gate, in O1's order (the order they take GPUs).
    pub waiting: Vec<WaitingSet>,
    /// O2: per class, the set at its head and since when (its claims'
    /// `QueueHead` condition).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub heads: Vec<QueueHeadRow>,
    /// Nodes tainted for evacuation (E2, E3), and how far each has come.
    pub evacuating: Vec<EvacuatingNode>,
    /// Kinds that could not be read (not served, not permitted), and why:
    /// the figures that need them count none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_read: Vec<String>,
}

/// A class: the GPUs its Ready nodes have, what its claims hold or owe,
/// its budget, and how many sets of it wait at the gate.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClassRow {
    pub name: String,
    /// The device plugin's resource; empty for a DRA class.
    pub resource: String,
    /// A DRA class's DeviceClass (D1-D8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_class: Option<String>,
    pub capacity: u64,
    pub allocated: u64,
    pub budget: Option<u32>,
    pub waiting_sets: usize,
}

/// One node and one GPU resource a class serves.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRow {
    pub node: String,
    pub resource: String,
    pub ready: bool,
    pub allocatable: u64,
    /// GPUs GPUAllocations hold on the node.
    pub allocated: u64,
    /// GPUs pods use beyond the allocations (pods outside gpu-claims).
    pub used_outside_allocations: u64,
    /// What no one holds, wherever it is.
    pub free: u64,
    /// Of those, what a new set could get: none on a node placement
    /// skips.
    pub placeable: u64,
    /// Why placement skips the node (not Ready, being evacuated,
    /// cordoned, tainted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// One limit of a GPUQuota: a class, or all classes together (`class`
/// absent), with what the namespace's claims hold or owe.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaRow {
    pub namespace: String,
    pub name: String,
    pub class: Option<String>,
    pub used: u64,
    pub hard: u32,
}

/// A VMI whose launcher pods wait at the gate, and why (its claims'
/// Waiting condition).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitingSet {
    pub namespace: String,
    pub vmi: String,
    pub claims: Vec<String>,
    pub reason: String,
    pub message: String,
    /// When it started waiting (O1: its oldest launcher pod's creation,
    /// or the stop of a VM an evacuation restarted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<k8s_openapi::jiff::Timestamp>,
    /// O1: its VMI's priority.
    pub priority: i32,
}

/// O2: the set at the head of a class, and since when.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueHeadRow {
    pub class: String,
    pub namespace: String,
    pub vmi: String,
    pub since: k8s_openapi::jiff::Timestamp,
}

/// A node being evacuated (E3): its GPU VMs still live there (by VMI),
/// those of them with no VirtualMachine owner (kept: they would not come
/// back), the VMs restarted off it whose restart is not over (the marks
/// the node keeps, E2), the claims held there whose VM is not running (a
/// restart under way, or a VM stopped), the claims held there whose set
/// waits at the gate, with why, and the VMs E2 does not stop because their
/// set could go to no other node now (E2's stop rule), with why.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvacuatingNode {
    pub node: String,
    pub live: Vec<String>,
    pub without_vm: Vec<String>,
    pub restarting: Vec<String>,
    pub moving: Vec<String>,
    pub waiting: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nowhere: Vec<(String, String)>,
}

impl EvacuatingNode {
    /// Whether no GPU VM is live on the node any more.
    pub fn done(&self) -> bool {
        self.live.is_empty()
    }
}

/// How far the evacuation of `node` has come.
pub fn evacuating_node(w: &World, node: &str) -> EvacuatingNode {
    let evacuees = crate::rules::evacuees(w, node);
    let live: BTreeSet<&str> = evacuees.iter().map(|e| e.vmi.as_str()).collect();
    let mut moving = Vec::new();
    let mut waiting = Vec::new();
    for ck in w.claims_on_node(node) {
        let Some(c) = w.claim(&ck) else { continue };
        if c.node_name() != Some(node) {
            continue;
        }
        let attached = c
            .attached_vmi_name()
            .map(|v| key(crate::world::split_key(&ck).0, v));
        if !attached.as_deref().is_some_and(|v| live.contains(v)) {
            moving.push(ck.clone());
        }
        if let Some((reason, message)) = waiting_condition(&c) {
            waiting.push((ck, format!("{reason}: {message}")));
        }
    }
    let restarting: Vec<String> = w
        .node(node)
        .map(|n| {
            n.restarts
                .values()
                .flatten()
                .map(|m| m.vm.clone())
                .collect()
        })
        .unwrap_or_default();
    // A VM restarted off the node whose new VMI waits at the gate (its
    // claims now elsewhere, or not placed yet) is what holds the drain up:
    // its claims say why (NoCapacity, OverBudget...).
    for vm in &restarting {
        let Some(v) = w.vmi(vm) else { continue };
        let ns = crate::world::split_key(vm).0;
        for name in requested_claims(&v, w) {
            let ck = key(ns, &name);
            if waiting.iter().any(|(k, _)| *k == ck) {
                continue;
            }
            if let Some((reason, message)) = w.claim(&ck).as_deref().and_then(waiting_condition) {
                waiting.push((ck, format!("{reason}: {message}")));
            }
        }
    }
    EvacuatingNode {
        node: node.to_string(),
        live: evacuees.iter().map(|e| e.vmi.clone()).collect(),
        without_vm: evacuees
            .iter()
            .filter(|e| e.vm.is_none())
            .map(|e| e.vmi.clone())
            .collect(),
        restarting,
        moving,
        waiting,
        nowhere: evacuees
            .iter()
            .filter(|e| e.vm.is_some())
            .filter_map(|e| {
                let v = w.vmi(&e.vmi)?;
                let why = crate::rules::could_move_off(&v, w, node).err()?;
                Some((e.vmi.clone(), why))
            })
            .collect(),
    }
}

fn waiting_condition(c: &GPUClaim) -> Option<(String, String)> {
    c.waiting().map(|x| (x.reason.clone(), x.message.clone()))
}

/// The report, every list sorted by name but the waiting sets, which
/// come in O1's order, and the head of each class (O3).
pub fn report(w: &World) -> Report {
    let waiting = waiting_sets(w);
    let mut waiting_by_class: BTreeMap<String, usize> = BTreeMap::new();
    for set in &waiting {
        let classes: BTreeSet<String> = set
            .claims
            .iter()
            .filter_map(|c| w.claim(&key(&set.namespace, c)))
            .map(|c| c.spec.class_name.clone())
            .collect();
        for class in classes {
            *waiting_by_class.entry(class).or_default() += 1;
        }
    }
    let mut classes = Vec::new();
    let mut resources = BTreeSet::new();
    let mut devices = Vec::new();
    let mut claim_devices = Vec::new();
    for name in w.keys(crate::api::Kind::Class) {
        let Some(c) = w.class(&name) else { continue };
        match &c.spec.device_class_name {
            Some(dc) => {
                devices.extend(dra::device_rows(w, &name, dc));
                claim_devices.extend(dra::claim_device_rows(w, &name));
            }
            None => {
                resources.insert(c.spec.resource_name.clone());
            }
        }
        classes.push(ClassRow {
            device_class: c.spec.device_class_name.clone(),
            capacity: w.class_capacity(&name),
            allocated: w.class_usage(&name).allocated,
            budget: c.spec.budget,
            waiting_sets: waiting_by_class.get(&name).copied().unwrap_or(0),
            resource: c.spec.resource_name.clone(),
            name,
        });
    }
    Report {
        classes,
        nodes: node_rows(w, &resources),
        devices,
        claim_devices,
        quotas: quota_rows(w),
        heads: queue_heads(w, &waiting),
        waiting,
        evacuating: w
            .evacuating_nodes()
            .iter()
            .map(|n| evacuating_node(w, n))
            .collect(),
        not_read: Vec::new(),
    }
}

fn node_rows(w: &World, resources: &BTreeSet<String>) -> Vec<NodeRow> {
    let mut rows = Vec::new();
    for name in w.keys(crate::api::Kind::Node) {
        let Some(n) = w.node(&name) else { continue };
        for r in resources {
            let allocatable = n.allocatable(r);
            let allocated = w.allocated_on(&name, r);
            let outside = w.used_beyond_allocations(&name, r);
            if allocatable == 0 && allocated == 0 && outside == 0 {
                continue;
            }
            let free = allocatable.saturating_sub(allocated.saturating_add(outside));
            let skipped = n.skipped();
            rows.push(NodeRow {
                node: name.clone(),
                resource: r.clone(),
                ready: n.ready,
                allocatable,
                allocated,
                used_outside_allocations: outside,
                free,
                placeable: if skipped.is_some() { 0 } else { free },
                skipped,
            });
        }
    }
    rows
}

fn quota_rows(w: &World) -> Vec<QuotaRow> {
    let mut rows = Vec::new();
    for k in w.keys(crate::api::Kind::Quota) {
        let Some(q) = w.quota(&k) else { continue };
        let (ns, name) = crate::world::split_key(&k);
        let row = |class: Option<&str>, hard: u32| QuotaRow {
            namespace: ns.to_string(),
            name: name.to_string(),
            class: class.map(str::to_string),
            used: w.namespace_usage(ns, class),
            hard,
        };
        for (class, hard) in &q.spec.hard {
            rows.push(row(Some(class), *hard));
        }
        if let Some(total) = q.spec.total {
            rows.push(row(None, total));
        }
    }
    rows
}

/// Each live VMI whose launcher pods all wait at the gate, with the
/// reason its claims give (none yet: the controller has not decided), in
/// O1's order: the order in which they take the GPUs that free.
fn waiting_sets(w: &World) -> Vec<WaitingSet> {
    let mut sets = Vec::new();
    for k in w.keys(crate::api::Kind::Vmi) {
        let Some(v) = w.vmi(&k) else { continue };
        if !at_the_gate(&v, w) {
            continue;
        }
        let (ns, name) = crate::world::split_key(&k);
        let claims = requested_claims(&v, w);
        let why = claims
            .iter()
            .filter_map(|c| w.claim(&key(ns, c)))
            .find_map(|c| waiting_condition(&c));
        // A request that cannot be used has no claim to say so: the
        // VMI's InvalidGPURequest Event does, and so does this row.
        let invalid = || {
            crate::rules::vmi_request(&v, w)
                .err()
                .map(|e| ("InvalidGPURequest".to_string(), e.to_string()))
        };
        let (reason, message) = why.or_else(invalid).unwrap_or_else(|| {
            (
                "Undecided".into(),
                "no claim of the set says why yet".into(),
            )
        });
        let order = crate::rules::queueing::order_key(&v, w);
        let since = (order.since != k8s_openapi::jiff::Timestamp::MAX).then_some(order.since);
        sets.push((
            order.clone(),
            WaitingSet {
                since,
                priority: order.priority(),
                namespace: ns.to_string(),
                vmi: name.to_string(),
                claims,
                reason,
                message,
            },
        ));
    }
    sets.sort_by(|a, b| a.0.cmp(&b.0));
    sets.into_iter().map(|(_, s)| s).collect()
}

/// O2: per class, the waiting set whose claims say it leads the class
/// (their `QueueHead` condition), and since when.
fn queue_heads(w: &World, waiting: &[WaitingSet]) -> Vec<QueueHeadRow> {
    let mut heads: BTreeMap<String, QueueHeadRow> = BTreeMap::new();
    for set in waiting {
        for c in set
            .claims
            .iter()
            .filter_map(|n| w.claim(&key(&set.namespace, n)))
        {
            let Some(cond) = c.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|x| x.type_ == crate::api::CONDITION_QUEUE_HEAD && x.status == "True")
            }) else {
                continue;
            };
            let row = QueueHeadRow {
                class: c.spec.class_name.clone(),
                namespace: set.namespace.clone(),
                vmi: set.vmi.clone(),
                since: cond.last_transition_time.0,
            };
            let e = heads
                .entry(row.class.clone())
                .or_insert_with(|| row.clone());
            if row.since < e.since {
                *e = row;
            }
        }
    }
    heads.into_values().collect()
}
