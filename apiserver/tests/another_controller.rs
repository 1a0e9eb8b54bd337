//! The server as another kube-rs controller's tests would use it: a CRD of
//! their own installed, then its objects created, listed, watched and
//! validated over HTTP through kube-rs, with nothing of gpu-claims around.

use futures::{StreamExt, TryStreamExt};
use gpu_claims_apiserver::{ApiServer, install_crd, kubeconfig, new_store};
use kube::api::{Api, DynamicObject, ListParams, PostParams, WatchEvent, WatchParams};
use kube::discovery::ApiResource;
use serde_json::json;

fn widget_crd() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "minimum": 1, "default": 1}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]},
    })
}

#[tokio::test]
async fn a_crd_of_its_own_is_served_validated_and_watched() {
    let store = new_store();
    install_crd(&store, widget_crd());
    gpu_claims_apiserver::namespaces::ensure(&store, "ns");
    let server = ApiServer::start(store, "127.0.0.1:0".parse().unwrap(), None)
        .await
        .unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&kubeconfig(&server.url())).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let ar = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(client, "ns", &ar);
    let mut watch = widgets
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let w: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {}}))
    .unwrap();
    let made = widgets.create(&PostParams::default(), &w).await.unwrap();
    assert_eq!(
        made.data["spec"]["size"], 1,
        "defaulted by the CRD's schema"
    );
    assert_eq!(made.metadata.generation, Some(1));
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "bad"}, "spec": {"size": 0}}))
    .unwrap();
    let refused = widgets
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err();
    assert!(matches!(refused, kube::Error::Api(s) if s.code == 422));
    assert_eq!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    match watch.try_next().await.unwrap() {
        Some(WatchEvent::Added(o)) => assert_eq!(o.metadata.name.as_deref(), Some("w")),
        other => panic!("expected the widget added, got {other:?}"),
    }
}
