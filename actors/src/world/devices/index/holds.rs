//! What holds a device and what taints it: ResourceClaims' allocations,
//! GPUAllocations' records (D2), DeviceTaintRules, and where a recorded
//! device stands (D6). ResourceClaimTemplates are kept here too (D5).

use super::PoolKey;
use super::{DeviceId, DeviceIndex, Placed, taint_rules};
use crate::world::devices::DevicesChange;
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceTaint, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate,
};
use std::collections::BTreeSet;
use std::sync::Arc;

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
            self.unhold(id, k);
        }
        for id in &after {
            self.hold(id, k);
        }
        self.touched(before.iter().chain(&after))
    }

    /// ResourceClaim `k` names the device: its holder, or one more (D8).
    fn hold(&mut self, id: &DeviceId, k: &str) {
        match self.holders.get(id) {
            None => {
                self.holders.insert(id.clone(), k.to_string());
            }
            Some(h) if h == k => {}
            Some(_) => {
                self.also_held
                    .entry(id.clone())
                    .or_default()
                    .insert(k.to_string());
            }
        }
    }

    /// ResourceClaim `k` names the device no more: another that names it
    /// becomes its holder.
    fn unhold(&mut self, id: &DeviceId, k: &str) {
        if self.holders.get(id).is_some_and(|h| h == k) {
            self.holders.remove(id);
            let next = self.also_held.get_mut(id).and_then(|o| o.pop_first());
            if let Some(next) = next {
                self.holders.insert(id.clone(), next);
            }
        } else if let Some(others) = self.also_held.get_mut(id) {
            others.remove(k);
        }
        if self.also_held.get(id).is_some_and(BTreeSet::is_empty) {
            self.also_held.remove(id);
        }
    }

    /// D2: a GPUAllocation records these devices (none: it records none
    /// any more). The nodes whose devices' holds moved.
    pub fn put_allocation_devices(
        &mut self,
        k: &str,
        class: &str,
        devices: Vec<DeviceId>,
    ) -> DevicesChange {
        let before = self.by_allocation.remove(k).unwrap_or_default();
        if before == devices {
            if !devices.is_empty() {
                self.by_allocation.insert(k.to_string(), devices);
            }
            return DevicesChange::default();
        }
        for id in &before {
            if self.allocated.get(id).is_some_and(|(r, _)| r == k) {
                self.allocated.remove(id);
            }
            let pool = id.pool_key();
            if let Some(n) = self.record_pools.get_mut(&pool) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.record_pools.remove(&pool);
                }
            }
        }
        for id in &devices {
            self.allocated
                .insert(id.clone(), (k.to_string(), class.to_string()));
            *self.record_pools.entry(id.pool_key()).or_default() += 1;
        }
        let change = self.touched(before.iter().chain(&devices));
        if !devices.is_empty() {
            self.by_allocation.insert(k.to_string(), devices);
        }
        change
    }

    /// The GPUAllocation (`ns/name`) that records the device, if any.
    pub fn allocated_by(&self, id: &DeviceId) -> Option<&str> {
        self.allocated.get(id).map(|(r, _)| r.as_str())
    }

    /// D2, D7: a DeviceTaintRule made, changed or removed: the nodes of
    /// the pools it selected or selects (every node, for a rule that
    /// names no pool: a platform's few), the pools whose rules moved, and
    /// the rule itself (ours may need undoing).
    pub fn put_taint_rule(
        &mut self,
        name: &str,
        now: Option<Arc<DeviceTaintRule>>,
    ) -> DevicesChange {
        let seen = |r: &DeviceTaintRule| (r.spec.clone(), taint_rules::is_ours(r));
        let before = self.taint_rules.put(name, now.clone());
        if before.as_deref().map(seen) == now.as_deref().map(seen) {
            return DevicesChange::default();
        }
        let mut pools: BTreeSet<PoolKey> = BTreeSet::new();
        let mut everywhere = false;
        for r in before.iter().chain(now.iter()) {
            match r
                .spec
                .device_selector
                .as_ref()
                .map(|s| (&s.driver, &s.pool))
            {
                Some((Some(d), Some(p))) => {
                    pools.insert((d.as_str().into(), p.as_str().into()));
                }
                // No selector takes nothing; a selector without a driver
                // or a pool may take devices anywhere.
                Some(_) => everywhere = true,
                None => {}
            }
        }
        let ids: Vec<DeviceId> = if everywhere {
            self.all_ids().collect()
        } else {
            pools.iter().flat_map(|p| self.pool_ids(p)).collect()
        };
        let mut change = self.touched(ids.iter());
        change.pools.extend(pools);
        change.rules.insert(name.to_string());
        change
    }

    /// What a change of these devices' holds or taints touched: the nodes
    /// they are published on, and the DRA classes with devices there.
    fn touched<'a>(&self, ids: impl Iterator<Item = &'a DeviceId>) -> DevicesChange {
        let ids: Vec<&DeviceId> = ids.collect();
        let nodes: BTreeSet<String> = ids
            .iter()
            .filter_map(|id| self.node_of(id).map(str::to_string))
            .collect();
        DevicesChange {
            classes: nodes.iter().flat_map(|n| self.classes_on(n)).collect(),
            nodes,
            records: ids
                .iter()
                .filter_map(|id| self.allocated_by(id).map(str::to_string))
                .collect(),
            // D7: a record's devices make their pool managed.
            pools: ids.iter().map(|id| id.pool_key()).collect(),
            ..Default::default()
        }
    }

    /// D2: the taints DeviceTaintRules put on a device.
    pub fn rule_taints<'a>(
        &'a self,
        id: &'a DeviceId,
    ) -> impl Iterator<Item = &'a DeviceTaint> + 'a {
        self.taint_rules.on_device(id)
    }

    /// D6: where a recorded device stands.
    pub fn device_state(&self, id: &DeviceId) -> DeviceState {
        if let Some(d) = self.placed(id).and_then(Placed::device) {
            let no_execute = d
                .taints
                .iter()
                .flatten()
                .chain(self.rule_taints(id))
                .any(|t| t.effect == "NoExecute" && taint_rules::counts(t));
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
}
