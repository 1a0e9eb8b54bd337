//! The placement defects found from outside, each by its rule id, through
//! the actors on the simulated cluster with I1-I5 checked after every step:
//! G3 never chooses a node that lost its devices, L2 keeps an earlier
//! VMI's template claim out of a set, L8 deletes the allocation whatever
//! the cache shows, and the VMI annotations are read as docs/design.md says.
mod common;
use common::*;
use gpu_claims_actors::api::pod::{is_gated, pinned_node};
use gpu_claims_actors::api::{
    CLAIMS_ANNOTATION, CLASS_ANNOTATION, COUNT_ANNOTATION, ClaimPhase, vmi_owner,
};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj, ObjRef};
use gpu_claims_testbed::memory::Lag;
use gpu_claims_testbed::memory::invariants::Checker;
use gpu_claims_testbed::memory::sim::{Sim, run_sim};

fn pod(t: &TestCluster, name: &str) -> k8s_openapi::api::core::v1::Pod {
    match t.sim.cluster.get(&ObjRef::new(Kind::Pod, Some("t"), name)) {
        Some(Obj::Pod(p)) => p,
        _ => panic!("pod {name}"),
    }
}

/// A Lost claim on n1 (its devices gone: the devices-lost taint) whose VM
/// restarts: its new launcher pod waits at the gate. n1 is the tightest
/// fit for it (its own allocation is there), n2 has room.
fn lost_there(pod: impl Fn(PodBuilder) -> PodBuilder) -> Vec<Obj> {
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).lost_taint(H200).obj(),
        node("n2").gpus(H200, 8).obj(),
    ];
    objs.extend(vm1_naming_and("a", pod));
    objs.extend(claim("t", "a").lost("n1").with_allocation(H200));
    objs
}

#[test]
fn g3_a_node_that_lost_its_devices_is_never_chosen_even_for_the_claim_lost_there() {
    // The pod tolerates every taint, so only the lost-set filter keeps n1 out.
    let objs = lost_there(|p| p.tolerates("", "Exists", "", ""));
    settled(Config::default(), objs, |t| {
        let c = t.claim("t/a").unwrap();
        assert_eq!(
            c.node_name(),
            Some("n2"),
            "moved off the node that lost its devices"
        );
        assert_eq!(c.phase(), ClaimPhase::Attached);
        assert_eq!(
            pinned_node(&pod(t, "virt-launcher-vm1")).as_deref(),
            Some("n2")
        );
        let r = t
            .sim
            .cluster
            .get(&ObjRef::new(Kind::Allocation, Some("t"), "a"));
        assert!(
            matches!(r, Some(Obj::Allocation(r)) if r.spec.node_name == "n2"),
            "the allocation moved with it"
        );
    });
}

#[test]
fn l2_a_recreated_vmi_never_runs_on_the_earlier_vmis_template_claim() {
    // vm1 was deleted and made again under the same name: the earlier
    // VMI's template claim (owner uid u1) is still there, Bound on n1.
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).obj(),
        vmi("t", "vm1")
            .uid("u2")
            .phase("Scheduling")
            .annotate(CLASS_ANNOTATION, "h200")
            .annotate(COUNT_ANNOTATION, "2")
            .obj(),
        launcher("t", "virt-launcher-vm1-new", "vm1", "u2")
            .gated()
            .obj(),
    ];
    objs.extend(
        claim("t", "vm1-gpu")
            .count(2)
            .template_of("vm1", "u1")
            .bound("n1")
            .with_allocation(H200),
    );
    settled(Config::default(), objs, |t| {
        let c = t.claim("t/vm1-gpu").expect("this VMI's own template claim");
        assert_eq!(
            vmi_owner(&c.metadata).map(|(_, uid)| uid),
            Some("u2"),
            "the earlier VMI's claim went (L3) and G2 made this one's"
        );
        assert_eq!(c.phase(), ClaimPhase::Attached, "and it was placed");
        let p = pod(t, "virt-launcher-vm1-new");
        assert!(!is_gated(&p));
        assert_eq!(pinned_node(&p).as_deref(), c.node_name());
        let placed = writes_about(t, "update_status GPUClaim vm1-gpu G4");
        assert_eq!(
            placed.len(),
            1,
            "only this VMI's claim was placed: {placed:?}"
        );
    });
}

