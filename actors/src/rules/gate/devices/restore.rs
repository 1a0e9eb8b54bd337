//! D4 away from the gate: a placed named claim whose VM is stopped keeps
//! its GPUs through its backing claim, so a backing claim that went (a
//! user deleted it, and no pod held it) or lost its allocation (kube-
//! scheduler's PostFilter deallocates any claim it finds unavailable for
//! a pod, whoever allocated it) is brought back at once, not at the VM's
//! next start: made again and allocated to the record's devices.

use super::allocation;
use super::backing::backing_member;
use crate::api::{ClaimPhase, GPUClaim, is_deleting};
use crate::rules::gate::{DeviceClaimWrite, WrittenAllocations};
use crate::world::{World, key};
use k8s_openapi::api::resource::v1::ResourceClaim;

/// D4: the write that brings `c`'s backing claim back, if it is due: `c`
/// a placed (Bound or Attached, on its record's node) named claim of a DRA
/// class, or a Pending one whose gate's writes were cut after its record
/// (the VM stopped before they resumed: until its backing claim is
/// allocated, kube-scheduler, which knows nothing of records, may give
/// its devices away), not being deleted, whose record (as the cache shows it, with no write of ours
/// still on its way) names devices none of which another ResourceClaim
/// holds; its backing claim gone, or unallocated. Devices lost (tainted,
/// unpublished) are held all the same: they are the record's until the
/// claim moves, and a Bound claim whose devices are lost turns Lost (G6)
/// and moves at its VM's gate. One
/// allocated (to any devices) is left to the gate, which moves or waits;
/// devices another claim took meanwhile are never taken back (I9): the
/// VM's next gate decides.
pub fn backing_claim_to_restore(
    c: &GPUClaim,
    w: &World,
    written: &WrittenAllocations,
) -> Option<DeviceClaimWrite> {
    if c.is_template()
        || is_deleting(&c.metadata)
        || !matches!(
            c.phase(),
            ClaimPhase::Pending | ClaimPhase::Bound | ClaimPhase::Attached
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
    let taken = |d| w.device_holder(d).is_some_and(|h| h != k);
    if devices.is_empty() || devices.iter().any(taken) {
        return None;
    }
    let member = backing_member(w, c, &class).ok()?;
    let rc: &ResourceClaim = &member.resource_claim;
    if rc.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
        return None;
    }
    let allocation = allocation(w, &member, &devices, node)?;
    let uid = rc.metadata.uid.clone();
    Some(DeviceClaimWrite {
        key: k.clone(),
        create: uid.is_none().then(|| Box::new(ResourceClaim::clone(rc))),
        uid: uid.unwrap_or_default(),
        claim: k,
        owner_uid: c.metadata.uid.clone(),
        allocation,
        keep_allocated: true,
    })
}
