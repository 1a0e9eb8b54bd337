//! Kubernetes' protobuf wire format (`application/vnd.kubernetes.protobuf`)
//! for the built-in kinds served: what kubectl's typed commands (`kubectl
//! create namespace|configmap|deployment`, `drain`) and client-go's
//! clientsets send, and answers in it to a client that prefers it.
//!
//! A body is `k8s\0` and a `runtime.Unknown` whose `typeMeta` names the
//! kind and whose `raw` is the object's message (apimachinery's
//! `runtime/serializer/protobuf`). It is turned into the JSON the store
//! keeps with the descriptors build.rs compiles from the vendored protos,
//! Kubernetes' own types (Quantity, Time, IntOrString, RawExtension, ...)
//! spelled as their JSON is. Custom resources have no protobuf form,
//! upstream as here: a client sends them as JSON.

mod from_json;
mod tables;
mod to_json;

use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use prost_reflect::prost::Message;
use prost_reflect::{DynamicMessage, Value as Pb};
use serde_json::{Map, Value};

pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// What every protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";

#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    #[error("the body does not start with Kubernetes' protobuf prefix k8s\\0")]
    NoPrefix,
    #[error("the body is not a runtime.Unknown: {0}")]
    Envelope(prost_reflect::prost::DecodeError),
    #[error("the body's contentEncoding {0:?} is not supported")]
    Encoding(String),
    #[error("no kind {kind:?} is registered for version {api_version:?} in protobuf")]
    NoSuchKind { api_version: String, kind: String },
    #[error("the body is not a valid {kind}: {source}")]
    Object {
        kind: String,
        source: prost_reflect::prost::DecodeError,
    },
}

/// A `Content-Type` (or one `Accept` entry) that is this format, not its
/// watch stream.
pub fn is_protobuf(media_type: &str) -> bool {
    let mut parts = media_type.split(';').map(str::trim);
    parts.next() == Some(MEDIA_TYPE) && parts.all(|p| !p.starts_with("stream="))
}

/// Whether an `Accept` header asks for protobuf before anything the server
/// answers otherwise (JSON, YAML, `*/*`): client-go's protobuf clients
/// send `application/vnd.kubernetes.protobuf, application/json`.
pub fn preferred(accept: &str) -> bool {
    accept
        .split(',')
        .map(str::trim)
        .find(|a| !a.is_empty())
        .is_some_and(is_protobuf)
}

/// A protobuf body as the JSON object it stands for.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let t = tables::tables();
    let inner = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoPrefix)?;
    let unknown = DynamicMessage::decode(descriptor(tables::UNKNOWN), inner)
        .map_err(ProtobufError::Envelope)?;
    let text = |m: &DynamicMessage, name: &str| {
        m.get_field_by_name(name)
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let encoding = text(&unknown, "contentEncoding");
    if !encoding.is_empty() {
        return Err(ProtobufError::Encoding(encoding));
    }
    let type_meta = match unknown.get_field_by_name("typeMeta").as_deref() {
        Some(Pb::Message(m)) => m.clone(),
        _ => DynamicMessage::new(descriptor("apimachinery.pkg.runtime.TypeMeta")),
    };
    let (api_version, kind) = (text(&type_meta, "apiVersion"), text(&type_meta, "kind"));
    let Some(d) = t.message(&api_version, &kind) else {
        return Err(ProtobufError::NoSuchKind { api_version, kind });
    };
    let raw = match unknown.get_field_by_name("raw").as_deref() {
        Some(Pb::Bytes(b)) => b.clone(),
        _ => Default::default(),
    };
    let object = DynamicMessage::decode(d, raw).map_err(|source| ProtobufError::Object {
        kind: kind.clone(),
        source,
    })?;
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::String(api_version));
    out.insert("kind".into(), Value::String(kind));
    if let Value::Object(fields) = to_json::message(t, &object) {
        out.extend(fields);
    }
    Ok(Value::Object(out))
}

/// A JSON object (or list, or Status) as its protobuf body; `None` for a
/// kind with no protobuf form (a custom resource, a Table).
pub fn encode(v: &Value) -> Option<Vec<u8>> {
    let t = tables::tables();
    let (api_version, kind) = (v["apiVersion"].as_str()?, v["kind"].as_str()?);
    let d = t.message(api_version, kind)?;
    let raw = from_json::message(t, &d, v).encode_to_vec();
    let mut type_meta = DynamicMessage::new(descriptor("apimachinery.pkg.runtime.TypeMeta"));
    type_meta.set_field_by_name("apiVersion", Pb::String(api_version.into()));
    type_meta.set_field_by_name("kind", Pb::String(kind.into()));
    let mut unknown = DynamicMessage::new(descriptor(tables::UNKNOWN));
    unknown.set_field_by_name("typeMeta", Pb::Message(type_meta));
    unknown.set_field_by_name("raw", Pb::Bytes(raw.into()));
    unknown.set_field_by_name("contentEncoding", Pb::String(String::new()));
    unknown.set_field_by_name("contentType", Pb::String(String::new()));
    let mut out = MAGIC.to_vec();
    out.extend(unknown.encode_to_vec());
    Some(out)
}

/// An answer in JSON re-spelled in protobuf, for a client that prefers it;
/// one with no protobuf form stays JSON, which such clients accept too.
pub async fn answer(r: Response) -> Response {
    let json = r
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|c| c.as_bytes().starts_with(b"application/json"));
    if !json {
        return r;
    }
    let (mut parts, body) = r.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let encoded = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| encode(&v));
    let Some(out) = encoded else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    Response::from_parts(parts, Body::from(out))
}

fn descriptor(name: &str) -> prost_reflect::MessageDescriptor {
    tables::tables()
        .pool
        .get_message_by_name(name)
        .unwrap_or_else(|| panic!("the vendored protos define {name}"))
}

#[cfg(test)]
mod tests;
