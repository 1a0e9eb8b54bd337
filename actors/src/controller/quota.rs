//! One actor per GPUQuota: its status (Q2). Q1, the limit, is placement's.
//! Writing one step at a time, freshness, the re-read after a 409, retries
//! and the log are the scaffold's.

use super::Env;
use super::journal::Intent;
use super::messages::ToSupervisor;
use super::scaffold::{
    self, Freshness, IoError, Outcome, OwnWrite, Scaffold, Scaffolded, write_own,
};
use crate::api::{GPUQuota, GPUQuotaStatus, Kind, ObjRef, rv_number};
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
                OwnWrite::UpdateStatus(new),
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
        let (ns, name) = crate::world::split_key(&self.key);
        let what = ObjRef::new(Kind::Quota, Some(ns), name);
        let step = (rule, Intent::WriteStatus);
        scaffold::finish_own(self, ctx, step, &what, result, |act, outcome| {
            act.fresh.settle(outcome)
        });
    }
}

impl Scaffolded for QuotaActor {
    fn decide(&mut self, ctx: &mut Context<Self>) {
        let cached = self.env.world.quota(&self.key);
        let Some(quota) = self.fresh.current(cached) else {
            // Gone: end once the cache agrees (a quota has no finalizer,
            // so the cache is all there is to wait for).
            if self.env.world.quota(&self.key).is_some() {
                return;
            }
            self.to.ended(Kind::Quota, &self.key, self.generation);
            return ctx.stop();
        };
        let now = Time(self.env.clock.wall());
        match decide_quota(&quota, &self.env.world, now) {
            QuotaStep::Write(rule, status) => self.write(quota, rule, status, ctx),
            QuotaStep::Idle => self.scaffold.idle(),
        }
    }
}

scaffold::scaffolded_actor!(QuotaActor);
