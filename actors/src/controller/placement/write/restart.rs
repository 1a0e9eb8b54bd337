//! E2's writes beside a VMI's delete: the live read of its VM (would it
//! start the VMI again?) and the restart marks on the node, merge-patched.

use super::*;
use crate::api::{RestartMark, rv_number};
use crate::controller::Env;
use crate::controller::pacer::{IoError, ObjectWrite};
use crate::ports::{Kind, Obj, ObjRef};
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

/// The merge patch that writes (Some) or removes (None) restart marks.
pub(super) fn mark_patch<'a>(
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
pub(super) async fn write_node(
    env: &Env,
    node: &str,
    patch: serde_json::Value,
    rule: RuleId,
) -> Result<u64, IoError> {
    let what = ObjRef::new(Kind::Node, None, node);
    match write(env, what.clone(), 0, ObjectWrite::MergePatch(patch), rule).await? {
        Some(o) => Ok(rv_number(o.meta())),
        None => Err(IoError::Newer { what }),
    }
}
