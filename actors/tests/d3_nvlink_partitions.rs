//! D2, D3, D4 with `matchAttribute`: a class whose claims' GPUs must
//! share an NVLink partition (`gpu.nvidia.com/partition4`, which NVIDIA's
//! driver publishes on an HGX board under Fabric Manager). A claim gets
//! four GPUs of one partition or waits; its backing claim carries the
//! constraint, as the driver's Prepare requires its GPUs to be exactly
//! one partition. Every step is checked against I1-I5 and I9.
mod common;
use common::*;
use gpu_claims_actors::api::{ClaimPhase, Kind, Obj, ObjRef};
use gpu_claims_actors::config::Config;
use gpu_claims_testbed::standin::nvidia;
use serde_json::json;

const PARTITION4: &str = "gpu.nvidia.com/partition4";

/// An HGX H200 board whose first GPU has failed (partition 1 keeps 3
/// healthy GPUs), a class of 4-GPU NVLink partitions, and claim `c1` of 4
/// that vm1 names.
fn hgx_world() -> Vec<Obj> {
    let mut v = vec![
        node("n1")
            .passthrough_gpus("NVIDIA H200", 8, "141Gi", "0x2335")
            .fabric_manager()
            .failed_gpus("gpu-vfio-0")
            .obj(),
        dra_class("h200-nvl4", VFIO)
            .match_attribute(PARTITION4)
            .obj(),
        claim("t", "c1").class("h200-nvl4").count(4).obj(),
    ];
    v.extend(vm1_naming_resource_claim("c1", "u1"));
    v
}

fn recorded(t: &TestCluster, name: &str) -> Vec<String> {
    match t
        .sim
        .cluster
        .get(&ObjRef::new(Kind::Allocation, Some("t"), name))
    {
        Some(Obj::Allocation(r)) => r.spec.devices.iter().map(|d| d.device.clone()).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn d3_a_partition4_class_places_four_gpus_of_one_nvlink_partition_and_its_backing_claim_says_so() {
    with_world(Config::default(), hgx_world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        assert_eq!(
            t.phase("t/c1"),
            ClaimPhase::Attached,
            "{:?}",
            t.waiting("t/c1")
        );
        // Partition 1 (modules 1-4) has a failed GPU: partition 2's four.
        assert_eq!(
            recorded(&t, "c1"),
            ["gpu-vfio-4", "gpu-vfio-5", "gpu-vfio-6", "gpu-vfio-7"]
        );
        let rc = t.sim.store.get("ResourceClaim", "t", "c1").unwrap();
        assert_eq!(
            rc["spec"]["devices"]["constraints"],
            json!([{"requests": ["gpu"], "matchAttribute": PARTITION4}])
        );
        let results: Vec<&str> = rc["status"]["allocation"]["devices"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["device"].as_str().unwrap())
            .collect();
        assert_eq!(results, recorded(&t, "c1"));
    });
}

#[test]
fn d2_a_partition4_claim_waits_no_capacity_while_no_partition_has_four_free_gpus() {
    let mut objs = hgx_world();
    // A training job's pod holds two GPUs of partition 2; partition 1 has
    // three healthy ones.
    objs.push(
        gpu_claims_actors::api::from_json(
            Kind::ResourceClaim,
            json!({"metadata": {"name": "train", "namespace": "ml"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": VFIO, "count": 2}}]}},
                "status": {"allocation": {"devices": {"results": [
                    {"request": "gpu", "driver": nvidia::DRIVER, "pool": "n1", "device": "gpu-vfio-4"},
                    {"request": "gpu", "driver": nvidia::DRIVER, "pool": "n1", "device": "gpu-vfio-5"}]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
                    "reservedFor": [{"resource": "pods", "name": "train", "uid": "j1"}]}}),
        )
        .unwrap(),
    );
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let (reason, message) = t.waiting("t/c1").expect("waits");
        assert_eq!(reason, "NoCapacity", "{message}");
        assert!(recorded(&t, "c1").is_empty());
        // Five GPUs are free, but no partition has four; the failed GPU
        // well again makes partition 1 whole.
        let mut n = t.sim.store.get("Node", "", "n1").unwrap();
        n["metadata"]["annotations"][nvidia::FAILED_GPUS] = "".into();
        t.sim
            .store
            .update(
                "Node",
                n,
                gpu_claims_testbed::memory::store::Subresource::Main,
            )
            .unwrap();
        nvidia::publish(&t.sim.store);
        t.settle().await;
        assert_eq!(t.phase("t/c1"), ClaimPhase::Attached);
        assert_eq!(
            recorded(&t, "c1"),
            ["gpu-vfio-0", "gpu-vfio-1", "gpu-vfio-2", "gpu-vfio-3"]
        );
    });
}
