//! The placement actor: the VMI-level work, one write at a time across the
//! whole cluster. Placements compete for node capacity shared across
//! classes, so they are serialized here rather than per class. It creates
//! template claims (G2), places claim sets at the gate (G3-G5) and deletes
//! records whose claim is gone.

mod write;

use super::{Backoff, Env};
use crate::api::{
    CONDITION_WAITING, GPUClaim, GPUClaimStatus, is_deleting, rv_number, set_condition,
};
use crate::ports::{Kind, Note, Obj, ObjRef, WriteError};
use crate::rules::{
    GateStep, RuleId, TemplateStep, WaitReason, WrittenAllocations, decide_gate, decide_template,
    record_is_orphan, requested_claims,
};
use crate::world::key;
use actix::prelude::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use write::{Write, execute};

/// What the placement actor looks at next.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Message)]
#[rtype(result = "()")]
pub enum PlacementPoke {
    /// A VMI (namespace/name) whose request, life or pods changed.
    Vmi(String),
    /// A record (namespace/name) whose claim may be gone.
    Record(String),
    /// A claim changed: the VMIs whose sets name it look again.
    Claim(String),
    /// GPUs were freed, or a class changed: sets waiting for capacity,
    /// budget or their class look again.
    Capacity,
    /// A node changed: sets waiting on nodes (room, or the held node's
    /// filters) look again; budgets and classes did not change.
    NodesChanged,
    /// A new allocation took budget from this class: sets of it waiting on
    /// nodes look again, as the budget is checked first and may now be
    /// their reason (a fresh controller would say OverBudget).
    BudgetUsed(String),
}

/// The waiting sets a burst of changes asks to look at again.
#[derive(Default)]
struct RecheckAsked {
    /// Every set waiting on capacity, budget or its class.
    capacity: bool,
    /// Every set waiting on nodes.
    nodes: bool,
    /// Sets of these classes waiting on nodes.
    budgets: BTreeSet<String>,
}

impl RecheckAsked {
    fn is_empty(&self) -> bool {
        !self.capacity && !self.nodes && self.budgets.is_empty()
    }

    fn concerns(&self, w: &Waits) -> bool {
        (self.capacity && w.reason.on_capacity())
            || (self.nodes && w.reason.on_nodes())
            || (w.reason.on_nodes() && w.classes.iter().any(|c| self.budgets.contains(c)))
    }
}

/// Why a VMI's set waits, and the classes of its claims.
struct Waits {
    reason: WaitReason,
    classes: Vec<String>,
}

/// Looks again at the waiting sets a burst of capacity changes concerns:
/// one pass for the whole burst, not one per change.
#[derive(Message)]
#[rtype(result = "()")]
struct Recheck;

impl Handler<Recheck> for Placement {
    type Result = ();
    fn handle(&mut self, _: Recheck, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        let asked = std::mem::take(&mut self.recheck);
        let works: Vec<PlacementPoke> = self
            .waiting
            .iter()
            .filter(|(_, w)| asked.concerns(w))
            .map(|(v, _)| PlacementPoke::Vmi(v.clone()))
            .collect();
        self.push(works);
        self.next(ctx);
    }
}

pub struct Placement {
    env: Arc<Env>,
    queue: VecDeque<PlacementPoke>,
    queued: HashSet<PlacementPoke>,
    busy: bool,
    /// Template claims we created that the cache may not show yet:
    /// key -> (VMI uid, the resourceVersion our create returned).
    created: HashMap<String, (String, u64)>,
    /// Allocations we deleted that the cache may still show: key -> uid.
    deleted: HashMap<String, String>,
    /// The VMI versions whose unusable request was already reported.
    reported: HashMap<String, String>,
    backoff: Backoff,
    /// Allocations we wrote that the cache may not show: they hold capacity.
    allocations: WrittenAllocations,
    /// Claims and pods we wrote, with the resourceVersion the cache must
    /// reach before a VMI naming them is looked at again.
    written_claims: HashMap<String, u64>,
    written_pods: HashMap<String, u64>,
    /// Which VMIs' sets name a claim, and why each waiting VMI waits.
    by_claim: HashMap<String, BTreeSet<String>>,
    /// The reverse: the claims each indexed VMI's set names.
    claims_of: HashMap<String, Vec<String>>,
    waiting: BTreeMap<String, Waits>,
    /// The oldest change not yet decided on: the next write reports the latency.
    pending_since: Option<tokio::time::Instant>,
    /// A recheck asked for and not yet made.
    recheck: RecheckAsked,
}

