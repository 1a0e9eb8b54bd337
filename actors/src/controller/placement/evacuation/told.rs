//! What E2 tells: the Events on a node and its VMIs (a restart, a VM kept for
//! want of a VM owner) and the evacuation figures per node.

use super::*;
use crate::api::{Kind, ObjRef, RestartMark};
use crate::controller::placement::Placement;
use crate::controller::placement::write::{RestartWrite, VmiDelete, Write};
use crate::ports::Event;
use crate::rules::{Evacuee, RuleId};
use crate::world::{World, split_key};

/// An E2 Event on a node (with its uid, so that `kubectl describe node`
/// finds it), about the VMI `about` (namespace/name and uid) when it is
/// about one; logged as it is made.
pub(super) fn node_event(
    w: &World,
    node: &str,
    about: Option<(&str, &str)>,
    warning: bool,
    reason: &str,
    message: String,
) -> Event {
    if warning {
        tracing::warn!(node, rule = "E2", reason, "{message}");
    } else {
        tracing::info!(node, rule = "E2", reason, "{message}");
    }
    quiet_node_event(w, node, about, warning, reason, message)
}

/// `node_event`, not logged (a restart's, logged where its delete is).
pub(super) fn quiet_node_event(
    w: &World,
    node: &str,
    about: Option<(&str, &str)>,
    warning: bool,
    reason: &str,
    message: String,
) -> Event {
    let related = about.map(|(vmi, uid)| {
        let (ns, name) = split_key(vmi);
        (
            ObjRef::new(Kind::Vmi, Some(ns), name),
            Some(uid.to_string()),
        )
    });
    Event {
        regarding: ObjRef::new(Kind::Node, None, node),
        uid: w.node(node).and_then(|n| n.uid.clone()),
        warning,
        reason: reason.into(),
        message,
        rule: RuleId::E2,
        related,
    }
}

/// The writes that restart `e`'s VM elsewhere: its mark on the node (None:
/// the node keeps it already, the restart is resumed), then the VMI's
/// delete on the preconditions the cache showed (as L12 and G7).
pub(super) fn restart(
    w: &World,
    e: Evacuee,
    mark: Option<RestartMark>,
    under_way: usize,
    left: Option<usize>,
    most: u32,
) -> Write {
    let vm = e.vm.clone().unwrap_or_default();
    let message = match left {
        Some(left) => format!(
            "E2: restarting VM {vm} elsewhere (its VMI {} held GPUs here): {under_way} of at most {most} restarts under way, {left} more VMs to move",
            e.vmi
        ),
        None => format!(
            "E2: restarting VM {vm} elsewhere (its VMI {} held GPUs here; the restart was marked and its VMI not yet deleted): {under_way} of at most {most} restarts under way",
            e.vmi
        ),
    };
    Write::DeleteVmi(Box::new(VmiDelete {
        key: e.vmi.clone(),
        uid: e.uid.clone(),
        resource_version: e.resource_version.clone(),
        event: quiet_node_event(
            w,
            &e.node,
            Some((&e.vmi, &e.uid)),
            false,
            "EvacuationStep",
            message,
        ),
        rule: RuleId::E2,
        restart: Some(RestartWrite {
            vm,
            node: e.node,
            mark,
        }),
    }))
}

impl Placement {
    /// A VMI without a VM owner is said once while it blocks, and again
    /// should it block anew.
    pub(super) fn warn_of_bare_vmis(&mut self, step: &crate::rules::EvacuationStep) {
        for (e, why) in &step.bare {
            if self.evac.told_bare.insert(e.uid.clone()) {
                let message = format!(
                    "E2: VMI {} holds GPUs on node {}, which is being evacuated, and {why}: it is kept (deleted, it would not come back); stop or restart it by hand",
                    e.vmi, e.node
                );
                let about = Some((e.vmi.as_str(), e.uid.as_str()));
                self.event_on_node(&e.node, about, true, "EvacuationBlocked", message.clone());
                let (ns, name) = split_key(&e.vmi);
                crate::controller::events::publish(
                    &self.env,
                    Event {
                        regarding: ObjRef::new(Kind::Vmi, Some(ns), name),
                        uid: Some(e.uid.clone()),
                        warning: true,
                        reason: "EvacuationBlocked".into(),
                        message,
                        rule: RuleId::E2,
                        related: None,
                    },
                );
            }
        }
        self.evac
            .told_bare
            .retain(|uid| step.bare.iter().any(|(e, _)| &e.uid == uid));
    }

    /// `gpu_claims_evacuation_vms{node,state}`: per evacuating node, its
    /// GPU VMs live there, restarts of them under way, and the blocked.
    pub(super) fn report_evacuation(&self, step: &crate::rules::EvacuationStep, found: &Marks) {
        let blocked_node = step
            .blocked
            .as_ref()
            .and_then(|(vm, _)| found.restarted.get(vm))
            .map(|r| r.node.as_str());
        let figures: Vec<crate::ports::EvacuationFigures> = step
            .live
            .iter()
            .map(|(node, &live)| crate::ports::EvacuationFigures {
                node: node.clone(),
                live,
                under_way: found.by_node.get(node).copied().unwrap_or(0),
                blocked: step.bare.iter().filter(|(e, _)| &e.node == node).count()
                    + usize::from(blocked_node == Some(node.as_str())),
            })
            .collect();
        self.env.telemetry.evacuation(&figures);
    }

    pub(super) fn event_on_node(
        &self,
        node: &str,
        about: Option<(&str, &str)>,
        warning: bool,
        reason: &str,
        message: String,
    ) {
        let e = node_event(&self.env.world, node, about, warning, reason, message);
        crate::controller::events::publish(&self.env, e);
    }
}
