//! D7 from both sides. kube-scheduler's: no claim another allocator
//! writes names a device of a pool gpu-claims' rule has closed, unless it
//! tolerates the managed taint. gpu-claims': it records no device another
//! allocator's claim has held since before its watches surely showed it
//! (only a race it could not see excuses a device named twice, D8), and
//! while D7 operates, only devices of pools its rules close. Which claims gpu-claims allocates
//! (I9's `ours`) is told here too.

use super::{MemCluster, from_value, ns_key, records};
use gpu_claims_actors::api::{
    AllocatedDevice, CONDITION_EXCLUSIVE_DEVICES, GPUAllocation, GPUClass, condition_is_true,
    has_finalizer,
};
use gpu_claims_actors::ports::{Kind, Obj};
use k8s_openapi::api::resource::v1::ResourceClaim;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

/// The pools our rules closed at the last check, what each ResourceClaim
/// another allocator wrote was allocated to then, what each record named
/// and which classes said D7 operates (ExclusiveDevices True).
#[derive(Default)]
pub(super) struct ClosedPools {
    closed: HashSet<(String, String)>,
    allocations: HashMap<String, BTreeSet<AllocatedDevice>>,
    recorded: HashMap<String, BTreeSet<AllocatedDevice>>,
    exclusive_classes: HashSet<String>,
    /// Each device another allocator's claim holds (by the claim's
    /// `uid_key`): when a check first saw it held (the cluster's time).
    foreign_since: HashMap<(String, AllocatedDevice), Duration>,
}

/// `namespace/name#uid`: one object, not a later one of the same name.
fn uid_key(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!("{}#{}", ns_key(m), m.uid.clone().unwrap_or_default())
}

impl ClosedPools {
    /// D7: no ResourceClaim another allocator wrote since the last check
    /// names a device of a pool our rules closed then, unless it
    /// tolerates the managed taint (kube-scheduler honours the rules).
    pub(super) fn kept(
        &mut self,
        c: &MemCluster,
        claims: &[ResourceClaim],
        ours: &dyn Fn(&ResourceClaim) -> bool,
        v: &mut Vec<String>,
    ) {
        let mut now = HashMap::new();
        for rc in claims.iter().filter(|rc| !ours(rc)) {
            let devices = records::allocated_devices_of(rc);
            let k = uid_key(&rc.metadata);
            let new = self.allocations.get(&k) != Some(&devices);
            if new && !records::tolerates_managed(rc) {
                for d in &devices {
                    if self.closed.contains(&(d.driver.clone(), d.pool.clone())) {
                        v.push(format!(
                            "D7: device {}/{}/{} of a pool closed by gpu-claims' DeviceTaintRule was allocated to ResourceClaim {}, which does not tolerate {}",
                            d.driver,
                            d.pool,
                            d.device,
                            ns_key(&rc.metadata),
                            gpu_claims_actors::api::MANAGED_TAINT
                        ));
                    }
                }
            }
            now.insert(k, devices);
        }
        let at = c.elapsed();
        let mut since = HashMap::new();
        for (k, devices) in &now {
            for d in devices {
                let key = (k.clone(), d.clone());
                let first = self.foreign_since.get(&key).copied().unwrap_or(at);
                since.insert(key, first);
            }
        }
        self.foreign_since = since;
        self.allocations = now;
        self.closed = closed_now(c);
    }

