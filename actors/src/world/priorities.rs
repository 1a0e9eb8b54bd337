//! O1: the PriorityClasses, as what each name is worth and which one is
//! the cluster's default (`globalDefault: true`), so that a VMI's
//! priority is one lookup.

use super::World;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use std::collections::BTreeMap;
use std::sync::RwLock;

/// Every PriorityClass, by name: its value, and whether it is a global
/// default. Few (a cluster has tens), read on every gate decision.
#[derive(Default)]
pub(super) struct Priorities(RwLock<BTreeMap<String, (i32, bool)>>);

/// What a PriorityClass changed: whether any value or the default moved.
pub struct PriorityChange {
    pub name: String,
    pub moved: bool,
}

impl Priorities {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, (i32, bool)>> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }
}

impl World {
    pub(super) fn priority_class_changed(&self, p: PriorityClass, deleted: bool) -> PriorityChange {
        let name = p.metadata.name.clone().unwrap_or_default();
        let now = (!deleted).then(|| (p.value.unwrap_or(0), p.global_default.unwrap_or(false)));
        let mut map = self.priorities.0.write().unwrap_or_else(|e| e.into_inner());
        let old = match now {
            Some(v) => map.insert(name.clone(), v),
            None => map.remove(&name),
        };
        PriorityChange {
            moved: old != now,
            name,
        }
    }

    /// O1: the priority of a VMI whose `spec.priorityClassName` is
    /// `class`: that class's value (a name no PriorityClass has: 0);
    /// without one, the value of the PriorityClass with `globalDefault:
    /// true` (the lowest of several, as the Priority admission plugin
    /// picks), else 0.
    pub fn priority_of(&self, class: Option<&str>) -> i32 {
        let map = self.priorities.read();
        match class.filter(|c| !c.is_empty()) {
            Some(c) => map.get(c).map_or(0, |(v, _)| *v),
            None => map
                .values()
                .filter(|(_, default)| *default)
                .map(|(v, _)| *v)
                .min()
                .unwrap_or(0),
        }
    }

    /// The names of the PriorityClasses the cache holds.
    pub(super) fn priority_class_names(&self) -> Vec<String> {
        self.priorities.read().keys().cloned().collect()
    }
}
