//! Without the `conformance` feature (issue 34, item 7) the server answers
//! as a cluster that lacks what only kubectl's typed commands and kube-rs's
//! own cluster tests need: those kinds and subresources are not served
//! (404, and discovery does not list them), a protobuf body is 415 (which
//! kube-rs never sends; client-go's typed clients do not fall back from
//! it), and an answer is JSON whatever `Accept` prefers. OpenAPI v2 is
//! still served as protobuf (encoded by hand): helm's validation reads it.
//! With the feature, `protobuf.rs`, `eviction.rs` and
//! `conformance_kinds.rs` hold what they do.
#![cfg(not(feature = "conformance"))]

mod common;

use common::{send, server};
use serde_json::{Value, json};

fn get(path: &str, accept: &str) -> http::Request<Vec<u8>> {
    http::Request::get(path)
        .header("accept", accept)
        .body(Vec::new())
        .unwrap()
}

fn names(list: &Value) -> Vec<&str> {
    list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect()
}

#[tokio::test]
async fn the_conformance_only_kinds_and_subresources_are_neither_listed_nor_served() {
    let (_s, c) = server().await;
    let (code, _, core) = send(&c, get("/api/v1", "application/json")).await;
    assert_eq!(code, 200);
    let core: Value = serde_json::from_slice(&core).unwrap();
    let core = names(&core);
    assert!(core.contains(&"pods") && core.contains(&"pods/status"));
    for absent in [
        "replicationcontrollers",
        "componentstatuses",
        "pods/eviction",
        "pods/ephemeralcontainers",
    ] {
        assert!(!core.contains(&absent), "{absent} listed in {core:?}");
    }
    let (_, _, groups) = send(&c, get("/apis", "application/json")).await;
    let groups: Value = serde_json::from_slice(&groups).unwrap();
    let groups: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert!(groups.contains(&"apps"), "{groups:?}");
    assert!(!groups.contains(&"policy"), "{groups:?}");
    assert!(!groups.contains(&"certificates.k8s.io"), "{groups:?}");
    // Nor are their group versions registered as APIServices.
    for name in ["v1.policy", "v1.certificates.k8s.io"] {
        let path = format!("/apis/apiregistration.k8s.io/v1/apiservices/{name}");
        assert_eq!(send(&c, get(&path, "application/json")).await.0, 404);
    }
    for path in [
        "/api/v1/componentstatuses",
        "/api/v1/namespaces/a/replicationcontrollers",
        "/apis/policy/v1/namespaces/a/poddisruptionbudgets",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
    ] {
        let (code, _, body) = send(&c, get(path, "application/json")).await;
        let status: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!((code, status["reason"].as_str()), (404, Some("NotFound")));
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}});
    let req = http::Request::post("/api/v1/namespaces/a/pods")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&pod).unwrap())
        .unwrap();
    assert_eq!(send(&c, req).await.0, 201);
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "a"}});
    let req = http::Request::post("/api/v1/namespaces/a/pods/p/eviction")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&eviction).unwrap())
        .unwrap();
    assert_eq!(send(&c, req).await.0, 404);
    // The pod is still there: nothing evicted it.
    assert_eq!(
        send(&c, get("/api/v1/namespaces/a/pods/p", "application/json"))
            .await
            .0,
        200
    );
}

#[tokio::test]
async fn protobuf_is_refused_as_a_body_and_answered_as_json() {
    let (_s, c) = server().await;
    // What kubectl's typed `create namespace` sends: refused with 415.
    let req = http::Request::post("/api/v1/namespaces")
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(b"k8s\0\x0a\x0f\x0a\x02v1\x12\x09Namespace".to_vec())
        .unwrap();
    let (code, _, body) = send(&c, req).await;
    let status: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (code, status["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    let accept = "application/vnd.kubernetes.protobuf, application/json";
    let (code, content_type, body) = send(&c, get("/api/v1/namespaces/a", accept)).await;
    assert_eq!((code, content_type.as_str()), (200, "application/json"));
    let ns: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(ns["metadata"]["name"], "a");
    // OpenAPI v2 as protobuf needs no protobuf library: still served.
    let openapi = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
    let (code, content_type, _) = send(&c, get("/openapi/v2", openapi)).await;
    assert_eq!(
        (code, content_type.as_str()),
        (
            200,
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        )
    );
}
