//! The world as the watches show it: the cached objects and the indexes
//! that let a change reach only the actors it concerns.
//!
//! Only the supervisor writes it (one writer, so index updates are never
//! interleaved); actors read it. DashMaps keep reads lock-free across
//! arbiters.

mod indexes;
mod pods;
mod view;

pub use indexes::{ClassUsage, released as indexes_released};
pub use pods::{NodeUse, vmi_key_of};

use crate::api::{GPUAllocation, GPUClaim, GPUClass, LauncherPod, NodeFacts, PodUse, Vmi};
use crate::api::{Kind, Obj};
use crate::config::Config;
use dashmap::DashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// `namespace/name`: the key of namespaced objects.
pub fn key(namespace: &str, name: &str) -> String {
    let mut k = String::with_capacity(namespace.len() + name.len() + 1);
    k.push_str(namespace);
    k.push('/');
    k.push_str(name);
    k
}

/// Splits `namespace/name`.
pub fn split_key(k: &str) -> (&str, &str) {
    k.split_once('/').unwrap_or(("", k))
}

#[derive(Default)]
pub struct World {
    pub claims: DashMap<String, Arc<GPUClaim>>,
    pub classes: DashMap<String, Arc<GPUClass>>,
    pub allocations: DashMap<String, Arc<GPUAllocation>>,
    pub vmis: DashMap<String, Arc<Vmi>>,
    pub pods: DashMap<String, Arc<LauncherPod>>,
    pub nodes: DashMap<String, Arc<NodeFacts>>,
    /// What each pod bound to a node uses there, by pod key.
    bound: DashMap<String, PodUse>,
    pub(crate) idx: indexes::Indexes,
    config: RwLock<Arc<Config>>,
    /// Per kind, the highest resourceVersion the watch has brought.
    observed: [AtomicU64; Kind::ALL.len()],
    /// Per kind, whether its watch has listed once.
    listed: [AtomicBool; Kind::ALL.len()],
}

impl World {
    pub fn new(config: Config) -> Self {
        Self {
            config: RwLock::new(Arc::new(config)),
            ..Default::default()
        }
    }

    pub fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_config(&self, config: Config) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
    }

    /// How far the watch of `kind` has come: every change of that kind up
    /// to this resourceVersion is in the cache (a watch brings one kind's
    /// changes in resourceVersion order, and a list is a snapshot).
    pub fn observed_rv(&self, kind: Kind) -> u64 {
        self.observed[kind as usize].load(Ordering::Acquire)
    }

    /// Whether the watch of `kind` has listed once: before, the cache
    /// cannot say an object of the kind does not exist.
    pub fn listed(&self, kind: Kind) -> bool {
        self.listed[kind as usize].load(Ordering::Acquire)
    }

    /// The watch of `kind` listed; called after the cache has the list.
    pub fn mark_listed(&self, kind: Kind) {
        self.listed[kind as usize].store(true, Ordering::Release);
    }

    /// The watch of `kind` brought a change at `rv`; called after the cache has it.
    pub fn observe_rv(&self, kind: Kind, rv: u64) {
        self.observed[kind as usize].fetch_max(rv, Ordering::AcqRel);
    }

    /// Stores an object as a watch brings it, indexes and all; for a world
    /// built from a list (a fresh controller's view, in the I6 check).
    pub fn load(&self, obj: Obj) {
        let ns_key = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            key(
                m.namespace.as_deref().unwrap_or_default(),
                m.name.as_deref().unwrap_or_default(),
            )
        };
        let rv = crate::api::rv_number(obj.meta());
        let kind = obj.kind();
        match obj {
            Obj::Claim(c) => {
                self.put_claim(&ns_key(&c.metadata), Some(Arc::new(c)));
            }
            Obj::Class(c) => {
                let name = c.metadata.name.clone().unwrap_or_default();
                self.put_class(&name, Some(Arc::new(c)));
            }
            Obj::Allocation(r) => {
                self.put_allocation(&ns_key(&r.metadata), Some(Arc::new(r)));
            }
            Obj::Vmi(v) => {
                self.put_vmi(&ns_key(&v.metadata), Some(Arc::new(v)));
            }
            Obj::Pod(p) => {
                let k = ns_key(&p.metadata);
                let launcher = LauncherPod::from_pod(&p);
                let vmi = launcher.as_ref().map(vmi_key_of);
                self.put_pod_use(&k, PodUse::from_pod(&p), vmi.as_deref());
                if let Some(lp) = launcher {
                    self.put_pod(&k, Some(Arc::new(lp)));
                }
            }
            Obj::Node(n) => {
                if let Some(f) = NodeFacts::from_node(&n) {
                    self.put_node(&f.name.clone(), Some(Arc::new(f)));
                }
            }
        }
        self.observe_rv(kind, rv);
    }

    pub fn claim(&self, k: &str) -> Option<Arc<GPUClaim>> {
        self.claims.get(k).map(|c| c.clone())
    }

    pub fn class(&self, name: &str) -> Option<Arc<GPUClass>> {
        self.classes.get(name).map(|c| c.clone())
    }

    pub fn vmi(&self, k: &str) -> Option<Arc<Vmi>> {
        self.vmis.get(k).map(|v| v.clone())
    }

    pub fn node(&self, name: &str) -> Option<Arc<NodeFacts>> {
        self.nodes.get(name).map(|n| n.clone())
    }

    pub fn allocation(&self, k: &str) -> Option<Arc<GPUAllocation>> {
        self.allocations.get(k).map(|r| r.clone())
    }

    /// Claim keys whose attachment or VMI owner names the VMI `ns/name`.
    pub fn claims_of_vmi(&self, vmi_key: &str) -> Vec<String> {
        self.idx
            .claims_by_vmi
            .get(vmi_key)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Claim keys whose status.nodeName is `node`.
    pub fn claims_on_node(&self, node: &str) -> Vec<String> {
        self.idx
            .claims_by_node
            .get(node)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Claim keys of a class.
    pub fn claims_of_class(&self, class: &str) -> Vec<String> {
        self.idx
            .claims_by_class
            .get(class)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// What a class's claims hold, kept as claims change.
    pub fn class_usage(&self, class: &str) -> ClassUsage {
        self.idx
            .class_usage
            .get(class)
            .map(|u| *u)
            .unwrap_or_default()
    }

    /// GPUs recorded on `node` for `resource`.
    pub fn allocated_on(&self, node: &str, resource: &str) -> u64 {
        self.idx
            .allocated
            .get(&(node.to_string(), resource.to_string()))
            .map(|n| *n)
            .unwrap_or(0)
    }

    /// GPUs recorded for a class, cluster-wide.
    pub fn allocated_to_class(&self, class: &str) -> u64 {
        self.idx
            .allocated_by_class
            .get(class)
            .map(|n| *n)
            .unwrap_or(0)
    }

    /// The launcher pods of the VMI `ns/name`.
    pub fn launchers(&self, vmi_key: &str) -> Vec<Arc<LauncherPod>> {
        let Some(names) = self.idx.launchers_by_vmi.get(vmi_key) else {
            return Vec::new();
        };
        names
            .iter()
            .filter_map(|k| self.pods.get(k).map(|p| p.clone()))
            .collect()
    }
}
