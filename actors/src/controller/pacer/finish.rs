//! The end of an actor's write, for the actors whose write is one object
//! of their own (class, quota).

use super::{Decides, IoError, Outcome, reconcile, retry_later};
use crate::api::ObjRef;
use crate::controller::journal::{DecisionResult, Intent};
use crate::rules::RuleId;
use actix::prelude::*;

/// A write of `what` (the actor's own object) ended: `settle` sees what
/// came of it (the actor's view of its object, and what follows a write
/// that landed), the decision is logged and the next one made. A failure
/// is said once and retried after the backoff.
pub fn finish_write<A: Decides, T>(
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
                act.pacer().succeeded();
            }
            settle(act, &outcome);
            logged
        }
        Err(e) => {
            if let Some(wait) = retry_later(act, ctx, &e) {
                tracing::warn!(object = %what, rule = %rule, %intent, error = %e, retry_in = %humantime::format_duration(wait), "write failed");
            }
            let failed = DecisionResult::Error(e.to_string());
            act.pacer().log(rule, intent, failed);
            return;
        }
    };
    act.pacer().log(rule, intent, logged);
    reconcile(act, ctx);
}
