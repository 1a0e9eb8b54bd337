//! The API server's failures as it answers them: a `Status` with its
//! code, reason, message and details, as apimachinery's errors build it.

use crate::resources::Resource;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A `Status` failure, as the API server answers one.
pub(crate) fn status(
    code: u16,
    reason: &str,
    message: &str,
    name: Option<&str>,
    plural: &str,
) -> Response {
    status_with(
        code,
        reason,
        message,
        name.map(|n| json!({"name": n, "kind": plural})),
    )
}

/// A `Status` failure about one object of resource `r`: details with its
/// name, group (omitted for the core group, as Kubernetes omits it) and
/// resource, as apimachinery's errors set them.
pub(crate) fn object_status(
    code: u16,
    reason: &str,
    message: &str,
    name: &str,
    r: &Resource,
) -> Response {
    let mut details = json!({"name": name, "kind": r.plural});
    if !r.group.is_empty() {
        details["group"] = r.group.into();
    }
    status_with(code, reason, message, Some(details))
}

pub(crate) fn status_with(
    code: u16,
    reason: &str,
    message: &str,
    details: Option<Value>,
) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
        "details": details,
    });
    let code = axum::http::StatusCode::from_u16(code)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    (code, axum::Json(body)).into_response()
}
