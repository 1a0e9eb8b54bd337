//! The subresources that are another view of their object, as upstream's
//! registries serve them: a custom resource's `scale` (an autoscaling/v1
//! Scale over the paths its CRD names) and a built-in workload's; with
//! the `conformance` feature, a pod's `ephemeralcontainers` (the pod,
//! where ephemeral containers may only be added) and a CSR's `approval`
//! (the CSR, where only its conditions change). Read with GET,
//! written with PUT or any patch but apply; the object is written back
//! through the store, its resourceVersion a precondition when given.

use super::{Req, ok, store_error};
use crate::patch::{self, PatchKind};
use crate::store::Subresource;
use crate::{Sub, status};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

impl Req<'_> {
    /// The answer of a subresource other than `status` to `m`; None for a
    /// verb it does not have (405).
    pub(super) fn subresource(
        &self,
        m: &Method,
        n: &str,
        content_type: &str,
        body: &[u8],
    ) -> Option<Response> {
        let sub = self.t.sub?;
        let a_view = sub.is_view();
        Some(match (m, sub) {
            #[cfg(feature = "conformance")]
            (&Method::POST, Sub::Eviction) => self.evict(n, body),
            (&Method::POST, Sub::Token) => self.token(n, body),
            (&Method::GET, _) if a_view => {
                match self.s.store.get(self.store_kind(), self.ns(), n) {
                    Some(o) => ok(StatusCode::OK, self.view(sub, &o)),
                    None => self.not_found(n),
                }
            }
            (&Method::PUT | &Method::PATCH, _) if a_view => {
                self.write_view(sub, m, n, content_type, body)
            }
            _ => return None,
        })
    }

    fn view(&self, sub: Sub, o: &Value) -> Value {
        match (sub, self.t.resource.scale) {
            (Sub::Scale, Some(paths)) => {
                let meta = &o["metadata"];
                let mut scale = json!({
                    "kind": "Scale", "apiVersion": "autoscaling/v1",
                    "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                        "uid": meta["uid"], "resourceVersion": meta["resourceVersion"],
                        "creationTimestamp": meta["creationTimestamp"]},
                    "spec": {"replicas": at(o, paths.spec_replicas).as_i64().unwrap_or(0)},
                    "status": {"replicas": at(o, paths.status_replicas).as_i64().unwrap_or(0)},
                });
                let selector = match paths.label_selector {
                    Some(p) => at(o, p).as_str().map(str::to_string),
                    None => built_in_selector(&o["spec"]["selector"]),
                };
                if let Some(selector) = selector {
                    scale["status"]["selector"] = selector.into();
                }
                scale
            }
            _ => self.served(o.clone()),
        }
    }

    fn write_view(
        &self,
        sub: Sub,
        m: &Method,
        n: &str,
        content_type: &str,
        body: &[u8],
    ) -> Response {
        let Some(stored) = self.s.store.get(self.store_kind(), self.ns(), n) else {
            return self.not_found(n);
        };
        let old_view = self.view(sub, &stored);
        let new_view = match self.changed_view(m, n, content_type, body, old_view.clone()) {
            Ok(v) => v,
            Err(r) => return *r,
        };
        let rv = new_view["metadata"]["resourceVersion"].as_str();
        if rv.is_some_and(|rv| {
            !rv.is_empty() && Some(rv) != stored["metadata"]["resourceVersion"].as_str()
        }) {
            let e = crate::store::StoreError::Conflict(
                "the object has been modified; please apply your changes to the latest version and try again".into(),
            );
            return store_error(&e, &self.t.resource, n);
        }
        let mut object = stored.clone();
        let part = match sub {
            Sub::Scale => {
                let paths = self.t.resource.scale.expect("a scale target has its paths");
                // ScaleSpec.replicas is omitempty: a Go client scaling to
                // zero sends no replicas at all.
                let replicas = match &new_view["spec"]["replicas"] {
                    Value::Null => json!(0),
                    r => r.clone(),
                };
                if replicas.as_i64().is_none_or(|r| r < 0) {
                    let msg = format!(
                        "Scale.autoscaling {n:?} is invalid: spec.replicas: Invalid value: {replicas}: must be greater than or equal to 0"
                    );
                    return status(422, "Invalid", &msg, Some(n), self.plural());
                }
                set_at(&mut object, paths.spec_replicas, replicas);
                Subresource::Main
            }
            #[cfg(feature = "conformance")]
            Sub::EphemeralContainers => {
                if let Err(msg) = only_added(&stored, &new_view) {
                    let msg =
                        format!("Pod {n:?} is invalid: spec.ephemeralContainers: Forbidden: {msg}");
                    return status(422, "Invalid", &msg, Some(n), self.plural());
                }
                object["spec"]["ephemeralContainers"] =
                    new_view["spec"]["ephemeralContainers"].clone();
                Subresource::Main
            }
            _ => {
                object["status"]["conditions"] = new_view["status"]["conditions"].clone();
                Subresource::Status
            }
        };
        let r = self
            .s
            .store
            .update_with(self.store_kind(), object, part, self.how);
        self.journal("update", n, &r);
        match r {
            Ok(w) => ok(StatusCode::OK, self.view(sub, &w.object)),
            Err(e) => store_error(&e, &self.t.resource, n),
        }
    }

    /// The view as the request leaves it: a PUT's body, or the view
    /// patched (merge, JSON or strategic; apply is not served here).
    fn changed_view(
        &self,
        m: &Method,
        n: &str,
        content_type: &str,
        body: &[u8],
        mut view: Value,
    ) -> Result<Value, Box<Response>> {
        let bad = |msg: &str| Box::new(status(400, "BadRequest", msg, Some(n), self.plural()));
        if *m == Method::PUT {
            return serde_json::from_slice(body).map_err(|e| bad(&e.to_string()));
        }
        let kind = PatchKind::from_content_type(content_type)
            .filter(|k| *k != PatchKind::Apply)
            .ok_or_else(|| {
                let msg = format!("the patch content type {content_type:?} is not supported here");
                Box::new(status(
                    415,
                    "UnsupportedMediaType",
                    &msg,
                    Some(n),
                    self.plural(),
                ))
            })?;
        let p = patch::parse_body(kind, body).map_err(|e| bad(&e))?;
        patch::apply(kind, &mut view, &p).map_err(|e| {
            let msg = format!("the patch does not apply: {e}");
            Box::new(status(422, "Invalid", &msg, Some(n), self.plural()))
        })?;
        Ok(view)
    }
}

