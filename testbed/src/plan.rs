//! `gpu-claims plan`'s simulation: the same supervisor and actors as
//! `run`, against an in-memory cluster on a simulated clock. What it
//! prints is a contract other tools parse (README, "Commands").

use crate::memory::Entry;
use crate::memory::sim::{Sim, run_sim, seed, sim_store};
use crate::memory::store::EventType;
use crate::snapshot::{SnapshotError, load_each};
use gpu_claims_actors::api::{GPUClaim, is_deleting, pod::is_gated, true_condition_types};
use gpu_claims_actors::ports::{Kind, Obj};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// One object's state, as `--output state` prints it.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct State {
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
    pub exists: bool,
    pub deleting: bool,
    pub finalizers: Vec<String>,
    pub phase: Option<String>,
    pub node_name: Option<String>,
    pub attached_to: Option<String>,
    pub conditions: Option<Vec<String>>,
    pub gated: Option<bool>,
    /// Records and ResourceClaims: the devices held or allocated
    /// (`driver/pool/device`, sorted).
    pub devices: Option<Vec<String>>,
    /// Pods: the node their nodeSelector or required affinity pins them to.
    pub pinned: Option<String>,
    /// GPUClasses: their status.
    pub capacity: Option<u64>,
    pub allocated: Option<u64>,
}

/// Runs the controller on `objects`, settling at 0 and after each step:
/// its writes, and every object's state after the last settle.
pub fn simulate(
    config: gpu_claims_actors::Config,
    objects: Vec<Obj>,
    after: &[Duration],
) -> (Vec<Entry>, Vec<State>) {
    run(config, objects, after, true)
}

/// Runs the controller on `objects` as `simulate` does; the states only
/// when `states` (they cost a pass over every object, `writes` needs none).
pub fn run(
    config: gpu_claims_actors::Config,
    objects: Vec<Obj>,
    after: &[Duration],
    states: bool,
) -> (Vec<Entry>, Vec<State>) {
    run_sim(|| async move {
        let store = sim_store();
        for o in &objects {
            seed(&store, o);
        }
        // The store has them now; the snapshot's copies would only double
        // what a large dump costs.
        drop(objects);
        settled(Sim::start_on(config, store, None), after, states).await
    })
}

/// `plan` on a snapshot file: each object is stored as it is read, so a
/// cluster's dump costs what the store keeps of it and no more.
pub fn run_snapshot(
    config: gpu_claims_actors::Config,
    snapshot: &Path,
    after: &[Duration],
    states: bool,
) -> Result<(Vec<Entry>, Vec<State>), SnapshotError> {
    run_sim(|| async move {
        let store = sim_store();
        load_each(snapshot, |o| seed(&store, &o))?;
        Ok(settled(Sim::start_on(config, store, None), after, states).await)
    })
}

/// Settles `sim` at 0 and after each step: its writes, and with `states`
/// every object's state after the last settle.
async fn settled(sim: Sim, after: &[Duration], states: bool) -> (Vec<Entry>, Vec<State>) {
    {
        // What the run deletes is gone from the store at its end: its last
        // version comes from the change that deleted it. What exists at
        // the end is read from the store then (no copy of every object).
        let (mut changes, _) = sim.store.watch();
        sim.settle().await;
        for d in after {
            sim.advance(*d).await;
        }
        let mut gone: BTreeMap<(Kind, String, String), Value> = BTreeMap::new();
        while let Ok(ev) = changes.try_recv() {
            let Some(kind) = Kind::from_name(&ev.kind) else {
                continue;
            };
            let k = state_key(kind, &ev.object);
            if ev.type_ == EventType::Deleted {
                let mut v = ev.object;
                v["gone"] = true.into();
                gone.insert(k, v);
            } else {
                gone.remove(&k);
            }
        }
        let writes = sim.cluster.journal().effective().cloned().collect();
        if !states {
            return (writes, Vec::new());
        }
        let mut all: BTreeMap<(Kind, String, String), State> = BTreeMap::new();
        for kind in Kind::ALL {
            for v in sim.store.list(kind.name()).0 {
                let k = state_key(kind, &v);
                if let Some(s) = state(kind, v) {
                    all.insert(k, s);
                }
            }
        }
        for (k, v) in gone {
            if let Some(s) = state(k.0, v) {
                all.entry(k).or_insert(s);
            }
        }
        (writes, all.into_values().collect())
    }
}

