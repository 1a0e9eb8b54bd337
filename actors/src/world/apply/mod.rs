//! The one way the world changes. `apply` stores an object as a watch
//! brought it (or its deletion), keeps every index in step, marks how far
//! the watch of its kind has come, and says what changed, in that order
//! and in one call: no actor can be told of a change before the cache
//! and the mark show it (I6 depends on it: placement lets go of its own
//! writes by the mark, and must find them in the cache by then).

mod change;

pub use change::{
    AllocationChange, Change, ClaimChange, ClassChange, Freed, NodeChange, PodChange, QuotaChange,
    VmiChange,
};

use super::{World, key, split_key};
use crate::api::Kind;
use crate::api::{
    GPUAllocation, GPUClaim, GPUClass, GPUQuota, LauncherPod, NodeFacts, Obj, PodUse, Vmi,
    is_deleting, rv_number,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeSet;
use std::sync::Arc;

fn namespaced(m: &ObjectMeta) -> Option<String> {
    Some(key(m.namespace.as_deref()?, m.name.as_deref()?))
}

/// An object with only its name (and namespace): what a deletion the
/// watch missed says of it.
fn named<T: kube::Resource + Default>(meta: ObjectMeta) -> T {
    let mut o = T::default();
    *o.meta_mut() = meta;
    o
}

/// The facts of a launcher the rules decide on.
fn launcher_facts(p: &LauncherPod) -> impl PartialEq + '_ {
    (
        (&p.vmi, p.gated, &p.pinned, &p.node_name, &p.scheduling),
        (
            &p.requests,
            &p.unschedulable,
            p.terminal,
            &p.resource_claims,
        ),
    )
}

impl World {
    /// Applies a change a watch brought; `deleted` for its deletion.
    pub(in crate::world) fn apply(&self, obj: Obj, deleted: bool) -> Change {
        let (kind, rv) = (obj.kind(), rv_number(obj.meta()));
        let change = match obj {
            Obj::Claim(c) => self.claim_changed(c, deleted),
            Obj::Class(c) => self.class_changed(c, deleted),
            Obj::Allocation(r) => self.allocation_changed(r, deleted),
            Obj::Quota(q) => self.quota_changed(q, deleted),
            Obj::Vmi(v) => self.vmi_changed(v, deleted),
            Obj::Pod(p) => self.pod_changed(&p, deleted),
            Obj::Node(n) => self.node_changed(NodeFacts::from_node(&n), deleted),
            Obj::ResourceSlice(s) => Change::Devices(self.slice_changed(s, deleted)),
            Obj::DeviceClass(c) => Change::Devices(self.device_class_changed(c, deleted)),
            Obj::ResourceClaim(c) => Change::Devices(self.resource_claim_changed(c, deleted)),
            Obj::ResourceClaimTemplate(t) => Change::Devices(self.template_changed(t, deleted)),
            Obj::DeviceTaintRule(r) => Change::Devices(self.taint_rule_changed(r, deleted)),
            Obj::PriorityClass(p) => Change::Priority(self.priority_class_changed(p, deleted)),
            // Not watched, not cached: read live where it matters (E2).
            Obj::Vm(_) => return Change::Nothing,
        };
        self.observe_rv(kind, rv);
        change
    }

