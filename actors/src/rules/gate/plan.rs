//! G4: the writes that place a set, in order: allocations, claim statuses,
//! then each launcher pod pinned and ungated.

use super::devices::{Chosen, allocated_devices, allocation};
use super::{Member, WaitReason, Waiting, wait};
use crate::api::{
    AttachedTo, CONDITION_LOST, CONDITION_QUEUE_HEAD, CONDITION_WAITING, ClaimPhase, GPUAllocation,
    GPUAllocationSpec, GPUClaim, GPUClaimStatus, remove_condition,
};
use crate::world::World;
use crate::world::devices::DeviceId;
use crate::world::key;
use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::sync::Arc;

/// An allocation write of a plan.
#[derive(Clone, Debug, PartialEq)]
pub enum AllocationWrite {
    Create(GPUAllocation),
    /// A Lost claim's allocation moves to the new node.
    Move(GPUAllocation),
}

impl AllocationWrite {
    /// The allocation as it is to be written.
    pub fn allocation(&self) -> &GPUAllocation {
        match self {
            AllocationWrite::Create(r) | AllocationWrite::Move(r) => r,
        }
    }
}

/// E1: a claim moves off the node it held, which cannot take its VM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moved {
    /// The node it held.
    pub node: String,
    /// Why that node cannot take the set (G3's words).
    pub why: String,
}

/// D4: a ResourceClaim to allocate to a record's devices.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceClaimWrite {
    /// `ns/name` of the ResourceClaim.
    pub key: String,
    /// Its uid as the cache showed it: a claim made anew is another's.
    /// Empty for a backing claim still to be made.
    pub uid: String,
    /// `ns/name` of the GPUClaim whose record names the devices.
    pub claim: String,
    /// A named claim's backing claim the cache does not show: made first
    /// (one the GPUClaim owns found there already will do).
    pub create: Option<Box<ResourceClaim>>,
    /// The uid of the GPUClaim that owns a backing claim.
    pub owner_uid: Option<String>,
    pub allocation: AllocationResult,
    /// An allocation found there stands, whatever its devices (D4's
    /// restore away from the gate, decided on a cache that may lag a move
    /// placement just wrote): only the gate clears one.
    pub keep_allocated: bool,
}

/// The writes that place a set (G4), in order: allocations, the
/// ResourceClaims that hold their devices (D4), claim statuses, pods.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub node: String,
    pub allocations: Vec<AllocationWrite>,
    pub device_claims: Vec<DeviceClaimWrite>,
    pub statuses: Vec<(Arc<GPUClaim>, GPUClaimStatus)>,
    pub pods: Vec<String>,
    /// The claims that move off a node that cannot take the set (E1), by
    /// key: their allocation's move and status are E1's writes, and each
    /// gets a `Moved` Event once its status names the new node.
    pub moved: Vec<(String, Moved)>,
}

/// Whether the devices taken are those recorded, in any order.
fn same_devices(taking: Option<&[DeviceId]>, recorded: &[DeviceId]) -> bool {
    let mut a: Vec<&DeviceId> = taking.unwrap_or_default().iter().collect();
    let mut b: Vec<&DeviceId> = recorded.iter().collect();
    a.sort();
    b.sort();
    a == b
}

