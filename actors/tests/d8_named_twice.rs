//! D8: a device named twice is noticed. A named claim's record device
//! that another ResourceClaim also names (here one written by hand, or by
//! a job that tolerates D7's taint): given up where no VM uses the claim
//! (the record moves to a free device of the node, its backing claim
//! following, a Normal `DeviceTaken`), Lost where the node has none, and
//! said on both (a Warning `DeviceNamedTwice`) while a VM runs on it.
//! I1-I5 and I9 after each step.
mod common;
use common::*;
use gpu_claims_actors::api::{ClaimPhase, Kind};
use gpu_claims_actors::config::Config;
use gpu_claims_testbed::memory::store::Subresource;
use gpu_claims_testbed::standin::nvidia;
use serde_json::json;
use std::collections::BTreeSet;

/// A ResourceClaim of namespace `ops` allocated to n1's `device`, as a
/// job that tolerates the managed taint would have it (or a hand).
fn job_claim(device: &str) -> gpu_claims_actors::api::Obj {
    typed(
        Kind::ResourceClaim,
        json!({"metadata": {"name": "job", "namespace": "ops", "uid": "job"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": VFIO, "allocationMode": "ExactCount", "count": 1,
                "tolerations": [{"key": "gpu.cozystack.io/managed", "operator": "Exists"}]}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": device}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}),
    )
}

/// Claim t/c1 of two placed on n1 (of `gpus` H200s) for vm1, which then
/// stops: Bound, its backing claim keeping the devices.
async fn stopped_vm_on_n1(t: &mut TestCluster) -> BTreeSet<String> {
    nvidia::publish(&t.sim.store);
    t.settle().await;
    stop_vm1(t).await;
    assert_eq!(t.phase("t/c1"), ClaimPhase::Bound);
    let held: BTreeSet<String> = recorded(t).into_iter().collect();
    assert_eq!(
        held,
        BTreeSet::from(["gpu-vfio-0".into(), "gpu-vfio-1".into()])
    );
    t.writes();
    held
}

/// vm1 stops: its VMI Succeeded, its launcher pod gone.
async fn stop_vm1(t: &mut TestCluster) {
    let mut v = t
        .sim
        .store
        .get("VirtualMachineInstance", "t", "vm1")
        .unwrap();
    v["status"]["phase"] = "Succeeded".into();
    t.sim
        .store
        .update("VirtualMachineInstance", v, Subresource::Status)
        .unwrap();
    t.user_delete(Kind::Pod, Some("t"), "virt-launcher-vm1-u1");
    t.settle().await;
}

/// The Events of `reason`, as `kind name: message`.
fn events(t: &TestCluster, reason: &str) -> Vec<String> {
    t.sim
        .cluster
        .events()
        .into_iter()
        .filter(|e| e.reason == reason)
        .map(|e| {
            format!(
                "{} {}: {}",
                e.regarding.kind.name(),
                e.regarding.name,
                e.message
            )
        })
        .collect()
}

/// n1 with `gpus` H200s, the DRA class, claim t/c1 of two and vm1 naming
/// it (D5).
fn world(gpus: u32) -> Vec<gpu_claims_actors::api::Obj> {
    let mut v = vec![
        node("n1")
            .passthrough_gpus("NVIDIA H200", gpus, "141Gi", "0x2335")
            .obj(),
        dra_class("h200", VFIO).obj(),
        claim("t", "c1").count(2).obj(),
    ];
    v.extend(vm1_naming_resource_claim("c1", "u1"));
    v
}

#[test]
fn d8_a_stopped_vm_s_device_another_claim_names_is_given_up_for_a_free_one_of_its_node() {
    with_world(Config::default(), world(4), |mut t| async move {
        stopped_vm_on_n1(&mut t).await;
        t.user_create(job_claim("gpu-vfio-1"));
        t.settle().await;
        let now: BTreeSet<String> = recorded(&t).into_iter().collect();
        assert_eq!(
            now,
            BTreeSet::from(["gpu-vfio-0".into(), "gpu-vfio-2".into()]),
            "the record keeps gpu-vfio-0 and takes a free one"
        );
        // Its backing claim follows (D4): cleared, then allocated anew.
        let backing = backing(&t).unwrap();
        assert_eq!(
            allocated(&backing).into_iter().collect::<BTreeSet<_>>(),
            now
        );
        let writes = t.writes();
        assert_eq!(
            writes[..3],
            [
                "update GPUAllocation c1 D8",
                // D4 as the gate writes it: cleared, then allocated.
                "update_status ResourceClaim c1 D4",
                "update_status ResourceClaim c1 D4",
            ],
            "{writes:#?}"
        );
        assert_eq!(t.phase("t/c1"), ClaimPhase::Bound);
        let said = events(&t, "DeviceTaken");
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with("GPUClaim c1: D8: device gpu.nvidia.com/n1/gpu-vfio-1 is allocated to ResourceClaim ops/job too")
                && said[0].contains("it holds gpu-vfio-0, gpu-vfio-2 of node n1 instead"),
            "{said:?}"
        );
        t.restart_writes_nothing().await;
    });
}

#[test]
fn d8_with_no_free_device_on_its_node_the_claim_is_lost_until_the_other_lets_go() {
    with_world(Config::default(), world(2), |mut t| async move {
        stopped_vm_on_n1(&mut t).await;
        t.user_create(job_claim("gpu-vfio-1"));
        t.settle().await;
        assert_eq!(t.phase("t/c1"), ClaimPhase::Lost);
        let c = t.claim("t/c1").unwrap();
        let lost = c
            .conditions()
            .iter()
            .find(|c| c.type_ == "Lost")
            .unwrap()
            .clone();
        assert_eq!(lost.reason, "DevicesLost");
        assert!(
            lost.message.starts_with("device gpu.nvidia.com/n1/gpu-vfio-1 is allocated to ResourceClaim ops/job too, and node n1 has no other free device of GPUClass h200"),
            "{}",
            lost.message
        );
        assert!(
            t.writes()
                .contains(&"update_status GPUClaim c1 D8".to_string())
        );
        // The job ends: its claim goes, and the claim is Bound again.
        t.user_delete(Kind::ResourceClaim, Some("ops"), "job");
        t.settle().await;
        assert_eq!(t.phase("t/c1"), ClaimPhase::Bound);
        t.restart_writes_nothing().await;
    });
}

#[test]
fn d8_while_a_vm_runs_on_it_a_device_named_twice_is_said_on_both_and_nothing_moves() {
    with_world(Config::default(), world(4), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        // The scheduler bound vm1's pod: a VM runs on the claim's devices.
        let mut pod = t.sim.store.get("Pod", "t", "virt-launcher-vm1-u1").unwrap();
        pod["spec"]["nodeName"] = "n1".into();
        t.user_update(typed(Kind::Pod, pod));
        t.settle().await;
        t.writes();
        t.user_create(job_claim("gpu-vfio-1"));
        t.settle().await;
        assert_eq!(t.phase("t/c1"), ClaimPhase::Attached);
        assert_eq!(
            recorded(&t).into_iter().collect::<BTreeSet<_>>(),
            BTreeSet::from(["gpu-vfio-0".to_string(), "gpu-vfio-1".to_string()])
        );
        assert!(
            t.writes().iter().all(|w| !w.contains("D8")),
            "nothing moves under a running VM"
        );
        let said = events(&t, "DeviceNamedTwice");
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].starts_with("GPUClaim c1: D8: device gpu.nvidia.com/n1/gpu-vfio-1 is allocated to ResourceClaim ops/job too"), "{said:?}");
        assert!(said[1].starts_with("ResourceClaim job: D8:"), "{said:?}");
        // Said once, not at every change.
        t.user_update(
            claim("t", "c1")
                .count(2)
                .attached_phase("n1")
                .attached("vm1")
                .obj(),
        );
        t.settle().await;
        assert_eq!(events(&t, "DeviceNamedTwice").len(), 2);
    });
}
