//! The supervisor: applies world changes to the cache and fans each out,
//! through the indexes, to exactly the claim and class actors it concerns.
//! No actor decides anything until every watched kind has synced once, so
//! no rule ever acts on a half-listed world.

mod changes;
mod questions;

pub use questions::{
    ConfigChanged, GetClaimTrace, Leading, Settled, Stats, StatsQuery, WorldEvent,
};

use super::Env;
use super::claim::{ClaimActor, ClaimTrace, GetTrace};
use super::class::{ClassActor, Released};
use super::messages::{ActorStopped, ClaimReleased, Ping, Reconcile, ToSupervisor};
use super::placement::{ConfigReloaded, Placement, PlacementPoke, PlacementWork};
use super::quota::QuotaActor;
use crate::config::Config;
use crate::ports::Kind;
use actix::prelude::*;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub struct Supervisor {
    env: Arc<Env>,
    claims: HashMap<String, (u64, Addr<ClaimActor>)>,
    classes: HashMap<String, (u64, Addr<ClassActor>)>,
    quotas: HashMap<String, (u64, Addr<QuotaActor>)>,
    generation: u64,
    /// Kinds whose watch has listed once.
    synced: HashSet<Kind>,
    expected: Vec<Kind>,
    ready: bool,
    leading: bool,
    placement: Option<Addr<Placement>>,
    /// When the change being handled entered: pokes carry it, so that the
    /// write it causes can say how long it took.
    change_at: tokio::time::Instant,
}

impl Supervisor {
    pub fn new(env: Arc<Env>) -> Self {
        let expected = Self::watched_kinds(&env.world.config());
        Self {
            env,
            claims: HashMap::new(),
            classes: HashMap::new(),
            quotas: HashMap::new(),
            generation: 0,
            synced: HashSet::new(),
            expected,
            ready: false,
            leading: true,
            placement: None,
            change_at: tokio::time::Instant::now(),
        }
    }

    /// Starts as a standby: caches fill, nothing is decided until `Leading(true)`.
    pub fn standby(mut self) -> Self {
        self.leading = false;
        self
    }

    /// Decides once every watched kind has synced and this process leads.
    fn update_ready(&mut self, ctx: &mut Context<Self>) {
        let now = self.leading && self.expected.iter().all(|k| self.synced.contains(k));
        if now && !self.ready {
            self.ready = true;
            tracing::info!(
                claims = self.env.world.claim_count(),
                classes = self.env.world.class_count(),
                "caches synced and leading; deciding"
            );
            self.change_at = self.env.clock.now();
            self.poke_all(ctx);
        }
        self.ready = now;
    }

    fn report_actors(&self) {
        self.env
            .telemetry
            .actors(self.claims.len(), self.classes.len());
    }

    /// The kinds this supervisor needs watched (no VMIs or pods without KubeVirt).
    pub fn watched_kinds(config: &Config) -> Vec<Kind> {
        if config.kubevirt.enabled {
            Kind::ALL.to_vec()
        } else {
            vec![
                Kind::Class,
                Kind::Claim,
                Kind::Allocation,
                Kind::Quota,
                Kind::Node,
            ]
        }
    }

    fn poke_claim(&mut self, k: &str, ctx: &mut Context<Self>) {
        if !self.ready {
            return;
        }
        if let Some((_, a)) = self.claims.get(k) {
            return a.do_send(Reconcile {
                since: self.change_at,
            });
        }
        if self.env.world.has_claim(k) {
            let (g, a) = self.spawn(ctx, |g, env, to| ClaimActor::new(k.to_string(), g, env, to));
            a.do_send(Reconcile {
                since: self.change_at,
            });
            self.claims.insert(k.to_string(), (g, a));
            self.report_actors();
        }
    }

    /// Starts an actor of a new generation (an actor that stops reports
    /// its generation, so a newer one for the same object is kept).
    fn spawn<A: Actor<Context = Context<A>>>(
        &mut self,
        ctx: &Context<Self>,
        make: impl FnOnce(u64, Arc<Env>, ToSupervisor) -> A,
    ) -> (u64, Addr<A>) {
        self.generation += 1;
        let a = make(self.generation, self.env.clone(), to_supervisor(ctx)).start();
        (self.generation, a)
    }

