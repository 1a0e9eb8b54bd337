//! The invariants I1-I11 (docs/design.md, "Invariants"), checked against the
//! in-memory cluster. Tests call [`Checker::check`] (I1-I5, I7-I11) after
//! every step, and
//! [`progress`] (I6) once the controller has settled.

mod evacuation;
mod fresh;
mod pools;
mod progress;
mod queue;
mod records;

use fresh::world_of;
pub use progress::progress;

use super::cluster::MemCluster;
use gpu_claims_actors::api::from_json as from_value;
use gpu_claims_actors::api::{
    CLAIM_FINALIZER, GPUAllocation, GPUClaim, GPUClass, LauncherPod, Vmi, has_finalizer,
};
use gpu_claims_actors::ports::{Kind, Obj};
use gpu_claims_actors::rules::scheduling::fit::{NodeRoom, fits_request};
use gpu_claims_actors::world::{WorldWriter, key};
use k8s_openapi::api::resource::v1::ResourceClaim;
use records::{allocations_match, devices_held_once, quotas_hold};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;
use tokio::time::Instant;

/// Remembers the previous step, so that releases (I3) and new records
/// (I1, I2) can be judged at the moment they happened, and since when
/// each pinned pod has been Unschedulable (I7).
pub struct Checker {
    prev_claims: HashMap<String, GPUClaim>,
    journal_pos: usize,
    /// I7: pod uid to when this checker first saw it pinned and Unschedulable.
    unschedulable_since: HashMap<String, Instant>,
    /// I7's bound: `unschedulableGrace` plus a settle.
    unschedulable_limit: Duration,
    /// I10: the restarts evacuation began.
    evacuations: evacuation::Evacuations,
    /// D7: the pools our rules closed at the last check, and what each
    /// ResourceClaim another allocator wrote was allocated to then.
    pools: pools::ClosedPools,
    /// D8: devices named by a record and another allocator's
    /// ResourceClaim, as `device record resourceclaim`, ever seen.
    pub named_twice: BTreeSet<String>,
    /// I11: who led each class at the last check, and since when.
    heads: queue::Heads,
}

/// What I7 allows past `unschedulableGrace`: the controller's settle (a
/// decision, a delete answered, the watch bringing it back).
pub const I7_SETTLE: Duration = Duration::from_secs(5);

impl Default for Checker {
    fn default() -> Self {
        Self::with_unschedulable_grace(
            gpu_claims_actors::config::Config::default().unschedulable_grace,
        )
    }
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
    /// A checker for a controller whose `unschedulableGrace` is `grace`.
    pub fn with_unschedulable_grace(grace: Duration) -> Self {
        Self {
            prev_claims: HashMap::new(),
            journal_pos: 0,
            unschedulable_since: HashMap::new(),
            unschedulable_limit: grace + I7_SETTLE,
            evacuations: evacuation::Evacuations::default(),
            pools: pools::ClosedPools::default(),
            named_twice: BTreeSet::new(),
            heads: queue::Heads::with(
                gpu_claims_actors::config::Config::default()
                    .queueing
                    .head_of_line_after,
            ),
        }
    }

    /// A checker for a controller running `config` (I7's grace, I10's
    /// evacuation settings).
    pub fn for_config(config: &gpu_claims_actors::config::Config) -> Self {
        let mut c = Self::with_unschedulable_grace(config.unschedulable_grace)
            .with_evacuation(config.evacuation.max_concurrent, config.evacuation.timeout);
        c.heads = queue::Heads::with(config.queueing.head_of_line_after);
        c
    }

    /// The controller's config was reloaded (now, by the cluster's
    /// clock): I10 judges the stops from now by its `maxConcurrent`.
    pub fn reloaded(&mut self, c: &MemCluster, config: &gpu_claims_actors::config::Config) {
        self.evacuations
            .reloaded(c.elapsed(), config.evacuation.max_concurrent);
        self.heads.reloaded(config.queueing.head_of_line_after);
    }

