//! `pods/{name}/eviction` as the pod registry's eviction subresource
//! answers it, and PodDisruptionBudgets' status as kube-controller-manager's
//! disruption controller keeps it (issue 25, item 5): what `kubectl drain`
//! does, and what evicts a GPU node's VMs before maintenance. Only with
//! the `conformance` feature, which serves them.
#![cfg(feature = "conformance")]

mod common;

use common::{from, refusal, server, until};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, EvictParams, PostParams};
use serde_json::{Value, json};

/// A pod on node `n1`, Running and Ready as its kubelet reports it.
async fn running(pods: &Api<Pod>, name: &str) {
    let pod = from(json!({"metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}}));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}});
    pods.patch_status(name, &Default::default(), &kube::api::Patch::Merge(status))
        .await
        .unwrap();
}

async fn budget(c: &kube::Client, name: &str, spec: Value) -> Api<PodDisruptionBudget> {
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), "a");
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": "web"}});
    let b = from(json!({"metadata": {"name": name}, "spec": spec}));
    budgets.create(&PostParams::default(), &b).await.unwrap();
    budgets
}

fn no_retries(s: &gpu_claims_apiserver::Handle) -> kube::Client {
    let mut config = s.config();
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

fn terminating(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

#[tokio::test]
async fn an_eviction_the_budget_allows_is_201_and_the_pod_goes_gracefully() {
    let (s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    running(&pods, "p1").await;
    running(&pods, "p2").await;
    let budgets = budget(&c, "web", json!({"minAvailable": 1})).await;
    let answer = pods.evict("p1", &EvictParams::default()).await.unwrap();
    assert_eq!(answer.code, 201);
    // On its node and running, the pod is Terminating until its kubelet
    // confirms; the budget has taken its one disruption (recorded under
    // disruptedPods until the controller sees the pod deleting).
    assert!(terminating(&pods.get("p1").await.unwrap()));
    let b = budgets.get("web").await.unwrap();
    assert_eq!(b.status.unwrap().disruptions_allowed, Some(0));
    // Now one is left, and the budget wants one: p2 may not go. (kube's
    // client retries a 429 for minutes by default, as it should a
    // throttle; this one is the answer.)
    let pods_once: Api<Pod> = Api::namespaced(no_retries(&s), "a");
    let e = refusal(pods_once.evict("p2", &EvictParams::default()).await);
    assert_eq!((e.code, e.reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(
        e.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = &e.details.as_ref().unwrap().causes[0];
    assert_eq!(cause.reason, "DisruptionBudget");
    assert_eq!(
        cause.message,
        "The disruption budget web needs 1 healthy pods and has 1 currently"
    );
    assert!(!terminating(&pods.get("p2").await.unwrap()));
}

#[tokio::test]
async fn a_pod_no_budget_covers_or_that_never_ran_is_evicted_as_deleted() {
    let (_s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    running(&pods, "alone").await;
    assert_eq!(
        pods.evict("alone", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201
    );
    // A budget that allows nothing does not hold a Pending pod.
    budget(&c, "all", json!({"minAvailable": 5})).await;
    let pending = from(
        json!({"metadata": {"name": "pending", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}),
    );
    pods.create(&PostParams::default(), &pending).await.unwrap();
    assert_eq!(
        pods.evict("pending", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201
    );
    // Not on a node: gone at once.
    assert!(pods.get_opt("pending").await.unwrap().is_none());
}

#[tokio::test]
async fn two_budgets_a_wrong_name_and_a_missing_pod_are_refused_as_upstream() {
    let (_s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    running(&pods, "p").await;
    budget(&c, "one", json!({"maxUnavailable": 1})).await;
    budget(&c, "two", json!({"maxUnavailable": 1})).await;
    let e = refusal(pods.evict("p", &EvictParams::default()).await);
    assert_eq!(e.code, 500);
    assert!(
        e.message.contains("more than one PodDisruptionBudget"),
        "{}",
        e.message
    );
    let e = refusal(pods.evict("nobody", &EvictParams::default()).await);
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    let req = http::Request::post("/api/v1/namespaces/a/pods/p/eviction")
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "other", "namespace": "a"}}))
            .unwrap(),
        )
        .unwrap();
    let e = refusal(c.request::<Value>(req).await);
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    // GET on the subresource is not a verb it has.
    let get = http::Request::get("/api/v1/namespaces/a/pods/p/eviction")
        .body(Vec::new())
        .unwrap();
    assert_eq!(refusal(c.request::<Value>(get).await).code, 405);
}

#[tokio::test]
async fn a_budgets_status_follows_its_pods_as_the_disruption_controller_keeps_it() {
    let (_s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    running(&pods, "p1").await;
    let budgets = budget(&c, "web", json!({"minAvailable": 1})).await;
    let allowed = async |want: (i32, i32)| {
        let b = budgets.get("web").await.unwrap();
        b.status
            .as_ref()
            .map(|s| (s.current_healthy, s.disruptions_allowed))
            == Some((Some(want.0), Some(want.1)))
    };
    until("the budget sees one healthy pod", || allowed((1, 0))).await;
    let b = budgets.get("web").await.unwrap();
    let condition = &b.status.unwrap().conditions.unwrap()[0];
    assert_eq!(
        (condition.type_.as_str(), condition.reason.as_str()),
        ("DisruptionAllowed", "InsufficientPods")
    );
    running(&pods, "p2").await;
    until("the budget sees two and allows one", || allowed((2, 1))).await;
    pods.delete("p2", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    until("the budget sees one again", || allowed((1, 0))).await;
}

#[tokio::test]
async fn discovery_names_the_eviction_subresource_as_kubectl_drain_looks_for_it() {
    let (_s, c) = server().await;
    let list = c.list_core_api_resources("v1").await.unwrap();
    let eviction = list
        .resources
        .iter()
        .find(|r| r.name == "pods/eviction")
        .expect("pods/eviction is listed");
    assert_eq!(
        (
            eviction.kind.as_str(),
            eviction.group.as_deref(),
            eviction.version.as_deref()
        ),
        ("Eviction", Some("policy"), Some("v1"))
    );
    assert_eq!(eviction.verbs, ["create"]);
}

/// Upstream's default `IfHealthyBudget`: a pod that is not Ready goes
/// without taking a disruption while the budget has the healthy pods it
/// wants (a crashlooping pod does not hold a drain).
#[tokio::test]
async fn a_pod_that_is_not_ready_goes_while_its_budget_is_healthy() {
    let (_s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    running(&pods, "ready").await;
    let sick = from(
        json!({"metadata": {"name": "sick", "labels": {"app": "web"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}}),
    );
    pods.create(&PostParams::default(), &sick).await.unwrap();
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "False"}]}});
    pods.patch_status(
        "sick",
        &Default::default(),
        &kube::api::Patch::Merge(status),
    )
    .await
    .unwrap();
    budget(&c, "web", json!({"minAvailable": 1})).await;
    assert_eq!(
        pods.evict("sick", &EvictParams::default())
            .await
            .unwrap()
            .code,
        201
    );
}
