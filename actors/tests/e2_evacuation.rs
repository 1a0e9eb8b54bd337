//! E2: a node tainted `gpu.cozystack.io/evacuate` takes no new placement,
//! and its GPU VMs restart elsewhere, one at a time by default: the VMI of
//! each VM holding GPUs there is deleted (preconditions on its uid and
//! resourceVersion), its VM's next VMI comes to the gate and moves (E1).
//! No further VM is stopped while a restarted one waits at the gate, nor
//! before its new VMI runs or the timeout passes; a VM whose set could be
//! placed nowhere else at once is not stopped (counted blocked, said on
//! the node and the VMI) until room frees; a VMI without a
//! VirtualMachine owner is never deleted (Warning Events on it and on the
//! node). The test plays KubeVirt's VM controller: a deleted VMI of a VM
//! comes back with a new uid. I1-I5 and I10 are checked after every step.
mod common;
use common::*;
use gpu_claims_actors::api::pod::{is_gated, pinned_node};
use gpu_claims_actors::api::{EVACUATE_TAINT, RESTART_MARK_PREFIX, RestartMark};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj, ObjRef};
use gpu_claims_actors::rules::RuleId;

/// Class h200; n1 (8 GPUs) tainted for evacuation, n2 and n3 (`room` GPUs
/// each); VMs `vms` running on n1, each VMI owned by its VirtualMachine
/// (or, for a name starting with "bare", by none) and attached to its
/// named claim `<vm>-c` of one GPU.
fn evacuating_n1(vms: &[&str], room: u64) -> Vec<Obj> {
    let mut objs = vec![class("h200", H200).obj(), node("n2").gpus(H200, room).obj()];
    objs.extend(evacuating("n1", vms));
    objs
}

/// `name` (8 GPUs) tainted for evacuation, with VMs `vms` running on it as
/// `evacuating_n1` has them.
fn evacuating(name: &str, vms: &[&str]) -> Vec<Obj> {
    let mut objs = vec![
        node(name)
            .gpus(H200, 8)
            .taint(EVACUATE_TAINT, "", "NoSchedule")
            .obj(),
    ];
    for vm in vms {
        let claim_name = format!("{vm}-c");
        let uid = format!("u-{vm}");
        let mut v = vmi("t", vm).uid(&uid).annotate(CLAIMS, &claim_name);
        if !vm.starts_with("bare") {
            v = v.of_vm(vm);
            objs.push(virtual_machine("t", vm, "Always"));
        }
        objs.push(v.obj());
        objs.push(
            launcher("t", &format!("virt-launcher-{vm}"), vm, &uid)
                .pinned(name)
                .scheduled(name)
                .obj(),
        );
        objs.extend(
            claim("t", &claim_name)
                .attached_phase(name)
                .attached(vm)
                .with_allocation(H200),
        );
    }
    objs
}

const CLAIMS: &str = gpu_claims_actors::api::CLAIMS_ANNOTATION;

fn vmi_uid(t: &TestCluster, vm: &str) -> Option<String> {
    match t.sim.cluster.get(&ObjRef::new(Kind::Vmi, Some("t"), vm)) {
        Some(Obj::Vmi(v)) => v.metadata.uid,
        _ => None,
    }
}

/// KubeVirt's VM controller: the VM's VMI was deleted, its launcher pod
/// goes with it, and a new VMI (uid `<uid>`) starts with its pod at the gate.
fn vm_starts_again(t: &TestCluster, vm: &str, uid: &str) {
    t.user_delete(Kind::Pod, Some("t"), &format!("virt-launcher-{vm}"));
    for o in at_the_gate("t", vm, uid, &[(CLAIMS, &format!("{vm}-c"))], |p| p) {
        let o = match o {
            Obj::Vmi(v) => {
                let mut b = VmiBuilder(v).of_vm(vm);
                b.0.metadata.uid = Some(uid.into());
                b.obj()
            }
            o => o,
        };
        t.user_create(o);
    }
}

/// The new VMI runs: its pod scheduled where it was pinned.
fn vm_runs(t: &TestCluster, vm: &str) {
    let pod = ObjRef::new(Kind::Pod, Some("t"), &format!("virt-launcher-{vm}"));
    let Some(Obj::Pod(mut p)) = t.sim.cluster.get(&pod) else {
        panic!("{vm}'s pod")
    };
    let node = pinned_node(&p).expect("pinned");
    assert!(!is_gated(&p));
    p.spec.as_mut().unwrap().node_name = Some(node);
    t.user_update(Obj::Pod(p));
    let Some(Obj::Vmi(mut v)) = t.sim.cluster.get(&ObjRef::new(Kind::Vmi, Some("t"), vm)) else {
        panic!("{vm}'s VMI")
    };
    v.status.get_or_insert_default().phase = Some("Running".into());
    t.user_update(Obj::Vmi(v));
}

