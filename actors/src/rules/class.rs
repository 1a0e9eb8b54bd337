//! L1 and L11 for classes, and class status.

use super::{RuleId, needs_finalizer};
use crate::api::amount::{MOST, Tally};
use crate::api::{CLASS_FINALIZER, GPUClass, GPUClassStatus, has_finalizer, is_deleting};
use crate::world::World;

#[derive(Clone, Debug, PartialEq)]
pub enum ClassIntent {
    AddFinalizer,
    RemoveFinalizer,
    WriteStatus(GPUClassStatus),
}

#[derive(Clone, Debug, PartialEq)]
pub enum ClassStep {
    Write(RuleId, ClassIntent),
    Idle,
}

/// The status a class should show: capacity on Ready nodes that serve it,
/// and what its claims hold or owe. Past what Kubernetes counts (an int64:
/// nodes that together advertise more) it shows the most it can store.
pub fn class_status(c: &GPUClass, w: &World, capacity: u64) -> GPUClassStatus {
    let mut status = c.status.clone().unwrap_or_default();
    status.capacity = Some(capacity.min(MOST));
    status.allocated = Some(
        w.class_usage(c.metadata.name.as_deref().unwrap_or_default())
            .allocated,
    );
    status
}

/// GPUs of the class's resource on Ready nodes that match its selector.
pub fn capacity_of(c: &GPUClass, w: &World) -> u64 {
    let mut sum = Tally::default();
    w.for_each_node(|n| {
        if n.ready && n.matches(c.spec.node_selector.as_ref()) {
            sum.add(n.allocatable(&c.spec.resource_name));
        }
    });
    sum.get()
}

/// L1, then L11 (a deleting class loses its finalizer once no claim of it
/// holds or owes GPUs; `released_unseen` counts claims this round released
/// that the cache still shows holding), then status for a live class.
pub fn decide_class(c: &GPUClass, w: &World, capacity: u64, released_unseen: u64) -> ClassStep {
    if needs_finalizer(&c.metadata, CLASS_FINALIZER) {
        return ClassStep::Write(RuleId::L1, ClassIntent::AddFinalizer);
    }
    let name = c.metadata.name.as_deref().unwrap_or_default();
    if is_deleting(&c.metadata) {
        let held = w.class_usage(name).holders > released_unseen;
        if has_finalizer(&c.metadata, CLASS_FINALIZER) && !held {
            return ClassStep::Write(RuleId::L11, ClassIntent::RemoveFinalizer);
        }
        return ClassStep::Idle;
    }
    let status = class_status(c, w, capacity);
    if c.status.as_ref() != Some(&status) {
        return ClassStep::Write(RuleId::ClassStatus, ClassIntent::WriteStatus(status));
    }
    ClassStep::Idle
}
