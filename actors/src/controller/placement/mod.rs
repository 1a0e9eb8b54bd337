//! The placement actor: the VMI-level work across the whole cluster.
//! Placements compete for node capacity shared across classes, so they are
//! decided here, one at a time, rather than per class; their writes run
//! many at once, each set's in G4's order, against a view that assumes
//! what the writes under way will hold (`under_way`).
//!
//! It is three parts, each a type that owns its state, and a shell that
//! owns what they share:
//! - the **gate** (`gate`): template claims (G2), sets at the gate
//!   (G3-G5), pinned pods the scheduler cannot place (G7);
//! - the **devices** (`devices`): allocations whose claim is gone, and
//!   backing claims away from the gate (D4's restore and let-go, D8's
//!   give-up);
//! - the **evacuation** (`evacuation`): E2, one typed value per restart.
//!
//! The shell holds the work queue (`queue`: its `Lane`s are the order
//! between the parts), what placement wrote that the cache may not show
//! yet (`own_writes`), the writes under way, the timers the parts ask for
//! (`timers`), and the pacer's I/O count, log and backoff. The parts get
//! these through `Shared` and ask for timers through `Asks`; they never
//! see the actor's context.

mod devices;
mod evacuation;
mod gate;
mod handlers;
mod own_writes;
mod queue;
mod timers;
mod under_way;
mod write;

use super::Env;
use super::journal::DecisionResult;
use super::pacer::{self, Decides, IoError, Pacer};
use crate::api::{Kind, ObjRef};
use actix::prelude::*;
use own_writes::OwnWrites;
use std::sync::Arc;
use tokio::time::Instant;
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
    /// O1: a PriorityClass's value, or which is the default, moved: every
    /// waiting set is ordered (decided) again.
    Priorities,
    /// O2: the head of this class moved, or is to start holding others
    /// back: the sets it holds back (Queued) look again, and the start
    /// is said.
    Head(String),
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
    queue: queue::WorkQueue,
    own: OwnWrites,
    /// Writes under way, and the work parked behind them.
    under_way: under_way::UnderWay,
    /// The failures of writes under way together share one backoff wait:
    /// until when, and the wait.
    burst: Option<(Instant, std::time::Duration)>,
    /// The one timer each work the parts asked to look at again keeps.
    timers: timers::Timers,
    /// G2-G5, G7.
    gate: gate::Gate,
    /// E2.
    evacuation: evacuation::Evacuation,
}

/// What every part decides with: the ports and the world, what placement
/// wrote that the cache may not show yet, the writes under way, and where
/// to ask for what only the actor can do.
pub(super) struct Shared<'a> {
    pub env: &'a Env,
    pub own: &'a mut OwnWrites,
    pub under_way: &'a mut under_way::UnderWay,
    pub asks: &'a mut Asks,
}

/// What a part asks of the actor besides a write.
#[derive(Default)]
pub(super) struct Asks {
    /// Work looked at again, queued now.
    pub now: Vec<LookAt>,
    /// Work looked at again behind what the mailbox holds.
    pub behind_mailbox: Vec<LookAt>,
    /// Each work's one timer: set at an instant, or cancelled (None).
    pub timers: Vec<(LookAt, Option<Instant>)>,
}

/// When placement looks again at work whose write met a 409.
const CONFLICT_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

impl Placement {
    pub fn new(env: Arc<Env>) -> Self {
        Self {
            env: env.clone(),
            pacer: Pacer::new(env.clone()),
            queue: queue::WorkQueue::default(),
            own: OwnWrites::default(),
            under_way: under_way::UnderWay::default(),
            burst: None,
            timers: timers::Timers::default(),
            gate: gate::Gate::default(),
            evacuation: evacuation::Evacuation::default(),
        }
    }

    /// Queues work not already queued, in its lane.
    fn push(&mut self, works: Vec<LookAt>) {
        for w in works {
            if let LookAt::Vmi(k) = &w {
                self.gate.full_look(k);
            }
            self.queue.push(w);
        }
    }

    /// Runs `decide` of a part with what the parts share, then does what
    /// it asked.
    fn with_shared<T>(
        &mut self,
        ctx: &mut Context<Self>,
        decide: impl FnOnce(&mut gate::Gate, &mut Shared) -> T,
    ) -> T {
        let mut asks = Asks::default();
        let env = self.env.clone();
        let out = decide(
            &mut self.gate,
            &mut Shared {
                env: &env,
                own: &mut self.own,
                under_way: &mut self.under_way,
                asks: &mut asks,
            },
        );
        self.follow(asks, ctx);
        out
    }