fn node_events(t: &TestCluster, reason: &str) -> Vec<String> {
    t.sim
        .cluster
        .events()
        .into_iter()
        .filter(|e| e.regarding.kind == Kind::Node && e.reason == reason && e.rule == RuleId::E2)
        .map(|e| e.message)
        .collect()
}

/// How many Events with `reason` went to VMIs.
fn vmi_events(t: &TestCluster, reason: &str) -> usize {
    t.sim
        .cluster
        .events()
        .into_iter()
        .filter(|e| e.regarding.kind == Kind::Vmi && e.reason == reason)
        .count()
}

#[test]
fn e2_an_evacuated_nodes_vms_restart_elsewhere_one_at_a_time() {
    with_world(
        Config::default(),
        evacuating_n1(&["vm1", "vm2"], 8),
        |mut t| async move {
            t.settle().await;
            // One restart under way: vm1's VMI deleted, vm2's kept.
            assert_eq!(vmi_uid(&t, "vm1"), None, "vm1's VMI was deleted");
            assert_eq!(
                vmi_uid(&t, "vm2").as_deref(),
                Some("u-vm2"),
                "vm2 waits its turn"
            );
            let steps = node_events(&t, "EvacuationStep");
            assert!(
                steps
                    .iter()
                    .any(|m| m.contains("restarting VM t/vm1") && m.contains("1 of at most 1")),
                "{steps:?}"
            );
            // vm1 comes back at the gate; its claim moves to n2 (E1).
            vm_starts_again(&t, "vm1", "u-vm1-b");
            t.settle().await;
            assert_eq!(t.claim("t/vm1-c").unwrap().node_name(), Some("n2"));
            assert_eq!(
                vmi_uid(&t, "vm2").as_deref(),
                Some("u-vm2"),
                "no further VM stops before vm1's new VMI runs"
            );
            vm_runs(&t, "vm1");
            t.settle().await;
            assert_eq!(vmi_uid(&t, "vm2"), None, "then vm2 restarts");
            vm_starts_again(&t, "vm2", "u-vm2-b");
            t.settle().await;
            vm_runs(&t, "vm2");
            t.settle().await;
            for c in ["t/vm1-c", "t/vm2-c"] {
                assert_eq!(t.claim(c).unwrap().node_name(), Some("n2"), "{c}");
            }
            let steps = node_events(&t, "EvacuationStep");
            assert!(
                steps.iter().any(|m| m.contains("VM t/vm2 runs again")),
                "{steps:?}"
            );
            t.restart_writes_nothing().await;
        },
    );
}

#[test]
fn e2_a_vmi_without_a_vm_owner_is_kept_and_named() {
    with_world(
        Config::default(),
        evacuating_n1(&["bare1"], 8),
        |mut t| async move {
            t.settle().await;
            assert_eq!(vmi_uid(&t, "bare1").as_deref(), Some("u-bare1"), "kept");
            let blocked = node_events(&t, "EvacuationBlocked");
            assert_eq!(blocked.len(), 1, "{blocked:?}");
            assert!(
                blocked[0].contains("t/bare1") && blocked[0].contains("no VirtualMachine owner")
            );
            let on_vmi = t
                .sim
                .cluster
                .events()
                .into_iter()
                .filter(|e| e.regarding.kind == Kind::Vmi && e.warning && e.rule == RuleId::E2)
                .count();
            assert_eq!(on_vmi, 1, "a Warning Event on the VMI too");
            // Said once: a later look does not repeat it.
            t.advance(secs(60)).await;
            assert_eq!(node_events(&t, "EvacuationBlocked").len(), 1);
        },
    );
}

/// A job outside gpu-claims on `node`, holding `gpus` of its GPUs.
fn job_on(node: &str, gpus: &str) -> Obj {
    pod("jobs", &format!("job-{node}"))
        .scheduled(node)
        .requests(&[(H200, gpus)])
        .phase("Running")
        .obj()
}

