//! The DRA classes: their compiled selectors (the DeviceClass's and
//! their own), the devices that serve each on each node (D1), and why a
//! class serves none.

use super::{DeviceId, DeviceIndex, shared};
use crate::api::{GPUClassSpec, Kind};
use crate::dra::{ClassSelectors, Published, SelectorInvalid};
use crate::world::devices::DevicesChange;
use k8s_openapi::api::resource::v1::DeviceClass;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

/// Why a DRA class serves nothing.
#[derive(Clone, Debug, PartialEq)]
pub enum DraProblem {
    /// The API server serves these DRA kinds not.
    NotServed(Vec<Kind>),
    /// Its DeviceClass does not exist.
    DeviceClassMissing(String),
    /// A selector (the DeviceClass's or its own) does not compile, or
    /// errors on a device.
    SelectorInvalid(SelectorInvalid),
}

impl fmt::Display for DraProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DraProblem::NotServed(kinds) => {
                let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
                write!(
                    f,
                    "the API server does not serve resource.k8s.io/v1 {}: this cluster has no DRA, so the class serves no device",
                    names.join(", ")
                )
            }
            DraProblem::DeviceClassMissing(dc) => write!(
                f,
                "DeviceClass {dc} does not exist: the class serves no device until it does"
            ),
            DraProblem::SelectorInvalid(e) => write!(
                f,
                "{e} (expression: {}); the class serves no device until it is fixed",
                e.expression
            ),
        }
    }
}

/// A DRA GPUClass as the index keeps it.
pub(super) struct DraClass {
    device_class: String,
    selectors: Vec<String>,
    /// None while its DeviceClass does not exist.
    compiled: Option<Result<ClassSelectors, SelectorInvalid>>,
    /// Per node, the devices that serve it: their positions in the node's
    /// devices (by pool, then name), 4 bytes each rather than a name. A
    /// node's devices change only when a pool republishes there, and that
    /// evaluates every class on the node again.
    serving: BTreeMap<Arc<str>, Vec<u32>>,
    /// The same nodes by how many devices serve it there, most first (O2:
    /// a node that could hold a set, found without a pass over them all).
    by_count: BTreeSet<(std::cmp::Reverse<usize>, Arc<str>)>,
    /// Devices a selector errors on: while any does, it serves nothing.
    errors: BTreeMap<DeviceId, SelectorInvalid>,
}

/// What the index knows of one DRA class: its devices per node (by pool,
/// then name) and why it serves none, if it does not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassDevices {
    pub by_node: BTreeMap<String, Vec<DeviceId>>,
}

impl DraClass {
    /// The positions of the devices that serve it on `node`, ascending.
    pub(super) fn serving_on(&self, node: &str) -> Option<&[u32]> {
        self.serving.get(node).map(Vec::as_slice)
    }
}

impl DeviceIndex {
    /// Evaluates every DRA class on these nodes' devices; the classes
    /// whose devices there changed.
    pub(super) fn evaluate_nodes(&mut self, nodes: &BTreeSet<String>) -> BTreeSet<String> {
        let names: Vec<String> = self.classes.keys().cloned().collect();
        let mut moved = BTreeSet::new();
        for class in names {
            for node in nodes {
                if self.evaluate(&class, node) {
                    moved.insert(class.clone());
                }
            }
        }
        moved
    }

