//! DRA objects the tests share: a VMI that names a claim by
//! `resourceClaimName` (D5), as KubeVirt's DRA guide writes it.

use gpu_claims_actors::api::{Kind, Obj};
use serde_json::json;

/// VMI vm1 (`uid`, Scheduling) naming GPUClaim `claim` as KubeVirt's DRA
/// guide writes a claim made beforehand: a `resourceClaims` entry with
/// `resourceClaimName` that a `gpus[]` entry references by its request
/// `gpu`; its launcher pod, rendered from it, at the gate.
pub fn vm1_naming_resource_claim(claim: &str, uid: &str) -> Vec<Obj> {
    let typed = |kind, v| gpu_claims_actors::api::from_json(kind, v).unwrap();
    let entries = json!([{"name": claim, "resourceClaimName": claim}]);
    let vmi = typed(
        Kind::Vmi,
        json!({"metadata": {"name": "vm1", "namespace": "t", "uid": uid},
            "spec": {"domain": {"devices": {"gpus": [{"name": "gpu1", "claimName": claim, "requestName": "gpu"}]}},
                "resourceClaims": entries},
            "status": {"phase": "Scheduling"}}),
    );
    let pod = typed(
        Kind::Pod,
        json!({"metadata": {"name": format!("virt-launcher-vm1-{uid}"), "namespace": "t", "uid": format!("p-{uid}"),
                "labels": {"kubevirt.io": "virt-launcher"},
                "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                    "name": "vm1", "uid": uid, "controller": true}]},
            "spec": {"containers": [{"name": "compute", "resources": {"claims": [{"name": claim}]}}],
                "resourceClaims": entries,
                "schedulingGates": [{"name": "gpu.cozystack.io/claims"}]}}),
    );
    vec![vmi, pod]
}
