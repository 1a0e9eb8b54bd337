//! L2-L7: claims move into and out of Attached as their VMIs come and go.
mod common;
use common::*;
use gpu_claims_actors::api::{CONDITION_LOST, CONDITION_WAITING, ClaimPhase, condition_is_true};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj, WriteError};

// ---- L2: the attached VMI

/// Claim `t/a` Bound on n1, attached to and owned by vm1 of uid u1, and a
/// running vm1 of `uid`.
fn owned_by_u1_and_vm1_of(uid: &str) -> Vec<Obj> {
    holding(
        bound_to("vm1").owned_by("vm1", "u1"),
        [live_vmi("vm1", uid)],
    )
}

#[test]
fn l2_later_vmi_of_same_name_is_not_the_claims() {
    // Owned by vm1 of uid u1; a new vm1 (u2) runs: not the claim's VMI, so L5 detaches.
    let objs = owned_by_u1_and_vm1_of("u2");
    settled(Config::default(), objs, |t| {
        let c = t.claim("t/a").unwrap();
        assert_eq!(c.attached_vmi_name(), None);
        assert_eq!(c.phase(), ClaimPhase::Bound);
        assert!(
            t.writes()
                .contains(&"update_status GPUClaim a L5".to_string())
        );
    });
}

#[test]
fn l2_vmi_with_the_owner_uid_is_the_claims() {
    let objs = owned_by_u1_and_vm1_of("u1");
    assert_eq!(settled_phase(objs, "t/a"), ClaimPhase::Attached);
}

// ---- L3: unattached template claims

#[test]
fn l3_a_template_claim_goes_unless_its_vmi_lives() {
    let template = || claim("t", "vm1-gpu").template_of("vm1", "u1");
    let mut orphan = template();
    orphan.0.metadata.owner_references = None;
    let rows = [
        ("its VMI is gone", vec![template().obj()], true),
        (
            "its VMI is final",
            vec![template().obj(), vm1_in("Failed")],
            true,
        ),
        (
            "its VMI's name has another uid",
            vec![template().obj(), live_vmi("vm1", "u2")],
            true,
        ),
        ("it has no VMI owner", vec![orphan.obj()], true),
        (
            "its VMI lives",
            vec![template().obj(), live_vmi("vm1", "u1")],
            false,
        ),
    ];
    for (case, objs, deleted) in rows {
        settled(Config::default(), world(objs), |t| {
            let w = t.writes();
            let delete = "delete GPUClaim vm1-gpu L3".to_string();
            assert_eq!(w.contains(&delete), deleted, "L3, {case}: {w:?}");
            assert_eq!(
                t.exists(Kind::Claim, Some("t"), "vm1-gpu"),
                !deleted,
                "L3, {case}"
            );
            if !deleted {
                assert!(
                    !w.iter().any(|w| w.contains("GPUClaim")),
                    "L3, {case}: {w:?}"
                );
            }
        });
    }
}

#[test]
fn l3_unattached_claim_that_is_not_a_template_stays() {
    settled(Config::default(), world([claim("t", "a").obj()]), |t| {
        assert!(t.exists(Kind::Claim, Some("t"), "a"));
        assert!(!t.writes().iter().any(|w| w.contains("GPUClaim")));
    });
}

#[test]
fn l3_deleting_template_claim_is_not_deleted_again() {
    // Held by another finalizer, so it stays deleting after ours is released.
    let c = claim("t", "vm1-gpu")
        .template_of("vm1", "u1")
        .deleting()
        .finalizer("example.com/hold");
    settled(Config::default(), world([c.obj()]), |t| {
        let w = t.writes();
        assert!(!w.iter().any(|w| w.starts_with("delete GPUClaim")), "{w:?}");
        assert!(w.contains(&"remove_finalizer GPUClaim vm1-gpu L8".to_string()));
    });
}

// ---- L4: the VMI lives

#[test]
fn l4_bound_claim_of_live_vmi_becomes_attached() {
    let objs = holding(bound_to("vm1"), [live_vmi("vm1", "u1")]);
    settled(Config::default(), objs, |t| {
        assert!(
            t.writes()
                .contains(&"update_status GPUClaim a L4".to_string())
        );
        assert_eq!(t.phase("t/a"), ClaimPhase::Attached);
    });
}

fn lost_world(node: gpu_claims_testbed::fixtures::NodeBuilder) -> Vec<Obj> {
    let mut objs = vec![class("h200", H200).obj(), node.obj(), live_vmi("vm1", "u1")];
    objs.extend(
        claim("t", "a")
            .lost("n1")
            .attached("vm1")
            .with_allocation(H200),
    );
    objs
}

#[test]
fn l4_lost_claim_becomes_attached_when_its_node_is_back_and_loses_its_lost_condition() {
    settled(
        Config::default(),
        lost_world(node("n1").gpus(H200, 8)),
        |t| {
            let c = t.claim("t/a").unwrap();
            assert_eq!(c.phase(), ClaimPhase::Attached);
            // L4: Lost=True is shown only while the phase is Lost.
            assert!(!condition_is_true(c.conditions(), CONDITION_LOST));
            assert!(c.conditions().iter().all(|x| x.type_ != CONDITION_LOST));
        },
    );
}

