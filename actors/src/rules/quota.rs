//! Q2: the status a GPUQuota should show. Q1, its limit at placement, is
//! G3's (`gate::check_quotas`).

use super::{RuleId, Step};
use crate::api::{
    CONDITION_CLASS_MISSING, GPUQuota, GPUQuotaStatus, remove_condition, set_condition,
};
use crate::world::World;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// What the namespace's claims hold or owe, per class the quota names and
/// in all; `ClassMissing` while it names a class that does not exist (it
/// applies all the same: a class made later is limited from its start).
pub fn quota_status(q: &GPUQuota, w: &World, now: Time) -> GPUQuotaStatus {
    let ns = q.metadata.namespace.as_deref().unwrap_or_default();
    let mut status = q.status.clone().unwrap_or_default();
    status.used = q
        .spec
        .hard
        .keys()
        .map(|class| (class.clone(), w.namespace_usage(ns, Some(class))))
        .collect();
    status.used_total = Some(w.namespace_usage(ns, None));
    let missing: Vec<&str> = q
        .spec
        .hard
        .keys()
        .filter(|c| !w.has_class(c))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        remove_condition(&mut status.conditions, CONDITION_CLASS_MISSING);
    } else {
        let classes = if missing.len() == 1 {
            "GPUClass"
        } else {
            "GPUClasses"
        };
        let message = format!(
            "{classes} {} named in spec.hard {} not exist; the limit applies once {} made",
            missing.join(", "),
            if missing.len() == 1 { "does" } else { "do" },
            if missing.len() == 1 {
                "it is"
            } else {
                "they are"
            },
        );
        // set_condition keeps the transition time while the status holds.
        let condition = Condition {
            type_: CONDITION_CLASS_MISSING.into(),
            status: "True".into(),
            reason: CONDITION_CLASS_MISSING.into(),
            message,
            last_transition_time: now,
            observed_generation: q.metadata.generation,
        };
        set_condition(&mut status.conditions, condition);
    }
    status
}

/// Q2: write the status when it differs from what the quota shows.
pub fn decide_quota(q: &GPUQuota, w: &World, now: Time) -> Step<GPUQuotaStatus> {
    let status = quota_status(q, w, now);
    if q.status.as_ref() == Some(&status) {
        return Step::Idle;
    }
    Step::Do(RuleId::Q2, status)
}
