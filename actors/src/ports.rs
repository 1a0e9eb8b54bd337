//! The ports through which actors reach the cluster: a writer, a live
//! reader and a clock. Adapters: kube-rs (the operator) and the in-memory
//! cluster (`gpu-claims-testbed`'s memory).

pub use crate::api::{Kind, Obj, ObjRef};
use crate::rules::RuleId;
use async_trait::async_trait;
use tokio::time::Instant;

/// Delete preconditions, as the API server checks them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

/// What a delete did.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Deleted {
    /// The object is gone.
    Gone,
    /// Finalizers hold it: it now has a deletionTimestamp.
    Deleting(Obj),
}

/// What the API server answered a write it did not make, as it said it:
/// kube's `Status` (code, reason, message, and its details: the causes of
/// an `Invalid`, the `retryAfterSeconds` of a 429).
pub use kube::core::Status;

#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum WriteError {
    #[error("not found")]
    NotFound,
    /// 409: a newer object, a failed precondition, or it already exists.
    #[error("conflict: {}", .0.message)]
    Conflict(Box<Status>),
    /// 400, 422: refused as invalid (its causes name the fields).
    #[error("invalid: {}", invalid_message(.0))]
    Invalid(Box<Status>),
    /// No answer within the request's deadline: it may or may not have landed.
    #[error("no answer within {0:?}")]
    Timeout(std::time::Duration),
    /// Not made: this process does not hold the leader Lease (with a safety
    /// margin left), so it must not write.
    #[error("not the leader")]
    Fenced,
    /// Any other answer of the API server (a 5xx, a 429, a 403).
    #[error("{} {}: {}", .0.code, .0.reason, .0.message)]
    Refused(Box<Status>),
    /// No answer that could be read (the connection failed; the body was
    /// not the object).
    #[error("{0}")]
    Failed(String),
}

/// An `Invalid`'s message, with the fields its causes name.
fn invalid_message(s: &Status) -> String {
    let fields: Vec<&str> = s
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .map(|c| c.field.as_str())
        .filter(|f| !f.is_empty())
        .collect();
    if fields.is_empty() || fields.iter().all(|f| s.message.contains(f)) {
        s.message.clone()
    } else {
        format!("{} ({})", s.message, fields.join(", "))
    }
}

/// A Status with a code, a reason and a message: what the in-memory
/// cluster and the tests answer as the API server would.
pub fn status(code: u16, reason: &str, message: impl Into<String>) -> Box<Status> {
    let message = message.into();
    Box::new(Status::failure(&message, reason).with_code(code))
}

impl WriteError {
    /// A 409 Conflict saying `message`.
    pub fn conflict(message: impl Into<String>) -> Self {
        WriteError::Conflict(status(409, "Conflict", message))
    }

    /// How long the API server asked to wait before trying again, if it did.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        let WriteError::Refused(s) = self else {
            return None;
        };
        let secs = s.details.as_ref()?.retry_after_seconds;
        (secs > 0).then(|| std::time::Duration::from_secs(u64::from(secs)))
    }

    /// A label for write metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            WriteError::NotFound => "not_found",
            WriteError::Conflict(_) => "conflict",
            WriteError::Invalid(_) => "invalid",
            WriteError::Timeout(_) => "timeout",
            WriteError::Fenced => "fenced",
            WriteError::Refused(_) | WriteError::Failed(_) => "error",
        }
    }
}

#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum ReadError {
    /// The API server does not serve the kind (no KubeVirt).
    #[error("kind not served")]
    NotServed,
    /// No answer within the request's deadline.
    #[error("no answer within {0:?}")]
    Timeout(std::time::Duration),
    #[error("{0}")]
    Other(String),
}

/// What a write answers.
pub type WriteResult<T> = Result<T, WriteError>;

/// Every write says why: the rule that decided it travels with it into
/// the log line, the metric label and the journal.
#[async_trait]
pub trait Writer: Send + Sync {
    async fn create(&self, obj: Obj, rule: RuleId) -> WriteResult<Obj>;
    /// Replaces metadata and spec; fails with Conflict on a stale resourceVersion.
    async fn replace(&self, obj: Obj, rule: RuleId) -> WriteResult<Obj>;
    /// Replaces the status subresource; Conflict on a stale resourceVersion.
    async fn replace_status(&self, obj: Obj, rule: RuleId) -> WriteResult<Obj>;
    async fn delete(&self, what: ObjRef, pre: Preconditions, rule: RuleId) -> WriteResult<Deleted>;
    /// A patch of the object as the server has it: for fields of objects
    /// the controller does not own (a node's annotations and finalizers),
    /// where a replace from the cache would drop what the cache does not
    /// keep.
    async fn patch(&self, what: ObjRef, patch: PatchBody, rule: RuleId) -> WriteResult<Obj>;
}

