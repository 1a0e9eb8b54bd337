//! D4: the backing claim of a named claim of a DRA class. A ResourceClaim
//! of the GPUClaim's namespace and name, controller-owned by it, that asks
//! for what the class serves and holds the record's devices against every
//! scheduler, kubelet and other claim while the GPUClaim holds its GPUs,
//! whether or not a VM runs.

use super::super::{WaitReason, Waiting, wait};
use super::DraMember;
use crate::api::{GPUClaim, GPUClass};
use crate::world::{World, key};
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClaim, DeviceClaimConfiguration, DeviceConstraint, DeviceRequest,
    DeviceSelector, DeviceToleration, ExactDeviceRequest, OpaqueDeviceConfiguration, ResourceClaim,
    ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use std::sync::Arc;

/// The one request of a backing claim.
pub const BACKING_REQUEST: &str = "gpu";

pub use crate::api::{BACKING_FINALIZER, BACKING_OWNER_ANNOTATION};

/// Whether `rc` is `c`'s: controller-owned by this GPUClaim (its uid; an
/// earlier GPUClaim of the name owned another, which the garbage
/// collector takes away).
pub fn owned_by(rc: &ResourceClaim, c: &GPUClaim) -> bool {
    c.metadata
        .uid
        .as_deref()
        .is_some_and(|uid| controlled_by(rc, uid))
}

/// Whether `rc` is the backing claim of the GPUClaim of `uid`:
/// controller-owned by it, or made for it and orphaned since.
pub fn controlled_by(rc: &ResourceClaim, uid: &str) -> bool {
    let m = &rc.metadata;
    let owned = m
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "GPUClaim" && o.uid == uid);
    let orphaned = || {
        m.owner_references.as_ref().is_none_or(|o| o.is_empty())
            && m.annotations
                .as_ref()
                .and_then(|a| a.get(BACKING_OWNER_ANNOTATION))
                .is_some_and(|a| a == uid)
    };
    owned || orphaned()
}

/// Whether a pod holds `rc` (is in its `reservedFor`): while one does,
/// its devices are in use and our finalizer stays.
pub fn reserved(rc: &ResourceClaim) -> bool {
    rc.status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .is_some_and(|r| !r.is_empty())
}

/// D4: whether `c`'s backing claim, as the cache shows it, is being
/// deleted, still carries our finalizer, and no pod holds it: the
/// finalizer comes off (L8's release does it for a claim being deleted).
pub fn backing_claim_to_let_go(c: &GPUClaim, w: &World) -> bool {
    let k = key(
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.name.as_deref().unwrap_or_default(),
    );
    w.resource_claim(&k).is_some_and(|rc| {
        rc.metadata.deletion_timestamp.is_some()
            && crate::api::has_finalizer(&rc.metadata, BACKING_FINALIZER)
            && owned_by(&rc, c)
            && !reserved(&rc)
    })
}

/// D4: the uid of the GPUClaim the backing claim at `k` was made for,
/// when that GPUClaim is gone (or another of the name stands) and our
/// finalizer still keeps the backing claim: it is let go (deleted, and its
/// finalizer off once no pod holds it). Without this, a GPUClaim whose
/// finalizer an admin took off by hand would leave its backing claim, and
/// its devices, held forever. None while a pod still holds one being
/// deleted: the resourceclaim controller's change brings us back.
pub fn orphaned_backing_claim(k: &str, w: &World) -> Option<String> {
    let rc = w.resource_claim(k)?;
    let m = &rc.metadata;
    if !crate::api::has_finalizer(m, BACKING_FINALIZER)
        || m.deletion_timestamp.is_some() && reserved(&rc)
    {
        return None;
    }
    let uid = m
        .annotations
        .as_ref()
        .and_then(|a| a.get(BACKING_OWNER_ANNOTATION).cloned())
        .or_else(|| {
            m.owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true) && o.kind == "GPUClaim")
                .map(|o| o.uid.clone())
        })?;
    let standing = w
        .claim(k)
        .is_some_and(|c| c.metadata.uid.as_deref() == Some(uid.as_str()));
    (!standing).then_some(uid)
}

/// D7: the tolerations of the managed taint a backing claim carries.
fn managed_tolerations() -> Vec<DeviceToleration> {
    ["NoSchedule", "NoExecute"]
        .into_iter()
        .map(|effect| DeviceToleration {
            key: Some(crate::api::MANAGED_TAINT.into()),
            operator: Some("Exists".into()),
            effect: Some(effect.into()),
            ..Default::default()
        })
        .collect()
}

