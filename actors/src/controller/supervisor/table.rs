//! The object actors the supervisor keeps, one per object (claims,
//! classes, quotas): one table per role, by the object's key, each actor
//! of a generation, so that an actor that ends (its object gone) is
//! forgotten only if no newer one has taken its key meanwhile.

use super::Supervisor;
use crate::controller::claim::ClaimRole;
use crate::controller::class::ClassRole;
use crate::controller::messages::{Ping, Reconcile, ToSupervisor};
use crate::controller::object::{ObjectActor, Role};
use crate::controller::quota::QuotaRole;
use actix::prelude::*;
use std::collections::HashMap;

/// The actors of one role, by key.
pub(super) struct ActorTable<R: Role>(HashMap<String, (u64, Addr<ObjectActor<R>>)>);

impl<R: Role> Default for ActorTable<R> {
    fn default() -> Self {
        Self(HashMap::new())
    }
}

impl<R: Role> ActorTable<R> {
    pub fn get(&self, k: &str) -> Option<Addr<ObjectActor<R>>> {
        self.0.get(k).map(|(_, a)| a.clone())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The actor of `generation` for `k` ended: forgotten, unless a newer
    /// one took the key (then false).
    fn ended(&mut self, k: &str, generation: u64) -> bool {
        let ours = self.0.get(k).is_some_and(|(g, _)| *g == generation);
        if ours {
            self.0.remove(k);
        }
        ours
    }

    /// Every actor decides again.
    pub fn reconcile_all(&self, since: tokio::time::Instant) {
        for (_, a) in self.0.values() {
            a.do_send(Reconcile { since });
        }
    }

    pub fn addrs(&self) -> Vec<Addr<ObjectActor<R>>> {
        self.0.values().map(|(_, a)| a.clone()).collect()
    }
}

/// Answered once every one of these actors has handled what was sent to
/// it before.
pub(super) async fn ping_all<R: Role>(actors: &[Addr<ObjectActor<R>>]) {
    // An actor that stopped meanwhile has nothing left to do.
    let _ = futures::future::join_all(actors.iter().map(|a| a.send(Ping))).await;
}

/// Where the supervisor keeps the actors of a role.
pub(super) trait Tabled: Role {
    fn table(s: &mut Supervisor) -> &mut ActorTable<Self>;
}

impl Tabled for ClaimRole {
    fn table(s: &mut Supervisor) -> &mut ActorTable<Self> {
        &mut s.claims
    }
}

impl Tabled for ClassRole {
    fn table(s: &mut Supervisor) -> &mut ActorTable<Self> {
        &mut s.classes
    }
}

impl Tabled for QuotaRole {
    fn table(s: &mut Supervisor) -> &mut ActorTable<Self> {
        &mut s.quotas
    }
}

impl Supervisor {
    /// The actor of `k`, started (of a new generation) if the cache has
    /// the object and none runs.
    pub(super) fn actor_of<R: Tabled>(
        &mut self,
        k: &str,
        ctx: &Context<Self>,
    ) -> Option<Addr<ObjectActor<R>>> {
        if let Some(a) = R::table(self).get(k) {
            return Some(a);
        }
        R::cached(&self.env.world, k)?;
        self.generation += 1;
        let g = self.generation;
        let actor = ObjectActor::<R>::new(k.to_string(), g, self.env.clone(), to_supervisor(ctx));
        let a = actor.start();
        R::table(self).0.insert(k.to_string(), (g, a.clone()));
        self.report_actors();
        Some(a)
    }

    /// The actor of `k` decides again (once the caches have synced),
    /// started if none runs.
    pub(super) fn decide_again<R: Tabled>(&mut self, k: &str, ctx: &Context<Self>) {
        if self.readiness.deciding()
            && let Some(a) = self.actor_of::<R>(k, ctx)
        {
            a.do_send(Reconcile {
                since: self.change_at,
            });
        }
    }

    /// An actor ended: forgotten, and should its object be back (made
    /// again while the old actor was stopping), a new actor takes it.
    pub(super) fn ended<R: Tabled>(&mut self, k: &str, generation: u64, ctx: &Context<Self>) {
        if R::table(self).ended(k, generation) {
            self.report_actors();
            self.decide_again::<R>(k, ctx);
        }
    }
}

/// How the object actors reach the supervisor.
fn to_supervisor(ctx: &Context<Supervisor>) -> ToSupervisor {
    let addr = ctx.address();
    ToSupervisor {
        stopped: addr.clone().recipient(),
        released: addr.recipient(),
    }
}
