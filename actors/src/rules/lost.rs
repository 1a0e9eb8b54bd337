//! G6: a claim on a failed node becomes Lost; an unattached Lost claim is
//! Bound again when its node is back.

use super::{ClaimIntent, RuleId, Step};
use crate::api::{CONDITION_LOST, ClaimPhase, GPUClaim, remove_condition, set_condition};
use crate::world::World;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Why a node no longer holds a claim's GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostReason {
    NodeDeleted,
    NodeNotReady,
    DevicesLost,
}

impl LostReason {
    pub fn as_str(self) -> &'static str {
        match self {
            LostReason::NodeDeleted => "NodeDeleted",
            LostReason::NodeNotReady => "NodeNotReady",
            LostReason::DevicesLost => "DevicesLost",
        }
    }
}

/// Why the claim's node cannot hold it now, if it cannot.
pub fn lost_reason(c: &GPUClaim, w: &World) -> Option<LostReason> {
    let node = c.node_name()?;
    // D6: a DRA class's claim is lost with its node, or its devices.
    if w.class(&c.spec.class_name)
        .is_some_and(|k| k.spec.device_class_name.is_some())
    {
        return node_failed(w, node, "")
            .or_else(|| (!w.lost_devices(c).is_empty()).then_some(LostReason::DevicesLost))
            // D8: a device another ResourceClaim took, and none to move to.
            .or_else(|| super::lost_to_another(c, w).map(|_| LostReason::DevicesLost));
    }
    match w.resource_of(&c.spec.class_name) {
        Some(resource) => node_failed(w, node, &resource),
        // Without its class, only the node itself can have failed.
        None => node_failed(w, node, "").filter(|r| *r != LostReason::DevicesLost),
    }
}

/// Why `node` cannot hold GPUs of `resource` now, if it cannot: it is
/// gone, not Ready, or its lost set covers the resource.
pub fn node_failed(w: &World, node: &str, resource: &str) -> Option<LostReason> {
    let Some(n) = w.node(node) else {
        return Some(LostReason::NodeDeleted);
    };
    if !n.ready {
        return Some(LostReason::NodeNotReady);
    }
    w.lost_covers(node, resource)
        .then_some(LostReason::DevicesLost)
}

/// G6 for one claim: Bound or Attached on a failed node becomes Lost (its
/// record stays); Lost and unattached on a node that is back becomes Bound.
/// A Lost claim that is attached comes back through L4 instead.
pub fn decide_lost(c: &GPUClaim, w: &World, now: Time) -> Step<ClaimIntent> {
    let phase = c.phase();
    match (phase, lost_reason(c, w)) {
        (ClaimPhase::Bound | ClaimPhase::Attached, Some(reason)) => {
            let mut status = c.status.clone().unwrap_or_default();
            status.phase = Some(ClaimPhase::Lost);
            let node = c.node_name().unwrap_or_default();
            // D6: a DRA class's devices, not its node, were lost; D8:
            // another ResourceClaim took one.
            let lost = match reason {
                LostReason::DevicesLost => w.lost_devices(c),
                _ => Vec::new(),
            };
            let taken = match (reason, lost.is_empty()) {
                (LostReason::DevicesLost, true) => super::lost_to_another(c, w),
                _ => None,
            };
            let message = match (reason, &taken) {
                (LostReason::NodeDeleted, _) => format!("node {node} was deleted"),
                (LostReason::NodeNotReady, _) => format!("node {node} is not Ready"),
                (LostReason::DevicesLost, Some(t)) => format!(
                    "{t}, and node {node} has no other free device of GPUClass {}: the claim moves when its VM next starts",
                    c.spec.class_name
                ),
                (LostReason::DevicesLost, None) => match lost.as_slice() {
                    [] => format!("node {node} lost the GPUs of this class's resource"),
                    lost => {
                        let names: Vec<String> = lost.iter().map(|d| d.to_string()).collect();
                        format!(
                            "devices {} of node {node} are no longer published or are tainted NoExecute",
                            names.join(", ")
                        )
                    }
                },
            };
            let cond = Condition {
                type_: CONDITION_LOST.into(),
                status: "True".into(),
                reason: reason.as_str().into(),
                message,
                last_transition_time: now,
                observed_generation: c.metadata.generation,
            };
            set_condition(&mut status.conditions, cond);
            let rule = match (lost.is_empty(), taken.is_some()) {
                (_, true) => RuleId::D8,
                (true, false) => RuleId::G6,
                (false, false) => RuleId::D6,
            };
            Step::Do(rule, ClaimIntent::WriteStatus(status))
        }
        (ClaimPhase::Lost, None) if c.attached_vmi_name().is_none() && w.node_is_back(c) => {
            let mut status = c.status.clone().unwrap_or_default();
            status.phase = Some(ClaimPhase::Bound);
            remove_condition(&mut status.conditions, CONDITION_LOST);
            Step::Do(RuleId::G6, ClaimIntent::WriteStatus(status))
        }
        _ => Step::Idle,
    }
}
