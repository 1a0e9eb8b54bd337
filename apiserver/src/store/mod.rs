//! Object storage with the API server's write semantics, on JSON objects:
//! resourceVersions and 409 on a stale one, uid and creationTimestamp,
//! finalizers and deletionTimestamp (an object goes when its last
//! finalizer does), delete preconditions, a status subresource, and
//! no new resourceVersion for an update that changes nothing. Every change
//! is published to watchers in order. Kinds are plain names, so any
//! resource can be stored (the embedded API server stores more than the
//! controller reads).

use serde_json::{Value, json};

mod history;

/// Changes a watch over HTTP may have waiting before it is closed.
pub const WATCH_BUFFER: usize = 4096;
/// Bytes of changed objects (as JSON) a watch over HTTP may have waiting
/// before it is closed: a watcher that never reads holds no more, however
/// large the objects. The events themselves are shared (with the history
/// and every other watch), not copied per watch.
pub const WATCH_QUEUE_BYTES: usize = 16 << 20;

/// Who gets the store's changes: the server's own loops (every change,
/// however far behind), or a watch over HTTP (bounded).
enum Subscriber {
    All(mpsc::UnboundedSender<StoreEvent>),
    Bounded(history::WatchTx),
}
mod write;

pub use history::{Gone, HISTORY, HISTORY_BYTES, HistoryLimits, WatchRx};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
pub use write::Apply;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change, as a watch shows it.
#[derive(Clone, Debug)]
pub struct StoreEvent {
    pub kind: String,
    pub type_: EventType,
    pub object: Value,
    /// The object before the change (a modification or a deletion), so
    /// that a watch with a selector can tell an object that stopped
    /// matching (DELETED) or started (ADDED), as the API server does.
    pub prev: Option<Value>,
    pub resource_version: u64,
}

/// Why an update with a stale resourceVersion is refused, in
/// kube-apiserver's words (`registry/generic/registry/store.go`).
pub const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum StoreError {
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// Why (the object's name is the caller's: the answer words both).
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("invalid: {0}")]
    Invalid(String),
    /// Larger than etcd stores (its `--max-request-bytes`, 1.5 MiB):
    /// kube-apiserver passes etcd's words on as a 500 with no reason.
    #[error("etcdserver: request is too large")]
    TooLarge,
}

/// etcd's default `--max-request-bytes`: the largest object it stores.
pub const MAX_OBJECT_BYTES: usize = 3 << 19;

/// The bytes of `v` as JSON: what the history counts, and etcd's bound
/// is judged by first.
pub(crate) fn json_len(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(usize::MAX, |b| b.len())
}

/// Whether etcd would refuse `obj`, whose JSON is `json` bytes: its size
/// as stored there, a built-in kind's protobuf (computed only when its
/// JSON is past the bound: JSON is the larger), a custom resource's JSON.
#[cfg(feature = "conformance")]
pub(crate) fn too_large_for_etcd(obj: &Value, json: usize) -> bool {
    json > MAX_OBJECT_BYTES
        && crate::protobuf::encode(obj).is_none_or(|b| b.len() > MAX_OBJECT_BYTES)
}

/// Without protobuf (the `conformance` feature) every object is judged by
/// its JSON, the larger form: a built-in object between the two bounds is
/// refused here where etcd would take it, never the other way round.
#[cfg(not(feature = "conformance"))]
pub(crate) fn too_large_for_etcd(_obj: &Value, json: usize) -> bool {
    json > MAX_OBJECT_BYTES
}

/// Which part of an object an update writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    Main,
    Status,
}

/// What a write did: the object after it, and whether anything changed.
#[derive(Clone, Debug)]
pub struct Written {
    pub object: Value,
    pub changed: bool,
    /// The object is gone (deleted, or its last finalizer removed while deleting).
    pub removed: bool,
}

impl Written {
    pub(crate) fn changed(object: Value) -> Self {
        Self::changed_or_removed(object, false)
    }
    pub(crate) fn unchanged(object: Value) -> Self {
        Self {
            object,
            changed: false,
            removed: false,
        }
    }
    pub(crate) fn removed(object: Value) -> Self {
        Self::changed_or_removed(object, true)
    }
    pub(crate) fn changed_or_removed(object: Value, removed: bool) -> Self {
        Self {
            object,
            changed: true,
            removed,
        }
    }
}

type Key = (String, String, String);

struct Inner {
    objects: BTreeMap<Key, Value>,
    rv: u64,
    uids: u64,
    watchers: Vec<Subscriber>,
    /// Recent changes, so a watch can start from a resourceVersion, and
    /// the bytes of their objects (as JSON).
    history: std::collections::VecDeque<(Arc<StoreEvent>, usize)>,
    history_bytes: usize,
    limits: HistoryLimits,
}

/// Wall time for timestamps; plan uses a simulated one.
pub type WallClock = Arc<dyn Fn() -> k8s_openapi::jiff::Timestamp + Send + Sync>;

pub struct Store {
    inner: Mutex<Inner>,
    wall: WallClock,
    /// Kinds with a status subresource: main updates keep status, status updates keep the rest.
    /// Kinds served with a status subresource (a CRD may add one).
    with_status: std::sync::RwLock<Vec<String>>,
    /// Kinds without `metadata.generation` (built-ins like Node or Lease).
    without_generation: Vec<String>,
}

