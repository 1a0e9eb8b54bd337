//! G3's index of nodes by free GPUs, which best fit walks instead of
//! every node, always says what counting over every node says (allocatable
//! less allocations and what pods use beyond them), in best fit's order,
//! whatever the order of changes: nodes made, resized and deleted,
//! allocations made, moved and deleted, launcher and other pods bound and
//! gone, claims naming (or owned by) the VMI whose launcher their
//! allocation covers, and claims gone while their allocation stays.
//! (Every placement decision in a test build also checks the index's
//! choice against a pass over every node.)
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj};
use gpu_claims_actors::world::{World, WorldWriter};
use gpu_claims_testbed::fixtures::{allocation_of, claim, launcher, node, pod};
use proptest::prelude::*;

const R1: &str = "nvidia.com/a";
const R2: &str = "nvidia.com/b";

fn res(r2: bool) -> &'static str {
    if r2 { R2 } else { R1 }
}

#[derive(Clone, Debug)]
enum Change {
    Node {
        n: u8,
        gpus: u8,
        r2: bool,
    },
    NodeGone(u8),
    /// Claim `c`'s allocation of `count` GPUs on node `n`, its claim
    /// attached to VMI `v` (or to none).
    Allocation {
        c: u8,
        n: u8,
        count: u8,
        r2: bool,
        v: Option<u8>,
    },
    AllocationGone(u8),
    /// Claim `c` alone, now attached to VMI `v` (or to none), or owned by
    /// it (a template claim): which launcher its allocation covers
    /// changes, and nothing else.
    Attach {
        c: u8,
        v: Option<u8>,
        owned: bool,
    },
    /// Claim `c` gone, its allocation left (the watches bring them apart).
    ClaimGone(u8),
    /// Pod `p` bound to node `n`, asking `gpus`: VMI `v`'s launcher, or
    /// a pod outside gpu-claims.
    Pod {
        p: u8,
        n: u8,
        gpus: u8,
        r2: bool,
        v: Option<u8>,
    },
    PodGone(u8),
}

fn change() -> impl Strategy<Value = Change> {
    let node = 0..5u8;
    prop_oneof![
        (node.clone(), 0..9u8, any::<bool>()).prop_map(|(n, gpus, r2)| Change::Node {
            n,
            gpus,
            r2
        }),
        node.clone().prop_map(Change::NodeGone),
        (
            0..6u8,
            node.clone(),
            1..4u8,
            any::<bool>(),
            prop::option::of(0..3u8)
        )
            .prop_map(|(c, n, count, r2, v)| Change::Allocation { c, n, count, r2, v }),
        (0..6u8).prop_map(Change::AllocationGone),
        (0..6u8, prop::option::of(0..3u8), any::<bool>())
            .prop_map(|(c, v, owned)| Change::Attach { c, v, owned }),
        (0..6u8).prop_map(Change::ClaimGone),
        (
            0..6u8,
            node,
            0..4u8,
            any::<bool>(),
            prop::option::of(0..3u8)
        )
            .prop_map(|(p, n, gpus, r2, v)| Change::Pod { p, n, gpus, r2, v }),
        (0..6u8).prop_map(Change::PodGone),
    ]
}

fn apply(w: &WorldWriter, ch: Change) {
    match ch {
        Change::Node { n, gpus, r2 } => {
            w.load(node(&format!("n{n}")).gpus(res(r2), gpus.into()).obj());
        }
        Change::NodeGone(n) => {
            w.forget(Kind::Node, &format!("n{n}"));
        }
        Change::Allocation { c, n, count, r2, v } => {
            let mut b = claim("t", &format!("c{c}"))
                .count(count.into())
                .bound(&format!("n{n}"));
            if let Some(v) = v {
                b = b.attached(&format!("vm{v}"));
            }
            let c = b.build();
            w.load(Obj::Allocation(allocation_of(&c, res(r2))));
            w.load(Obj::Claim(c));
        }
        Change::AllocationGone(c) => {
            w.forget(Kind::Allocation, &format!("t/c{c}"));
        }
        Change::Attach { c, v, owned } => {
            let b = claim("t", &format!("c{c}")).bound("n0");
            w.load(match (v, owned) {
                (Some(v), false) => b.attached(&format!("vm{v}")).obj(),
                (Some(v), true) => b.owned_by(&format!("vm{v}"), &format!("u{v}")).obj(),
                (None, _) => b.obj(),
            });
        }
        Change::ClaimGone(c) => {
            w.forget(Kind::Claim, &format!("t/c{c}"));
        }
        Change::Pod { p, n, gpus, r2, v } => {
            let name = format!("p{p}");
            let b = match v {
                Some(v) => launcher("t", &name, &format!("vm{v}"), &format!("u{v}")),
                None => pod("t", &name),
            };
            let asks = gpus.to_string();
            w.load(
                b.scheduled(&format!("n{n}"))
                    .requests(&[(res(r2), &asks)])
                    .obj(),
            );
        }
        Change::PodGone(p) => {
            w.forget(Kind::Pod, &format!("t/p{p}"));
        }
    }
}

/// Every node with at least `min` of `resource` free, counted over every
/// node, in best fit's order.
fn counted(w: &World, resource: &str, min: u64) -> Vec<(u64, String)> {
    let mut all = Vec::new();
    w.for_each_node(|n| {
        let allocatable = n.allocatable(resource);
        let used = w.allocated_on(&n.name, resource) + w.used_beyond_allocations(&n.name, resource);
        let free = allocatable.saturating_sub(used);
        if allocatable > 0 && free >= min {
            all.push((free, n.name.clone()));
        }
    });
    all.sort();
    all
}

/// The index walked two nodes at a time, as best fit walks it in batches.
fn walked(w: &World, resource: &str, min: u64) -> Vec<(u64, String)> {
    let mut all: Vec<(u64, String)> = Vec::new();
    loop {
        let batch = w.nodes_by_free(resource, min, all.last(), 2);
        if batch.is_empty() {
            return all;
        }
        all.extend(batch);
    }
}

proptest! {
    #[test]
    fn g3_the_index_of_free_gpus_always_equals_a_count_over_every_node(
        changes in prop::collection::vec(change(), 1..80),
    ) {
        let w = WorldWriter::new(Config::default());
        for ch in changes {
            apply(&w, ch.clone());
            for (resource, min) in [(R1, 1), (R2, 1), (R1, 3)] {
                let (index, count) = (walked(&w, resource, min), counted(&w, resource, min));
                prop_assert_eq!(index, count, "{} of at least {} after {:?}", resource, min, ch);
            }
        }
    }
}
