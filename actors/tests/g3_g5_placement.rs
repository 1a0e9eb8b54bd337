//! G3-G5: a VMI whose launcher pods all wait at the gate gets its claim set
//! placed (best fit, records first, then statuses, then the pod), or waits
//! with a reason, and is looked at again when what it waits on changes.
mod common;
use common::*;
use gpu_claims_actors::api::pod::{is_gated, pinned_node};
use gpu_claims_actors::api::{CLAIMS_ANNOTATION, CLASS_ANNOTATION, COUNT_ANNOTATION, ClaimPhase};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj, ObjRef};

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

/// Class h200, nodes `specs`, `claims`, and vm1 at the gate (`vm1`).
fn gate(specs: &[(&str, u64)], claims: Vec<Obj>, vm1: Vec<Obj>) -> Vec<Obj> {
    let mut objs = nodes(specs);
    objs.extend(claims);
    objs.extend(vm1);
    objs
}

#[test]
fn g5_a_set_that_cannot_be_placed_waits_with_the_reason_and_its_pod_at_the_gate() {
    let mut held = claim("t", "b").deleting().finalizer("example.com/hold");
    held.0.status = None;
    let rows = [
        (
            "G5 a missing claim makes the set wait",
            gate(
                &[("n1", 8)],
                vec![claim("t", "a").obj()],
                vm1_naming("a,nope"),
            ),
            "ClaimMissing",
        ),
        (
            "G5 a deleting claim makes the set wait",
            gate(
                &[("n1", 8)],
                vec![claim("t", "a").obj(), held.attached("vm1").obj()],
                vm1_naming("a,b"),
            ),
            "ClaimDeleting",
        ),
        (
            "G5 a missing class makes the set wait",
            gate(
                &[("n1", 8)],
                vec![claim("t", "a").class("nope").obj()],
                vm1_naming("a"),
            ),
            "ClassMissing",
        ),
        (
            "G5 a claim in use by another live VMI makes the set wait",
            gate(
                &[("n1", 8)],
                [
                    attached_to("vm0").with_allocation(H200),
                    vec![live_vmi("vm0", "u0")],
                ]
                .concat(),
                vm1_naming("a"),
            ),
            "ClaimInUse",
        ),
        (
            "G5 claims on two nodes make the set wait",
            gate(
                &[("n1", 8), ("n2", 8)],
                [
                    claim("t", "a").bound("n1").with_allocation(H200),
                    claim("t", "b").bound("n2").with_allocation(H200),
                ]
                .concat(),
                vm1_naming("a,b"),
            ),
            "SplitNodes",
        ),
        (
            // G3: a pinned pod leaves only its node; n9 does not exist, so no
            // candidate is left (NoCapacity, saying the pod's selector removed n1).
            "G5 a pod pinned to a node that cannot take the set waits for capacity",
            gate(
                &[("n1", 8)],
                vec![claim("t", "a").obj()],
                vm1_naming_and("a", |p| p.pinned("n9")),
            ),
            "NoCapacity",
        ),
        (
            // E1: held on n1, which the pod's pin rules out, and n2 full.
            "G5 a pod pinned elsewhere than the held node, with no room there, waits for capacity",
            gate(
                &[("n1", 8), ("n2", 0)],
                claim("t", "a").bound("n1").with_allocation(H200),
                vm1_naming_and("a", |p| p.pinned("n2")),
            ),
            "NoCapacity",
        ),
    ];
    for (case, objs, reason) in rows {
        with_world(Config::default(), objs, |mut t| async move {
            t.settle().await;
            let c = t.claim("t/a").unwrap();
            assert_eq!(waiting_reason(&c).as_deref(), Some(reason), "{case}");
            assert!(
                is_gated(&pod(&t, "virt-launcher-vm1")),
                "{case}: the pod stays at the gate"
            );
            assert!(
                !t.exists(
                    Kind::Allocation,
                    Some("t"),
                    c.metadata.name.as_deref().unwrap()
                ) || c.phase() != ClaimPhase::Pending,
                "{case}"
            );
            // Settled: a restart writes nothing more.
            let again = t.writes_on_restart().await;
            assert_eq!(again, Vec::<String>::new(), "{case}: I5");
        });
    }
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
    // The other claim goes: its record is freed, and the set is placed.
    waits_until(objs, "NoCapacity", |t| {
        t.user_delete(Kind::Claim, Some("o"), "other")
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
    waits_until(objs, "OverBudget", |t| {
        let mut c = t.class("h200").unwrap();
        c.spec.budget = Some(2);
        t.user_update(Obj::Class(c));
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
    let objs = failed_n1_and_vm1_at_the_gate(claim("t", "a").lost("n1"));
    settled(Config::default(), objs, |t| {
        let c = attached_on_n2(t);
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
    after_every_cut(world, |cut, sim| {
        let mut v = Vec::new();
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
        v
    });
}

#[test]
fn g3_a_bound_claim_on_a_failed_node_holds_no_node_and_moves() {
    // Before G6 has said Lost: the set must not be pinned to the failed node.
    let objs = failed_n1_and_vm1_at_the_gate(claim("t", "a").bound("n1"));
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

/// The Waiting condition's message of the claim `k`.
fn waiting_message(t: &TestCluster, k: &str) -> String {
    let c = t.claim(k).unwrap();
    let w = c
        .conditions()
        .iter()
        .find(|c| c.type_ == "Waiting")
        .cloned();
    w.map(|c| c.message).unwrap_or_default()
}

/// Issue 61, item 5: a set no node has room for is said so from the
/// index of free GPUs, "never" (more than the largest node has, which it
/// names) told apart from "not now". A change of nodes that gives none of
/// them room writes nothing; a larger node joining tells "never" again
/// (and places it); a pod outside gpu-claims that goes frees the room the
/// other set waits for, and it is placed.
#[test]
fn g3_a_set_no_node_has_room_for_is_told_never_or_not_now_and_placed_when_room_frees() {
    let mut objs = nodes(&[("n1", 4), ("n2", 4)]);
    objs.extend(claim("o", "a").count(4).bound("n1").with_allocation(H200));
    objs.push(
        common::pod("ml", "cuda-job")
            .scheduled("n2")
            .requests(&[(H200, "3")])
            .phase("Running")
            .obj(),
    );
    objs.extend(template("big", "u1", "8"));
    objs.extend(template("vm2", "u2", "2"));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert_eq!(
            waiting_message(&t, "t/big-gpu"),
            "no node can ever hold the set as the nodes are: it needs 8 nvidia.com/GH100_H200 on one node, and the largest node has 4; ask for fewer, or add a node with 8"
        );
        assert_eq!(
            waiting_message(&t, "t/vm2-gpu"),
            "no node has 2 nvidia.com/GH100_H200 free: the set is placed when a node frees them"
        );
        // A node of one GPU joins: no node has room for either, and the
        // largest is the same. Nothing is written of the claims (the
        // class's capacity grows).
        t.writes();
        t.user_create(node("n3").gpus(H200, 1).obj());
        t.settle().await;
        assert_eq!(writes_about(&mut t, "GPUClaim"), [] as [String; 0]);
        // A node of 8 joins: big is placed there.
        t.user_create(node("n4").gpus(H200, 8).obj());
        t.settle().await;
        assert_eq!(t.claim("t/big-gpu").unwrap().node_name(), Some("n4"));
        assert!(t.claim("t/vm2-gpu").unwrap().node_name().is_none());
        // The job on n2 ends: its pod's going (a change of n2's use alone)
        // frees 3 there, which vm2 needs 2 of.
        t.user_delete(Kind::Pod, Some("ml"), "cuda-job");
        t.settle().await;
        assert_eq!(t.claim("t/vm2-gpu").unwrap().node_name(), Some("n2"));
        t.restart_writes_nothing().await;
    });
}
