//! D7: one DeviceTaintRule of ours per managed pool, kept as written.
//!
//! kube-scheduler allocates the ResourceClaims of the pods it schedules
//! and never sees a record; gpu-claims allocates at the gate. So the
//! pools gpu-claims allocates in are closed to the scheduler: each
//! managed pool (a DRA class serves a device of it, or a record names
//! one) has one rule of ours, `gpu.cozystack.io/managed:NoSchedule` on
//! that driver and pool, and no more; a user's edit of it is undone; it
//! goes once the pool is no longer managed, or D7 is turned off. Our
//! rules are known by our label and their selector, whatever their names.

use super::RuleId;
use crate::api::{MANAGED_BY_LABEL, MANAGED_BY_VALUE, MANAGED_TAINT, rv_number};
use crate::world::World;
use crate::world::devices::{Exclusive, ExclusiveOff, PoolKey, closes, is_ours, one_pool};
use k8s_openapi::api::resource::v1::{
    DeviceTaint, DeviceTaintRule, DeviceTaintRuleSpec, DeviceTaintSelector,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::sync::Arc;

/// A write D7 calls for.
#[derive(Clone, Debug, PartialEq)]
pub enum PoolRuleWrite {
    /// A managed pool without a rule of ours: this one.
    Create(Box<DeviceTaintRule>),
    /// Our rule edited: written back as D7 writes it, on the version read.
    Update(Box<DeviceTaintRule>),
    /// A rule of ours too many, or of a pool no longer managed, or naming
    /// no one pool.
    Delete {
        name: String,
        uid: Option<String>,
        resource_version: u64,
    },
}

impl PoolRuleWrite {
    pub fn rule(&self) -> RuleId {
        RuleId::D7
    }

    /// The name of the rule written.
    pub fn name(&self) -> &str {
        match self {
            PoolRuleWrite::Create(r) | PoolRuleWrite::Update(r) => {
                r.metadata.name.as_deref().unwrap_or_default()
            }
            PoolRuleWrite::Delete { name, .. } => name,
        }
    }
}

/// How many names a pool's rule tries before giving up: the first is
/// `gpu-claims-<driver>-<pool>`, the next ones add `-<n>` (another
/// object, not ours, may hold a name).
const NAME_TRIES: u32 = 8;

/// Whether D7 wants rules written: on, or refused (tried again, after a
/// wait, in case the refusal is over). Where the API server serves none,
/// nothing can be written; where D7 is off by config, ours go.
fn wants_rules(w: &World) -> Option<bool> {
    match w.exclusive() {
        Exclusive::On | Exclusive::Off(ExclusiveOff::Refused(_)) => Some(true),
        Exclusive::Off(ExclusiveOff::Disabled) => Some(false),
        Exclusive::Off(ExclusiveOff::NotServed) => None,
    }
}

/// D7 for one pool: the one write its rules call for, if any.
pub fn decide_pool(pool: &PoolKey, w: &World) -> Option<PoolRuleWrite> {
    let wanted = wants_rules(w)? && w.is_managed_pool(pool);
    let ours = w.our_rules(pool);
    if !wanted {
        return ours.first().map(|r| delete(r));
    }
    let first_name = rule_name(pool, 0);
    let Some(keep) = ours
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(first_name.as_str()))
        .or(ours.first())
    else {
        let name = (0..NAME_TRIES)
            .map(|n| rule_name(pool, n))
            .find(|n| w.taint_rule(n).is_none())?;
        return Some(PoolRuleWrite::Create(Box::new(desired_rule(pool, &name))));
    };
    if let Some(extra) = ours.iter().find(|r| !Arc::ptr_eq(r, keep)) {
        return Some(delete(extra));
    }
    (!closes(keep)).then(|| PoolRuleWrite::Update(Box::new(undone(pool, keep))))
}

/// D7 for one rule by name: one of ours whose selector names no one pool
/// (edited to take a device, a driver or everything) is deleted; one that
/// names a pool is its pool's (`decide_pool`).
pub fn decide_stray(name: &str, w: &World) -> Option<PoolRuleWrite> {
    wants_rules(w)?;
    let r = w.taint_rule(name)?;
    (is_ours(&r) && one_pool(&r).is_none()).then(|| delete(&r))
}

fn delete(r: &DeviceTaintRule) -> PoolRuleWrite {
    PoolRuleWrite::Delete {
        name: r.metadata.name.clone().unwrap_or_default(),
        uid: r.metadata.uid.clone(),
        resource_version: rv_number(&r.metadata),
    }
}

fn selector(pool: &PoolKey) -> DeviceTaintSelector {
    DeviceTaintSelector {
        driver: Some(pool.0.to_string()),
        pool: Some(pool.1.to_string()),
        device: None,
    }
}