    fn class_actor(&mut self, name: &str, ctx: &mut Context<Self>) -> Option<Addr<ClassActor>> {
        if let Some((_, a)) = self.classes.get(name) {
            return Some(a.clone());
        }
        if !self.env.world.has_class(name) {
            return None;
        }
        let (g, a) = self.spawn(ctx, |g, env, to| {
            ClassActor::new(name.to_string(), g, env, to)
        });
        self.classes.insert(name.to_string(), (g, a.clone()));
        self.report_actors();
        Some(a)
    }

    fn poke_class(&mut self, name: &str, ctx: &mut Context<Self>) {
        if self.ready
            && let Some(a) = self.class_actor(name, ctx)
        {
            a.do_send(Reconcile {
                since: self.change_at,
            });
        }
    }

    fn poke_quota(&mut self, k: &str, ctx: &mut Context<Self>) {
        if !self.ready {
            return;
        }
        let since = self.change_at;
        if let Some((_, a)) = self.quotas.get(k) {
            return a.do_send(Reconcile { since });
        }
        if self.env.world.quota(k).is_some() {
            let (g, a) = self.spawn(ctx, |g, env, to| QuotaActor::new(k.to_string(), g, env, to));
            a.do_send(Reconcile { since });
            self.quotas.insert(k.to_string(), (g, a));
        }
    }

    fn place(&self, work: PlacementPoke) {
        if let (true, Some(p)) = (self.ready, &self.placement) {
            p.do_send(PlacementWork {
                work,
                since: self.change_at,
            });
        }
    }

    /// Every object's actor decides, in the order of their keys: the same
    /// order on every run, so `plan` is deterministic.
    fn poke_all(&mut self, ctx: &mut Context<Self>) {
        let w = self.env.world.clone();
        for v in w.keys(Kind::Vmi) {
            self.place(PlacementPoke::Vmi(v));
        }
        for r in w.keys(Kind::Allocation) {
            self.place(PlacementPoke::Allocation(r));
        }
        for k in w.keys(Kind::Claim) {
            self.poke_claim(&k, ctx);
        }
        for c in w.keys(Kind::Class) {
            self.poke_class(&c, ctx);
        }
        for q in w.keys(Kind::Quota) {
            self.poke_quota(&q, ctx);
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

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Watch events arrive in bursts; a large mailbox keeps senders that
        // await (`send`) from stalling on every event.
        ctx.set_mailbox_capacity(4096);
        self.placement = Some(Placement::new(self.env.clone()).start());
    }
}

impl Handler<WorldEvent> for Supervisor {
    type Result = ();
    fn handle(&mut self, ev: WorldEvent, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        self.change_at = self.env.clock.now();
        match ev {
            WorldEvent::Apply(o) => self.on_event(o, false, ctx),
            WorldEvent::Delete(o) => self.on_event(o, true, ctx),
            WorldEvent::Relisted {
                kind,
                objects,
                list_rv,
            } => self.relisted(kind, objects, list_rv, ctx),
            WorldEvent::Unreadable { kind, name, error } => {
                tracing::warn!(kind = kind.name(), object = %name, %error, "ignoring an object that cannot be read; its cached version stays");
            }
        }
    }
}

impl Handler<ConfigChanged> for Supervisor {
    type Result = ();
    fn handle(&mut self, ConfigChanged(mut new): ConfigChanged, _: &mut Context<Self>) {
        self.env.activity.tick();
        let old = self.env.world.config();
        for field in old.restart_only_changes(&new) {
            tracing::warn!(field, "changes only on restart; the running value stays");
        }
        new.kubevirt = old.kubevirt.clone();
        new.api = old.api.clone();
        self.env.world.set_config(new);
        // Grace timers and trace switches follow the new config.
        self.change_at = self.env.clock.now();
        for (_, a) in self.claims.values() {
            a.do_send(Reconcile {
                since: self.change_at,
            });
        }
        if let Some(p) = &self.placement {
            p.do_send(ConfigReloaded);
        }
    }
}

impl Handler<ClaimReleased> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: ClaimReleased, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        if let Some(a) = self.class_actor(&msg.class, ctx) {
            a.do_send(Released {
                key: msg.key,
                uid: msg.uid,
            });
        }
    }
}

