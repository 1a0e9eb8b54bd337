//! G4's writes for a placed set, in their order: each allocation (with its
//! devices, D3), each pod's ResourceClaim allocated to them (D4), each
//! claim's status, then each launcher pod pinned to the node and ungated.

use super::*;
use crate::api::{GPUAllocation, HOSTNAME_LABEL, PodUse, SCHEDULING_GATE, rv_number};
use crate::controller::Env;
use crate::controller::pacer::{IoError, ObjectWrite, Outcome, write_object};
use crate::ports::{Kind, Obj, ObjRef};
use crate::rules::{AllocationWrite, DeviceClaimWrite, Plan, RuleId, allocated_devices};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::sync::Arc;

/// G4: allocations, then claim statuses, then each pod pinned and ungated.
/// A claim that moves off a node that cannot take the set (E1) has its
/// allocation and status written as E1's, and a `Moved` Event once its
/// status names the new node.
pub(super) async fn place(env: &Env, plan: Plan, done: &mut WritesDone) -> Result<(), IoError> {
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
        let rule = rule_of(&allocation_key(r.allocation()));
        write_allocation(env, &node, r, rule, done).await?;
    }
    for d in device_claims {
        allocate_device_claim(env, d, done).await?;
    }
    for (c, status) in statuses {
        let k = claim_key(&c);
        let rule = rule_of(&k);
        tracing::info!(claim = %k, rule = %rule, node = %node, intent = "bind", "writing");
        let landed = write_status(env, &c, status, rule, done).await?;
        if let (true, Some(from)) = (landed, moved(&k)) {
            crate::controller::events::publish(
                env,
                crate::controller::events::moved(&k, &c, from, &node),
            );
        }
    }
    for pk in pods {
        pin_and_ungate(env, &node, pk, done).await?;
    }
    Ok(())
}

