//! Carrying out a claim's intents through the ports. Each function makes
//! the writes of one intent in the rules' order and says, as a type, what
//! came of it; the actor decides again from there.

use super::super::Env;
use super::super::pacer::{IoError, ObjectWrite, Outcome, write_object};
use crate::api::{CLAIM_FINALIZER, GPUClaim, Kind, Obj, ObjRef, Vmi, rv_number};
use crate::ports::{Preconditions, ReadError};
use crate::rules::{ClaimIntent, LiveVmi, RuleId, pods_left_gate, vmi_holds};
use std::sync::Arc;

/// What a claim's I/O came to.
#[derive(Debug)]
pub enum ClaimIo {
    /// A write of the claim itself, or L8's release (`released`).
    Claim {
        outcome: Outcome<GPUClaim>,
        released: bool,
    },
    /// L12: the VMI delete is done (deleted, NotFound or Conflict).
    VmiDeleted {
        uid: String,
        resource_version: String,
    },
    /// L9/L10: a live read says a VMI still uses the claim; `poll`: read
    /// again later (L10: nothing else would tell us it stopped). L8: a
    /// pod still holds the backing claim (its change wakes the actor).
    InUse { poll: bool },
    /// D4: our finalizer is off the backing claim (or it was gone).
    BackingClaimLetGo,
}

/// The result of one intent, and the allocation deleted on the way (so that
/// a lagging cache does not make us delete it again).
pub struct IntentDone {
    pub result: Result<ClaimIo, IoError>,
    pub allocation_deleted: Option<String>,
}

