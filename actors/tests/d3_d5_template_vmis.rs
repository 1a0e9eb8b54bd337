//! D3-D6 for a VMI that asks through a ResourceClaimTemplate, as
//! KubeVirt's DRA guide writes it: its template claim (G2, D5), the gate
//! until Kubernetes made the launcher pod's ResourceClaim (G5's
//! DeviceClaimPending), the devices chosen and recorded (D3), the pod's
//! ResourceClaim allocated to them as kube-scheduler writes an allocation
//! (D4), and the claim Lost when a device fails (D6). NVIDIA's driver is
//! the stand-in's, publishing as upstream's kubelet plugin does. Every
//! step is checked against I1-I5 and I9 (no device held twice).
mod common;
use common::*;
use gpu_claims_actors::api::{ClaimPhase, GPUAllocation, Kind, Obj, ObjRef};
use gpu_claims_actors::config::Config;
use gpu_claims_testbed::memory::sim::Sim;
use gpu_claims_testbed::standin::nvidia;
use serde_json::{Value, json};

const DRIVER: &str = "gpu.nvidia.com";

/// A template asking `count` GPUs of the passthrough DeviceClass.
fn template(name: &str, request: Value) -> Obj {
    typed(
        Kind::ResourceClaimTemplate,
        json!({"metadata": {"name": name, "namespace": "t"},
            "spec": {"spec": {"devices": {"requests": [request]}}}}),
    )
}

fn exactly(count: i64) -> Value {
    json!({"name": "gpu", "exactly": {"deviceClassName": VFIO, "count": count}})
}

/// VMI vm1 (u1) as KubeVirt's DRA guide writes it: a `resourceClaims`
/// entry `gpu` from the template `two-gpus`, which `gpus[]` references;
/// its launcher pod at the gate, rendered with `spec.resourceClaims`.
fn vm1_through_template() -> Vec<Obj> {
    let vmi = typed(
        Kind::Vmi,
        json!({"metadata": {"name": "vm1", "namespace": "t", "uid": "u1"},
            "spec": {"domain": {"devices": {"gpus": [{"name": "gpu1", "claimName": "gpu", "requestName": "gpu"}]}},
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}]},
            "status": {"phase": "Scheduling"}}),
    );
    let pod = typed(
        Kind::Pod,
        json!({"metadata": {"name": "virt-launcher-vm1", "namespace": "t", "uid": "p1",
                "labels": {"kubevirt.io": "virt-launcher"},
                "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                    "name": "vm1", "uid": "u1", "controller": true}]},
            "spec": {"containers": [{"name": "compute", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}],
                "schedulingGates": [{"name": "gpu.cozystack.io/claims"}]}}),
    );
    vec![vmi, pod]
}