pub(super) async fn write_allocation(
    env: &Env,
    node: &str,
    r: AllocationWrite,
    rule: RuleId,
    done: &mut WritesDone,
) -> Result<(), IoError> {
    let (create, rec) = match r {
        AllocationWrite::Create(rec) => (true, rec),
        AllocationWrite::Move(rec) => (false, rec),
    };
    let k = allocation_key(&rec);
    tracing::info!(claim = %k, rule = %rule, node = %node, intent = "allocate", "writing");
    let spec = rec.spec.clone();
    let what = Obj::Allocation(rec.clone()).obj_ref();
    let w = if create {
        ObjectWrite::Create(Obj::Allocation(rec))
    } else {
        // The allocation of a claim that moves (Lost, G6; or off a node
        // that cannot take the set, E1): its cached version, on the new node.
        let Some(mut cur) = env.world.allocation(&k).map(|r| GPUAllocation::clone(&r)) else {
            return Err(IoError::Newer { what });
        };
        cur.spec = spec.clone();
        ObjectWrite::Update(Obj::Allocation(cur))
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
pub(super) async fn allocate_device_claim(
    env: &Env,
    mut d: DeviceClaimWrite,
    done: &mut WritesDone,
) -> Result<(), IoError> {
    let (ns, name) = crate::world::split_key(&d.key);
    let what = ObjRef::new(Kind::ResourceClaim, Some(ns), name);
    let mut rc = match d.create.take() {
        Some(new) => {
            let made = create_backing_claim(env, &what, *new, &d).await?;
            done.resource_claims
                .push((d.key.clone(), rv_number(&made.metadata)));
            made
        }
        None => match env.reader.get(what.clone()).await {
            Ok(Some(Obj::ResourceClaim(rc)))
                if rc.metadata.uid.as_deref() == Some(d.uid.as_str()) =>
            {
                rc
            }
            Ok(_) => return Err(IoError::Newer { what }),
            Err(source) => return Err(IoError::read(what, source)),
        },
    };
    let wanted = allocated_devices(&d.allocation);
    let status = rc.status.get_or_insert_default();
    if status.allocation.is_some() && d.keep_allocated {
        return Ok(());
    }
    if let Some(now) = &status.allocation {
        let reserved = status.reserved_for.as_ref().is_some_and(|r| !r.is_empty());
        // An unstamped allocation (from before 1.36's scheduler stamped
        // them) is written again, stamped, unless a pod holds it already.
        if allocated_devices(now) == wanted && (now.allocation_timestamp.is_some() || reserved) {
            return Ok(());
        }
        if reserved {
            return Err(IoError::Newer { what });
        }
        tracing::info!(claim = %d.claim, resource_claim = %d.key, rule = "D4", intent = "clear-allocation", "writing");
        status.allocation = None;
        rc = write_claim_status(env, &what, rc).await?;
        done.resource_claims
            .push((d.key.clone(), rv_number(&rc.metadata)));
    }
    tracing::info!(claim = %d.claim, resource_claim = %d.key, rule = "D4", intent = "allocate-devices", "writing");
    let mut allocation = d.allocation;
    // Stamped as kube-scheduler stamps its own: from Kubernetes 1.36
    // (DRADeviceBindingConditions with DRAResourceClaimDeviceStatus, both
    // on by default) its PreBind stamps an allocation that has no
    // timestamp when it reserves the claim for the pod, and the API server
    // refuses that as a change to the allocation, so the pod would never
    // be bound.
    allocation.allocation_timestamp = Some(Time(env.clock.wall()));
    rc.status.get_or_insert_default().allocation = Some(allocation);
    let written = write_claim_status(env, &what, rc).await?;
    done.resource_claims
        .push((d.key.clone(), rv_number(&written.metadata)));
    Ok(())
}

/// D4: a named claim's backing claim made, as the plan has it; one its
/// GPUClaim owns there already (made by a write the cache does not show
/// yet, or before a crash) will do, as read live. One of another owner,
/// or one gone at once, is `IoError::Newer`: the set is decided again
/// (and waits `DeviceClaimConflict`).
async fn create_backing_claim(
    env: &Env,
    what: &ObjRef,
    new: ResourceClaim,
    d: &DeviceClaimWrite,
) -> Result<ResourceClaim, IoError> {
    tracing::info!(claim = %d.claim, resource_claim = %d.key, rule = "D4", intent = "create-backing-claim", "writing");
    let newer = || IoError::Newer { what: what.clone() };
    let w = ObjectWrite::Create(Obj::ResourceClaim(new));
    let rc = match write_object(env, what.clone(), 0, w, RuleId::D4).await? {
        Outcome::Written { object, .. } => Arc::unwrap_or_clone(object),
        Outcome::Conflict(o) => Arc::unwrap_or_clone(o),
        Outcome::Gone { .. } => return Err(newer()),
    };
    let Obj::ResourceClaim(rc) = rc else {
        return Err(newer());
    };
    let ours = d
        .owner_uid
        .as_deref()
        .is_some_and(|uid| crate::rules::controlled_by(&rc, uid));
    if !ours || rc.metadata.deletion_timestamp.is_some() {
        return Err(newer());
    }
    Ok(rc)
}

/// D4: a ResourceClaim's status replaced on the version read; the claim
/// as written, or `IoError::Newer` when it is gone.
pub(super) async fn write_claim_status(
    env: &Env,
    what: &ObjRef,
    rc: ResourceClaim,
) -> Result<ResourceClaim, IoError> {
    let known = rv_number(&rc.metadata);
    let w = ObjectWrite::UpdateStatus(Obj::ResourceClaim(rc));
    match write(env, what.clone(), known, w, RuleId::D4).await? {
        Some(Obj::ResourceClaim(written)) => Ok(written),
        _ => Err(IoError::Newer { what: what.clone() }),
    }
}

pub(super) async fn pin_and_ungate(
    env: &Env,
    node: &str,
    pk: String,
    done: &mut WritesDone,
) -> Result<(), IoError> {
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
        ObjectWrite::Update(Obj::Pod(pod)),
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
