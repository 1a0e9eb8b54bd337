//! G6: a Bound or Attached claim whose node is deleted, not Ready, or whose
//! lost set covers its resource becomes Lost, with the reason; its record
//! stays. An unattached Lost claim becomes Bound again when its node is back.
mod common;
use common::*;
use gpu_claims_actors::api::{CONDITION_LOST, ClaimPhase, GPUClaim};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj};

fn lost_reason(c: &GPUClaim) -> Option<String> {
    c.conditions()
        .iter()
        .find(|c| c.type_ == CONDITION_LOST && c.status == "True")
        .map(|c| c.reason.clone())
}

fn bound_on(n: gpu_claims_testbed::fixtures::NodeBuilder) -> Vec<Obj> {
    let mut objs = vec![class("h200", H200).obj(), n.obj()];
    objs.extend(claim("t", "a").bound("n1").with_allocation(H200));
    objs
}

/// A change to n1 that makes a claim Bound there Lost, and the reason.
type Failure = (&'static str, fn(&TestCluster), &'static str);

/// G6 through the actors, once per way a node fails: claim `t/a` Bound on
/// n1 (8 GPUs, Ready) becomes Lost with the reason, in one status write
/// that G6 decided; its record stays. (`rules_tables.rs` has every branch
/// of the decision itself.)
#[test]
fn g6_a_claim_on_a_failed_node_becomes_lost_with_the_reason_and_keeps_its_record() {
    let failures: [Failure; 5] = [
        (
            "not Ready",
            |t| t.user_update(node("n1").gpus(H200, 8).ready(false).obj()),
            "NodeNotReady",
        ),
        (
            "deleted",
            |t| t.user_delete(Kind::Node, None, "n1"),
            "NodeDeleted",
        ),
        (
            "its resource's GPUs lost (taint)",
            |t| t.user_update(node("n1").gpus(H200, 8).lost_taint(H200).obj()),
            "DevicesLost",
        ),
        (
            "every GPU lost (taint, empty value)",
            |t| t.user_update(node("n1").gpus(H200, 8).lost_taint("").obj()),
            "DevicesLost",
        ),
        (
            "allocatable below the records",
            |t| t.user_update(node("n1").gpus(H200, 0).obj()),
            "DevicesLost",
        ),
    ];
    for (how, fail, reason) in failures {
        let objs = bound_on(node("n1").gpus(H200, 8));
        with_world(Config::default(), objs, move |mut t| async move {
            t.settle().await;
            assert_eq!(t.phase("t/a"), ClaimPhase::Bound, "{how}");
            let before = t.all_entries().len();
            fail(&t);
            t.settle().await;
            let c = t.claim("t/a").unwrap();
            assert_eq!(c.phase(), ClaimPhase::Lost, "{how}");
            assert_eq!(lost_reason(&c).as_deref(), Some(reason), "{how}");
            assert!(
                t.exists(Kind::Allocation, Some("t"), "a"),
                "{how}: the record stays"
            );
            let writes: Vec<_> = t.all_entries()[before..]
                .iter()
                .filter(|e| e.changed && e.error.is_none() && e.kind == "GPUClaim")
                .map(|e| (e.op, e.name.clone(), e.rule))
                .collect();
            assert_eq!(writes, [("update_status", "a".to_string(), "G6")], "{how}");
        });
    }
}

#[test]
fn g6_attached_claim_becomes_lost_and_comes_back_attached_through_l4() {
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).obj(),
        live_vmi("vm1", "u1"),
    ];
    objs.extend(attached_to("vm1").with_allocation(H200));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        t.user_update(node("n1").gpus(H200, 8).ready(false).obj());
        t.settle().await;
        t.attached_again_once_n1_is_back().await;
    });
}

#[test]
fn g6_unattached_lost_claim_is_bound_again_when_its_node_is_back() {
    let objs = bound_on(node("n1").gpus(H200, 8).ready(false));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        t.user_update(node("n1").gpus(H200, 8).obj());
        t.settle().await;
        let c = t.claim("t/a").unwrap();
        assert_eq!(c.phase(), ClaimPhase::Bound);
        assert_eq!(lost_reason(&c), None, "no longer lost");
    });
}

#[test]
fn g6_lost_claim_stays_lost_while_its_node_is_still_not_back() {
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).lost_taint("").obj(),
    ];
    objs.extend(claim("t", "a").lost("n1").with_allocation(H200));
    settled(Config::default(), objs, |t| {
        assert_eq!(t.phase("t/a"), ClaimPhase::Lost);
        assert!(!t.writes().iter().any(|w| w.contains("GPUClaim")));
    });
}

#[test]
fn g6_pending_claims_are_never_lost() {
    let objs = vec![class("h200", H200).obj(), claim("t", "a").obj()];
    settled(Config::default(), objs, |t| {
        assert_eq!(t.phase("t/a"), ClaimPhase::Pending);
    });
}

#[test]
fn g6_does_not_run_with_integration_off() {
    settled(
        off(),
        bound_on(node("n1").gpus(H200, 8).ready(false)),
        |t| {
            assert_eq!(t.phase("t/a"), ClaimPhase::Bound);
        },
    );
}
