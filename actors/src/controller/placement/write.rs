//! Carrying out placement's intents through the ports, stopping at the
//! first write that fails; what landed is reported so that the next
//! decision follows from it.

use super::super::Env;
use super::super::journal::Intent;
use super::super::scaffold::{IoError, Outcome, OwnWrite, write_own};
use crate::api::{
    GPUAllocation, GPUAllocationSpec, GPUClaim, GPUClaimStatus, HOSTNAME_LABEL, PodUse,
    RestartMark, SCHEDULING_GATE, rv_number,
};
use crate::ports::{Event, Kind, Obj, ObjRef, Preconditions};
use crate::rules::{AllocationWrite, DeviceClaimWrite, Plan, RuleId, allocated_devices};
use crate::world::key;
use k8s_openapi::api::resource::v1::ResourceClaim;
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
        }
    }

    /// The claims (and so allocations, keyed alike) this write is about.
    pub(super) fn claim_keys(&self) -> Vec<String> {
        match self {
            Write::CreateClaim { key, .. } | Write::DeleteAllocation { key, .. } => {
                vec![key.clone()]
            }
            Write::Place(plan) => plan
                .statuses
                .iter()
                .map(|(c, _)| claim_key(c))
                .chain(plan.allocations.iter().map(|a| record_key(a.record())))
                .collect(),
            Write::Wait(changes) => changes.iter().map(|(c, _)| claim_key(c)).collect(),
            Write::DeleteVmi(_) | Write::EndRestarts(_) => Vec::new(),
        }
    }
}

/// What the writes left: what the cache may not show yet.
#[derive(Default)]
pub(super) struct Done {
    /// Allocations written: key, spec, the resourceVersion the write returned.
    pub allocations: Vec<(String, GPUAllocationSpec, u64)>,
    /// Claims written: key and the resourceVersion returned.
    pub claims: Vec<(String, u64)>,
    /// Pods pinned: key, the resourceVersion returned, what the pod will use.
    pub pods: Vec<(String, u64, PodUse)>,
    /// A template claim created: key, VMI uid, resourceVersion (0 when it
    /// already existed).
    pub created: Option<(String, String, u64)>,
    /// An allocation deleted (or found gone): key and uid.
    pub deleted_allocation: Option<(String, String)>,
    /// A VMI deleted by G7 (or found gone or changed): key, uid, resourceVersion.
    pub deleted_vmi: Option<(String, String, String)>,
    /// E2: a VM's restart begun (its VMI deleted, or found gone): the
    /// VM and the uid of the VMI deleted.
    pub restarted: Option<(String, String)>,
    /// E2: a restart decided on whose delete did not land (a newer VMI,
    /// or a failure): the uid of the VMI, and whether its mark is on the
    /// node (the next look resumes or drops it) or not.
    pub restart_failed: Option<(String, bool)>,
    /// E2: marks written or removed, by the uid of the VMI: the node's
    /// resourceVersion the write returned (the watch shows them from it).
    pub marks: Vec<(String, u64)>,
    /// E2: marks whose removal did not land, by the uid of the VMI.
    pub marks_failed: Vec<String>,
    /// E2: a VMI not deleted because its VM would not start it again:
    /// its uid and why.
    pub kept: Option<(String, String)>,
    pub error: Option<IoError>,
}