    /// Forgets an object a relist no longer shows (deleted while the
    /// watch was down).
    pub(in crate::world) fn forget(&self, kind: Kind, k: &str) -> Change {
        let (ns, name) = super::split_key(k);
        let mut meta = ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        };
        if kind.namespaced() {
            meta.namespace = Some(ns.to_string());
        }
        match kind {
            Kind::Claim => self.claim_changed(named(meta), true),
            Kind::Class => self.class_changed(named(meta), true),
            Kind::Allocation => match self.allocation(k) {
                Some(r) => self.allocation_changed(GPUAllocation::clone(&r), true),
                None => Change::Nothing,
            },
            Kind::Quota => self.quota_changed(named(meta), true),
            Kind::Vmi => self.vmi_changed(named(meta), true),
            Kind::Pod => self.pod_changed(&named(meta), true),
            Kind::Node => match self.node(k) {
                Some(n) => self.node_changed(Some(NodeFacts::clone(&n)), true),
                None => Change::Nothing,
            },
            Kind::ResourceSlice => Change::Devices(self.slice_changed(named(meta), true)),
            Kind::DeviceClass => Change::Devices(self.device_class_changed(named(meta), true)),
            Kind::ResourceClaim => Change::Devices(self.resource_claim_changed(named(meta), true)),
            Kind::DeviceTaintRule => Change::Devices(self.taint_rule_changed(named(meta), true)),
            Kind::PriorityClass => Change::Priority(self.priority_class_changed(named(meta), true)),
            Kind::ResourceClaimTemplate => {
                Change::Devices(self.template_changed(named(meta), true))
            }
            Kind::Vm => Change::Nothing,
        }
    }

    fn claim_changed(&self, c: GPUClaim, deleted: bool) -> Change {
        let Some(k) = namespaced(&c.metadata) else {
            return Change::Nothing;
        };
        let rv = c.metadata.resource_version.clone();
        let put = self.put_claim(&k, (!deleted).then(|| Arc::new(c)));
        let new_version = deleted
            || put
                .old
                .as_ref()
                .is_none_or(|o| o.metadata.resource_version != rv);
        Change::Claim(ClaimChange {
            now: self.claim(&k),
            key: k,
            new_version,
            old: put.old,
            usage_changed: put.usage_changed,
        })
    }

    fn class_changed(&self, c: GPUClass, deleted: bool) -> Change {
        let Some(name) = c.metadata.name.clone() else {
            return Change::Nothing;
        };
        let resource = c.spec.resource_name.clone();
        let old = self.put_class(&name, (!deleted).then(|| Arc::new(c)));
        let now = self.class(&name);
        let devices_changed = self.dra_class_changed(&name, now.as_deref());
        let life = |c: &GPUClass| (c.spec.resource_name.clone(), is_deleting(&c.metadata));
        let life_changed = old.as_deref().map(life) != now.as_deref().map(life);
        let serving_changed = if life_changed {
            old.iter()
                .chain(now.iter())
                .map(|c| c.spec.resource_name.clone())
                .filter(|r| !r.is_empty())
                .collect()
        } else {
            BTreeSet::new()
        };
        // D5: the VMIs that ask through a template of its DeviceClass
        // read their request again when a DRA class of it comes or goes.
        let device_class = |c: &GPUClass| c.spec.device_class_name.clone();
        let dra_vmis = if life_changed
            || old.as_deref().map(device_class) != now.as_deref().map(device_class)
        {
            old.iter()
                .chain(now.iter())
                .filter_map(|c| c.spec.device_class_name.as_deref())
                .flat_map(|dc| self.vmis_asking_device_class(dc))
                .collect()
        } else {
            BTreeSet::new()
        };
        Change::Class(ClassChange {
            spec_changed: old.as_ref().map(|o| &o.spec) != now.as_ref().map(|c| &c.spec),
            resource_changed: deleted
                || devices_changed
                || old
                    .as_ref()
                    .is_none_or(|o| o.spec.resource_name != resource),
            serving_changed,
            dra_vmis,
            dra_devices_moved: devices_changed,
            name,
        })
    }

    fn allocation_changed(&self, r: GPUAllocation, deleted: bool) -> Change {
        let Some(k) = namespaced(&r.metadata) else {
            return Change::Nothing;
        };
        let old = self.allocation(&k);
        let places: BTreeSet<(String, String)> = old
            .iter()
            .map(|o| &o.spec)
            .chain(std::iter::once(&r.spec))
            .map(|s| (s.node_name.clone(), s.resource_name.clone()))
            .collect();
        let before: Vec<bool> = places
            .iter()
            .map(|(n, res)| self.lost_covers(n, res))
            .collect();
        let was_on = old.as_ref().map(|o| &o.spec.node_name);
        let freed = if deleted {
            Some(was_on.unwrap_or(&r.spec.node_name).clone())
        } else {
            was_on.filter(|n| **n != r.spec.node_name).cloned()
        }
        .map(|node| Freed {
            node,
            class: r.spec.class_name.clone(),
        });
        let budget_used = (!deleted && old.is_none())
            .then(|| r.spec.class_name.clone())
            .filter(|c| self.class(c).is_some_and(|c| c.spec.budget.is_some()));
        let ns = split_key(&k).0;
        let taken = (!deleted
            && old
                .as_ref()
                .is_none_or(|o| o.spec.node_name != r.spec.node_name))
        .then(|| r.spec.node_name.clone());
        let quota_used = (!deleted && old.is_none() && self.has_quotas(ns)).then(|| ns.to_string());
        // D2: its devices are held while it records them.
        let devices = self.allocation_devices_changed(&k, (!deleted).then_some(&r));
        self.put_allocation(&k, (!deleted).then(|| Arc::new(r)));
        let lost_changed = places
            .iter()
            .zip(before)
            .filter(|((n, res), was)| self.lost_covers(n, res) != *was)
            .map(|((n, _), _)| n.clone())
            .collect();
        Change::Allocation(AllocationChange {
            key: k,
            freed,
            taken,
            budget_used,
            quota_used,
            lost_changed,
            devices,
        })
    }

    fn quota_changed(&self, q: GPUQuota, deleted: bool) -> Change {
        let Some(k) = namespaced(&q.metadata) else {
            return Change::Nothing;
        };
        let old = self.put_quota(&k, (!deleted).then(|| Arc::new(q)));
        let now = self.quota(&k);
        Change::Quota(QuotaChange {
            spec_changed: old.as_ref().map(|o| &o.spec) != now.as_ref().map(|q| &q.spec),
            key: k,
        })
    }

    fn vmi_changed(&self, v: Vmi, deleted: bool) -> Change {
        let Some(k) = namespaced(&v.metadata) else {
            return Change::Nothing;
        };
        let life = |v: &Vmi| (v.uid().to_string(), v.is_final(), is_deleting(&v.metadata));
        let request = |v: &Vmi| (v.gpu_request(), v.device_request());
        let (new_life, new_request) = (
            (!deleted).then(|| life(&v)),
            (!deleted).then(|| request(&v)),
        );
        let old = self.put_vmi(&k, (!deleted).then(|| Arc::new(v)));
        Change::Vmi(VmiChange {
            life_changed: old.as_deref().map(life) != new_life,
            request_changed: old.as_deref().map(request) != new_request,
            key: k,
        })
    }

    fn pod_changed(&self, p: &k8s_openapi::api::core::v1::Pod, deleted: bool) -> Change {
        let Some(k) = namespaced(&p.metadata) else {
            return Change::Nothing;
        };
        let new = (!deleted)
            .then(|| LauncherPod::from_pod(p).map(Arc::new))
            .flatten();
        let vmi = new.as_deref().map(super::vmi_key_of);
        let using = (!deleted).then(|| PodUse::from_pod(p)).flatten();
        let was_using = self.put_pod_use(&k, using.clone(), vmi.as_deref());
        let old = self.put_pod(&k, new.clone());
        let changed = old.as_deref().map(launcher_facts) != new.as_deref().map(launcher_facts);
        let vmis = if changed {
            old.iter()
                .chain(new.iter())
                .map(|p| key(&p.namespace, &p.vmi))
                .collect()
        } else {
            BTreeSet::new()
        };
        Change::Pod(PodChange {
            vmis,
            use_changed: if was_using == using {
                Vec::new()
            } else {
                let mut nodes: Vec<Arc<str>> = was_using
                    .iter()
                    .chain(&using)
                    .map(|u| u.node.clone())
                    .collect();
                nodes.dedup();
                nodes
            },
        })
    }

    fn node_changed(&self, facts: Option<NodeFacts>, deleted: bool) -> Change {
        let Some(facts) = facts else {
            return Change::Nothing;
        };
        let name = facts.name.clone();
        let now = (!deleted).then(|| Arc::new(facts));
        let (old, moved) = self.put_node(&name, now.clone());
        if old == now {
            return Change::Nothing; // a heartbeat: nothing any rule reads changed
        }
        Change::Node(NodeChange {
            name,
            old,
            now,
            moved,
        })
    }
}