impl Handler<ActorStopped> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: ActorStopped, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        match msg {
            ActorStopped::Claim { key, generation } => {
                if self.claims.get(&key).is_some_and(|(g, _)| *g == generation) {
                    self.claims.remove(&key);
                    self.report_actors();
                    // Recreated while the old actor was stopping: a new actor takes it.
                    self.poke_claim(&key, ctx);
                }
            }
            ActorStopped::Class { name, generation } => {
                if self
                    .classes
                    .get(&name)
                    .is_some_and(|(g, _)| *g == generation)
                {
                    self.classes.remove(&name);
                    self.report_actors();
                    self.poke_class(&name, ctx);
                }
            }
            ActorStopped::Quota { key, generation } => {
                if self.quotas.get(&key).is_some_and(|(g, _)| *g == generation) {
                    self.quotas.remove(&key);
                    self.poke_quota(&key, ctx);
                }
            }
        }
    }
}

impl Handler<GetClaimTrace> for Supervisor {
    type Result = ResponseFuture<Option<ClaimTrace>>;
    fn handle(&mut self, GetClaimTrace(key): GetClaimTrace, _: &mut Context<Self>) -> Self::Result {
        let addr = self.claims.get(&key).map(|(_, a)| a.clone());
        Box::pin(async move {
            match addr {
                Some(a) => a.send(GetTrace).await.ok(),
                None => None,
            }
        })
    }
}

impl Handler<StatsQuery> for Supervisor {
    type Result = MessageResult<StatsQuery>;
    fn handle(&mut self, _: StatsQuery, _: &mut Context<Self>) -> Self::Result {
        MessageResult(Stats {
            claims: self.env.world.claim_count(),
            claim_actors: self.claims.len(),
            class_actors: self.classes.len(),
            synced: self.expected.iter().all(|k| self.synced.contains(k)),
            leading: self.leading,
        })
    }
}

impl Handler<Settled> for Supervisor {
    type Result = ResponseFuture<bool>;
    fn handle(&mut self, _: Settled, _: &mut Context<Self>) -> Self::Result {
        let ready = self.ready;
        let claims: Vec<_> = self.claims.values().map(|(_, a)| a.clone()).collect();
        let classes: Vec<_> = self.classes.values().map(|(_, a)| a.clone()).collect();
        let quotas: Vec<_> = self.quotas.values().map(|(_, a)| a.clone()).collect();
        let placement = self.placement.clone();
        let env = self.env.clone();
        Box::pin(async move {
            if !ready {
                return false;
            }
            for _ in 0..2 {
                let mut pings = Vec::new();
                for a in &claims {
                    pings.push(a.send(Ping));
                }
                let mut more = Vec::new();
                for a in &classes {
                    more.push(a.send(Ping));
                }
                let quotas = futures::future::join_all(quotas.iter().map(|a| a.send(Ping)));
                // An actor that stopped meanwhile has nothing left to do.
                let _ = futures::future::join_all(pings).await;
                let _ = futures::future::join_all(more).await;
                let _ = quotas.await;
                if let Some(p) = &placement {
                    let _ = p.send(Ping).await;
                }
            }
            env.activity.in_flight() == 0
        })
    }
}

impl Handler<Leading> for Supervisor {
    type Result = ();
    fn handle(&mut self, Leading(leading): Leading, ctx: &mut Context<Self>) {
        if leading != self.leading {
            tracing::info!(leading, "leadership changed");
        }
        self.leading = leading;
        self.update_ready(ctx);
    }
}