pub(super) fn record_key(r: &GPUAllocation) -> String {
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

/// One of placement's writes through the scaffold's write path: the
/// object as written (None: gone), or why not; a newer object is
/// `IoError::Newer`, and the work is looked at again.
async fn write(
    env: &Env,
    what: ObjRef,
    known: u64,
    w: OwnWrite<Obj>,
    rule: RuleId,
) -> Result<Option<Obj>, IoError> {
    match write_own(env, what.clone(), known, w, rule).await? {
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
    done: &mut Done,
) -> Result<bool, IoError> {
    let mut new = GPUClaim::clone(c);
    new.status = Some(status);
    let what = Obj::Claim(GPUClaim::clone(c)).obj_ref();
    let known = rv_number(&c.metadata);
    if let Some(o) = write(
        env,
        what,
        known,
        OwnWrite::UpdateStatus(Obj::Claim(new)),
        rule,
    )
    .await?
    {
        done.claims.push((claim_key(c), rv_number(o.meta())));
        return Ok(true);
    }
    Ok(false)
}

pub(super) async fn execute(env: Arc<Env>, w: Write) -> Done {
    let mut done = Done::default();
    if let Err(e) = carry_out(&env, w, &mut done).await {
        done.error = Some(e);
    }
    done
}

async fn carry_out(env: &Env, w: Write, done: &mut Done) -> Result<(), IoError> {
    match w {
        Write::CreateClaim { key, vmi_uid, obj } => {
            tracing::info!(claim = %key, rule = "G2", intent = "create-claim", "writing");
            let what = obj.obj_ref();
            // AlreadyExists: someone made it, and the cache does not show
            // it yet; it does once the watch reaches its version.
            let made = match write_own(env, what, 0, OwnWrite::Create(*obj), RuleId::G2).await? {
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
        Write::DeleteVmi(d) => {
            let VmiDelete {
                key,
                uid,
                resource_version,
                event,
                rule,
                restart,
            } = *d;
            // E2: only a VM that starts a deleted VMI again is restarted
            // by deleting it; any other is kept, and said so.
            if let Some(r) = &restart {
                match would_not_restart(env, &r.vm).await {
                    Ok(None) => {}
                    Ok(Some(why)) => {
                        done.kept = Some((uid, why));
                        return Ok(());
                    }
                    Err(e) => {
                        done.restart_failed = Some((uid, r.mark.is_none()));
                        return Err(e);
                    }
                }
            }
            // E2: the mark first, so that the restart is counted by any
            // controller that comes after this one, whatever happens next.
            if let Some(RestartWrite {
                node,
                mark: Some(mark),
                ..
            }) = &restart
            {
                tracing::info!(node, vmi = %key, rule = %rule, intent = "mark-restart", "writing");
                let patch = mark_patch([(uid.as_str(), Some(mark))]);
                match write_node(env, node, patch, rule).await {
                    Ok(rv) => done.marks.push((uid.clone(), rv)),
                    Err(e) => {
                        done.restart_failed = Some((uid, false));
                        return Err(e);
                    }
                }
            }
            tracing::warn!(vmi = %key, rule = %rule, intent = "delete-vmi", "{}", event.message);
            let (ns, name) = crate::world::split_key(&key);
            let what = ObjRef::new(Kind::Vmi, Some(ns), name);
            let pre = Preconditions {
                uid: Some(uid.clone()),
                resource_version: Some(resource_version.clone()),
            };
            let known = resource_version.parse().unwrap_or(0);
            let marked = restart.is_some();
            match write(env, what, known, OwnWrite::Delete(pre), rule).await {
                Ok(_) => super::super::events::publish(env, event),
                // E2: not the VMI the evacuation decided on (its status
                // changed, or it was made again): no restart began, and
                // the evacuation judges its mark again on the newer version.
                Err(IoError::Newer { .. }) if marked => {
                    done.restart_failed = Some((uid, true));
                    return Ok(());
                }
                // G7: done too (the next version is decided on afresh).
                Err(IoError::Newer { .. }) => {}
                Err(e) => {
                    if marked {
                        done.restart_failed = Some((uid, true));
                    }
                    return Err(e);
                }
            }
            match restart {
                Some(r) => done.restarted = Some((r.vm, uid)),
                None => done.deleted_vmi = Some((key, uid, resource_version)),
            }
        }
        Write::EndRestarts(ends) => {
            let mut ends = ends.into_iter();
            while let Some(end) = ends.next() {
                tracing::info!(node = %end.node, rule = "E2", intent = "end-restarts", "writing");
                let patch = mark_patch(end.uids.iter().map(|u| (u.as_str(), None)));
                match write_node(env, &end.node, patch, RuleId::E2).await {
                    Ok(rv) => {
                        done.marks.extend(end.uids.into_iter().map(|u| (u, rv)));
                        for e in end.events {
                            super::super::events::publish(env, e);
                        }
                    }
                    // The node changed under the patch, or is gone (and its
                    // marks with it): the next look judges them again.
                    Err(IoError::Newer { .. }) => done.marks_failed.extend(end.uids),
                    // Stopped here: this node's removals and the rest are
                    // judged again (none may stay pending for good).
                    Err(e) => {
                        done.marks_failed.extend(end.uids);
                        done.marks_failed.extend(ends.flat_map(|e| e.uids));
                        return Err(e);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Why the VM `vm` (namespace/name), read live, would not start its VMI
/// again once E2 deletes it; None when it would.
async fn would_not_restart(env: &Env, vm: &str) -> Result<Option<String>, IoError> {
    let (ns, name) = crate::world::split_key(vm);
    let what = ObjRef::new(Kind::Vm, Some(ns), name);
    match env.reader.get(what.clone()).await {
        Ok(Some(Obj::Vm(v))) => Ok(v.would_not_restart()),
        Ok(Some(other)) => Err(IoError::Unexpected {
            asked: Kind::Vm,
            got: other.kind(),
        }),
        Ok(None) => Ok(Some("its VirtualMachine is gone".into())),
        Err(source) => Err(IoError::read(what, source)),
    }
}

/// The merge patch that writes (Some) or removes (None) restart marks.
fn mark_patch<'a>(
    marks: impl IntoIterator<Item = (&'a str, Option<&'a RestartMark>)>,
) -> serde_json::Value {
    let annotations: serde_json::Map<String, serde_json::Value> = marks
        .into_iter()
        .map(|(uid, m)| {
            let value = m.map_or(serde_json::Value::Null, |m| m.value().into());
            (RestartMark::annotation(uid), value)
        })
        .collect();
    serde_json::json!({ "metadata": { "annotations": annotations } })
}

/// A merge patch of a node: the resourceVersion it returned; a node that
/// is gone is `IoError::Newer` (nothing left to write on).
async fn write_node(
    env: &Env,
    node: &str,
    patch: serde_json::Value,
    rule: RuleId,
) -> Result<u64, IoError> {
    let what = ObjRef::new(Kind::Node, None, node);
    match write(env, what.clone(), 0, OwnWrite::MergePatch(patch), rule).await? {
        Some(o) => Ok(rv_number(o.meta())),
        None => Err(IoError::Newer { what }),
    }
}

/// Watches of different kinds are not ordered: the claim can be seen gone
/// before its allocation, which L8 deleted first. Only an allocation the
/// server still has is deleted.
async fn delete_allocation(
    env: &Env,
    key: String,
    uid: String,
    done: &mut Done,
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
        match write(env, what, known, OwnWrite::Delete(pre), RuleId::Allocations).await {
            Ok(_) | Err(IoError::Newer { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    done.deleted_allocation = Some((key, uid));
    Ok(())
}

/// G4: allocations, then claim statuses, then each pod pinned and ungated.
/// A claim that moves off a node that cannot take the set (E1) has its
/// allocation and status written as E1's, and a `Moved` Event once its
/// status names the new node.
async fn place(env: &Env, plan: Plan, done: &mut Done) -> Result<(), IoError> {
    let Plan {
        node,
        allocations,
        device_claims,
        statuses,
        pods,
        moved,
    } = plan;
    let moved = |k: &str| moved.iter().find(|(m, _)| m == k).map(|(_, from)| from);
    let rule_of = |k: &str| moved(k).map_or(RuleId::G4, |_| RuleId::E1);
    for r in allocations {
        let rule = rule_of(&record_key(r.record()));
        write_allocation(env, &node, r, rule, done).await?;
    }
    for d in device_claims {
        allocate_device_claim(env, d).await?;
    }
    for (c, status) in statuses {
        let k = claim_key(&c);
        let rule = rule_of(&k);
        tracing::info!(claim = %k, rule = %rule, node = %node, intent = "bind", "writing");
        let landed = write_status(env, &c, status, rule, done).await?;
        if let (true, Some(from)) = (landed, moved(&k)) {
            super::super::events::publish(env, super::super::events::moved(&k, &c, from, &node));
        }
    }
    for pk in pods {
        pin_and_ungate(env, &node, pk, done).await?;
    }
    Ok(())
}

async fn write_allocation(
    env: &Env,
    node: &str,
    r: AllocationWrite,
    rule: RuleId,
    done: &mut Done,
) -> Result<(), IoError> {
    let (create, rec) = match r {
        AllocationWrite::Create(rec) => (true, rec),
        AllocationWrite::Move(rec) => (false, rec),
    };
    let k = record_key(&rec);
    tracing::info!(claim = %k, rule = %rule, node = %node, intent = "allocate", "writing");
    let spec = rec.spec.clone();
    let what = Obj::Allocation(rec.clone()).obj_ref();
    let w = if create {
        OwnWrite::Create(Obj::Allocation(rec))
    } else {
        // The allocation of a claim that moves (Lost, G6; or off a node
        // that cannot take the set, E1): its cached version, on the new node.
        let Some(mut cur) = env.world.allocation(&k).map(|r| GPUAllocation::clone(&r)) else {
            return Err(IoError::Newer { what });
        };
        cur.spec = spec.clone();
        OwnWrite::Update(Obj::Allocation(cur))
    };
    let written = write(env, what.clone(), 0, w, rule).await?;
    let Some(written) = written else {
        return Err(IoError::Newer { what });
    };
    done.allocations.push((k, spec, rv_number(written.meta())));
    Ok(())
}

/// D4: the ResourceClaim allocated to its record's devices, read live
/// first (its allocation is the truth a crash may have left half
/// written). Allocated so already: nothing to do. Allocated otherwise and
/// reserved for a pod: the devices in use stand, and placement waits on
/// the next look (the claim is not this placement's to undo). Allocated
/// otherwise and not reserved: cleared, then written anew, as Kubernetes
/// lets an allocation change. A claim made anew (another uid) or gone is
/// `IoError::Newer`: the set is decided again.
async fn allocate_device_claim(env: &Env, d: DeviceClaimWrite) -> Result<(), IoError> {
    let (ns, name) = crate::world::split_key(&d.key);
    let what = ObjRef::new(Kind::ResourceClaim, Some(ns), name);
    let mut rc = match env.reader.get(what.clone()).await {
        Ok(Some(Obj::ResourceClaim(rc))) if rc.metadata.uid.as_deref() == Some(d.uid.as_str()) => {
            rc
        }
        Ok(_) => return Err(IoError::Newer { what }),
        Err(source) => return Err(IoError::read(what, source)),
    };
    let wanted = allocated_devices(&d.allocation);
    let status = rc.status.get_or_insert_default();
    if let Some(now) = &status.allocation {
        if allocated_devices(now) == wanted {
            return Ok(());
        }
        if status.reserved_for.as_ref().is_some_and(|r| !r.is_empty()) {
            return Err(IoError::Newer { what });
        }
        tracing::info!(claim = %d.claim, resource_claim = %d.key, rule = "D4", intent = "clear-allocation", "writing");
        status.allocation = None;
        rc = write_claim_status(env, &what, rc).await?;
    }
    tracing::info!(claim = %d.claim, resource_claim = %d.key, rule = "D4", intent = "allocate-devices", "writing");
    rc.status.get_or_insert_default().allocation = Some(d.allocation);
    write_claim_status(env, &what, rc).await.map(|_| ())
}

/// D4: a ResourceClaim's status replaced on the version read; the claim
/// as written, or `IoError::Newer` when it is gone.
async fn write_claim_status(
    env: &Env,
    what: &ObjRef,
    rc: ResourceClaim,
) -> Result<ResourceClaim, IoError> {
    let known = rv_number(&rc.metadata);
    let w = OwnWrite::UpdateStatus(Obj::ResourceClaim(rc));
    match write(env, what.clone(), known, w, RuleId::D4).await? {
        Some(Obj::ResourceClaim(written)) => Ok(written),
        _ => Err(IoError::Newer { what: what.clone() }),
    }
}

async fn pin_and_ungate(env: &Env, node: &str, pk: String, done: &mut Done) -> Result<(), IoError> {
    let (ns, name) = crate::world::split_key(&pk);
    let what = ObjRef::new(Kind::Pod, Some(ns), name);
    let mut pod = match env.reader.get(what.clone()).await {
        Ok(Some(Obj::Pod(p))) => p,
        Ok(_) => return Ok(()),
        Err(source) => return Err(IoError::read(what, source)),
    };
    if !crate::api::pod::is_gated(&pod) {
        return Ok(());
    }
    let spec = pod.spec.get_or_insert_default();
    spec.node_selector
        .get_or_insert_default()
        .insert(HOSTNAME_LABEL.into(), node.to_string());
    if let Some(g) = spec.scheduling_gates.as_mut() {
        g.retain(|g| g.name != SCHEDULING_GATE);
    }
    if spec.scheduling_gates.as_ref().is_some_and(|g| g.is_empty()) {
        spec.scheduling_gates = None;
    }
    tracing::info!(pod = %pk, rule = "G4", node = %node, intent = "pin-and-ungate", "writing");
    let created = pod.metadata.creation_timestamp.clone();
    let known = rv_number(&pod.metadata);
    let Some(o) = write(
        env,
        what,
        known,
        OwnWrite::Update(Obj::Pod(pod)),
        RuleId::G4,
    )
    .await?
    else {
        return Ok(());
    };
    if let Some(t) = created {
        let waited = env.clock.wall().duration_since(t.0);
        env.telemetry
            .gate_wait(waited.try_into().unwrap_or_default());
    }
    if let Obj::Pod(p) = &o
        && let Some(u) = PodUse::from_pod(p)
    {
        done.pods.push((pk, rv_number(o.meta()), u));
    }
    Ok(())
}
