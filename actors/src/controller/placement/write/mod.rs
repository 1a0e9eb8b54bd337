//! Carrying out placement's intents through the ports, stopping at the
//! first write that fails; what landed is reported so that the next
//! decision follows from it.

mod place;
mod restart;
mod vmi;

use place::place;

use crate::api::{
    GPUAllocation, GPUAllocationSpec, GPUClaim, GPUClaimStatus, PodUse, RestartMark, rv_number,
};
use crate::controller::Env;
use crate::controller::journal::Intent;
use crate::controller::pacer::{IoError, ObjectWrite, Outcome, write_object};
use crate::ports::{Event, Kind, Obj, ObjRef, Preconditions};
use crate::rules::{AllocationWrite, DeviceClaimWrite, GiveUp, Plan, RuleId};
use crate::world::key;
use std::sync::Arc;

/// One intent and its writes.
pub(super) enum Write {
    CreateClaim {
        key: String,
        vmi_uid: String,
        obj: Box<Obj>,
    },
    DeleteAllocation {
        key: String,
        uid: String,
    },
    /// G4: allocations, statuses, pods, in that order.
    Place(Box<Plan>),
    /// G5: Waiting conditions.
    Wait(Vec<(Arc<GPUClaim>, GPUClaimStatus)>),
    /// Delete a VMI (G7, E2).
    DeleteVmi(Box<VmiDelete>),
    /// E2: remove the marks of restarts that are over from their nodes,
    /// then say so.
    EndRestarts(Vec<EndRestarts>),
    /// D4: a placed claim's backing claim, away from the gate, made or
    /// allocated again.
    RestoreBackingClaim(Box<DeviceClaimWrite>),
    /// D4: a record brought to the devices its backing claim holds for a
    /// pod (the devices in use are the truth).
    RecordFollows(Box<GPUAllocation>),
    /// D8: a record moved off a device another ResourceClaim names, on
    /// its node, its backing claim following; then said.
    GiveUp(Box<GiveUp>),
    /// D4: the backing claim (`ns/name`) of a GPUClaim that is gone (the
    /// uid it was made for), deleted and let go.
    ReleaseOrphanBackingClaim {
        key: String,
        owner_uid: String,
    },
}

/// E2: a restart begun (its mark written on the node, then the VMI
/// deleted) or resumed (the node keeps its mark; the delete is made).
pub(super) struct RestartWrite {
    /// namespace/name of the VM restarted.
    pub vm: String,
    /// The node it moves off, which keeps the mark.
    pub node: String,
    /// The mark to write first; None when the node keeps it already.
    pub mark: Option<RestartMark>,
}

/// E2: the marks of one node's restarts that are over (by the uid of the
/// VMI each deleted), and the Events that say why.
pub(super) struct EndRestarts {
    pub node: String,
    pub uids: Vec<String>,
    pub events: Vec<Event>,
    /// No mark is left on the node after these: E2's finalizer comes off
    /// with them (a node being deleted then goes).
    pub release: bool,
}

/// Delete a VMI on the preconditions the cache showed, and publish its
/// Event once issued: G7 (its pinned pod cannot be placed) or E2 (its VM
/// is restarted off an evacuating node: the restart it begins).
pub(super) struct VmiDelete {
    pub key: String,
    pub uid: String,
    pub resource_version: String,
    pub event: Event,
    pub rule: RuleId,
    pub restart: Option<RestartWrite>,
}

impl Write {
    /// The rule that decided the write, and what it means to do.
    pub(super) fn rule_and_intent(&self) -> (RuleId, Intent) {
        match self {
            Write::CreateClaim { .. } => (RuleId::G2, Intent::CreateClaim),
            Write::DeleteAllocation { .. } => (RuleId::Allocations, Intent::DeleteAllocation),
            Write::Place(_) => (RuleId::G4, Intent::Place),
            Write::Wait(_) => (RuleId::G5, Intent::Wait),
            Write::DeleteVmi(d) => (d.rule, Intent::DeleteVmi),
            Write::EndRestarts(_) => (RuleId::E2, Intent::EndRestarts),
            Write::RestoreBackingClaim(_) => (RuleId::D4, Intent::RestoreBackingClaim),
            Write::GiveUp(_) => (RuleId::D8, Intent::GiveUpDevice),
            Write::RecordFollows(_) => (RuleId::D4, Intent::RestoreBackingClaim),
            Write::ReleaseOrphanBackingClaim { .. } => (RuleId::D4, Intent::ReleaseBackingClaim),
        }
    }

    /// The claims (and so allocations, keyed alike) this write is about.
    pub(super) fn claim_keys(&self) -> Vec<String> {
        match self {
            Write::CreateClaim { key, .. }
            | Write::DeleteAllocation { key, .. }
            | Write::ReleaseOrphanBackingClaim { key, .. } => vec![key.clone()],
            Write::Place(plan) => plan
                .statuses
                .iter()
                .map(|(c, _)| claim_key(c))
                .chain(
                    plan.allocations
                        .iter()
                        .map(|a| allocation_key(a.allocation())),
                )
                .chain(plan.device_claims.iter().map(|d| d.claim.clone()))
                .collect(),
            Write::Wait(changes) => changes.iter().map(|(c, _)| claim_key(c)).collect(),
            Write::RestoreBackingClaim(d) => vec![d.claim.clone()],
            Write::GiveUp(g) => vec![g.claim.clone()],
            Write::RecordFollows(r) => vec![allocation_key(r)],
            Write::DeleteVmi(_) | Write::EndRestarts(_) => Vec::new(),
        }
    }
}

