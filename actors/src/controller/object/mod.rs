//! The actor of one object the controller decides on: a GPUClaim, a
//! GPUClass or a GPUQuota, one type for all three. What is alike is here:
//! the view of its object no older than its own last write, the decision
//! on it (`Role::decide`), one step carried out at a time, the timer a
//! step may ask for, and the end once the object is gone and the cache
//! agrees. What differs by kind is its `Role`: what it decides, what it
//! remembers between decisions, how an intent becomes I/O and what
//! follows it (Events, a class told of a release).

use super::Env;
use super::journal::Intent;
use super::messages::{Ping, Reconcile, ToSupervisor};
use super::pacer::{self, Decides, Freshness, Pacer, WithMeta};
use crate::api::Kind;
use crate::rules::{RuleId, Step};
use crate::world::World;
use actix::prelude::*;
use futures::future::BoxFuture;
use std::fmt;
use std::sync::Arc;
use tokio::time::Instant;

/// Logs a TRACE line for the actor's object when `trace.claims` names it
/// (only claims are ever traced), under the target the filter always lets
/// through.
macro_rules! object_trace {
    ($act:expr, $($arg:tt)+) => {
        if $act.traced {
            tracing::trace!(target: "gpu_claims::claim_trace", claim = %$act.key, $($arg)+);
        }
    };
}
pub(crate) use object_trace;

/// What the actor of one kind of object decides and does.
pub trait Role: Sized + Unpin + 'static {
    /// The object (`GPUClaim`, `GPUClass`, `GPUQuota`).
    type Object: WithMeta + Send + Sync + 'static;
    /// What the role's decision asks for: a write, or a read that decides one.
    type Intent: fmt::Debug + Send + 'static;
    /// What the I/O of one intent came to.
    type Done: Send + 'static;
    const KIND: Kind;

    /// The role's memory at the start.
    fn new() -> Self;
    /// The cached object of `key`.
    fn cached(w: &World, key: &str) -> Option<Arc<Self::Object>>;
    /// The next step, on the freshest view of the object.
    fn decide(act: &mut ObjectActor<Self>, object: &Arc<Self::Object>) -> Step<Self::Intent>;
    /// What an intent is, for the log and the decision ring.
    fn journal(intent: &Self::Intent) -> Intent;
    /// The I/O of `intent`, decided on `object`: run off the actors' thread.
    fn io(
        act: &mut ObjectActor<Self>,
        object: Arc<Self::Object>,
        rule: RuleId,
        intent: Self::Intent,
    ) -> BoxFuture<'static, Self::Done>;
    /// The I/O ended: the view settled, what follows told, the result
    /// logged, and the next decision made (or the retry timed).
    fn finished(
        act: &mut ObjectActor<Self>,
        rule: RuleId,
        intent: Intent,
        done: Self::Done,
        ctx: &mut Context<ObjectActor<Self>>,
    );
}

/// One actor per object: by `key` (`namespace/name`, or the name of a
/// cluster-scoped object), of a `generation` the supervisor counts.
pub struct ObjectActor<R: Role> {
    pub(super) key: String,
    generation: u64,
    pub(super) env: Arc<Env>,
    pub(super) to: ToSupervisor,
    pub(super) pacer: Pacer,
    pub(super) fresh: Freshness<R::Object>,
    /// The timer a `Step::WaitUntil` asked for: one at a time.
    wake: Option<(Instant, SpawnHandle)>,
    /// Whether `trace.claims` names this object.
    pub(super) traced: bool,
    pub(super) role: R,
}

impl<R: Role> ObjectActor<R> {
    pub fn new(key: String, generation: u64, env: Arc<Env>, to: ToSupervisor) -> Self {
        Self {
            key,
            generation,
            env: env.clone(),
            to,
            pacer: Pacer::new(env),
            fresh: Freshness::default(),
            wake: None,
            traced: false,
            role: R::new(),
        }
    }

