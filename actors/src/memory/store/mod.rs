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

pub use history::{Gone, HISTORY, HISTORY_BYTES, HistoryLimits};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

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
    pub resource_version: u64,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum StoreError {
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0} already exists")]
    AlreadyExists(String),
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("invalid: {0}")]
    Invalid(String),
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

type Key = (String, String, String);

struct Inner {
    objects: BTreeMap<Key, Value>,
    rv: u64,
    uids: u64,
    watchers: Vec<mpsc::UnboundedSender<StoreEvent>>,
    /// Recent changes, so a watch can start from a resourceVersion, and
    /// the bytes of their objects (as JSON).
    history: std::collections::VecDeque<(StoreEvent, usize)>,
    history_bytes: usize,
    limits: HistoryLimits,
}

/// Wall time for timestamps; plan uses a simulated one.
pub type WallClock = Arc<dyn Fn() -> k8s_openapi::jiff::Timestamp + Send + Sync>;

pub struct Store {
    inner: Mutex<Inner>,
    wall: WallClock,
    /// Kinds with a status subresource: main updates keep status, status updates keep the rest.
    with_status: Vec<String>,
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
            with_status: with_status.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> String {
        (self.wall)().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    }

    fn has_status(&self, kind: &str) -> bool {
        self.with_status.iter().any(|k| k == kind)
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
        Self::publish(&mut g, kind, EventType::Added, &obj);
        obj
    }

