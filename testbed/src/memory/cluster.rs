//! The ports over the in-memory store: typed objects in, JSON stored,
//! every write journaled.

use super::journal::{Entry, Journal, StatusFields};
use super::store::{Apply, Store, StoreError, Subresource, Written};
use async_trait::async_trait;
use gpu_claims_actors::api::{GPUClaim, true_condition_types};
use gpu_claims_actors::ports::{
    Deleted, Kind, Obj, ObjRef, PatchBody, Preconditions, ReadError, Reader, WriteError, WriteOp,
    WriteResult, Writer, status,
};
use gpu_claims_actors::rules::RuleId;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::time::Instant;

/// Faults a test sets: the next writes fail with these errors, and the
/// VMI kind can be made unserved (a cluster without KubeVirt).
#[derive(Default, Debug)]
pub struct WriteFaults {
    /// Each write takes the next entry: Some fails it, None lets it through.
    pub fail_writes: VecDeque<Option<WriteError>>,
    /// Each write of the kind takes the next entry of its own (RBAC that
    /// forbids one resource): after `fail_writes`.
    pub fail_kind: std::collections::HashMap<Kind, VecDeque<WriteError>>,
    pub vmis_not_served: bool,
    pub fail_reads: Option<String>,
}

pub struct MemCluster {
    pub store: Arc<Store>,
    /// Events published, in order (not writes: `plan` does not print them).
    events: Mutex<Vec<gpu_claims_actors::ports::Event>>,
    journal: Mutex<Journal>,
    faults: Mutex<WriteFaults>,
    started: Instant,
    /// Over HTTP, journal only this user's writes (the controller's): a
    /// user playing with `demo --serve` is no write the checks judge.
    journal_user: Mutex<Option<String>>,
    /// How long after a change the controller surely has it in its cache,
    /// and a write it decided on then has landed: its watches' lag plus
    /// its writes' latency (the simulation sets both; over HTTP, a settle).
    watch_allowance: Mutex<std::time::Duration>,
}

/// The allowance over HTTP, where watches trail by what the machine's
/// load makes them.
const HTTP_WATCH_ALLOWANCE: std::time::Duration = std::time::Duration::from_secs(5);

fn write_error(e: StoreError) -> WriteError {
    match e {
        StoreError::NotFound(_) => WriteError::NotFound,
        StoreError::AlreadyExists(m) => WriteError::Conflict(status(409, "AlreadyExists", m)),
        StoreError::Conflict(m) => WriteError::Conflict(status(409, "Conflict", m)),
        StoreError::Invalid(m) => WriteError::Invalid(status(422, "Invalid", m)),
        StoreError::TooLarge => {
            WriteError::Refused(status(500, "", "etcdserver: request is too large"))
        }
    }
}

