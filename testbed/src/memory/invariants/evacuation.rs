//! I10: evacuation never has more than `evacuation.maxConcurrent` restarts
//! under way, never deletes a VMI without a VirtualMachine owner, and never
//! stops a VM while the set of a VM it restarted waits at the gate with a
//! reason. Judged from the journal's E2 deletes against what the previous
//! check saw (the VMI's owner, which restarted VMs waited).

use super::super::journal::Entry;
use super::{all, ns_key};
use crate::memory::cluster::MemCluster;
use gpu_claims_actors::api::{CONDITION_WAITING, GPUClaim, Vmi};
use gpu_claims_actors::ports::{Kind, Obj};
use gpu_claims_actors::rules::vm_owner;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

/// A VM whose VMI E2 deleted.
struct Restarted {
    old_uid: String,
    at: Duration,
    /// Its new VMI ran (the restart is over for good).
    ran: bool,
}

pub(super) struct Evacuations {
    max_concurrent: usize,
    timeout: Duration,
    restarted: BTreeMap<String, Restarted>,
    /// As the previous check saw them: each VMI's VM owner, and the
    /// restarted VMs whose new VMI's set waited.
    owners: HashMap<String, Option<String>>,
    waiting: BTreeSet<String>,
    /// A previous check has looked: deletes can be judged by what it saw
    /// (a test checks once before the controller runs, as a baseline).
    looked: bool,
    /// A node was tainted for evacuation at the previous check: over
    /// HTTP, where the journal does not know the rule of a write, a VMI
    /// the controller deleted then counts as an evacuation's restart.
    evacuating_before: bool,
}

impl Default for Evacuations {
    fn default() -> Self {
        let c = gpu_claims_actors::config::Config::default().evacuation;
        Self {
            max_concurrent: c.max_concurrent as usize,
            timeout: c.timeout,
            restarted: BTreeMap::new(),
            owners: HashMap::new(),
            waiting: BTreeSet::new(),
            looked: false,
            evacuating_before: false,
        }
    }
}

impl Evacuations {
    pub(super) fn with(max_concurrent: u32, timeout: Duration) -> Self {
        Self {
            max_concurrent: max_concurrent as usize,
            timeout,
            ..Self::default()
        }
    }

    pub(super) fn check(&mut self, c: &MemCluster, new: &[Entry], v: &mut Vec<String>) {
        let vmis: HashMap<String, Vmi> = all(c, Kind::Vmi, |o| match o {
            Obj::Vmi(x) => Some(x),
            _ => None,
        })
        .into_iter()
        .map(|x| (ns_key(&x.metadata), x))
        .collect();
        for e in new
            .iter()
            .filter(|e| e.rule == "E2" && e.op == "delete" && e.changed)
        {
            let k = format!("{}/{}", e.namespace.as_deref().unwrap_or_default(), e.name);
            let owner = self.owners.get(&k).cloned().flatten();
            let Some(vm) = owner.or_else(|| (!self.looked).then(|| k.clone())) else {
                v.push(format!(
                    "I10: VMI {k} without a VirtualMachine owner was deleted"
                ));
                continue;
            };
            if let Some(w) = self.waiting.iter().find(|w| **w != vm) {
                v.push(format!(
                    "I10: VM {vm} was stopped while the restarted VM {w} waited at the gate"
                ));
            }
            let old_uid = vmis
                .get(&k)
                .and_then(|x| x.metadata.uid.clone())
                .unwrap_or_default();
            self.restarted.insert(
                vm,
                Restarted {
                    old_uid,
                    at: e.elapsed,
                    ran: false,
                },
            );
        }
        let now = c.elapsed();
        for (vm, r) in &mut self.restarted {
            let running = vmis.get(vm).is_some_and(|x| {
                x.metadata.uid.as_deref() != Some(r.old_uid.as_str())
                    && x.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            });
            r.ran |= running;
        }
        let under_way = self
            .restarted
            .values()
            .filter(|r| !r.ran && now < r.at + self.timeout)
            .count();
        if under_way > self.max_concurrent {
            v.push(format!(
                "I10: {under_way} restarts under way, at most {} allowed",
                self.max_concurrent
            ));
        }
        let claims: HashMap<String, GPUClaim> = all(c, Kind::Claim, |o| match o {
            Obj::Claim(x) => Some(x),
            _ => None,
        })
        .into_iter()
        .map(|x| (ns_key(&x.metadata), x))
        .collect();
        self.waiting = self
            .restarted
            .iter()
            .filter(|(vm, r)| {
                !r.ran
                    && vmis.get(*vm).is_some_and(|x| {
                        x.metadata.uid.as_deref() != Some(r.old_uid.as_str())
                            && waits(&claims, vm, x)
                    })
            })
            .map(|(vm, _)| vm.clone())
            .collect();
        self.owners = vmis.iter().map(|(k, x)| (k.clone(), vm_owner(x))).collect();
        self.looked = true;
        self.evacuating_before = c.store.list("Node").0.iter().any(|n| {
            n["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["key"] == gpu_claims_actors::api::EVACUATE_TAINT)
        });
    }
}

/// Whether a claim the VMI's set names (its claims annotation) is Waiting.
fn waits(claims: &HashMap<String, GPUClaim>, vm: &str, x: &Vmi) -> bool {
    let ns = vm.split_once('/').map_or("", |(ns, _)| ns);
    let names = x
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(gpu_claims_actors::api::CLAIMS_ANNOTATION))
        .map(|s| {
            s.split(',')
                .map(|n| n.trim().to_string())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    names.iter().any(|n| {
        claims.get(&format!("{ns}/{n}")).is_some_and(|c| {
            c.conditions()
                .iter()
                .any(|k| k.type_ == CONDITION_WAITING && k.status == "True")
        })
    })
}
