//! E1: a claim held on a node that cannot take its VM moves when the VM
//! comes to the gate: its allocation moves with one write, then its
//! status names the new node, and a Normal Event `Moved` says from where
//! and why. Where no other node can take the set it waits, saying why, and
//! the claim stays. A kill between the allocation's move and the status
//! resumes to the same end. I1-I5 are checked after every step.
mod common;
use common::*;
use gpu_claims_actors::api::pod::{is_gated, pinned_node};
use gpu_claims_actors::api::{ClaimPhase, GPUAllocation};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj, ObjRef};
use gpu_claims_actors::rules::RuleId;

fn launcher(t: &TestCluster) -> k8s_openapi::api::core::v1::Pod {
    match t
        .sim
        .cluster
        .get(&ObjRef::new(Kind::Pod, Some("t"), "virt-launcher-vm1"))
    {
        Some(Obj::Pod(p)) => p,
        _ => panic!("vm1's launcher pod"),
    }
}

fn allocation_node(t: &TestCluster) -> Option<String> {
    let (list, _) = t.sim.store.list("GPUAllocation");
    let r: GPUAllocation = serde_json::from_value(list.first()?.clone()).ok()?;
    Some(r.spec.node_name)
}

/// Class h200; n1 (8 GPUs, shaped by `n1`) holds claim `a` (Bound, named
/// by vm1, which is at the gate); n2 has 8 GPUs.
fn held_on_n1(n1: impl FnOnce(NodeBuilder) -> NodeBuilder) -> Vec<Obj> {
    let mut objs = vec![
        class("h200", H200).obj(),
        n1(node("n1").gpus(H200, 8)).obj(),
        node("n2").gpus(H200, 8).obj(),
    ];
    objs.extend(claim("t", "a").bound("n1").with_allocation(H200));
    objs.extend(vm1_naming("a"));
    objs
}

/// What a case makes of n1.
type Shape = fn(NodeBuilder) -> NodeBuilder;

#[test]
fn e1_a_claim_held_on_a_node_that_cannot_take_its_vm_moves_to_one_that_can() {
    let cases: [(&str, Shape, &str); 3] = [
        ("cordoned", |n| n.cordoned(), "node cordoned"),
        (
            "tainted",
            |n| n.taint("maintenance", "", "NoSchedule"),
            "node with a taint not tolerated",
        ),
        ("not Ready", |n| n.ready(false), "not Ready"),
    ];
    for (case, n1, why) in cases {
        settled(Config::default(), held_on_n1(n1), |t| {
            let c = t.claim("t/a").unwrap();
            assert_eq!(c.node_name(), Some("n2"), "{case}: the claim moved");
            assert!(
                matches!(c.phase(), ClaimPhase::Bound | ClaimPhase::Attached),
                "{case}: {:?}",
                c.phase()
            );
            assert_eq!(allocation_node(t).as_deref(), Some("n2"), "{case}");
            let p = launcher(t);
            assert!(!is_gated(&p), "{case}: the pod left the gate");
            assert_eq!(pinned_node(&p).as_deref(), Some("n2"), "{case}");
            let w = t.writes();
            if case != "not Ready" {
                // One write moves the allocation; none creates another.
                assert!(
                    w.contains(&"update GPUAllocation a E1".to_string()),
                    "{case}: {w:?}"
                );
            }
            assert!(
                !w.iter().any(|w| w.starts_with("create GPUAllocation")),
                "{case}: {w:?}"
            );
            let moved: Vec<_> = t
                .sim
                .cluster
                .events()
                .into_iter()
                .filter(|e| e.reason == "Moved")
                .collect();
            if case != "not Ready" {
                assert_eq!(moved.len(), 1, "{case}: one Moved Event: {moved:?}");
                let e = &moved[0];
                assert!(!e.warning, "{case}: a Normal Event");
                assert_eq!(e.rule, RuleId::E1);
                assert!(
                    e.message.contains("moved from node n1 to n2") && e.message.contains(why),
                    "{case}: {}",
                    e.message
                );
            }
        });
    }
}

#[test]
fn e1_a_claim_whose_node_still_takes_its_vm_stays() {
    settled(Config::default(), held_on_n1(|n| n), |t| {
        assert_eq!(t.claim("t/a").unwrap().node_name(), Some("n1"));
        assert_eq!(allocation_node(t).as_deref(), Some("n1"));
        assert!(t.sim.cluster.events().iter().all(|e| e.reason != "Moved"));
    });
}

#[test]
fn e1_where_no_other_node_takes_the_set_it_waits_saying_why_and_the_claim_stays() {
    let mut objs = held_on_n1(|n| n.cordoned());
    // n2 has no room: another tenant holds all of it.
    objs.extend(
        claim("other", "full")
            .count(8)
            .bound("n2")
            .with_allocation(H200),
    );
    settled(Config::default(), objs, |t| {
        let c = t.claim("t/a").unwrap();
        assert_eq!(c.node_name(), Some("n1"), "the claim stays");
        assert_eq!(allocation_node_of(t, "t", "a").as_deref(), Some("n1"));
        let (reason, message) = t.waiting("t/a").expect("the set waits");
        assert_eq!(reason, "NoCapacity");
        assert!(
            message
                .contains("its claims hold GPUs on n1, where its pods cannot run: node cordoned")
                && message.contains("no other node can take it")
                && message.contains("without room"),
            "{message}"
        );
        assert!(is_gated(&launcher(t)), "the pod stays at the gate");
    });
}

fn allocation_node_of(t: &TestCluster, ns: &str, name: &str) -> Option<String> {
    let o = t.sim.store.get("GPUAllocation", ns, name)?;
    Some(o["spec"]["nodeName"].as_str()?.to_string())
}

#[test]
fn e1_a_claim_attached_to_another_live_vmi_does_not_move() {
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).cordoned().obj(),
        node("n2").gpus(H200, 8).obj(),
        live_vmi("vm0", "u0"),
    ];
    objs.extend(
        claim("t", "a")
            .attached("vm0")
            .bound("n1")
            .with_allocation(H200),
    );
    objs.extend(vm1_naming("a"));
    settled(Config::default(), objs, |t| {
        assert_eq!(t.claim("t/a").unwrap().node_name(), Some("n1"));
        let (reason, _) = t.waiting("t/a").expect("vm1's set waits");
        assert_eq!(reason, "ClaimInUse");
    });
}

/// A process killed after any of E1's writes (the allocation's move, the
/// status, the pod) resumes to the same end: the claim, its allocation
/// and the pod all on n2, one allocation, no write made twice.
#[test]
fn e1_a_move_cut_between_any_two_writes_resumes_to_the_same_end() {
    after_every_cut(
        || held_on_n1(|n| n.cordoned()),
        |cut, sim| {
            let mut v = Vec::new();
            let records = sim.store.list("GPUAllocation").0;
            let nodes: Vec<&str> = records
                .iter()
                .map(|r| r["spec"]["nodeName"].as_str().unwrap_or_default())
                .collect();
            if nodes != ["n2"] {
                v.push(format!("cut {cut}: allocations on {nodes:?}"));
            }
            let claim = sim.store.get("GPUClaim", "t", "a").unwrap();
            if claim["status"]["nodeName"] != "n2" {
                v.push(format!(
                    "cut {cut}: claim on {}",
                    claim["status"]["nodeName"]
                ));
            }
            v
        },
    );
}
