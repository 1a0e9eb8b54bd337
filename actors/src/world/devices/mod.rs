//! D1 and D2 in the world: the devices DRA drivers publish, which of them
//! serve each DRA class, and which are free.
//!
//! Kept by node: a slice's change re-reads its pool (complete or not, at
//! its newest generation) and evaluates the DRA classes' selectors on the
//! devices of the nodes that pool publishes on, and nowhere else; a
//! ResourceClaim's allocation marks the devices it names as held. A class
//! or DeviceClass made or changed is evaluated on every device once.
//! The questions (capacity, free devices of a class on a node) count what
//! the index keeps: the devices serving a class on one node, not the
//! cluster's.

mod free;
mod index;
mod managed;
mod selections;
#[cfg(test)]
mod tests;

pub use free::DeviceFacts;
pub use index::taint_rules::{closes, is_ours, one_pool};
pub use index::{ClassDevices, DeviceId, DeviceState, DraProblem, PoolKey, allocated_devices};
pub use index::{Exclusive, ExclusiveOff};
pub use selections::{RememberedSelector, Selections};

use super::World;
use crate::api::{AllocatedDevice, GPUAllocation, GPUClass, Kind};
use index::DeviceIndex;
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use std::collections::BTreeSet;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The index behind one lock: the world has one writer (the supervisor),
/// and a question holds the lock for one node's devices at most.
#[derive(Default)]
pub(crate) struct Devices(RwLock<DeviceIndex>);

impl Devices {
    fn read(&self) -> RwLockReadGuard<'_, DeviceIndex> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    /// See `World::nodes_by_serving`.
    pub(in crate::world) fn nodes_by_serving(
        &self,
        class: &str,
        at_least: usize,
        skip: usize,
        batch: usize,
    ) -> Vec<String> {
        let index = self.read();
        let nodes = index.nodes_by_serving(class, at_least).skip(skip);
        nodes.take(batch).map(str::to_string).collect()
    }

    /// See `World::serving_count`.
    pub(in crate::world) fn serving_count(&self, class: &str, node: &str) -> usize {
        self.read().serving(class, node).count()
    }

    fn write(&self) -> RwLockWriteGuard<'_, DeviceIndex> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// What a DRA change touched: the nodes whose devices (or their holds)
/// changed, the DRA classes whose devices or standing changed, and the
/// VMIs (`ns/name`) whose request or launcher pod's claims it changed.
#[derive(Debug, Default, PartialEq)]
pub struct DevicesChange {
    pub nodes: BTreeSet<String>,
    pub classes: BTreeSet<String>,
    pub vmis: BTreeSet<String>,
    /// D4: GPUClaims of the name of a ResourceClaim that came, changed or
    /// went: their backing claim, or one in its way.
    pub claims: BTreeSet<String>,
    /// D4: the records (`ns/name`, their claims' keys) naming devices
    /// whose holds moved: a backing claim held back because another claim
    /// held one of them is brought back once it lets go.
    pub records: BTreeSet<String>,
    /// D7: pools that may have become managed or not, or whose rules
    /// changed.
    pub pools: BTreeSet<PoolKey>,
    /// D7: DeviceTaintRules (by name) that changed: one of ours edited
    /// to name no pool is deleted.
    pub rules: BTreeSet<String>,
    /// D7: every pool may have become managed or not (a class's or a
    /// DeviceClass's selectors moved on every node; D7 turned on or off).
    pub all_pools: bool,
}

impl From<&AllocatedDevice> for DeviceId {
    fn from(d: &AllocatedDevice) -> Self {
        DeviceId::new(&d.driver, &d.pool, &d.device)
    }
}

impl From<&DeviceId> for AllocatedDevice {
    fn from(d: &DeviceId) -> Self {
        AllocatedDevice {
            driver: d.driver.to_string(),
            pool: d.pool.to_string(),
            device: d.device.to_string(),
        }
    }
}

impl World {
    pub(super) fn slice_changed(&self, s: ResourceSlice, deleted: bool) -> DevicesChange {
        let Some(name) = s.metadata.name.clone() else {
            return DevicesChange::default();
        };
        let change = self
            .devices
            .write()
            .put_slice(&name, (!deleted).then(|| Arc::new(s)));
        self.dra_free_moved(&change);
        change
    }

    pub(super) fn device_class_changed(&self, c: DeviceClass, deleted: bool) -> DevicesChange {
        let Some(name) = c.metadata.name.clone() else {
            return DevicesChange::default();
        };
        let change = self
            .devices
            .write()
            .put_device_class(&name, (!deleted).then(|| Arc::new(c)));
        // A DeviceClass's selectors move its classes on every node.
        self.dra_free_moved(&change);
        self.dra_classes_moved(change.classes.iter().cloned());
        // D7: and so the pools they serve a device of.
        let mut change = change;
        change.all_pools = !change.classes.is_empty();
        change
    }

