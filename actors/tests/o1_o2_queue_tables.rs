//! O1 and O2 as tables, on the pure decisions (no actors, no cluster):
//! a set's place in the order (`order_key`), whether a waiting set could
//! lead its classes (`GateStep::Wait`'s `lead`), and how a head that goes
//! first holds a later set back (`decide_gate_held`).

use gpu_claims_actors::api::{CLASS_ANNOTATION, COUNT_ANNOTATION, Obj, RestartMark};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::rules::queueing::{Held, OrderKey, order_key};
use gpu_claims_actors::rules::*;
use gpu_claims_actors::world::WorldWriter;
use gpu_claims_testbed::fixtures::*;
use k8s_openapi::jiff::Timestamp;
use std::cmp::Reverse;
use std::sync::Arc;

const H200: &str = "nvidia.com/GH100_H200";

fn world_of(objs: Vec<Obj>) -> WorldWriter {
    let w = WorldWriter::new(Config::default());
    for o in objs {
        w.load(o);
    }
    w
}

/// VMI `t/<name>` asking for its template claim of `n` GPUs of `class`,
/// with one gated launcher pod made at `created` (seconds).
fn vm(name: &str, class: &str, n: u32, created: i64) -> Vec<Obj> {
    let uid = format!("u-{name}");
    vec![
        vmi("t", name)
            .uid(&uid)
            .annotate(CLASS_ANNOTATION, class)
            .annotate(COUNT_ANNOTATION, &n.to_string())
            .obj(),
        claim("t", &format!("{name}-gpu"))
            .class(class)
            .count(n)
            .template_of(name, &uid)
            .obj(),
        launcher("t", &format!("virt-launcher-{name}"), name, &uid)
            .created_at(created)
            .gated()
            .obj(),
    ]
}

/// `n` GPUs of node `node` held by a running VM's claim `t/<name>`.
fn held_on(node: &str, name: &str, n: u32) -> Vec<Obj> {
    let mut objs = vec![
        vmi("t", &format!("{name}-vm"))
            .uid("r")
            .phase("Running")
            .obj(),
    ];
    objs.extend(
        claim("t", name)
            .count(n)
            .attached_phase(node)
            .attached(&format!("{name}-vm"))
            .with_allocation(H200),
    );
    objs
}

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(s).unwrap()
}

fn key_of(objs: Vec<Obj>, vmi: &str) -> OrderKey {
    let w = world_of(objs);
    order_key(&w.vmi(vmi).expect("the VMI"), &w)
}

#[test]
fn o1_order_key_table() {
    let base = || vec![class("h200", H200).obj()];
    let with = |extra: Vec<Obj>, vm: VmiBuilder| -> Vec<Obj> {
        let mut o = base();
        o.extend(extra);
        o.push(vm.obj());
        o
    };
    let rows: Vec<(&str, Vec<Obj>, i32)> = vec![
        (
            "its spec.priorityClassName's value",
            with(
                vec![priority_class("gold", 1000, false)],
                vmi("t", "vm").priority("gold"),
            ),
            1000,
        ),
        (
            "without one, the global default's value",
            with(
                vec![
                    priority_class("gold", 1000, false),
                    priority_class("normal", 100, true),
                ],
                vmi("t", "vm"),
            ),
            100,
        ),
        (
            "of several defaults (a race), the lowest, as admission picks",
            with(
                vec![
                    priority_class("normal", 100, true),
                    priority_class("low", 10, true),
                ],
                vmi("t", "vm"),
            ),
            10,
        ),
        (
            "a name no PriorityClass has counts as 0",
            with(
                vec![priority_class("normal", 100, true)],
                vmi("t", "vm").priority("platinum"),
            ),
            0,
        ),
        (
            "no class and no default: 0",
            with(vec![], vmi("t", "vm")),
            0,
        ),
        (
            "a negative value stays negative (only an upper bound exists)",
            with(
                vec![priority_class("batch", -5, false)],
                vmi("t", "vm").priority("batch"),
            ),
            -5,
        ),
    ];
    for (case, objs, want) in rows {
        assert_eq!(key_of(objs, "t/vm").priority(), want, "{case}");
    }
}

