//! E2's writes beside a VMI's delete: the live read of its VM (would it
//! start the VMI again?) and the restart marks on the node, merge-patched.

use super::*;
use crate::api::{EVACUATION_FINALIZER, RestartMark, rv_number};
use crate::controller::Env;
use crate::controller::pacer::{IoError, ObjectWrite};
use crate::ports::{Kind, Obj, ObjRef, PatchBody};
use crate::rules::RuleId;

/// Why the VM `vm` (namespace/name), read live, would not start its VMI
/// again once E2 deletes it; None when it would.
pub(super) async fn would_not_restart(env: &Env, vm: &str) -> Result<Option<String>, IoError> {
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

/// What a patch of restart marks does to E2's finalizer on the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Finalizer {
    /// Put on with a mark: the node, deleted, stays until its restarts
    /// are over.
    Hold,
    /// Taken off with the last mark.
    Release,
    /// Left as it is (other marks stay).
    Keep,
}

/// The strategic merge patch that writes (Some) or removes (None) restart
/// marks, and puts on or takes off E2's finalizer in the same write (a
/// controller stopped between two writes leaves no mark without its
/// finalizer). Strategic, as the node's finalizers are a list others
/// write too: it merges as a set, where a merge patch would replace it.
pub(super) fn mark_patch<'a>(
    marks: impl IntoIterator<Item = (&'a str, Option<&'a RestartMark>)>,
    finalizer: Finalizer,
) -> PatchBody {
    let annotations: serde_json::Map<String, serde_json::Value> = marks
        .into_iter()
        .map(|(uid, m)| {
            let value = m.map_or(serde_json::Value::Null, |m| m.value().into());
            (RestartMark::annotation(uid), value)
        })
        .collect();
    let mut meta = serde_json::json!({ "annotations": annotations });
    match finalizer {
        Finalizer::Hold => meta["finalizers"] = serde_json::json!([EVACUATION_FINALIZER]),
        Finalizer::Release => {
            meta["$deleteFromPrimitiveList/finalizers"] = serde_json::json!([EVACUATION_FINALIZER])
        }
        Finalizer::Keep => {}
    }
    PatchBody::Strategic(serde_json::json!({ "metadata": meta }))
}

/// A patch of a node: the resourceVersion it returned; a node that is
/// gone is `IoError::Newer` (nothing left to write on).
pub(super) async fn write_node(
    env: &Env,
    node: &str,
    patch: PatchBody,
    rule: RuleId,
) -> Result<u64, IoError> {
    let what = ObjRef::new(Kind::Node, None, node);
    match write(env, what.clone(), 0, ObjectWrite::Patch(patch), rule).await? {
        Some(o) => Ok(rv_number(o.meta())),
        None => Err(IoError::Newer { what }),
    }
}

/// E2: the restart marks of VMs now running elsewhere taken off their
/// nodes, a node at a time; where a patch does not land, the marks it
/// carried (and, on an error, the rest) are judged again.
pub(super) async fn end_restarts(
    env: &Env,
    ends: Vec<EndRestarts>,
    done: &mut WritesDone,
) -> Result<(), IoError> {
    let mut ends = ends.into_iter();
    while let Some(end) = ends.next() {
        tracing::info!(node = %end.node, rule = "E2", intent = "end-restarts", release = end.release, "writing");
        let finalizer = if end.release {
            Finalizer::Release
        } else {
            Finalizer::Keep
        };
        let patch = mark_patch(end.uids.iter().map(|u| (u.as_str(), None)), finalizer);
        let release = end.release.then(|| end.node.clone());
        match write_node(env, &end.node, patch, RuleId::E2).await {
            Ok(rv) => {
                done.restarts.released.extend(release.map(|n| (n, rv)));
                done.restarts
                    .marks
                    .extend(end.uids.into_iter().map(|u| (u, rv)));
                for e in end.events {
                    crate::controller::events::publish(env, e);
                }
            }
            // The node changed under the patch, or is gone (and its
            // marks with it): the next look judges them again.
            Err(IoError::Newer { .. }) => {
                done.restarts.released_failed.extend(release);
                done.restarts.marks_failed.extend(end.uids);
            }
            // Stopped here: this node's removals and the rest are
            // judged again (none may stay pending for good).
            Err(e) => {
                done.restarts.released_failed.extend(release);
                done.restarts.marks_failed.extend(end.uids);
                for e in ends {
                    done.restarts
                        .released_failed
                        .extend(e.release.then_some(e.node));
                    done.restarts.marks_failed.extend(e.uids);
                }
                return Err(e);
            }
        }
    }
    Ok(())
}
