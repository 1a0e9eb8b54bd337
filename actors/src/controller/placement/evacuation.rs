//! E2 in placement: the restarts under way (a VM whose VMI was deleted to
//! move it off an evacuating node, until its new VMI runs or
//! `evacuation.timeout` passes), the timer that ends one that times out,
//! and what the nodes were told (an Event at each step: a VM restarted,
//! one kept for want of a VM owner, the evacuation blocked by a VM that
//! waits at the gate).

use super::write::{VmiDelete, Write};
use super::{Placement, PlacementPoke};
use crate::api::{Kind, ObjRef};
use crate::ports::Event;
use crate::rules::{Evacuee, Restart, RuleId, decide_evacuation, restart_done};
use crate::world::split_key;
use actix::prelude::*;
use std::collections::{BTreeMap, HashSet};
use tokio::time::Instant;

#[derive(Default)]
pub(super) struct Evacuation {
    /// By VM key: the restart, since when, and whether its timeout has
    /// passed (then it no longer counts against `maxConcurrent`, but its
    /// VM waiting at the gate still blocks the evacuation).
    under_way: BTreeMap<String, (Restart, Instant, bool)>,
    /// The timer that ends the oldest restart at its timeout.
    timer: Option<(Instant, SpawnHandle)>,
    /// VMIs without a VM owner already reported, by uid.
    told_bare: HashSet<String>,
    /// The block last reported (VM, why), so it is said once.
    told_blocked: Option<(String, String)>,
}

impl Placement {
    /// E2 across the cluster: ends the restarts that are over, then the
    /// next VMI to delete, if any; more are asked for after it lands.
    pub(super) fn decide_evacuation(&mut self, ctx: &mut Context<Self>) -> Option<Write> {
        let w = self.env.world.clone();
        let cfg = w.config();
        let now = self.env.clock.now();
        let timeout = cfg.evacuation.timeout;
        let mut ended = Vec::new();
        for (vm, (r, since, timed_out)) in self.evac.under_way.iter_mut() {
            if restart_done(&w, vm, r) {
                ended.push((vm.clone(), r.node.clone(), true));
            } else if !*timed_out && now >= *since + timeout {
                *timed_out = true;
                ended.push((vm.clone(), r.node.clone(), false));
            }
        }
        for (vm, node, ran) in ended {
            let message = if ran {
                self.evac.under_way.remove(&vm);
                format!("E2: VM {vm} runs again elsewhere")
            } else {
                format!(
                    "E2: VM {vm} has not run again within {}; no longer counted as under way",
                    humantime::format_duration(timeout)
                )
            };
            self.tell_node(&node, !ran, "EvacuationStep", message);
        }
        // A timed-out restart whose VM no longer waits is forgotten.
        self.evac.under_way.retain(|vm, (r, _, timed_out)| {
            !*timed_out || crate::rules::restart_waits(&w, vm, r).is_some()
        });
        self.wake_for_timeout(timeout, ctx);
        let restarts: BTreeMap<String, Restart> = self
            .evac
            .under_way
            .iter()
            .map(|(vm, (r, _, _))| (vm.clone(), r.clone()))
            .collect();
        let counting = self.evac.under_way.values().filter(|(_, _, t)| !*t).count();
        let step = decide_evacuation(&w, &restarts, counting, cfg.evacuation.max_concurrent);
        for e in &step.bare {
            if self.evac.told_bare.insert(e.uid.clone()) {
                let message = format!(
                    "E2: VMI {} holds GPUs on node {}, which is being evacuated, and has no VirtualMachine owner: it is kept (deleted, it would not come back); stop it by hand",
                    e.vmi, e.node
                );
                self.tell_node(&e.node, true, "EvacuationBlocked", message.clone());
                let (ns, name) = split_key(&e.vmi);
                super::super::events::publish(
                    &self.env,
                    Event {
                        regarding: ObjRef::new(Kind::Vmi, Some(ns), name),
                        uid: Some(e.uid.clone()),
                        warning: true,
                        reason: "EvacuationBlocked".into(),
                        message,
                        rule: RuleId::E2,
                    },
                );
            }
        }
        // Said once while it blocks; said again should it block anew.
        self.evac
            .told_bare
            .retain(|uid| step.bare.iter().any(|e| &e.uid == uid));
        if step.blocked != self.evac.told_blocked {
            if let Some((vm, why)) = &step.blocked
                && let Some((r, _, _)) = self.evac.under_way.get(vm)
            {
                let node = r.node.clone();
                let message = format!(
                    "E2: no further VM is stopped while VM {vm}, restarted, waits at the gate: {why}"
                );
                self.tell_node(&node, true, "EvacuationBlocked", message);
            }
            self.evac.told_blocked = step.blocked.clone();
        }
        self.report_evacuation(&step);
        let e = step.restart.into_iter().next()?;
        let under_way = counting + 1;
        let write = self.restart(e, under_way, step.left, cfg.evacuation.max_concurrent);
        // Counted from the decision, not from the delete's answer: a
        // change that comes while the delete is under way (the VMI's own
        // deletion, seen by the watch) must not start a second restart.
        if let Write::DeleteVmi(d) = &write
            && let Some((vm, r)) = &d.restart
        {
            self.evac
                .under_way
                .insert(vm.clone(), (r.clone(), now, false));
            self.wake_for_timeout(timeout, ctx);
        }
        Some(write)
    }

