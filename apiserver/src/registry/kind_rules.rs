//! The validation upstream's registries apply to built-in kinds beyond
//! metadata, where a client meets it first (`pkg/apis/apps/validation`,
//! `pkg/apis/core/validation`): a Deployment's selector must select its
//! template; a Pod's spec, once created, changes only where upstream lets
//! it (images, the active deadline, tolerations added, scheduling gates
//! removed, and while gated its node selector and affinity: what a
//! scheduler gate's controller writes, gpu-claims' G4 among them).

use crate::registry::validate::Cause;
use serde_json::{Map, Value};

/// The causes to refuse a write of `kind` (`old`: the stored object, for
/// an update).
pub fn check(kind: &str, old: Option<&Value>, new: &Value) -> Vec<Cause> {
    match (kind, old) {
        ("Deployment", _) => deployment(new),
        ("Pod", Some(old)) => pod_update(old, new),
        ("Pod", None) | ("Node", _) => crate::registry::resource_values::check(kind, new),
        ("ConfigMap", _) => config_map(new),
        ("Secret", _) => data_size(new, &["data"], "data"),
        ("PriorityClass", _) => crate::registry::priorities::check(old, new),
        _ => crate::registry::dra_rules::check(kind, old, new),
    }
}

/// `core.MaxSecretSize`: what a ConfigMap's or a Secret's data may hold.
const MAX_DATA_BYTES: usize = 1 << 20;

/// `ValidateConfigMap` and `ValidateSecret`: the values together (a
/// Secret's and binaryData's decoded from base64) at most 1 MiB, refused
/// as `field.TooLong` on `field` (a ConfigMap's is the empty path).
fn data_size(obj: &Value, maps: &[&str], field: &str) -> Vec<Cause> {
    let mut total = 0usize;
    for m in maps {
        let base64 = *m == "binaryData" || field == "data";
        for v in obj[*m].as_object().into_iter().flat_map(|o| o.values()) {
            let s = v.as_str().unwrap_or_default();
            // Decoded bytes: 3 for every 4 characters, less the padding.
            let len = if base64 {
                (s.len() / 4 * 3).saturating_sub(s.bytes().rev().take_while(|c| *c == b'=').count())
            } else {
                s.len()
            };
            total = total.saturating_add(len);
        }
    }
    if total > MAX_DATA_BYTES {
        vec![Cause::too_long(field, MAX_DATA_BYTES)]
    } else {
        Vec::new()
    }
}

