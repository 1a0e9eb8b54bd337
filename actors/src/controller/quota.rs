//! The role of a GPUQuota's actor: its status (Q2). Q1, the limit, is
//! placement's. What every object's actor does alike is `ObjectActor`'s.

use super::journal::Intent;
use super::object::{ObjectActor, Role};
use super::pacer::{self, IoError, ObjectWrite, Outcome, Writable, write_object};
use crate::api::{GPUQuota, GPUQuotaStatus, Kind, ObjRef, rv_number};
use crate::rules::{RuleId, Step, decide_quota};
use crate::world::World;
use actix::prelude::*;
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::sync::Arc;

/// The actor of one GPUQuota.
pub type QuotaActor = ObjectActor<QuotaRole>;

/// A quota's actor remembers nothing between decisions.
pub struct QuotaRole;

impl Role for QuotaRole {
    type Object = GPUQuota;
    /// Its one intent: write this status.
    type Intent = GPUQuotaStatus;
    type Done = Result<Outcome<GPUQuota>, IoError>;
    const KIND: Kind = Kind::Quota;

    fn new() -> Self {
        QuotaRole
    }

    fn cached(w: &World, key: &str) -> Option<Arc<GPUQuota>> {
        w.quota(key)
    }

    fn decide(act: &mut QuotaActor, quota: &Arc<GPUQuota>) -> Step<GPUQuotaStatus> {
        decide_quota(quota, &act.env.world, Time(act.env.clock.wall()))
    }

    fn journal(_: &GPUQuotaStatus) -> Intent {
        Intent::WriteStatus
    }

    fn io(
        act: &mut QuotaActor,
        quota: Arc<GPUQuota>,
        rule: RuleId,
        status: GPUQuotaStatus,
    ) -> BoxFuture<'static, Self::Done> {
        let env = act.env.clone();
        let mut new = GPUQuota::clone(&quota);
        new.status = Some(status);
        let known = rv_number(&quota.metadata);
        let write = ObjectWrite::UpdateStatus(new);
        async move { write_object(&env, quota.obj_ref(), known, write, rule).await }.boxed()
    }

    fn finished(
        act: &mut QuotaActor,
        rule: RuleId,
        intent: Intent,
        done: Self::Done,
        ctx: &mut Context<QuotaActor>,
    ) {
        let (ns, name) = crate::world::split_key(&act.key);
        let what = ObjRef::new(Kind::Quota, Some(ns), name);
        pacer::finish_write(act, ctx, (rule, intent), &what, done, |act, outcome| {
            act.fresh.settle(outcome)
        });
    }
}