/// What kube-controller-manager's resourceclaim controller makes for the
/// pod's entry: the claim (named as upstream names it, owned by the pod),
/// and the pod's `status.resourceClaimStatuses` naming it.
fn pods_claim_made(t: &TestCluster, count: i64) {
    t.user_create(typed(
        Kind::ResourceClaim,
        json!({"metadata": {"name": "virt-launcher-vm1-gpu-x7k2p", "namespace": "t",
                "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "virt-launcher-vm1",
                    "uid": "p1", "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"devices": {"requests": [exactly(count)]}}}),
    ));
    let mut pod = t.sim.store.get("Pod", "t", "virt-launcher-vm1").unwrap();
    pod["status"]["resourceClaimStatuses"] =
        json!([{"name": "gpu", "resourceClaimName": "virt-launcher-vm1-gpu-x7k2p"}]);
    t.user_update(typed(Kind::Pod, pod));
}

/// Four H200s on n1 as NVIDIA's driver publishes them, a DRA class of
/// them, and vm1 asking for two through its template.
fn dra_world(count: i64) -> Vec<Obj> {
    let mut v = vec![
        node("n1")
            .passthrough_gpus("NVIDIA H200", 4, "141Gi", "0x2335")
            .obj(),
        dra_class("h200", VFIO).obj(),
        template("two-gpus", exactly(count)),
    ];
    v.extend(vm1_through_template());
    v
}

/// The scheduler bound vm1's pod to n1 and the VM runs (else L12 would
/// restart the VM off lost devices, as off a lost node).
async fn runs_on_n1(t: &mut TestCluster) {
    let mut pod = t.sim.store.get("Pod", "t", "virt-launcher-vm1").unwrap();
    pod["spec"]["nodeName"] = "n1".into();
    t.user_update(typed(Kind::Pod, pod));
    let mut vmi = t
        .sim
        .store
        .get("VirtualMachineInstance", "t", "vm1")
        .unwrap();
    vmi["status"]["phase"] = "Running".into();
    t.user_update(typed(Kind::Vmi, vmi));
    t.settle().await;
}

fn record(t: &TestCluster) -> Option<GPUAllocation> {
    match t
        .sim
        .cluster
        .get(&ObjRef::new(Kind::Allocation, Some("t"), "vm1-gpu"))?
    {
        Obj::Allocation(r) => Some(r),
        _ => None,
    }
}

fn resource_claim(t: &TestCluster) -> Value {
    t.sim
        .store
        .get("ResourceClaim", "t", "virt-launcher-vm1-gpu-x7k2p")
        .unwrap()
}

#[test]
fn d5_a_template_vmi_waits_device_claim_pending_until_its_pods_resource_claim_exists() {
    with_world(Config::default(), dra_world(2), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        // G2 made the template claim with the template's count.
        let c = t.claim("t/vm1-gpu").expect("the template claim");
        assert_eq!((c.spec.class_name.as_str(), c.spec.count), ("h200", 2));
        let (reason, message) = t.waiting("t/vm1-gpu").unwrap();
        assert_eq!(reason, "DeviceClaimPending", "{message}");
        assert!(message.contains("entry gpu"), "{message}");
        assert!(record(&t).is_none());
        pods_claim_made(&t, 2);
        t.settle().await;
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
    });
}

#[test]
fn d3_the_devices_are_recorded_then_the_pods_resource_claim_is_allocated_to_them() {
    with_world(Config::default(), dra_world(2), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        pods_claim_made(&t, 2);
        t.settle().await;
        // D3: two devices of n1's pool, by pool then name.
        let r = record(&t).expect("the record");
        assert_eq!(r.spec.node_name, "n1");
        assert_eq!(r.spec.device_class_name.as_deref(), Some(VFIO));
        let names: Vec<&str> = r.spec.devices.iter().map(|d| d.device.as_str()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(
            r.spec
                .devices
                .iter()
                .all(|d| d.driver == DRIVER && d.pool == "n1")
        );
        // D4: the allocation names exactly them, for request gpu, with a
        // node selector for n1 and no reservedFor (the scheduler's).
        let rc = resource_claim(&t);
        let a = &rc["status"]["allocation"];
        let results: Vec<&str> = a["devices"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["device"].as_str().unwrap())
            .collect();
        assert_eq!(results, names);
        assert!(
            a["devices"]["results"]
                .as_array()
                .unwrap()
                .iter()
                .all(|x| x["request"] == "gpu")
        );
        assert_eq!(
            a["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0],
            json!({"key": "metadata.name", "operator": "In", "values": ["n1"]})
        );
        assert!(rc["status"]["reservedFor"].is_null());
        // G4: the pod pinned to n1 and out of the gate.
        let pod = t.sim.store.get("Pod", "t", "virt-launcher-vm1").unwrap();
        assert_eq!(pod["spec"]["nodeSelector"]["kubernetes.io/hostname"], "n1");
        assert!(pod["spec"]["schedulingGates"].is_null());
        // D2: the devices are held: the class's other two stay free.
        assert_eq!(t.class("h200").unwrap().status.unwrap().capacity, Some(4));
        t.restart_writes_nothing().await;
    });
}

#[test]
fn d3_a_node_without_room_for_the_devices_leaves_the_set_waiting_no_capacity() {
    with_world(Config::default(), dra_world(5), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        pods_claim_made(&t, 5);
        t.settle().await;
        let (reason, message) = t.waiting("t/vm1-gpu").unwrap();
        assert_eq!(reason, "NoCapacity");
        assert!(message.contains("GPUClass h200 devices"), "{message}");
        assert!(record(&t).is_none());
        assert!(resource_claim(&t)["status"]["allocation"].is_null());
    });
}

#[test]
fn d5_a_template_that_asks_for_all_devices_is_bad_input_and_makes_no_claim() {
    let mut objs = dra_world(2);
    objs[2] = template(
        "two-gpus",
        json!({"name": "gpu", "exactly": {"deviceClassName": VFIO, "allocationMode": "All"}}),
    );
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        assert!(t.claim("t/vm1-gpu").is_none());
        let warned = t
            .sim
            .cluster
            .events()
            .iter()
            .any(|e| e.warning && e.message.contains("allocationMode: All"));
        assert!(warned, "{:#?}", t.sim.cluster.events());
        // Its pod stays at the gate.
        let pod = t.sim.store.get("Pod", "t", "virt-launcher-vm1").unwrap();
        assert!(pod["spec"]["schedulingGates"].is_array());
    });
}