fn taint() -> DeviceTaint {
    DeviceTaint {
        key: MANAGED_TAINT.into(),
        value: None,
        effect: "NoSchedule".into(),
        time_added: None,
    }
}

/// The rule D7 writes for `pool`, named `name`.
pub fn desired_rule(pool: &PoolKey, name: &str) -> DeviceTaintRule {
    DeviceTaintRule {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some([(MANAGED_BY_LABEL.to_string(), MANAGED_BY_VALUE.to_string())].into()),
            ..Default::default()
        },
        spec: DeviceTaintRuleSpec {
            device_selector: Some(selector(pool)),
            taint: taint(),
        },
        status: None,
    }
}

/// Our rule as D7 writes it, on the version read: its selector, taint and
/// label put back, the rest (its name, a time the API server stamped, other
/// labels) kept.
fn undone(pool: &PoolKey, r: &DeviceTaintRule) -> DeviceTaintRule {
    let mut fixed = r.clone();
    fixed.spec.device_selector = Some(selector(pool));
    let time_added = r.spec.taint.time_added.clone();
    fixed.spec.taint = DeviceTaint {
        time_added,
        ..taint()
    };
    fixed
        .metadata
        .labels
        .get_or_insert_default()
        .insert(MANAGED_BY_LABEL.into(), MANAGED_BY_VALUE.into());
    fixed.status = None;
    fixed
}

/// The most a name may have (a DNS subdomain).
const NAME_MAX: usize = 253;

/// `gpu-claims-<driver>-<pool>` as a DNS subdomain; where the pool's name
/// had to be changed to be one (upper case, `/`, too long), cut and
/// followed by a hash of the pool, so that two pools never share it by
/// the change; `attempt` > 0 adds `-<attempt>`.
pub fn rule_name(pool: &PoolKey, attempt: u32) -> String {
    let raw = format!("gpu-claims-{}-{}", pool.0, pool.1);
    let clean = subdomain(&raw);
    let suffix = if attempt == 0 {
        String::new()
    } else {
        format!("-{attempt}")
    };
    if clean == raw && clean.len() + suffix.len() <= NAME_MAX {
        return clean + &suffix;
    }
    let hash = format!("-{:08x}", fnv1a(&format!("{}/{}", pool.0, pool.1)));
    let room = NAME_MAX - hash.len() - suffix.len();
    let mut cut: String = clean.chars().take(room).collect();
    while cut.ends_with(['-', '.']) {
        cut.pop();
    }
    cut + &hash + &suffix
}

/// The nearest DNS subdomain: lower case, anything but `[a-z0-9.-]` a
/// dash, each dot-separated part without dashes at its ends, no empty
/// parts.
fn subdomain(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '.' | '-') => c,
            _ => '-',
        })
        .collect();
    mapped
        .split('.')
        .map(|part| part.trim_matches('-'))
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(".")
}

fn fnv1a(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(d: &str, p: &str) -> PoolKey {
        (d.into(), p.into())
    }

    #[test]
    fn d7_a_pool_s_rule_is_named_after_it_and_a_name_that_must_change_is_hashed() {
        assert_eq!(
            rule_name(&pool("gpu.nvidia.com", "node-1"), 0),
            "gpu-claims-gpu.nvidia.com-node-1"
        );
        assert_eq!(
            rule_name(&pool("gpu.nvidia.com", "node-1"), 2),
            "gpu-claims-gpu.nvidia.com-node-1-2"
        );
        // A pool name with `/` and upper case: changed, so hashed; two
        // pools that change to the same text get different names.
        let a = rule_name(&pool("gpu.nvidia.com", "Rack/A"), 0);
        let b = rule_name(&pool("gpu.nvidia.com", "rack-a"), 0);
        assert!(a.starts_with("gpu-claims-gpu.nvidia.com-rack-a-"), "{a}");
        assert_ne!(a, b);
        // Too long: cut to a name's 253 with the hash.
        let long = rule_name(&pool("gpu.nvidia.com", &"p".repeat(253)), 0);
        assert_eq!(long.len(), 253);
        assert!(long.ends_with(&format!(
            "-{:08x}",
            fnv1a(&format!("gpu.nvidia.com/{}", "p".repeat(253)))
        )));
    }

    #[test]
    fn d7_names_are_dns_subdomains_whatever_a_pool_is_called() {
        for p in ["a/.b", "-x-", "UP.per/..", "a..b", "ü"] {
            let n = rule_name(&pool("d.example.com", p), 0);
            let ok = n.len() <= 253
                && n.split('.').all(|part| {
                    !part.is_empty()
                        && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                        && part.ends_with(|c: char| c.is_ascii_alphanumeric())
                        && part
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                });
            assert!(ok, "{p:?} -> {n:?}");
        }
    }
}
