//! D7's actor: one DeviceTaintRule of ours per managed pool. It looks at
//! the pools and rules the supervisor names (a slice, a class, a record or
//! a rule changed), decides each by `rules::decide_pool`, and writes what
//! it calls for, several pools at once, one write at a time per pool.
//!
//! It remembers its writes the cache does not show yet (a pool is decided
//! again once the rules watch has caught up with them, so a lagging
//! watch costs no second write), and says to the supervisor when the API
//! server refuses our rules (RBAC, a version not served): D7 is then off,
//! the DRA classes say so, and one pool at a time is tried again after a
//! wait until a write lands.

use super::Env;
use super::journal::{DecisionResult, Intent};
use super::pacer::{self, Decides, IoError, ObjectWrite, Outcome, Pacer, write_object};
use crate::api::{Kind, Obj, ObjRef};
use crate::ports::{Preconditions, WriteError};
use crate::rules::{PoolRuleWrite, RuleId, decide_pool, decide_stray};
use crate::world::devices::{PoolKey, one_pool};
use actix::prelude::*;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// What D7 looks at.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Message)]
#[rtype(result = "()")]
pub enum PoolLook {
    /// A pool that may have become managed or not, or whose rules changed.
    Pool(PoolKey),
    /// A DeviceTaintRule (by name) that changed: one of ours may name no
    /// one pool any more.
    Rule(String),
    /// Every pool and rule (the start, D7 turned on or off).
    Every,
}

/// The API server refused our rule (its words), or took one again (None):
/// D7's standing, which the supervisor keeps in the world.
#[derive(Message, Clone, Debug, PartialEq)]
#[rtype(result = "()")]
pub struct TaintRulesRefused(pub Option<String>);

/// How many rules may be written at once.
const WRITES_IN_FLIGHT: usize = 8;

/// How long a refused D7 waits before trying one pool again.
const REFUSED_RETRY: Duration = Duration::from_secs(60);

/// How long a rule whose create met one of its name waits to be decided
/// again, should the watch not bring it first.
const CONFLICT_RETRY: Duration = Duration::from_secs(1);

/// Our last write about a pool (or a stray rule), until the cache shows it.
#[derive(Clone, Debug)]
enum Written {
    /// A rule written: seen once the rules watch reaches this version.
    At(u64),
    /// A rule deleted: seen once the cache has no rule of this name.
    Deleted(String),
}

pub struct PoolRules {
    env: Arc<Env>,
    pacer: Pacer,
    queue: VecDeque<PoolLook>,
    queued: HashSet<PoolLook>,
    /// Looks whose write is under way: decided again once it ends.
    under_way: HashSet<PoolLook>,
    written: HashMap<PoolLook, Written>,
    refused: Recipient<TaintRulesRefused>,
    /// While the last write was refused: when one pool is tried again
    /// (and then one at a time).
    refusing: Option<tokio::time::Instant>,
}

impl PoolRules {
    pub fn new(env: Arc<Env>, refused: Recipient<TaintRulesRefused>) -> Self {
        Self {
            pacer: Pacer::new(env.clone()),
            env,
            queue: VecDeque::new(),
            queued: HashSet::new(),
            under_way: HashSet::new(),
            written: HashMap::new(),
            refused,
            refusing: None,
        }
    }

    fn push(&mut self, look: PoolLook) {
        if let PoolLook::Every = look {
            let w = &self.env.world;
            let pools = w.every_pool();
            let strays: Vec<String> = w
                .stray_rules()
                .iter()
                .filter_map(|r| r.metadata.name.clone())
                .collect();
            for p in pools {
                self.push(PoolLook::Pool(p));
            }
            for name in strays {
                self.push(PoolLook::Rule(name));
            }
            return;
        }
        if self.queued.insert(look.clone()) {
            self.queue.push_back(look);
        }
    }

    /// Whether the cache shows our last write about `look` (forgotten
    /// once it does).
    fn caught_up(&mut self, look: &PoolLook) -> bool {
        let w = &self.env.world;
        let seen = match self.written.get(look) {
            None => return true,
            Some(Written::At(rv)) => w.observed_rv(Kind::DeviceTaintRule) >= *rv,
            Some(Written::Deleted(name)) => w.taint_rule(name).is_none(),
        };
        if seen {
            self.written.remove(look);
        }
        seen
    }