    fn follow(&mut self, asks: Asks, ctx: &mut Context<Self>) {
        for work in asks.now {
            self.route(work, ctx);
        }
        for work in asks.behind_mailbox {
            ctx.notify(work);
        }
        for (work, at) in asks.timers {
            self.set_timer(work, at, ctx);
        }
    }

    fn write(&mut self, work: LookAt, write: Write, ctx: &mut Context<Self>) {
        let (rule, intent) = write.rule_and_intent();
        self.pacer.writing(rule);
        let write_under_way = self.assume_write(&work, &write);
        let placing = match (&work, &write) {
            (LookAt::Vmi(k), Write::Place(_)) => Some(k.clone()),
            _ => None,
        };
        let fut = execute(self.env.clone(), write);
        pacer::run_io(self, ctx, fut, move |act, done: WritesDone, ctx| {
            act.remember(&done);
            // Landed; or refused because this process no longer leads: it
            // tries no more, and must not hold a head it will not place
            // (when it leads again, every set is decided afresh).
            let done_placing = done.error.as_ref().is_none_or(IoError::is_fenced);
            if let (Some(k), true) = (&placing, done_placing) {
                act.with_shared(ctx, |gate, s| gate.placed(k, s));
            }
            let now = act.env.clock.now();
            for again in act
                .evacuation
                .written(&done.restarts, done.error.is_some(), now)
            {
                match again {
                    evacuation::Again::Now => act.enqueue(LookAt::Evacuation, ctx),
                    evacuation::Again::AfterConflict => {
                        ctx.run_later(CONFLICT_RETRY, |act, ctx| {
                            act.enqueue(LookAt::Evacuation, ctx)
                        });
                    }
                }
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
            self.gate.deleted(k.clone(), uid.clone(), rv.clone());
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

    /// Queues `work` (or asks for the recheck it means), then decides as
    /// far as the pacer lets it.
    fn enqueue(&mut self, work: LookAt, ctx: &mut Context<Self>) {
        self.route(work, ctx);
        pacer::reconcile(self, ctx);
    }

    /// Queues `work`, or asks for the recheck it means, and decides
    /// nothing: what a part asks while a decision is being made must not
    /// start another before that decision's write is under way (its
    /// allocations assumed).
    fn route(&mut self, work: LookAt, ctx: &mut Context<Self>) {
        let works: Vec<LookAt> = match &work {
            // The sets that name the claim, and the claim itself (D4: its
            // backing claim, away from the gate).
            LookAt::Claim(c) => self
                .gate
                .sets_naming(c)
                .map(|v| LookAt::Vmi(v.clone()))
                .chain(std::iter::once(LookAt::BackingClaim(c.clone())))
                .collect(),
            LookAt::Head(class) => {
                let class = class.clone();
                // The recheck first (the burst's one pass is asked for
                // once): what the head's look adds to it goes in that pass.
                self.ask_recheck(work, ctx);
                self.with_shared(ctx, |gate, s| gate.head_looked_at(&class, s));
                Vec::new()
            }
            LookAt::Capacity
            | LookAt::Freed { .. }
            | LookAt::NodesChanged
            | LookAt::Node(_)
            | LookAt::BudgetUsed(_)
            | LookAt::Priorities
            | LookAt::Namespace(_) => {
                self.ask_recheck(work, ctx);
                Vec::new()
            }
            _ => vec![work],
        };
        self.push(works);
    }

    /// Waiting sets that `work` concerns look again, in one pass with the
    /// rest of the burst.
    fn ask_recheck(&mut self, work: LookAt, ctx: &mut Context<Self>) {
        if self.gate.ask_recheck(work) {
            // Behind whatever the mailbox holds: a burst is one pass.
            ctx.notify(Recheck);
        }
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

impl Placement {
    /// The part whose work `work` is decides it.
    fn decide_work(&mut self, work: &LookAt, ctx: &mut Context<Self>) -> Option<Write> {
        match work {
            LookAt::Vmi(k) => self.with_shared(ctx, |gate, s| gate.decide_vmi(k, s)),
            LookAt::Allocation(k) => self.with_shared(ctx, |_, s| devices::decide_allocation(k, s)),
            LookAt::BackingClaim(k) => {
                self.with_shared(ctx, |_, s| devices::decide_backing_claim(k, s))
            }
            LookAt::Evacuation => {
                let decision = self.evacuation.decide(&self.env);
                self.set_timer(LookAt::Evacuation, decision.wake, ctx);
                decision.write
            }
            LookAt::Claim(_)
            | LookAt::Capacity
            | LookAt::Freed { .. }
            | LookAt::NodesChanged
            | LookAt::Node(_)
            | LookAt::BudgetUsed(_)
            | LookAt::Priorities
            | LookAt::Head(_)
            | LookAt::Namespace(_) => None,
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
