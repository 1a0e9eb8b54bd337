//! An actor's view of objects it writes: no older than its own last write,
//! since a watch lags behind the writes it makes.

use super::Outcome;
use crate::api::rv_number;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::sync::Arc;

/// An object that carries metadata (claims, classes).
pub trait WithMeta {
    fn meta(&self) -> &ObjectMeta;
}

impl WithMeta for crate::api::GPUClaim {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
}

impl WithMeta for crate::api::GPUQuota {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
}

impl WithMeta for crate::api::GPUClass {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
}

/// An actor's view of its own object: the cache, unless the cache still
/// shows a version older than the actor's last write (a watch lags behind
/// the writes it makes), in which case what that write returned.
#[derive(Debug)]
pub struct Freshness<T> {
    last: Option<(Option<Arc<T>>, u64)>,
}

impl<T> Default for Freshness<T> {
    fn default() -> Self {
        Self { last: None }
    }
}

impl<T: WithMeta> Freshness<T> {
    pub fn current(&mut self, cached: Option<Arc<T>>) -> Option<Arc<T>> {
        let Some((own, fresh_from)) = &self.last else {
            return cached;
        };
        match &cached {
            Some(c) if rv_number(c.meta()) < *fresh_from => own.clone(),
            _ => {
                self.last = None;
                cached
            }
        }
    }

    /// The outcome of a write: what it left, or what a live read after a
    /// 409 showed, is the view until the cache catches up.
    pub fn settle(&mut self, outcome: &Outcome<T>) {
        self.last = Some(match outcome {
            Outcome::Written { object, fresh_from } => (Some(object.clone()), *fresh_from),
            Outcome::Gone { after } => (None, after.saturating_add(1)),
            Outcome::Conflict(live) => (Some(live.clone()), rv_number(live.meta())),
        });
    }
}

/// Freshness for many objects by key: placement writes the claims and
/// pods of many sets, and decides on a set only once the cache shows its
/// own last write of each.
#[derive(Debug, Default)]
pub struct KeyedFreshness(std::collections::HashMap<String, u64>);

impl KeyedFreshness {
    pub fn wrote(&mut self, key: String, resource_version: u64) {
        self.0.insert(key, resource_version);
    }

    /// True while the cache shows `key` older than our own write of it.
    pub fn behind(&mut self, key: &str, cached_rv: Option<u64>) -> bool {
        match (self.0.get(key), cached_rv) {
            (Some(ours), Some(rv)) if rv < *ours => true,
            (Some(_), _) => {
                self.0.remove(key);
                false
            }
            _ => false,
        }
    }

    /// Forgets writes at or below `observed`: the watch has passed them.
    pub fn prune(&mut self, observed: u64) {
        self.0.retain(|_, rv| *rv > observed);
    }
}
