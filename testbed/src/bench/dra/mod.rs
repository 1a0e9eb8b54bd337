//! Issue 35's cost of DRA: a world of `nodes` nodes, each with 8 GPUs in
//! a slice as NVIDIA's driver publishes them, and one VM per node asking
//! for 2 through a ResourceClaimTemplate (KubeVirt's DRA guide), placed by
//! the controller itself. Measured: what the controller's cache keeps per
//! device beyond the slice objects; a slice's change (a held GPU tainted
//! NoExecute, D6, and well again) to its first write, side by side with a
//! node's change (NotReady, G6, and Ready again) in the same world; and
//! the cold start over HTTP against a bare reflector of the same kinds.

mod rules;
mod world;

pub use rules::RuleFigures;
pub use world::objects;
use world::{converged, ready_node, record, slice_names, tainted_slice};

use super::harness::Harness;
use super::{in_system, percentile, us};
use crate::memory::store::{Store, Subresource};
use gpu_claims_actors::api::{Kind, Obj, from_json};
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;

/// GPUs each node publishes, and each VM asks for (VMs are placed best
/// fit: four to a node, as many nodes as they fill).
const GPUS: u32 = 8;
const ASKS: i64 = 2;
const NAMESPACES: usize = 50;
const CLASS: &str = "h200-dra";
const VFIO: &str = "vfio.gpu.nvidia.com";

#[derive(Serialize, Debug, Default)]
pub struct DraFigures {
    pub nodes: usize,
    pub devices: usize,
    /// VMs, each with a template claim of 2 GPUs.
    pub claims: usize,
    /// The controller placing every VM from scratch (release build: one core's worth).
    pub converge_s: f64,
    /// The slice objects' own bytes, per device, as a reflector keeps
    /// them (an `Arc` each).
    pub object_bytes_per_device: f64,
    /// Live heap the world adds loading the slices (moved in: their own
    /// heap is already counted, and each one's `Arc` is the object as a
    /// reflector keeps it), per device: its indexes and facts beyond the
    /// API's objects (target <= 256 B).
    pub beyond_object_bytes_per_device: f64,
    pub changes: usize,
    pub slice_change_p50_us: f64,
    pub slice_change_p99_us: f64,
    pub node_change_p50_us: f64,
    pub node_change_p99_us: f64,
    /// Slice p99 over node p99 (target <= 1.5).
    pub slice_over_node_p99: f64,
    /// Writes the changes made (each one: the claim's status).
    pub writes: usize,
    pub writes_min: usize,
    /// D7: the managed pools' rules (issue 58).
    pub rules: RuleFigures,
    pub cold: Option<super::cold::ColdFigures>,
}

/// What loading the slices costs a world whose nodes are loaded: live
/// heap per device, all of it and of it the slices' own bytes (a copy of
/// each, held while measured).
fn bytes_per_device(store: &Store, live_bytes: fn() -> usize) -> (f64, f64) {
    let world = gpu_claims_actors::world::WorldWriter::new(Default::default());
    let typed_all = |kind: Kind| -> Vec<Obj> {
        store
            .list(kind.name())
            .0
            .into_iter()
            .filter_map(|v| from_json(kind, v).ok())
            .collect()
    };
    for o in typed_all(Kind::Node)
        .into_iter()
        .chain(typed_all(Kind::DeviceClass))
        .chain(typed_all(Kind::Class))
    {
        world.load(o);
    }
    let mut slices = typed_all(Kind::ResourceSlice);
    let count = slices.len();
    let devices = (slices.len() * GPUS as usize).max(1) as f64;
    // The API's objects as a reflector keeps them: one `Arc` each.
    let before = live_bytes();
    let copies: Vec<_> = slices
        .iter()
        .filter_map(|o| match o {
            Obj::ResourceSlice(s) => Some(Arc::new(s.clone())),
            _ => None,
        })
        .collect();
    let objects = live_bytes().saturating_sub(before);
    drop(copies);
    let before = live_bytes();
    // Drained, not consumed: the list's own buffer stays allocated until
    // after the reading, or its freeing would be netted against the
    // world's growth.
    for s in slices.drain(..) {
        world.load(s);
    }
    // The class's devices counted, as the controller counts them at sync.
    let _ = world.class_capacity(CLASS);
    let loaded = live_bytes().saturating_sub(before);
    drop(slices);
    drop(world);
    // What the world keeps beyond the objects themselves.
    // Moved in, the objects' heap is already counted; the world's `Arc`
    // of each (as a reflector keeps it) is the object's own inline bytes.
    let arcs = count
        * (std::mem::size_of::<k8s_openapi::api::resource::v1::ResourceSlice>()
            + 2 * std::mem::size_of::<usize>());
    let beyond = loaded.saturating_sub(arcs);
    (beyond as f64 / devices, objects as f64 / devices)
}

