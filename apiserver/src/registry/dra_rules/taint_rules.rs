//! `ValidateDeviceTaintRule`, `ValidateDeviceTaintRuleUpdate` and the
//! status update's (`pkg/apis/resource/validation`, the same at
//! `resource.k8s.io/v1beta2` in 1.36 and `v1` in 1.37): a selector's
//! driver, pool and device in their formats (each only where set; no
//! selector, or an empty one, is valid), a taint's key a label name and
//! its value a label value, its effect one of `NoExecute`, `NoSchedule`,
//! `None` (checked on create and where an update changes it, so a stored
//! effect a later Kubernetes added is kept), and at most eight status
//! conditions. The spec may change (nothing in it is immutable).

use super::{DRIVER_MAX, POOL_MAX, list};
use crate::registry::validate::{
    Cause, CauseKind, LABEL, SUBDOMAIN, dns_label, dns_subdomain, qualified_name_errors,
};
use serde_json::Value;

/// `DeviceTaintRuleStatusMaxConditions`.
const STATUS_CONDITIONS_MAX: usize = 8;

const EFFECTS: [&str; 3] = ["NoExecute", "NoSchedule", "None"];

/// The causes to refuse a DeviceTaintRule as it will be stored.
pub fn taint_rule(old: Option<&Value>, new: &Value, out: &mut Vec<Cause>) {
    selector(&new["spec"]["deviceSelector"], out);
    taint(&new["spec"]["taint"], old.map(|o| &o["spec"]["taint"]), out);
    let conditions = &new["status"]["conditions"];
    if list(conditions).len() > STATUS_CONDITIONS_MAX {
        out.push(Cause::too_many(
            "status.conditions",
            list(conditions).len(),
            STATUS_CONDITIONS_MAX as u64,
        ));
    }
}

fn selector(s: &Value, out: &mut Vec<Cause>) {
    if !s.is_object() {
        return;
    }
    let at = "spec.deviceSelector";
    if let Some(driver) = s.get("driver").filter(|d| !d.is_null()) {
        driver_name(&format!("{at}.driver"), driver, out);
    }
    if let Some(pool) = s.get("pool").filter(|p| !p.is_null()) {
        pool_name(&format!("{at}.pool"), pool, out);
    }
    if let Some(device) = s.get("device").filter(|d| !d.is_null()) {
        let name = device.as_str().unwrap_or_default();
        if name.is_empty() {
            out.push(Cause::required(format!("{at}.device")));
        } else if !dns_label(name) {
            out.push(Cause::invalid(
                format!("{at}.device"),
                Cause::shown(device),
                LABEL,
            ));
        }
    }
}

/// `ValidateCSIDriverName`: required, at most 63, a DNS subdomain once
/// lowercased.
fn driver_name(path: &str, v: &Value, out: &mut Vec<Cause>) {
    let name = v.as_str().unwrap_or_default();
    if name.is_empty() {
        out.push(Cause::required(path));
        return;
    }
    if name.len() > DRIVER_MAX {
        out.push(Cause::too_long(path, DRIVER_MAX));
    }
    if !dns_subdomain(&name.to_lowercase()) {
        out.push(Cause::invalid(path, Cause::shown(v), SUBDOMAIN));
    }
}

/// `validatePoolName`: required, at most 253, each `/`-separated part a
/// DNS subdomain.
fn pool_name(path: &str, v: &Value, out: &mut Vec<Cause>) {
    let name = v.as_str().unwrap_or_default();
    if name.is_empty() {
        out.push(Cause::required(path));
        return;
    }
    if name.len() > POOL_MAX {
        out.push(Cause::too_long(path, POOL_MAX));
    }
    if name.split('/').any(|part| !dns_subdomain(part)) {
        out.push(Cause::invalid(path, Cause::shown(v), SUBDOMAIN));
    }
}

