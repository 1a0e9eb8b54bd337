//! Snapshots for `plan`: multi-document YAML (or a `List`) of the kinds the
//! controller reads. An error names the file and the document.

use gpu_claims_actors::api::DecodeError;
use gpu_claims_actors::api::validation::{is_dns_label, is_dns_subdomain};
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
    /// Too large, or two objects with one name.
    #[error("snapshot {path}: {source}")]
    Invalid {
        path: String,
        #[source]
        source: Box<ParseError>,
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
    /// Not a name Kubernetes accepts (the API server answers 422).
    #[error("{kind} {name:?}: not a valid name")]
    BadName { kind: &'static str, name: String },
    #[error("a List's items must be a list")]
    ListItems,
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
    /// Past what plan reads in one file (`LIMITS`).
    #[error(
        "larger than plan reads at once ({0}); plan takes a cluster's dump of up to \
         {MAX_DOCUMENTS} documents, or a List of any length up to {MAX_NODES} YAML nodes: \
         dump it as one List (kubectl get ... -o yaml), or split it"
    )]
    TooLarge(String),
    #[error("document {doc}: {source}")]
    Object { doc: usize, source: ObjectError },
    /// Two objects of one kind with one name: a cluster cannot hold both.
    #[error(
        "document {doc}: {kind} {name} is there already (document {first}); names are unique per kind"
    )]
    Duplicate {
        doc: usize,
        first: usize,
        kind: &'static str,
        name: String,
    },
}

/// The most documents a snapshot may hold, and YAML nodes in all: room
/// for a large cluster's dump (15,000 nodes, 100,000 claims with their
/// VMIs and pods) and no more, so a runaway file is refused, not read
/// until memory runs out.
pub const MAX_DOCUMENTS: usize = 2_000_000;
pub const MAX_NODES: usize = 200_000_000;

fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        budget: serde_saphyr::budget! {
            max_documents: MAX_DOCUMENTS,
            max_nodes: MAX_NODES,
            max_events: 2 * MAX_NODES,
            max_total_scalar_bytes: 4 << 30,
        },
    }
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
        e => SnapshotError::Invalid {
            path: shown,
            source: Box::new(e),
        },
    })
}

/// Parses snapshot text.
pub fn parse(text: &str) -> Result<Vec<Obj>, ParseError> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple_with_options(text, options()).map_err(|e| match e {
            serde_saphyr::Error::Budget { breach, .. } => {
                ParseError::TooLarge(format!("{breach:?}"))
            }
            e => ParseError::Yaml(Box::new(e)),
        })?;
    let mut objs = Vec::new();
    let mut seen: std::collections::HashMap<gpu_claims_actors::ports::ObjRef, usize> =
        Default::default();
    for (i, v) in docs.into_iter().enumerate() {
        let doc = i + 1;
        let items = if v["kind"] == "List" {
            match v.get("items") {
                Some(Value::Array(items)) => items.clone(),
                None | Some(Value::Null) => Vec::new(),
                Some(_) => {
                    return Err(ParseError::Object {
                        doc,
                        source: ObjectError::ListItems,
                    });
                }
            }
        } else {
            vec![v]
        };
        for item in items {
            let o = object(item).map_err(|source| ParseError::Object { doc, source })?;
            let r = o.obj_ref();
            if let Some(first) = seen.insert(r.clone(), doc) {
                return Err(ParseError::Duplicate {
                    doc,
                    first,
                    kind: r.kind.name(),
                    name: match &r.namespace {
                        Some(ns) => format!("{ns}/{}", r.name),
                        None => r.name.clone(),
                    },
                });
            }
            objs.push(o);
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
    let shown = |n: &str| n.chars().take(80).collect::<String>();
    if !is_dns_subdomain(&name) {
        return Err(ObjectError::BadName {
            kind: k,
            name: shown(&name),
        });
    }
    if kind.namespaced() {
        let Some(ns) = v["metadata"]["namespace"].as_str() else {
            return Err(ObjectError::NoNamespace { kind: k, name });
        };
        if !is_dns_label(ns) {
            return Err(ObjectError::BadName {
                kind: "Namespace",
                name: shown(ns),
            });
        }
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