/// A patch's body, as its content type says how to apply it.
#[derive(Clone, Debug, PartialEq)]
pub enum PatchBody {
    /// A JSON merge patch (RFC 7386): lists are replaced whole, so one
    /// that sets finalizers names the resourceVersion it was made for.
    Merge(serde_json::Value),
    /// A strategic merge patch: `metadata.finalizers` merges as a set and
    /// `$deleteFromPrimitiveList/finalizers` removes one, so a finalizer
    /// is added or removed on an object another writer changes too
    /// (a node) with no version to pin.
    Strategic(serde_json::Value),
}

/// What a write is: the one vocabulary of writes, for guards, the
/// operator's `gpu_claims_writes_total{op}` and the benchmark. The labels
/// are the API's verbs (an update of the status subresource is
/// `update_status`); `Writer::replace` is kube-rs's name for an update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOp {
    Create,
    Update,
    UpdateStatus,
    Delete,
    Patch,
}

impl WriteOp {
    pub fn as_str(self) -> &'static str {
        match self {
            WriteOp::Create => "create",
            WriteOp::Update => "update",
            WriteOp::UpdateStatus => "update_status",
            WriteOp::Delete => "delete",
            WriteOp::Patch => "patch",
        }
    }
}

/// Something every write passes before it is made: a process that dies
/// (the simulation), a timestamp (the benchmark), a fence (a leader that no
/// longer holds its Lease writes nothing). `Err` answers the write instead;
/// `Ok(Some(deadline))` bounds how long the write may take.
#[async_trait]
pub trait WriteGuard: Send + Sync {
    async fn admit(&self, op: WriteOp, what: &ObjRef) -> Result<Option<Instant>, WriteError>;
    /// An admitted write was answered (or given up): a fence counts the
    /// writes in flight, so that a release waits for them.
    fn finished(&self) {}
}

#[async_trait]
impl<G: WriteGuard + ?Sized> WriteGuard for std::sync::Arc<G> {
    async fn admit(&self, op: WriteOp, what: &ObjRef) -> Result<Option<Instant>, WriteError> {
        (**self).admit(op, what).await
    }
    fn finished(&self) {
        (**self).finished()
    }
}

/// Runs a write within the deadline a guard gave, and tells the guard
/// when it is over.
async fn within<T>(
    guard: &impl WriteGuard,
    deadline: Option<Instant>,
    write: impl Future<Output = Result<T, WriteError>>,
) -> Result<T, WriteError> {
    // Told on drop: a write whose caller gave up is over too.
    struct Over<'a, G: WriteGuard>(&'a G);
    impl<G: WriteGuard> Drop for Over<'_, G> {
        fn drop(&mut self) {
            self.0.finished();
        }
    }
    let _over = Over(guard);
    match deadline {
        None => write.await,
        Some(at) => {
            let budget = at.saturating_duration_since(Instant::now());
            tokio::time::timeout_at(at, write)
                .await
                .unwrap_or(Err(WriteError::Timeout(budget)))
        }
    }
}

/// A writer whose every write passes `guard` first.
pub struct Guarded<G> {
    pub inner: std::sync::Arc<dyn Writer>,
    pub guard: G,
}

#[async_trait]
impl<G: WriteGuard> Writer for Guarded<G> {
    async fn create(&self, obj: Obj, rule: RuleId) -> WriteResult<Obj> {
        let d = self.guard.admit(WriteOp::Create, &obj.obj_ref()).await?;
        within(&self.guard, d, self.inner.create(obj, rule)).await
    }
    async fn replace(&self, obj: Obj, rule: RuleId) -> WriteResult<Obj> {
        let d = self.guard.admit(WriteOp::Update, &obj.obj_ref()).await?;
        within(&self.guard, d, self.inner.replace(obj, rule)).await
    }
    async fn replace_status(&self, obj: Obj, rule: RuleId) -> WriteResult<Obj> {
        let d = self
            .guard
            .admit(WriteOp::UpdateStatus, &obj.obj_ref())
            .await?;
        within(&self.guard, d, self.inner.replace_status(obj, rule)).await
    }
    async fn delete(&self, what: ObjRef, pre: Preconditions, rule: RuleId) -> WriteResult<Deleted> {
        let d = self.guard.admit(WriteOp::Delete, &what).await?;
        within(&self.guard, d, self.inner.delete(what, pre, rule)).await
    }
    async fn patch(&self, what: ObjRef, patch: PatchBody, rule: RuleId) -> WriteResult<Obj> {
        let d = self.guard.admit(WriteOp::Patch, &what).await?;
        within(&self.guard, d, self.inner.patch(what, patch, rule)).await
    }
}

