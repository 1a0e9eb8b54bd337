//! One actor per GPUQuota: its status (Q2). Q1, the limit, is placement's.
//! Writing one step at a time, freshness, the re-read after a 409, retries
//! and the log are the scaffold's.

use super::Env;
use super::journal::{DecisionResult, Intent};
use super::messages::{ActorStopped, Ping, Reconcile, ToSupervisor};
use super::scaffold::{
    self, Freshness, IoError, Outcome, OwnWrite, Scaffold, Scaffolded, write_own,
};
use crate::api::{GPUQuota, GPUQuotaStatus, rv_number};
use crate::rules::{QuotaStep, RuleId, decide_quota};
use actix::prelude::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::sync::Arc;

pub struct QuotaActor {
    /// `namespace/name`.
    key: String,
    generation: u64,
    env: Arc<Env>,
    to: ToSupervisor,
    scaffold: Scaffold,
    fresh: Freshness<GPUQuota>,
}

impl QuotaActor {
    pub fn new(key: String, generation: u64, env: Arc<Env>, to: ToSupervisor) -> Self {
        Self {
            key,
            generation,
            env: env.clone(),
            to,
            scaffold: Scaffold::new(env),
            fresh: Freshness::default(),
        }
    }

    fn write(
        &mut self,
        quota: Arc<GPUQuota>,
        rule: RuleId,
        status: GPUQuotaStatus,
        ctx: &mut Context<Self>,
    ) {
        tracing::info!(quota = %self.key, rule = %rule, intent = %Intent::WriteStatus, "writing");
        self.scaffold.writing(rule);
        let env = self.env.clone();
        let fut = async move {
            let mut new = GPUQuota::clone(&quota);
            new.status = Some(status);
            let known = rv_number(&quota.metadata);
            write_own(
                &env,
                scaffold::Own::obj_ref(&*quota),
                known,
                OwnWrite::ReplaceStatus(new),
                rule,
            )
            .await
        };
        scaffold::run_io(self, ctx, fut, move |act, result, ctx| {
            act.finish(rule, result, ctx)
        });
    }

    fn finish(
        &mut self,
        rule: RuleId,
        result: Result<Outcome<GPUQuota>, IoError>,
        ctx: &mut Context<Self>,
    ) {
        let logged = match result {
            Ok(outcome) => {
                self.fresh.settle(&outcome);
                match outcome {
                    Outcome::Written { .. } => {
                        self.scaffold.succeeded();
                        DecisionResult::Ok
                    }
                    Outcome::Gone { .. } => {
                        self.scaffold.succeeded();
                        DecisionResult::Gone
                    }
                    Outcome::Conflict(_) => DecisionResult::Conflict,
                }
            }
            Err(e) => {
                if let Some(wait) = scaffold::retry_later(self, ctx, &e) {
                    tracing::warn!(quota = %self.key, rule = %rule, error = %e, retry_in = %humantime::format_duration(wait), "quota status write failed");
                }
                self.scaffold.log(
                    rule,
                    Intent::WriteStatus,
                    DecisionResult::Error(e.to_string()),
                );
                return;
            }
        };
        self.scaffold.log(rule, Intent::WriteStatus, logged);
        scaffold::reconcile(self, ctx);
    }
}

impl Scaffolded for QuotaActor {
    fn scaffold(&mut self) -> &mut Scaffold {
        &mut self.scaffold
    }

    fn decide(&mut self, ctx: &mut Context<Self>) {
        let cached = self.env.world.quota(&self.key);
        let Some(quota) = self.fresh.current(cached) else {
            // Gone: end once the cache agrees (a quota has no finalizer,
            // so the cache is all there is to wait for).
            if self.env.world.quota(&self.key).is_some() {
                return;
            }
            self.to.stopped.do_send(ActorStopped::Quota {
                key: self.key.clone(),
                generation: self.generation,
            });
            return ctx.stop();
        };
        let now = Time(self.env.clock.wall());
        match decide_quota(&quota, &self.env.world, now) {
            QuotaStep::Write(rule, status) => self.write(quota, rule, status, ctx),
            QuotaStep::Idle => self.scaffold.idle(),
        }
    }
}

impl Actor for QuotaActor {
    type Context = Context<Self>;
}

impl Handler<Reconcile> for QuotaActor {
    type Result = ();
    fn handle(&mut self, r: Reconcile, ctx: &mut Context<Self>) {
        self.scaffold.changed(r.since);
        scaffold::reconcile(self, ctx);
    }
}

impl Handler<Ping> for QuotaActor {
    type Result = ();
    fn handle(&mut self, _: Ping, _: &mut Context<Self>) {}
}
