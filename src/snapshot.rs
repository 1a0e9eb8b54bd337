//! Snapshots for `plan`: multi-document YAML (or a `List`) of the kinds the
//! controller reads. An error names the file and the document.

use gpu_claims_actors::api::DecodeError;
use gpu_claims_actors::ports::{Kind, Obj};
use serde_json::Value;
use std::path::Path;

/// Why a snapshot cannot be read: it names the file, and the document.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("snapshot {path}: {source}")]
    Yaml {
        path: String,
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    #[error("snapshot {path}, document {doc}: {source}")]
    Object {
        path: String,
        /// 1-based.
        doc: usize,
        #[source]
        source: ObjectError,
    },
}

/// What is wrong with one object of a snapshot.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ObjectError {
    #[error("no kind")]
    NoKind,
    #[error("kind {0} is not one plan reads")]
    Unknown(String),
    #[error("{kind} without metadata.name")]
    NoName { kind: &'static str },
    #[error("{kind} {name} without metadata.namespace")]
    NoNamespace { kind: &'static str, name: String },
    #[error("{kind} {name}: {source}")]
    Decode {
        kind: &'static str,
        name: String,
        #[source]
        source: DecodeError,
    },
    /// What the CRD's schema refuses (the API server answers 422).
    #[error("{kind} {name}: {problem}")]
    Refused {
        kind: &'static str,
        name: String,
        problem: String,
    },
}

/// Text that is not a snapshot, before a file is named.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error(transparent)]
    Yaml(#[from] Box<serde_saphyr::Error>),
    #[error("document {doc}: {source}")]
    Object { doc: usize, source: ObjectError },
}

/// The objects of a snapshot file.
pub fn load(path: &Path) -> Result<Vec<Obj>, SnapshotError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| SnapshotError::Read {
        path: shown.clone(),
        source,
    })?;
    parse(&text).map_err(|e| match e {
        ParseError::Yaml(source) => SnapshotError::Yaml {
            path: shown,
            source,
        },
        ParseError::Object { doc, source } => SnapshotError::Object {
            path: shown,
            doc,
            source,
        },
    })
}

/// Parses snapshot text.
pub fn parse(text: &str) -> Result<Vec<Obj>, ParseError> {
    let docs: Vec<Value> = crate::yaml::documents(text).map_err(Box::new)?;
    let mut objs = Vec::new();
    for (i, v) in docs.into_iter().enumerate() {
        let doc = i + 1;
        let items = if v["kind"] == "List" {
            v["items"].as_array().cloned().unwrap_or_default()
        } else {
            vec![v]
        };
        for item in items {
            objs.push(object(item).map_err(|source| ParseError::Object { doc, source })?);
        }
    }
    Ok(objs)
}

fn object(v: Value) -> Result<Obj, ObjectError> {
    let kind_name = v["kind"].as_str().ok_or(ObjectError::NoKind)?;
    let kind = Kind::from_name(kind_name).ok_or_else(|| ObjectError::Unknown(kind_name.into()))?;
    let k = kind.name();
    let name = v["metadata"]["name"]
        .as_str()
        .ok_or(ObjectError::NoName { kind: k })?
        .to_string();
    if kind.namespaced() && v["metadata"]["namespace"].as_str().is_none() {
        return Err(ObjectError::NoNamespace { kind: k, name });
    }
    let obj = gpu_claims_actors::api::from_json(kind, v).map_err(|source| ObjectError::Decode {
        kind: k,
        name: name.clone(),
        source,
    })?;
    // What the API server would refuse cannot be in a cluster.
    if let Obj::Claim(c) = &obj
        && let Some(problem) = c.spec_problem()
    {
        return Err(ObjectError::Refused {
            kind: k,
            name,
            problem,
        });
    }
    Ok(obj)
}
