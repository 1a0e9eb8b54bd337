//! Questions the rules ask of the world.

use super::{World, key};
use crate::api::{GPUClaim, LauncherPod, Vmi, vmi_owner};
use std::sync::Arc;

impl World {
    /// L2: the attached VMI of a claim: the VMI named by status.attachedTo
    /// in its namespace, unless the claim's VMI owner has another UID (a
    /// later VMI of the same name is not the claim's).
    pub fn attached_vmi(&self, c: &GPUClaim) -> Option<Arc<Vmi>> {
        let name = c.attached_vmi_name()?;
        let v = self.vmi(&key(c.metadata.namespace.as_deref()?, name))?;
        match vmi_owner(&c.metadata) {
            Some((_, uid)) if uid != v.uid() => None,
            _ => Some(v),
        }
    }

    /// L3: a template claim's owner lives when a VMI of the owner's name
    /// with the owner's UID exists and is not final. No VMI owner: it does not.
    pub fn owner_lives(&self, c: &GPUClaim) -> bool {
        let Some((name, uid)) = vmi_owner(&c.metadata) else {
            return false;
        };
        if uid.is_empty() {
            return false;
        }
        let ns = c.metadata.namespace.as_deref().unwrap_or_default();
        self.vmi(&key(ns, name))
            .is_some_and(|v| v.uid() == uid && !v.is_final())
    }

    /// The resource a class names, if the class is cached.
    pub fn resource_of(&self, class: &str) -> Option<String> {
        self.class(class).map(|c| c.spec.resource_name.clone())
    }

    /// A node's lost set covers `resource` when its allocatable is below
    /// the GPUs recorded on it for that resource, or a devices-lost taint
    /// names it (or is empty).
    /// A DRA class has no resource (empty): its devices are lost one by
    /// one (D6, `lost_devices`), never by a node's lost set.
    pub fn lost_covers(&self, node: &str, resource: &str) -> bool {
        if resource.is_empty() {
            return false;
        }
        let Some(n) = self.node(node) else {
            return false;
        };
        n.tainted_lost(resource) || n.allocatable(resource) < self.allocated_on(node, resource)
    }

    /// L4: the node a Lost claim left is back: it exists, is Ready and its
    /// lost set does not cover the claim's resource.
    pub fn node_is_back(&self, c: &GPUClaim) -> bool {
        let Some(node) = c.node_name() else {
            return false;
        };
        let Some(n) = self.node(node) else {
            return false;
        };
        let resource = self.resource_of(&c.spec.class_name).unwrap_or_default();
        n.ready && !self.lost_covers(node, &resource) && self.devices_stand(c)
    }

    /// D1, D6: every device a claim's record names is published in its
    /// complete pool and not tainted NoExecute. A device of a pool that is
    /// not complete stands as it stood: a Lost claim stays Lost until the
    /// pool is complete again with the device in it.
    fn devices_stand(&self, c: &GPUClaim) -> bool {
        self.allocation_devices(c).iter().all(|d| {
            self.device_state(d) == super::devices::DeviceState::Published { no_execute: false }
        })
    }

    /// The devices a claim's record names (its own record: same uid).
    pub fn allocation_devices(&self, c: &GPUClaim) -> Vec<super::devices::DeviceId> {
        let (Some(ns), Some(name)) = (c.metadata.namespace.as_deref(), c.metadata.name.as_deref())
        else {
            return Vec::new();
        };
        self.allocation(&key(ns, name))
            .filter(|r| c.metadata.uid.as_deref() == Some(r.spec.claim_uid.as_str()))
            .map(|r| {
                r.spec
                    .devices
                    .iter()
                    .map(super::devices::DeviceId::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// D6: the devices a claim's record names that are lost: gone from
    /// their complete pool, or tainted NoExecute. A pool that is not
    /// complete loses nothing (its devices stand as they were).
    pub fn lost_devices(&self, c: &GPUClaim) -> Vec<super::devices::DeviceId> {
        self.allocation_devices(c)
            .into_iter()
            .filter(|d| {
                matches!(
                    self.device_state(d),
                    super::devices::DeviceState::Gone
                        | super::devices::DeviceState::Published { no_execute: true }
                )
            })
            .collect()
    }

    /// L9: a VMI whose launcher pods all still wait at the gate (none can
    /// have reached a GPU). No launcher pods: false.
    pub fn gated_launchers(&self, v: &Vmi) -> Option<Vec<Arc<LauncherPod>>> {
        let ns = v.metadata.namespace.as_deref()?;
        let pods = self.launchers(&key(ns, v.metadata.name.as_deref()?));
        (!pods.is_empty() && pods.iter().all(|p| p.gated)).then_some(pods)
    }
}
