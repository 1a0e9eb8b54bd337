//! D1, D2: each DRA class's capacity (its devices on Ready nodes its
//! nodeSelector picks, free or held by its own records), kept per node
//! and summed, as `capacity.rs` keeps a device plugin class's. Counting
//! the class over every device on each question made every placement of
//! a 15,000-node cluster count 120,000 devices (the benchmark found it).
//! Kept lazily, as the free index is: a change marks the (node, class)
//! pairs it touches, or the whole class; the next question counts those.

use super::World;
use crate::api::GPUClass;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

#[derive(Default)]
pub(crate) struct DraCapacity {
    /// (node, class) pairs whose count may have moved.
    dirty: Mutex<HashSet<(String, String)>>,
    /// Classes to count again on every node.
    dirty_classes: Mutex<HashSet<String>>,
    counts: Mutex<HashMap<String, ClassCount>>,
}

/// One class's counts per node, their sum, and the nodeSelector they
/// were counted with (a change of it counts the class again).
#[derive(Default)]
struct ClassCount {
    per_node: HashMap<String, u64>,
    sum: u64,
    selector: Option<BTreeMap<String, String>>,
}

impl ClassCount {
    fn set(&mut self, node: String, n: u64) {
        let before = if n == 0 {
            self.per_node.remove(&node)
        } else {
            self.per_node.insert(node, n)
        };
        self.sum = self
            .sum
            .saturating_sub(before.unwrap_or(0))
            .saturating_add(n);
    }
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl World {
    /// The DRA classes' devices on `nodes` may count otherwise (a device
    /// change there; the node's readiness or labels).
    pub(super) fn dra_capacity_moved(&self, nodes: &BTreeSet<String>, classes: &[String]) {
        let mut dirty = locked(&self.dra_capacity.dirty);
        for n in nodes {
            for c in classes {
                dirty.insert((n.clone(), c.clone()));
            }
        }
    }

    /// These classes count otherwise on every node.
    pub(super) fn dra_capacity_classes_moved(&self, classes: impl IntoIterator<Item = String>) {
        locked(&self.dra_capacity.dirty_classes).extend(classes);
    }

    /// What `class` counts on `node` (D2): its devices there, free or its
    /// own records', where the node is Ready and `selector` picks it.
    fn dra_count_on(
        &self,
        name: &str,
        selector: Option<&BTreeMap<String, String>>,
        node: &str,
    ) -> u64 {
        match self.node(node) {
            Some(n) if n.ready && n.matches(selector) => self.dra_devices_counted(name, node),
            _ => 0,
        }
    }

    /// D1, D2: the class's capacity, the devices that serve it on Ready
    /// nodes its nodeSelector picks, free or held by its own records.
    pub fn dra_capacity(&self, class: &GPUClass) -> u64 {
        let name = class.metadata.name.as_deref().unwrap_or_default();
        let selector = class.spec.node_selector.as_ref();
        let mut counts = locked(&self.dra_capacity.counts);
        let marked: Vec<(String, String)> = {
            let mut dirty = locked(&self.dra_capacity.dirty);
            let mine: Vec<_> = dirty.iter().filter(|(_, c)| c == name).cloned().collect();
            for k in &mine {
                dirty.remove(k);
            }
            mine
        };
        let whole = locked(&self.dra_capacity.dirty_classes).remove(name);
        let fresh = !counts.contains_key(name);
        let count = counts.entry(name.to_string()).or_default();
        if whole || fresh || count.selector.as_ref() != selector {
            let mut nodes: BTreeSet<String> = self.dra_nodes_serving(name).into_iter().collect();
            nodes.extend(count.per_node.keys().cloned());
            for n in nodes {
                let c = self.dra_count_on(name, selector, &n);
                count.set(n, c);
            }
            count.selector = selector.cloned();
        } else {
            for (n, _) in marked {
                let c = self.dra_count_on(name, selector, &n);
                count.set(n, c);
            }
        }
        let sum = count.sum;
        drop(counts);
        debug_assert_eq!(
            sum,
            self.dra_capacity_counted(class),
            "the kept capacity of {name}"
        );
        sum
    }

    /// The capacity counted over every node (test builds check the kept
    /// one against it).
    fn dra_capacity_counted(&self, class: &GPUClass) -> u64 {
        let name = class.metadata.name.as_deref().unwrap_or_default();
        self.dra_nodes_serving(name)
            .iter()
            .map(|n| self.dra_count_on(name, class.spec.node_selector.as_ref(), n))
            .fold(0u64, u64::saturating_add)
    }
}
