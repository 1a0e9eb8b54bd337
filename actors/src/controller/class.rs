//! The role of a GPUClass's actor: its finalizer (L1), its release (L11)
//! and its status (capacity, allocated). What every object's actor does
//! alike (freshness, one step at a time, the end) is `ObjectActor`'s.

use super::events;
use super::journal::Intent;
use super::object::{ObjectActor, Role};
use super::pacer::{self, IoError, ObjectWrite, Outcome, Writable, write_object};
use crate::api::{CLASS_FINALIZER, GPUClass, Kind, ObjRef, rv_number};
use crate::ports::Event;
use crate::rules::{ClassIntent, RuleId, Step, decide_class};
use crate::world::World;
use actix::prelude::*;
use futures::FutureExt;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::Arc;

/// The actor of one GPUClass.
pub type ClassActor = ObjectActor<ClassRole>;

/// What a class's actor remembers between decisions.
pub struct ClassRole {
    /// Claims released this round that the cache may still show holding: key -> uid.
    released: HashMap<String, String>,
    /// The uid of the class the write under way was decided on: its Event's.
    writing: Option<String>,
}

/// A claim actor released a claim of this class (L8), which the cache may not show yet.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Released {
    pub key: String,
    pub uid: String,
}

impl Handler<Released> for ClassActor {
    type Result = ();
    fn handle(&mut self, msg: Released, ctx: &mut Context<Self>) {
        self.role.released.insert(msg.key, msg.uid);
        pacer::reconcile(self, ctx);
    }
}

impl ClassRole {
    /// L11's "released in the same round": released claims the cache still counts.
    fn released_unseen(&mut self, w: &World) -> u64 {
        self.released.retain(|k, uid| {
            w.claim(k).is_some_and(|c| {
                c.metadata.uid.as_ref() == Some(uid)
                    && c.phase().counts_against_budget()
                    && !crate::rules::released(&c)
            })
        });
        self.released.len() as u64
    }
}

impl Role for ClassRole {
    type Object = GPUClass;
    type Intent = ClassIntent;
    type Done = Result<Outcome<GPUClass>, IoError>;
    const KIND: Kind = Kind::Class;

    fn new() -> Self {
        Self {
            released: HashMap::new(),
            writing: None,
        }
    }

    fn cached(w: &World, key: &str) -> Option<Arc<GPUClass>> {
        w.class(key)
    }

    fn decide(act: &mut ClassActor, class: &Arc<GPUClass>) -> Step<ClassIntent> {
        let w = &act.env.world;
        let capacity = w.class_capacity(&act.key);
        let released = act.role.released_unseen(w);
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(act.env.clock.wall());
        decide_class(class, w, capacity, released, now)
    }

    fn journal(intent: &ClassIntent) -> Intent {
        match intent {
            ClassIntent::AddFinalizer => Intent::AddFinalizer,
            ClassIntent::RemoveFinalizer => Intent::RemoveFinalizer,
            ClassIntent::WriteStatus(_) => Intent::WriteStatus,
        }
    }

    fn io(
        act: &mut ClassActor,
        class: Arc<GPUClass>,
        rule: RuleId,
        intent: ClassIntent,
    ) -> BoxFuture<'static, Self::Done> {
        act.role.writing = class.metadata.uid.clone();
        let env = act.env.clone();
        let known = rv_number(&class.metadata);
        let write = write_of(&class, intent);
        async move { write_object(&env, class.obj_ref(), known, write, rule).await }.boxed()
    }

    fn finished(
        act: &mut ClassActor,
        rule: RuleId,
        intent: Intent,
        done: Self::Done,
        ctx: &mut Context<ClassActor>,
    ) {
        let what = ObjRef::new(Kind::Class, None, &act.key);
        let uid = act.role.writing.take();
        pacer::finish_write(act, ctx, (rule, intent), &what, done, |act, outcome| {
            act.fresh.settle(outcome);
            if !matches!(outcome, Outcome::Conflict(_)) {
                publish_finalizer_event(act, rule, intent, uid);
            }
        });
    }
}

/// The one write of each intent.
fn write_of(class: &GPUClass, intent: ClassIntent) -> ObjectWrite<GPUClass> {
    let mut new = GPUClass::clone(class);
    match intent {
        ClassIntent::AddFinalizer => {
            new.metadata
                .finalizers
                .get_or_insert_default()
                .push(CLASS_FINALIZER.to_string());
            ObjectWrite::Update(new)
        }
        ClassIntent::RemoveFinalizer => {
            if let Some(f) = new.metadata.finalizers.as_mut() {
                f.retain(|f| f != CLASS_FINALIZER);
            }
            ObjectWrite::Update(new)
        }
        ClassIntent::WriteStatus(status) => {
            new.status = Some(status);
            ObjectWrite::UpdateStatus(new)
        }
    }
}

/// The Event for a finalizer added or removed.
fn publish_finalizer_event(act: &ClassActor, rule: RuleId, intent: Intent, uid: Option<String>) {
    let (reason, message) = match intent {
        Intent::AddFinalizer => ("FinalizerAdded", "protected by the class finalizer"),
        Intent::RemoveFinalizer => (
            "Released",
            "no claim holds GPUs of it any more; finalizer removed",
        ),
        _ => return,
    };
    events::publish(
        &act.env,
        Event {
            regarding: ObjRef::new(Kind::Class, None, &act.key),
            uid,
            warning: false,
            reason: reason.into(),
            message: format!("{rule}: {message}"),
            rule,
            related: None,
        },
    );
}
