//! Placement's gate part: for a VMI, its template claim (G2), its set at
//! the gate (G3-G5) and its pinned pod the scheduler cannot place (G7).
//! The rules decide; this applies what placement remembers of its own
//! writes, keeps which claims each VMI's set names (`index`), why each
//! waiting set waits (`waiting`) and what each VMI was told (`told`).

mod heads;
mod index;
mod pinned;
mod queue;
mod told;
mod waiting;

use waiting::{RecheckAsked, Waits};

use super::write::Write;
use super::{LookAt, Shared};
use crate::api::{
    CONDITION_WAITING, ClaimPhase, GPUClaim, GPUClaimStatus, Obj, Vmi, rv_number, set_condition,
};
use crate::rules::queueing::OrderKey;
use crate::rules::{
    GateStep, TemplateStep, WaitReason, WrittenAllocations, decide_gate_held, decide_template,
    requested_claims,
};
use crate::world::{World, key, split_key};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use std::sync::Arc;

/// What one decision may spend on evaluating tenants' request selectors
/// (cel-go's cost units): one selector at upstream's limit, about a
/// tenth of a second at most, before other work goes first.
const SELECTOR_BUDGET: u64 = dra_cel_cost::SELECTOR_MAX_COST;

/// The gate's state in placement.
#[derive(Default)]
pub(super) struct Gate {
    /// Which claims each VMI's set names, and the reverse.
    index: index::ClaimIndex,
    /// Why each waiting set waits, indexed by the nodes that matter.
    waiting: waiting::WaitingSets,
    /// A recheck asked for and not yet made.
    recheck: RecheckAsked,
    /// What each VMI was last told, so that a decision made again tells
    /// nothing twice.
    told: told::Told,
    /// G7: pinned pods the scheduler cannot place.
    pinned: pinned::Pinned,
    /// O2: who could lead each class, and who does.
    heads: heads::Heads,
    /// O2: per class, the head whose holding others back was said.
    announced: std::collections::HashMap<String, String>,
    /// Sets queued by a recheck only because GPUs freed on these nodes:
    /// where none of them has room for the set, its decision is the one
    /// it has (G3's pass over every node to say why is not made again).
    freed_only: std::collections::HashMap<String, std::collections::BTreeSet<String>>,
    /// Sets queued by a recheck only because nodes changed: one that no
    /// node had room for keeps its decision while the index of free GPUs
    /// still says so (G3's `Roomless`), with no node judged.
    nodes_only: std::collections::HashSet<String>,
}

impl Gate {
    /// The VMIs whose sets name the claim `k`.
    pub(super) fn sets_naming(&self, k: &str) -> impl Iterator<Item = &String> {
        self.index.sets_naming(k)
    }

    /// Asks that the waiting sets `work` concerns look again; true when
    /// this is the first ask of a burst (the actor then makes the pass
    /// once the burst is in).
    pub(super) fn ask_recheck(&mut self, work: LookAt) -> bool {
        let first = self.recheck.is_empty();
        self.recheck.ask(work);
        first
    }

    /// The burst's recheck: the waiting sets it concerns, in O1's order
    /// (where they compete for the GPUs that freed, the first goes first).
    pub(super) fn recheck(&mut self, w: &World) -> Vec<(OrderKey, String)> {
        let asked = std::mem::take(&mut self.recheck);
        let mut sets = Vec::new();
        for k in self.waiting.concerned(&asked, w) {
            let Some(waits) = self.waiting.get(&k) else {
                continue;
            };
            if asked.only_freed(&k, waits) {
                let nodes = self.freed_only.entry(k.clone()).or_default();
                nodes.extend(asked.freed_nodes.iter().cloned());
            } else {
                self.freed_only.remove(&k);
            }
            if asked.only_nodes_for(&k, waits) {
                self.nodes_only.insert(k.clone());
            } else {
                self.nodes_only.remove(&k);
            }
            sets.push((waits.order.clone(), k));
        }
        sets.sort();
        sets
    }

    /// The set of `k` is to be decided in full: it is looked at for more
    /// than GPUs freed somewhere.
    pub(super) fn full_look(&mut self, k: &str) {
        self.freed_only.remove(k);
        self.nodes_only.remove(k);
    }

    /// Whether the set of `k`, looked at only because nodes changed, still
    /// has no node with room (G3's `Roomless`): its decision and message
    /// stand, and no node is judged.
    fn still_roomless(&mut self, k: &str, w: &World) -> bool {
        if !self.nodes_only.remove(k) {
            return false;
        }
        self.waiting.get(k).is_some_and(|waits| {
            waits.reason == WaitReason::NoCapacity
                && waits.roomless.as_ref().is_some_and(|r| r.holds(w))
        })
    }

