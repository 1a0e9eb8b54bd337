//! Who may read /metrics and /debug: delegated to the API server, as
//! controller-runtime protects its metrics endpoint (and kube-apiserver's
//! own components theirs). The bearer token is checked with a TokenReview,
//! then the user's access to the path with a SubjectAccessReview
//! (`nonResourceURLs` in RBAC: the chart's `metrics-reader` and
//! `debug-reader` ClusterRoles). In a multi-tenant cluster the claim names
//! and decisions under /debug are every tenant's business, so nothing is
//! served to a caller the cluster does not allow. /healthz and /readyz
//! stay open: the kubelet probes them without credentials.
//!
//! Answers are cached for `CACHE_TTL` (kube-apiserver's delegated
//! authenticator and authorizer cache for 10 s too), so a Prometheus
//! scraping every 30 s costs two reviews per scrape at most, and a flood
//! of requests with the same token costs none.

use crate::metrics::{AuthLabels, Metrics};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dashmap::DashMap;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Api;
use kube::api::PostParams;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How /metrics and /debug are protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HttpAuth {
    /// TokenReview and SubjectAccessReview against the API server.
    Kubernetes,
    /// Open to anyone who can connect: for development on one machine.
    None,
}

impl std::fmt::Display for HttpAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HttpAuth::Kubernetes => "kubernetes",
            HttpAuth::None => "none",
        })
    }
}

/// How long a review's answer is trusted.
pub const CACHE_TTL: Duration = Duration::from_secs(10);
/// Entries each cache holds at most; past it, the expired go, then all.
const CACHE_MAX: usize = 4096;

/// The caller, as the TokenReview named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// What was decided about one request.
#[derive(Debug)]
pub enum Verdict {
    Allowed,
    /// No bearer token, or one the API server does not know.
    Unauthenticated,
    Forbidden {
        user: String,
    },
    /// The API server could not be asked.
    Error(ReviewError),
}

impl Verdict {
    fn label(&self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Unauthenticated => "unauthenticated",
            Verdict::Forbidden { .. } => "forbidden",
            Verdict::Error(_) => "error",
        }
    }
}

