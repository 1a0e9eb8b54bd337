//! OpenAPI v2 (`/openapi/v2`), which helm and older kubectl read before
//! they build objects: every served resource's paths, each operation
//! with its `x-kubernetes-group-version-kind`, and each write with the
//! `fieldValidation` query parameter, so clients leave field validation
//! to the server (`fieldValidation=Strict`) instead of validating against
//! definitions. client-go asks for it as gnostic's protobuf
//! (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, alone:
//! `DiscoveryClient.OpenAPISchema`), which `protobuf.rs` encodes by hand
//! (no protobuf library: served with or without the `conformance`
//! feature, since helm and kubectl's validation read it); other clients
//! get JSON, and one that accepts neither a 406, as kube-openapi answers.
//! Definitions (schemas) are not published: a client validating on its
//! own finds no schema and skips the kind, as kubectl does.

mod protobuf;
pub use protobuf::{PROTOBUF, protobuf};

use crate::{Resource, Served};
use serde_json::{Value, json};

/// The forms the document is served in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    /// gnostic's `openapi.v2.Document` (`protobuf.rs`).
    Protobuf,
}

/// The form an `Accept` header asks for, as kube-openapi's handler picks
/// it: its clauses ordered as goautoneg's `ParseAccept` orders them (by
/// q, highest first, then concrete types before wildcards; an absent
/// header is `*/*`, a bare `*` is `*/*`), the first that names a form
/// served; None (406) when none does.
pub fn negotiate(accept: &str) -> Option<Format> {
    const SERVED: &[(&str, &str, Format)] = &[
        ("application", "json", Format::Json),
        (
            "application",
            "com.github.proto-openapi.spec.v2@v1.0+protobuf",
            Format::Protobuf,
        ),
        (
            "application",
            "com.github.proto-openapi.spec.v2.v1.0+protobuf",
            Format::Protobuf,
        ),
    ];
    let accept = if accept.trim().is_empty() {
        "*/*"
    } else {
        accept
    };
    let mut clauses: Vec<(f64, &str, &str)> = accept.split(',').filter_map(clause).collect();
    clauses.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then((a.1 == "*").cmp(&(b.1 == "*")))
            .then((a.2 == "*").cmp(&(b.2 == "*")))
    });
    clauses.into_iter().find_map(|(_, kind, sub)| {
        SERVED
            .iter()
            .find(|(k, s, _)| (kind == *k || kind == "*") && (sub == *s || sub == "*"))
            .map(|(_, _, f)| *f)
    })
}

/// One clause of an `Accept` header: its q (1 when absent, 0 when it does
/// not read as a number, as Go's `ParseFloat` leaves it), type and
/// subtype; None for a clause that is no media range.
fn clause(text: &str) -> Option<(f64, &str, &str)> {
    let mut parts = text.split(';');
    let range = parts.next().unwrap_or_default().trim();
    let (kind, sub) = match range.split_once('/') {
        Some((k, s)) if !s.contains('/') => (k.trim(), s.trim()),
        None if range == "*" => ("*", "*"),
        _ => return None,
    };
    let q = parts
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim() == "q")
        .map_or(1.0, |(_, v)| v.trim().parse().unwrap_or(0.0));
    Some((q, kind, sub))
}

/// One operation of one path.
struct Op {
    method: &'static str,
    action: &'static str,
    writes: bool,
}

/// (path, operations) of each served resource, reviews aside.
fn paths(served: &Served) -> Vec<(String, &Resource, Vec<Op>)> {
    let op = |method, action, writes| Op {
        method,
        action,
        writes,
    };
    let mut out = Vec::new();
    for r in served.all().filter(|r| !r.review) {
        let prefix = if r.group.is_empty() {
            format!("/api/{}", r.version)
        } else {
            format!("/apis/{}/{}", r.group, r.version)
        };
        let base = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("{prefix}/{}", r.plural)
        };
        out.push((
            base.clone(),
            r,
            vec![op("get", "list", false), op("post", "post", true)],
        ));
        out.push((
            format!("{base}/{{name}}"),
            r,
            vec![
                op("get", "get", false),
                op("put", "put", true),
                op("patch", "patch", true),
                op("delete", "delete", false),
            ],
        ));
    }
    out
}

const WRITE_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];

/// The document as JSON (swagger 2.0).
pub fn json(served: &Served) -> Value {
    let mut paths_json = serde_json::Map::new();
    for (path, r, ops) in paths(served) {
        let mut item = serde_json::Map::new();
        for o in ops {
            let params: Vec<Value> = if o.writes {
                WRITE_PARAMS
                    .iter()
                    .map(|p| json!({"name": p, "in": "query", "type": "string", "uniqueItems": true}))
                    .collect()
            } else {
                Vec::new()
            };
            item.insert(
                o.method.into(),
                json!({
                    "operationId": format!("{}{}", o.action, r.kind),
                    "parameters": params,
                    "responses": {"200": {"description": "OK"}},
                    "x-kubernetes-action": o.action,
                    "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
                }),
            );
        }
        paths_json.insert(path, Value::Object(item));
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::version()["gitVersion"]},
        "paths": paths_json,
        "definitions": {},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_write_names_its_kind_and_takes_field_validation() {
        let served = crate::resources::served_for_tests();
        let doc = json(&served);
        let patch = &doc["paths"]["/apis/gpu.cozystack.io/v1alpha1/namespaces/{namespace}/gpuclaims/{name}"]
            ["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "GPUClaim");
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"].is_object());
    }

    #[test]
    fn the_form_is_negotiated_as_kube_openapi_negotiates_it() {
        let pb = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
        let json = Some(Format::Json);
        let protobuf = Some(Format::Protobuf);
        for (accept, form) in [
            ("", json),
            ("*/*", json),
            ("*", json),
            ("application/json", json),
            ("application/*;q=0.9", json),
            ("text/html", None),
            ("text/html, nonsense", None),
            (pb, protobuf),
            (&format!("{pb}, application/json"), protobuf),
            // By q, then concrete before wildcard, whatever the order.
            (&format!("application/json;q=0.5, {pb}"), protobuf),
            (&format!("*/*, {pb}"), protobuf),
            (&format!("{pb};q=0.1, application/json"), json),
            (&format!("{pb};q=x, application/json;q=0.2"), json),
        ] {
            assert_eq!(negotiate(accept), form, "{accept}");
        }
    }
}
