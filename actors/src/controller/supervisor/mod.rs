//! The supervisor: applies world changes to the cache and fans each out,
//! through the indexes, to exactly the actors it concerns (claims,
//! classes, quotas, placement: `triggers::whom`).
//! No actor decides anything until every watched kind has synced once, so
//! no rule ever acts on a half-listed world.

mod changes;
mod questions;
mod readiness;
mod table;
mod triggers;

pub use questions::{
    ConfigChanged, GetClaimTrace, Leading, Settled, Stats, StatsQuery, WorldEvent,
};
pub use triggers::{Wake, whom};

use super::Env;
use super::claim::{ClaimRole, ClaimTrace, GetTrace};
use super::class::{ClassRole, Released};
use super::messages::{ActorStopped, ClaimReleased, Ping};
use super::placement::{ConfigReloaded, LookAt, Placement, PlacementWork};
use super::pool_rules::{PoolLook, PoolRules, TaintRulesRefused};
use super::quota::QuotaRole;
use crate::config::Config;
use crate::ports::Kind;
use crate::world::WorldWriter;
use actix::prelude::*;
use readiness::Readiness;
use std::sync::Arc;
use table::{ActorTable, ping_all};

pub struct Supervisor {
    env: Arc<Env>,
    /// The world's one writer: every change the watches bring, the config
    /// and D7's standing are written here and nowhere else.
    world: WorldWriter,
    claims: ActorTable<ClaimRole>,
    classes: ActorTable<ClassRole>,
    quotas: ActorTable<QuotaRole>,
    generation: u64,
    readiness: Readiness,
    placement: Option<Addr<Placement>>,
    /// D7's actor: the managed pools' DeviceTaintRules.
    pool_rules: Option<Addr<PoolRules>>,
    /// When the change being handled entered: a decision asked for carries it, so that the
    /// write it causes can say how long it took.
    change_at: tokio::time::Instant,
}

impl Supervisor {
    /// The supervisor of `env`'s actors, writing their world through
    /// `world`, the writer of `env.world`.
    pub fn new(env: Arc<Env>, world: WorldWriter) -> Self {
        assert!(
            world.writes(&env.world),
            "the supervisor writes the world its actors read"
        );
        let readiness = Readiness::new(&Self::watched_kinds(&env.world.config()), true);
        Self {
            env,
            world,
            claims: ActorTable::default(),
            classes: ActorTable::default(),
            quotas: ActorTable::default(),
            generation: 0,
            readiness,
            placement: None,
            pool_rules: None,
            change_at: tokio::time::Instant::now(),
        }
    }

    /// Starts as a standby: caches fill, nothing is decided until `Leading(true)`.
    pub fn standby(mut self) -> Self {
        self.readiness = self.readiness.leading(false);
        self
    }

    /// Moves to `next`; every actor decides when that starts deciding.
    fn move_to(&mut self, next: Readiness, ctx: &mut Context<Self>) {
        let started = next.deciding() && !self.readiness.deciding();
        if next.synced() && !self.readiness.synced() {
            self.env.telemetry.synced();
        }
        self.readiness = next;
        if started {
            tracing::info!(
                claims = self.env.world.claim_count(),
                classes = self.env.world.class_count(),
                "caches synced and leading; deciding"
            );
            self.change_at = self.env.clock.now();
            self.all_decide_again(ctx);
        }
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
                Kind::DeviceClass,
                Kind::ResourceSlice,
                Kind::ResourceClaim,
                Kind::DeviceTaintRule,
            ]
        }
    }

    fn place(&self, work: LookAt) {
        if let (true, Some(p)) = (self.readiness.deciding(), &self.placement) {
            p.do_send(PlacementWork {
                work,
                since: self.change_at,
            });
        }
    }

    /// D7 looks at a pool or rule (once deciding).
    fn pools(&self, look: PoolLook) {
        if let (true, Some(p)) = (self.readiness.deciding(), &self.pool_rules) {
            p.do_send(look);
        }
    }

    /// D7's standing set again (the config, or what the API server said
    /// of our rules): where it moved, the classes and pools are told.
    fn exclusive_again(&mut self, refused: Option<String>, ctx: &mut Context<Self>) {
        let change = self.world.set_exclusive(refused);
        self.fan_out(crate::world::Change::Devices(change), ctx);
    }

    /// Every object's actor decides, in the order of their keys: the same
    /// order on every run, so `plan` is deterministic.
    fn all_decide_again(&mut self, ctx: &mut Context<Self>) {
        let w = self.env.world.clone();
        // O1: the sets at the gate first, in the order they take the GPUs
        // that free, so that the first of a class decided that could lead
        // it is its head: a start writes no head only to take it back.
        let mut vmis: Vec<(Option<crate::rules::queueing::OrderKey>, String)> = w
            .keys(Kind::Vmi)
            .into_iter()
            .map(|k| {
                let order = w
                    .vmi(&k)
                    .filter(|v| crate::rules::at_the_gate(v, &w))
                    .map(|v| crate::rules::queueing::order_key(&v, &w));
                (order, k)
            })
            .collect();
        vmis.sort_by(|a, b| (a.0.is_none(), &a.0).cmp(&(b.0.is_none(), &b.0)));
        for (_, v) in vmis {
            self.place(LookAt::Vmi(v));
        }
        for r in w.keys(Kind::Allocation) {
            self.place(LookAt::Allocation(r));
        }
        // D4: the backing claims a crash left gone, unallocated, or with
        // no GPUClaim (no change will tell of them).
        for k in w.keys(Kind::Claim) {
            self.place(LookAt::BackingClaim(k));
        }
        for k in w.keys(Kind::ResourceClaim) {
            if w.resource_claim(&k).is_some_and(|rc| {
                crate::api::has_finalizer(&rc.metadata, crate::rules::BACKING_FINALIZER)
                    && w.claim(&k).is_none()
            }) {
                self.place(LookAt::BackingClaim(k));
            }
        }
        // D7: every pool's rule (a pool changed while no one decided).
        self.pools(PoolLook::Every);
        // E2 (placement's queue serves it after the sets queued above:
        // `placement::queue::Lane`).
        if w.evacuation_has_work() {
            self.place(LookAt::Evacuation);
        }
        for k in w.keys(Kind::Claim) {
            self.decide_again::<ClaimRole>(&k, ctx);
        }
        for c in w.keys(Kind::Class) {
            self.decide_again::<ClassRole>(&c, ctx);
        }
        for q in w.keys(Kind::Quota) {
            self.decide_again::<QuotaRole>(&q, ctx);
        }
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Watch events arrive in bursts; a large mailbox keeps senders that
        // await (`send`) from stalling on every event.
        ctx.set_mailbox_capacity(4096);
        if self.readiness.synced() {
            // Nothing to watch: whole from the start.
            self.env.telemetry.synced();
        }
        self.placement = Some(Placement::new(self.env.clone()).start());
        let refused = ctx.address().recipient();
        self.pool_rules = Some(PoolRules::new(self.env.clone(), refused).start());
        // D7's standing as the config has it (no refusal yet).
        let _ = self.world.set_exclusive(None);
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
                unreadable,
            } => {
                let found: Vec<(String, String)> = unreadable
                    .into_iter()
                    .map(|(name, error)| {
                        tracing::warn!(kind = kind.name(), object = %name, %error, "an object that cannot be read");
                        (name, error.to_string())
                    })
                    .collect();
                for ns in self.world.relisted_unreadable(kind, &found) {
                    self.place(LookAt::Namespace(ns));
                }
                self.served(kind, true, ctx);
                self.relisted(kind, objects, list_rv, &found, ctx)
            }
            WorldEvent::NotServed { kind } => {
                // As an empty list: none of the kind exists.
                self.served(kind, false, ctx);
                self.relisted(kind, Vec::new(), None, &[], ctx)
            }
            WorldEvent::Unreadable {
                kind,
                name,
                error,
                gone,
            } => self.unreadable(kind, &name, &error, gone, ctx),
        }
    }
}