/// Upstream's `ValidatePodEphemeralContainersUpdate`: an ephemeral
/// container, once added, is neither changed nor removed.
#[cfg(feature = "conformance")]
fn only_added(stored: &Value, new: &Value) -> Result<(), String> {
    let list = |v: &Value| {
        v["spec"]["ephemeralContainers"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let new = list(new);
    for old in list(stored) {
        match new.iter().find(|c| c["name"] == old["name"]) {
            None => {
                return Err(format!(
                    "existing ephemeral containers {} may not be removed",
                    old["name"]
                ));
            }
            Some(c) if *c != old => {
                return Err(format!(
                    "existing ephemeral containers {} may not be changed",
                    old["name"]
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// A built-in workload's selector as its Scale says it (`a=b,c=d`): a
/// LabelSelector's matchLabels and expressions, or a
/// ReplicationController's plain map.
fn built_in_selector(selector: &Value) -> Option<String> {
    let labels = selector
        .get("matchLabels")
        .unwrap_or(selector)
        .as_object()?;
    let mut terms: Vec<String> = labels
        .iter()
        .filter_map(|(k, v)| Some(format!("{k}={}", v.as_str()?)))
        .collect();
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let (key, values) = crate::registry::kind_rules::expression(e);
        terms.push(match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            _ => format!("!{key}"),
        });
    }
    terms.sort();
    Some(terms.join(","))
}

/// The value at a `.a.b.c` path (a CRD's scale paths).
fn at<'a>(o: &'a Value, path: &str) -> &'a Value {
    path.trim_start_matches('.')
        .split('.')
        .fold(o, |v, key| &v[key])
}

fn set_at(o: &mut Value, path: &str, value: Value) {
    let mut here = o;
    for key in path.trim_start_matches('.').split('.') {
        if !here.is_object() {
            *here = json!({});
        }
        here = &mut here[key];
    }
    *here = value;
}
