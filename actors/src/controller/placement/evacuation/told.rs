//! What E2 tells: the Events on a node and its VMIs (a restart, a VM kept for
//! want of a VM owner) and the evacuation figures per node.

use super::Found;
use crate::api::{Kind, ObjRef, RestartMark};
use crate::controller::Env;
use crate::controller::placement::write::{RestartWrite, VmiDelete, Write};
use crate::ports::Event;
use crate::rules::{EvacuationStep, Evacuee, RuleId};
use crate::world::{World, split_key};
use std::collections::{HashMap, HashSet};

/// An E2 Event on a node (with its uid, so that `kubectl describe node`
/// finds it), about the VMI `about` (namespace/name and uid) when it is
/// about one. Not logged: [`logged`] logs one as it is made (a restart's
/// is logged where its delete is).
pub(super) fn node_event(
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

/// `e`, logged as it is made.
pub(super) fn logged(e: Event) -> Event {
    let (node, reason, message) = (&e.regarding.name, &e.reason, &e.message);
    if e.warning {
        tracing::warn!(%node, rule = "E2", %reason, "{message}");
    } else {
        tracing::info!(%node, rule = "E2", %reason, "{message}");
    }
    e
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
        event: node_event(
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

/// What E2 said that is said once: the VMIs without a VM owner that
/// block (by uid), and the block last reported (VM, why).
#[derive(Default)]
pub(super) struct Said {
    bare: HashSet<String>,
    blocked: Option<(String, String)>,
    /// VMs kept for want of anywhere to go (by uid), with why, as said.
    nowhere: HashMap<String, String>,
}

impl Said {
    /// A VMI without a VM owner is said once while it blocks, and again
    /// should it block anew.
    pub fn bare_vmis(&mut self, env: &Env, step: &EvacuationStep) {
        for (e, why) in &step.bare {
            if self.bare.insert(e.uid.clone()) {
                let message = format!(
                    "E2: VMI {} holds GPUs on node {}, which is being evacuated, and {why}: it is kept (deleted, it would not come back); stop or restart it by hand",
                    e.vmi, e.node
                );
                let about = Some((e.vmi.as_str(), e.uid.as_str()));
                publish_on_node(
                    env,
                    &e.node,
                    about,
                    true,
                    "EvacuationBlocked",
                    message.clone(),
                );
                blocked_on_vmi(env, e, true, message);
            }
        }
        self.bare
            .retain(|uid| step.bare.iter().any(|(e, _)| &e.uid == uid));
    }

    /// A VM not stopped because its set could go nowhere else now: said
    /// on its node and its VMI once, and again should the reason change.
    pub fn nowhere(&mut self, env: &Env, step: &EvacuationStep) {
        for (e, why) in &step.nowhere {
            if self.nowhere.get(&e.uid) == Some(why) {
                continue;
            }
            self.nowhere.insert(e.uid.clone(), why.clone());
            let message = format!(
                "E2: VMI {} on node {}, which is being evacuated, is not stopped: its set could not be placed on another node now ({why}); it keeps running and is tried again as GPUs free",
                e.vmi, e.node
            );
            tracing::info!(vmi = %e.vmi, node = %e.node, rule = "E2", "{message}");
            let about = Some((e.vmi.as_str(), e.uid.as_str()));
            publish_on_node(
                env,
                &e.node,
                about,
                false,
                "EvacuationBlocked",
                message.clone(),
            );
            blocked_on_vmi(env, e, false, message);
        }
        // Tried again and taken, or gone: forgotten (the next block is said).
        self.nowhere
            .retain(|uid, _| step.nowhere.iter().any(|(e, _)| &e.uid == uid));
    }

    /// A restarted VM whose set waits at the gate blocks further stops:
    /// said on its node once per block.
    pub fn blocked(&mut self, env: &Env, step: &EvacuationStep, found: &Found) {
        if step.blocked == self.blocked {
            return;
        }
        if let Some((vm, why)) = &step.blocked
            && let Some(r) = found.restarted.get(vm)
        {
            let message = format!(
                "E2: no further VM is stopped while VM {vm}, restarted, waits at the gate: {why}"
            );
            let about = Some((vm.as_str(), r.old_uid.as_str()));
            publish_on_node(env, &r.node, about, true, "EvacuationBlocked", message);
        }
        self.blocked = step.blocked.clone();
    }
}

/// An E2 `EvacuationBlocked` Event on the VMI of `e`.
fn blocked_on_vmi(env: &Env, e: &Evacuee, warning: bool, message: String) {
    let (ns, name) = split_key(&e.vmi);
    crate::controller::events::publish(
        env,
        Event {
            regarding: ObjRef::new(Kind::Vmi, Some(ns), name),
            uid: Some(e.uid.clone()),
            warning,
            reason: "EvacuationBlocked".into(),
            message,
            rule: RuleId::E2,
            related: None,
        },
    );
}

/// `gpu_claims_evacuation_vms{node,state}`: per evacuating node, its GPU
/// VMs live there, restarts of them under way, and the blocked.
pub(super) fn report(env: &Env, step: &EvacuationStep, found: &Found) {
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
                + step.nowhere.iter().filter(|(e, _)| &e.node == node).count()
                + usize::from(blocked_node == Some(node.as_str())),
        })
        .collect();
    env.telemetry.evacuation(&figures);
}

/// An E2 Event on a node, published.
pub(super) fn publish_on_node(
    env: &Env,
    node: &str,
    about: Option<(&str, &str)>,
    warning: bool,
    reason: &str,
    message: String,
) {
    let e = logged(node_event(
        &env.world, node, about, warning, reason, message,
    ));
    crate::controller::events::publish(env, e);
}