/// What the writes left: what the cache may not show yet.
#[derive(Default)]
pub(super) struct WritesDone {
    /// Allocations written: key, spec, the resourceVersion the write returned.
    pub allocations: Vec<(String, GPUAllocationSpec, u64)>,
    /// Claims written: key and the resourceVersion returned.
    pub claims: Vec<(String, u64)>,
    /// D4: ResourceClaims made or allocated: key and the resourceVersion
    /// returned.
    pub resource_claims: Vec<(String, u64)>,
    /// Pods pinned: key, the resourceVersion returned, what the pod will use.
    pub pods: Vec<(String, u64, PodUse)>,
    /// A template claim created: key, VMI uid, resourceVersion (0 when it
    /// already existed).
    pub created: Option<(String, String, u64)>,
    /// An allocation deleted (or found gone): key and uid.
    pub deleted_allocation: Option<(String, String)>,
    /// A VMI deleted by G7 (or found gone or changed): key, uid, resourceVersion.
    pub deleted_vmi: Option<(String, String, String)>,
    /// E2: what came of restarts and their marks.
    pub restarts: RestartsDone,
    pub error: Option<IoError>,
}

/// E2's part of what a write did.
#[derive(Default, Debug)]
pub(in crate::controller::placement) struct RestartsDone {
    /// A VM's restart begun (its VMI deleted, or found gone): the VM and
    /// the uid of the VMI deleted.
    pub restarted: Option<(String, String)>,
    /// A restart decided on whose delete did not land (a newer VMI, or a
    /// failure): the uid of the VMI, and whether its mark is on the node
    /// (the next look resumes or drops it) or not.
    pub failed: Option<(String, bool)>,
    /// Marks written or removed, by the uid of the VMI: the node's
    /// resourceVersion the write returned (the watch shows them from it).
    pub marks: Vec<(String, u64)>,
    /// Marks whose write or removal did not land, by the uid of the VMI.
    pub marks_failed: Vec<String>,
    /// Nodes E2's finalizer was taken off, with the resourceVersion the
    /// write returned; and those where it did not land.
    pub released: Vec<(String, u64)>,
    pub released_failed: Vec<String>,
    /// A VMI not deleted because its VM would not start it again: its uid
    /// and why.
    pub kept: Option<(String, String)>,
}

pub(super) fn allocation_key(r: &GPUAllocation) -> String {
    key(
        r.metadata.namespace.as_deref().unwrap_or_default(),
        r.metadata.name.as_deref().unwrap_or_default(),
    )
}

