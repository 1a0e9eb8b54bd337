//! Placement's decisions: for a VMI, its template claim (G2) and its set
//! at the gate (G3-G5); for an allocation, whether its claim is gone. The
//! rules decide; this applies what placement remembers of its own writes
//! and keeps the index from claims to the VMIs whose sets name them.

use super::write::Write;
use super::{LookAt, Placement, Waits};
use crate::api::{
    CONDITION_WAITING, GPUClaim, GPUClaimStatus, Kind, Obj, ObjRef, RequestError, Vmi, is_deleting,
    rv_number, set_condition,
};
use crate::ports::Event;
use crate::rules::{
    GateStep, RuleId, TemplateStep, WaitReason, allocation_is_orphan, decide_gate, decide_template,
    requested_claims,
};
use crate::world::{key, split_key};
use actix::prelude::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// What one decision may spend on evaluating tenants' request selectors
/// (cel-go's cost units): one selector at upstream's limit, about a
/// tenth of a second at most, before other work goes first.
const SELECTOR_BUDGET: u64 = dra_cel_cost::SELECTOR_MAX_COST;

impl Placement {
    pub(super) fn decide_work(&mut self, work: &LookAt, ctx: &mut Context<Self>) -> Option<Write> {
        match work {
            LookAt::Vmi(k) => self.decide_vmi(k, ctx),
            LookAt::Allocation(k) => self.decide_allocation(k),
            LookAt::Evacuation => self.decide_evacuation(ctx),
            LookAt::BackingClaim(k) => self.decide_backing_claim(k),
            LookAt::Claim(_)
            | LookAt::Capacity
            | LookAt::Freed { .. }
            | LookAt::NodesChanged
            | LookAt::Node(_)
            | LookAt::BudgetUsed(_)
            | LookAt::Namespace(_) => None,
        }
    }

    /// An allocation whose claim is gone (or is another claim) is deleted,
    /// unless we deleted it already and the cache lags.
    fn decide_allocation(&mut self, k: &str) -> Option<Write> {
        if self.under_way.blocks_claim(k) {
            self.under_way.park(LookAt::Allocation(k.to_string()));
            return None;
        }
        let w = &self.env.world;
        let r = w.allocation(k);
        let uid = r.as_ref().and_then(|r| r.metadata.uid.clone());
        if self.own.deleting(k, uid.as_ref()) {
            return None;
        }
        let (r, uid) = (r?, uid?);
        (allocation_is_orphan(&r, w) && !is_deleting(&r.metadata)).then(|| {
            Write::DeleteAllocation {
                key: k.to_string(),
                uid,
            }
        })
    }

    /// D4 and D8 away from the gate: the backing claim of a GPUClaim that
    /// is gone let go; a record's device another ResourceClaim names given
    /// up; a placed claim's backing claim, gone or unallocated,
    /// brought back, unless a write of ours about the claim is under way or
    /// not yet in the cache. A VMI at the gate that names it may be placing
    /// its set meanwhile: both write the record's devices, a restore never
    /// clears an allocation (a move's), and placement's writes of one claim
    /// never run at once.
    fn decide_backing_claim(&mut self, k: &str) -> Option<Write> {
        if self.under_way.blocks_claim(k) {
            self.under_way.park(LookAt::BackingClaim(k.to_string()));
            return None;
        }
        let w = &self.env.world;
        if let Some(owner_uid) = crate::rules::orphaned_backing_claim(k, w) {
            return Some(Write::ReleaseOrphanBackingClaim {
                key: k.to_string(),
                owner_uid,
            });
        }
        let c = w.claim(k)?;
        let cached = Some(rv_number(&c.metadata));
        let cached_rc = w.resource_claim(k).map(|rc| rv_number(&rc.metadata));
        if self.own.creating(k)
            || self.own.claims.behind(k, cached)
            || self.own.resource_claims.behind(k, cached_rc)
        {
            return None;
        }
        // D8: a device of its record another ResourceClaim names, and no
        // VM on it: the record moves off it (Lost and in use are the
        // claim actor's to say).
        if let Some(crate::rules::DeviceTaken::Move(g)) =
            crate::rules::device_taken(&c, w, &self.own.allocations)
        {
            return Some(Write::GiveUp(g));
        }
        match crate::rules::backing_claim_to_restore(&c, w, &self.own.allocations)? {
            crate::rules::Restore::Claim(d) => Some(Write::RestoreBackingClaim(Box::new(d))),
            crate::rules::Restore::Record(r) => Some(Write::RecordFollows(r)),
        }
    }

