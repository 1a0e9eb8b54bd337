//! The index itself: slices by pool, the devices of complete pools by
//! node (`pools`), the DRA classes' compiled selectors and the devices
//! that serve each on each node (`classes`), and the devices
//! ResourceClaims' allocations and GPUAllocations hold, with the taints
//! on them (`holds`).

mod classes;
mod holds;
mod managed;
mod pools;
pub mod taint_rules;

use classes::DraClass;
pub use classes::{ClassDevices, DraProblem};
pub use holds::{DeviceState, allocated_devices};
pub use managed::{Exclusive, ExclusiveOff};

use crate::api::Kind;
use k8s_openapi::api::resource::v1::{
    Device, DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

/// A device as DRA names it: driver, pool, device. The names are shared:
/// the index keeps a device in several places, and a pool's devices share
/// its driver's and pool's names, so a copy costs counts, not bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub device: Arc<str>,
}

impl DeviceId {
    pub fn new(driver: &str, pool: &str, device: &str) -> Self {
        Self {
            driver: driver.into(),
            pool: pool.into(),
            device: device.into(),
        }
    }

    pub fn pool_key(&self) -> PoolKey {
        (self.driver.clone(), self.pool.clone())
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// A pool as DRA names it: driver, pool.
pub type PoolKey = (Arc<str>, Arc<str>);

/// A device published in a complete pool: its name, its slice, and where
/// in it. Its driver and pool are its pool's, kept once beside the list
/// (32 bytes a device, not 64).
#[derive(Clone)]
pub(super) struct Placed {
    pub name: Arc<str>,
    pub slice: Arc<ResourceSlice>,
    pub index: u32,
}

/// A node's devices, per complete pool, by pool (most nodes have one
/// pool: a map per node would cost more than its devices).
pub(super) type NodePools = Vec<(PoolKey, Vec<Placed>)>;

impl Placed {
    pub fn device(&self) -> Option<&Device> {
        let at = usize::try_from(self.index).ok()?;
        self.slice.spec.devices.as_ref()?.get(at)
    }

    /// Its DeviceId in `pool`: shared names, counts copied, no bytes.
    pub fn id(&self, pool: &PoolKey) -> DeviceId {
        DeviceId {
            driver: pool.0.clone(),
            pool: pool.1.clone(),
            device: self.name.clone(),
        }
    }
}

/// Bytes matter here: at 15,000 nodes of 8 GPUs the index keeps 120,000
/// devices, so nothing is kept per device but its place on its node and
/// in the classes it serves. A device's node is found through its pool
/// (`pool_nodes`: one node for a node-local pool), not a map per device.
#[derive(Default)]
pub(super) struct DeviceIndex {
    slices: HashMap<String, Arc<ResourceSlice>>,
    /// Per pool, the names of its slices (every generation), sorted.
    pools: HashMap<PoolKey, Vec<String>>,
    /// The drivers' names, each kept once, and how many pools have it.
    drivers: HashMap<Arc<str>, usize>,
    /// Per complete pool, the nodes it publishes devices on, sorted.
    pool_nodes: HashMap<PoolKey, Vec<Arc<str>>>,
    /// Per node, per complete pool: the devices it publishes there, by
    /// name.
    nodes: HashMap<Arc<str>, NodePools>,
    device_classes: HashMap<String, Arc<DeviceClass>>,
    classes: HashMap<String, DraClass>,
    /// Per DeviceClass name, the DRA classes that name it.
    by_device_class: HashMap<String, BTreeSet<String>>,
    claims: HashMap<String, Arc<ResourceClaim>>,
    /// Per device, the ResourceClaim (`ns/name`) whose allocation names it.
    pub(super) holders: HashMap<DeviceId, String>,
    /// D8: per device two ResourceClaims name, the others (rare: one
    /// written by hand, or by an allocator that tolerates D7's taint).
    pub(super) also_held: HashMap<DeviceId, BTreeSet<String>>,
    /// D2, D3: per device, the GPUAllocation (`ns/name`) that records it
    /// and that record's class: held, whether or not its ResourceClaim
    /// is allocated yet.
    pub(super) allocated: HashMap<DeviceId, (String, String)>,
    /// Per GPUAllocation, the devices it records.
    by_allocation: HashMap<String, Vec<DeviceId>>,
    /// D5: ResourceClaimTemplates, by `ns/name`.
    templates: HashMap<String, Arc<ResourceClaimTemplate>>,
    /// D2, D7: DeviceTaintRules, by name and by the pool they select.
    pub(super) taint_rules: taint_rules::TaintRules,
    /// D7: per pool, how many devices records name in it.
    record_pools: HashMap<PoolKey, u32>,
    /// D7: whether gpu-claims closes the pools it manages.
    exclusive: managed::ExclusiveState,
    not_served: BTreeSet<Kind>,
}

/// `name` as `map` already keeps it as a key, or a new one: a name many
/// entries refer to is kept once.
fn shared<V>(map: &HashMap<Arc<str>, V>, name: &str) -> Arc<str> {
    match map.get_key_value(name) {
        Some((k, _)) => k.clone(),
        None => name.into(),
    }
}

impl DeviceIndex {
    pub fn template(&self, k: &str) -> Option<Arc<ResourceClaimTemplate>> {
        self.templates.get(k).cloned()
    }

    pub fn holder(&self, id: &DeviceId) -> Option<String> {
        self.holders.get(id).cloned()
    }

    /// Every ResourceClaim (`ns/name`) whose allocation names the device.
    pub fn holders_of(&self, id: &DeviceId) -> Vec<String> {
        self.holders
            .get(id)
            .into_iter()
            .chain(self.also_held.get(id).into_iter().flatten())
            .cloned()
            .collect()
    }

    pub fn claim(&self, k: &str) -> Option<Arc<ResourceClaim>> {
        self.claims.get(k).cloned()
    }

    pub fn device_class(&self, name: &str) -> Option<Arc<DeviceClass>> {
        self.device_classes.get(name).cloned()
    }

    pub fn keys(&self, kind: Kind) -> Vec<String> {
        let mut keys: Vec<String> = match kind {
            Kind::DeviceClass => self.device_classes.keys().cloned().collect(),
            Kind::ResourceSlice => self.slices.keys().cloned().collect(),
            Kind::ResourceClaim => self.claims.keys().cloned().collect(),
            Kind::ResourceClaimTemplate => self.templates.keys().cloned().collect(),
            Kind::DeviceTaintRule => self.taint_rules.names().cloned().collect(),
            _ => Vec::new(),
        };
        keys.sort();
        keys
    }
}
