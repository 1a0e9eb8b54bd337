//! A request to a resource, after the caller's layer and a write's guards
//! (`guards.rs`): discovery and OpenAPI documents, then the checks a write
//! meets before any handler (a read-only kind, `dryRun`, binary bodies),
//! the reviews, admission of a create, a watch from the future, the write
//! order, and the verb.

use super::caller::Caller;
use super::{Q, Refused, Req, is_watch, is_write, ok};
use crate::store::Apply;
use crate::{ApiServer, Sub, Target, status, watch};
use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use std::sync::Arc;

pub(super) async fn resource(
    State(s): State<Arc<ApiServer>>,
    Extension(caller): Extension<Caller>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    Query(q): Query<Q>,
    body: Bytes,
) -> Response {
    let path = uri.path();
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let accept = accept.as_str();
    if method == Method::GET
        && crate::discovery::v2::asked(accept)
        && let Some(v) = crate::discovery::v2::answer(&caller.served, path)
    {
        let mut r = ok(StatusCode::OK, v);
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static(crate::discovery::v2::MEDIA_TYPE),
        );
        return r;
    }
    if method == Method::GET
        && let Some(v) = crate::discovery::answer(&caller.served, path)
            .or_else(|| crate::discovery::openapi_v3::answer(&caller.served, path))
    {
        return ok(StatusCode::OK, v);
    }
    let Some(t) = caller.target.clone() else {
        let msg = "the server could not find the requested resource";
        return status(404, "NotFound", msg, None, "");
    };
    #[cfg(feature = "conformance")]
    let (headers, body) = match super::protobuf::as_json(&method, headers, body, &t) {
        Ok(read) => read,
        Err(r) => return *r,
    };
    let answer = match serve(&s, &caller, &t, &method, path, &headers, &q, &body).await {
        Ok(r) | Err(r) => r,
    };
    #[cfg(feature = "conformance")]
    if !is_watch(&q) {
        return super::protobuf::answer_as_asked(accept, &t, answer).await;
    }
    answer
}

#[allow(clippy::too_many_arguments)]
async fn serve(
    s: &Arc<ApiServer>,
    caller: &Caller,
    t: &Target,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    q: &Q,
    body: &[u8],
) -> Result<Response, Response> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|c| c.to_str().ok())
        .unwrap_or_default();
    if t.resource.read_only && is_write(method) {
        return Err(not_allowed(method, path, t.name.as_deref(), t));
    }
    let how = if is_write(method) {
        let how = dry_run(q, true, t).map_err(|r| *r)?;
        binary_body(content_type, t).map_err(|r| *r)?;
        how
    } else {
        dry_run(q, false, t).map_err(|r| *r)?
    };
    if t.resource.review {
        return Ok(match (method, &t.name) {
            (&Method::POST, None) => crate::auth::reviews::answer(s, t, body),
            (m, name) => not_allowed(m, path, name.as_deref(), t),
        });
    }
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .unwrap_or_default();
    let table = accept.contains("as=Table");
    let metadata = crate::partial::asked(accept);
    let manager = crate::patch::managed::manager_of(
        q.get("fieldManager").map(String::as_str),
        &caller.user_agent,
    );
    let req = Req {
        s,
        t,
        q,
        user: &caller.user,
        user_agent: &caller.user_agent,
        verb: if *method == Method::PATCH {
            "patch"
        } else {
            "update"
        },
        manager: &manager,
        served: &caller.served,
        how,
    };
    // A create passes the namespace's lifecycle and the mutating webhooks
    // first, outside the write order (a webhook takes its time).
    let created = match (method, &t.name) {
        (&Method::POST, None) => Some(req.admitted(body).await.map_err(|r| *r)?),
        _ => None,
    };
    // A watch from a version the store has not reached waits for it a
    // little, then is answered 504, as kube-apiserver answers.
    let watching = *method == Method::GET && t.name.is_none() && is_watch(q);
    let from = q.get("resourceVersion").and_then(|r| r.parse::<u64>().ok());
    if let Some(rv) = from.filter(|rv| watching && *rv > s.store.resource_version()) {
        watch::reach(s, rv, t.resource.plural).await?;
    }
    // Writes are applied and logged one at a time, so that the log's
    // order is the order in which they took effect.
    let in_order =
        is_write(method).then(|| s.write_order.lock().unwrap_or_else(|e| e.into_inner()));
    if watching {
        let shape = watch::Shape { table, metadata };
        return Ok(watch::watch(
            s.clone(),
            t.clone(),
            q.clone(),
            shape,
            &caller.user,
        ));
    }
    let answer = match (method, t.name.as_deref()) {
        (m, Some(n)) if t.sub.is_some_and(|s| s != Sub::Status) => req
            .subresource(m, n, content_type, body)
            .unwrap_or_else(|| not_allowed(m, path, Some(n), t)),
        (&Method::GET, None) => req.list(table),
        (&Method::GET, Some(n)) => req.get(n, table),
        (&Method::POST, None) => match created {
            Some(obj) => req.create(obj, false),
            None => status(
                500,
                "InternalError",
                "a create without its object",
                None,
                "",
            ),
        },
        (&Method::PUT, Some(n)) => req.update(n, body),
        (&Method::PATCH, Some(n)) => req.patch(n, content_type, body),
        (&Method::DELETE, Some(n)) => req.delete(n, body),
        (&Method::DELETE, None) if t.sub.is_none() => req.delete_collection(body),
        (m, name) => not_allowed(m, path, name, t),
    };
    // The write is applied and logged: the order is free for the next.
    drop(in_order);
    Ok(if metadata {
        crate::partial::answer(answer).await
    } else {
        answer
    })
}

/// `dryRun`: absent, or `All` on a write.
fn dry_run(q: &Q, write: bool, t: &Target) -> Result<Apply, Refused> {
    match q.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(Apply::Commit),
        Some("All") if write => Ok(Apply::DryRun),
        Some(v) => {
            let msg = format!("dryRun: Unsupported value: {v:?}: supported values: \"All\"");
            Err(Box::new(status(
                422,
                "Invalid",
                &msg,
                t.name.as_deref(),
                t.resource.plural,
            )))
        }
    }
}

/// A protobuf patch and CBOR bodies are refused with 415 (a protobuf
/// object was read as JSON before, with the `conformance` feature; every
/// protobuf body without it), as a server that lacks them answers.
/// client-go falls back to JSON from CBOR; its typed clients' protobuf
/// does not fall back.
fn binary_body(content_type: &str, t: &Target) -> Result<(), Refused> {
    if !(content_type.contains("protobuf") || content_type.contains("cbor")) {
        return Ok(());
    }
    let msg = format!(
        "the body of the request was in an unknown format - accepted media types include: application/json, application/merge-patch+json, application/json-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {content_type})"
    );
    Err(Box::new(status(
        415,
        "UnsupportedMediaType",
        &msg,
        t.name.as_deref(),
        t.resource.plural,
    )))
}

pub(super) fn not_allowed(m: &Method, path: &str, name: Option<&str>, t: &Target) -> Response {
    let msg = format!("{m} is not supported on {path}");
    status(405, "MethodNotAllowed", &msg, name, t.resource.plural)
}
