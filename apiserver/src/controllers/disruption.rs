//! PodDisruptionBudgets, as kube-controller-manager's disruption
//! controller keeps their status (`pkg/controller/disruption`), which this
//! server stands in for as it does for garbage collection; the eviction
//! subresource (handlers/evict.rs) decides by that status.

use crate::store::{EventType, Store, StoreEvent, Subresource};
use serde_json::{Map, Value, json};

const PDB: &str = "PodDisruptionBudget";

/// How long an evicted pod counts as disrupted while its deletion has not
/// been seen (upstream's `DeletionTimeout`, 2 minutes).
const DELETION_TIMEOUT_SECS: i64 = 120;

/// The budgets in `pod`'s namespace whose selector selects it. A budget
/// with no selector selects nothing; an empty one, every pod (policy/v1).
pub(crate) fn budgets_for(store: &Store, pod: &Value) -> Vec<Value> {
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let labels = pod["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    in_namespace(store, PDB, ns)
        .into_iter()
        .filter(|b| selects(b, &labels))
        .collect()
}

fn selects(budget: &Value, labels: &Map<String, Value>) -> bool {
    let selector = &budget["spec"]["selector"];
    selector.is_object() && crate::registry::kind_rules::selects(selector, labels)
}

fn in_namespace(store: &Store, kind: &str, ns: &str) -> Vec<Value> {
    // A range of the store, not a copy of every object of the kind: this
    // runs on every pod change.
    store
        .list_page(kind, Some(ns), None, usize::MAX, |_| true)
        .0
}

/// A pod kube-controller-manager counts as healthy: not deleting, and
/// Ready (`apipod.IsPodReady`).
pub(crate) fn healthy(pod: &Value) -> bool {
    !pod["metadata"]["deletionTimestamp"].is_string()
        && pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// An IntOrString budget field against `expected` pods: an integer as it
/// is, a percentage of `expected` rounded up (`GetScaledValueFromIntOrPercent`).
fn scaled(v: &Value, expected: i64) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            Some((pct * expected + 99) / 100)
        }
        _ => None,
    }
}

/// The pods a budget's controllers want (`getExpectedScale`): the sum of
/// the `spec.replicas` of the selected pods' controllers that have a
/// scale, each counted once: a ReplicaSet a Deployment owns counts as the
/// Deployment, a StatefulSet and a ReplicationController as themselves.
/// Pods with no such controller are not counted.
fn expected_pods(store: &Store, ns: &str, pods: &[Value]) -> i64 {
    let mut controllers: Vec<(String, String)> = Vec::new();
    for p in pods {
        let Some((kind, name)) = controller_of(&p["metadata"]) else {
            continue;
        };
        let key = match kind.as_str() {
            "ReplicaSet" => store
                .get("ReplicaSet", ns, &name)
                .and_then(|rs| controller_of(&rs["metadata"]))
                .filter(|(k, _)| k == "Deployment")
                .unwrap_or((kind, name)),
            "StatefulSet" | "ReplicationController" => (kind, name),
            _ => continue,
        };
        if !controllers.contains(&key) {
            controllers.push(key);
        }
    }
    controllers
        .iter()
        .filter_map(|(kind, name)| store.get(kind, ns, name)?["spec"]["replicas"].as_i64())
        .sum()
}

/// The kind and name of an object's controller (its ownerReference with
/// `controller: true`).
fn controller_of(meta: &Value) -> Option<(String, String)> {
    let owner = meta["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"] == true)?;
    Some((
        owner["kind"].as_str()?.to_string(),
        owner["name"].as_str()?.to_string(),
    ))
}

/// The status the disruption controller writes for `budget` now, keeping
/// the pods evicted and not yet seen deleted (`disruptedPods`).
pub(crate) fn status(store: &Store, budget: &Value) -> Value {
    let ns = budget["metadata"]["namespace"].as_str().unwrap_or_default();
    let pods: Vec<Value> = in_namespace(store, "Pod", ns)
        .into_iter()
        .filter(|p| {
            let labels = p["metadata"]["labels"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            selects(budget, &labels)
        })
        .collect();
    let now = store.wall_now();
    let mut disrupted = Map::new();
    for (name, at) in budget["status"]["disruptedPods"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let live = pods.iter().any(|p| {
            p["metadata"]["name"] == name.as_str()
                && !p["metadata"]["deletionTimestamp"].is_string()
        });
        let fresh = at
            .as_str()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .is_some_and(|t| now.as_second() - t.as_second() < DELETION_TIMEOUT_SECS);
        if live && fresh {
            disrupted.insert(name.clone(), at.clone());
        }
    }
    let current = pods
        .iter()
        .filter(|p| healthy(p))
        .filter(|p| !disrupted.contains_key(p["metadata"]["name"].as_str().unwrap_or_default()))
        .count() as i64;
    let spec = &budget["spec"];
    let (expected, desired) = if let Some(max) = spec.get("maxUnavailable") {
        let expected = expected_pods(store, ns, &pods);
        let unavailable = scaled(max, expected).unwrap_or(0);
        (expected, (expected - unavailable).max(0))
    } else if let Some(Value::Number(n)) = spec.get("minAvailable") {
        (pods.len() as i64, n.as_i64().unwrap_or(0))
    } else if let Some(min) = spec.get("minAvailable") {
        let expected = expected_pods(store, ns, &pods);
        (expected, scaled(min, expected).unwrap_or(0))
    } else {
        // Neither bound: nothing expected, nothing allowed.
        (0, 0)
    };
    let allowed = if expected <= 0 {
        0
    } else {
        (current - desired).max(0)
    };
    let condition = condition(budget, allowed > 0, &store.now());
    let mut status = json!({
        "observedGeneration": budget["metadata"]["generation"].as_i64().unwrap_or(1),
        "disruptionsAllowed": allowed,
        "currentHealthy": current,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [condition],
    });
    if !disrupted.is_empty() {
        status["disruptedPods"] = Value::Object(disrupted);
    }
    status
}

/// The `DisruptionAllowed` condition, its transition time kept while its
/// status holds.
fn condition(budget: &Value, allowed: bool, now: &str) -> Value {
    let (status, reason) = match allowed {
        true => ("True", "SufficientPods"),
        false => ("False", "InsufficientPods"),
    };
    let previous = budget["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "DisruptionAllowed" && c["status"] == status);
    let since = previous
        .and_then(|c| c["lastTransitionTime"].as_str().map(str::to_owned))
        .unwrap_or_else(|| now.to_string());
    json!({"type": "DisruptionAllowed", "status": status, "reason": reason,
        "lastTransitionTime": since,
        "observedGeneration": budget["metadata"]["generation"].as_i64().unwrap_or(1)})
}

/// Writes `budget`'s status when it differs from what it says now.
fn refresh(store: &Store, budget: &Value) {
    let fresh = status(store, budget);
    if budget["status"] == fresh {
        return;
    }
    let mut updated = budget.clone();
    updated["status"] = fresh;
    let _ = store.update(PDB, updated, Subresource::Status);
}

/// The disruption controller's part of a change: a budget made or
/// changed, or a pod in its namespace changed, gets its status again.
pub(crate) fn keep_budgets(store: &Store, ev: &StoreEvent) {
    let ns = match (ev.kind.as_str(), ev.type_) {
        (PDB, EventType::Added | EventType::Modified) | ("Pod", _) => {
            ev.object["metadata"]["namespace"].as_str()
        }
        _ => None,
    };
    let Some(ns) = ns else {
        return;
    };
    for budget in in_namespace(store, PDB, ns) {
        refresh(store, &budget);
    }
}

#[cfg(test)]
mod tests;
