//! The ports over kube-rs: every kind through `Api<DynamicObject>`, with
//! the same JSON conversion as the in-memory cluster, so both adapters
//! read and write objects identically.

use crate::metrics::Metrics;
use async_trait::async_trait;
use gpu_claims_actors::api::DecodeError;
use gpu_claims_actors::ports::{
    Deleted, Kind, Obj, ObjRef, PatchBody, Preconditions, ReadError, Reader, WriteError, WriteOp,
    WriteResult, Writer,
};
use gpu_claims_actors::rules::RuleId;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use std::sync::Arc;

/// The dynamic API of a kind (in `namespace`, when the kind is namespaced).
pub fn api(client: &Client, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
    versions::api_at(client, kind, namespace, "")
}

mod versions;

/// A kube object as typed.
///
/// The object's fields are moved, not copied: serializing the whole
/// object back to JSON first copied every string of it once more, which
/// at a cold start over 50,000 pods was most of what the controller's
/// decoding cost beyond the watch's own.
pub fn typed(kind: Kind, o: DynamicObject) -> Result<Obj, DecodeError> {
    let why = |message: String| DecodeError {
        path: String::new(),
        message,
    };
    let DynamicObject { metadata, data, .. } = o;
    let mut fields = match data {
        serde_json::Value::Object(fields) => fields,
        serde_json::Value::Null => serde_json::Map::new(),
        other => return Err(why(format!("the object is {other}, not a map"))),
    };
    let metadata = serde_json::to_value(metadata).map_err(|e| why(e.to_string()))?;
    fields.insert("metadata".into(), metadata);
    fields.insert("kind".into(), kind.name().into());
    // Read as the version the controller knows: a kind watched at an
    // older version (DeviceTaintRule at v1beta2) has the same fields.
    fields.insert("apiVersion".into(), kind.api_version().into());
    gpu_claims_actors::api::from_json(kind, serde_json::Value::Object(fields))
}

fn dynamic(obj: &Obj) -> Result<DynamicObject, WriteError> {
    serde_json::from_value(gpu_claims_actors::api::to_json(obj)).map_err(|e| {
        WriteError::Invalid(gpu_claims_actors::ports::status(
            422,
            "Invalid",
            e.to_string(),
        ))
    })
}

/// Whether a request was refused at the wire by the fence.
fn fenced(e: &kube::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if err.is::<crate::leader::wire::Fenced>() {
            return true;
        }
        cur = err.source();
    }
    matches!(e, kube::Error::Service(b) if b.is::<crate::leader::wire::Fenced>())
}

fn write_error(e: kube::Error) -> WriteError {
    if fenced(&e) {
        return WriteError::Fenced;
    }
    match &e {
        // The API server's Status, kept as it was given.
        kube::Error::Api(s) if s.code == 404 => WriteError::NotFound,
        kube::Error::Api(s) if s.code == 409 => WriteError::Conflict(s.clone()),
        kube::Error::Api(s) if s.code == 400 || s.code == 422 => WriteError::Invalid(s.clone()),
        kube::Error::Api(s) => WriteError::Refused(s.clone()),
        _ => WriteError::Failed(e.to_string()),
    }
}

pub struct KubePorts {
    client: Client,
    metrics: Arc<Metrics>,
    /// Every request's deadline.
    deadline: std::time::Duration,
    /// D7: the version the API server serves DeviceTaintRules at.
    taint_rules: versions::ServedVersion,
}

impl KubePorts {
    pub fn new(client: Client, metrics: Arc<Metrics>, deadline: std::time::Duration) -> Arc<Self> {
        Arc::new(Self {
            client,
            metrics,
            deadline,
            taint_rules: Default::default(),
        })
    }

    /// Runs a request within the deadline; one that gets no answer by then
    /// is counted and answered with `timeout`.
    async fn within<T, E>(
        &self,
        verb: &str,
        kind: Kind,
        request: impl Future<Output = Result<T, E>>,
        timeout: impl FnOnce(std::time::Duration) -> E,
    ) -> Result<T, E> {
        match tokio::time::timeout(self.deadline, request).await {
            Ok(r) => r,
            Err(_) => {
                self.metrics.timed_out(verb, kind.name());
                Err(timeout(self.deadline))
            }
        }
    }

    fn count<T>(&self, op: WriteOp, kind: Kind, rule: RuleId, r: &Result<T, WriteError>) {
        let result = match r {
            Ok(_) => "ok",
            Err(e) => e.metric_label(),
        };
        self.metrics.write(op, kind, rule, result);
    }

    fn back(&self, kind: Kind, o: DynamicObject) -> Result<Obj, WriteError> {
        typed(kind, o).map_err(|e| WriteError::Failed(e.to_string()))
    }
}

/// Which write of an object's main part or status `put` makes.
#[derive(Clone, Copy)]
enum Put {
    Create,
    Update,
    UpdateStatus,
}

impl Put {
    fn op(self) -> WriteOp {
        match self {
            Put::Create => WriteOp::Create,
            Put::Update => WriteOp::Update,
            Put::UpdateStatus => WriteOp::UpdateStatus,
        }
    }
}

