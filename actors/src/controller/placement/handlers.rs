//! Placement as an actor: the messages it takes (a waiting set's work, a
//! burst's recheck, a relist, a config reload, a ping) and what each
//! starts.

use super::*;

impl Handler<ConfigReloaded> for Placement {
    type Result = ();
    fn handle(&mut self, _: ConfigReloaded, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        self.config_reloaded(ctx);
    }
}

impl Actor for Placement {
    type Context = Context<Self>;
}

impl Handler<Recheck> for Placement {
    type Result = ();
    fn handle(&mut self, _: Recheck, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        let world = self.env.world.clone();
        for (order, vmi) in self.gate.recheck(&world) {
            // Queued already for another reason: decided in full.
            if !self.queue.push_waiting(order, vmi.clone()) {
                self.gate.full_look(&vmi);
            }
        }
        // E2: a VM kept for want of anywhere to go is tried again whenever
        // a burst may have made room (after the sets that wait: they go first).
        if self.evacuation.waits_for_room() {
            self.queue.push(LookAt::Evacuation);
        }
        pacer::reconcile(self, ctx);
    }
}

impl Handler<PlacementWork> for Placement {
    type Result = ();
    fn handle(&mut self, w: PlacementWork, ctx: &mut Context<Self>) {
        self.pacer.changed(w.since);
        self.handle(w.work, ctx);
    }
}

impl Handler<LookAt> for Placement {
    type Result = ();
    fn handle(&mut self, work: LookAt, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        self.enqueue(work, ctx);
    }
}

impl Handler<Relisted> for Placement {
    type Result = ();
    fn handle(&mut self, Relisted(kind): Relisted, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        match kind {
            Kind::Claim => self.own.forget_created(),
            Kind::Allocation => self.verify_allocations(ctx),
            _ => {}
        }
    }
}

impl Handler<crate::controller::messages::Ping> for Placement {
    type Result = ();
    fn handle(&mut self, _: crate::controller::messages::Ping, _: &mut Context<Self>) {}
}

impl Placement {
    /// The config changed: every limit it sets is decided on at once, not
    /// at the next change that happens to wake its part. The VMIs whose
    /// `unschedulableGrace` counts decide again (a shorter one may be
    /// over); E2 looks again (a raised `evacuation.maxConcurrent` starts
    /// the next restart now, a changed timeout moves its timer); and as
    /// many writes start as `placement.writesInFlight` now allows.
    fn config_reloaded(&mut self, ctx: &mut Context<Self>) {
        let works = self.gate.counting_grace();
        self.push(works);
        let heads = self.gate.led_classes();
        self.push(heads);
        if self.env.world.evacuation_has_work() {
            self.push(vec![LookAt::Evacuation]);
        }
        pacer::reconcile(self, ctx);
    }
}
