//! The queue at the gate (issue 60): what a release costs while 10,000
//! sets wait. Every GPU of the world is held by an idle reservation (a
//! Bound claim of one GPU); 10,000 sets wait at the gate, one in ten
//! asking for a whole node, one in a thousand (a small one) of high
//! priority. Each release
//! deletes one reservation: L8 lets its GPU go, and every waiting set to
//! which that node matters is decided again, in O1's order. Measured
//! from the delete to the release's last write, side by side in the same
//! process with `queueing.headOfLineAfter: off` (the baseline: no head
//! holds anyone back) and `0s` (strict order: the head, a big set, holds
//! the later sets off the nodes that could hold it).
//!
//! Checked on the way, not timed: with no head holding, each freed GPU
//! goes to the first set in O1's order (the sets placed, in the order
//! they were placed, are in O1's order); in strict order no set after the
//! head takes a GPU of a node that could hold the head (I11).

use super::harness::Harness;
use super::world::GPU;
use super::{converged_store_of, in_system, percentile};
use crate::fixtures::{MetaBuilder, claim, class, launcher, node, priority_class, vmi};
use gpu_claims_actors::api::CLAIMS_ANNOTATION;
use gpu_claims_actors::ports::Obj;
use serde::Serialize;
use std::time::Duration;
use tokio::time::Instant;

const GPUS_PER_NODE: usize = 8;
const HOLDERS: &str = "holders";

#[derive(Serialize, Debug, Clone)]
pub struct QueueFigures {
    pub waiting_sets: usize,
    pub nodes: usize,
    pub releases: usize,
    pub off: ModeFigures,
    pub strict: ModeFigures,
    /// strict's median over off's.
    pub ratio_p50: f64,
}

#[derive(Serialize, Debug, Clone)]
pub struct ModeFigures {
    /// From the delete to the release's last write.
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Writes a release caused (median, and all of them).
    pub writes_p50: usize,
    pub writes: usize,
    /// Releases whose GPU a waiting set took.
    pub placed: usize,
    /// Sets placed out of O1's order (must be 0).
    pub out_of_order: usize,
}

fn waiting_ns(k: usize) -> String {
    format!("q-{}", k % 100)
}
fn waiting_vmi(k: usize) -> String {
    format!("q-vm-{k}")
}
fn waiting_claim(k: usize) -> String {
    format!("q-c-{k}")
}
fn holder(n: usize, g: usize) -> String {
    format!("h-{n}-{g}")
}
fn node_name(n: usize) -> String {
    format!("q-node-{n}")
}

/// Whether set `k` asks for a whole node, and whether it is of high priority.
fn big(k: usize) -> bool {
    k.is_multiple_of(10)
}
fn high(k: usize) -> bool {
    k % 1000 == 7
}

/// O1's place of set `k`: high priority first, then by `k` (its launcher
/// pod's creation).
fn order(k: usize) -> (bool, usize) {
    (!high(k), k)
}

fn world(nodes: usize, sets: usize) -> Vec<Obj> {
    let mut out = vec![
        class("queue", GPU).obj(),
        priority_class("high", 1000, false),
    ];
    for n in 0..nodes {
        out.push(
            node(&node_name(n))
                .gpus(GPU, GPUS_PER_NODE as u64)
                .kubelet("512", "4Ti")
                .obj(),
        );
        for g in 0..GPUS_PER_NODE {
            out.extend(
                claim(HOLDERS, &holder(n, g))
                    .class("queue")
                    .count(1)
                    .bound(&node_name(n))
                    .with_allocation(GPU),
            );
        }
    }
    for k in 0..sets {
        let (ns, name, uid) = (waiting_ns(k), waiting_vmi(k), format!("q-uid-{k}"));
        let count = if big(k) { GPUS_PER_NODE as u32 } else { 1 };
        out.push(
            claim(&ns, &waiting_claim(k))
                .class("queue")
                .count(count)
                .obj(),
        );
        let mut v = vmi(&ns, &name)
            .uid(&uid)
            .annotate(CLAIMS_ANNOTATION, &waiting_claim(k));
        if high(k) {
            v = v.priority("high");
        }
        out.push(v.obj());
        out.push(
            launcher(&ns, &format!("virt-launcher-{name}"), &name, &uid)
                .gated()
                .created_at(1_000_000 + k as i64)
                .obj(),
        );
    }
    out
}

