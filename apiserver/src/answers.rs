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
    // A null `details` is left out (omitempty).
    let text = |v: &str| serde_json::to_vec(v).unwrap_or_default();
    let fields = [
        ("kind", text("Status")),
        ("apiVersion", text("v1")),
        ("metadata", b"{}".to_vec()),
        ("status", text("Failure")),
        ("message", text(message)),
        ("reason", text(reason)),
    ]
    .into_iter()
    // An empty reason is left out (omitempty), as for a 500 from storage.
    .filter(|(k, v)| *k != "reason" || v.as_slice() != b"\"\"")
    .chain(details.map(|d| ("details", details_json(&d))))
    .chain([("code", code.to_string().into_bytes())]);
    let body = json_object(fields);
    let code = axum::http::StatusCode::from_u16(code)
        .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// A JSON object of these fields, each already written as JSON, in this
/// order: Go's encoder writes a struct's fields in their declared order,
/// and serde_json's maps would sort them.
pub(crate) fn json_object<'a>(fields: impl IntoIterator<Item = (&'a str, Vec<u8>)>) -> Vec<u8> {
    let mut out = vec![b'{'];
    for (i, (k, v)) in fields.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut out, k);
        out.push(b':');
        out.extend_from_slice(&v);
    }
    out.push(b'}');
    out
}

/// metav1.Status's fields in Go's declared order.
const STATUS: [&str; 8] = [
    "kind",
    "apiVersion",
    "metadata",
    "status",
    "message",
    "reason",
    "details",
    "code",
];
/// StatusDetails', and StatusCause's (`type` is `reason` in JSON).
const DETAILS: [&str; 6] = [
    "name",
    "group",
    "kind",
    "uid",
    "causes",
    "retryAfterSeconds",
];
const CAUSE: [&str; 3] = ["reason", "message", "field"];

/// A `Status` as Go's encoder writes it: its fields, its details' and
/// each cause's in their declared order (clients that show or compare an
/// error's text, the Python client's tests among them, see what
/// kube-apiserver sends). Any other object: `kind`, `apiVersion`,
/// `metadata` first.
pub(crate) fn go_json(v: &Value) -> Vec<u8> {
    if v["kind"] != "Status" {
        return in_order(v, &["kind", "apiVersion", "metadata"]);
    }
    let Some(fields) = v.as_object() else {
        return serde_json::to_vec(v).unwrap_or_default();
    };
    let named = STATUS.iter().filter_map(|k| fields.get_key_value(*k));
    let rest = fields.iter().filter(|(k, _)| !STATUS.contains(&k.as_str()));
    json_object(named.chain(rest).map(|(k, x)| {
        let text = match k.as_str() {
            "details" => details_json(x),
            _ => serde_json::to_vec(x).unwrap_or_default(),
        };
        (k.as_str(), text)
    }))
}

fn details_json(d: &Value) -> Vec<u8> {
    let Some(fields) = d.as_object() else {
        return serde_json::to_vec(d).unwrap_or_default();
    };
    let named = DETAILS.iter().filter_map(|k| fields.get_key_value(*k));
    let rest = fields
        .iter()
        .filter(|(k, _)| !DETAILS.contains(&k.as_str()));
    json_object(named.chain(rest).map(|(k, x)| {
        let text = match (k.as_str(), x.as_array()) {
            ("causes", Some(causes)) => {
                let mut out = vec![b'['];
                for (i, c) in causes.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend(in_order(c, &CAUSE));
                }
                out.push(b']');
                out
            }
            _ => serde_json::to_vec(x).unwrap_or_default(),
        };
        (k.as_str(), text)
    }))
}

/// A Status answer, written in Go's order.
pub(crate) fn status_response(code: axum::http::StatusCode, body: &Value) -> Response {
    (
        code,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        go_json(body),
    )
        .into_response()
}

/// An object's JSON with the fields named in `first` first, in that order
/// (those absent left out), then the rest as stored.
pub(crate) fn in_order(v: &Value, first: &[&str]) -> Vec<u8> {
    let Some(fields) = v.as_object() else {
        return serde_json::to_vec(v).unwrap_or_default();
    };
    let named = first.iter().filter_map(|k| fields.get_key_value(*k));
    let rest = fields.iter().filter(|(k, _)| !first.contains(&k.as_str()));
    json_object(
        named
            .chain(rest)
            .map(|(k, x)| (k.as_str(), serde_json::to_vec(x).unwrap_or_default())),
    )
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

    /// Issue 62, item 3: every Status, its details and causes too, in
    /// Go's order, whatever order it was built in.
    #[test]
    fn a_status_built_as_a_map_is_written_in_gos_order_to_its_causes() {
        let v = serde_json::json!({"code": 422, "details": {"causes": [{"field": "f", "message": "m", "reason": "FieldValueInvalid"}],
            "kind": "xs", "name": "a"}, "reason": "Invalid", "message": "bad", "status": "Failure",
            "metadata": {}, "apiVersion": "v1", "kind": "Status"});
        assert_eq!(
            String::from_utf8(super::go_json(&v)).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"bad","reason":"Invalid","details":{"name":"a","kind":"xs","causes":[{"reason":"FieldValueInvalid","message":"m","field":"f"}]},"code":422}"#
        );
    }
}
