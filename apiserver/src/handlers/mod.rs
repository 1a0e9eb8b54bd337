//! The REST verbs over the store: get, list (selectors, `limit` and
//! `continue`), create, update, status, patch, delete (preconditions,
//! `propagationPolicy`) and delete of a collection; `dryRun=All` on every
//! write; the health endpoints; write faults injected and writes journaled.
//! The reads are in `read.rs`, the writes in `write.rs`.

mod read;
mod write;

use super::faults::Injected;
use super::{ApiServer, Target, events, status, watch};
use crate::store::{Apply, StoreError, Written};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

type Q = HashMap<String, String>;

fn ok(code: StatusCode, v: Value) -> Response {
    (code, axum::Json(v)).into_response()
}

fn store_error(e: &StoreError, name: Option<&str>, plural: &str) -> Response {
    let (code, reason) = match e {
        StoreError::NotFound(_) => (404, "NotFound"),
        StoreError::AlreadyExists(_) => (409, "AlreadyExists"),
        StoreError::Conflict(_) => (409, "Conflict"),
        StoreError::Invalid(_) => (422, "Invalid"),
    };
    status(code, reason, &e.to_string(), name, plural)
}

fn meta_str<'a>(v: &'a Value, f: &str) -> &'a str {
    v["metadata"][f].as_str().unwrap_or_default()
}

/// The largest request body kube-apiserver takes (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

