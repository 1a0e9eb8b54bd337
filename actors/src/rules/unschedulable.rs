//! L12 and G7: a VMI whose pinned launcher pod cannot run where it is
//! pinned is deleted, so that its VM starts again at the gate.

use super::{ClaimIntent, IssuedVmiDelete};
use crate::api::{ClaimPhase, GPUClaim, Vmi, is_deleting};
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

/// G7: a pinned launcher pod the scheduler cannot place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unplaceable {
    /// The pod (`namespace/name`) and its uid: a new pod starts G7's grace afresh.
    pub pod: String,
    pub pod_uid: String,
    pub node: String,
    /// The scheduler's message (`0/3 nodes are available: ...`).
    pub message: String,
}

/// G7: the launcher pod of a live VMI that placement pinned, out of the
/// gate and not scheduled, which the scheduler reports `Unschedulable`.
/// None while any pod of the VMI is gated or scheduled (a running VM's
/// migration target that cannot be placed is no reason to stop the VM).
pub fn unplaceable_pod(v: &Vmi, w: &World) -> Option<Unplaceable> {
    if v.is_final() || is_deleting(&v.metadata) {
        return None;
    }
    let pods = w.launchers(&key(
        v.metadata.namespace.as_deref()?,
        v.metadata.name.as_deref()?,
    ));
    let live: Vec<_> = pods.iter().filter(|p| !p.terminal).collect();
    if live.iter().any(|p| p.gated || p.node_name.is_some()) {
        return None;
    }
    live.iter().find_map(|p| {
        Some(Unplaceable {
            pod: key(&p.namespace, &p.name),
            pod_uid: p.uid.clone(),
            node: p.pinned.clone()?,
            message: p.unschedulable.clone()?,
        })
    })
}
