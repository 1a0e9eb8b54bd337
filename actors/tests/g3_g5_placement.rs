//! G3-G5: a VMI whose launcher pods all wait at the gate gets its claim set
//! placed (best fit, records first, then statuses, then the pod), or waits
//! with a reason, and is looked at again when what it waits on changes.
mod common;
use common::*;
use gpu_claims_actors::api::pod::{is_gated, pinned_node};
use gpu_claims_actors::api::{CLAIMS_ANNOTATION, CLASS_ANNOTATION, COUNT_ANNOTATION, ClaimPhase};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj, ObjRef};
use gpu_claims_testbed::memory::invariants::Checker;
use gpu_claims_testbed::memory::sim::{Sim, run_sim};

fn template(name: &str, uid: &str, count: &str) -> Vec<Obj> {
    gated_vmi(
        name,
        uid,
        &[(CLASS_ANNOTATION, "h200"), (COUNT_ANNOTATION, count)],
    )
}

fn pod(t: &TestCluster, name: &str) -> k8s_openapi::api::core::v1::Pod {
    match t.sim.cluster.get(&ObjRef::new(Kind::Pod, Some("t"), name)) {
        Some(Obj::Pod(p)) => p,
        _ => panic!("pod {name}"),
    }
}

fn nodes(specs: &[(&str, u64)]) -> Vec<Obj> {
    let mut v = vec![class("h200", H200).obj()];
    v.extend(specs.iter().map(|(n, g)| node(n).gpus(H200, *g).obj()));
    v
}

#[test]
fn g3_a_gated_vmi_gets_its_set_placed_on_the_best_fit() {
    // n1 has 8 free, n2 has 2 free: a set of 2 fits n2 with none left over.
    let mut objs = nodes(&[("n1", 8), ("n2", 4)]);
    objs.extend(
        claim("o", "other")
            .count(2)
            .bound("n2")
            .with_allocation(H200),
    );
    objs.extend(template("vm1", "u1", "2"));
    settled(Config::default(), objs, |t| {
        let c = t.claim("t/vm1-gpu").unwrap();
        assert_eq!(c.node_name(), Some("n2"));
        assert_eq!(c.attached_vmi_name(), Some("vm1"));
        assert_eq!(
            c.phase(),
            ClaimPhase::Attached,
            "Bound by G4, then Attached by L4 while the VMI lives"
        );
        let p = pod(t, "virt-launcher-vm1");
        assert!(!is_gated(&p));
        assert_eq!(pinned_node(&p).as_deref(), Some("n2"));
        let w = writes_about(t, "vm1");
        assert_eq!(
            w,
            [
                "create GPUClaim vm1-gpu G2",
                "create GPUAllocation vm1-gpu G4",
                "update_status GPUClaim vm1-gpu G4",
                "update_pod Pod virt-launcher-vm1 G4",
                "update_status GPUClaim vm1-gpu L4",
            ]
        );
    });
}

#[test]
fn g3_ties_go_to_the_first_node_by_name() {
    let mut objs = nodes(&[("n2", 8), ("n1", 8)]);
    objs.extend(template("vm1", "u1", "1"));
    settled(Config::default(), objs, |t| {
        assert_eq!(t.claim("t/vm1-gpu").unwrap().node_name(), Some("n1"));
    });
}

#[test]
fn g3_claims_already_bound_decide_the_node() {
    let mut objs = nodes(&[("n1", 8), ("n2", 8)]);
    objs.extend(claim("t", "a").bound("n2").with_allocation(H200));
    objs.push(claim("t", "b").obj());
    objs.extend(vm1_naming("a,b"));
    settled(Config::default(), objs, |t| {
        assert_eq!(t.claim("t/a").unwrap().node_name(), Some("n2"));
        assert_eq!(t.claim("t/b").unwrap().node_name(), Some("n2"));
        assert_eq!(
            pinned_node(&pod(t, "virt-launcher-vm1")).as_deref(),
            Some("n2")
        );
    });
}

