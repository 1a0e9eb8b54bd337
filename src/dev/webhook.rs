//! The gate webhook on one machine (`demo`, the end-to-end tests), wired
//! as the chart wires it in a cluster: a serving certificate for the
//! chart's Service name, and the chart's own MutatingWebhookConfiguration
//! (deploy/manifests, built in) registered on the embedded API server
//! with that certificate as its caBundle and the webhook's address as the
//! Service's endpoint. The API server then calls `run`'s webhook over TLS
//! for every launcher pod the chart's rules, selectors and matchConditions
//! send it.

use crate::webhook::CertFiles;
use base64::Engine;
use gpu_claims_apiserver::ApiServer;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;

/// The chart's render (what `kubectl apply` would install).
const MANIFESTS: &str = include_str!("../../deploy/manifests/gpu-claims.yaml");

/// The Service the chart's webhook configuration names.
pub const SERVICE_NAMESPACE: &str = "gpu-claims";
pub const SERVICE_NAME: &str = "gpu-claims";
pub const SERVICE_PORT: i32 = 443;

/// A serving certificate for the Service, in files `run` reads.
pub struct LocalCert {
    pub files: CertFiles,
    /// The PEM to trust it by (it signs itself).
    pub ca_pem: String,
}

/// The name the certificate is for: the Service's in-cluster host.
pub fn service_host() -> String {
    format!("{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc")
}

/// A TLS client that trusts `ca_pem` (as the API server trusts the
/// caBundle), for the benchmark's connections.
pub fn client_config(ca_pem: &str) -> anyhow::Result<std::sync::Arc<rustls::ClientConfig>> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(std::sync::Arc::new(config))
}

/// Writes `tls.crt` and `tls.key` into `dir`, for `<name>.<namespace>.svc`.
pub fn certificate(dir: &Path) -> Result<LocalCert, crate::webhook::TlsError> {
    let made = rcgen::generate_simple_self_signed(vec![service_host()])
        .map_err(|e| crate::webhook::TlsError::Generate { why: e.to_string() })?;
    let files = CertFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    };
    let write = |path: &Path, text: String| {
        std::fs::write(path, text).map_err(|e| crate::webhook::TlsError::Generate {
            why: format!("{}: {e}", path.display()),
        })
    };
    write(&files.cert, made.cert.pem())?;
    write(&files.key, made.signing_key.serialize_pem())?;
    Ok(LocalCert {
        files,
        ca_pem: made.cert.pem(),
    })
}

/// The chart's MutatingWebhookConfiguration, trusting `ca_pem`.
pub fn configuration(ca_pem: &str) -> Value {
    let docs: Vec<Value> = gpu_claims_actors::yaml::documents(MANIFESTS).unwrap_or_default();
    let mut config = docs
        .into_iter()
        .find(|d| d["kind"] == "MutatingWebhookConfiguration")
        .expect("the chart renders a MutatingWebhookConfiguration");
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    if let Some(hooks) = config["webhooks"].as_array_mut() {
        for h in hooks {
            h["clientConfig"]["caBundle"] = ca.clone().into();
        }
    }
    config
}

/// Registers the chart's webhook configuration on `server`, trusting `ca_pem`.
pub fn register(server: &ApiServer, ca_pem: &str) {
    server
        .store
        .seed("MutatingWebhookConfiguration", configuration(ca_pem));
}

/// Puts a webhook listening at `addr` behind the chart's Service.
pub fn add_endpoint(server: &ApiServer, addr: SocketAddr) {
    server.add_service_endpoint(SERVICE_NAMESPACE, SERVICE_NAME, SERVICE_PORT, addr);
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
    use serde_json::json;

    #[test]
    fn the_charts_match_condition_sends_only_pods_that_ask_for_gpus_by_annotation_or_request() {
        let docs: Vec<Value> = gpu_claims_actors::yaml::documents(MANIFESTS).unwrap();
        let config = docs
            .into_iter()
            .find(|d| d["kind"] == "MutatingWebhookConfiguration")
            .unwrap();
        let config: MutatingWebhookConfiguration = serde_json::from_value(config).unwrap();
        let hook = &config.webhooks.unwrap()[0];
        let c = hook.match_conditions.clone().unwrap();
        let compute = json!([{"name": "compute"}]);
        let pod = |annotations: Value| json!({"metadata": {"annotations": annotations}, "spec": {"containers": compute.clone()}});
        let asking = |part: &str, resource: &str| {
            json!({"metadata": {}, "spec": {"containers": [
                {"name": "sidecar"},
                {"name": "compute", "resources": {part: {resource: "1", "cpu": "1"}}},
            ]}})
        };
        let req = json!({});
        for (p, want) in [
            (pod(json!({"gpu.cozystack.io/class": "h200"})), true),
            (pod(json!({"gpu.cozystack.io/claims": "a,b"})), true),
            (pod(json!({"other": "x"})), false),
            (
                json!({"metadata": {}, "spec": {"containers": compute.clone()}}),
                false,
            ),
            (asking("limits", "nvidia.com/GH100_H200"), true),
            (asking("requests", "nvidia.com/GH100_H200"), true),
            (asking("limits", "devices.kubevirt.io/kvm"), false),
        ] {
            assert_eq!(
                gpu_claims_apiserver::match_conditions_hold(&c, &p, &req),
                Ok(want),
                "{p}"
            );
        }
    }
}
