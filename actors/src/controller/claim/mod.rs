//! One actor per GPUClaim: its decisions (the rules, in the seed's order),
//! its L6 grace timer, and what it tells: Events, its class on release,
//! its decision log. Writing one step at a time, freshness, retries and
//! the log's bookkeeping are the scaffold's.

mod io;
mod tell;
mod trace;

pub use trace::{ClaimTrace, GetTrace};

use super::Env;
use super::events;
use super::journal::{DecisionResult, Intent};
use super::messages::ToSupervisor;
use super::scaffold::{self, Freshness, IoError, Outcome, Scaffold, Scaffolded};
use crate::api::{GPUClaim, Kind};
use crate::rules::{ClaimIntent, ClaimMemory, RuleId, Step, Used, decide_claim};
use actix::prelude::*;
use io::{ClaimIo, IntentDone};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How often a claim whose VMI is read live (integration off, L10) is read
/// again while that VMI uses it: nothing else would tell us it stopped.
pub const L10_POLL: Duration = Duration::from_secs(30);

pub struct ClaimActor {
    key: String,
    generation: u64,
    env: Arc<Env>,
    to: ToSupervisor,
    scaffold: Scaffold,
    fresh: Freshness<GPUClaim>,
    mem: ClaimMemory,
    grace_timer: Option<(Instant, SpawnHandle)>,
    allocation_deleted: Option<String>,
    traced: bool,
    /// The missing class last reported, so it is said once, not on every change.
    reported_class: Option<String>,
    /// The claim the I/O under way was decided on: its Event compares.
    writing: Option<Arc<GPUClaim>>,
}

/// Logs a line for this claim, with its key; at TRACE only for traced claims.
macro_rules! claim_trace {
    ($self:expr, $($arg:tt)+) => {
        if $self.traced {
            tracing::trace!(target: "gpu_claims::claim_trace", claim = %$self.key, $($arg)+);
        }
    };
}

/// What an intent is, for the log and the decision ring.
fn intent_of(i: &ClaimIntent) -> Intent {
    match i {
        ClaimIntent::AddFinalizer => Intent::AddFinalizer,
        ClaimIntent::Delete => Intent::DeleteClaim,
        ClaimIntent::WriteStatus(_) => Intent::WriteStatus,
        ClaimIntent::Release => Intent::Release,
        ClaimIntent::DeleteVmi { .. } => Intent::DeleteVmi,
    }
}

impl ClaimActor {
    pub fn new(key: String, generation: u64, env: Arc<Env>, to: ToSupervisor) -> Self {
        Self {
            key,
            generation,
            env: env.clone(),
            to,
            scaffold: Scaffold::new(env.clone()),
            fresh: Freshness::default(),
            mem: ClaimMemory::default(),
            grace_timer: None,
            allocation_deleted: None,
            traced: false,
            reported_class: None,
            writing: None,
        }
    }

    /// L6's timer: one pending at a time, at the instant the grace ends.
    fn set_grace_timer(&mut self, at: Option<Instant>, ctx: &mut Context<Self>) {
        if self.grace_timer.as_ref().map(|(t, _)| *t) == at {
            return;
        }
        if let Some((_, h)) = self.grace_timer.take() {
            ctx.cancel_future(h);
        }
        if let Some(at) = at {
            let wait = at.saturating_duration_since(self.env.clock.now());
            claim_trace!(self, rule = "L6", wait = %humantime::format_duration(wait), "grace timer set");
            let h = ctx.run_later(wait, |act, ctx| {
                act.grace_timer = None;
                scaffold::reconcile(act, ctx);
            });
            self.grace_timer = Some((at, h));
        }
    }

    /// The allocation of this claim that a release deletes: cached, of this
    /// claim's UID, and not one we deleted already. None: L8 reads live.
    fn cached_allocation_uid(&self, claim: &GPUClaim) -> Option<String> {
        let r = self.env.world.allocation(&self.key)?;
        let uid = r.metadata.uid.clone()?;
        let ours = Some(&r.spec.claim_uid) == claim.metadata.uid.as_ref();
        (ours && self.allocation_deleted.as_ref() != Some(&uid)).then_some(uid)
    }

    fn write(
        &mut self,
        claim: Arc<GPUClaim>,
        rule: RuleId,
        intent: ClaimIntent,
        ctx: &mut Context<Self>,
    ) {
        let kind = intent_of(&intent);
        tracing::info!(claim = %self.key, rule = %rule, intent = %kind, "writing");
        self.scaffold.writing(rule);
        let allocation = self.cached_allocation_uid(&claim);
        self.writing = Some(claim.clone());
        let fut = io::execute(self.env.clone(), claim, rule, intent, allocation);
        scaffold::run_io(self, ctx, fut, move |act, done, ctx| {
            act.finish(rule, kind, done, ctx)
        });
    }

    fn read_live(&mut self, claim: Arc<GPUClaim>, used: Used, ctx: &mut Context<Self>) {
        let allocation = self.cached_allocation_uid(&claim);
        self.writing = Some(claim.clone());
        let env = self.env.clone();
        let (rule, fut): (RuleId, futures::future::BoxFuture<'static, IntentDone>) = match used {
            Used::ReadPods { names, .. } => (
                RuleId::L9,
                Box::pin(io::release_unless_pods_left(env, claim, names, allocation)),
            ),
            Used::ReadVmi { name, .. } => (
                RuleId::L10,
                Box::pin(io::release_unless_vmi_holds(env, claim, name, allocation)),
            ),
            Used::Yes | Used::No => return,
        };
        claim_trace!(self, rule = %rule, "reading live");
        scaffold::run_io(self, ctx, fut, move |act, done, ctx| {
            act.finish(rule, Intent::ReadLive, done, ctx)
        });
    }

