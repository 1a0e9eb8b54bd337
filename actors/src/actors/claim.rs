//! One actor per GPUClaim: it owns the claim's writes (one at a time, in
//! order), its L6 grace timer and its view of its own last write.

use super::exec::{self, Done, Outcome};
use super::supervisor::{ActorStopped, ClaimReleased, Supervisor};
use super::{Backoff, Decision, DecisionLog, Env};
use crate::api::{ClaimPhase, GPUClaim, rv_number};
use crate::ports::{Kind, Note, ObjRef};
use crate::rules::{ClaimIntent, Memory, RuleId, Step, Used, decide_claim};
use crate::world::split_key;
use actix::prelude::*;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How often a claim whose VMI is read live (integration off, L10) is read
/// again while that VMI uses it: nothing else would tell us it stopped.
pub const L10_POLL: Duration = Duration::from_secs(30);

/// What our own last write left, until the watch shows it.
#[derive(Debug)]
struct Own {
    claim: Option<Arc<GPUClaim>>,
    /// The cache is as fresh as our write once it shows this resourceVersion.
    fresh_from: u64,
}

pub struct ClaimActor {
    key: String,
    generation: u64,
    env: Arc<Env>,
    supervisor: Addr<Supervisor>,
    busy: bool,
    dirty: bool,
    own: Option<Own>,
    mem: Memory,
    grace_timer: Option<(Instant, SpawnHandle)>,
    retry_timer: Option<SpawnHandle>,
    backoff: Backoff,
    record_deleted: Option<String>,
    traced: bool,
    /// The missing class last reported, so it is said once, not on every change.
    reported_class: Option<String>,
    log: DecisionLog,
    /// The oldest change not yet decided on: its write reports the latency.
    pending_since: Option<Instant>,
    /// The claim the write under way was decided on: its Event compares.
    writing: Option<Arc<GPUClaim>>,
}

/// The world changed for this claim: decide again.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Poke {
    /// When the change behind this poke entered the supervisor.
    pub since: Instant,
}

/// What `/debug/claims/<ns>/<name>` shows.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimTrace {
    pub claim: String,
    pub phase: Option<&'static str>,
    pub busy: bool,
    /// Seconds until L6's grace runs out, when it is counting.
    pub grace_left_s: Option<f64>,
    pub decisions: Vec<Decision>,
}

#[derive(Message)]
#[rtype(result = "ClaimTrace")]
pub struct GetTrace;

/// Logs a line for this claim, with its key; at TRACE only for traced claims.
macro_rules! claim_trace {
    ($self:expr, $($arg:tt)+) => {
        if $self.traced {
            tracing::trace!(target: "gpu_claims::claim_trace", claim = %$self.key, $($arg)+);
        }
    };
}

impl ClaimActor {
    pub fn new(key: String, generation: u64, env: Arc<Env>, supervisor: Addr<Supervisor>) -> Self {
        Self {
            key,
            generation,
            env,
            supervisor,
            busy: false,
            dirty: false,
            own: None,
            mem: Memory::default(),
            grace_timer: None,
            retry_timer: None,
            backoff: Backoff::default(),
            record_deleted: None,
            traced: false,
            reported_class: None,
            log: DecisionLog::default(),
            pending_since: None,
            writing: None,
        }
    }

    /// The claim to decide on: the cache, unless it still shows a version
    /// older than our own last write, in which case what that write returned.
    fn current(&mut self) -> Option<Arc<GPUClaim>> {
        let cached = self.env.world.claim(&self.key);
        let Some(own) = &self.own else { return cached };
        match &cached {
            Some(c) if rv_number(&c.metadata) < own.fresh_from => own.claim.clone(),
            _ => {
                self.own = None;
                cached
            }
        }
    }

    fn reconcile(&mut self, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        if self.busy {
            self.dirty = true;
            return;
        }
        self.dirty = false;
        let Some(claim) = self.current() else {
            // Our write says the claim is gone; we end once the cache agrees,
            // so that no new actor decides on the stale cached copy.
            if self.env.world.claims.contains_key(&self.key) {
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
        claim_trace!(self, phase = claim.phase().as_str(), rv = ?claim.metadata.resource_version, ?step, "decided");
        if !matches!(step, Step::Write(..)) {
            self.pending_since = None;
        }
        match step {
            Step::Idle => self.set_grace_timer(None, ctx),
            Step::WaitUntil(_, at) => self.set_grace_timer(Some(at), ctx),
            Step::Write(rule, intent) => self.write(claim, rule, intent, ctx),
            Step::ReadLive(used) => self.read_live(claim, used, ctx),
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
                act.reconcile(ctx);
            });
            self.grace_timer = Some((at, h));
        }
    }

