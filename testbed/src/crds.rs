//! The CRDs of the cluster gpu-claims runs in, installed in an embedded
//! API server's store: its own (from the core's types) and KubeVirt's.

use crate::memory::store::Store;
use std::sync::Arc;

/// A KubeVirt CRD as virt-operator installs it (`components/crds.go`):
/// its names, printer columns and subresources; its schema kept open (the
/// stand-in writes what KubeVirt's controllers would).
fn kubevirt_crd(
    kind: &str,
    plural: &str,
    short: &[&str],
    columns: serde_json::Value,
    status_subresource: bool,
) -> serde_json::Value {
    let open = serde_json::json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let mut version = serde_json::json!({"name": "v1", "served": true, "storage": true,
        "additionalPrinterColumns": columns,
        "schema": {"openAPIV3Schema": {"type": "object",
            "properties": {"spec": open, "status": open}}}});
    if status_subresource {
        version["subresources"] = serde_json::json!({"status": {}});
    }
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.kubevirt.io")},
        "spec": {
            "group": "kubevirt.io", "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(),
                "kind": kind, "shortNames": short, "categories": ["all"]},
            "versions": [version],
        },
    })
}

/// KubeVirt's VirtualMachineInstance CRD: no status subresource (virt-
/// controller and virt-handler write the whole object).
pub fn kubevirt_vmi() -> serde_json::Value {
    let columns = serde_json::json!([
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
        {"name": "IP", "type": "string", "jsonPath": ".status.interfaces[0].ipAddress"},
        {"name": "NodeName", "type": "string", "jsonPath": ".status.nodeName"},
        {"name": "Ready", "type": "string",
            "jsonPath": ".status.conditions[?(@.type=='Ready')].status"},
        {"name": "Live-Migratable", "type": "string", "priority": 1,
            "jsonPath": ".status.conditions[?(@.type=='LiveMigratable')].status"},
        {"name": "Paused", "type": "string", "priority": 1,
            "jsonPath": ".status.conditions[?(@.type=='Paused')].status"},
    ]);
    kubevirt_crd(
        "VirtualMachineInstance",
        "virtualmachineinstances",
        &["vmi", "vmis"],
        columns,
        false,
    )
}

/// KubeVirt's VirtualMachine CRD: the stand-in's VM controller keeps a
/// VMI as each runStrategy says.
pub fn kubevirt_vm() -> serde_json::Value {
    let columns = serde_json::json!([
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Status", "type": "string", "description": "Human Readable Status",
            "jsonPath": ".status.printableStatus"},
        {"name": "Ready", "type": "string",
            "jsonPath": ".status.conditions[?(@.type=='Ready')].status"},
    ]);
    kubevirt_crd(
        "VirtualMachine",
        "virtualmachines",
        &["vm", "vms"],
        columns,
        true,
    )
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