/// The set a journal entry pins (a launcher pod G4 wrote), if any.
fn pinned_set(e: &crate::memory::Entry) -> Option<usize> {
    if e.rule != "G4" || e.kind != "Pod" || e.error.is_some() {
        return None;
    }
    e.name.strip_prefix("virt-launcher-q-vm-")?.parse().ok()
}

fn run(nodes: usize, sets: usize, releases: usize, after: Option<Duration>) -> ModeFigures {
    let store = converged_store_of(world(nodes, sets), nodes * GPUS_PER_NODE + sets);
    in_system(move || {
        Box::pin(async move {
            let h = Harness::start(store.clone());
            h.synced(nodes * GPUS_PER_NODE + sets).await;
            h.lead();
            h.settle(Duration::from_millis(200)).await;
            let mut config = (*h.env.world.config()).clone();
            config.queueing.head_of_line_after = after;
            h.supervisor
                .send(gpu_claims_actors::controller::ConfigChanged(config))
                .await
                .expect("the supervisor runs");
            h.settle(Duration::from_millis(200)).await;
            let (mut took, mut writes) = (Vec::new(), Vec::new());
            let mut placed_order = Vec::new();
            for r in 0..releases {
                // A reservation on every node in turn (a node freed once
                // would keep its GPU for the head in strict order).
                let (n, g) = (r % nodes, (r / nodes) % GPUS_PER_NODE);
                let (w0, j0) = (h.writes(), h.cluster.journal().entries.len());
                let t0 = Instant::now();
                let _ = h.store.delete("GPUClaim", HOLDERS, &holder(n, g));
                h.settle(Duration::from_millis(20)).await;
                let stamps = h.stamps.writes.lock().unwrap();
                let last = stamps[w0..].iter().map(|(at, _, _)| *at).max();
                took.push(last.map_or(Duration::ZERO, |at| at.saturating_duration_since(t0)));
                writes.push(stamps.len() - w0);
                drop(stamps);
                let journal = h.cluster.journal();
                placed_order.extend(journal.entries[j0..].iter().filter_map(pinned_set));
            }
            let out_of_order = placed_order
                .windows(2)
                .filter(|w| order(w[0]) > order(w[1]))
                .count();
            let ms = |d: Duration| (d.as_secs_f64() * 1e4).round() / 10.0;
            let mut sorted = writes.clone();
            sorted.sort_unstable();
            ModeFigures {
                p50_ms: ms(percentile(&mut took.clone(), 50.0)),
                p99_ms: ms(percentile(&mut took, 99.0)),
                writes_p50: sorted.get(sorted.len() / 2).copied().unwrap_or(0),
                writes: writes.iter().sum(),
                placed: placed_order.len(),
                out_of_order,
            }
        })
    })
}

/// `releases` releases on a world of `sets` waiting sets, once with no
/// head holding and once in strict order.
pub fn measure(sets: usize, releases: usize) -> QueueFigures {
    // As many GPUs as sets wait: every one of them held.
    let nodes = sets.div_ceil(GPUS_PER_NODE).max(1);
    eprintln!(
        "[queue] {sets} sets waiting on {nodes} full nodes, {releases} releases, headOfLineAfter off"
    );
    let off = run(nodes, sets, releases, None);
    eprintln!("[queue] off: {off:?}; now 0s (strict order)");
    let strict = run(nodes, sets, releases, Some(Duration::ZERO));
    eprintln!("[queue] strict: {strict:?}");
    QueueFigures {
        waiting_sets: sets,
        nodes,
        releases,
        ratio_p50: if off.p50_ms > 0.0 {
            (strict.p50_ms / off.p50_ms * 100.0).round() / 100.0
        } else {
            0.0
        },
        off,
        strict,
    }
}
