//! D1 and D2 as the world keeps them: what a slice, a DeviceClass, a
//! class or an allocation changes, and what each change reaches.

use super::*;
use crate::api::{GPUClass, NodeFacts, Obj};
use crate::config::Config;
use crate::world::Change;
use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

const VFIO: &str =
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'";

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn gpu(name: &str, product: &str) -> Value {
    json!({"name": name, "attributes": {
        "type": {"string": "vfio"}, "productName": {"string": product}}})
}

/// A slice of NVIDIA's driver: pool `pool` on `node`.
fn slice(
    name: &str,
    node: &str,
    pool: &str,
    generation: i64,
    count: i64,
    devices: Vec<Value>,
) -> Obj {
    Obj::ResourceSlice(obj(json!({"metadata": {"name": name},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
            "devices": devices}})))
}

fn node_slice(node: &str, devices: Vec<Value>) -> Obj {
    slice(&format!("{node}-slice"), node, node, 1, 1, devices)
}

fn device_class(name: &str, expression: &str) -> Obj {
    Obj::DeviceClass(obj(json!({"metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]}})))
}

fn class(name: &str, device_class: &str, selectors: &[&str]) -> GPUClass {
    let selectors: Vec<Value> = selectors
        .iter()
        .map(|e| json!({"cel": {"expression": e}}))
        .collect();
    obj(
        json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClass",
        "metadata": {"name": name},
        "spec": {"deviceClassName": device_class, "selectors": selectors}}),
    )
}

fn node(name: &str, ready: bool) -> Obj {
    let status = if ready { "True" } else { "False" };
    Obj::Node(obj::<Node>(
        json!({"metadata": {"name": name, "labels": {"gpu": "yes"}},
        "status": {"conditions": [{"type": "Ready", "status": status}]}}),
    ))
}

fn claim_allocating(ns: &str, name: &str, devices: &[(&str, &str)]) -> Obj {
    let results: Vec<Value> = devices
        .iter()
        .map(|(pool, d)| json!({"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": d}))
        .collect();
    Obj::ResourceClaim(obj(json!({"metadata": {"name": name, "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "vfio.gpu.nvidia.com"}}]}},
        "status": {"allocation": {"devices": {"results": results}}}})))
}

/// A world with the vfio DeviceClass, the class `h200` of it, and two
/// Ready nodes publishing two H200s and one L40S each.
fn world() -> World {
    let w = World::new(Config::default());
    w.load(device_class("vfio.gpu.nvidia.com", VFIO));
    w.load(Obj::Class(class(
        "h200",
        "vfio.gpu.nvidia.com",
        &["device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'"],
    )));
    for n in ["n1", "n2"] {
        w.load(node(n, true));
        w.load(node_slice(
            n,
            vec![
                gpu("gpu-vfio-0", "NVIDIA H200"),
                gpu("gpu-vfio-1", "NVIDIA H200"),
                gpu("gpu-vfio-2", "NVIDIA L40S"),
            ],
        ));
    }
    w
}

fn capacity(w: &World, class: &str) -> u64 {
    w.class_capacity(class)
}

fn free(w: &World, node: &str) -> Vec<String> {
    w.free_devices("h200", node)
        .iter()
        .map(|d| d.device.to_string())
        .collect()
}

fn devices_change(c: Change) -> DevicesChange {
    match c {
        Change::Devices(d) => d,
        _ => panic!("not a devices change"),
    }
}

#[test]
fn d1_a_dra_class_counts_the_devices_its_device_class_and_its_selectors_select() {
    let w = world();
    // Two H200s on each node; the L40S is the DeviceClass's but not the class's.
    assert_eq!(capacity(&w, "h200"), 4);
    assert_eq!(free(&w, "n1"), ["gpu-vfio-0", "gpu-vfio-1"]);
    assert_eq!(w.dra_problem("h200"), None);
    // The same DeviceClass without selectors of the class's own: all three.
    w.load(Obj::Class(class("any", "vfio.gpu.nvidia.com", &[])));
    assert_eq!(capacity(&w, "any"), 6);
}

#[test]
fn d1_an_incomplete_pool_serves_nothing_until_its_last_slice_comes() {
    let w = world();
    let first = slice(
        "n3-a",
        "n3",
        "n3",
        1,
        2,
        vec![gpu("gpu-vfio-0", "NVIDIA H200")],
    );
    let second = slice(
        "n3-b",
        "n3",
        "n3",
        1,
        2,
        vec![gpu("gpu-vfio-1", "NVIDIA H200")],
    );
    w.load(node("n3", true));
    w.load(first);
    assert!(w.free_devices("h200", "n3").is_empty());
    assert_eq!(capacity(&w, "h200"), 4);
    let change = devices_change(w.apply(second, false));
    assert_eq!(capacity(&w, "h200"), 6);
    // Only the pool's node, and the classes with devices there.
    assert_eq!(change.nodes, BTreeSet::from(["n3".to_string()]));
    assert_eq!(change.classes, BTreeSet::from(["h200".to_string()]));
}

#[test]
fn d1_a_new_generation_replaces_the_pool_once_complete() {
    let w = world();
    // Generation 2 of n1's pool, one slice of two so far: incomplete, and
    // generation 1 no longer counts either (the newest generation decides).
    w.load(slice(
        "n1-g2a",
        "n1",
        "n1",
        2,
        2,
        vec![gpu("gpu-vfio-5", "NVIDIA H200")],
    ));
    assert!(free(&w, "n1").is_empty());
    w.load(slice(
        "n1-g2b",
        "n1",
        "n1",
        2,
        2,
        vec![gpu("gpu-vfio-6", "NVIDIA H200")],
    ));
    assert_eq!(free(&w, "n1"), ["gpu-vfio-5", "gpu-vfio-6"]);
}

#[test]
fn d1_a_slice_change_reaches_only_its_node_and_the_classes_with_devices_there() {
    let w = world();
    w.load(Obj::Class(class(
        "l40s",
        "vfio.gpu.nvidia.com",
        &["device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L40S'"],
    )));
    // n2 loses its L40S: the classes with devices there count again (its
    // slice may have tainted or untainted theirs too), no other node.
    let change = devices_change(w.apply(
        node_slice(
            "n2",
            vec![
                gpu("gpu-vfio-0", "NVIDIA H200"),
                gpu("gpu-vfio-1", "NVIDIA H200"),
            ],
        ),
        false,
    ));
    assert_eq!(change.nodes, BTreeSet::from(["n2".to_string()]));
    assert_eq!(
        change.classes,
        BTreeSet::from(["h200".to_string(), "l40s".to_string()])
    );
    assert_eq!(capacity(&w, "l40s"), 1);
    // A node with no devices of a class reaches no class.
    w.load(node("n9", true));
    let change = devices_change(w.apply(node_slice("n9", vec![]), false));
    assert!(change.classes.is_empty());
}

#[test]
fn d1_a_selector_that_does_not_compile_serves_nothing_and_says_why() {
    let w = world();
    w.load(Obj::Class(class(
        "bad",
        "vfio.gpu.nvidia.com",
        &["device.attributes["],
    )));
    assert_eq!(capacity(&w, "bad"), 0);
    let Some(DraProblem::SelectorInvalid(e)) = w.dra_problem("bad") else {
        panic!("{:?}", w.dra_problem("bad"));
    };
    assert_eq!(e.error.reason(), "CompileError");
    assert_eq!(e.expression, "device.attributes[");
    assert!(
        e.to_string()
            .starts_with("gpuclass bad: selector #0: CEL compile error")
    );
}

#[test]
fn d1_a_selector_that_errors_on_a_device_serves_nothing_until_no_device_errs() {
    let w = world();
    // `memory` is no attribute NVIDIA publishes: upstream's no-such-key error.
    w.load(Obj::Class(class(
        "mem",
        "vfio.gpu.nvidia.com",
        &["device.attributes['gpu.nvidia.com'].memory > 1"],
    )));
    assert_eq!(capacity(&w, "mem"), 0);
    let Some(DraProblem::SelectorInvalid(e)) = w.dra_problem("mem") else {
        panic!("{:?}", w.dra_problem("mem"));
    };
    assert_eq!(e.error.reason(), "RuntimeError");
    assert!(e.on.contains("gpu.nvidia.com/n1/gpu-vfio-0"), "{e}");
    // A selector that reads it only where it is defined serves again.
    w.load(Obj::Class(class(
        "mem",
        "vfio.gpu.nvidia.com",
        &["'memory' in device.attributes['gpu.nvidia.com'] && device.attributes['gpu.nvidia.com'].memory > 1"],
    )));
    assert_eq!(w.dra_problem("mem"), None);
}

#[test]
fn d1_a_device_class_that_does_not_exist_serves_nothing_until_it_does() {
    let w = World::new(Config::default());
    w.load(node("n1", true));
    w.load(node_slice("n1", vec![gpu("gpu-vfio-0", "NVIDIA H200")]));
    w.load(Obj::Class(class("h200", "vfio.gpu.nvidia.com", &[])));
    assert_eq!(
        w.dra_problem("h200"),
        Some(DraProblem::DeviceClassMissing("vfio.gpu.nvidia.com".into()))
    );
    assert_eq!(capacity(&w, "h200"), 0);
    let change = devices_change(w.apply(device_class("vfio.gpu.nvidia.com", VFIO), false));
    assert_eq!(change.classes, BTreeSet::from(["h200".to_string()]));
    assert_eq!(capacity(&w, "h200"), 1);
}

#[test]
fn d1_a_cluster_without_dra_serves_no_device_and_says_so() {
    let w = world();
    let moved = w.set_served(Kind::ResourceSlice, false);
    assert_eq!(moved.classes, BTreeSet::from(["h200".to_string()]));
    assert_eq!(
        w.dra_problem("h200"),
        Some(DraProblem::NotServed(vec![Kind::ResourceSlice]))
    );
    assert_eq!(capacity(&w, "h200"), 0);
    // Told again: nothing moves.
    assert!(w.set_served(Kind::ResourceSlice, false).classes.is_empty());
    w.set_served(Kind::ResourceSlice, true);
    assert_eq!(capacity(&w, "h200"), 4);
}

#[test]
fn d2_a_device_an_allocation_names_is_taken_until_the_allocation_goes() {
    let w = world();
    let change = devices_change(w.apply(
        claim_allocating("t", "vm-gpu", &[("n1", "gpu-vfio-0")]),
        false,
    ));
    assert_eq!(change.nodes, BTreeSet::from(["n1".to_string()]));
    assert_eq!(free(&w, "n1"), ["gpu-vfio-1"]);
    assert_eq!(capacity(&w, "h200"), 3);
    let id = DeviceId {
        driver: "gpu.nvidia.com".into(),
        pool: "n1".into(),
        device: "gpu-vfio-0".into(),
    };
    assert_eq!(w.device_holder(&id).as_deref(), Some("t/vm-gpu"));
    w.apply(claim_allocating("t", "vm-gpu", &[]), true);
    assert_eq!(free(&w, "n1"), ["gpu-vfio-0", "gpu-vfio-1"]);
}

#[test]
fn d2_a_device_with_a_no_schedule_or_no_execute_taint_is_not_free() {
    let w = world();
    let tainted = |effect: &str| {
        let mut d = gpu("gpu-vfio-0", "NVIDIA H200");
        d["taints"] = json!([{"key": "gpu.nvidia.com/unhealthy", "effect": effect}]);
        node_slice("n1", vec![d, gpu("gpu-vfio-1", "NVIDIA H200")])
    };
    for effect in ["NoSchedule", "NoExecute"] {
        w.load(tainted(effect));
        assert_eq!(free(&w, "n1"), ["gpu-vfio-1"], "{effect}");
    }
    w.load(tainted("None"));
    assert_eq!(free(&w, "n1"), ["gpu-vfio-0", "gpu-vfio-1"]);
}

#[test]
fn d1_a_taint_leaves_what_serves_as_it_was_and_an_attribute_change_moves_it() {
    let w = world();
    let serving = |w: &World| -> Vec<String> {
        w.class_devices("h200").by_node["n1"]
            .iter()
            .map(|d| d.device.to_string())
            .collect()
    };
    // A taint only (what selectors cannot read): the same devices serve,
    // and the classes with devices there count again (the taint moved
    // what is free).
    let mut tainted = gpu("gpu-vfio-0", "NVIDIA H200");
    tainted["taints"] = json!([{"key": "gpu.nvidia.com/unhealthy", "effect": "NoExecute"}]);
    let change = devices_change(w.apply(
        node_slice(
            "n1",
            vec![
                tainted.clone(),
                gpu("gpu-vfio-1", "NVIDIA H200"),
                gpu("gpu-vfio-2", "NVIDIA L40S"),
            ],
        ),
        false,
    ));
    assert_eq!(change.classes, BTreeSet::from(["h200".to_string()]));
    assert_eq!(serving(&w), ["gpu-vfio-0", "gpu-vfio-1"]);
    assert_eq!(free(&w, "n1"), ["gpu-vfio-1"]);
    // The same slice with an attribute changed: the selectors read again.
    let mut renamed = tainted;
    renamed["attributes"]["productName"] = json!({"string": "NVIDIA L40S"});
    w.load(node_slice(
        "n1",
        vec![
            renamed,
            gpu("gpu-vfio-1", "NVIDIA H200"),
            gpu("gpu-vfio-2", "NVIDIA H200"),
        ],
    ));
    assert_eq!(serving(&w), ["gpu-vfio-1", "gpu-vfio-2"]);
    assert_eq!(free(&w, "n1"), ["gpu-vfio-1", "gpu-vfio-2"]);
}

/// A world with node n3 publishing one H200 whole (`gpu-0`, all 8 memory
/// slices of counter set gpu-0) and as two halves (4 each), and `extra`
/// devices beside them, in one slice.
fn partitioned_gpu_world(extra: Vec<Value>) -> World {
    let w = world();
    let consumes = |n: &str| json!([{"counterSet": "gpu-0", "counters": {"memory": {"value": n}}}]);
    let mut whole = gpu("gpu-0", "NVIDIA H200");
    whole["consumesCounters"] = consumes("8");
    let mut half_a = gpu("gpu-0-half-a", "NVIDIA H200");
    half_a["consumesCounters"] = consumes("4");
    let mut half_b = gpu("gpu-0-half-b", "NVIDIA H200");
    half_b["consumesCounters"] = consumes("4");
    let mut devices = vec![whole, half_a, half_b];
    devices.extend(extra);
    let mut s: Value = serde_json::to_value(match node_slice("n3", devices) {
        Obj::ResourceSlice(s) => s,
        _ => unreachable!(),
    })
    .unwrap();
    s["spec"]["sharedCounters"] =
        json!([{"name": "gpu-0", "counters": {"memory": {"value": "8"}}}]);
    w.load(node("n3", true));
    w.load(Obj::ResourceSlice(obj(s)));
    w
}

#[test]
fn d2_a_gpu_published_whole_and_as_partitions_is_taken_once() {
    // One physical GPU, shared counters of 8 memory slices: the whole GPU
    // takes all 8, each half 4.
    let w = partitioned_gpu_world(Vec::new());
    assert_eq!(
        w.free_devices("h200", "n3").len(),
        3,
        "nothing is held: each alone fits"
    );
    w.load(claim_allocating("t", "a", &[("n3", "gpu-0-half-a")]));
    let left: Vec<String> = w
        .free_devices("h200", "n3")
        .into_iter()
        .map(|d| d.device.to_string())
        .collect();
    assert_eq!(
        left,
        ["gpu-0-half-b"],
        "half of it is taken: the whole GPU is not free"
    );
    w.load(claim_allocating("t", "b", &[("n3", "gpu-0-half-b")]));
    assert!(w.free_devices("h200", "n3").is_empty());
}

#[test]
fn d2_capacity_counts_ready_nodes_the_class_selects() {
    let w = world();
    let change = w.apply(node("n2", false), false);
    let Change::Node(n) = change else {
        panic!("not a node change")
    };
    assert_eq!(n.moved, ["h200"]);
    assert_eq!(capacity(&w, "h200"), 2);
    let mut c = class("h200", "vfio.gpu.nvidia.com", &[]);
    c.spec.node_selector = Some([("gpu".to_string(), "no".to_string())].into());
    w.load(Obj::Class(c));
    assert_eq!(capacity(&w, "h200"), 0);
    assert!(NodeFacts::from_node(&Node::default()).is_none());
}

#[test]
fn d3_devices_sharing_counters_fit_together_only_within_what_their_pool_shares() {
    let w = partitioned_gpu_world(vec![gpu("gpu-1", "NVIDIA H200")]);
    let id = |name: &str| {
        w.free_devices("h200", "n3")
            .into_iter()
            .find(|d| &*d.device == name)
            .unwrap()
    };
    let (whole, half_a, half_b, plain) = (
        id("gpu-0"),
        id("gpu-0-half-a"),
        id("gpu-0-half-b"),
        id("gpu-1"),
    );
    let fit = |ids: &[&DeviceId]| {
        let ids: Vec<DeviceId> = ids.iter().map(|d| (*d).clone()).collect();
        w.devices_fit_together("n3", &ids)
    };
    assert!(
        fit(&[&whole, &plain]),
        "a device without counters fits beside any"
    );
    assert!(fit(&[&half_a, &half_b]), "two halves make the whole");
    assert!(!fit(&[&whole, &half_a]), "the GPU and its half: 12 of 8");
    // Half a held by a claim: the other half fits, the whole does not;
    // the holder keeping its own half is counted once.
    w.load(claim_allocating("t", "a", &[("n3", "gpu-0-half-a")]));
    assert!(fit(&[&half_b]));
    assert!(!fit(&[&whole]));
    assert!(fit(&[&half_a]), "its own half, chosen again");
    assert!(fit(&[&half_a, &half_b]));
}
