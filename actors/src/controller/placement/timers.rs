//! The timers the parts ask for, one per work: a part says at which
//! instant a work is to be looked at again (G7's grace running out, E2's
//! first restart timing out), or that it no longer is; the actor keeps
//! the handle, and an instant asked for again keeps the timer it has.

use super::{LookAt, Placement};
use actix::prelude::*;
use std::collections::HashMap;
use tokio::time::Instant;

#[derive(Default)]
pub(super) struct Timers(HashMap<LookAt, (Instant, SpawnHandle)>);

impl Placement {
    /// `work`'s timer at `at` (None: no timer).
    pub(super) fn set_timer(&mut self, work: LookAt, at: Option<Instant>, ctx: &mut Context<Self>) {
        if self.timers.0.get(&work).map(|(t, _)| *t) == at {
            return;
        }
        if let Some((_, h)) = self.timers.0.remove(&work) {
            ctx.cancel_future(h);
        }
        let Some(at) = at else { return };
        let wait = at.saturating_duration_since(self.env.clock.now());
        let key = work.clone();
        let h = ctx.run_later(wait, move |act, ctx| {
            act.timers.0.remove(&key);
            act.enqueue(key, ctx);
        });
        self.timers.0.insert(work, (at, h));
    }
}