    fn finish(&mut self, rule: RuleId, intent: Intent, done: IntentDone, ctx: &mut Context<Self>) {
        if let Some(uid) = done.allocation_deleted {
            self.allocation_deleted = Some(uid);
        }
        let before = self.writing.take();
        let (result, again) = match done.result {
            Ok(ClaimIo::Claim { outcome, released }) => {
                let result = self.wrote(rule, intent, before.as_deref(), &outcome, released);
                self.fresh.settle(&outcome);
                if released {
                    self.tell_released();
                }
                (result, true)
            }
            Ok(ClaimIo::VmiDeleted {
                uid,
                resource_version,
            }) => {
                if let Some(b) = &before {
                    self.publish(events::transition(&self.key, rule, intent, b, None));
                }
                self.mem.issued = Some((uid, resource_version));
                (DecisionResult::Ok, true)
            }
            Ok(ClaimIo::InUse { poll }) => {
                if poll {
                    scaffold::retry_in(self, ctx, L10_POLL);
                }
                (DecisionResult::InUse, scaffold::owed(self))
            }
            Err(e) => (self.failed(rule, intent, before.as_deref(), e, ctx), false),
        };
        if matches!(result, DecisionResult::Ok | DecisionResult::Released) {
            self.scaffold.succeeded();
        }
        if !matches!(result, DecisionResult::Ok | DecisionResult::Released)
            || intent == Intent::ReadLive
        {
            claim_trace!(self, rule = %rule, intent = %intent, result = %result, "done");
        }
        self.scaffold.log(rule, intent, result);
        if again {
            scaffold::reconcile(self, ctx);
        }
    }

    /// A write of the claim landed, or met a newer claim: its Event, if any.
    fn wrote(
        &mut self,
        rule: RuleId,
        intent: Intent,
        before: Option<&GPUClaim>,
        outcome: &Outcome<GPUClaim>,
        released: bool,
    ) -> DecisionResult {
        let object = match outcome {
            Outcome::Written { object, .. } => Some(object.as_ref()),
            Outcome::Gone { .. } => None,
            Outcome::Conflict(_) => {
                tracing::debug!(claim = %self.key, rule = %rule, "conflict: decided again on the live claim");
                return DecisionResult::Conflict;
            }
        };
        if let Some(b) = before {
            self.publish(events::transition(&self.key, rule, intent, b, object));
        }
        if rule == RuleId::Allocations {
            self.publish_allocation_event(object);
        }
        if released {
            DecisionResult::Released
        } else {
            DecisionResult::Ok
        }
    }

    fn failed(
        &mut self,
        rule: RuleId,
        intent: Intent,
        before: Option<&GPUClaim>,
        e: IoError,
        ctx: &mut Context<Self>,
    ) -> DecisionResult {
        if e.is_invalid() {
            let uid = before.and_then(|b| b.metadata.uid.clone());
            let refused = events::refusal(&self.key, uid, rule, intent, &e.to_string());
            self.publish(Some(refused));
        }
        match scaffold::retry_later(self, ctx, &e) {
            Some(wait) => {
                tracing::warn!(claim = %self.key, rule = %rule, error = %e, retry_in = %humantime::format_duration(wait), "write failed")
            }
            None => {
                tracing::debug!(claim = %self.key, rule = %rule, "not written: this process does not lead")
            }
        }
        DecisionResult::Error(e.to_string())
    }

    /// The claim is gone and nothing is pending: the actor ends.
    fn stop(&mut self, ctx: &mut Context<Self>) {
        claim_trace!(self, "claim gone; actor stops");
        self.to.ended(Kind::Claim, &self.key, self.generation);
        ctx.stop();
    }
}

impl Scaffolded for ClaimActor {
    fn decide(&mut self, ctx: &mut Context<Self>) {
        let cached = self.env.world.claim(&self.key);
        let Some(claim) = self.fresh.current(cached) else {
            // Our write says the claim is gone; we end once the cache agrees,
            // so that no new actor decides on the stale cached copy.
            if self.env.world.has_claim(&self.key) {
                return self.set_grace_timer(None, ctx);
            }
            return self.stop(ctx);
        };
        let cfg = self.env.world.config();
        self.traced = cfg.trace.claims.contains(&self.key);
        self.report_missing_class(&claim);
        let now = self.env.clock.now();
        let step = decide_claim(
            &claim,
            &self.env.world,
            &cfg,
            now,
            self.env.clock.wall(),
            &mut self.mem,
        );
        claim_trace!(
            self,
            phase = claim.phase().as_str(),
            rv = claim
                .metadata
                .resource_version
                .as_deref()
                .unwrap_or_default(),
            ?step,
            "decided"
        );
        if !matches!(step, Step::Write(..)) {
            self.scaffold.idle();
        }
        match step {
            Step::Idle => self.set_grace_timer(None, ctx),
            Step::WaitUntil(_, at) => self.set_grace_timer(Some(at), ctx),
            Step::Write(rule, intent) => self.write(claim, rule, intent, ctx),
            Step::ReadLive(used) => self.read_live(claim, used, ctx),
        }
    }
}

scaffold::scaffolded_actor!(ClaimActor);
