//! The placement actor: the VMI-level work across the whole cluster.
//! Placements compete for node capacity shared across classes, so they are
//! decided here, one at a time, rather than per class; their writes run
//! many at once, each set's in G4's order, against a view that assumes
//! what the writes under way will hold (`under_way`). It creates
//! template claims (G2), places claim sets at the gate (G3-G5) and deletes
//! allocations whose claim is gone. A queue of work, deduplicated and fair
//! between namespaces (`queue`), and the
//! waiting sets looked at again when what they wait on changes; the I/O
//! count, the log and the backoff are the pacer's.

mod decide;
mod evacuation;
mod handlers;
mod own_writes;
mod pinned;
mod queue;
mod recheck;
mod under_way;
mod write;

use super::Env;
use super::journal::DecisionResult;
use super::pacer::{self, Decides, IoError, Pacer};
use crate::api::{Kind, ObjRef};
use actix::prelude::*;
use own_writes::OwnWrites;
use recheck::{RecheckAsked, WaitingSets, Waits};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use write::{Write, WritesDone, execute};

/// What the placement actor looks at next.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Message)]
#[rtype(result = "()")]
pub enum LookAt {
    /// A VMI (namespace/name) whose request, life or pods changed.
    Vmi(String),
    /// An allocation (namespace/name) whose claim may be gone.
    Allocation(String),
    /// A claim changed: the VMIs whose sets name it look again, and its
    /// backing claim.
    Claim(String),
    /// D4: a claim's backing claim (`ns/name`, the claim's key), away from
    /// the gate: brought back, or let go when its GPUClaim is gone.
    BackingClaim(String),
    /// A class changed: sets waiting for capacity, budget or their class
    /// look again.
    Capacity,
    /// GPUs of `class` in `namespace` were freed on `node`: the sets over
    /// that class's budget or that namespace's quota look again, and those
    /// waiting on nodes for which the node matters.
    Freed {
        node: String,
        class: String,
        namespace: String,
    },
    /// Nodes were made or deleted, or a node's labels changed: every set
    /// waiting on nodes (room, or the held node's filters) looks again;
    /// budgets and classes did not change.
    NodesChanged,
    /// What this node has or what its pods use changed, not its labels:
    /// the sets waiting on nodes for which it matters look again.
    Node(String),
    /// A new allocation took budget from this class: sets of it waiting on
    /// nodes look again, as the budget is checked first and may now be
    /// their reason (a fresh controller would say OverBudget).
    BudgetUsed(String),
    /// A GPUQuota of this namespace changed, or a new allocation took from
    /// one (Q1): the namespace's waiting sets look again.
    Namespace(String),
    /// A node's evacuation taint, a VMI or a claim changed while a node is
    /// evacuated, or a restart timed out: E2 looks again.
    Evacuation,
}

/// What to look at, with the time its change entered the supervisor.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PlacementWork {
    pub work: LookAt,
    pub since: tokio::time::Instant,
}

/// A watch listed its kind again: events may have been missed, so memory
/// of our own writes that the listed cache may not show is checked (I6).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct Relisted(pub Kind);

/// The config changed: timers counting a grace follow the new one.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct ConfigReloaded;

/// Looks again at the waiting sets a burst of changes concerns: one pass
/// for the whole burst, not one per change.
#[derive(Message)]
#[rtype(result = "()")]
struct Recheck;

pub struct Placement {
    env: Arc<Env>,
    pacer: Pacer,
    queue: queue::FairQueue,
    own: OwnWrites,
    /// What each VMI was last told (its version and the message), so that
    /// a decision made again tells nothing twice.
    reported: HashMap<String, (String, String)>,
    /// Which VMIs' sets name a claim.
    by_claim: HashMap<String, BTreeSet<String>>,
    /// The reverse: the claims each indexed VMI's set names.
    claims_of: HashMap<String, Vec<String>>,
    /// Why each waiting VMI waits, indexed by the nodes that matter.
    waiting: WaitingSets,
    /// A recheck asked for and not yet made.
    recheck: RecheckAsked,
    /// G7: pinned pods the scheduler cannot place.
    pinned: pinned::Pinned,
    /// E2: the restarts under way.
    evac: evacuation::Evacuation,
    /// Writes under way, and the work parked behind them.
    under_way: under_way::UnderWay,
    /// The failures of writes under way together share one backoff wait:
    /// until when, and the wait.
    burst: Option<(tokio::time::Instant, std::time::Duration)>,
}

