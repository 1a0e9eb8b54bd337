//! The index itself: slices by pool, the devices of complete pools by
//! node, the DRA classes' compiled selectors and the devices that serve
//! each on each node, and the devices ResourceClaims' allocations hold.

use super::DevicesChange;
use crate::api::{GPUClassSpec, Kind};
use crate::dra::{ClassSelectors, PoolState, Published, SelectorInvalid};
use k8s_openapi::api::resource::v1::{
    AllocationResult, Device, DeviceClass, DeviceTaint, DeviceTaintRule, ResourceClaim,
    ResourceClaimTemplate, ResourceSlice,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
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

pub(super) type PoolKey = (Arc<str>, Arc<str>);

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

/// Why a DRA class serves nothing.
#[derive(Clone, Debug, PartialEq)]
pub enum DraProblem {
    /// The API server serves these DRA kinds not.
    NotServed(Vec<Kind>),
    /// Its DeviceClass does not exist.
    DeviceClassMissing(String),
    /// A selector (the DeviceClass's or its own) does not compile, or
    /// errors on a device.
    SelectorInvalid(SelectorInvalid),
}

impl fmt::Display for DraProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DraProblem::NotServed(kinds) => {
                let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
                write!(
                    f,
                    "the API server does not serve resource.k8s.io/v1 {}: this cluster has no DRA, so the class serves no device",
                    names.join(", ")
                )
            }
            DraProblem::DeviceClassMissing(dc) => write!(
                f,
                "DeviceClass {dc} does not exist: the class serves no device until it does"
            ),
            DraProblem::SelectorInvalid(e) => write!(
                f,
                "{e} (expression: {}); the class serves no device until it is fixed",
                e.expression
            ),
        }
    }
}

/// A DRA GPUClass as the index keeps it.
struct DraClass {
    device_class: String,
    selectors: Vec<String>,
    /// None while its DeviceClass does not exist.
    compiled: Option<Result<ClassSelectors, SelectorInvalid>>,
    /// Per node, the devices that serve it: their positions in the node's
    /// devices (by pool, then name), 4 bytes each rather than a name. A
    /// node's devices change only when a pool republishes there, and that
    /// evaluates every class on the node again.
    serving: BTreeMap<Arc<str>, Vec<u32>>,
    /// Devices a selector errors on: while any does, it serves nothing.
    errors: BTreeMap<DeviceId, SelectorInvalid>,
}

/// What the index knows of one DRA class: its devices per node (by pool,
/// then name) and why it serves none, if it does not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassDevices {
    pub by_node: BTreeMap<String, Vec<DeviceId>>,
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
    /// D2, D3: per device, the GPUAllocation (`ns/name`) that records it
    /// and that record's class: held, whether or not its ResourceClaim
    /// is allocated yet.
    pub(super) recorded: HashMap<DeviceId, (String, String)>,
    /// Per GPUAllocation, the devices it records.
    records: HashMap<String, Vec<DeviceId>>,
    /// D5: ResourceClaimTemplates, by `ns/name`.
    templates: HashMap<String, Arc<ResourceClaimTemplate>>,
    /// D2: DeviceTaintRules, by name (few: a platform's).
    taint_rules: BTreeMap<String, Arc<DeviceTaintRule>>,
    not_served: BTreeSet<Kind>,
}

/// Where a recorded device stands (D6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceState {
    /// Published in its complete pool; whether a taint with effect
    /// NoExecute is on it.
    Published { no_execute: bool },
    /// Its pool has slices, but not all of its newest generation: its
    /// devices are neither served nor lost until it is complete again.
    PoolIncomplete,
    /// Its pool is complete without it, or has no slices at all.
    Gone,
}

