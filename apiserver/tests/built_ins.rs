//! Built-in kinds as kube-apiserver serves them, where a client can tell
//! (issue 25): each test is one difference found against Kubernetes,
//! with the upstream behaviour it now has.

mod common;

use common::server;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

fn names(list: kube::core::ObjectList<Node>) -> Vec<String> {
    list.items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect()
}

/// Upstream's node field labels convert `spec.unschedulable` with
/// `fmt.Sprint`: a node never cordoned (the field absent) is `false`.
#[tokio::test]
async fn a_field_selector_on_an_absent_boolean_sees_its_zero_value() {
    let (_server, c) = server().await;
    let nodes: Api<Node> = Api::all(c);
    let pp = PostParams::default();
    let node =
        |name: &str, spec| common::from::<Node>(json!({"metadata": {"name": name}, "spec": spec}));
    nodes.create(&pp, &node("plain", json!({}))).await.unwrap();
    let cordoned = node("cordoned", json!({"unschedulable": true}));
    nodes.create(&pp, &cordoned).await.unwrap();
    let select = |s: &'static str| {
        let nodes = nodes.clone();
        async move { names(nodes.list(&ListParams::default().fields(s)).await.unwrap()) }
    };
    assert_eq!(select("spec.unschedulable=false").await, ["plain"]);
    assert_eq!(select("spec.unschedulable=true").await, ["cordoned"]);
    assert_eq!(select("spec.unschedulable!=true").await, ["plain"]);
}

/// apiextensions' strategy on create: the answer's status has the storage
/// version recorded and no names accepted yet; the CRD controller then
/// accepts the names and makes it Established.
#[tokio::test]
async fn a_crds_create_answer_records_its_storage_version_then_it_is_established() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let (_server, c) = server().await;
    let crds: Api<CustomResourceDefinition> = Api::all(c);
    let crd: CustomResourceDefinition = common::from(json!({
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object"}}}]},
    }));
    let made = crds.create(&PostParams::default(), &crd).await.unwrap();
    let status = made.status.expect("a created CRD has a status");
    assert_eq!(status.stored_versions, Some(vec!["v1".to_string()]));
    let names = status.accepted_names.expect("acceptedNames, empty");
    assert_eq!((names.plural.as_str(), names.kind.as_str()), ("", ""));
    common::until("the CRD is Established with its names", || {
        let crds = crds.clone();
        async move {
            let s = crds
                .get("gadgets.example.com")
                .await
                .unwrap()
                .status
                .unwrap_or_default();
            let established = s
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            established && s.accepted_names.is_some_and(|n| n.kind == "Gadget")
        }
    })
    .await;
}

