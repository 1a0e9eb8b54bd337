//! The objects gpu-claims owns (GPUClass, GPUClaim, GPUAllocation, GPUQuota) and the
//! slices of foreign objects it reads (VMIs, launcher pods, nodes).
//!
//! They live in the actors crate because the rules decide on them and the
//! operator crate serializes them: both reach them here without a cycle.

/// `kube::Resource` for a namespaced `kubevirt.io/v1` kind we read as
/// our own partial type (only the fields the rules need).
macro_rules! kubevirt_resource {
    ($t:ty, $kind:literal, $plural:literal) => {
        impl kube::Resource for $t {
            type DynamicType = ();
            type Scope = kube::core::NamespaceResourceScope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                "kubevirt.io".into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                "v1".into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

mod allocation;
pub mod amount;
mod claim;
mod class;
mod conditions;
pub mod crds;
mod names;
mod node;
mod object;
pub mod pod;
pub mod quantity;
mod quota;
pub mod resources;
pub mod validation;
mod vm;
mod vmi;

pub use allocation::{AllocatedDevice, GPUAllocation, GPUAllocationSpec};
pub use claim::{AttachedTo, ClaimPhase, GPUClaim, GPUClaimSpec, GPUClaimStatus};
pub use class::{
    CelSelector, DeviceConfig, DeviceSelector, GPUClass, GPUClassSpec, GPUClassStatus,
    OpaqueConfig, Source,
};
pub use conditions::{condition_is_true, remove_condition, set_condition, true_condition_types};
pub use names::*;
pub use node::{NodeFacts, RestartMark};
pub use object::{DecodeError, Kind, Obj, ObjRef, from_json, from_text, to_json};
pub use pod::{LauncherPod, PodScheduling, PodUse};
pub use quota::{GPUQuota, GPUQuotaSpec, GPUQuotaStatus};
pub use resources::{ResourceName, Resources};
pub use vm::{VirtualMachine, VirtualMachineSpec};
pub use vmi::{
    DeviceRequest, GpuRequest, MAX_CLAIMS, RequestError, Vmi, VmiDevice, VmiDevices, VmiDomain,
    VmiResourceClaim, VmiSpec, VmiStatus,
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The VMI UID of a claim's ownerReference of kind VirtualMachineInstance
/// (`kubevirt.io/v1`), if any: the seed's `vmiOwner`.
pub fn vmi_owner(meta: &ObjectMeta) -> Option<(&str, &str)> {
    meta.owner_references.as_ref()?.iter().find_map(|r| {
        (r.kind == VMI_KIND && r.api_version == VMI_API_VERSION)
            .then_some((r.name.as_str(), r.uid.as_str()))
    })
}

/// True when the object carries `finalizer`.
pub fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

/// True when the object has a deletionTimestamp.
pub fn is_deleting(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// The controller ownerReference of kind VirtualMachineInstance: (name, uid).
pub fn controller_vmi(meta: &ObjectMeta) -> Option<(&str, &str)> {
    meta.owner_references.as_ref()?.iter().find_map(|r| {
        (r.controller == Some(true) && r.kind == VMI_KIND && r.api_version == VMI_API_VERSION)
            .then_some((r.name.as_str(), r.uid.as_str()))
    })
}

/// resourceVersion as a number. The API server's versions are etcd
/// revisions, so ordering them is sound in practice; an unparsable version
/// reads as 0 (never fresher than anything).
pub fn rv_number(meta: &ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
