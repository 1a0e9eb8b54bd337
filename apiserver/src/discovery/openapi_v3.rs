//! OpenAPI v3, as the API server publishes it for clients such as
//! `kubectl explain`: `/openapi/v3` lists a document per group version,
//! and each document's `components.schemas` holds the served kinds'
//! schemas with their `x-kubernetes-group-version-kind`, and each served
//! resource's paths and operations (their PATCH with `fieldValidation`,
//! which tells kubectl the server validates fields). The custom
//! resources' schemas are their stored CRDs'; the built-in kinds' are
//! k8s-openapi's (schemars), so `kubectl explain pods.spec` answers too.

use crate::{Custom, Resource, Served};
use serde_json::{Value, json};
use std::hash::{Hash, Hasher};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// `gpu.cozystack.io` → `io.cozystack.gpu`: how OpenAPI names a group.
fn reversed(group: &str) -> String {
    group.split('.').rev().collect::<Vec<_>>().join(".")
}

fn path_of(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// ObjectMeta, with the fields a reader of `explain` looks for.
fn object_meta() -> Value {
    let s = |d: &str| json!({"type": "string", "description": d});
    let map = |d: &str| json!({"type": "object", "additionalProperties": {"type": "string"}, "description": d});
    json!({
        "type": "object",
        "description": "Standard object's metadata.",
        "properties": {
            "name": s("Name must be unique within a namespace."),
            "namespace": s("The namespace the object is in."),
            "generateName": s("A prefix for a name the server generates."),
            "uid": s("The object's unique id, set by the server."),
            "resourceVersion": s("The version of the object, for optimistic concurrency."),
            "generation": {"type": "integer", "format": "int64", "description": "A sequence number for the desired state."},
            "creationTimestamp": {"type": "string", "format": "date-time", "description": "When the object was created."},
            "deletionTimestamp": {"type": "string", "format": "date-time", "description": "When the object will be deleted."},
            "labels": map("Labels to organize and select objects."),
            "annotations": map("Annotations: arbitrary metadata."),
            "finalizers": {"type": "array", "items": {"type": "string"}, "description": "Must be empty before the object is deleted."},
        },
    })
}

/// The query parameters of a write, as kube-apiserver documents them:
/// kubectl looks for `fieldValidation` on a kind's PATCH to know the
/// server validates fields itself (and then sends `fieldValidation=Strict`
/// instead of validating against OpenAPI v2 on the client).
fn write_params() -> Value {
    let q = |name: &str, d: &str| json!({"name": name, "in": "query", "description": d, "schema": {"type": "string"}, "uniqueItems": true});
    json!([
        q(
            "dryRun",
            "When present, indicates that modifications should not be persisted: All."
        ),
        q(
            "fieldManager",
            "A name associated with the actor or entity that is making these changes."
        ),
        q(
            "fieldValidation",
            "How to handle unknown fields in the request: Ignore, Warn (the default) or Strict."
        ),
    ])
}

fn response(code: &str, reference: &Option<String>) -> Value {
    let content = match reference {
        Some(r) => json!({"application/json": {"schema": {"$ref": r}}}),
        None => json!({"application/json": {"schema": {"type": "object"}}}),
    };
    json!({code: {"description": "OK", "content": content}})
}

/// The paths of one resource: its collection and its objects, each
/// operation naming the kind it serves.
fn paths_of(r: &Resource, reference: &Option<String>, paths: &mut serde_json::Map<String, Value>) {
    let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let op = |action: &str, code: &str, params: Value| {
        json!({
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
            "parameters": params,
            "responses": response(code, reference),
        })
    };
    let base = if r.namespaced {
        format!(
            "/{}/namespaces/{{namespace}}/{}",
            path_of(r.group, r.version),
            r.plural
        )
    } else {
        format!("/{}/{}", path_of(r.group, r.version), r.plural)
    };
    if r.review {
        paths.insert(base, json!({"post": op("post", "201", write_params())}));
        return;
    }
    let patch_body = json!({"required": true, "content": {
        "application/json-patch+json": {"schema": {"type": "object"}},
        "application/merge-patch+json": {"schema": {"type": "object"}},
        "application/apply-patch+yaml": {"schema": {"type": "object"}},
    }});
    let mut patch = op("patch", "200", write_params());
    patch["requestBody"] = patch_body;
    paths.insert(
        base.clone(),
        json!({"get": op("list", "200", json!([])), "post": op("post", "201", write_params()),
               "delete": op("deletecollection", "200", json!([]))}),
    );
    paths.insert(
        format!("{base}/{{name}}"),
        json!({"get": op("get", "200", json!([])), "put": op("put", "200", write_params()),
               "patch": patch, "delete": op("delete", "200", json!([]))}),
    );
}

/// A custom resource's schema as a component: the CRD's, with the
/// machinery's fields described.
fn custom_schema(c: &Custom) -> Option<Value> {
    let r = &c.resource;
    let mut s = c.schema.clone()?;
    s["properties"]["apiVersion"] = json!({"type": "string",
        "description": "The versioned schema of this representation of an object."});
    s["properties"]["kind"] = json!({"type": "string",
        "description": "The REST resource this object represents."});
    s["properties"]["metadata"] = json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}],
            "description": "Standard object's metadata."});
    s["x-kubernetes-group-version-kind"] =
        json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
    Some(s)
}

