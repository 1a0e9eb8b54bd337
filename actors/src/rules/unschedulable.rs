use super::{ClaimIntent, IssuedVmiDelete};
use crate::api::{ClaimPhase, GPUClaim, is_deleting};
use crate::world::{World, key};

/// L12: a Lost claim cannot stay on its node. Once its VMI's launcher pod
/// is pinned there (gate removed, not yet scheduled), the VMI is deleted,
/// preconditioned on the UID and resourceVersion the cache showed, so one
/// scheduled since is not deleted on a stale view. The VM's runStrategy
/// decides what comes next; a new launcher pod waits at the gate.
pub fn unschedulable_vmi(c: &GPUClaim, w: &World, issued: &IssuedVmiDelete) -> Option<ClaimIntent> {
    if c.phase() != ClaimPhase::Lost {
        return None;
    }
    let node = c.node_name()?;
    let v = w
        .attached_vmi(c)
        .filter(|v| !v.is_final() && !is_deleting(&v.metadata))?;
    let uid = v.uid().to_string();
    let rv = v.metadata.resource_version.clone().unwrap_or_default();
    if issued.as_ref().is_some_and(|(u, r)| *u == uid && *r == rv) {
        return None;
    }
    let name = v.metadata.name.clone()?;
    let stuck = w
        .launchers(&key(v.metadata.namespace.as_deref()?, &name))
        .iter()
        .any(|p| !p.gated && p.node_name.is_none() && p.pinned.as_deref() == Some(node));
    stuck.then_some(ClaimIntent::DeleteVmi {
        name,
        uid,
        resource_version: rv,
    })
}