#[test]
fn e2_no_further_vm_stops_while_a_restarted_one_waits_at_the_gate() {
    // n2 has room for one when vm1 stops; a job outside gpu-claims takes
    // it before vm1's new VMI comes: vm1's new set waits NoCapacity, and
    // even past the timeout vm2 is not stopped.
    with_world(
        Config::default(),
        evacuating_n1(&["vm1", "vm2"], 1),
        |mut t| async move {
            t.settle().await;
            assert_eq!(vmi_uid(&t, "vm1"), None);
            t.user_create(job_on("n2", "1"));
            t.settle().await;
            vm_starts_again(&t, "vm1", "u-vm1-b");
            t.settle().await;
            let (reason, _) = t.waiting("t/vm1-c").expect("vm1's set waits");
            assert_eq!(reason, "NoCapacity");
            t.advance(secs(11 * 60)).await;
            assert_eq!(
                vmi_uid(&t, "vm2").as_deref(),
                Some("u-vm2"),
                "vm2 keeps running"
            );
            let blocked = node_events(&t, "EvacuationBlocked");
            assert!(
                blocked
                    .iter()
                    .any(|m| m.contains("VM t/vm1") && m.contains("NoCapacity")),
                "{blocked:?}"
            );
        },
    );
}

#[test]
fn e2_a_vm_with_nowhere_to_go_keeps_running_counted_blocked_until_room_frees() {
    // n2's one GPU is held by a job outside gpu-claims: vm1's set could go
    // nowhere, so vm1 is not stopped (stopped, it would only wait); the
    // node and the VMI say why. The job ends: vm1 is stopped and moves.
    let mut objs = evacuating_n1(&["vm1"], 1);
    objs.push(job_on("n2", "1"));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert_eq!(vmi_uid(&t, "vm1").as_deref(), Some("u-vm1"), "not stopped");
        let blocked = node_events(&t, "EvacuationBlocked");
        assert_eq!(blocked.len(), 1, "said once: {blocked:?}");
        assert!(
            blocked[0].contains("VMI t/vm1")
                && blocked[0].contains("is not stopped")
                && blocked[0].contains("NoCapacity"),
            "{}",
            blocked[0]
        );
        let on_vmi = vmi_events(&t, "EvacuationBlocked");
        assert_eq!(on_vmi, 1, "an Event on the VMI too");
        // Looked at again, and still nowhere: not said again.
        t.advance(secs(60)).await;
        assert_eq!(node_events(&t, "EvacuationBlocked").len(), 1);
        // The job ends: room on n2, and vm1 is stopped to move there.
        t.user_delete(Kind::Pod, Some("jobs"), "job-n2");
        t.settle().await;
        assert_eq!(vmi_uid(&t, "vm1"), None, "stopped once it can go to n2");
        vm_starts_again(&t, "vm1", "u-vm1-b");
        t.settle().await;
        assert_eq!(t.claim("t/vm1-c").unwrap().node_name(), Some("n2"));
    });
}

#[test]
fn e2_a_vm_with_nowhere_to_go_does_not_keep_one_that_could_go_from_stopping() {
    // vm1 needs 2 GPUs, vm2 one; n2 has room for one: vm1 keeps running,
    // vm2 is stopped and moves.
    let mut objs = evacuating_n1(&["vm2"], 1);
    let uid = "u-vm1";
    objs.push(virtual_machine("t", "vm1", "Always"));
    objs.push(
        vmi("t", "vm1")
            .uid(uid)
            .annotate(CLAIMS, "vm1-c")
            .of_vm("vm1")
            .obj(),
    );
    objs.push(
        launcher("t", "virt-launcher-vm1", "vm1", uid)
            .pinned("n1")
            .scheduled("n1")
            .obj(),
    );
    objs.extend(
        claim("t", "vm1-c")
            .count(2)
            .attached_phase("n1")
            .attached("vm1")
            .with_allocation(H200),
    );
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert_eq!(
            vmi_uid(&t, "vm1").as_deref(),
            Some(uid),
            "vm1 keeps running"
        );
        assert_eq!(vmi_uid(&t, "vm2"), None, "vm2 is stopped: it can go to n2");
        let blocked = node_events(&t, "EvacuationBlocked");
        assert!(
            blocked
                .iter()
                .any(|m| m.contains("VMI t/vm1") && m.contains("is not stopped")),
            "{blocked:?}"
        );
    });
}

