//! One call of a webhook over HTTPS, as kube-apiserver makes it: to
//! `clientConfig.url`, or to `clientConfig.service` (an endpoint the
//! server was told of, the certificate checked for
//! `<name>.<namespace>.svc`), trusting `caBundle` alone, with the path's
//! `?timeout=` and the whole call bounded by timeoutSeconds.

use super::ApiServer;
use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Why a call got no usable answer (worded as kube-apiserver's errors).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("failed to call webhook: {0}")]
    Config(String),
    #[error("failed to call webhook: Post {url:?}: {why}")]
    Post { url: String, why: String },
    #[error("failed to call webhook: Post {url:?}: context deadline exceeded")]
    Timeout { url: String },
    #[error("received invalid webhook response: {0}")]
    Answer(String),
}

/// Where to connect, what name the certificate must carry, what to ask.
struct Target {
    addrs: Vec<SocketAddr>,
    server_name: String,
    path: String,
    url: String,
}

fn target(s: &ApiServer, c: &WebhookClientConfig, timeout: Duration) -> Result<Target, CallError> {
    let t = format!("timeout={}s", timeout.as_secs());
    if let Some(svc) = &c.service {
        let port = svc.port.unwrap_or(443);
        let host = format!("{}.{}.svc", svc.name, svc.namespace);
        let path = format!("{}?{t}", svc.path.as_deref().unwrap_or("/"));
        let url = format!("https://{host}:{port}{path}");
        let addrs = s.endpoints(&svc.namespace, &svc.name, port);
        if addrs.is_empty() {
            return Err(CallError::Post {
                url,
                why: format!(
                    "service \"{}/{}\" has no endpoints",
                    svc.namespace, svc.name
                ),
            });
        }
        return Ok(Target {
            addrs,
            server_name: host,
            path,
            url,
        });
    }
    let url = c
        .url
        .as_deref()
        .ok_or_else(|| CallError::Config("clientConfig has neither url nor service".into()))?;
    let uri: http::Uri = url
        .parse()
        .map_err(|e| CallError::Config(format!("parse {url:?}: {e}")))?;
    if uri.scheme_str() != Some("https") {
        return Err(CallError::Config(format!(
            "{url:?}: the scheme must be https"
        )));
    }
    let host = uri.host().unwrap_or_default().to_string();
    let port = uri.port_u16().unwrap_or(443);
    let sep = if uri.query().is_some() { '&' } else { '?' };
    let path = format!(
        "{}{sep}{t}",
        uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let addrs = std::net::ToSocketAddrs::to_socket_addrs(&(host.trim_matches(['[', ']']), port))
        .map(|a| a.collect())
        .map_err(|e| CallError::Post {
            url: url.to_string(),
            why: format!("dial tcp: lookup {host}: {e}"),
        })?;
    Ok(Target {
        addrs,
        server_name: host.trim_matches(['[', ']']).to_string(),
        path,
        url: format!("{}{sep}{t}", url),
    })
}

fn tls(ca_bundle: Option<&[u8]>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    // caBundle is PEM; k8s-openapi keeps it as the decoded bytes.
    for cert in CertificateDer::pem_slice_iter(ca_bundle.unwrap_or_default()) {
        let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
        roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// POSTs `review` to the webhook; its answer as JSON.
pub(super) async fn call(
    s: &ApiServer,
    c: &WebhookClientConfig,
    review: &Value,
    timeout: Duration,
) -> Result<Value, CallError> {
    let t = target(s, c, timeout)?;
    let url = t.url.clone();
    match tokio::time::timeout(timeout, post(t, c, review)).await {
        Ok(r) => r,
        Err(_) => Err(CallError::Timeout { url }),
    }
}

async fn post(t: Target, c: &WebhookClientConfig, review: &Value) -> Result<Value, CallError> {
    let fail = |why: String| CallError::Post {
        url: t.url.clone(),
        why,
    };
    let config = tls(c.ca_bundle.as_ref().map(|b| b.0.as_slice())).map_err(CallError::Config)?;
    let name = ServerName::try_from(t.server_name.clone()).map_err(|e| fail(e.to_string()))?;
    // A Service sends to one of its ready endpoints: one that refuses the
    // connection (a stopped process) is one kube-proxy would not pick.
    let mut last = String::from("no address");
    let mut tcp = None;
    for addr in &t.addrs {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => last = format!("dial tcp {addr}: connect: {e}"),
        }
    }
    let tcp = tcp.ok_or_else(|| fail(last))?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| fail(format!("tls: {e}")))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| fail(e.to_string()))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let body = serde_json::to_vec(review).unwrap_or_default();
    let req = http::Request::post(&t.path)
        .header(http::header::HOST, &t.server_name)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| fail(e.to_string()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let code = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| fail(e.to_string()))?
        .to_bytes();
    if !code.is_success() {
        return Err(CallError::Answer(format!(
            "the webhook answered {code}: {}",
            String::from_utf8_lossy(&bytes)
        )));
    }
    serde_json::from_slice(&bytes).map_err(|e| CallError::Answer(e.to_string()))
}
