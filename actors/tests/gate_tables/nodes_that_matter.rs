//! G3: which nodes' change can change a waiting set's decision, so that a
//! node's change looks again only at the sets it may concern.

use super::*;
use std::collections::BTreeSet;

fn nodes_of(objs: Vec<Vec<Obj>>) -> NodesThatMatter {
    let w = world_of(objs.into_iter().flatten().collect());
    let v = w.vmi("t/vm").expect("the VMI");
    match decide_gate(&v, &w, &WrittenAllocations::default()) {
        GateStep::Wait { nodes, reason, .. } => {
            assert!(reason.on_nodes(), "{reason:?}");
            nodes
        }
        other => panic!("{other:?}"),
    }
}

fn only(names: &[&str]) -> NodesThatMatter {
    NodesThatMatter::Only(names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>())
}

/// Forty full nodes, `pin` among them labelled zone=z1.
fn full_nodes_with(pin: &str) -> Vec<Obj> {
    let mut ns: Vec<NodeBuilder> = (0..40).map(|i| gpu_node(&format!("n{i:02}"), 0)).collect();
    ns.push(gpu_node(pin, 0).label("zone", "z1"));
    nodes(ns)
}

/// Forty nodes with room, and `pin` (full) labelled zone=z1.
fn roomy_nodes_with(pin: &str) -> Vec<Obj> {
    let mut ns: Vec<NodeBuilder> = (0..40).map(|i| gpu_node(&format!("n{i:02}"), 8)).collect();
    ns.push(gpu_node(pin, 0).label("zone", "z1"));
    nodes(ns)
}

#[test]
fn g3_a_set_pinned_by_its_node_selector_waits_on_the_nodes_it_selects_only() {
    let got = nodes_of(vec![
        h200(),
        roomy_nodes_with("pin"),
        vm_asking(1, |p| p.node_selector("zone", "z1")),
    ]);
    assert_eq!(got, only(&["pin"]));
}

#[test]
fn g3_a_set_any_node_may_take_waits_on_all_of_them_past_a_few() {
    let got = nodes_of(vec![h200(), full_nodes_with("pin"), vm_asking(1, same)]);
    assert_eq!(got, NodesThatMatter::All);
    // A few nodes are named: a change of any other cannot concern the set.
    let few = nodes_of(vec![
        h200(),
        nodes(vec![gpu_node("a", 0), gpu_node("b", 8).cordoned()]),
        vm_asking(1, same),
    ]);
    assert_eq!(few, only(&["a", "b"]));
}

/// Issue 61, item 5: where no node has the GPUs free, the index says so
/// and no node is judged: the set waits on the room the index keeps
/// (`Roomless`), whatever its pods select.
#[test]
fn g3_a_set_no_node_has_room_for_is_roomless_whatever_its_pods_select() {
    let w = world_of(
        [
            h200(),
            full_nodes_with("pin"),
            vm_asking(2, |p| p.node_selector("zone", "z1")),
        ]
        .into_iter()
        .flatten()
        .collect(),
    );
    let v = w.vmi("t/vm").expect("the VMI");
    let GateStep::Wait {
        roomless, message, ..
    } = decide_gate(&v, &w, &WrittenAllocations::default())
    else {
        panic!("waits")
    };
    let r = roomless.expect("roomless");
    assert_eq!((r.want, r.largest), (2, 0), "{message}");
    assert_eq!(message, r.message());
    assert!(r.holds(&w));
}

#[test]
fn e1_a_set_held_on_a_node_that_cannot_take_it_waits_on_every_node_it_could_move_to() {
    // The held node is cordoned and every other node full: any node's
    // change may let the claim move (or the held node take it again).
    let got = nodes_of(vec![
        h200(),
        full_nodes_with("pin"),
        vec![gpu_node("held", 8).cordoned().obj()],
        claim("t", "a").bound("held").with_allocation(H200),
        vm_naming("a"),
    ]);
    assert_eq!(got, NodesThatMatter::All);
    // A few nodes: the held one and the ones it could move to.
    let few = nodes_of(vec![
        h200_nodes(&[("b", 0)]),
        vec![gpu_node("held", 8).cordoned().obj()],
        claim("t", "a").bound("held").with_allocation(H200),
        vm_naming("a"),
    ]);
    assert_eq!(few, only(&["b", "held"]));
}

#[test]
fn g3_the_node_a_lost_member_is_recorded_on_matters_to_its_set() {
    // Claim a is Lost on g (NotReady) and moves; the pods' selector
    // leaves only full nodes. When g is back, a holds the set there
    // again: g's change must reach the set although g fails its affinity.
    let got = nodes_of(vec![
        h200(),
        full_nodes_with("pin"),
        vec![gpu_node("g", 8).ready(false).obj()],
        claim("t", "a").lost("g").with_allocation(H200),
        vm_naming_with("a", |p| p.node_selector("zone", "z1")),
    ]);
    assert_eq!(got, only(&["g", "pin"]));
}