/// A Pod reads back as upstream defaults it (`SetDefaults_PodSpec`,
/// `SetDefaults_Container`, requests from limits), with the status its
/// registry gives it on create: Pending, and its QoS class.
#[tokio::test]
async fn a_created_pod_is_defaulted_and_pending_with_its_qos_class() {
    use k8s_openapi::api::core::v1::Pod;
    let (_server, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c, "default");
    let pod: Pod = common::from(json!({"metadata": {"name": "p"}, "spec": {"containers": [{
        "name": "a", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}));
    let made = pods.create(&PostParams::default(), &pod).await.unwrap();
    let spec = made.spec.unwrap();
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.enable_service_links, Some(true));
    assert!(spec.security_context.is_some());
    let c0 = &spec.containers[0];
    assert_eq!(c0.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(
        c0.termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(c0.termination_message_policy.as_deref(), Some("File"));
    assert_eq!(
        c0.ports.as_ref().unwrap()[0].protocol.as_deref(),
        Some("TCP")
    );
    let requests = c0.resources.as_ref().unwrap().requests.clone().unwrap();
    assert_eq!(requests.get("cpu").map(|q| q.0.as_str()), Some("1"));
    let status = made.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.qos_class.as_deref(), Some("Guaranteed"));
    // What a client sets is kept.
    let never: Pod = common::from(json!({"metadata": {"name": "q"}, "spec": {
        "restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}}));
    let made = pods.create(&PostParams::default(), &never).await.unwrap();
    assert_eq!(made.spec.unwrap().restart_policy.as_deref(), Some("Never"));
    assert_eq!(
        made.status.unwrap().qos_class.as_deref(),
        Some("BestEffort")
    );
}

/// A Service as its registry makes it: ClusterIP by type, a cluster IP of
/// its own from the service range (the `kubernetes` Service holds the
/// first), its families, each port's protocol and target port.
#[tokio::test]
async fn a_created_service_is_defaulted_and_gets_a_cluster_ip_of_its_own() {
    use k8s_openapi::api::core::v1::Service;
    let (_server, c) = server().await;
    let services: Api<Service> = Api::namespaced(c, "default");
    let svc = |name: &str| -> Service {
        common::from(json!({"metadata": {"name": name}, "spec": {"ports": [{"port": 443}]}}))
    };
    let a = services
        .create(&PostParams::default(), &svc("a"))
        .await
        .unwrap();
    let b = services
        .create(&PostParams::default(), &svc("b"))
        .await
        .unwrap();
    // Go writes the empty ServiceStatus it holds (issue 33, item 6).
    let status = serde_json::to_value(a.status.as_ref()).unwrap();
    assert_eq!(status, json!({"loadBalancer": {}}));
    let (a, b) = (a.spec.unwrap(), b.spec.unwrap());
    assert_eq!(a.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(a.session_affinity.as_deref(), Some("None"));
    assert_eq!(a.ip_families, Some(vec!["IPv4".to_string()]));
    assert_eq!(a.ip_family_policy.as_deref(), Some("SingleStack"));
    let port = &a.ports.as_ref().unwrap()[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(443))
    );
    let ips = [a.cluster_ip.unwrap(), b.cluster_ip.unwrap()];
    assert!(
        ips.iter()
            .all(|ip| ip.starts_with("10.9") && ip != "10.96.0.1"),
        "{ips:?}"
    );
    assert_ne!(ips[0], ips[1], "each Service its own address");
}

/// Creates Deployment `default/d`, selecting `app: d`, its template
/// labelled `app: <app>`.
async fn deploy(
    c: &kube::Client,
    app: &str,
    image: &str,
) -> Result<k8s_openapi::api::apps::v1::Deployment, kube::Error> {
    let d = common::from(json!({"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": app}},
            "spec": {"containers": [{"name": "a", "image": image}]}}}}));
    Api::namespaced(c.clone(), "default")
        .create(&PostParams::default(), &d)
        .await
}

/// apps/v1 defaults a Deployment's replicas, strategy, history and
/// deadline, and its template's pod spec; a Secret's type; a Namespace's
/// name label.
#[tokio::test]
async fn a_deployment_a_secret_and_a_namespace_are_defaulted() {
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    let (_server, c) = server().await;
    let spec = deploy(&c, "d", "x:latest").await.unwrap().spec;
    let pp = PostParams::default();
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.revision_history_limit, Some(10));
    assert_eq!(spec.progress_deadline_seconds, Some(600));
    let strategy = spec.strategy.unwrap();
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    assert!(strategy.rolling_update.unwrap().max_surge.is_some());
    let template = spec.template.spec.unwrap();
    assert_eq!(template.restart_policy.as_deref(), Some("Always"));
    assert_eq!(
        template.containers[0].image_pull_policy.as_deref(),
        Some("Always")
    );
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "default");
    let s: Secret = common::from(json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}}));
    let made = secrets.create(&pp, &s).await.unwrap();
    assert_eq!(made.type_.as_deref(), Some("Opaque"));
    let data = made.data.unwrap();
    assert_eq!(
        data.get("k").map(|b| b.0.as_slice()),
        Some(&b"v"[..]),
        "stringData is written into data"
    );
    assert!(made.string_data.is_none());
    let namespaces: Api<Namespace> = Api::all(c);
    let ns: Namespace = common::from(json!({"metadata": {"name": "made"}}));
    let labels = namespaces
        .create(&pp, &ns)
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap();
    assert_eq!(
        labels
            .get("kubernetes.io/metadata.name")
            .map(String::as_str),
        Some("made")
    );
}