    /// The delete that restarts `e`'s VM elsewhere, on the preconditions
    /// the cache showed (as L12 and G7).
    fn restart(&self, e: Evacuee, under_way: usize, left: usize, most: u32) -> Write {
        let vm = e.vm.clone().unwrap_or_default();
        let message = format!(
            "E2: restarting VM {vm} elsewhere (its VMI {} held GPUs here): {under_way} of at most {most} restarts under way, {left} more VMs to move",
            e.vmi
        );
        Write::DeleteVmi(Box::new(VmiDelete {
            key: e.vmi.clone(),
            uid: e.uid.clone(),
            resource_version: e.resource_version.clone(),
            event: Event {
                regarding: ObjRef::new(Kind::Node, None, &e.node),
                uid: None,
                warning: false,
                reason: "EvacuationStep".into(),
                message,
                rule: RuleId::E2,
            },
            rule: RuleId::E2,
            restart: Some((
                vm,
                Restart {
                    old_uid: e.uid,
                    node: e.node,
                },
            )),
        }))
    }

    /// A restart's delete landed (or found the VMI gone): it is under way
    /// (since its decision), and the next may follow where there is room.
    pub(super) fn restart_issued(&mut self, vm: &str, ctx: &mut Context<Self>) {
        tracing::debug!(vm, rule = "E2", "restart under way");
        self.enqueue(PlacementPoke::Evacuation, ctx);
    }

    /// A restart's delete did not land (the VMI changed, or the write
    /// failed): no restart is under way; the evacuation decides again.
    pub(super) fn restart_failed(&mut self, vm: &str, ctx: &mut Context<Self>) {
        self.evac.under_way.remove(vm);
        ctx.run_later(super::CONFLICT_RETRY, |act, ctx| {
            act.enqueue(PlacementPoke::Evacuation, ctx)
        });
    }

    /// One timer, at the first instant a restart times out.
    fn wake_for_timeout(&mut self, timeout: std::time::Duration, ctx: &mut Context<Self>) {
        let first = self
            .evac
            .under_way
            .values()
            .filter(|(_, _, timed_out)| !*timed_out)
            .map(|(_, s, _)| *s + timeout)
            .min();
        if self.evac.timer.as_ref().map(|(t, _)| *t) == first {
            return;
        }
        if let Some((_, h)) = self.evac.timer.take() {
            ctx.cancel_future(h);
        }
        let Some(at) = first else { return };
        let wait = at.saturating_duration_since(self.env.clock.now());
        let h = ctx.run_later(wait, |act, ctx| {
            act.evac.timer = None;
            act.enqueue(PlacementPoke::Evacuation, ctx);
        });
        self.evac.timer = Some((at, h));
    }

    /// `gpu_claims_evacuation_vms{node,state}`: per evacuating node, its
    /// GPU VMs live there, restarts of them under way, and the blocked.
    fn report_evacuation(&self, step: &crate::rules::EvacuationStep) {
        let figures: Vec<crate::ports::EvacuationFigures> = step
            .live
            .iter()
            .map(|(node, &live)| {
                let under_way = self
                    .evac
                    .under_way
                    .values()
                    .filter(|(r, _, timed_out)| &r.node == node && !*timed_out)
                    .count();
                let waiting = step.blocked.as_ref().is_some_and(|(vm, _)| {
                    self.evac
                        .under_way
                        .get(vm)
                        .is_some_and(|(r, _, _)| &r.node == node)
                });
                crate::ports::EvacuationFigures {
                    node: node.clone(),
                    live,
                    under_way,
                    blocked: step.bare.iter().filter(|e| &e.node == node).count()
                        + usize::from(waiting),
                }
            })
            .collect();
        self.env.telemetry.evacuation(&figures);
    }

    fn tell_node(&self, node: &str, warning: bool, reason: &str, message: String) {
        if warning {
            tracing::warn!(node, rule = "E2", reason, "{message}");
        } else {
            tracing::info!(node, rule = "E2", reason, "{message}");
        }
        super::super::events::publish(
            &self.env,
            Event {
                regarding: ObjRef::new(Kind::Node, None, node),
                uid: None,
                warning,
                reason: reason.into(),
                message,
                rule: RuleId::E2,
            },
        );
    }
}
