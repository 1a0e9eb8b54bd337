//! When a rule runs again, as data: for each change to the world, who
//! the supervisor tells (`whom`), in the order it tells them. A table of
//! one change per row, against one world.

use gpu_claims_actors::api::Obj;
use gpu_claims_actors::config::Config;
use gpu_claims_actors::controller::{LookAt, PoolLook, Wake, whom};
use gpu_claims_actors::world::WorldWriter;
use gpu_claims_testbed::fixtures::*;

/// A class of resource `r`, node n1 with 8 of them, claim t/a Attached
/// there to the running VMI t/vm1 (with its allocation and gated
/// launcher), and a quota of t naming the class.
fn world() -> WorldWriter {
    let w = WorldWriter::new(Config::default());
    let mut objs = vec![
        class("h200", "r").obj(),
        node("n1").gpus("r", 8).label("zone", "a").obj(),
        vmi("t", "vm1").uid("u1").phase("Running").obj(),
        launcher("t", "virt-launcher-vm1-x", "vm1", "u1")
            .pinned("n1")
            .obj(),
        quota("t", "q").hard("h200", 4).obj(),
    ];
    objs.extend(a().with_allocation("r"));
    for o in objs {
        w.load(versioned(o, "1"));
    }
    w
}

fn a() -> ClaimBuilder {
    claim("t", "a").attached_phase("n1").attached("vm1")
}

/// The object at resourceVersion `rv`: a version the cache has not seen.
fn versioned(mut o: Obj, rv: &str) -> Obj {
    o.meta_mut().resource_version = Some(rv.into());
    o
}

fn nameless(mut o: Obj) -> Obj {
    o.meta_mut().name = None;
    o
}

/// A DeviceTaintRule of ours on pool gpu.nvidia.com/n1, its taint's
/// effect `effect`.
fn taint_rule(name: &str, effect: &str) -> Obj {
    gpu_claims_actors::api::from_json(
        gpu_claims_actors::api::Kind::DeviceTaintRule,
        serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpu-claims"}},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1"},
                "taint": {"key": "gpu.cozystack.io/managed", "effect": effect}}}),
    )
    .unwrap()
}

fn claim_of(k: &str) -> Wake {
    Wake::Claim(k.into())
}

fn look(l: LookAt) -> Wake {
    Wake::Placement(l)
}

/// G2: a class that comes or goes among three or more of its resource
/// tells no sibling (each shares it before and after); one that leaves a
/// single class tells that one it is alone.
#[test]
fn g2_a_class_coming_or_going_tells_its_siblings_only_where_one_is_left_alone_or_gains_its_first() {
    let w = world();
    for name in ["h200-spot", "h200-b"] {
        w.load(versioned(class(name, "r").obj(), "1"));
    }
    let classes = |told: &[Wake]| -> Vec<String> {
        told.iter()
            .filter_map(|t| match t {
                Wake::Class(n) => Some(n.clone()),
                _ => None,
            })
            .collect()
    };
    let third = whom(
        w.apply(versioned(class("h200-c", "r").obj(), "2"), false),
        &w,
    );
    assert_eq!(
        classes(&third),
        ["h200-c"],
        "a fourth class: every sibling shared already"
    );
    let gone = whom(
        w.apply(versioned(class("h200-c", "r").obj(), "3"), true),
        &w,
    );
    assert_eq!(classes(&gone), ["h200-c"], "three left: each still shares");
    whom(
        w.apply(versioned(class("h200-b", "r").obj(), "3"), true),
        &w,
    );
    let alone = whom(
        w.apply(versioned(class("h200-spot", "r").obj(), "3"), true),
        &w,
    );
    assert_eq!(
        classes(&alone),
        ["h200-spot", "h200"],
        "h200 is left alone: told"
    );
}

