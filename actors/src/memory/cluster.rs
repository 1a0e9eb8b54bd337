//! The ports over the in-memory store: typed objects in, JSON stored,
//! every write journaled.

use super::journal::{Entry, Journal, StatusFields};
use super::store::{Store, StoreError, Subresource, Written};
use crate::api::{GPUClaim, true_condition_types};
use crate::ports::{
    Deleted, Kind, Obj, ObjRef, Preconditions, ReadError, Reader, Why, WriteError, Writer,
};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::time::Instant;

/// Faults a test sets: the next writes fail with these errors, and the
/// VMI kind can be made unserved (a cluster without KubeVirt).
#[derive(Default, Debug)]
pub struct Faults {
    /// Each write takes the next entry: Some fails it, None lets it through.
    pub fail_writes: VecDeque<Option<WriteError>>,
    pub vmis_not_served: bool,
    pub fail_reads: Option<String>,
}

pub struct MemCluster {
    pub store: Arc<Store>,
    /// Events published, in order (not writes: `plan` does not print them).
    events: Mutex<Vec<crate::ports::Note>>,
    journal: Mutex<Journal>,
    faults: Mutex<Faults>,
    started: Instant,
}

pub fn api_version(kind: Kind) -> &'static str {
    match kind {
        Kind::Class | Kind::Claim | Kind::Record => "gpu.cozystack.io/v1alpha1",
        Kind::Vmi => "kubevirt.io/v1",
        Kind::Pod | Kind::Node => "v1",
    }
}

/// An object as the store keeps it.
pub fn to_value(obj: &Obj) -> Value {
    let v = match obj {
        Obj::Class(o) => serde_json::to_value(o),
        Obj::Claim(o) => serde_json::to_value(o),
        Obj::Record(o) => serde_json::to_value(o),
        Obj::Vmi(o) => serde_json::to_value(o),
        Obj::Pod(o) => serde_json::to_value(o),
        Obj::Node(o) => serde_json::to_value(o),
    };
    let mut v = v.unwrap_or(Value::Null);
    v["apiVersion"] = api_version(obj.kind()).into();
    v["kind"] = obj.kind().name().into();
    v
}

/// A stored object, typed; Err says why it cannot be read, naming the
/// field (`spec.count: invalid value: integer `-1`, expected u32`).
pub fn from_value(kind: Kind, v: Value) -> Result<Obj, String> {
    fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
        serde_path_to_error::deserialize(v).map_err(|e| {
            let path = e.path().to_string();
            if path == "." {
                e.into_inner().to_string()
            } else {
                format!("{path}: {}", e.into_inner())
            }
        })
    }
    Ok(match kind {
        Kind::Class => Obj::Class(typed(v)?),
        Kind::Claim => Obj::Claim(typed(v)?),
        Kind::Record => Obj::Record(typed(v)?),
        Kind::Vmi => Obj::Vmi(typed(v)?),
        Kind::Pod => Obj::Pod(typed(v)?),
        Kind::Node => Obj::Node(typed(v)?),
    })
}

fn write_error(e: StoreError) -> WriteError {
    match e {
        StoreError::NotFound(_) => WriteError::NotFound,
        StoreError::AlreadyExists(m) | StoreError::Conflict(m) => WriteError::Conflict(m),
        StoreError::Invalid(m) => WriteError::Invalid(m),
    }
}

fn status_fields(v: &Value) -> Option<StatusFields> {
    let c: GPUClaim = serde_json::from_value(v.clone()).ok()?;
    Some(StatusFields {
        phase: c
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .map(|p| p.as_str().to_string()),
        node_name: c.node_name().map(str::to_string),
        attached_to: c.attached_vmi_name().map(str::to_string),
        conditions: true_condition_types(c.conditions()),
    })
}

impl MemCluster {
    pub fn new(store: Arc<Store>) -> Arc<Self> {
        Arc::new(Self {
            store,
            events: Mutex::default(),
            journal: Mutex::default(),
            faults: Mutex::default(),
            started: Instant::now(),
        })
    }