#[test]
fn g3_nodes_not_ready_or_not_serving_the_class_are_passed_over() {
    let mut objs = vec![class("h200", H200).selector("pool", "gpu").obj()];
    objs.push(
        node("n1")
            .gpus(H200, 8)
            .label("pool", "gpu")
            .ready(false)
            .obj(),
    );
    objs.push(node("n2").gpus(H200, 8).obj());
    objs.push(node("n3").gpus(H200, 8).label("pool", "gpu").obj());
    objs.extend(template("vm1", "u1", "1"));
    settled(Config::default(), objs, |t| {
        assert_eq!(t.claim("t/vm1-gpu").unwrap().node_name(), Some("n3"));
    });
}

#[test]
fn g3_a_vmi_with_a_pod_past_the_gate_is_not_placed_again() {
    let mut objs = nodes(&[("n1", 8)]);
    objs.push(claim("t", "a").obj());
    objs.push(
        vmi("t", "vm1")
            .uid("u1")
            .annotate(CLAIMS_ANNOTATION, "a")
            .obj(),
    );
    objs.push(launcher("t", "virt-launcher-vm1", "vm1", "u1").obj());
    settled(Config::default(), objs, |t| {
        assert_eq!(t.phase("t/a"), ClaimPhase::Pending);
    });
}

fn waits_with(objs: Vec<Obj>, claim_key: &str, reason: &str) {
    let (claim_key, reason) = (claim_key.to_string(), reason.to_string());
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let c = t.claim(&claim_key).unwrap();
        assert_eq!(waiting_reason(&c).as_deref(), Some(reason.as_str()));
        assert!(
            is_gated(&pod(&t, "virt-launcher-vm1")),
            "the pod stays at the gate"
        );
        assert!(
            !t.exists(
                Kind::Allocation,
                Some("t"),
                c.metadata.name.as_deref().unwrap()
            ) || c.phase() != ClaimPhase::Pending
        );
        // Settled: a restart writes nothing more.
        t.restart_writes_nothing().await;
    });
}

#[test]
fn g5_a_missing_claim_makes_the_set_wait() {
    let mut objs = nodes(&[("n1", 8)]);
    objs.push(claim("t", "a").obj());
    objs.extend(vm1_naming("a,nope"));
    waits_with(objs, "t/a", "ClaimMissing");
}

#[test]
fn g5_a_deleting_claim_makes_the_set_wait() {
    let mut objs = nodes(&[("n1", 8)]);
    objs.push(claim("t", "a").obj());
    let mut held = claim("t", "b").deleting().finalizer("example.com/hold");
    held.0.status = None;
    objs.push(held.attached("vm1").obj());
    objs.extend(vm1_naming("a,b"));
    waits_with(objs, "t/a", "ClaimDeleting");
}

#[test]
fn g5_the_deleting_claim_itself_is_not_marked_waiting() {
    // A set of one claim, deleted while its launcher waits at the gate:
    // L8 releases it, and G5 writes nothing to it on the way.
    let mut objs = nodes(&[("n1", 8)]);
    let held = claim("t", "b").deleting().finalizer("example.com/hold");
    objs.push(held.obj());
    objs.extend(vm1_naming("b"));
    settled(Config::default(), objs, |t| {
        let c = t.claim("t/b").unwrap();
        assert_eq!(waiting_reason(&c), None);
        assert!(is_gated(&pod(t, "virt-launcher-vm1")));
    });
}

#[test]
fn g5_a_missing_class_makes_the_set_wait() {
    let mut objs = nodes(&[("n1", 8)]);
    objs.push(claim("t", "a").class("nope").obj());
    objs.extend(vm1_naming("a"));
    waits_with(objs, "t/a", "ClassMissing");
}

#[test]
fn g5_a_claim_in_use_by_another_live_vmi_makes_the_set_wait() {
    let mut objs = nodes(&[("n1", 8)]);
    objs.extend(attached_to("vm0").with_allocation(H200));
    objs.push(live_vmi("vm0", "u0"));
    objs.extend(vm1_naming("a"));
    waits_with(objs, "t/a", "ClaimInUse");
}

#[test]
fn g5_claims_on_two_nodes_make_the_set_wait() {
    let mut objs = nodes(&[("n1", 8), ("n2", 8)]);
    objs.extend(claim("t", "a").bound("n1").with_allocation(H200));
    objs.extend(claim("t", "b").bound("n2").with_allocation(H200));
    objs.extend(vm1_naming("a,b"));
    waits_with(objs, "t/a", "SplitNodes");
}

