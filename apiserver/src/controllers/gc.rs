//! Garbage collection by ownerReferences, in the background as the API
//! server's collector does it: when an object is gone, each dependent none
//! of whose owners exists any more is deleted (and so on down the graph).

use crate::store::{Apply, EventType, Store};
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;

fn owner_uids(o: &Value) -> Vec<&str> {
    o["metadata"]["ownerReferences"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["uid"].as_str()).collect())
        .unwrap_or_default()
}

/// Every object, with its store kind.
fn everything(store: &Store) -> Vec<(String, Value)> {
    store.everything()
}

/// The dependents of `uid` that no live owner keeps: (kind, namespace, name).
pub fn orphans_of(store: &Store, uid: &str) -> Vec<(String, String, String)> {
    let all = everything(store);
    let live: HashSet<&str> = all
        .iter()
        .filter_map(|(_, o)| o["metadata"]["uid"].as_str())
        .collect();
    all.iter()
        .filter(|(_, o)| {
            let owners = owner_uids(o);
            owners.contains(&uid) && owners.iter().all(|u| !live.contains(u))
        })
        .map(|(k, o)| {
            let m = &o["metadata"];
            let s = |f: &str| m[f].as_str().unwrap_or_default().to_string();
            (k.clone(), s("namespace"), s("name"))
        })
        .collect()
}

/// Removes the owner reference to `uid` from every dependent (Orphan).
pub fn orphan_dependents(store: &Store, uid: &str) {
    for (kind, mut o) in everything(store) {
        let Some(refs) = o["metadata"]["ownerReferences"].as_array_mut() else {
            continue;
        };
        let before = refs.len();
        refs.retain(|r| r["uid"] != uid);
        if refs.len() != before {
            let _ = store.update(&kind, o, crate::store::Subresource::Main);
        }
    }
}

/// Deletes the dependents of `uid` now (Foreground, without waiting for
/// their finalizers).
pub fn delete_dependents(store: &Store, uid: &str) {
    for (kind, ns, name) in orphans_of_any(store, uid) {
        delete(store, &kind, &ns, &name);
    }
}

fn orphans_of_any(store: &Store, uid: &str) -> Vec<(String, String, String)> {
    everything(store)
        .into_iter()
        .filter(|(_, o)| owner_uids(o).contains(&uid))
        .map(|(k, o)| {
            let m = &o["metadata"];
            let s = |f: &str| m[f].as_str().unwrap_or_default().to_string();
            (k, s("namespace"), s("name"))
        })
        .collect()
}

/// Deletes a dependent as the collector's API call would: a pod on a
/// node gracefully (Terminating until its kubelet confirms).
fn delete(store: &Store, kind: &str, ns: &str, name: &str) {
    let _ = if kind == "Pod" {
        crate::registry::pods::delete(store, ns, name, None, None, None, Apply::Commit)
    } else {
        store.delete(kind, ns, name)
    };
}

/// Runs the collector until the store is dropped.
pub async fn collect(store: Arc<Store>) {
    let (mut rx, _) = store.watch();
    while let Some(ev) = rx.recv().await {
        if ev.type_ != EventType::Deleted {
            continue;
        }
        let Some(uid) = ev.object["metadata"]["uid"].as_str() else {
            continue;
        };
        for (kind, ns, name) in orphans_of(&store, uid) {
            tracing::debug!(kind, %ns, %name, owner = uid, "garbage-collecting a dependent");
            delete(&store, &kind, &ns, &name);
        }
    }
}
