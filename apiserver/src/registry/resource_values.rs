//! The quantities in pods and nodes, as kube-apiserver takes them: one
//! that is no quantity at all fails decoding (400, before validation), and
//! validation refuses (422) a negative amount, a fraction of an integer
//! resource (`nvidia.com/gpu: 0.5`), a request above its limit, and an
//! extended resource whose request is not its limit
//! (`ValidateResourceRequirements`, `ValidateNodeResources` in
//! `pkg/apis/core/validation`). A tenant's pod and a node's status are
//! where the controller reads GPUs: what Kubernetes never stores must not
//! reach it from this server either.

use crate::quantity::{self, Quantity};
use crate::registry::validate::{Cause, CauseKind, qualified_name_errors};
use serde_json::{Map, Value};

/// Every quantity field of `obj` (a `kind`), with its path as upstream's
/// validation names it.
fn quantity_maps<'a>(kind: &str, obj: &'a Value) -> Vec<(String, &'a Map<String, Value>)> {
    let mut out = Vec::new();
    let mut push = |path: String, v: &'a Value| {
        if let Some(m) = v.as_object() {
            out.push((path, m));
        }
    };
    match kind {
        "Pod" => {
            let spec = &obj["spec"];
            for list in ["containers", "initContainers", "ephemeralContainers"] {
                for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
                    for part in ["limits", "requests"] {
                        let path = format!("spec.{list}[{i}].resources.{part}");
                        push(path, &c["resources"][part]);
                    }
                }
            }
            push("spec.overhead".into(), &spec["overhead"]);
            for part in ["limits", "requests"] {
                push(format!("spec.resources.{part}"), &spec["resources"][part]);
            }
        }
        "Node" => {
            for part in ["capacity", "allocatable"] {
                push(format!("status.{part}"), &obj["status"][part]);
            }
        }
        _ => {}
    }
    out
}

/// The decoder's refusal of a quantity that does not parse (the reason
/// only: the caller words the 400), or None.
pub fn malformed(kind: &str, obj: &Value) -> Option<String> {
    for (_, m) in quantity_maps(kind, obj) {
        for v in m.values() {
            if let Err(e) = quantity::from_json(v) {
                return Some(e.to_string());
            }
        }
    }
    // An emptyDir's size limit is a quantity too.
    if kind == "Pod" {
        for v in obj["spec"]["volumes"].as_array().into_iter().flatten() {
            let limit = &v["emptyDir"]["sizeLimit"];
            if !limit.is_null()
                && let Err(e) = quantity::from_json(limit)
            {
                return Some(e.to_string());
            }
        }
    }
    None
}

/// The causes to refuse a pod's or a node's quantities (empty: valid).
/// Called on decoded objects: a quantity that does not parse was refused
/// before, and is skipped here.
pub fn check(kind: &str, obj: &Value) -> Vec<Cause> {
    match kind {
        "Pod" => pod(obj),
        "Node" => node(obj),
        _ => Vec::new(),
    }
}

fn parsed(m: &Map<String, Value>) -> Vec<(&str, Quantity)> {
    m.iter()
        .filter_map(|(k, v)| Some((k.as_str(), quantity::from_json(v).ok()?)))
        .collect()
}

/// `ValidateNodeResources`: capacity and allocatable, each amount valid
/// for its resource. Paths are children (`status.allocatable.nvidia.com/gpu`).
fn node(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    for (path, m) in quantity_maps("Node", obj) {
        for (name, q) in parsed(m) {
            value(name, &q, &format!("{path}.{name}"), &mut out);
        }
    }
    out
}

/// `ValidateResourceRequirements` for every container, and the pod's own
/// resources and overhead.
fn pod(obj: &Value) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut out = Vec::new();
    for list in ["containers", "initContainers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            let path = format!("spec.{list}[{i}].resources");
            requirements(&c["resources"], &path, &mut out);
        }
    }
    if spec["resources"].is_object() {
        requirements(&spec["resources"], "spec.resources", &mut out);
    }
    if let Some(overhead) = spec["overhead"].as_object() {
        for (name, q) in parsed(overhead) {
            let path = format!("spec.overhead[{name}]");
            resource_name(name, &path, &mut out);
            value(name, &q, &path, &mut out);
        }
    }
    out
}

fn requirements(r: &Value, path: &str, out: &mut Vec<Cause>) {
    let empty = Map::new();
    let limits = parsed(r["limits"].as_object().unwrap_or(&empty));
    let requests = parsed(r["requests"].as_object().unwrap_or(&empty));
    for (name, q) in &limits {
        let field = format!("{path}.limits[{name}]");
        resource_name(name, &field, out);
        value(name, q, &field, out);
    }
    for (name, q) in &requests {
        let field = format!("{path}.requests[{name}]");
        resource_name(name, &field, out);
        value(name, q, &field, out);
        let limit = limits.iter().find(|(n, _)| n == name).map(|(_, l)| l);
        match limit {
            Some(l) if q.cmp_value(l).is_ne() && !overcommit_allowed(name) => {
                out.push(Cause::invalid(
                    format!("{path}.requests"),
                    format!("{:?}", q.canonical()),
                    format!("must be equal to {name} limit of {}", l.canonical()),
                ));
            }
            Some(l) if q.cmp_value(l).is_gt() => out.push(Cause::invalid(
                format!("{path}.requests"),
                format!("{:?}", q.canonical()),
                format!(
                    "must be less than or equal to {name} limit of {}",
                    l.canonical()
                ),
            )),
            Some(_) => {}
            None if !overcommit_allowed(name) => out.push(Cause {
                field: format!("{path}.limits"),
                value: String::new(),
                detail: "Limit must be set for non overcommitable resources".into(),
                kind: CauseKind::Required,
            }),
            None => {}
        }
    }
}

