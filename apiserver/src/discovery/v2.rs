//! Aggregated discovery (`apidiscovery.k8s.io/v2`): `/api` and `/apis`
//! answered as one `APIGroupDiscoveryList` each, with every version's
//! resources, when the caller asks for it (`Accept: application/json;
//! g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`), as kubectl and
//! kube-rs's `Discovery::run_aggregated` do: one request instead of one
//! per group version. The answer says its media type, by which client-go
//! tells it from the legacy lists.

use crate::resources::{Resource, Served, Sub};
use serde_json::{Value, json};

/// The media type of an aggregated answer.
pub const MEDIA_TYPE: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether `accept` asks for the aggregated form (v2; the beta is not served).
pub fn asked(accept: &str) -> bool {
    accept.split(',').any(|t| {
        let t = t.replace(' ', "");
        t.contains("g=apidiscovery.k8s.io")
            && t.contains("v=v2")
            && !t.contains("v=v2beta1")
            && t.contains("as=APIGroupDiscoveryList")
    })
}

/// `/api` (the core group) or `/apis` (every named group), aggregated;
/// None for any other path.
pub fn answer(served: &Served, path: &str) -> Option<Value> {
    let core = match path.trim_matches('/') {
        "api" => true,
        "apis" => false,
        _ => return None,
    };
    let mut groups: Vec<&'static str> = Vec::new();
    for r in served.all().filter(|r| r.group.is_empty() == core) {
        if !groups.contains(&r.group) {
            groups.push(r.group);
        }
    }
    let items: Vec<Value> = groups.into_iter().map(|g| group(served, g)).collect();
    Some(json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }))
}

/// One group: its one version and the resources served there.
fn group(served: &Served, g: &str) -> Value {
    let in_group: Vec<&Resource> = served.all().filter(|r| r.group == g).collect();
    let mut versions: Vec<&'static str> = Vec::new();
    for r in &in_group {
        if !versions.contains(&r.version) {
            versions.push(r.version);
        }
    }
    let versions: Vec<Value> = versions
        .into_iter()
        .map(|v| {
            let resources: Vec<Value> = in_group
                .iter()
                .filter(|r| r.version == v)
                .map(|r| resource(r))
                .collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": g}, "versions": versions})
}

fn resource(r: &Resource) -> Value {
    let kind = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let verbs = r.verbs();
    let mut out = json!({
        "resource": r.plural,
        "responseKind": kind,
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": verbs,
    });
    if !r.short_names.is_empty() {
        out["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        out["categories"] = json!(r.categories);
    }
    let subresources: Vec<Value> = Sub::ALL
        .iter()
        .copied()
        .filter(|s| s.of(r))
        .map(|sub| {
            let (group, version, kind, verbs) = sub.discovered(r);
            let response_kind = match group.is_empty() {
                true => json!({"group": r.group, "version": r.version, "kind": kind}),
                false => json!({"group": group, "version": version, "kind": kind}),
            };
            json!({"subresource": sub.name(), "responseKind": response_kind, "verbs": verbs})
        })
        .collect();
    if !subresources.is_empty() {
        out["subresources"] = json!(subresources);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_v2_aggregated_accept_is_answered_so() {
        assert!(asked(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        ));
        assert!(asked(
            "application/json; g=apidiscovery.k8s.io; v=v2; as=APIGroupDiscoveryList"
        ));
        assert!(!asked(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        ));
        assert!(!asked("application/json"));
    }
}