/// D1's complete pool, over the slices of its newest generation (node-
/// local ones: the rest publish nothing gpu-claims places on): exactly
/// as many as each says the pool has.
fn pool_state(newest: &[Arc<ResourceSlice>]) -> PoolState {
    let local = newest
        .iter()
        .filter(|s| s.spec.node_name.as_deref().is_some_and(|n| !n.is_empty()));
    let present = local.count();
    let expected = newest
        .iter()
        .map(|s| s.spec.pool.resource_slice_count)
        .max()
        .unwrap_or(0);
    if present > 0 && i64::try_from(present).ok() == Some(expected) {
        PoolState::Complete
    } else {
        PoolState::Incomplete { present, expected }
    }
}

/// `name` as `map` already keeps it as a key, or a new one: a name many
/// entries refer to is kept once.
fn shared<V>(map: &HashMap<Arc<str>, V>, name: &str) -> Arc<str> {
    match map.get_key_value(name) {
        Some((k, _)) => k.clone(),
        None => name.into(),
    }
}

/// Whether two versions of a slice publish the same devices to the same
/// node and pool generation, as selectors read them (driver, attributes,
/// capacity, allowMultipleAllocations), in the same order: then the pool's
/// completeness, its devices' positions on the node and every selector's
/// answer are as they were.
fn same_to_selectors(old: &ResourceSlice, now: &ResourceSlice) -> bool {
    let (a, b) = (&old.spec, &now.spec);
    let count = |s: &ResourceSlice| s.spec.devices.as_ref().map_or(0, Vec::len);
    a.driver == b.driver
        && a.node_name == b.node_name
        && a.all_nodes == b.all_nodes
        && a.node_selector == b.node_selector
        && a.per_device_node_selection == b.per_device_node_selection
        && a.pool == b.pool
        && count(old) == count(now)
        && a.devices
            .iter()
            .flatten()
            .zip(b.devices.iter().flatten())
            .all(|(x, y)| {
                x.name == y.name
                    && x.attributes == y.attributes
                    && x.capacity == y.capacity
                    && x.allow_multiple_allocations == y.allow_multiple_allocations
            })
}

/// Whether a DeviceTaintRule's selector takes the device: every field it
/// sets matches; no selector takes none (upstream's rule).
fn selects(rule: &DeviceTaintRule, id: &DeviceId) -> bool {
    let Some(s) = &rule.spec.device_selector else {
        return false;
    };
    let is = |f: &Option<String>, v: &str| f.as_deref().is_none_or(|f| f == v);
    is(&s.driver, &id.driver) && is(&s.pool, &id.pool) && is(&s.device, &id.device)
}

/// The devices a claim's allocation names.
fn allocated(c: &ResourceClaim) -> Vec<DeviceId> {
    c.status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .map(allocated_devices)
        .unwrap_or_default()
}

/// The devices an allocation names, in order.
pub fn allocated_devices(a: &AllocationResult) -> Vec<DeviceId> {
    a.devices
        .iter()
        .flat_map(|d| d.results.iter().flatten())
        .map(|r| DeviceId::new(&r.driver, &r.pool, &r.device))
        .collect()
}