    /// The devices of `node` that serve `class`, evaluated again; true
    /// when they (or its errors there) changed.
    fn evaluate(&mut self, class: &str, node: &str) -> bool {
        let Some(c) = self.classes.get(class) else {
            return false;
        };
        let mut serving: Vec<u32> = Vec::new();
        let mut errors = BTreeMap::new();
        if let Some(Ok(selectors)) = &c.compiled {
            for (at, (pool, d)) in self.node_devices(node).enumerate() {
                let Some(device) = d.device() else { continue };
                let published = Published {
                    node,
                    driver: &pool.0,
                    pool: &pool.1,
                    device,
                };
                match selectors.serves(&published) {
                    // More than u32::MAX devices on a node cannot be
                    // published (a slice holds at most 128).
                    Ok(true) => serving.extend(u32::try_from(at).ok()),
                    Ok(false) => {}
                    Err(e) => {
                        errors.insert(d.id(pool), e);
                    }
                }
            }
        }
        let before_errors: Vec<DeviceId> = c
            .errors
            .keys()
            .filter(|id| self.node_of(id).is_none_or(|n| n == node))
            .cloned()
            .collect();
        let Some(c) = self.classes.get_mut(class) else {
            return false;
        };
        let mut changed = false;
        for id in before_errors {
            if !errors.contains_key(&id) {
                c.errors.remove(&id);
                changed = true;
            }
        }
        for (id, e) in errors {
            if c.errors.insert(id, e.clone()).as_ref() != Some(&e) {
                changed = true;
            }
        }
        serving.shrink_to_fit();
        let name = shared(&self.nodes, node);
        let old = if serving.is_empty() {
            c.serving.remove(node)
        } else {
            c.by_count
                .insert((std::cmp::Reverse(serving.len()), name.clone()));
            c.serving.insert(name.clone(), serving.clone())
        };
        if let Some(o) = &old
            && o.len() != serving.len()
        {
            c.by_count.remove(&(std::cmp::Reverse(o.len()), name));
        }
        changed || old.unwrap_or_default() != serving
    }

    /// Evaluates one class on every node with devices.
    fn evaluate_everywhere(&mut self, class: &str) {
        if let Some(c) = self.classes.get_mut(class) {
            c.serving.clear();
            c.by_count.clear();
            c.errors.clear();
        }
        let nodes: Vec<Arc<str>> = self.nodes.keys().cloned().collect();
        for n in nodes {
            self.evaluate(class, &n);
        }
    }