#[test]
fn d6_a_device_tainted_no_execute_makes_its_claim_lost_naming_it_and_back_when_it_is_well() {
    with_world(Config::default(), dra_world(2), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        pods_claim_made(&t, 2);
        t.settle().await;
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
        runs_on_n1(&mut t).await;
        let failed = record(&t).unwrap().spec.devices[0].device.clone();
        let mut n1 = t.sim.store.get("Node", "", "n1").unwrap();
        n1["metadata"]["annotations"][nvidia::FAILED_GPUS] = failed.clone().into();
        t.user_update(typed(Kind::Node, n1));
        nvidia::publish(&t.sim.store);
        t.settle().await;
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Lost);
        let c = t.claim("t/vm1-gpu").unwrap();
        let lost = c
            .status
            .unwrap()
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Lost")
            .unwrap();
        assert_eq!(lost.reason, "DevicesLost");
        assert!(lost.message.contains(&failed), "{}", lost.message);
        // Well again: the claim is back.
        let mut n1 = t.sim.store.get("Node", "", "n1").unwrap();
        n1["metadata"]["annotations"][nvidia::FAILED_GPUS] = "".into();
        t.user_update(typed(Kind::Node, n1));
        nvidia::publish(&t.sim.store);
        t.settle().await;
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
    });
}

