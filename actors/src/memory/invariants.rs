//! The invariants I1-I6 of SPEC section 7, checked against the in-memory
//! cluster. Tests call [`Checker::check`] (I1-I5) after every step, and
//! [`progress`] (I6) once the controller has settled.

use super::cluster::MemCluster;
use crate::api::from_json as from_value;
use crate::api::{
    CLAIM_FINALIZER, GPUAllocation, GPUClaim, GPUClass, LauncherPod, NodeFacts, Vmi, has_finalizer,
};
use crate::ports::{Kind, Obj};
use crate::world::key;
use std::collections::HashMap;

/// Remembers the previous step, so that releases (I3) and new records
/// (I1, I2) can be judged at the moment they happened.
#[derive(Default)]
pub struct Checker {
    prev_claims: HashMap<String, GPUClaim>,
    journal_pos: usize,
}

fn all<T>(c: &MemCluster, kind: Kind, f: impl Fn(Obj) -> Option<T>) -> Vec<T> {
    c.store
        .list(kind.name())
        .0
        .into_iter()
        .filter_map(|v| from_value(kind, v).ok())
        .filter_map(f)
        .collect()
}

fn ns_key(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    key(
        m.namespace.as_deref().unwrap_or_default(),
        m.name.as_deref().unwrap_or_default(),
    )
}

impl Checker {
    /// The violations since the last check; empty when all hold.
    pub fn check(&mut self, c: &MemCluster) -> Vec<String> {
        let claims: HashMap<String, GPUClaim> = all(c, Kind::Claim, |o| {
            if let Obj::Claim(x) = o { Some(x) } else { None }
        })
        .into_iter()
        .map(|x| (ns_key(&x.metadata), x))
        .collect();
        let records = all(c, Kind::Allocation, |o| {
            if let Obj::Allocation(x) = o {
                Some(x)
            } else {
                None
            }
        });
        let mut v = Vec::new();
        self.new_allocations(c, &records, &mut v);
        self.releases(c, &claims, &mut v);
        allocations_match(&claims, &records, &mut v);
        let journal = c.journal();
        // I5: a write since the last check that succeeded but changed nothing.
        for e in journal.entries[self.journal_pos..]
            .iter()
            .filter(|e| !e.changed && e.error.is_none())
        {
            v.push(format!(
                "I5: {} {} {:?}/{} changed nothing",
                e.op, e.kind, e.namespace, e.name
            ));
        }
        self.journal_pos = journal.entries.len();
        drop(journal);
        self.prev_claims = claims;
        v
    }

    /// I1 and I2, for records created since the last check.
    fn new_allocations(&self, c: &MemCluster, records: &[GPUAllocation], v: &mut Vec<String>) {
        let created: Vec<String> = c.journal().entries[self.journal_pos..]
            .iter()
            .filter(|e| e.op == "create" && e.kind == "GPUAllocation" && e.changed)
            .map(|e| e.name.clone())
            .collect();
        if created.is_empty() {
            return;
        }
        let nodes = all(c, Kind::Node, |o| {
            if let Obj::Node(n) = o {
                NodeFacts::from_node(&n)
            } else {
                None
            }
        });
        let classes = all(c, Kind::Class, |o| {
            if let Obj::Class(x) = o { Some(x) } else { None }
        });
        let mut per_node: HashMap<(&str, &str), u64> = HashMap::new();
        let mut per_class: HashMap<&str, u64> = HashMap::new();
        for r in records {
            *per_node
                .entry((&r.spec.node_name, &r.spec.resource_name))
                .or_default() += u64::from(r.spec.count);
            *per_class.entry(&r.spec.class_name).or_default() += u64::from(r.spec.count);
        }
        for r in records
            .iter()
            .filter(|r| created.iter().any(|n| Some(n) == r.metadata.name.as_ref()))
        {
            let alloc = nodes
                .iter()
                .find(|n| n.name == r.spec.node_name)
                .map_or(0, |n| n.allocatable(&r.spec.resource_name));
            let used = per_node[&(r.spec.node_name.as_str(), r.spec.resource_name.as_str())];
            if used > alloc {
                v.push(format!(
                    "I1: node {} has {used} {} recorded, {alloc} allocatable",
                    r.spec.node_name, r.spec.resource_name
                ));
            }
            let budget = classes
                .iter()
                .find(|x: &&GPUClass| x.metadata.name.as_deref() == Some(&r.spec.class_name))
                .and_then(|x| x.spec.budget);
            if let Some(b) = budget {
                let used = per_class[r.spec.class_name.as_str()];
                if used > u64::from(b) {
                    v.push(format!(
                        "I2: class {} has {used} recorded, budget {b}",
                        r.spec.class_name
                    ));
                }
            }
        }
    }