fn taint(t: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let at = "spec.taint";
    let key = t["key"].as_str().unwrap_or_default();
    if key.is_empty() {
        out.push(Cause::required(format!("{at}.key")));
    } else {
        for msg in qualified_name_errors(key) {
            out.push(Cause::invalid(
                format!("{at}.key"),
                Cause::shown(&t["key"]),
                msg,
            ));
        }
    }
    let value = t["value"].as_str().unwrap_or_default();
    if !value.is_empty() && !label_value(value) {
        out.push(Cause::invalid(
            format!("{at}.value"),
            Cause::shown(&t["value"]),
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ));
    }
    // Ratcheting: only a new or changed effect is checked.
    let effect = t["effect"].as_str().unwrap_or_default();
    if old.is_some_and(|o| o["effect"].as_str().unwrap_or_default() == effect) {
        return;
    }
    if effect.is_empty() {
        out.push(Cause::required(format!("{at}.effect")));
    } else if !EFFECTS.contains(&effect) {
        let supported: Vec<String> = EFFECTS.iter().map(|e| format!("{e:?}")).collect();
        out.push(Cause {
            field: format!("{at}.effect"),
            value: Cause::shown(&t["effect"]),
            detail: format!("supported values: {}", supported.join(", ")),
            kind: CauseKind::NotSupported,
        });
    }
}

/// `IsValidLabelValue`: at most 63, alphanumerics, '-', '_' or '.',
/// starting and ending with an alphanumeric.
fn label_value(v: &str) -> bool {
    let b = v.as_bytes();
    v.len() <= 63
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(*c, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn causes(old: Option<&Value>, new: &Value) -> Vec<String> {
        let mut out = Vec::new();
        taint_rule(old, new, &mut out);
        out.iter()
            .map(|c| format!("{}: {}", c.field, c.message()))
            .collect()
    }

    fn rule(selector: Value, taint: Value) -> Value {
        json!({"spec": {"deviceSelector": selector, "taint": taint}})
    }

    #[test]
    fn a_rule_of_one_pool_with_a_no_schedule_taint_is_valid_and_so_is_one_with_no_selector() {
        let ours = rule(
            json!({"driver": "gpu.nvidia.com", "pool": "node-1"}),
            json!({"key": "gpu.cozystack.io/managed", "effect": "NoSchedule"}),
        );
        assert!(causes(None, &ours).is_empty());
        let none = json!({"spec": {"taint": {"key": "k", "effect": "None"}}});
        assert!(causes(None, &none).is_empty());
    }

    #[test]
    fn selector_fields_taint_key_value_and_effect_are_refused_in_upstream_words() {
        let bad = rule(
            json!({"driver": "", "pool": "a/B", "device": "Gpu_0"}),
            json!({"key": "", "value": "-x", "effect": "PreferNoSchedule"}),
        );
        assert_eq!(
            causes(None, &bad),
            [
                "spec.deviceSelector.driver: Required value".to_string(),
                format!("spec.deviceSelector.pool: Invalid value: \"a/B\": {SUBDOMAIN}"),
                format!("spec.deviceSelector.device: Invalid value: \"Gpu_0\": {LABEL}"),
                "spec.taint.key: Required value".to_string(),
                "spec.taint.value: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string(),
                "spec.taint.effect: Unsupported value: \"PreferNoSchedule\": supported values: \"NoExecute\", \"NoSchedule\", \"None\"".to_string(),
            ]
        );
        let no_effect = rule(json!({}), json!({"key": "k"}));
        assert_eq!(
            causes(None, &no_effect),
            ["spec.taint.effect: Required value"]
        );
    }

    #[test]
    fn an_effect_stored_before_is_kept_and_at_most_eight_conditions_are_taken() {
        // A later Kubernetes's effect, stored: an update that keeps it passes.
        let stored = rule(json!({}), json!({"key": "k", "effect": "Evict"}));
        assert!(causes(Some(&stored), &stored).is_empty());
        let mut full = rule(json!({}), json!({"key": "k", "effect": "NoSchedule"}));
        full["status"]["conditions"] = json!(
            (0..9)
                .map(|i| json!({"type": format!("C{i}")}))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            causes(None, &full),
            ["status.conditions: Too many: 9: must have at most 8 items"]
        );
    }
}
