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
    /// `maxConcurrent` as reloads set it: from when (the cluster's time),
    /// each value, in order.
    limits: Vec<(Duration, usize)>,
    timeout: Duration,
    restarted: BTreeMap<String, Restarted>,
    /// As the previous check saw them: each VMI's VM owner, and the
    /// restarted VMs whose new VMI's set waited.
    owners: HashMap<String, Option<String>>,
    uids: HashMap<String, String>,
    waiting: BTreeSet<String>,
    /// A node was tainted for evacuation at the previous check: over
    /// HTTP, where the journal does not know the rule of a write, a VMI
    /// the controller deleted then counts as an evacuation's restart.
    evacuating_before: bool,
}

impl Default for Evacuations {
    fn default() -> Self {
        let c = gpu_claims_actors::config::Config::default().evacuation;
        Self {
            limits: vec![(Duration::ZERO, c.max_concurrent as usize)],
            timeout: c.timeout,
            restarted: BTreeMap::new(),
            owners: HashMap::new(),
            uids: HashMap::new(),
            waiting: BTreeSet::new(),
            evacuating_before: false,
        }
    }
}

impl Evacuations {
    pub(super) fn with(max_concurrent: u32, timeout: Duration) -> Self {
        Self {
            limits: vec![(Duration::ZERO, max_concurrent as usize)],
            timeout,
            ..Self::default()
        }
    }

    /// `maxConcurrent` reloaded at `at`.
    pub(super) fn reloaded(&mut self, at: Duration, max_concurrent: u32) {
        self.limits.push((at, max_concurrent as usize));
    }

