//! D7 in the world: whether gpu-claims closes the pools it manages, which
//! pools it manages, and our DeviceTaintRules of each (the index keeps
//! them, `index/managed.rs` and `index/taint_rules.rs`).

use super::{DevicesChange, Exclusive, PoolKey};
use crate::world::World;
use k8s_openapi::api::resource::v1::DeviceTaintRule;
use std::collections::BTreeSet;
use std::sync::Arc;

impl World {
    /// D7's standing: whether gpu-claims closes the pools it manages.
    pub fn exclusive(&self) -> Exclusive {
        self.devices.read().exclusive()
    }

    /// D7: whether a DRA class serves a device of `pool`, or a record names one.
    pub fn is_managed_pool(&self, pool: &PoolKey) -> bool {
        self.devices.read().is_managed(pool)
    }

    /// D7: whether one of our rules closes `pool`.
    pub fn pool_closed(&self, pool: &PoolKey) -> bool {
        self.devices.read().pool_closed(pool)
    }

    /// D7: our DeviceTaintRules of `pool` (known by our label and their
    /// selector), by name.
    pub fn our_rules(&self, pool: &PoolKey) -> Vec<Arc<DeviceTaintRule>> {
        self.devices.read().our_rules(pool)
    }

    /// A DeviceTaintRule by name.
    pub fn taint_rule(&self, name: &str) -> Option<Arc<DeviceTaintRule>> {
        self.devices.read().taint_rule(name)
    }

    /// D7: rules of ours whose selector names no one pool.
    pub fn stray_rules(&self) -> Vec<Arc<DeviceTaintRule>> {
        self.devices.read().stray_rules()
    }

    /// D7: every pool published, recorded or named by a rule of ours.
    pub fn every_pool(&self) -> BTreeSet<PoolKey> {
        self.devices.read().every_pool()
    }

    /// D7's standing set again from the config and what the API server
    /// said of our last rule written (`refused`: its words). Where it
    /// moved, every DRA class says so and counts its free devices again,
    /// and every pool is looked at.
    pub(in crate::world) fn set_exclusive(&self, refused: Option<String>) -> DevicesChange {
        let enabled = self.config().dra.exclusive_devices;
        if !self.devices.write().set_exclusive(enabled, refused) {
            return DevicesChange::default();
        }
        self.exclusive_moved()
    }

    /// What D7's standing moving touches: every DRA class (its condition,
    /// its free devices on every node) and every pool.
    pub(super) fn exclusive_moved(&self) -> DevicesChange {
        let mut classes = BTreeSet::new();
        self.for_each_class(|c| {
            if c.spec.device_class_name.is_some() {
                classes.insert(c.metadata.name.clone().unwrap_or_default());
            }
        });
        self.dra_classes_moved(classes.iter().cloned());
        DevicesChange {
            classes,
            all_pools: true,
            ..Default::default()
        }
    }

    /// The refusal of our last rule written, if one keeps D7 off.
    pub fn exclusive_refused(&self) -> Option<String> {
        self.devices.read().exclusive_refused().map(str::to_string)
    }
}