impl From<Result<ClaimIo, IoError>> for IntentDone {
    fn from(result: Result<ClaimIo, IoError>) -> Self {
        IntentDone {
            result,
            allocation_deleted: None,
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

/// A write of the claim through the pacer's one write path.
async fn write_claim(
    env: &Env,
    c: &GPUClaim,
    write: ObjectWrite<GPUClaim>,
    rule: RuleId,
) -> Result<Outcome<GPUClaim>, IoError> {
    write_object(env, claim_ref(c), rv_number(&c.metadata), write, rule).await
}

/// Carries out one intent.
pub async fn execute(
    env: Arc<Env>,
    claim: Arc<GPUClaim>,
    rule: RuleId,
    intent: ClaimIntent,
    allocation_uid: Option<String>,
) -> IntentDone {
    let c = &claim;
    let outcome = match intent {
        ClaimIntent::AddFinalizer => {
            let mut new = GPUClaim::clone(c);
            new.metadata
                .finalizers
                .get_or_insert_default()
                .push(CLAIM_FINALIZER.to_string());
            write_claim(&env, c, ObjectWrite::Update(new), rule).await
        }
        ClaimIntent::WriteStatus(status) => {
            let mut new = GPUClaim::clone(c);
            new.status = Some(status);
            write_claim(&env, c, ObjectWrite::UpdateStatus(new), rule).await
        }
        ClaimIntent::Delete => {
            // The version too: a claim changed since we saw it (say, the
            // garbage collector deleted it with its VMI) answers 409 and is
            // decided again, instead of taking a delete that changes nothing.
            let pre = Preconditions {
                uid: c.metadata.uid.clone(),
                resource_version: c.metadata.resource_version.clone(),
            };
            write_claim(&env, c, ObjectWrite::Delete(pre), rule).await
        }
        ClaimIntent::Release => return release(&env, c, allocation_uid, rule).await,
        ClaimIntent::LetGoBackingClaim => {
            return crate::controller::backing_claims::let_go_cached(&env, c, rule)
                .await
                .map(|_| ClaimIo::BackingClaimLetGo)
                .into();
        }
        ClaimIntent::ReleaseUnlessPodsLeft { names } => {
            return release_unless_pods_left(&env, c, names, allocation_uid).await;
        }
        ClaimIntent::ReleaseUnlessVmiHolds { name } => {
            return release_unless_vmi_holds(&env, c, name, allocation_uid).await;
        }
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
            // Whatever came of it is done: deleted, gone already, or a
            // newer VMI than the one L12 decided on (decided on again
            // when its change arrives).
            return write_object::<Obj>(&env, what, 0, ObjectWrite::Delete(pre), rule)
                .await
                .map(|_| ClaimIo::VmiDeleted {
                    uid,
                    resource_version,
                })
                .into();
        }
    };
    outcome
        .map(|outcome| ClaimIo::Claim {
            outcome,
            released: false,
        })
        .into()
}

/// The uid of the claim's allocation: the cache's, else a live read's. The
/// cache may not show one placement has just written (watches of two kinds
/// are not ordered), and L8 deletes it whatever the cache shows.
async fn allocation_uid(
    env: &Env,
    c: &GPUClaim,
    what: &ObjRef,
    cached: Option<String>,
) -> Result<Option<String>, IoError> {
    if cached.is_some() {
        return Ok(cached);
    }
    match env.reader.get(what.clone()).await {
        Ok(Some(Obj::Allocation(r))) if Some(&r.spec.claim_uid) == c.metadata.uid.as_ref() => {
            Ok(r.metadata.uid)
        }
        Ok(_) => Ok(None),
        Err(source) => Err(IoError::read(what.clone(), source)),
    }
}

/// L8: delete the backing claim (D4), then the allocation, then remove the
/// finalizer. If removing the finalizer fails (NotFound aside) the claim
/// still holds its GPUs.
async fn release(env: &Env, c: &GPUClaim, cached: Option<String>, rule: RuleId) -> IntentDone {
    match crate::controller::backing_claims::delete_backing_claim(env, c, rule).await {
        Err(e) => return Err(e).into(),
        Ok(crate::controller::backing_claims::BackingClaim::Held) => {
            return Ok(ClaimIo::InUse { poll: false }).into();
        }
        Ok(crate::controller::backing_claims::BackingClaim::Gone) => {}
    }
    let what = ObjRef::new(
        Kind::Allocation,
        c.metadata.namespace.as_deref(),
        c.metadata.name.as_deref().unwrap_or_default(),
    );
    let mut allocation_deleted = None;
    match allocation_uid(env, c, &what, cached).await {
        Err(e) => return Err(e).into(),
        Ok(None) => {}
        Ok(Some(uid)) => {
            let pre = Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            };
            // Deleted, gone already, or another allocation of that name
            // (not this claim's): this claim's is gone either way.
            match write_object::<Obj>(env, what, 0, ObjectWrite::Delete(pre), rule).await {
                Ok(_) => allocation_deleted = Some(uid),
                Err(e) => return Err(e).into(),
            }
        }
    }
    let mut new = GPUClaim::clone(c);
    if let Some(f) = new.metadata.finalizers.as_mut() {
        f.retain(|f| f != CLAIM_FINALIZER);
    }
    let result = write_claim(env, c, ObjectWrite::Update(new), rule)
        .await
        .map(|outcome| ClaimIo::Claim {
            // A conflict decides again: the release did not happen.
            released: !matches!(outcome, Outcome::Conflict(_)),
            outcome,
        });
    IntentDone {
        result,
        allocation_deleted,
    }
}

/// L9: read live the pods the cache shows gated; release unless one left the gate.
async fn release_unless_pods_left(
    env: &Env,
    claim: &GPUClaim,
    names: Vec<String>,
    allocation: Option<String>,
) -> IntentDone {
    let ns = claim.metadata.namespace.clone();
    let mut live = Vec::with_capacity(names.len());
    for name in &names {
        let what = ObjRef::new(Kind::Pod, ns.as_deref(), name);
        match env.reader.get(what.clone()).await {
            Ok(Some(Obj::Pod(p))) => live.push(Some(p)),
            Ok(_) => live.push(None),
            Err(source) => return Err(IoError::read(what, source)).into(),
        }
    }
    if pods_left_gate(&live) {
        return Ok(ClaimIo::InUse { poll: false }).into();
    }
    release(env, claim, allocation, RuleId::L8).await
}

/// L10: read the VMI live; release unless it holds the claim.
async fn release_unless_vmi_holds(
    env: &Env,
    claim: &GPUClaim,
    name: String,
    allocation: Option<String>,
) -> IntentDone {
    let what = ObjRef::new(Kind::Vmi, claim.metadata.namespace.as_deref(), &name);
    let read = env.reader.get(what.clone()).await;
    let live: Result<Option<Vmi>, _> = read.clone().map(|o| match o {
        Some(Obj::Vmi(v)) => Some(v),
        _ => None,
    });
    match vmi_holds(claim, &live_vmi(live)) {
        Some(true) => Ok(ClaimIo::InUse { poll: true }).into(),
        Some(false) => release(env, claim, allocation, RuleId::L8).await,
        None => match read {
            Err(source) => Err(IoError::read(what, source)).into(),
            Ok(_) => Ok(ClaimIo::InUse { poll: true }).into(),
        },
    }
}

/// What a live read of the VMI says for L9: a read that failed says
/// nothing (Unknown), a kind not served is no VMI.
fn live_vmi(live: Result<Option<crate::api::Vmi>, ReadError>) -> LiveVmi {
    match live {
        Ok(Some(v)) => LiveVmi::Found(Box::new(v)),
        Ok(None) | Err(ReadError::NotServed) => LiveVmi::Absent,
        Err(ReadError::Other(_) | ReadError::Timeout(_)) => LiveVmi::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// L10: only an answer says whether the VMI is there; a kind the
    /// server does not serve (no KubeVirt) is no VMI.
    #[test]
    fn l10_a_failed_read_says_nothing_and_a_kind_not_served_is_no_vmi() {
        let vmi = || Vmi {
            metadata: Default::default(),
            spec: None,
            status: None,
        };
        type Read = Result<Option<Vmi>, ReadError>;
        let cases: Vec<(&str, Read, LiveVmi)> = vec![
            ("found", Ok(Some(vmi())), LiveVmi::Found(Box::new(vmi()))),
            ("not found", Ok(None), LiveVmi::Absent),
            (
                "kind not served",
                Err(ReadError::NotServed),
                LiveVmi::Absent,
            ),
            (
                "another error",
                Err(ReadError::Other("x".into())),
                LiveVmi::Unknown,
            ),
            (
                "no answer",
                Err(ReadError::Timeout(std::time::Duration::from_secs(1))),
                LiveVmi::Unknown,
            ),
        ];
        for (what, live, want) in cases {
            assert_eq!(live_vmi(live), want, "{what}");
        }
    }
}
