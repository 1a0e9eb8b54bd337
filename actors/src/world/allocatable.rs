//! Nodes by what they have of each GPU resource, most first, whatever is
//! free there: O2 asks whether some node could hold a set were its GPUs
//! all free, and walks the nodes with enough from the top instead of
//! every node of the cluster. Kept as nodes come, go or change their
//! allocatable, which is rare.

use super::World;
use crate::api::NodeFacts;
use crate::api::resources::is_extended;
use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// A resource's nodes, by how many of it each has (most first), then name.
type ByAmount = BTreeSet<(Reverse<u64>, String)>;

#[derive(Default)]
pub(super) struct AllocatableIndex(Mutex<HashMap<String, ByAmount>>);

impl AllocatableIndex {
    /// `node`'s entries moved from `old` to `new` (None: none there).
    pub(super) fn moved(&self, name: &str, old: Option<&NodeFacts>, new: Option<&NodeFacts>) {
        let mut by = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let gpus = |n: Option<&NodeFacts>| -> Vec<(String, u64)> {
            n.into_iter()
                .flat_map(|n| n.allocatable.iter())
                .filter(|(r, v)| is_extended(r) && **v > 0)
                .map(|(r, v)| (r.clone(), *v))
                .collect()
        };
        for (r, v) in gpus(old) {
            if let Some(set) = by.get_mut(&r) {
                set.remove(&(Reverse(v), name.to_string()));
                if set.is_empty() {
                    by.remove(&r);
                }
            }
        }
        for (r, v) in gpus(new) {
            by.entry(r)
                .or_default()
                .insert((Reverse(v), name.to_string()));
        }
    }
}

impl World {
    /// The most of `resource` any node has allocatable (0: none has any).
    pub fn largest_allocatable(&self, resource: &str) -> u64 {
        let by = self.allocatable.0.lock().unwrap_or_else(|e| e.into_inner());
        by.get(resource)
            .and_then(|s| s.first())
            .map_or(0, |(std::cmp::Reverse(v), _)| *v)
    }

    /// Up to `batch` nodes with at least `at_least` of `resource`
    /// allocatable, most first, past the first `skip`.
    pub fn nodes_by_allocatable(
        &self,
        resource: &str,
        at_least: u64,
        skip: usize,
        batch: usize,
    ) -> Vec<String> {
        let by = self.allocatable.0.lock().unwrap_or_else(|e| e.into_inner());
        by.get(resource)
            .into_iter()
            .flatten()
            .take_while(|(v, _)| v.0 >= at_least)
            .skip(skip)
            .take(batch)
            .map(|(_, n)| n.clone())
            .collect()
    }

    /// How many devices serve the DRA class `class` on `node`, free or not.
    pub fn serving_count(&self, class: &str, node: &str) -> usize {
        self.devices.serving_count(class, node)
    }

    /// Up to `batch` nodes where at least `at_least` devices serve the DRA
    /// class `class`, most first, past the first `skip`.
    pub fn nodes_by_serving(
        &self,
        class: &str,
        at_least: usize,
        skip: usize,
        batch: usize,
    ) -> Vec<String> {
        self.devices.nodes_by_serving(class, at_least, skip, batch)
    }
}
