//! D4, D5 for a named claim of a DRA class: the VMI names it by
//! `resourceClaimName` (D5), placement makes its backing claim (a
//! ResourceClaim of its name, controller-owned by it) and allocates it to
//! the record's devices in G4's order (D4), the backing claim stays
//! allocated while the VM is stopped, and L8 deletes it before the record.
//! Every step is checked against I1-I5 and I9.
mod common;
use common::*;
use gpu_claims_actors::api::{ClaimPhase, GPUAllocation, Kind, Obj, ObjRef};
use gpu_claims_actors::config::Config;
use gpu_claims_testbed::memory::sim::Sim;
use gpu_claims_testbed::memory::store::Subresource;
use gpu_claims_testbed::standin::{claims, nvidia};
use serde_json::{Value, json};

fn record(t: &TestCluster) -> Option<GPUAllocation> {
    match t
        .sim
        .cluster
        .get(&ObjRef::new(Kind::Allocation, Some("t"), "c1"))?
    {
        Obj::Allocation(r) => Some(r),
        _ => None,
    }
}

/// vm1's VMI and launcher pod gone (the VM stopped): L5 detaches c1.
async fn vm1_stopped(t: &mut TestCluster, uid: &str) {
    t.user_delete(Kind::Pod, Some("t"), &format!("virt-launcher-vm1-{uid}"));
    t.user_delete(Kind::Vmi, Some("t"), "vm1");
    t.settle().await;
}

#[test]
fn d4_a_named_claim_of_a_dra_class_gets_a_backing_claim_it_owns_allocated_to_its_record() {
    with_world(Config::default(), named_world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let c = t.claim("t/c1").unwrap();
        assert_eq!(c.phase(), ClaimPhase::Attached, "{:?}", t.waiting("t/c1"));
        assert_eq!(c.node_name(), Some("n1"));
        let rc = backing(&t).expect("the backing claim");
        let owner = &rc["metadata"]["ownerReferences"][0];
        assert_eq!(
            (
                owner["kind"].as_str(),
                owner["name"].as_str(),
                owner["controller"].as_bool()
            ),
            (Some("GPUClaim"), Some("c1"), Some(true))
        );
        assert_eq!(owner["uid"], json!(c.metadata.uid));
        let request = &rc["spec"]["devices"]["requests"][0];
        assert_eq!(request["name"], "gpu");
        assert_eq!(request["exactly"]["deviceClassName"], VFIO);
        assert_eq!(request["exactly"]["count"], 2);
        assert_eq!(request["exactly"]["allocationMode"], "ExactCount");
        // Allocated to exactly the record's devices, stamped, on n1, and
        // reserved for no one: the scheduler reserves it for the pod.
        assert_eq!(recorded(&t).len(), 2);
        assert_eq!(allocated(&rc), recorded(&t));
        let a = &rc["status"]["allocation"];
        assert!(a["allocationTimestamp"].is_string(), "{a}");
        assert_eq!(
            a["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"],
            json!(["n1"])
        );
        assert!(rc["status"]["reservedFor"].is_null());
        // G4's order: the record, the backing claim made and allocated,
        // the claim's status, then the pod.
        let w = t.writes();
        let at = |s: &str| position_of(&w, s);
        assert!(at("create GPUAllocation c1 G4") < at("create ResourceClaim c1 D4"));
        assert!(at("create ResourceClaim c1 D4") < at("update_status ResourceClaim c1 D4"));
        assert!(at("update_status ResourceClaim c1 D4") < at("update_status GPUClaim c1 G4"));
        assert!(at("update_status GPUClaim c1 G4") < at("update_pod Pod virt-launcher-vm1-u1 G4"));
        t.restart_writes_nothing().await;
    });
}

#[test]
fn d4_a_stopped_vm_s_claim_keeps_its_backing_claim_allocated_and_its_next_vmi_gets_the_same_devices()
 {
    with_world(Config::default(), named_world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let devices = recorded(&t);
        t.writes();
        vm1_stopped(&mut t, "u1").await;
        // Bound with no VM: the GPUs stay the tenant's, held by the
        // backing claim against every other claim and scheduler.
        assert_eq!(t.phase("t/c1"), ClaimPhase::Bound);
        assert_eq!(allocated(&backing(&t).unwrap()), devices);
        assert!(t.writes().iter().all(|w| !w.contains("ResourceClaim")));
        // Started again: its new VMI is placed on the same devices, and
        // the backing claim is left as it is (I5).
        for o in vm1_naming_resource_claim("c1", "u2") {
            t.user_create(o);
        }
        t.settle().await;
        let c = t.claim("t/c1").unwrap();
        assert_eq!(c.node_name(), Some("n1"));
        assert_eq!(recorded(&t), devices);
        let w = t.writes();
        assert!(w.iter().all(|w| !w.contains("ResourceClaim")), "{w:#?}");
        assert!(
            w.contains(&"update_pod Pod virt-launcher-vm1-u2 G4".to_string()),
            "{w:#?}"
        );
    });
}