    fn compile(
        &self,
        class: &str,
        c: &DraClass,
    ) -> Option<Result<ClassSelectors, SelectorInvalid>> {
        let dc = self.device_classes.get(&c.device_class)?;
        let dc_selectors: Vec<String> = dc
            .spec
            .iter()
            .flat_map(|s| s.selectors.iter().flatten())
            .filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone()))
            .collect();
        Some(ClassSelectors::compile(
            &c.device_class,
            &dc_selectors,
            class,
            &c.selectors,
        ))
    }

    /// A GPUClass made, changed or removed; true when its devices or its
    /// standing may have changed.
    pub fn put_class(&mut self, name: &str, spec: Option<&GPUClassSpec>) -> bool {
        let wanted = spec.and_then(|s| {
            let dc = s.device_class()?;
            Some((dc.to_string(), s.selector_expressions()))
        });
        let had = self
            .classes
            .get(name)
            .map(|c| (c.device_class.clone(), c.selectors.clone()));
        if had == wanted {
            return false;
        }
        if let Some((dc, _)) = had
            && let Some(set) = self.by_device_class.get_mut(&dc)
        {
            set.remove(name);
            if set.is_empty() {
                self.by_device_class.remove(&dc);
            }
        }
        self.classes.remove(name);
        let Some((device_class, selectors)) = wanted else {
            return true;
        };
        self.by_device_class
            .entry(device_class.clone())
            .or_default()
            .insert(name.to_string());
        let mut c = DraClass {
            device_class,
            selectors,
            compiled: None,
            serving: BTreeMap::new(),
            by_count: BTreeSet::new(),
            errors: BTreeMap::new(),
        };
        c.compiled = self.compile(name, &c);
        self.classes.insert(name.to_string(), c);
        self.evaluate_everywhere(name);
        true
    }

    /// A DeviceClass made, changed or removed: the classes naming it are
    /// compiled and evaluated again.
    pub fn put_device_class(&mut self, name: &str, now: Option<Arc<DeviceClass>>) -> DevicesChange {
        let same = match (&now, self.device_classes.get(name)) {
            (Some(n), Some(o)) => n.spec == o.spec,
            (None, None) => true,
            _ => false,
        };
        match now {
            Some(c) => self.device_classes.insert(name.to_string(), c),
            None => self.device_classes.remove(name),
        };
        let mut change = DevicesChange::default();
        if same {
            return change;
        }
        let classes: Vec<String> = self
            .by_device_class
            .get(name)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        for class in classes {
            if let Some(c) = self.classes.get(&class) {
                let compiled = self.compile(&class, c);
                if let Some(c) = self.classes.get_mut(&class) {
                    c.compiled = compiled;
                }
            }
            self.evaluate_everywhere(&class);
            change.classes.insert(class);
        }
        change
    }

    /// The API server serves `kind`, or not; the DRA classes whose
    /// standing moved.
    pub fn set_served(&mut self, kind: Kind, served: bool) -> BTreeSet<String> {
        let moved = if served {
            self.not_served.remove(&kind)
        } else {
            self.not_served.insert(kind)
        };
        if moved {
            self.classes.keys().cloned().collect()
        } else {
            BTreeSet::new()
        }
    }

    pub fn problem(&self, class: &str) -> Option<DraProblem> {
        let c = self.classes.get(class)?;
        // DRA's own kinds: a cluster without DeviceTaintRules has DRA (D7
        // says what it lacks).
        let missing: Vec<Kind> = self
            .not_served
            .iter()
            .copied()
            .filter(|k| Kind::DRA.contains(k))
            .collect();
        if !missing.is_empty() {
            return Some(DraProblem::NotServed(missing));
        }
        match &c.compiled {
            None => Some(DraProblem::DeviceClassMissing(c.device_class.clone())),
            Some(Err(e)) => Some(DraProblem::SelectorInvalid(e.clone())),
            Some(Ok(_)) => c
                .errors
                .values()
                .next()
                .map(|e| DraProblem::SelectorInvalid(e.clone())),
        }
    }

    /// The nodes where the class has serving devices (none while it has
    /// a problem: it serves nothing then).
    pub fn nodes_serving<'a>(&'a self, class: &str) -> Box<dyn Iterator<Item = &'a str> + 'a> {
        match self.classes.get(class) {
            Some(c) if self.problem(class).is_none() => Box::new(c.serving.keys().map(|n| &**n)),
            _ => Box::new(std::iter::empty()),
        }
    }

    /// The nodes where at least `at_least` devices serve the class, most
    /// first (none while it has a problem).
    pub fn nodes_by_serving<'a>(
        &'a self,
        class: &str,
        at_least: usize,
    ) -> Box<dyn Iterator<Item = &'a str> + 'a> {
        match self.classes.get(class) {
            Some(c) if self.problem(class).is_none() => Box::new(
                c.by_count
                    .iter()
                    .take_while(move |(n, _)| n.0 >= at_least)
                    .map(|(_, node)| &**node),
            ),
            _ => Box::new(std::iter::empty()),
        }
    }

    /// The devices that serve `class` on `node`, by pool then name (none
    /// while it has a problem).
    pub fn serving(&self, class: &str, node: &str) -> impl Iterator<Item = DeviceId> {
        let positions = match self.classes.get(class) {
            Some(c) if self.problem(class).is_none() => {
                c.serving.get(node).map_or(&[][..], Vec::as_slice)
            }
            _ => &[],
        };
        // Both ascend: one walk over the node's devices picks them out.
        let mut wanted = positions.iter().peekable();
        self.node_devices(node)
            .enumerate()
            .filter_map(move |(at, (pool, d))| {
                let take = wanted
                    .peek()
                    .is_some_and(|w| usize::try_from(**w) == Ok(at));
                take.then(|| {
                    wanted.next();
                    d.id(pool)
                })
            })
    }

    pub fn classes_on(&self, node: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .classes
            .iter()
            .filter(|(_, c)| c.serving.contains_key(node))
            .map(|(n, _)| n.clone())
            .collect();
        out.sort();
        out
    }

    pub fn class_devices(&self, class: &str) -> ClassDevices {
        ClassDevices {
            by_node: self
                .nodes_serving(class)
                .map(|n| (n.to_string(), self.serving(class, n).collect()))
                .collect(),
        }
    }
}