    pub fn journal(&self) -> MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn events(&self) -> Vec<crate::ports::Note> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn faults(&self) -> MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts an object as it is, at time 0 (a snapshot, or a test's world).
    pub fn seed(&self, obj: &Obj) -> Obj {
        let kind = obj.kind();
        from_value(kind, self.store.seed(kind.name(), to_value(obj)))
            .unwrap_or_else(|_| obj.clone())
    }

    /// Reads one object as typed.
    pub fn get(&self, what: &ObjRef) -> Option<Obj> {
        let v = self.store.get(
            what.kind.name(),
            what.namespace.as_deref().unwrap_or_default(),
            &what.name,
        )?;
        from_value(what.kind, v).ok()
    }

    fn injected(&self) -> Option<WriteError> {
        self.faults().fail_writes.pop_front().flatten()
    }

    fn record(
        &self,
        op: &'static str,
        what: &ObjRef,
        why: Why,
        result: &Result<Written, StoreError>,
    ) {
        let elapsed = Instant::now().duration_since(self.started);
        let (changed, error, status) = match result {
            Ok(w) => (
                w.changed,
                None,
                (op == "update_status" && what.kind == Kind::Claim)
                    .then(|| status_fields(&w.object))
                    .flatten(),
            ),
            Err(e) => (false, Some(e.to_string()), None),
        };
        self.journal().entries.push(Entry {
            at: humantime::format_duration(std::time::Duration::from_millis(
                elapsed.as_millis() as u64
            ))
            .to_string(),
            elapsed,
            op,
            kind: what.kind.name(),
            namespace: what.namespace.clone(),
            name: what.name.clone(),
            rule: why.0.as_str(),
            status,
            changed,
            error,
        });
    }

    fn typed(&self, kind: Kind, w: Written) -> Result<Obj, WriteError> {
        from_value(kind, w.object).map_err(WriteError::Other)
    }
}

/// The op a main-resource update is, for the journal.
fn update_op(kind: Kind, before: Option<&Value>, after: &Value) -> &'static str {
    if kind == Kind::Pod {
        return "update_pod";
    }
    let fins = |v: &Value| {
        v["metadata"]["finalizers"]
            .as_array()
            .map(|a| a.len())
            .unwrap_or(0)
    };
    match before.map(fins) {
        Some(b) if fins(after) > b => "add_finalizer",
        Some(b) if fins(after) < b => "remove_finalizer",
        _ => "update",
    }
}

#[async_trait]
impl Writer for MemCluster {
    async fn create(&self, obj: Obj, why: Why) -> Result<Obj, WriteError> {
        if let Some(e) = self.injected() {
            return Err(e);
        }
        let what = obj.obj_ref();
        let r = self.store.create(what.kind.name(), to_value(&obj));
        self.record("create", &what, why, &r);
        self.typed(what.kind, r.map_err(write_error)?)
    }

    async fn replace(&self, obj: Obj, why: Why) -> Result<Obj, WriteError> {
        if let Some(e) = self.injected() {
            return Err(e);
        }
        let what = obj.obj_ref();
        let before = self.store.get(
            what.kind.name(),
            what.namespace.as_deref().unwrap_or_default(),
            &what.name,
        );
        let v = to_value(&obj);
        let op = update_op(what.kind, before.as_ref(), &v);
        let r = self.store.update(what.kind.name(), v, Subresource::Main);
        self.record(op, &what, why, &r);
        self.typed(what.kind, r.map_err(write_error)?)
    }

    async fn replace_status(&self, obj: Obj, why: Why) -> Result<Obj, WriteError> {
        if let Some(e) = self.injected() {
            return Err(e);
        }
        let what = obj.obj_ref();
        let r = self
            .store
            .update(what.kind.name(), to_value(&obj), Subresource::Status);
        self.record("update_status", &what, why, &r);
        self.typed(what.kind, r.map_err(write_error)?)
    }

    async fn delete(
        &self,
        what: ObjRef,
        pre: Preconditions,
        why: Why,
    ) -> Result<Deleted, WriteError> {
        if let Some(e) = self.injected() {
            return Err(e);
        }
        let ns = what.namespace.as_deref().unwrap_or_default();
        let r = self.store.delete(
            what.kind.name(),
            ns,
            &what.name,
            pre.uid.as_deref(),
            pre.resource_version.as_deref(),
        );
        self.record("delete", &what, why, &r);
        let w = r.map_err(write_error)?;
        if w.removed {
            return Ok(Deleted::Gone);
        }
        Ok(Deleted::Deleting(self.typed(what.kind, w)?))
    }
}

#[async_trait]
impl Reader for MemCluster {
    async fn get(&self, what: ObjRef) -> Result<Option<Obj>, ReadError> {
        {
            let f = self.faults();
            if what.kind == Kind::Vmi && f.vmis_not_served {
                return Err(ReadError::NotServed);
            }
            if let Some(e) = &f.fail_reads {
                return Err(ReadError::Other(e.clone()));
            }
        }
        let ns = what.namespace.as_deref().unwrap_or_default();
        match self.store.get(what.kind.name(), ns, &what.name) {
            None => Ok(None),
            Some(v) => from_value(what.kind, v).map(Some).map_err(ReadError::Other),
        }
    }
}

#[async_trait]
impl crate::ports::Recorder for MemCluster {
    async fn publish(&self, note: crate::ports::Note) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(note);
    }
}