#[test]
fn e2_a_restart_that_never_runs_stops_counting_after_the_timeout() {
    // vm1's VM does not come back (halted): after evacuation.timeout the
    // next VM restarts.
    let mut config = Config::default();
    config.evacuation.timeout = secs(120);
    with_world(
        config,
        evacuating_n1(&["vm1", "vm2"], 8),
        |mut t| async move {
            t.settle().await;
            assert_eq!(vmi_uid(&t, "vm1"), None);
            t.advance(secs(60)).await;
            assert_eq!(
                vmi_uid(&t, "vm2").as_deref(),
                Some("u-vm2"),
                "within the timeout"
            );
            t.advance(secs(90)).await;
            assert_eq!(vmi_uid(&t, "vm2"), None, "past the timeout vm2 restarts");
        },
    );
}

#[test]
fn e2_max_concurrent_restarts_run_at_once() {
    let mut config = Config::default();
    config.evacuation.max_concurrent = 2;
    with_world(
        config,
        evacuating_n1(&["vm1", "vm2", "vm3"], 8),
        |mut t| async move {
            t.settle().await;
            let deleted = ["vm1", "vm2", "vm3"]
                .iter()
                .filter(|v| vmi_uid(&t, v).is_none())
                .count();
            assert_eq!(deleted, 2, "two restarts under way, the third waits");
        },
    );
}

#[test]
fn e2_a_reloaded_max_concurrent_starts_the_next_restart_with_no_other_change() {
    with_world(
        Config::default(),
        evacuating_n1(&["vm1", "vm2", "vm3"], 8),
        |mut t| async move {
            t.settle().await;
            let deleted = |t: &TestCluster| {
                ["vm1", "vm2", "vm3"]
                    .iter()
                    .filter(|v| vmi_uid(t, v).is_none())
                    .count()
            };
            assert_eq!(
                deleted(&t),
                1,
                "one restart under way, as the config allows"
            );
            // No VM comes back, no node changes: only the config.
            t.reload(|c| c.evacuation.max_concurrent = 2).await;
            t.settle().await;
            assert_eq!(
                deleted(&t),
                2,
                "the raised limit starts the next restart at once"
            );
            let steps = node_events(&t, "EvacuationStep");
            assert!(
                steps.iter().any(|m| m.contains("2 of at most 2")),
                "{steps:?}"
            );
        },
    );
}

#[test]
fn e2_an_evacuating_node_takes_no_new_set_whatever_the_pods_tolerate() {
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1")
            .gpus(H200, 8)
            .taint(EVACUATE_TAINT, "", "PreferNoSchedule")
            .obj(),
        node("n2").gpus(H200, 8).obj(),
    ];
    objs.extend(at_the_gate(
        "t",
        "vm1",
        "u1",
        &[
            (gpu_claims_actors::api::CLASS_ANNOTATION, "h200"),
            (gpu_claims_actors::api::COUNT_ANNOTATION, "7"),
        ],
        |p| p.tolerates(EVACUATE_TAINT, "Exists", "", ""),
    ));
    settled(Config::default(), objs, |t| {
        // n2 (8) would be the looser fit than... both have 8: by name n1,
        // were it not evacuating.
        assert_eq!(t.claim("t/vm1-gpu").unwrap().node_name(), Some("n2"));
    });
}