/// Why a review got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("the {kind} got no answer within {timeout:?}")]
    Timeout {
        kind: &'static str,
        timeout: Duration,
    },
    #[error("the {kind} failed: {source}")]
    Api {
        kind: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// A map whose entries expire, bounded.
struct Expiring<K: Eq + Hash, V>(DashMap<K, (Instant, V)>);

impl<K: Eq + Hash, V: Clone> Expiring<K, V> {
    fn get(&self, k: &K) -> Option<V> {
        let e = self.0.get(k)?;
        (e.0 > Instant::now()).then(|| e.1.clone())
    }

    fn put(&self, k: K, v: V) {
        if self.0.len() >= CACHE_MAX {
            let now = Instant::now();
            self.0.retain(|_, (until, _)| *until > now);
            if self.0.len() >= CACHE_MAX {
                self.0.clear();
            }
        }
        self.0.insert(k, (Instant::now() + CACHE_TTL, v));
    }
}

/// Reviews through the API server, with their answers cached.
pub struct Delegated {
    client: kube::Client,
    timeout: Duration,
    metrics: Option<Arc<Metrics>>,
    /// By the token's SHA-256: no token is kept in memory longer than its request.
    callers: Expiring<[u8; 32], Option<Caller>>,
    /// By (user, groups, verb, path).
    access: Expiring<(String, Vec<String>, String, String), bool>,
}

impl Delegated {
    pub fn new(client: kube::Client, timeout: Duration, metrics: Option<Arc<Metrics>>) -> Self {
        Self {
            client,
            timeout,
            metrics,
            callers: Expiring(DashMap::new()),
            access: Expiring(DashMap::new()),
        }
    }

    /// Decides whether the bearer of `headers` may `verb` `path`.
    pub async fn judge(&self, headers: &HeaderMap, verb: &str, path: &str) -> Verdict {
        let Some(token) = bearer(headers) else {
            return Verdict::Unauthenticated;
        };
        let caller = match self.authenticate(token).await {
            Ok(Some(c)) => c,
            Ok(None) => return Verdict::Unauthenticated,
            Err(e) => return Verdict::Error(e),
        };
        match self.authorize(&caller, verb, path).await {
            Ok(true) => Verdict::Allowed,
            Ok(false) => Verdict::Forbidden {
                user: caller.username,
            },
            Err(e) => Verdict::Error(e),
        }
    }

    async fn authenticate(&self, token: &str) -> Result<Option<Caller>, ReviewError> {
        let key: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .unwrap_or_default();
        if let Some(c) = self.callers.get(&key) {
            return Ok(c);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..Default::default()
        };
        let answered = self.create("TokenReview", review).await?;
        let caller = answered
            .status
            .filter(|s| s.authenticated == Some(true))
            .and_then(|s| s.user)
            .map(|u| Caller {
                username: u.username.unwrap_or_default(),
                uid: u.uid.unwrap_or_default(),
                groups: u.groups.unwrap_or_default(),
            });
        self.callers.put(key, caller.clone());
        Ok(caller)
    }

    async fn authorize(&self, c: &Caller, verb: &str, path: &str) -> Result<bool, ReviewError> {
        let key = (
            c.username.clone(),
            c.groups.clone(),
            verb.to_string(),
            path.to_string(),
        );
        if let Some(allowed) = self.access.get(&key) {
            return Ok(allowed);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(c.username.clone()),
                uid: (!c.uid.is_empty()).then(|| c.uid.clone()),
                groups: Some(c.groups.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answered = self.create("SubjectAccessReview", review).await?;
        let allowed = answered.status.is_some_and(|s| s.allowed);
        self.access.put(key, allowed);
        Ok(allowed)
    }

    /// Creates a review with this process's deadline.
    async fn create<K>(&self, kind: &'static str, review: K) -> Result<K, ReviewError>
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::all(self.client.clone());
        match tokio::time::timeout(self.timeout, api.create(&PostParams::default(), &review)).await
        {
            Ok(Ok(k)) => Ok(k),
            Ok(Err(source)) => Err(ReviewError::Api { kind, source }),
            Err(_) => Err(ReviewError::Timeout {
                kind,
                timeout: self.timeout,
            }),
        }
    }
}

/// The bearer token of a request (the scheme's case does not matter).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Whether a protected path is one the routes serve with names that can
/// be: `/metrics`, `/debug`, `/debug/claims/<namespace>/<name>`. Anything
/// else is answered 404 before any review, so a caller cannot make the
/// controller review (and cache) paths of its choosing, nor of any length.
fn servable(path: &str) -> bool {
    use gpu_claims_actors::api::validation::{is_dns_label, is_dns_subdomain};
    match path.strip_prefix("/debug/claims/") {
        None => path == "/metrics" || path == "/debug",
        Some(rest) => match rest.split_once('/') {
            Some((ns, name)) => is_dns_label(ns) && is_dns_subdomain(name),
            None => false,
        },
    }
}

/// The middleware in front of the protected routes.
pub async fn guard(State(d): State<Arc<Delegated>>, req: Request, next: Next) -> Response {
    let verb = req.method().as_str().to_ascii_lowercase();
    let path = req.uri().path().to_string();
    if !servable(&path) {
        return (StatusCode::NOT_FOUND, "404 page not found\n").into_response();
    }
    let verdict = d.judge(req.headers(), &verb, &path).await;
    if let Some(m) = &d.metrics {
        m.http_auth
            .get_or_create(&AuthLabels {
                result: verdict.label().into(),
            })
            .inc();
    }
    match verdict {
        Verdict::Allowed => next.run(req).await,
        Verdict::Unauthenticated => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "Unauthorized: a bearer token the API server accepts is required\n",
        )
            .into_response(),
        Verdict::Forbidden { user } => {
            tracing::debug!(%user, %verb, %path, "refused by the API server's authorization");
            let msg = format!("forbidden: User {user:?} cannot {verb} path {path:?}\n");
            (StatusCode::FORBIDDEN, msg).into_response()
        }
        Verdict::Error(error) => {
            tracing::warn!(%error, %path, "could not review a request to a protected endpoint");
            let msg = format!("could not review the request: {error}\n");
            (StatusCode::SERVICE_UNAVAILABLE, msg).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_served_paths_with_real_names_are_reviewed() {
        for ok in ["/metrics", "/debug", "/debug/claims/tenant-a/gpu-1"] {
            assert!(servable(ok), "{ok}");
        }
        let long = format!("/debug/claims/t/{}", "a".repeat(60_000));
        for no in [
            "/debug/claims/t",
            "/debug/claims/T/x",
            "/debug/claims/t/x/y",
            "/debug/claims/t/x%2Fy",
            long.as_str(),
            "/metricsx",
        ] {
            assert!(!servable(no), "{no}");
        }
    }

    #[test]
    fn a_bearer_token_is_read_whatever_the_schemes_case() {
        let h = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, v.parse().unwrap());
            h
        };
        assert_eq!(bearer(&h("Bearer abc")), Some("abc"));
        assert_eq!(bearer(&h("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(&h("Basic abc")), None);
        assert_eq!(bearer(&h("Bearer ")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }

    #[test]
    fn the_cache_forgets_the_expired_first_and_stays_bounded() {
        let c: Expiring<u32, bool> = Expiring(DashMap::new());
        for i in 0..(CACHE_MAX as u32 + 10) {
            c.put(i, true);
        }
        assert!(c.0.len() <= CACHE_MAX);
        assert_eq!(c.get(&(CACHE_MAX as u32 + 9)), Some(true));
    }
}