#[test]
fn g5_a_pod_pinned_to_a_node_that_cannot_take_the_set_waits_for_capacity() {
    // G3: a pinned pod leaves only its node; n9 does not exist, so no
    // candidate is left (NoCapacity, saying the pod's selector removed n1).
    let mut objs = nodes(&[("n1", 8)]);
    objs.push(claim("t", "a").obj());
    objs.extend(vm1_naming_and("a", |p| p.pinned("n9")));
    waits_with(objs, "t/a", "NoCapacity");
}

#[test]
fn g4_a_pod_pinned_elsewhere_than_the_held_node_makes_the_set_wait() {
    let mut objs = nodes(&[("n1", 8), ("n2", 8)]);
    objs.extend(claim("t", "a").bound("n1").with_allocation(H200));
    objs.extend(vm1_naming_and("a", |p| p.pinned("n2")));
    waits_with(objs, "t/a", "PinnedElsewhere");
}

#[test]
fn g5_no_room_makes_the_set_wait_until_gpus_are_freed() {
    let mut objs = nodes(&[("n1", 2)]);
    objs.extend(
        claim("o", "other")
            .count(2)
            .bound("n1")
            .with_allocation(H200),
    );
    objs.push(claim("t", "a").obj());
    objs.extend(vm1_naming("a"));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert_eq!(
            waiting_reason(&t.claim("t/a").unwrap()).as_deref(),
            Some("NoCapacity")
        );
        // The other claim goes: its record is freed, and the set is placed.
        t.user_delete(Kind::Claim, Some("o"), "other");
        t.settle().await;
        let c = t.claim("t/a").unwrap();
        assert_eq!((c.node_name(), waiting_reason(&c)), (Some("n1"), None));
    });
}

#[test]
fn g5_over_budget_makes_the_set_wait_until_the_budget_is_raised() {
    let mut objs = vec![
        class("h200", H200).budget(1).obj(),
        node("n1").gpus(H200, 8).obj(),
    ];
    objs.extend(claim("o", "other").bound("n1").with_allocation(H200));
    objs.push(claim("t", "a").obj());
    objs.extend(vm1_naming("a"));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert_eq!(
            waiting_reason(&t.claim("t/a").unwrap()).as_deref(),
            Some("OverBudget")
        );
        let mut c = t.class("h200").unwrap();
        c.spec.budget = Some(2);
        t.user_update(Obj::Class(c));
        t.settle().await;
        assert_eq!(t.claim("t/a").unwrap().node_name(), Some("n1"));
    });
}

#[test]
fn g5_a_missing_claim_created_later_lets_the_set_be_placed() {
    let mut objs = nodes(&[("n1", 8)]);
    objs.extend(vm1_naming("a"));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        t.user_create(claim("t", "a").obj());
        t.settle().await;
        assert_eq!(t.claim("t/a").unwrap().node_name(), Some("n1"));
    });
}

#[test]
fn g6_a_lost_unattached_claim_moves_at_the_gate_with_its_record() {
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).ready(false).obj(),
        node("n2").gpus(H200, 8).obj(),
    ];
    objs.extend(claim("t", "a").lost("n1").with_allocation(H200));
    objs.extend(vm1_naming("a"));
    settled(Config::default(), objs, |t| {
        let c = t.claim("t/a").unwrap();
        assert_eq!(
            (c.phase(), c.node_name()),
            (ClaimPhase::Attached, Some("n2"))
        );
        assert!(c.conditions().is_empty(), "no longer Lost, not waiting");
        let w = t.writes();
        assert!(
            w.contains(&"update GPUAllocation a G4".to_string()),
            "the record moved: {w:?}"
        );
        assert_eq!(t.sim.store.list("GPUAllocation").0.len(), 1);
    });
}

