//! The single changes the benchmark makes, each with the writes it needs
//! at the least, and a whole-world pass of the rules: the baseline, the
//! original controller's model, where every change re-decides every claim.

use super::world::{
    FOREIGN_NS, Layout, Role, blocked_claim, claim_name, cuda_job, node_name, ns, spare_class,
    vmi_name,
};
use crate::memory::store::{Store, Subresource};
use gpu_claims_actors::api::{CONDITION_QUEUE_HEAD, ClaimPhase};
use gpu_claims_actors::rules::{ClaimMemory, capacity_of, decide_claim, decide_class};
use gpu_claims_actors::world::{World, key};
use serde_json::{Value, json};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// An Attached claim's VMI goes Succeeded: L5 detaches it (1 write).
    VmiFinal,
    /// A node goes NotReady: G6 marks each Bound or Attached claim there
    /// Lost (8 at most); each class it serves has less capacity.
    NodeDown,
    /// The node is Ready again: L4/G6 bring its Lost claims back.
    NodeUp,
    /// The nodes of a rack (about 1% of the claims) go NotReady at once:
    /// measured as a burst, to its last write.
    RackDown,
    /// The rack is Ready again.
    RackUp,
    /// A claim whose VM's launcher waits at the gate is deleted: L8
    /// releases it (its finalizer, 1 write); where its set led the class,
    /// the next set that waits leads it (its claim's QueueHead, O2).
    GateClaimDeleted,
    /// A class no claim uses is deleted: L11 releases it (1 write).
    ClassDeleted,
    /// A pod outside gpu-claims is bound to a node: what it takes is
    /// counted, and no write is needed.
    ForeignPodBound,
    /// A CUDA job outside gpu-claims finishes: the VM pinned to its node,
    /// waiting NoCapacity, is placed (G3, G4: allocation, claim status,
    /// pod; then L4 and the class's status: 5 writes); it led h100, so
    /// the next blocked VM leads it (its claim's QueueHead, O2).
    ForeignPodDone,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::VmiFinal => "vmi-final",
            Kind::NodeDown => "node-not-ready",
            Kind::NodeUp => "node-ready",
            Kind::RackDown => "rack-not-ready",
            Kind::RackUp => "rack-ready",
            Kind::GateClaimDeleted => "gated-claim-deleted",
            Kind::ClassDeleted => "class-deleted",
            Kind::ForeignPodBound => "foreign-pod-bound",
            Kind::ForeignPodDone => "foreign-pod-done",
        }
    }
}

/// The classes whose capacity a rack change moves (the spare ones have
/// no node).
const SERVED_CLASSES: usize = super::world::CLASSES.len();

fn set_status(store: &Store, kind: &str, mut obj: Value, f: impl FnOnce(&mut Value)) {
    f(&mut obj["status"]);
    store
        .update(kind, obj, Subresource::Status)
        .expect("a benchmark change applies");
}

fn node_ready(store: &Store, n: usize, ready: bool) {
    let node = store.get("Node", "", &node_name(n)).expect("the node");
    set_status(store, "Node", node, |s| {
        s["conditions"] =
            json!([{"type": "Ready", "status": if ready { "True" } else { "False" }}]);
    });
}

/// How many claims on `nodes` are in one of `phases`, as the controller's
/// cache has them (an index lookup: counting must not disturb the timing).
fn claims_on(world: &World, nodes: &[usize], phases: &[&str]) -> usize {
    nodes
        .iter()
        .flat_map(|n| world.claims_on_node(&node_name(*n)))
        .filter(|k| {
            world
                .claim(k)
                .is_some_and(|c| phases.contains(&c.phase().as_str()))
        })
        .count()
}

/// The nodes a node or rack change touches.
fn nodes_of(layout: &Layout, kind: Kind, k: usize) -> &[usize] {
    // Skip the first racks: their nodes are NotReady from the start.
    let half = (layout.racks.len() / 2).max(1);
    let rack = &layout.racks[(layout.racks.len() - half) + k % half];
    match kind {
        Kind::NodeDown | Kind::NodeUp => &rack[..1],
        _ => &rack[..],
    }
}

fn down(kind: Kind) -> bool {
    matches!(kind, Kind::RackDown | Kind::NodeDown)
}

/// The writes change `kind` number `k` needs at the least, counted on the
/// store before it is made (and before its clock starts).
pub fn needed(world: &World, layout: &Layout, kind: Kind, k: usize) -> usize {
    match kind {
        Kind::RackDown | Kind::RackUp | Kind::NodeDown | Kind::NodeUp => {
            let phases: &[&str] = if down(kind) {
                &["Bound", "Attached"]
            } else {
                &["Lost"]
            };
            claims_on(world, nodes_of(layout, kind, k), phases) + SERVED_CLASSES
        }
        Kind::VmiFinal | Kind::ClassDeleted => 1,
        Kind::GateClaimDeleted => {
            let pending = (0..layout.claims).filter(|i| layout.roles[*i] == Role::Pending);
            let claims = pending.map(|i| key(&ns(i), &claim_name(i)));
            let i = nth(layout, Role::Pending, k);
            1 + hands_the_lead(world, &key(&ns(i), &claim_name(i)), claims)
        }
        Kind::ForeignPodBound => 0,
        Kind::ForeignPodDone => {
            let blocked = (0..layout.blocked).map(|j| key(FOREIGN_NS, &blocked_claim(j)));
            5 + hands_the_lead(world, &key(FOREIGN_NS, &blocked_claim(k)), blocked)
        }
    }
}

