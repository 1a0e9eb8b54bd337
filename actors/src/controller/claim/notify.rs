//! What a claim's actor tells beside its writes: a missing class (once),
//! the Event of an AllocationMissing mark, its class on release.

use super::ClaimActor;
use crate::api::{GPUClaim, Kind, ObjRef};
use crate::controller::events;
use crate::controller::messages::ClaimReleased;
use crate::ports::Event;
use crate::rules::RuleId;
use crate::world::split_key;

impl ClaimActor {
    /// Bad input gets a clear answer: a claim of a class that does not exist
    /// is said at once, with the classes there are, in a Warning Event on
    /// the claim (once per class name); placement (G5) marks it Waiting
    /// with ClassMissing when a VM uses it. Said where the claim is new
    /// (made within `NEW_CLAIM` of this process first deciding on it) or
    /// its class went while this process watched: a claim whose class was
    /// missing all along was told by the process before.
    pub(super) fn report_missing_class(&mut self, claim: &GPUClaim) {
        /// A claim made this long before the process first saw it is new.
        const NEW_CLAIM: std::time::Duration = std::time::Duration::from_secs(60);
        let class = &claim.spec.class_name;
        let first = *self
            .role
            .first_decided
            .get_or_insert_with(|| self.env.clock.wall());
        if self.env.world.has_class(class) {
            self.role.reported_class = None;
            self.role.class_seen = true;
            return;
        }
        if self.role.reported_class.as_ref() == Some(class) {
            return;
        }
        self.role.reported_class = Some(class.clone());
        let new = claim
            .metadata
            .creation_timestamp
            .as_ref()
            .is_none_or(|t| first.duration_since(t.0).unsigned_abs() <= NEW_CLAIM);
        let message = crate::rules::class_missing(class, &self.env.world);
        tracing::warn!(claim = %self.key, rule = "G5", class = %class, "{message}");
        if new || self.role.class_seen {
            events::publish(&self.env, events::class_missing(&self.key, claim, message));
        }
    }

    /// D8: a device of the claim's record that another ResourceClaim
    /// names while a VM runs on it is said on both, once, until one of
    /// them lets go.
    pub(super) fn report_named_twice(&mut self, claim: &GPUClaim) {
        let w = &self.env.world;
        let now = match crate::rules::device_taken(claim, w, &Default::default()) {
            Some(crate::rules::DeviceTaken::InUse(t)) => Some(t),
            _ => None,
        };
        if now == self.role.said_named_twice {
            return;
        }
        if let Some(t) = &now {
            tracing::warn!(claim = %self.key, rule = "D8", other = %t.by, device = %t.device, "a device of this claim is allocated to another ResourceClaim too, while a VM runs on it");
            for e in events::device_named_twice(&self.key, claim, t) {
                events::publish(&self.env, e);
            }
        }
        self.role.said_named_twice = now;
    }

    /// The Event that goes with an AllocationMissing mark set or cleared.
    pub(super) fn publish_allocation_event(&self, claim: Option<&GPUClaim>) {
        let Some(c) = claim else { return };
        let missing =
            crate::api::condition_is_true(c.conditions(), crate::api::CONDITION_ALLOCATION_MISSING);
        let (ns, name) = split_key(&self.key);
        let event = Event {
            regarding: ObjRef::new(Kind::Claim, Some(ns), name),
            uid: c.metadata.uid.clone(),
            warning: missing,
            reason: if missing {
                "AllocationMissing"
            } else {
                "AllocationFound"
            }
            .into(),
            message: if missing {
                format!(
                    "holds GPUs on {} without a GPUAllocation record; it is not placed elsewhere",
                    c.node_name().unwrap_or_default()
                )
            } else {
                "its GPUAllocation record is there again".into()
            },
            rule: RuleId::Allocations,
            related: None,
        };
        tracing::warn!(claim = %self.key, rule = "allocations", missing, "{}", event.message);
        events::publish(&self.env, event);
    }

    /// Publishes an Event, best effort, without holding the actor up.
    pub(super) fn publish(&self, event: Option<Event>) {
        if let Some(event) = event {
            events::publish(&self.env, event);
        }
    }

    pub(super) fn notify_class_of_release(&self) {
        let Some(claim) = self.env.world.claim(&self.key) else {
            return;
        };
        self.to.released.do_send(ClaimReleased {
            class: claim.spec.class_name.clone(),
            key: self.key.clone(),
            uid: claim.metadata.uid.clone().unwrap_or_default(),
        });
    }
}
