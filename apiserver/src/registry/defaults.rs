//! Defaulting of the built-in kinds served, as kube-apiserver does it
//! when it decodes a write (`pkg/apis/core/v1/defaults.go`,
//! `pkg/apis/apps/v1/defaults.go`): a field the client left out reads as
//! the value upstream gives it, so that a controller sees the object a
//! cluster would store. Idempotent: an object already defaulted is left
//! as it is.

use serde_json::{Map, Value, json};

/// Fills what the kind's defaulting fills.
pub fn apply(kind: &str, obj: &mut Value) {
    match kind {
        "Pod" => pod(obj),
        "Service" => {
            if let Some(spec) = obj.get_mut("spec") {
                service(spec);
            }
        }
        "Secret" => secret(obj),
        "Namespace" => namespace(obj),
        "Deployment" => deployment(obj),
        "PriorityClass" => crate::registry::priorities::defaults(obj),
        _ => {}
    }
}

/// Sets `obj[field]` when it is absent (or null).
fn set(obj: &mut Value, field: &str, value: Value) {
    if obj.get(field).is_none_or(Value::is_null) {
        obj[field] = value;
    }
}

/// `SetDefaults_Pod`, `SetDefaults_PodSpec` and the containers'.
fn pod(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    pod_spec(spec);
    set(spec, "enableServiceLinks", json!(true));
    // Requests default to limits, for a Pod's containers (not a
    // template's: that is why upstream does it here).
    for list in ["containers", "initContainers"] {
        for c in items(spec, list) {
            let limits = c["resources"]["limits"].as_object().cloned();
            if let Some(limits) = limits {
                let requests = &mut c["resources"]["requests"];
                if !requests.is_object() {
                    *requests = Value::Object(Map::new());
                }
                for (k, v) in limits {
                    set(requests, &k, v);
                }
            }
        }
    }
}

/// `SetDefaults_PodSpec` and `SetDefaults_Container` (a Pod's and a
/// template's alike).
fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set(spec, "dnsPolicy", json!("ClusterFirst"));
    set(spec, "restartPolicy", json!("Always"));
    set(spec, "securityContext", json!({}));
    set(spec, "terminationGracePeriodSeconds", json!(30));
    set(spec, "schedulerName", json!("default-scheduler"));
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in items(spec, list) {
            container(c);
        }
    }
}

fn container(c: &mut Value) {
    let policy = if image_tag(c["image"].as_str().unwrap_or_default()) == "latest" {
        "Always"
    } else {
        "IfNotPresent"
    };
    set(c, "imagePullPolicy", json!(policy));
    set(c, "terminationMessagePath", json!("/dev/termination-log"));
    set(c, "terminationMessagePolicy", json!("File"));
    for p in items(c, "ports") {
        set(p, "protocol", json!("TCP"));
    }
}

/// The tag of an image reference, as `parsers.ParseImageName` reads it:
/// `latest` when it names none (a digest names none either, but pulls by
/// digest: upstream gives `IfNotPresent` then).
fn image_tag(image: &str) -> &str {
    if image.contains('@') {
        return "";
    }
    // The tag follows the last ':' after the last '/' (a registry's port
    // is before it).
    let name = image.rsplit('/').next().unwrap_or(image);
    name.rsplit_once(':').map_or("latest", |(_, tag)| tag)
}

