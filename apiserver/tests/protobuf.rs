//! Kubernetes' protobuf wire format, as kube-apiserver takes and answers
//! it for built-in kinds (issue 25, item 7): what kubectl's typed commands
//! (`kubectl create namespace|configmap|deployment`, `drain`) and
//! client-go's clientsets send. The bodies here are built with kube-rs's
//! own protobuf types (k8s-pb), not with this crate's decoder. Only with
//! the `conformance` feature, which serves protobuf.
#![cfg(feature = "conformance")]

mod common;

use common::{send, server};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::Api;
use prost::Message;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// `k8s\0` and a runtime.Unknown around `object`, as client-go writes it.
fn envelope(api_version: &str, kind: &str, object: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(object.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

fn post(path: &str, accept: &str, body: Vec<u8>) -> http::Request<Vec<u8>> {
    http::Request::post(path)
        .header("content-type", PROTOBUF)
        .header("accept", accept)
        .body(body)
        .unwrap()
}

fn meta(name: &str) -> Option<ObjectMeta> {
    Some(ObjectMeta {
        name: Some(name.into()),
        // What Go writes for a field nobody set: an empty string.
        generate_name: Some(String::new()),
        generation: Some(0),
        ..Default::default()
    })
}

#[tokio::test]
async fn a_protobuf_namespace_and_configmap_are_created_as_kubectl_creates_them() {
    let (_s, c) = server().await;
    let ns = core::Namespace {
        metadata: meta("x"),
        ..Default::default()
    };
    let body = envelope("v1", "Namespace", &ns);
    let (code, _, answer) = send(&c, post("/api/v1/namespaces", "application/json", body)).await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    let made: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(made["metadata"]["name"], "x");
    // Go's zeros for unset fields are not stored as if they were set.
    assert_eq!(made["metadata"].get("generateName"), None);
    assert_eq!(made["status"]["phase"], "Active");
    Api::<Namespace>::all(c.clone()).get("x").await.unwrap();

    let cm = core::ConfigMap {
        metadata: meta("c"),
        data: BTreeMap::from([("a".to_string(), "b".to_string())]),
        binary_data: BTreeMap::from([("bin".to_string(), vec![0u8, 1, 2])]),
        ..Default::default()
    };
    let body = envelope("v1", "ConfigMap", &cm);
    let (code, _, answer) = send(
        &c,
        post("/api/v1/namespaces/x/configmaps", "application/json", body),
    )
    .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    let stored = Api::<ConfigMap>::namespaced(c, "x").get("c").await.unwrap();
    assert_eq!(stored.data.unwrap()["a"], "b");
    assert_eq!(stored.binary_data.unwrap()["bin"].0, vec![0u8, 1, 2]);
}

#[tokio::test]
async fn a_protobuf_deployment_keeps_its_pointers_zero_and_kubernetes_own_types() {
    let (_s, c) = server().await;
    let labels = BTreeMap::from([("app".to_string(), "d".to_string())]);
    let container = core::Container {
        name: Some("x".into()),
        image: Some("x".into()),
        resources: Some(core::ResourceRequirements {
            limits: BTreeMap::from([(
                "nvidia.com/gpu".to_string(),
                Quantity {
                    string: Some("2".into()),
                },
            )]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let d = apps::Deployment {
        metadata: meta("d"),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(k8s_pb::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: labels.clone(),
                ..Default::default()
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: Some("RollingUpdate".into()),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_surge: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: Some("50%".into()),
                    }),
                    max_unavailable: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        str_val: Some(String::new()),
                    }),
                }),
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels,
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    host_network: Some(false),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let body = envelope("apps/v1", "Deployment", &d);
    let (code, _, answer) = send(
        &c,
        post(
            "/apis/apps/v1/namespaces/a/deployments",
            "application/json",
            body,
        ),
    )
    .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    let stored = Api::<Deployment>::namespaced(c, "a")
        .get("d")
        .await
        .unwrap();
    let v = serde_json::to_value(&stored).unwrap();
    // A pointer's zero is a value (not "unset, default 1").
    assert_eq!(v["spec"]["replicas"], 0);
    assert_eq!(
        v["spec"]["strategy"]["rollingUpdate"],
        json!({"maxSurge": "50%", "maxUnavailable": 1})
    );
    let pod = &v["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        "2"
    );
    assert_eq!(pod.get("hostNetwork"), None);
    // Defaulted after decoding, as any create.
    assert_eq!(pod["restartPolicy"], "Always");
}

#[tokio::test]
async fn a_client_that_prefers_protobuf_is_answered_in_it_objects_lists_and_errors() {
    let (_s, c) = server().await;
    let accept = "application/vnd.kubernetes.protobuf, application/json";
    let cm = core::ConfigMap {
        metadata: meta("c"),
        data: BTreeMap::from([("a".to_string(), "b".to_string())]),
        ..Default::default()
    };
    let (code, content_type, answer) = send(
        &c,
        post(
            "/api/v1/namespaces/a/configmaps",
            accept,
            envelope("v1", "ConfigMap", &cm),
        ),
    )
    .await;
    assert_eq!((code, content_type.as_str()), (201, PROTOBUF));
    let unknown = Unknown::decode(answer.strip_prefix(b"k8s\0").unwrap()).unwrap();
    let tm = unknown.type_meta.unwrap();
    assert_eq!(
        (tm.api_version.as_deref(), tm.kind.as_deref()),
        (Some("v1"), Some("ConfigMap"))
    );
    let made = core::ConfigMap::decode(&unknown.raw.unwrap()[..]).unwrap();
    assert_eq!(made.data["a"], "b");
    let meta = made.metadata.unwrap();
    assert!(meta.uid.is_some_and(|u| !u.is_empty()));
    assert!(
        meta.creation_timestamp
            .and_then(|t| t.seconds)
            .is_some_and(|s| s > 0)
    );

    let get = |path: &str| {
        http::Request::get(path)
            .header("accept", accept)
            .body(Vec::new())
            .unwrap()
    };
    let (code, content_type, answer) = send(&c, get("/api/v1/namespaces/a/configmaps")).await;
    assert_eq!((code, content_type.as_str()), (200, PROTOBUF));
    let unknown = Unknown::decode(answer.strip_prefix(b"k8s\0").unwrap()).unwrap();
    let list = core::ConfigMapList::decode(&unknown.raw.unwrap()[..]).unwrap();
    assert!(
        list.items
            .iter()
            .any(|i| i.metadata.as_ref().unwrap().name.as_deref() == Some("c"))
    );

    let (code, content_type, answer) =
        send(&c, get("/api/v1/namespaces/a/configmaps/nobody")).await;
    assert_eq!((code, content_type.as_str()), (404, PROTOBUF));
    let unknown = Unknown::decode(answer.strip_prefix(b"k8s\0").unwrap()).unwrap();
    let status =
        k8s_pb::apimachinery::pkg::apis::meta::v1::Status::decode(&unknown.raw.unwrap()[..])
            .unwrap();
    assert_eq!(
        (status.code, status.reason.as_deref()),
        (Some(404), Some("NotFound"))
    );
    // JSON first in the list: JSON.
    let json_first = http::Request::get("/api/v1/namespaces/a/configmaps/c")
        .header(
            "accept",
            "application/json, application/vnd.kubernetes.protobuf",
        )
        .body(Vec::new())
        .unwrap();
    let (_, content_type, _) = send(&c, json_first).await;
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
}

#[tokio::test]
async fn a_body_that_does_not_decode_is_400_and_a_custom_resource_in_protobuf_415() {
    let (_s, c) = server().await;
    let (code, _, answer) = send(
        &c,
        post(
            "/api/v1/namespaces",
            "application/json",
            b"k8s\0\xff\xff".to_vec(),
        ),
    )
    .await;
    let status: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")));
    let widget = envelope("v1", "NoSuchKind", &core::ConfigMap::default());
    let (code, _, answer) = send(
        &c,
        post(
            "/api/v1/namespaces/a/configmaps",
            "application/json",
            widget,
        ),
    )
    .await;
    let status: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(code, 400);
    assert!(
        status["message"].as_str().unwrap().contains("NoSuchKind"),
        "{status}"
    );
    let claim = envelope(
        "gpu.cozystack.io/v1alpha1",
        "GPUClaim",
        &core::ConfigMap::default(),
    );
    let path = "/apis/gpu.cozystack.io/v1alpha1/namespaces/a/gpuclaims";
    let (code, _, answer) = send(&c, post(path, "application/json", claim)).await;
    let status: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(
        (code, status["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
}

/// Issue 61, item 3: a body of 1,040,000 empty finalizers (2 MB of
/// protobuf) is refused 422 as kube-apiserver words it: each distinct
/// error once, as upstream's `ToAggregate` prints them. The causes do
/// not grow with the body (two, not two million), so the answer is small
/// and quick; `gpu-claims-bench --hostile-bodies` measures its time and
/// memory.
#[tokio::test]
async fn a_protobuf_body_of_a_million_empty_finalizers_is_a_small_422_naming_each_error_once() {
    let (_s, c) = server().await;
    let mut m = meta("many").unwrap();
    m.finalizers = vec![String::new(); 1_040_000];
    let cm = core::ConfigMap {
        metadata: Some(m),
        ..Default::default()
    };
    let body = envelope("v1", "ConfigMap", &cm);
    assert!(body.len() > 2_000_000, "{}", body.len());
    let (code, _, answer) = send(
        &c,
        post("/api/v1/namespaces/a/configmaps", "application/json", body),
    )
    .await;
    assert_eq!(code, 422, "{}", String::from_utf8_lossy(&answer));
    assert!(answer.len() < 4096, "{} bytes", answer.len());
    let status: Value = serde_json::from_slice(&answer).unwrap();
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "ConfigMap \"many\" is invalid: [metadata.finalizers: Invalid value: \"\": name part must be non-empty, metadata.finalizers: Invalid value: \"\": name part must consist of"
        ),
        "{message}"
    );
    assert_eq!(status["details"]["causes"].as_array().unwrap().len(), 2);
}