#[test]
fn d5_a_named_dra_claim_the_vmi_spec_does_not_reference_waits_request_mismatch_saying_what_to_add()
{
    let mut objs = vec![
        node("n1")
            .passthrough_gpus("NVIDIA H200", 4, "141Gi", "0x2335")
            .obj(),
        dra_class("h200", VFIO).obj(),
        claim("t", "c1").count(2).obj(),
    ];
    objs.extend(vm1_naming("c1"));
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let (reason, message) = t.waiting("t/c1").expect("waits");
        assert_eq!(reason, "RequestMismatch", "{message}");
        assert!(
            message.contains("resourceClaims: [{name: c1, resourceClaimName: c1}]")
                && message.contains("gpus: [{name: c1, claimName: c1, requestName: gpu}]"),
            "{message}"
        );
        assert!(record(&t).is_none() && backing(&t).is_none());
    });
}

#[test]
fn d4_a_resource_claim_of_the_claim_s_name_it_does_not_own_makes_the_set_wait_device_claim_conflict()
 {
    let mut objs = named_world();
    objs.push(typed(
        Kind::ResourceClaim,
        json!({"metadata": {"name": "c1", "namespace": "t"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": VFIO}}]}}}),
    ));
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let (reason, message) = t.waiting("t/c1").expect("waits");
        assert_eq!(reason, "DeviceClaimConflict", "{message}");
        assert!(message.contains("not controller-owned"), "{message}");
        assert!(record(&t).is_none());
        // Its owner deletes it: the set is placed, with a backing claim
        // of its own.
        t.user_delete(Kind::ResourceClaim, Some("t"), "c1");
        t.settle().await;
        assert_eq!(t.phase("t/c1"), ClaimPhase::Attached);
        assert_eq!(allocated(&backing(&t).unwrap()), recorded(&t));
    });
}

#[test]
fn l8_a_released_named_claim_deletes_its_backing_claim_before_its_record_and_finalizer() {
    with_world(Config::default(), named_world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        vm1_stopped(&mut t, "u1").await;
        t.writes();
        t.user_delete(Kind::Claim, Some("t"), "c1");
        t.settle().await;
        assert!(backing(&t).is_none() && record(&t).is_none());
        assert!(t.claim("t/c1").is_none());
        let w = t.writes();
        let at = |s: &str| position_of(&w, s);
        assert!(at("delete ResourceClaim c1 L8") < at("remove_finalizer ResourceClaim c1 L8"));
        assert!(at("remove_finalizer ResourceClaim c1 L8") < at("delete GPUAllocation c1 L8"));
        assert!(at("delete GPUAllocation c1 L8") < at("remove_finalizer GPUClaim c1 L8"));
    });
}

fn reserved(rc: &Value) -> bool {
    rc["status"]["reservedFor"]
        .as_array()
        .is_some_and(|r| !r.is_empty())
}

/// The scheduler's PreBind reserves the backing claim for vm1's launcher
/// pod (the in-memory world has no scheduler).
fn scheduler_reserves(t: &TestCluster, uid: &str) {
    let pod = t
        .sim
        .store
        .get("Pod", "t", &format!("virt-launcher-vm1-{uid}"))
        .unwrap();
    assert!(claims::reserve(&t.sim.store, &backing(t).unwrap(), &pod));
}

/// vm1 stopped, and the resourceclaim controller takes its gone launcher
/// pod out of the backing claim's `reservedFor`.
async fn vm1_stopped_and_unreserved(t: &mut TestCluster, uid: &str) {
    t.user_delete(Kind::Pod, Some("t"), &format!("virt-launcher-vm1-{uid}"));
    t.user_delete(Kind::Vmi, Some("t"), "vm1");
    claims::reconcile(&t.sim.store);
    t.settle().await;
}

