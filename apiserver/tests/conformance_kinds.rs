//! What only the `conformance` feature serves (issue 34, item 7): a pod's
//! `ephemeralcontainers` and a CertificateSigningRequest's `approval`,
//! each as upstream's registry serves it; the control plane's
//! ComponentStatuses; ReplicationControllers. Without the feature,
//! `without_conformance.rs` holds that none of them is served.
#![cfg(feature = "conformance")]

mod common;

use common::{from, refusal};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn ephemeral_containers_are_added_through_their_subresource_and_never_removed() {
    let (_s, c) = common::server().await;
    let pods: Api<Pod> = Api::namespaced(c, "a");
    let pod: Pod = from(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}}));
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let debugger = json!({"spec": {"ephemeralContainers": [
        {"name": "debugger", "image": "busybox", "command": ["sh"], "targetContainerName": "c"}]}});
    let patched = pods
        .patch_ephemeral_containers("p", &PatchParams::default(), &Patch::Strategic(debugger))
        .await
        .unwrap();
    let added = patched.spec.unwrap().ephemeral_containers.unwrap();
    assert_eq!(added[0].name, "debugger");
    let got = pods.get_ephemeral_containers("p").await.unwrap();
    assert_eq!(got.spec.unwrap().ephemeral_containers.unwrap().len(), 1);
    let removed = json!([{"op": "replace", "path": "/spec/ephemeralContainers", "value": []}]);
    let e = refusal(
        pods.patch_ephemeral_containers(
            "p",
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(removed).unwrap()),
        )
        .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
}

#[tokio::test]
async fn a_csrs_approval_changes_its_conditions_alone() {
    let (_s, c) = common::server().await;
    let csrs: Api<CertificateSigningRequest> = Api::all(c);
    let csr: CertificateSigningRequest = from(json!({"metadata": {"name": "fake"},
        "spec": {"request": "cmVxdWVzdA==", "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"]}}));
    csrs.create(&PostParams::default(), &csr).await.unwrap();
    let approval = json!({"spec": {"signerName": "changed"}, "status": {"conditions": [
        {"type": "Approved", "status": "True", "reason": "kube-rsClient", "message": "approved"}]}});
    csrs.patch_approval("fake", &PatchParams::default(), &Patch::Merge(approval))
        .await
        .unwrap();
    let after = csrs.get_approval("fake").await.unwrap();
    assert_eq!(
        after.status.unwrap().conditions.unwrap()[0].type_,
        "Approved"
    );
    assert_eq!(
        after.spec.signer_name,
        "kubernetes.io/kube-apiserver-client"
    );
}

/// The control plane's ComponentStatuses, there from the start and
/// read-only; the APIServices of the feature's groups.
#[tokio::test]
async fn component_statuses_are_there_from_the_start_and_read_only() {
    use k8s_openapi::api::core::v1::ComponentStatus;
    let (_s, c) = common::server().await;
    let statuses: Api<ComponentStatus> = Api::all(c.clone());
    let scheduler = statuses.get("scheduler").await.unwrap();
    assert_eq!(scheduler.conditions.unwrap()[0].type_, "Healthy");
    let e = refusal(statuses.delete("scheduler", &Default::default()).await);
    assert_eq!((e.code, e.reason.as_str()), (405, "MethodNotAllowed"));
    // The feature's group versions are registered as APIServices.
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    let services: Api<APIService> = Api::all(c);
    for name in ["v1.policy", "v1.certificates.k8s.io"] {
        assert!(services.get(name).await.is_ok(), "{name}");
    }
}

/// ReplicationControllers (item 8), the core group's oldest workload:
/// stored, decoded by their type, scaled through `scale` with their plain
/// map selector.
#[tokio::test]
async fn a_replication_controller_is_served_and_scaled_by_its_map_selector() {
    use k8s_openapi::api::core::v1::ReplicationController;
    let (_s, c) = common::server().await;
    let rcs: Api<ReplicationController> = Api::namespaced(c, "a");
    let rc: ReplicationController = from(json!({"metadata": {"name": "rc"}, "spec": {
        "replicas": 2, "selector": {"app": "rc"},
        "template": {"metadata": {"labels": {"app": "rc"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}}}));
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    let scale = rcs.get_scale("rc").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=rc"));
    // A Scale written with no replicas (Go's omitempty of 0) scales to zero.
    let mut zero = rcs.get_scale("rc").await.unwrap();
    zero.spec = Some(Default::default());
    rcs.replace_scale("rc", &PostParams::default(), &zero)
        .await
        .unwrap();
    assert_eq!(rcs.get("rc").await.unwrap().spec.unwrap().replicas, Some(0));
}
