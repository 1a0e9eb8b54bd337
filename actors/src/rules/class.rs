//! L1 and L11 for classes, and class status.

use super::{RuleId, Step, needs_finalizer};
use crate::api::amount::{MOST, Tally};
use crate::api::{
    CLASS_FINALIZER, CONDITION_DRA_UNAVAILABLE, CONDITION_EXCLUSIVE_DEVICES,
    CONDITION_SELECTOR_INVALID, CONDITION_SHARED_RESOURCE, GPUClass, GPUClassStatus, has_finalizer,
    is_deleting, remove_condition, set_condition,
};
use crate::world::World;
use crate::world::devices::{DraProblem, Exclusive};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

#[derive(Clone, Debug, PartialEq)]
pub enum ClassIntent {
    AddFinalizer,
    RemoveFinalizer,
    WriteStatus(GPUClassStatus),
}

/// The status a class should show: capacity on Ready nodes that serve it,
/// and what its claims hold or owe. Past what Kubernetes counts (an int64:
/// nodes that together advertise more) it shows the most it can store.
/// What a claim of a class that does not exist is told (G5): the name,
/// and the classes there are (ten at most), so that a typo shows at once.
pub fn class_missing(name: &str, w: &World) -> String {
    const SHOWN: usize = 10;
    let classes: Vec<String> = w
        .keys(crate::api::Kind::Class)
        .into_iter()
        .filter(|k| w.class(k).is_some_and(|c| !is_deleting(&c.metadata)))
        .collect();
    let shown = classes[..classes.len().min(SHOWN)].join(", ");
    match classes.len() {
        0 => format!("GPUClass {name} does not exist, nor does any other yet"),
        n if n <= SHOWN => format!("GPUClass {name} does not exist; the classes are {shown}"),
        n => format!(
            "GPUClass {name} does not exist; the classes are {shown} and {} more",
            n - SHOWN
        ),
    }
}

pub fn class_status(c: &GPUClass, w: &World, capacity: u64) -> GPUClassStatus {
    let mut status = c.status.clone().unwrap_or_default();
    status.capacity = Some(capacity.min(MOST));
    status.allocated = Some(
        w.class_usage(c.metadata.name.as_deref().unwrap_or_default())
            .allocated,
    );
    status
}

/// G2: a class whose device plugin resource another live class serves
/// too says so. Budgets count each class's own claims, so together they
/// can hold more of the resource than either budget; and a VM asking for
/// the resource in its spec alone cannot be given a class (it is told
/// InvalidGPURequest). Nothing forbids it: the platform is told.
fn shared_resource_condition(c: &GPUClass, w: &World, status: &mut GPUClassStatus, now: Time) {
    let name = c.metadata.name.as_deref().unwrap_or_default();
    let resource = &c.spec.resource_name;
    let others: Vec<String> = if resource.is_empty() || is_deleting(&c.metadata) {
        Vec::new()
    } else {
        let mut o: Vec<String> = w.live_classes_serving(resource).into_iter().collect();
        o.retain(|n| n != name);
        o
    };
    if others.is_empty() {
        remove_condition(&mut status.conditions, CONDITION_SHARED_RESOURCE);
        return;
    }
    // Without the other classes' names: a message that changed with every
    // class made or deleted would rewrite each sibling's status each time.
    let message = format!(
        "another GPUClass serves {resource} too (kubectl get gpuclasses): each class's budget counts only its own claims, and a VM that asks for {resource} in its spec alone cannot tell which class it wants (it waits, InvalidGPURequest); give such VMs the gpu.cozystack.io/class annotation, or keep one class per resource"
    );
    set_condition(
        &mut status.conditions,
        Condition {
            type_: CONDITION_SHARED_RESOURCE.into(),
            status: "True".into(),
            reason: "ResourceServedByOthers".into(),
            message,
            last_transition_time: now,
            observed_generation: c.metadata.generation,
        },
    );
}

