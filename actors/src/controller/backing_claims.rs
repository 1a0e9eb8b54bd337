//! L8, D4: a named claim's backing claim deleted on release, before its
//! record: while the record stands, the devices are the claim's, and the
//! ResourceClaim that holds them must not outlive it by a crash. Also the
//! backing claim of a GPUClaim that is gone (placement's cleanup). The
//! writes both the claim actor and placement make, shared here rather
//! than one reaching into the other.

use super::Env;
use super::pacer::{IoError, ObjectWrite, Outcome, write_object};
use crate::api::{GPUClaim, Kind, Obj, ObjRef, has_finalizer, rv_number};
use crate::ports::Preconditions;
use crate::rules::{BACKING_FINALIZER, RuleId, controlled_by, owned_by, reserved};
use k8s_openapi::api::resource::v1::ResourceClaim;

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

/// What L8 found of the backing claim.
pub(crate) enum BackingClaim {
    /// Gone, or going with nothing of ours keeping it: the release goes on.
    Gone,
    /// Deleted, and a pod still holds it (its `reservedFor`): the devices
    /// are in use, so the record and the claim's finalizer stay until the
    /// resourceclaim controller lets the pod go (that change wakes us).
    Held,
}

/// Whose backing claim: the GPUClaim's key (for the logs) and its uid
/// (the owner the backing claim must name).
#[derive(Clone, Copy)]
pub(crate) struct Owner<'a> {
    pub claim: &'a str,
    pub uid: &'a str,
}

/// L8, D4: deletes the ResourceClaim of the claim's name that the claim
/// owns, if there is one (the cache's, else a live read's: placement may
/// just have made it, the watch behind), then takes our finalizer off it
/// once no pod holds it. Gone already, or of another owner, is not this
/// claim's to delete.
pub(crate) async fn delete_backing_claim(
    env: &Env,
    c: &GPUClaim,
    rule: RuleId,
) -> Result<BackingClaim, IoError> {
    if !may_have_backing(env, c) {
        return Ok(BackingClaim::Gone);
    }
    let k = key_of(c);
    let uid = c.metadata.uid.as_deref().unwrap_or_default();
    release(env, Owner { claim: &k, uid }, rule).await
}

