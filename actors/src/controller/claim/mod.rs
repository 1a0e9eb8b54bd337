//! The role of a GPUClaim's actor: its decisions (the rules, in the
//! seed's order; L6's grace asks for a timer), what it remembers between
//! them, and what it tells: Events, its class on release, its decision
//! log. What every object's actor does alike (freshness, one step at a
//! time, the timer, the end) is `ObjectActor`'s.

mod io;
mod notify;
mod trace;

pub use trace::{ClaimTrace, GetTrace};

use super::events;
use super::journal::{DecisionResult, Intent};
use super::object::{ObjectActor, Role, object_trace};
use super::pacer::{self, IoError, Outcome};
use crate::api::{GPUClaim, Kind};
use crate::rules::{ClaimIntent, ClaimMemory, RuleId, Step, decide_claim};
use crate::world::World;
use actix::prelude::*;
use futures::FutureExt;
use futures::future::BoxFuture;
use io::{ClaimIo, IntentDone};
use std::sync::Arc;
use std::time::Duration;

/// How often a claim whose VMI is read live (integration off, L10) is read
/// again while that VMI uses it: nothing else would tell us it stopped.
pub const L10_POLL: Duration = Duration::from_secs(30);

/// The actor of one GPUClaim.
pub type ClaimActor = ObjectActor<ClaimRole>;

/// What a claim's actor remembers between decisions.
pub struct ClaimRole {
    mem: ClaimMemory,
    /// The uid of the allocation this actor deleted (L8), so that a
    /// lagging cache does not make it delete that one again.
    allocation_deleted: Option<String>,
    /// The missing class last reported, so it is said once, not on every change.
    reported_class: Option<String>,
    /// When this process first decided on the claim, and whether it has
    /// seen its class exist: a class missing since before then was said
    /// by the process before (a restart, a failover says nothing again).
    first_decided: Option<k8s_openapi::jiff::Timestamp>,
    class_seen: bool,
    /// The claim the I/O under way was decided on: its Event compares.
    writing: Option<Arc<GPUClaim>>,
    /// D8: the device named twice last said (while a VM runs on it), so
    /// that it is said once, not on every change.
    said_named_twice: Option<crate::rules::Taken>,
}

impl Role for ClaimRole {
    type Object = GPUClaim;
    type Intent = ClaimIntent;
    type Done = IntentDone;
    const KIND: Kind = Kind::Claim;

    fn new() -> Self {
        Self {
            mem: ClaimMemory::default(),
            allocation_deleted: None,
            reported_class: None,
            first_decided: None,
            class_seen: false,
            writing: None,
            said_named_twice: None,
        }
    }

    fn cached(w: &World, key: &str) -> Option<Arc<GPUClaim>> {
        w.claim(key)
    }

    fn decide(act: &mut ClaimActor, claim: &Arc<GPUClaim>) -> Step<ClaimIntent> {
        let cfg = act.env.world.config();
        act.traced = cfg.trace.claims.contains(&act.key);
        act.report_missing_class(claim);
        act.report_named_twice(claim);
        let env = &act.env;
        let (now, wall) = (env.clock.now(), env.clock.wall());
        let (step, mem) = decide_claim(claim, &env.world, &cfg, now, wall, &act.role.mem);
        act.role.mem = mem;
        object_trace!(
            act,
            phase = claim.phase().as_str(),
            rv = claim
                .metadata
                .resource_version
                .as_deref()
                .unwrap_or_default(),
            ?step,
            "decided"
        );
        step
    }

    fn journal(intent: &ClaimIntent) -> Intent {
        match intent {
            ClaimIntent::AddFinalizer => Intent::AddFinalizer,
            ClaimIntent::Delete => Intent::DeleteClaim,
            ClaimIntent::WriteStatus(_) => Intent::WriteStatus,
            ClaimIntent::Release => Intent::Release,
            ClaimIntent::LetGoBackingClaim => Intent::RemoveFinalizer,
            ClaimIntent::DeleteVmi { .. } => Intent::DeleteVmi,
            ClaimIntent::ReleaseUnlessPodsLeft { .. }
            | ClaimIntent::ReleaseUnlessVmiHolds { .. } => Intent::ReadLive,
        }
    }

    fn io(
        act: &mut ClaimActor,
        claim: Arc<GPUClaim>,
        rule: RuleId,
        intent: ClaimIntent,
    ) -> BoxFuture<'static, IntentDone> {
        let allocation = act.cached_allocation_uid(&claim);
        act.role.writing = Some(claim.clone());
        io::execute(act.env.clone(), claim, rule, intent, allocation).boxed()
    }

    fn finished(
        act: &mut ClaimActor,
        rule: RuleId,
        intent: Intent,
        done: IntentDone,
        ctx: &mut Context<ClaimActor>,
    ) {
        act.finish(rule, intent, done, ctx)
    }
}

impl ClaimActor {
    /// The allocation of this claim that a release deletes: cached, of this
    /// claim's UID, and not one we deleted already. None: L8 reads live.
    fn cached_allocation_uid(&self, claim: &GPUClaim) -> Option<String> {
        let r = self.env.world.allocation(&self.key)?;
        let uid = r.metadata.uid.clone()?;
        let ours = Some(&r.spec.claim_uid) == claim.metadata.uid.as_ref();
        (ours && self.role.allocation_deleted.as_ref() != Some(&uid)).then_some(uid)
    }

    fn finish(&mut self, rule: RuleId, intent: Intent, done: IntentDone, ctx: &mut Context<Self>) {
        if let Some(uid) = done.allocation_deleted {
            self.role.allocation_deleted = Some(uid);
        }
        let before = self.role.writing.take();
        let (result, again) = match done.result {
            Ok(ClaimIo::Claim { outcome, released }) => {
                let result = self.wrote(rule, intent, before.as_deref(), &outcome, released);
                self.fresh.settle(&outcome);
                if released {
                    self.notify_class_of_release();
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
                self.role.mem.issued = Some((uid, resource_version));
                (DecisionResult::Ok, true)
            }
            // The backing claim's change (it goes) wakes this actor.
            Ok(ClaimIo::BackingClaimLetGo) => (DecisionResult::Ok, pacer::owed(self)),
            Ok(ClaimIo::InUse { poll }) => {
                if poll {
                    pacer::retry_in(self, ctx, L10_POLL);
                }
                (DecisionResult::InUse, pacer::owed(self))
            }
            Err(e) => (self.failed(rule, intent, before.as_deref(), e, ctx), false),
        };
        if matches!(result, DecisionResult::Ok | DecisionResult::Released) {
            self.pacer.succeeded();
        }
        if !matches!(result, DecisionResult::Ok | DecisionResult::Released)
            || intent == Intent::ReadLive
        {
            object_trace!(self, rule = %rule, intent = %intent, result = %result, "done");
        }
        self.pacer.log(rule, intent, result);
        if again {
            pacer::reconcile(self, ctx);
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
        match pacer::retry_later(self, ctx, &e) {
            Some(wait) => {
                tracing::warn!(claim = %self.key, rule = %rule, error = %e, retry_in = %humantime::format_duration(wait), "write failed")
            }
            None => {
                tracing::debug!(claim = %self.key, rule = %rule, "not written: this process does not lead")
            }
        }
        DecisionResult::Error(e.to_string())
    }
}
