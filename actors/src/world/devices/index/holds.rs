//! What holds a device and what taints it: ResourceClaims' allocations,
//! GPUAllocations' records (D2), DeviceTaintRules, and where a recorded
//! device stands (D6). ResourceClaimTemplates are kept here too (D5).

use super::{DeviceId, DeviceIndex, Placed};
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
        }
        for id in &devices {
            self.allocated
                .insert(id.clone(), (k.to_string(), class.to_string()));
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
}