/// When placement looks again at work whose write met a 409.
const CONFLICT_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

impl Placement {
    pub fn new(env: Arc<Env>) -> Self {
        Self {
            env: env.clone(),
            pacer: Pacer::new(env.clone()),
            queue: queue::FairQueue::default(),
            own: OwnWrites::default(),
            reported: HashMap::new(),
            by_claim: HashMap::new(),
            claims_of: HashMap::new(),
            waiting: WaitingSets::default(),
            recheck: RecheckAsked::default(),
            pinned: pinned::Pinned::default(),
            evac: evacuation::Evacuation::default(),
            under_way: under_way::UnderWay::default(),
            burst: None,
        }
    }

    /// Queues work not already queued, fairly between namespaces.
    fn push(&mut self, works: Vec<LookAt>) {
        for w in works {
            self.queue.push(w);
        }
    }

    fn write(&mut self, work: LookAt, write: Write, ctx: &mut Context<Self>) {
        let (rule, intent) = write.rule_and_intent();
        self.pacer.writing(rule);
        let write_under_way = self.assume_write(&work, &write);
        let fut = execute(self.env.clone(), write);
        pacer::run_io(self, ctx, fut, move |act, done: WritesDone, ctx| {
            act.remember(&done);
            act.marks_landed(&done.marks, &done.marks_failed);
            if let Some((vm, _)) = &done.restarted {
                act.restart_issued(vm, ctx);
            }
            if let Some((uid, why)) = &done.kept {
                act.restart_kept(uid, why, ctx);
            }
            if let Some((uid, marked)) = &done.restart_failed {
                act.restart_failed(uid, *marked, ctx);
            }
            // E2: marks removed; the evacuation looks again (an error is
            // looked at again after its wait, below; marks whose removal
            // met a newer node, after a conflict's).
            if !done.marks.is_empty() && done.restarted.is_none() && done.error.is_none() {
                act.enqueue(LookAt::Evacuation, ctx);
            }
            if !done.marks_failed.is_empty() && done.error.is_none() {
                ctx.run_later(CONFLICT_RETRY, |act, ctx| {
                    act.enqueue(LookAt::Evacuation, ctx)
                });
            }
            act.write_ended(write_under_way, ctx);
            let result = match done.error {
                None => {
                    act.pacer.succeeded();
                    DecisionResult::Ok
                }
                Some(error) => act.failed(work, error, ctx),
            };
            act.pacer.log(rule, intent, result);
            pacer::reconcile(act, ctx);
        });
    }

    /// What the writes left that the cache may not show yet.
    fn remember(&mut self, done: &WritesDone) {
        for (k, spec, rv) in &done.allocations {
            self.own.wrote_allocation(k.clone(), spec.clone(), *rv);
        }
        for (k, rv) in &done.claims {
            self.own.claims.wrote(k.clone(), *rv);
        }
        for (k, rv) in &done.resource_claims {
            self.own.resource_claims.wrote(k.clone(), *rv);
        }
        for (k, rv, used) in &done.pods {
            self.own.pods.wrote(k.clone(), *rv);
            self.own.allocations.pinned(k.clone(), used.clone(), *rv);
        }
        if let Some((k, uid, rv)) = &done.created {
            self.own.created(k.clone(), uid.clone(), *rv);
        }
        if let Some((k, uid)) = &done.deleted_allocation {
            self.own.deleted_allocation(k.clone(), uid.clone());
        }
        if let Some((k, uid, rv)) = &done.deleted_vmi {
            self.issued_unplaceable(k.clone(), uid.clone(), rv.clone());
        }
    }