/// The world with Kubernetes' claim for the pod made already: the set is
/// placed in one go.
fn dra_world_claim_made() -> Vec<Obj> {
    let mut v = dra_world(2);
    v.push(typed(
        Kind::ResourceClaim,
        json!({"metadata": {"name": "virt-launcher-vm1-gpu-x7k2p", "namespace": "t", "uid": "rc1",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "virt-launcher-vm1",
                    "uid": "p1", "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"devices": {"requests": [exactly(2)]}}}),
    ));
    let Some(Obj::Pod(mut pod)) = v.iter().find(|o| o.kind() == Kind::Pod).cloned() else {
        unreachable!("the world has vm1's launcher pod")
    };
    pod.status = Some(
        serde_json::from_value(json!({"resourceClaimStatuses": [
        {"name": "gpu", "resourceClaimName": "virt-launcher-vm1-gpu-x7k2p"}]}))
        .unwrap(),
    );
    v.retain(|o| o.kind() != Kind::Pod);
    v.push(Obj::Pod(pod));
    v
}

fn started() -> Sim {
    let sim = Sim::start(Config::default(), &dra_world_claim_made(), None);
    nvidia::publish(&sim.store);
    sim
}

/// D4 and G4 ended: the record's devices are the ResourceClaim's
/// allocation, and the pod is out of the gate.
fn ended(sim: &Sim) -> Vec<String> {
    let mut v = Vec::new();
    let record = sim.store.get("GPUAllocation", "t", "vm1-gpu");
    let rc = sim
        .store
        .get("ResourceClaim", "t", "virt-launcher-vm1-gpu-x7k2p")
        .unwrap();
    let recorded: Vec<Value> = record
        .as_ref()
        .map(|r| r["spec"]["devices"].as_array().cloned().unwrap_or_default())
        .unwrap_or_default();
    let allocated: Vec<Value> = rc["status"]["allocation"]["devices"]["results"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|r| json!({"driver": r["driver"], "pool": r["pool"], "device": r["device"]}))
        .collect();
    if recorded.len() != 2 || recorded != allocated {
        v.push(format!("recorded {recorded:?}, allocated {allocated:?}"));
    }
    let pod = sim.store.get("Pod", "t", "virt-launcher-vm1").unwrap();
    if !pod["spec"]["schedulingGates"].is_null() {
        v.push("the pod is still gated".into());
    }
    v
}

#[test]
fn d4_a_placement_cut_after_any_write_resumes_to_the_same_devices_allocated() {
    let total = every_cut_resumes(started, ended);
    assert!(
        total >= 4,
        "record, allocation, status, pod: {total} writes"
    );
}

#[test]
fn d6_a_device_taint_rule_no_execute_on_a_held_device_makes_its_claim_lost_until_it_goes() {
    with_world(
        Config::default(),
        dra_world_claim_made(),
        |mut t| async move {
            nvidia::publish(&t.sim.store);
            t.settle().await;
            runs_on_n1(&mut t).await;
            assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
            let held = record(&t).unwrap().spec.devices[1].device.clone();
            t.user_create(typed(
                Kind::DeviceTaintRule,
                json!({"metadata": {"name": "maintenance"},
                "spec": {"deviceSelector": {"driver": DRIVER, "pool": "n1", "device": held},
                    "taint": {"key": "example.com/maintenance", "effect": "NoExecute"}}}),
            ));
            t.settle().await;
            assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Lost);
            t.user_delete(Kind::DeviceTaintRule, None, "maintenance");
            t.settle().await;
            assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
        },
    );
}

/// vm1's placement cut after its record: the record names n1's gpu-vfio-0
/// and gpu-vfio-1, its pod's ResourceClaim is not allocated yet.
fn cut_after_the_record() -> Vec<Obj> {
    let mut v = dra_world_claim_made();
    v.push(typed(
        Kind::Claim,
        json!({"metadata": {"name": "vm1-gpu", "namespace": "t", "uid": "c1",
                "finalizers": ["gpu.cozystack.io/claim-protection"],
                "labels": {"gpu.cozystack.io/template": "true"},
                "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                    "name": "vm1", "uid": "u1", "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"className": "h200", "count": 2}}),
    ));
    v.push(typed(
        Kind::Allocation,
        json!({"metadata": {"name": "vm1-gpu", "namespace": "t"},
            "spec": {"claimUID": "c1", "className": "h200", "deviceClassName": VFIO,
                "nodeName": "n1", "count": 2, "devices": [
                    {"driver": DRIVER, "pool": "n1", "device": "gpu-vfio-0"},
                    {"driver": DRIVER, "pool": "n1", "device": "gpu-vfio-1"}]}}),
    ));
    v
}

/// An allocation kube-scheduler made for a pod outside gpu-claims.
fn foreign_claim(device: &str, reserved: bool) -> Obj {
    let mut v = json!({"metadata": {"name": "other", "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": VFIO}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}});
    if reserved {
        v["status"]["reservedFor"] = json!([{"resource": "pods", "name": "job", "uid": "j1"}]);
    }
    typed(Kind::ResourceClaim, v)
}

#[test]
fn d4_a_recorded_device_another_claim_took_before_the_allocation_was_written_is_left_to_it() {
    // The scheduler cannot see records: while our allocation was not yet
    // written, a pod outside gpu-claims got gpu-vfio-1 (I9 forbids
    // naming it twice).
    let mut objs = cut_after_the_record();
    objs.push(foreign_claim("gpu-vfio-1", true));
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let r = record(&t).unwrap();
        let names: Vec<&str> = r.spec.devices.iter().map(|d| d.device.as_str()).collect();
        assert!(!names.contains(&"gpu-vfio-1"), "{names:?}");
        assert_eq!(names.len(), 2);
        let allocated = gpu_claims_testbed::memory::devices_of(&resource_claim(&t));
        let recorded: Vec<String> = names.iter().map(|n| format!("{DRIVER}/n1/{n}")).collect();
        assert_eq!(allocated, recorded);
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
    });
}

