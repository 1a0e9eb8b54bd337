//! Slices by pool, and the devices of complete pools at their newest
//! generation by node (D1): where a device is published.

use super::{DeviceId, DeviceIndex, Placed, PoolKey, shared};
use crate::dra::PoolState;
use crate::world::devices::DevicesChange;
use k8s_openapi::api::resource::v1::ResourceSlice;
use std::collections::BTreeSet;
use std::sync::Arc;

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
        for p in &pools {
            change.nodes.extend(self.republish(p));
        }
        // D7: the pool, and the others on its nodes (their classes were
        // evaluated again), may be managed or not now.
        change.pools = pools;
        if selectors_see_change {
            change.classes = self.evaluate_nodes(&change.nodes);
        }
        // A device's taints and counters decide whether it is free, not
        // whether it serves: every class with devices there counts again.
        for n in &change.nodes {
            change.classes.extend(self.classes_on(n));
            let on: Vec<PoolKey> = self.pools_on(n).cloned().collect();
            change.pools.extend(on);
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

    /// A node's devices with their pools, by pool then name: what
    /// `serving` positions count.
    pub(super) fn node_devices<'a>(
        &'a self,
        node: &str,
    ) -> impl Iterator<Item = (&'a PoolKey, &'a Placed)> {
        self.nodes
            .get(node)
            .into_iter()
            .flatten()
            .flat_map(|(pool, list)| list.iter().map(move |d| (pool, d)))
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

    /// The devices a complete pool publishes, on every node it publishes on.
    pub(super) fn pool_ids(&self, pool: &PoolKey) -> Vec<DeviceId> {
        self.pool_nodes
            .get(pool)
            .into_iter()
            .flatten()
            .flat_map(|n| self.pool_devices(n, pool).iter().map(|d| d.id(pool)))
            .collect()
    }

    /// The pools published on `node`.
    pub(super) fn pools_on(&self, node: &str) -> impl Iterator<Item = &PoolKey> {
        self.nodes.get(node).into_iter().flatten().map(|(p, _)| p)
    }

    /// Every device published in a complete pool.
    pub(super) fn all_ids(&self) -> impl Iterator<Item = DeviceId> + '_ {
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
}
