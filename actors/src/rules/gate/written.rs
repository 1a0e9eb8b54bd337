//! Allocations placement wrote that the cache may not show yet: they hold
//! node capacity and class budget all the same, or two sets could be
//! placed on the same GPUs in the window before the watch catches up.
//!
//! I6: this memory must not outlive what it is about. An entry counts
//! until the allocations watch passes its write, whatever the cache then
//! shows: the allocation (the cache counts it now), a later version, or
//! its deletion. Counting until the cache *shows* the allocation would
//! keep one that was created and deleted between two looks counted
//! forever, and strand VMs behind a budget nobody holds.

use crate::api::Kind;
use crate::api::amount::total;
use crate::api::{GPUAllocationSpec, PodUse};
use crate::world::World;
use std::collections::HashMap;

/// One allocation we wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct WrittenAllocation {
    pub spec: GPUAllocationSpec,
    /// The resourceVersion our write returned: the watch is past it once
    /// it brings an event of this allocation at this version or later.
    /// `ASSUMED` while the write is under way.
    pub resource_version: u64,
}

/// What a write under way assumed, and what each entry replaced.
#[derive(Default, Debug)]
pub struct Assumed {
    allocations: Vec<(String, Option<WrittenAllocation>)>,
    pins: Vec<(String, Option<(PodUse, u64)>)>,
}

/// What a write that did not land let go, as the scheduler forgets an
/// assumed pod: allocations (key, spec) and the nodes of pins.
#[derive(Default, Debug)]
pub struct Forgotten {
    pub allocations: Vec<(String, GPUAllocationSpec)>,
    pub nodes: Vec<String>,
}

/// The version of an entry whose write is under way (the scheduler's
/// "assume"): no watch is past it, so it counts until the write's answer
/// replaces it, or its failure removes it.
pub const ASSUMED: u64 = u64::MAX;

/// Allocations (and the launcher pods pinned beside them) placement
/// wrote that the cache does not show yet.
#[derive(Default, Debug)]
pub struct WrittenAllocations {
    by_key: HashMap<String, WrittenAllocation>,
    /// Pods pinned, by key: what each will use on its node, and the
    /// resourceVersion the pin returned. Counted in NodeResourcesFit until
    /// the pods watch passes it, as the scheduler counts pods it assumed.
    pins: HashMap<String, (PodUse, u64)>,
}

/// How far the allocations watch has come: every allocation event up to
/// this resourceVersion is in the cache. The watch of one kind brings its
/// events in resourceVersion order, so a write at or below it is
/// reflected in the cache, shown or (if deleted since) gone.
fn watched(w: &World) -> u64 {
    w.observed_rv(Kind::Allocation)
}

impl WrittenAllocations {
    pub fn wrote(&mut self, key: String, spec: GPUAllocationSpec, resource_version: u64) {
        self.by_key.insert(
            key,
            WrittenAllocation {
                spec,
                resource_version,
            },
        );
    }

    /// A launcher pod we pinned, which will use `u` on its node.
    pub fn pinned(&mut self, key: String, u: PodUse, resource_version: u64) {
        self.pins.insert(key, (u, resource_version));
    }

    /// An allocation and pins about to be written, while other sets are
    /// decided: they hold their node's room, their class's budget and
    /// their namespace's quota as written ones do, so that two sets placed
    /// at once never count on the same GPUs (I1, I2). What they replace
    /// (an earlier write of the same allocation the cache does not show
    /// yet) is kept, to be put back should this write not land.
    pub fn assume(
        &mut self,
        allocations: Vec<(String, GPUAllocationSpec)>,
        pins: Vec<(String, PodUse)>,
    ) -> Assumed {
        let mut a = Assumed::default();
        for (key, spec) in allocations {
            let before = self.by_key.insert(
                key.clone(),
                WrittenAllocation {
                    spec,
                    resource_version: ASSUMED,
                },
            );
            a.allocations.push((key, before));
        }
        for (key, u) in pins {
            let before = self.pins.insert(key.clone(), (u, ASSUMED));
            a.pins.push((key, before));
        }
        a
    }

    /// The write is over: what it wrote carries its version by now; what
    /// it did not write (it failed first) is let go, or what it replaced
    /// put back. Returns what was let go: room, budget and quota no one
    /// holds any more, which sets held back by it must look at again.
    pub fn settle_assumed(&mut self, a: Assumed) -> Forgotten {
        let mut forgotten = Forgotten::default();
        for (k, before) in a.allocations {
            if let Some(e) = self
                .by_key
                .get(&k)
                .filter(|e| e.resource_version == ASSUMED)
            {
                forgotten.allocations.push((k.clone(), e.spec.clone()));
                match before {
                    Some(b) => self.by_key.insert(k, b),
                    None => self.by_key.remove(&k),
                };
            }
        }
        for (k, before) in a.pins {
            if let Some((u, _)) = self.pins.get(&k).filter(|(_, rv)| *rv == ASSUMED) {
                forgotten.nodes.push(u.node.to_string());
                match before {
                    Some(b) => self.pins.insert(k, b),
                    None => self.pins.remove(&k),
                };
            }
        }
        forgotten
    }

