//! What the conformance tests share: a server with a real controller's
//! CRDs (test data in `tests/crds/`), typed kinds for them as a kube-rs
//! controller would derive them, and a webhook over TLS.
#![allow(dead_code)]

use gpu_claims_apiserver::{ApiServer, Builder, Handle};
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// The CRDs in `tests/crds/`, as JSON.
pub fn crds() -> Vec<Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/crds");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| serde_saphyr::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect()
}

/// A builder with the test CRDs and `namespaces`.
pub fn builder(namespaces: &[&str]) -> Builder {
    let mut b = ApiServer::builder();
    for crd in crds() {
        b = b.crd_json(crd);
    }
    for ns in namespaces {
        b = b.namespace(ns);
    }
    b
}

/// A server with the test CRDs, namespace `a`, and an anonymous client.
pub async fn server() -> (Handle, kube::Client) {
    let s = builder(&["a"]).start().await.unwrap();
    let c = s.client();
    (s, c)
}

#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize)]
#[kube(
    group = "gpu.cozystack.io",
    version = "v1alpha1",
    kind = "GPUClass",
    schema = "disabled",
    status = "Value"
)]
#[serde(rename_all = "camelCase")]
pub struct GPUClassSpec {
    pub resource_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<i64>,
}

#[derive(CustomResource, Clone, Debug, Default, Serialize, Deserialize)]
#[kube(
    group = "gpu.cozystack.io",
    version = "v1alpha1",
    kind = "GPUClaim",
    namespaced,
    schema = "disabled",
    status = "Value"
)]
#[serde(rename_all = "camelCase")]
pub struct GPUClaimSpec {
    pub class_name: String,
    #[serde(default = "one")]
    pub count: i64,
}

fn one() -> i64 {
    1
}

pub fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// `path` as kubectl asks for it: a `meta.k8s.io/v1` Table.
pub async fn table(c: &kube::Client, path: &str) -> Value {
    let req = http::Request::get(path.to_string())
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .body(Vec::new())
        .unwrap();
    c.request::<Value>(req).await.unwrap()
}

/// The API error a request ended in (code, reason, message).
pub fn refusal<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Clears the finalizers of `name` (a merge patch): a delete they held
/// goes on.
/// A 422 Invalid whose message says `what`.
pub fn invalid_saying(e: &kube::core::Status, what: &str) {
    assert_eq!(
        (e.code, e.reason.as_str()),
        (422, "Invalid"),
        "{}",
        e.message
    );
    assert!(e.message.contains(what), "{}", e.message);
}

pub async fn clear_finalizers<K>(api: &kube::Api<K>, name: &str)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let clear = json!({"metadata": {"finalizers": null}});
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(clear),
    )
    .await
    .unwrap();
}

/// Waits (on a condition, polling) until `done` holds; fails after 10 s.
pub async fn until<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A webhook over TLS behind Service gpu-claims/gpu-claims, answering by
/// the pod's name: `deny-*` refused (403), `slow-*` after 3 s, `patch-*`
/// with a label added, anything else allowed; it counts its calls. The
/// CA to trust, and the count.
pub async fn fake_webhook(s: &ApiServer) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use axum::routing::post;
    use base64::Engine;
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let app = axum::Router::new().route(
        "/mutate",
        post(move |axum::Json(review): axum::Json<Value>| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let req = &review["request"];
                let name = req["object"]["metadata"]["name"].as_str().unwrap_or_default();
                let uid = req["uid"].clone();
                let response = if name.starts_with("deny-") {
                    json!({"uid": uid, "allowed": false, "status": {"code": 403, "message": "not this one"}})
                } else if name.starts_with("patch-") {
                    let p = json!([{"op": "add", "path": "/metadata/labels", "value": {"patched": "yes"}}]);
                    json!({"uid": uid, "allowed": true, "patchType": "JSONPatch",
                        "patch": base64::engine::general_purpose::STANDARD.encode(p.to_string())})
                } else {
                    if name.starts_with("slow-") {
                        tokio::time::sleep(Duration::from_secs(3)).await;
                    }
                    json!({"uid": uid, "allowed": true})
                };
                axum::Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}))
            }
        }),
    );
    let (addr, ca_pem) = serve_tls(app, "gpu-claims.gpu-claims.svc").await;
    s.add_service_endpoint("gpu-claims", "gpu-claims", 443, addr);
    (ca_pem, calls)
}

/// Serves `app` over TLS with a self-signed certificate for `host`: the
/// address and the certificate (the CA a caller trusts).
async fn serve_tls(app: axum::Router, host: &str) -> (std::net::SocketAddr, String) {
    use hyper_util::rt::TokioIo;
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let made = rcgen::generate_simple_self_signed(vec![host.to_string()]).unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![made.cert.der().clone()], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (addr, made.cert.pem())
}

/// The answer's status, content type and body.
pub async fn send(c: &kube::Client, req: http::Request<Vec<u8>>) -> (u16, String, Vec<u8>) {
    let (parts, body) = req.into_parts();
    let res = c
        .send(http::Request::from_parts(
            parts,
            kube::client::Body::from(body),
        ))
        .await
        .unwrap();
    let code = res.status().as_u16();
    let content_type = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = res.into_body().collect_bytes().await.unwrap();
    (code, content_type, bytes.to_vec())
}