#[test]
fn l8_deletes_the_allocation_the_cache_does_not_show_before_the_finalizer() {
    // The allocations watch trails by 10 s: when the claim is released,
    // the claim actor's cache has not seen the allocation placement wrote.
    run_sim(|| async move {
        let mut objs = vec![
            class("h200", H200).obj(),
            node("n1").gpus(H200, 8).obj(),
            claim("t", "a").obj(),
        ];
        objs.extend(vm1_naming("a"));
        let sim = Sim::start(
            Config::default(),
            &objs,
            Lag::of(Kind::Allocation, secs(10)),
        );
        let mut checker = Checker::default();
        sim.settle().await;
        assert!(checker.check(&sim.cluster).is_empty());
        assert!(
            sim.store.get("GPUAllocation", "t", "a").is_some(),
            "placed: the allocation exists"
        );
        // The VM ends and the tenant deletes the claim, all before the
        // allocations watch brings the allocation.
        let mut v = sim.store.get("VirtualMachineInstance", "t", "vm1").unwrap();
        v["status"]["phase"] = "Succeeded".into();
        sim.store
            .update(
                "VirtualMachineInstance",
                v,
                gpu_claims_testbed::memory::store::Subresource::Status,
            )
            .unwrap();
        sim.store.delete("Pod", "t", "virt-launcher-vm1").unwrap();
        sim.store.delete("GPUClaim", "t", "a").unwrap();
        sim.settle().await;
        let v = checker.check(&sim.cluster);
        assert!(v.is_empty(), "invariants violated: {v:#?}");
        assert!(sim.store.get("GPUClaim", "t", "a").is_none(), "released");
        assert!(
            sim.store.get("GPUAllocation", "t", "a").is_none(),
            "its allocation went first"
        );
        let order: Vec<(String, String)> = sim
            .cluster
            .journal()
            .effective()
            .filter(|e| e.rule == "L8")
            .map(|e| (e.op.to_string(), e.kind.to_string()))
            .collect();
        assert_eq!(
            order,
            [
                ("delete".to_string(), "GPUAllocation".to_string()),
                ("remove_finalizer".to_string(), "GPUClaim".to_string())
            ],
            "L8: the allocation, then the finalizer"
        );
    });
}

fn asking(claims: &str) -> Vec<Obj> {
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).obj(),
        claim("t", "a").obj(),
        claim("t", "b").obj(),
    ];
    objs.extend(vm1_naming(claims));
    objs
}

#[test]
fn annotations_empty_entries_and_spaces_are_ignored_and_a_name_twice_counts_once() {
    for claims in ["a,", ",a", "a,,b", " a , b ,a,"] {
        let want: Vec<&str> = ["a", "b"]
            .into_iter()
            .filter(|n| claims.contains(n))
            .collect();
        settled(Config::default(), asking(claims), |t| {
            assert!(
                !is_gated(&pod(t, "virt-launcher-vm1")),
                "{claims:?}: placed, not gated forever"
            );
            for n in &want {
                let c = t.claim(&format!("t/{n}")).unwrap();
                assert_eq!(c.phase(), ClaimPhase::Attached, "{claims:?}: {n}");
            }
        });
    }
}

#[test]
fn annotations_an_unusable_request_gets_a_warning_event_on_the_vmi_and_the_pod_stays_gated() {
    let cases = [
        (
            CLAIMS_ANNOTATION,
            "a,Bad_Name",
            "names \"Bad_Name\", which is not a valid claim name",
        ),
        (
            COUNT_ANNOTATION,
            "0",
            "gpu.cozystack.io/count \"0\" is not a positive whole number",
        ),
        (
            COUNT_ANNOTATION,
            "two",
            "\"two\" is not a positive whole number",
        ),
    ];
    for (annotation, value, says) in cases {
        let mut objs = asking("a");
        objs[4] = vmi("t", "vm1")
            .uid("u1")
            .phase("Scheduling")
            .annotate(CLASS_ANNOTATION, "h200")
            .annotate(annotation, value)
            .obj();
        with_world(Config::default(), objs, |mut t| async move {
            t.settle().await;
            assert!(
                is_gated(&pod(&t, "virt-launcher-vm1")),
                "{value}: stays at the gate"
            );
            assert!(t.claim("t/vm1-gpu").is_none(), "{value}: no claim is made");
            let events = t.sim.cluster.events();
            let warnings: Vec<_> = events
                .iter()
                .filter(|e| e.regarding.kind == Kind::Vmi && e.warning)
                .collect();
            assert_eq!(
                warnings.len(),
                1,
                "{value}: one Warning, not one per look: {warnings:?}"
            );
            assert_eq!(warnings[0].reason, "InvalidGPURequest");
            assert!(
                warnings[0].message.contains(says),
                "{value}: {:?} says what is wrong",
                warnings[0].message
            );
            // A restart says it again (a new process), and writes nothing.
            assert_eq!(t.sim.writes_on_restart().await, 0);
        });
    }
}
