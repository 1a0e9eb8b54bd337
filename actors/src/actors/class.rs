//! One actor per GPUClass: its finalizer (L1), its release (L11) and its
//! status (capacity, allocated).

use super::supervisor::{ActorStopped, Supervisor};
use super::{Backoff, Decision, DecisionLog, Env};
use crate::api::{CLASS_FINALIZER, GPUClass, rv_number};
use crate::ports::{Kind, Obj, ObjRef, Why, WriteError};
use crate::rules::{ClassIntent, ClassStep, RuleId, decide_class};
use crate::world::indexes_released;
use actix::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

pub struct ClassActor {
    name: String,
    generation: u64,
    env: Arc<Env>,
    supervisor: Addr<Supervisor>,
    busy: bool,
    dirty: bool,
    own: Option<(Option<Arc<GPUClass>>, u64)>,
    /// Claims released this round that the cache may still show holding: key -> uid.
    released: HashMap<String, String>,
    backoff: Backoff,
    log: DecisionLog,
    /// The oldest change not yet decided on: its write reports the latency.
    pending_since: Option<tokio::time::Instant>,
}

/// Something the class decides on changed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PokeClass {
    /// When the change behind this poke entered the supervisor.
    pub since: tokio::time::Instant,
}

/// A claim actor released a claim of this class (L8), which the cache may not show yet.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Released {
    pub key: String,
    pub uid: String,
}

impl ClassActor {
    pub fn new(name: String, generation: u64, env: Arc<Env>, supervisor: Addr<Supervisor>) -> Self {
        Self {
            name,
            generation,
            env,
            supervisor,
            busy: false,
            dirty: false,
            own: None,
            released: HashMap::new(),
            backoff: Backoff::default(),
            log: DecisionLog::default(),
            pending_since: None,
        }
    }

    fn current(&mut self) -> Option<Arc<GPUClass>> {
        let cached = self.env.world.class(&self.name);
        let Some((own, fresh_from)) = &self.own else {
            return cached;
        };
        match &cached {
            Some(c) if rv_number(&c.metadata) < *fresh_from => own.clone(),
            _ => {
                self.own = None;
                cached
            }
        }
    }

    /// L11's "released in the same round": released claims the cache still counts.
    fn released_unseen(&mut self) -> u64 {
        let w = &self.env.world;
        self.released.retain(|k, uid| {
            w.claim(k).is_some_and(|c| {
                c.metadata.uid.as_ref() == Some(uid)
                    && c.phase().counts_against_budget()
                    && !indexes_released(&c)
            })
        });
        self.released.len() as u64
    }

    /// The class's capacity, as the world keeps it up to date.
    fn capacity(&self, class: &GPUClass) -> u64 {
        self.env
            .world
            .class_capacity(class.metadata.name.as_deref().unwrap_or_default())
    }

    fn reconcile(&mut self, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        if self.busy {
            self.dirty = true;
            return;
        }
        self.dirty = false;
        let Some(class) = self.current() else {
            // Our write says the class is gone; we end once the cache
            // agrees, so that no new actor decides on the stale cached copy
            // (and writes its release again).
            if self.env.world.classes.contains_key(&self.name) {
                return;
            }
            self.supervisor.do_send(ActorStopped::Class {
                name: self.name.clone(),
                generation: self.generation,
            });
            return ctx.stop();
        };
        let capacity = self.capacity(&class);
        let released = self.released_unseen();
        let ClassStep::Write(rule, intent) =
            decide_class(&class, &self.env.world, capacity, released)
        else {
            self.pending_since = None;
            return;
        };
        self.write(class, rule, intent, ctx);
    }

