//! The story's queue scene (O1, O2): a node of eight A100s full of
//! 1-GPU jobs, an 8-GPU VM that comes after them, and a 1-GPU VM after
//! that. As the jobs end one GPU at a time, the small VM would take each
//! GPU as it frees and the big one would never start; the big one leads
//! its class, so the small one waits Queued and the big one gets the node.
//! The demo runs with `queueing.headOfLineAfter: 0s` (`HEAD_OF_LINE_AFTER`)
//! so that the scene plays in seconds; a cluster waits 5m by default.

use super::{B, Ctx, Snapshot, Step, waiting_for};
use crate::fixtures::{class, node};
use crate::memory::store::Subresource;
use gpu_claims_actors::api::{CONDITION_QUEUE_HEAD, Kind, to_json};
use std::time::Duration;

/// The demo's `queueing.headOfLineAfter`: strict order at once.
pub const HEAD_OF_LINE_AFTER: Duration = Duration::ZERO;

pub const A100: &str = "nvidia.com/GA100_A100_SXM4_80GB";
pub const A100_NODE: &str = "gpu-node-8";
const JOBS: u32 = 8;

fn job(i: u32) -> String {
    format!("vm-job-{i}")
}

/// Whether the claim `ns/name` says its set leads its class.
fn leads(s: &Snapshot, ns: &str, name: &str) -> bool {
    s.claim(ns, name).is_some_and(|c| {
        c.conditions()
            .iter()
            .any(|x| x.type_ == CONDITION_QUEUE_HEAD && x.status == "True")
    })
}

fn fill(c: &Ctx) {
    // As a kubelet registers its node: the object, then its status (a
    // create drops `status`, which is a subresource).
    let n = to_json(&node(A100_NODE).gpus(A100, 8).kubelet("128", "1Ti").obj());
    if let Ok(w) = c.store.create(Kind::Node.name(), n.clone()) {
        let mut v = w.object;
        v["status"] = n["status"].clone();
        let _ = c.store.update(Kind::Node.name(), v, Subresource::Status);
    }
    let _ = c
        .store
        .create(Kind::Class.name(), to_json(&class("a100", A100).obj()));
    for i in 1..=JOBS {
        c.standin.start_vm(B, &job(i), "a100", 1);
    }
}

pub(super) fn steps() -> Vec<Step> {
    let now = Duration::ZERO;
    vec![
        Step {
            title: "The platform adds gpu-node-8 (8 x A100) and class a100; tenant B fills it with eight 1-GPU jobs",
            rules: "G3 G4",
            act: fill,
            until: |s| (1..=JOBS).all(|i| s.phase(B, &format!("{}-gpu", job(i))) == "Attached"),
            hold: now,
        },
        Step {
            title: "vm-big asks for all eight A100s, then vm-small for one: both wait for room, and vm-big, \
                    which came first, leads a100 (its claim's QueueHead condition; `gpu-claims status` shows \
                    the queue)",
            rules: "O1 O2 G5",
            act: |c| {
                c.standin.start_vm(B, "vm-big", "a100", 8);
                c.standin.start_vm(B, "vm-small", "a100", 1);
            },
            until: |s| {
                waiting_for(s, B, "vm-big-gpu", "NoCapacity")
                    && waiting_for(s, B, "vm-small-gpu", "NoCapacity")
                    && leads(s, B, "vm-big-gpu")
            },
            hold: now,
        },
        Step {
            title: "vm-job-1 ends: one A100 frees, and vm-small would fit there, but gpu-node-8 could hold \
                    vm-big, which goes first: vm-small waits Queued",
            rules: "O2 O3 G5",
            act: |c| c.standin.stop_vm(B, &job(1)),
            until: |s| {
                s.phase(B, &format!("{}-gpu", job(1))) == "gone"
                    && waiting_for(s, B, "vm-small-gpu", "Queued")
            },
            hold: now,
        },
        Step {
            title: "The other jobs end, one A100 at a time: vm-big gets gpu-node-8, and vm-small, which waits \
                    for room now, leads a100 in its turn",
            rules: "O2 G3 G4",
            act: |c| {
                for i in 2..=JOBS {
                    c.standin.stop_vm(B, &job(i));
                }
            },
            until: |s| {
                s.phase(B, "vm-big-gpu") == "Attached"
                    && super::node_of(s, B, "vm-big-gpu") == A100_NODE
                    && leads(s, B, "vm-small-gpu")
            },
            hold: now,
        },
    ]
}
