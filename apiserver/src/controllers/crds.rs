//! The CustomResourceDefinitions controller, as kube-apiserver's
//! apiextensions runs it: a stored CRD is accepted (its names accepted,
//! Established, its storage version recorded in `status`), after which
//! its resource is served (`resources::Registry`); a deleted CRD takes its
//! custom resources with it.

use crate::store::{EventType, Store, Subresource};
use serde_json::{Value, json};
use std::sync::Arc;

fn established(crd: &Value) -> bool {
    crd["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    }) && crd["status"]["acceptedNames"] == crd["spec"]["names"]
}

/// The status kube-apiserver gives an accepted CRD.
fn accepted(crd: &Value, now: &str) -> Value {
    let storage: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter(|v| v["storage"] == true)
                .map(|v| v["name"].clone())
                .collect()
        })
        .unwrap_or_default();
    let cond = |t: &str, reason: &str, message: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message});
    json!({
        "acceptedNames": crd["spec"]["names"],
        "conditions": [
            cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
        "storedVersions": storage,
    })
}

fn accept(store: &Store, crd: &Value) {
    if established(crd) {
        return;
    }
    let mut o = crd.clone();
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    o["status"] = accepted(crd, &now);
    let _ = store.update("CustomResourceDefinition", o, Subresource::Status);
}

/// Deletes every custom resource of a deleted CRD's kind.
fn clean_up(store: &Store, crd: &Value) {
    let Some(kind) = crd["spec"]["names"]["kind"].as_str() else {
        return;
    };
    for o in store.list(kind).0 {
        let m = &o["metadata"];
        let s = |f: &str| m[f].as_str().unwrap_or_default();
        let _ = store.delete(kind, s("namespace"), s("name"));
    }
}

/// Accepts the CRDs stored before the server started (a restored etcd's).
pub fn accept_stored(store: &Store) {
    for crd in store.list("CustomResourceDefinition").0 {
        accept(store, &crd);
    }
}

/// Runs until the store is dropped.
pub async fn control(store: Arc<Store>) {
    let (mut rx, _) = store.watch();
    accept_stored(&store);
    while let Some(ev) = rx.recv().await {
        if ev.kind != "CustomResourceDefinition" {
            continue;
        }
        match ev.type_ {
            EventType::Deleted => clean_up(&store, &ev.object),
            _ => accept(&store, &ev.object),
        }
    }
}
