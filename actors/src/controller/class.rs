//! One actor per GPUClass: its finalizer (L1), its release (L11) and its
//! status (capacity, allocated). Writing one step at a time, freshness,
//! the re-read after a 409, retries and the log are the scaffold's.

use super::Env;
use super::events;
use super::journal::Intent;
use super::messages::ToSupervisor;
use super::scaffold::{
    self, Freshness, IoError, Outcome, Own, OwnWrite, Scaffold, Scaffolded, write_own,
};
use crate::api::{CLASS_FINALIZER, GPUClass, Kind, ObjRef, rv_number};
use crate::ports::Event;
use crate::rules::{ClassIntent, ClassStep, RuleId, decide_class};
use actix::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

pub struct ClassActor {
    name: String,
    generation: u64,
    env: Arc<Env>,
    to: ToSupervisor,
    scaffold: Scaffold,
    fresh: Freshness<GPUClass>,
    /// Claims released this round that the cache may still show holding: key -> uid.
    released: HashMap<String, String>,
}

/// A claim actor released a claim of this class (L8), which the cache may not show yet.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Released {
    pub key: String,
    pub uid: String,
}

fn intent_of(i: &ClassIntent) -> Intent {
    match i {
        ClassIntent::AddFinalizer => Intent::AddFinalizer,
        ClassIntent::RemoveFinalizer => Intent::RemoveFinalizer,
        ClassIntent::WriteStatus(_) => Intent::WriteStatus,
    }
}

impl ClassActor {
    pub fn new(name: String, generation: u64, env: Arc<Env>, to: ToSupervisor) -> Self {
        Self {
            name,
            generation,
            env: env.clone(),
            to,
            scaffold: Scaffold::new(env.clone()),
            fresh: Freshness::default(),
            released: HashMap::new(),
        }
    }

    /// L11's "released in the same round": released claims the cache still counts.
    fn released_unseen(&mut self) -> u64 {
        let w = &self.env.world;
        self.released.retain(|k, uid| {
            w.claim(k).is_some_and(|c| {
                c.metadata.uid.as_ref() == Some(uid)
                    && c.phase().counts_against_budget()
                    && !crate::rules::released(&c)
            })
        });
        self.released.len() as u64
    }

    fn write(
        &mut self,
        class: Arc<GPUClass>,
        rule: RuleId,
        intent: ClassIntent,
        ctx: &mut Context<Self>,
    ) {
        let kind = intent_of(&intent);
        tracing::info!(class = %self.name, rule = %rule, intent = %kind, "writing");
        self.scaffold.writing(rule);
        let env = self.env.clone();
        let uid = class.metadata.uid.clone();
        let fut = async move { write_class(&env, &class, rule, intent).await };
        scaffold::run_io(self, ctx, fut, move |act, result, ctx| {
            act.finish(rule, kind, uid, result, ctx)
        });
    }

    fn finish(
        &mut self,
        rule: RuleId,
        intent: Intent,
        uid: Option<String>,
        result: Result<Outcome<GPUClass>, IoError>,
        ctx: &mut Context<Self>,
    ) {
        let what = ObjRef::new(Kind::Class, None, &self.name);
        scaffold::finish_own(self, ctx, (rule, intent), &what, result, |act, outcome| {
            act.fresh.settle(outcome);
            if !matches!(outcome, Outcome::Conflict(_)) {
                act.tell(rule, intent, uid);
            }
        });
    }

    /// The Event for a finalizer added or removed.
    fn tell(&self, rule: RuleId, intent: Intent, uid: Option<String>) {
        let (reason, message) = match intent {
            Intent::AddFinalizer => ("FinalizerAdded", "protected by the class finalizer"),
            Intent::RemoveFinalizer => (
                "Released",
                "no claim holds GPUs of it any more; finalizer removed",
            ),
            _ => return,
        };
        events::publish(
            &self.env,
            Event {
                regarding: ObjRef::new(Kind::Class, None, &self.name),
                uid,
                warning: false,
                reason: reason.into(),
                message: format!("{rule}: {message}"),
                rule,
                related: None,
            },
        );
    }
}

/// One class write, through the scaffold's one write path.
async fn write_class(
    env: &Env,
    class: &GPUClass,
    rule: RuleId,
    intent: ClassIntent,
) -> Result<Outcome<GPUClass>, IoError> {
    let mut new = GPUClass::clone(class);
    let write = match intent {
        ClassIntent::AddFinalizer => {
            new.metadata
                .finalizers
                .get_or_insert_default()
                .push(CLASS_FINALIZER.to_string());
            OwnWrite::Update(new)
        }
        ClassIntent::RemoveFinalizer => {
            if let Some(f) = new.metadata.finalizers.as_mut() {
                f.retain(|f| f != CLASS_FINALIZER);
            }
            OwnWrite::Update(new)
        }
        ClassIntent::WriteStatus(status) => {
            new.status = Some(status);
            OwnWrite::UpdateStatus(new)
        }
    };
    let known = rv_number(&class.metadata);
    write_own(env, class.obj_ref(), known, write, rule).await
}

impl Scaffolded for ClassActor {
    fn decide(&mut self, ctx: &mut Context<Self>) {
        let cached = self.env.world.class(&self.name);
        let Some(class) = self.fresh.current(cached) else {
            // Our write says the class is gone; we end once the cache
            // agrees, so that no new actor decides on the stale cached copy
            // (and writes its release again).
            if self.env.world.has_class(&self.name) {
                return;
            }
            self.to.ended(Kind::Class, &self.name, self.generation);
            return ctx.stop();
        };
        let capacity = self.env.world.class_capacity(&self.name);
        let released = self.released_unseen();
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(self.env.clock.wall());
        match decide_class(&class, &self.env.world, capacity, released, now) {
            ClassStep::Write(rule, intent) => self.write(class, rule, intent, ctx),
            ClassStep::Idle => self.scaffold.idle(),
        }
    }
}

scaffold::scaffolded_actor!(ClassActor);

impl Handler<Released> for ClassActor {
    type Result = ();
    fn handle(&mut self, msg: Released, ctx: &mut Context<Self>) {
        self.released.insert(msg.key, msg.uid);
        scaffold::reconcile(self, ctx);
    }
}
