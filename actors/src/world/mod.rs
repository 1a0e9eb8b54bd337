//! The world as the watches show it: the cached objects and the indexes
//! that let a change reach only the actors it concerns.
//!
//! It changes only through its [`WorldWriter`], which the supervisor holds
//! and calls as watches bring changes (`apply`, and `forget` for what a
//! relist no longer shows): one writer, by type, one function that stores,
//! indexes, marks the watch's progress and says what changed. Actors hold
//! an `Arc<World>`, whose methods only read; DashMaps keep reads
//! lock-free across arbiters. Nothing outside this module reaches the maps.

mod allocatable;
mod apply;
mod capacity;
pub mod devices;
mod dra_capacity;
mod free;
mod indexes;
mod meter;
mod pods;
mod priorities;
mod questions;
mod unreadable;
mod writer;

pub use apply::{
    AllocationChange, Change, ClaimChange, ClassChange, Freed, NodeChange, PodChange, QuotaChange,
    VmiChange,
};
pub use free::dra_key as dra_free_key;
pub use indexes::ClassUsage;
pub use meter::GpuSecondsRow;
pub use pods::{NodeUse, vmi_key_of};
pub use priorities::PriorityChange;
pub use writer::WorldWriter;

use crate::api::{
    GPUAllocation, GPUClaim, GPUClass, GPUQuota, LauncherPod, NodeFacts, PodUse, RestartMark, Vmi,
};
use crate::api::{Kind, Obj};
use crate::config::Config;
use dashmap::DashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// `namespace/name`: the key of namespaced objects.
pub fn key(namespace: &str, name: &str) -> String {
    let mut k = String::with_capacity(namespace.len() + name.len() + 1);
    k.push_str(namespace);
    k.push('/');
    k.push_str(name);
    k
}

/// A per-namespace sum: of one class, or of all (`class` None).
fn per_namespace(
    by_class: &DashMap<(String, String), u64>,
    total: &DashMap<String, u64>,
    ns: &str,
    class: Option<&str>,
) -> u64 {
    match class {
        Some(c) => by_class
            .get(&(ns.to_string(), c.to_string()))
            .map_or(0, |n| *n),
        None => total.get(ns).map_or(0, |n| *n),
    }
}

/// Splits `namespace/name`.
pub fn split_key(k: &str) -> (&str, &str) {
    k.split_once('/').unwrap_or(("", k))
}

#[derive(Default)]
pub struct World {
    claims: DashMap<String, Arc<GPUClaim>>,
    classes: DashMap<String, Arc<GPUClass>>,
    allocations: DashMap<String, Arc<GPUAllocation>>,
    quotas: DashMap<String, Arc<GPUQuota>>,
    vmis: DashMap<String, Arc<Vmi>>,
    pods: DashMap<String, Arc<LauncherPod>>,
    nodes: DashMap<String, Arc<NodeFacts>>,
    /// What each pod bound to a node uses there, by pod key.
    bound: DashMap<String, PodUse>,
    pub(crate) idx: indexes::Indexes,
    /// Per class: GPUs of its resource on Ready nodes it serves, kept up
    /// to date as nodes and classes change (O(selectors) per node change).
    capacity: capacity::Capacity,
    /// Per device resource: nodes by their free GPUs (G3's best fit).
    free: free::FreeIndex,
    /// Per device resource: nodes by their allocatable GPUs (O2's heads).
    allocatable: allocatable::AllocatableIndex,
    /// DRA (D1-D8): published devices, the DRA classes' devices, holds.
    devices: devices::Devices,
    /// D3: tenants' request selectors and what they answered per device.
    selections: devices::Selections,
    config: RwLock<Arc<Config>>,
    /// Per kind, the highest resourceVersion the watch has brought.
    observed: [AtomicU64; Kind::ALL.len()],
    /// Per kind, whether its watch has listed once.
    listed: [AtomicBool; Kind::ALL.len()],
    /// GPU-seconds held and attached per namespace and class.
    meter: meter::GpuSeconds,
    /// Per DRA class, its capacity by node (D2), kept as devices change.
    dra_capacity: dra_capacity::DraCapacity,
    /// O1: the PriorityClasses' values and the global default.
    priorities: priorities::Priorities,
    /// Per namespace: its GPUQuotas that cannot be read, name to why.
    unreadable_quotas: DashMap<String, std::collections::BTreeMap<String, String>>,
}

impl World {
    fn new(config: Config) -> Self {
        Self {
            config: RwLock::new(Arc::new(config)),
            ..Default::default()
        }
    }

    /// GPU-seconds held and attached per namespace and class, counted up
    /// to `now` (what a platform charges a tenant for).
    pub fn gpu_seconds(&self, now: std::time::Instant) -> Vec<GpuSecondsRow> {
        self.meter.read(now)
    }