    /// Judges evacuation (I10) against these settings.
    pub fn with_evacuation(mut self, max_concurrent: u32, timeout: Duration) -> Self {
        self.evacuations = evacuation::Evacuations::with(max_concurrent, timeout);
        self
    }

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
        let resource_claims = all(c, Kind::ResourceClaim, |o| match o {
            Obj::ResourceClaim(x) => Some(x),
            _ => None,
        });
        let ours = |rc: &ResourceClaim| pools::allocated_by_gpu_claims(c, rc);
        devices_held_once(
            &records,
            &resource_claims,
            &ours,
            &mut self.named_twice,
            &mut v,
        );
        self.pools.recorded(
            c,
            &records,
            &resource_claims,
            &ours,
            self.journal_pos,
            &mut v,
        );
        self.pools.kept(c, &resource_claims, &ours, &mut v);
        if c.journal().entries.len() > self.journal_pos {
            let written = records::last_writes(c, self.journal_pos);
            self.heads.check(c, &records, &written, &mut v);
        }
        self.pins(c, &mut v);
        self.unschedulable(c, &mut v);
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
        self.evacuations
            .check(c, &journal.entries[self.journal_pos..], &claims, &mut v);
        self.journal_pos = journal.entries.len();
        drop(journal);
        self.prev_claims = claims;
        v
    }

    /// I1 and I2, for records created (or moved) since the last check:
    /// per node and resource, recorded GPUs plus what bound pods use
    /// beyond records within allocatable; per class, within its budget.
    fn new_allocations(&self, c: &MemCluster, records: &[GPUAllocation], v: &mut Vec<String>) {
        // Each record placed, and whether it was made (not moved with its
        // Lost claim, which adds no GPUs to its namespace: Q1 counts it once).
        let placed: Vec<(Option<String>, String, bool)> = c.journal().entries[self.journal_pos..]
            .iter()
            .filter(|e| {
                (e.op == "create" || e.op == "update") && e.kind == "GPUAllocation" && e.changed
            })
            .map(|e| (e.namespace.clone(), e.name.clone(), e.op == "create"))
            .collect();
        if placed.is_empty() {
            return;
        }
        let w = world_of(c);
        let classes = all(c, Kind::Class, |o| {
            if let Obj::Class(x) = o { Some(x) } else { None }
        });
        let quotas = all(c, Kind::Quota, |o| {
            if let Obj::Quota(x) = o { Some(x) } else { None }
        });
        // A quota the controller cannot read is no absent quota: nothing
        // may be placed in its namespace (fail closed).
        let unreadable_quotas: Vec<(String, String)> = c
            .store
            .list(Kind::Quota.name())
            .0
            .into_iter()
            .filter(|q| from_value(Kind::Quota, q.clone()).is_err())
            .map(|q| {
                let m = &q["metadata"];
                let s = |f: &str| m[f].as_str().unwrap_or_default().to_string();
                (s("namespace"), s("name"))
            })
            .collect();
        let mut per_class: HashMap<&str, u64> = HashMap::new();
        // I8: per namespace, by class ("" for all classes together).
        let mut per_namespace: HashMap<(&str, &str), u64> = HashMap::new();
        for r in records {
            let gpus = u64::from(r.spec.count);
            let add = |sum: &mut u64| *sum = sum.saturating_add(gpus);
            add(per_class.entry(&r.spec.class_name).or_default());
            let ns = r.metadata.namespace.as_deref().unwrap_or_default();
            add(per_namespace.entry((ns, &r.spec.class_name)).or_default());
            add(per_namespace.entry((ns, "")).or_default());
        }
        for r in records {
            let Some((_, _, created)) = placed.iter().find(|(ns, n, _)| {
                *ns == r.metadata.namespace && Some(n) == r.metadata.name.as_ref()
            }) else {
                continue;
            };
            let (node, res) = (&r.spec.node_name, &r.spec.resource_name);
            // A DRA class's record holds devices, not a node's allocatable:
            // I9 judges it.
            if r.spec.is_dra() {
                continue;
            }
            let alloc = w.node(node).map_or(0, |n| n.allocatable(res));
            let recorded = w.allocated_on(node, res);
            let beyond = w.used_beyond_allocations(node, res);
            // In 128 bits: the checker must not wrap where the controller must not.
            if u128::from(recorded) + u128::from(beyond) > u128::from(alloc) {
                v.push(format!(
                    "I1: node {node} has {recorded} {res} recorded and {beyond} used by pods beyond records, {alloc} allocatable"
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
            if *created {
                quotas_hold(r, &quotas, &per_namespace, v);
                let ns = r.metadata.namespace.as_deref().unwrap_or_default();
                for q in unreadable_quotas.iter().filter(|(qns, _)| qns == ns) {
                    v.push(format!(
                        "I8: GPUAllocation {ns}/{} was made while GPUQuota {ns}/{} cannot be read",
                        r.metadata.name.as_deref().unwrap_or_default(),
                        q.1
                    ));
                }
            }
        }
    }

    /// I7, at placement: a pod pinned since the last check fits its node
    /// as NodeResourcesFit decides (its GPUs are I1's), next to the pods
    /// bound there.
    fn pins(&self, c: &MemCluster, v: &mut Vec<String>) {
        let pinned: Vec<(String, String)> = c.journal().entries[self.journal_pos..]
            .iter()
            .filter(|e| e.op == "update_pod" && e.rule == "G4" && e.changed)
            .map(|e| (e.namespace.clone().unwrap_or_default(), e.name.clone()))
            .collect();
        if pinned.is_empty() {
            return;
        }
        let w = world_of(c);
        for (ns, name) in pinned {
            let pk = key(&ns, &name);
            let Some(p) = w.launcher(&pk) else {
                continue;
            };
            let Some(node) = p.pinned.as_deref().and_then(|n| w.node(n)) else {
                continue;
            };
            // Once bound, its own request is among the node's: not twice.
            let own = w.pod_use(&pk).filter(|u| *u.node == node.name);
            let requested = |r: &str| {
                w.pods_requested(&node.name, r)
                    .saturating_sub(own.as_ref().map_or(0, |u| u.requests.get(r)))
            };
            let room = NodeRoom {
                allocatable: &node.allocatable,
                requested: &requested,
                pods: w.pods_on(&node.name) - u64::from(own.is_some()),
            };
            let gpus = |r: &str| w.serves(r);
            let short = fits_request(&p.requests, room, &gpus);
            if !short.is_empty() {
                let why: Vec<String> = short.iter().map(|i| i.reason()).collect();
                v.push(format!(
                    "I7: pod {pk} pinned to {} where it does not fit: {}",
                    node.name,
                    why.join(", ")
                ));
            }
        }
    }

    /// I7, over time: no launcher pod that G7 would judge (pinned, out of
    /// the gate, Unschedulable, its VMI live with no pod gated or
    /// scheduled) stays so longer than `unschedulableGrace` plus a settle.
    fn unschedulable(&mut self, c: &MemCluster, v: &mut Vec<String>) {
        let now = Instant::now();
        let w = world_of(c);
        let mut seen = HashMap::new();
        w.for_each_vmi(|_, vmi| {
            let Some(stuck) = gpu_claims_actors::rules::unplaceable_pod(vmi, &w) else {
                return;
            };
            let since = self
                .unschedulable_since
                .get(&stuck.pod_uid)
                .copied()
                .unwrap_or(now);
            let stuck_for = now.duration_since(since);
            if stuck_for > self.unschedulable_limit {
                v.push(format!(
                    "I7: pod {} pinned to {} has been Unschedulable for {stuck_for:?}, past {:?}",
                    stuck.pod, stuck.node, self.unschedulable_limit
                ));
            }
            seen.insert(stuck.pod_uid, since);
        });
        self.unschedulable_since = seen;
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
            let vmi = c.get(&gpu_claims_actors::ports::ObjRef::new(
                Kind::Vmi,
                Some(ns),
                vmi_name,
            ));
            let Some(Obj::Vmi(vmi)) = vmi else { continue };
            if vmi.is_final()
                || gpu_claims_actors::api::vmi_owner(&before.metadata)
                    .is_some_and(|(_, u)| u != vmi.uid())
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
