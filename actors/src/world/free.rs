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
    counts: Mutex<Counts>,
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

    /// What G3 counts free of `resource` on `node` with nothing of
    /// placement's under way; None where the node has none of it.
    fn count_free(&self, node: &str, resource: &str) -> Option<u64> {
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