    fn write(
        &mut self,
        class: Arc<GPUClass>,
        rule: RuleId,
        intent: ClassIntent,
        ctx: &mut Context<Self>,
    ) {
        let name = match &intent {
            ClassIntent::AddFinalizer => "add-finalizer",
            ClassIntent::RemoveFinalizer => "remove-finalizer",
            ClassIntent::WriteStatus(_) => "write-status",
        };
        tracing::info!(class = %self.name, rule = %rule, intent = name, "writing");
        if let Some(since) = self.pending_since.take() {
            let took = self.env.clock.now().saturating_duration_since(since);
            self.env.telemetry.change_to_write(took, rule);
        }
        let env = self.env.clone();
        let mut new = GPUClass::clone(&class);
        let fut = async move {
            let why = Why(rule);
            match intent {
                ClassIntent::AddFinalizer => {
                    new.metadata
                        .finalizers
                        .get_or_insert_default()
                        .push(CLASS_FINALIZER.to_string());
                    env.writer.replace(Obj::Class(new), why).await
                }
                ClassIntent::RemoveFinalizer => {
                    if let Some(f) = new.metadata.finalizers.as_mut() {
                        f.retain(|f| f != CLASS_FINALIZER);
                    }
                    env.writer.replace(Obj::Class(new), why).await
                }
                ClassIntent::WriteStatus(status) => {
                    new.status = Some(status);
                    env.writer.replace_status(Obj::Class(new), why).await
                }
            }
        };
        self.busy = true;
        self.env.activity.begin_io();
        ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| {
            act.env.activity.end_io();
            act.busy = false;
            act.finish(rule, name, res, ctx);
        }));
    }

    fn finish(
        &mut self,
        rule: RuleId,
        name: &'static str,
        res: Result<Obj, WriteError>,
        ctx: &mut Context<Self>,
    ) {
        let result = match res {
            Ok(Obj::Class(c)) => {
                let rv = rv_number(&c.metadata);
                let gone = crate::api::is_deleting(&c.metadata)
                    && c.metadata.finalizers.as_ref().is_none_or(|f| f.is_empty());
                let told = match name {
                    "add-finalizer" => Some(("FinalizerAdded", "protected by the class finalizer")),
                    "remove-finalizer" => Some((
                        "Released",
                        "no claim holds GPUs of it any more; finalizer removed",
                    )),
                    _ => None,
                };
                if let Some((reason, message)) = told {
                    let note = crate::ports::Note {
                        regarding: ObjRef::new(Kind::Class, None, &self.name),
                        uid: c.metadata.uid.clone(),
                        warning: false,
                        reason: reason.into(),
                        message: format!("{rule}: {message}"),
                        rule,
                    };
                    super::notes::publish(&self.env, note);
                }
                self.own = Some(((!gone).then(|| Arc::new(c)), rv));
                self.backoff.reset();
                "ok".to_string()
            }
            Ok(_) => "unexpected answer".to_string(),
            Err(WriteError::NotFound) => {
                self.own = Some((None, u64::MAX));
                "not found".to_string()
            }
            Err(WriteError::Conflict(_)) => {
                // Decide again on a live read, never overwrite a newer class.
                self.busy = true;
                self.env.activity.begin_io();
                let env = self.env.clone();
                let what = ObjRef::new(Kind::Class, None, &self.name);
                ctx.spawn(
                    async move { env.reader.get(what).await }
                        .into_actor(self)
                        .map(|live, act, ctx| {
                            act.env.activity.end_io();
                            act.busy = false;
                            match live {
                                Ok(Some(Obj::Class(c))) => {
                                    act.own =
                                        Some((Some(Arc::new(c.clone())), rv_number(&c.metadata)))
                                }
                                Ok(_) => act.own = Some((None, u64::MAX)),
                                Err(e) => {
                                    return act
                                        .retry(format!("conflict, then read failed: {e}"), ctx);
                                }
                            }
                            act.reconcile(ctx);
                        }),
                );
                self.log.push(self.decision(rule, name, "conflict".into()));
                return;
            }
            Err(e) => {
                let result = format!("error: {e}");
                self.log.push(self.decision(rule, name, result));
                return self.retry(e.to_string(), ctx);
            }
        };
        self.log.push(self.decision(rule, name, result));
        self.reconcile(ctx);
    }

    fn decision(&self, rule: RuleId, intent: &'static str, result: String) -> Decision {
        let at_ms = self
            .env
            .clock
            .now()
            .duration_since(self.env.started)
            .as_millis() as u64;
        Decision {
            at_ms,
            rule: rule.as_str(),
            intent,
            result,
        }
    }

    fn retry(&mut self, error: String, ctx: &mut Context<Self>) {
        let wait = self.backoff.next_wait();
        tracing::warn!(class = %self.name, %error, retry_in = %humantime::format_duration(wait), "class write failed");
        ctx.run_later(wait, |act, ctx| act.reconcile(ctx));
    }
}

impl Actor for ClassActor {
    type Context = Context<Self>;
}

impl Handler<PokeClass> for ClassActor {
    type Result = ();
    fn handle(&mut self, msg: PokeClass, ctx: &mut Context<Self>) {
        let oldest = self.pending_since.map_or(msg.since, |p| p.min(msg.since));
        self.pending_since = Some(oldest);
        self.reconcile(ctx);
    }
}

impl Handler<Released> for ClassActor {
    type Result = ();
    fn handle(&mut self, msg: Released, ctx: &mut Context<Self>) {
        self.released.insert(msg.key, msg.uid);
        self.reconcile(ctx);
    }
}
