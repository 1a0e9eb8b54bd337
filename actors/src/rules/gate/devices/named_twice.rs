//! D8: a device named twice is noticed. A device of a named claim's record
//! that a ResourceClaim other than the claim's backing claim also names
//! (one that tolerates D7's taint, one allocated before D7's rule existed,
//! one written by hand) is given up where the claim is not in use: its
//! record moves to free devices of its class on the same node, its
//! backing claim following (D4); where the node has none, the claim is
//! Lost and moves at its VM's next start. In use, it is said (a Warning
//! Event on both, a gauge) until one of them lets go.
//!
//! A set at the gate is the gate's (G3 moves a claim off a device another
//! claim holds, as E1 moves one off a node); a template claim's
//! ResourceClaim goes with its launcher pod, and the pod's next start
//! comes back to the gate. So D8 is about named claims away from it.

use super::allocation;
use super::backing::backing_member;
use super::choose::{DeviceAsk, choose};
use crate::api::{AllocatedDevice, ClaimPhase, GPUAllocation, GPUClaim, is_deleting};
use crate::rules::gate::DeviceClaimWrite;
use crate::rules::gate::WrittenAllocations;
use crate::world::devices::DeviceId;
use crate::world::{World, key};
use std::collections::HashSet;
use std::sync::Arc;

/// A device of a record another ResourceClaim names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    pub device: DeviceId,
    /// `ns/name` of the other ResourceClaim.
    pub by: String,
}

impl std::fmt::Display for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "device {} is allocated to ResourceClaim {} too",
            self.device, self.by
        )
    }
}

/// D8's decision for one claim.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceTaken {
    /// Not in use: the record moves to free devices of the node, its
    /// backing claim following.
    Move(Box<GiveUp>),
    /// Not in use, and the node has no devices to move to: Lost.
    Lost(Taken),
    /// A VM runs on the devices: said, until one of them lets go.
    InUse(Taken),
}

/// D8's writes, in order: the record (same node, other devices), then its
/// backing claim allocated to them (cleared first, as D4 changes one).
#[derive(Clone, Debug, PartialEq)]
pub struct GiveUp {
    /// `ns/name` of the GPUClaim.
    pub claim: String,
    pub uid: Option<String>,
    /// The record as it is to be: its devices replaced.
    pub record: Arc<GPUAllocation>,
    pub backing: DeviceClaimWrite,
    pub taken: Taken,
}

/// D8: the first device of `c`'s record that another ResourceClaim than
/// `c`'s backing claim names, as the cache shows it.
pub fn taken_device(c: &GPUClaim, w: &World) -> Option<Taken> {
    if c.is_template() {
        return None;
    }
    let k = key(
        c.metadata.namespace.as_deref()?,
        c.metadata.name.as_deref()?,
    );
    w.allocation_devices(c).into_iter().find_map(|device| {
        let by = w.device_holders(&device).into_iter().find(|h| *h != k)?;
        Some(Taken { device, by })
    })
}

/// Whether a VM runs on `c`'s devices: a pod holds its backing claim
/// (`reservedFor`: a pod still terminating holds it too), or its attached
/// VMI is live and a launcher pod of it has left the gate.
fn in_use(c: &GPUClaim, w: &World) -> bool {
    let ns = c.metadata.namespace.as_deref().unwrap_or_default();
    let name = c.metadata.name.as_deref().unwrap_or_default();
    if w.resource_claim(&key(ns, name))
        .is_some_and(|rc| super::backing::reserved(&rc))
    {
        return true;
    }
    let Some(vmi) = c.attached_vmi_name() else {
        return false;
    };
    let Some(v) = w.vmi(&key(ns, vmi)) else {
        return false;
    };
    !v.is_final() && w.launchers(&key(ns, vmi)).iter().any(|p| !p.gated)
}

