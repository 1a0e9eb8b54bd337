//! DRA objects the tests share: a VMI that names a claim by
//! `resourceClaimName` (D5), as KubeVirt's DRA guide writes it; the named
//! claim world of the D4 tests, and what they read of it.

use super::TestCluster;
use gpu_claims_actors::api::{Kind, Obj};
use gpu_claims_testbed::fixtures::{claim, dra_class, node};
use serde_json::{Value, json};

/// KubeVirt's passthrough DeviceClass, as NVIDIA's DRA driver installs it.
pub const VFIO: &str = "vfio.gpu.nvidia.com";

/// An object of `kind` from its JSON.
pub fn typed(kind: Kind, v: Value) -> Obj {
    gpu_claims_actors::api::from_json(kind, v).unwrap()
}

/// Four H200s on n1 as NVIDIA's driver publishes them, a DRA class of
/// them, claim t/c1 of two, and vm1 naming it.
pub fn named_world() -> Vec<Obj> {
    let mut v = vec![
        node("n1")
            .passthrough_gpus("NVIDIA H200", 4, "141Gi", "0x2335")
            .obj(),
        dra_class("h200", VFIO).obj(),
        claim("t", "c1").count(2).obj(),
    ];
    v.extend(vm1_naming_resource_claim("c1", "u1"));
    v
}

/// t/c1's backing claim, as stored.
pub fn backing(t: &TestCluster) -> Option<Value> {
    t.sim.store.get("ResourceClaim", "t", "c1")
}

/// The devices a ResourceClaim's allocation results name.
pub fn allocated(rc: &Value) -> Vec<String> {
    rc["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["device"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The devices t/c1's record names (none without a record).
pub fn recorded(t: &TestCluster) -> Vec<String> {
    let r = t.sim.store.get("GPUAllocation", "t", "c1");
    r.iter()
        .flat_map(|r| r["spec"]["devices"].as_array().cloned().unwrap_or_default())
        .map(|d| d["device"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Where write `s` stands among `writes`; a test fails naming it if absent.
pub fn position_of(writes: &[String], s: &str) -> usize {
    writes
        .iter()
        .position(|x| x == s)
        .unwrap_or_else(|| panic!("{s}: {writes:#?}"))
}

/// VMI vm1 (`uid`, Scheduling) naming GPUClaim `claim` as KubeVirt's DRA
/// guide writes a claim made beforehand: a `resourceClaims` entry with
/// `resourceClaimName` that a `gpus[]` entry references by its request
/// `gpu`; its launcher pod, rendered from it, at the gate.
pub fn vm1_naming_resource_claim(claim: &str, uid: &str) -> Vec<Obj> {
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