    fn decide_vmi(&mut self, k: &str, ctx: &mut Context<Self>) -> Option<Write> {
        let w = self.env.world.clone();
        let Some(v) = w.vmi(k) else {
            self.forget(k, ctx);
            return None;
        };
        self.index(k, &v);
        // A write about this set, or about a claim it names, is under way:
        // decided once it lands, against what it wrote.
        let names = self.claims_of.get(k).map_or(&[][..], Vec::as_slice);
        if self.under_way.blocks_vmi(k, names) {
            self.under_way.park(LookAt::Vmi(k.to_string()));
            return None;
        }
        self.own.prune(&w);
        match decide_template(&v, &w) {
            TemplateStep::Create(claim) => {
                let ck = key(
                    claim.metadata.namespace.as_deref()?,
                    claim.metadata.name.as_deref()?,
                );
                // Created already, and the watch has not shown it yet.
                if self.own.created_for(&ck, v.uid()) {
                    return None;
                }
                return Some(Write::CreateClaim {
                    key: ck,
                    vmi_uid: v.uid().to_string(),
                    obj: Box::new(Obj::Claim(*claim)),
                });
            }
            TemplateStep::BadRequest(error) => {
                self.report_bad_request(k, &v, &error);
                return None;
            }
            TemplateStep::Nothing | TemplateStep::WaitForOld => {}
        }
        if let Some(delete) = self.decide_unplaceable(k, &v, ctx) {
            return Some(delete);
        }
        if self.behind_own_writes(k, &v) {
            return None;
        }
        self.gate_write(k, &v, ctx)
    }

    /// Our own writes of the set's claims or pods that the cache does not
    /// show yet: decide once it does.
    fn behind_own_writes(&mut self, k: &str, v: &Vmi) -> bool {
        let w = &self.env.world;
        let (ns, _) = split_key(k);
        for n in requested_claims(v, w) {
            let ck = key(ns, &n);
            let cached = w.claim(&ck).map(|c| rv_number(&c.metadata));
            if self.own.creating(&ck) || self.own.claims.behind(&ck, cached) {
                return true;
            }
        }
        w.launchers(k).iter().any(|p| {
            let pk = key(&p.namespace, &p.name);
            self.own.pods.behind(&pk, p.resource_version.parse().ok())
        })
    }

    /// G1-G5 for one VMI: the write `decide_gate` calls for, the set
    /// remembered as waiting (and why) or not. A decision that spent its
    /// budget of selector evaluations (D3, `dra::budget`) is not acted
    /// on: the VMI is looked at again behind what is queued and what the
    /// mailbox holds, with what it evaluated remembered, so that a
    /// tenant's costly selectors delay no other tenant's decisions.
    fn gate_write(&mut self, k: &str, v: &Vmi, ctx: &mut Context<Self>) -> Option<Write> {
        let (step, exhausted) = crate::dra::budget::within(SELECTOR_BUDGET, || {
            decide_gate(v, &self.env.world, &self.own.allocations)
        });
        if exhausted {
            tracing::debug!(vmi = %k, rule = "D3", "selector budget spent; deciding again after the other work");
            ctx.notify(LookAt::Vmi(k.to_string()));
            return None;
        }
        match step {
            GateStep::Nothing => {
                self.waiting.remove(k);
                None
            }
            GateStep::Place(plan) => {
                self.waiting.remove(k);
                Some(Write::Place(Box::new(plan)))
            }
            GateStep::Wait {
                reason,
                message,
                claims,
                nodes,
            } => {
                if reason == WaitReason::RequestMismatch {
                    self.warn_on_vmi(
                        k,
                        v,
                        "GPURequestMismatch",
                        RuleId::G5,
                        format!("{message}; its launcher pods stay at the gate"),
                    );
                }
                let classes = claims.iter().map(|c| c.spec.class_name.clone()).collect();
                self.waiting.insert(
                    k,
                    Waits {
                        reason,
                        classes,
                        nodes,
                    },
                );
                let now = Time(self.env.clock.wall());
                let changes: Vec<_> = claims
                    .into_iter()
                    .filter_map(|c| {
                        waiting_status(&c, reason, &message, now.clone()).map(|s| (c, s))
                    })
                    .collect();
                (!changes.is_empty()).then_some(Write::Wait(changes))
            }
        }
    }

