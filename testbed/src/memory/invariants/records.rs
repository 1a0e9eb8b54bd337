//! The invariants about records: I4 (claims and records match) and I8
//! (a namespace's records within its GPUQuotas).

use super::ns_key;
use gpu_claims_actors::api::{GPUAllocation, GPUClaim, GPUQuota};
use std::collections::HashMap;

/// I8, for a record placed since the last check: every GPUQuota of its
/// namespace holds, for its class and in all.
pub(super) fn quotas_hold(
    r: &GPUAllocation,
    quotas: &[GPUQuota],
    recorded: &HashMap<(&str, &str), u64>,
    v: &mut Vec<String>,
) {
    let ns = r.metadata.namespace.as_deref().unwrap_or_default();
    let class = r.spec.class_name.as_str();
    let used = |c: &str| recorded.get(&(ns, c)).copied().unwrap_or(0);
    for q in quotas
        .iter()
        .filter(|q| q.metadata.namespace.as_deref() == Some(ns))
    {
        let name = q.metadata.name.as_deref().unwrap_or_default();
        if let Some(hard) = q
            .spec
            .hard
            .get(class)
            .filter(|h| used(class) > u64::from(**h))
        {
            v.push(format!(
                "I8: namespace {ns} has {} GPUs of class {class} recorded, GPUQuota {name} allows {hard}",
                used(class)
            ));
        }
        if let Some(total) = q.spec.total.filter(|t| used("") > u64::from(*t)) {
            v.push(format!(
                "I8: namespace {ns} has {} GPUs recorded, GPUQuota {name} allows {total} in all",
                used("")
            ));
        }
    }
}

/// I4: every Bound, Attached or Lost claim has its record; every record its
/// claim. A claim being deleted is exempt: L8 deletes its record before its
/// finalizer, so a release cut short leaves it without one (and unused).
pub(super) fn allocations_match(
    claims: &HashMap<String, GPUClaim>,
    records: &[GPUAllocation],
    v: &mut Vec<String>,
) {
    let by_key: HashMap<String, &GPUAllocation> =
        records.iter().map(|r| (ns_key(&r.metadata), r)).collect();
    for (k, c) in claims {
        if c.phase().counts_against_budget()
            && !gpu_claims_actors::api::is_deleting(&c.metadata)
            && by_key
                .get(k)
                .is_none_or(|r| Some(&r.spec.claim_uid) != c.metadata.uid.as_ref())
        {
            v.push(format!(
                "I4: claim {k} is {} without its record",
                c.phase().as_str()
            ));
        }
    }
    for (k, r) in &by_key {
        if claims
            .get(k)
            .is_none_or(|c| c.metadata.uid.as_ref() != Some(&r.spec.claim_uid))
        {
            v.push(format!("I4: record {k} has no claim"));
        }
    }
}
