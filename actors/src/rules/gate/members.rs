//! G3's checks of a set's claims, in G5's order of reasons: every claim
//! there and this VMI's, none being deleted, every class there, the set
//! matching what the VMI's spec requests, none another VMI's.

use super::devices::{self, DraMember};
use super::plan::Moved;
use super::written::WrittenAllocations;
use super::{WaitReason, Waiting, wait};
use crate::api::amount::add_to;
use crate::api::{ClaimPhase, GPUClaim, GPUClass, LauncherPod, Vmi, is_deleting, vmi_owner};
use crate::world::devices::DeviceId;
use crate::world::{World, key};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

pub(super) struct Member {
    pub claim: Arc<GPUClaim>,
    pub resource: String,
    /// The node of its allocation (the cache's, or one we wrote), if any.
    pub allocation_node: Option<String>,
    /// Lost, or placed on a node that failed (G6 is about to say Lost),
    /// or whose allocation a move cut short already names another node
    /// than its status: it holds no node and moves.
    pub moves: bool,
    /// E1: held on a node that cannot take the set, it moves from there.
    pub moved_from: Option<Moved>,
    /// D5: of a DRA class, the ResourceClaim that holds its devices.
    pub dra: Option<DraMember>,
    /// D3: the devices its allocation records (the cache's, or ours).
    pub devices: Vec<DeviceId>,
}

impl Member {
    /// Where it holds its GPUs, if anywhere.
    pub fn held_on(&self) -> Option<&str> {
        held_on(&self.claim, self.allocation_node.as_deref())
    }

    /// Whether it holds its GPUs on `node` (and does not move already).
    pub fn holds_on(&self, node: &str) -> bool {
        !self.moves && self.held_on() == Some(node)
    }
}

/// Where a claim holds GPUs: its status for a placed claim, its
/// allocation for a Pending one whose placement was cut short.
fn held_on<'a>(c: &'a GPUClaim, allocation_node: Option<&'a str>) -> Option<&'a str> {
    match c.phase() {
        ClaimPhase::Bound | ClaimPhase::Attached => c.node_name(),
        ClaimPhase::Pending => allocation_node,
        ClaimPhase::Lost => None,
    }
}

/// The VMI owner of a claim when it is another VMI than `v` (L2: a later
/// VMI of the same name is not the claim's).
pub(super) fn owned_by_other<'a>(c: &'a GPUClaim, v: &Vmi) -> Option<&'a str> {
    vmi_owner(&c.metadata)
        .filter(|(_, uid)| *uid != v.uid())
        .map(|(name, _)| name)
}

/// The set's claims, or the first reason, in G5's order, that it waits.
pub(super) fn members(
    v: &Vmi,
    w: &World,
    written: &WrittenAllocations,
    names: &[String],
    found: &[Arc<GPUClaim>],
    pods: &[Arc<LauncherPod>],
) -> Result<Vec<Member>, Waiting> {
    let ns = v.metadata.namespace.as_deref().unwrap_or_default();
    let name = v.metadata.name.as_deref().unwrap_or_default();
    if let Some(missing) = names.iter().find(|n| w.claim(&key(ns, n)).is_none()) {
        return Err(wait(
            WaitReason::ClaimMissing,
            format!("claim {missing} does not exist"),
        ));
    }
    // G2 makes this VMI's own once L3 deleted the earlier VMI's.
    if let Some(c) = found
        .iter()
        .find(|c| owned_by_other(c, v).is_some_and(|owner| owner == name))
    {
        let cname = c.metadata.name.as_deref().unwrap_or_default();
        return Err(wait(
            WaitReason::EarlierVmisClaim,
            format!(
                "claim {cname} belongs to an earlier VMI named {name}; waiting for this VMI's own"
            ),
        ));
    }
    if let Some(c) = found.iter().find(|c| is_deleting(&c.metadata)) {
        let cname = c.metadata.name.as_deref().unwrap_or_default();
        return Err(wait(
            WaitReason::ClaimDeleting,
            format!("claim {cname} is being deleted"),
        ));
    }
    let mut classes: Vec<Arc<GPUClass>> = Vec::with_capacity(found.len());
    for c in found {
        match w
            .class(&c.spec.class_name)
            .filter(|k| !is_deleting(&k.metadata))
        {
            Some(k) => classes.push(k),
            None => {
                return Err(wait(
                    WaitReason::ClassMissing,
                    crate::rules::class_missing(&c.spec.class_name, w),
                ));
            }
        }
    }
    if let Some(message) = request_mismatch(v, w, found, &classes) {
        return Err(wait(WaitReason::RequestMismatch, message));
    }
    if let Some(message) = devices::dra_mismatch(v, w, found, &classes) {
        return Err(wait(WaitReason::RequestMismatch, message));
    }
    let dra = devices::resource_claims(v, w, pods, found, &classes)?;
    for c in found {
        let cname = c.metadata.name.as_deref().unwrap_or_default();
        if let Some(owner) = owned_by_other(c, v) {
            return Err(wait(
                WaitReason::ClaimInUse,
                format!("claim {cname} belongs to VMI {owner}"),
            ));
        }
        if let Some(other) = c.attached_vmi_name().filter(|o| *o != name)
            && w.vmi(&key(ns, other)).is_some_and(|o| !o.is_final())
        {
            return Err(wait(
                WaitReason::ClaimInUse,
                format!("claim {cname} is attached to VMI {other}"),
            ));
        }
    }
    Ok(found
        .iter()
        .zip(classes)
        .zip(dra)
        .map(|((c, k), dra)| member(c, w, written, k.spec.resource_name.clone(), dra))
        .collect())
}

