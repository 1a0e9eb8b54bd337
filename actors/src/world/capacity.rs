//! Each class's capacity (GPUs of its resource on Ready nodes its
//! nodeSelector picks), kept as nodes and classes change. Classes that
//! name the same resource and the same selector count the same GPUs on
//! every node, so they are kept as one group: a node's change costs a
//! count per group (a resource and a selector) and a write per class
//! whose capacity moved, not a count per class (a cluster with hundreds
//! of classes, or a pool of classes per tenant, pays for its selectors).

use super::World;
use crate::api::amount::Tally;
use crate::api::{GPUClass, NodeFacts};
use dashmap::DashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What a class counts: its resource, and the labels a node needs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Counts {
    resource: String,
    selector: Option<BTreeMap<String, String>>,
}

impl Counts {
    fn of(c: &GPUClass) -> Self {
        Self {
            resource: c.spec.resource_name.clone(),
            selector: c.spec.node_selector.clone(),
        }
    }

    /// What a node gives such a class: its allocatable of the resource,
    /// when it is Ready and the selector picks it.
    fn on(&self, n: Option<&NodeFacts>) -> u64 {
        n.filter(|n| n.ready && n.matches(self.selector.as_ref()))
            .map_or(0, |n| n.allocatable(&self.resource))
    }
}

#[derive(Default)]
pub(crate) struct Capacity {
    /// Per class, its capacity.
    by_class: DashMap<String, Tally>,
    /// The classes of each group.
    groups: DashMap<Counts, BTreeSet<String>>,
}

impl World {
    /// A class made, changed or removed: its group, and its capacity
    /// counted once over the nodes when it counts other GPUs than before.
    pub(super) fn class_capacity_changed(
        &self,
        name: &str,
        old: Option<&GPUClass>,
        new: Option<&GPUClass>,
    ) {
        let cap = &self.capacity;
        // DRA classes count devices (D2), not a resource: no group.
        let counts = |c: &GPUClass| c.spec.device_class().is_none().then(|| Counts::of(c));
        let (was, now) = (old.and_then(counts), new.and_then(counts));
        if was == now {
            return;
        }
        if let Some(g) = &was
            && let Some(mut names) = cap.groups.get_mut(g)
        {
            names.remove(name);
            let empty = names.is_empty();
            drop(names);
            if empty {
                cap.groups.remove_if(g, |_, n| n.is_empty());
            }
        }
        match now {
            Some(g) => {
                let n = self.nodes.iter().map(|n| g.on(Some(&n))).collect();
                cap.by_class.insert(name.to_string(), n);
                cap.groups.entry(g).or_default().insert(name.to_string());
            }
            None => {
                cap.by_class.remove(name);
            }
        }
    }

    /// A node changed: the classes whose capacity it moved, sorted.
    pub(super) fn node_capacity_changed(
        &self,
        old: Option<&Arc<NodeFacts>>,
        new: Option<&Arc<NodeFacts>>,
    ) -> Vec<String> {
        let cap = &self.capacity;
        let mut moved = Vec::new();
        for g in cap.groups.iter() {
            let (before, after) = (g.key().on(old.map(|n| &**n)), g.key().on(new.map(|n| &**n)));
            if before == after {
                continue;
            }
            for name in g.value() {
                let mut c = cap.by_class.entry(name.clone()).or_default();
                c.add(after);
                c.sub(before);
                moved.push(name.clone());
            }
        }
        // DRA classes with devices on the node: whether it is Ready and
        // which labels it has decide whether they count (D2).
        let facts = |n: Option<&Arc<NodeFacts>>| n.map(|n| (n.ready, n.labels.clone()));
        if facts(old) != facts(new) {
            let name = old.or(new).map(|n| n.name.as_str()).unwrap_or_default();
            let classes = self.dra_classes_on(name);
            self.dra_capacity_moved(&BTreeSet::from([name.to_string()]), &classes);
            moved.extend(classes);
        }
        // The groups' map iterates in no fixed order.
        moved.sort();
        moved.dedup();
        moved
    }

    /// A class's capacity, as `capacity_of` would count it: a DRA
    /// class's from the devices that serve it (D2).
    pub fn class_capacity(&self, name: &str) -> u64 {
        if let Some(c) = self.class(name).filter(|c| c.spec.device_class().is_some()) {
            return self.dra_capacity(&c);
        }
        self.capacity.by_class.get(name).map_or(0, |c| c.get())
    }
}
