//! L8, D4: a named claim's backing claim deleted on release, before its
//! record: while the record stands, the devices are the claim's, and the
//! ResourceClaim that holds them must not outlive it by a crash.

use super::super::Env;
use super::super::pacer::{IoError, ObjectWrite, Outcome, write_object};
use crate::api::{GPUClaim, Kind, Obj, ObjRef};
use crate::ports::Preconditions;
use crate::rules::{RuleId, owned_by};

/// Whether `c` may have a backing claim: a named claim (not a template
/// claim) whose class allocates DRA devices, or whose class is gone (it
/// cannot be told, so it is looked for).
fn may_have_backing(env: &Env, c: &GPUClaim) -> bool {
    !c.is_template()
        && env
            .world
            .class(&c.spec.class_name)
            .is_none_or(|k| k.spec.device_class_name.is_some())
}

/// L8, D4: deletes the ResourceClaim of the claim's name that the claim
/// owns, if there is one: the cache's, else a live read's (placement may
/// just have made it, the watch behind). Gone already, or of another
/// owner, is not this claim's to delete.
pub(super) async fn delete_backing_claim(
    env: &Env,
    c: &GPUClaim,
    rule: RuleId,
) -> Result<(), IoError> {
    if !may_have_backing(env, c) {
        return Ok(());
    }
    let (ns, name) = (
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.name.as_deref().unwrap_or_default(),
    );
    let what = ObjRef::new(Kind::ResourceClaim, Some(ns), name);
    let cached = env
        .world
        .resource_claim(&crate::world::key(ns, name))
        .filter(|rc| owned_by(rc, c))
        .and_then(|rc| rc.metadata.uid.clone());
    let uid = match cached {
        Some(uid) => uid,
        None => match env.reader.get(what.clone()).await {
            Ok(Some(Obj::ResourceClaim(rc))) if owned_by(&rc, c) => {
                rc.metadata.uid.unwrap_or_default()
            }
            Ok(_) => return Ok(()),
            Err(source) => return Err(IoError::read(what, source)),
        },
    };
    tracing::info!(
        claim = %crate::world::key(ns, name),
        rule = %rule,
        resource_claim = %name,
        intent = "delete-backing-claim",
        "writing"
    );
    let pre = Preconditions {
        uid: Some(uid),
        resource_version: None,
    };
    // Deleted, gone already, or another of that name that is not this
    // claim's: this claim's is gone either way. Another that is this
    // claim's (made again by a placement the cache had not shown) is
    // released again, as read then. One that a finalizer keeps (the
    // scheduler's, had it allocated it) goes once unreserved.
    match write_object::<Obj>(env, what.clone(), 0, ObjectWrite::Delete(pre), rule).await? {
        Outcome::Conflict(o)
            if matches!(&*o, Obj::ResourceClaim(rc)
                if owned_by(rc, c) && rc.metadata.deletion_timestamp.is_none()) =>
        {
            Err(IoError::Newer { what })
        }
        _ => Ok(()),
    }
}