/// `SetDefaults_Service`, less what the registry allocates on create
/// (`created`: the cluster IP and its families).
fn service(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    set(spec, "sessionAffinity", json!("None"));
    set(spec, "type", json!("ClusterIP"));
    let ty = spec["type"].as_str().unwrap_or_default().to_string();
    for p in items(spec, "ports") {
        set(p, "protocol", json!("TCP"));
        let target = &p["targetPort"];
        if target.is_null() || *target == json!(0) || *target == json!("") {
            p["targetPort"] = p["port"].clone();
        }
    }
    if matches!(ty.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        set(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if matches!(ty.as_str(), "NodePort" | "LoadBalancer") {
        set(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if ty == "LoadBalancer" {
        set(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

/// `SetDefaults_Secret`, and what its registry does with every write:
/// `stringData` (write-only) is merged into `data`, base64-encoded, and
/// not stored.
fn secret(obj: &mut Value) {
    use base64::Engine;
    set(obj, "type", json!("Opaque"));
    let Some(Value::Object(plain)) = obj.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return;
    };
    if !obj["data"].is_object() {
        obj["data"] = Value::Object(Map::new());
    }
    for (k, v) in plain {
        let text = v.as_str().unwrap_or_default();
        let encoded = base64::engine::general_purpose::STANDARD.encode(text);
        obj["data"][k.as_str()] = json!(encoded);
    }
}

/// `SetDefaults_Namespace`: the label naming it.
fn namespace(obj: &mut Value) {
    let Some(name) = obj["metadata"]["name"].as_str().map(str::to_string) else {
        return;
    };
    let labels = &mut obj["metadata"]["labels"];
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    labels["kubernetes.io/metadata.name"] = json!(name);
}

/// apps/v1 `SetDefaults_Deployment`, and its template's pod spec.
fn deployment(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    set(spec, "replicas", json!(1));
    set(spec, "revisionHistoryLimit", json!(10));
    set(spec, "progressDeadlineSeconds", json!(600));
    set(spec, "strategy", json!({}));
    let strategy = &mut spec["strategy"];
    set(strategy, "type", json!("RollingUpdate"));
    if strategy["type"] == "RollingUpdate" {
        set(strategy, "rollingUpdate", json!({}));
        set(
            &mut strategy["rollingUpdate"],
            "maxUnavailable",
            json!("25%"),
        );
        set(&mut strategy["rollingUpdate"], "maxSurge", json!("25%"));
    }
    if let Some(template) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
        pod_spec(template);
    }
}

/// The objects of a list field (none when absent; an absent field is not
/// made).
fn items<'a>(v: &'a mut Value, field: &str) -> impl Iterator<Item = &'a mut Value> {
    v.get_mut(field)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_reads_as_upstream_defaults_it() {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}],
             "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}},
            {"name": "b", "image": "registry:5000/x/y:v1.2"},
            {"name": "c", "image": "x@sha256:abc"}]}});
        apply("Pod", &mut p);
        let s = &p["spec"];
        assert_eq!(
            (&s["dnsPolicy"], &s["restartPolicy"], &s["schedulerName"]),
            (
                &json!("ClusterFirst"),
                &json!("Always"),
                &json!("default-scheduler")
            )
        );
        assert_eq!(
            (
                &s["terminationGracePeriodSeconds"],
                &s["enableServiceLinks"],
                &s["securityContext"]
            ),
            (&json!(30), &json!(true), &json!({}))
        );
        let c = &s["containers"];
        let pulls: Vec<&Value> = (0..3).map(|i| &c[i]["imagePullPolicy"]).collect();
        assert_eq!(
            pulls,
            [
                &json!("Always"),
                &json!("IfNotPresent"),
                &json!("IfNotPresent")
            ]
        );
        assert_eq!(c[0]["ports"][0]["protocol"], "TCP");
        assert_eq!(c[0]["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(
            c[0]["resources"]["requests"],
            json!({"cpu": "1", "memory": "1Gi"})
        );
        let again = p.clone();
        apply("Pod", &mut p);
        assert_eq!(p, again, "defaulting twice changes nothing");
        assert!(!p.to_string().contains("null"), "no field made null: {p}");
        let mut kept = json!({"spec": {"restartPolicy": "Never", "containers": []}});
        apply("Pod", &mut kept);
        assert_eq!(kept["spec"]["restartPolicy"], "Never");
    }

    #[test]
    fn a_service_a_deployment_a_secret_and_a_namespace_read_as_upstream_defaults_them() {
        let mut svc =
            json!({"spec": {"ports": [{"port": 80}, {"port": 81, "targetPort": "http"}]}});
        apply("Service", &mut svc);
        let s = &svc["spec"];
        assert_eq!(
            (&s["type"], &s["sessionAffinity"]),
            (&json!("ClusterIP"), &json!("None"))
        );
        assert_eq!(
            s["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
        assert_eq!(s["ports"][1]["targetPort"], "http");
        assert_eq!(s["internalTrafficPolicy"], "Cluster");
        let mut d = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:1"}]}}}});
        apply("Deployment", &mut d);
        let s = &d["spec"];
        assert_eq!(
            (
                &s["replicas"],
                &s["revisionHistoryLimit"],
                &s["progressDeadlineSeconds"]
            ),
            (&json!(1), &json!(10), &json!(600))
        );
        assert_eq!(
            s["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(s["template"]["spec"]["restartPolicy"], "Always");
        assert!(
            s["template"]["spec"].get("enableServiceLinks").is_none(),
            "a Pod's, not a template's"
        );
        let mut secret = json!({"data": {"a": "eA=="}, "stringData": {"b": "y"}});
        apply("Secret", &mut secret);
        assert_eq!(secret["type"], "Opaque");
        assert_eq!(secret["data"], json!({"a": "eA==", "b": "eQ=="}));
        assert!(secret.get("stringData").is_none());
        let mut ns = json!({"metadata": {"name": "x"}});
        apply("Namespace", &mut ns);
        assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "x");
    }
}