    /// The limit a stop at `at` is judged by: the one in force then; at
    /// the very instant of a reload, the looser of the two (the process
    /// takes the new one when its message arrives, within that instant).
    fn limit_at(&self, at: Duration) -> usize {
        let before = self
            .limits
            .iter()
            .rev()
            .find(|(from, _)| *from < at)
            .map(|(_, l)| *l);
        let now = self
            .limits
            .iter()
            .filter(|(from, _)| *from == at)
            .map(|(_, l)| *l);
        before.into_iter().chain(now).max().unwrap_or(0)
    }
    /// Judges the new journal entries; `claims` are the cluster's, by key,
    /// as the checker read them for this check.
    pub(super) fn check(
        &mut self,
        c: &MemCluster,
        new: &[Entry],
        claims: &HashMap<String, GPUClaim>,
        v: &mut Vec<String>,
    ) {
        let vmis: HashMap<String, Vmi> = all(c, Kind::Vmi, |o| match o {
            Obj::Vmi(x) => Some(x),
            _ => None,
        })
        .into_iter()
        .map(|x| (ns_key(&x.metadata), x))
        .collect();
        // What the checks can tell of the restarts before judging the new
        // deletes: one that runs now ran before any delete of this window
        // could be judged against it (no false alarm for a VM stopped the
        // moment the previous one ran); a VM waits only if it waited at
        // the previous check and still does.
        self.mark_ran(&vmis);
        let waiting_now = self.waiting_now(&vmis, claims);
        let waited: BTreeSet<String> = self.waiting.intersection(&waiting_now).cloned().collect();
        // Tainted now or at the previous check: a taint and the deletes it
        // caused can all come between two checks.
        let evacuating_now = c.store.list("Node").0.iter().any(|n| {
            n["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["key"] == gpu_claims_actors::api::EVACUATE_TAINT)
        });
        let evacuating = self.evacuating_before || evacuating_now;
        for e in new.iter().filter(|e| {
            e.op == "delete"
                && e.kind == "VirtualMachineInstance"
                && e.changed
                && (e.rule == "E2" || (e.rule.is_empty() && evacuating))
        }) {
            let k = format!("{}/{}", e.namespace.as_deref().unwrap_or_default(), e.name);
            // The VMIs as they were just before the delete, where the
            // store's history still reaches.
            let then: Option<HashMap<String, Vmi>> = e
                .resource_version
                .checked_sub(1)
                .and_then(|rv| c.store.objects_at("VirtualMachineInstance", None, rv).ok())
                .map(|then| {
                    then.into_iter()
                        .filter_map(|x| serde_json::from_value::<Vmi>(x).ok())
                        .map(|x| (ns_key(&x.metadata), x))
                        .collect()
                });
            let deleted = then.as_ref().and_then(|t| t.get(&k));
            // Its owner as it was at the delete; else as the previous check
            // saw it; a VMI neither saw is judged as its VM's (a VM's VMI
            // has its name).
            let owner = match deleted {
                Some(x) => Some(vm_owner(x)),
                None => self.owners.get(&k).cloned(),
            };
            let vm = match owner.as_ref() {
                Some(Some(vm)) => vm.clone(),
                Some(None) => {
                    v.push(format!(
                        "I10: VMI {k} without a VirtualMachine owner was deleted"
                    ));
                    continue;
                }
                None => k.clone(),
            };
            // A restart that began and ended since the previous check (its
            // VM's next VMI ran before this delete) is over at it.
            if let Some(then) = &then {
                self.mark_ran(then);
            }
            // Judged at the delete: the restarts under way then, as far as
            // the checks have seen them end.
            let before = self
                .restarted
                .iter()
                .filter(|(m, r)| **m != vm && !r.ran && e.elapsed < r.at + self.timeout)
                .count();
            let most = self.limit_at(e.elapsed);
            if before >= most {
                v.push(format!(
                    "I10: VM {vm} was stopped with {before} restarts under way, at most {most} allowed"
                ));
            }
            if let Some(w) = waited.iter().find(|w| **w != vm) {
                v.push(format!(
                    "I10: VM {vm} was stopped while the restarted VM {w} waited at the gate"
                ));
            }
            // The uid the previous check saw ("" for a VMI it did not see:
            // any VMI of the VM that runs later is its next).
            let old_uid = deleted
                .and_then(|x| x.metadata.uid.clone())
                .or_else(|| self.uids.get(&k).cloned())
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
        self.mark_ran(&vmis);
        let counting: Vec<&Restarted> = self
            .restarted
            .values()
            .filter(|r| !r.ran && now < r.at + self.timeout)
            .collect();
        // Each began within the limit of its time: a lowered limit leaves
        // more under way until they end.
        let most = counting
            .iter()
            .map(|r| self.limit_at(r.at))
            .max()
            .unwrap_or(0);
        if counting.len() > most {
            v.push(format!(
                "I10: {} restarts under way, at most {most} allowed",
                counting.len()
            ));
        }
        self.waiting = self.waiting_now(&vmis, claims);
        self.owners = vmis.iter().map(|(k, x)| (k.clone(), vm_owner(x))).collect();
        self.uids = vmis
            .iter()
            .map(|(k, x)| (k.clone(), x.metadata.uid.clone().unwrap_or_default()))
            .collect();
        self.evacuating_before = evacuating_now;
    }
}

impl Evacuations {
    /// Restarts whose VM's next VMI runs are over for good.
    fn mark_ran(&mut self, vmis: &HashMap<String, Vmi>) {
        for (vm, r) in &mut self.restarted {
            let running = vmis.get(vm).is_some_and(|x| {
                x.metadata.uid.as_deref() != Some(r.old_uid.as_str())
                    && x.metadata.deletion_timestamp.is_none()
                    && x.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            });
            r.ran |= running;
        }
    }

    /// The restarted VMs whose next VMI's set waits now.
    fn waiting_now(
        &self,
        vmis: &HashMap<String, Vmi>,
        claims: &HashMap<String, GPUClaim>,
    ) -> BTreeSet<String> {
        self.restarted
            .iter()
            .filter(|(vm, r)| {
                !r.ran
                    && vmis.get(*vm).is_some_and(|x| {
                        x.metadata.uid.as_deref() != Some(r.old_uid.as_str())
                            && waits(claims, vm, x)
                    })
            })
            .map(|(vm, _)| vm.clone())
            .collect()
    }
}

/// Whether a claim the VMI's set names (its claims annotation, or its
/// template claim `<vmi>-gpu`) is Waiting.
fn waits(claims: &HashMap<String, GPUClaim>, vm: &str, x: &Vmi) -> bool {
    let (ns, name) = vm.split_once('/').unwrap_or(("", vm));
    let mut names = x
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
    names.push(gpu_claims_actors::rules::template_name(name));
    names.iter().any(|n| {
        claims.get(&format!("{ns}/{n}")).is_some_and(|c| {
            c.conditions()
                .iter()
                .any(|k| k.type_ == CONDITION_WAITING && k.status == "True")
        })
    })
}
