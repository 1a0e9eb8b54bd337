//! One request to a resource, as the verbs see it: its target, query,
//! caller and field manager, and what it shares (the body read as an
//! object of the resource, selectors, the write log).

use super::{Q, meta_str};
use crate::journal::WriteRecord;
use crate::store::{Apply, StoreError, Written};
use crate::{ApiServer, Target, events, status};
use axum::response::Response;
use serde_json::{Value, json};

#[derive(Clone, Copy)]
pub(super) struct Req<'a> {
    pub(super) s: &'a ApiServer,
    pub(super) t: &'a Target,
    pub(super) q: &'a Q,
    pub(super) user: &'a str,
    pub(super) user_agent: &'a str,
    /// RBAC's verb of a write that replaces or patches (`update`, `patch`).
    pub(super) verb: &'static str,
    /// The field manager the write's fields go to (managedFields).
    pub(super) manager: &'a str,
    /// What the server served when the request came (the target was read
    /// by it): its CRDs' schemas and columns, looked up once per request.
    pub(super) served: &'a crate::Served,
    /// `dryRun=All`: the write is decided and answered, not stored.
    pub(super) how: Apply,
}

impl Req<'_> {
    pub(super) fn store_kind(&self) -> &'static str {
        self.t.resource.store_kind
    }

    pub(super) fn plural(&self) -> &'static str {
        self.t.resource.plural
    }

    pub(super) fn ns(&self) -> &str {
        self.t.namespace.as_deref().unwrap_or_default()
    }

    /// The request's label and field selectors, or a 400 saying why not.
    pub(super) fn selector(&self) -> Result<crate::select::Selector, Box<Response>> {
        crate::select::Selector::for_resource(
            self.q.get("labelSelector").map(String::as_str),
            self.q.get("fieldSelector").map(String::as_str),
            &self.t.resource,
        )
        .map_err(|e| Box::new(status(400, "BadRequest", &e, None, self.plural())))
    }

    /// A stored object as this resource serves it (events.k8s.io Events
    /// are stored as core Events).
    pub(super) fn served(&self, stored: Value) -> Value {
        events::served(&self.t.resource, stored)
    }

    /// A custom resource's printer columns, from its CRD.
    pub(super) fn columns(&self) -> Option<Vec<crate::table::Column>> {
        Some(self.served.custom(self.t.resource.kind)?.columns.clone())
    }

    pub(super) fn not_found(&self, n: &str) -> Response {
        super::not_found(&self.t.resource, n)
    }

    /// The body as an object of this resource, its namespace checked.
    pub(super) fn body_object(
        &self,
        body: &[u8],
        name: Option<&str>,
    ) -> Result<Value, Box<Response>> {
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

    /// Logs one write this request made (not a dry run's).
    pub(super) fn journal(&self, op: &'static str, name: &str, r: &Result<Written, StoreError>) {
        if self.how == Apply::DryRun {
            return;
        }
        let name = match r {
            Ok(w) => meta_str(&w.object, "name").to_string(),
            Err(_) => name.to_string(),
        };
        let holder = match r {
            Ok(w) if self.t.resource.kind == "Lease" => w.object["spec"]["holderIdentity"]
                .as_str()
                .map(str::to_string),
            _ => None,
        };
        self.s.log_write(WriteRecord {
            changed: r.as_ref().is_ok_and(|w| w.changed),
            holder,
            error: r.as_ref().err().map(|e| e.to_string()),
            invalid: matches!(r, Err(StoreError::Invalid(_))),
            resource_version: r.as_ref().map_or(0, |w| {
                meta_str(&w.object, "resourceVersion").parse().unwrap_or(0)
            }),
            ..WriteRecord::of(self.user, self.t, op, name)
        });
    }
}
