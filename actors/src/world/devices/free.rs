//! D2: which devices that serve a class are free. A device is not free
//! when a ResourceClaim's allocation names it, when it has a NoSchedule or
//! NoExecute taint, or when the counters it consumes (KEP-4815) are no
//! longer in its pool's shared counter sets once the held devices took
//! theirs: a GPU published twice (whole, and as partitions) is taken once.

use super::index::{DeviceId, DeviceIndex, PoolKey};
use crate::dra::values::Quantity;
use k8s_openapi::api::resource::v1::{Counter, Device, DeviceAttribute, DeviceTaint};
use std::collections::BTreeMap;

/// A published device as placement and status read it.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceFacts {
    pub id: DeviceId,
    pub node: String,
    pub attributes: BTreeMap<String, DeviceAttribute>,
    pub taints: Vec<DeviceTaint>,
    /// The ResourceClaim whose allocation names it.
    pub held_by: Option<String>,
    /// The GPUAllocation that records it.
    pub allocated_by: Option<String>,
}

/// Taints that keep a device from new allocations (as the scheduler's
/// allocator: NoSchedule and NoExecute, none tolerated by gpu-claims but
/// D7's own).
pub fn keeps_off(t: &DeviceTaint) -> bool {
    (t.effect == "NoSchedule" || t.effect == "NoExecute") && super::index::taint_rules::counts(t)
}

/// Counter amounts in thousandths; an amount that does not parse counts
/// as more than any set holds (hostile input never reads small).
type Counts = BTreeMap<(String, String), u64>;

fn amount(c: &Counter) -> u64 {
    Quantity::parse(&c.value.0).map_or(u64::MAX, |q| q.0)
}

fn consumed(d: &Device) -> Counts {
    let mut out = Counts::new();
    for c in d.consumes_counters.iter().flatten() {
        for (name, v) in &c.counters {
            let e = out
                .entry((c.counter_set.clone(), name.clone()))
                .or_default();
            *e = e.saturating_add(amount(v));
        }
    }
    out
}

impl DeviceIndex {
    /// What is left of a pool's shared counters once its held devices
    /// took theirs (None for a pool that shares none).
    fn counters_left(&self, node: &str, pool: &PoolKey) -> Option<Counts> {
        let mut left = Counts::new();
        for s in self.pool_slices(pool) {
            for set in s.spec.shared_counters.iter().flatten() {
                for (name, v) in &set.counters {
                    left.insert((set.name.clone(), name.clone()), amount(v));
                }
            }
        }
        if left.is_empty() {
            return None;
        }
        for d in self.pool_devices(node, pool) {
            if !self.is_held(&d.id(pool)) {
                continue;
            }
            let Some(device) = d.device() else { continue };
            for (k, n) in consumed(device) {
                let e = left.entry(k).or_default();
                *e = e.saturating_sub(n);
            }
        }
        Some(left)
    }

    /// D2 for one device of `node`.
    fn is_free(
        &self,
        id: &DeviceId,
        node: &str,
        left: &mut BTreeMap<PoolKey, Option<Counts>>,
    ) -> bool {
        if self.is_held(id) {
            return false;
        }
        let Some(d) = self.placed(id).and_then(|p| p.device()) else {
            return false;
        };
        if d.taints
            .iter()
            .flatten()
            .chain(self.rule_taints(id))
            .any(keeps_off)
        {
            return false;
        }
        let wants = consumed(d);
        if wants.is_empty() {
            return true;
        }
        let pool = (id.driver.clone(), id.pool.clone());
        let left = left
            .entry(pool.clone())
            .or_insert_with(|| self.counters_left(node, &pool));
        // A device that consumes counters its pool does not share cannot
        // be allocated (the allocator refuses it too).
        left.as_ref().is_some_and(|l| {
            wants
                .iter()
                .all(|(k, n)| l.get(k).is_some_and(|have| have >= n))
        })
    }

    /// D3: whether `chosen` (devices of `node`) can be allocated
    /// together: per pool, what they consume of its shared counters
    /// (KEP-4815) fits in what the pool's other held devices leave. Each
    /// is free alone; two partitions of one GPU, or a GPU and its
    /// partition, may not be together. Held devices among `chosen` (a
    /// claim keeping its own) are counted once, as chosen.
    pub fn fit_together(&self, node: &str, chosen: &[DeviceId]) -> bool {
        let mut wants: BTreeMap<PoolKey, Counts> = BTreeMap::new();
        for id in chosen {
            let Some(d) = self.placed(id).and_then(|p| p.device()) else {
                return false;
            };
            let per_pool = wants
                .entry((id.driver.clone(), id.pool.clone()))
                .or_default();
            for (k, n) in consumed(d) {
                let e = per_pool.entry(k).or_default();
                *e = e.saturating_add(n);
            }
        }
        for (pool, want) in wants.iter().filter(|(_, w)| !w.is_empty()) {
            let mut left = Counts::new();
            for s in self.pool_slices(pool) {
                for set in s.spec.shared_counters.iter().flatten() {
                    for (name, v) in &set.counters {
                        left.insert((set.name.clone(), name.clone()), amount(v));
                    }
                }
            }
            for d in self.pool_devices(node, pool) {
                let id = d.id(pool);
                if !self.is_held(&id) || chosen.contains(&id) {
                    continue;
                }
                let Some(device) = d.device() else { continue };
                for (k, n) in consumed(device) {
                    let e = left.entry(k).or_default();
                    *e = e.saturating_sub(n);
                }
            }
            if !want
                .iter()
                .all(|(k, n)| left.get(k).is_some_and(|have| have >= n))
            {
                return false;
            }
        }
        true
    }

    /// D2: a ResourceClaim's allocation or a GPUAllocation names it.
    fn is_held(&self, id: &DeviceId) -> bool {
        self.holders.contains_key(id) || self.allocated.contains_key(id)
    }

    /// D2's capacity of `class` on `node`: the devices that serve it
    /// there, free or recorded by the class's own GPUAllocations.
    pub fn capacity_on(&self, class: &str, node: &str) -> u64 {
        let mut left = BTreeMap::new();
        let n = self
            .serving(class, node)
            .filter(|id| {
                self.allocated.get(id).is_some_and(|(_, c)| c == class)
                    || self.is_free(id, node, &mut left)
            })
            .count();
        n as u64
    }

    /// The devices serving `class` on `node` that are free, by pool then
    /// name; while D7 closes pools, only those of pools already closed:
    /// the rule is written before the first allocation in a pool.
    pub fn free_serving(&self, class: &str, node: &str) -> Vec<DeviceId> {
        let mut left = BTreeMap::new();
        let gated = self.exclusive() == super::Exclusive::On;
        self.serving(class, node)
            .filter(|id| !gated || self.taint_rules.closed(&id.pool_key()))
            .filter(|id| self.is_free(id, node, &mut left))
            .collect()
    }

    pub fn device(&self, id: &DeviceId) -> Option<DeviceFacts> {
        let (node, p) = self.locate(id)?;
        let d = p.device()?;
        Some(DeviceFacts {
            id: id.clone(),
            node: node.to_string(),
            attributes: d.attributes.clone().unwrap_or_default(),
            taints: d
                .taints
                .iter()
                .flatten()
                .chain(self.rule_taints(id))
                .cloned()
                .collect(),
            held_by: self.holders.get(id).cloned(),
            allocated_by: self.allocated.get(id).map(|(r, _)| r.clone()),
        })
    }
}