pub async fn handle(
    State(s): State<Arc<ApiServer>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    Query(q): Query<Q>,
    body: axum::body::Body,
) -> Response {
    let user = match s.authenticate(&headers) {
        Ok(u) => u,
        Err(r) => return r,
    };
    // Kubernetes' limit on a request's body, answered as a Status.
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return status(
                413,
                "RequestEntityTooLarge",
                &format!("Request entity too large: limit is {MAX_BODY}"),
                None,
                "",
            );
        }
    };
    if let Err(r) = s.through_partition(&user).await {
        return r;
    }
    let faults = s.faults();
    if !faults.latency.is_zero() {
        tokio::time::sleep(faults.latency).await;
    }
    let path = uri.path();
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|u| u.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let served = s.served();
    let target = served.parse(path);
    s.audit_request(super::Access {
        user: user.clone(),
        user_agent: user_agent.clone(),
        verb: match (&method, &target) {
            (_, None) => method.to_string(),
            (&Method::GET, Some(t)) if t.name.is_some() => "get".into(),
            (&Method::GET, Some(_))
                if matches!(q.get("watch").map(String::as_str), Some("true" | "1")) =>
            {
                "watch".into()
            }
            (&Method::GET, Some(_)) => "list".into(),
            (&Method::POST, _) => "create".into(),
            (&Method::PUT, _) => "update".into(),
            (&Method::PATCH, _) => "patch".into(),
            (&Method::DELETE, _) => "delete".into(),
            (m, _) => m.to_string(),
        },
        group: target
            .as_ref()
            .map(|t| t.resource.group.to_string())
            .unwrap_or_default(),
        resource: match &target {
            Some(t) if t.status => format!("{}/status", t.resource.plural),
            Some(t) => t.resource.plural.to_string(),
            None => path.to_string(),
        },
        namespace: target.as_ref().and_then(|t| t.namespace.clone()),
    });
    if method == Method::GET && matches!(path, "/healthz" | "/livez" | "/readyz") {
        return ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok").into_response();
    }
    if method == Method::GET && path == "/openapi/v2" {
        let accept = headers
            .get(header::ACCEPT)
            .and_then(|a| a.to_str().ok())
            .unwrap_or_default();
        return if accept.contains("protobuf") {
            let body = super::openapi_v2::protobuf(&served);
            ([(header::CONTENT_TYPE, super::openapi_v2::PROTOBUF)], body).into_response()
        } else {
            ok(StatusCode::OK, super::openapi_v2::json(&served))
        };
    }
    if method == Method::GET
        && let Some(v) = super::discovery::answer(&served, path)
            .or_else(|| super::openapi::answer(&served, path))
    {
        return ok(StatusCode::OK, v);
    }
    let Some(t) = target else {
        let msg = "the server could not find the requested resource";
        return status(404, "NotFound", msg, None, "");
    };
    let writes = matches!(
        method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    // Anonymous writes are a convenience on loopback only: bound to any
    // other address, anyone who can reach the port could write anything.
    if writes && user == super::ANONYMOUS && !s.addr().ip().is_loopback() {
        return status(
            403,
            "Forbidden",
            &format!(
                "forbidden: User \"{}\" cannot {} on a server not bound to loopback; use a kubeconfig with a token",
                super::ANONYMOUS,
                method.as_str().to_lowercase()
            ),
            None,
            "",
        );
    }
    let how = match q.get("dryRun").map(String::as_str) {
        None | Some("") => Apply::Commit,
        Some("All") if writes => Apply::DryRun,
        Some(v) => {
            let msg = format!("dryRun: Unsupported value: {v:?}: supported values: \"All\"");
            return status(422, "Invalid", &msg, t.name.as_deref(), t.resource.plural);
        }
    };
    // A 409 to a create means AlreadyExists on a real server, never a
    // stale version, so injected conflicts go to updates and patches only.
    let injected = faults
        .roll(s.dice.next())
        .filter(|f| *f != Injected::Conflict || matches!(method, Method::PUT | Method::PATCH));
    if writes && let Some(f) = injected {
        let plural = t.resource.plural;
        let op = match method {
            Method::POST => "create",
            Method::DELETE => "delete",
            _ => "update",
        };
        let name = t.name.clone().unwrap_or_default();
        s.record(&user, &t, op, &name, false, None);
        s.journal(
            &user,
            &t,
            op,
            name,
            false,
            Some(format!("injected {f:?}")),
            false,
        );
        return match f {
            Injected::Conflict => status(
                409,
                "Conflict",
                "injected: the object has been modified; please apply your changes to the latest version and try again",
                t.name.as_deref(),
                plural,
            ),
            Injected::Throttle => {
                let mut r = status(
                    429,
                    "TooManyRequests",
                    "injected: too many requests",
                    None,
                    plural,
                );
                r.headers_mut().insert(header::RETRY_AFTER, 1.into());
                r
            }
            Injected::ServerError => status(
                500,
                "InternalError",
                "injected: etcd timed out",
                None,
                plural,
            ),
        };
    }
    // Protobuf (and CBOR) bodies are refused with 415, so that a client
    // that can falls back to JSON, as it does with a server that lacks them.
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .unwrap_or_default();
    if writes && (content_type.contains("protobuf") || content_type.contains("cbor")) {
        let msg = format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/merge-patch+json, application/json-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {content_type})"
        );
        return status(
            415,
            "UnsupportedMediaType",
            &msg,
            t.name.as_deref(),
            t.resource.plural,
        );
    }
    if t.resource.review {
        return match (method, &t.name) {
            (Method::POST, None) => super::reviews::answer(&s, &t, &body),
            (m, name) => not_allowed(&m, path, name.as_deref(), &t),
        };
    }
    let table = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"));
    let manager =
        super::managed::manager_of(q.get("fieldManager").map(String::as_str), &user_agent);
    let req = Req {
        s: &s,
        t: &t,
        q: &q,
        user: &user,
        manager: &manager,
        served: &served,
        how,
    };
    // A create passes the namespace's lifecycle and the mutating webhooks
    // first, outside the write order (a webhook takes its time).
    let created = match (&method, &t.name) {
        (&Method::POST, None) => match req.admitted(&body).await {
            Ok(obj) => Some(obj),
            Err(r) => return *r,
        },
        _ => None,
    };
    // A watch from a version the store has not reached waits for it a
    // little, then is answered 504, as kube-apiserver answers.
    let watching = method == Method::GET
        && t.name.is_none()
        && matches!(q.get("watch").map(String::as_str), Some("true" | "1"));
    let from = q.get("resourceVersion").and_then(|r| r.parse::<u64>().ok());
    if let Some(rv) = from.filter(|rv| watching && *rv > s.store.resource_version())
        && let Err(r) = watch::reach(&s, rv, t.resource.plural).await
    {
        return r;
    }
    // Writes are applied and logged one at a time, so that the log's
    // order is the order in which they took effect.
    let _in_order = writes.then(|| s.write_order.lock().unwrap_or_else(|e| e.into_inner()));
    match (method, t.name.clone()) {
        (Method::GET, None) if matches!(q.get("watch").map(String::as_str), Some("true" | "1")) => {
            watch::watch(s.clone(), t, q, table, &user)
        }
        (Method::GET, None) => req.list(table),
        (Method::GET, Some(n)) => req.get(&n, table),
        (Method::POST, None) => match created {
            Some(obj) => req.create(obj, false),
            None => status(
                500,
                "InternalError",
                "a create without its object",
                None,
                "",
            ),
        },
        (Method::PUT, Some(n)) => req.update(&n, &body),
        (Method::PATCH, Some(n)) => {
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|c| c.to_str().ok())
                .unwrap_or_default();
            req.patch(&n, ct, &body)
        }
        (Method::DELETE, Some(n)) => req.delete(&n, &body),
        (Method::DELETE, None) if !t.status => req.delete_collection(&body),
        (m, name) => not_allowed(&m, path, name.as_deref(), &t),
    }
}

fn not_allowed(m: &Method, path: &str, name: Option<&str>, t: &Target) -> Response {
    let msg = format!("{m} is not supported on {path}");
    status(405, "MethodNotAllowed", &msg, name, t.resource.plural)
}

impl ApiServer {
    /// Logs who made one write over HTTP.
    fn record(
        &self,
        user: &str,
        t: &Target,
        op: &'static str,
        name: &str,
        applied: bool,
        holder: Option<String>,
    ) {
        let mut log = self
            .identities
            .log
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        self.identities.append(
            &mut log,
            user,
            self.started.elapsed(),
            super::identity::Pending {
                op,
                kind: t.resource.kind,
                namespace: t.namespace.clone(),
                name: name.to_string(),
                applied,
                holder,
            },
        );
    }