/// `IsConfigMapKey`'s words (`k8s.io/apimachinery/pkg/util/validation`).
const CONFIG_KEY: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// `IsConfigMapKey`: at most 253 characters of `[-._a-zA-Z0-9]`, and
/// not `.`, `..` or `..`-prefixed.
fn config_key_errors(k: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    if k.len() > 253 {
        errs.push("must be no more than 253 characters");
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    if k.is_empty() || !k.chars().all(allowed) {
        errs.push(CONFIG_KEY);
    }
    if k == "." {
        errs.push("must not be '.'");
    } else if k == ".." {
        errs.push("must not be '..'");
    } else if k.starts_with("..") {
        errs.push("must not start with '..'");
    }
    errs
}

/// `ValidateConfigMap`: each key of data and binaryData a config key, no
/// key in both, and the values at most 1 MiB together, refused on the
/// whole object (Go prints its empty path as `[]`). At most `MOST_CAUSES`
/// keys are named (150,000 bad keys fit a body).
fn config_map(obj: &Value) -> Vec<Cause> {
    use crate::registry::validate::MOST_CAUSES;
    let mut out = Vec::new();
    let binary = obj["binaryData"].as_object();
    for m in ["data", "binaryData"] {
        for k in obj[m].as_object().into_iter().flat_map(|o| o.keys()) {
            if out.len() >= MOST_CAUSES {
                break;
            }
            let field = format!("{m}[{k}]");
            for msg in config_key_errors(k) {
                out.push(Cause::invalid(&field, format!("{k:?}"), msg));
            }
            if m == "data" && binary.is_some_and(|b| b.contains_key(k)) {
                let msg = "duplicate of key present in binaryData";
                out.push(Cause::invalid(&field, format!("{k:?}"), msg));
            }
        }
    }
    out.extend(data_size(obj, &["data", "binaryData"], "[]"));
    out
}

/// `ValidateDeploymentSpec`: a selector, and one that matches the
/// template's labels.
fn deployment(d: &Value) -> Vec<Cause> {
    let spec = &d["spec"];
    let selector = &spec["selector"];
    if !selector.is_object() {
        return vec![Cause::required("spec.selector")];
    }
    let labels = spec["template"]["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if selects(selector, &labels) {
        return Vec::new();
    }
    vec![Cause::invalid(
        "spec.template.metadata.labels",
        go_map(&labels),
        "`selector` does not match template `labels`",
    )]
}

/// A selector expression's key and values.
pub(crate) fn expression(e: &Value) -> (&str, Vec<&str>) {
    let key = e["key"].as_str().unwrap_or_default();
    let values = e["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    (key, values)
}

/// Whether a LabelSelector (matchLabels and matchExpressions) selects
/// these labels; an empty one selects everything.
pub(crate) fn selects(selector: &Value, labels: &Map<String, Value>) -> bool {
    let has = |k: &str| labels.get(k).and_then(Value::as_str);
    let equal = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| has(k) == v.as_str());
    let expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let (key, values) = expression(e);
            match e["operator"].as_str().unwrap_or_default() {
                "In" => has(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => has(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => has(key).is_some(),
                "DoesNotExist" => has(key).is_none(),
                _ => false,
            }
        });
    equal && expressions
}

/// Go's `%#v` of a `map[string]string`, as upstream's message shows it.
fn go_map(m: &Map<String, Value>) -> String {
    let pairs: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default()))
        .collect();
    format!("map[string]string{{{}}}", pairs.join(", "))
}

