//! Snapshots for `plan`: multi-document YAML (or a `List`) of the kinds the
//! controller reads. An error names the file and the document.

use gpu_claims_actors::api::DecodeError;
use gpu_claims_actors::api::validation::{is_dns_label, is_dns_subdomain};
use gpu_claims_actors::ports::{Kind, Obj};
use serde_json::Value;
use std::path::Path;

mod json_list;

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
    /// A JSON snapshot that does not parse.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
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
/// The most bytes a snapshot file may hold (a dump of 1,000,000 kubelet
/// nodes is about 6 GB of YAML).
pub const MAX_BYTES: usize = 16 << 30;

fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        budget: serde_saphyr::budget! {
            max_documents: MAX_DOCUMENTS,
            max_nodes: MAX_NODES,
            max_events: 2 * MAX_NODES,
            max_total_scalar_bytes: MAX_BYTES,
            // The file is read as a stream, never held whole.
            max_reader_input_bytes: Some(MAX_BYTES),
        },
    }
}

/// The objects of a snapshot file.
pub fn load(path: &Path) -> Result<Vec<Obj>, SnapshotError> {
    let mut objs = Vec::new();
    load_each(path, |o| objs.push(o))?;
    Ok(objs)
}

/// Hands each object of a snapshot file to `each`, read a document at a
/// time: a cluster's dump is never held whole, as text or as a tree
/// (50,000 pods peaked at gigabytes so), and each object is kept as the
/// controller reads it (`slim`). On an error, what was handed before it
/// is no snapshot: the caller drops it.
pub fn load_each(path: &Path, each: impl FnMut(Obj)) -> Result<(), SnapshotError> {
    let shown = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| SnapshotError::Read {
        path: shown.clone(),
        source,
    })?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let read = if starts_json(&mut reader) {
        json_document(reader, each)
    } else {
        let docs = serde_saphyr::read_with_options::<_, Value>(&mut reader, options());
        objects(docs, each)
    };
    read.map_err(|e| match e {
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
    let mut reader = text.as_bytes();
    let mut objs = Vec::new();
    let docs = serde_saphyr::read_with_options::<_, Value>(&mut reader, options());
    objects(docs, |o| objs.push(o))?;
    Ok(objs)
}

/// Whether the file is JSON (its first character, past white space, opens
/// an object): `kubectl get ... -o json` writes one List, streamed.
fn starts_json(reader: &mut impl std::io::BufRead) -> bool {
    reader.fill_buf().is_ok_and(|b| {
        b.iter()
            .find(|c| !c.is_ascii_whitespace())
            .is_some_and(|c| *c == b'{')
    })
}

/// A JSON snapshot: one document, a List's items each turned into its
/// object as it is parsed (the List is never a tree of every item).
fn json_document(reader: impl std::io::Read, each: impl FnMut(Obj)) -> Result<(), ParseError> {
    let mut items = Items::new(each);
    let read = {
        let mut item = |v: Value| items.item(1, v);
        json_list::read(reader, &mut item)
    };
    let (rest, listed) = match read {
        Ok(doc) => doc,
        Err(json_list::Stopped::Item(e)) => return Err(e),
        Err(json_list::Stopped::Json(e)) => return Err(ParseError::Json(e)),
    };
    let kind = rest.get("kind").and_then(Value::as_str).unwrap_or_default();
    match listed {
        // Items of a document that is no List: what was handed on is
        // dropped with the error.
        Some(_) if kind != "List" => Err(ParseError::Object {
            doc: 1,
            source: ObjectError::Unknown(kind.to_string()),
        }),
        Some(_) => Ok(()),
        None if kind == "List" => Ok(()),
        None => items.item(1, Value::Object(rest)),
    }
}

/// Objects handed on as they are read, each name once.
struct Items<F> {
    seen: std::collections::HashMap<gpu_claims_actors::ports::ObjRef, usize>,
    each: F,
}

impl<F: FnMut(Obj)> Items<F> {
    fn new(each: F) -> Self {
        Self {
            seen: Default::default(),
            each,
        }
    }

    /// One item of document `doc`, turned into its object.
    fn item(&mut self, doc: usize, item: Value) -> Result<(), ParseError> {
        let o = object(item).map_err(|source| ParseError::Object { doc, source })?;
        let r = o.obj_ref();
        if let Some(first) = self.seen.insert(r.clone(), doc) {
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
        (self.each)(slim(o));
        Ok(())
    }
}

/// The objects of a stream of documents, each turned into its object (and
/// dropped as a tree) before the next is read.
fn objects(
    docs: impl Iterator<Item = Result<Value, serde_saphyr::Error>>,
    each: impl FnMut(Obj),
) -> Result<(), ParseError> {
    let mut items = Items::new(each);
    for (i, v) in docs.enumerate() {
        let v = v.map_err(|e| match e {
            serde_saphyr::Error::Budget { breach, .. } => {
                ParseError::TooLarge(format!("{breach:?}"))
            }
            e => ParseError::Yaml(Box::new(e)),
        })?;
        let doc = i + 1;
        let mut v = v;
        let list = if v["kind"] == "List" {
            match v.get_mut("items") {
                Some(Value::Array(items)) => std::mem::take(items),
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
        for item in list {
            items.item(doc, item)?;
        }
    }
    Ok(())
}

/// An object as the controller reads it: a pod outside gpu-claims
/// (`slim_pod`) and a node (`slim_node`) keep what the controller reads
/// and `plan`'s state shows, every other kind is kept whole. A cluster's
/// dump is mostly pods and nodes, and mostly bytes nothing reads: so
/// `plan` reads one at about the controller's own cost per object.
fn slim(o: Obj) -> Obj {
    match o {
        Obj::Pod(p) => slim_pod(p),
        Obj::Node(n) => Obj::Node(slim_node(n)),
        o => o,
    }
}

/// A node as the controller reads it (`NodeFacts`): its name, labels and
/// deletion, whether it is cordoned and its taints, its allocatable and
/// its Ready condition's status. A kubelet's node also lists every
/// image it holds, its addresses, capacity and system info: most of its
/// bytes, none of them read.
fn slim_node(n: k8s_openapi::api::core::v1::Node) -> k8s_openapi::api::core::v1::Node {
    use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    let m = n.metadata;
    Node {
        metadata: ObjectMeta {
            name: m.name,
            uid: m.uid,
            labels: m.labels,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            ..Default::default()
        },
        spec: n.spec.map(|s| NodeSpec {
            unschedulable: s.unschedulable,
            taints: s.taints,
            ..Default::default()
        }),
        status: n.status.map(|s| NodeStatus {
            allocatable: s.allocatable,
            // Ready is the one condition the controller reads.
            conditions: s.conditions.map(|cs| {
                cs.into_iter()
                    .filter(|c| c.type_ == "Ready")
                    .map(|c| NodeCondition {
                        type_: c.type_,
                        status: c.status,
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        }),
    }
}

/// A pod as the controller reads it, unless it is a launcher pod (those it
/// writes, so they stay whole). Of a pod outside gpu-claims the controller
/// reads only where it is bound, whether it has finished, and what it
/// requests (docs/design.md, G3: capacity as the node has it): it keeps that, each
/// container's requests as the API server defaults them (a limit without
/// a request requests its limit), and its name, finalizers and deletion
/// for `plan`'s state. Images, environments, volumes, probes, labels and
/// statuses are nearly all of a pod's bytes and change nothing the
/// controller decides.
fn slim_pod(p: k8s_openapi::api::core::v1::Pod) -> Obj {
    use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    if gpu_claims_actors::api::LauncherPod::from_pod(&p).is_some() {
        return Obj::Pod(p);
    }
    let container = |c: Container| {
        let requests = c.resources.and_then(|r| {
            let mut req = r.limits.unwrap_or_default();
            req.extend(r.requests.unwrap_or_default());
            (!req.is_empty()).then_some(req)
        });
        Container {
            name: c.name,
            resources: requests.map(|r| ResourceRequirements {
                requests: Some(r),
                ..Default::default()
            }),
            restart_policy: c.restart_policy,
            ..Default::default()
        }
    };
    let spec = p.spec.map(|s| PodSpec {
        node_name: s.node_name,
        scheduling_gates: s.scheduling_gates,
        containers: s.containers.into_iter().map(container).collect(),
        init_containers: s
            .init_containers
            .map(|cs| cs.into_iter().map(container).collect()),
        overhead: s.overhead,
        resources: s.resources,
        ..Default::default()
    });
    let m = p.metadata;
    Obj::Pod(Pod {
        metadata: ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            ..Default::default()
        },
        spec,
        status: p.status.map(|s| PodStatus {
            phase: s.phase,
            ..Default::default()
        }),
    })
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

#[cfg(test)]
mod tests;
