//! D6, E1 with a named claim's backing claim (D4): a stopped VM's claim
//! held on a node that fails moves when the VM starts again; the record
//! moves with one write (node and devices), then the backing claim's
//! allocation follows: cleared, as kube-controller-manager deallocates a
//! claim (an allocation cannot be changed, only removed while no pod
//! holds it), and allocated to the new devices, before the claim's status
//! and the pod. A crash between any two of these writes resumes to the
//! same end; I1-I5 and I9 hold after every step.
mod common;
use common::*;
use gpu_claims_actors::api::{ClaimPhase, GPUAllocation, Kind, Obj, ObjRef};
use gpu_claims_actors::config::Config;
use gpu_claims_testbed::memory::sim::Sim;
use gpu_claims_testbed::standin::nvidia::{self, DRIVER};
use serde_json::json;

/// Claim c1 of 2 H200s Bound on n1, which is NotReady now, its record and
/// backing claim naming n1's gpu-vfio-0 and -1 (its VM stopped); n2 has
/// four free; vm1 starts again (u2) naming c1.
fn held_on_a_failed_node() -> Vec<Obj> {
    let gpus = |n: &str| node(n).passthrough_gpus("NVIDIA H200", 4, "141Gi", "0x2335");
    let c = claim("t", "c1").count(2).bound("n1").build();
    let mut record = gpu_claims_testbed::fixtures::allocation_of(&c, "");
    record.spec.device_class_name = Some(VFIO.into());
    record.spec.devices = ["gpu-vfio-0", "gpu-vfio-1"]
        .iter()
        .map(|d| gpu_claims_actors::api::AllocatedDevice {
            driver: DRIVER.into(),
            pool: "n1".into(),
            device: d.to_string(),
        })
        .collect();
    let result = |d: &str| json!({"request": "gpu", "driver": DRIVER, "pool": "n1", "device": d});
    let backing = typed(
        Kind::ResourceClaim,
        json!({"metadata": {"name": "c1", "namespace": "t", "uid": "rc-c1",
                "ownerReferences": [{"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaim",
                    "name": "c1", "uid": c.metadata.uid, "controller": true}]},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": VFIO, "allocationMode": "ExactCount", "count": 2}}]}},
            "status": {"allocation": {
                "devices": {"results": [result("gpu-vfio-0"), result("gpu-vfio-1")]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
                "allocationTimestamp": "2026-01-01T00:00:00Z"}}}),
    );
    let mut v = vec![
        gpus("n1").ready(false).obj(),
        gpus("n2").obj(),
        dra_class("h200", VFIO).obj(),
        Obj::Claim(c),
        Obj::Allocation(record),
        backing,
    ];
    v.extend(vm1_naming_resource_claim("c1", "u2"));
    v
}

fn started() -> Sim {
    let sim = Sim::start(Config::default(), &held_on_a_failed_node(), None);
    nvidia::publish(&sim.store);
    sim
}

fn record(sim: &Sim) -> Option<GPUAllocation> {
    match sim
        .cluster
        .get(&ObjRef::new(Kind::Allocation, Some("t"), "c1"))?
    {
        Obj::Allocation(r) => Some(r),
        _ => None,
    }
}

/// The move ended: the record on n2 with two of its devices, the backing
/// claim (the same object) allocated to them with n2's node selector,
/// the claim's status on n2, the pod out of the gate.
fn ended(sim: &Sim) -> Vec<String> {
    let mut v = Vec::new();
    let Some(r) = record(sim) else {
        return vec!["no record".into()];
    };
    let devices: Vec<String> = r
        .spec
        .devices
        .iter()
        .map(|d| format!("{}/{}/{}", d.driver, d.pool, d.device))
        .collect();
    if r.spec.node_name != "n2" || devices.len() != 2 || devices.iter().any(|d| !d.contains("/n2/"))
    {
        v.push(format!("record on {} naming {devices:?}", r.spec.node_name));
    }
    match sim.store.get("ResourceClaim", "t", "c1") {
        Some(rc) => {
            if rc["metadata"]["uid"] != "rc-c1" {
                v.push("the backing claim was made anew".into());
            }
            if gpu_claims_testbed::memory::devices_of(&rc) != devices {
                v.push(format!(
                    "backing claim allocated to {:?}, record {devices:?}",
                    gpu_claims_testbed::memory::devices_of(&rc)
                ));
            }
            let at = &rc["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"]
                [0]["values"];
            if *at != json!(["n2"]) {
                v.push(format!("backing claim's node selector {at}"));
            }
        }
        None => v.push("no backing claim".into()),
    }
    let c = sim.store.get("GPUClaim", "t", "c1").unwrap();
    if c["status"]["nodeName"] != "n2" {
        v.push(format!("claim on {}", c["status"]["nodeName"]));
    }
    let pod = sim.store.get("Pod", "t", "virt-launcher-vm1-u2").unwrap();
    if !pod["spec"]["schedulingGates"].is_null() {
        v.push("the pod is still gated".into());
    }
    v
}

#[test]
fn d6_a_stopped_vm_s_claim_on_a_failed_node_moves_with_new_devices_and_its_backing_claim_follows() {
    with_world(
        Config::default(),
        held_on_a_failed_node(),
        |mut t| async move {
            nvidia::publish(&t.sim.store);
            t.settle().await;
            assert!(ended(&t.sim).is_empty(), "{:?}", ended(&t.sim));
            assert_eq!(t.phase("t/c1"), ClaimPhase::Attached);
            // E1's order: the record moved in one write, then the backing
            // claim cleared and allocated, then the claim's status, the pod.
            let w = t.writes();
            let at = |s: &str| {
                w.iter()
                    .position(|x| x.starts_with(s))
                    .unwrap_or_else(|| panic!("{s}: {w:#?}"))
            };
            let moved = at("update GPUAllocation c1");
            let allocated = w
                .iter()
                .rposition(|x| x.starts_with("update_status ResourceClaim c1"))
                .unwrap_or_else(|| panic!("{w:#?}"));
            assert!(moved < at("update_status ResourceClaim c1"), "{w:#?}");
            assert!(allocated < at("update_status GPUClaim c1 G4"), "{w:#?}");
            assert!(at("update_status GPUClaim c1 G4") < at("update_pod Pod virt-launcher-vm1-u2"));
            assert_eq!(
                w.iter()
                    .filter(|x| x.starts_with("update GPUAllocation c1"))
                    .count(),
                1,
                "{w:#?}"
            );
            t.restart_writes_nothing().await;
        },
    );
}

/// A crash between any two of the move's writes (record, allocation
/// cleared, allocated, claim status, pod) resumes to the same end.
#[test]
fn d6_a_crash_between_any_two_writes_of_a_backing_claims_move_resumes_to_the_same_end() {
    let total = every_cut_resumes(started, ended);
    assert!(
        total >= 5,
        "record, clear, allocate, status, pod: {total} writes"
    );
}