/// `kubectl delete gpuclaim c1 --cascade=foreground`: the GPUClaim
/// deleted (its finalizer keeps it) and the garbage collector deleting
/// its dependents at once.
fn foreground_delete(t: &TestCluster) {
    t.user_delete(Kind::Claim, Some("t"), "c1");
    t.user_delete(Kind::ResourceClaim, Some("t"), "c1");
}

/// `kubectl delete gpuclaim c1 --cascade=orphan`: the garbage collector
/// takes the owner reference off the backing claim, and the GPUClaim is
/// deleted.
fn orphaning_delete(t: &TestCluster) {
    let mut rc = backing(t).expect("a backing claim");
    rc["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    t.sim
        .store
        .update("ResourceClaim", rc, Subresource::Main)
        .unwrap();
    t.user_delete(Kind::Claim, Some("t"), "c1");
}

#[test]
fn d4_l8_a_foreground_delete_of_a_running_vm_s_claim_keeps_its_backing_claim_allocated_until_the_vm_stops()
 {
    with_world(Config::default(), named_world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let devices = recorded(&t);
        scheduler_reserves(&t, "u1");
        foreground_delete(&t);
        t.settle().await;
        // The VM runs: our finalizer keeps the backing claim, allocated
        // to its devices and reserved for the launcher pod, and L8 waits.
        let rc = backing(&t).expect("kept by our finalizer");
        assert!(rc["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(allocated(&rc), devices);
        assert!(reserved(&rc), "{rc:#}");
        assert!(record(&t).is_some() && t.claim("t/c1").is_some());
        t.writes();
        vm1_stopped_and_unreserved(&mut t, "u1").await;
        assert!(backing(&t).is_none() && record(&t).is_none());
        assert!(t.claim("t/c1").is_none());
        let w = t.writes();
        let at = |s: &str| position_of(&w, s);
        assert!(at("remove_finalizer ResourceClaim c1 L8") < at("delete GPUAllocation c1 L8"));
        assert!(
            !w.contains(&"delete ResourceClaim c1 L8".to_string()),
            "{w:#?}"
        );
    });
}

#[test]
fn d4_l8_a_backing_claim_orphaned_by_an_orphaning_delete_of_its_gpuclaim_is_still_deleted_on_release()
 {
    with_world(Config::default(), named_world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        vm1_stopped(&mut t, "u1").await;
        orphaning_delete(&t);
        t.settle().await;
        assert!(backing(&t).is_none(), "{:#?}", backing(&t));
        assert!(record(&t).is_none() && t.claim("t/c1").is_none());
        // A GPUClaim of that name made again owns what it is given.
        t.user_create(claim("t", "c1").class("h200").count(2).obj());
        for o in vm1_naming_resource_claim("c1", "u2") {
            t.user_create(o);
        }
        t.settle().await;
        assert_eq!(
            t.phase("t/c1"),
            ClaimPhase::Attached,
            "{:?}",
            t.waiting("t/c1")
        );
        assert_eq!(allocated(&backing(&t).unwrap()), recorded(&t));
    });
}

#[test]
fn d4_a_backing_claim_someone_deleted_while_its_vm_runs_holds_its_devices_until_the_vm_stops() {
    with_world(Config::default(), named_world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let devices = recorded(&t);
        scheduler_reserves(&t, "u1");
        t.user_delete(Kind::ResourceClaim, Some("t"), "c1");
        t.settle().await;
        let rc = backing(&t).expect("kept while the VM runs");
        let uid = rc["metadata"]["uid"].clone();
        assert_eq!(allocated(&rc), devices);
        assert_eq!(t.phase("t/c1"), ClaimPhase::Attached);
        t.writes();
        // Stopped: no pod holds it, our finalizer comes off, it goes, and
        // the claim, which still holds its GPUs, has it made anew.
        vm1_stopped_and_unreserved(&mut t, "u1").await;
        let rc = backing(&t).expect("made anew");
        assert_ne!(rc["metadata"]["uid"], uid);
        assert_eq!(allocated(&rc), devices);
        let w = t.writes();
        assert!(
            w.contains(&"remove_finalizer ResourceClaim c1 D4".to_string()),
            "{w:#?}"
        );
        // Started again: on the same devices.
        for o in vm1_naming_resource_claim("c1", "u2") {
            t.user_create(o);
        }
        t.settle().await;
        assert_eq!(allocated(&backing(&t).expect("made again")), devices);
        assert_eq!(t.phase("t/c1"), ClaimPhase::Attached);
    });
}

