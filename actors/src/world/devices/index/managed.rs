//! D7: the pools gpu-claims manages, and whether it closes them.
//!
//! A pool (driver, pool) is managed when a DRA class serves one of its
//! devices or a record names one. While D7 is on, each managed pool has
//! one DeviceTaintRule of ours, and gpu-claims allocates no free device of
//! a managed pool before that rule closes it. D7 is off where the
//! configuration turns it off, where the API server serves no
//! DeviceTaintRule, or while it refuses ours: then every pool is open to
//! both allocators, as before, and the DRA classes say so.

use super::{DeviceIndex, PoolKey};
use crate::api::Kind;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

/// Whether gpu-claims closes the pools it manages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exclusive {
    On,
    Off(ExclusiveOff),
}

/// Why D7 is off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExclusiveOff {
    /// `dra.exclusiveDevices: false`.
    Disabled,
    /// The API server serves DeviceTaintRules at neither `v1` nor
    /// `v1beta2` (Kubernetes 1.36 serves `v1beta2` only where it is
    /// turned on).
    NotServed,
    /// The API server refused our rule: its words.
    Refused(String),
}

impl ExclusiveOff {
    /// The condition's reason.
    pub fn reason(&self) -> &'static str {
        match self {
            ExclusiveOff::Disabled => "Disabled",
            ExclusiveOff::NotServed => "DeviceTaintRulesNotServed",
            ExclusiveOff::Refused(_) => "DeviceTaintRuleRefused",
        }
    }
}

impl fmt::Display for ExclusiveOff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let open = "so kube-scheduler may give a device of this class to a pod outside gpu-claims while gpu-claims holds it";
        match self {
            ExclusiveOff::Disabled => write!(f, "dra.exclusiveDevices is false: {open}"),
            ExclusiveOff::NotServed => write!(
                f,
                "the API server serves no DeviceTaintRule (resource.k8s.io/v1 from Kubernetes 1.37; v1beta2 on 1.36 with the DRADeviceTaintRules feature and the v1beta2 API turned on): {open}"
            ),
            ExclusiveOff::Refused(why) => write!(
                f,
                "the API server refused gpu-claims' DeviceTaintRule ({why}): {open}"
            ),
        }
    }
}

/// What decides D7's standing, besides the served kinds.
#[derive(Clone, Debug)]
pub struct ExclusiveState {
    pub enabled: bool,
    pub refused: Option<String>,
}

/// Off until the supervisor sets it from the config as it starts: a world
/// no controller runs in (a test's, `status`'s) closes nothing.
impl Default for ExclusiveState {
    fn default() -> Self {
        Self {
            enabled: false,
            refused: None,
        }
    }
}

impl DeviceIndex {
    /// D7's standing.
    pub fn exclusive(&self) -> Exclusive {
        if !self.exclusive.enabled {
            Exclusive::Off(ExclusiveOff::Disabled)
        } else if self.not_served.contains(&Kind::DeviceTaintRule) {
            Exclusive::Off(ExclusiveOff::NotServed)
        } else if let Some(why) = &self.exclusive.refused {
            Exclusive::Off(ExclusiveOff::Refused(why.clone()))
        } else {
            Exclusive::On
        }
    }

    /// Sets what decides D7's standing; whether the standing moved.
    pub fn set_exclusive(&mut self, enabled: bool, refused: Option<String>) -> bool {
        let before = self.exclusive();
        self.exclusive = ExclusiveState { enabled, refused };
        before != self.exclusive()
    }

    /// The refusal that keeps D7 off, if any.
    pub fn exclusive_refused(&self) -> Option<&str> {
        self.exclusive.refused.as_deref()
    }

    /// D7: whether a DRA class serves a device of `pool`, or a record
    /// names one. O(classes x log devices): a pool publishes on one node
    /// (or a few), and a class's devices there are sorted positions.
    pub fn is_managed(&self, pool: &PoolKey) -> bool {
        if self.record_pools.contains_key(pool) {
            return true;
        }
        for node in self.pool_nodes.get(pool).into_iter().flatten() {
            let Some(range) = self.pool_range(node, pool) else {
                continue;
            };
            for (name, class) in &self.classes {
                if self.problem(name).is_some() {
                    continue;
                }
                let Some(positions) = class.serving_on(node) else {
                    continue;
                };
                let first = positions.partition_point(|p| *p < range.start);
                if positions.get(first).is_some_and(|p| *p < range.end) {
                    return true;
                }
            }
        }
        false
    }

    /// Where `pool`'s devices sit among `node`'s (their positions).
    fn pool_range(&self, node: &str, pool: &PoolKey) -> Option<std::ops::Range<u32>> {
        let mut start = 0u32;
        for (p, list) in self.nodes.get(node)? {
            let len = u32::try_from(list.len()).ok()?;
            if p == pool {
                return Some(start..start.saturating_add(len));
            }
            start = start.saturating_add(len);
        }
        None
    }

    /// Every pool D7 may have to look at: those published, those records
    /// name, those our rules name.
    pub fn every_pool(&self) -> BTreeSet<PoolKey> {
        let mut out: BTreeSet<PoolKey> = self.pool_nodes.keys().cloned().collect();
        out.extend(self.record_pools.keys().cloned());
        out.extend(self.taint_rules.our_pools().cloned());
        out
    }

    /// Our rules of `pool`.
    pub fn our_rules(
        &self,
        pool: &PoolKey,
    ) -> Vec<Arc<k8s_openapi::api::resource::v1::DeviceTaintRule>> {
        self.taint_rules.ours_for(pool)
    }

    /// A DeviceTaintRule by name.
    pub fn taint_rule(
        &self,
        name: &str,
    ) -> Option<Arc<k8s_openapi::api::resource::v1::DeviceTaintRule>> {
        self.taint_rules.get(name).cloned()
    }

    /// Rules of ours that name no one pool.
    pub fn stray_rules(&self) -> Vec<Arc<k8s_openapi::api::resource::v1::DeviceTaintRule>> {
        self.taint_rules.strays()
    }

    /// D7: whether one of our rules closes the pool.
    pub fn pool_closed(&self, pool: &PoolKey) -> bool {
        self.taint_rules.closed(pool)
    }
}
