//! Issue 33, item 6: what Kubernetes refuses, the embedded API server
//! refuses too, with kube-apiserver's code and words: a pod's or a node's
//! quantity that is negative, a fraction of a GPU, or no quantity at all
//! (`ValidateResourceRequirements`, `ValidateNodeResources`, the decoder's
//! 400); finalizers and annotation keys that are no qualified names, and
//! annotations past 256 KiB (`ValidateObjectMeta`); a ConfigMap's or a
//! Secret's data past 1 MiB (`MaxSecretSize`); an object past what etcd
//! stores (1.5 MiB, a 500). The controller reads GPUs from pods and nodes:
//! what no cluster would hold must not reach it from this server either.
mod common;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const GPU: &str = "nvidia.com/gpu";

fn pod(name: &str, resources: Value) -> Pod {
    common::from(json!({"metadata": {"name": name, "namespace": "a"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": resources}]}}))
}

fn node(name: &str, allocatable: Value) -> Node {
    common::from(json!({"metadata": {"name": name},
        "status": {"capacity": allocatable.clone(), "allocatable": allocatable}}))
}

/// A 400 from the decoder, naming the kind and upstream's parse error.
fn undecodable(e: &kube::core::Status, kind: &str) {
    assert_eq!(
        (e.code, e.reason.as_str()),
        (400, "BadRequest"),
        "{}",
        e.message
    );
    let expected = format!(
        "{kind} in version \"v1\" cannot be handled as a {kind}: quantities must match the regular expression"
    );
    assert!(e.message.starts_with(&expected), "{}", e.message);
}

#[tokio::test]
async fn a_pod_with_negative_fractional_or_unparsable_gpus_is_refused_as_kubernetes_refuses_it() {
    let (_s, c) = common::server().await;
    let pods: Api<Pod> = Api::namespaced(c, "a");
    let pp = PostParams::default();
    for (name, amount, says) in [
        (
            "negative",
            "-1",
            "Invalid value: \"-1\": must be greater than or equal to 0",
        ),
        ("half", "0.5", "Invalid value: \"500m\": must be an integer"),
    ] {
        let p = pod(
            name,
            json!({"limits": {GPU: amount}, "requests": {GPU: amount}}),
        );
        let e = common::refusal(pods.create(&pp, &p).await);
        common::invalid_saying(
            &e,
            &format!("spec.containers[0].resources.limits[nvidia.com/gpu]: {says}"),
        );
    }
    let limitless = pod("limitless", json!({"requests": {GPU: "1"}}));
    let e = common::refusal(pods.create(&pp, &limitless).await);
    common::invalid_saying(&e, "Limit must be set for non overcommitable resources");
    for (name, amount) in [("letters", "abc"), ("empty", "")] {
        let p = pod(name, json!({"limits": {GPU: amount}}));
        undecodable(&common::refusal(pods.create(&pp, &p).await), "Pod");
    }
    let cpu = pod("cpu", json!({"limits": {"cpu": "-1"}}));
    common::invalid_saying(
        &common::refusal(pods.create(&pp, &cpu).await),
        "limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
    );
    // What Kubernetes stores is stored: the largest int64 (whose
    // MilliValue wraps to -1000m there, a whole number), half a cpu.
    let most = "9223372036854775807";
    let huge = pod("huge", json!({"limits": {GPU: most, "cpu": "0.5"}}));
    pods.create(&pp, &huge).await.unwrap();
    assert!(pods.list(&Default::default()).await.unwrap().items.len() == 1);
}

#[tokio::test]
async fn a_node_with_negative_fractional_or_unparsable_allocatable_is_refused_on_create_and_status()
{
    let (_s, c) = common::server().await;
    let nodes: Api<Node> = Api::all(c);
    let pp = PostParams::default();
    for (name, amount, says) in [
        (
            "negative",
            "-4",
            "Invalid value: \"-4\": must be greater than or equal to 0",
        ),
        ("half", "0.5", "Invalid value: \"500m\": must be an integer"),
    ] {
        let e = common::refusal(nodes.create(&pp, &node(name, json!({GPU: amount}))).await);
        common::invalid_saying(&e, &format!("status.capacity.nvidia.com/gpu: {says}"));
    }
    for (name, amount) in [("letters", "abc"), ("empty", "")] {
        let e = common::refusal(nodes.create(&pp, &node(name, json!({GPU: amount}))).await);
        undecodable(&e, "Node");
    }
    // A node's status written later (the kubelet's) is held to the same.
    let n = nodes
        .create(&pp, &node("n1", json!({GPU: "8"})))
        .await
        .unwrap();
    let mut bad = n.clone();
    bad.status.as_mut().unwrap().allocatable = Some(common::from(json!({GPU: "-4"})));
    let e = common::refusal(nodes.replace_status("n1", &pp, &bad).await);
    common::invalid_saying(
        &e,
        "status.allocatable.nvidia.com/gpu: Invalid value: \"-4\"",
    );
    let stored = nodes.get("n1").await.unwrap();
    let allocatable = stored.status.unwrap().allocatable.unwrap();
    assert_eq!(
        allocatable[GPU].0, "8",
        "the refused status changed nothing"
    );
}

#[tokio::test]
async fn finalizers_and_annotation_keys_must_be_qualified_names_and_annotations_at_most_256_kib() {
    let (_s, c) = common::server().await;
    let maps: Api<ConfigMap> = Api::namespaced(c, "a");
    let pp = PostParams::default();
    let with_meta = |name: &str, meta: Value| -> ConfigMap {
        let mut m = json!({"name": name, "namespace": "a"});
        m.as_object_mut()
            .unwrap()
            .extend(meta.as_object().unwrap().clone());
        common::from(json!({"metadata": m}))
    };
    let e = common::refusal(
        maps.create(&pp, &with_meta("f", json!({"finalizers": ["", "a b"]})))
            .await,
    );
    common::invalid_saying(
        &e,
        "metadata.finalizers: Invalid value: \"\": name part must be non-empty",
    );
    assert!(e.message.contains("\"a b\""), "{}", e.message);
    let e = common::refusal(
        maps.create(&pp, &with_meta("k", json!({"annotations": {"a/b/c": "x"}})))
            .await,
    );
    common::invalid_saying(&e, "metadata.annotations: Invalid value: \"a/b/c\"");
    let big = "x".repeat(256 << 10);
    let e = common::refusal(
        maps.create(&pp, &with_meta("big", json!({"annotations": {"a": big}})))
            .await,
    );
    common::invalid_saying(
        &e,
        "metadata.annotations: Too long: may not be more than 262144 bytes",
    );
    maps.create(
        &pp,
        &with_meta(
            "ok",
            json!({"finalizers": ["example.com/keep"],
        "annotations": {"Example.COM/Mixed": "y"}}),
        ),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_configmap_or_secret_past_1_mib_is_too_long() {
    let (_s, c) = common::server().await;
    let pp = PostParams::default();
    let maps: Api<ConfigMap> = Api::namespaced(c.clone(), "a");
    let data = |n: usize| json!({"a": "x".repeat(n / 2), "b": "x".repeat(n - n / 2)});
    let at_most: ConfigMap =
        common::from(json!({"metadata": {"name": "full"}, "data": data(1 << 20)}));
    maps.create(&pp, &at_most).await.unwrap();
    let past: ConfigMap =
        common::from(json!({"metadata": {"name": "past"}, "data": data((1 << 20) + 1)}));
    let e = common::refusal(maps.create(&pp, &past).await);
    assert_eq!(
        e.message,
        "ConfigMap \"past\" is invalid: []: Too long: may not be more than 1048576 bytes"
    );
    let secrets: Api<Secret> = Api::namespaced(c, "a");
    let s: Secret = common::from(json!({"metadata": {"name": "s"},
        "stringData": {"a": "x".repeat((1 << 20) + 1)}}));
    let e = common::refusal(secrets.create(&pp, &s).await);
    common::invalid_saying(&e, "data: Too long: may not be more than 1048576 bytes");
}

/// 700,000 finalizers fit the 3 MiB body and are qualified names, but
/// no etcd stores the object: kube-apiserver passes etcd's words on.
#[tokio::test]
async fn an_object_past_what_etcd_stores_is_a_500_request_too_large_and_nothing_is_stored() {
    let (s, c) = common::server().await;
    let maps: Api<ConfigMap> = Api::namespaced(c, "a");
    let many: Vec<String> = (0..700_000).map(|_| "a".to_string()).collect();
    let m: ConfigMap = common::from(json!({"metadata": {"name": "many", "finalizers": many}}));
    let e = common::refusal(maps.create(&PostParams::default(), &m).await);
    assert_eq!((e.code, e.reason.as_str()), (500, ""), "{}", e.message);
    assert_eq!(e.message, "etcdserver: request is too large");
    assert!(s.store.get("ConfigMap", "a", "many").is_none());
}

/// Issue 61, item 3: a ConfigMap of 150,000 keys (1.9 MB) is validated
/// before the storage bound, as kube-apiserver orders them: values past
/// 1 MiB together are a 422 on the whole object (`[]`), bad keys a 422
/// naming them (at most `MOST_CAUSES`, the rest saying nothing new), a
/// key in both data and binaryData too. Only a valid one past what etcd
/// stores is the 500 upstream answers too (kubernetes/kubernetes#112152).
#[tokio::test]
async fn a_configmap_of_150000_keys_is_validated_before_the_storage_bound() {
    let (_s, c) = common::server().await;
    let pp = PostParams::default();
    let maps: Api<ConfigMap> = Api::namespaced(c.clone(), "a");
    let many = |key: &dyn Fn(usize) -> String, value: &str| {
        let data: serde_json::Map<String, Value> = (0..150_000)
            .map(|i| (key(i), Value::String(value.into())))
            .collect();
        data
    };
    let big: ConfigMap = common::from(
        json!({"metadata": {"name": "big"}, "data": many(&|i| format!("k{i}"), "1234567")}),
    );
    let e = common::refusal(maps.create(&pp, &big).await);
    assert_eq!(
        (e.code, e.message.as_str()),
        (
            422,
            "ConfigMap \"big\" is invalid: []: Too long: may not be more than 1048576 bytes"
        )
    );
    let bad: ConfigMap = common::from(
        json!({"metadata": {"name": "bad"}, "data": many(&|i| format!("k{i}/x"), "")}),
    );
    let e = common::refusal(maps.create(&pp, &bad).await);
    assert_eq!(e.code, 422, "{}", e.message);
    assert!(
        e.message.starts_with("ConfigMap \"bad\" is invalid: [data[k0/x]: Invalid value: \"k0/x\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"),
        "{}",
        e.message
    );
    assert!(e.message.len() < 64 << 10, "{} bytes", e.message.len());
    let both: ConfigMap = common::from(json!({"metadata": {"name": "both"},
        "data": {"x": "1"}, "binaryData": {"x": "MQ=="}}));
    let e = common::refusal(maps.create(&pp, &both).await);
    assert_eq!(
        e.message,
        "ConfigMap \"both\" is invalid: data[x]: Invalid value: \"x\": duplicate of key present in binaryData"
    );
    let dots: ConfigMap = common::from(json!({"metadata": {"name": "dots"}, "data": {"..a": "1"}}));
    let e = common::refusal(maps.create(&pp, &dots).await);
    assert_eq!(
        e.message,
        "ConfigMap \"dots\" is invalid: data[..a]: Invalid value: \"..a\": must not start with '..'"
    );
    let valid: ConfigMap = common::from(
        json!({"metadata": {"name": "valid"}, "data": many(&|i| format!("k{i}"), "")}),
    );
    let e = common::refusal(maps.create(&pp, &valid).await);
    assert_eq!(
        (e.code, e.message.as_str()),
        (500, "etcdserver: request is too large")
    );
}