    /// Decides again at `at` (None: no timer); one timer pending at a time.
    fn wake_at(&mut self, at: Option<(RuleId, Instant)>, ctx: &mut Context<Self>) {
        if self.wake.as_ref().map(|(t, _)| *t) == at.map(|(_, t)| t) {
            return;
        }
        if let Some((_, h)) = self.wake.take() {
            ctx.cancel_future(h);
        }
        if let Some((rule, at)) = at {
            let wait = at.saturating_duration_since(self.env.clock.now());
            object_trace!(self, rule = %rule, wait = %humantime::format_duration(wait), "timer set");
            let h = ctx.run_later(wait, |act, ctx| {
                act.wake = None;
                pacer::reconcile(act, ctx);
            });
            self.wake = Some((at, h));
        }
    }

    /// Starts the I/O of one step; `finished` sees what came of it.
    fn start(
        &mut self,
        object: Arc<R::Object>,
        rule: RuleId,
        intent: R::Intent,
        ctx: &mut Context<Self>,
    ) {
        let journal = R::journal(&intent);
        if journal == Intent::ReadLive {
            // A read, not a write: no change waits on it to be written.
            self.pacer.idle();
            object_trace!(self, rule = %rule, "reading live");
        } else {
            log_writing(R::KIND, &self.key, rule, journal);
            self.pacer.writing(rule);
        }
        let fut = R::io(self, object, rule, intent);
        pacer::run_io(self, ctx, fut, move |act, done, ctx| {
            R::finished(act, rule, journal, done, ctx)
        });
    }
}

/// The line every write of an object's actor starts with, naming the
/// object as its kind's field (`claim=`, `class=`, `quota=`) and the rule.
fn log_writing(kind: Kind, key: &str, rule: RuleId, intent: Intent) {
    match kind {
        Kind::Claim => tracing::info!(claim = %key, rule = %rule, %intent, "writing"),
        Kind::Class => tracing::info!(class = %key, rule = %rule, %intent, "writing"),
        _ => tracing::info!(quota = %key, rule = %rule, %intent, "writing"),
    }
}

impl<R: Role> Decides for ObjectActor<R> {
    fn pacer(&mut self) -> &mut Pacer {
        &mut self.pacer
    }

    fn decide(&mut self, ctx: &mut Context<Self>) {
        let cached = R::cached(&self.env.world, &self.key);
        let Some(object) = self.fresh.current(cached) else {
            self.wake_at(None, ctx);
            // Our write says the object is gone; we end once the cache
            // agrees, so that no new actor decides on the stale cached
            // copy (and writes its release again).
            if R::cached(&self.env.world, &self.key).is_some() {
                return;
            }
            object_trace!(self, "gone; actor stops");
            self.to.ended(R::KIND, &self.key, self.generation);
            return ctx.stop();
        };
        match R::decide(self, &object) {
            Step::Idle => {
                self.pacer.idle();
                self.wake_at(None, ctx);
            }
            Step::WaitUntil(rule, at) => {
                self.pacer.idle();
                self.wake_at(Some((rule, at)), ctx);
            }
            Step::Do(rule, intent) => self.start(object, rule, intent, ctx),
        }
    }
}

impl<R: Role> Actor for ObjectActor<R> {
    type Context = Context<Self>;
}

/// The world changed for this object: decide again, the change's time
/// noted for the change-to-write latency.
impl<R: Role> Handler<Reconcile> for ObjectActor<R> {
    type Result = ();
    fn handle(&mut self, r: Reconcile, ctx: &mut Context<Self>) {
        self.pacer.changed(r.since);
        pacer::reconcile(self, ctx);
    }
}

/// Answered once the mailbox before it is handled.
impl<R: Role> Handler<Ping> for ObjectActor<R> {
    type Result = ();
    fn handle(&mut self, _: Ping, _: &mut Context<Self>) {}
}
