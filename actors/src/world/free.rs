//! Nodes by the GPUs they have free, per device resource: G3's best fit
//! walks the nodes with room, tightest first, instead of judging every
//! node of the cluster for every set (at 10,000 claims a storm's set
//! looked at 1,500 nodes, each with NodeResourcesFit and its pods' use).
//!
//! Free is what G3 counts on a node where placement has nothing under
//! way: allocatable, less the allocations recorded there and what pods use
//! beyond them. Kept lazily: a change marks the (node, resource) pairs it
//! touches, and the next question counts those again, so a cold start's
//! events cost a mark each and no count, and a burst of changes on one
//! node is counted once.

use super::World;
use crate::api::resources::is_extended;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

/// A node and resource whose free GPUs may have moved.
type Place = (String, String);

#[derive(Default)]
pub(crate) struct FreeIndex {
    /// Marked by the world's writers (who never take `counts`, so a
    /// writer never waits on a count); taken by the next question.
    dirty: Mutex<HashSet<Place>>,
    /// DRA classes whose devices may have moved on any node (a class's
    /// selectors, a DeviceClass, DRA served or not): counted again on
    /// every node at the next question about them.
    dirty_classes: Mutex<HashSet<String>>,
    counts: Mutex<Counts>,
}

/// A DRA class's devices are counted in the index as a resource of their
/// own, one per class (classes of one DeviceClass select differently).
const DRA_KEY: &str = "dra:";

/// The index's resource for the devices of DRA class `class` (D2).
pub fn dra_key(class: &str) -> String {
    format!("{DRA_KEY}{class}")
}

#[derive(Default)]
struct Counts {
    /// Per (node, resource): the GPUs free there as last counted.
    free: HashMap<Place, u64>,
    /// Per resource: (free GPUs, node), fewest first, ties by name.
    by_free: HashMap<String, BTreeSet<(u64, String)>>,
}

impl Counts {
    fn set(&mut self, (node, resource): Place, now: Option<u64>) {
        let key = (node, resource);
        let before = match now {
            Some(n) => self.free.insert(key.clone(), n),
            None => self.free.remove(&key),
        };
        if before == now {
            return;
        }
        let (node, resource) = key;
        let order = self.by_free.entry(resource.clone()).or_default();
        if let Some(b) = before {
            order.remove(&(b, node.clone()));
        }
        if let Some(n) = now {
            order.insert((n, node));
        }
        if order.is_empty() {
            self.by_free.remove(&resource);
        }
    }
}

/// A lock; one that a panic poisoned still holds whole counts and marks
/// (each is changed in one step).
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl World {
    /// The free GPUs of these resources on `node` may have moved. Device
    /// resources only: cpu, memory and pods are NodeResourcesFit's.
    pub(super) fn free_moved<'a>(&self, node: &str, resources: impl IntoIterator<Item = &'a str>) {
        let mut dirty = locked(&self.free.dirty);
        for r in resources.into_iter().filter(|r| is_extended(r)) {
            dirty.insert((node.to_string(), r.to_string()));
        }
    }

    /// D2: the devices of DRA classes may have moved on the nodes
    /// `change` names (for every DRA class: they are few). Its classes are
    /// those the nodes' changes concern, not moved everywhere: a change
    /// that moves a class on every node (a DeviceClass, a class's
    /// selectors, DRA served or not) says so with `dra_classes_moved`.
    pub(super) fn dra_free_moved(&self, change: &super::devices::DevicesChange) {
        if !change.nodes.is_empty() {
            let mut classes = Vec::new();
            self.for_each_class(|c| {
                if c.spec.device_class_name.is_some() {
                    classes.push(c.metadata.name.clone().unwrap_or_default());
                }
            });
            {
                let mut dirty = locked(&self.free.dirty);
                for n in &change.nodes {
                    for c in &classes {
                        dirty.insert((n.clone(), dra_key(c)));
                    }
                }
            }
            // What they count toward the classes' capacity too.
            self.dra_capacity_moved(&change.nodes, &classes);
        }
    }

    /// D2: these DRA classes' devices may have moved on every node.
    pub(super) fn dra_classes_moved(&self, classes: impl IntoIterator<Item = String>) {
        let classes: Vec<String> = classes.into_iter().collect();
        self.dra_capacity_classes_moved(classes.iter().cloned());
        locked(&self.free.dirty_classes).extend(classes);
    }

    /// What G3 counts free of `resource` on `node` with nothing of
    /// placement's under way (0 where it has none).
    pub fn free_of(&self, node: &str, resource: &str) -> u64 {
        self.count_free(node, resource).unwrap_or(0)
    }

    /// What G3 counts free of `resource` on `node` with nothing of
    /// placement's under way; None where the node has none of it. For a
    /// DRA class's key, its free devices there (D2).
    fn count_free(&self, node: &str, resource: &str) -> Option<u64> {
        if let Some(class) = resource.strip_prefix(DRA_KEY) {
            let free = self.free_devices(class, node).len() as u64;
            return (free > 0 || self.dra_classes_on(node).iter().any(|c| c == class))
                .then_some(free);
        }
        let n = self.node(node)?;
        let allocatable = n.allocatable(resource);
        (allocatable > 0).then(|| {
            let used = self
                .allocated_on(node, resource)
                .saturating_add(self.used_beyond_allocations(node, resource));
            allocatable.saturating_sub(used)
        })
    }

    /// Up to `most` nodes with at least `min` GPUs of `resource` free, as
    /// `(free, node)` in the order best fit wants them (fewest free first,
    /// ties by name), from past `after` on.
    pub fn nodes_by_free(
        &self,
        resource: &str,
        min: u64,
        after: Option<&(u64, String)>,
        most: usize,
    ) -> Vec<(u64, String)> {
        // The counts first, then the marks: two questions at once cannot
        // set an older count over a newer one. Writers take only the marks.
        let mut counts = locked(&self.free.counts);
        let marked = std::mem::take(&mut *locked(&self.free.dirty));
        for (n, r) in marked {
            let c = self.count_free(&n, &r);
            counts.set((n, r), c);
        }
        if let Some(class) = resource.strip_prefix(DRA_KEY)
            && locked(&self.free.dirty_classes).remove(class)
        {
            // Every node that serves the class, and every node counted
            // for it before (it may serve it no more).
            let mut nodes: BTreeSet<String> = self.dra_nodes_serving(class).into_iter().collect();
            if let Some(order) = counts.by_free.get(resource) {
                nodes.extend(order.iter().map(|(_, n)| n.clone()));
            }
            for n in nodes {
                let c = self.count_free(&n, resource);
                counts.set((n, resource.to_string()), c);
            }
        }
        let Some(order) = counts.by_free.get(resource) else {
            return Vec::new();
        };
        let from = (min, String::new());
        let from = match after {
            Some(a) if *a >= from => std::ops::Bound::Excluded(a.clone()),
            _ => std::ops::Bound::Included(from),
        };
        order
            .range((from, std::ops::Bound::Unbounded))
            .take(most)
            .cloned()
            .collect()
    }
}
