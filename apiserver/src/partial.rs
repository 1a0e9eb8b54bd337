//! Metadata-only answers (`Accept: application/json;as=PartialObjectMetadata;
//! g=meta.k8s.io;v=v1`, and `...List` for lists), what metadata-only
//! informers ask for (kube-runtime's `metadata_watcher`, client-go's
//! metadata client): each object as `meta.k8s.io/v1`
//! `PartialObjectMetadata`, its metadata alone; a list as
//! `PartialObjectMetadataList`. Any verb that answers an object answers it
//! so (GET, LIST, WATCH, and writes: kube-rs's `patch_metadata`).

use axum::body::Body;
use axum::response::Response;
use serde_json::{Value, json};

const API_VERSION: &str = "meta.k8s.io/v1";

/// Whether the caller asked for metadata only. A `Table` asked for first
/// (kubectl's Accept) is answered as one instead.
pub fn asked(accept: &str) -> bool {
    !accept.contains("as=Table") && accept.contains("as=PartialObjectMetadata")
}

/// One object's metadata, as `PartialObjectMetadata`.
pub fn object(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": API_VERSION, "metadata": obj["metadata"]})
}

/// An answer's body, shaped: a list's items each as metadata, an object
/// as its metadata; a Status (an error, a delete's) as it is.
fn shaped(v: Value) -> Value {
    let list = v["kind"].as_str().is_some_and(|k| k.ends_with("List"));
    match v["items"].as_array() {
        Some(items) if list => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": API_VERSION,
            "metadata": v["metadata"],
            "items": items.iter().map(object).collect::<Vec<_>>(),
        }),
        _ if v["kind"] == "Status" || v.get("metadata").is_none() => v,
        _ => object(&v),
    }
}

/// A whole answer, shaped when it succeeded with a JSON body.
pub async fn answer(r: Response) -> Response {
    if !r.status().is_success() {
        return r;
    }
    let (mut parts, body) = r.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(v) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let out = serde_json::to_vec(&shaped(v)).unwrap_or_default();
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_and_lists_answer_their_metadata_alone_and_statuses_as_they_are() {
        let pod = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {}});
        assert_eq!(
            shaped(pod.clone()),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "p", "labels": {"a": "b"}}})
        );
        let list = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": [pod]});
        let l = shaped(list);
        assert_eq!(
            (
                l["kind"].as_str(),
                l["metadata"]["resourceVersion"].as_str()
            ),
            (Some("PartialObjectMetadataList"), Some("7"))
        );
        assert_eq!(l["items"][0]["kind"], "PartialObjectMetadata");
        let status =
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"});
        assert_eq!(shaped(status.clone()), status);
        assert!(asked(
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        ));
        assert!(!asked(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=PartialObjectMetadata"
        ));
        assert!(!asked("application/json"));
    }
}
