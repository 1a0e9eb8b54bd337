//! An embedded Kubernetes API server over the in-memory store: the REST
//! protocol that kube-rs (and kubectl) speak, for the kinds gpu-claims
//! reads, so that `gpu-claims run` can be tested over HTTP without a
//! cluster. The storage semantics are the store's, shared with `plan`.

mod resources;
mod watch;

pub use resources::{RESOURCES, Resource, Target, parse};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use gpu_claims_actors::memory::store::{Store, StoreError, Subresource};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

pub fn router(store: Arc<Store>) -> Router {
    Router::new().fallback(handle).with_state(store)
}

/// Serves the store on `addr` (port 0 picks one); returns the bound address.
pub async fn serve(
    store: Arc<Store>,
    addr: SocketAddr,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router(store)).await;
    });
    Ok((bound, task))
}

/// A kubeconfig for a server at `url`, without auth.
pub fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gpu-claims\n  cluster:\n    server: {url}\ncontexts:\n- name: gpu-claims\n  context:\n    cluster: gpu-claims\n    user: gpu-claims\ncurrent-context: gpu-claims\nusers:\n- name: gpu-claims\n  user: {{}}\n"
    )
}

pub(crate) fn status(
    code: u16,
    reason: &str,
    message: &str,
    name: Option<&str>,
    plural: &str,
) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
        "details": name.map(|n| json!({"name": n, "kind": plural})),
    });
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        axum::Json(body),
    )
        .into_response()
}

fn store_error(e: StoreError, name: Option<&str>, plural: &str) -> Response {
    match &e {
        StoreError::NotFound(_) => status(404, "NotFound", &e.to_string(), name, plural),
        StoreError::AlreadyExists(_) => status(409, "AlreadyExists", &e.to_string(), name, plural),
        StoreError::Conflict(_) => status(409, "Conflict", &e.to_string(), name, plural),
        StoreError::Invalid(_) => status(422, "Invalid", &e.to_string(), name, plural),
    }
}

fn ok(v: Value) -> Response {
    (StatusCode::OK, axum::Json(v)).into_response()
}

/// Equality-based label selectors: `a=b,c==d,e!=f`.
pub(crate) fn labels_match(obj: &Value, selector: Option<&String>) -> bool {
    let Some(sel) = selector.filter(|s| !s.is_empty()) else {
        return true;
    };
    let labels = &obj["metadata"]["labels"];
    sel.split(',').all(|term| {
        if let Some((k, v)) = term.split_once("!=") {
            labels[k.trim()].as_str() != Some(v.trim())
        } else if let Some((k, v)) = term.split_once('=') {
            labels[k.trim()].as_str() == Some(v.trim_start_matches('=').trim())
        } else {
            labels.get(term.trim()).is_some()
        }
    })
}

pub(crate) fn in_namespace(obj: &Value, ns: Option<&str>) -> bool {
    ns.is_none_or(|ns| obj["metadata"]["namespace"].as_str() == Some(ns))
}

async fn handle(
    State(store): State<Arc<Store>>,
    method: Method,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let Some(t) = parse(uri.path()) else {
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource",
            None,
            "",
        );
    };
    let plural = t.resource.plural;
    let name = t.name.as_deref();
    let body_json = || serde_json::from_slice::<Value>(&body).map_err(|e| e.to_string());
    match (method, name) {
        (Method::GET, None) if matches!(q.get("watch").map(String::as_str), Some("true" | "1")) => {
            watch::watch(store, t, q)
        }
        (Method::GET, None) => list(&store, &t, &q),
        (Method::GET, Some(n)) => match store.get(
            t.resource.kind,
            t.namespace.as_deref().unwrap_or_default(),
            n,
        ) {
            Some(o) => ok(o),
            None => status(
                404,
                "NotFound",
                &format!("{plural} \"{n}\" not found"),
                Some(n),
                plural,
            ),
        },
        (Method::POST, None) => match body_json() {
            Ok(mut obj) => {
                if let Some(ns) = &t.namespace {
                    obj["metadata"]["namespace"] = ns.clone().into();
                }
                match store.create(t.resource.kind, obj) {
                    Ok(w) => (StatusCode::CREATED, axum::Json(w.object)).into_response(),
                    Err(e) => store_error(e, name, plural),
                }
            }
            Err(e) => status(400, "BadRequest", &e, name, plural),
        },
        (Method::PUT, Some(n)) => match body_json() {
            Ok(mut obj) => {
                obj["metadata"]["name"] = n.into();
                if let Some(ns) = &t.namespace {
                    obj["metadata"]["namespace"] = ns.clone().into();
                }
                let sub = if t.status {
                    Subresource::Status
                } else {
                    Subresource::Main
                };
                match store.update(t.resource.kind, obj, sub) {
                    Ok(w) => ok(w.object),
                    Err(e) => store_error(e, name, plural),
                }
            }
            Err(e) => status(400, "BadRequest", &e, name, plural),
        },
        (Method::DELETE, Some(n)) => {
            let opts: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let pre = &opts["preconditions"];
            let ns = t.namespace.as_deref().unwrap_or_default();
            match store.delete(
                t.resource.kind,
                ns,
                n,
                pre["uid"].as_str(),
                pre["resourceVersion"].as_str(),
            ) {
                Ok(w) if w.removed => ok(
                    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": n, "kind": plural, "uid": w.object["metadata"]["uid"]}}),
                ),
                Ok(w) => ok(w.object),
                Err(e) => store_error(e, name, plural),
            }
        }
        (m, _) => status(
            405,
            "MethodNotAllowed",
            &format!("{m} is not supported on {}", uri.path()),
            name,
            plural,
        ),
    }
}

fn list(store: &Store, t: &Target, q: &HashMap<String, String>) -> Response {
    let (objs, rv) = store.list(t.resource.kind);
    let items: Vec<Value> = objs
        .into_iter()
        .filter(|o| {
            in_namespace(o, t.namespace.as_deref()) && labels_match(o, q.get("labelSelector"))
        })
        .collect();
    ok(json!({
        "kind": format!("{}List", t.resource.kind),
        "apiVersion": t.resource.api_version(),
        "metadata": {"resourceVersion": rv.to_string()},
        "items": items,
    }))
}

/// Sends `Body` lines; used by watch.
pub(crate) fn line(v: &Value) -> Bytes {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}
