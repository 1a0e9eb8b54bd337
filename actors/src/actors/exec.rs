//! Carrying out a claim's intents through the ports. Each function makes
//! the writes of one intent in the SPEC's order and says what came of it;
//! the actor decides again from there.

use super::Env;
use crate::api::{CLAIM_FINALIZER, GPUClaim, Vmi};
use crate::ports::{Deleted, Kind, Obj, ObjRef, Preconditions, ReadError, Why, WriteError};
use crate::rules::{ClaimIntent, RuleId, pods_left_gate, vmi_holds};
use std::sync::Arc;

/// What an intent's writes (or reads) came to.
#[derive(Debug)]
pub enum Outcome {
    /// The claim as the write left it (None: gone); the cache is fresh
    /// again once it shows this resourceVersion or later.
    Claim {
        claim: Option<Arc<GPUClaim>>,
        fresh_from: u64,
    },
    /// L8: the finalizer is gone (or the claim already was).
    Released {
        claim: Option<Arc<GPUClaim>>,
        fresh_from: u64,
    },
    /// L12: the VMI delete is done (deleted, NotFound or Conflict).
    VmiDeleted {
        uid: String,
        resource_version: String,
    },
    /// 409: the claim changed under us; here it is, read live.
    Reread(Result<Option<Arc<GPUClaim>>, ReadError>),
    /// L9/L10: a live read says a VMI still uses the claim.
    Used { poll: bool },
    /// Retry later.
    Failed(String),
}

/// The result of one intent, and whether a record was deleted on the way
/// (so that a lagging cache does not make us delete it again).
pub struct Done {
    pub outcome: Outcome,
    pub record_deleted: Option<String>,
}

impl From<Outcome> for Done {
    fn from(outcome: Outcome) -> Self {
        Done {
            outcome,
            record_deleted: None,
        }
    }
}

fn claim_ref(c: &GPUClaim) -> ObjRef {
    ObjRef::new(
        Kind::Claim,
        c.metadata.namespace.as_deref(),
        c.metadata.name.as_deref().unwrap_or_default(),
    )
}

fn rv(c: &GPUClaim) -> u64 {
    crate::api::rv_number(&c.metadata)
}

fn written(obj: Obj) -> Outcome {
    match obj {
        Obj::Claim(c) => {
            let fresh_from = rv(&c);
            let gone = crate::api::is_deleting(&c.metadata)
                && c.metadata.finalizers.as_ref().is_none_or(|f| f.is_empty());
            Outcome::Claim {
                claim: (!gone).then(|| Arc::new(c)),
                fresh_from,
            }
        }
        other => Outcome::Failed(format!("writer answered with a {}", other.kind().name())),
    }
}

async fn reread(env: &Env, c: &GPUClaim) -> Outcome {
    let live = env.reader.get(claim_ref(c)).await.map(|o| match o {
        Some(Obj::Claim(c)) => Some(Arc::new(c)),
        _ => None,
    });
    Outcome::Reread(live)
}

/// The outcome of a failed claim write: a conflict re-reads, NotFound means gone.
async fn on_error(env: &Env, c: &GPUClaim, e: WriteError) -> Outcome {
    match e {
        WriteError::Conflict(_) => reread(env, c).await,
        WriteError::NotFound => Outcome::Claim {
            claim: None,
            fresh_from: rv(c) + 1,
        },
        e => Outcome::Failed(e.to_string()),
    }
}

/// Carries out one intent.
pub async fn execute(
    env: Arc<Env>,
    claim: Arc<GPUClaim>,
    rule: RuleId,
    intent: ClaimIntent,
    record_uid: Option<String>,
) -> Done {
    let why = Why(rule);
    let c = &claim;
    let result = match intent {
        ClaimIntent::AddFinalizer => {
            let mut new = GPUClaim::clone(c);
            new.metadata
                .finalizers
                .get_or_insert_default()
                .push(CLAIM_FINALIZER.to_string());
            env.writer.replace(Obj::Claim(new), why).await.map(written)
        }
        ClaimIntent::WriteStatus(status) => {
            let mut new = GPUClaim::clone(c);
            new.status = Some(status);
            env.writer
                .replace_status(Obj::Claim(new), why)
                .await
                .map(written)
        }
        ClaimIntent::Delete => {
            // The version too: a claim changed since we saw it (say, the
            // garbage collector deleted it with its VMI) answers 409 and is
            // decided again, instead of taking a delete that changes nothing.
            let pre = Preconditions {
                uid: c.metadata.uid.clone(),
                resource_version: c.metadata.resource_version.clone(),
            };
            env.writer
                .delete(claim_ref(c), pre, why)
                .await
                .map(|d| match d {
                    Deleted::Gone => Outcome::Claim {
                        claim: None,
                        fresh_from: rv(c) + 1,
                    },
                    Deleted::Deleting(obj) => written(obj),
                })
        }
        ClaimIntent::Release => return release(&env, c, record_uid, why).await,
        ClaimIntent::DeleteVmi {
            name,
            uid,
            resource_version,
        } => {
            let what = ObjRef::new(Kind::Vmi, c.metadata.namespace.as_deref(), &name);
            let pre = Preconditions {
                uid: Some(uid.clone()),
                resource_version: Some(resource_version.clone()),
            };
            return match env.writer.delete(what, pre, why).await {
                // NotFound and Conflict count as done: gone, or not the VMI the cache showed.
                Ok(_) | Err(WriteError::NotFound) | Err(WriteError::Conflict(_)) => {
                    Outcome::VmiDeleted {
                        uid,
                        resource_version,
                    }
                    .into()
                }
                Err(e) => Outcome::Failed(e.to_string()).into(),
            };
        }
    };
    match result {
        Ok(o) => o.into(),
        Err(e) => on_error(&env, c, e).await.into(),
    }
}