impl Handler<ConfigChanged> for Supervisor {
    type Result = ();
    fn handle(&mut self, ConfigChanged(mut new): ConfigChanged, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        let old = self.env.world.config();
        for field in old.restart_only_changes(&new) {
            tracing::warn!(field, "changes only on restart; the running value stays");
        }
        new.kubevirt = old.kubevirt.clone();
        new.api = old.api.clone();
        self.world.set_config(new);
        // D7 turned on or off: its rules are written, or ours deleted.
        let refused = self.env.world.exclusive_refused();
        self.exclusive_again(refused, ctx);
        // Grace timers and trace switches follow the new config.
        self.change_at = self.env.clock.now();
        self.claims.reconcile_all(self.change_at);
        if let Some(p) = &self.placement {
            p.do_send(ConfigReloaded);
        }
    }
}

impl Handler<TaintRulesRefused> for Supervisor {
    type Result = ();
    fn handle(&mut self, TaintRulesRefused(why): TaintRulesRefused, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        self.exclusive_again(why, ctx);
    }
}

impl Handler<ClaimReleased> for Supervisor {
    type Result = ();
    fn handle(&mut self, msg: ClaimReleased, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        if let Some(a) = self.actor_of::<ClassRole>(&msg.class, ctx) {
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
        let ActorStopped {
            kind,
            key,
            generation,
        } = msg;
        match kind {
            Kind::Claim => self.ended::<ClaimRole>(&key, generation, ctx),
            Kind::Class => self.ended::<ClassRole>(&key, generation, ctx),
            Kind::Quota => self.ended::<QuotaRole>(&key, generation, ctx),
            _ => {}
        }
    }
}

impl Handler<GetClaimTrace> for Supervisor {
    type Result = ResponseFuture<Option<ClaimTrace>>;
    fn handle(&mut self, GetClaimTrace(key): GetClaimTrace, _: &mut Context<Self>) -> Self::Result {
        let addr = self.claims.get(&key);
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
            synced: self.readiness.synced(),
            leading: self.readiness.is_leading(),
        })
    }
}

impl Handler<Settled> for Supervisor {
    type Result = ResponseFuture<bool>;
    fn handle(&mut self, _: Settled, _: &mut Context<Self>) -> Self::Result {
        let ready = self.readiness.deciding();
        let actors = (
            self.claims.addrs(),
            self.classes.addrs(),
            self.quotas.addrs(),
        );
        let placement = self.placement.clone();
        let pool_rules = self.pool_rules.clone();
        let env = self.env.clone();
        Box::pin(async move {
            if !ready {
                return false;
            }
            let (claims, classes, quotas) = actors;
            // Twice: what the first round's answers caused is answered too.
            for _ in 0..2 {
                futures::join!(ping_all(&claims), ping_all(&classes), ping_all(&quotas));
                if let Some(p) = &placement {
                    let _ = p.send(Ping).await;
                }
                if let Some(p) = &pool_rules {
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
        if leading != self.readiness.is_leading() {
            tracing::info!(leading, "leadership changed");
        }
        let next = self.readiness.clone().leading(leading);
        self.move_to(next, ctx);
    }
}