    /// Remembers which claims the VMI's set names; O(claims it names).
    fn index(&mut self, k: &str, v: &Vmi) {
        let (ns, _) = split_key(k);
        // D5: every name its spec gives a ResourceClaim too, whether or
        // not a GPUClaim of that name is seen yet: the claim's coming
        // must reach this VMI.
        let mut names: Vec<String> = requested_claims(v, &self.env.world)
            .iter()
            .map(|n| key(ns, n))
            .collect();
        // A set, not a scan per name: a tenant's spec may list many.
        let mut seen: std::collections::HashSet<String> = names.iter().cloned().collect();
        for n in v
            .referenced_resource_claims()
            .into_iter()
            .filter_map(|e| e.resource_claim_name.as_deref())
        {
            let k = key(ns, n);
            if seen.insert(k.clone()) {
                names.push(k);
            }
        }
        if self.claims_of.get(k) == Some(&names) {
            return;
        }
        self.unindex(k);
        for c in &names {
            self.by_claim
                .entry(c.clone())
                .or_default()
                .insert(k.to_string());
        }
        self.claims_of.insert(k.to_string(), names);
    }

    fn unindex(&mut self, k: &str) {
        for c in self.claims_of.remove(k).unwrap_or_default() {
            if let Some(set) = self.by_claim.get_mut(&c) {
                set.remove(k);
                if set.is_empty() {
                    self.by_claim.remove(&c);
                }
            }
        }
    }

    fn forget(&mut self, k: &str, ctx: &mut Context<Self>) {
        self.waiting.remove(k);
        self.reported.remove(k);
        self.unindex(k);
        self.forget_unplaceable(k, ctx);
    }

    /// A VMI's GPU request cannot be used: its pods stay at the gate, and
    /// the VMI gets a Warning Event saying what is wrong.
    fn report_bad_request(&mut self, k: &str, v: &Vmi, error: &RequestError) {
        let message = format!("{error}; its launcher pods stay at the gate until it is fixed");
        self.warn_on_vmi(k, v, "InvalidGPURequest", RuleId::Annotations, message);
    }

    /// A Warning Event on the VMI, once per version of the VMI and message:
    /// a decision made again on the same VMI tells nothing new.
    fn warn_on_vmi(&mut self, k: &str, v: &Vmi, reason: &str, rule: RuleId, message: String) {
        let rv = v.metadata.resource_version.clone().unwrap_or_default();
        let said = (rv, message);
        if self.reported.get(k) == Some(&said) {
            return;
        }
        tracing::warn!(vmi = %k, rule = %rule, reason, "{}", said.1);
        let (ns, name) = split_key(k);
        super::super::events::publish(
            &self.env,
            Event {
                regarding: ObjRef::new(Kind::Vmi, Some(ns), name),
                uid: v.metadata.uid.clone(),
                warning: true,
                reason: reason.into(),
                message: said.1.clone(),
                rule,
                related: None,
            },
        );
        self.reported.insert(k.to_string(), said);
    }
}

/// The status a claim gets while its set waits, if it changes.
fn waiting_status(
    c: &GPUClaim,
    reason: WaitReason,
    message: &str,
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
    (s != old).then_some(s)
}
