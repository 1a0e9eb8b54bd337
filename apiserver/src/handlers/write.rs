//! The writes: create, update (main or status), patch and delete, each
//! applied or, with `dryRun=All`, only decided.

use super::{Req, meta_str, ok, store_error};
use crate::patch::{self, PatchKind};
use crate::registry::priorities;
use crate::status;
use crate::store::{Apply, StoreError, Subresource};
use crate::{admission, controllers::namespaces, events, patch::managed, registry::validate};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

impl Req<'_> {
    /// The object a create's body makes, through admission: the
    /// namespace must exist and not be terminating, then the mutating
    /// webhooks that match have their say.
    pub(super) async fn admitted(&self, body: &[u8]) -> Result<Value, Box<Response>> {
        let mut obj = self.body_object(body, None)?;
        let name = meta_str(&obj, "name").to_string();
        if let Some(ns) = &self.t.namespace {
            namespaces::admit_create(&self.s.store, &self.t.resource, ns, Some(&name))?;
        }
        self.admit_pod_priority(&mut obj)?;
        let a = admission::Attributes {
            resource: &self.t.resource,
            namespace: self.t.namespace.as_deref(),
            user: self.user,
            dry_run: self.how == Apply::DryRun,
        };
        let obj = admission::mutate(self.s, &a, obj).await.map_err(Box::new)?;
        admission::validate(self.s, &a, obj).await.map_err(Box::new)
    }

    /// The Priority admission plugin on a pod's create (before the
    /// webhooks, as the built-in plugins run first): its priority from its
    /// class, or refused (403).
    fn admit_pod_priority(&self, obj: &mut Value) -> Result<(), Box<Response>> {
        if self.store_kind() != "Pod" {
            return Ok(());
        }
        priorities::admit_pod(&self.s.store, obj).map_err(|why| {
            let name = match meta_str(obj, "name") {
                "" => meta_str(obj, "generateName").to_string(),
                n => n.to_string(),
            };
            Box::new(self.forbidden(&name, &why))
        })
    }

    /// A create from an apply patch: admitted by the namespace's lifecycle
    /// but not sent to webhooks (an apply that creates is not, here).
    fn create_unhooked(&self, body: &[u8]) -> Response {
        let mut obj = match self.body_object(body, None) {
            Ok(o) => o,
            Err(r) => return *r,
        };
        if let Err(r) = self.admit_pod_priority(&mut obj) {
            return *r;
        }
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
        let warnings = match self.prepare(&name, &mut obj, applied) {
            Ok(w) => w,
            Err(r) => return *r,
        };
        if self.t.resource.kind == "Namespace" {
            obj = namespaces::shaped(obj);
        }
        let r = self
            .s
            .store
            .create_prepared(self.store_kind(), obj, self.how);
        self.journal("create", "", &r);
        match r {
            Ok(w) => warned(ok(StatusCode::CREATED, self.served(w.object)), &warnings),
            Err(e) => store_error(&e, &self.t.resource, &name),
        }
    }

    fn sub(&self) -> Subresource {
        if self.t.is_status() {
            Subresource::Status
        } else {
            Subresource::Main
        }
    }

    /// What an update did, in the journal's words.
    fn op_of(&self, old: Option<&Value>, new: &Value) -> &'static str {
        if self.t.is_status() {
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

    /// A built-in kind whose update must name the version it read.
    fn conditional_only(&self) -> bool {
        self.t.resource.kind == "DeviceTaintRule" && self.t.resource.version == "v1"
    }

    pub(super) fn update(&self, n: &str, body: &[u8]) -> Response {
        let mut obj = match self.body_object(body, Some(n)) {
            Ok(o) => o,
            Err(r) => return *r,
        };
        // Custom resources allow no unconditional update; built-ins do,
        // but for those whose strategy says otherwise at this version
        // (DeviceTaintRule at v1: "Prevent unconditional updates for v1
        // and all other future versions").
        if (self.t.resource.is_custom() || self.conditional_only())
            && meta_str(&obj, "resourceVersion").is_empty()
        {
            let cause = validate::Cause::invalid(
                "metadata.resourceVersion",
                "0x0",
                "must be specified for an update",
            );
            return validate::invalid(&self.t.resource, n, &[cause]);
        }
        let warnings = match self.prepare(n, &mut obj, false) {
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
            Err(e) => store_error(&e, &self.t.resource, n),
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
                if kind == PatchKind::Apply && !self.t.is_status() {
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
            let warnings = match self.prepare(n, &mut doc, kind == PatchKind::Apply) {
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
                Err(e) => store_error(&e, &self.t.resource, n),
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
    crate::answers::status_response(StatusCode::CONFLICT, &body)
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
    crate::answers::status_response(StatusCode::UNPROCESSABLE_ENTITY, &body)
}