/// When placement looks again at work whose write met a 409.
const CONFLICT_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

impl Placement {
    pub fn new(env: Arc<Env>) -> Self {
        Self {
            env,
            queue: VecDeque::new(),
            queued: HashSet::new(),
            busy: false,
            created: HashMap::new(),
            deleted: HashMap::new(),
            reported: HashMap::new(),
            backoff: Backoff::default(),
            allocations: WrittenAllocations::default(),
            written_claims: HashMap::new(),
            written_pods: HashMap::new(),
            by_claim: HashMap::new(),
            claims_of: HashMap::new(),
            waiting: BTreeMap::new(),
            pending_since: None,
            recheck: RecheckAsked::default(),
        }
    }

    fn next(&mut self, ctx: &mut Context<Self>) {
        while !self.busy {
            let Some(work) = self.queue.pop_front() else {
                // Caught up: the changes pending led to no write.
                self.pending_since = None;
                return;
            };
            self.queued.remove(&work);
            if let Some(write) = self.decide(&work) {
                self.write(work, write, ctx);
            }
        }
    }

    fn decide(&mut self, work: &PlacementPoke) -> Option<Write> {
        match work {
            PlacementPoke::Vmi(k) => self.decide_vmi(k),
            PlacementPoke::Record(k) => {
                let w = &self.env.world;
                let r = w.record(k);
                let uid = r.as_ref().and_then(|r| r.metadata.uid.clone());
                // The cache no longer shows the one we deleted.
                if self.deleted.get(k) != uid.as_ref() {
                    self.deleted.remove(k);
                }
                let (r, uid) = (r?, uid?);
                (record_is_orphan(&r, w)
                    && !is_deleting(&r.metadata)
                    && !self.deleted.contains_key(k))
                .then(|| Write::DeleteRecord {
                    key: k.clone(),
                    uid,
                })
            }
            PlacementPoke::Claim(_)
            | PlacementPoke::Capacity
            | PlacementPoke::NodesChanged
            | PlacementPoke::BudgetUsed(_) => None,
        }
    }

    /// Forgets our own writes that the watches have passed: the cache
    /// reflects them now (shown, or gone since), so none outlives its object.
    fn prune_seen(&mut self) {
        let w = &self.env.world;
        let (claims, pods) = (w.observed_rv(Kind::Claim), w.observed_rv(Kind::Pod));
        self.created.retain(|_, (_, rv)| *rv > claims);
        self.written_claims.retain(|_, rv| *rv > claims);
        self.written_pods.retain(|_, rv| *rv > pods);
        self.allocations.prune(w);
    }