/// The restarts under way outlive the controller: each is marked on the
/// node (`evacuation.gpu.cozystack.io/<uid of the VMI deleted>`) before its
/// VMI is deleted, so a controller killed after any write, and started
/// again, counts the one under way and stops no second VM (I10), and one
/// killed between the mark and the delete makes the delete it decided.
#[test]
fn e2_a_restart_under_way_is_counted_by_the_controller_that_comes_after() {
    let world = || evacuating_n1(&["vm1", "vm2", "vm3"], 8);
    after_every_cut(world, |cut, sim| {
        let live = |vm: &str| match sim.cluster.get(&ObjRef::new(Kind::Vmi, Some("t"), vm)) {
            Some(Obj::Vmi(v)) => v.metadata.deletion_timestamp.is_none(),
            _ => false,
        };
        let mut v = Vec::new();
        if live("vm1") || !live("vm2") || !live("vm3") {
            v.push(format!(
                "cut {cut}: vm1's VMI deleted and no other: vm1 {}, vm2 {}, vm3 {}",
                live("vm1"),
                live("vm2"),
                live("vm3")
            ));
        }
        let marks = match sim.cluster.get(&ObjRef::new(Kind::Node, None, "n1")) {
            Some(Obj::Node(n)) => n
                .metadata
                .annotations
                .unwrap_or_default()
                .into_iter()
                .filter(|(k, _)| k.starts_with(RESTART_MARK_PREFIX))
                .collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        if marks.len() != 1 || marks[0].0 != RestartMark::annotation("u-vm1") {
            v.push(format!(
                "cut {cut}: n1 keeps vm1's restart, alone: {marks:?}"
            ));
        }
        v
    });
}

/// Once the VM's new VMI runs, its mark goes; a mark no one can read (an
/// edited value) counts for nothing and goes too, said on the node.
#[test]
fn e2_a_restart_mark_goes_when_its_vm_runs_again_and_an_unreadable_one_goes_at_once() {
    let mut objs = evacuating_n1(&["vm1"], 8);
    if let Some(Obj::Node(n)) = objs.iter_mut().find(|o| o.obj_ref().name == "n1") {
        n.metadata
            .annotations
            .get_or_insert_default()
            .insert(RestartMark::annotation("u-gone"), "not json".into());
    }
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let marks = |t: &TestCluster| match t.sim.cluster.get(&ObjRef::new(Kind::Node, None, "n1"))
        {
            Some(Obj::Node(n)) => n
                .metadata
                .annotations
                .unwrap_or_default()
                .into_keys()
                .filter(|k| k.starts_with(RESTART_MARK_PREFIX))
                .collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        assert_eq!(marks(&t), vec![RestartMark::annotation("u-vm1")]);
        let steps = node_events(&t, "EvacuationStep");
        assert!(
            steps.iter().any(|m| m.contains("cannot be read")),
            "{steps:?}"
        );
        vm_starts_again(&t, "vm1", "u-vm1-b");
        t.settle().await;
        vm_runs(&t, "vm1");
        t.settle().await;
        assert!(marks(&t).is_empty(), "{:?}", marks(&t));
        let steps = node_events(&t, "EvacuationStep");
        assert!(
            steps
                .iter()
                .any(|m| m.contains("VM t/vm1 runs again elsewhere")),
            "{steps:?}"
        );
    });
}

/// `drain --max-concurrent N` values the taint N: at most N of the node's
/// own VMs restart at once, within `evacuation.maxConcurrent` (3 here); a
/// value that is no count of at least one limits nothing of the node's.
#[test]
fn e2_a_taint_valued_n_restarts_at_most_n_of_its_nodes_vms_at_once() {
    for (value, want) in [("1", 1), ("2", 2), ("5", 3), ("0", 3), ("many", 3)] {
        let mut config = Config::default();
        config.evacuation.max_concurrent = 3;
        let mut objs = evacuating_n1(&["vm1", "vm2", "vm3", "vm4"], 8);
        for o in &mut objs {
            if let Obj::Node(n) = o
                && let Some(t) = n
                    .spec
                    .as_mut()
                    .and_then(|s| s.taints.as_mut())
                    .and_then(|t| t.iter_mut().find(|t| t.key == EVACUATE_TAINT))
            {
                t.value = Some(value.into());
            }
        }
        with_world(config, objs, |mut t| async move {
            t.settle().await;
            let deleted = ["vm1", "vm2", "vm3", "vm4"]
                .iter()
                .filter(|v| vmi_uid(&t, v).is_none())
                .count();
            assert_eq!(deleted, want, "taint value {value:?}");
        });
    }
}

/// Only a VM that starts a deleted VMI again (runStrategy Always or Once)
/// is restarted by deleting its VMI: KubeVirt starts no new VMI for a
/// Manual or RerunOnFailure VM whose VMI someone else deleted, nor for a
/// VM that is gone. Those are kept, and named on the node and the VMI
/// with why (the VM read live), as a VMI without a VM is.
#[test]
fn e2_a_vm_whose_run_strategy_would_not_start_it_again_is_kept_and_named() {
    let mut objs = evacuating_n1(&["manual", "rerun", "gone", "always"], 8);
    objs.retain(|o| !(o.kind() == Kind::Vm && o.obj_ref().name == "gone"));
    for o in &mut objs {
        if let Obj::Vm(vm) = o {
            match vm.metadata.name.as_deref() {
                Some("manual") => vm.spec.run_strategy = Some("Manual".into()),
                Some("rerun") => vm.spec.run_strategy = Some("RerunOnFailure".into()),
                _ => {}
            }
        }
    }
    let mut config = Config::default();
    config.evacuation.max_concurrent = 4;
    with_world(config, objs, |mut t| async move {
        t.settle().await;
        for kept in ["manual", "rerun", "gone"] {
            assert!(vmi_uid(&t, kept).is_some(), "{kept}'s VMI is kept");
        }
        assert_eq!(vmi_uid(&t, "always"), None, "the Always VM restarts");
        let blocked = node_events(&t, "EvacuationBlocked");
        for why in [
            "VMI t/manual holds GPUs on node n1, which is being evacuated, and its VirtualMachine's runStrategy is Manual",
            "VMI t/rerun holds GPUs on node n1, which is being evacuated, and its VirtualMachine's runStrategy is RerunOnFailure",
            "VMI t/gone holds GPUs on node n1, which is being evacuated, and its VirtualMachine is gone",
        ] {
            assert!(
                blocked.iter().any(|m| m.contains(why)),
                "{why} in {blocked:?}"
            );
        }
        let on_vmis = vmi_events(&t, "EvacuationBlocked");
        assert_eq!(on_vmis, 3, "a Warning on each VMI kept");
    });
}

