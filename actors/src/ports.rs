//! The ports through which actors reach the cluster: a writer, a live
//! reader and a clock. Adapters: kube-rs (the operator) and the in-memory
//! cluster ([`crate::memory`]).

use crate::api::{GPUAllocation, GPUClaim, GPUClass, Vmi};
use crate::rules::RuleId;
use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, Pod};
use std::fmt;
use tokio::time::Instant;

/// The kinds the controller reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Class,
    Claim,
    Record,
    Vmi,
    Pod,
    Node,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Class,
        Kind::Claim,
        Kind::Record,
        Kind::Vmi,
        Kind::Pod,
        Kind::Node,
    ];

    /// The Kubernetes kind name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Class => "GPUClass",
            Kind::Claim => "GPUClaim",
            Kind::Record => "GPUAllocation",
            Kind::Vmi => "VirtualMachineInstance",
            Kind::Pod => "Pod",
            Kind::Node => "Node",
        }
    }

    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    pub fn namespaced(self) -> bool {
        !matches!(self, Kind::Class | Kind::Node)
    }
}

/// A typed object of one of the kinds. Moved a few times per watch event;
/// boxing the large variants would add an allocation to every event.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Obj {
    Class(GPUClass),
    Claim(GPUClaim),
    Record(GPUAllocation),
    Vmi(Vmi),
    Pod(Pod),
    Node(Node),
}

impl Obj {
    pub fn kind(&self) -> Kind {
        match self {
            Obj::Class(_) => Kind::Class,
            Obj::Claim(_) => Kind::Claim,
            Obj::Record(_) => Kind::Record,
            Obj::Vmi(_) => Kind::Vmi,
            Obj::Pod(_) => Kind::Pod,
            Obj::Node(_) => Kind::Node,
        }
    }

    pub fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Obj::Class(o) => &o.metadata,
            Obj::Claim(o) => &o.metadata,
            Obj::Record(o) => &o.metadata,
            Obj::Vmi(o) => &o.metadata,
            Obj::Pod(o) => &o.metadata,
            Obj::Node(o) => &o.metadata,
        }
    }

    pub fn obj_ref(&self) -> ObjRef {
        let m = self.meta();
        ObjRef::new(
            self.kind(),
            m.namespace.as_deref(),
            m.name.as_deref().unwrap_or_default(),
        )
    }
}

/// Names one object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjRef {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjRef {
    pub fn new(kind: Kind, namespace: Option<&str>, name: &str) -> Self {
        Self {
            kind,
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for ObjRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind.name(), self.name),
            None => write!(f, "{} {}", self.kind.name(), self.name),
        }
    }
}

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

#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum WriteError {
    #[error("not found")]
    NotFound,
    /// 409: a newer object, a failed precondition, or it already exists.
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("invalid: {0}")]
    Invalid(String),
    #[error("{0}")]
    Other(String),
}

impl WriteError {
    /// A label for write metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            WriteError::NotFound => "not_found",
            WriteError::Conflict(_) => "conflict",
            WriteError::Invalid(_) => "invalid",
            WriteError::Other(_) => "error",
        }
    }
}

#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum ReadError {
    /// The API server does not serve the kind (no KubeVirt).
    #[error("kind not served")]
    NotServed,
    #[error("{0}")]
    Other(String),
}

/// Why a write is made: the rule that decided it travels with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Why(pub RuleId);

#[async_trait]
pub trait Writer: Send + Sync {
    async fn create(&self, obj: Obj, why: Why) -> Result<Obj, WriteError>;
    /// Replaces metadata and spec; fails with Conflict on a stale resourceVersion.
    async fn replace(&self, obj: Obj, why: Why) -> Result<Obj, WriteError>;
    /// Replaces the status subresource; Conflict on a stale resourceVersion.
    async fn replace_status(&self, obj: Obj, why: Why) -> Result<Obj, WriteError>;
    async fn delete(
        &self,
        what: ObjRef,
        pre: Preconditions,
        why: Why,
    ) -> Result<Deleted, WriteError>;
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
pub struct Note {
    pub regarding: ObjRef,
    pub uid: Option<String>,
    pub warning: bool,
    pub reason: String,
    pub message: String,
    pub rule: RuleId,
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
}

/// Telemetry that goes nowhere (`plan`, most tests).
pub struct NoTelemetry;

impl Telemetry for NoTelemetry {}

/// Where Events go: kube-runtime's recorder in `run`, a list in memory.
#[async_trait]
pub trait Recorder: Send + Sync {
    /// Best effort: an Event that cannot be published is logged, never retried.
    async fn publish(&self, note: Note);
}