/// `dra_world_claim_made`, vm1's pod's claim allocated (unstamped) to
/// n1's gpu-vfio-2 and gpu-vfio-3 by someone else, reserved for
/// `reserved_for` (null: for no one).
fn dra_world_claim_allocated_to_vfio_2_and_3(reserved_for: Value) -> Vec<Obj> {
    let mut objs = dra_world_claim_made();
    let rc = objs
        .iter_mut()
        .find(|o| o.kind() == Kind::ResourceClaim)
        .unwrap();
    let mut v = gpu_claims_actors::api::to_json(rc);
    v["status"] = json!({"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-vfio-2"},
            {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-vfio-3"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}});
    if !reserved_for.is_null() {
        v["status"]["reservedFor"] = reserved_for;
    }
    *rc = typed(Kind::ResourceClaim, v);
    objs
}

#[test]
fn d4_a_pods_claim_allocated_to_other_devices_and_reserved_makes_the_set_wait_device_claim_conflict()
 {
    // Someone allocated vm1's pod's claim to a device that is tainted now,
    // and reserved it: not ours to undo.
    let mut objs = dra_world_claim_allocated_to_vfio_2_and_3(
        json!([{"resource": "pods", "name": "virt-launcher-vm1", "uid": "p1"}]),
    );
    objs[0] = node("n1")
        .passthrough_gpus("NVIDIA H200", 4, "141Gi", "0x2335")
        .failed_gpus("gpu-vfio-3")
        .obj();
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let (reason, message) = t.waiting("t/vm1-gpu").unwrap();
        assert_eq!(reason, "DeviceClaimConflict", "{message}");
        let pod = t.sim.store.get("Pod", "t", "virt-launcher-vm1").unwrap();
        assert!(pod["spec"]["schedulingGates"].is_array());
    });
}

/// D4: a pod's claim allocated to the devices the set takes but without
/// an `allocationTimestamp` (written by a gpu-claims from before 1.36's
/// scheduler stamped its PreBind), and not reserved, is written again
/// stamped, to the same devices: unstamped, the scheduler could never
/// reserve it for the pod.
#[test]
fn d4_an_unstamped_allocation_not_reserved_is_written_again_stamped_to_the_same_devices() {
    let objs = dra_world_claim_allocated_to_vfio_2_and_3(Value::Null);
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let rc = resource_claim(&t);
        let a = &rc["status"]["allocation"];
        assert!(a["allocationTimestamp"].is_string(), "stamped: {rc}");
        let devices: Vec<&str> = a["devices"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["device"].as_str().unwrap())
            .collect();
        assert_eq!(
            devices,
            ["gpu-vfio-2", "gpu-vfio-3"],
            "its own devices kept"
        );
        let pod = t.sim.store.get("Pod", "t", "virt-launcher-vm1").unwrap();
        assert!(pod["spec"]["schedulingGates"].is_null(), "ungated: {pod}");
    });
}

