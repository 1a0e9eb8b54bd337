//! The one write path of the actors: an object written, and what came of
//! it as an `Outcome` (written, gone, or a newer object read live after a
//! 409: never overwritten) or an `IoError` (invalid, refused, no answer:
//! retried later). Claims, classes and placement's writes all pass here,
//! so "gone" and "conflict" mean one thing everywhere.

use super::{IoError, Outcome, WithMeta};
use crate::api::{GPUClaim, GPUClass, GPUQuota, Kind, Obj, ObjRef, is_deleting, rv_number};
use crate::controller::Env;
use crate::ports::{Deleted, Preconditions, WriteError, WriteOp};
use crate::rules::RuleId;
use actix::prelude::*;
use std::sync::Arc;

/// A write of one object.
pub enum ObjectWrite<T> {
    Create(T),
    Update(T),
    UpdateStatus(T),
    Delete(Preconditions),
    /// A patch of an object the controller does not own (a node's
    /// annotations and finalizer), or of fields it alone sets (a backing
    /// claim's finalizer).
    Patch(crate::ports::PatchBody),
}

impl<T> ObjectWrite<T> {
    /// Which write this is, in the ports' vocabulary.
    pub fn op(&self) -> WriteOp {
        match self {
            ObjectWrite::Create(_) => WriteOp::Create,
            ObjectWrite::Update(_) => WriteOp::Update,
            ObjectWrite::UpdateStatus(_) => WriteOp::UpdateStatus,
            ObjectWrite::Delete(_) => WriteOp::Delete,
            ObjectWrite::Patch(_) => WriteOp::Patch,
        }
    }
}

/// An object an actor writes: its claim, its class, or any object
/// (placement's), typed through `Obj`.
pub trait Writable: WithMeta + Sized + 'static {
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

/// `Writable` for a kind whose `Obj` variant and `Kind` share its name.
macro_rules! own_kind {
    ($($t:ty => $kind:ident),* $(,)?) => {$(
        impl Writable for $t {
            fn into_obj(self) -> Obj {
                Obj::$kind(self)
            }
            fn from_obj(o: Obj) -> Result<Self, IoError> {
                match o {
                    Obj::$kind(x) => Ok(x),
                    other => Err(unexpected(Kind::$kind, &other)),
                }
            }
            fn obj_ref(&self) -> ObjRef {
                let m = &self.metadata;
                let name = m.name.as_deref().unwrap_or_default();
                ObjRef::new(Kind::$kind, m.namespace.as_deref(), name)
            }
        }
    )*};
}

own_kind!(GPUClaim => Claim, GPUClass => Class, GPUQuota => Quota);

impl WithMeta for Obj {
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        Obj::meta(self)
    }
}

impl Writable for Obj {
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
pub async fn write_object<T: Writable>(
    env: &Env,
    what: ObjRef,
    known: u64,
    write: ObjectWrite<T>,
    rule: RuleId,
) -> Result<Outcome<T>, IoError> {
    let w = &env.writer;
    tracing::debug!(object = %what, op = write.op().as_str(), rule = %rule, "write");
    let answer = match write {
        ObjectWrite::Create(new) => w.create(new.into_obj(), rule).await.map(Some),
        ObjectWrite::Update(new) => w.replace(new.into_obj(), rule).await.map(Some),
        ObjectWrite::UpdateStatus(new) => w.replace_status(new.into_obj(), rule).await.map(Some),
        ObjectWrite::Patch(p) => w.patch(what.clone(), p, rule).await.map(Some),
        ObjectWrite::Delete(pre) => match w.delete(what.clone(), pre, rule).await {
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

/// I/O an actor runs beside its writes, outside their limit (placement's
/// live reads after a relist): off the actors' thread and counted in the
/// activity, as the pacer's own.
pub fn track_io<A, O, F, D>(env: &Arc<Env>, act: &A, ctx: &mut Context<A>, fut: F, done: D)
where
    A: Actor<Context = Context<A>>,
    O: Send + 'static,
    F: Future<Output = O> + Send + 'static,
    D: FnOnce(&mut A, O, &mut Context<A>) + 'static,
{
    env.activity.begin_io();
    let env = env.clone();
    ctx.spawn(
        super::offloaded(fut)
            .into_actor(act)
            .map(move |out, act, ctx| {
                env.activity.end_io();
                done(act, out, ctx);
            }),
    );
}