/// A pod labelled `app: x`.
fn labelled_pod(name: &str) -> k8s_openapi::api::core::v1::Pod {
    common::from(json!({"metadata": {"name": name, "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "a", "image": "x"}]}}))
}

/// kube-rs's metadata API (what `metadata_watcher` runs on) asks for
/// `as=PartialObjectMetadata`: every verb answers each object as
/// `meta.k8s.io/v1` PartialObjectMetadata, its metadata alone.
#[tokio::test]
async fn metadata_only_requests_answer_partial_object_metadata_on_every_verb() {
    use futures::{StreamExt, TryStreamExt};
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Patch, PatchParams, WatchEvent, WatchParams};
    let (_server, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c, "default");
    pods.create(&PostParams::default(), &labelled_pod("p"))
        .await
        .unwrap();
    let partial =
        |t: Option<&kube::core::TypeMeta>| t.map(|t| (t.api_version.clone(), t.kind.clone()));
    let wanted = Some((
        "meta.k8s.io/v1".to_string(),
        "PartialObjectMetadata".to_string(),
    ));
    let got = pods.get_metadata("p").await.unwrap();
    assert_eq!(partial(got.types.as_ref()), wanted);
    assert_eq!(got.metadata.labels.unwrap()["app"], "x");
    let list = pods.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.types.kind, "PartialObjectMetadataList");
    assert_eq!(partial(list.items[0].types.as_ref()), wanted);
    let rv = list.metadata.resource_version.unwrap();
    let mut events = pods
        .watch_metadata(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    pods.create(&PostParams::default(), &labelled_pod("q"))
        .await
        .unwrap();
    match events.try_next().await.unwrap() {
        Some(WatchEvent::Added(o)) => {
            assert_eq!(partial(o.types.as_ref()), wanted);
            assert_eq!(o.metadata.name.as_deref(), Some("q"));
        }
        other => panic!("expected q ADDED, got {other:?}"),
    }
    let patch = Patch::Merge(json!({"metadata": {"labels": {"patched": "yes"}}}));
    let patched = pods
        .patch_metadata("p", &PatchParams::default(), &patch)
        .await
        .unwrap();
    assert_eq!(partial(patched.types.as_ref()), wanted);
    assert_eq!(patched.metadata.labels.unwrap()["patched"], "yes");
}

/// Aggregated discovery: kube-rs's `Discovery::run_aggregated` (and
/// kubectl) read every group, version and resource in two requests.
#[tokio::test]
async fn aggregated_discovery_finds_every_group_with_its_resources() {
    let (_server, c) = server().await;
    let d = kube::discovery::Discovery::new(c.clone())
        .run_aggregated()
        .await
        .unwrap();
    for (group, kind) in [
        ("", "Pod"),
        ("apps", "Deployment"),
        ("gpu.cozystack.io", "GPUClaim"),
    ] {
        let g = d
            .get(group)
            .unwrap_or_else(|| panic!("group {group:?} found"));
        let (ar, caps) = g
            .recommended_kind(kind)
            .unwrap_or_else(|| panic!("{kind} in {group:?}"));
        assert_eq!(ar.kind, kind);
        assert!(caps.supports_operation("watch"), "{kind} can be watched");
    }
    let (_, pods) = d.get("").unwrap().recommended_kind("Pod").unwrap();
    assert_eq!(pods.scope, kube::discovery::Scope::Namespaced);
    assert!(
        pods.subresources
            .iter()
            .any(|(s, _)| s.plural.ends_with("status")),
        "{:?}",
        pods.subresources
    );
    // The legacy form is still what a plain Accept gets.
    let legacy = c.list_api_groups().await.unwrap();
    assert!(legacy.groups.iter().any(|g| g.name == "apps"));
}

/// Validation upstream's registries add: a Deployment whose selector does
/// not select its template, and a Pod update that changes its spec where
/// upstream does not let it (a container's command), are 422 Invalid in
/// apimachinery's words; an image change is allowed.
#[tokio::test]
async fn a_deployment_that_selects_no_template_and_a_pods_changed_command_are_invalid() {
    use k8s_openapi::api::core::v1::Pod;
    let (_server, c) = server().await;
    let e = common::refusal(deploy(&c, "other", "x").await);
    let pp = PostParams::default();
    common::invalid_saying(
        &e,
        r#"spec.template.metadata.labels: Invalid value: map[string]string{"app":"other"}: `selector` does not match template `labels`"#,
    );
    let pods: Api<Pod> = Api::namespaced(c, "default");
    let pod: Pod = common::from(json!({"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "a", "image": "x:1", "command": ["run"]}]}}));
    let mut p = pods.create(&pp, &pod).await.unwrap();
    p.spec.as_mut().unwrap().containers[0].image = Some("x:2".into());
    let mut p = pods.replace("p", &pp, &p).await.unwrap();
    p.spec.as_mut().unwrap().containers[0].command = Some(vec!["other".into()]);
    let e = common::refusal(pods.replace("p", &pp, &p).await);
    common::invalid_saying(
        &e,
        "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`",
    );
}

/// What a scheduling gate's controller writes (gpu-claims' G4): a gated
/// pod pinned by node selector and ungated in one update is allowed, also
/// for a pod stored as it was sent, without defaults (a test world's);
/// once ungated, its node selector is fixed.
#[tokio::test]
async fn a_gated_pod_is_pinned_and_ungated_in_one_update_even_stored_without_defaults() {
    use gpu_claims_apiserver::store::Store;
    use k8s_openapi::api::core::v1::Pod;
    let store = std::sync::Arc::new(Store::new(
        std::sync::Arc::new(k8s_openapi::jiff::Timestamp::now),
        &["Pod"],
    ));
    store.seed(
        "Pod",
        json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "t"},
        "spec": {"containers": [{"name": "compute"}], "schedulingGates": [{"name": "placement"}]}}),
    );
    let s = common::builder(&["t"]).store(store).start().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(s.client(), "t");
    let pp = PostParams::default();
    let mut p = pods.get("p").await.unwrap();
    let spec = p.spec.as_mut().unwrap();
    spec.node_selector
        .get_or_insert_default()
        .insert("kubernetes.io/hostname".into(), "n1".into());
    spec.scheduling_gates = None;
    let mut p = pods.replace("p", &pp, &p).await.unwrap();
    let spec = p.spec.as_mut().unwrap();
    assert!(spec.scheduling_gates.is_none());
    spec.node_selector
        .get_or_insert_default()
        .insert("kubernetes.io/hostname".into(), "n2".into());
    let e = common::refusal(pods.replace("p", &pp, &p).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
}
