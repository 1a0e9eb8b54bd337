//! Carrying out placement's intents through the ports, stopping at the
//! first write that fails; what landed is reported so that the next
//! decision follows from it.

use super::super::Env;
use super::super::journal::Intent;
use super::super::scaffold::IoError;
use crate::api::{
    GPUAllocation, GPUAllocationSpec, GPUClaim, GPUClaimStatus, HOSTNAME_LABEL, PodUse,
    SCHEDULING_GATE, rv_number,
};
use crate::ports::{Event, Kind, Obj, ObjRef, Preconditions, WriteError};
use crate::rules::{AllocationWrite, Plan, RuleId};
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
    /// G7: delete the VMI whose pinned pod cannot be placed, on the
    /// preconditions the cache showed; its Warning Event once issued.
    DeleteVmi {
        key: String,
        uid: String,
        resource_version: String,
        event: Event,
    },
}

impl Write {
    pub(super) fn rule(&self) -> RuleId {
        match self {
            Write::CreateClaim { .. } => RuleId::G2,
            Write::DeleteAllocation { .. } => RuleId::Records,
            Write::Place(_) => RuleId::G4,
            Write::Wait(_) => RuleId::G5,
            Write::DeleteVmi { .. } => RuleId::G7,
        }
    }

    pub(super) fn intent(&self) -> Intent {
        match self {
            Write::CreateClaim { .. } => Intent::CreateClaim,
            Write::DeleteAllocation { .. } => Intent::DeleteAllocation,
            Write::Place(_) => Intent::Place,
            Write::Wait(_) => Intent::Wait,
            Write::DeleteVmi { .. } => Intent::DeleteVmi,
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
    pub error: Option<IoError>,
}

fn claim_key(c: &GPUClaim) -> String {
    key(
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.name.as_deref().unwrap_or_default(),
    )
}

pub(super) async fn execute(env: Arc<Env>, write: Write) -> Done {
    let mut done = Done::default();
    let w = &env.writer;
    match write {
        Write::CreateClaim { key, vmi_uid, obj } => {
            tracing::info!(claim = %key, rule = "G2", intent = "create-claim", "writing");
            let what = obj.obj_ref();
            match w.create(*obj, RuleId::G2).await {
                Ok(o) => done.created = Some((key, vmi_uid, rv_number(o.meta()))),
                // AlreadyExists: someone made it, and the cache does not
                // show it yet; it does once the watch reaches its version.
                Err(WriteError::Conflict(_)) => match env.reader.get(what.clone()).await {
                    Ok(Some(o)) => done.created = Some((key, vmi_uid, rv_number(o.meta()))),
                    Ok(None) => {}
                    Err(source) => done.error = Some(IoError::read(what, source)),
                },
                Err(e) => done.error = Some(e.into()),
            }
        }
        Write::DeleteAllocation { key, uid } => delete_allocation(&env, key, uid, &mut done).await,
        Write::Wait(changes) => {
            for (c, status) in changes {
                let k = claim_key(&c);
                tracing::info!(claim = %k, rule = "G5", intent = "waiting", "writing");
                let mut new = GPUClaim::clone(&c);
                new.status = Some(status);
                match w.replace_status(Obj::Claim(new), RuleId::G5).await {
                    Ok(o) => done.claims.push((k, rv_number(o.meta()))),
                    Err(e) => {
                        done.error = Some(e.into());
                        return done;
                    }
                }
            }
        }
        Write::Place(plan) => place(&env, *plan, &mut done).await,
        Write::DeleteVmi {
            key,
            uid,
            resource_version,
            event,
        } => {
            tracing::warn!(vmi = %key, rule = "G7", intent = "delete-vmi", "{}", event.message);
            let (ns, name) = crate::world::split_key(&key);
            let what = ObjRef::new(Kind::Vmi, Some(ns), name);
            let pre = Preconditions {
                uid: Some(uid.clone()),
                resource_version: Some(resource_version.clone()),
            };
            match w.delete(what, pre, RuleId::G7).await {
                Ok(_) => {
                    super::super::events::publish(&env, event);
                    done.deleted_vmi = Some((key, uid, resource_version));
                }
                // Done too: gone, or not the VMI the cache showed (the next
                // version is decided on afresh).
                Err(WriteError::NotFound) | Err(WriteError::Conflict(_)) => {
                    done.deleted_vmi = Some((key, uid, resource_version));
                }
                Err(e) => done.error = Some(e.into()),
            }
        }
    }
    done
}

/// Watches of different kinds are not ordered: the claim can be seen gone
/// before its allocation, which L8 deleted first. Only an allocation the
/// server still has is deleted.
async fn delete_allocation(env: &Env, key: String, uid: String, done: &mut Done) {
    let (ns, name) = crate::world::split_key(&key);
    let what = ObjRef::new(Kind::Allocation, Some(ns), name);
    let live = match env.reader.get(what.clone()).await {
        Ok(live) => live,
        Err(source) => {
            done.error = Some(IoError::read(what, source));
            return;
        }
    };
    if live
        .as_ref()
        .is_some_and(|l| l.meta().uid.as_ref() == Some(&uid))
    {
        tracing::info!(record = %key, rule = "records", intent = "delete-record", "writing");
        let pre = Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        };
        match env.writer.delete(what, pre, RuleId::Records).await {
            Ok(_) | Err(WriteError::NotFound) | Err(WriteError::Conflict(_)) => {}
            Err(e) => done.error = Some(e.into()),
        }
    }
    done.deleted_allocation = Some((key, uid));
}

/// G4: allocations, then claim statuses, then each pod pinned and ungated.
async fn place(env: &Env, plan: Plan, done: &mut Done) {
    for r in plan.allocations {
        if let Err(e) = write_allocation(env, &plan.node, r, done).await {
            done.error = Some(e);
            return;
        }
    }
    for (c, status) in plan.statuses {
        let k = claim_key(&c);
        tracing::info!(claim = %k, rule = "G4", node = %plan.node, intent = "bind", "writing");
        let mut new = GPUClaim::clone(&c);
        new.status = Some(status);
        match env.writer.replace_status(Obj::Claim(new), RuleId::G4).await {
            Ok(o) => done.claims.push((k, rv_number(o.meta()))),
            Err(e) => {
                done.error = Some(e.into());
                return;
            }
        }
    }
    for pk in plan.pods {
        if let Err(e) = pin_and_ungate(env, &plan.node, pk, done).await {
            done.error = Some(e);
            return;
        }
    }
}

async fn write_allocation(
    env: &Env,
    node: &str,
    r: AllocationWrite,
    done: &mut Done,
) -> Result<(), IoError> {
    let (create, rec) = match r {
        AllocationWrite::Create(rec) => (true, rec),
        AllocationWrite::Move(rec) => (false, rec),
    };
    let k = key(
        rec.metadata.namespace.as_deref().unwrap_or_default(),
        rec.metadata.name.as_deref().unwrap_or_default(),
    );
    tracing::info!(claim = %k, rule = "G4", node = %node, intent = "record", "writing");
    let spec = rec.spec.clone();
    let written = if create {
        env.writer.create(Obj::Allocation(rec), RuleId::G4).await
    } else {
        // The Lost claim's allocation moves: its cached version, on the new node.
        let Some(mut cur) = env.world.allocation(&k).map(|r| GPUAllocation::clone(&r)) else {
            return Err(WriteError::Conflict("allocation not cached".into()).into());
        };
        cur.spec = spec.clone();
        env.writer.replace(Obj::Allocation(cur), RuleId::G4).await
    }?;
    done.allocations.push((k, spec, rv_number(written.meta())));
    Ok(())
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
    let o = env.writer.replace(Obj::Pod(pod), RuleId::G4).await?;
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
