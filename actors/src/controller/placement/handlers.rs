//! Placement as an actor: the messages it takes (a waiting set's work, a
//! burst's recheck, a relist, a config reload, a ping) and what each
//! starts.

use super::*;

impl Handler<ConfigReloaded> for Placement {
    type Result = ();
    fn handle(&mut self, _: ConfigReloaded, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        self.recount_unplaceable(ctx);
    }
}

impl Actor for Placement {
    type Context = Context<Self>;
}

impl Handler<Recheck> for Placement {
    type Result = ();
    fn handle(&mut self, _: Recheck, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        let asked = std::mem::take(&mut self.recheck);
        let works: Vec<LookAt> = self
            .waiting
            .concerned(&asked)
            .into_iter()
            .map(LookAt::Vmi)
            .collect();
        self.push(works);
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