#[test]
fn d6_a_lost_claim_stays_lost_while_its_pool_is_incomplete_even_with_its_device_back() {
    with_world(
        Config::default(),
        dra_world_claim_made(),
        |mut t| async move {
            nvidia::publish(&t.sim.store);
            t.settle().await;
            runs_on_n1(&mut t).await;
            let failed = record(&t).unwrap().spec.devices[0].device.clone();
            let mut n1 = t.sim.store.get("Node", "", "n1").unwrap();
            n1["metadata"]["annotations"][nvidia::FAILED_GPUS] = failed.into();
            t.user_update(typed(Kind::Node, n1));
            nvidia::publish(&t.sim.store);
            t.settle().await;
            assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Lost);
            // The driver republishes in two slices; the first is back, well,
            // while the second is not there yet: the pool is incomplete.
            let (slices, _) = t.sim.store.list("ResourceSlice");
            let mut s = slices[0].clone();
            s["spec"]["pool"]["resourceSliceCount"] = 2.into();
            s["spec"]["pool"]["generation"] = 2.into();
            for d in s["spec"]["devices"].as_array_mut().unwrap() {
                d.as_object_mut().unwrap().remove("taints");
            }
            t.user_update(typed(Kind::ResourceSlice, s.clone()));
            t.settle().await;
            assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Lost);
            // Complete again: back.
            s["spec"]["pool"]["resourceSliceCount"] = 1.into();
            s["spec"]["pool"]["generation"] = 3.into();
            t.user_update(typed(Kind::ResourceSlice, s));
            t.settle().await;
            assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
        },
    );
}

#[test]
fn d5_the_class_annotation_picks_among_classes_of_one_device_class() {
    let mut objs = dra_world_claim_made();
    // Two classes of the passthrough DeviceClass: the VMI names one.
    objs.push(dra_class("h200-other", VFIO).obj());
    let vmi = objs.iter_mut().find(|o| o.kind() == Kind::Vmi).unwrap();
    let mut v = gpu_claims_actors::api::to_json(vmi);
    v["metadata"]["annotations"] =
        json!({"gpu.cozystack.io/class": "h200", "gpu.cozystack.io/count": "2"});
    *vmi = typed(Kind::Vmi, v);
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let c = t.claim("t/vm1-gpu").expect("the template claim");
        assert_eq!(c.spec.class_name, "h200");
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
    });
}

/// The template world with two classes of the passthrough DeviceClass,
/// vm1 annotated with `annotations`.
fn two_classes_annotated(annotations: Value) -> Vec<gpu_claims_actors::api::Obj> {
    let mut objs = dra_world_claim_made();
    objs.push(dra_class("h200-other", VFIO).obj());
    let vmi = objs.iter_mut().find(|o| o.kind() == Kind::Vmi).unwrap();
    let mut v = gpu_claims_actors::api::to_json(vmi);
    v["metadata"]["annotations"] = annotations;
    *vmi = typed(Kind::Vmi, v);
    objs
}

/// Issue 58, item 4: the class annotation picks the class; without a
/// count annotation the count is the template's (it was 1, and the set
/// waited RequestMismatch).
#[test]
fn d5_the_class_annotation_alone_takes_the_template_s_count() {
    let objs = two_classes_annotated(json!({"gpu.cozystack.io/class": "h200"}));
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let c = t.claim("t/vm1-gpu").expect("the template claim");
        assert_eq!((c.spec.class_name.as_str(), c.spec.count), ("h200", 2));
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
    });
}