/// D1: the conditions that say why a DRA class serves no device, set
/// (keeping their time while they stay) or removed; a class that takes no
/// devices through DRA has neither.
pub fn dra_conditions(c: &GPUClass, w: &World, status: &mut GPUClassStatus, now: Time) {
    let name = c.metadata.name.as_deref().unwrap_or_default();
    let problem = c.spec.device_class().and_then(|_| w.dra_problem(name));
    let (selector, unavailable) = match &problem {
        Some(p @ DraProblem::SelectorInvalid(e)) => (Some((e.error.reason(), p)), None),
        Some(p @ DraProblem::NotServed(_)) => (None, Some(("NotServed", p))),
        Some(p @ DraProblem::DeviceClassMissing(_)) => (None, Some(("DeviceClassMissing", p))),
        None => (None, None),
    };
    exclusive_condition(c, w, status, now.clone());
    for (type_, said) in [
        (CONDITION_SELECTOR_INVALID, selector),
        (CONDITION_DRA_UNAVAILABLE, unavailable),
    ] {
        match said {
            Some((reason, p)) => set_condition(
                &mut status.conditions,
                Condition {
                    type_: type_.into(),
                    status: "True".into(),
                    reason: reason.into(),
                    message: p.to_string(),
                    last_transition_time: now.clone(),
                    observed_generation: c.metadata.generation,
                },
            ),
            None => {
                remove_condition(&mut status.conditions, type_);
            }
        }
    }
}

/// D7: on a DRA class, whether the pools of its devices are closed to
/// kube-scheduler (True), or why not (False: D7 turned off, no
/// DeviceTaintRule served, ours refused).
fn exclusive_condition(c: &GPUClass, w: &World, status: &mut GPUClassStatus, now: Time) {
    if c.spec.device_class().is_none() {
        remove_condition(&mut status.conditions, CONDITION_EXCLUSIVE_DEVICES);
        return;
    }
    let (state, reason, message) = match w.exclusive() {
        Exclusive::On => (
            "True",
            "PoolsClosed",
            "every pool in which this class has a device is closed to kube-scheduler by a DeviceTaintRule of gpu-claims (gpu.cozystack.io/managed:NoSchedule): only gpu-claims allocates its devices".to_string(),
        ),
        Exclusive::Off(off) => ("False", off.reason(), off.to_string()),
    };
    set_condition(
        &mut status.conditions,
        Condition {
            type_: CONDITION_EXCLUSIVE_DEVICES.into(),
            status: state.into(),
            reason: reason.into(),
            message,
            last_transition_time: now,
            observed_generation: c.metadata.generation,
        },
    );
}

/// GPUs of the class's resource on Ready nodes that match its selector;
/// for a DRA class, its devices there that are free or its own (D2).
pub fn capacity_of(c: &GPUClass, w: &World) -> u64 {
    if c.spec.device_class().is_some() {
        return w.dra_capacity(c);
    }
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
pub fn decide_class(
    c: &GPUClass,
    w: &World,
    capacity: u64,
    released_unseen: u64,
    now: Time,
) -> Step<ClassIntent> {
    if needs_finalizer(&c.metadata, CLASS_FINALIZER) {
        return Step::Do(RuleId::L1, ClassIntent::AddFinalizer);
    }
    let name = c.metadata.name.as_deref().unwrap_or_default();
    if is_deleting(&c.metadata) {
        let held = w.class_usage(name).holders > released_unseen;
        if has_finalizer(&c.metadata, CLASS_FINALIZER) && !held {
            return Step::Do(RuleId::L11, ClassIntent::RemoveFinalizer);
        }
        return Step::Idle;
    }
    let mut status = class_status(c, w, capacity);
    let counted = status.clone();
    shared_resource_condition(c, w, &mut status, now.clone());
    let shared = status.clone();
    dra_conditions(c, w, &mut status, now);
    if c.status.as_ref() != Some(&status) {
        // The rule that caused the write: D1 when what the class says of
        // its devices changed, G2 when whether another class serves its
        // resource did, else its counts.
        let rule = if status.conditions != shared.conditions {
            RuleId::D1
        } else if shared.conditions != counted.conditions {
            RuleId::G2
        } else {
            RuleId::ClassStatus
        };
        return Step::Do(rule, ClassIntent::WriteStatus(status));
    }
    Step::Idle
}