/// The document of one group version, or None when it is not served
/// (made once for the CRDs served: the built-ins' schemas are large).
pub fn document(served: &Served, group: &str, version: &str) -> Option<Value> {
    let key = (group.to_string(), version.to_string());
    if let Some(d) = served
        .openapi
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
    {
        return Some(Value::clone(d));
    }
    let doc = make_document(served, group, version)?;
    served
        .openapi
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, std::sync::Arc::new(doc.clone()));
    Some(doc)
}

fn make_document(served: &Served, group: &str, version: &str) -> Option<Value> {
    let here: Vec<&Resource> = served
        .all()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if here.is_empty() {
        return None;
    }
    let mut schemas = serde_json::Map::new();
    let mut paths = serde_json::Map::new();
    // The built-in kinds' schemas, from k8s-openapi's types (with every
    // type they refer to, ObjectMeta included).
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let mut typed_kinds = Vec::new();
    for r in here {
        let (reference, schema) = if r.custom {
            let name = format!("{}.{version}.{}", reversed_or_core(group), r.kind);
            let schema = served.custom(r.kind).and_then(custom_schema);
            (
                schema.is_some().then(|| name.clone()),
                schema.map(|s| (name, s)),
            )
        } else if r.group != "events.k8s.io" {
            // (events.k8s.io Events are stored as core ones: not described.)
            let name = crate::registry::typed::schema(r.store_kind, &mut generator);
            if let Some(n) = &name {
                typed_kinds.push((n.clone(), *r));
            }
            (name, None)
        } else {
            (None, None)
        };
        let reference = reference.map(|n| format!("#/components/schemas/{n}"));
        paths_of(r, &reference, &mut paths);
        if let Some((name, s)) = schema {
            schemas.insert(name, s);
        }
    }
    for (name, s) in generator.take_definitions(true) {
        schemas.insert(name, s);
    }
    for (name, r) in typed_kinds {
        if let Some(s) = schemas.get_mut(&name) {
            s["x-kubernetes-group-version-kind"] =
                json!([{"group": r.group, "version": r.version, "kind": r.kind}]);
        }
    }
    if !schemas.is_empty() && !schemas.contains_key(OBJECT_META) {
        schemas.insert(OBJECT_META.into(), object_meta());
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::version()["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// How OpenAPI names a group: `gpu.cozystack.io` → `io.cozystack.gpu`;
/// the core group is `io.k8s.api.core`.
fn reversed_or_core(group: &str) -> String {
    if group.is_empty() {
        "io.k8s.api.core".into()
    } else {
        reversed(group)
    }
}

fn hash(v: &Value) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: a document per served group version.
pub fn root(served: &Served) -> Value {
    let mut paths = serde_json::Map::new();
    for r in served.all() {
        let p = path_of(r.group, r.version);
        if paths.contains_key(&p) {
            continue;
        }
        if let Some(doc) = document(served, r.group, r.version) {
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", hash(&doc))}),
            );
        }
    }
    json!({"paths": paths})
}

/// Answers an `/openapi/v3...` path, or None when it is not one.
pub fn answer(served: &Served, path: &str) -> Option<Value> {
    let rest = path.strip_prefix("/openapi/v3")?;
    let segs: Vec<&str> = rest.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        [""] => Some(root(served)),
        ["api", v] => document(served, "", v),
        ["apis", g, v] => document(served, g, v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_lists_each_group_version_and_the_crds_are_described() {
        let served = crate::resources::served_for_tests();
        let root = root(&served);
        let url = root["paths"]["apis/gpu.cozystack.io/v1alpha1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/gpu.cozystack.io/v1alpha1?hash="));
        assert!(root["paths"]["api/v1"].is_object());
        let doc = answer(&served, "/openapi/v3/apis/gpu.cozystack.io/v1alpha1").unwrap();
        let claim = &doc["components"]["schemas"]["io.cozystack.gpu.v1alpha1.GPUClaim"];
        assert_eq!(
            claim["x-kubernetes-group-version-kind"][0]["kind"],
            "GPUClaim"
        );
        assert!(claim["properties"]["spec"]["properties"]["className"].is_object());
        assert!(doc["components"]["schemas"][OBJECT_META].is_object());
        assert!(answer(&served, "/openapi/v3/apis/nope/v1").is_none());
    }
}