fn meta(o: &Value) -> &Value {
    &o["metadata"]
}

fn meta_str<'a>(o: &'a Value, field: &str) -> &'a str {
    meta(o)[field].as_str().unwrap_or_default()
}

fn finalizers(o: &Value) -> Vec<String> {
    meta(o)["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn set_meta(o: &mut Value, field: &str, v: Value) {
    if !o["metadata"].is_object() {
        o["metadata"] = json!({});
    }
    o["metadata"][field] = v;
}

impl Store {
    pub fn new(wall: WallClock, with_status: &[&str]) -> Self {
        let inner = Inner {
            objects: BTreeMap::new(),
            rv: 0,
            uids: 0,
            watchers: Vec::new(),
            history: Default::default(),
            history_bytes: 0,
            limits: HistoryLimits::default(),
        };
        Self {
            inner: Mutex::new(inner),
            wall,
            with_status: std::sync::RwLock::new(
                with_status.iter().map(|s| s.to_string()).collect(),
            ),
            without_generation: Vec::new(),
        }
    }

    /// Kinds whose objects carry no `metadata.generation`; every other
    /// kind's starts at 1 and grows with each change of its spec.
    pub fn without_generation(mut self, kinds: &[&str]) -> Self {
        self.without_generation = kinds.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Serves `kind` with a status subresource (or not) from now on: what
    /// a CustomResourceDefinition's `subresources.status` says.
    pub fn set_status_subresource(&self, kind: &str, on: bool) {
        let mut kinds = self.with_status.write().unwrap_or_else(|e| e.into_inner());
        kinds.retain(|k| k != kind);
        if on {
            kinds.push(kind.to_string());
        }
    }

    fn has_generation(&self, kind: &str) -> bool {
        !self.without_generation.iter().any(|k| k == kind)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Now, on the server's wall clock (a test's, where it sets one).
    pub fn wall_now(&self) -> k8s_openapi::jiff::Timestamp {
        (self.wall)()
    }

    /// Now as the API writes a time (RFC 3339, seconds).
    pub(crate) fn now(&self) -> String {
        self.wall_now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    }

    fn has_status(&self, kind: &str) -> bool {
        self.with_status
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|k| k == kind)
    }

    /// The current resourceVersion of the whole store.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    pub fn get(&self, kind: &str, ns: &str, name: &str) -> Option<Value> {
        self.lock()
            .objects
            .get(&(kind.into(), ns.into(), name.into()))
            .cloned()
    }

    /// All objects of a kind and the store's resourceVersion they are current at.
    pub fn list(&self, kind: &str) -> (Vec<Value>, u64) {
        let (objs, _, rv) = self.list_page(kind, None, None, usize::MAX, |_| true);
        (objs, rv)
    }

    /// A page of a kind's objects in (namespace, name) order: those in
    /// `namespace` (all when None) after `after`, that `keep` accepts, at
    /// most `limit` of them; whether more follow; the store's version.
    /// O(page), not O(store): the keys are ordered by kind first.
    pub fn list_page(
        &self,
        kind: &str,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
        limit: usize,
        keep: impl Fn(&Value) -> bool,
    ) -> (Vec<Value>, bool, u64) {
        use std::ops::Bound;
        let g = self.lock();
        let start = match after {
            Some((ns, name)) => {
                Bound::Excluded((kind.to_string(), ns.to_string(), name.to_string()))
            }
            None => Bound::Included((
                kind.to_string(),
                namespace.unwrap_or_default().to_string(),
                String::new(),
            )),
        };
        let mut out = Vec::new();
        let mut more = false;
        for ((k, ns, _), v) in g.objects.range((start, Bound::Unbounded)) {
            if k != kind || namespace.is_some_and(|n| n != ns) {
                break;
            }
            if !keep(v) {
                continue;
            }
            if out.len() == limit {
                more = true;
                break;
            }
            out.push(v.clone());
        }
        (out, more, g.rv)
    }

    /// Puts an object as it is (a snapshot's time 0), keeping its uid and
    /// status; assigns what it lacks. Publishes it as Added.
    pub fn seed(&self, kind: &str, obj: Value) -> Value {
        let mut obj = strip_nulls(obj);
        let mut g = self.lock();
        g.rv += 1;
        if meta_str(&obj, "uid").is_empty() {
            g.uids += 1;
            set_meta(&mut obj, "uid", json!(uid(g.uids)));
        }
        if meta_str(&obj, "creationTimestamp").is_empty() {
            set_meta(&mut obj, "creationTimestamp", json!(self.now()));
        }
        set_meta(&mut obj, "resourceVersion", json!(g.rv.to_string()));
        let k = (
            kind.to_string(),
            meta_str(&obj, "namespace").to_string(),
            meta_str(&obj, "name").to_string(),
        );
        g.objects.insert(k, obj.clone());
        Self::publish(&mut g, kind, EventType::Added, &obj, None);
        obj
    }
}

/// Deterministic UUID-shaped uids: a simulation prints the same on every run.
fn uid(n: u64) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

/// Drops null fields, as the API server does not store them.
fn strip_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, strip_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(strip_nulls).collect()),
        v => v,
    }
}
