//! Issue 33, items 1 and 4: amounts that a tenant or a node writes, at the
//! largest values a real kube-apiserver stores, never wrap to a small
//! number. A pod bound to a node asking for `9223372036854775807` GPUs
//! (twice over, in two containers, a sidecar or two pods) leaves the node
//! no free GPU; a node advertising more than Kubernetes counts is no
//! loose fit. Each row is a world and where the 6-GPU set must (not) go;
//! I1 and I8 are checked after every settle by the harness.
mod common;
use common::*;
use gpu_claims_actors::api::amount::MOST;
use gpu_claims_actors::api::{CLASS_ANNOTATION, COUNT_ANNOTATION, ClaimPhase};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::Obj;

/// The largest quantity Kubernetes stores for a count (an int64).
const HUGE: &str = "9223372036854775807";

/// Where the set of six GPUs goes, or why it waits.
#[derive(Debug, PartialEq)]
enum Outcome {
    On(&'static str),
    Waits(&'static str),
}
use Outcome::*;

/// n1: 8 GPUs, 4 of them held by another tenant's claim; a VMI asking for
/// 6 of class h200 at the gate; and `more`.
fn six_gpus_beside_a_tenant_holding_four(more: Vec<Obj>) -> Vec<Obj> {
    let mut objs = world(more);
    objs.extend(
        claim("other", "held")
            .count(4)
            .bound("n1")
            .with_allocation(H200),
    );
    objs.extend(gated_vmi(
        "vm1",
        "u1",
        &[(CLASS_ANNOTATION, "h200"), (COUNT_ANNOTATION, "6")],
    ));
    objs
}

/// A pod of a hostile tenant bound to `node`, shaped by `shape`.
fn bound_pod(name: &str, node: &str, shape: impl FnOnce(PodBuilder) -> PodBuilder) -> Obj {
    shape(pod("hostile", name).scheduled(node).phase("Running")).obj()
}

fn outcome(objs: Vec<Obj>) -> Outcome {
    settled(Config::default(), objs, |t| {
        let c = t.claim("t/vm1-gpu").expect("the template claim is made");
        match c.phase() {
            ClaimPhase::Pending => {
                let (reason, _) = t.waiting("t/vm1-gpu").expect("a waiting set says why");
                Waits(match reason.as_str() {
                    "NoCapacity" => "NoCapacity",
                    other => panic!("waits {other}"),
                })
            }
            _ => On(match c.node_name() {
                Some("n1") => "n1",
                Some("n2") => "n2",
                other => panic!("placed on {other:?}"),
            }),
        }
    })
}

#[test]
fn g3_pods_asking_for_the_largest_amounts_leave_no_free_gpu_on_their_node() {
    let gpu = |q: &'static str| move |p: PodBuilder| p.requests(&[(H200, q)]);
    let rows: Vec<(&str, Vec<Obj>, Outcome)> = vec![
        (
            "nothing hostile: six do not fit beside the four",
            vec![],
            Waits("NoCapacity"),
        ),
        (
            "two containers of the largest amount",
            vec![bound_pod("p", "n1", |p| {
                p.requests(&[(H200, HUGE)])
                    .container("second", &[(H200, HUGE)])
            })],
            Waits("NoCapacity"),
        ),
        (
            "a container and a sidecar of the largest amount",
            vec![bound_pod("p", "n1", |p| {
                p.requests(&[(H200, HUGE)]).sidecar("side", &[(H200, HUGE)])
            })],
            Waits("NoCapacity"),
        ),
        (
            "two pods of the largest amount",
            vec![
                bound_pod("p1", "n1", gpu(HUGE)),
                bound_pod("p2", "n1", gpu(HUGE)),
            ],
            Waits("NoCapacity"),
        ),
        (
            "a pod asking past what Kubernetes counts (read as the most, not as none)",
            vec![bound_pod("p", "n1", gpu("1e40"))],
            Waits("NoCapacity"),
        ),
        (
            "the largest pods on n1 and room on n2",
            vec![
                node("n2").gpus(H200, 8).obj(),
                bound_pod("p1", "n1", gpu(HUGE)),
                bound_pod("p2", "n1", gpu(HUGE)),
            ],
            On("n2"),
        ),
    ];
    for (what, more, want) in rows {
        let got = outcome(six_gpus_beside_a_tenant_holding_four(more));
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn g3_a_hostile_pod_going_away_leaves_the_other_pods_use_counted_exactly() {
    // n1: 8 GPUs; a CUDA pod outside gpu-claims uses 4, a hostile pod asks
    // for the most twice over. Once the hostile pod finishes, the four the
    // CUDA pod uses still count: the set of six does not fit.
    let mut objs = world([
        bound_pod("cuda", "n1", |p| p.requests(&[(H200, "4")])),
        bound_pod("p", "n1", |p| {
            p.requests(&[(H200, HUGE)])
                .container("second", &[(H200, HUGE)])
        }),
    ]);
    objs.extend(gated_vmi(
        "vm1",
        "u1",
        &[(CLASS_ANNOTATION, "h200"), (COUNT_ANNOTATION, "6")],
    ));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert_eq!(
            t.waiting("t/vm1-gpu").map(|w| w.0).as_deref(),
            Some("NoCapacity")
        );
        t.user_update(bound_pod("p", "n1", |p| {
            p.requests(&[(H200, HUGE)])
                .container("second", &[(H200, HUGE)])
                .phase("Succeeded")
        }));
        t.settle().await;
        assert_eq!(
            t.waiting("t/vm1-gpu").map(|w| w.0).as_deref(),
            Some("NoCapacity"),
            "the CUDA pod's 4 of 8 are still used"
        );
        assert_eq!(t.sim.world().used_beyond_allocations("n1", H200), 4);
    });
}

/// A set asking for one GPU of each of three resources.
fn three_resources(nodes: Vec<Obj>) -> Vec<Obj> {
    let mut objs = nodes;
    for (class_name, res) in [
        ("a", "nvidia.com/a"),
        ("b", "nvidia.com/b"),
        ("c", "nvidia.com/c"),
    ] {
        objs.push(class(class_name, res).obj());
        objs.push(claim("t", class_name).class(class_name).obj());
    }
    objs.extend(vm1_naming("a,b,c"));
    objs
}

#[test]
fn g3_best_fit_is_not_fooled_by_a_node_advertising_the_most_of_every_resource() {
    // "Left free" over three resources of the most each would wrap to a
    // small number and make the loosest node look the tightest.
    let huge = MOST.to_string();
    let loose = ["nvidia.com/a", "nvidia.com/b", "nvidia.com/c"]
        .iter()
        .fold(node("n1"), |n, r| n.allocatable(r, &huge));
    let tight = ["nvidia.com/a", "nvidia.com/b", "nvidia.com/c"]
        .iter()
        .fold(node("n2"), |n, r| n.allocatable(r, "2"));
    let objs = three_resources(vec![loose.obj(), tight.obj()]);
    settled(Config::default(), objs, |t| {
        for c in ["t/a", "t/b", "t/c"] {
            assert_eq!(t.claim(c).unwrap().node_name(), Some("n2"), "{c}");
        }
    });
}

#[test]
fn g3_a_node_whose_cpu_is_past_what_kubernetes_counts_has_no_room_for_a_launcher() {
    // kube-scheduler reads such a cpu with MilliValue, which wraps it
    // negative: it places no pod needing cpu there. Neither do we.
    let objs = {
        let mut v = vec![
            class("h200", H200).obj(),
            node("n1").gpus(H200, 8).allocatable("cpu", HUGE).obj(),
            node("n2").gpus(H200, 8).allocatable("cpu", "64").obj(),
        ];
        v.extend(vm1_naming_and("a", |p| p.requests(&[("cpu", "4")])));
        v.push(claim("t", "a").obj());
        v
    };
    settled(Config::default(), objs, |t| {
        assert_eq!(t.claim("t/a").unwrap().node_name(), Some("n2"));
    });
}