/// O2: 1 where the set of `claim`, which goes (deleted, or placed), leads
/// its class and another of `others` still waits: that one leads next, and
/// its claim's QueueHead is written.
fn hands_the_lead(world: &World, claim: &str, others: impl Iterator<Item = String>) -> usize {
    let leads = world.claim(claim).is_some_and(|c| {
        c.conditions()
            .iter()
            .any(|x| x.type_ == CONDITION_QUEUE_HEAD && x.status == "True")
    });
    let next = || {
        others.filter(|o| o != claim).any(|o| {
            world
                .claim(&o)
                .is_some_and(|c| c.phase() == ClaimPhase::Pending)
        })
    };
    usize::from(leads && next())
}

/// Makes change `kind` number `k`.
pub fn apply(store: &Store, layout: &Layout, kind: Kind, k: usize) {
    match kind {
        Kind::VmiFinal => {
            let i = nth(layout, Role::Attached, k);
            let v = store
                .get("VirtualMachineInstance", &ns(i), &vmi_name(i))
                .expect("the VMI");
            set_status(store, "VirtualMachineInstance", v, |s| {
                s["phase"] = "Succeeded".into()
            });
        }
        Kind::RackDown | Kind::RackUp | Kind::NodeDown | Kind::NodeUp => {
            for n in nodes_of(layout, kind, k) {
                node_ready(store, *n, !down(kind));
            }
        }
        Kind::GateClaimDeleted => {
            let i = nth(layout, Role::Pending, k);
            store
                .delete("GPUClaim", &ns(i), &claim_name(i))
                .expect("the claim");
        }
        Kind::ClassDeleted => {
            store
                .delete("GPUClass", "", &spare_class(k))
                .expect("the class");
        }
        Kind::ForeignPodBound => {
            let n = node_name(layout.nodes - 1 - k % (layout.nodes / 2).max(1));
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"namespace": FOREIGN_NS, "name": format!("extra-{k}")},
                "spec": {"nodeName": n, "containers": [{"name": "main",
                    "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}]},
                "status": {"phase": "Running"}});
            store.create("Pod", pod).expect("the pod");
        }
        Kind::ForeignPodDone => {
            let p = store
                .get("Pod", FOREIGN_NS, &cuda_job(k))
                .expect("the CUDA job");
            set_status(store, "Pod", p, |s| s["phase"] = "Succeeded".into());
        }
    }
}

/// The k-th claim of a role.
pub fn nth(layout: &Layout, role: Role, k: usize) -> usize {
    layout
        .roles
        .iter()
        .enumerate()
        .filter(|(_, r)| **r == role)
        .nth(k)
        .map(|(i, _)| i)
        .expect("enough claims of the role")
}

/// How many claims have a role.
pub fn count(layout: &Layout, role: Role) -> usize {
    layout.roles.iter().filter(|r| **r == role).count()
}

/// The baseline: one pass of the lifecycle rules over every claim and
/// class, as the original controller made on every change.
pub fn whole_world_pass(world: &World) -> Duration {
    let cfg = world.config();
    let start = std::time::Instant::now();
    let now = tokio::time::Instant::now();
    let wall = k8s_openapi::jiff::Timestamp::now();
    let mut steps = 0usize;
    world.for_each_claim(|c| {
        let (step, _) = decide_claim(c, world, &cfg, now, wall, &ClaimMemory::default());
        steps += usize::from(std::hint::black_box(step) != gpu_claims_actors::rules::Step::Idle);
    });
    world.for_each_class(|k| {
        let capacity = capacity_of(k, world);
        let step = decide_class(
            k,
            world,
            capacity,
            0,
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(wall),
        );
        std::hint::black_box(step);
    });
    std::hint::black_box(steps);
    start.elapsed()
}

/// `gpu-claims status`'s report over `world`: the median of seven, said
/// at once beside the whole-world pass's median (what follows it in the
/// benchmark, racks and the storm, takes long on a large world).
pub fn status_report(world: &World, nodes: usize, whole_world_pass: Duration) -> Duration {
    let mut reports: Vec<Duration> = (0..7)
        .map(|_| {
            let t = std::time::Instant::now();
            std::hint::black_box(gpu_claims_actors::status::report(world));
            t.elapsed()
        })
        .collect();
    let median = super::percentile(&mut reports, 50.0);
    eprintln!(
        "[{} claims, {nodes} nodes] gpu-claims status's report: {median:?} (median of 7), one whole-world pass: {whole_world_pass:?} (median)",
        world.claim_count()
    );
    median
}