    /// Whether the set of `k`, looked at only because GPUs freed on some
    /// nodes, keeps the decision it has: it waits NoCapacity for GPUs of
    /// one resource, and none of those nodes has that many free now, so
    /// each stays a node "without room" for it and nothing else moved.
    fn nothing_freed_for(&mut self, k: &str, w: &World, written: &WrittenAllocations) -> bool {
        let Some(nodes) = self.freed_only.remove(k) else {
            return false;
        };
        let Some(waits) = self.waiting.get(k) else {
            return false;
        };
        let (WaitReason::NoCapacity, Some((resource, need))) = (waits.reason, &waits.need) else {
            return false;
        };
        // Less what placement's own writes under way hold there (a GPU
        // that freed is taken at once by the first set, before the cache
        // shows its record).
        nodes.iter().all(|n| {
            let free = w
                .free_of(n, resource)
                .saturating_sub(written.on(w, n, resource));
            free < *need
        })
    }

    /// G2-G5 and G7 for the VMI `k`: the write due, if any.
    pub(super) fn decide_vmi(&mut self, k: &str, s: &mut Shared) -> Option<Write> {
        let w = s.env.world.clone();
        let Some(v) = w.vmi(k) else {
            self.forget(k, s);
            return None;
        };
        self.index.index(k, &v, &w);
        // A write about this set, or about a claim it names, is under way:
        // decided once it lands, against what it wrote.
        if s.under_way.blocks_vmi(k, self.index.claims_of(k)) {
            s.under_way.park(LookAt::Vmi(k.to_string()));
            return None;
        }
        s.own.prune(&w);
        match decide_template(&v, &w) {
            TemplateStep::Create(claim) => {
                let ck = key(
                    claim.metadata.namespace.as_deref()?,
                    claim.metadata.name.as_deref()?,
                );
                // Created already, and the watch has not shown it yet.
                if s.own.created_for(&ck, v.uid()) {
                    return None;
                }
                return Some(Write::CreateClaim {
                    key: ck,
                    vmi_uid: v.uid().to_string(),
                    obj: Box::new(Obj::Claim(*claim)),
                });
            }
            TemplateStep::BadRequest(error) => {
                self.told.bad_request(s.env, k, &v, &error);
                return None;
            }
            TemplateStep::Nothing | TemplateStep::WaitForOld => {}
        }
        if let Some(delete) = self.pinned.decide(k, &v, s) {
            return Some(delete);
        }
        if behind_own_writes(k, &v, s) {
            return None;
        }
        self.gate_write(k, &v, s)
    }

    /// G1-G5 for one VMI: the write `decide_gate` calls for, the set
    /// remembered as waiting (and why) or not. A decision that spent its
    /// budget of selector evaluations (D3, `dra::budget`) is not acted
    /// on: the VMI is looked at again behind what is queued and what the
    /// mailbox holds, with what it evaluated remembered, so that a
    /// tenant's costly selectors delay no other tenant's decisions.
    fn gate_write(&mut self, k: &str, v: &Vmi, s: &mut Shared) -> Option<Write> {
        let freed_only = self.nothing_freed_for(k, &s.env.world, &s.own.allocations);
        if freed_only | self.still_roomless(k, &s.env.world) {
            return None;
        }
        let (order, held) = self.held_for(v, s);
        let (step, exhausted) = crate::dra::budget::within(SELECTOR_BUDGET, || {
            decide_gate_held(v, &s.env.world, &s.own.allocations, &held)
        });
        if exhausted {
            tracing::debug!(vmi = %k, rule = "D3", "selector budget spent; deciding again after the other work");
            s.asks.behind_mailbox.push(LookAt::Vmi(k.to_string()));
            return None;
        }
        match step {
            GateStep::Nothing => {
                self.waiting.remove(k);
                self.told.placed(k);
                self.leads_nothing(k, s);
                None
            }
            GateStep::Place(plan) => {
                self.waiting.remove(k);
                self.told.placed(k);
                // A head leads until its placement lands (`placed`): were
                // its writes to fail, what it assumed is let go, and the
                // sets behind it must still find its nodes held.
                Some(Write::Place(Box::new(plan)))
            }
            GateStep::Wait {
                reason,
                message,
                claims,
                nodes,
                lead,
                roomless,
            } => {
                // Told when the reason is new, as the claims show it since
                // this VMI was made: a new process (a restart, a failover)
                // tells nothing again, and a VMI that finds its claim
                // already waiting (ClassMissing, said before any VM) is told.
                let made = v.metadata.creation_timestamp.as_ref().map(|t| t.0);
                let told_before = !claims.is_empty()
                    && claims.iter().all(|c| {
                        c.waiting().is_some_and(|x| {
                            x.reason == reason.as_str()
                                && made.is_none_or(|m| x.last_transition_time.0 >= m)
                        })
                    });
                if !told_before {
                    self.told.wait(s.env, k, v, reason, &message);
                }
                let classes = claims.iter().map(|c| c.spec.class_name.clone()).collect();
                let need = one_resource_need(&claims, &s.env.world);
                self.waiting.insert(
                    k,
                    Waits {
                        order: order.clone(),
                        reason,
                        classes,
                        nodes,
                        need,
                        roomless,
                    },
                );
                let led = self.led(k, v, order, lead, &claims, s);
                let now = Time(s.env.clock.wall());
                let changes: Vec<_> = claims
                    .into_iter()
                    .filter_map(|c| {
                        let st = waiting_status(&c, v, reason, &message, &led, now.clone());
                        st.map(|st| (c, st))
                    })
                    .collect();
                (!changes.is_empty()).then_some(Write::Wait(changes))
            }
        }
    }

