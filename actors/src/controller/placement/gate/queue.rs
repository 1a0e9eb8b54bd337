//! O1 and O2 in the gate: a set's place in the order, the heads that hold
//! it back while it is decided, whether it now leads its classes (and the
//! `QueueHead` condition its claims carry while it does), and what is said
//! when a class's head moves or starts holding others back.

use super::Gate;
use crate::api::{
    CONDITION_QUEUE_HEAD, GPUClaim, GPUClaimStatus, Kind, ObjRef, Vmi, remove_condition,
    set_condition,
};
use crate::controller::placement::{LookAt, Shared};
use crate::ports::Event;
use crate::rules::queueing::{Held, OrderKey, order_key};
use crate::rules::{Lead, RuleId, requested_claims};
use crate::world::{World, key, split_key};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use std::collections::BTreeMap;
use std::time::Duration;

use super::heads::{HeadMoved, holds_at};

/// The classes of the claims a VMI's set names.
fn classes_of(v: &Vmi, w: &World) -> Vec<String> {
    let ns = v.metadata.namespace.as_deref().unwrap_or_default();
    let mut classes: Vec<String> = requested_claims(v, w)
        .iter()
        .filter_map(|n| w.claim(&key(ns, n)))
        .map(|c| c.spec.class_name.clone())
        .collect();
    classes.sort();
    classes.dedup();
    classes
}

impl Gate {
    /// O1, O2: the set's place, and the heads that hold it back now.
    pub(super) fn held_for(&self, v: &Vmi, s: &Shared) -> (OrderKey, Vec<Held>) {
        let w = &s.env.world;
        let key = order_key(v, w);
        let after = w.config().queueing.head_of_line_after;
        let held = self
            .heads
            .holding(&classes_of(v, w), &key, after, s.env.clock.wall());
        (key, held)
    }

    /// O2: the set of `k` was decided to wait (`lead`: what it could
    /// lead) or not (None). The classes it leads now, with since when.
    pub(super) fn led(
        &mut self,
        k: &str,
        v: &Vmi,
        key: OrderKey,
        lead: Option<Lead>,
        claims: &[std::sync::Arc<GPUClaim>],
        s: &mut Shared,
    ) -> BTreeMap<String, Timestamp> {
        let now = s.env.clock.wall();
        let restored = restored(v, claims);
        let moved = self.heads.decided(k, key, lead, &restored, now);
        // A head its claims named before a restart was told then: not
        // again (nor, once it holds others back, of that).
        let after = s.env.world.config().queueing.head_of_line_after;
        let mut told = Vec::new();
        for m in &moved {
            let Some(new) = m.new.as_ref().filter(|n| n.vmi == k) else {
                continue;
            };
            if restored.contains_key(&m.class) {
                told.push(m.class.clone());
                if after.is_some_and(|a| holds_at(new.since, a, now)) {
                    self.announced.insert(m.class.clone(), new.vmi.clone());
                }
            }
        }
        self.announce(moved, &told, s);
        self.heads.led_by(k)
    }

    /// O2: the set of `k` no longer waits (placed, gone): it leads nothing.
    pub(super) fn leads_nothing(&mut self, k: &str, s: &mut Shared) {
        let moved = self.heads.forget(k, s.env.clock.wall());
        self.announce(moved, &[], s);
    }

    /// What follows a class's head moving: the sets it held back look
    /// again (`LookAt::Head`), the old head and the new are decided again
    /// (their claims' `QueueHead` follows), the new one is told, and the
    /// class is looked at again when the new head starts holding others
    /// back. A class in `told` keeps quiet: its new head was told before.
    fn announce(&mut self, moved: Vec<HeadMoved>, told: &[String], s: &mut Shared) {
        let after = s.env.world.config().queueing.head_of_line_after;
        for m in moved {
            s.asks.now.push(LookAt::Head(m.class.clone()));
            if let Some(old) = &m.old {
                s.asks.now.push(LookAt::Vmi(old.vmi.clone()));
            }
            let Some(new) = &m.new else {
                s.asks.timers.push((LookAt::Head(m.class.clone()), None));
                continue;
            };
            s.asks.now.push(LookAt::Vmi(new.vmi.clone()));
            if let Some(a) = after {
                let at = hold_instant(s, new.since, a);
                s.asks
                    .timers
                    .push((LookAt::Head(m.class.clone()), Some(at)));
            }
            if told.contains(&m.class) {
                continue;
            }
            let wait = match after {
                Some(a) => format!(
                    "once it has waited {} there, later sets of lower or equal priority are held off the nodes that could hold it and the class's budget",
                    humantime::format_duration(a)
                ),
                None => "no set is held back for it (queueing.headOfLineAfter is off)".into(),
            };
            let message = format!(
                "O2: the set is at the head of GPUClass {} (priority {}): the class's GPUs that free and could hold it go to it first; {wait}",
                m.class,
                new.key.priority()
            );
            vmi_event(s, &new.vmi, "QueueHead", message);
            self.announced.remove(&m.class);
        }
    }