#[test]
fn o1_a_set_waits_since_its_oldest_launcher_pod_or_the_evacuation_that_stopped_it() {
    let mut objs = vec![class("h200", H200).obj()];
    objs.extend(vm("vm", "h200", 1, 500));
    objs.push(
        launcher("t", "virt-launcher-vm-2", "vm", "u-vm")
            .created_at(200)
            .gated()
            .obj(),
    );
    assert_eq!(
        key_of(objs.clone(), "t/vm").since,
        at(200),
        "the oldest pod"
    );
    // E2: its VM was stopped by an evacuation at 100, the node keeps the
    // restart's mark: the new set's wait counts from the stop.
    let mark = RestartMark {
        vm: "t/vm".into(),
        at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(100)),
    };
    let mut evacuated: Vec<Obj> = objs
        .into_iter()
        .map(|o| match o {
            Obj::Vmi(v) => VmiBuilder(v).of_vm("vm").obj(),
            o => o,
        })
        .collect();
    evacuated.push(
        node("n1")
            .gpus(H200, 8)
            .annotate(&RestartMark::annotation("old-uid"), &mark.value())
            .obj(),
    );
    assert_eq!(key_of(evacuated, "t/vm").since, at(100));
}

#[test]
fn o1_keys_order_by_priority_then_wait_then_namespace_and_name() {
    let k = |p: i32, s: i64, v: &str| OrderKey {
        priority: Reverse(p),
        since: at(s),
        vmi: v.into(),
    };
    let mut keys = [
        k(0, 10, "b/vm"),
        k(0, 10, "a/vm"),
        k(0, 5, "z/vm"),
        k(100, 99, "y/vm"),
        k(-1, 0, "a/first"),
    ];
    keys.sort();
    let order: Vec<&str> = keys.iter().map(|k| k.vmi.as_str()).collect();
    assert_eq!(order, ["y/vm", "z/vm", "a/vm", "b/vm", "a/first"]);
}

/// The decision for `t/<vm>` in `objs`, with `held`.
fn decide(objs: Vec<Obj>, vm: &str, held: &[Held]) -> GateStep {
    let w = world_of(objs);
    let v = w.vmi(&format!("t/{vm}")).expect("the VMI");
    decide_gate_held(&v, &w, &WrittenAllocations::default(), held)
}

/// What the set of `t/<vm>` in `objs` could lead (its Wait's `lead`).
fn lead_of(objs: Vec<Obj>, vm: &str) -> (WaitReason, Option<Lead>) {
    match decide(objs, vm, &[]) {
        GateStep::Wait { reason, lead, .. } => (reason, lead),
        other => panic!("{vm} waits, got {other:?}"),
    }
}

#[test]
fn o2_who_could_lead_table() {
    use WaitReason::*;
    let h200 = || class("h200", H200).obj();
    let rows: Vec<(&str, Vec<Obj>, WaitReason, bool)> = vec![
        (
            "NoCapacity, and a node could hold it were its GPUs free: it leads",
            [
                vec![h200(), node("n1").gpus(H200, 8).obj()],
                held_on("n1", "x", 4),
                vm("big", "h200", 8, 0),
            ]
            .concat(),
            NoCapacity,
            true,
        ),
        (
            "NoCapacity, and no node has as many GPUs: it never could lead",
            [
                vec![h200(), node("n1").gpus(H200, 8).obj()],
                vm("big", "h200", 16, 0),
            ]
            .concat(),
            NoCapacity,
            false,
        ),
        (
            "NoCapacity, and the only node big enough has a taint its pods do not tolerate",
            [
                vec![
                    h200(),
                    node("n1")
                        .gpus(H200, 8)
                        .taint("gpu", "maint", "NoSchedule")
                        .obj(),
                    node("n2").gpus(H200, 2).obj(),
                ],
                vm("big", "h200", 8, 0),
            ]
            .concat(),
            NoCapacity,
            false,
        ),
        (
            "OverBudget, and the budget could hold it: it leads",
            [
                vec![
                    class("h200", H200).budget(8).obj(),
                    node("n1").gpus(H200, 8).obj(),
                ],
                held_on("n1", "x", 4),
                vm("big", "h200", 8, 0),
            ]
            .concat(),
            OverBudget,
            true,
        ),
        (
            "OverBudget, and the budget never could",
            [
                vec![
                    class("h200", H200).budget(4).obj(),
                    node("n1").gpus(H200, 8).obj(),
                ],
                vm("big", "h200", 8, 0),
            ]
            .concat(),
            OverBudget,
            false,
        ),
        (
            "OverQuota (its own tenant's limit) never leads",
            [
                vec![
                    h200(),
                    node("n1").gpus(H200, 8).obj(),
                    quota("t", "q").hard("h200", 2).obj(),
                ],
                vm("big", "h200", 8, 0),
            ]
            .concat(),
            OverQuota,
            false,
        ),
    ];
    for (case, objs, want, leads) in rows {
        let (reason, lead) = lead_of(objs, "big");
        assert_eq!(reason, want, "{case}");
        assert_eq!(lead.is_some(), leads, "{case}: {lead:?}");
        if let Some(l) = lead {
            assert_eq!(l.classes, vec!["h200".to_string()], "{case}");
            assert_eq!(l.over_budget, want == OverBudget, "{case}");
        }
    }
}

