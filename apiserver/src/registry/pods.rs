//! Graceful pod deletion, as the pod registry does it: a pod bound to a
//! node and still running is not removed by DELETE but marked Terminating
//! (deletionTimestamp `now + grace`), still on its node and still holding
//! its devices, until its kubelet has stopped it and deletes it again with
//! no grace (the stand-in plays that kubelet). An unscheduled or finished
//! pod, or a DELETE with `gracePeriodSeconds: 0`, goes at once.

use crate::store::{Apply, Store, StoreError, Written};
use serde_json::Value;

/// The registry's default when a pod sets no `terminationGracePeriodSeconds`.
const DEFAULT_GRACE: u64 = 30;

/// The grace a pod's deletion gets: 0 when the pod is not running on a
/// node (upstream's `CheckGracefulDelete`).
fn grace_for(pod: &Value, asked: Option<u64>) -> u64 {
    let unscheduled = pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty);
    let finished = matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    if unscheduled || finished {
        return 0;
    }
    asked
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_u64())
        .unwrap_or(DEFAULT_GRACE)
}

/// DELETE of a pod; `grace` is the request's `gracePeriodSeconds`.
pub(crate) fn delete(
    store: &Store,
    ns: &str,
    name: &str,
    uid: Option<&str>,
    rv: Option<&str>,
    grace: Option<u64>,
    how: Apply,
) -> Result<Written, StoreError> {
    let Some(pod) = store.get("Pod", ns, name) else {
        return Err(StoreError::NotFound(format!("Pod {ns}/{name}")));
    };
    let terminating = pod["metadata"]["deletionTimestamp"].is_string();
    // A forced delete (grace 0) of a terminating pod is the kubelet's
    // confirmation, or an admin's --force: it goes now.
    if grace_for(&pod, grace) == 0 || (terminating && grace == Some(0)) {
        return store.delete_with("Pod", ns, name, uid, rv, how);
    }
    store.mark_deleting("Pod", ns, name, uid, grace_for(&pod, grace), how, |_| {})
}

/// Pods a kubelet would stop: those marked Terminating on their node.
pub(crate) fn terminating(store: &Store) -> Vec<(String, String)> {
    store
        .list("Pod")
        .0
        .into_iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_string())
        .filter(|p| {
            p["metadata"]["finalizers"]
                .as_array()
                .is_none_or(Vec::is_empty)
        })
        .map(|p| {
            let m = &p["metadata"];
            (
                m["namespace"].as_str().unwrap_or_default().to_string(),
                m["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn store_with(pod: Value) -> Store {
        let s = Store::new(Arc::new(k8s_openapi::jiff::Timestamp::now), &["Pod"]);
        s.seed("Pod", pod);
        s
    }

    fn pod(node: Option<&str>, phase: &str) -> Value {
        json!({"metadata": {"name": "p", "namespace": "a"},
            "spec": {"nodeName": node}, "status": {"phase": phase}})
    }

    #[test]
    fn a_running_pod_on_a_node_is_terminating_until_its_kubelet_confirms() {
        let s = store_with(pod(Some("n1"), "Running"));
        let w = delete(&s, "a", "p", None, None, None, Apply::Commit).unwrap();
        assert!(!w.removed);
        assert_eq!(w.object["metadata"]["deletionGracePeriodSeconds"], 30);
        assert_eq!(terminating(&s), [("a".to_string(), "p".to_string())]);
        // Deleting again with its grace changes nothing; the kubelet's
        // confirmation (grace 0) removes it.
        assert!(
            !delete(&s, "a", "p", None, None, None, Apply::Commit)
                .unwrap()
                .changed
        );
        assert!(
            delete(&s, "a", "p", None, None, Some(0), Apply::Commit)
                .unwrap()
                .removed
        );
        assert!(s.get("Pod", "a", "p").is_none());
    }

    #[test]
    fn unscheduled_finished_or_forced_pods_go_at_once() {
        for (node, phase, grace) in [
            (None, "Pending", None),
            (Some("n1"), "Succeeded", None),
            (Some("n1"), "Failed", None),
            (Some("n1"), "Running", Some(0)),
        ] {
            let s = store_with(pod(node, phase));
            let w = delete(&s, "a", "p", None, None, grace, Apply::Commit).unwrap();
            assert!(w.removed, "{node:?} {phase} {grace:?}");
        }
    }
}
