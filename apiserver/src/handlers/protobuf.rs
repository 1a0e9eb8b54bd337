//! Kubernetes' protobuf wire format at the edge of the request path (the
//! `conformance` feature): a protobuf body read as the JSON it stands for
//! before anything else sees it, and an answer written as protobuf when
//! the caller prefers it, so that everything between speaks JSON only.

use super::Refused;
use crate::{Target, status};
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, header};
use axum::response::Response;

/// A protobuf body (not a patch's: patches are JSON) read as the JSON it
/// stands for, so that what follows sees one format; one that does not
/// decode is a 400, as kube-apiserver's decoder answers.
pub(super) fn as_json(
    method: &Method,
    mut headers: HeaderMap,
    body: Bytes,
    t: &Target,
) -> Result<(HeaderMap, Bytes), Refused> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .unwrap_or_default();
    // Custom resources have no protobuf form: binary_body answers 415.
    if *method == Method::PATCH
        || t.resource.custom
        || body.is_empty()
        || !crate::protobuf::is_protobuf(content_type)
    {
        return Ok((headers, body));
    }
    let object = crate::protobuf::decode(&body).map_err(|e| {
        let msg = e.to_string();
        Box::new(status(
            400,
            "BadRequest",
            &msg,
            t.name.as_deref(),
            t.resource.plural,
        ))
    })?;
    let body = Bytes::from(serde_json::to_vec(&object).unwrap_or_default());
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    Ok((headers, body))
}

/// `answer` as the caller's `Accept` asks: protobuf when it comes first.
/// Custom resources have no protobuf form: JSON, which such clients
/// accept too (upstream answers them so).
pub(super) async fn answer_as_asked(accept: &str, t: &Target, answer: Response) -> Response {
    if crate::protobuf::preferred(accept) && !t.resource.custom {
        return crate::protobuf::answer(answer).await;
    }
    answer
}