/// The head `t/big` of h200 (8 GPUs), over budget or not, as placement
/// hands it to a later set's decision.
fn big_head(objs: &[Obj], over_budget: bool) -> Held {
    let (_, lead) = lead_of(objs.to_vec(), "big");
    Held {
        class: "h200".into(),
        head: "t/big".into(),
        since: at(0),
        over_budget,
        ask: lead.expect("big leads").ask,
    }
}

#[test]
fn o2_a_head_holds_a_later_set_off_the_nodes_that_could_hold_it_and_backfill_goes_on() {
    // n1 (8 GPUs, 4 held) could hold big; n2 (2 GPUs) never could.
    let world = [
        vec![class("h200", H200).obj(), node("n1").gpus(H200, 8).obj()],
        held_on("n1", "x", 4),
        vm("big", "h200", 8, 0),
        vm("small", "h200", 1, 10),
    ]
    .concat();
    let held = [big_head(&world, false)];
    // Without the hold, the small set would take a GPU of n1.
    match decide(world.clone(), "small", &[]) {
        GateStep::Place(p) => assert_eq!(p.node, "n1"),
        other => panic!("{other:?}"),
    }
    match decide(world.clone(), "small", &held) {
        GateStep::Wait {
            reason, message, ..
        } => {
            assert_eq!(reason, WaitReason::Queued, "{message}");
            assert!(
                message.contains("held for VMI t/big, at the head of GPUClass h200"),
                "{message}"
            );
        }
        other => panic!("O2: held back, got {other:?}"),
    }
    // Backfill: a node that could never hold the head takes the small set.
    let mut backfill = world.clone();
    backfill.push(node("n2").gpus(H200, 2).obj());
    match decide(backfill, "small", &held) {
        GateStep::Place(p) => assert_eq!(p.node, "n2"),
        other => panic!("O2: backfill onto n2, got {other:?}"),
    }
    // A set of another class takes nothing of h200's: never held by it.
    let mut other_class = world;
    other_class.push(class("a100", "nvidia.com/A100").obj());
    other_class.push(node("n3").gpus("nvidia.com/A100", 4).obj());
    other_class.extend(vm("other", "a100", 1, 20));
    assert!(
        matches!(decide(other_class, "other", &held), GateStep::Place(_)),
        "a100 is not held for h200's head"
    );
}

#[test]
fn o2_a_head_over_budget_holds_its_class_budget_from_later_sets() {
    let world = [
        vec![
            class("h200", H200).budget(8).obj(),
            node("n1").gpus(H200, 8).obj(),
            node("n2").gpus(H200, 8).obj(),
        ],
        held_on("n1", "x", 4),
        vm("big", "h200", 8, 0),
        vm("small", "h200", 1, 10),
    ]
    .concat();
    let held = [big_head(&world, true)];
    assert!(matches!(
        decide(world.clone(), "small", &[]),
        GateStep::Place(_)
    ));
    match decide(world, "small", &held) {
        GateStep::Wait {
            reason, message, ..
        } => {
            assert_eq!(reason, WaitReason::Queued, "{message}");
            assert!(
                message.contains("GPUClass h200's budget goes first to VMI t/big"),
                "{message}"
            );
        }
        other => panic!("O2: the budget is held, got {other:?}"),
    }
}

#[test]
fn o2_a_later_set_over_quota_waits_over_quota_before_queued() {
    // G5's order: OverQuota comes before Queued.
    let world = [
        vec![
            class("h200", H200).obj(),
            node("n1").gpus(H200, 8).obj(),
            quota("t", "q").hard("h200", 0).obj(),
        ],
        vm("big", "h200", 8, 0),
        vm("small", "h200", 1, 10),
    ]
    .concat();
    let head = Held {
        class: "h200".into(),
        head: "t/big".into(),
        since: at(0),
        over_budget: true,
        ask: Arc::new(gpu_claims_actors::rules::queueing::HeadAsk {
            pods: Vec::new(),
            classes: Vec::new(),
            resources: Vec::new(),
            need: Default::default(),
            devices: Default::default(),
            by_class: Default::default(),
        }),
    };
    match decide(world, "small", &[head]) {
        GateStep::Wait { reason, .. } => assert_eq!(reason, WaitReason::OverQuota),
        other => panic!("{other:?}"),
    }
}
