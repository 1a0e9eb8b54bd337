//! The layer every request passes first, as kube-apiserver's filter chain
//! does: authentication, the body's bound, a partition's hang, injected
//! latency, then the request recorded in RBAC's terms. What it learns (the
//! caller, the served resources, the parsed target) goes on to the
//! handlers as a request extension, so that nothing is read twice.

use super::MAX_BODY;
use crate::{Access, ApiServer, Served, Target, status};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

/// Who called, and what the path names.
#[derive(Clone)]
pub(super) struct Caller {
    pub user: String,
    pub user_agent: String,
    /// What the server served when the request came.
    pub served: Arc<Served>,
    /// The resource the path names, if it names one.
    pub target: Option<Arc<Target>>,
}

pub(super) async fn prelude(State(s): State<Arc<ApiServer>>, req: Request, next: Next) -> Response {
    let user = match s.authenticate(req.headers()) {
        Ok(u) => u,
        Err(r) => return r,
    };
    let (parts, body) = req.into_parts();
    // Kubernetes' limit on a request's body, answered as a Status.
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY).await else {
        let msg = format!("Request entity too large: limit is {MAX_BODY}");
        return status(413, "RequestEntityTooLarge", &msg, None, "");
    };
    if let Err(r) = s.through_partition(&user).await {
        return r;
    }
    let latency = s.faults().latency;
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let user_agent = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|u| u.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let served = s.served();
    let target = served.parse(parts.uri.path()).map(Arc::new);
    // Read as the handlers read the query, so both agree on what a watch is.
    let watch = axum::extract::Query::<super::Q>::try_from_uri(&parts.uri)
        .is_ok_and(|q| super::is_watch(&q));
    s.audit_request(access(
        &parts.method,
        parts.uri.path(),
        watch,
        target.as_deref(),
        &user,
        &user_agent,
    ));
    let mut req = Request::from_parts(parts, Body::from(body));
    req.extensions_mut().insert(Caller {
        user,
        user_agent,
        served,
        target,
    });
    next.run(req).await
}

/// The request in RBAC's terms (verb, group, resource, namespace).
fn access(
    method: &Method,
    path: &str,
    watch: bool,
    target: Option<&Target>,
    user: &str,
    user_agent: &str,
) -> Access {
    let verb = match (method, target) {
        (_, None) => method.to_string(),
        (&Method::GET, Some(t)) if t.name.is_some() => "get".into(),
        (&Method::GET, Some(_)) if watch => "watch".into(),
        (&Method::GET, Some(_)) => "list".into(),
        (&Method::POST, _) => "create".into(),
        (&Method::PUT, _) => "update".into(),
        (&Method::PATCH, _) => "patch".into(),
        (&Method::DELETE, _) => "delete".into(),
        (m, _) => m.to_string(),
    };
    Access {
        user: user.to_string(),
        user_agent: user_agent.to_string(),
        verb,
        group: target
            .map(|t| t.resource.group.to_string())
            .unwrap_or_default(),
        resource: match target {
            Some(Target {
                sub: Some(sub),
                resource,
                ..
            }) => {
                format!("{}/{}", resource.plural, sub.name())
            }
            Some(t) => t.resource.plural.to_string(),
            None => path.to_string(),
        },
        namespace: target.and_then(|t| t.namespace.clone()),
    }
}