    /// A write that failed: its work is looked at again, after 1 s for a
    /// 409 (a newer object's event brings it back too, should it not have
    /// come already), else after the backoff.
    fn failed(&mut self, work: LookAt, error: IoError, ctx: &mut Context<Self>) -> DecisionResult {
        if error.is_fenced() {
            // When this process leads again, every set is looked at afresh.
            return DecisionResult::Error(error.to_string());
        }
        let wait = match &error {
            IoError::Newer { what } => {
                tracing::debug!(?work, %what, "placement met a newer object");
                CONFLICT_RETRY
            }
            _ => {
                let wait = self.burst_wait();
                tracing::warn!(%error, ?work, retry_in = %humantime::format_duration(wait), "placement write failed");
                wait
            }
        };
        ctx.run_later(wait, move |act, ctx| act.enqueue(work, ctx));
        match error {
            IoError::Newer { .. } => DecisionResult::Conflict,
            e => DecisionResult::Error(e.to_string()),
        }
    }

    /// The backoff for a failed write. Writes under way together fail
    /// together (an API server's outage): those failing within the same
    /// wait share it, rather than each taking the next, longer one (the
    /// sixteenth of a second's outage would wait five minutes).
    fn burst_wait(&mut self) -> std::time::Duration {
        let now = self.env.clock.now();
        match self.burst {
            Some((until, wait)) if now < until => wait,
            _ => {
                let wait = self.pacer.next_wait();
                self.burst = Some((now + wait, wait));
                wait
            }
        }
    }

    fn enqueue(&mut self, work: LookAt, ctx: &mut Context<Self>) {
        let works: Vec<LookAt> = match &work {
            // The sets that name the claim, and the claim itself (D4: its
            // backing claim, away from the gate).
            LookAt::Claim(c) => self
                .by_claim
                .get(c)
                .into_iter()
                .flatten()
                .map(|v| LookAt::Vmi(v.clone()))
                .chain(std::iter::once(LookAt::BackingClaim(c.clone())))
                .collect(),
            LookAt::Capacity
            | LookAt::Freed { .. }
            | LookAt::NodesChanged
            | LookAt::Node(_)
            | LookAt::BudgetUsed(_)
            | LookAt::Namespace(_) => {
                self.ask_recheck(work, ctx);
                Vec::new()
            }
            _ => vec![work],
        };
        self.push(works);
        pacer::reconcile(self, ctx);
    }

    /// Waiting sets that `work` concerns look again, in one pass with the
    /// rest of the burst.
    fn ask_recheck(&mut self, work: LookAt, ctx: &mut Context<Self>) {
        if self.recheck.is_empty() {
            // Behind whatever the mailbox holds: a burst is one pass.
            ctx.notify(Recheck);
        }
        self.recheck.ask(work);
    }

    /// After the allocations watch relisted, an allocation we wrote that
    /// the cache does not show may be gone for good (created and deleted
    /// while the watch was down) or still on its way: a live read tells.
    fn verify_allocations(&mut self, ctx: &mut Context<Self>) {
        for k in self.own.allocations.unconfirmed(&self.env.world) {
            let env = self.env.clone();
            let (ns, name) = crate::world::split_key(&k);
            let what = ObjRef::new(Kind::Allocation, Some(ns), name);
            let read = async move { env.reader.get(what).await };
            pacer::track_io(&self.env.clone(), self, ctx, read, move |act, live, ctx| {
                match live {
                    // Still there: the watch will bring it.
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        act.own.allocations.forget(&k);
                        // Room, budgets and a set held through it (rare:
                        // after a relist) all look again.
                        act.enqueue(LookAt::Capacity, ctx);
                        act.enqueue(LookAt::NodesChanged, ctx);
                    }
                    Err(error) => {
                        tracing::warn!(allocation = %k, %error, "cannot tell whether an allocation we wrote still exists; asking again");
                        ctx.run_later(CONFLICT_RETRY, |act, ctx| act.verify_allocations(ctx));
                    }
                }
            });
        }
    }
}

impl Decides for Placement {
    fn pacer(&mut self) -> &mut Pacer {
        &mut self.pacer
    }

    /// Works through the queue until as many writes as may be are under
    /// way, or nothing is left.
    fn decide(&mut self, ctx: &mut Context<Self>) {
        // Read on every round: a reload reaches the next write.
        let limit = self.env.world.config().placement.writes_in_flight;
        self.pacer.set_limit(limit as usize);
        while !self.pacer.busy() {
            let Some(work) = self.queue.pop() else {
                // Caught up: the changes pending led to no write.
                self.pacer.idle();
                return;
            };
            if let Some(write) = self.decide_work(&work, ctx) {
                self.write(work, write, ctx);
            }
        }
    }
}