#[async_trait]
pub trait Reader: Send + Sync {
    /// Reads past the cache. Ok(None) when the object does not exist.
    async fn get(&self, what: ObjRef) -> Result<Option<Obj>, ReadError>;
}

/// Monotonic time. Timers are tokio timers (actix `run_later`), so the
/// simulated clock of `plan` is tokio's paused clock.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
    /// Wall time, for timestamps the controller writes (condition times).
    fn wall(&self) -> k8s_openapi::jiff::Timestamp;
}

/// The wall time at simulated time 0 (`plan`, tests): a fixed epoch, so
/// a simulation prints the same timestamps on every run.
pub fn sim_epoch() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(1_798_761_600).unwrap_or_default() // 2027-01-01T00:00:00Z
}

/// Tokio's clock (paused in a simulation), with wall time counted from a
/// base: the real time for `run`, a fixed epoch for `plan`, so that a
/// simulation prints the same timestamps on every run.
pub struct TokioClock {
    base: Instant,
    base_wall: k8s_openapi::jiff::Timestamp,
}

impl TokioClock {
    pub fn real() -> Self {
        Self {
            base: Instant::now(),
            base_wall: k8s_openapi::jiff::Timestamp::now(),
        }
    }

    pub fn from(base_wall: k8s_openapi::jiff::Timestamp) -> Self {
        Self {
            base: Instant::now(),
            base_wall,
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn wall(&self) -> k8s_openapi::jiff::Timestamp {
        let d = k8s_openapi::jiff::SignedDuration::try_from(self.now().duration_since(self.base))
            .unwrap_or_default();
        self.base_wall.checked_add(d).unwrap_or(self.base_wall)
    }
}

/// An Event about an object: what happened, with the rule that saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub regarding: ObjRef,
    pub uid: Option<String>,
    pub warning: bool,
    pub reason: String,
    pub message: String,
    pub rule: RuleId,
    /// The second object the Event is about (events.k8s.io `related`):
    /// a node's Event about one of its VMs names the VMI, so that Events
    /// of one reason about different VMs are not folded into one series.
    pub related: Option<(ObjRef, Option<String>)>,
}

impl Event {
    /// The message as an Event's note shows it: what tenants wrote in it
    /// (a claim's class, a VMI's annotation or device name) can hold
    /// control characters, and `kubectl describe` prints notes raw.
    pub fn note(&self) -> std::borrow::Cow<'_, str> {
        crate::printable::printable(&self.message)
    }
}

/// What the actors report for metrics: `run` exports it to Prometheus,
/// the benchmark measures with it. Every method defaults to nothing.
pub trait Telemetry: Send + Sync {
    /// A world change that entered the supervisor reached its write after `took`.
    fn change_to_write(&self, _took: std::time::Duration, _rule: RuleId) {}
    /// A launcher pod waited `waited` at the gate before placement let it go.
    fn gate_wait(&self, _waited: std::time::Duration) {}
    /// How many claim and class actors are alive.
    fn actors(&self, _claims: usize, _classes: usize) {}
    /// How many pinned launcher pods the scheduler reports Unschedulable (G7).
    fn unschedulable_pods(&self, _pods: usize) {}
    /// E3: per node being evacuated, its GPU VMs live there, restarts of
    /// them under way, and those blocked (no VM owner, or a restarted VM
    /// waiting at the gate). A node no longer listed is evacuated no more.
    fn evacuation(&self, _nodes: &[EvacuationFigures]) {}
    /// Every watched kind has listed once: the world is whole, and the
    /// figures read off it are the cluster's (before, a replica that has
    /// seen the nodes but not yet the claims would count their GPUs free).
    fn synced(&self) {}
}

/// One evacuating node's figures, for `Telemetry::evacuation`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvacuationFigures {
    pub node: String,
    pub live: usize,
    pub under_way: usize,
    pub blocked: usize,
}

/// Telemetry that goes nowhere (`plan`, most tests).
pub struct NoTelemetry;

impl Telemetry for NoTelemetry {}

/// Where Events go: kube-runtime's recorder in `run`, a list in memory.
#[async_trait]
pub trait Recorder: Send + Sync {
    /// Best effort: an Event that cannot be published is logged, never retried.
    async fn publish(&self, event: Event);
}
