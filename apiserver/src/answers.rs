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
    // In Go's field order (metav1.Status, then StatusDetails): clients
    // that show or compare the error's text see what kube-apiserver sends.
    let details = details.map(|d| {
        ordered(
            &d,
            &[
                "name",
                "group",
                "kind",
                "uid",
                "causes",
                "retryAfterSeconds",
            ],
        )
    });
    let mut body = ordered(
        &json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code,
        }),
        &[
            "kind",
            "apiVersion",
            "metadata",
            "status",
            "message",
            "reason",
        ],
    );
    // `details` comes before `code`; a null one is left out (omitempty).
    body.pop();
    if let Some(d) = details {
        body.extend_from_slice(b",\"details\":");
        body.extend_from_slice(&d);
    }
    body.extend_from_slice(format!(",\"code\":{code}}}").as_bytes());
    let code = axum::http::StatusCode::from_u16(code)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// `v`'s fields named in `order`, in that order (absent or null ones left
/// out), as one JSON object.
fn ordered(v: &Value, order: &[&str]) -> Vec<u8> {
    let mut out = vec![b'{'];
    for k in order {
        let Some(x) = v.get(*k).filter(|x| !x.is_null()) else {
            continue;
        };
        if out.len() > 1 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut out, k);
        out.push(b':');
        let _ = serde_json::to_writer(&mut out, x);
    }
    out.push(b'}');
    out
}

#[cfg(test)]
mod order_tests {
    #[tokio::test]
    async fn a_status_is_written_in_gos_field_order() {
        let r = super::status_with(
            409,
            "AlreadyExists",
            "x \"a\" already exists",
            Some(serde_json::json!({"name": "a", "group": "g.io", "kind": "xs"})),
        );
        let body = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        assert_eq!(
            String::from_utf8(body.to_vec()).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"x \"a\" already exists","reason":"AlreadyExists","details":{"name":"a","group":"g.io","kind":"xs"},"code":409}"#
        );
    }
}