impl DeviceIndex {
    pub fn put_slice(&mut self, name: &str, now: Option<Arc<ResourceSlice>>) -> DevicesChange {
        let pool_of = |s: &ResourceSlice| -> PoolKey {
            (
                s.spec.driver.as_str().into(),
                s.spec.pool.name.as_str().into(),
            )
        };
        let mut pools: BTreeSet<PoolKey> = BTreeSet::new();
        let old = self.slices.remove(name);
        // A change selectors cannot see (a taint, most often: D6) leaves
        // what serves which class as it was; CEL is the costly part of a
        // slice's change, so it is not run again for nothing.
        let selectors_see_change = match (&old, &now) {
            (Some(old), Some(now)) => !same_to_selectors(old, now),
            _ => true,
        };
        // A slice that stays in its pool keeps its place among the pool's
        // names: the pool is read again below, not forgotten and made anew.
        let old = old.filter(|old| {
            now.as_ref().is_none_or(|now| {
                (&old.spec.driver, &old.spec.pool.name) != (&now.spec.driver, &now.spec.pool.name)
            })
        });
        if let Some(old) = old {
            let p = pool_of(&old);
            if let Some(names) = self.pools.get_mut(&p) {
                names.retain(|n| n != name);
                if names.is_empty() {
                    self.pools.remove(&p);
                    if let Some(n) = self.drivers.get_mut(&p.0) {
                        *n = n.saturating_sub(1);
                        if *n == 0 {
                            self.drivers.remove(&p.0);
                        }
                    }
                }
            }
            pools.insert(p);
        }
        if let Some(s) = now {
            // The pool's names as the index already keeps them: one copy
            // of a pool's (and a driver's) name however many refer to it.
            let p = match self.pools.get_key_value(&pool_of(&s)) {
                Some((k, _)) => k.clone(),
                None => {
                    let driver = shared(&self.drivers, &s.spec.driver);
                    *self.drivers.entry(driver.clone()).or_default() += 1;
                    (driver, s.spec.pool.name.as_str().into())
                }
            };
            let names = self.pools.entry(p.clone()).or_default();
            if let Err(at) = names.binary_search_by(|n| n.as_str().cmp(name)) {
                names.insert(at, name.to_string());
                names.shrink_to_fit();
            }
            self.slices.insert(name.to_string(), s);
            pools.insert(p);
        }
        let mut change = DevicesChange::default();
        for p in pools {
            change.nodes.extend(self.republish(&p));
        }
        if selectors_see_change {
            change.classes = self.evaluate_nodes(&change.nodes);
        }
        // A device's taints and counters decide whether it is free, not
        // whether it serves: every class with devices there counts again.
        for n in &change.nodes {
            change.classes.extend(self.classes_on(n));
        }
        change
    }

    /// Reads a pool again: its devices on their nodes if it is complete
    /// at its newest generation, none otherwise. The nodes it touched.
    fn republish(&mut self, p: &PoolKey) -> BTreeSet<String> {
        let mut touched = BTreeSet::new();
        for node in self.pool_nodes.remove(p).unwrap_or_default() {
            let Some(pools) = self.nodes.get_mut(&node) else {
                continue;
            };
            pools.retain(|(k, _)| k != p);
            if pools.is_empty() {
                self.nodes.remove(&node);
            }
            touched.insert(node.to_string());
        }
        let slices = self.pool_slices(p);
        if pool_state(&slices) != PoolState::Complete {
            return touched;
        }
        for s in slices {
            let Some(node) = s.spec.node_name.as_deref().filter(|n| !n.is_empty()) else {
                continue;
            };
            let node = shared(&self.nodes, node);
            // Lists of one, mostly (a node-local pool, a node's one
            // driver): kept at their length, not at a growing Vec's four.
            let nodes = self.pool_nodes.entry(p.clone()).or_default();
            if let Err(at) = nodes.binary_search(&node) {
                nodes.insert(at, node.clone());
                nodes.shrink_to_fit();
            }
            let pools = self.nodes.entry(node.clone()).or_default();
            let at = match pools.binary_search_by(|(k, _)| k.cmp(p)) {
                Ok(at) => at,
                Err(at) => {
                    pools.insert(at, (p.clone(), Vec::new()));
                    pools.shrink_to_fit();
                    at
                }
            };
            let list = &mut pools[at].1;
            // A slice lists at most 128 devices (the API's limit): a
            // position past u32 is not kept.
            for (index, d) in s.spec.devices.iter().flatten().enumerate() {
                let Ok(index) = u32::try_from(index) else {
                    break;
                };
                list.push(Placed {
                    name: d.name.as_str().into(),
                    slice: s.clone(),
                    index,
                });
            }
            list.sort_by(|a, b| a.name.cmp(&b.name));
            list.shrink_to_fit();
            touched.insert(node.to_string());
        }
        touched
    }