/// D5: a count annotation that says otherwise than the template is a
/// mismatch, said as G3 says one.
#[test]
fn d5_a_count_annotation_that_differs_from_the_template_waits_request_mismatch() {
    let objs = two_classes_annotated(
        json!({"gpu.cozystack.io/class": "h200", "gpu.cozystack.io/count": "1"}),
    );
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let (reason, message) = t.waiting("t/vm1-gpu").expect("waits");
        assert_eq!(reason, "RequestMismatch", "{message}");
        assert!(message.contains("GPUClass h200 for 2 GPUs"), "{message}");
    });
}

#[test]
fn d5_a_template_deleted_after_its_pods_resource_claim_was_made_places_the_set_from_the_claim() {
    with_world(Config::default(), dra_world(2), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        assert_eq!(t.waiting("t/vm1-gpu").unwrap().0, "DeviceClaimPending");
        // Kubernetes made the pod's claim from the template; then the
        // platform deletes the template (its VMs' claims are copies).
        pods_claim_made(&t, 2);
        t.user_delete(Kind::ResourceClaimTemplate, Some("t"), "two-gpus");
        t.settle().await;
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
        assert_eq!(record(&t).expect("the record").spec.devices.len(), 2);
        let results = &resource_claim(&t)["status"]["allocation"]["devices"]["results"];
        assert_eq!(results.as_array().map(Vec::len), Some(2));
    });
}

#[test]
fn d5_a_template_edited_after_its_pods_resource_claim_was_made_allocates_what_the_claim_asks() {
    with_world(Config::default(), dra_world(2), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        pods_claim_made(&t, 2);
        // Edited to ask for three: the pod's claim still asks for two,
        // and the template claim holds two.
        let mut tpl = t
            .sim
            .store
            .get("ResourceClaimTemplate", "t", "two-gpus")
            .unwrap();
        tpl["spec"]["spec"]["devices"]["requests"] = json!([exactly(3)]);
        t.user_update(typed(Kind::ResourceClaimTemplate, tpl));
        t.settle().await;
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
        assert_eq!(record(&t).expect("the record").spec.devices.len(), 2);
    });
}

#[test]
fn d5_a_template_count_out_of_range_is_bad_input_said_as_such() {
    let mut objs = dra_world(2);
    objs[2] = template("two-gpus", exactly(i64::from(u32::MAX) + 1));
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        assert!(t.claim("t/vm1-gpu").is_none());
        let events = t.sim.cluster.events();
        let said = events
            .iter()
            .any(|e| e.warning && e.message.contains("asks for 4294967296 devices"));
        assert!(said, "{events:#?}");
        assert!(
            !events
                .iter()
                .any(|e| e.message.contains("allocationMode: All"))
        );
    });
}