/// The cluster's objects after settling: a snapshot of the converged world.
pub fn converged(
    config: gpu_claims_actors::Config,
    objects: Vec<Obj>,
    after: &[Duration],
) -> Vec<Obj> {
    run_sim(|| async move {
        let sim = Sim::start(config, &objects, None);
        sim.settle().await;
        for d in after {
            sim.advance(*d).await;
        }
        Kind::ALL
            .iter()
            .flat_map(|k| {
                sim.store
                    .list(k.name())
                    .0
                    .into_iter()
                    .filter_map(move |v| gpu_claims_actors::api::from_json(*k, v).ok())
            })
            .collect()
    })
}

fn state_key(kind: Kind, v: &Value) -> (Kind, String, String) {
    let m = &v["metadata"];
    (
        kind,
        m["namespace"].as_str().unwrap_or_default().into(),
        m["name"].as_str().unwrap_or_default().into(),
    )
}

fn state(kind: Kind, v: Value) -> Option<State> {
    let exists = v.get("gone").is_none();
    let devices = matches!(kind, Kind::Allocation | Kind::ResourceClaim)
        .then(|| crate::memory::devices_of(&v));
    let obj = gpu_claims_actors::api::from_json(kind, v).ok()?;
    let m = obj.meta();
    let claim: Option<&GPUClaim> = if let Obj::Claim(c) = &obj {
        Some(c)
    } else {
        None
    };
    let conditions = match &obj {
        Obj::Claim(c) => Some(true_condition_types(c.conditions())),
        Obj::Class(c) => Some(
            c.status
                .as_ref()
                .map(|s| true_condition_types(&s.conditions))
                .unwrap_or_default(),
        ),
        _ => None,
    };
    Some(State {
        kind: kind.name(),
        namespace: m.namespace.clone(),
        name: m.name.clone().unwrap_or_default(),
        exists,
        deleting: is_deleting(m),
        finalizers: m.finalizers.clone().unwrap_or_default(),
        phase: claim.map(|c| c.phase().as_str().to_string()),
        node_name: match &obj {
            Obj::Allocation(r) => Some(r.spec.node_name.clone()),
            Obj::ResourceClaim(c) => allocated_node(c),
            _ => claim.and_then(|c| c.node_name().map(str::to_string)),
        },
        attached_to: claim.and_then(|c| c.attached_vmi_name().map(str::to_string)),
        conditions,
        gated: if let Obj::Pod(p) = &obj {
            Some(is_gated(p))
        } else {
            None
        },
        devices,
        pinned: match &obj {
            Obj::Pod(p) => gpu_claims_actors::api::pod::pinned_node(p),
            _ => None,
        },
        capacity: class_status(&obj).and_then(|s| s.capacity),
        allocated: class_status(&obj).and_then(|s| s.allocated),
    })
}

fn class_status(o: &Obj) -> Option<&gpu_claims_actors::api::GPUClassStatus> {
    match o {
        Obj::Class(c) => c.status.as_ref(),
        _ => None,
    }
}

/// The node a ResourceClaim's allocation selects by `metadata.name`.
fn allocated_node(c: &k8s_openapi::api::resource::v1::ResourceClaim) -> Option<String> {
    let terms = &c
        .status
        .as_ref()?
        .allocation
        .as_ref()?
        .node_selector
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|f| f.key == "metadata.name" && f.operator == "In")
        .and_then(|f| f.values.as_ref()?.first().cloned())
}