    /// Evaluates every DRA class on these nodes' devices; the classes
    /// whose devices there changed.
    fn evaluate_nodes(&mut self, nodes: &BTreeSet<String>) -> BTreeSet<String> {
        let names: Vec<String> = self.classes.keys().cloned().collect();
        let mut moved = BTreeSet::new();
        for class in names {
            for node in nodes {
                if self.evaluate(&class, node) {
                    moved.insert(class.clone());
                }
            }
        }
        moved
    }

    /// The devices of `node` that serve `class`, evaluated again; true
    /// when they (or its errors there) changed.
    fn evaluate(&mut self, class: &str, node: &str) -> bool {
        let Some(c) = self.classes.get(class) else {
            return false;
        };
        let mut serving: Vec<u32> = Vec::new();
        let mut errors = BTreeMap::new();
        if let Some(Ok(selectors)) = &c.compiled {
            for (at, (pool, d)) in self.node_devices(node).enumerate() {
                let Some(device) = d.device() else { continue };
                let published = Published {
                    node,
                    driver: &pool.0,
                    pool: &pool.1,
                    device,
                };
                match selectors.serves(&published) {
                    // More than u32::MAX devices on a node cannot be
                    // published (a slice holds at most 128).
                    Ok(true) => serving.extend(u32::try_from(at).ok()),
                    Ok(false) => {}
                    Err(e) => {
                        errors.insert(d.id(pool), e);
                    }
                }
            }
        }
        let before_errors: Vec<DeviceId> = c
            .errors
            .keys()
            .filter(|id| self.node_of(id).is_none_or(|n| n == node))
            .cloned()
            .collect();
        let Some(c) = self.classes.get_mut(class) else {
            return false;
        };
        let mut changed = false;
        for id in before_errors {
            if !errors.contains_key(&id) {
                c.errors.remove(&id);
                changed = true;
            }
        }
        for (id, e) in errors {
            if c.errors.insert(id, e.clone()).as_ref() != Some(&e) {
                changed = true;
            }
        }
        serving.shrink_to_fit();
        let old = if serving.is_empty() {
            c.serving.remove(node)
        } else {
            c.serving.insert(shared(&self.nodes, node), serving.clone())
        };
        changed || old.unwrap_or_default() != serving
    }

    /// Evaluates one class on every node with devices.
    fn evaluate_everywhere(&mut self, class: &str) {
        if let Some(c) = self.classes.get_mut(class) {
            c.serving.clear();
            c.errors.clear();
        }
        let nodes: Vec<Arc<str>> = self.nodes.keys().cloned().collect();
        for n in nodes {
            self.evaluate(class, &n);
        }
    }

