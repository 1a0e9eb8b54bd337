//! What a watch event changed, as the supervisor fans it out: per kind, the
//! keys and the facts that decide who is told.

use crate::api::{GPUClaim, NodeFacts};
use std::collections::BTreeSet;
use std::sync::Arc;

/// What one change did to the world: what the supervisor fans out.
pub enum Change {
    /// An object without a name, or a heartbeat: nothing any rule reads.
    Nothing,
    Claim(ClaimChange),
    Class(ClassChange),
    Allocation(AllocationChange),
    Quota(QuotaChange),
    Vmi(VmiChange),
    Pod(PodChange),
    Node(NodeChange),
    /// DRA's objects: the nodes and DRA classes whose devices moved.
    Devices(crate::world::devices::DevicesChange),
    /// O1: a PriorityClass, and whether what it is worth moved.
    Priority(crate::world::PriorityChange),
}

pub struct ClaimChange {
    pub key: String,
    /// False when the watch brought the version the cache had.
    pub new_version: bool,
    pub old: Option<Arc<GPUClaim>>,
    pub now: Option<Arc<GPUClaim>>,
    /// Classes whose usage moved.
    pub usage_changed: Vec<String>,
}

pub struct ClassChange {
    pub name: String,
    /// Made, removed, or given another budget, resource or nodes.
    pub spec_changed: bool,
    /// The resources whose serving classes changed (made, deleted, being
    /// deleted, another resource): VMIs asking in their spec look again.
    pub serving_changed: BTreeSet<String>,
    /// D5: the VMIs asking through a template of its DeviceClass, when it
    /// came, went, or names another.
    pub dra_vmis: BTreeSet<String>,
    /// Gone, or serving another resource: its claims' lost sets differ.
    pub resource_changed: bool,
    /// D7: a DRA class whose devices moved (made, gone, other selectors):
    /// any pool may have become managed or not.
    pub dra_devices_moved: bool,
}

pub struct AllocationChange {
    pub key: String,
    /// GPUs freed (deleted, or moved off a node).
    pub freed: Option<Freed>,
    /// The node GPUs were taken on (made, or moved there): its waiting
    /// sets count it again.
    pub taken: Option<String>,
    /// A new allocation of this class, which has a budget.
    pub budget_used: Option<String>,
    /// A new allocation in this namespace, which has a GPUQuota.
    pub quota_used: Option<String>,
    /// Nodes whose lost set changed for a resource of the allocation.
    pub lost_changed: Vec<String>,
    /// D2: the nodes whose devices' holds moved (a DRA record's devices,
    /// also on the same node), and the DRA classes on them.
    pub devices: crate::world::devices::DevicesChange,
}

/// GPUs an allocation no longer holds: the node and class they were of.
pub struct Freed {
    pub node: String,
    pub class: String,
}

pub struct QuotaChange {
    pub key: String,
    /// Made, removed, or given other limits (its own status writes are no
    /// such change): the namespace's waiting sets look again.
    pub spec_changed: bool,
}

pub struct VmiChange {
    pub key: String,
    /// Its uid, being final or being deleted changed.
    pub life_changed: bool,
    /// What it asks for (annotations or spec) changed.
    pub request_changed: bool,
}

pub struct PodChange {
    /// The launcher's facts the rules read changed: these VMIs look again.
    pub vmis: BTreeSet<String>,
    /// The nodes whose use by the pod changed (the one it left, the one
    /// it is on).
    pub use_changed: Vec<Arc<str>>,
}

pub struct NodeChange {
    pub name: String,
    pub old: Option<Arc<NodeFacts>>,
    pub now: Option<Arc<NodeFacts>>,
    /// Classes whose capacity the node moved.
    pub moved: Vec<String>,
}