/// `ValidateResourceQuantityValue`.
fn value(name: &str, q: &Quantity, field: &str, out: &mut Vec<Cause>) {
    let shown = format!("{:?}", q.canonical());
    if q.is_negative() {
        out.push(Cause::invalid(
            field,
            shown.clone(),
            "must be greater than or equal to 0",
        ));
    }
    if integer_resource(name) && !q.is_whole() {
        out.push(Cause::invalid(field, shown, "must be an integer"));
    }
}

/// `validateContainerResourceName`.
fn resource_name(name: &str, field: &str, out: &mut Vec<Cause>) {
    for msg in qualified_name_errors(name) {
        out.push(Cause::invalid(field, format!("{name:?}"), msg));
    }
    if !name.contains('/') {
        if !matches!(name, "cpu" | "memory" | "ephemeral-storage") && !huge_pages(name) {
            out.push(Cause::invalid(
                field,
                format!("{name:?}"),
                "must be a standard resource for containers",
            ));
        }
    } else if !native(name) && !extended(name) {
        out.push(Cause::invalid(
            field,
            format!("{name:?}"),
            "doesn't follow extended resource name standard",
        ));
    }
}

fn huge_pages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// `IsNativeResource`: no domain, or a kubernetes.io one.
fn native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `IsExtendedResourceName`.
fn extended(name: &str) -> bool {
    !native(name)
        && !name.starts_with("requests.")
        && qualified_name_errors(&format!("requests.{name}")).is_empty()
}

/// `IsOvercommitAllowed`: native and not huge pages.
fn overcommit_allowed(name: &str) -> bool {
    native(name) && !huge_pages(name)
}

/// `IsIntegerResourceName`.
fn integer_resource(name: &str) -> bool {
    matches!(
        name,
        "pods"
            | "resourcequotas"
            | "services"
            | "replicationcontrollers"
            | "secrets"
            | "configmaps"
            | "persistentvolumeclaims"
            | "services.nodeports"
            | "services.loadbalancers"
    ) || extended(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_with(resources: Value) -> Value {
        json!({"spec": {"containers": [{"name": "c", "image": "x", "resources": resources}]}})
    }

    fn messages(c: &[Cause]) -> Vec<String> {
        c.iter()
            .map(|c| format!("{}: {}", c.field, c.message()))
            .collect()
    }

    #[test]
    fn a_pods_gpus_must_be_whole_non_negative_and_their_limit() {
        let gpu = "nvidia.com/gpu";
        let ok = pod_with(json!({"limits": {gpu: "2"}, "requests": {gpu: "2", "cpu": "500m"}}));
        assert!(check("Pod", &ok).is_empty());
        // The largest amount Kubernetes stores.
        let most = pod_with(json!({"limits": {gpu: "9223372036854775807"},
            "requests": {gpu: "9223372036854775807"}}));
        assert!(check("Pod", &most).is_empty());
        assert_eq!(
            messages(&check(
                "Pod",
                &pod_with(json!({"limits": {gpu: "-1"}, "requests": {gpu: "-1"}}))
            )),
            [
                "spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: \"-1\": must be greater than or equal to 0",
            ]
        );
        assert_eq!(
            messages(&check(
                "Pod",
                &pod_with(json!({"limits": {gpu: "0.5"}, "requests": {gpu: "0.5"}}))
            )),
            [
                "spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: \"500m\": must be an integer",
                "spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: \"500m\": must be an integer",
            ]
        );
        assert_eq!(
            messages(&check("Pod", &pod_with(json!({"requests": {gpu: "1"}})))),
            [
                "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"
            ]
        );
        assert_eq!(
            messages(&check(
                "Pod",
                &pod_with(json!({"limits": {gpu: "2"}, "requests": {gpu: "1"}}))
            )),
            [
                "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to nvidia.com/gpu limit of 2"
            ]
        );
    }

    #[test]
    fn cpu_may_be_fractional_and_below_its_limit_but_not_above_it() {
        let under = pod_with(json!({"limits": {"cpu": "2"}, "requests": {"cpu": "0.5"}}));
        assert!(check("Pod", &under).is_empty());
        assert_eq!(
            messages(&check(
                "Pod",
                &pod_with(json!({"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}))
            )),
            [
                "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"
            ]
        );
        assert_eq!(
            messages(&check("Pod", &pod_with(json!({"requests": {"gpu": "1"}})))),
            [
                "spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource for containers"
            ]
        );
    }

    #[test]
    fn a_nodes_allocatable_must_be_whole_and_non_negative() {
        let node = |v: Value| json!({"status": {"allocatable": {"nvidia.com/gpu": v}, "capacity": {"cpu": "8"}}});
        assert!(check("Node", &node(json!("8"))).is_empty());
        assert_eq!(
            messages(&check("Node", &node(json!("-4")))),
            [
                "status.allocatable.nvidia.com/gpu: Invalid value: \"-4\": must be greater than or equal to 0"
            ]
        );
        assert_eq!(
            messages(&check("Node", &node(json!("0.5")))),
            ["status.allocatable.nvidia.com/gpu: Invalid value: \"500m\": must be an integer"]
        );
        for bad in ["abc", "", "1.2.3"] {
            assert!(malformed("Node", &node(json!(bad))).is_some(), "{bad:?}");
        }
        assert_eq!(malformed("Node", &node(json!("8"))), None);
        assert_eq!(malformed("Node", &node(json!(8))), None);
    }
}
