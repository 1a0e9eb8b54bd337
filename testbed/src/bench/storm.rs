//! The placement storm (issue 23, target 3): a thousand VMIs reach the
//! gate at once on the converged world, every API write answered after a
//! real API server's latency (injected by the writer: the write waits
//! before it is applied), placed with many writes in flight and, side by
//! side in the same process, with one. A third storm, not timed, checks
//! I1-I5 (double booking among them: I1, I2) and the pins (I8's record
//! behind every pin) before every write and after the last, with the
//! writes of each set in G4's order and no more writes than the storm
//! needs.

use super::harness::Harness;
use super::world::Layout;
use super::{converged_store_of, in_system};
use crate::fixtures::{MetaBuilder, claim, launcher, vmi};
use crate::memory::MemCluster;
use gpu_claims_actors::api::CLAIMS_ANNOTATION;
use gpu_claims_actors::ports::Obj;
use serde::Serialize;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Serialize, Debug, Clone)]
pub struct StormFigures {
    pub sets: usize,
    /// The world the storm comes to, in claims besides the storm's.
    pub claims: usize,
    /// How long every write waits before it is applied (the writer injects it).
    pub write_latency_ms: f64,
    pub writes_in_flight: usize,
    /// From the VMIs' creation to the last set's pod pinned.
    pub seconds: f64,
    pub sets_per_s: f64,
    pub one_in_flight_seconds: f64,
    pub one_in_flight_sets_per_s: f64,
    pub ratio: f64,
    /// The checked storm (on a world of `checked_claims` and
    /// `checked_sets` sets): writes before which the invariants were
    /// checked, and what the checks found (must be none).
    pub checked_claims: usize,
    pub checked_sets: usize,
    pub checked_writes: usize,
    pub violations: Vec<String>,
    /// Sets whose writes were not allocation, then claim status, then pod.
    pub out_of_order_sets: usize,
    /// Placement's writes in the three storms, and the minimum (three a set).
    pub placement_writes: usize,
    pub placement_writes_min: usize,
}

/// The storm's claims live in these namespaces, one set each.
fn storm_ns(k: usize) -> String {
    format!("storm-{}", k % 20)
}
fn storm_claim(k: usize) -> String {
    format!("storm-c-{k}")
}
fn storm_vmi(k: usize) -> String {
    format!("storm-vm-{k}")
}
fn storm_pod(k: usize) -> String {
    format!("virt-launcher-{}", storm_vmi(k))
}

/// The storm's claims, made before it (L1 done): Pending, of a class the
/// spare nodes serve.
fn storm_claims(sets: usize) -> Vec<Obj> {
    (0..sets)
        .map(|k| {
            claim(&storm_ns(k), &storm_claim(k))
                .class("a100")
                .count(1)
                .obj()
        })
        .collect()
}

/// The storm itself: each set's VMI, naming its claim, and its launcher
/// pod at the gate.
fn storm_vmis(sets: usize) -> Vec<Obj> {
    (0..sets)
        .flat_map(|k| {
            let (ns, name, uid) = (storm_ns(k), storm_vmi(k), format!("storm-uid-{k}"));
            [
                vmi(&ns, &name)
                    .uid(&uid)
                    .annotate(CLAIMS_ANNOTATION, &storm_claim(k))
                    .obj(),
                launcher(&ns, &storm_pod(k), &name, &uid).gated().obj(),
            ]
        })
        .collect()
}

/// Storm pods pinned by the journal's entries from `from` on, and where
/// the journal ends: placement pins each pod once. (The journal, not the
/// store: a store read copies the object, and a thousand copies every
/// poll would be the benchmark's own cost on the controller's cores.)
fn pins_since(cluster: &MemCluster, from: usize) -> (usize, usize) {
    let j = cluster.journal();
    let pins = j.entries[from..]
        .iter()
        .filter(|e| {
            e.rule == "G4"
                && e.kind == "Pod"
                && e.error.is_none()
                && e.name.starts_with("virt-launcher-storm-vm-")
        })
        .count();
    (pins, j.entries.len())
}

/// One storm on a fresh copy of the converged world: its time, its
/// placement writes, sets out of G4's order, and the checks' findings.
struct Run {
    took: Duration,
    placement_writes: usize,
    out_of_order: usize,
    checked: usize,
    violations: Vec<String>,
}

