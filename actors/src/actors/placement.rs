//! The placement actor: the VMI-level work, one write at a time across the
//! whole cluster. Placements compete for node capacity shared across
//! classes, so they are serialized here rather than per class. It creates
//! template claims (G2), places claim sets at the gate (G3-G5) and deletes
//! records whose claim is gone.

use super::{Backoff, Env};
use crate::api::{
    CONDITION_WAITING, GPUClaim, GPUClaimStatus, HOSTNAME_LABEL, SCHEDULING_GATE, is_deleting,
    rv_number, set_condition,
};
use crate::ports::{Kind, Obj, ObjRef, Preconditions, Why, WriteError};
use crate::rules::{
    GateStep, Plan, RecordWrite, RuleId, TemplateStep, Unseen, WaitReason, decide_gate,
    decide_template, record_is_orphan, requested_claims,
};
use crate::world::key;
use actix::prelude::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

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
    /// A node can hold more than before: sets waiting for node capacity
    /// look again (budgets and classes did not change).
    NodesGrew,
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
        let (all, nodes) = std::mem::take(&mut self.recheck);
        let works: Vec<PlacementPoke> = self
            .waiting
            .iter()
            .filter(|(_, r)| (all && r.on_capacity()) || (nodes && **r == WaitReason::NoCapacity))
            .map(|(v, _)| PlacementPoke::Vmi(v.clone()))
            .collect();
        self.push(works);
        self.next(ctx);
    }
}

/// One intent and its writes.
enum Write {
    CreateClaim {
        key: String,
        vmi_uid: String,
        obj: Box<Obj>,
    },
    DeleteRecord {
        key: String,
        uid: String,
    },
    /// G4: records, statuses, pods, in that order.
    Place(Box<Plan>),
    /// G5: Waiting conditions.
    Wait(Vec<(Arc<GPUClaim>, GPUClaimStatus)>),
}

/// What the writes left: records and objects the cache may not show yet.
#[derive(Default)]
struct Done {
    records: Vec<(String, crate::api::GPUAllocationSpec)>,
    written: Vec<(String, u64)>,
    created: Option<(String, String)>,
    deleted_record: Option<String>,
    error: Option<WriteError>,
}

pub struct Placement {
    env: Arc<Env>,
    queue: VecDeque<PlacementPoke>,
    queued: HashSet<PlacementPoke>,
    busy: bool,
    /// Template claims we created that the cache may not show yet: key -> VMI uid.
    created: HashMap<String, String>,
    /// Records we deleted that the cache may still show: their uids.
    deleted: HashSet<String>,
    /// The VMI versions whose unreadable request was already reported.
    reported: HashMap<String, String>,
    backoff: Backoff,
    /// Records we wrote that the cache may not show: they hold capacity.
    unseen: Unseen,
    /// Claims and pods we wrote, with the resourceVersion the cache must
    /// reach before a VMI naming them is looked at again.
    written: HashMap<String, u64>,
    /// Which VMIs' sets name a claim, and why each waiting VMI waits.
    by_claim: HashMap<String, HashSet<String>>,
    /// The reverse: the claims each indexed VMI's set names.
    claims_of: HashMap<String, Vec<String>>,
    waiting: HashMap<String, WaitReason>,
    /// The oldest change not yet decided on: the next write reports the latency.
    pending_since: Option<tokio::time::Instant>,
    /// A recheck asked for and not yet made: (every capacity reason, node capacity only).
    recheck: (bool, bool),
}

/// When placement looks again at work whose write met a 409.
const CONFLICT_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

impl Write {
    fn rule(&self) -> RuleId {
        match self {
            Write::CreateClaim { .. } => RuleId::G2,
            Write::DeleteRecord { .. } => RuleId::Records,
            Write::Place(_) => RuleId::G4,
            Write::Wait(_) => RuleId::G5,
        }
    }
}

