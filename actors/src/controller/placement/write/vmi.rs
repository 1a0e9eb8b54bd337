//! A VMI's delete: G7's (a pinned pod the scheduler cannot place), and
//! E2's restart of an evacuated VM, whose mark on the node is written
//! first and which only a VM that starts its VMI again gets.

use super::restart::{Finalizer, mark_patch, would_not_restart, write_node};
use super::{RestartWrite, VmiDelete, WritesDone, write};
use crate::controller::Env;
use crate::controller::pacer::{IoError, ObjectWrite};
use crate::ports::{Kind, ObjRef, Preconditions};

pub(super) async fn delete_vmi(
    env: &Env,
    d: VmiDelete,
    done: &mut WritesDone,
) -> Result<(), IoError> {
    let VmiDelete {
        key,
        uid,
        resource_version,
        event,
        rule,
        restart,
    } = d;
    // E2: only a VM that starts a deleted VMI again is restarted
    // by deleting it; any other is kept, and said so.
    if let Some(r) = &restart {
        match would_not_restart(env, &r.vm).await {
            Ok(None) => {}
            Ok(Some(why)) => {
                done.restarts.kept = Some((uid, why));
                return Ok(());
            }
            Err(e) => {
                done.restarts.failed = Some((uid, r.mark.is_none()));
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
        let patch = mark_patch([(uid.as_str(), Some(mark))], Finalizer::Hold);
        match write_node(env, node, patch, rule).await {
            Ok(rv) => done.restarts.marks.push((uid.clone(), rv)),
            Err(e) => {
                done.restarts.failed = Some((uid, false));
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
    match write(env, what, known, ObjectWrite::Delete(pre), rule).await {
        Ok(_) => crate::controller::events::publish(env, event),
        // E2: not the VMI the evacuation decided on (its status
        // changed, or it was made again): no restart began, and
        // the evacuation judges its mark again on the newer version.
        Err(IoError::Newer { .. }) if marked => {
            done.restarts.failed = Some((uid, true));
            return Ok(());
        }
        // G7: done too (the next version is decided on afresh).
        Err(IoError::Newer { .. }) => {}
        Err(e) => {
            if marked {
                done.restarts.failed = Some((uid, true));
            }
            return Err(e);
        }
    }
    match restart {
        Some(r) => done.restarts.restarted = Some((r.vm, uid)),
        None => done.deleted_vmi = Some((key, uid, resource_version)),
    }
    Ok(())
}
