//! The writes: create, update (main or status), patch and delete, each
//! applied or, with `dryRun=All`, only decided.

use super::{Req, meta_str, ok, store_error};
use crate::gc;
use crate::patch::{self, PatchKind};
use crate::status;
use crate::store::{Apply, StoreError, Subresource, Written};
use crate::{Target, admission, events, managed, namespaces, pods, schema, typed, validate};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

impl Req<'_> {
    /// The object a create's body makes, through admission: the
    /// namespace must exist and not be terminating, then the mutating
    /// webhooks that match have their say.
    pub(super) async fn admitted(&self, body: &[u8]) -> Result<Value, Box<Response>> {
        let obj = self.body_object(body, None)?;
        let name = meta_str(&obj, "name").to_string();
        if let Some(ns) = &self.t.namespace {
            namespaces::admit_create(&self.s.store, &self.t.resource, ns, Some(&name))?;
        }
        let a = admission::Attributes {
            resource: &self.t.resource,
            namespace: self.t.namespace.as_deref(),
            user: self.user,
            dry_run: self.how == Apply::DryRun,
        };
        let obj = admission::mutate(self.s, &a, obj).await.map_err(Box::new)?;
        admission::validate(self.s, &a, obj).await.map_err(Box::new)
    }

    /// A create from an apply patch: admitted by the namespace's lifecycle
    /// but not sent to webhooks (an apply that creates is not, here).
    fn create_unhooked(&self, body: &[u8]) -> Response {
        let obj = match self.body_object(body, None) {
            Ok(o) => o,
            Err(r) => return *r,
        };
        if let Some(ns) = &self.t.namespace
            && let Err(r) = namespaces::admit_create(
                &self.s.store,
                &self.t.resource,
                ns,
                Some(meta_str(&obj, "name")),
            )
        {
            return *r;
        }
        self.create(obj, true)
    }

    /// `applied`: made by a server-side apply (its ownership recorded).
    pub(super) fn create(&self, mut obj: Value, applied: bool) -> Response {
        let name = meta_str(&obj, "name").to_string();
        let warnings = match self.valid(&name, &mut obj, applied) {
            Ok(w) => w,
            Err(r) => return *r,
        };
        if self.t.resource.kind == "Namespace" {
            obj = namespaces::shaped(obj);
        }
        let r = self.s.store.create_with(self.store_kind(), obj, self.how);
        self.journal("create", "", &r);
        match r {
            Ok(w) => warned(ok(StatusCode::CREATED, self.served(w.object)), &warnings),
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

    /// The object's metadata as the API server validates it.
    /// The object as the API server admits it: the part this request may
    /// not write taken from the stored object (status on the main resource
    /// of a kind with a status subresource, the rest on its status), then
    /// metadata validated and the CRD's schema applied (pruning,
    /// defaults, types, CEL rules). A custom resource's write that fails
    /// is refused whole.
    /// Ok: the warnings to send (unknown fields dropped, under
    /// `fieldValidation=Warn`, the default).
    /// `applied`: a server-side apply, whose ownership `managed::apply`
    /// recorded already; any other write's is recorded here.
    fn valid(
        &self,
        name: &str,
        obj: &mut Value,
        applied: bool,
    ) -> Result<Vec<String>, Box<Response>> {
        let mode = match self.q.get("fieldValidation").map(String::as_str) {
            None | Some("" | "Warn") => FieldValidation::Warn,
            Some("Strict") => FieldValidation::Strict,
            Some("Ignore") => FieldValidation::Ignore,
            Some(v) => {
                let msg = format!(
                    "fieldValidation: Unsupported value: {v:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
                );
                return Err(Box::new(status(
                    400,
                    "BadRequest",
                    &msg,
                    Some(name),
                    self.plural(),
                )));
            }
        };
        let old = self.s.store.get(self.store_kind(), self.ns(), name);
        if self.t.resource.status {
            if self.t.status {
                if let Some(o) = &old {
                    let status = obj.get("status").cloned();
                    let meta = obj["metadata"].clone();
                    *obj = o.clone();
                    obj["metadata"] = meta;
                    match status {
                        Some(st) => obj["status"] = st,
                        None => {
                            obj.as_object_mut().map(|m| m.remove("status"));
                        }
                    }
                }
            } else {
                match old.as_ref().and_then(|o| o.get("status")) {
                    Some(st) => obj["status"] = st.clone(),
                    None => {
                        obj.as_object_mut().map(|m| m.remove("status"));
                    }
                }
            }
        }
        let mut causes = validate::metadata(&self.t.resource, obj);
        let crd_schema = self
            .served
            .custom(self.t.resource.kind)
            .and_then(|c| c.schema.as_ref());
        let sent = crd_schema.is_some().then(|| obj.clone());
        causes.extend(schema::admit(crd_schema, obj, old.as_ref()));
        let mut unknown = Vec::new();
        if let Some(sent) = &sent {
            schema::dropped(sent, obj, "", &mut unknown);
        }
        // A built-in kind: decoded by its type; what it lacks is dropped.
        match typed::check(self.store_kind(), obj) {
            typed::Decoded::Untyped => {}
            typed::Decoded::Invalid(why) => {
                return Err(Box::new(self.cannot_handle(name, &why)));
            }
            typed::Decoded::Unknown(fields) => {
                for f in &fields {
                    schema::remove_path(obj, f);
                }
                unknown.extend(fields);
            }
        }
        if mode == FieldValidation::Strict && !unknown.is_empty() {
            let fields: Vec<String> = unknown
                .iter()
                .map(|f| format!("unknown field {f:?}"))
                .collect();
            let why = format!("strict decoding error: {}", fields.join(", "));
            return Err(Box::new(self.cannot_handle(name, &why)));
        }
        if causes.is_empty() {
            if !applied {
                let sub = if self.t.status { "status" } else { "" };
                let api = self.t.resource.api_version();
                managed::record_update(old.as_ref(), obj, self.manager, sub, &api);
            }
            return Ok(match mode {
                FieldValidation::Warn => unknown
                    .iter()
                    .map(|f| format!("unknown field {f:?}"))
                    .collect(),
                _ => Vec::new(),
            });
        }
        if self.how == Apply::Commit {
            let what: Vec<String> = causes.iter().map(|c| c.field.clone()).collect();
            let error = Some(format!("invalid: {}", what.join(", ")));
            let op = if old.is_some() { "update" } else { "create" };
            self.s
                .journal(self.user, self.t, op, name.to_string(), false, error, true);
        }
        Err(Box::new(validate::invalid(&self.t.resource, name, &causes)))
    }

    /// A body the decoder refuses, as kube-apiserver words it (400).
    fn cannot_handle(&self, name: &str, why: &str) -> Response {
        let r = &self.t.resource;
        let msg = format!(
            "{} in version {:?} cannot be handled as a {}: {why}",
            r.kind, r.version, r.kind
        );
        status(400, "BadRequest", &msg, Some(name), self.plural())
    }

    pub(super) fn update(&self, n: &str, body: &[u8]) -> Response {
        let mut obj = match self.body_object(body, Some(n)) {
            Ok(o) => o,
            Err(r) => return *r,
        };
        // Custom resources allow no unconditional update (built-ins do).
        if self.t.resource.is_custom() && meta_str(&obj, "resourceVersion").is_empty() {
            let cause = validate::Cause::invalid(
                "metadata.resourceVersion",
                "0x0",
                "must be specified for an update",
            );
            return validate::invalid(&self.t.resource, n, &[cause]);
        }
        let warnings = match self.valid(n, &mut obj, false) {
            Ok(w) => w,
            Err(r) => return *r,
        };
        let old = self.s.store.get(self.store_kind(), self.ns(), n);
        let op = self.op_of(old.as_ref(), &obj);
        let r = self
            .s
            .store
            .update_with(self.store_kind(), obj, self.sub(), self.how);
        self.journal(op, n, &r);
        match r {
            Ok(w) => warned(ok(StatusCode::OK, self.served(w.object)), &warnings),
            Err(e) => store_error(&e, Some(n), self.plural()),
        }
    }

    pub(super) fn patch(&self, n: &str, content_type: &str, body: &[u8]) -> Response {
        let Some(kind) = PatchKind::from_content_type(content_type) else {
            let msg = format!("the patch content type {content_type:?} is not supported");
            return status(415, "UnsupportedMediaType", &msg, Some(n), self.plural());
        };
        // Custom resources have no strategic merge (no patch strategies in
        // their schemas): the API server refuses the media type.
        if kind == PatchKind::StrategicMerge && self.t.resource.is_custom() {
            let msg = "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";
            return status(415, "UnsupportedMediaType", msg, Some(n), self.plural());
        }
        let p = match patch::parse_body(kind, body) {
            Ok(p) => p,
            Err(e) => return status(400, "BadRequest", &e, Some(n), self.plural()),
        };
        let force = self.q.get("force").is_some_and(|f| f == "true");
        if kind == PatchKind::Apply && self.q.get("fieldManager").is_none_or(|m| m.is_empty()) {
            return patch_options_invalid("is required for apply patch");
        }
        if kind != PatchKind::Apply && force {
            let msg = "force: Invalid value: true: may not be specified for non-apply patch";
            return status(422, "Invalid", msg, Some(n), self.plural());
        }
        let pinned_rv = !p["metadata"]["resourceVersion"].is_null();
        // As the API server's guaranteed update: re-read and re-apply on a
        // conflict that the patch itself did not ask for.
        for _ in 0..8 {
            let Some(mut doc) = self.s.store.get(self.store_kind(), self.ns(), n) else {
                if kind == PatchKind::Apply && !self.t.status {
                    let api = self.t.resource.api_version();
                    let made = managed::apply(None, &p, self.manager, force, &api)
                        .unwrap_or_else(|_| p.clone());
                    return match serde_json::to_vec(&made) {
                        Ok(b) => self.create_unhooked(&b),
                        Err(e) => status(400, "BadRequest", &e.to_string(), Some(n), self.plural()),
                    };
                }
                return self.not_found(n);
            };
            let old = doc.clone();
            // Patched as served, stored as stored (Events).
            doc = self.served(doc);
            if kind == PatchKind::Apply {
                let api = self.t.resource.api_version();
                match managed::apply(Some(&doc), &p, self.manager, force, &api) {
                    Ok(d) => doc = d,
                    Err(conflicts) => return apply_conflict(&conflicts, n, self.plural()),
                }
            } else if let Err(e) = patch::apply(kind, &mut doc, &p) {
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
            doc = events::stored(&self.t.resource, doc);
            doc["metadata"]["name"] = n.into();
            if let Some(ns) = &self.t.namespace {
                doc["metadata"]["namespace"] = ns.clone().into();
            }
            if !pinned_rv {
                doc["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
            }
            let warnings = match self.valid(n, &mut doc, kind == PatchKind::Apply) {
                Ok(w) => w,
                Err(r) => return *r,
            };
            let op = match self.op_of(Some(&old), &doc) {
                "update" => "patch",
                op => op,
            };
            let r = self
                .s
                .store
                .update_with(self.store_kind(), doc, self.sub(), self.how);
            if matches!(r, Err(StoreError::Conflict(_))) && !pinned_rv {
                continue;
            }
            self.journal(op, n, &r);
            return match r {
                Ok(w) => warned(ok(StatusCode::OK, self.served(w.object)), &warnings),
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

    /// DeleteOptions: the body's, or none; its own `dryRun` counts too
    /// (client-go sends it there, not in the query).
    fn delete_options(&self, body: &[u8]) -> Result<(Value, Apply), Box<Response>> {
        let opts: Value = if body.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            serde_json::from_slice(body).map_err(|e| {
                Box::new(status(
                    400,
                    "BadRequest",
                    &e.to_string(),
                    None,
                    self.plural(),
                ))
            })?
        };
        let how = match opts["dryRun"].as_array().map(Vec::as_slice) {
            None | Some([]) => self.how,
            Some([v]) if v == "All" => Apply::DryRun,
            Some(other) => {
                let msg =
                    format!("dryRun: Unsupported value: {other:?}: supported values: \"All\"");
                return Err(Box::new(status(422, "Invalid", &msg, None, self.plural())));
            }
        };
        Ok((opts, how))
    }

    pub(super) fn delete(&self, n: &str, body: &[u8]) -> Response {
        let (opts, how) = match self.delete_options(body) {
            Ok(o) => o,
            Err(r) => return *r,
        };
        match self.delete_one(n, &opts, how) {
            // Pods answer with the object deleted, as the API server's pod
            // storage does (ReturnDeletedObject); other kinds with a Status.
            Ok(w) if w.removed && self.t.resource.kind != "Pod" => ok(
                StatusCode::OK,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": n, "group": self.t.resource.group, "kind": self.plural(),
                "uid": w.object["metadata"]["uid"]}}),
            ),
            Ok(w) => ok(StatusCode::OK, self.served(w.object)),
            Err(e) => store_error(&e, Some(n), self.plural()),
        }
    }

    fn delete_one(&self, n: &str, opts: &Value, how: Apply) -> Result<Written, StoreError> {
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
        if let Some(uid) = &uid
            && how == Apply::Commit
        {
            match policy {
                "Orphan" => gc::orphan_dependents(&self.s.store, uid),
                "Foreground" => gc::delete_dependents(&self.s.store, uid),
                _ => {}
            }
        }
        if self.t.resource.kind == "Namespace" {
            let r = namespaces::delete(&self.s.store, n, pre["uid"].as_str(), how);
            if how == Apply::Commit {
                self.journal("delete", n, &r);
            }
            return r;
        }
        let grace = opts["gracePeriodSeconds"].as_u64().or_else(|| {
            self.q
                .get("gracePeriodSeconds")
                .and_then(|g| g.parse().ok())
        });
        let r = if self.t.resource.kind == "Pod" {
            pods::delete(
                &self.s.store,
                self.ns(),
                n,
                pre["uid"].as_str(),
                pre["resourceVersion"].as_str(),
                grace,
                how,
            )
        } else {
            self.s.store.delete_with(
                self.store_kind(),
                self.ns(),
                n,
                pre["uid"].as_str(),
                pre["resourceVersion"].as_str(),
                how,
            )
        };
        if how == Apply::Commit {
            self.journal("delete", n, &r);
        }
        r
    }

    /// DELETE on a collection: every object the selectors match (in the
    /// namespace, if one), each as its own delete; the answer lists them.
    pub(super) fn delete_collection(&self, body: &[u8]) -> Response {
        let (opts, how) = match self.delete_options(body) {
            Ok(o) => o,
            Err(r) => return *r,
        };
        let sel = match self.selector() {
            Ok(s) => s,
            Err(r) => return *r,
        };
        let (page, _, _) = self.s.store.list_page(
            self.store_kind(),
            self.t.namespace.as_deref(),
            None,
            usize::MAX,
            |o| sel.matches(o),
        );
        let mut items = Vec::new();
        for o in page {
            let ns = meta_str(&o, "namespace").to_string();
            let name = meta_str(&o, "name").to_string();
            let one = Target {
                resource: self.t.resource,
                namespace: (!ns.is_empty()).then_some(ns),
                name: Some(name.clone()),
                status: false,
            };
            let req = Req { t: &one, ..*self };
            match req.delete_one(&name, &opts, how) {
                Ok(w) => items.push(self.served(w.object)),
                // Gone meanwhile: as the API server, not an error.
                Err(StoreError::NotFound(_)) => {}
                Err(e) => return store_error(&e, Some(&name), self.plural()),
            }
        }
        ok(
            StatusCode::OK,
            json!({
                "kind": format!("{}List", self.t.resource.kind),
                "apiVersion": self.t.resource.api_version(),
                "metadata": {"resourceVersion": self.s.store.resource_version().to_string()},
                "items": items,
            }),
        )
    }
}

/// How a write's unknown fields are handled (`fieldValidation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

/// A response with a `Warning: 299` header per warning, as kube-apiserver
/// sends them (kubectl prints each as `Warning: ...`).
fn warned(mut r: Response, warnings: &[String]) -> Response {
    for w in warnings {
        let text = format!("299 - {:?}", w);
        if let Ok(v) = axum::http::HeaderValue::from_str(&text) {
            r.headers_mut().append(axum::http::header::WARNING, v);
        }
    }
    r
}

/// A server-side apply's conflicts, as kube-apiserver answers them (409,
/// one cause per field, `--force-conflicts` to take them over).
fn apply_conflict(conflicts: &[managed::Conflict], name: &str, plural: &str) -> Response {
    let shown: Vec<String> = conflicts
        .iter()
        .map(|c| {
            format!(
                "- conflict with {:?} using {}: {}",
                c.manager, c.api_version, c.field
            )
        })
        .collect();
    let message = if conflicts.len() == 1 {
        let c = &conflicts[0];
        format!(
            "Apply failed with 1 conflict: conflict with {:?} using {}: {}",
            c.manager, c.api_version, c.field
        )
    } else {
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            shown.join("\n")
        )
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|c| json!({"reason": "FieldManagerConflict",
            "message": format!("conflict with {:?} using {}", c.manager, c.api_version), "field": c.field}))
        .collect();
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "Conflict", "code": 409,
        "details": {"name": name, "kind": plural, "causes": causes},
    });
    axum::response::IntoResponse::into_response((StatusCode::CONFLICT, axum::Json(body)))
}

/// kube-apiserver names the options, not the object, when they are invalid.
fn patch_options_invalid(detail: &str) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: {detail}"),
        "reason": "Invalid", "code": 422,
        "details": {"group": "meta.k8s.io", "kind": "PatchOptions",
            "causes": [{"reason": "FieldValueRequired", "message": format!("Required value: {detail}"), "field": "fieldManager"}]},
    });
    axum::response::IntoResponse::into_response((
        StatusCode::UNPROCESSABLE_ENTITY,
        axum::Json(body),
    ))
}
