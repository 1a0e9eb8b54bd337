//! Issue 58's cost of D7 in the DRA world: one DeviceTaintRule per
//! managed pool (here, a node's: 15,000 of them). Measured: writing every
//! pool's rule from scratch (the controller's first start with D7, on a
//! cluster whose VMs run), what the world keeps per rule, and a pool's
//! change to its rule's write: a new node's pool published (its rule
//! made) and unpublished (its rule deleted), side by side with the slice
//! changes of the same world.

use super::world::{node_name, typed};
use crate::bench::harness::Harness;
use crate::bench::in_system;
use crate::memory::store::Store;
use crate::standin::nvidia;
use gpu_claims_actors::api::{Kind, Obj, from_json};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What D7 costs the DRA world.
#[derive(serde::Serialize, Debug, Default)]
pub struct RuleFigures {
    /// Managed pools, and the rules the controller keeps for them.
    pub pools: usize,
    pub rules: usize,
    /// Every pool's rule written from scratch (release build, the API in
    /// memory): the writes, and the time from the controller leading.
    pub write_all_s: f64,
    pub write_all_writes: usize,
    /// Live heap the world adds per rule, the rule object included.
    pub bytes_per_rule: f64,
    /// A new pool published, then gone: its change to its rule's write.
    pub pool_changes: usize,
    pub pool_change_p50_us: f64,
    pub pool_change_p99_us: f64,
    /// Writes the pool changes made, against one each (create, delete).
    pub pool_change_writes: usize,
    pub pool_change_writes_min: usize,
}

/// The live heap a world adds loading the store's rules, per rule.
fn bytes_per_rule(store: &Store, live_bytes: fn() -> usize) -> f64 {
    let rules: Vec<Obj> = store
        .list("DeviceTaintRule")
        .0
        .into_iter()
        .filter_map(|v| from_json(Kind::DeviceTaintRule, v).ok())
        .collect();
    let n = rules.len().max(1) as f64;
    let world = gpu_claims_actors::world::WorldWriter::new(Default::default());
    let before = live_bytes();
    let mut rules = rules;
    for r in rules.drain(..) {
        world.load(r);
    }
    let grew = live_bytes().saturating_sub(before);
    drop(world);
    grew as f64 / n
}

/// Every rule written again by a controller that finds none (D7 turned
/// on over a running cluster): writes, and how long from leading.
fn write_all(store: &Arc<Store>, claims: usize) -> (usize, Duration) {
    for r in store.list("DeviceTaintRule").0 {
        let name = r["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        store
            .delete("DeviceTaintRule", "", &name)
            .expect("a rule goes");
    }
    let s = store.clone();
    in_system(move || {
        Box::pin(async move {
            let h = Harness::start(s.clone());
            h.synced(claims).await;
            let w0 = h.writes();
            let t0 = Instant::now();
            h.lead();
            h.settle(Duration::from_millis(300)).await;
            (h.writes() - w0, t0.elapsed())
        })
    })
}

/// A new node `n` whose pool NVIDIA's driver publishes: the node, then
/// (on the clock) its slice.
fn new_pool(store: &Store, n: usize) -> String {
    let name = format!("{}-new", node_name(n));
    let node = crate::fixtures::node(&name)
        .kubelet("128", "2Ti")
        .passthrough_gpus("NVIDIA H200", super::GPUS, "141Gi", "0x2335")
        .obj();
    store.seed("Node", gpu_claims_actors::api::to_json(&node));
    name
}

/// `changes` pools published and unpublished on a controller leading
/// over `store`: each change's time to its first write, the writes, and
/// the least they could be.
pub(super) async fn pool_changes(
    h: &Harness,
    store: &Arc<Store>,
    changes: usize,
) -> (Vec<Duration>, usize, usize) {
    let (mut took, mut writes, mut least) = (Vec::new(), 0, 0);
    for j in 0..changes {
        let name = new_pool(store, j);
        h.settle(Duration::from_millis(5)).await;
        // Published: the driver's slice for the node (its pool).
        let devices = nvidia::devices(&store.get("Node", "", &name).expect("the node"))
            .expect("the node's devices");
        let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{name}-gpu.nvidia.com")},
            "spec": {"driver": nvidia::DRIVER, "nodeName": name,
                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                "devices": devices}});
        let slice = match typed(Kind::ResourceSlice, slice) {
            Obj::ResourceSlice(s) => s,
            _ => unreachable!("a slice"),
        };
        for (on, change) in [(true, Some(slice)), (false, None)] {
            let w0 = h.writes();
            let slice_name = format!("{name}-gpu.nvidia.com");
            match change {
                Some(s) => {
                    store
                        .create("ResourceSlice", serde_json::to_value(s).expect("json"))
                        .expect("the slice is made");
                }
                None => {
                    store
                        .delete("ResourceSlice", "", &slice_name)
                        .expect("the slice goes");
                }
            }
            let t0 = tokio::time::Instant::now();
            h.settle(Duration::from_millis(5)).await;
            let w = h.stamps.writes.lock().expect("stamps")[w0..].to_vec();
            let rule_writes = w
                .iter()
                .filter(|(_, _, what)| what.contains("DeviceTaintRule"))
                .count();
            if let Some((first, _, _)) = w.first() {
                took.push(first.duration_since(t0));
            }
            writes += w.len();
            // Its rule made (published), or deleted (gone); and the
            // class's capacity, which the pool's devices move.
            least += 2;
            debug_assert_eq!(rule_writes, 1, "{} {on}", name);
        }
        store.delete("Node", "", &name).expect("the node goes");
        h.settle(Duration::from_millis(5)).await;
    }
    (took, writes, least)
}

/// Figures that need no harness of their own: the rules the converged
/// world holds, their bytes, and writing them all again.
pub(super) fn measure(
    store: &Arc<Store>,
    pools: usize,
    claims: usize,
    live_bytes: fn() -> usize,
) -> RuleFigures {
    let rules = store.list("DeviceTaintRule").0.len();
    let bytes = bytes_per_rule(store, live_bytes);
    eprintln!("[dra] D7: {rules} rules for {pools} pools; writing them all again");
    let (writes, took) = write_all(store, claims);
    RuleFigures {
        pools,
        rules,
        write_all_s: (took.as_secs_f64() * 100.0).round() / 100.0,
        write_all_writes: writes,
        bytes_per_rule: bytes.round(),
        ..Default::default()
    }
}