    fn decide_vmi(&mut self, k: &str) -> Option<Write> {
        let w = self.env.world.clone();
        let Some(v) = w.vmi(k) else {
            self.forget(k);
            return None;
        };
        self.index(k, &v);
        self.prune_seen();
        match decide_template(&v, &w) {
            TemplateStep::Create(claim) => {
                let ck = key(
                    claim.metadata.namespace.as_deref()?,
                    claim.metadata.name.as_deref()?,
                );
                // Created already, and the watch has not shown it yet.
                if self.created.get(&ck).is_some_and(|(uid, _)| uid == v.uid()) {
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
        // Our own writes not yet in the cache: decide once they are.
        let (ns, _) = crate::world::split_key(k);
        let names = requested_claims(&v);
        for n in &names {
            let ck = key(ns, n);
            if self.created.contains_key(&ck)
                || behind(
                    &mut self.written_claims,
                    &ck,
                    w.claim(&ck).map(|c| rv_number(&c.metadata)),
                )
            {
                return None;
            }
        }
        for p in w.launchers(k) {
            let pk = key(&p.namespace, &p.name);
            if behind(&mut self.written_pods, &pk, p.resource_version.parse().ok()) {
                return None;
            }
        }
        match decide_gate(&v, &w, &self.allocations) {
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
            } => {
                let classes = claims.iter().map(|c| c.spec.class_name.clone()).collect();
                self.waiting
                    .insert(k.to_string(), Waits { reason, classes });
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

    /// Remembers which claims a VMI's set names, so a claim change reaches it.
    /// Queues work not already queued.
    fn push(&mut self, works: Vec<PlacementPoke>) {
        for w in works {
            if self.queued.insert(w.clone()) {
                self.queue.push_back(w);
            }
        }
    }

    /// Remembers which claims the VMI's set names; O(claims it names).
    fn index(&mut self, k: &str, v: &crate::api::Vmi) {
        let (ns, _) = crate::world::split_key(k);
        let names: Vec<String> = requested_claims(v).iter().map(|n| key(ns, n)).collect();
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

    fn forget(&mut self, k: &str) {
        self.waiting.remove(k);
        self.reported.remove(k);
        self.unindex(k);
    }

    /// A VMI's GPU annotations cannot be used: its pods stay at the gate,
    /// and the VMI gets a Warning Event saying what is wrong, once per
    /// version of the VMI.
    fn report_bad_request(
        &mut self,
        k: &str,
        v: &crate::api::Vmi,
        error: &crate::api::RequestError,
    ) {
        let rv = v.metadata.resource_version.clone().unwrap_or_default();
        if self.reported.insert(k.to_string(), rv.clone()).as_ref() == Some(&rv) {
            return;
        }
        tracing::warn!(vmi = %k, rule = "annotations", %error, "the VMI's GPU request cannot be used; its pods stay at the gate");
        let (ns, name) = crate::world::split_key(k);
        super::notes::publish(
            &self.env,
            Note {
                regarding: ObjRef::new(Kind::Vmi, Some(ns), name),
                uid: v.metadata.uid.clone(),
                warning: true,
                reason: "InvalidGPURequest".into(),
                message: format!("{error}; its launcher pods stay at the gate until it is fixed"),
                rule: RuleId::Annotations,
            },
        );
    }

    /// After the allocations watch relisted, an allocation we wrote that
    /// the cache does not show may be gone for good (created and deleted
    /// while the watch was down) or still on its way: a live read tells.
    fn verify_allocations(&mut self, ctx: &mut Context<Self>) {
        for k in self.allocations.unconfirmed(&self.env.world) {
            let env = self.env.clone();
            let (ns, name) = crate::world::split_key(&k);
            let what = ObjRef::new(Kind::Record, Some(ns), name);
            self.env.activity.begin_io();
            ctx.spawn(async move { env.reader.get(what).await }.into_actor(self).map(
                move |live, act, ctx| {
                    act.env.activity.end_io();
                    match live {
                        // Still there: the watch will bring it.
                        Ok(Some(_)) => {}
                        Ok(None) => {
                            act.allocations.forget(&k);
                            act.enqueue(PlacementPoke::Capacity, ctx);
                        }
                        Err(error) => {
                            tracing::warn!(allocation = %k, %error, "cannot tell whether an allocation we wrote still exists; asking again");
                            ctx.run_later(CONFLICT_RETRY, |act, ctx| act.verify_allocations(ctx));
                        }
                    }
                },
            ));
        }
    }

    fn write(&mut self, work: PlacementPoke, write: Write, ctx: &mut Context<Self>) {
        if let Some(since) = self.pending_since.take() {
            let took = self.env.clock.now().saturating_duration_since(since);
            self.env.telemetry.change_to_write(took, write.rule());
        }
        let env = self.env.clone();
        self.busy = true;
        self.env.activity.begin_io();
        ctx.spawn(execute(env, write).into_actor(self).map(move |done, act, ctx| {
            act.env.activity.end_io();
            act.busy = false;
            for (k, spec, rv) in done.records {
                act.allocations.wrote(k, spec, rv);
            }
            act.written_claims.extend(done.claims);
            act.written_pods.extend(done.pods);
            if let Some((k, uid, rv)) = done.created {
                act.created.insert(k, (uid, rv));
            }
            if let Some((k, uid)) = done.deleted_record {
                act.deleted.insert(k, uid);
            }
            match done.error {
                None => act.backoff.reset(),
                // A newer object: its event brings this VMI back, and so
                // does this retry, should the event have come already (or
                // the 409 not be about a newer object at all).
                Some(WriteError::Conflict(e)) => {
                    tracing::debug!(?work, error = %e, "placement met a newer object");
                    ctx.run_later(CONFLICT_RETRY, move |act, ctx| act.enqueue(work, ctx));
                }
                Some(error) => {
                    let wait = act.backoff.next_wait();
                    tracing::warn!(%error, ?work, retry_in = %humantime::format_duration(wait), "placement write failed");
                    ctx.run_later(wait, move |act, ctx| act.enqueue(work, ctx));
                }
            }
            act.next(ctx);
        }));
    }

    fn enqueue(&mut self, work: PlacementPoke, ctx: &mut Context<Self>) {
        let works: Vec<PlacementPoke> = match &work {
            PlacementPoke::Claim(c) => self
                .by_claim
                .get(c)
                .into_iter()
                .flatten()
                .map(|v| PlacementPoke::Vmi(v.clone()))
                .collect(),
            PlacementPoke::Capacity
            | PlacementPoke::NodesChanged
            | PlacementPoke::BudgetUsed(_) => {
                if self.recheck.is_empty() {
                    // Behind whatever the mailbox holds: a burst is one pass.
                    ctx.notify(Recheck);
                }
                match work {
                    PlacementPoke::Capacity => self.recheck.capacity = true,
                    PlacementPoke::NodesChanged => self.recheck.nodes = true,
                    PlacementPoke::BudgetUsed(class) => {
                        self.recheck.budgets.insert(class);
                    }
                    _ => {}
                }
                Vec::new()
            }
            _ => vec![work],
        };
        self.push(works);
        self.next(ctx);
    }
}

/// True while the cache shows an object older than our own write of it.
fn behind(written: &mut HashMap<String, u64>, k: &str, cached_rv: Option<u64>) -> bool {
    match (written.get(k), cached_rv) {
        (Some(ours), Some(rv)) if rv < *ours => true,
        (Some(_), _) => {
            written.remove(k);
            false
        }
        _ => false,
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

impl Actor for Placement {
    type Context = Context<Self>;
}

/// A poke with the time its change entered the supervisor.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PlacementWork {
    pub work: PlacementPoke,
    pub since: tokio::time::Instant,
}

impl Handler<PlacementWork> for Placement {
    type Result = ();
    fn handle(&mut self, w: PlacementWork, ctx: &mut Context<Self>) {
        let oldest = self.pending_since.map_or(w.since, |p| p.min(w.since));
        self.pending_since = Some(oldest);
        self.handle(w.work, ctx);
    }
}

impl Handler<PlacementPoke> for Placement {
    type Result = ();
    fn handle(&mut self, work: PlacementPoke, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        self.enqueue(work, ctx);
    }
}

/// A watch listed its kind again: events may have been missed, so memory
/// of our own writes that the listed cache may not show is checked (I6).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Relisted(pub Kind);

impl Handler<Relisted> for Placement {
    type Result = ();
    fn handle(&mut self, Relisted(kind): Relisted, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        match kind {
            // A template claim we created may be gone or listed: creating
            // it again at worst meets AlreadyExists.
            Kind::Claim => self.created.clear(),
            Kind::Record => self.verify_allocations(ctx),
            _ => {}
        }
    }
}
