use super::*;
use std::sync::Arc;

fn store() -> Store {
    Store::new(Arc::new(k8s_openapi::jiff::Timestamp::now), &["Pod", PDB])
}

fn pod(store: &Store, name: &str, ready: bool, owner: Option<(&str, &str)>) {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
    if let Some((kind, owner)) = owner {
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind,
            "name": owner, "uid": "u", "controller": true}]);
    }
    store.seed("Pod", p);
}

fn budget(spec: Value) -> Value {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": "web"}});
    json!({"apiVersion": "policy/v1", "kind": PDB,
        "metadata": {"name": "b", "namespace": "ns", "generation": 2}, "spec": spec})
}

#[test]
fn min_available_counts_ready_pods_and_allows_what_is_above_it() {
    let s = store();
    for (name, ready) in [("a", true), ("b", true), ("c", true), ("d", false)] {
        pod(&s, name, ready, None);
    }
    let st = status(&s, &budget(json!({"minAvailable": 2})));
    assert_eq!(st["currentHealthy"], 3);
    assert_eq!(st["desiredHealthy"], 2);
    assert_eq!(st["expectedPods"], 4);
    assert_eq!(st["disruptionsAllowed"], 1);
    assert_eq!(st["observedGeneration"], 2);
    assert_eq!(st["conditions"][0]["reason"], "SufficientPods");
    let none = status(&s, &budget(json!({"minAvailable": 3})));
    assert_eq!(none["disruptionsAllowed"], 0);
    assert_eq!(none["conditions"][0]["status"], "False");
}

#[test]
fn max_unavailable_and_percentages_scale_by_the_controllers_replicas() {
    let s = store();
    s.seed(
        "ReplicaSet",
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "rs", "namespace": "ns"}, "spec": {"replicas": 4}}),
    );
    for name in ["a", "b", "c"] {
        pod(&s, name, true, Some(("ReplicaSet", "rs")));
    }
    // 4 wanted, 1 may be unavailable: 3 desired, 3 healthy, none allowed.
    let st = status(&s, &budget(json!({"maxUnavailable": 1})));
    assert_eq!(
        (st["expectedPods"].as_i64(), st["desiredHealthy"].as_i64()),
        (Some(4), Some(3))
    );
    assert_eq!(st["disruptionsAllowed"], 0);
    // 50% of 4 rounded up is 2: one allowed.
    let st = status(&s, &budget(json!({"minAvailable": "50%"})));
    assert_eq!(st["desiredHealthy"], 2);
    assert_eq!(st["disruptionsAllowed"], 1);
}

#[test]
fn a_pod_evicted_and_not_yet_deleted_counts_as_disrupted_not_healthy() {
    let s = store();
    for name in ["a", "b"] {
        pod(&s, name, true, None);
    }
    let mut b = budget(json!({"minAvailable": 1}));
    let stamp = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    b["status"] = json!({"disruptedPods": {"a": stamp, "gone": stamp}});
    let st = status(&s, &b);
    assert_eq!(st["currentHealthy"], 1);
    assert_eq!(st["disruptionsAllowed"], 0);
    assert_eq!(st["disruptedPods"].as_object().map(|m| m.len()), Some(1));
}

#[test]
fn a_budget_selects_only_its_namespaces_pods_and_none_without_a_selector() {
    let s = store();
    pod(&s, "a", true, None);
    let mut b = budget(json!({"minAvailable": 1}));
    s.seed(PDB, b.clone());
    let p = s.get("Pod", "ns", "a").unwrap();
    assert_eq!(budgets_for(&s, &p).len(), 1);
    b["metadata"]["name"] = json!("no-selector");
    b["spec"].as_object_mut().unwrap().remove("selector");
    s.seed(PDB, b);
    assert_eq!(budgets_for(&s, &p).len(), 1);
}