    fn compile(
        &self,
        class: &str,
        c: &DraClass,
    ) -> Option<Result<ClassSelectors, SelectorInvalid>> {
        let dc = self.device_classes.get(&c.device_class)?;
        let dc_selectors: Vec<String> = dc
            .spec
            .iter()
            .flat_map(|s| s.selectors.iter().flatten())
            .filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone()))
            .collect();
        Some(ClassSelectors::compile(
            &c.device_class,
            &dc_selectors,
            class,
            &c.selectors,
        ))
    }

    /// A GPUClass made, changed or removed; true when its devices or its
    /// standing may have changed.
    pub fn put_class(&mut self, name: &str, spec: Option<&GPUClassSpec>) -> bool {
        let wanted = spec.and_then(|s| {
            let dc = s.device_class()?;
            Some((dc.to_string(), s.selector_expressions()))
        });
        let had = self
            .classes
            .get(name)
            .map(|c| (c.device_class.clone(), c.selectors.clone()));
        if had == wanted {
            return false;
        }
        if let Some((dc, _)) = had
            && let Some(set) = self.by_device_class.get_mut(&dc)
        {
            set.remove(name);
            if set.is_empty() {
                self.by_device_class.remove(&dc);
            }
        }
        self.classes.remove(name);
        let Some((device_class, selectors)) = wanted else {
            return true;
        };
        self.by_device_class
            .entry(device_class.clone())
            .or_default()
            .insert(name.to_string());
        let mut c = DraClass {
            device_class,
            selectors,
            compiled: None,
            serving: BTreeMap::new(),
            errors: BTreeMap::new(),
        };
        c.compiled = self.compile(name, &c);
        self.classes.insert(name.to_string(), c);
        self.evaluate_everywhere(name);
        true
    }

    /// A DeviceClass made, changed or removed: the classes naming it are
    /// compiled and evaluated again.
    pub fn put_device_class(&mut self, name: &str, now: Option<Arc<DeviceClass>>) -> DevicesChange {
        let same = match (&now, self.device_classes.get(name)) {
            (Some(n), Some(o)) => n.spec == o.spec,
            (None, None) => true,
            _ => false,
        };
        match now {
            Some(c) => self.device_classes.insert(name.to_string(), c),
            None => self.device_classes.remove(name),
        };
        let mut change = DevicesChange::default();
        if same {
            return change;
        }
        let classes: Vec<String> = self
            .by_device_class
            .get(name)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        for class in classes {
            if let Some(c) = self.classes.get(&class) {
                let compiled = self.compile(&class, c);
                if let Some(c) = self.classes.get_mut(&class) {
                    c.compiled = compiled;
                }
            }
            self.evaluate_everywhere(&class);
            change.classes.insert(class);
        }
        change
    }

    /// A ResourceClaim made, changed or removed: the devices its
    /// allocation names are held by it.
    pub fn put_claim(&mut self, k: &str, now: Option<Arc<ResourceClaim>>) -> DevicesChange {
        let before = self.claims.get(k).map(|c| allocated(c)).unwrap_or_default();
        let after = now.as_deref().map(allocated).unwrap_or_default();
        match now {
            Some(c) => self.claims.insert(k.to_string(), c),
            None => self.claims.remove(k),
        };
        if before == after {
            return DevicesChange::default();
        }
        for id in &before {
            if self.holders.get(id).is_some_and(|h| h == k) {
                self.holders.remove(id);
            }
        }
        for id in &after {
            self.holders.insert(id.clone(), k.to_string());
        }
        self.touched(before.iter().chain(&after))
    }

    /// The API server serves `kind`, or not; the DRA classes whose
    /// standing moved.
    pub fn set_served(&mut self, kind: Kind, served: bool) -> BTreeSet<String> {
        let moved = if served {
            self.not_served.remove(&kind)
        } else {
            self.not_served.insert(kind)
        };
        if moved {
            self.classes.keys().cloned().collect()
        } else {
            BTreeSet::new()
        }
    }

    pub fn problem(&self, class: &str) -> Option<DraProblem> {
        let c = self.classes.get(class)?;
        if !self.not_served.is_empty() {
            return Some(DraProblem::NotServed(
                self.not_served.iter().copied().collect(),
            ));
        }
        match &c.compiled {
            None => Some(DraProblem::DeviceClassMissing(c.device_class.clone())),
            Some(Err(e)) => Some(DraProblem::SelectorInvalid(e.clone())),
            Some(Ok(_)) => c
                .errors
                .values()
                .next()
                .map(|e| DraProblem::SelectorInvalid(e.clone())),
        }
    }

    /// The nodes where the class has serving devices (none while it has
    /// a problem: it serves nothing then).
    pub fn nodes_serving<'a>(&'a self, class: &str) -> Box<dyn Iterator<Item = &'a str> + 'a> {
        match self.classes.get(class) {
            Some(c) if self.problem(class).is_none() => Box::new(c.serving.keys().map(|n| &**n)),
            _ => Box::new(std::iter::empty()),
        }
    }

    /// The devices that serve `class` on `node`, by pool then name (none
    /// while it has a problem).
    pub fn serving(&self, class: &str, node: &str) -> impl Iterator<Item = DeviceId> {
        let positions = match self.classes.get(class) {
            Some(c) if self.problem(class).is_none() => {
                c.serving.get(node).map_or(&[][..], Vec::as_slice)
            }
            _ => &[],
        };
        // Both ascend: one walk over the node's devices picks them out.
        let mut wanted = positions.iter().peekable();
        self.node_devices(node)
            .enumerate()
            .filter_map(move |(at, (pool, d))| {
                let take = wanted
                    .peek()
                    .is_some_and(|w| usize::try_from(**w) == Ok(at));
                take.then(|| {
                    wanted.next();
                    d.id(pool)
                })
            })
    }

    /// A node's devices with their pools, by pool then name: what
    /// `serving` positions count.
    fn node_devices<'a>(&'a self, node: &str) -> impl Iterator<Item = (&'a PoolKey, &'a Placed)> {
        self.nodes
            .get(node)
            .into_iter()
            .flatten()
            .flat_map(|(pool, list)| list.iter().map(move |d| (pool, d)))
    }

    pub fn classes_on(&self, node: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .classes
            .iter()
            .filter(|(_, c)| c.serving.contains_key(node))
            .map(|(n, _)| n.clone())
            .collect();
        out.sort();
        out
    }

    pub fn class_devices(&self, class: &str) -> ClassDevices {
        ClassDevices {
            by_node: self
                .nodes_serving(class)
                .map(|n| (n.to_string(), self.serving(class, n).collect()))
                .collect(),
        }
    }

    pub fn placed(&self, id: &DeviceId) -> Option<&Placed> {
        self.locate(id).map(|(_, p)| p)
    }

    /// A published device of a complete pool, and its node: found on the
    /// nodes its pool publishes on (one, for a node-local pool).
    pub fn locate(&self, id: &DeviceId) -> Option<(&Arc<str>, &Placed)> {
        let pool = id.pool_key();
        self.pool_nodes.get(&pool)?.iter().find_map(|node| {
            let list = self.pool_devices(node, &pool);
            let at = list.binary_search_by(|d| d.name.cmp(&id.device)).ok()?;
            Some((node, &list[at]))
        })
    }

    /// The node a device is published on.
    pub fn node_of(&self, id: &DeviceId) -> Option<&str> {
        self.locate(id).map(|(n, _)| &**n)
    }

    pub fn pool_devices(&self, node: &str, pool: &PoolKey) -> &[Placed] {
        let Some(pools) = self.nodes.get(node) else {
            return &[];
        };
        match pools.binary_search_by(|(k, _)| k.cmp(pool)) {
            Ok(at) => &pools[at].1,
            Err(_) => &[],
        }
    }

    /// Every device published in a complete pool.
    fn all_ids(&self) -> impl Iterator<Item = DeviceId> + '_ {
        self.nodes
            .values()
            .flatten()
            .flat_map(|(pool, list)| list.iter().map(move |d| d.id(pool)))
    }

    /// The slices of a pool at its newest generation.
    pub fn pool_slices(&self, pool: &PoolKey) -> Vec<Arc<ResourceSlice>> {
        let all: Vec<&Arc<ResourceSlice>> = self
            .pools
            .get(pool)
            .into_iter()
            .flatten()
            .filter_map(|n| self.slices.get(n))
            .collect();
        let newest = all.iter().map(|s| s.spec.pool.generation).max();
        all.into_iter()
            .filter(|s| Some(s.spec.pool.generation) == newest)
            .cloned()
            .collect()
    }

    /// D2: a GPUAllocation records these devices (none: it records none
    /// any more). The nodes whose devices' holds moved.
    pub fn put_record(&mut self, k: &str, class: &str, devices: Vec<DeviceId>) -> DevicesChange {
        let before = self.records.remove(k).unwrap_or_default();
        if before == devices {
            if !devices.is_empty() {
                self.records.insert(k.to_string(), devices);
            }
            return DevicesChange::default();
        }
        for id in &before {
            if self.recorded.get(id).is_some_and(|(r, _)| r == k) {
                self.recorded.remove(id);
            }
        }
        for id in &devices {
            self.recorded
                .insert(id.clone(), (k.to_string(), class.to_string()));
        }
        let change = self.touched(before.iter().chain(&devices));
        if !devices.is_empty() {
            self.records.insert(k.to_string(), devices);
        }
        change
    }

    /// The GPUAllocation (`ns/name`) that records the device, if any.
    pub fn recorded_by(&self, id: &DeviceId) -> Option<&str> {
        self.recorded.get(id).map(|(r, _)| r.as_str())
    }

    /// D2: a DeviceTaintRule made, changed or removed. Rules are few and
    /// rare: every node with devices it selected or selects looks again.
    pub fn put_taint_rule(
        &mut self,
        name: &str,
        now: Option<Arc<DeviceTaintRule>>,
    ) -> DevicesChange {
        let before = self.taint_rules.get(name).cloned();
        if before.as_ref().map(|r| &r.spec) == now.as_ref().map(|r| &r.spec) {
            return DevicesChange::default();
        }
        match now.clone() {
            Some(r) => self.taint_rules.insert(name.to_string(), r),
            None => self.taint_rules.remove(name),
        };
        let selected: Vec<DeviceId> = self
            .all_ids()
            .filter(|id| before.iter().chain(now.iter()).any(|r| selects(r, id)))
            .collect();
        self.touched(selected.iter())
    }

    /// What a change of these devices' holds or taints touched: the nodes
    /// they are published on, and the DRA classes with devices there.
    fn touched<'a>(&self, ids: impl Iterator<Item = &'a DeviceId>) -> DevicesChange {
        let nodes: BTreeSet<String> = ids
            .filter_map(|id| self.node_of(id).map(str::to_string))
            .collect();
        DevicesChange {
            classes: nodes.iter().flat_map(|n| self.classes_on(n)).collect(),
            nodes,
            ..Default::default()
        }
    }

    /// D2: the taints DeviceTaintRules put on a device.
    pub fn rule_taints<'a>(
        &'a self,
        id: &'a DeviceId,
    ) -> impl Iterator<Item = &'a DeviceTaint> + 'a {
        self.taint_rules
            .values()
            .filter(move |r| selects(r, id))
            .map(|r| &r.spec.taint)
    }

    /// D6: where a recorded device stands.
    pub fn device_state(&self, id: &DeviceId) -> DeviceState {
        if let Some(d) = self.placed(id).and_then(Placed::device) {
            let no_execute = d
                .taints
                .iter()
                .flatten()
                .chain(self.rule_taints(id))
                .any(|t| t.effect == "NoExecute");
            return DeviceState::Published { no_execute };
        }
        let pool = id.pool_key();
        let has_slices = self.pools.get(&pool).is_some_and(|s| !s.is_empty());
        if has_slices && !self.pool_nodes.contains_key(&pool) {
            DeviceState::PoolIncomplete
        } else {
            DeviceState::Gone
        }
    }

    /// D5: a ResourceClaimTemplate made, changed or removed; whether it did change.
    pub fn put_template(&mut self, k: &str, now: Option<Arc<ResourceClaimTemplate>>) -> bool {
        let changed = match (&now, self.templates.get(k)) {
            (Some(n), Some(b)) => n.spec != b.spec,
            (None, None) => false,
            _ => true,
        };
        match now {
            Some(t) => self.templates.insert(k.to_string(), t),
            None => self.templates.remove(k),
        };
        changed
    }

    pub fn template(&self, k: &str) -> Option<Arc<ResourceClaimTemplate>> {
        self.templates.get(k).cloned()
    }

    pub fn holder(&self, id: &DeviceId) -> Option<String> {
        self.holders.get(id).cloned()
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
            Kind::DeviceTaintRule => self.taint_rules.keys().cloned().collect(),
            _ => Vec::new(),
        };
        keys.sort();
        keys
    }
}