fn claim_key(c: &GPUClaim) -> String {
    key(
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// The GPUClaim at `key`, read live.
async fn live_claim(env: &Env, key: &str) -> Result<Option<GPUClaim>, IoError> {
    let (ns, name) = crate::world::split_key(key);
    let what = ObjRef::new(Kind::Claim, Some(ns), name);
    match env.reader.get(what.clone()).await {
        Ok(Some(Obj::Claim(c))) => Ok(Some(c)),
        Ok(_) => Ok(None),
        Err(source) => Err(IoError::read(what, source)),
    }
}

/// One of placement's writes through the pacer's write path: the
/// object as written (None: gone), or why not; a newer object is
/// `IoError::Newer`, and the work is looked at again.
async fn write(
    env: &Env,
    what: ObjRef,
    known: u64,
    w: ObjectWrite<Obj>,
    rule: RuleId,
) -> Result<Option<Obj>, IoError> {
    match write_object(env, what.clone(), known, w, rule).await? {
        Outcome::Written { object, .. } => Ok(Some(Arc::unwrap_or_clone(object))),
        Outcome::Gone { .. } => Ok(None),
        Outcome::Conflict(_) => Err(IoError::Newer { what }),
    }
}

/// A claim's status written: its key and version noted in `done`;
/// whether it landed (false: the claim is gone).
async fn write_status(
    env: &Env,
    c: &GPUClaim,
    status: GPUClaimStatus,
    rule: RuleId,
    done: &mut WritesDone,
) -> Result<bool, IoError> {
    let mut new = GPUClaim::clone(c);
    new.status = Some(status);
    let what = Obj::Claim(GPUClaim::clone(c)).obj_ref();
    let known = rv_number(&c.metadata);
    if let Some(o) = write(
        env,
        what,
        known,
        ObjectWrite::UpdateStatus(Obj::Claim(new)),
        rule,
    )
    .await?
    {
        done.claims.push((claim_key(c), rv_number(o.meta())));
        return Ok(true);
    }
    Ok(false)
}

pub(super) async fn execute(env: Arc<Env>, w: Write) -> WritesDone {
    let mut done = WritesDone::default();
    if let Err(e) = carry_out(&env, w, &mut done).await {
        done.error = Some(e);
    }
    done
}

async fn carry_out(env: &Env, w: Write, done: &mut WritesDone) -> Result<(), IoError> {
    match w {
        Write::CreateClaim { key, vmi_uid, obj } => {
            tracing::info!(claim = %key, rule = "G2", intent = "create-claim", "writing");
            let what = obj.obj_ref();
            // AlreadyExists: someone made it, and the cache does not show
            // it yet; it does once the watch reaches its version.
            let made =
                match write_object(env, what, 0, ObjectWrite::Create(*obj), RuleId::G2).await? {
                    Outcome::Written { object, .. } | Outcome::Conflict(object) => Some(object),
                    Outcome::Gone { .. } => None,
                };
            if let Some(o) = made {
                done.created = Some((key, vmi_uid, rv_number(o.meta())));
            }
        }
        Write::DeleteAllocation { key, uid } => delete_allocation(env, key, uid, done).await?,
        Write::Wait(changes) => {
            for (c, status) in changes {
                tracing::info!(claim = %claim_key(&c), rule = "G5", intent = "waiting", "writing");
                write_status(env, &c, status, RuleId::G5, done).await?;
            }
        }
        Write::Place(plan) => place(env, *plan, done).await?,
        // D4 away from the gate, decided on caches: the GPUClaim read
        // live first. A restore only for one that stands and is not being
        // released (else its ResourceClaim would hold devices L8 has just
        // freed); a release only for one that is gone or is another.
        Write::RestoreBackingClaim(d) => {
            let stands = |c: &GPUClaim| {
                c.metadata.uid == d.owner_uid && !crate::api::is_deleting(&c.metadata)
            };
            if live_claim(env, &d.claim).await?.is_some_and(|c| stands(&c)) {
                place::allocate_device_claim(env, *d, done).await?;
            }
        }
        Write::GiveUp(g) => give_up(env, *g, done).await?,
        Write::RecordFollows(r) => {
            let node = r.spec.node_name.clone();
            tracing::info!(claim = %allocation_key(&r), rule = "D4", intent = "record-follows-claim", "writing");
            place::write_allocation(env, &node, AllocationWrite::Move(*r), RuleId::D4, done)
                .await?;
        }
        Write::ReleaseOrphanBackingClaim { key, owner_uid } => {
            let live = live_claim(env, &key).await?;
            if live.is_none_or(|c| c.metadata.uid.as_deref() != Some(owner_uid.as_str())) {
                let owner = crate::controller::backing_claims::Owner {
                    claim: &key,
                    uid: &owner_uid,
                };
                crate::controller::backing_claims::release(env, owner, RuleId::D4).await?;
            }
        }
        Write::DeleteVmi(d) => vmi::delete_vmi(env, *d, done).await?,
        Write::EndRestarts(ends) => restart::end_restarts(env, ends, done).await?,
    }
    Ok(())
}

/// D8: the GPUClaim read live (one being released, or another, is not
/// moved); its record on its node with other devices; its backing claim
/// allocated to them (cleared first); then a Normal Event `DeviceTaken`
/// names the other ResourceClaim.
async fn give_up(env: &Env, g: GiveUp, done: &mut WritesDone) -> Result<(), IoError> {
    let stands = |c: &GPUClaim| c.metadata.uid == g.uid && !crate::api::is_deleting(&c.metadata);
    let Some(c) = live_claim(env, &g.claim).await?.filter(stands) else {
        return Ok(());
    };
    let node = g.record.spec.node_name.clone();
    let record = AllocationWrite::Move(GPUAllocation::clone(&g.record));
    place::write_allocation(env, &node, record, RuleId::D8, done).await?;
    place::allocate_device_claim(env, g.backing, done).await?;
    crate::controller::events::publish(
        env,
        crate::controller::events::device_taken(&g.claim, &c, &g.taken, &g.record),
    );
    Ok(())
}

/// Watches of different kinds are not ordered: the claim can be seen gone
/// before its allocation, which L8 deleted first. Only an allocation the
/// server still has is deleted.
async fn delete_allocation(
    env: &Env,
    key: String,
    uid: String,
    done: &mut WritesDone,
) -> Result<(), IoError> {
    let (ns, name) = crate::world::split_key(&key);
    let what = ObjRef::new(Kind::Allocation, Some(ns), name);
    let live = env
        .reader
        .get(what.clone())
        .await
        .map_err(|source| IoError::read(what.clone(), source))?;
    if live
        .as_ref()
        .is_some_and(|l| l.meta().uid.as_ref() == Some(&uid))
    {
        tracing::info!(allocation = %key, rule = "allocations", intent = "delete-allocation", "writing");
        let pre = Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        };
        let known = live.as_ref().map_or(0, |l| rv_number(l.meta()));
        match write(
            env,
            what,
            known,
            ObjectWrite::Delete(pre),
            RuleId::Allocations,
        )
        .await
        {
            Ok(_) | Err(IoError::Newer { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    done.deleted_allocation = Some((key, uid));
    Ok(())
}