    /// Forgets what the watches have passed.
    pub fn prune(&mut self, w: &World) {
        let seen = watched(w);
        self.by_key.retain(|_, a| a.resource_version > seen);
        let pods = w.observed_rv(Kind::Pod);
        self.pins.retain(|_, (_, rv)| *rv > pods);
    }

    /// Pins the cache does not count on their node yet.
    fn unseen_pins<'a>(&'a self, w: &'a World, node: &'a str) -> impl Iterator<Item = &'a PodUse> {
        let pods = w.observed_rv(Kind::Pod);
        self.pins
            .iter()
            .filter(move |(k, (u, rv))| {
                *rv > pods && &*u.node == node && w.pod_use(k).is_none_or(|c| c.node != u.node)
            })
            .map(|(_, (u, _))| u)
    }

    /// What pods we pinned to `node` request of `resource`, where the
    /// cache does not count them yet.
    pub fn pinned_requests(&self, w: &World, node: &str, resource: &str) -> u64 {
        total(self.unseen_pins(w, node).map(|u| u.requests.get(resource)))
    }

    /// How many pods we pinned to `node` the cache does not count yet.
    pub fn pinned_pods(&self, w: &World, node: &str) -> u64 {
        self.unseen_pins(w, node).count() as u64
    }

    /// Forgets an entry a live read showed gone.
    pub fn forget(&mut self, key: &str) {
        self.by_key.remove(key);
    }

    /// Entries the cache does not show: after a relist, only a live read
    /// can tell whether they still exist.
    pub fn unconfirmed(&self, w: &World) -> Vec<String> {
        self.pending(w)
            .filter(|(k, a)| a.resource_version != ASSUMED && w.allocation(k).is_none())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Entries the watch has not passed.
    fn pending<'a>(
        &'a self,
        w: &World,
    ) -> impl Iterator<Item = (&'a String, &'a WrittenAllocation)> {
        let seen = watched(w);
        self.by_key
            .iter()
            .filter(move |(_, a)| a.resource_version > seen)
    }

    /// Our allocation at `key`, while the watch has not passed it.
    pub fn get(&self, w: &World, key: &str) -> Option<&GPUAllocationSpec> {
        self.by_key
            .get(key)
            .filter(|a| a.resource_version > watched(w))
            .map(|a| &a.spec)
    }

    /// D2: the devices named by entries the cache does not show yet:
    /// held, as the cache's records' devices are.
    pub fn devices(&self, w: &World) -> std::collections::HashSet<crate::world::devices::DeviceId> {
        let seen = watched(w);
        self.by_key
            .values()
            .filter(|a| a.resource_version > seen)
            .flat_map(|a| a.spec.devices.iter().map(Into::into))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.by_key.len() + self.pins.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty() && self.pins.is_empty()
    }

    /// GPUs of `resource` on `node` held by entries the cache does not count yet.
    pub fn on(&self, w: &World, node: &str, resource: &str) -> u64 {
        total(
            self.uncounted(w)
                .filter(|s| s.node_name == node && s.resource_name == resource)
                .map(|s| u64::from(s.count)),
        )
    }

    /// Nodes where entries the cache does not count yet hold GPUs of
    /// `resource`: their room is less than the cache's count says.
    pub fn nodes_holding(&self, w: &World, resource: &str) -> Vec<String> {
        self.uncounted(w)
            .filter(|s| s.resource_name == resource)
            .map(|s| s.node_name.clone())
            .collect()
    }

    /// GPUs of `class` held by entries the cache does not count yet.
    pub fn of_class(&self, w: &World, class: &str) -> u64 {
        total(
            self.uncounted_anywhere(w)
                .map(|(_, s)| s)
                .filter(|s| s.class_name == class)
                .map(|s| u64::from(s.count)),
        )
    }

    /// GPUs held in namespace `ns` by entries the cache does not count
    /// yet: of `class`, or of every class when `class` is None.
    pub fn in_namespace(&self, w: &World, ns: &str, class: Option<&str>) -> u64 {
        total(
            self.uncounted_anywhere(w)
                .filter(|(k, s)| {
                    crate::world::split_key(k).0 == ns && class.is_none_or(|c| s.class_name == c)
                })
                .map(|(_, s)| u64::from(s.count)),
        )
    }

    /// Pending entries whose spec the cache does not show: counted on top of it.
    fn uncounted<'a>(&'a self, w: &'a World) -> impl Iterator<Item = &'a GPUAllocationSpec> {
        self.pending(w)
            .filter(move |(k, a)| w.allocation(k).is_none_or(|r| r.spec != a.spec))
            .map(|(_, a)| &a.spec)
    }

    /// Pending entries the cache does not count for their class and
    /// namespace: a record moved to another node (a Lost claim's, G6) is
    /// counted there already, on whichever node, so it counts once against
    /// budgets and quotas (Q1: Lost claims that move count once).
    fn uncounted_anywhere<'a>(
        &'a self,
        w: &'a World,
    ) -> impl Iterator<Item = (&'a String, &'a GPUAllocationSpec)> {
        self.pending(w)
            .filter(move |(k, a)| {
                w.allocation(k).is_none_or(|r| {
                    let s = &r.spec;
                    (&s.claim_uid, &s.class_name, s.count)
                        != (&a.spec.claim_uid, &a.spec.class_name, a.spec.count)
                })
            })
            .map(|(k, a)| (k, &a.spec))
    }
}