/// D4: the backing claim `c` of DRA class `k` has, as it is created: one
/// request `gpu` of the class's DeviceClass with its selectors and
/// `count` devices, the class's `matchAttribute` as a constraint, and
/// the class's config as the claim's own (which the allocation copies
/// `FromClaim`, as the scheduler would).
pub fn backing_claim(c: &GPUClaim, k: &GPUClass) -> ResourceClaim {
    let selectors: Vec<DeviceSelector> = k
        .spec
        .selectors
        .iter()
        .map(|s| DeviceSelector {
            cel: Some(CELDeviceSelector {
                expression: s.cel.expression.clone(),
            }),
        })
        .collect();
    let request = DeviceRequest {
        name: BACKING_REQUEST.into(),
        exactly: Some(ExactDeviceRequest {
            device_class_name: k.spec.device_class_name.clone().unwrap_or_default(),
            allocation_mode: Some("ExactCount".into()),
            count: Some(i64::from(c.spec.count)),
            selectors: (!selectors.is_empty()).then_some(selectors),
            // D7: the pool's own closure, tolerated: no scheduler refuses
            // to reserve this claim for the VM's pod for it (NoSchedule
            // never affects an allocated claim; NoExecute, should a user
            // edit our rule so, evicts no VM while D7 undoes the edit:
            // the eviction controller counts tolerations of that effect).
            tolerations: Some(managed_tolerations()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let constraints = k.spec.match_attribute.as_ref().map(|a| {
        vec![DeviceConstraint {
            requests: Some(vec![BACKING_REQUEST.into()]),
            match_attribute: Some(a.clone()),
            ..Default::default()
        }]
    });
    let config: Vec<DeviceClaimConfiguration> = k
        .spec
        .config
        .iter()
        .map(|cfg| DeviceClaimConfiguration {
            requests: Some(vec![BACKING_REQUEST.into()]),
            opaque: Some(OpaqueDeviceConfiguration {
                driver: cfg.opaque.driver.clone(),
                parameters: RawExtension(cfg.opaque.parameters.clone()),
            }),
        })
        .collect();
    ResourceClaim {
        metadata: ObjectMeta {
            namespace: c.metadata.namespace.clone(),
            name: c.metadata.name.clone(),
            // No blockOwnerDeletion: the GPUClaim's own finalizer keeps
            // it until L8 has deleted this claim, and blocking would ask
            // for update on gpuclaims/finalizers besides.
            finalizers: Some(vec![BACKING_FINALIZER.into()]),
            annotations: c.metadata.uid.as_ref().map(|uid| {
                [(BACKING_OWNER_ANNOTATION.to_string(), uid.clone())]
                    .into_iter()
                    .collect()
            }),
            owner_references: Some(vec![OwnerReference {
                api_version: "gpu.cozystack.io/v1alpha1".into(),
                kind: "GPUClaim".into(),
                name: c.metadata.name.clone().unwrap_or_default(),
                uid: c.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..Default::default()
        },
        spec: Some(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![request]),
                constraints,
                config: (!config.is_empty()).then_some(config),
            }),
        }),
        status: None,
    }
}

/// D4, for a named claim `c` of DRA class `k`: its backing claim as the
/// cache shows it, or as it is to be made where there is none. One of its
/// name that `c` does not own, or one being deleted, makes the set wait.
pub(in crate::rules::gate) fn backing_member(
    w: &World,
    c: &GPUClaim,
    k: &Arc<GPUClass>,
) -> Result<DraMember, Waiting> {
    let ns = c.metadata.namespace.as_deref().unwrap_or_default();
    let name = c.metadata.name.as_deref().unwrap_or_default();
    let claim_key = key(ns, name);
    let resource_claim = match w.resource_claim(&claim_key) {
        None => Arc::new(backing_claim(c, k)),
        Some(rc) if !owned_by(&rc, c) => {
            return Err(wait(
                WaitReason::DeviceClaimConflict,
                format!(
                    "ResourceClaim {name} is not GPUClaim {name}'s (it is not controller-owned by this GPUClaim), so it cannot hold the claim's devices: delete or rename it"
                ),
            ));
        }
        Some(rc) if rc.metadata.deletion_timestamp.is_some() => {
            return Err(wait(
                WaitReason::DeviceClaimPending,
                format!(
                    "backing ResourceClaim {name} is being deleted; it is made anew once gone (its finalizer comes off once no pod holds it)"
                ),
            ));
        }
        Some(rc) => rc,
    };
    Ok(DraMember {
        class: k.clone(),
        claim_key,
        resource_claim,
        backing: true,
    })
}
