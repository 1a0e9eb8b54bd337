//! D4 away from the gate: a placed named claim whose VM is stopped keeps
//! its GPUs through its backing claim, so one that a user deleted (and no
//! pod held), or that kube-scheduler's PostFilter deallocated, is made or
//! allocated again at once, on the record's devices; never on devices
//! another ResourceClaim took meanwhile (I9), never for a claim being
//! released (L8), never while a VMI at the gate names the claim (its
//! set's placement writes it). I1-I5 and I9 hold after every step.
mod common;
use common::*;
use gpu_claims_actors::api::{AllocatedDevice, ClaimPhase, GPUClaim, Kind, Obj};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::rules::{
    Restore, WrittenAllocations, backing_claim, backing_claim_to_restore,
};
use gpu_claims_actors::world::WorldWriter;
use gpu_claims_testbed::fixtures::ClaimBuilder;
use gpu_claims_testbed::memory::store::Subresource;
use gpu_claims_testbed::standin::nvidia::{self, DRIVER};
use serde_json::{Value, json};

/// c1 placed and vm1 stopped (VMI and launcher pod gone): Bound, its
/// backing claim allocated and held by no pod.
async fn placed_and_stopped(t: &mut TestCluster) -> Vec<String> {
    nvidia::publish(&t.sim.store);
    t.settle().await;
    assert_eq!(
        t.phase("t/c1"),
        ClaimPhase::Attached,
        "{:?}",
        t.waiting("t/c1")
    );
    let devices = recorded(t);
    t.user_delete(Kind::Pod, Some("t"), "virt-launcher-vm1-u1");
    t.user_delete(Kind::Vmi, Some("t"), "vm1");
    t.settle().await;
    assert_eq!(t.phase("t/c1"), ClaimPhase::Bound);
    devices
}

#[test]
fn d4_a_stopped_vm_s_backing_claim_someone_deleted_is_made_again_at_once_on_the_same_devices() {
    with_world(Config::default(), named_world(), |mut t| async move {
        let devices = placed_and_stopped(&mut t).await;
        let before = backing(&t).unwrap()["metadata"]["uid"].clone();
        t.writes();
        t.user_delete(Kind::ResourceClaim, Some("t"), "c1");
        t.settle().await;
        let rc = backing(&t).expect("made again");
        assert_ne!(rc["metadata"]["uid"], before, "a new object");
        assert_eq!(allocated(&rc), devices);
        let w = t.writes();
        for write in [
            "remove_finalizer ResourceClaim c1 D4",
            "create ResourceClaim c1 D4",
            "update_status ResourceClaim c1 D4",
        ] {
            assert!(w.contains(&write.to_string()), "{write}: {w:#?}");
        }
        assert!(w.iter().all(|w| !w.contains("GPUAllocation")), "{w:#?}");
        t.restart_writes_nothing().await;
    });
}

#[test]
fn d4_a_stopped_vm_s_backing_claim_the_scheduler_deallocated_is_allocated_again_to_the_record_s_devices()
 {
    with_world(Config::default(), named_world(), |mut t| async move {
        let devices = placed_and_stopped(&mut t).await;
        // kube-scheduler's PostFilter, for a pod that named the claim and
        // found no node: reservedFor, allocation and devices cleared.
        let mut rc = backing(&t).unwrap();
        rc["status"] = json!({});
        t.sim
            .store
            .update("ResourceClaim", rc, Subresource::Status)
            .unwrap();
        t.writes();
        t.settle().await;
        assert_eq!(allocated(&backing(&t).unwrap()), devices);
        assert_eq!(t.writes(), vec!["update_status ResourceClaim c1 D4"]);
    });
}

#[test]
fn d4_l8_a_released_claim_s_backing_claim_is_not_made_again() {
    with_world(Config::default(), named_world(), |mut t| async move {
        placed_and_stopped(&mut t).await;
        t.user_delete(Kind::Claim, Some("t"), "c1");
        t.settle().await;
        assert!(t.claim("t/c1").is_none());
        assert!(backing(&t).is_none(), "{:#?}", backing(&t));
        let creates = t
            .sim
            .cluster
            .journal()
            .effective()
            .filter(|e| e.kind == "ResourceClaim" && e.op == "create")
            .count();
        assert_eq!(creates, 1, "made once, at placement");
    });
}

/// What the table's backing claim is.
#[derive(Clone, Copy, Debug)]
enum Backing {
    Gone,
    Unallocated,
    Allocated,
    /// Allocated to gpu-vfio-2 and -3, where the record names 0 and 1.
    AllocatedElsewhere,
    /// The same, and a pod holds it.
    AllocatedElsewhereReserved,
    OfAnotherOwner,
    BeingDeleted,
}

