//! How each watched change reaches, through the world's `apply` (which
//! stores it, indexes it, marks the watch's progress and says what
//! changed), exactly the actors it concerns: `triggers::whom` says who,
//! in what order; this tells them.

use super::Supervisor;
use super::triggers::{Wake, whom};
use crate::api::{DecodeError, NodeFacts};
use crate::controller::placement::{LookAt, Relisted};
use crate::controller::{ClaimRole, ClassRole, QuotaRole};
use crate::ports::{Kind, Obj};
use crate::world::{Change, key, split_key};
use actix::prelude::*;
use std::collections::HashSet;

impl Supervisor {
    pub(super) fn on_event(&mut self, obj: Obj, deleted: bool, ctx: &mut Context<Self>) {
        let change = self.world.apply(obj, deleted);
        self.fan_out(change, ctx);
    }

    /// Tells those `change` concerns (`triggers::whom`), in its order.
    pub(super) fn fan_out(&mut self, change: Change, ctx: &mut Context<Self>) {
        match &change {
            // A quota that can be read again is no longer unreadable.
            Change::Quota(q) if self.world.set_unreadable(Kind::Quota, &q.key, None) => {
                self.place(LookAt::Namespace(split_key(&q.key).0.to_string()));
            }
            Change::Node(n) => {
                if let Some(now) = &n.now {
                    self.report_unreadable(now, n.old.as_deref());
                }
            }
            _ => {}
        }
        for tell in whom(change, &self.env.world) {
            match tell {
                Wake::Claim(k) => self.decide_again::<ClaimRole>(&k, ctx),
                Wake::Class(k) => self.decide_again::<ClassRole>(&k, ctx),
                Wake::Quota(k) => self.decide_again::<QuotaRole>(&k, ctx),
                Wake::Pool(look) => self.pools(look),
                Wake::Placement(look) => self.place(look),
            }
        }
    }

    /// Whether the API server serves a DRA kind (its watch listed, or
    /// answered 404): the DRA classes say DRAUnavailable, or stop saying it.
    pub(super) fn served(&mut self, kind: Kind, served: bool, ctx: &mut Context<Self>) {
        if !Kind::DRA.contains(&kind) && kind != Kind::DeviceTaintRule {
            return;
        }
        let change = Change::Devices(self.world.set_served(kind, served));
        self.fan_out(change, ctx);
    }

    /// An object the watch brought that cannot be read. Its cached version
    /// stays; a GPUQuota's namespace is also told, as Q1 fails closed on a
    /// quota it cannot read (and opens again once it can, or it is gone).
    pub(super) fn unreadable(
        &mut self,
        kind: Kind,
        name: &str,
        error: &DecodeError,
        gone: bool,
        ctx: &mut Context<Self>,
    ) {
        if gone {
            tracing::info!(kind = kind.name(), object = %name, "an object that could not be read is gone");
            // Its cached version (from before it became unreadable) goes too.
            let change = self.world.forget(kind, name);
            self.fan_out(change, ctx);
        } else {
            tracing::warn!(kind = kind.name(), object = %name, %error, "an object that cannot be read; its cached version stays");
        }
        let why = (!gone).then(|| error.to_string());
        if self.world.set_unreadable(kind, name, why) {
            self.place(LookAt::Namespace(split_key(name).0.to_string()));
        }
    }

    /// A GPU resource a node advertises that is not a whole number of
    /// devices counts as none: said once per value, for the resources of
    /// the classes (cpu "3500m" is no business of ours).
    fn report_unreadable(&self, n: &NodeFacts, old: Option<&NodeFacts>) {
        for (resource, (quantity, error)) in &n.unreadable {
            let said =
                old.is_some_and(|o| o.unreadable.get(resource) == n.unreadable.get(resource));
            if self.env.world.serves(resource) && !said {
                tracing::warn!(node = %n.name, %resource, %quantity, %error, "the node's allocatable GPUs are not a whole number of devices; counted as none");
            }
        }
    }

    pub(super) fn relisted(
        &mut self,
        kind: Kind,
        objs: Vec<Obj>,
        list_rv: Option<u64>,
        unreadable: &[(String, String)],
        ctx: &mut Context<Self>,
    ) {
        // What cannot be read is not gone: its cached version stays.
        let keep: HashSet<String> = objs
            .iter()
            .filter_map(|o| object_key(kind, o.meta()))
            .chain(unreadable.iter().map(|(k, _)| k.clone()))
            .collect();
        let w = self.env.world.clone();
        for k in w.keys(kind).into_iter().filter(|k| !keep.contains(k)) {
            let change = self.world.forget(kind, &k);
            self.fan_out(change, ctx);
        }
        for o in objs {
            self.on_event(o, false, ctx);
        }
        self.world.relisted(kind, list_rv);
        if let Some(p) = &self.placement {
            p.do_send(Relisted(kind));
        }
        let next = self.readiness.clone().listed(kind);
        self.move_to(next, ctx);
    }
}

fn object_key(
    kind: Kind,
    m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<String> {
    if kind.namespaced() {
        Some(key(m.namespace.as_deref()?, m.name.as_deref()?))
    } else {
        m.name.clone()
    }
}
