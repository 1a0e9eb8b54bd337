//! The request path as layers, as kube-apiserver's handler chain is: the
//! caller's layer first (`caller.rs`: authentication, the body's bound, a
//! partition, latency, the access record), then a write's guards
//! (`guards.rs`: anonymous writes off loopback, injected faults), then
//! routes: health and
//! OpenAPI v2 by path, and every other path to `dispatch.rs` (discovery,
//! OpenAPI v3, and the REST verbs over the store, after the checks a
//! write meets). The verbs are `Req`'s (`req.rs`): reads in `read.rs`,
//! writes in `write.rs`, each logged once (`journal.rs`).

mod caller;
mod delete;
mod dispatch;
#[cfg(feature = "conformance")]
mod evict;
mod guards;
mod prepare;
#[cfg(feature = "conformance")]
mod protobuf;
mod read;
mod req;
mod subresource;
mod token;
mod write;

use req::Req;

use crate::store::StoreError;
use crate::{ApiServer, Resource};
use axum::Router;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// The server's routes, behind the caller's layer.
pub(crate) fn router(s: Arc<ApiServer>) -> Router {
    // A method a path does not answer goes on to the resource handler,
    // which answers as the API server does (a 404 or 405 Status).
    let health = || get(health).fallback(dispatch::resource);
    Router::new()
        .route("/healthz", health())
        .route("/livez", health())
        .route("/readyz", health())
        .route("/openapi/v2", get(openapi_v2).fallback(dispatch::resource))
        .fallback(dispatch::resource)
        // The caller's layer bounds the body (MAX_BODY, Kubernetes' 3 MiB,
        // answered as a Status); axum's own 2 MiB default would refuse
        // what Kubernetes takes, in plain text.
        .layer(axum::extract::DefaultBodyLimit::disable())
        // Layers run last added first: the caller's, then the write's
        // guards (as kube-apiserver's authorization filter follows its
        // authentication), then the routes.
        .layer(axum::middleware::from_fn_with_state(
            s.clone(),
            guards::guard_writes,
        ))
        .layer(axum::middleware::from_fn_with_state(
            s.clone(),
            caller::prelude,
        ))
        .with_state(s)
}

async fn health() -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok").into_response()
}

/// OpenAPI v2, as JSON or as the protobuf client-go asks for; 406 for an
/// `Accept` that names neither.
async fn openapi_v2(
    axum::Extension(caller): axum::Extension<caller::Caller>,
    headers: HeaderMap,
) -> Response {
    use crate::discovery::openapi_v2::{Format, json, negotiate};
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .unwrap_or_default();
    match negotiate(accept) {
        Some(Format::Json) => ok(StatusCode::OK, json(&caller.served)),
        Some(Format::Protobuf) => {
            let body = crate::discovery::openapi_v2::protobuf(&caller.served);
            let media = crate::discovery::openapi_v2::PROTOBUF;
            ([(header::CONTENT_TYPE, media)], body).into_response()
        }
        None => StatusCode::NOT_ACCEPTABLE.into_response(),
    }
}

pub(super) type Q = HashMap<String, String>;

/// What a check answers instead of going on (a refused request).
type Refused = Box<Response>;

/// A verb that writes.
pub(super) fn is_write(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

pub(super) fn ok(code: StatusCode, v: Value) -> Response {
    let json = header::HeaderValue::from_static("application/json");
    (code, [(header::CONTENT_TYPE, json)], go_ordered(&v)).into_response()
}

/// An object's JSON in the order Go's encoder writes its fields: `kind`,
/// `apiVersion`, `metadata`, then the rest (a client's decoder may name a
/// position in its errors, as kube-rs's tests compare); a Status all
/// through.
fn go_ordered(v: &Value) -> Vec<u8> {
    crate::answers::go_json(v)
}

/// `watch=true` (or `1`) in a list's query.
pub(super) fn is_watch(q: &Q) -> bool {
    matches!(q.get("watch").map(String::as_str), Some("true" | "1"))
}

/// 404 for one object of `r`, as apimachinery's NewNotFound words it.
pub(super) fn not_found(r: &Resource, name: &str) -> Response {
    let msg = format!("{} {name:?} not found", r.qualified());
    crate::object_status(404, "NotFound", &msg, name, r)
}

pub(super) fn store_error(e: &StoreError, r: &Resource, name: &str) -> Response {
    // apimachinery's errors (NewNotFound, NewAlreadyExists, NewConflict):
    // the resource as group-qualified plural, the name quoted.
    let qualified = r.qualified();
    let (code, reason, message) = match e {
        StoreError::NotFound(_) => return not_found(r, name),
        StoreError::AlreadyExists(_) => (
            409,
            "AlreadyExists",
            format!("{qualified} {name:?} already exists"),
        ),
        StoreError::Conflict(why) => (
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {qualified} {name:?}: {why}"),
        ),
        StoreError::Invalid(_) => (422, "Invalid", e.to_string()),
        // ErrorToAPIStatus's fallback: an error that is no Status is a
        // 500 with no reason and no details.
        StoreError::TooLarge => return crate::status_with(500, "", &e.to_string(), None),
    };
    crate::object_status(code, reason, &message, name, r)
}

pub(super) fn meta_str<'a>(v: &'a Value, f: &str) -> &'a str {
    v["metadata"][f].as_str().unwrap_or_default()
}

/// The largest request body kube-apiserver takes (3 MiB).
pub(super) const MAX_BODY: usize = 3 * 1024 * 1024;
