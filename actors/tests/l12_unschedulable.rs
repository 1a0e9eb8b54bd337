//! L12: a Lost claim whose VMI's pod is pinned to its node but unscheduled
//! gets that VMI deleted, preconditioned on what the cache showed.
mod common;
use common::*;
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj};

fn stuck(pod: gpu_claims_testbed::fixtures::PodBuilder) -> Vec<Obj> {
    let mut objs = lost_on_a_failed_node(|c| c);
    objs.push(vm1_in("Scheduling"));
    objs.push(pod.obj());
    objs
}

fn pod() -> gpu_claims_testbed::fixtures::PodBuilder {
    launcher("t", "virt-launcher-vm1", "vm1", "u1")
}

#[test]
fn l12_unscheduled_vmi_pinned_to_a_lost_node_is_deleted() {
    let objs = stuck(pod().pinned("n1"));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let e = t
            .all_entries()
            .into_iter()
            .find(|e| e.kind == "VirtualMachineInstance")
            .expect("a VMI delete");
        assert_eq!((e.op, e.rule), ("delete", "L12"));
        assert!(!t.exists(Kind::Vmi, Some("t"), "vm1"));
        // Gone: a Lost claim that no VMI owns keeps the attachment through
        // L6's grace (the seed), then is detached and can move.
        assert_eq!(t.claim("t/a").unwrap().attached_vmi_name(), Some("vm1"));
        t.advance(secs(120)).await;
        assert_eq!(t.claim("t/a").unwrap().attached_vmi_name(), None);
    });
}

#[test]
fn l12_a_scheduled_pod_keeps_its_vmi() {
    settled(
        Config::default(),
        stuck(pod().pinned("n1").scheduled("n1")),
        |t| {
            assert!(t.exists(Kind::Vmi, Some("t"), "vm1"));
        },
    );
}

#[test]
fn l12_a_gated_pod_keeps_its_vmi() {
    settled(Config::default(), stuck(pod().gated()), |t| {
        assert!(t.exists(Kind::Vmi, Some("t"), "vm1"));
    });
}

#[test]
fn l12_a_pod_pinned_elsewhere_keeps_its_vmi() {
    settled(Config::default(), stuck(pod().pinned("n2")), |t| {
        assert!(t.exists(Kind::Vmi, Some("t"), "vm1"));
    });
}

#[test]
fn l12_a_bound_claim_keeps_its_vmi() {
    let mut objs = holding(bound_to("vm1"), [vm1_in("Scheduling")]);
    objs.push(pod().pinned("n1").obj());
    settled(Config::default(), objs, |t| {
        assert!(t.exists(Kind::Vmi, Some("t"), "vm1"));
    });
}

#[test]
fn l12_a_vmi_changed_since_the_cache_saw_it_is_not_deleted() {
    let mut objs = stuck(pod().pinned("n1"));
    objs.retain(|o| o.kind() != Kind::Pod);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        // The cache sees the pinned pod but a stale VMI: the server's VMI is newer.
        let newer = vmi("t", "vm1").uid("u1").phase("Scheduled");
        let stale = t
            .sim
            .cluster
            .get(&gpu_claims_actors::ports::ObjRef::new(
                Kind::Vmi,
                Some("t"),
                "vm1",
            ))
            .unwrap();
        t.user_update(newer.obj());
        t.sim.settle().await;
        t.sim
            .supervisor()
            .do_send(gpu_claims_actors::controller::WorldEvent::Apply(stale));
        t.sim.settle().await;
        t.sim
            .supervisor()
            .do_send(gpu_claims_actors::controller::WorldEvent::Apply(
                pod().pinned("n1").obj(),
            ));
        t.sim.settle().await;
        assert!(
            t.exists(Kind::Vmi, Some("t"), "vm1"),
            "the precondition kept the newer VMI"
        );
        let refused = t
            .all_entries()
            .into_iter()
            .filter(|e| e.kind == "VirtualMachineInstance")
            .count();
        assert_eq!(refused, 1, "a conflict counts as done: no retry loop");
    });
}

#[test]
fn l12_does_not_run_with_integration_off() {
    settled(off(), stuck(pod().pinned("n1")), |t| {
        assert!(t.exists(Kind::Vmi, Some("t"), "vm1"));
    });
}