/// The devices a ResourceClaim's allocation (`status`) or a record's
/// spec names, as `driver/pool/device`, sorted.
pub fn devices_of(v: &Value) -> Vec<String> {
    let list = if v["kind"] == "GPUAllocation" || v["spec"]["claimUID"].is_string() {
        v["spec"]["devices"].as_array().cloned().unwrap_or_default()
    } else {
        v["status"]["allocation"]["devices"]["results"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let mut out: Vec<String> = list
        .iter()
        .map(|d| {
            let s = |f: &str| d[f].as_str().unwrap_or_default().to_string();
            format!("{}/{}/{}", s("driver"), s("pool"), s("device"))
        })
        .collect();
    out.sort();
    out
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
            journal_user: Mutex::default(),
            watch_allowance: Mutex::new(HTTP_WATCH_ALLOWANCE),
        })
    }

    /// See `watch_allowance`: set by whoever knows the lag and latency.
    pub fn set_watch_allowance(&self, d: std::time::Duration) {
        *self
            .watch_allowance
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = d;
    }

    /// How long after a change the controller surely has it in its cache
    /// and has written what it decided on then.
    pub fn watch_allowance(&self) -> std::time::Duration {
        *self
            .watch_allowance
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Time since the cluster started: the clock of its journal.
    pub fn elapsed(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    /// Journals only `user`'s writes over HTTP from now on.
    pub fn journal_only(&self, user: &str) {
        *self.journal_user.lock().unwrap_or_else(|e| e.into_inner()) = Some(user.into());
    }

    /// Whether a write over HTTP by `user` goes into the journal.
    pub fn journals(&self, user: &str) -> bool {
        self.journal_user
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_deref()
            .is_none_or(|u| u == user)
    }

    pub fn journal(&self) -> MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn events(&self) -> Vec<gpu_claims_actors::ports::Event> {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn faults(&self) -> MutexGuard<'_, WriteFaults> {
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts an object as it is, at time 0 (a snapshot, or a test's world).
    pub fn seed(&self, obj: &Obj) -> Obj {
        let kind = obj.kind();
        gpu_claims_actors::api::from_json(
            kind,
            self.store
                .seed(kind.name(), gpu_claims_actors::api::to_json(obj)),
        )
        .unwrap_or_else(|_| obj.clone())
    }

    /// Reads one object as typed.
    pub fn get(&self, what: &ObjRef) -> Option<Obj> {
        let v = self.store.get(
            what.kind.name(),
            what.namespace.as_deref().unwrap_or_default(),
            &what.name,
        )?;
        gpu_claims_actors::api::from_json(what.kind, v).ok()
    }

    fn injected(&self, kind: Kind) -> Option<WriteError> {
        let mut f = self.faults();
        if let Some(e) = f.fail_writes.pop_front() {
            return e;
        }
        f.fail_kind.get_mut(&kind).and_then(VecDeque::pop_front)
    }

    /// Journals a write; `journal` is held from before the store made it,
    /// so that the journal's order is the store's even when writes run on
    /// several threads at once.
    fn journal_write(
        &self,
        journal: &mut Journal,
        op: WriteOp,
        label: &'static str,
        what: &ObjRef,
        rule: RuleId,
        result: &Result<Written, StoreError>,
    ) {
        let elapsed = Instant::now().duration_since(self.started);
        let invalid = matches!(result, Err(StoreError::Invalid(_)));
        let (changed, error, status) = match result {
            Ok(w) => (
                w.changed,
                None,
                (op == WriteOp::UpdateStatus && what.kind == Kind::Claim)
                    .then(|| status_fields(&w.object))
                    .flatten(),
            ),
            Err(e) => (false, Some(e.to_string()), None),
        };
        let devices = match result {
            Ok(w) if op == WriteOp::UpdateStatus && what.kind == Kind::ResourceClaim => {
                Some(devices_of(&w.object))
            }
            _ => None,
        };
        journal.entries.push(Entry {
            at: humantime::format_duration(std::time::Duration::from_millis(
                elapsed.as_millis() as u64
            ))
            .to_string(),
            elapsed,
            op: label,
            kind: what.kind.name(),
            namespace: what.namespace.clone(),
            name: what.name.clone(),
            rule: rule.as_str(),
            status,
            devices,
            changed,
            error,
            invalid,
            resource_version: result.as_ref().map_or(0, |w| {
                w.object["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(0)
            }),
        });
    }

    fn typed(&self, kind: Kind, w: Written) -> Result<Obj, WriteError> {
        gpu_claims_actors::api::from_json(kind, w.object)
            .map_err(|e| WriteError::Failed(e.to_string()))
    }
}

/// A write's op as `plan` prints it (README, "Commands"): the API's verb,
/// but an update of the main resource says what it did to a pod or to
/// the finalizers, which is what a reader of a plan follows.
fn plan_label(op: WriteOp, kind: Kind, before: Option<&Value>, after: &Value) -> &'static str {
    if op != WriteOp::Update {
        return op.as_str();
    }
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

impl MemCluster {
    /// A create or an update of the object or its status, as the API
    /// server makes it; journaled, and answered typed.
    fn put(&self, obj: Obj, rule: RuleId, op: WriteOp) -> WriteResult<Obj> {
        if let Some(e) = self.injected(obj.kind()) {
            return Err(e);
        }
        let what = obj.obj_ref();
        let (kind, v) = (what.kind.name(), gpu_claims_actors::api::to_json(&obj));
        let mut journal = self.journal();
        let ns = what.namespace.as_deref().unwrap_or_default();
        let before = (op == WriteOp::Update)
            .then(|| self.store.get(kind, ns, &what.name))
            .flatten();
        let label = plan_label(op, what.kind, before.as_ref(), &v);
        let r = match op {
            WriteOp::Create => self.store.create(kind, v),
            WriteOp::Update => self.store.update(kind, v, Subresource::Main),
            WriteOp::UpdateStatus => self.store.update(kind, v, Subresource::Status),
            WriteOp::Delete | WriteOp::Patch => {
                unreachable!("deletes and patches have their own paths")
            }
        };
        self.journal_write(&mut journal, op, label, &what, rule, &r);
        drop(journal);
        self.typed(what.kind, r.map_err(write_error)?)
    }
}

#[async_trait]
impl Writer for MemCluster {
    async fn create(&self, obj: Obj, rule: RuleId) -> WriteResult<Obj> {
        self.put(obj, rule, WriteOp::Create)
    }

    async fn replace(&self, obj: Obj, rule: RuleId) -> WriteResult<Obj> {
        self.put(obj, rule, WriteOp::Update)
    }

    async fn replace_status(&self, obj: Obj, rule: RuleId) -> WriteResult<Obj> {
        self.put(obj, rule, WriteOp::UpdateStatus)
    }

    async fn delete(&self, what: ObjRef, pre: Preconditions, rule: RuleId) -> WriteResult<Deleted> {
        if let Some(e) = self.injected(what.kind) {
            return Err(e);
        }
        let ns = what.namespace.as_deref().unwrap_or_default();
        let mut journal = self.journal();
        let r = self.store.delete_with(
            what.kind.name(),
            ns,
            &what.name,
            pre.uid.as_deref(),
            pre.resource_version.as_deref(),
            Apply::Commit,
        );
        let label = WriteOp::Delete.as_str();
        self.journal_write(&mut journal, WriteOp::Delete, label, &what, rule, &r);
        drop(journal);
        let w = r.map_err(write_error)?;
        if w.removed {
            return Ok(Deleted::Gone);
        }
        Ok(Deleted::Deleting(self.typed(what.kind, w)?))
    }

    async fn patch(&self, what: ObjRef, patch: PatchBody, rule: RuleId) -> WriteResult<Obj> {
        use gpu_claims_apiserver::patch::{PatchKind, apply};
        let (patch_kind, patch) = match patch {
            PatchBody::Merge(p) => (PatchKind::Merge, p),
            PatchBody::Strategic(p) => (PatchKind::StrategicMerge, p),
        };
        if let Some(e) = self.injected(what.kind) {
            return Err(e);
        }
        let ns = what.namespace.as_deref().unwrap_or_default();
        let kind = what.kind.name();
        // As the API server's GuaranteedUpdate: the patch applied to the
        // object as stored, again if another write came between, unless
        // the patch names the resourceVersion it was made for (then that
        // is a 409, as the API server answers).
        let pinned = patch["metadata"]["resourceVersion"].is_string();
        let finalizers = |v: &Value| v["metadata"]["finalizers"].as_array().map_or(0, Vec::len);
        let mut label = WriteOp::Patch.as_str();
        let mut journal = self.journal();
        let r = loop {
            let Some(mut doc) = self.store.get(kind, ns, &what.name) else {
                break Err(StoreError::NotFound(what.name.clone()));
            };
            let before = finalizers(&doc);
            if let Err(e) = apply(patch_kind, &mut doc, &patch) {
                break Err(StoreError::Invalid(e));
            }
            // In the journal's words, as the API server's patch handler.
            label = match finalizers(&doc) {
                n if n < before => "remove_finalizer",
                n if n > before => "add_finalizer",
                _ => WriteOp::Patch.as_str(),
            };
            match self.store.update(kind, doc, Subresource::Main) {
                Err(StoreError::Conflict(_)) if !pinned => continue,
                r => break r,
            }
        };
        self.journal_write(&mut journal, WriteOp::Patch, label, &what, rule, &r);
        drop(journal);
        self.typed(what.kind, r.map_err(write_error)?)
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
            Some(v) => gpu_claims_actors::api::from_json(what.kind, v)
                .map(Some)
                .map_err(|e| ReadError::Other(e.to_string())),
        }
    }
}

#[async_trait]
impl gpu_claims_actors::ports::Recorder for MemCluster {
    async fn publish(&self, mut event: gpu_claims_actors::ports::Event) {
        // As the operator's recorder publishes it.
        event.message = event.note().into_owned();
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event);
    }
}