/// G3: where the VMI's spec requests a resource a GPUClass serves, the
/// set's GPUs of each such resource (and of each its classes name) must
/// equal the spec's request of it: the device plugin hands the VM what
/// its spec asks for, whatever the claims say. Devices no class serves
/// (a NIC passed through) are not ours to count. The message gives both
/// numbers per resource that differs.
pub fn request_mismatch(
    v: &Vmi,
    w: &World,
    claims: &[Arc<GPUClaim>],
    classes: &[Arc<GPUClass>],
) -> Option<String> {
    let spec = v.device_request();
    let served: BTreeSet<&str> = spec
        .keys()
        .map(String::as_str)
        .filter(|r| w.serves(r))
        .collect();
    if served.is_empty() {
        return None;
    }
    let mut held: BTreeMap<&str, u64> = BTreeMap::new();
    // DRA classes are D5's to match (`devices::dra_mismatch`).
    for (c, k) in claims
        .iter()
        .zip(classes)
        .filter(|(_, k)| !k.spec.resource_name.is_empty())
    {
        add_to(
            &mut held,
            k.spec.resource_name.as_str(),
            u64::from(c.spec.count),
        );
    }
    let resources: BTreeSet<&str> = served.into_iter().chain(held.keys().copied()).collect();
    let mut differs = String::new();
    for r in resources {
        let (asks, has) = (
            spec.get(r).copied().map_or(0, u64::from),
            held.get(r).copied().unwrap_or(0),
        );
        if asks != has {
            let sep = if differs.is_empty() { "" } else { "; " };
            let _ = write!(
                differs,
                "{sep}its spec requests {asks} {r}, its claims hold {has}"
            );
        }
    }
    (!differs.is_empty()).then(|| format!("the set does not match the VMI's spec: {differs}"))
}

fn member(
    c: &Arc<GPUClaim>,
    w: &World,
    written: &WrittenAllocations,
    resource: String,
    dra: Option<DraMember>,
) -> Member {
    let uid = c.metadata.uid.as_deref().unwrap_or_default();
    let k = key(
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.name.as_deref().unwrap_or_default(),
    );
    // What placement wrote that the cache does not show yet is the newer
    // of the two (a move's allocation while the watch lags behind it).
    let allocated = written
        .get(w, &k)
        .filter(|s| s.claim_uid == uid)
        .map(|s| (s.node_name.clone(), s.devices.clone()))
        .or_else(|| {
            w.allocation(&k)
                .filter(|r| r.spec.claim_uid == uid)
                .map(|r| (r.spec.node_name.clone(), r.spec.devices.clone()))
        });
    let (allocation_node, devices) = match allocated {
        Some((node, devices)) => (Some(node), devices.iter().map(DeviceId::from).collect()),
        None => (None, Vec::new()),
    };
    let node = held_on(c, allocation_node.as_deref());
    // A move cut short (E1, G6): the allocation names the new node, the
    // status still the old one; the set is placed afresh, as a move.
    let cut_short =
        node.is_some() && allocation_node.is_some() && node != allocation_node.as_deref();
    let moves = c.phase() == ClaimPhase::Lost
        || cut_short
        || node.is_some_and(|n| crate::rules::lost::node_failed(w, n, &resource).is_some())
        || (dra.is_some() && node.is_some() && !w.lost_devices(c).is_empty())
        // I9: a recorded device that another ResourceClaim holds (taken
        // while our allocation was not yet written: the scheduler does
        // not see records) is not this claim's to allocate: it moves.
        || dra.as_ref().is_some_and(|d| {
            node.is_some()
                && devices
                    .iter()
                    .any(|id| w.device_holder(id).is_some_and(|h| h != d.claim_key))
        });
    Member {
        claim: c.clone(),
        resource,
        allocation_node,
        moves,
        moved_from: None,
        dra,
        devices,
    }
}
