//! DeviceTaintRule at the version the API server serves (D7): `v1` from
//! Kubernetes 1.37, `v1beta2` in 1.36, with the same fields. A request
//! the version does not serve is sent once more at the other, which is
//! kept for the requests after it; the watch falls back the same way.

use gpu_claims_actors::ports::Kind;
use kube::Client;
use kube::api::{Api, DynamicObject};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The same at `version` ("" for the kind's own): DeviceTaintRule is
/// `v1` from Kubernetes 1.37 and `v1beta2` in 1.36, with the same fields.
pub(super) fn api_at(
    client: &Client,
    kind: Kind,
    namespace: Option<&str>,
    version: &str,
) -> Api<DynamicObject> {
    let mut ar = kind.api_resource();
    if !version.is_empty() {
        ar.api_version = format!("{}/{version}", ar.group);
        ar.version = version.to_string();
    }
    match namespace {
        Some(ns) if kind.namespaced() => Api::namespaced_with(client.clone(), ns, &ar),
        _ => Api::all_with(client.clone(), &ar),
    }
}

/// DeviceTaintRule's versions, newest first.
const TAINT_RULE_VERSIONS: [&str; 2] = ["v1", "v1beta2"];

/// A 404 about the resource, not an object: the version is not served.
fn not_served(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s)
        if s.code == 404 && s.details.as_ref().is_none_or(|d| d.name.is_empty()))
}

/// Which of `TAINT_RULE_VERSIONS` the API server serves, as the last
/// answer said.
#[derive(Default)]
pub(super) struct ServedVersion(AtomicUsize);

impl ServedVersion {
    /// The API of `kind` a request goes to: DeviceTaintRule's at the
    /// version last served.
    fn api(
        &self,
        client: &Client,
        kind: Kind,
        namespace: Option<&str>,
    ) -> (Api<DynamicObject>, &'static str) {
        if kind != Kind::DeviceTaintRule {
            return (super::api(client, kind, namespace), "");
        }
        let v = TAINT_RULE_VERSIONS[self.0.load(Ordering::Relaxed) % 2];
        (api_at(client, kind, namespace, v), v)
    }

    /// Runs `request` against the kind's API; a DeviceTaintRule request
    /// the version does not serve is sent once more at the other version.
    pub(super) async fn request<T, F, Fut>(
        &self,
        client: &Client,
        kind: Kind,
        namespace: Option<&str>,
        request: F,
    ) -> Result<T, kube::Error>
    where
        F: Fn(Api<DynamicObject>, &'static str) -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        let (a, v) = self.api(client, kind, namespace);
        match request(a, v).await {
            Err(e) if kind == Kind::DeviceTaintRule && not_served(&e) => {
                self.0.fetch_add(1, Ordering::Relaxed);
                let (a, other) = self.api(client, kind, namespace);
                tracing::info!(
                    from = v,
                    to = other,
                    "DeviceTaintRule is not served at {v}: using {other}"
                );
                request(a, other).await
            }
            r => r,
        }
    }
}