/// The GPUClaim's `ns/name`, which its backing claim's is too.
fn key_of(c: &GPUClaim) -> String {
    crate::world::key(
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// D4, L8: the backing claim at `owner.claim` that `owner.uid` controls
/// (the cache's, else a live read's) deleted if it is not yet, and let go
/// once no pod holds it. Also for one whose GPUClaim is gone (its
/// finalizer taken off by hand, say), which nothing else would let go.
pub(crate) async fn release(
    env: &Env,
    owner: Owner<'_>,
    rule: RuleId,
) -> Result<BackingClaim, IoError> {
    let (ns, name) = crate::world::split_key(owner.claim);
    let what = ObjRef::new(Kind::ResourceClaim, Some(ns), name);
    let cached = env
        .world
        .resource_claim(owner.claim)
        .filter(|rc| controlled_by(rc, owner.uid));
    let rc = match cached {
        Some(rc) => ResourceClaim::clone(&rc),
        None => match env.reader.get(what.clone()).await {
            Ok(Some(Obj::ResourceClaim(rc))) if controlled_by(&rc, owner.uid) => rc,
            Ok(_) => return Ok(BackingClaim::Gone),
            Err(source) => return Err(IoError::read(what, source)),
        },
    };
    let rc = if rc.metadata.deletion_timestamp.is_some() {
        rc
    } else {
        match delete(env, owner, &what, &rc, rule).await? {
            Some(deleting) => deleting,
            None => return Ok(BackingClaim::Gone),
        }
    };
    if reserved(&rc) {
        return Ok(BackingClaim::Held);
    }
    let_go(env, owner, &what, rc, rule).await?;
    Ok(BackingClaim::Gone)
}

/// L8: the delete, preconditioned on the uid and the version read: the
/// claim as it is left (our finalizer keeps it), or None if it is gone.
/// The version too, so that a cache that has not yet shown an earlier
/// delete (ours, before a restart) meets a 409 and the claim as it is,
/// rather than deleting again to no effect.
async fn delete(
    env: &Env,
    owner: Owner<'_>,
    what: &ObjRef,
    rc: &ResourceClaim,
    rule: RuleId,
) -> Result<Option<ResourceClaim>, IoError> {
    tracing::info!(
        claim = %owner.claim,
        rule = %rule,
        resource_claim = %what.name,
        intent = "delete-backing-claim",
        "writing"
    );
    let pre = Preconditions {
        uid: rc.metadata.uid.clone(),
        resource_version: rc.metadata.resource_version.clone(),
    };
    // Deleted, gone already, or another of that name that is not this
    // claim's: this claim's is gone either way. This one changed since,
    // or another that is this claim's (made again by a placement the
    // cache had not shown): being deleted, it is let go as it is now;
    // else deleted again, as read then.
    match write_object::<Obj>(env, what.clone(), 0, ObjectWrite::Delete(pre), rule).await? {
        Outcome::Written { object, .. } => match &*object {
            Obj::ResourceClaim(rc) if rc.metadata.deletion_timestamp.is_some() => {
                Ok(Some(rc.clone()))
            }
            _ => Ok(None),
        },
        Outcome::Conflict(o) => match &*o {
            Obj::ResourceClaim(rc) if controlled_by(rc, owner.uid) => {
                if rc.metadata.deletion_timestamp.is_some() {
                    Ok(Some(rc.clone()))
                } else {
                    Err(IoError::Newer { what: what.clone() })
                }
            }
            _ => Ok(None),
        },
        Outcome::Gone { .. } => Ok(None),
    }
}

/// D4, L8: our finalizer off a backing claim being deleted that no pod
/// holds, on the version read (a 409 decides again). Another's finalizer
/// (the scheduler's, had it allocated the claim) is theirs to take off. A
/// merge patch of the finalizers alone, pinned to that version: a whole
/// object sent back would carry only the fields this client knows, and a
/// newer API server would take that as a change to the immutable spec.
async fn let_go(
    env: &Env,
    owner: Owner<'_>,
    what: &ObjRef,
    rc: ResourceClaim,
    rule: RuleId,
) -> Result<(), IoError> {
    if !has_finalizer(&rc.metadata, BACKING_FINALIZER) {
        return Ok(());
    }
    tracing::info!(
        claim = %owner.claim,
        rule = %rule,
        resource_claim = %what.name,
        intent = "remove-backing-claim-finalizer",
        "writing"
    );
    let known = rv_number(&rc.metadata);
    let rest: Vec<&String> = rc
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != BACKING_FINALIZER)
        .collect();
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": rc.metadata.resource_version,
        "finalizers": rest,
    }});
    let w = ObjectWrite::<Obj>::Patch(crate::ports::PatchBody::Merge(patch));
    match write_object::<Obj>(env, what.clone(), known, w, rule).await? {
        Outcome::Conflict(_) => Err(IoError::Newer { what: what.clone() }),
        _ => Ok(()),
    }
}

/// D4: the claim actor's step for a backing claim someone deleted that no
/// pod holds any more: our finalizer off the cache's copy.
pub(crate) async fn let_go_cached(env: &Env, c: &GPUClaim, rule: RuleId) -> Result<(), IoError> {
    let k = key_of(c);
    let Some(rc) = env.world.resource_claim(&k).filter(|rc| owned_by(rc, c)) else {
        return Ok(());
    };
    let (ns, name) = crate::world::split_key(&k);
    let what = ObjRef::new(Kind::ResourceClaim, Some(ns), name);
    let uid = c.metadata.uid.as_deref().unwrap_or_default();
    let owner = Owner { claim: &k, uid };
    let_go(env, owner, &what, ResourceClaim::clone(&rc), rule).await
}
