//! Discovery: what kubectl and client libraries read before anything else
//! (`/version`, `/api`, `/apis`, and each group version's resource list);
//! aggregated discovery (`v2`), and OpenAPI v2 and v3 (`openapi_v2`,
//! `openapi_v3`).

pub(crate) mod openapi_v2;
pub(crate) mod openapi_v3;
pub(crate) mod v2;

use crate::resources::{Resource, Served, Sub};
use serde_json::{Value, json};

/// The Kubernetes version the server says it is: the API it models.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "37", "gitVersion": "v1.37.0+gpu-claims-embedded",
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "", "compiler": "rust", "platform": std::env::consts::OS,
    })
}

/// `/api`: the core group's versions.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

fn groups(served: &Served) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in served.all().filter(|r| !r.group.is_empty()) {
        if !out.contains(&(r.group, r.version)) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// `/apis`: every named group, each with its one version.
pub fn group_list(served: &Served) -> Value {
    let groups: Vec<Value> = groups(served)
        .into_iter()
        .map(|(g, v)| {
            let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
            json!({"name": g, "versions": [gv.clone()], "preferredVersion": gv})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`: one group.
pub fn group(served: &Served, name: &str) -> Option<Value> {
    let (g, v) = groups(served).into_iter().find(|(g, _)| *g == name)?;
    let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
    Some(json!({"kind": "APIGroup", "apiVersion": "v1", "name": g,
        "versions": [gv.clone()], "preferredVersion": gv}))
}

fn entry(r: &Resource) -> Vec<Value> {
    let verbs = r.verbs();
    let mut out = vec![json!({
        "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
        "kind": r.kind, "verbs": verbs, "shortNames": r.short_names,
    })];
    if !r.categories.is_empty() {
        out[0]["categories"] = json!(r.categories);
    }
    for sub in Sub::ALL.iter().copied().filter(|s| s.of(r)) {
        let (group, version, kind, verbs) = sub.discovered(r);
        let mut entry = json!({
            "name": format!("{}/{}", r.plural, sub.name()), "singularName": "",
            "namespaced": r.namespaced, "kind": kind, "verbs": verbs,
        });
        if !group.is_empty() {
            // A subresource answering another group's kind (Scale,
            // TokenRequest, Eviction): `kubectl drain` reads the
            // Eviction's version here.
            entry["group"] = group.into();
            entry["version"] = version.into();
        }
        out.push(entry);
    }
    out
}

/// `/api/v1` or `/apis/<group>/<version>`: the resources served there.
pub fn resource_list(served: &Served, group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = served
        .all()
        .filter(|r| r.group == group && r.version == version)
        .flat_map(entry)
        .collect();
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

/// Answers a discovery path, or None when it is not one.
pub fn answer(served: &Served, path: &str) -> Option<Value> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segs.as_slice() {
        ["version"] => Some(version()),
        ["api"] => Some(core_versions()),
        ["api", v] => resource_list(served, "", v),
        ["apis"] => Some(group_list(served)),
        ["apis", g] => group(served, g),
        ["apis", g, v] => resource_list(served, g, v),
        _ => None,
    }
}