impl KubePorts {
    /// One create or replace, typed back and counted.
    async fn put(&self, put: Put, obj: Obj, rule: RuleId) -> Result<Obj, WriteError> {
        let r = obj.obj_ref();
        let pp = PostParams::default();
        let res = match dynamic(&obj) {
            Err(e) => Err(e),
            Ok(d) => {
                let send = |api: Api<DynamicObject>, version: &'static str| {
                    let mut d = d.clone();
                    if !version.is_empty()
                        && let Some(t) = d.types.as_mut()
                    {
                        t.api_version = format!("resource.k8s.io/{version}");
                    }
                    let (pp, name) = (pp.clone(), r.name.clone());
                    async move {
                        match put {
                            Put::Create => api.create(&pp, &d).await,
                            Put::Update => api.replace(&name, &pp, &d).await,
                            Put::UpdateStatus => api.replace_status(&name, &pp, &d).await,
                        }
                    }
                };
                let request = async {
                    self.taint_rules
                        .request(&self.client, r.kind, r.namespace.as_deref(), send)
                        .await
                        .map_err(write_error)
                };
                self.within(put.op().as_str(), r.kind, request, WriteError::Timeout)
                    .await
            }
        };
        let res = res.and_then(|o| self.back(r.kind, o));
        self.count(put.op(), r.kind, rule, &res);
        res
    }
}

#[async_trait]
impl Writer for KubePorts {
    async fn create(&self, obj: Obj, rule: RuleId) -> WriteResult<Obj> {
        self.put(Put::Create, obj, rule).await
    }

    async fn replace(&self, obj: Obj, rule: RuleId) -> WriteResult<Obj> {
        self.put(Put::Update, obj, rule).await
    }

    async fn replace_status(&self, obj: Obj, rule: RuleId) -> WriteResult<Obj> {
        self.put(Put::UpdateStatus, obj, rule).await
    }

    async fn delete(&self, what: ObjRef, pre: Preconditions, rule: RuleId) -> WriteResult<Deleted> {
        let dp = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: pre.uid,
                resource_version: pre.resource_version,
            }),
            ..DeleteParams::default()
        };
        let send = |api: Api<DynamicObject>, _| {
            let (dp, name) = (dp.clone(), what.name.clone());
            async move { api.delete(&name, &dp).await }
        };
        let request = async {
            self.taint_rules
                .request(&self.client, what.kind, what.namespace.as_deref(), send)
                .await
                .map_err(write_error)
        };
        let res = match self
            .within(
                WriteOp::Delete.as_str(),
                what.kind,
                request,
                WriteError::Timeout,
            )
            .await
        {
            // An object answered without finalizers is gone (the API server returns
            // the last state of some kinds instead of a Status).
            Ok(either::Either::Left(o))
                if o.metadata.finalizers.as_ref().is_none_or(|f| f.is_empty()) =>
            {
                Ok(Deleted::Gone)
            }
            Ok(either::Either::Left(o)) => self.back(what.kind, o).map(Deleted::Deleting),
            Ok(either::Either::Right(_)) => Ok(Deleted::Gone),
            Err(e) => Err(e),
        };
        self.count(WriteOp::Delete, what.kind, rule, &res);
        res
    }

    async fn patch(&self, what: ObjRef, patch: PatchBody, rule: RuleId) -> WriteResult<Obj> {
        let api = api(&self.client, what.kind, what.namespace.as_deref());
        let patch = match &patch {
            PatchBody::Merge(p) => Patch::Merge(p),
            PatchBody::Strategic(p) => Patch::Strategic(p),
        };
        let request = async {
            api.patch(&what.name, &PatchParams::default(), &patch)
                .await
                .map_err(write_error)
        };
        let res = self
            .within(
                WriteOp::Patch.as_str(),
                what.kind,
                request,
                WriteError::Timeout,
            )
            .await
            .and_then(|o| self.back(what.kind, o));
        self.count(WriteOp::Patch, what.kind, rule, &res);
        res
    }
}

#[async_trait]
impl Reader for KubePorts {
    async fn get(&self, what: ObjRef) -> Result<Option<Obj>, ReadError> {
        let send = |api: Api<DynamicObject>, _| {
            let name = what.name.clone();
            async move { api.get(&name).await }
        };
        let request = async {
            Ok(self
                .taint_rules
                .request(&self.client, what.kind, what.namespace.as_deref(), send)
                .await)
        };
        let answer = self
            .within("get", what.kind, request, ReadError::Timeout)
            .await?;
        match answer {
            Ok(o) => typed(what.kind, o)
                .map(Some)
                .map_err(|e| ReadError::Other(e.to_string())),
            // A 404 that names no object: the resource itself is not served (no KubeVirt).
            Err(kube::Error::Api(s))
                if s.code == 404 && s.details.as_ref().is_none_or(|d| d.name.is_empty()) =>
            {
                Err(ReadError::NotServed)
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(ReadError::Other(e.to_string())),
        }
    }
}
