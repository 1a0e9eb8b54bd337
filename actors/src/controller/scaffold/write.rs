//! The one write path of the actors: an object written, and what came of
//! it as an `Outcome` (written, gone, or a newer object read live after a
//! 409: never overwritten) or an `IoError` (invalid, refused, no answer:
//! retried later). Claims, classes and placement's writes all pass here,
//! so "gone" and "conflict" mean one thing everywhere.

use super::{IoError, Meta, Outcome};
use crate::api::{GPUClaim, GPUClass, GPUQuota, Kind, Obj, ObjRef, is_deleting, rv_number};
use crate::controller::Env;
use crate::ports::{Deleted, Preconditions, WriteError};
use crate::rules::RuleId;
use actix::prelude::*;
use std::sync::Arc;

/// A write of one object.
pub enum OwnWrite<T> {
    Create(T),
    Replace(T),
    ReplaceStatus(T),
    Delete(Preconditions),
}

/// An object an actor writes: its claim, its class, or any object
/// (placement's), typed through `Obj`.
pub trait Own: Meta + Sized + 'static {
    fn into_obj(self) -> Obj;
    fn from_obj(o: Obj) -> Result<Self, IoError>;
    fn obj_ref(&self) -> ObjRef;
}

fn unexpected(asked: Kind, got: &Obj) -> IoError {
    IoError::Unexpected {
        asked,
        got: got.kind(),
    }
}

impl Own for GPUClaim {
    fn into_obj(self) -> Obj {
        Obj::Claim(self)
    }
    fn from_obj(o: Obj) -> Result<Self, IoError> {
        match o {
            Obj::Claim(c) => Ok(c),
            other => Err(unexpected(Kind::Claim, &other)),
        }
    }
    fn obj_ref(&self) -> ObjRef {
        ObjRef::new(
            Kind::Claim,
            self.metadata.namespace.as_deref(),
            self.metadata.name.as_deref().unwrap_or_default(),
        )
    }
}

impl Own for GPUClass {
    fn into_obj(self) -> Obj {
        Obj::Class(self)
    }
    fn from_obj(o: Obj) -> Result<Self, IoError> {
        match o {
            Obj::Class(c) => Ok(c),
            other => Err(unexpected(Kind::Class, &other)),
        }
    }
    fn obj_ref(&self) -> ObjRef {
        ObjRef::new(
            Kind::Class,
            None,
            self.metadata.name.as_deref().unwrap_or_default(),
        )
    }
}

impl Own for GPUQuota {
    fn into_obj(self) -> Obj {
        Obj::Quota(self)
    }
    fn from_obj(o: Obj) -> Result<Self, IoError> {
        match o {
            Obj::Quota(q) => Ok(q),
            other => Err(unexpected(Kind::Quota, &other)),
        }
    }
    fn obj_ref(&self) -> ObjRef {
        ObjRef::new(
            Kind::Quota,
            self.metadata.namespace.as_deref(),
            self.metadata.name.as_deref().unwrap_or_default(),
        )
    }
}

impl Meta for Obj {
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        Obj::meta(self)
    }
}

impl Own for Obj {
    fn into_obj(self) -> Obj {
        self
    }
    fn from_obj(o: Obj) -> Result<Self, IoError> {
        Ok(o)
    }
    fn obj_ref(&self) -> ObjRef {
        Obj::obj_ref(self)
    }
}

/// Removed by the write: deleting with no finalizer left.
fn removed(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    is_deleting(meta) && meta.finalizers.as_ref().is_none_or(|f| f.is_empty())
}

/// Writes `write` of the object the actor decided on (`what`, at the
/// version `known`), and says what came of it.
pub async fn write_own<T: Own>(
    env: &Env,
    what: ObjRef,
    known: u64,
    write: OwnWrite<T>,
    rule: RuleId,
) -> Result<Outcome<T>, IoError> {
    let w = &env.writer;
    let answer = match write {
        OwnWrite::Create(new) => w.create(new.into_obj(), rule).await.map(Some),
        OwnWrite::Replace(new) => w.replace(new.into_obj(), rule).await.map(Some),
        OwnWrite::ReplaceStatus(new) => w.replace_status(new.into_obj(), rule).await.map(Some),
        OwnWrite::Delete(pre) => match w.delete(what.clone(), pre, rule).await {
            Ok(Deleted::Gone) => Ok(None),
            Ok(Deleted::Deleting(o)) => Ok(Some(o)),
            Err(e) => Err(e),
        },
    };
    match answer {
        Ok(None) | Err(WriteError::NotFound) => Ok(Outcome::Gone { after: known }),
        Ok(Some(o)) => {
            let t = T::from_obj(o)?;
            let fresh_from = rv_number(t.meta());
            if removed(t.meta()) {
                return Ok(Outcome::Gone { after: fresh_from });
            }
            Ok(Outcome::Written {
                object: Arc::new(t),
                fresh_from,
            })
        }
        // A newer object (or, for a create, one already there): decided
        // on again as it is now, never overwritten.
        Err(WriteError::Conflict(_)) => match env.reader.get(what.clone()).await {
            Ok(Some(o)) => Ok(Outcome::Conflict(Arc::new(T::from_obj(o)?))),
            Ok(None) => Ok(Outcome::Gone { after: known }),
            Err(source) => Err(IoError::read(what, source)),
        },
        Err(e) => Err(e.into()),
    }
}

/// I/O an actor runs beside its one write at a time (placement's live
/// reads after a relist): counted in the activity, as the scaffold's own.
pub fn track_io<A, O, F, D>(env: &Arc<Env>, act: &A, ctx: &mut Context<A>, fut: F, done: D)
where
    A: Actor<Context = Context<A>>,
    O: 'static,
    F: Future<Output = O> + 'static,
    D: FnOnce(&mut A, O, &mut Context<A>) + 'static,
{
    env.activity.begin_io();
    let env = env.clone();
    ctx.spawn(fut.into_actor(act).map(move |out, act, ctx| {
        env.activity.end_io();
        done(act, out, ctx);
    }));
}
