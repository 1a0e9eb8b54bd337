//! The end of an actor's write, for the actors whose write is one object
//! of their own (class, quota), and the handlers every scaffolded actor
//! has alike.

use super::{IoError, Outcome, Scaffolded, reconcile, retry_later};
use crate::api::ObjRef;
use crate::controller::journal::{DecisionResult, Intent};
use crate::rules::RuleId;
use actix::prelude::*;

/// A write of `what` (the actor's own object) ended: `settle` sees what
/// came of it (the actor's view of its object, and what follows a write
/// that landed), the decision is logged and the next one made. A failure
/// is said once and retried after the backoff.
pub fn finish_own<A: Scaffolded, T>(
    act: &mut A,
    ctx: &mut Context<A>,
    (rule, intent): (RuleId, Intent),
    what: &ObjRef,
    result: Result<Outcome<T>, IoError>,
    settle: impl FnOnce(&mut A, &Outcome<T>),
) {
    let logged = match result {
        Ok(outcome) => {
            let logged = match &outcome {
                Outcome::Written { .. } => DecisionResult::Ok,
                Outcome::Gone { .. } => DecisionResult::Gone,
                Outcome::Conflict(_) => DecisionResult::Conflict,
            };
            if !matches!(outcome, Outcome::Conflict(_)) {
                act.scaffold().succeeded();
            }
            settle(act, &outcome);
            logged
        }
        Err(e) => {
            if let Some(wait) = retry_later(act, ctx, &e) {
                tracing::warn!(object = %what, rule = %rule, %intent, error = %e, retry_in = %humantime::format_duration(wait), "write failed");
            }
            let failed = DecisionResult::Error(e.to_string());
            act.scaffold().log(rule, intent, failed);
            return;
        }
    };
    act.scaffold().log(rule, intent, logged);
    reconcile(act, ctx);
}

/// Where the scaffold is (the field `scaffold`), `Actor`, and the handlers of `Reconcile` (decide again, the change's
/// time noted for the latency) and `Ping` (answered once the mailbox
/// before it is handled), for a scaffolded actor.
macro_rules! scaffolded_actor {
    ($actor:ty) => {
        const _: () = {
            use actix::{Actor, Context, Handler};
            use $crate::controller::messages::{Ping, Reconcile};
            use $crate::controller::scaffold::{Scaffold, Standing, reconcile};

            impl Standing for $actor {
                fn scaffold(&mut self) -> &mut Scaffold {
                    &mut self.scaffold
                }
            }

            impl Actor for $actor {
                type Context = Context<Self>;
            }

            impl Handler<Reconcile> for $actor {
                type Result = ();
                fn handle(&mut self, r: Reconcile, ctx: &mut Context<Self>) {
                    self.scaffold().changed(r.since);
                    reconcile(self, ctx);
                }
            }

            impl Handler<Ping> for $actor {
                type Result = ();
                fn handle(&mut self, _: Ping, _: &mut Context<Self>) {}
            }
        };
    };
}
pub(crate) use scaffolded_actor;
