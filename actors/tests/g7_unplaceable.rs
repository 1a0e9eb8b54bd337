//! G7: a launcher pod that placement pinned, out of the gate and not
//! scheduled, which the scheduler reports Unschedulable, is remembered
//! from when the controller first saw it so; once `unschedulableGrace`
//! has passed, the VMI gets a Warning Event with the scheduler's message
//! and is deleted on the UID and resourceVersion the cache showed.
mod common;
use common::*;
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj};
use gpu_claims_testbed::fixtures::PodBuilder;

const WHY: &str = "0/1 nodes are available: 1 Insufficient memory.";

/// vm1 placed on n1 (claim a Bound there), its pod shaped by `pod`.
fn placed(pod: impl FnOnce(PodBuilder) -> PodBuilder) -> Vec<Obj> {
    let mut objs = holding(
        bound_to("vm1"),
        [vmi("t", "vm1")
            .uid("u1")
            .phase("Scheduling")
            .annotate(gpu_claims_actors::api::CLAIMS_ANNOTATION, "a")
            .obj()],
    );
    objs.push(pod(vm1_launcher()).obj());
    objs
}

fn stuck(p: PodBuilder) -> PodBuilder {
    p.pinned("n1").unschedulable(WHY)
}

fn vmi_deletes(t: &TestCluster) -> Vec<&'static str> {
    t.all_entries()
        .into_iter()
        .filter(|e| e.kind == "VirtualMachineInstance" && e.op == "delete")
        .map(|e| e.rule)
        .collect()
}

fn g7_events(t: &TestCluster) -> Vec<String> {
    t.sim
        .cluster
        .events()
        .into_iter()
        .filter(|e| e.reason == "PinnedPodUnschedulable")
        .map(|e| e.message)
        .collect()
}

#[test]
fn g7_a_pinned_pod_the_scheduler_cannot_place_has_its_vmi_deleted_after_the_grace() {
    after_settling(Config::default(), placed(stuck), |mut t| async move {
        assert!(vmi_deletes(&t).is_empty(), "not before the grace");
        t.advance(secs(59)).await;
        assert!(t.exists(Kind::Vmi, Some("t"), "vm1"));
        t.advance(secs(2)).await;
        assert_eq!(vmi_deletes(&t), ["G7"]);
        assert!(!t.exists(Kind::Vmi, Some("t"), "vm1"));
        let e = g7_events(&t);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains(WHY), "the scheduler's message: {e:?}");
        assert!(e[0].contains("pinned to n1"), "{e:?}");
        // The named claim keeps its node: G3 then tells why the set waits.
        assert_eq!(t.claim("t/a").unwrap().node_name(), Some("n1"));
    });
}

#[test]
fn g7_follows_the_configured_grace() {
    let config = Config {
        unschedulable_grace: secs(10),
        ..Config::default()
    };
    after_settling(config, placed(stuck), |mut t| async move {
        t.advance(secs(11)).await;
        assert_eq!(vmi_deletes(&t), ["G7"]);
    });
}

#[test]
fn g7_a_pod_that_is_scheduled_meanwhile_is_forgotten() {
    after_settling(Config::default(), placed(stuck), |mut t| async move {
        t.advance(secs(30)).await;
        t.user_update(stuck(vm1_launcher()).scheduled("n1").obj());
        t.advance(secs(120)).await;
        assert!(vmi_deletes(&t).is_empty());
        assert!(t.exists(Kind::Vmi, Some("t"), "vm1"));
    });
}

#[test]
fn g7_the_grace_starts_afresh_when_the_pod_comes_back_to_that_state() {
    after_settling(Config::default(), placed(stuck), |mut t| async move {
        t.advance(secs(40)).await;
        // The scheduler retries and, for now, reports nothing.
        t.user_update(vm1_launcher().pinned("n1").phase("Pending").obj());
        t.advance(secs(10)).await;
        t.user_update(stuck(vm1_launcher()).obj());
        t.advance(secs(40)).await;
        assert!(vmi_deletes(&t).is_empty(), "40 s since it came back");
        t.advance(secs(21)).await;
        assert_eq!(vmi_deletes(&t), ["G7"]);
    });
}

fn no_vmi_deleted_in_five_minutes(objs: Vec<Obj>) {
    after_settling(Config::default(), objs, |mut t| async move {
        t.advance(secs(300)).await;
        assert!(vmi_deletes(&t).is_empty());
    });
}

#[test]
fn g7_never_deletes_a_vmi_whose_pod_is_gated() {
    // A set that waits (its second claim does not exist) keeps its pod gated.
    let mut objs = placed(|p| p.gated().unschedulable(WHY));
    objs.push(
        vmi("t", "vm1")
            .uid("u1")
            .phase("Scheduling")
            .annotate(gpu_claims_actors::api::CLAIMS_ANNOTATION, "a,missing")
            .obj(),
    );
    no_vmi_deleted_in_five_minutes(objs);
}

#[test]
fn g7_never_deletes_a_running_vm_whose_migration_target_cannot_be_placed() {
    let mut objs = placed(|p| p.pinned("n1").scheduled("n1").phase("Running"));
    objs.push(
        launcher("t", "virt-launcher-vm1-target", "vm1", "u1")
            .pinned("n1")
            .unschedulable(WHY)
            .obj(),
    );
    no_vmi_deleted_in_five_minutes(objs);
}

#[test]
fn g7_an_unpinned_pending_pod_is_not_ours_to_judge() {
    let unpinned = |p: PodBuilder| p.unschedulable(WHY);
    no_vmi_deleted_in_five_minutes(placed(unpinned));
}

#[test]
fn g7_a_restarted_controller_starts_the_grace_afresh_and_deletes_once() {
    // A restart forgets when the pod was first seen (as L6's grace): the
    // pod waits longer than I7's bound here, so only I1-I5 are checked.
    after_settling(Config::default(), placed(stuck), |mut t| async move {
        t.sim.advance(secs(40)).await;
        t.sim.restart();
        t.sim.settle().await;
        t.sim.advance(secs(30)).await;
        assert!(
            vmi_deletes(&t).is_empty(),
            "30 s of the new process's grace"
        );
        t.sim.advance(secs(31)).await;
        assert_eq!(vmi_deletes(&t), ["G7"]);
        t.sim.advance(secs(120)).await;
        assert_eq!(vmi_deletes(&t), ["G7"], "once");
    });
}

#[test]
fn g7_a_shorter_grace_reloaded_reaches_a_pod_already_counting() {
    after_settling(Config::default(), placed(stuck), |mut t| async move {
        t.advance(secs(20)).await;
        t.reload(|c| c.unschedulable_grace = secs(10)).await;
        assert_eq!(vmi_deletes(&t), ["G7"], "20 s past a grace of 10 s");
    });
}