    /// D7: the write `look` calls for, if any.
    fn decide_look(&mut self, look: &PoolLook) -> Option<PoolRuleWrite> {
        if self.under_way.contains(look) || !self.caught_up(look) {
            // Its write's end, or the watch's event of it, brings it back.
            return None;
        }
        let w = self.env.world.clone();
        match look {
            PoolLook::Pool(p) => decide_pool(p, &w),
            PoolLook::Rule(name) => {
                // One of ours that names a pool is that pool's.
                if let Some(p) = w.taint_rule(name).as_deref().and_then(one_pool) {
                    self.push(PoolLook::Pool(p));
                    return None;
                }
                decide_stray(name, &w)
            }
            PoolLook::Every => None,
        }
    }

    fn write(&mut self, look: PoolLook, write: PoolRuleWrite, ctx: &mut Context<Self>) {
        let rule = write.rule();
        tracing::info!(rule = %rule, taint_rule = %write.name(), write = ?op(&write), "writing");
        self.pacer.writing(rule);
        self.under_way.insert(look.clone());
        let env = self.env.clone();
        let creates = matches!(write, PoolRuleWrite::Create(_));
        let fut = async move { execute(&env, write).await };
        pacer::run_io(self, ctx, fut, move |act, done, ctx| {
            act.under_way.remove(&look);
            let result = act.finished(&look, creates, done, ctx);
            act.pacer.log(rule, Intent::WriteTaintRule, result);
            act.push(look);
            pacer::reconcile(act, ctx);
        });
    }

    /// What a write came to: remembered, a refusal said, a failure tried
    /// again after the backoff.
    fn finished(
        &mut self,
        look: &PoolLook,
        created: bool,
        done: Result<(String, Outcome<Obj>), IoError>,
        ctx: &mut Context<Self>,
    ) -> DecisionResult {
        match done {
            // A create the API server answers with "not found" serves no
            // DeviceTaintRule at the version written.
            Err(IoError::Write(WriteError::NotFound)) if created => {
                self.refuse(
                    "the API server answered 404 to a DeviceTaintRule's create".into(),
                    ctx,
                );
                DecisionResult::Gone
            }
            // A rule of the name is there already: decided again once the
            // watch shows it (or after a wait, should it be gone by then).
            Err(IoError::Newer { .. }) => {
                ctx.run_later(CONFLICT_RETRY, {
                    let look = look.clone();
                    move |act, ctx| {
                        act.push(look);
                        pacer::reconcile(act, ctx);
                    }
                });
                DecisionResult::Conflict
            }
            Ok((name, Outcome::Gone { .. })) => {
                self.accepted();
                self.written.insert(look.clone(), Written::Deleted(name));
                DecisionResult::Gone
            }
            Ok((_, Outcome::Written { fresh_from, .. })) => {
                self.accepted();
                self.written.insert(look.clone(), Written::At(fresh_from));
                DecisionResult::Ok
            }
            Ok((_, Outcome::Conflict(newer))) => {
                // Decided again once the watch shows the newer rule.
                let rv = crate::api::rv_number(newer.meta());
                self.written.insert(look.clone(), Written::At(rv));
                DecisionResult::Conflict
            }
            Err(e) if refusal(&e) => {
                self.refuse(e.to_string(), ctx);
                DecisionResult::Error(e.to_string())
            }
            Err(e) => {
                if let Some(wait) = pacer::retry_later(self, ctx, &e) {
                    tracing::warn!(rule = %RuleId::D7, error = %e, retry_in = %humantime::format_duration(wait), "DeviceTaintRule write failed");
                }
                DecisionResult::Error(e.to_string())
            }
        }
    }

    /// The API server took a rule of ours: D7 is on again, if it was off.
    fn accepted(&mut self) {
        self.pacer.succeeded();
        if self.refusing.take().is_some() {
            tracing::info!(rule = %RuleId::D7, "the API server takes gpu-claims' DeviceTaintRules again");
            self.refused.do_send(TaintRulesRefused(None));
        }
    }

