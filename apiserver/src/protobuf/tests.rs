use super::*;
use serde_json::json;

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns", "labels": {"app": "d"},
            "creationTimestamp": "2026-12-02T11:00:00Z"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "d"}},
            "strategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "x", "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": "2", "memory": "1Gi"}},
                    "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
                    "automountServiceAccountToken": false}
            }
        }
    })
}

#[test]
fn an_object_encoded_decodes_to_the_same_json() {
    let d = deployment();
    let body = encode(&d).expect("a Deployment has a protobuf form");
    assert!(body.starts_with(b"k8s\0"));
    assert_eq!(decode(&body).unwrap(), d);
}

#[test]
fn lists_and_statuses_have_their_protobuf_forms_too() {
    let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "7"},
        "items": [{"metadata": {"name": "c"}, "data": {"a": "b"}, "binaryData": {"k": "AAE="}}]});
    assert_eq!(decode(&encode(&list).unwrap()).unwrap(), list);
    let status = json!({"apiVersion": "v1", "kind": "Status", "metadata": {},
        "status": "Failure", "reason": "NotFound", "code": 404,
        "message": "pods \"p\" not found", "details": {"name": "p", "kind": "pods"}});
    assert_eq!(decode(&encode(&status).unwrap()).unwrap(), status);
}

/// Go's protobuf encoding writes every non-pointer field, zeros too: what
/// a client never set is left out of the JSON, as Go's omitempty leaves it
/// out, while a pointer's zero (`replicas: 0`, `automount...: false`) stays.
#[test]
fn the_zeros_go_writes_for_unset_fields_are_left_out_and_a_pointers_zero_kept() {
    let t = tables::tables();
    let d = t.message("apps/v1", "Deployment").unwrap();
    let mut m = from_json::message(t, &d, &deployment());
    let meta = d.get_field_by_name("metadata").unwrap();
    if let Pb::Message(meta_msg) = m.get_field_mut(&meta) {
        meta_msg.set_field_by_name("generateName", Pb::String(String::new()));
        meta_msg.set_field_by_name("generation", Pb::I64(0));
    }
    let v = to_json::message(t, &m);
    assert_eq!(v["metadata"].get("generateName"), None);
    assert_eq!(v["metadata"].get("generation"), None);
    assert_eq!(v["spec"]["replicas"], json!(0));
    assert_eq!(
        v["spec"]["template"]["spec"]["automountServiceAccountToken"],
        json!(false)
    );
}

#[test]
fn kubernetes_own_types_are_spelled_as_their_json() {
    let d = decode(&encode(&deployment()).unwrap()).unwrap();
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["resources"]["limits"]["nvidia.com/gpu"],
        json!("2")
    );
    assert_eq!(
        d["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
        json!("25%")
    );
    assert_eq!(
        d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        json!(1)
    );
    assert_eq!(
        d["metadata"]["creationTimestamp"],
        json!("2026-12-02T11:00:00Z")
    );
    let crd_schema = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "xs.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "xs", "kind": "X"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"n": {"type": "integer", "default": 3},
                        "m": {"type": "object", "additionalProperties": false}}}}}]}});
    assert_eq!(decode(&encode(&crd_schema).unwrap()).unwrap(), crd_schema);
}

#[test]
fn durations_are_spelled_as_go_spells_them() {
    for (nanos, text) in [
        (0, "0s"),
        (1_500, "1.5µs"),
        (1_500_000, "1.5ms"),
        (90_000_000_000, "1m30s"),
        (3_600_000_000_000, "1h0m0s"),
        (3_723_500_000_000, "1h2m3.5s"),
    ] {
        assert_eq!(to_json::go_duration(nanos), text);
    }
}

#[test]
fn a_body_that_is_not_kubernetes_protobuf_is_named_for_what_it_lacks() {
    assert!(matches!(decode(b"{}"), Err(ProtobufError::NoPrefix)));
    let mut body = encode(&deployment()).unwrap();
    body.truncate(body.len() - 3);
    assert!(decode(&body).is_err());
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
    assert!(encode(&widget).is_none());
}

#[test]
fn accept_headers_prefer_protobuf_only_when_it_comes_first() {
    assert!(preferred(
        "application/vnd.kubernetes.protobuf, application/json"
    ));
    assert!(preferred("application/vnd.kubernetes.protobuf"));
    assert!(!preferred(
        "application/json, application/vnd.kubernetes.protobuf"
    ));
    assert!(!preferred(
        "application/vnd.kubernetes.protobuf;stream=watch"
    ));
    assert!(!preferred(""));
}
