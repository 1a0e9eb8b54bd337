//! The REST verbs over the store: get, list (selectors, `limit` and
//! `continue`), create, update, status, patch and delete (preconditions,
//! `propagationPolicy`), with write faults injected and writes journaled.

use super::faults::Injected;
use super::patch::{self, PatchKind};
use super::select::Selector;
use super::{ApiServer, Target, gc, parse, status, table, watch};
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use gpu_claims_actors::memory::journal::Entry;
use gpu_claims_actors::memory::store::{StoreError, Subresource, Written};
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

pub async fn handle(
    State(s): State<Arc<ApiServer>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    Query(q): Query<Q>,
    body: Bytes,
) -> Response {
    let user = match s.authenticate(&headers) {
        Ok(u) => u,
        Err(r) => return r,
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
    let target = parse(path);
    s.audit_request(super::Access {
        user_agent,
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
    if method == Method::GET
        && let Some(v) = super::discovery::answer(path)
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
        s.journal(&t, op, name, false, Some(format!("injected {f:?}")));
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
    let table = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"));
    let req = Req {
        s: &s,
        t: &t,
        q: &q,
        user: &user,
    };
    // Writes are applied and logged one at a time, so that the log's
    // order is the order in which they took effect.
    let _in_order = writes.then(|| s.write_order.lock().unwrap_or_else(|e| e.into_inner()));
    match (method, t.name.clone()) {
        (Method::GET, None) if matches!(q.get("watch").map(String::as_str), Some("true" | "1")) => {
            watch::watch(s.clone(), t, q, table, &user)
        }
        (Method::GET, None) => req.list(table),
        (Method::GET, Some(n)) => req.get(&n, table),
        (Method::POST, None) => req.create(&body),
        (Method::PUT, Some(n)) => req.update(&n, &body),
        (Method::PATCH, Some(n)) => {
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|c| c.to_str().ok())
                .unwrap_or_default();
            req.patch(&n, ct, &body)
        }
        (Method::DELETE, Some(n)) => req.delete(&n, &body),
        (m, name) => status(
            405,
            "MethodNotAllowed",
            &format!("{m} is not supported on {path}"),
            name.as_deref(),
            t.resource.plural,
        ),
    }
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
    fn journal(
        &self,
        t: &Target,
        op: &'static str,
        name: String,
        changed: bool,
        error: Option<String>,
    ) {
        let Some(c) = &self.journal else { return };
        let elapsed = self.started.elapsed();
        c.journal().entries.push(Entry {
            at: humantime::format_duration(elapsed).to_string(),
            elapsed,
            op,
            kind: t.resource.kind,
            namespace: t.namespace.clone(),
            name,
            rule: "",
            status: None,
            changed,
            error,
        });
    }
}

struct Req<'a> {
    s: &'a ApiServer,
    t: &'a Target,
    q: &'a Q,
    user: &'a str,
}

/// A list page's position: the store version of the first page and the
/// last key returned.
fn continue_token(rv: u64, ns: &str, name: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{rv}/{ns}/{name}"))
}

fn read_token(token: &str) -> Option<(u64, String, String)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let s = String::from_utf8(raw).ok()?;
    let mut it = s.splitn(3, '/');
    Some((
        it.next()?.parse().ok()?,
        it.next()?.to_string(),
        it.next()?.to_string(),
    ))
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

    fn list(&self, as_table: bool) -> Response {
        let sel = match Selector::parse(
            self.q.get("labelSelector").map(String::as_str),
            self.q.get("fieldSelector").map(String::as_str),
        ) {
            Ok(s) => s,
            Err(e) => return status(400, "BadRequest", &e, None, self.plural()),
        };
        let after = match self.q.get("continue").filter(|c| !c.is_empty()) {
            None => None,
            Some(c) => match read_token(c) {
                Some(t) => Some(t),
                None => {
                    return status(
                        400,
                        "BadRequest",
                        "invalid continue token",
                        None,
                        self.plural(),
                    );
                }
            },
        };
        let limit = self
            .q
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0)
            .unwrap_or(usize::MAX);
        let (page, more, now) = self.s.store.list_page(
            self.store_kind(),
            self.t.namespace.as_deref(),
            after
                .as_ref()
                .map(|(_, ns, name)| (ns.as_str(), name.as_str())),
            limit,
            |o| sel.matches(o),
        );
        // Later pages report the first page's version, so that a watch
        // from it replays whatever changed while the pages were read.
        let rv = after.as_ref().map_or(now, |(rv, _, _)| *rv);
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if more && let Some(last) = page.last() {
            meta["continue"] =
                continue_token(rv, meta_str(last, "namespace"), meta_str(last, "name")).into();
        }
        if as_table {
            return ok(StatusCode::OK, table::table(&self.t.resource, &page, meta));
        }
        ok(
            StatusCode::OK,
            json!({
                "kind": format!("{}List", self.t.resource.kind),
                "apiVersion": self.t.resource.api_version(),
                "metadata": meta,
                "items": page,
            }),
        )
    }

    fn not_found(&self, n: &str) -> Response {
        let msg = format!("{} \"{n}\" not found", self.plural());
        status(404, "NotFound", &msg, Some(n), self.plural())
    }

    fn get(&self, n: &str, as_table: bool) -> Response {
        match self.s.store.get(self.store_kind(), self.ns(), n) {
            Some(o) if as_table => ok(
                StatusCode::OK,
                table::table(&self.t.resource, &[o], json!({})),
            ),
            Some(o) => ok(StatusCode::OK, o),
            None => self.not_found(n),
        }
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
        obj["apiVersion"] = self.t.resource.api_version().into();
        obj["kind"] = self.t.resource.kind.into();
        Ok(obj)
    }

    fn journal(&self, op: &'static str, name: &str, r: &Result<Written, StoreError>) {
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
        self.s.journal(self.t, op, name, changed, error);
    }

    fn create(&self, body: &[u8]) -> Response {
        let obj = match self.body_object(body, None) {
            Ok(o) => o,
            Err(r) => return *r,
        };
        let r = self.s.store.create(self.store_kind(), obj);
        self.journal("create", "", &r);
        match r {
            Ok(w) => ok(StatusCode::CREATED, w.object),
            Err(e) => store_error(&e, None, self.plural()),
        }
    }

    fn sub(&self) -> Subresource {
        if self.t.status {
            Subresource::Status
        } else {
            Subresource::Main
        }
    }

    /// What an update did, in the journal's words.
    fn op_of(&self, old: Option<&Value>, new: &Value) -> &'static str {
        if self.t.status {
            return "update_status";
        }
        let count = |v: &Value| v["metadata"]["finalizers"].as_array().map_or(0, Vec::len);
        match old.map(count) {
            Some(before) if count(new) > before => "add_finalizer",
            Some(before) if count(new) < before => "remove_finalizer",
            _ if self.t.resource.kind == "Pod" => "update_pod",
            _ => "update",
        }
    }

    fn update(&self, n: &str, body: &[u8]) -> Response {
        let obj = match self.body_object(body, Some(n)) {
            Ok(o) => o,
            Err(r) => return *r,
        };
        let old = self.s.store.get(self.store_kind(), self.ns(), n);
        let op = self.op_of(old.as_ref(), &obj);
        let r = self.s.store.update(self.store_kind(), obj, self.sub());
        self.journal(op, n, &r);
        match r {
            Ok(w) => ok(StatusCode::OK, w.object),
            Err(e) => store_error(&e, Some(n), self.plural()),
        }
    }

    fn patch(&self, n: &str, content_type: &str, body: &[u8]) -> Response {
        let Some(kind) = PatchKind::from_content_type(content_type) else {
            let msg = format!("the patch content type {content_type:?} is not supported");
            return status(415, "UnsupportedMediaType", &msg, Some(n), self.plural());
        };
        let p = match patch::parse_body(kind, body) {
            Ok(p) => p,
            Err(e) => return status(400, "BadRequest", &e, Some(n), self.plural()),
        };
        let pinned_rv = !p["metadata"]["resourceVersion"].is_null();
        // As the API server's guaranteed update: re-read and re-apply on a
        // conflict that the patch itself did not ask for.
        for _ in 0..8 {
            let Some(mut doc) = self.s.store.get(self.store_kind(), self.ns(), n) else {
                if kind == PatchKind::Apply && !self.t.status {
                    return match serde_json::to_vec(&p) {
                        Ok(b) => self.create(&b),
                        Err(e) => status(400, "BadRequest", &e.to_string(), Some(n), self.plural()),
                    };
                }
                return self.not_found(n);
            };
            let old = doc.clone();
            if let Err(e) = patch::apply(kind, &mut doc, &p) {
                return status(
                    422,
                    "Invalid",
                    &format!("the patch does not apply: {e}"),
                    Some(n),
                    self.plural(),
                );
            }
            if !doc.is_object() {
                return status(
                    422,
                    "Invalid",
                    "the patch replaced the object",
                    Some(n),
                    self.plural(),
                );
            }
            doc["metadata"]["name"] = n.into();
            if let Some(ns) = &self.t.namespace {
                doc["metadata"]["namespace"] = ns.clone().into();
            }
            if !pinned_rv {
                doc["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
            }
            let op = match self.op_of(Some(&old), &doc) {
                "update" => "patch",
                op => op,
            };
            let r = self.s.store.update(self.store_kind(), doc, self.sub());
            if matches!(r, Err(StoreError::Conflict(_))) && !pinned_rv {
                continue;
            }
            self.journal(op, n, &r);
            return match r {
                Ok(w) => ok(StatusCode::OK, w.object),
                Err(e) => store_error(&e, Some(n), self.plural()),
            };
        }
        status(
            409,
            "Conflict",
            "the object kept changing while the patch was applied",
            Some(n),
            self.plural(),
        )
    }

    fn delete(&self, n: &str, body: &[u8]) -> Response {
        let opts: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let pre = &opts["preconditions"];
        let policy = opts["propagationPolicy"]
            .as_str()
            .or(self.q.get("propagationPolicy").map(String::as_str))
            .unwrap_or("Background");
        let uid = self
            .s
            .store
            .get(self.store_kind(), self.ns(), n)
            .map(|o| meta_str(&o, "uid").to_string());
        if let Some(uid) = &uid {
            match policy {
                "Orphan" => gc::orphan_dependents(&self.s.store, uid),
                "Foreground" => gc::delete_dependents(&self.s.store, uid),
                _ => {}
            }
        }
        let r = self.s.store.delete(
            self.store_kind(),
            self.ns(),
            n,
            pre["uid"].as_str(),
            pre["resourceVersion"].as_str(),
        );
        self.journal("delete", n, &r);
        match r {
            Ok(w) if w.removed => ok(
                StatusCode::OK,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": n, "kind": self.plural(), "uid": w.object["metadata"]["uid"]}}),
            ),
            Ok(w) => ok(StatusCode::OK, w.object),
            Err(e) => store_error(&e, Some(n), self.plural()),
        }
    }
}
