//! What came of E2's writes: a restart's delete landed, failed or was kept
//! from, marks written or removed, and the timer that wakes E2 when the
//! first restart times out.

use super::*;
use crate::controller::placement::{LookAt, Placement};
use actix::prelude::*;
use k8s_openapi::jiff::Timestamp;

impl Placement {
    /// A restart's delete landed (or found the VMI gone): it is under way
    /// (since its decision), and the next may follow where there is room.
    pub(in crate::controller::placement) fn restart_issued(
        &mut self,
        vm: &str,
        ctx: &mut Context<Self>,
    ) {
        tracing::debug!(vm, rule = "E2", "restart under way");
        self.enqueue(LookAt::Evacuation, ctx);
    }

    /// A restart's delete did not land (the VMI changed, or a write
    /// failed). With its mark on the node, the next look judges the mark
    /// again (the delete is made again, or the mark goes); without, no
    /// restart began.
    pub(in crate::controller::placement) fn restart_failed(
        &mut self,
        uid: &str,
        marked: bool,
        ctx: &mut Context<Self>,
    ) {
        self.evac.issued.remove(uid);
        if !marked {
            self.evac.pending.remove(uid);
        }
        ctx.run_later(crate::controller::placement::CONFLICT_RETRY, |act, ctx| {
            act.enqueue(LookAt::Evacuation, ctx)
        });
    }

    /// A VMI not deleted, as its VM would not start it again: kept (and
    /// said) until the VM is read again.
    pub(in crate::controller::placement) fn restart_kept(
        &mut self,
        uid: &str,
        why: &str,
        ctx: &mut Context<Self>,
    ) {
        self.evac.issued.remove(uid);
        if self
            .evac
            .pending
            .get(uid)
            .is_some_and(|p| p.mark.is_some() && p.rv.is_none())
        {
            self.evac.pending.remove(uid);
        }
        let now = self.env.clock.now();
        self.evac
            .kept
            .insert(uid.to_string(), (why.to_string(), now));
        self.enqueue(LookAt::Evacuation, ctx);
        ctx.run_later(REREAD_KEPT, |act, ctx| {
            act.enqueue(LookAt::Evacuation, ctx);
        });
    }

    /// Marks written or removed (with the node's version each write
    /// returned), and removals that did not land (the cache's mark counts
    /// again).
    pub(in crate::controller::placement) fn marks_landed(
        &mut self,
        landed: &[(String, u64)],
        failed: &[String],
    ) {
        for (uid, rv) in landed {
            if let Some(p) = self.evac.pending.get_mut(uid) {
                p.rv = Some(*rv);
            }
        }
        for uid in failed {
            self.evac.pending.remove(uid);
        }
    }

    /// One timer, at the first instant a restart times out.
    pub(super) fn wake_for_timeout(
        &mut self,
        first: Option<Timestamp>,
        now: Timestamp,
        ctx: &mut Context<Self>,
    ) {
        let at = first.map(|t| {
            let wait = now.duration_until(t).try_into().unwrap_or_default();
            self.env.clock.now() + wait
        });
        if self.evac.timer.as_ref().map(|(t, _)| *t) == at {
            return;
        }
        if let Some((_, h)) = self.evac.timer.take() {
            ctx.cancel_future(h);
        }
        let Some(at) = at else { return };
        let wait = at.saturating_duration_since(self.env.clock.now());
        let h = ctx.run_later(wait, |act, ctx| {
            act.evac.timer = None;
            act.enqueue(LookAt::Evacuation, ctx);
        });
        self.evac.timer = Some((at, h));
    }
}