    /// I3: no claim released while a live attached VMI's pods may hold its GPUs.
    fn releases(&self, c: &MemCluster, now: &HashMap<String, GPUClaim>, v: &mut Vec<String>) {
        for (k, before) in &self.prev_claims {
            let released = now.get(k).is_none_or(|x| {
                x.metadata.uid != before.metadata.uid
                    || !has_finalizer(&x.metadata, CLAIM_FINALIZER)
            });
            if !released || !has_finalizer(&before.metadata, CLAIM_FINALIZER) {
                continue;
            }
            let Some(vmi_name) = before.attached_vmi_name() else {
                continue;
            };
            let ns = before.metadata.namespace.as_deref().unwrap_or_default();
            let vmi = c.get(&crate::ports::ObjRef::new(Kind::Vmi, Some(ns), vmi_name));
            let Some(Obj::Vmi(vmi)) = vmi else { continue };
            if vmi.is_final()
                || crate::api::vmi_owner(&before.metadata).is_some_and(|(_, u)| u != vmi.uid())
            {
                continue;
            }
            if launchers_may_hold(c, &vmi) {
                v.push(format!(
                    "I3: claim {k} released while VMI {vmi_name} lives with an ungated launcher"
                ));
            }
        }
    }
}

fn launchers_may_hold(c: &MemCluster, vmi: &Vmi) -> bool {
    let pods = all(c, Kind::Pod, |o| {
        if let Obj::Pod(p) = o {
            LauncherPod::from_pod(&p)
        } else {
            None
        }
    });
    let name = vmi.metadata.name.as_deref().unwrap_or_default();
    let ns = vmi.metadata.namespace.as_deref().unwrap_or_default();
    let mine: Vec<_> = pods
        .iter()
        .filter(|p| p.vmi == name && p.namespace == ns)
        .collect();
    // Only a pod past the gate can have reached a GPU.
    mine.iter().any(|p| !p.gated)
}

/// I4: every Bound, Attached or Lost claim has its record; every record its
/// claim. A claim being deleted is exempt: L8 deletes its record before its
/// finalizer, so a release cut short leaves it without one (and unused).
fn allocations_match(
    claims: &HashMap<String, GPUClaim>,
    records: &[GPUAllocation],
    v: &mut Vec<String>,
) {
    let by_key: HashMap<String, &GPUAllocation> =
        records.iter().map(|r| (ns_key(&r.metadata), r)).collect();
    for (k, c) in claims {
        if c.phase().counts_against_budget()
            && !crate::api::is_deleting(&c.metadata)
            && by_key
                .get(k)
                .is_none_or(|r| Some(&r.spec.claim_uid) != c.metadata.uid.as_ref())
        {
            v.push(format!(
                "I4: claim {k} is {} without its record",
                c.phase().as_str()
            ));
        }
    }
    for (k, r) in &by_key {
        if claims
            .get(k)
            .is_none_or(|c| c.metadata.uid.as_ref() != Some(&r.spec.claim_uid))
        {
            v.push(format!("I4: record {k} has no claim"));
        }
    }
}

/// I6 on a settled cluster: the sets that wait at the gate though a freshly
/// started controller, knowing nothing but the objects, would place them
/// now. Empty when the controller remembers nothing that outlived what it
/// was about.
pub fn progress(c: &MemCluster) -> Vec<String> {
    let fresh = crate::world::World::new(crate::config::Config::default());
    for kind in Kind::ALL {
        for o in all(c, kind, Some) {
            fresh.load(o);
        }
    }
    let none = crate::rules::WrittenAllocations::default();
    let mut v = Vec::new();
    for e in fresh.vmis.iter() {
        if let crate::rules::GateStep::Place(plan) =
            crate::rules::decide_gate(e.value(), &fresh, &none)
        {
            // What its claims say now, to tell why the controller waits.
            let says: Vec<String> = plan
                .statuses
                .iter()
                .map(|(c, _)| {
                    let waiting = c
                        .conditions()
                        .iter()
                        .find(|x| x.type_ == crate::api::CONDITION_WAITING)
                        .map(|x| format!("{}: {}", x.reason, x.message));
                    format!(
                        "{} {} {:?}",
                        c.metadata.name.as_deref().unwrap_or_default(),
                        c.phase().as_str(),
                        waiting
                    )
                })
                .collect();
            v.push(format!(
                "I6: VMI {} waits at the gate, though a fresh controller would place it on {} ({})",
                e.key(),
                plan.node,
                says.join("; ")
            ));
        }
    }
    v.sort();
    v
}
