//! metav1.Condition helpers with the semantics of apimachinery's
//! `meta.SetStatusCondition` / `RemoveStatusCondition`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// Removes the condition of `type_`; true when one was there.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    before != conditions.len()
}

/// Sets a condition, keeping lastTransitionTime when the status is unchanged.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            let keep_time = old.status == new.status;
            let time = old.last_transition_time.clone();
            *old = new;
            if keep_time {
                old.last_transition_time = time;
            }
        }
        None => conditions.push(new),
    }
}

pub fn condition_is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// The types whose status is True, sorted: what `plan` prints.
pub fn true_condition_types(conditions: &[Condition]) -> Vec<String> {
    let mut v: Vec<String> = conditions
        .iter()
        .filter(|c| c.status == "True")
        .map(|c| c.type_.clone())
        .collect();
    v.sort();
    v
}