    /// Journals one write over HTTP, when the server keeps a journal.
    #[allow(clippy::too_many_arguments)]
    fn journal(
        &self,
        user: &str,
        t: &Target,
        op: &'static str,
        name: String,
        changed: bool,
        error: Option<String>,
        invalid: bool,
    ) {
        let Some(j) = &self.journal else { return };
        j.wrote(super::JournaledWrite {
            user: user.to_string(),
            elapsed: self.started.elapsed(),
            op,
            kind: t.resource.kind,
            namespace: t.namespace.clone(),
            name,
            changed,
            error,
            invalid,
        });
    }
}

#[derive(Clone, Copy)]
struct Req<'a> {
    s: &'a ApiServer,
    t: &'a Target,
    q: &'a Q,
    user: &'a str,
    /// The field manager the write's fields go to (managedFields).
    manager: &'a str,
    /// What the server served when the request came (the target was read
    /// by it): its CRDs' schemas and columns, looked up once per request.
    served: &'a super::Served,
    /// `dryRun=All`: the write is decided and answered, not stored.
    how: Apply,
}

impl Req<'_> {
    fn store_kind(&self) -> &'static str {
        self.t.resource.store_kind
    }

    fn plural(&self) -> &'static str {
        self.t.resource.plural
    }

    fn ns(&self) -> &str {
        self.t.namespace.as_deref().unwrap_or_default()
    }

    /// The request's label and field selectors, or a 400 saying why not.
    fn selector(&self) -> Result<super::select::Selector, Box<Response>> {
        super::select::Selector::for_resource(
            self.q.get("labelSelector").map(String::as_str),
            self.q.get("fieldSelector").map(String::as_str),
            &self.t.resource,
        )
        .map_err(|e| Box::new(status(400, "BadRequest", &e, None, self.plural())))
    }

    /// A stored object as this resource serves it (events.k8s.io Events
    /// are stored as core Events).
    fn served(&self, stored: Value) -> Value {
        events::served(&self.t.resource, stored)
    }

    /// A custom resource's printer columns, from its CRD.
    fn columns(&self) -> Option<Vec<super::table::Column>> {
        Some(self.served.custom(self.t.resource.kind)?.columns.clone())
    }

    fn not_found(&self, n: &str) -> Response {
        let msg = format!("{} \"{n}\" not found", self.plural());
        status(404, "NotFound", &msg, Some(n), self.plural())
    }

    /// The body as an object of this resource, its namespace checked.
    fn body_object(&self, body: &[u8], name: Option<&str>) -> Result<Value, Box<Response>> {
        let bad = |m: &str| Box::new(status(400, "BadRequest", m, name, self.plural()));
        let mut obj: Value = serde_json::from_slice(body).map_err(|e| bad(&e.to_string()))?;
        if !obj.is_object() {
            return Err(bad("the body is not an object"));
        }
        if !obj["metadata"].is_object() {
            obj["metadata"] = json!({});
        }
        if let Some(ns) = &self.t.namespace {
            match obj["metadata"]["namespace"].as_str() {
                Some(b) if !b.is_empty() && b != ns => {
                    return Err(bad(&format!(
                        "the namespace of the provided object ({b}) does not match the namespace sent on the request ({ns})"
                    )));
                }
                _ => obj["metadata"]["namespace"] = ns.clone().into(),
            }
        }
        if let Some(n) = name {
            match obj["metadata"]["name"].as_str() {
                Some(b) if !b.is_empty() && b != n => {
                    return Err(bad(&format!(
                        "the name of the object ({b}) does not match the name on the URL ({n})"
                    )));
                }
                _ => obj["metadata"]["name"] = n.into(),
            }
        }
        let want = self.t.resource.api_version();
        match obj["apiVersion"].as_str() {
            Some(v) if !v.is_empty() && v != want => {
                return Err(bad(&format!(
                    "the API version in the data ({v}) does not match the expected API version ({want})"
                )));
            }
            _ => obj["apiVersion"] = want.into(),
        }
        match obj["kind"].as_str() {
            Some(k) if !k.is_empty() && k != self.t.resource.kind => {
                return Err(bad(&format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    self.t.resource.kind
                )));
            }
            _ => obj["kind"] = self.t.resource.kind.into(),
        }
        Ok(events::stored(&self.t.resource, obj))
    }

    fn journal(&self, op: &'static str, name: &str, r: &Result<Written, StoreError>) {
        if self.how == Apply::DryRun {
            return;
        }
        let name = match r {
            Ok(w) => meta_str(&w.object, "name").to_string(),
            Err(_) => name.to_string(),
        };
        let changed = r.as_ref().is_ok_and(|w| w.changed);
        let error = r.as_ref().err().map(|e| e.to_string());
        let holder = match r {
            Ok(w) if self.t.resource.kind == "Lease" => w.object["spec"]["holderIdentity"]
                .as_str()
                .map(str::to_string),
            _ => None,
        };
        self.s
            .record(self.user, self.t, op, &name, r.is_ok(), holder);
        let invalid = matches!(r, Err(StoreError::Invalid(_)));
        self.s
            .journal(self.user, self.t, op, name, changed, error, invalid);
    }
}