    /// The record of this claim that a release deletes: cached, of this
    /// claim's UID, and not one we deleted already.
    fn record_uid(&self, claim: &GPUClaim) -> Option<String> {
        let r = self.env.world.record(&self.key)?;
        let uid = r.metadata.uid.clone()?;
        let ours = Some(&r.spec.claim_uid) == claim.metadata.uid.as_ref();
        (ours && self.record_deleted.as_ref() != Some(&uid)).then_some(uid)
    }

    fn write(
        &mut self,
        claim: Arc<GPUClaim>,
        rule: RuleId,
        intent: ClaimIntent,
        ctx: &mut Context<Self>,
    ) {
        let name = intent.name();
        let record = self.record_uid(&claim);
        tracing::info!(claim = %self.key, rule = %rule, intent = name, "writing");
        if let Some(since) = self.pending_since.take() {
            let took = self.env.clock.now().saturating_duration_since(since);
            self.env.telemetry.change_to_write(took, rule);
        }
        self.writing = Some(claim.clone());
        let fut = exec::execute(self.env.clone(), claim, rule, intent, record);
        self.run(rule, name, fut, ctx);
    }

    fn read_live(&mut self, claim: Arc<GPUClaim>, used: Used, ctx: &mut Context<Self>) {
        let record = self.record_uid(&claim);
        self.writing = Some(claim.clone());
        let env = self.env.clone();
        let (rule, fut): (RuleId, futures::future::BoxFuture<'static, Done>) = match used {
            Used::ReadPods { names, .. } => (
                RuleId::L9,
                Box::pin(exec::release_unless_pods_left(env, claim, names, record)),
            ),
            Used::ReadVmi { name, .. } => (
                RuleId::L10,
                Box::pin(exec::release_unless_vmi_holds(env, claim, name, record)),
            ),
            Used::Yes | Used::No => return,
        };
        claim_trace!(self, rule = %rule, "reading live");
        self.run(rule, "read-live", fut, ctx);
    }

    /// Runs one intent's I/O; the actor takes no other decision until it ends.
    fn run(
        &mut self,
        rule: RuleId,
        name: &'static str,
        fut: impl Future<Output = Done> + 'static,
        ctx: &mut Context<Self>,
    ) {
        self.busy = true;
        self.env.activity.begin_io();
        ctx.spawn(fut.into_actor(self).map(move |done, act, ctx| {
            act.env.activity.end_io();
            act.busy = false;
            act.finish(rule, name, done, ctx);
        }));
    }

    fn finish(&mut self, rule: RuleId, name: &'static str, done: Done, ctx: &mut Context<Self>) {
        if let Some(uid) = done.record_deleted {
            self.record_deleted = Some(uid);
        }
        let before = self.writing.take();
        let (result, again) = match done.outcome {
            Outcome::Claim { claim, fresh_from } => {
                if let Some(b) = &before {
                    let n = super::notes::transition(&self.key, rule, name, b, claim.as_deref());
                    self.publish(n);
                }
                if rule == RuleId::Records {
                    self.publish_record_note(claim.as_deref());
                }
                self.own = Some(Own { claim, fresh_from });
                ("ok".to_string(), true)
            }
            Outcome::Released { claim, fresh_from } => {
                if let Some(b) = &before {
                    let n =
                        super::notes::transition(&self.key, rule, "release", b, claim.as_deref());
                    self.publish(n);
                }
                self.own = Some(Own { claim, fresh_from });
                self.tell_released();
                ("released".to_string(), true)
            }
            Outcome::VmiDeleted {
                uid,
                resource_version,
            } => {
                if let Some(b) = &before {
                    let n = super::notes::transition(&self.key, rule, name, b, None);
                    self.publish(n);
                }
                self.mem.issued = Some((uid, resource_version));
                ("ok".to_string(), true)
            }
            Outcome::Reread(Ok(live)) => {
                let fresh_from = live.as_ref().map_or(u64::MAX, |c| rv_number(&c.metadata));
                self.own = Some(Own {
                    claim: live,
                    fresh_from,
                });
                tracing::debug!(claim = %self.key, rule = %rule, "conflict: decided again on the live claim");
                ("conflict".to_string(), true)
            }
            Outcome::Reread(Err(e)) => (
                self.retry_later(rule, format!("conflict, then read failed: {e}"), ctx),
                false,
            ),
            Outcome::Used { poll } => {
                if poll {
                    self.retry_timer = Some(ctx.run_later(L10_POLL, |act, ctx| act.reconcile(ctx)));
                }
                ("in use".to_string(), self.dirty)
            }
            Outcome::Failed(e) => {
                if e.starts_with("invalid") {
                    let uid = before.as_ref().and_then(|b| b.metadata.uid.clone());
                    let n = super::notes::refusal(&self.key, uid, rule, name, &e);
                    self.publish(Some(n));
                }
                (self.retry_later(rule, e, ctx), false)
            }
        };
        if result != "ok" && result != "released" || name == "read-live" {
            claim_trace!(self, rule = %rule, intent = name, result = %result, "done");
        } else {
            self.backoff.reset();
        }
        self.log.push(Decision {
            at_ms: millis_since_start(&self.env),
            rule: rule.as_str(),
            intent: name,
            result,
        });
        if again {
            self.reconcile(ctx);
        }
    }

