//! The CRDs, generated from the Rust types; `deploy/crds/` holds the
//! committed copies, and a test fails when they drift.

use gpu_claims_actors::api::{GPUAllocation, GPUClaim, GPUClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// The CRDs with the file names they are committed under.
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("gpuclasses.yaml", GPUClass::crd()),
        ("gpuclaims.yaml", GPUClaim::crd()),
        ("gpuallocations.yaml", GPUAllocation::crd()),
    ]
}

pub fn to_yaml(crd: &CustomResourceDefinition) -> anyhow::Result<String> {
    Ok(serde_saphyr::to_string(crd)?)
}

/// Every CRD, as one multi-document YAML.
pub fn all_yaml() -> anyhow::Result<String> {
    let mut out = String::new();
    for (_, crd) in all() {
        out.push_str("---\n");
        out.push_str(&to_yaml(&crd)?);
    }
    Ok(out)
}

/// Writes the CRDs into `dir` (deploy/crds): what `cargo run -- crd` prints, one file each.
pub fn write_all(dir: &std::path::Path) -> anyhow::Result<()> {
    for (file, crd) in all() {
        std::fs::write(dir.join(file), to_yaml(&crd)?)?;
    }
    Ok(())
}

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
pub fn install(store: &gpu_claims_actors::memory::store::Store) {
    let mut crds: Vec<serde_json::Value> = all()
        .into_iter()
        .filter_map(|(_, crd)| serde_json::to_value(&crd).ok())
        .collect();
    crds.push(kubevirt_vmi());
    crds.push(kubevirt_vm());
    for crd in crds {
        crate::apiserver::install_crd(store, crd);
    }
}

/// A store for an embedded API server with these CRDs installed.
pub fn cluster_store() -> std::sync::Arc<gpu_claims_actors::memory::store::Store> {
    let store = crate::apiserver::new_store();
    install(&store);
    store
}
