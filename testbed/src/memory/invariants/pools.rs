//! D7 as kube-scheduler honours it: no claim another allocator writes
//! names a device of a pool gpu-claims' rule has closed, unless it
//! tolerates the managed taint. Which claims gpu-claims allocates (I9's
//! `ours`) is told here too.

use super::{MemCluster, from_value, ns_key, records};
use gpu_claims_actors::api::{AllocatedDevice, has_finalizer};
use gpu_claims_actors::ports::{Kind, Obj};
use k8s_openapi::api::resource::v1::ResourceClaim;
use std::collections::{BTreeSet, HashMap, HashSet};

/// The pools our rules closed at the last check, and what each
/// ResourceClaim another allocator wrote was allocated to then.
#[derive(Default)]
pub(super) struct ClosedPools {
    closed: HashSet<(String, String)>,
    allocations: HashMap<String, BTreeSet<AllocatedDevice>>,
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
            let k = format!(
                "{}#{}",
                ns_key(&rc.metadata),
                rc.metadata.uid.clone().unwrap_or_default()
            );
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
        self.allocations = now;
        self.closed = c
            .store
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
            .collect();
    }
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