/// Measures the DRA world of `nodes` nodes and `vms` VMs; `changes` of
/// each kind.
pub fn measure(
    nodes: usize,
    vms: usize,
    changes: usize,
    live_bytes: fn() -> usize,
    cold: Option<(usize, Arc<dyn super::cold::Operator>)>,
) -> DraFigures {
    eprintln!(
        "[dra] {nodes} nodes, {} devices: the controller places every VM",
        nodes * GPUS as usize
    );
    let (store, took) = converged(nodes, vms);
    let placed = store.list("GPUAllocation").0.len();
    if std::env::var_os("GPU_CLAIMS_BENCH_DEBUG").is_some() {
        for r in store.list("GPUAllocation").0 {
            eprintln!(
                "{} {} {}",
                r["metadata"]["namespace"], r["metadata"]["name"], r["spec"]["nodeName"]
            );
        }
    }
    assert_eq!(placed, vms, "every VM placed");
    let (world_bytes, object_bytes) = bytes_per_device(&store, live_bytes);
    let changes = changes.min(vms / 2);
    let s = store.clone();
    let mut rules = rules::measure(&store, nodes, vms, live_bytes);
    let (slice, node, writes, writes_min, pools) = in_system(move || {
        Box::pin(async move {
            let h = Harness::start(s.clone());
            h.synced(vms).await;
            h.lead();
            h.settle(Duration::from_millis(200)).await;
            let (mut slice, mut by_node) = (Vec::new(), Vec::new());
            let (mut writes, mut writes_min) = (0, 0);
            let slices = slice_names(&s);
            let mut allocations_on: std::collections::HashMap<String, usize> = Default::default();
            for r in s.list("GPUAllocation").0 {
                let n = r["spec"]["nodeName"].as_str().unwrap_or_default();
                *allocations_on.entry(n.to_string()).or_default() += 1;
            }
            for j in 0..changes {
                // Slice changes on even nodes, node changes on odd ones.
                let steps: [(bool, bool); 4] =
                    [(true, true), (true, false), (false, false), (false, true)];
                for (is_slice, on) in steps {
                    let i = 2 * j + usize::from(!is_slice);
                    // A slice change moves one claim; a node's, every
                    // claim on the node and the class's capacity.
                    let node = record(&s, i)["spec"]["nodeName"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let moved = if is_slice {
                        1
                    } else {
                        allocations_on.get(&node).copied().unwrap_or_default() + 1
                    };
                    let (kind, obj, sub) = if is_slice {
                        (
                            "ResourceSlice",
                            tainted_slice(&s, &slices, i, on),
                            Subresource::Main,
                        )
                    } else {
                        ("Node", ready_node(&s, &node, on), Subresource::Status)
                    };
                    let w0 = h.writes();
                    // The clock starts once the API holds the change: what
                    // the stand-in's store spends writing it (a slice is
                    // 37 KB: its managed fields, its copy for the watch
                    // cache) is the API server's, not the controller's.
                    // Its watch event's decoding is the controller's, and
                    // on the clock.
                    s.update(kind, obj, sub)
                        .expect("a benchmark change applies");
                    let t0 = tokio::time::Instant::now();
                    h.settle(Duration::from_millis(5)).await;
                    let w = h.stamps.writes.lock().unwrap()[w0..].to_vec();
                    if std::env::var_os("GPU_CLAIMS_BENCH_DEBUG").is_some() {
                        let what: Vec<String> = w
                            .iter()
                            .map(|(_, op, what)| format!("{op} {what}"))
                            .collect();
                        eprintln!(
                            "{} {on} (VM {i}): {moved} needed: {what:?}",
                            if is_slice { "slice" } else { "node" }
                        );
                    }
                    if let Some((first, _, _)) = w.first() {
                        let d = first.duration_since(t0);
                        if is_slice {
                            slice.push(d)
                        } else {
                            by_node.push(d)
                        }
                    }
                    writes += w.len();
                    // Each claim Lost, or back, and the class: one
                    // status write each.
                    writes_min += moved;
                }
            }
            // D7: pools published and gone, each to its rule's write.
            let pools = rules::pool_changes(&h, &s, changes).await;
            (slice, by_node, writes, writes_min, pools)
        })
    });
    let (mut pool, pool_writes, pool_least) = pools;
    rules.pool_changes = pool.len();
    rules.pool_change_p50_us = us(percentile(&mut pool, 50.0));
    rules.pool_change_p99_us = us(percentile(&mut pool, 99.0));
    rules.pool_change_writes = pool_writes;
    rules.pool_change_writes_min = pool_least;
    let (mut slice, mut node) = (slice, node);
    let s99 = percentile(&mut slice, 99.0);
    let n99 = percentile(&mut node, 99.0);
    let cold = cold.map(|(runs, operator)| {
        super::cold::measure_store(store.clone(), nodes, runs, operator).expect("the cold start")
    });
    DraFigures {
        nodes,
        devices: nodes * GPUS as usize,
        claims: vms,
        converge_s: (took.as_secs_f64() * 100.0).round() / 100.0,
        object_bytes_per_device: object_bytes.round(),
        beyond_object_bytes_per_device: world_bytes.round(),
        changes: 2 * changes,
        slice_change_p50_us: us(percentile(&mut slice, 50.0)),
        slice_change_p99_us: us(s99),
        node_change_p50_us: us(percentile(&mut node, 50.0)),
        node_change_p99_us: us(n99),
        slice_over_node_p99: (s99.as_secs_f64() / n99.as_secs_f64().max(1e-9) * 100.0).round()
            / 100.0,
        writes,
        writes_min,
        rules,
        cold,
    }
}
