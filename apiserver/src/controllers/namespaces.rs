//! Namespace lifecycle, as the API server and its namespace controller
//! keep it: the system namespaces exist from the start; an object can be
//! created only in a namespace that exists and is not terminating; a
//! deleted namespace is Terminating until everything in it is gone, and
//! then goes itself.

use crate::store::{Apply, EventType, Store, StoreError, Written};
use crate::{Resource, status};
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;

/// What a fresh cluster has.
pub const SYSTEM: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// The finalizer in `spec.finalizers` the namespace controller removes.
const FINALIZER: &str = "kubernetes";

/// A Namespace as the API server stores a new one.
pub fn shaped(mut obj: Value) -> Value {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !obj["metadata"]["labels"].is_object() {
        obj["metadata"]["labels"] = json!({});
    }
    obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name.into();
    obj["spec"] = json!({"finalizers": [FINALIZER]});
    obj["status"] = json!({"phase": "Active"});
    obj
}

fn namespace_object(name: &str) -> Value {
    shaped(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
}

/// The system namespaces, and the namespace of every object already
/// stored (a test's or the demo's world, seeded before the server came
/// up, as a restored etcd holds its namespaces with their objects).
pub fn adopt(store: &Store) {
    let mut names: Vec<String> = SYSTEM.iter().map(|s| s.to_string()).collect();
    for (_, o) in store.everything() {
        if let Some(ns) = o["metadata"]["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
        {
            names.push(ns.to_string());
        }
    }
    names.sort();
    names.dedup();
    for n in names {
        ensure(store, &n);
    }
}

/// Makes namespace `name` if it does not exist (an installation's own
/// namespace, as its chart or an admin would have made it).
pub fn ensure(store: &Store, name: &str) {
    if store.get("Namespace", "", name).is_none() {
        store.seed("Namespace", namespace_object(name));
    }
}

fn terminating(ns: &Value) -> bool {
    ns["metadata"]["deletionTimestamp"].is_string()
}

/// NamespaceLifecycle admission for a create in `ns`.
pub fn admit_create(
    store: &Store,
    r: &Resource,
    ns: &str,
    name: Option<&str>,
) -> Result<(), Box<Response>> {
    match store.get("Namespace", "", ns) {
        None => Err(Box::new(status(
            404,
            "NotFound",
            &format!("namespaces {ns:?} not found"),
            Some(ns),
            "namespaces",
        ))),
        Some(o) if terminating(&o) => {
            let message = format!(
                "{} {:?} is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                r.plural,
                name.unwrap_or_default()
            );
            let body = json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": "Forbidden", "code": 403,
                "details": {"name": name.unwrap_or_default(), "group": r.group, "kind": r.plural,
                    "causes": [{"reason": "NamespaceTerminating",
                        "message": format!("namespace {ns} is being terminated"),
                        "field": "metadata.namespace"}]},
            });
            Err(Box::new(crate::answers::status_response(
                axum::http::StatusCode::FORBIDDEN,
                &body,
            )))
        }
        Some(_) => Ok(()),
    }
}

/// DELETE of a namespace: Terminating, its content left to the controller.
pub fn delete(
    store: &Store,
    name: &str,
    uid: Option<&str>,
    how: Apply,
) -> Result<Written, StoreError> {
    let finalizers = store
        .get("Namespace", "", name)
        .map(|o| {
            o["spec"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty())
        })
        .unwrap_or(false);
    if !finalizers {
        return store.delete_with("Namespace", "", name, uid, None, how);
    }
    store.mark_deleting("Namespace", "", name, uid, 0, how, |o| {
        o["status"]["phase"] = "Terminating".into();
    })
}

/// One pass over a terminating namespace: delete what is in it (objects
/// with finalizers wait for their controllers), and when nothing is left,
/// finalize and remove the namespace.
fn finish(store: &Store, ns: &str) {
    let inside = store.in_namespace(ns);
    for (kind, name, deleting) in &inside {
        if !deleting {
            let _ = store.delete(kind, ns, name);
        }
    }
    if store.in_namespace(ns).is_empty()
        && let Some(mut o) = store.get("Namespace", "", ns)
    {
        o["spec"]["finalizers"] = json!([]);
        let _ = store.update("Namespace", o, crate::store::Subresource::Main);
        let _ = store.delete("Namespace", "", ns);
    }
}

/// The namespace controllers, on one subscription to the store taken
/// before the server serves (`rx`), so that no change is missed: a
/// terminating namespace finished once it is empty, and every active one
/// kept with its `default` ServiceAccount; and, on the same changes, the
/// aggregated ClusterRoles and the disruption budgets' status kept. Runs until the store is dropped.
pub(crate) async fn control(
    store: Arc<Store>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<crate::store::StoreEvent>,
) {
    while let Some(ev) = rx.recv().await {
        crate::controllers::bootstrap::keep_default_account(&store, &ev);
        crate::controllers::aggregation::keep_aggregated(&store, &ev);
        #[cfg(feature = "conformance")]
        crate::controllers::disruption::keep_budgets(&store, &ev);
        let ns = if ev.kind == "Namespace" {
            if ev.type_ == EventType::Deleted || !terminating(&ev.object) {
                continue;
            }
            ev.object["metadata"]["name"].as_str().map(str::to_string)
        } else if ev.type_ == EventType::Deleted || terminating(&ev.object) {
            // Something in a namespace went (or began to): its namespace
            // may now be empty.
            ev.object["metadata"]["namespace"]
                .as_str()
                .map(str::to_string)
        } else {
            None
        };
        let Some(ns) = ns.filter(|n| !n.is_empty()) else {
            continue;
        };
        if store
            .get("Namespace", "", &ns)
            .is_some_and(|o| terminating(&o))
        {
            finish(&store, &ns);
        }
    }
}