    pub fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_config(&self, config: Config) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
    }

    /// How far the watch of `kind` has come: every change of that kind up
    /// to this resourceVersion is in the cache (a watch brings one kind's
    /// changes in resourceVersion order, and a list is a snapshot).
    pub fn observed_rv(&self, kind: Kind) -> u64 {
        self.observed
            .get(kind as usize)
            .map_or(0, |o| o.load(Ordering::Acquire))
    }

    /// Whether the watch of `kind` has listed once: before, the cache
    /// cannot say an object of the kind does not exist.
    pub fn listed(&self, kind: Kind) -> bool {
        self.listed
            .get(kind as usize)
            .is_some_and(|l| l.load(Ordering::Acquire))
    }

    /// The watch of `kind` listed (as of `list_rv`, when the lister knows
    /// it: every change up to it is in the cache); called after the cache
    /// has the list.
    fn relisted(&self, kind: Kind, list_rv: Option<u64>) {
        if let Some(rv) = list_rv {
            self.observe_rv(kind, rv);
        }
        if let Some(l) = self.listed.get(kind as usize) {
            l.store(true, Ordering::Release);
        }
    }

    /// The watch of `kind` brought a change at `rv` (or listed up to it);
    /// called after the cache has it.
    fn observe_rv(&self, kind: Kind, rv: u64) {
        // Kinds read live only (`Kind::Vm`) have no watch to follow.
        if let Some(o) = self.observed.get(kind as usize) {
            o.fetch_max(rv, Ordering::AcqRel);
        }
    }

    /// Stores an object as a list brings it, indexes and all: a world
    /// built from a list (a fresh controller's view, in the I6 check).
    fn load(&self, obj: Obj) {
        let _ = self.apply(obj, false);
    }

    /// How many claims and classes the cache holds.
    pub fn claim_count(&self) -> usize {
        self.claims.len()
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn class_count(&self) -> usize {
        self.classes.len()
    }

    pub fn has_claim(&self, k: &str) -> bool {
        self.claims.contains_key(k)
    }

    pub fn has_class(&self, name: &str) -> bool {
        self.classes.contains_key(name)
    }

    /// The keys the cache holds of `kind`, sorted: the same order on every
    /// run (`plan` is deterministic). For pods: launchers and every pod
    /// whose use of a node is kept.
    pub fn keys(&self, kind: Kind) -> Vec<String> {
        fn of<T>(m: &DashMap<String, T>) -> Vec<String> {
            m.iter().map(|e| e.key().clone()).collect()
        }
        let mut keys = match kind {
            Kind::Claim => of(&self.claims),
            Kind::Class => of(&self.classes),
            Kind::Allocation => of(&self.allocations),
            Kind::Quota => of(&self.quotas),
            Kind::Vmi => of(&self.vmis),
            Kind::Node => of(&self.nodes),
            Kind::Vm => Vec::new(),
            Kind::DeviceClass
            | Kind::ResourceSlice
            | Kind::ResourceClaim
            | Kind::ResourceClaimTemplate
            | Kind::DeviceTaintRule => self.dra_keys(kind),
            Kind::PriorityClass => self.priority_class_names(),
            Kind::Pod => {
                let mut k = of(&self.pods);
                k.extend(self.bound_pod_keys());
                k
            }
        };
        keys.sort();
        keys.dedup();
        keys
    }

    /// Each node, in no fixed order.
    pub fn for_each_node(&self, mut f: impl FnMut(&NodeFacts)) {
        for n in self.nodes.iter() {
            f(n.value());
        }
    }

    /// Each VMI, in no fixed order.
    pub fn for_each_vmi(&self, mut f: impl FnMut(&str, &Vmi)) {
        for v in self.vmis.iter() {
            f(v.key(), v.value());
        }
    }

    /// Each claim, in no fixed order.
    pub fn for_each_claim(&self, mut f: impl FnMut(&GPUClaim)) {
        for c in self.claims.iter() {
            f(c.value());
        }
    }

    /// Each class, in no fixed order.
    pub fn for_each_class(&self, mut f: impl FnMut(&GPUClass)) {
        for c in self.classes.iter() {
            f(c.value());
        }
    }

    /// A launcher pod, by key.
    pub fn launcher(&self, k: &str) -> Option<Arc<LauncherPod>> {
        self.pods.get(k).map(|p| p.clone())
    }

    pub fn claim(&self, k: &str) -> Option<Arc<GPUClaim>> {
        self.claims.get(k).map(|c| c.clone())
    }

    pub fn class(&self, name: &str) -> Option<Arc<GPUClass>> {
        self.classes.get(name).map(|c| c.clone())
    }

    pub fn vmi(&self, k: &str) -> Option<Arc<Vmi>> {
        self.vmis.get(k).map(|v| v.clone())
    }

    pub fn node(&self, name: &str) -> Option<Arc<NodeFacts>> {
        self.nodes.get(name).map(|n| n.clone())
    }

    pub fn allocation(&self, k: &str) -> Option<Arc<GPUAllocation>> {
        self.allocations.get(k).map(|r| r.clone())
    }

    pub fn quota(&self, k: &str) -> Option<Arc<GPUQuota>> {
        self.quotas.get(k).map(|q| q.clone())
    }
}