    /// O2: `class` looked at again: once its head starts holding others
    /// back, it is told (once per head).
    pub(in crate::controller::placement) fn head_looked_at(&mut self, class: &str, s: &mut Shared) {
        let Some(after) = s.env.world.config().queueing.head_of_line_after else {
            return;
        };
        let Some(head) = self.heads.head(class).cloned() else {
            return;
        };
        if !holds_at(head.since, after, s.env.clock.wall()) {
            let at = hold_instant(s, head.since, after);
            s.asks
                .timers
                .push((LookAt::Head(class.to_string()), Some(at)));
            return;
        }
        if self.announced.get(class) == Some(&head.vmi) {
            return;
        }
        // A head over budget holds the class's budget from every later
        // set, whatever it waits for now (Queued comes before NoCapacity
        // in G5's order): all of the class's sets look again.
        if self.heads.over_budget(class) {
            self.recheck.budget_held(class);
        }
        let message = format!(
            "O2: the set has led GPUClass {class} since {} ({} or more): later sets of lower or equal priority wait Queued rather than take the nodes that could hold it or the class's budget",
            head.since,
            humantime::format_duration(after)
        );
        vmi_event(s, &head.vmi, "HoldingBack", message);
        self.announced.insert(class.to_string(), head.vmi);
    }
}

/// The instant (on the actor's clock) a head that leads since `since`
/// starts holding others back.
fn hold_instant(s: &Shared, since: Timestamp, after: Duration) -> tokio::time::Instant {
    let now = s.env.clock.wall();
    let waited: Duration = since.duration_until(now).try_into().unwrap_or_default();
    s.env.clock.now() + after.saturating_sub(waited)
}

/// A Normal Event on the VMI `vmi`, with the rule O2.
fn vmi_event(s: &Shared, vmi: &str, reason: &str, message: String) {
    let Some(v) = s.env.world.vmi(vmi) else {
        return;
    };
    tracing::info!(vmi, rule = "O2", reason, "{message}");
    let (ns, name) = split_key(vmi);
    crate::controller::events::publish(
        s.env,
        Event {
            regarding: ObjRef::new(Kind::Vmi, Some(ns), name),
            uid: v.metadata.uid.clone(),
            warning: false,
            reason: reason.into(),
            message,
            rule: RuleId::O2,
            related: None,
        },
    );
}

/// Since when the claims of `v`'s set say it leads each class: the
/// `QueueHead` condition that names this VMI (by uid: a later VMI of the
/// same name starts afresh).
fn restored(v: &Vmi, claims: &[std::sync::Arc<GPUClaim>]) -> BTreeMap<String, Timestamp> {
    let mut out = BTreeMap::new();
    for c in claims {
        let Some(cond) = c.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|x| x.type_ == CONDITION_QUEUE_HEAD && x.status == "True")
        }) else {
            continue;
        };
        if cond.message.contains(&uid_phrase(v)) {
            let t = cond.last_transition_time.0;
            let e = out.entry(c.spec.class_name.clone()).or_insert(t);
            *e = (*e).min(t);
        }
    }
    out
}

fn uid_phrase(v: &Vmi) -> String {
    format!("(uid {})", v.uid())
}

/// A waiting claim's `QueueHead` condition: set while its set leads the
/// claim's class (since then), removed otherwise.
pub(super) fn queue_head(
    status: &mut GPUClaimStatus,
    c: &GPUClaim,
    v: &Vmi,
    led: &BTreeMap<String, Timestamp>,
) {
    match led.get(&c.spec.class_name) {
        Some(since) => {
            set_condition(
                &mut status.conditions,
                Condition {
                    type_: CONDITION_QUEUE_HEAD.into(),
                    status: "True".into(),
                    reason: "HeadOfClass".into(),
                    message: format!(
                        "the set of VMI {}/{} {} leads GPUClass {}: the class's GPUs that free go to it first (O2)",
                        v.metadata.namespace.as_deref().unwrap_or_default(),
                        v.metadata.name.as_deref().unwrap_or_default(),
                        uid_phrase(v),
                        c.spec.class_name
                    ),
                    last_transition_time: Time(*since),
                    observed_generation: c.metadata.generation,
                },
            );
        }
        None => {
            remove_condition(&mut status.conditions, CONDITION_QUEUE_HEAD);
        }
    }
}