    pub(super) fn resource_claim_changed(&self, c: ResourceClaim, deleted: bool) -> DevicesChange {
        let (Some(ns), Some(name)) = (c.metadata.namespace.clone(), c.metadata.name.clone()) else {
            return DevicesChange::default();
        };
        let k = super::key(&ns, &name);
        let ours =
            !deleted && crate::api::has_finalizer(&c.metadata, crate::api::BACKING_FINALIZER);
        // D5: the claim Kubernetes made for a launcher pod: its VMI's set
        // may have waited for it (DeviceClaimPending).
        let vmis: BTreeSet<String> = c
            .metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|o| o.kind == "Pod" && o.controller == Some(true))
            .filter_map(|o| self.launcher(&super::key(&ns, &o.name)))
            .map(|p| super::key(&p.namespace, &p.vmi))
            .collect();
        let mut change = self
            .devices
            .write()
            .put_claim(&k, (!deleted).then(|| Arc::new(c)));
        self.dra_free_moved(&change);
        change.vmis = vmis;
        // Its GPUClaim; or, for a backing claim our finalizer keeps, the
        // GPUClaim it was made for, which may be gone (placement lets it go).
        if self.claim(&k).is_some() || ours {
            change.claims.insert(k);
        }
        change
    }

    /// D5: a ResourceClaimTemplate made, changed or removed: the VMIs that
    /// name it read their request again.
    pub(super) fn template_changed(
        &self,
        t: ResourceClaimTemplate,
        deleted: bool,
    ) -> DevicesChange {
        let (Some(ns), Some(name)) = (t.metadata.namespace.clone(), t.metadata.name.clone()) else {
            return DevicesChange::default();
        };
        let k = super::key(&ns, &name);
        let changed = self
            .devices
            .write()
            .put_template(&k, (!deleted).then(|| Arc::new(t)));
        DevicesChange {
            vmis: if changed {
                self.vmis_naming_template(&k)
            } else {
                BTreeSet::new()
            },
            ..Default::default()
        }
    }

    /// D2: a DeviceTaintRule made, changed or removed.
    pub(super) fn taint_rule_changed(&self, r: DeviceTaintRule, deleted: bool) -> DevicesChange {
        let Some(name) = r.metadata.name.clone() else {
            return DevicesChange::default();
        };
        let change = self
            .devices
            .write()
            .put_taint_rule(&name, (!deleted).then(|| Arc::new(r)));
        self.dra_free_moved(&change);
        change
    }

    /// D2: a GPUAllocation's devices are held while it records them.
    pub(super) fn allocation_devices_changed(
        &self,
        k: &str,
        now: Option<&GPUAllocation>,
    ) -> DevicesChange {
        let (class, devices) = now.map_or((String::new(), Vec::new()), |r| {
            (
                r.spec.class_name.clone(),
                r.spec.devices.iter().map(DeviceId::from).collect(),
            )
        });
        let change = self
            .devices
            .write()
            .put_allocation_devices(k, &class, devices);
        self.dra_free_moved(&change);
        change
    }

    /// D3: whether a device that serves `class` on `node` may go to the
    /// claim whose record is `record` and whose ResourceClaim is `claim`:
    /// no NoSchedule/NoExecute taint, and held by nothing but these two.
    /// (A Lost claim placed again may keep its own devices.)
    pub fn device_open_to(
        &self,
        id: &DeviceId,
        class: &str,
        node: &str,
        allocation: &str,
        claim: &str,
    ) -> bool {
        let d = self.devices.read();
        if !d.serving(class, node).any(|s| &s == id) {
            return false;
        }
        let Some(facts) = d.device(id) else {
            return false;
        };
        !facts.taints.iter().any(free::keeps_off)
            && d.holders_of(id).iter().all(|h| h == claim)
            && facts
                .allocated_by
                .as_deref()
                .is_none_or(|r| r == allocation)
    }

    /// D3: a device's value of a fully qualified attribute (a bare name in
    /// the slice is in its driver's domain), as text to group by.
    pub fn device_attribute(&self, id: &DeviceId, qualified: &str) -> Option<String> {
        let d = self.devices.read();
        let device = d.placed(id).and_then(|p| p.device())?;
        let attrs = device.attributes.as_ref()?;
        let bare = qualified
            .split_once('/')
            .filter(|(domain, _)| *domain == &*id.driver)
            .map(|(_, name)| name);
        let a = attrs
            .get(qualified)
            .or_else(|| bare.and_then(|b| attrs.get(b)))?;
        if let Some(v) = &a.string {
            Some(format!("s:{v}"))
        } else if let Some(v) = a.int {
            Some(format!("i:{v}"))
        } else if let Some(v) = a.bool {
            Some(format!("b:{v}"))
        } else {
            a.version.as_ref().map(|v| format!("v:{v}"))
        }
    }

