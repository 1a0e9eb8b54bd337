//! Placement's devices part, away from the gate: an allocation whose
//! claim is gone (deleted), and a GPUClaim's backing claim (D4: let go
//! when its GPUClaim is gone, brought back when gone or unallocated; D8:
//! its record moved off a device another ResourceClaim names). It keeps
//! no state of its own: what it decides follows from the world, what
//! placement wrote and the writes under way.

use super::write::Write;
use super::{LookAt, Shared};
use crate::api::{is_deleting, rv_number};
use crate::rules::{
    DeviceTaken, Restore, allocation_is_orphan, backing_claim_to_restore, device_taken,
    orphaned_backing_claim,
};

/// An allocation whose claim is gone (or is another claim) is deleted,
/// unless we deleted it already and the cache lags.
pub(super) fn decide_allocation(k: &str, s: &mut Shared) -> Option<Write> {
    if s.under_way.blocks_claim(k) {
        s.under_way.park(LookAt::Allocation(k.to_string()));
        return None;
    }
    let w = &s.env.world;
    let r = w.allocation(k);
    let uid = r.as_ref().and_then(|r| r.metadata.uid.clone());
    if s.own.deleting(k, uid.as_ref()) {
        return None;
    }
    let (r, uid) = (r?, uid?);
    (allocation_is_orphan(&r, w) && !is_deleting(&r.metadata)).then(|| Write::DeleteAllocation {
        key: k.to_string(),
        uid,
    })
}

/// D4 and D8 away from the gate: the backing claim of a GPUClaim that is
/// gone let go; a record's device another ResourceClaim names given up;
/// a placed claim's backing claim, gone or unallocated, brought back,
/// unless a write of ours about the claim is under way or not yet in the
/// cache. A VMI at the gate that names it may be placing its set
/// meanwhile: both write the record's devices, a restore never clears an
/// allocation (a move's), and placement's writes of one claim never run
/// at once.
pub(super) fn decide_backing_claim(k: &str, s: &mut Shared) -> Option<Write> {
    if s.under_way.blocks_claim(k) {
        s.under_way.park(LookAt::BackingClaim(k.to_string()));
        return None;
    }
    let w = &s.env.world;
    if let Some(owner_uid) = orphaned_backing_claim(k, w) {
        return Some(Write::ReleaseOrphanBackingClaim {
            key: k.to_string(),
            owner_uid,
        });
    }
    let c = w.claim(k)?;
    let cached = Some(rv_number(&c.metadata));
    let cached_rc = w.resource_claim(k).map(|rc| rv_number(&rc.metadata));
    if s.own.creating(k)
        || s.own.claims.behind(k, cached)
        || s.own.resource_claims.behind(k, cached_rc)
    {
        return None;
    }
    // D8: a device of its record another ResourceClaim names, and no VM
    // on it: the record moves off it (Lost and in use are the claim
    // actor's to say).
    if let Some(DeviceTaken::Move(g)) = device_taken(&c, w, &s.own.allocations) {
        return Some(Write::GiveUp(g));
    }
    match backing_claim_to_restore(&c, w, &s.own.allocations)? {
        Restore::Claim(d) => Some(Write::RestoreBackingClaim(Box::new(d))),
        Restore::Record(r) => Some(Write::RecordFollows(r)),
    }
}