    fn retry_later(&mut self, rule: RuleId, error: String, ctx: &mut Context<Self>) -> String {
        let wait = self.backoff.next_wait();
        tracing::warn!(claim = %self.key, rule = %rule, %error, retry_in = %humantime::format_duration(wait), "write failed");
        if let Some(h) = self.retry_timer.take() {
            ctx.cancel_future(h);
        }
        self.retry_timer = Some(ctx.run_later(wait, |act, ctx| {
            act.retry_timer = None;
            act.reconcile(ctx);
        }));
        format!("error: {error}")
    }

    /// Bad input gets a clear answer: a claim of a class that does not exist
    /// is said once; placement (G5) marks it Waiting with ClassMissing.
    fn report_missing_class(&mut self, claim: &GPUClaim) {
        let class = &claim.spec.class_name;
        if self.env.world.classes.contains_key(class) {
            self.reported_class = None;
        } else if self.reported_class.as_ref() != Some(class) {
            tracing::warn!(claim = %self.key, class = %class, "the claim's GPUClass does not exist");
            self.reported_class = Some(class.clone());
        }
    }

    /// The Event that goes with a RecordMissing mark set or cleared.
    fn publish_record_note(&self, claim: Option<&GPUClaim>) {
        let Some(c) = claim else { return };
        let missing =
            crate::api::condition_is_true(c.conditions(), crate::api::CONDITION_RECORD_MISSING);
        let (ns, name) = split_key(&self.key);
        let note = Note {
            regarding: ObjRef::new(Kind::Claim, Some(ns), name),
            uid: c.metadata.uid.clone(),
            warning: missing,
            reason: if missing {
                "RecordMissing"
            } else {
                "RecordFound"
            }
            .into(),
            message: if missing {
                format!(
                    "holds GPUs on {} without a GPUAllocation record; it is not placed elsewhere",
                    c.node_name().unwrap_or_default()
                )
            } else {
                "its GPUAllocation record is there again".into()
            },
            rule: RuleId::Records,
        };
        tracing::warn!(claim = %self.key, rule = "records", missing, "{}", note.message);
        super::notes::publish(&self.env, note);
    }

    /// Publishes an Event, best effort, without holding the actor up.
    fn publish(&self, note: Option<Note>) {
        if let Some(note) = note {
            super::notes::publish(&self.env, note);
        }
    }

    fn tell_released(&self) {
        let Some(claim) = self.env.world.claim(&self.key) else {
            return;
        };
        self.supervisor.do_send(ClaimReleased {
            class: claim.spec.class_name.clone(),
            key: self.key.clone(),
            uid: claim.metadata.uid.clone().unwrap_or_default(),
        });
    }

    /// The claim is gone and nothing is pending: the actor ends.
    fn stop(&mut self, ctx: &mut Context<Self>) {
        claim_trace!(self, "claim gone; actor stops");
        self.supervisor.do_send(ActorStopped::Claim {
            key: self.key.clone(),
            generation: self.generation,
        });
        ctx.stop();
    }
}

fn millis_since_start(env: &Env) -> u64 {
    env.clock.now().duration_since(env.started).as_millis() as u64
}

impl Actor for ClaimActor {
    type Context = Context<Self>;
}

impl Handler<Poke> for ClaimActor {
    type Result = ();
    fn handle(&mut self, poke: Poke, ctx: &mut Context<Self>) {
        let oldest = self.pending_since.map_or(poke.since, |p| p.min(poke.since));
        self.pending_since = Some(oldest);
        self.reconcile(ctx);
    }
}

impl Handler<GetTrace> for ClaimActor {
    type Result = MessageResult<GetTrace>;
    fn handle(&mut self, _: GetTrace, _: &mut Context<Self>) -> Self::Result {
        let claim = self.env.world.claim(&self.key);
        let now = self.env.clock.now();
        let cfg = self.env.world.config();
        let grace_left_s = self.mem.grace.pending().map(|(_, since)| {
            (*since + cfg.attachment_grace)
                .saturating_duration_since(now)
                .as_secs_f64()
        });
        MessageResult(ClaimTrace {
            claim: self.key.clone(),
            phase: claim.map(|c| c.phase()).map(ClaimPhase::as_str),
            busy: self.busy,
            grace_left_s,
            decisions: self.log.to_vec(),
        })
    }
}
