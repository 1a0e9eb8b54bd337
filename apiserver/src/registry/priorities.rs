//! PriorityClasses as kube-apiserver serves them, and the Priority
//! admission plugin that gives a pod its priority (on by default):
//! - the two system classes exist from the start (the post-start hook
//!   `scheduling/bootstrap-system-priority-classes`, create-if-missing);
//! - validation (`pkg/apis/scheduling/validation`): a `system-` name only
//!   for those two with their values, a user class's value at most one
//!   billion, `value` and `preemptionPolicy` never changed by an update;
//!   `preemptionPolicy` defaults to `PreemptLowerPriority`;
//! - the storage refuses to delete a system class (403);
//! - admission (`plugin/pkg/admission/priority`): at most one
//!   `globalDefault` (403); a pod created gets `spec.priority` and
//!   `spec.preemptionPolicy` from its class, or from the global default
//!   (whose name it then carries), or 0; a class that does not exist, or
//!   a priority the pod set that differs, is refused (403).

use crate::registry::validate::Cause;
use crate::store::Store;
use serde_json::{Value, json};

/// `scheduling.HighestUserDefinablePriority`.
const HIGHEST_USER_PRIORITY: i64 = 1_000_000_000;

/// `SystemPriorityClasses()`: name, value, description.
pub const SYSTEM: [(&str, i64, &str); 2] = [
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

const PREEMPT_LOWER: &str = "PreemptLowerPriority";

/// The system classes, made where missing (as the post-start hook does:
/// an existing one is left as it is).
pub fn adopt(store: &Store) {
    for (name, value, description) in SYSTEM {
        if store.get("PriorityClass", "", name).is_none() {
            store.seed(
                "PriorityClass",
                json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": name}, "value": value,
                    "description": description, "preemptionPolicy": PREEMPT_LOWER}),
            );
        }
    }
}

/// `SetDefaults_PriorityClass`.
pub fn defaults(obj: &mut Value) {
    if obj.get("preemptionPolicy").is_none_or(Value::is_null) {
        obj["preemptionPolicy"] = PREEMPT_LOWER.into();
    }
}

/// `ValidatePriorityClass` and, for an update, `ValidatePriorityClassUpdate`.
pub fn check(old: Option<&Value>, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    let value = new["value"].as_i64().unwrap_or(0);
    match old {
        None => {
            if name.starts_with("system-") {
                let known = SYSTEM.iter().find(|(n, _, _)| *n == name);
                let why = match known {
                    None => Some(format!("{name} is not a known system priority class")),
                    Some((_, v, _)) if *v != value => {
                        Some(format!("value of {name} PriorityClass must be {v}"))
                    }
                    Some(_) if new["globalDefault"] == true => Some(format!(
                        "globalDefault of {name} PriorityClass must be false"
                    )),
                    Some(_) => None,
                };
                if let Some(why) = why {
                    causes.push(Cause::forbidden(
                        "metadata.name",
                        format!(
                            "priority class names with 'system-' prefix are reserved for system use only. error: {why}"
                        ),
                    ));
                }
            } else if value > HIGHEST_USER_PRIORITY {
                causes.push(Cause::forbidden(
                    "value",
                    format!(
                        "maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"
                    ),
                ));
            }
        }
        Some(old) => {
            if old["value"] != new["value"] {
                causes.push(Cause::forbidden(
                    "value",
                    "may not be changed in an update.",
                ));
            }
            if old["preemptionPolicy"] != new["preemptionPolicy"] {
                causes.push(Cause::invalid(
                    "preemptionPolicy",
                    Cause::shown(&new["preemptionPolicy"]),
                    "field is immutable",
                ));
            }
        }
    }
    match new["preemptionPolicy"].as_str() {
        Some("PreemptLowerPriority" | "Never") => {}
        _ => causes.push(Cause::invalid(
            "preemptionPolicy",
            Cause::shown(&new["preemptionPolicy"]),
            "supported values: \"Never\", \"PreemptLowerPriority\"",
        )),
    }
    causes
}

/// The storage's refusal to delete `name`, for a system class.
pub fn refuse_delete(name: &str) -> Option<&'static str> {
    SYSTEM
        .iter()
        .any(|(n, _, _)| *n == name)
        .then_some("this is a system priority class and cannot be deleted")
}

/// The global default the admission plugin sees: of several (a race),
/// the lowest value.
fn global_default(store: &Store) -> Option<Value> {
    store
        .list("PriorityClass")
        .0
        .into_iter()
        .filter(|c| c["globalDefault"] == true)
        .min_by_key(|c| c["value"].as_i64().unwrap_or(0))
}

/// The admission plugin on a PriorityClass's create or update: another
/// class already the global default refuses a second.
pub fn admit_class(store: &Store, updating: bool, new: &Value) -> Result<(), String> {
    if new["globalDefault"] != true {
        return Ok(());
    }
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    match global_default(store) {
        Some(d) if !updating || d["metadata"]["name"].as_str() != Some(name) => Err(format!(
            "PriorityClass {} is already marked as default. Only one default can exist",
            d["metadata"]["name"].as_str().unwrap_or_default()
        )),
        _ => Ok(()),
    }
}

/// The admission plugin on a pod's create: its priority (and preemption
/// policy) from its class, or from the global default, whose name it then
/// carries; else 0. Refused: a class that does not exist, a priority or
/// policy the pod set that differs from its class's.
pub fn admit_pod(store: &Store, pod: &mut Value) -> Result<(), String> {
    let spec = &mut pod["spec"];
    let named = spec["priorityClassName"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let (priority, policy) = match named {
        Some(name) => {
            let Some(pc) = store.get("PriorityClass", "", &name) else {
                return Err(format!("no PriorityClass with name {name} was found"));
            };
            (
                pc["value"].as_i64().unwrap_or(0),
                pc["preemptionPolicy"].clone(),
            )
        }
        None => match global_default(store) {
            Some(d) => {
                spec["priorityClassName"] = d["metadata"]["name"].clone();
                (
                    d["value"].as_i64().unwrap_or(0),
                    d["preemptionPolicy"].clone(),
                )
            }
            None => (0, Value::from(PREEMPT_LOWER)),
        },
    };
    if let Some(set) = spec["priority"].as_i64()
        && set != priority
    {
        return Err(format!(
            "the integer value of priority ({set}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        ));
    }
    spec["priority"] = priority.into();
    if let Some(p) = policy.as_str() {
        if let Some(set) = spec["preemptionPolicy"].as_str()
            && set != p
        {
            return Err(format!(
                "the string value of PreemptionPolicy ({set}) must not be provided in pod spec; priority admission controller computed {p} from the given PriorityClass name"
            ));
        }
        spec["preemptionPolicy"] = p.into();
    }
    Ok(())
}

/// The admission plugin on a pod's update: a priority (and policy) the
/// update left out is the stored pod's.
pub fn keep_on_update(old: &Value, pod: &mut Value) {
    for f in ["priority", "preemptionPolicy"] {
        if pod["spec"][f].is_null() && !old["spec"][f].is_null() {
            pod["spec"][f] = old["spec"][f].clone();
        }
    }
}