    /// D5: a ResourceClaimTemplate, by `ns/name`.
    pub fn resource_claim_template(&self, k: &str) -> Option<Arc<ResourceClaimTemplate>> {
        self.devices.read().template(k)
    }

    /// D6: where a recorded device stands.
    pub fn device_state(&self, id: &DeviceId) -> DeviceState {
        self.devices.read().device_state(id)
    }

    /// The GPUAllocation (`ns/name`) that records the device, if any.
    pub fn device_allocated_by(&self, id: &DeviceId) -> Option<String> {
        self.devices.read().allocated_by(id).map(str::to_string)
    }

    /// A GPUClass made, changed or removed: its devices, if it is a DRA
    /// class, are evaluated again when its selectors or DeviceClass moved.
    pub(super) fn dra_class_changed(&self, name: &str, now: Option<&GPUClass>) -> bool {
        let moved = self.devices.write().put_class(name, now.map(|c| &c.spec));
        if moved {
            self.dra_classes_moved([name.to_string()]);
        }
        moved
    }

    /// Whether the API server serves `kind` (a DRA kind): told by its
    /// watch; true until a watch says otherwise. The DRA classes' standing
    /// moves with it (DRAUnavailable).
    pub(in crate::world) fn set_served(&self, kind: Kind, served: bool) -> DevicesChange {
        let before = self.exclusive();
        let classes = self.devices.write().set_served(kind, served);
        self.dra_classes_moved(classes.iter().cloned());
        if before != self.exclusive() {
            // D7: DeviceTaintRules came or went.
            return self.exclusive_moved();
        }
        // D7: a class that serves again (or no more) moves which pools
        // are managed, anywhere.
        DevicesChange {
            all_pools: !classes.is_empty(),
            classes,
            ..Default::default()
        }
    }

    /// D2's capacity of `class` on `node`: its devices there, free or
    /// recorded by the class's own records (readiness aside).
    pub(super) fn dra_devices_counted(&self, class: &str, node: &str) -> u64 {
        self.devices.read().capacity_on(class, node)
    }

    /// The devices of `class` free on `node` (D2), by pool then name.
    pub fn free_devices(&self, class: &str, node: &str) -> Vec<DeviceId> {
        self.devices.read().free_serving(class, node)
    }

    /// D3: whether the devices `chosen` of `node` can be allocated
    /// together (their shared counters cover them all).
    pub fn devices_fit_together(&self, node: &str, chosen: &[DeviceId]) -> bool {
        self.devices.read().fit_together(node, chosen)
    }

    /// Why a DRA class serves nothing, if it does not: DRA not served, a
    /// selector that does not compile or errors on a device.
    pub fn dra_problem(&self, class: &str) -> Option<DraProblem> {
        self.devices.read().problem(class)
    }

    /// What the index knows of the devices of a DRA class (status, plan).
    pub fn class_devices(&self, class: &str) -> ClassDevices {
        self.devices.read().class_devices(class)
    }

    /// The nodes where `class` has devices serving it.
    pub fn dra_nodes_of(&self, class: &str) -> Vec<String> {
        self.devices
            .read()
            .nodes_serving(class)
            .map(str::to_string)
            .collect()
    }

    /// The nodes with devices that serve DRA class `class`.
    pub fn dra_nodes_serving(&self, class: &str) -> Vec<String> {
        self.devices
            .read()
            .nodes_serving(class)
            .map(str::to_string)
            .collect()
    }

    /// The DRA classes with devices serving them on `node`.
    pub fn dra_classes_on(&self, node: &str) -> Vec<String> {
        self.devices.read().classes_on(node)
    }

    /// A published device's facts, as the index has them.
    pub fn device(&self, id: &DeviceId) -> Option<DeviceFacts> {
        self.devices.read().device(id)
    }

    /// The ResourceClaim (`ns/name`) whose allocation names the device.
    pub fn device_holder(&self, id: &DeviceId) -> Option<String> {
        self.devices.read().holder(id)
    }

    /// D8: every ResourceClaim (`ns/name`) whose allocation names the device.
    pub fn device_holders(&self, id: &DeviceId) -> Vec<String> {
        self.devices.read().holders_of(id)
    }

    pub fn resource_claim(&self, k: &str) -> Option<Arc<ResourceClaim>> {
        self.devices.read().claim(k)
    }

    pub fn device_class(&self, name: &str) -> Option<Arc<DeviceClass>> {
        self.devices.read().device_class(name)
    }

    pub(super) fn dra_keys(&self, kind: Kind) -> Vec<String> {
        self.devices.read().keys(kind)
    }
}