/// The world of a restore row: n1's four H200s published, claim `c` of
/// the class `class_name` with its record on n1's gpu-vfio-0 and -1, the
/// backing claim as `b` says, and `foreign`: a ResourceClaim of another
/// namespace allocated to gpu-vfio-1 (taken while ours was gone).
fn restore_world(c: &GPUClaim, class_name: &str, b: Backing, foreign: bool) -> WorldWriter {
    let n1 = node("n1")
        .passthrough_gpus("NVIDIA H200", 4, "141Gi", "0x2335")
        .obj();
    let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "n1-gpus"},
        "spec": {"driver": DRIVER, "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": nvidia::devices(&gpu_claims_actors::api::to_json(&n1)).unwrap()}});
    let mut objs = vec![
        n1,
        typed(Kind::ResourceSlice, slice),
        dra_class("h200", VFIO).obj(),
        class("r", "nvidia.com/r").obj(),
        Obj::Claim(c.clone()),
    ];
    objs.extend(
        nvidia::device_classes()
            .into_iter()
            .map(|d| typed(Kind::DeviceClass, d)),
    );
    let mut record = gpu_claims_testbed::fixtures::allocation_of(c, "");
    record.spec.class_name = class_name.into();
    record.spec.node_name = "n1".into();
    record.spec.device_class_name = Some(VFIO.into());
    record.spec.devices = ["gpu-vfio-0", "gpu-vfio-1"]
        .iter()
        .map(|d| AllocatedDevice {
            driver: DRIVER.into(),
            pool: "n1".into(),
            device: d.to_string(),
        })
        .collect();
    objs.push(Obj::Allocation(record));
    let result = |d: &str| json!({"request": "gpu", "driver": DRIVER, "pool": "n1", "device": d});
    let allocation = json!({"devices": {"results": [result("gpu-vfio-0"), result("gpu-vfio-1")]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
        "allocationTimestamp": "2026-01-01T00:00:00Z"});
    if let Obj::Class(k) = dra_class("h200", VFIO).obj() {
        let mut rc = gpu_claims_actors::api::to_json(&Obj::ResourceClaim(backing_claim(c, &k)));
        rc["metadata"]["uid"] = json!("rc-c");
        match b {
            Backing::Gone => {}
            Backing::Unallocated => objs.push(typed(Kind::ResourceClaim, rc)),
            Backing::Allocated => {
                rc["status"]["allocation"] = allocation.clone();
                objs.push(typed(Kind::ResourceClaim, rc));
            }
            Backing::AllocatedElsewhere | Backing::AllocatedElsewhereReserved => {
                let mut other = allocation.clone();
                other["devices"]["results"] = json!([result("gpu-vfio-2"), result("gpu-vfio-3")]);
                rc["status"]["allocation"] = other;
                if matches!(b, Backing::AllocatedElsewhereReserved) {
                    rc["status"]["reservedFor"] =
                        json!([{"resource": "pods", "name": "virt-launcher-vm", "uid": "p"}]);
                }
                objs.push(typed(Kind::ResourceClaim, rc));
            }
            Backing::OfAnotherOwner => {
                rc["metadata"]["ownerReferences"][0]["uid"] = json!("someone-else");
                rc["metadata"]["annotations"] = json!({});
                objs.push(typed(Kind::ResourceClaim, rc));
            }
            Backing::BeingDeleted => {
                rc["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
                objs.push(typed(Kind::ResourceClaim, rc));
            }
        }
    }
    if foreign {
        objs.push(typed(
            Kind::ResourceClaim,
            json!({"metadata": {"name": "job", "namespace": "other", "uid": "job"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": VFIO, "allocationMode": "ExactCount", "count": 1}}]}},
                "status": {"allocation": {"devices": {"results": [result("gpu-vfio-1")]}}}}),
        ));
    }
    let w = WorldWriter::new(Config::default());
    for o in objs {
        w.load(o);
    }
    w
}

/// D4: every branch of `backing_claim_to_restore`: what it brings back
/// (made, or allocated only) and when it leaves the backing claim alone.
#[test]
fn d4_backing_claim_to_restore_table() {
    #[derive(Debug, PartialEq)]
    enum Want {
        Make,
        Allocate,
        /// The backing claim's allocation cleared, then written anew.
        Reallocate,
        /// The record brought to what a pod holds.
        RecordFollows,
        Nothing,
    }
    let c = || claim("t", "c").class("h200").count(2);
    let bound = || c().bound("n1");
    #[rustfmt::skip]
    let cases: Vec<(&str, ClaimBuilder, &str, Backing, bool, Want)> = vec![
        ("D4: a Bound claim whose backing claim is gone: made again",
            bound(), "h200", Backing::Gone, false, Want::Make),
        ("D4: an Attached claim's, gone: made again",
            c().attached_phase("n1").attached("vm"), "h200", Backing::Gone, false, Want::Make),
        ("D4: unallocated (kube-scheduler's PostFilter): allocated again",
            bound(), "h200", Backing::Unallocated, false, Want::Allocate),
        ("D4: allocated to the record's devices: nothing to bring back",
            bound(), "h200", Backing::Allocated, false, Want::Nothing),
        ("D4: allocated to other devices, no pod holding it: cleared and allocated to the record's",
            bound(), "h200", Backing::AllocatedElsewhere, false, Want::Reallocate),
        ("D4: the same for an Attached claim",
            c().attached_phase("n1").attached("vm"), "h200", Backing::AllocatedElsewhere, false, Want::Reallocate),
        ("D4: the same for a Lost claim",
            c().lost("n1"), "h200", Backing::AllocatedElsewhere, false, Want::Reallocate),
        ("D4: allocated to other devices a pod holds: the record follows the devices in use",
            bound(), "h200", Backing::AllocatedElsewhereReserved, false, Want::RecordFollows),
        ("D4: one of that name the claim does not own: never taken",
            bound(), "h200", Backing::OfAnotherOwner, false, Want::Nothing),
        ("D4: one being deleted: made again once gone",
            bound(), "h200", Backing::BeingDeleted, false, Want::Nothing),
        ("D8: a device of the record another ResourceClaim took: D8's, not taken back",
            bound(), "h200", Backing::Gone, true, Want::Nothing),
        ("L8: a claim being deleted is released, not restored",
            bound().deleting(), "h200", Backing::Gone, false, Want::Nothing),
        ("D6: a Lost claim's backing claim gone: made at its VM's gate, where it moves",
            c().lost("n1"), "h200", Backing::Gone, false, Want::Nothing),
        ("D4: a Pending claim whose gate's writes were cut after its record: made",
            c(), "h200", Backing::Gone, false, Want::Make),
        ("D4: a Bound claim whose status names another node than its record (a move cut midway): the gate's",
            c().bound("n2"), "h200", Backing::Gone, false, Want::Nothing),
        ("a template claim's ResourceClaim is Kubernetes'",
            bound().template_of("vm", "uid-vm"), "h200", Backing::Gone, false, Want::Nothing),
        ("a class of device-plugin GPUs has no backing claims",
            claim("t", "c").class("r").count(2).bound("n1"), "r", Backing::Gone, false, Want::Nothing),
    ];
    for (what, c, class, b, foreign, want) in cases {
        let c = c.build();
        let w = restore_world(&c, class, b, foreign);
        let c = w.claim("t/c").expect("the table's claim");
        let got = match backing_claim_to_restore(&c, &w, &WrittenAllocations::default()) {
            None => Want::Nothing,
            Some(Restore::Claim(d)) => {
                let devices: Vec<String> = d
                    .allocation
                    .devices
                    .iter()
                    .flat_map(|d| d.results.iter().flatten())
                    .map(|r| r.device.clone())
                    .collect();
                assert_eq!(devices, ["gpu-vfio-0", "gpu-vfio-1"], "{what}");
                assert!(
                    !d.keep_allocated,
                    "{what}: brought to the record, whatever it holds"
                );
                let allocated = w
                    .resource_claim("t/c")
                    .and_then(|rc| rc.status.clone())
                    .is_some_and(|s| s.allocation.is_some());
                match (d.create.is_some(), allocated) {
                    (true, _) => Want::Make,
                    (false, false) => Want::Allocate,
                    (false, true) => Want::Reallocate,
                }
            }
            Some(Restore::Record(r)) => {
                let devices: Vec<&str> = r.spec.devices.iter().map(|d| d.device.as_str()).collect();
                assert_eq!(devices, ["gpu-vfio-2", "gpu-vfio-3"], "{what}");
                Want::RecordFollows
            }
        };
        assert_eq!(got, want, "{what}");
    }
}

/// D4: a record of ours the cache does not show yet (a move placement just
/// wrote) holds the restore back: it would go by the old devices.
#[test]
fn d4_no_restore_while_our_own_record_write_is_not_in_the_cache() {
    let c = claim("t", "c").class("h200").count(2).bound("n1").build();
    let w = restore_world(&c, "h200", Backing::Gone, false);
    let c = w.claim("t/c").unwrap();
    let mut written = WrittenAllocations::default();
    let record = w.allocation("t/c").unwrap();
    written.wrote("t/c".into(), record.spec.clone(), u64::MAX - 1);
    assert!(backing_claim_to_restore(&c, &w, &written).is_none());
    assert!(backing_claim_to_restore(&c, &w, &WrittenAllocations::default()).is_some());
}

/// D4: every branch of `orphaned_backing_claim`: a backing claim our
/// finalizer keeps whose GPUClaim is gone is let go; one whose GPUClaim
/// stands, or that a pod still holds while being deleted, is not.
#[test]
fn d4_orphaned_backing_claim_table() {
    use gpu_claims_actors::rules::orphaned_backing_claim;
    let c = claim("t", "c").class("h200").count(2).bound("n1").build();
    let Obj::Class(k) = dra_class("h200", VFIO).obj() else {
        unreachable!("a class")
    };
    let made = || gpu_claims_actors::api::to_json(&Obj::ResourceClaim(backing_claim(&c, &k)));
    let uid = c.metadata.uid.clone().unwrap();
    let reserved = json!([{"resource": "pods", "name": "virt-launcher-vm1-u1", "uid": "p"}]);
    let allocation = json!({"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-vfio-0"}]}});
    #[rustfmt::skip]
    let cases: Vec<(&str, Option<GPUClaim>, Value, Option<String>)> = vec![
        ("its GPUClaim stands: not an orphan",
            Some(c.clone()), made(), None),
        ("its GPUClaim is gone: let go",
            None, made(), Some(uid.clone())),
        ("another GPUClaim of the name stands: the old one's is let go",
            Some({ let mut n = claim("t", "c").class("h200").build(); n.metadata.uid = Some("a-new-one".into()); n }), made(), Some(uid.clone())),
        ("owner reference stripped: the annotation still says whose",
            None, { let mut rc = made(); rc["metadata"]["ownerReferences"] = json!(null); rc },
            Some(uid.clone())),
        ("annotation stripped: the owner reference says whose",
            None, { let mut rc = made(); rc["metadata"]["annotations"] = json!(null); rc },
            Some(uid.clone())),
        ("our finalizer is off already: nothing of ours keeps it",
            None, { let mut rc = made(); rc["metadata"]["finalizers"] = json!(null); rc }, None),
        ("being deleted while a pod holds it: the pod's end brings us back",
            None, { let mut rc = made();
                rc["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
                rc["status"] = json!({"allocation": allocation.clone(), "reservedFor": reserved.clone()});
                rc }, None),
        ("being deleted, held by no pod: let go",
            None, { let mut rc = made();
                rc["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z"); rc },
            Some(uid.clone())),
    ];
    for (what, claim, rc, want) in cases {
        let w = WorldWriter::new(Config::default());
        w.load(dra_class("h200", VFIO).obj());
        if let Some(c) = claim {
            w.load(Obj::Claim(c));
        }
        w.load(typed(Kind::ResourceClaim, rc));
        assert_eq!(orphaned_backing_claim("t/c", &w), want, "{what}");
    }
}

