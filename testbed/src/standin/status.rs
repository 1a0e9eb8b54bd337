//! The status a stand-in writes as its component would: a pod scheduled or
//! not, its phase, a VMI's Ready condition.

use super::*;

pub(super) fn set_status(store: &Store, kind: &str, obj: &Value, f: impl FnOnce(&mut Value)) {
    let mut o = obj.clone();
    if !o["status"].is_object() {
        o["status"] = json!({});
    }
    f(&mut o["status"]);
    if let Err(e) = store.update(kind, o, Subresource::Status) {
        tracing::debug!(error = %e, "stand-in status write lost a race; next pass retries");
    }
}

/// Sets the pod's `PodScheduled` condition (kept when unchanged, so a pass
/// that finds the same answer writes nothing).
pub(super) fn pod_scheduled(s: &mut Value, ok: bool, message: Option<&str>) {
    let mut conds: Vec<Value> = s["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c["type"] != "PodScheduled")
        .collect();
    let mut c = json!({"type": "PodScheduled", "status": if ok { "True" } else { "False" }});
    if let Some(m) = message {
        c["reason"] = "Unschedulable".into();
        c["message"] = m.into();
    }
    conds.push(c);
    s["conditions"] = conds.into();
    if s["phase"].is_null() {
        s["phase"] = "Pending".into();
    }
}

/// The VMI's `Ready` condition as virt-controller keeps it
/// (`syncReadyConditionFromPod`): True once the guest runs in a Ready
/// launcher pod, else False with why (`GuestNotRunning`,
/// `PodTerminating`, `PodNotExists`).
pub(crate) fn vmi_ready(s: &mut Value, ready: bool, reason: &str) {
    let mut conds: Vec<Value> = s["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c["type"] != "Ready")
        .collect();
    let mut c =
        serde_json::json!({"type": "Ready", "status": if ready { "True" } else { "False" }});
    if !reason.is_empty() {
        c["reason"] = reason.into();
    }
    conds.push(c);
    s["conditions"] = conds.into();
}

/// The kubelet's conditions for a pod in `phase`: Running, its containers
/// started and Ready (what a PodDisruptionBudget counts as healthy);
/// finished, no longer Ready (reason `PodCompleted`, as the kubelet says).
pub(super) fn pod_phase(s: &mut Value, phase: &str) {
    s["phase"] = phase.into();
    let ready = phase == "Running";
    let reason = (!ready).then_some("PodCompleted");
    let mut conds: Vec<Value> = s["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| {
            !matches!(
                c["type"].as_str(),
                Some("Initialized" | "ContainersReady" | "Ready")
            )
        })
        .collect();
    conds.push(json!({"type": "Initialized", "status": "True"}));
    for kind in ["ContainersReady", "Ready"] {
        let mut c = json!({"type": kind, "status": if ready { "True" } else { "False" }});
        if let Some(r) = reason {
            c["reason"] = r.into();
        }
        conds.push(c);
    }
    s["conditions"] = conds.into();
}
