//! What pods request and nodes offer, counted as kube-scheduler's
//! NodeResourcesFit counts it: `cpu` in millicores, every other resource
//! in units. A pod's request is `resource.PodRequests` upstream
//! (k8s.io/component-helpers/resource): containers summed, restartable
//! init containers (sidecars) added, the largest regular init container
//! if larger, plus `spec.overhead`.

use super::amount::MOST;
use super::quantity::{QuantityError, scheduler_amount};
use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::borrow::Cow;
use std::collections::BTreeMap;

pub const CPU: &str = super::quantity::CPU;
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// A resource's name; the common ones borrowed, so a pod's request of
/// cpu and memory allocates nothing but its list.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceName(Cow<'static, str>);

impl ResourceName {
    pub fn new(name: &str) -> Self {
        const KNOWN: [&str; 4] = [CPU, MEMORY, EPHEMERAL_STORAGE, PODS];
        match KNOWN.iter().find(|k| **k == name) {
            Some(k) => Self(Cow::Borrowed(k)),
            None => Self(Cow::Owned(name.to_string())),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ResourceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Amounts by resource, sorted by name, none zero: what one pod requests,
/// kept in the world for every pod bound to a node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources(Box<[(ResourceName, u64)]>);

impl Resources {
    /// The amount of `name`; 0 when absent.
    pub fn get(&self, name: &str) -> u64 {
        self.0
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .map_or(0, |i| self.0[i].1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(n, a)| (n.as_str(), *a))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Bytes this value holds beyond its own size (for the benchmark's
    /// bytes-per-pod figure).
    pub fn heap_bytes(&self) -> usize {
        self.0.len() * std::mem::size_of::<(ResourceName, u64)>()
            + self
                .0
                .iter()
                .map(|(n, _)| match &n.0 {
                    Cow::Owned(s) => s.capacity(),
                    Cow::Borrowed(_) => 0,
                })
                .sum::<usize>()
    }
}

impl FromIterator<(String, u64)> for Resources {
    fn from_iter<I: IntoIterator<Item = (String, u64)>>(iter: I) -> Self {
        let mut sums: BTreeMap<String, u64> = BTreeMap::new();
        for (n, a) in iter {
            let e = sums.entry(n).or_default();
            *e = e.saturating_add(a);
        }
        Self(
            sums.into_iter()
                .filter(|(_, a)| *a > 0)
                .map(|(n, a)| (ResourceName::new(&n), a))
                .collect(),
        )
    }
}

/// Working sums while a request is computed.
type Sums = BTreeMap<String, u64>;

fn add(into: &mut Sums, from: &Sums) {
    for (n, a) in from {
        let e = into.entry(n.clone()).or_default();
        *e = e.saturating_add(*a);
    }
}

fn max(into: &mut Sums, from: &Sums) {
    for (n, a) in from {
        let e = into.entry(n.clone()).or_default();
        *e = (*e).max(*a);
    }
}

/// A resource list's amounts, as a pod asks for them. A quantity past
/// what Kubernetes counts asks for [`MOST`]: more than any node has, never
/// none. One that is not a quantity at all or is negative (the API server
/// refuses those, 422) counts as none.
pub fn amounts(list: Option<&BTreeMap<String, Quantity>>) -> Sums {
    list.into_iter()
        .flatten()
        .filter_map(|(n, q)| match scheduler_amount(n, &q.0) {
            Ok(a) => Some((n.clone(), a)),
            Err(QuantityError::TooLarge) => Some((n.clone(), MOST)),
            Err(_) => None,
        })
        .collect()
}

/// A container's requests, with the API server's defaulting: a resource
/// with a limit and no request requests its limit (`SetDefaults_Pod`).
fn container_requests(r: Option<&ResourceRequirements>) -> Sums {
    let Some(r) = r else {
        return Sums::new();
    };
    let mut sums = amounts(r.limits.as_ref());
    sums.extend(amounts(r.requests.as_ref()));
    sums
}

/// The resources that pod-level `spec.resources` sets for the whole pod
/// (PodLevelResources): cpu, memory and hugepages.
fn pod_level(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with("hugepages-")
}

/// `resource.PodRequests`: what the scheduler holds a pod to, per resource.
pub fn pod_requests(spec: &PodSpec) -> Resources {
    let mut reqs = Sums::new();
    for c in &spec.containers {
        add(&mut reqs, &container_requests(c.resources.as_ref()));
    }
    let mut restartable = Sums::new();
    let mut init = Sums::new();
    for c in spec.init_containers.iter().flatten() {
        let own = container_requests(c.resources.as_ref());
        let at_its_start = if c.restart_policy.as_deref() == Some("Always") {
            // A sidecar runs beside everything after it.
            add(&mut reqs, &own);
            add(&mut restartable, &own);
            restartable.clone()
        } else {
            let mut tmp = own;
            add(&mut tmp, &restartable);
            tmp
        };
        max(&mut init, &at_its_start);
    }
    max(&mut reqs, &init);
    if let Some(level) = spec.resources.as_ref() {
        for (n, a) in container_requests(Some(level)) {
            if pod_level(&n) {
                reqs.insert(n, a);
            }
        }
    }
    add(&mut reqs, &amounts(spec.overhead.as_ref()));
    reqs.into_iter().collect()
}

/// A node's allocatable as the scheduler reads it: cpu in millicores, the
/// rest in units; an extended resource (GPUs) must be a whole number of
/// devices, and one that is not is returned apart, with why.
pub type Unreadable = BTreeMap<String, (String, QuantityError)>;

pub fn allocatable(
    list: Option<&BTreeMap<String, Quantity>>,
) -> (BTreeMap<String, u64>, Unreadable) {
    let mut ok = BTreeMap::new();
    let mut bad = Unreadable::new();
    for (name, q) in list.into_iter().flatten() {
        let devices = is_extended(name);
        let read = if devices {
            super::quantity::whole_count(&q.0)
        } else {
            scheduler_amount(name, &q.0)
        };
        match read {
            Ok(n) => {
                ok.insert(name.clone(), n);
            }
            Err(e) => {
                bad.insert(name.clone(), (q.0.clone(), e));
            }
        }
    }
    (ok, bad)
}

/// An extended resource (`vendor/name`, not `kubernetes.io/` or
/// `requests.`): counted in whole devices, as `IsExtendedResourceName`.
pub fn is_extended(name: &str) -> bool {
    name.contains('/')
        && !name.starts_with("kubernetes.io/")
        && !name.contains(".kubernetes.io/")
        && !name.starts_with("requests.")
}

#[cfg(test)]
mod tests;