    pub fn create(&self, kind: &str, obj: Value) -> Result<Written, StoreError> {
        let mut obj = strip_nulls(obj);
        let mut g = self.lock();
        if meta_str(&obj, "name").is_empty() {
            let prefix = meta_str(&obj, "generateName").to_string();
            if prefix.is_empty() {
                return Err(StoreError::Invalid(
                    "metadata.name or metadata.generateName is required".into(),
                ));
            }
            let suffix = format!("{:05x}", (g.uids + 1) * 7919 % 0xfffff);
            set_meta(&mut obj, "name", json!(format!("{prefix}{suffix}")));
        }
        let k = (
            kind.to_string(),
            meta_str(&obj, "namespace").to_string(),
            meta_str(&obj, "name").to_string(),
        );
        if g.objects.contains_key(&k) {
            return Err(StoreError::AlreadyExists(format!("{kind} {}/{}", k.1, k.2)));
        }
        g.rv += 1;
        g.uids += 1;
        let uid = uid(g.uids);
        set_meta(&mut obj, "uid", json!(uid));
        set_meta(&mut obj, "resourceVersion", json!(g.rv.to_string()));
        set_meta(&mut obj, "creationTimestamp", json!(self.now()));
        set_meta(&mut obj, "generation", json!(1));
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("deletionTimestamp");
        }
        if self.has_status(kind)
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        g.objects.insert(k, obj.clone());
        Self::publish(&mut g, kind, EventType::Added, &obj);
        Ok(Written {
            object: obj,
            changed: true,
            removed: false,
        })
    }

    /// PUT: the object's resourceVersion, when set, must be the current one.
    pub fn update(&self, kind: &str, obj: Value, sub: Subresource) -> Result<Written, StoreError> {
        let mut g = self.lock();
        let k = (
            kind.to_string(),
            meta_str(&obj, "namespace").to_string(),
            meta_str(&obj, "name").to_string(),
        );
        let what = format!("{kind} {}/{}", k.1, k.2);
        let Some(old) = g.objects.get(&k).cloned() else {
            return Err(StoreError::NotFound(what));
        };
        let rv = meta_str(&obj, "resourceVersion");
        if !rv.is_empty() && rv != meta_str(&old, "resourceVersion") {
            return Err(StoreError::Conflict(format!(
                "{what}: the object has been modified; please apply your changes to the latest version and try again"
            )));
        }
        let uid = meta_str(&obj, "uid");
        if !uid.is_empty() && uid != meta_str(&old, "uid") {
            return Err(StoreError::Conflict(format!("{what}: uid mismatch")));
        }
        let new = match sub {
            Subresource::Status => {
                let mut n = old.clone();
                n["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
                n
            }
            Subresource::Main => {
                let mut n = obj.clone();
                for f in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "generation",
                    "resourceVersion",
                ] {
                    match meta(&old).get(f) {
                        Some(v) => set_meta(&mut n, f, v.clone()),
                        None => {
                            if let Some(m) = n["metadata"].as_object_mut() {
                                m.remove(f);
                            }
                        }
                    }
                }
                if self.has_status(kind) {
                    n["status"] = old.get("status").cloned().unwrap_or(Value::Null);
                }
                let deleting = !meta_str(&old, "deletionTimestamp").is_empty();
                let before = finalizers(&old);
                if deleting && finalizers(&n).iter().any(|f| !before.contains(f)) {
                    return Err(StoreError::Invalid(format!(
                        "{what}: no new finalizers can be added if the object is being deleted"
                    )));
                }
                n
            }
        };
        let new = strip_nulls(new);
        if new == old {
            return Ok(Written {
                object: old,
                changed: false,
                removed: false,
            });
        }
        g.rv += 1;
        let mut new = new;
        set_meta(&mut new, "resourceVersion", json!(g.rv.to_string()));
        let deleting = !meta_str(&new, "deletionTimestamp").is_empty();
        if deleting && finalizers(&new).is_empty() {
            g.objects.remove(&k);
            Self::publish(&mut g, kind, EventType::Deleted, &new);
            return Ok(Written {
                object: new,
                changed: true,
                removed: true,
            });
        }
        g.objects.insert(k, new.clone());
        Self::publish(&mut g, kind, EventType::Modified, &new);
        Ok(Written {
            object: new,
            changed: true,
            removed: false,
        })
    }

    /// DELETE with optional uid and resourceVersion preconditions.
    pub fn delete(
        &self,
        kind: &str,
        ns: &str,
        name: &str,
        uid: Option<&str>,
        rv: Option<&str>,
    ) -> Result<Written, StoreError> {
        let mut g = self.lock();
        let k = (kind.to_string(), ns.to_string(), name.to_string());
        let what = format!("{kind} {ns}/{name}");
        let Some(old) = g.objects.get(&k).cloned() else {
            return Err(StoreError::NotFound(what));
        };
        if uid.is_some_and(|u| u != meta_str(&old, "uid")) {
            return Err(StoreError::Conflict(format!(
                "{what}: precondition failed: UID in precondition does not match the object"
            )));
        }
        if rv.is_some_and(|r| r != meta_str(&old, "resourceVersion")) {
            return Err(StoreError::Conflict(format!(
                "{what}: precondition failed: resourceVersion in precondition does not match the object"
            )));
        }
        if !finalizers(&old).is_empty() {
            if !meta_str(&old, "deletionTimestamp").is_empty() {
                return Ok(Written {
                    object: old,
                    changed: false,
                    removed: false,
                });
            }
            g.rv += 1;
            let mut new = old;
            set_meta(&mut new, "deletionTimestamp", json!(self.now()));
            set_meta(&mut new, "deletionGracePeriodSeconds", json!(0));
            set_meta(&mut new, "resourceVersion", json!(g.rv.to_string()));
            g.objects.insert(k, new.clone());
            Self::publish(&mut g, kind, EventType::Modified, &new);
            return Ok(Written {
                object: new,
                changed: true,
                removed: false,
            });
        }
        g.rv += 1;
        let mut gone = old;
        set_meta(&mut gone, "resourceVersion", json!(g.rv.to_string()));
        g.objects.remove(&k);
        Self::publish(&mut g, kind, EventType::Deleted, &gone);
        Ok(Written {
            object: gone,
            changed: true,
            removed: true,
        })
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