/// Issue 61, item 6: a node deleted mid-evacuation keeps counting its
/// restarts. E2's finalizer goes on with the first mark, so the node
/// stays (being deleted) while vm1's restart is under way: vm3 on another
/// evacuating node waits its turn under `maxConcurrent` 1, and no restart
/// begins off the node being deleted (vm2 goes with it). Once vm1 runs
/// again its mark and the finalizer go in one patch, the node with them,
/// and vm3 restarts.
#[test]
fn e2_a_node_deleted_mid_evacuation_keeps_counting_its_restarts_until_they_end() {
    use gpu_claims_actors::api::EVACUATION_FINALIZER;
    let mut objs = evacuating_n1(&["vm1", "vm2"], 8);
    objs.extend(evacuating("n3", &["vm3"]));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert_eq!(vmi_uid(&t, "vm1"), None, "vm1's VMI was deleted");
        let n1 = |t: &TestCluster| match t.sim.cluster.get(&ObjRef::new(Kind::Node, None, "n1")) {
            Some(Obj::Node(n)) => Some(n),
            _ => None,
        };
        let held = n1(&t).unwrap().metadata.finalizers.unwrap_or_default();
        assert_eq!(
            held,
            [EVACUATION_FINALIZER],
            "the finalizer came with the mark"
        );
        t.user_delete(Kind::Node, None, "n1");
        t.settle().await;
        let n = n1(&t).expect("n1 stays while vm1's restart is under way");
        assert!(n.metadata.deletion_timestamp.is_some());
        assert!(
            n.metadata
                .annotations
                .unwrap_or_default()
                .contains_key(&RestartMark::annotation("u-vm1")),
            "its mark still counts"
        );
        for vm in ["vm2", "vm3"] {
            assert!(vmi_uid(&t, vm).is_some(), "{vm} is not stopped (I10)");
        }
        vm_starts_again(&t, "vm1", "u-vm1-b");
        t.settle().await;
        vm_runs(&t, "vm1");
        t.settle().await;
        assert!(n1(&t).is_none(), "the last mark's end lets n1 go");
        assert_eq!(vmi_uid(&t, "vm3"), None, "then vm3 restarts");
        assert_eq!(
            vmi_uid(&t, "vm2").as_deref(),
            Some("u-vm2"),
            "no restart begins off a node being deleted"
        );
    });
}

/// E2's finalizer left on a node with no mark (one removed by hand) holds
/// a deleted node for nothing: it is taken off, once.
#[test]
fn e2_a_finalizer_without_marks_is_taken_off_once() {
    use gpu_claims_actors::api::EVACUATION_FINALIZER;
    let mut objs = evacuating_n1(&[], 8);
    if let Some(Obj::Node(n)) = objs.iter_mut().find(|o| o.obj_ref().name == "n1") {
        n.metadata.finalizers = Some(vec![EVACUATION_FINALIZER.into(), "other/keep".into()]);
    }
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let Some(Obj::Node(n)) = t.sim.cluster.get(&ObjRef::new(Kind::Node, None, "n1")) else {
            panic!("n1")
        };
        assert_eq!(n.metadata.finalizers.unwrap_or_default(), ["other/keep"]);
        let patches = t
            .sim
            .cluster
            .journal()
            .entries
            .iter()
            .filter(|e| e.kind == "Node" && e.name == "n1")
            .count();
        assert_eq!(patches, 1, "one write takes it off");
        t.restart_writes_nothing().await;
    });
}