/// D8 for a named claim of a DRA class, placed (Bound or Attached), not
/// being deleted, away from the gate, with no write of ours about it on
/// its way: what its record's device named twice calls for. None where no
/// device of it is named twice.
pub fn device_taken(c: &GPUClaim, w: &World, written: &WrittenAllocations) -> Option<DeviceTaken> {
    if is_deleting(&c.metadata) || !matches!(c.phase(), ClaimPhase::Bound | ClaimPhase::Attached) {
        return None;
    }
    let taken = taken_device(c, w)?;
    if in_use(c, w) {
        return Some(DeviceTaken::InUse(taken));
    }
    let attached_at_gate = c.attached_vmi_name().is_some_and(|v| {
        let ns = c.metadata.namespace.as_deref().unwrap_or_default();
        w.vmi(&key(ns, v))
            .is_some_and(|v| crate::rules::gate::at_the_gate(&v, w))
    });
    if attached_at_gate {
        return None;
    }
    let k = key(
        c.metadata.namespace.as_deref()?,
        c.metadata.name.as_deref()?,
    );
    if written.get(w, &k).is_some() {
        return None;
    }
    match give_up(c, w, written, &k, &taken) {
        Some(g) => Some(DeviceTaken::Move(Box::new(g))),
        None => Some(DeviceTaken::Lost(taken)),
    }
}

/// D8: whether `c` (Bound, Attached or Lost) cannot keep its node: a
/// device of its record is named by another ResourceClaim, no VM runs on
/// it, and the node has no free devices of its class to move to. G6 makes
/// it Lost (`DevicesLost`), and back once the other lets go.
pub fn lost_to_another(c: &GPUClaim, w: &World) -> Option<Taken> {
    if is_deleting(&c.metadata) || in_use(c, w) {
        return None;
    }
    let taken = taken_device(c, w)?;
    let k = key(
        c.metadata.namespace.as_deref()?,
        c.metadata.name.as_deref()?,
    );
    let none_written = WrittenAllocations::default();
    give_up(c, w, &none_written, &k, &taken)
        .is_none()
        .then_some(taken)
}

/// The record moved to free devices of its class on its node, and its
/// backing claim following, where the node has them.
fn give_up(
    c: &GPUClaim,
    w: &World,
    written: &WrittenAllocations,
    k: &str,
    taken: &Taken,
) -> Option<GiveUp> {
    let record = w.allocation(k)?;
    let node = record.spec.node_name.clone();
    let class = w.class(&c.spec.class_name)?;
    let member = backing_member(w, c, &class).ok()?;
    let mut ask = DeviceAsk::of(w, &member).ok()?;
    // Its other devices stay first; the taken ones are no one's to take.
    let named: Vec<DeviceId> = w.allocation_devices(c);
    let taken_ones: HashSet<DeviceId> = named
        .iter()
        .filter(|d| w.device_holders(d).iter().any(|h| h != k))
        .cloned()
        .collect();
    debug_assert!(taken_ones.contains(&taken.device));
    ask.own = named
        .iter()
        .filter(|d| !taken_ones.contains(*d))
        .cloned()
        .collect();
    ask.allocated = ask.own.clone();
    ask.allocation = k.to_string();
    let mut held = written.devices(w);
    held.extend(taken_ones);
    let (chosen, _) = choose(w, &node, std::slice::from_ref(&ask), &held)?;
    let devices: Vec<DeviceId> = chosen.into_iter().flatten().map(|(_, d)| d).collect();
    let result = allocation(w, &member, &devices, &node)?;
    let mut moved = GPUAllocation::clone(&record);
    moved.spec.devices = devices.iter().map(AllocatedDevice::from).collect();
    let rc = &member.resource_claim;
    let uid = rc.metadata.uid.clone();
    Some(GiveUp {
        claim: k.to_string(),
        uid: c.metadata.uid.clone(),
        record: Arc::new(moved),
        backing: DeviceClaimWrite {
            key: k.to_string(),
            create: uid.is_none().then(|| Box::new((**rc).clone())),
            uid: uid.unwrap_or_default(),
            claim: k.to_string(),
            owner_uid: c.metadata.uid.clone(),
            allocation: result,
            keep_allocated: false,
        },
        taken: taken.clone(),
    })
}