/// One GPU of n1 as a driver with partitions publishes it (KEP-4815):
/// whole (`gpu-0`, all 8 memory slices of counter set gpu-0) and as two
/// halves (4 each), in one slice of pool n1.
fn partitioned_gpu_slice() -> Obj {
    let device = |name: &str, slices: &str| {
        json!({"name": name,
            "attributes": {"type": {"string": "vfio"}, "productName": {"string": "NVIDIA H200"}},
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": slices}}}]})
    };
    typed(
        Kind::ResourceSlice,
        json!({"metadata": {"name": "n1-gpu.nvidia.com"},
            "spec": {"driver": DRIVER, "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "8"}}}],
                "devices": [device("gpu-0", "8"), device("gpu-0-half-a", "4"), device("gpu-0-half-b", "4")]}}),
    )
}

#[test]
fn d3_devices_chosen_together_fit_their_shared_counters_searching_past_a_first_pick_that_leaves_no_room()
 {
    let mut objs = vec![
        node("n1").obj(),
        dra_class("h200", VFIO).obj(),
        template("two-gpus", exactly(2)),
    ];
    objs.extend(vm1_through_template());
    with_world(Config::default(), objs, |mut t| async move {
        for dc in nvidia::device_classes() {
            t.user_create(typed(Kind::DeviceClass, dc));
        }
        t.user_create(partitioned_gpu_slice());
        t.settle().await;
        pods_claim_made(&t, 2);
        t.settle().await;
        // Each of the three is free alone; the whole GPU and a half are
        // 12 of 8 slices: the two halves are what fits.
        let r = record(&t).unwrap_or_else(|| panic!("the record: {:?}", t.waiting("t/vm1-gpu")));
        let mut names: Vec<&str> = r.spec.devices.iter().map(|d| d.device.as_str()).collect();
        names.sort();
        assert_eq!(names, ["gpu-0-half-a", "gpu-0-half-b"]);
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
    });
}

/// vm1's template, and the claim Kubernetes made from it, asking for two
/// GPUs under `constraint` (a ResourceClaim's own `constraints`).
fn constrained_world(constraint: Value) -> Vec<Obj> {
    let mut objs = dra_world(2);
    objs[2] = typed(
        Kind::ResourceClaimTemplate,
        json!({"metadata": {"name": "two-gpus", "namespace": "t"},
            "spec": {"spec": {"devices": {"requests": [exactly(2)], "constraints": [constraint]}}}}),
    );
    objs
}

/// The pod's claim as made from the constrained template.
fn constrained_claim_made(t: &TestCluster, constraint: Value) {
    pods_claim_made(t, 2);
    let mut rc = resource_claim(t);
    rc["spec"]["devices"]["constraints"] = json!([constraint]);
    // The claim's spec is immutable: made again as Kubernetes made it.
    t.user_delete(
        Kind::ResourceClaim,
        Some("t"),
        "virt-launcher-vm1-gpu-x7k2p",
    );
    rc["metadata"] = json!({"name": "virt-launcher-vm1-gpu-x7k2p", "namespace": "t",
        "ownerReferences": rc["metadata"]["ownerReferences"].clone()});
    t.user_create(typed(Kind::ResourceClaim, rc));
}

fn allocation_devices(t: &TestCluster) -> Vec<String> {
    let r = record(t).unwrap_or_else(|| panic!("the record: {:?}", t.waiting("t/vm1-gpu")));
    let mut names: Vec<String> = r.spec.devices.iter().map(|d| d.device.clone()).collect();
    names.sort();
    names
}

#[test]
fn d3_a_claims_match_attribute_constraint_keeps_its_devices_on_one_numa_node() {
    let numa = json!({"matchAttribute": "resource.kubernetes.io/numaNode"});
    with_world(
        Config::default(),
        constrained_world(numa.clone()),
        |mut t| async move {
            // gpu-vfio-0 (NUMA 0) fails: the first free pick, gpu-vfio-1, is
            // alone on NUMA 0, and the pair is gpu-vfio-2 and -3 (NUMA 1).
            let mut n1 = t.sim.store.get("Node", "", "n1").unwrap();
            n1["metadata"]["annotations"][nvidia::FAILED_GPUS] = "gpu-vfio-0".into();
            t.user_update(typed(Kind::Node, n1));
            nvidia::publish(&t.sim.store);
            t.settle().await;
            constrained_claim_made(&t, numa);
            t.settle().await;
            assert_eq!(allocation_devices(&t), ["gpu-vfio-2", "gpu-vfio-3"]);
            assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
        },
    );
}

#[test]
fn d3_a_claims_distinct_attribute_constraint_spreads_its_devices_over_numa_nodes() {
    let numa = json!({"distinctAttribute": "resource.kubernetes.io/numaNode", "requests": ["gpu"]});
    with_world(
        Config::default(),
        constrained_world(numa.clone()),
        |mut t| async move {
            nvidia::publish(&t.sim.store);
            t.settle().await;
            constrained_claim_made(&t, numa);
            t.settle().await;
            // gpu-vfio-0 and -1 share NUMA 0: the second is from NUMA 1.
            assert_eq!(allocation_devices(&t), ["gpu-vfio-0", "gpu-vfio-2"]);
        },
    );
}
