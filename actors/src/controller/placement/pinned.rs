//! G7 in placement: the VMIs whose pinned launcher pod the scheduler
//! cannot place, since when the controller has seen each so, the timer
//! that brings it back when `unschedulableGrace` runs out, and the deletes
//! already issued (a lagging cache still shows the VMI; deleting it again
//! would change nothing). An entry goes when its VMI leaves that state.

use super::write::{VmiDelete, Write};
use super::{LookAt, Placement};
use crate::api::{Kind, ObjRef, Vmi};
use crate::ports::Event;
use crate::rules::{RuleId, unplaceable_pod};
use crate::world::split_key;
use actix::prelude::*;
use std::collections::HashMap;
use tokio::time::Instant;

#[derive(Default)]
pub(super) struct Pinned {
    /// VMI key to (pod uid, first seen Unschedulable).
    since: HashMap<String, (String, Instant)>,
    timers: HashMap<String, (Instant, SpawnHandle)>,
    /// VMI key to the (uid, resourceVersion) a delete was issued for.
    issued: HashMap<String, (String, String)>,
}

impl Placement {
    /// G7 for one VMI: the delete that is due, if any; a timer for one
    /// that will be.
    pub(super) fn decide_unplaceable(
        &mut self,
        k: &str,
        v: &Vmi,
        ctx: &mut Context<Self>,
    ) -> Option<Write> {
        let Some(stuck) = unplaceable_pod(v, &self.env.world) else {
            self.forget_unplaceable(k, ctx);
            return None;
        };
        let now = self.env.clock.now();
        let entry = self
            .pinned
            .since
            .entry(k.to_string())
            .or_insert_with(|| (stuck.pod_uid.clone(), now));
        if entry.0 != stuck.pod_uid {
            *entry = (stuck.pod_uid.clone(), now);
        }
        let since = entry.1;
        self.report_unplaceable();
        let grace = self.env.world.config().unschedulable_grace;
        let due = since + grace;
        if now < due {
            self.wake_at(k, due, ctx);
            return None;
        }
        let (uid, rv) = (
            v.uid().to_string(),
            v.metadata.resource_version.clone().unwrap_or_default(),
        );
        if self.pinned.issued.get(k) == Some(&(uid.clone(), rv.clone())) {
            return None;
        }
        let (ns, name) = split_key(k);
        let message = format!(
            "launcher pod {} was pinned to {} and the scheduler has not placed it for {}; \
             deleting the VMI so that its VM starts again at the gate. The scheduler says: {}",
            split_key(&stuck.pod).1,
            stuck.node,
            humantime::format_duration(grace),
            stuck.message
        );
        Some(Write::DeleteVmi(Box::new(VmiDelete {
            key: k.to_string(),
            uid: uid.clone(),
            resource_version: rv,
            event: Event {
                regarding: ObjRef::new(Kind::Vmi, Some(ns), name),
                uid: Some(uid),
                warning: true,
                reason: "PinnedPodUnschedulable".into(),
                message: format!("G7: {message}"),
                rule: RuleId::G7,
                related: None,
            },
            rule: RuleId::G7,
            restart: None,
        })))
    }

    /// The delete landed (or found the VMI gone or changed).
    pub(super) fn issued_unplaceable(&mut self, k: String, uid: String, rv: String) {
        self.pinned.issued.insert(k, (uid, rv));
    }

    pub(super) fn forget_unplaceable(&mut self, k: &str, ctx: &mut Context<Self>) {
        let had = self.pinned.since.remove(k).is_some();
        self.pinned.issued.remove(k);
        if let Some((_, h)) = self.pinned.timers.remove(k) {
            ctx.cancel_future(h);
        }
        if had {
            self.report_unplaceable();
        }
    }

    /// One timer per VMI, at the instant its grace ends.
    fn wake_at(&mut self, k: &str, at: Instant, ctx: &mut Context<Self>) {
        if self.pinned.timers.get(k).is_some_and(|(t, _)| *t == at) {
            return;
        }
        if let Some((_, h)) = self.pinned.timers.remove(k) {
            ctx.cancel_future(h);
        }
        let wait = at.saturating_duration_since(self.env.clock.now());
        let key = k.to_string();
        let h = ctx.run_later(wait, move |act, ctx| {
            act.pinned.timers.remove(&key);
            act.enqueue(LookAt::Vmi(key), ctx);
        });
        self.pinned.timers.insert(k.to_string(), (at, h));
    }

    /// The config changed: every VMI whose grace is counting is decided
    /// again (a shorter `unschedulableGrace` may be over already).
    pub(super) fn recount_unplaceable(&mut self, ctx: &mut Context<Self>) {
        let keys: Vec<String> = self.pinned.since.keys().cloned().collect();
        for k in keys {
            self.enqueue(LookAt::Vmi(k), ctx);
        }
    }

    fn report_unplaceable(&self) {
        self.env
            .telemetry
            .unschedulable_pods(self.pinned.since.len());
    }
}