#[test]
fn l4_lost_claim_stays_lost_while_its_node_is_not_ready() {
    let objs = lost_world(node("n1").gpus(H200, 8).ready(false));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert!(!t.writes().iter().any(|w| w.contains("GPUClaim")));
        // The node comes back: the claim follows.
        t.attached_again_once_n1_is_back().await;
    });
}

#[test]
fn l4_lost_claim_stays_lost_while_its_node_is_gone() {
    let objs: Vec<_> = lost_world(node("n1"))
        .into_iter()
        .filter(|o| o.kind() != Kind::Node)
        .collect();
    settled(Config::default(), objs, |t| {
        assert_eq!(t.phase("t/a"), ClaimPhase::Lost);
    });
}

#[test]
fn l4_lost_claim_stays_lost_while_a_devices_lost_taint_covers_its_resource() {
    assert_eq!(
        settled_phase(lost_world(node("n1").gpus(H200, 8).lost_taint(H200)), "t/a"),
        ClaimPhase::Lost
    );
}

#[test]
fn l4_lost_claim_stays_lost_while_an_empty_devices_lost_taint_covers_all() {
    assert_eq!(
        settled_phase(lost_world(node("n1").gpus(H200, 8).lost_taint("")), "t/a"),
        ClaimPhase::Lost
    );
}

#[test]
fn l4_taint_of_another_resource_does_not_hold_a_lost_claim() {
    assert_eq!(
        settled_phase(
            lost_world(node("n1").gpus(H200, 8).lost_taint("nvidia.com/A100")),
            "t/a"
        ),
        ClaimPhase::Attached
    );
}

#[test]
fn l4_lost_claim_stays_lost_while_allocatable_is_below_recorded() {
    let objs = lost_world(node("n1").gpus(H200, 0));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        // The devices come back.
        t.attached_again_once_n1_is_back().await;
    });
}

#[test]
fn l4_pending_claim_of_live_vmi_is_left_to_placement() {
    let objs = world([claim("t", "a").attached("vm1").obj(), live_vmi("vm1", "u1")]);
    settled(Config::default(), objs, |t| {
        assert_eq!(t.phase("t/a"), ClaimPhase::Pending);
        assert!(!t.writes().iter().any(|w| w.contains("GPUClaim")));
    });
}

#[test]
fn l4_attached_claim_of_live_vmi_gets_no_write() {
    let objs = holding(attached_to("vm1"), [live_vmi("vm1", "u1")]);
    settled(Config::default(), objs, |t| {
        assert!(!t.writes().iter().any(|w| w.contains("GPUClaim")));
    });
}

// ---- L5: detach when the VMI is final, or absent while Attached or VMI-owned

#[test]
fn l5_claim_of_final_vmi_is_detached_to_bound() {
    let objs = holding(attached_to("vm1"), [live_vmi("vm1", "u1")]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        t.writes();
        t.user_update(vm1_in("Succeeded"));
        t.settle().await;
        assert_eq!(t.writes(), ["update_status GPUClaim a L5"]);
        let c = t.claim("t/a").unwrap();
        assert_eq!(
            (c.phase(), c.attached_vmi_name()),
            (ClaimPhase::Bound, None)
        );
    });
}

#[test]
fn l5_l7_an_attached_claim_is_detached_to_bound_once_its_vmi_is_final_and_not_before() {
    let rows = [
        (
            "L5 an Unknown VMI phase is not final",
            "Unknown",
            ClaimPhase::Attached,
        ),
        (
            "L7 detach of an attached claim makes it Bound",
            "Failed",
            ClaimPhase::Bound,
        ),
    ];
    for (case, vmi_phase, want) in rows {
        let objs = holding(attached_to("vm1"), [vm1_in(vmi_phase)]);
        assert_eq!(settled_phase(objs, "t/a"), want, "{case}");
    }
}

#[test]
fn l5_attached_claim_whose_vmi_is_gone_is_detached_at_once() {
    let objs = holding(attached_to("vm1"), []);
    assert_eq!(
        settled_writes(objs),
        [
            "update_status GPUClaim a L5",
            "update_status GPUClass h200 class-status"
        ]
    );
}

#[test]
fn l5_vmi_owned_claim_whose_vmi_is_gone_is_detached_at_once() {
    let objs = holding(bound_to("vm1").owned_by("vm1", "u1"), []);
    settled(Config::default(), objs, |t| {
        assert_eq!(t.claim("t/a").unwrap().attached_vmi_name(), None);
    });
}

#[test]
fn l5_template_claim_of_final_vmi_is_deleted() {
    let objs = holding(
        claim("t", "vm1-gpu")
            .template_of("vm1", "u1")
            .attached_phase("n1")
            .attached("vm1"),
        [vm1_in("Failed")],
    );
    settled(Config::default(), objs, |t| {
        let w = t.writes();
        assert_eq!(
            &w[..3],
            [
                "delete GPUClaim vm1-gpu L5",
                "delete GPUAllocation vm1-gpu L8",
                "remove_finalizer GPUClaim vm1-gpu L8"
            ]
        );
        assert!(!t.exists(Kind::Claim, Some("t"), "vm1-gpu"));
    });
}

