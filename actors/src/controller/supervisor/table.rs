//! The actors the supervisor keeps one of per object (claims, classes,
//! quotas): one table per kind, by the object's key, each actor of a
//! generation, so that an actor that ends (its object gone) is forgotten
//! only if no newer one has taken its key meanwhile.

use super::Supervisor;
use crate::controller::Env;
use crate::controller::claim::ClaimActor;
use crate::controller::class::ClassActor;
use crate::controller::messages::{Ping, Reconcile, ToSupervisor};
use crate::controller::quota::QuotaActor;
use crate::world::World;
use actix::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

/// The actors of one kind, by key.
pub(super) struct Table<A: Actor>(HashMap<String, (u64, Addr<A>)>);

impl<A: Actor> Default for Table<A> {
    fn default() -> Self {
        Self(HashMap::new())
    }
}

impl<A: Keyed> Table<A> {
    pub fn get(&self, k: &str) -> Option<Addr<A>> {
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

    pub fn addrs(&self) -> Vec<Addr<A>> {
        self.0.values().map(|(_, a)| a.clone()).collect()
    }
}

/// Answered once every one of these actors has handled what was sent to
/// it before.
pub(super) async fn ping_all<A: Keyed>(actors: &[Addr<A>]) {
    // An actor that stopped meanwhile has nothing left to do.
    let _ = futures::future::join_all(actors.iter().map(|a| a.send(Ping))).await;
}

/// An actor the supervisor keeps one of per object of its kind.
pub(super) trait Keyed:
    Actor<Context = Context<Self>> + Handler<Reconcile> + Handler<Ping>
{
    fn start_for(key: String, generation: u64, env: Arc<Env>, to: ToSupervisor) -> Addr<Self>;
    fn table(s: &mut Supervisor) -> &mut Table<Self>;
    /// Whether the cache has the object.
    fn exists(w: &World, key: &str) -> bool;
}

macro_rules! keyed {
    ($($actor:ty => $table:ident, $exists:expr);* $(;)?) => {$(
        impl Keyed for $actor {
            fn start_for(key: String, generation: u64, env: Arc<Env>, to: ToSupervisor) -> Addr<Self> {
                Self::new(key, generation, env, to).start()
            }
            fn table(s: &mut Supervisor) -> &mut Table<Self> {
                &mut s.$table
            }
            fn exists(w: &World, key: &str) -> bool {
                $exists(w, key)
            }
        }
    )*};
}

keyed! {
    ClaimActor => claims, |w: &World, k| w.has_claim(k);
    ClassActor => classes, |w: &World, k| w.has_class(k);
    QuotaActor => quotas, |w: &World, k| w.quota(k).is_some();
}

impl Supervisor {
    /// The actor of `k`, started (of a new generation) if the cache has
    /// the object and none runs.
    pub(super) fn actor_of<A: Keyed>(&mut self, k: &str, ctx: &Context<Self>) -> Option<Addr<A>> {
        if let Some(a) = A::table(self).get(k) {
            return Some(a);
        }
        if !A::exists(&self.env.world, k) {
            return None;
        }
        self.generation += 1;
        let g = self.generation;
        let a = A::start_for(k.to_string(), g, self.env.clone(), to_supervisor(ctx));
        A::table(self).0.insert(k.to_string(), (g, a.clone()));
        self.report_actors();
        Some(a)
    }

    /// The actor of `k` decides again (once the caches have synced).
    pub(super) fn poke<A: Keyed>(&mut self, k: &str, ctx: &Context<Self>) {
        if self.readiness.deciding()
            && let Some(a) = self.actor_of::<A>(k, ctx)
        {
            a.do_send(Reconcile {
                since: self.change_at,
            });
        }
    }

    /// An actor ended: forgotten, and should its object be back (made
    /// again while the old actor was stopping), a new actor takes it.
    pub(super) fn ended<A: Keyed>(&mut self, k: &str, generation: u64, ctx: &Context<Self>) {
        if A::table(self).ended(k, generation) {
            self.report_actors();
            self.poke::<A>(k, ctx);
        }
    }
}

/// How the claim and class actors reach the supervisor.
fn to_supervisor(ctx: &Context<Supervisor>) -> ToSupervisor {
    let addr = ctx.address();
    ToSupervisor {
        stopped: addr.clone().recipient(),
        released: addr.recipient(),
    }
}