impl Placement {
    pub fn new(env: Arc<Env>) -> Self {
        Self {
            env,
            queue: VecDeque::new(),
            queued: HashSet::new(),
            busy: false,
            created: HashMap::new(),
            deleted: HashSet::new(),
            reported: HashMap::new(),
            backoff: Backoff::default(),
            unseen: Unseen::default(),
            written: HashMap::new(),
            by_claim: HashMap::new(),
            claims_of: HashMap::new(),
            waiting: HashMap::new(),
            pending_since: None,
            recheck: (false, false),
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
                let r = w.record(k)?;
                let uid = r.metadata.uid.clone()?;
                (record_is_orphan(&r, w)
                    && !is_deleting(&r.metadata)
                    && !self.deleted.contains(&uid))
                .then(|| Write::DeleteRecord {
                    key: k.clone(),
                    uid,
                })
            }
            PlacementPoke::Claim(_) | PlacementPoke::Capacity | PlacementPoke::NodesGrew => None,
        }
    }

    /// True while the cache shows an object older than our own write of it.
    fn behind(&mut self, k: &str, cached_rv: Option<u64>) -> bool {
        match (self.written.get(k), cached_rv) {
            (Some(ours), Some(rv)) if rv < *ours => true,
            (Some(_), _) => {
                self.written.remove(k);
                false
            }
            _ => false,
        }
    }

    fn decide_vmi(&mut self, k: &str) -> Option<Write> {
        let w = self.env.world.clone();
        let Some(v) = w.vmi(k) else {
            self.forget(k);
            return None;
        };
        self.index(k, &v);
        match decide_template(&v, &w) {
            TemplateStep::Create(claim) => {
                let ck = key(
                    claim.metadata.namespace.as_deref()?,
                    claim.metadata.name.as_deref()?,
                );
                // Created already, and the watch has not shown it yet.
                if self.created.get(&ck).is_some_and(|uid| uid == v.uid()) {
                    return None;
                }
                return Some(Write::CreateClaim {
                    key: ck,
                    vmi_uid: v.uid().to_string(),
                    obj: Box::new(Obj::Claim(*claim)),
                });
            }
            TemplateStep::BadRequest(error) => {
                let rv = v.metadata.resource_version.clone().unwrap_or_default();
                if self.reported.insert(k.to_string(), rv.clone()).as_ref() != Some(&rv) {
                    tracing::warn!(vmi = %k, %error, "the VMI's GPU request cannot be read; its pods stay at the gate");
                }
                return None;
            }
            TemplateStep::Nothing | TemplateStep::WaitForOld => {
                self.created.retain(|key, _| !w.claims.contains_key(key))
            }
        }
        // Our own writes not yet in the cache: decide once they are.
        let (ns, _) = crate::world::split_key(k);
        let names = requested_claims(&v);
        for n in &names {
            let ck = key(ns, n);
            if self.created.contains_key(&ck)
                || self.behind(&ck, w.claim(&ck).map(|c| rv_number(&c.metadata)))
            {
                return None;
            }
        }
        for p in w.launchers(k) {
            let pk = key(&p.namespace, &p.name);
            if self.behind(&pk, p.resource_version.parse().ok()) {
                return None;
            }
        }
        self.unseen.prune(&w);
        match decide_gate(&v, &w, &self.unseen) {
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
                self.waiting.insert(k.to_string(), reason);
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
        self.unindex(k);
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
            act.unseen.records.extend(done.records);
            act.written.extend(done.written);
            if let Some((k, uid)) = done.created {
                act.created.insert(k, uid);
            }
            if let Some(uid) = done.deleted_record {
                act.deleted.insert(uid);
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
            PlacementPoke::Capacity | PlacementPoke::NodesGrew => {
                if self.recheck == (false, false) {
                    // Behind whatever the mailbox holds: a burst is one pass.
                    ctx.notify(Recheck);
                }
                let all = work == PlacementPoke::Capacity;
                self.recheck = (self.recheck.0 || all, self.recheck.1 || !all);
                Vec::new()
            }
            _ => vec![work],
        };
        self.push(works);
        self.next(ctx);
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

fn claim_key(c: &GPUClaim) -> String {
    key(
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// Makes one intent's writes, stopping at the first that fails; what landed
/// is reported so the next decision follows from it.
async fn execute(env: Arc<Env>, write: Write) -> Done {
    let mut done = Done::default();
    let w = &env.writer;
    match write {
        Write::CreateClaim { key, vmi_uid, obj } => {
            tracing::info!(claim = %key, rule = "G2", intent = "create-claim", "writing");
            match w.create(*obj, Why(RuleId::G2)).await {
                // AlreadyExists: someone made it; the watch will show it.
                Ok(_) | Err(WriteError::Conflict(_)) => done.created = Some((key, vmi_uid)),
                Err(e) => done.error = Some(e),
            }
        }
        Write::DeleteRecord { key, uid } => {
            let (ns, name) = crate::world::split_key(&key);
            let what = ObjRef::new(Kind::Record, Some(ns), name);
            // Watches of different kinds are not ordered: the claim can be seen
            // gone before its record, which L8 deleted first. Only a record the
            // server still has is deleted.
            let live = match env.reader.get(what.clone()).await {
                Ok(live) => live,
                Err(e) => {
                    done.error = Some(WriteError::Other(e.to_string()));
                    return done;
                }
            };
            if live
                .as_ref()
                .is_some_and(|l| l.meta().uid.as_ref() == Some(&uid))
            {
                tracing::info!(record = %key, rule = "records", intent = "delete-record", "writing");
                let pre = Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                };
                match w.delete(what, pre, Why(RuleId::Records)).await {
                    Ok(_) | Err(WriteError::NotFound) | Err(WriteError::Conflict(_)) => {}
                    Err(e) => done.error = Some(e),
                }
            }
            done.deleted_record = Some(uid);
        }
        Write::Wait(changes) => {
            for (c, status) in changes {
                let k = claim_key(&c);
                tracing::info!(claim = %k, rule = "G5", intent = "waiting", "writing");
                let mut new = GPUClaim::clone(&c);
                new.status = Some(status);
                match w.replace_status(Obj::Claim(new), Why(RuleId::G5)).await {
                    Ok(o) => done.written.push((k, rv_number(o.meta()))),
                    Err(e) => {
                        done.error = Some(e);
                        return done;
                    }
                }
            }
        }
        Write::Place(plan) => place(&env, *plan, &mut done).await,
    }
    done
}

/// G4: records, then claim statuses, then each pod pinned and ungated.
async fn place(env: &Env, plan: Plan, done: &mut Done) {
    let w = &env.writer;
    for r in plan.records {
        let (write, rec) = match r {
            RecordWrite::Create(rec) => (true, rec),
            RecordWrite::Move(rec) => (false, rec),
        };
        let k = key(
            rec.metadata.namespace.as_deref().unwrap_or_default(),
            rec.metadata.name.as_deref().unwrap_or_default(),
        );
        tracing::info!(claim = %k, rule = "G4", node = %plan.node, intent = "record", "writing");
        let spec = rec.spec.clone();
        let res = if write {
            w.create(Obj::Record(rec), Why(RuleId::G4)).await
        } else {
            // The Lost claim's record moves: its cached version, on the new node.
            let Some(mut cur) = env
                .world
                .record(&k)
                .map(|r| crate::api::GPUAllocation::clone(&r))
            else {
                done.error = Some(WriteError::Conflict("record not cached".into()));
                return;
            };
            cur.spec = spec.clone();
            w.replace(Obj::Record(cur), Why(RuleId::G4)).await
        };
        match res {
            Ok(_) => done.records.push((k, spec)),
            Err(e) => {
                done.error = Some(e);
                return;
            }
        }
    }
    for (c, status) in plan.statuses {
        let k = claim_key(&c);
        tracing::info!(claim = %k, rule = "G4", node = %plan.node, intent = "bind", "writing");
        let mut new = GPUClaim::clone(&c);
        new.status = Some(status);
        match w.replace_status(Obj::Claim(new), Why(RuleId::G4)).await {
            Ok(o) => done.written.push((k, rv_number(o.meta()))),
            Err(e) => {
                done.error = Some(e);
                return;
            }
        }
    }
    for pk in plan.pods {
        let (ns, name) = crate::world::split_key(&pk);
        let mut pod = match env.reader.get(ObjRef::new(Kind::Pod, Some(ns), name)).await {
            Ok(Some(Obj::Pod(p))) => p,
            Ok(_) => continue,
            Err(e) => {
                done.error = Some(WriteError::Other(e.to_string()));
                return;
            }
        };
        if !crate::api::pod::is_gated(&pod) {
            continue;
        }
        let spec = pod.spec.get_or_insert_default();
        spec.node_selector
            .get_or_insert_default()
            .insert(HOSTNAME_LABEL.into(), plan.node.clone());
        if let Some(g) = spec.scheduling_gates.as_mut() {
            g.retain(|g| g.name != SCHEDULING_GATE);
        }
        if spec.scheduling_gates.as_ref().is_some_and(|g| g.is_empty()) {
            spec.scheduling_gates = None;
        }
        tracing::info!(pod = %pk, rule = "G4", node = %plan.node, intent = "pin-and-ungate", "writing");
        let created = pod.metadata.creation_timestamp.clone();
        match w.replace(Obj::Pod(pod), Why(RuleId::G4)).await {
            Ok(o) => {
                if let Some(t) = created {
                    let waited = env.clock.wall().duration_since(t.0);
                    env.telemetry
                        .gate_wait(waited.try_into().unwrap_or_default());
                }
                done.written.push((pk, rv_number(o.meta())))
            }
            Err(e) => {
                done.error = Some(e);
                return;
            }
        }
    }
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
        // Records of claims that come back are no longer ours to remember.
        if let PlacementPoke::Record(k) = &work
            && self.env.world.record(k).is_none()
        {
            let w = &self.env.world;
            self.deleted.retain(|uid| {
                w.records
                    .iter()
                    .any(|r| r.metadata.uid.as_ref() == Some(uid))
            });
        }
        self.enqueue(work, ctx);
    }
}