    /// The API server refused a rule of ours: D7 is off until one lands;
    /// one pool is tried again after a wait.
    fn refuse(&mut self, why: String, ctx: &mut Context<Self>) {
        if self.refusing.is_none() {
            tracing::warn!(rule = %RuleId::D7, error = %why, "the API server refuses gpu-claims' DeviceTaintRules: pools stay open to kube-scheduler");
        }
        self.refusing = Some(self.env.clock.now() + REFUSED_RETRY);
        self.refused.do_send(TaintRulesRefused(Some(why)));
        pacer::retry_in(self, ctx, REFUSED_RETRY);
    }
}

fn op(w: &PoolRuleWrite) -> &'static str {
    match w {
        PoolRuleWrite::Create(_) => "create",
        PoolRuleWrite::Update(_) => "update",
        PoolRuleWrite::Delete { .. } => "delete",
    }
}

/// A refusal that is no passing fault: forbidden, not served, invalid.
fn refusal(e: &IoError) -> bool {
    match e {
        IoError::Write(WriteError::Invalid(_)) => true,
        IoError::Write(WriteError::Refused(s)) => matches!(s.code, 403..=405),
        _ => false,
    }
}

/// The write of one rule, and the rule's name.
async fn execute(env: &Env, write: PoolRuleWrite) -> Result<(String, Outcome<Obj>), IoError> {
    let name = write.name().to_string();
    let what = ObjRef::new(Kind::DeviceTaintRule, None, &name);
    let (known, w) = match write {
        // A create's answers mean more than the write path's outcome says:
        // 404 is the kind not served (a refusal), 409 a rule of the name
        // already there (decided again once the watch shows it).
        PoolRuleWrite::Create(r) => {
            return match env
                .writer
                .create(Obj::DeviceTaintRule(*r), RuleId::D7)
                .await
            {
                Ok(o) => {
                    let fresh_from = crate::api::rv_number(o.meta());
                    let object = Arc::new(o);
                    Ok((name, Outcome::Written { object, fresh_from }))
                }
                Err(WriteError::Conflict(_)) => Err(IoError::Newer { what }),
                Err(e) => Err(e.into()),
            };
        }
        PoolRuleWrite::Update(r) => {
            let known = crate::api::rv_number(&r.metadata);
            (known, ObjectWrite::Update(Obj::DeviceTaintRule(*r)))
        }
        PoolRuleWrite::Delete {
            uid,
            resource_version,
            ..
        } => (
            resource_version,
            ObjectWrite::Delete(Preconditions {
                uid,
                resource_version: Some(resource_version.to_string()),
            }),
        ),
    };
    let outcome = write_object(env, what, known, w, RuleId::D7).await?;
    Ok((name, outcome))
}

impl Decides for PoolRules {
    fn pacer(&mut self) -> &mut Pacer {
        &mut self.pacer
    }

    fn decide(&mut self, ctx: &mut Context<Self>) {
        // While refused, one pool at a time, after the wait.
        if self.refusing.is_some_and(|at| self.env.clock.now() < at) {
            return;
        }
        let limit = if self.refusing.is_some() {
            1
        } else {
            WRITES_IN_FLIGHT
        };
        self.pacer.set_limit(limit);
        while !self.pacer.busy() {
            let Some(look) = self.queue.pop_front() else {
                self.pacer.idle();
                return;
            };
            self.queued.remove(&look);
            if let Some(write) = self.decide_look(&look) {
                self.write(look, write, ctx);
                if self.refusing.is_some() {
                    return;
                }
            }
        }
    }
}

impl Actor for PoolRules {
    type Context = Context<Self>;
}

impl Handler<PoolLook> for PoolRules {
    type Result = ();
    fn handle(&mut self, look: PoolLook, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        self.push(look);
        pacer::reconcile(self, ctx);
    }
}

impl Handler<super::messages::Ping> for PoolRules {
    type Result = ();
    fn handle(&mut self, _: super::messages::Ping, _: &mut Context<Self>) {}
}
