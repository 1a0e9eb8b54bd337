//! The server as another kube-rs controller's tests would use it: a CRD of
//! their own installed, then its objects created, listed, watched and
//! validated over HTTP through kube-rs, with nothing of gpu-claims around.

use futures::{StreamExt, TryStreamExt};
use gpu_claims_apiserver::{ApiServer, CrdError, StartError};
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
    let server = ApiServer::builder()
        .crd_json(widget_crd())
        .namespace("ns")
        .start()
        .await
        .unwrap();
    let client = server.client();
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

/// A kind as a kube-rs controller derives it, served from its own CRD.
#[derive(
    kube::CustomResource, Clone, Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[kube(group = "example.com", version = "v1", kind = "Gadget", namespaced)]
struct GadgetSpec {
    size: u32,
}

#[tokio::test]
async fn a_derived_kind_is_served_from_its_generated_crd() {
    let server = ApiServer::builder()
        .crd::<Gadget>()
        .namespace("ns")
        .start()
        .await
        .unwrap();
    let gadgets: Api<Gadget> = Api::namespaced(server.client(), "ns");
    let g = Gadget::new("g", GadgetSpec { size: 3 });
    gadgets.create(&PostParams::default(), &g).await.unwrap();
    assert_eq!(gadgets.get("g").await.unwrap().spec.size, 3);
    // The kubeconfig names the same server, for kubectl or helm.
    assert!(server.kubeconfig().contains(&server.url()));
}

#[tokio::test]
async fn a_crd_it_cannot_take_is_an_error_not_a_missing_kind() {
    let not_a_crd = json!({"apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition", "metadata": {"name": "x"}, "spec": "nonsense"});
    let e = ApiServer::builder().crd_json(not_a_crd).start().await.err();
    assert!(
        matches!(e, Some(StartError::Crd(CrdError::Undecodable(_)))),
        "{e:?}"
    );
    let mut unserved = widget_crd();
    unserved["spec"]["versions"][0]["served"] = false.into();
    let e = ApiServer::builder().crd_json(unserved).start().await.err();
    assert!(
        matches!(&e, Some(StartError::Crd(CrdError::NoServedVersion { name })) if name == "widgets.example.com"),
        "{e:?}"
    );
}

#[tokio::test]
async fn dropping_the_handle_shuts_the_server_down() {
    let server = ApiServer::builder().start().await.unwrap();
    let addr = server.addr();
    let client = server.client();
    let _ = client.apiserver_version().await.unwrap();
    drop(server);
    // The listener is closed: a new connection is refused (retried while
    // the aborted task lets go of the socket).
    common_until_refused(addr).await;
}

async fn common_until_refused(addr: std::net::SocketAddr) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{addr} still accepts"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