    /// gpu-claims' side, for devices records came to name since the last
    /// check: none is held by another allocator's claim that a check saw
    /// holding it longer before the record's write than the controller's
    /// watches trail and its writes take (`MemCluster::watch_allowance`):
    /// gpu-claims had that claim in its cache when it decided, and a
    /// device named twice is only excused as a race it could not see
    /// (D8). And while the record's class said D7 operates, at the last
    /// check and now, each lies in a pool our rules closed then or now.
    /// Call before [`ClosedPools::kept`], which moves the last check on.
    pub(super) fn recorded(
        &mut self,
        c: &MemCluster,
        records: &[GPUAllocation],
        claims: &[ResourceClaim],
        ours: &dyn Fn(&ResourceClaim) -> bool,
        journal_from: usize,
        v: &mut Vec<String>,
    ) {
        let allowance = c.watch_allowance();
        let written = super::records::last_writes(c, journal_from);
        let still_held: HashSet<(String, AllocatedDevice)> = claims
            .iter()
            .filter(|rc| !ours(rc))
            .flat_map(|rc| {
                let k = uid_key(&rc.metadata);
                records::allocated_devices_of(rc)
                    .into_iter()
                    .map(move |d| (k.clone(), d))
            })
            .collect();
        let exclusive_now = exclusive_classes(c);
        let closed_now = closed_now(c);
        let mut recorded = HashMap::new();
        for r in records {
            let k = uid_key(&r.metadata);
            let before = self.recorded.get(&k);
            for d in r
                .spec
                .devices
                .iter()
                .filter(|d| before.is_none_or(|b| !b.contains(*d)))
            {
                let wrote_at = written.get(&ns_key(&r.metadata)).copied();
                let seen_long_before =
                    |((holder, device), held): &(&(String, AllocatedDevice), &Duration)| {
                        device == d
                            && still_held.contains(&(holder.clone(), d.clone()))
                            && wrote_at.is_some_and(|w| w > **held + allowance)
                    };
                if let Some(((holder, _), held)) =
                    self.foreign_since.iter().find(|e| seen_long_before(e))
                {
                    v.push(format!(
                        "D8: record {} came to name device {}/{}/{} at {:?}, which ResourceClaim {holder} of another allocator has held since {held:?} (the controller's watches trail and its writes take at most {allowance:?})",
                        ns_key(&r.metadata),
                        d.driver,
                        d.pool,
                        d.device,
                        wrote_at.unwrap_or_default()
                    ));
                }
                let pool = (d.driver.clone(), d.pool.clone());
                let class = &r.spec.class_name;
                if self.exclusive_classes.contains(class)
                    && exclusive_now.contains(class)
                    && !self.closed.contains(&pool)
                    && !closed_now.contains(&pool)
                {
                    v.push(format!(
                        "D7: record {} of class {class}, whose devices gpu-claims alone allocates, came to name device {}/{}/{} of a pool no rule of gpu-claims closed",
                        ns_key(&r.metadata),
                        d.driver,
                        d.pool,
                        d.device
                    ));
                }
            }
            recorded.insert(k, r.spec.devices.iter().cloned().collect());
        }
        self.recorded = recorded;
        self.exclusive_classes = exclusive_now;
    }
}

/// The classes that say D7 operates for them (ExclusiveDevices True).
fn exclusive_classes(c: &MemCluster) -> HashSet<String> {
    c.store
        .list(Kind::Class.name())
        .0
        .into_iter()
        .filter_map(|o| from_value(Kind::Class, o).ok())
        .filter_map(|o| match o {
            Obj::Class(x) => Some(x),
            _ => None,
        })
        .filter(|x: &GPUClass| {
            x.status
                .as_ref()
                .is_some_and(|s| condition_is_true(&s.conditions, CONDITION_EXCLUSIVE_DEVICES))
        })
        .filter_map(|x| x.metadata.name)
        .collect()
}

/// The pools our live rules close now.
fn closed_now(c: &MemCluster) -> HashSet<(String, String)> {
    c.store
        .list("DeviceTaintRule")
        .0
        .into_iter()
        .filter_map(|r| from_value(Kind::DeviceTaintRule, r).ok())
        .filter_map(|o| match o {
            Obj::DeviceTaintRule(r) => Some(r),
            _ => None,
        })
        .filter(gpu_claims_actors::world::devices::closes)
        .filter_map(|r| gpu_claims_actors::world::devices::one_pool(&r))
        .map(|(d, p)| (d.to_string(), p.to_string()))
        .collect()
}

/// Whether gpu-claims allocates `rc`: a named claim's backing claim (our
/// finalizer, or a GPUClaim its controller), or a launcher pod's claim.
pub(super) fn allocated_by_gpu_claims(c: &MemCluster, rc: &ResourceClaim) -> bool {
    if has_finalizer(&rc.metadata, gpu_claims_actors::rules::BACKING_FINALIZER) {
        return true;
    }
    let ns = rc.metadata.namespace.as_deref().unwrap_or_default();
    // A launcher pod's, whether or not the pod is still there (KubeVirt
    // names them `virt-launcher-<vmi>-<suffix>`).
    rc.metadata.owner_references.iter().flatten().any(|o| {
        o.kind == "GPUClaim"
            || (o.kind == "Pod"
                && (o.name.starts_with("virt-launcher-")
                    || c.store.get("Pod", ns, &o.name).is_some_and(|p| {
                        p["metadata"]["labels"]["kubevirt.io"] == "virt-launcher"
                    })))
    })
}
