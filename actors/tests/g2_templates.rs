//! G2: while a VMI lives and asks for a class, its template claim exists,
//! created once. And records whose claim is gone are deleted.
mod common;
use common::*;
use gpu_claims_actors::api::{CLASS_ANNOTATION, COUNT_ANNOTATION, vmi_owner};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj};
use gpu_claims_testbed::fixtures::allocation_of;

fn asking(name: &str, uid: &str) -> gpu_claims_testbed::fixtures::VmiBuilder {
    vmi("t", name)
        .uid(uid)
        .annotate(CLASS_ANNOTATION, "h200")
        .annotate(COUNT_ANNOTATION, "2")
}

fn creates(t: &TestCluster) -> usize {
    t.all_entries()
        .iter()
        .filter(|e| e.op == "create" && e.kind == "GPUClaim")
        .count()
}

#[test]
fn g2_a_live_vmi_asking_for_a_class_gets_its_template_claim() {
    settled(
        Config::default(),
        world([asking("vm1", "u1").phase("Pending").obj()]),
        |t| {
            let c = t.claim("t/vm1-gpu").expect("the template claim");
            assert!(c.is_template());
            assert_eq!((c.spec.class_name.as_str(), c.spec.count), ("h200", 2));
            assert_eq!(vmi_owner(&c.metadata), Some(("vm1", "u1")));
            let w = t.writes();
            assert!(
                w.contains(&"create GPUClaim vm1-gpu G2".to_string()),
                "{w:?}"
            );
            assert!(
                !w.iter().any(|w| w.contains("add_finalizer GPUClaim")),
                "created with its finalizer: {w:?}"
            );
        },
    );
}

#[test]
fn g2_a_final_vmi_gets_no_template_claim() {
    settled(
        Config::default(),
        world([asking("vm1", "u1").phase("Succeeded").obj()]),
        |t| {
            assert!(t.claim("t/vm1-gpu").is_none());
        },
    );
}

#[test]
fn g2_a_vmi_asking_for_no_class_gets_no_template_claim() {
    settled(Config::default(), world([live_vmi("vm1", "u1")]), |t| {
        assert!(t.claim("t/vm1-gpu").is_none());
    });
}

#[test]
fn g2_an_unreadable_request_creates_nothing_and_the_rest_goes_on() {
    let bad = vmi("t", "vm1")
        .uid("u1")
        .annotate(CLASS_ANNOTATION, "h200")
        .annotate(COUNT_ANNOTATION, "two");
    settled(
        Config::default(),
        world([bad.obj(), asking("vm2", "u2").obj()]),
        |t| {
            assert!(t.claim("t/vm1-gpu").is_none());
            assert!(t.claim("t/vm2-gpu").is_some());
        },
    );
}

#[test]
fn g2_never_creates_a_duplicate_with_a_lagging_watch() {
    let objs = world([asking("vm1", "u1").phase("Pending").obj()]);
    with_lagging_world(secs(3), objs, |mut t| async move {
        t.sim.settle().await;
        // The VMI moves on while the watch has not shown the claim.
        t.user_update(asking("vm1", "u1").phase("Scheduling").obj());
        t.advance(secs(10)).await;
        assert_eq!(creates(&t), 1);
        assert!(
            t.all_entries().iter().all(|e| e.error.is_none()),
            "no create met AlreadyExists"
        );
    });
}

#[test]
fn g2_a_restart_creates_no_second_claim() {
    let objs = world([asking("vm1", "u1").obj()]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        t.sim.restart();
        t.settle().await;
        assert_eq!(creates(&t), 1);
    });
}

#[test]
fn g2_the_leftover_of_an_earlier_vmi_is_replaced_once_gone() {
    let old = claim("t", "vm1-gpu").template_of("vm1", "u-old").count(2);
    settled(
        Config::default(),
        world([old.obj(), asking("vm1", "u-new").obj()]),
        |t| {
            let w = t.writes();
            let del = w
                .iter()
                .position(|w| w == "delete GPUClaim vm1-gpu L3")
                .expect("L3 deletes the leftover");
            let new = w
                .iter()
                .position(|w| w == "create GPUClaim vm1-gpu G2")
                .expect("G2 creates the new one");
            assert!(del < new, "{w:?}");
            let c = t.claim("t/vm1-gpu").unwrap();
            assert_eq!(vmi_owner(&c.metadata), Some(("vm1", "u-new")));
        },
    );
}

#[test]
fn g2_a_template_claim_deleted_while_its_vmi_lives_is_made_again() {
    let objs = world([asking("vm1", "u1").obj()]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        t.user_delete(Kind::Claim, Some("t"), "vm1-gpu");
        t.settle().await;
        assert!(
            t.claim("t/vm1-gpu")
                .is_some_and(|c| c.metadata.deletion_timestamp.is_none())
        );
        assert_eq!(creates(&t), 2);
    });
}

#[test]
fn allocations_whose_claim_is_gone_or_another_are_deleted() {
    let gone = allocation_of(&claim("t", "gone").bound("n1").build(), H200);
    let mut other = allocation_of(&claim("t", "a").bound("n1").build(), H200);
    other.spec.claim_uid = "uid-of-an-earlier-a".into();
    other.metadata.uid = Some("rec-other".into());
    let objs = world([
        Obj::Allocation(gone),
        Obj::Allocation(other),
        claim("t", "a").obj(),
    ]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let w = t.writes();
        assert!(
            w.contains(&"delete GPUAllocation gone allocations".to_string()),
            "{w:?}"
        );
        assert!(
            w.contains(&"delete GPUAllocation a allocations".to_string()),
            "{w:?}"
        );
        t.sim.restart();
        t.settle().await;
        assert_eq!(t.writes(), Vec::<String>::new());
    });
}

#[test]
fn records_of_their_claims_stay() {
    settled(
        Config::default(),
        world(claim("t", "a").bound("n1").with_allocation(H200)),
        |t| {
            assert!(t.exists(Kind::Allocation, Some("t"), "a"));
        },
    );
}
