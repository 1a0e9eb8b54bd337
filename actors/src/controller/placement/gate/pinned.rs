//! G7 in placement: the VMIs whose pinned launcher pod the scheduler
//! cannot place, since when the controller has seen each so (the actor's
//! timer brings it back when `unschedulableGrace` runs out), and the deletes
//! already issued (a lagging cache still shows the VMI; deleting it again
//! would change nothing). An entry goes when its VMI leaves that state.

use crate::api::{Kind, ObjRef, Vmi};
use crate::controller::placement::write::{VmiDelete, Write};
use crate::controller::placement::{LookAt, Shared};
use crate::ports::Event;
use crate::rules::{RuleId, unplaceable_pod};
use crate::world::split_key;
use std::collections::HashMap;
use tokio::time::Instant;

#[derive(Default)]
pub(super) struct Pinned {
    /// VMI key to (pod uid, first seen Unschedulable).
    since: HashMap<String, (String, Instant)>,
    /// VMI key to the (uid, resourceVersion) a delete was issued for.
    issued: HashMap<String, (String, String)>,
}

impl Pinned {
    /// G7 for one VMI: the delete that is due, if any; the VMI's timer at
    /// the instant one will be.
    pub fn decide(&mut self, k: &str, v: &Vmi, s: &mut Shared) -> Option<Write> {
        let Some(stuck) = unplaceable_pod(v, &s.env.world) else {
            self.forget(k, s);
            return None;
        };
        let now = s.env.clock.now();
        let entry = self
            .since
            .entry(k.to_string())
            .or_insert_with(|| (stuck.pod_uid.clone(), now));
        if entry.0 != stuck.pod_uid {
            *entry = (stuck.pod_uid.clone(), now);
        }
        let since = entry.1;
        s.env.telemetry.unschedulable_pods(self.since.len());
        let grace = s.env.world.config().unschedulable_grace;
        let due = since + grace;
        if now < due {
            s.asks.timers.push((LookAt::Vmi(k.to_string()), Some(due)));
            return None;
        }
        let (uid, rv) = (
            v.uid().to_string(),
            v.metadata.resource_version.clone().unwrap_or_default(),
        );
        if self.issued.get(k) == Some(&(uid.clone(), rv.clone())) {
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
    pub fn issued(&mut self, k: String, uid: String, rv: String) {
        self.issued.insert(k, (uid, rv));
    }

    /// The VMI left that state (or is gone): its entry and timer go.
    pub fn forget(&mut self, k: &str, s: &mut Shared) {
        let had = self.since.remove(k).is_some();
        self.issued.remove(k);
        if had {
            s.asks.timers.push((LookAt::Vmi(k.to_string()), None));
            s.env.telemetry.unschedulable_pods(self.since.len());
        }
    }

    /// The VMIs whose grace is counting.
    pub fn counting(&self) -> impl Iterator<Item = &String> {
        self.since.keys()
    }
}