// ---- L6: the VMI never appeared

#[test]
fn l6_attachment_to_vmi_that_never_appeared_is_detached_after_grace() {
    attached_to_an_absent_vmi(Config::default(), "vm-x", |mut t| async move {
        t.writes_only_after(secs(120), &["update_status GPUClaim a L6"])
            .await;
        assert_eq!(t.claim("t/a").unwrap().attached_vmi_name(), None);
    });
}

#[test]
fn l6_vmi_appearing_within_grace_keeps_the_attachment() {
    attached_to_an_absent_vmi(Config::default(), "vm1", |mut t| async move {
        t.advance(secs(60)).await;
        t.user_create(live_vmi("vm1", "u1"));
        t.settle().await;
        t.advance(secs(120)).await;
        let c = t.claim("t/a").unwrap();
        assert_eq!(
            (c.phase(), c.attached_vmi_name()),
            (ClaimPhase::Attached, Some("vm1"))
        );
    });
}

#[test]
fn l6_grace_starts_afresh_when_the_attachment_comes_back() {
    // Pending, so the VMI's life changes no phase: only the grace moves.
    let objs = world([claim("t", "a").attached("vm1").obj()]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        t.advance(secs(60)).await;
        t.user_create(live_vmi("vm1", "u1"));
        t.settle().await;
        t.advance(secs(30)).await;
        t.user_delete(Kind::Vmi, Some("t"), "vm1");
        t.settle().await;
        // 120s after the first sight has passed, but not 120s since it came back.
        t.writes_only_after(secs(120), &["update_status GPUClaim a L6"])
            .await;
    });
}

#[test]
fn l6_a_shorter_grace_from_reload_reaches_the_pending_timer() {
    attached_to_an_absent_vmi(Config::default(), "vm-x", |mut t| async move {
        t.advance(secs(30)).await;
        t.reload(|c| c.attachment_grace = secs(60)).await;
        t.writes_only_after(secs(30), &["update_status GPUClaim a L6"])
            .await;
    });
}

#[test]
fn l6_attachments_are_left_alone_with_integration_off() {
    attached_to_an_absent_vmi(off(), "vm-x", |mut t| async move {
        t.advance(secs(600)).await;
        assert_eq!(t.claim("t/a").unwrap().attached_vmi_name(), Some("vm-x"));
    });
}

// ---- L7: detach

#[test]
fn l7_detach_keeps_the_lost_condition_of_a_lost_claim() {
    let mut objs = lost_on_a_failed_node(|c| c.waiting("NoCapacity"));
    objs.push(vm1_in("Succeeded"));
    settled(Config::default(), objs, |t| {
        let c = t.claim("t/a").unwrap();
        assert_eq!((c.phase(), c.attached_vmi_name()), (ClaimPhase::Lost, None));
        assert!(condition_is_true(c.conditions(), CONDITION_LOST));
        assert!(
            condition_is_true(c.conditions(), CONDITION_WAITING),
            "a Lost claim keeps its conditions"
        );
    });
}

#[test]
fn l7_detach_removes_the_waiting_condition() {
    let objs = holding(bound_to("vm1").waiting("NoCapacity"), [vm1_in("Succeeded")]);
    settled(Config::default(), objs, |t| {
        let c = t.claim("t/a").unwrap();
        assert_eq!(
            (c.phase(), c.attached_vmi_name()),
            (ClaimPhase::Bound, None)
        );
        assert!(c.conditions().is_empty());
    });
}

#[test]
fn l5_a_template_claim_delete_that_meets_a_newer_claim_is_decided_again() {
    // The delete carries the version it decided on: a claim changed since
    // (say, deleted by the garbage collector with its VMI) answers 409 and
    // is decided again, never deleted twice.
    let objs = holding(
        claim("t", "vm1-gpu")
            .template_of("vm1", "u1")
            .attached_phase("n1")
            .attached("vm1"),
        [live_vmi("vm1", "u1")],
    );
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        t.writes();
        // The VMI fails; the first write, L5's delete, meets a 409.
        t.fail_writes([Some(WriteError::conflict("newer"))]);
        t.user_update(vm1_in("Failed"));
        t.settle().await;
        let deletes: Vec<_> = t
            .all_entries()
            .into_iter()
            .filter(|e| e.op == "delete" && e.kind == "GPUClaim")
            .collect();
        // The injected 409 never reaches the journal: the one delete there
        // is the second attempt, after the claim was read again.
        assert!(
            t.sim.cluster.faults().fail_writes.is_empty(),
            "the 409 was met"
        );
        assert_eq!(deletes.len(), 1, "{deletes:?}");
        assert!(deletes[0].changed && deletes[0].error.is_none());
        assert_eq!(
            t.writes()[..3],
            [
                "delete GPUClaim vm1-gpu L5",
                "delete GPUAllocation vm1-gpu L8",
                "remove_finalizer GPUClaim vm1-gpu L8"
            ]
        );
        assert!(!t.exists(Kind::Claim, Some("t"), "vm1-gpu"));
    });
}
