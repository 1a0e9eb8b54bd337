//! D4 away from the gate: a placed named claim whose VM is stopped keeps
//! its GPUs through its backing claim, so a backing claim that went (a
//! user deleted it, and no pod held it), lost its allocation (kube-
//! scheduler's PostFilter deallocates any claim it finds unavailable for
//! a pod, whoever allocated it) or is allocated to other devices than its
//! record names (written by hand, or a crash between two writes) is
//! brought back at once, not at the VM's next start: made again,
//! allocated to the record's devices (cleared first where it holds
//! others, as Kubernetes lets an allocation change). One a pod holds
//! (`reservedFor`) is not cleared: the devices in use are the truth, and
//! the record is brought to them.

use super::allocation;
use super::backing::{backing_member, reserved};
use crate::api::{AllocatedDevice, ClaimPhase, GPUAllocation, GPUClaim, is_deleting};
use crate::rules::gate::{DeviceClaimWrite, WrittenAllocations};
use crate::world::devices::{DeviceId, allocated_devices};
use crate::world::{World, key};
use k8s_openapi::api::resource::v1::ResourceClaim;
use std::collections::BTreeSet;

/// What D4 writes to bring a backing claim back to its record.
#[derive(Clone, Debug, PartialEq)]
pub enum Restore {
    /// The backing claim made, or allocated to the record's devices.
    Claim(DeviceClaimWrite),
    /// A pod holds the backing claim on other devices of the record's
    /// node: the record names them instead.
    Record(Box<GPUAllocation>),
}

/// D4: the write that brings `c`'s backing claim back, if it is due: `c`
/// a placed (Bound, Attached or Lost, on its record's node) named claim
/// of a DRA class, or a Pending one whose gate's writes were cut after
/// its record (the VM stopped before they resumed: until its backing
/// claim is allocated, kube-scheduler, which knows nothing of records,
/// may give its devices away), not being deleted, whose record (as the
/// cache shows it, with no write of ours still on its way) names devices
/// none of which another ResourceClaim holds (D8 decides those); its
/// backing claim gone or unallocated (not for a Lost claim: it moves at
/// its gate), or allocated to other devices.
/// Devices lost (tainted, unpublished) are held all the same: they are
/// the record's until the claim moves, and a claim whose devices are lost
/// turns Lost (G6) and moves at its VM's gate.
pub fn backing_claim_to_restore(
    c: &GPUClaim,
    w: &World,
    written: &WrittenAllocations,
) -> Option<Restore> {
    if c.is_template()
        || is_deleting(&c.metadata)
        || !matches!(
            c.phase(),
            ClaimPhase::Pending | ClaimPhase::Bound | ClaimPhase::Attached | ClaimPhase::Lost
        )
    {
        return None;
    }
    let k = key(
        c.metadata.namespace.as_deref()?,
        c.metadata.name.as_deref()?,
    );
    let class = w.class(&c.spec.class_name)?;
    class.spec.device_class_name.as_ref()?;
    if written.get(w, &k).is_some() {
        return None;
    }
    let record = w.allocation(&k).filter(|r| {
        !is_deleting(&r.metadata) && Some(&r.spec.claim_uid) == c.metadata.uid.as_ref()
    })?;
    let node = record.spec.node_name.as_str();
    let placed_there = match c.phase() {
        ClaimPhase::Pending => true,
        _ => c.node_name() == Some(node),
    };
    if !placed_there {
        return None;
    }
    let devices = w.allocation_devices(c);
    let taken = |d| w.device_holders(d).iter().any(|h| *h != k);
    if devices.is_empty() || devices.iter().any(taken) {
        return None;
    }
    let member = backing_member(w, c, &class).ok()?;
    let rc: &ResourceClaim = &member.resource_claim;
    let allocated = rc
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .map(allocated_devices);
    match &allocated {
        Some(now) => {
            let same: BTreeSet<&DeviceId> = now.iter().collect();
            if same == devices.iter().collect() {
                return None;
            }
            if reserved(rc) {
                return record_follows(w, &record, now, &k).map(Restore::Record);
            }
        }
        // A Lost claim's backing claim gone or unallocated is its gate's
        // to make again, on the devices it moves to.
        None if c.phase() == ClaimPhase::Lost => return None,
        None => {}
    }
    let allocation = allocation(w, &member, &devices, node)?;
    let uid = rc.metadata.uid.clone();
    Some(Restore::Claim(DeviceClaimWrite {
        key: k.clone(),
        create: uid.is_none().then(|| Box::new(ResourceClaim::clone(rc))),
        uid: uid.unwrap_or_default(),
        claim: k,
        owner_uid: c.metadata.uid.clone(),
        allocation,
        // Allocated to other devices: cleared, then written anew.
        keep_allocated: false,
    }))
}

/// D4: a pod holds the backing claim on `devices`: the record names them,
/// where they are on its node and no other record names one.
fn record_follows(
    w: &World,
    record: &GPUAllocation,
    devices: &[DeviceId],
    k: &str,
) -> Option<Box<GPUAllocation>> {
    let on_node = devices
        .iter()
        .all(|d| w.device(d).is_some_and(|f| f.node == record.spec.node_name));
    let ours = devices
        .iter()
        .all(|d| w.device_allocated_by(d).is_none_or(|r| r == k));
    if !on_node || !ours || devices.len() != record.spec.devices.len() {
        return None;
    }
    let mut moved = record.clone();
    moved.spec.devices = devices.iter().map(AllocatedDevice::from).collect();
    Some(Box::new(moved))
}