/// An admin takes the GPUClaim's finalizer off by hand and deletes it
/// while its stopped VM's launcher pod still terminates: nothing of the
/// GPUClaim is left to release its backing claim, so placement does (D4):
/// deleted at once, held by our finalizer while the pod holds it, gone
/// once the pod is.
#[test]
fn d4_a_backing_claim_whose_gpuclaim_was_removed_by_hand_is_let_go_once_no_pod_holds_it() {
    with_world(Config::default(), named_world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let pod = t.sim.store.get("Pod", "t", "virt-launcher-vm1-u1").unwrap();
        assert!(gpu_claims_testbed::standin::claims::reserve(
            &t.sim.store,
            &backing(&t).unwrap(),
            &pod
        ));
        t.user_delete(Kind::Vmi, Some("t"), "vm1");
        t.settle().await;
        let mut c = t.sim.store.get("GPUClaim", "t", "c1").unwrap();
        c["metadata"]["finalizers"] = json!([]);
        t.sim
            .store
            .update("GPUClaim", c, Subresource::Main)
            .unwrap();
        t.user_delete(Kind::Claim, Some("t"), "c1");
        t.settle().await;
        let rc = backing(&t).expect("held while the launcher pod holds it");
        assert!(rc["metadata"]["deletionTimestamp"].is_string(), "{rc:#}");
        t.writes();
        t.user_delete(Kind::Pod, Some("t"), "virt-launcher-vm1-u1");
        gpu_claims_testbed::standin::claims::reconcile(&t.sim.store);
        t.settle().await;
        assert!(backing(&t).is_none(), "{:#?}", backing(&t));
        let w = t.writes();
        assert!(
            w.contains(&"remove_finalizer ResourceClaim c1 D4".to_string()),
            "{w:#?}"
        );
    });
}
