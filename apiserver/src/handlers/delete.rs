//! The deletes: one object (preconditions, `propagationPolicy`, graceful
//! deletion of a pod on a node) or a collection by its selectors, each
//! applied or, with `dryRun=All`, only decided.

use super::{Req, meta_str, ok, store_error};
use crate::store::{Apply, StoreError, Written};
use crate::{Target, controllers::gc, controllers::namespaces, registry::pods, status};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

impl Req<'_> {
    /// DeleteOptions: the body's, or none; its own `dryRun` counts too
    /// (client-go sends it there, not in the query).
    pub(super) fn delete_options(&self, body: &[u8]) -> Result<(Value, Apply), Box<Response>> {
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
        if self.store_kind() == "PriorityClass"
            && let Some(why) = crate::registry::priorities::refuse_delete(n)
        {
            return self.forbidden(n, why);
        }
        match self.delete_one(n, &opts, how) {
            // The kinds whose storage sets ReturnDeletedObject answer with
            // the object deleted; other kinds with a Status.
            Ok(w) if w.removed && !returns_deleted_object(self.t.resource.kind) => ok(
                StatusCode::OK,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": n, "group": self.t.resource.group, "kind": self.plural(),
                "uid": w.object["metadata"]["uid"]}}),
            ),
            Ok(w) => ok(StatusCode::OK, self.served(w.object)),
            Err(e) => store_error(&e, &self.t.resource, n),
        }
    }

    pub(super) fn delete_one(
        &self,
        n: &str,
        opts: &Value,
        how: Apply,
    ) -> Result<Written, StoreError> {
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
                sub: None,
            };
            let req = Req { t: &one, ..*self };
            match req.delete_one(&name, &opts, how) {
                Ok(w) => items.push(self.served(w.object)),
                // Gone meanwhile: as the API server, not an error.
                Err(StoreError::NotFound(_)) => {}
                Err(e) => return store_error(&e, &self.t.resource, &name),
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

/// The served kinds whose storage in kube-apiserver sets
/// `ReturnDeletedObject: true` (`pkg/registry/core/{pod,service,
/// serviceaccount}/storage`), and CustomResourceDefinitions, whose delete
/// answers the CRD itself (upstream: Terminating on its cleanup finalizer).
fn returns_deleted_object(kind: &str) -> bool {
    matches!(
        kind,
        "Pod" | "Service" | "ServiceAccount" | "CustomResourceDefinition"
    )
}
