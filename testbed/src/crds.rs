//! The CRDs of the cluster gpu-claims runs in, installed in an embedded
//! API server's store: its own (from the core's types) and KubeVirt's.

use crate::memory::store::Store;
use std::sync::Arc;

/// A KubeVirt CRD, as far as the embedded cluster needs it (its spec and
/// status kept as they are written).
fn kubevirt_crd(kind: &str, plural: &str, short: &[&str]) -> serde_json::Value {
    let open = serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.kubevirt.io")},
        "spec": {
            "group": "kubevirt.io", "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(),
                "kind": kind, "shortNames": short, "categories": ["all"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "properties": {"spec": open, "status": open}}}}],
        },
    })
}

/// KubeVirt's VirtualMachineInstance CRD.
pub fn kubevirt_vmi() -> serde_json::Value {
    kubevirt_crd(
        "VirtualMachineInstance",
        "virtualmachineinstances",
        &["vmi", "vmis"],
    )
}

/// KubeVirt's VirtualMachine CRD: the stand-in's VM controller keeps a
/// VMI running for each one whose runStrategy is Always.
pub fn kubevirt_vm() -> serde_json::Value {
    kubevirt_crd("VirtualMachine", "virtualmachines", &["vm", "vms"])
}

/// Stores the CRDs of the cluster gpu-claims runs in (its own and
/// KubeVirt's VMI), as `kubectl apply -f deploy/crds/` and KubeVirt's
/// install make them: an embedded API server over `store` serves them.
pub fn install(store: &Store) {
    let mut crds: Vec<serde_json::Value> = gpu_claims_actors::api::crds::all()
        .into_iter()
        .filter_map(|(_, crd)| serde_json::to_value(&crd).ok())
        .collect();
    crds.push(kubevirt_vmi());
    crds.push(kubevirt_vm());
    for crd in crds {
        gpu_claims_apiserver::install_crd(store, crd)
            .expect("gpu-claims' and KubeVirt's CRDs install");
    }
}

/// A store for an embedded API server with these CRDs installed.
pub fn cluster_store() -> Arc<Store> {
    let store = gpu_claims_apiserver::new_store();
    install(&store);
    store
}