    /// O2: the placement of `k`'s set landed (or this process stopped
    /// leading before it could); it leads nothing now.
    pub(super) fn placed(&mut self, k: &str, s: &mut Shared) {
        self.leads_nothing(k, s);
    }

    /// A VMI gone: nothing of it is kept.
    fn forget(&mut self, k: &str, s: &mut Shared) {
        self.leads_nothing(k, s);
        self.waiting.remove(k);
        self.told.forget(k);
        self.index.unindex(k);
        self.pinned.forget(k, s);
    }

    /// G7: a VMI's delete landed (or found it gone or changed).
    pub(super) fn deleted(&mut self, k: String, uid: String, rv: String) {
        self.pinned.issued(k, uid, rv);
    }

    /// O2 after a reload: every class with a head is looked at again, so
    /// that a new `queueing.headOfLineAfter` moves when its head starts
    /// holding others back, and the sets it held look again.
    pub(super) fn led_classes(&self) -> Vec<LookAt> {
        self.heads
            .led_classes()
            .map(|c| LookAt::Head(c.clone()))
            .collect()
    }

    /// The config changed: the VMIs whose `unschedulableGrace` counts are
    /// decided again (a shorter one may be over already).
    pub(super) fn counting_grace(&self) -> Vec<LookAt> {
        self.pinned
            .counting()
            .map(|k| LookAt::Vmi(k.clone()))
            .collect()
    }
}

/// What the unplaced claims of a set ask of one device plugin resource,
/// where that is all they ask. Claims it does not count (placed ones that
/// would move, another's) only make it smaller: a node with fewer free is
/// then surely without room.
fn one_resource_need(claims: &[Arc<GPUClaim>], w: &World) -> Option<(String, u64)> {
    let mut need: Option<(String, u64)> = None;
    let unplaced = claims
        .iter()
        .filter(|c| matches!(c.phase(), ClaimPhase::Pending | ClaimPhase::Lost));
    for c in unplaced {
        let class = w.class(&c.spec.class_name)?;
        if class.spec.device_class_name.is_some() {
            return None;
        }
        let count = u64::from(c.spec.count);
        match &mut need {
            None => need = Some((class.spec.resource_name.clone(), count)),
            Some((r, n)) if *r == class.spec.resource_name => *n = n.saturating_add(count),
            Some(_) => return None,
        }
    }
    need
}

/// Our own writes of the set's claims or pods that the cache does not
/// show yet: decide once it does.
fn behind_own_writes(k: &str, v: &Vmi, s: &mut Shared) -> bool {
    let w = &s.env.world;
    let (ns, _) = split_key(k);
    for n in requested_claims(v, w) {
        let ck = key(ns, &n);
        let cached = w.claim(&ck).map(|c| rv_number(&c.metadata));
        if s.own.creating(&ck) || s.own.claims.behind(&ck, cached) {
            return true;
        }
    }
    w.launchers(k).iter().any(|p| {
        let pk = key(&p.namespace, &p.name);
        s.own.pods.behind(&pk, p.resource_version.parse().ok())
    })
}

/// The status a claim gets while its set waits (and leads the classes
/// `led`, O2), if it changes.
fn waiting_status(
    c: &GPUClaim,
    v: &Vmi,
    reason: WaitReason,
    message: &str,
    led: &std::collections::BTreeMap<String, k8s_openapi::jiff::Timestamp>,
    now: Time,
) -> Option<GPUClaimStatus> {
    let old = c.status.clone().unwrap_or_default();
    let mut s = old.clone();
    let cond = Condition {
        type_: CONDITION_WAITING.into(),
        status: "True".into(),
        reason: reason.as_str().into(),
        message: message.into(),
        last_transition_time: now,
        observed_generation: c.metadata.generation,
    };
    set_condition(&mut s.conditions, cond);
    // Written, so that `kubectl get gpuclaims` prints it: a claim with no
    // phase is Pending all the same.
    s.phase.get_or_insert(ClaimPhase::Pending);
    queue::queue_head(&mut s, c, v, led);
    (s != old).then_some(s)
}