const POD_UPDATE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `ValidatePodUpdate`: the new spec, with what may change taken back
/// from the old one, must be the old spec. Both defaulted: upstream
/// defaults what it reads from storage too, and an object seeded into the
/// store as it was (a test's world) is compared as a cluster would have
/// stored it.
fn pod_update(old: &Value, new: &Value) -> Vec<Cause> {
    let mut old = old.clone();
    crate::registry::defaults::apply("Pod", &mut old);
    let (was, now) = (&old["spec"], &new["spec"]);
    let mut out = Vec::new();
    let gates =
        |s: &Value| -> Vec<Value> { s["schedulingGates"].as_array().cloned().unwrap_or_default() };
    let (old_gates, new_gates) = (gates(was), gates(now));
    if new_gates.iter().any(|g| !old_gates.contains(g)) {
        out.push(Cause::forbidden(
            "spec.schedulingGates",
            "only deletion is allowed, but found new scheduling gate",
        ));
    }
    let mut munged = now.clone();
    let put_back = |munged: &mut Value, field: &str| match was.get(field) {
        Some(v) => munged[field] = v.clone(),
        None => {
            if let Some(o) = munged.as_object_mut() {
                o.remove(field);
            }
        }
    };
    for list in ["containers", "initContainers"] {
        let olds = was[list].as_array().cloned().unwrap_or_default();
        if let Some(news) = munged.get_mut(list).and_then(Value::as_array_mut)
            && news.len() == olds.len()
        {
            for (n, o) in news.iter_mut().zip(&olds) {
                match (o.get("image"), n.as_object_mut()) {
                    (Some(image), Some(n)) => n.insert("image".into(), image.clone()),
                    (None, Some(n)) => n.remove("image"),
                    _ => None,
                };
            }
        }
    }
    put_back(&mut munged, "activeDeadlineSeconds");
    put_back(&mut munged, "schedulingGates");
    // `validateOnlyAddedTolerations`, apart from the spec's comparison.
    let tolerations = |s: &Value| s["tolerations"].as_array().cloned().unwrap_or_default();
    let now_tolerations = tolerations(now);
    if !tolerations(was).iter().all(|t| now_tolerations.contains(t)) {
        out.push(Cause::forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        ));
    }
    put_back(&mut munged, "tolerations");
    // A gated pod's scheduling directives may be narrowed (KEP-3838):
    // node selector entries added, node affinity changed.
    if !old_gates.is_empty() {
        let selector = |s: &Value| s["nodeSelector"].as_object().cloned().unwrap_or_default();
        let (before, after) = (selector(was), selector(now));
        if before.iter().all(|(k, v)| after.get(k) == Some(v)) {
            put_back(&mut munged, "nodeSelector");
        }
        put_back(&mut munged, "affinity");
    }
    if munged != *was {
        out.push(Cause::forbidden("spec", POD_UPDATE));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(c: &[Cause]) -> Vec<&str> {
        c.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn a_deployment_must_select_its_template() {
        let d = |selector: Value, labels: Value| json!({"spec": {"selector": selector, "template": {"metadata": {"labels": labels}}}});
        assert!(
            check(
                "Deployment",
                None,
                &d(
                    json!({"matchLabels": {"app": "x"}}),
                    json!({"app": "x", "v": "1"})
                )
            )
            .is_empty()
        );
        let bad = check(
            "Deployment",
            None,
            &d(json!({"matchLabels": {"app": "x"}}), json!({"app": "y"})),
        );
        assert_eq!(fields(&bad), ["spec.template.metadata.labels"]);
        assert_eq!(bad[0].value, r#"map[string]string{"app":"y"}"#);
        let expr =
            json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]});
        assert!(check("Deployment", None, &d(expr.clone(), json!({"tier": "gpu"}))).is_empty());
        assert_eq!(
            fields(&check("Deployment", None, &d(expr, json!({"tier": "cpu"})))),
            ["spec.template.metadata.labels"]
        );
        assert_eq!(
            fields(&check("Deployment", None, &json!({"spec": {}}))),
            ["spec.selector"]
        );
    }

    #[test]
    fn a_pods_spec_changes_only_where_upstream_lets_it() {
        let pod = json!({"spec": {"containers": [{"name": "a", "image": "x:1", "command": ["run"]}],
            "schedulingGates": [{"name": "gpu"}], "tolerations": [{"key": "a", "operator": "Exists"}]}});
        // As the handler checks it: the written object defaulted first.
        let with = |f: &dyn Fn(&mut Value)| {
            let mut p = pod.clone();
            f(&mut p);
            crate::registry::defaults::apply("Pod", &mut p);
            check("Pod", Some(&pod), &p)
        };
        assert!(with(&|_| {}).is_empty());
        assert!(with(&|p| p["spec"]["containers"][0]["image"] = json!("x:2")).is_empty());
        assert!(with(&|p| p["spec"]["activeDeadlineSeconds"] = json!(60)).is_empty());
        assert!(
            with(&|p| p["spec"]["tolerations"]
                .as_array_mut()
                .unwrap()
                .push(json!({"key": "b", "operator": "Exists"})))
            .is_empty()
        );
        // G4: pinned and ungated in one write, while gated.
        assert!(
            with(&|p| {
                p["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "n1"});
                p["spec"].as_object_mut().unwrap().remove("schedulingGates");
            })
            .is_empty()
        );
        assert_eq!(
            fields(&with(
                &|p| p["spec"]["containers"][0]["command"] = json!(["other"])
            )),
            ["spec"]
        );
        assert_eq!(
            fields(&with(&|p| p["spec"]["tolerations"] = json!([]))),
            ["spec.tolerations"]
        );
        assert_eq!(
            fields(&with(&|p| p["spec"]["schedulingGates"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "more"})))),
            ["spec.schedulingGates"]
        );
        // Once ungated, its node selector is fixed.
        let mut ungated = pod.clone();
        ungated["spec"]
            .as_object_mut()
            .unwrap()
            .remove("schedulingGates");
        let mut moved = ungated.clone();
        moved["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "n2"});
        crate::registry::defaults::apply("Pod", &mut moved);
        assert_eq!(fields(&check("Pod", Some(&ungated), &moved)), ["spec"]);
    }
}
