//! Allocations: a Bound, Attached or Lost claim without its record is reported
//! (condition and Event) once the record has trailed it for the grace, and
//! is never placed elsewhere. These worlds break I4 on purpose, so they
//! settle without the invariant check.
mod common;
use common::*;
use gpu_claims_actors::api::{CONDITION_ALLOCATION_MISSING, condition_is_true};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::Obj;
use gpu_claims_testbed::fixtures::allocation_of;

fn marked(t: &TestCluster, k: &str) -> bool {
    condition_is_true(
        t.claim(k).unwrap().conditions(),
        CONDITION_ALLOCATION_MISSING,
    )
}

#[test]
fn records_a_bound_claim_without_its_record_is_reported_after_the_grace_and_cleared_when_it_returns()
 {
    let objs = world([claim("t", "a").bound("n1").obj()]);
    with_world(Config::default(), objs, |t| async move {
        t.sim.settle().await;
        t.sim.advance(secs(29)).await;
        assert!(!marked(&t, "t/a"), "within the grace");
        t.sim.advance(secs(1)).await;
        assert!(marked(&t, "t/a"));
        let events = records_events(&t);
        assert_eq!(events.len(), 1);
        assert!(
            events[0].warning
                && events[0].reason == "AllocationMissing"
                && events[0].regarding.name == "a"
        );
        // The record comes back: the mark goes, and a Normal event says so.
        t.user_create(Obj::Allocation(allocation_of(
            &claim("t", "a").bound("n1").build(),
            H200,
        )));
        t.sim.settle().await;
        assert!(!marked(&t, "t/a"));
        assert_eq!(records_events(&t).last().unwrap().reason, "AllocationFound");
    });
}

#[test]
fn records_a_record_that_trails_its_claim_within_the_grace_is_not_reported() {
    let objs = world([claim("t", "a").bound("n1").obj()]);
    with_world(Config::default(), objs, |t| async move {
        t.sim.settle().await;
        t.sim.advance(secs(10)).await;
        t.user_create(Obj::Allocation(allocation_of(
            &claim("t", "a").bound("n1").build(),
            H200,
        )));
        t.sim.advance(secs(60)).await;
        assert!(!marked(&t, "t/a"));
        assert!(records_events(&t).is_empty());
    });
}

#[test]
fn records_pending_and_deleting_claims_are_not_reported() {
    let held = claim("t", "b")
        .bound("n1")
        .deleting()
        .finalizer("example.com/hold");
    let objs = world([
        claim("t", "a").obj(),
        held.attached("vm-running").obj(),
        vmi("t", "vm-running").uid("u").obj(),
    ]);
    with_world(Config::default(), objs, |t| async move {
        t.sim.settle().await;
        t.sim.advance(secs(60)).await;
        assert!(!marked(&t, "t/a"));
        assert!(records_events(&t).is_empty());
    });
}

#[test]
fn records_a_claim_without_its_record_is_never_placed_elsewhere() {
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).obj(),
        node("n2").gpus(H200, 8).obj(),
    ];
    objs.push(claim("t", "a").bound("n2").obj());
    objs.extend(vm1_naming("a"));
    with_world(Config::default(), objs, |t| async move {
        t.sim.settle().await;
        t.sim.advance(secs(30)).await;
        assert_eq!(t.claim("t/a").unwrap().node_name(), Some("n2"));
        assert!(
            t.sim.store.list("GPUAllocation").0.is_empty(),
            "no record made for it elsewhere"
        );
        assert!(marked(&t, "t/a"));
    });
}

/// The Events of the records report (transitions publish their own).
fn records_events(t: &TestCluster) -> Vec<gpu_claims_actors::ports::Event> {
    t.sim
        .cluster
        .events()
        .into_iter()
        .filter(|e| e.rule == gpu_claims_actors::rules::RuleId::Allocations)
        .collect()
}