fn run(layout: &Layout, sets: usize, latency: Duration, in_flight: u32, checked: bool) -> Run {
    let mut objects = layout.objects();
    objects.extend(storm_claims(sets));
    let store = converged_store_of(objects, layout.claims + sets);
    let claims = layout.claims + sets;
    in_system(move || {
        Box::pin(async move {
            let h = Harness::start(store.clone());
            h.synced(claims).await;
            h.lead();
            h.settle(Duration::from_millis(200)).await;
            let mut config = (*h.env.world.config()).clone();
            config.placement.writes_in_flight = in_flight;
            // As a reload does: through the supervisor, the world's writer.
            h.supervisor
                .send(gpu_claims_actors::controller::ConfigChanged(config))
                .await
                .expect("the supervisor runs");
            h.slow_writes(latency);
            if checked {
                h.check_every_write();
            }
            let j0 = h.cluster.journal().entries.len();
            let t0 = Instant::now();
            for o in storm_vmis(sets) {
                h.cluster.seed(&o);
            }
            let (mut pinned, mut cursor) = (0, j0);
            while pinned < sets {
                tokio::time::sleep(Duration::from_millis(2)).await;
                let (more, end) = pins_since(&h.cluster, cursor);
                pinned += more;
                cursor = end;
            }
            let took = t0.elapsed();
            h.settle(Duration::from_millis(50)).await;
            let (checked, mut violations) = h.checks();
            violations.extend(h.check_now());
            let journal = h.cluster.journal();
            let entries = &journal.entries[j0..];
            let placement_writes = entries.iter().filter(|e| e.rule == "G4").count();
            let position = |kind: &str, ns: &str, name: &str| {
                entries.iter().position(|e| {
                    e.rule == "G4"
                        && e.kind == kind
                        && e.namespace.as_deref() == Some(ns)
                        && e.name == name
                })
            };
            let out_of_order = (0..sets)
                .filter(|k| {
                    let ns = storm_ns(*k);
                    let order = [
                        position("GPUAllocation", &ns, &storm_claim(*k)),
                        position("GPUClaim", &ns, &storm_claim(*k)),
                        position("Pod", &ns, &storm_pod(*k)),
                    ];
                    !(order.iter().all(Option::is_some) && order.is_sorted())
                })
                .count();
            Run {
                took,
                placement_writes,
                out_of_order,
                checked,
                violations,
            }
        })
    })
}

/// The storm of `sets` VMIs on a world of `claims`, every write taking `latency`.
pub fn measure(claims: usize, sets: usize, latency: Duration) -> StormFigures {
    let layout = Layout::new(claims, 0);
    let window = gpu_claims_actors::config::PlacementConfig::default().writes_in_flight;
    eprintln!("[storm] {sets} sets on {claims} claims, {latency:?} a write, {window} in flight");
    let many = run(&layout, sets, latency, window, false);
    eprintln!(
        "[storm] {window} in flight: {:?}; now one in flight",
        many.took
    );
    // GPU_CLAIMS_BENCH_STORM_ONCE=1: the first storm alone (profiling).
    if std::env::var_os("GPU_CLAIMS_BENCH_STORM_ONCE").is_some() {
        std::process::exit(0);
    }
    let one = run(&layout, sets, latency, 1, false);
    eprintln!(
        "[storm] one in flight: {:?}; now the checked storm",
        one.took
    );
    // Checking every write re-reads the whole store: on a world of at most
    // 1,000 claims and 200 sets, so that it ends in a minute.
    let (check_claims, check_sets) = (claims.min(1000), sets.min(200));
    let checked = run(
        &Layout::new(check_claims, 0),
        check_sets,
        latency,
        window,
        true,
    );
    let per_s = |d: Duration| (sets as f64 / d.as_secs_f64()).round();
    let secs = |d: Duration| (d.as_secs_f64() * 1000.0).round() / 1000.0;
    StormFigures {
        sets,
        claims,
        write_latency_ms: latency.as_secs_f64() * 1000.0,
        writes_in_flight: window as usize,
        seconds: secs(many.took),
        sets_per_s: per_s(many.took),
        one_in_flight_seconds: secs(one.took),
        one_in_flight_sets_per_s: per_s(one.took),
        ratio: (one.took.as_secs_f64() / many.took.as_secs_f64() * 10.0).round() / 10.0,
        checked_claims: check_claims,
        checked_sets: check_sets,
        checked_writes: checked.checked,
        violations: checked.violations,
        out_of_order_sets: many.out_of_order + one.out_of_order + checked.out_of_order,
        placement_writes: many.placement_writes + one.placement_writes + checked.placement_writes,
        placement_writes_min: 3 * (2 * sets + check_sets),
    }
}