pub(super) fn plan(
    w: &World,
    vmi: &str,
    node: &str,
    members: &[Member],
    unplaced: &[&Member],
    chosen: Vec<Chosen>,
    pods: Vec<String>,
) -> Result<Plan, Waiting> {
    // D3: the devices each unplaced member of a DRA class takes, in the
    // order they were asked for.
    let mut chosen = chosen.into_iter();
    let taking: Vec<Option<Vec<DeviceId>>> = unplaced
        .iter()
        .map(|m| {
            m.dra
                .as_ref()
                .and_then(|_| chosen.next())
                .map(|c| c.into_iter().map(|(_, d)| d).collect())
        })
        .collect();
    // A Lost claim whose node came back and is chosen again keeps its
    // allocation as it is, and so does one of a DRA class that takes the
    // devices it records (a move cut short after its record's write):
    // rewriting either would change nothing (I5).
    let allocations = unplaced
        .iter()
        .zip(&taking)
        .filter(|(m, devices)| {
            m.allocation_node.as_deref() != Some(node)
                || (m.dra.is_some() && !same_devices(devices.as_deref(), &m.devices))
        })
        .map(|(m, devices)| {
            let c = &m.claim;
            let r = GPUAllocation {
                metadata: ObjectMeta {
                    namespace: c.metadata.namespace.clone(),
                    name: c.metadata.name.clone(),
                    ..Default::default()
                },
                spec: GPUAllocationSpec {
                    claim_uid: c.metadata.uid.clone().unwrap_or_default(),
                    class_name: c.spec.class_name.clone(),
                    resource_name: m.resource.clone(),
                    device_class_name: m
                        .dra
                        .as_ref()
                        .and_then(|d| d.class.spec.device_class_name.clone()),
                    node_name: node.to_string(),
                    count: c.spec.count,
                    devices: devices.iter().flatten().map(Into::into).collect(),
                },
            };
            if m.allocation_node.is_some() {
                AllocationWrite::Move(r)
            } else {
                AllocationWrite::Create(r)
            }
        })
        .collect();
    // D4: every member of a DRA class has its ResourceClaim allocated to
    // its record's devices (those it takes now, or those recorded).
    let mut device_claims = Vec::new();
    for m in members {
        let Some(dra) = m.dra.as_ref() else { continue };
        let devices = unplaced
            .iter()
            .position(|u| std::ptr::eq(*u, m))
            .and_then(|i| taking[i].clone())
            .unwrap_or_else(|| m.devices.clone());
        let status = dra.resource_claim.status.as_ref();
        let now = status.and_then(|s| s.allocation.as_ref());
        let reserved = status
            .and_then(|s| s.reserved_for.as_ref())
            .is_some_and(|r| !r.is_empty());
        // Done when allocated to them, stamped (an unstamped one, written
        // before 1.36's scheduler stamped them, would never be reserved),
        // or reserved already.
        if now.is_some_and(|a| {
            allocated_devices(a) == devices && (a.allocation_timestamp.is_some() || reserved)
        }) {
            continue;
        }
        // Allocated to other devices and in use by a pod: not ours to
        // undo; the set waits until the claim (or its pod) changes.
        if now.is_some() && reserved {
            return Err(wait(
                WaitReason::DeviceClaimConflict,
                format!(
                    "ResourceClaim {} is allocated to other devices than its GPUAllocation names and reserved for a pod",
                    dra.claim_key
                ),
            ));
        }
        // Devices that do not fill the claim's requests (a record written
        // by hand): no pod may leave the gate without its allocation.
        let Some(allocation) = allocation(w, dra, &devices, node) else {
            return Err(wait(
                WaitReason::RequestMismatch,
                format!(
                    "the {} devices recorded do not fill the requests of ResourceClaim {}",
                    devices.len(),
                    dra.claim_key
                ),
            ));
        };
        let c = &m.claim.metadata;
        let uid = dra.resource_claim.metadata.uid.clone();
        device_claims.push(DeviceClaimWrite {
            key: dra.claim_key.clone(),
            create: (dra.backing && uid.is_none())
                .then(|| Box::new(ResourceClaim::clone(&dra.resource_claim))),
            uid: uid.unwrap_or_default(),
            owner_uid: dra.backing.then(|| c.uid.clone()).flatten(),
            claim: key(
                c.namespace.as_deref().unwrap_or_default(),
                c.name.as_deref().unwrap_or_default(),
            ),
            allocation,
            keep_allocated: false,
        });
    }
    let statuses = members
        .iter()
        .filter_map(|m| {
            let old = m.claim.status.clone().unwrap_or_default();
            let mut s = old.clone();
            if matches!(m.claim.phase(), ClaimPhase::Pending | ClaimPhase::Lost) {
                s.phase = Some(ClaimPhase::Bound);
            }
            s.node_name = Some(node.to_string());
            s.attached_to = Some(AttachedTo {
                vmi: vmi.to_string(),
            });
            remove_condition(&mut s.conditions, CONDITION_WAITING);
            remove_condition(&mut s.conditions, CONDITION_QUEUE_HEAD);
            // L4: Lost=True is shown only while the phase is Lost.
            remove_condition(&mut s.conditions, CONDITION_LOST);
            (s != old).then(|| (m.claim.clone(), s))
        })
        .collect();
    let moved = members
        .iter()
        .filter_map(|m| {
            let from = m.moved_from.clone()?;
            let c = &m.claim.metadata;
            let k = key(
                c.namespace.as_deref().unwrap_or_default(),
                c.name.as_deref().unwrap_or_default(),
            );
            Some((k, from))
        })
        .collect();
    Ok(Plan {
        node: node.to_string(),
        allocations,
        device_claims,
        statuses,
        pods,
        moved,
    })
}
