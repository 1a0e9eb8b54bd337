//! The story's DRA acts and checks: the platform's DRA class and a
//! tenant's template, a GPU that NVIDIA's driver finds failed, a named
//! claim of the DRA class and its backing ResourceClaim.

use super::{A, RAG_CLAIM, Snapshot};
use crate::memory::store::Store;

/// KubeVirt's passthrough DeviceClass, as NVIDIA's DRA driver installs it.
const VFIO: &str = "vfio.gpu.nvidia.com";

/// The platform's DRA class of H200s, and tenant A's template asking two
/// of its DeviceClass's devices, as KubeVirt's DRA guide writes one.
pub(super) fn dra_class_and_template(store: &Store) {
    let _ = store.create(
        "GPUClass",
        serde_json::json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClass",
            "metadata": {"name": "h200-dra"},
            "spec": {"deviceClassName": VFIO, "selectors": [{"cel": {"expression":
                "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"}}]}}),
    );
    let _ = store.create(
        "ResourceClaimTemplate",
        serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "two-h200", "namespace": A},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": VFIO, "count": 2}}]}}}}),
    );
}

/// NVIDIA's driver finds vm-llm's first GPU failed (`failed`), or well.
pub(super) fn fail_llm_gpu(store: &Store, failed: bool) {
    let Some(r) = store.get("GPUAllocation", A, "vm-llm-gpu") else {
        return;
    };
    let (node, device) = (
        r["spec"]["nodeName"].as_str().unwrap_or_default(),
        r["spec"]["devices"][0]["device"]
            .as_str()
            .unwrap_or_default(),
    );
    let Some(mut n) = store.get("Node", "", node) else {
        return;
    };
    let value = if failed { device } else { "" };
    n["metadata"]["annotations"][crate::standin::nvidia::FAILED_GPUS] = value.into();
    let _ = store.update("Node", n, crate::memory::store::Subresource::Main);
}

/// Tenant A's claim of two DRA H200s, made beforehand, as a VM names one
/// by `resourceClaimName` (D5).
pub(super) fn dra_pair_claim(store: &Store) {
    let _ = store.create(
        "GPUClaim",
        serde_json::json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaim",
            "metadata": {"name": RAG_CLAIM, "namespace": A},
            "spec": {"className": "h200-dra", "count": 2}}),
    );
}

/// Whether the claim's backing ResourceClaim (D4) is allocated.
pub(super) fn backing_allocated(s: &Snapshot, ns: &str, name: &str) -> bool {
    s.resource_claims.iter().any(|rc| {
        rc.metadata.namespace.as_deref() == Some(ns)
            && rc.metadata.name.as_deref() == Some(name)
            && rc.status.as_ref().is_some_and(|st| st.allocation.is_some())
    })
}