#[test]
fn d4_a_backing_claim_someone_deleted_while_its_vm_is_stopped_is_there_when_its_vm_starts() {
    with_world(Config::default(), named_world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let devices = recorded(&t);
        vm1_stopped(&mut t, "u1").await;
        t.user_delete(Kind::ResourceClaim, Some("t"), "c1");
        t.settle().await;
        // No pod holds it: our finalizer came off (D4), it went, and it
        // was made again at once (d4_backing_claim_restore.rs).
        assert!(backing(&t).is_some());
        for o in vm1_naming_resource_claim("c1", "u2") {
            t.user_create(o);
        }
        t.settle().await;
        let rc = backing(&t).expect("made again");
        assert_eq!(allocated(&rc), devices);
        assert_eq!(t.claim("t/c1").unwrap().node_name(), Some("n1"));
    });
}

fn started() -> Sim {
    let sim = Sim::start(Config::default(), &named_world(), None);
    nvidia::publish(&sim.store);
    sim
}

/// D4 and G4 ended: the backing claim, made once, allocated to the
/// record's devices; the pod out of the gate.
fn ended(sim: &Sim) -> Vec<String> {
    let mut v = Vec::new();
    let rc = sim.store.get("ResourceClaim", "t", "c1");
    match (rc, sim.store.get("GPUAllocation", "t", "c1")) {
        (Some(rc), Some(r)) => {
            let want: Vec<String> = r["spec"]["devices"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| d["device"].as_str().unwrap_or_default().to_string())
                .collect();
            if want.len() != 2 || allocated(&rc) != want {
                v.push(format!(
                    "backing claim {:?}, record {want:?}",
                    allocated(&rc)
                ));
            }
        }
        other => v.push(format!("backing claim and record: {other:?}")),
    }
    let creates = sim
        .cluster
        .journal()
        .effective()
        .filter(|e| e.kind == "ResourceClaim" && e.op == "create")
        .count();
    if creates != 1 {
        v.push(format!("the backing claim made {creates} times"));
    }
    let pod = sim.store.get("Pod", "t", "virt-launcher-vm1-u1").unwrap();
    if !pod["spec"]["schedulingGates"].is_null() {
        v.push("the pod is still gated".into());
    }
    v
}

/// A crash between any two of placement's writes (record, backing claim
/// made, allocated, claim status, pod) resumes to the same end.
#[test]
fn d4_a_crash_between_any_two_writes_of_a_named_claim_s_placement_resumes_to_the_same_end() {
    let total = every_cut_resumes(started, ended);
    assert!(
        total >= 5,
        "record, backing claim, allocation, status, pod: {total} writes"
    );
}

/// D4 as written (found from outside: a stopped VM's backing claim
/// allocated to gpu-vfio-2 while its record names gpu-vfio-0, and nothing
/// was written): a Bound claim's backing claim allocated to other devices
/// than its record names is brought back, cleared and allocated anew.
#[test]
fn d4_a_stopped_vm_s_backing_claim_allocated_to_other_devices_is_brought_back_to_its_record() {
    with_world(Config::default(), named_world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let devices = recorded(&t);
        vm1_stopped(&mut t, "u1").await;
        // By hand: cleared, then allocated to gpu-vfio-2 and -3.
        let mut rc = backing(&t).unwrap();
        let mut allocation = rc["status"]["allocation"].clone();
        rc["status"]["allocation"] = Value::Null;
        let rc = t
            .sim
            .store
            .update("ResourceClaim", rc, Subresource::Status)
            .unwrap()
            .object;
        for (i, d) in ["gpu-vfio-2", "gpu-vfio-3"].iter().enumerate() {
            allocation["devices"]["results"][i]["device"] = (*d).into();
        }
        let mut rc = rc;
        rc["status"]["allocation"] = allocation;
        t.sim
            .store
            .update("ResourceClaim", rc, Subresource::Status)
            .unwrap();
        t.writes();
        t.settle().await;
        assert_eq!(allocated(&backing(&t).unwrap()), devices);
        assert_eq!(recorded(&t), devices, "the record stands");
        let writes: Vec<String> = t
            .writes()
            .into_iter()
            .filter(|w| !w.contains("GPUClass"))
            .collect();
        assert_eq!(
            writes,
            [
                "update_status ResourceClaim c1 D4",
                "update_status ResourceClaim c1 D4"
            ],
            "cleared, then allocated to the record's devices"
        );
        t.restart_writes_nothing().await;
    });
}