/// The uid of the claim's allocation: the cache's, else a live read's. The
/// cache may not show one placement has just written (watches of two kinds
/// are not ordered), and L8 deletes it whatever the cache shows.
async fn allocation_uid(
    env: &Env,
    c: &GPUClaim,
    what: &ObjRef,
    cached: Option<String>,
) -> Result<Option<String>, ReadError> {
    if cached.is_some() {
        return Ok(cached);
    }
    Ok(match env.reader.get(what.clone()).await? {
        Some(Obj::Record(r)) if Some(&r.spec.claim_uid) == c.metadata.uid.as_ref() => {
            r.metadata.uid
        }
        _ => None,
    })
}

/// L8: delete the record, then remove the finalizer. If removing the
/// finalizer fails (NotFound aside) the claim still holds its GPUs.
async fn release(env: &Env, c: &GPUClaim, record_uid: Option<String>, why: Why) -> Done {
    let mut record_deleted = None;
    let what = ObjRef::new(
        Kind::Record,
        c.metadata.namespace.as_deref(),
        c.metadata.name.as_deref().unwrap_or_default(),
    );
    let record_uid = match allocation_uid(env, c, &what, record_uid).await {
        Ok(uid) => uid,
        Err(e) => return Outcome::Failed(format!("read record: {e}")).into(),
    };
    if let Some(uid) = record_uid {
        let pre = Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        };
        match env.writer.delete(what, pre, why).await {
            Ok(_) | Err(WriteError::NotFound) | Err(WriteError::Conflict(_)) => {
                record_deleted = Some(uid)
            }
            Err(e) => return Outcome::Failed(format!("delete record: {e}")).into(),
        }
    }
    let mut new = GPUClaim::clone(c);
    if let Some(f) = new.metadata.finalizers.as_mut() {
        f.retain(|f| f != CLAIM_FINALIZER);
    }
    let outcome = match env.writer.replace(Obj::Claim(new), why).await {
        Ok(obj) => match written(obj) {
            Outcome::Claim { claim, fresh_from } => Outcome::Released { claim, fresh_from },
            other => other,
        },
        Err(WriteError::NotFound) => Outcome::Released {
            claim: None,
            fresh_from: rv(c) + 1,
        },
        Err(e) => on_error(env, c, e).await,
    };
    Done {
        outcome,
        record_deleted,
    }
}

/// L9: read live the pods the cache shows gated; release unless one left the gate.
pub async fn release_unless_pods_left(
    env: Arc<Env>,
    claim: Arc<GPUClaim>,
    names: Vec<String>,
    record_uid: Option<String>,
) -> Done {
    let ns = claim.metadata.namespace.clone();
    let mut live = Vec::with_capacity(names.len());
    for name in &names {
        match env
            .reader
            .get(ObjRef::new(Kind::Pod, ns.as_deref(), name))
            .await
        {
            Ok(Some(Obj::Pod(p))) => live.push(Some(p)),
            Ok(_) => live.push(None),
            Err(e) => return Outcome::Failed(format!("get pod {name}: {e}")).into(),
        }
    }
    if pods_left_gate(&live) {
        return Outcome::Used { poll: false }.into();
    }
    release(&env, &claim, record_uid, Why(RuleId::L8)).await
}

/// L10: read the VMI live; release unless it holds the claim.
pub async fn release_unless_vmi_holds(
    env: Arc<Env>,
    claim: Arc<GPUClaim>,
    name: String,
    record_uid: Option<String>,
) -> Done {
    let live = env
        .reader
        .get(ObjRef::new(
            Kind::Vmi,
            claim.metadata.namespace.as_deref(),
            &name,
        ))
        .await;
    let live: Result<Option<Vmi>, ReadError> = live.map(|o| match o {
        Some(Obj::Vmi(v)) => Some(v),
        _ => None,
    });
    match vmi_holds(&claim, live) {
        Ok(true) => Outcome::Used { poll: true }.into(),
        Ok(false) => release(&env, &claim, record_uid, Why(RuleId::L8)).await,
        Err(e) => Outcome::Failed(format!("get VMI {name}: {e}")).into(),
    }
}
