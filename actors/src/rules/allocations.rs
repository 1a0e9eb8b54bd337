//! Allocations (docs/design.md, "Objects"; issue 3): a claim that holds or owes GPUs has
//! its allocation record. One without is reported, never placed elsewhere.

use super::{ClaimIntent, RuleId, Step};
use crate::api::{
    CONDITION_ALLOCATION_MISSING, GPUClaim, condition_is_true, is_deleting, remove_condition,
    set_condition,
};
use crate::world::{World, key};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use std::time::Duration;
use tokio::time::Instant;

/// How long a record may trail its claim before the claim is reported:
/// the claim and record watches are not ordered, so a placed claim's status
/// can be seen before its record.
pub const ALLOCATION_GRACE: Duration = Duration::from_secs(30);

/// A Bound, Attached or Lost claim, not being deleted, without a record of its UID.
pub fn allocation_missing(c: &GPUClaim, w: &World) -> bool {
    if !c.phase().counts_against_budget() || is_deleting(&c.metadata) {
        return false;
    }
    let k = key(
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.name.as_deref().unwrap_or_default(),
    );
    w.allocation(&k)
        .is_none_or(|r| Some(&r.spec.claim_uid) != c.metadata.uid.as_ref())
}

/// Allocations: mark a claim whose allocation has been missing for `ALLOCATION_GRACE`
/// with `AllocationMissing=True`, and clear the mark once the allocation is there.
/// Returns the step and since when the allocation is missing, to remember.
pub fn decide_allocation_report(
    c: &GPUClaim,
    w: &World,
    now: Instant,
    wall: Time,
    missing_since: Option<Instant>,
) -> (Step<ClaimIntent>, Option<Instant>) {
    let marked = condition_is_true(c.conditions(), CONDITION_ALLOCATION_MISSING);
    if !allocation_missing(c, w) {
        if !marked {
            return (Step::Idle, None);
        }
        let mut status = c.status.clone().unwrap_or_default();
        remove_condition(&mut status.conditions, CONDITION_ALLOCATION_MISSING);
        return (
            Step::Do(RuleId::Allocations, ClaimIntent::WriteStatus(status)),
            None,
        );
    }
    if marked {
        return (Step::Idle, missing_since);
    }
    let since = missing_since.unwrap_or(now);
    let due = since + ALLOCATION_GRACE;
    if now < due {
        return (Step::WaitUntil(RuleId::Allocations, due), Some(since));
    }
    let mut status = c.status.clone().unwrap_or_default();
    let node = c.node_name().unwrap_or_default();
    set_condition(
        &mut status.conditions,
        Condition {
            type_: CONDITION_ALLOCATION_MISSING.into(),
            status: "True".into(),
            reason: "NoAllocation".into(),
            message: format!(
                "the claim says it holds GPUs on {node} but has no GPUAllocation; it is not placed elsewhere"
            ),
            last_transition_time: wall,
            observed_generation: c.metadata.generation,
        },
    );
    (
        Step::Do(RuleId::Allocations, ClaimIntent::WriteStatus(status)),
        Some(since),
    )
}