#[test]
fn two_vmis_racing_for_the_last_gpus_never_double_book() {
    let mut objs = nodes(&[("n1", 2)]);
    objs.extend(template("vm1", "u1", "2"));
    objs.extend(template("vm2", "u2", "2"));
    with_lagging_world(secs(2), objs, |mut t| async move {
        t.advance(secs(10)).await;
        let placed = ["t/vm1-gpu", "t/vm2-gpu"]
            .iter()
            .filter(|k| t.claim(k).is_some_and(|c| c.node_name().is_some()))
            .count();
        assert_eq!(placed, 1, "one set fits");
        assert_eq!(t.sim.store.list("GPUAllocation").0.len(), 1);
    });
}

#[test]
fn a_placement_cut_between_any_two_writes_resumes_without_a_second_record() {
    let world = || {
        let mut objs = nodes(&[("n1", 4), ("n2", 4)]);
        objs.push(claim("t", "a").obj());
        objs.push(claim("t", "b").count(2).obj());
        objs.extend(vm1_naming("a,b"));
        objs
    };
    let total = run_sim(|| async {
        let sim = Sim::start(Config::default(), &world(), None);
        sim.settle().await;
        sim.cluster.journal().effective().count()
    });
    for cut in 0..total as i64 {
        let v = run_sim(|| async {
            let mut sim = Sim::start(Config::default(), &world(), None);
            let mut checker = Checker::default();
            sim.die_after(cut);
            sim.settle().await;
            let mut v = checker.check(&sim.cluster);
            sim.restart();
            sim.settle().await;
            v.extend(checker.check(&sim.cluster));
            let records = sim.store.list("GPUAllocation").0;
            if records.len() != 2 {
                v.push(format!("cut {cut}: {} records", records.len()));
            }
            let nodes: std::collections::BTreeSet<_> = records
                .iter()
                .map(|r| r["spec"]["nodeName"].as_str().unwrap().to_string())
                .collect();
            if nodes.len() != 1 {
                v.push(format!("cut {cut}: the set is split over {nodes:?}"));
            }
            let writes = sim.cluster.journal().effective().count();
            // Never more: no write is made twice (a restart may skip an
            // intermediate class status).
            if writes > total {
                v.push(format!(
                    "cut {cut}: {writes} writes, {total} without the cut"
                ));
            }
            v
        });
        assert!(v.is_empty(), "{v:#?}");
    }
}

#[test]
fn g3_a_bound_claim_on_a_failed_node_holds_no_node_and_moves() {
    // Before G6 has said Lost: the set must not be pinned to the failed node.
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).ready(false).obj(),
        node("n2").gpus(H200, 8).obj(),
    ];
    objs.extend(claim("t", "a").bound("n1").with_allocation(H200));
    objs.extend(vm1_naming("a"));
    settled(Config::default(), objs, |t| {
        assert_eq!(
            pinned_node(&pod(t, "virt-launcher-vm1")).as_deref(),
            Some("n2")
        );
        assert_eq!(t.claim("t/a").unwrap().node_name(), Some("n2"));
        assert!(
            t.exists(Kind::Vmi, Some("t"), "vm1"),
            "L12 had nothing to undo"
        );
    });
}

#[test]
fn g4_writes_every_record_then_every_status_then_the_pods() {
    let mut objs = nodes(&[("n1", 8)]);
    objs.push(claim("t", "a").obj());
    objs.push(claim("t", "b").count(2).obj());
    objs.extend(vm1_naming("a,b"));
    objs.push(
        launcher("t", "virt-launcher-vm1-migration", "vm1", "u1")
            .gated()
            .obj(),
    );
    settled(Config::default(), objs, |t| {
        let g4: Vec<String> = t
            .writes()
            .into_iter()
            .filter(|w| w.ends_with(" G4"))
            .collect();
        let kinds: Vec<&str> = g4.iter().map(|w| w.split(' ').nth(1).unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "GPUAllocation",
                "GPUAllocation",
                "GPUClaim",
                "GPUClaim",
                "Pod",
                "Pod"
            ],
            "{g4:?}"
        );
        for p in ["virt-launcher-vm1", "virt-launcher-vm1-migration"] {
            assert_eq!(
                pinned_node(&pod(t, p)).as_deref(),
                Some("n1"),
                "both launcher pods pinned ({p})"
            );
        }
    });
}
