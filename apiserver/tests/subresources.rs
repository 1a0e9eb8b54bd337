//! The subresources kube-rs's own cluster tests and kubectl use beyond
//! `status` (issue 25, item 5): a custom resource's `scale`, a service
//! account's `token` (TokenRequest, checked by TokenReview), a
//! Deployment's `scale`, each as upstream's registry serves it; what a
//! cluster has before anyone writes. The conformance-only ones are in
//! `conformance_kinds.rs`.

mod common;

use common::{from, refusal};
use gpu_claims_apiserver::ApiServer;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenReview};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

fn foo_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "foos.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "foos", "singular": "foo", "kind": "Foo"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"}}}]}})
}

#[tokio::test]
async fn a_custom_resources_scale_reads_and_writes_the_paths_its_crd_names() {
    let s = ApiServer::builder()
        .crd_json(foo_crd())
        .namespace("a")
        .start()
        .await
        .unwrap();
    let c = s.client();
    let ar = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Foo".into(),
        plural: "foos".into(),
    };
    let foos: Api<DynamicObject> = Api::namespaced_with(c.clone(), "a", &ar);
    let foo: DynamicObject = from(json!({"apiVersion": "example.com/v1", "kind": "Foo",
        "metadata": {"name": "baz"}, "spec": {"replicas": 2}}));
    foos.create(&PostParams::default(), &foo).await.unwrap();
    let scale = foos.get_scale("baz").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(2));
    assert_eq!(scale.status.unwrap().replicas, 0);
    let st = json!({"status": {"replicas": 1, "selector": "app=baz"}});
    foos.patch_status("baz", &PatchParams::default(), &Patch::Merge(&st))
        .await
        .unwrap();
    let patched = foos
        .patch_scale(
            "baz",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().replicas, Some(3));
    let status = patched.status.unwrap();
    assert_eq!(
        (status.replicas, status.selector.as_deref()),
        (1, Some("app=baz"))
    );
    assert_eq!(foos.get("baz").await.unwrap().data["spec"]["replicas"], 3);
    let e = refusal(
        foos.patch_scale(
            "baz",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": -1}})),
        )
        .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    // Discovery says what the subresource answers with.
    let list = c.list_api_group_resources("example.com/v1").await.unwrap();
    let scale = list
        .resources
        .iter()
        .find(|r| r.name == "foos/scale")
        .unwrap();
    assert_eq!(
        (scale.kind.as_str(), scale.group.as_deref()),
        ("Scale", Some("autoscaling"))
    );
}

#[tokio::test]
async fn a_token_request_gives_a_token_token_review_accepts_for_its_audiences() {
    let (_s, c) = common::server().await;
    let accounts: Api<ServiceAccount> = Api::namespaced(c.clone(), "a");
    accounts
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "fakesa"}})),
        )
        .await
        .unwrap();
    let ask = |audiences: Value, expiration: Value| -> TokenRequest {
        from(json!({"spec": {"audiences": audiences, "expirationSeconds": expiration}}))
    };
    let answer = accounts
        .create_token_request(
            "fakesa",
            &PostParams::default(),
            &ask(json!(["api"]), json!(null)),
        )
        .await
        .unwrap();
    let token = answer.status.unwrap().token.unwrap();
    assert!(!token.is_empty());
    let reviews: Api<TokenReview> = Api::all(c.clone());
    let review = |token: &str, audiences: Value| -> TokenReview {
        from(json!({"spec": {"token": token, "audiences": audiences}}))
    };
    let r = reviews
        .create(&PostParams::default(), &review(&token, json!(["api"])))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(r.authenticated, Some(true));
    assert_eq!(r.audiences, Some(vec!["api".to_string()]));
    assert_eq!(
        r.user.unwrap().username.as_deref(),
        Some("system:serviceaccount:a:fakesa")
    );
    // For another audience the token is not valid.
    let r = reviews
        .create(&PostParams::default(), &review(&token, json!(["vault"])))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(r.authenticated, Some(false));
    assert!(
        r.error
            .unwrap()
            .contains("invalid for the target audiences")
    );
    // A token for another audience is not one for the API server itself,
    // and a review that names no audience asks for the API server's.
    let vault = accounts
        .create_token_request(
            "fakesa",
            &PostParams::default(),
            &ask(json!(["vault"]), json!(null)),
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .token
        .unwrap();
    let r = reviews
        .create(&PostParams::default(), &review(&vault, json!([])))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(r.authenticated, Some(false));
    // No such account; a token that lives under ten minutes.
    let e = refusal(
        accounts
            .create_token_request(
                "nobody",
                &PostParams::default(),
                &ask(json!([]), json!(null)),
            )
            .await,
    );
    assert_eq!(e.code, 404);
    let e = refusal(
        accounts
            .create_token_request("fakesa", &PostParams::default(), &ask(json!([]), json!(60)))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
}

#[tokio::test]
async fn a_deployments_scale_is_its_replicas_and_selector_as_kubectl_scale_reads_them() {
    use k8s_openapi::api::apps::v1::Deployment;
    let (_s, c) = common::server().await;
    let deployments: Api<Deployment> = Api::namespaced(c, "a");
    let d: Deployment = from(json!({"metadata": {"name": "d"}, "spec": {"replicas": 1,
        "selector": {"matchLabels": {"app": "d", "tier": "gpu"}},
        "template": {"metadata": {"labels": {"app": "d", "tier": "gpu"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}}}));
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();
    let scale = deployments.get_scale("d").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(
        scale.status.unwrap().selector.as_deref(),
        Some("app=d,tier=gpu")
    );
    // kubectl scale: the Scale read, then written back at its version.
    let mut scale = deployments.get_scale("d").await.unwrap();
    scale.spec.as_mut().unwrap().replicas = Some(4);
    let written = deployments
        .replace_scale("d", &PostParams::default(), &scale)
        .await
        .unwrap();
    assert_eq!(written.spec.unwrap().replicas, Some(4));
    assert_eq!(deployments.get("d").await.unwrap().spec.replicas, Some(4));
    // At the version it was read at, which is no longer the object's: 409.
    let e = refusal(
        deployments
            .replace_scale("d", &PostParams::default(), &scale)
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
}

/// What a cluster has before anyone writes, which clients look up: an
/// APIService per group version, and `cluster-admin`; and objects written
/// as Go writes them, `kind` first (kube-rs's tests compare a decoder's
/// error position).
#[tokio::test]
async fn api_services_and_cluster_admin_are_there_from_the_start() {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    let (_s, c) = common::server().await;
    let services: Api<APIService> = Api::all(c.clone());
    for name in ["v1.", "v1.apps", "v1.rbac.authorization.k8s.io"] {
        let s = services.get(name).await.unwrap();
        assert_eq!(
            s.status.unwrap().conditions.unwrap()[0].status,
            "True",
            "{name}"
        );
    }
    let admin = Api::<ClusterRole>::all(c.clone())
        .get("cluster-admin")
        .await
        .unwrap();
    assert_eq!(admin.rules.unwrap()[0].verbs, ["*"]);
    let req = http::Request::get("/api/v1/namespaces/default/services/kubernetes")
        .body(Vec::new())
        .unwrap();
    let text = c.request_text(req).await.unwrap();
    assert!(
        text.starts_with(r#"{"kind":"Service","apiVersion":"v1","metadata":"#),
        "{text}"
    );
}
