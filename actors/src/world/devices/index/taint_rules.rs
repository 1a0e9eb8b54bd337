//! DeviceTaintRules by the pool they select (D2), and ours among them
//! (D7). A platform has a few rules of its own; gpu-claims keeps one per
//! managed pool, fifteen thousand on a large cluster: so a device's rules
//! are looked up by its pool, never by a pass over every rule, and a
//! rule's change touches its pool's nodes only.

use super::{DeviceId, PoolKey};
use crate::api::{MANAGED_BY_LABEL, MANAGED_BY_VALUE, MANAGED_TAINT};
use k8s_openapi::api::resource::v1::{DeviceTaint, DeviceTaintRule};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Whether D2 and D6 count a taint: all but D7's own, which closes a
/// pool to kube-scheduler, not to gpu-claims.
pub fn counts(t: &DeviceTaint) -> bool {
    t.key != MANAGED_TAINT
}

/// The one pool a rule's selector names: a driver and a pool, no device.
pub fn one_pool(rule: &DeviceTaintRule) -> Option<PoolKey> {
    let s = rule.spec.device_selector.as_ref()?;
    match (&s.driver, &s.pool, &s.device) {
        (Some(d), Some(p), None) => Some((d.as_str().into(), p.as_str().into())),
        _ => None,
    }
}

/// Whether a rule is ours (D7): our label, whatever its name; one being
/// deleted (a finalizer someone put on it holds it) is ours no more.
pub fn is_ours(rule: &DeviceTaintRule) -> bool {
    rule.metadata.deletion_timestamp.is_none()
        && rule
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY_LABEL))
            .is_some_and(|v| v == MANAGED_BY_VALUE)
}

/// Whether our rule closes its pool as D7 writes it: the managed taint,
/// no value, NoSchedule, on the one pool its selector names.
pub fn closes(rule: &DeviceTaintRule) -> bool {
    let t = &rule.spec.taint;
    is_ours(rule)
        && one_pool(rule).is_some()
        && t.key == MANAGED_TAINT
        && t.value.as_deref().unwrap_or_default().is_empty()
        && t.effect == "NoSchedule"
}

/// Whether a rule's selector takes the device: every field it sets
/// matches; no selector takes none (the API's and the eviction
/// controller's reading).
fn selects(rule: &DeviceTaintRule, id: &DeviceId) -> bool {
    let Some(s) = &rule.spec.device_selector else {
        return false;
    };
    let is = |f: &Option<String>, v: &str| f.as_deref().is_none_or(|f| f == v);
    is(&s.driver, &id.driver) && is(&s.pool, &id.pool) && is(&s.device, &id.device)
}

#[derive(Default)]
pub struct TaintRules {
    by_name: BTreeMap<String, Arc<DeviceTaintRule>>,
    /// The rules whose selector names a driver and a pool, by that pool.
    by_pool: HashMap<PoolKey, BTreeSet<String>>,
    /// The rest: they may take devices of any pool (a platform's few).
    broad: BTreeSet<String>,
}

/// Where a rule sits in the index: its pool, or among the broad ones.
fn place(rule: &DeviceTaintRule) -> Option<PoolKey> {
    let s = rule.spec.device_selector.as_ref()?;
    match (&s.driver, &s.pool) {
        (Some(d), Some(p)) => Some((d.as_str().into(), p.as_str().into())),
        _ => None,
    }
}

impl TaintRules {
    pub fn get(&self, name: &str) -> Option<&Arc<DeviceTaintRule>> {
        self.by_name.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.by_name.keys()
    }

    /// A rule made, changed or removed: what it was before.
    pub fn put(
        &mut self,
        name: &str,
        now: Option<Arc<DeviceTaintRule>>,
    ) -> Option<Arc<DeviceTaintRule>> {
        let before = self.by_name.remove(name);
        if let Some(b) = &before {
            match place(b) {
                Some(p) => {
                    if let Some(set) = self.by_pool.get_mut(&p) {
                        set.remove(name);
                        if set.is_empty() {
                            self.by_pool.remove(&p);
                        }
                    }
                }
                None => {
                    self.broad.remove(name);
                }
            }
        }
        if let Some(r) = now {
            match place(&r) {
                Some(p) => {
                    self.by_pool.entry(p).or_default().insert(name.to_string());
                }
                None => {
                    self.broad.insert(name.to_string());
                }
            }
            self.by_name.insert(name.to_string(), r);
        }
        before
    }

    /// The taints the rules put on a device: its pool's rules and the
    /// broad ones that select it.
    pub fn on_device<'a>(&'a self, id: &'a DeviceId) -> impl Iterator<Item = &'a DeviceTaint> + 'a {
        let pool = self.by_pool.get(&id.pool_key());
        pool.into_iter()
            .flatten()
            .chain(self.broad.iter())
            .filter_map(|n| self.by_name.get(n))
            .filter(move |r| selects(r, id))
            .map(|r| &r.spec.taint)
    }

    /// Our rules of one pool, by name.
    pub fn ours_for(&self, pool: &PoolKey) -> Vec<Arc<DeviceTaintRule>> {
        self.by_pool
            .get(pool)
            .into_iter()
            .flatten()
            .filter_map(|n| self.by_name.get(n))
            .filter(|r| is_ours(r) && one_pool(r).as_ref() == Some(pool))
            .cloned()
            .collect()
    }

    /// D7: whether one of our rules closes the pool.
    pub fn closed(&self, pool: &PoolKey) -> bool {
        self.by_pool
            .get(pool)
            .into_iter()
            .flatten()
            .filter_map(|n| self.by_name.get(n))
            .any(|r| closes(r) && one_pool(r).as_ref() == Some(pool))
    }

    /// The pools some rule of ours names.
    pub fn our_pools(&self) -> impl Iterator<Item = &PoolKey> {
        self.by_pool.iter().filter_map(|(p, names)| {
            names
                .iter()
                .filter_map(|n| self.by_name.get(n))
                .any(|r| is_ours(r))
                .then_some(p)
        })
    }

    /// Rules of ours that name no one pool (a selector edited to take a
    /// device, a driver or everything): nothing of D7's, to be deleted.
    pub fn strays(&self) -> Vec<Arc<DeviceTaintRule>> {
        self.by_name
            .values()
            .filter(|r| is_ours(r) && one_pool(r).is_none())
            .cloned()
            .collect()
    }
}
