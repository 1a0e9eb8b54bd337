//! Q1: a set is placed only where it leaves room in every GPUQuota of its
//! namespace, per class a quota names and in all.

use super::members::Member;
use super::written::WrittenAllocations;
use super::{WaitReason, Waiting, wait};
use crate::api::amount::{add_to, total};
use crate::world::World;
use std::collections::BTreeMap;

/// As budgets: only claims without an allocation add to what the
/// namespace holds (a Lost claim that moves keeps its record and counts
/// once). What is held is counted from records, and from the records
/// placement wrote that the cache does not show yet, so that two sets
/// placed in one window cannot both take the last GPUs of a quota.
pub(super) fn check_quotas(
    w: &World,
    written: &WrittenAllocations,
    ns: &str,
    unplaced: &[&Member],
) -> Result<(), Waiting> {
    // Fail closed: a quota that cannot be read may forbid this set (a set
    // whose claims all hold their GPUs already takes nothing more).
    if unplaced.is_empty() {
        return Ok(());
    }
    if let Some((name, why)) = w.unreadable_quotas_in(ns).into_iter().next() {
        return Err(wait(
            WaitReason::QuotaUnreadable,
            format!(
                "GPUQuota {name} cannot be read ({why}): nothing is placed in this namespace until it is fixed or deleted"
            ),
        ));
    }
    let quotas = w.quotas_in(ns);
    if quotas.is_empty() {
        return Ok(());
    }
    let mut add: BTreeMap<&str, u64> = BTreeMap::new();
    for m in unplaced.iter().filter(|m| m.allocation_node.is_none()) {
        add_to(
            &mut add,
            &m.claim.spec.class_name,
            u64::from(m.claim.spec.count),
        );
    }
    let add_total = total(add.values().copied());
    if add_total == 0 {
        return Ok(());
    }
    let held = |class: Option<&str>| {
        w.allocated_in_namespace(ns, class)
            .saturating_add(written.in_namespace(w, ns, class))
    };
    for q in &quotas {
        let name = q.metadata.name.as_deref().unwrap_or_default();
        for (class, more) in &add {
            let Some(hard) = q.spec.hard.get(*class) else {
                continue;
            };
            if held(Some(class)).saturating_add(*more) > u64::from(*hard) {
                // Without the current usage, as for budgets: a message
                // that moved with every placement in the namespace would
                // be written again each time; the quota's status has it.
                // More than the limit itself: never, whatever is freed.
                let message = if *more > u64::from(*hard) {
                    format!(
                        "the set asks for {more} GPUs of class {class}, more than GPUQuota {name} allows at all ({hard}): it can never be placed; ask for fewer, or for a larger quota"
                    )
                } else {
                    format!(
                        "GPUQuota {name} has no room for {more} more GPUs of class {class}: its limit for {class} is {hard}"
                    )
                };
                return Err(wait(WaitReason::OverQuota, message));
            }
        }
        if let Some(total) = q
            .spec
            .total
            .filter(|t| held(None).saturating_add(add_total) > u64::from(*t))
        {
            let message = if add_total > u64::from(total) {
                format!(
                    "the set asks for {add_total} GPUs, more than GPUQuota {name}'s total ({total}): it can never be placed; ask for fewer, or for a larger quota"
                )
            } else {
                format!(
                    "GPUQuota {name} has no room for {add_total} more GPUs: its total is {total}"
                )
            };
            return Err(wait(WaitReason::OverQuota, message));
        }
    }
    Ok(())
}
