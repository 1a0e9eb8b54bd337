//! OpenAPI v3, as the API server publishes it for clients such as
//! `kubectl explain`: `/openapi/v3` lists a document per group version,
//! and each document's `components.schemas` holds the served kinds'
//! schemas with their `x-kubernetes-group-version-kind`. The custom
//! resources' schemas are their CRDs'; built-in kinds are not described
//! (their group versions are listed with empty documents).

use super::RESOURCES;
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

/// The document of one group version, or None when it is not served.
pub fn document(group: &str, version: &str) -> Option<Value> {
    let served: Vec<_> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    let mut schemas = serde_json::Map::new();
    let mut paths = serde_json::Map::new();
    for (_, crd) in crate::crd::all() {
        let names = &crd.spec.names;
        if crd.spec.group != group {
            continue;
        }
        for v in crd.spec.versions.iter().filter(|v| v.name == version) {
            let Some(schema) = v
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
            else {
                continue;
            };
            let Ok(mut s) = serde_json::to_value(schema) else {
                continue;
            };
            s["properties"]["apiVersion"] = json!({"type": "string",
                "description": "The versioned schema of this representation of an object."});
            s["properties"]["kind"] = json!({"type": "string",
                "description": "The REST resource this object represents."});
            s["properties"]["metadata"] = json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}],
                    "description": "Standard object's metadata."});
            s["x-kubernetes-group-version-kind"] =
                json!([{"group": group, "version": version, "kind": names.kind}]);
            let name = format!("{}.{version}.{}", reversed(group), names.kind);
            // The read operations, which say their kind (kubectl explain
            // finds a resource's kind through them).
            let base = if crd.spec.scope == "Namespaced" {
                format!(
                    "/{}/namespaces/{{namespace}}/{}",
                    path_of(group, version),
                    names.plural
                )
            } else {
                format!("/{}/{}", path_of(group, version), names.plural)
            };
            let get = json!({"get": {
                "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": names.kind},
                "responses": {"200": {"description": "OK", "content": {"application/json": {
                    "schema": {"$ref": format!("#/components/schemas/{name}")}}}}},
            }});
            paths.insert(format!("{base}/{{name}}"), get);
            schemas.insert(name, s);
        }
    }
    if !schemas.is_empty() {
        schemas.insert(OBJECT_META.into(), object_meta());
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": super::discovery::version()["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

fn hash(v: &Value) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:016X}", h.finish())
}

/// `/openapi/v3`: a document per served group version.
pub fn root() -> Value {
    let mut paths = serde_json::Map::new();
    for r in RESOURCES {
        let p = path_of(r.group, r.version);
        if paths.contains_key(&p) {
            continue;
        }
        if let Some(doc) = document(r.group, r.version) {
            paths.insert(
                p.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", hash(&doc))}),
            );
        }
    }
    json!({"paths": paths})
}

/// Answers an `/openapi/v3...` path, or None when it is not one.
pub fn answer(path: &str) -> Option<Value> {
    let rest = path.strip_prefix("/openapi/v3")?;
    let segs: Vec<&str> = rest.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        [""] => Some(root()),
        ["api", v] => document("", v),
        ["apis", g, v] => document(g, v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_lists_each_group_version_and_the_crds_are_described() {
        let root = root();
        let url = root["paths"]["apis/gpu.cozystack.io/v1alpha1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/gpu.cozystack.io/v1alpha1?hash="));
        assert!(root["paths"]["api/v1"].is_object());
        let doc = answer("/openapi/v3/apis/gpu.cozystack.io/v1alpha1").unwrap();
        let claim = &doc["components"]["schemas"]["io.cozystack.gpu.v1alpha1.GPUClaim"];
        assert_eq!(
            claim["x-kubernetes-group-version-kind"][0]["kind"],
            "GPUClaim"
        );
        assert!(claim["properties"]["spec"]["properties"]["className"].is_object());
        assert!(doc["components"]["schemas"][OBJECT_META].is_object());
        assert!(answer("/openapi/v3/apis/nope/v1").is_none());
    }
}