#[test]
fn the_supervisor_tells_those_a_change_concerns_claims_first_then_classes_quotas_and_placement() {
    let allocation = || {
        let c = a().build();
        Obj::Allocation(allocation_of(&c, "r"))
    };
    #[rustfmt::skip]
    let cases: Vec<(&str, Obj, bool, Vec<Wake>)> = vec![
        ("a claim's new version: its actor, then placement looks at its set",
            a().obj(), false,
            vec![claim_of("t/a"), look(LookAt::Claim("t/a".into()))]),
        ("a claim that asks for more: its class and its namespace's quotas count again",
            a().count(2).obj(), false,
            vec![claim_of("t/a"), Wake::Class("h200".into()), Wake::Quota("t/q".into()),
                 look(LookAt::Claim("t/a".into()))]),
        ("a claim gone: placement looks at its allocation, an orphan now",
            a().obj(), true,
            vec![claim_of("t/a"), Wake::Class("h200".into()), Wake::Quota("t/q".into()),
                 look(LookAt::Allocation("t/a".into())), look(LookAt::Claim("t/a".into()))]),
        ("a VMI going final: its claims first (L5 owes their detach), then placement",
            vmi("t", "vm1").uid("u1").phase("Failed").obj(), false,
            vec![claim_of("t/a"), look(LookAt::Vmi("t/vm1".into()))]),
        ("a VMI whose status alone changed: no one",
            vmi("t", "vm1").uid("u1").phase("Running").annotate("x", "y").obj(), false,
            vec![]),
        ("a node not Ready: its claims first (G6), the classes whose capacity it moved, then placement",
            node("n1").gpus("r", 8).label("zone", "a").ready(false).obj(), false,
            vec![claim_of("t/a"), Wake::Class("h200".into()), look(LookAt::Node("n1".into()))]),
        ("a node relabelled: every waiting set's nodes are looked at again",
            node("n1").gpus("r", 8).label("zone", "b").obj(), false,
            vec![claim_of("t/a"), look(LookAt::NodesChanged)]),
        ("an allocation deleted: its claim first, then the orphan look and the GPUs freed",
            allocation(), true,
            vec![claim_of("t/a"), look(LookAt::Allocation("t/a".into())),
                 look(LookAt::Freed { node: "n1".into(), class: "h200".into(), namespace: "t".into() })]),
        ("a quota given other limits: its actor, then the namespace's waiting sets",
            quota("t", "q").hard("h200", 8).obj(), false,
            vec![Wake::Quota("t/q".into()), look(LookAt::Namespace("t".into()))]),
        ("a class given another budget: its actor, the quotas naming it, then capacity",
            class("h200", "r").budget(4).obj(), false,
            vec![Wake::Class("h200".into()), Wake::Quota("t/q".into()), look(LookAt::Capacity)]),
        ("a launcher pod that left the gate: its VMI's claims, then placement looks at the VMI",
            launcher("t", "virt-launcher-vm1-x", "vm1", "u1").pinned("n1").scheduled("n1").obj(), false,
            vec![claim_of("t/a"), look(LookAt::Vmi("t/vm1".into()))]),
        ("a launcher pod that asks for more of its node: the sets waiting on the node look again too",
            launcher("t", "virt-launcher-vm1-x", "vm1", "u1").pinned("n1").requests(&[("cpu", "2")]).obj(), false,
            vec![claim_of("t/a"), look(LookAt::Node("n1".into())), look(LookAt::Vmi("t/vm1".into()))]),
        ("a DeviceTaintRule of ours edited: D7 looks at its pool and at the rule",
            taint_rule("gpu-claims-gpu.nvidia.com-n1", "None"), false,
            vec![Wake::Pool(PoolLook::Pool(("gpu.nvidia.com".into(), "n1".into()))),
                 Wake::Pool(PoolLook::Rule("gpu-claims-gpu.nvidia.com-n1".into()))]),
        ("G2: a second class of the resource: the first is told it shares it now",
            class("h200-spot", "r").obj(), false,
            vec![Wake::Class("h200-spot".into()), Wake::Class("h200".into()), look(LookAt::Capacity)]),
        ("an object without a name: no one",
            nameless(a().obj()), false, vec![]),
    ];
    for (what, obj, deleted, want) in cases {
        let w = world();
        let change = w.apply(versioned(obj, "2"), deleted);
        let told = whom(change, &w);
        assert_eq!(told, want, "{what}");
        let rank = |t: &Wake| match t {
            Wake::Claim(_) => 0,
            Wake::Class(_) => 1,
            Wake::Quota(_) => 2,
            Wake::Pool(_) => 3,
            Wake::Placement(_) => 4,
        };
        assert!(told.is_sorted_by_key(rank), "{what}: told in Wake's order");
    }
}
