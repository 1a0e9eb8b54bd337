//! G3's scheduler filters: whether kube-scheduler could run a launcher pod
//! on a node, as its NodeUnschedulable, TaintToleration and NodeAffinity
//! plugins decide. Placement pins a set to a node only where every launcher
//! pod of the VMI passes all three; otherwise the pinned pod would be
//! Pending forever with its gate gone.
//!
//! Pure functions over k8s-openapi types, each mirroring its upstream
//! counterpart (`Toleration.ToleratesTaint`, `nodeaffinity.
//! GetRequiredNodeAffinity(pod).Match(node)`), with the upstream cases as
//! tables in `tests`.

pub mod candidates;
pub mod fit;

use crate::api::validation::{is_label_key, is_label_value};
use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration,
};
use std::collections::BTreeMap;

/// The taint the NodeUnschedulable plugin asks a cordoned node's pods to tolerate.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// `Toleration.ToleratesTaint`: an empty effect matches every effect, an
/// empty key (with `Exists`) every key; `Equal` (or no operator) compares
/// values, `Exists` matches any, `Gt`/`Lt` compare them as integers.
pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    let effect = t.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = t.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    let value = t.value.as_deref().unwrap_or_default();
    let taint_value = taint.value.as_deref().unwrap_or_default();
    match t.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => value == taint_value,
        "Exists" => true,
        op @ ("Gt" | "Lt") => match (value.parse::<i64>(), taint_value.parse::<i64>()) {
            (Ok(v), Ok(tv)) => (op == "Gt" && tv > v) || (op == "Lt" && tv < v),
            _ => false,
        },
        _ => false,
    }
}

/// TaintToleration's filter: the first NoSchedule or NoExecute taint that
/// no toleration tolerates (PreferNoSchedule only scores).
pub fn untolerated<'a>(tolerations: &[Toleration], taints: &'a [Taint]) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// NodeUnschedulable's filter: a cordoned node takes only pods that
/// tolerate `node.kubernetes.io/unschedulable:NoSchedule`.
pub fn tolerates_cordon(tolerations: &[Toleration]) -> bool {
    let cordon = Taint {
        key: UNSCHEDULABLE_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    };
    tolerations.iter().any(|t| tolerates(t, &cordon))
}

/// NodeAffinity's filter: the pod's `nodeSelector` (every label equal) and
/// its required node affinity (terms ORed) both match the node.
pub fn affinity_matches(
    selector: &BTreeMap<String, String>,
    required: Option<&NodeSelector>,
    node_name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        && required.is_none_or(|r| {
            r.node_selector_terms
                .iter()
                .any(|t| term_matches(t, node_name, labels))
        })
}

/// One term: its expressions and fields ANDed. An empty term matches
/// nothing; so does a term that does not parse (an unknown operator, a
/// requirement with the wrong number of values, an invalid key or value).
fn term_matches(t: &NodeSelectorTerm, node_name: &str, labels: &BTreeMap<String, String>) -> bool {
    let exprs = t.match_expressions.as_deref().unwrap_or_default();
    let fields = t.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let parsed = exprs.iter().map(|r| label_requirement(r, labels));
    let parsed: Option<Vec<bool>> = parsed
        .chain(fields.iter().map(|r| field_requirement(r, node_name)))
        .collect();
    parsed.is_some_and(|all| all.into_iter().all(|m| m))
}

/// A label requirement: None when it does not parse, else whether it matches.
fn label_requirement(
    r: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Option<bool> {
    let values = r.values.as_deref().unwrap_or_default();
    if !is_label_key(&r.key) {
        return None;
    }
    let label = labels.get(&r.key);
    match r.operator.as_str() {
        "In" | "NotIn" => {
            if values.is_empty() || !values.iter().all(|v| is_label_value(v)) {
                return None;
            }
            let found = label.is_some_and(|l| values.contains(l));
            Some(found == (r.operator == "In"))
        }
        "Exists" | "DoesNotExist" => {
            if !values.is_empty() {
                return None;
            }
            Some(label.is_some() == (r.operator == "Exists"))
        }
        "Gt" | "Lt" => {
            let [v] = values else { return None };
            let bound: i64 = v.parse().ok()?;
            let Some(have) = label.and_then(|l| l.parse::<i64>().ok()) else {
                return Some(false);
            };
            Some(if r.operator == "Gt" {
                have > bound
            } else {
                have < bound
            })
        }
        _ => None,
    }
}

/// A field requirement: only `metadata.name`, with `In` or `NotIn` and one value.
fn field_requirement(r: &NodeSelectorRequirement, node_name: &str) -> Option<bool> {
    let [v] = r.values.as_deref().unwrap_or_default() else {
        return None;
    };
    let value = (r.key == "metadata.name").then_some(node_name);
    match r.operator.as_str() {
        "In" => Some(value == Some(v.as_str())),
        "NotIn" => Some(value != Some(v.as_str())),
        _ => None,
    }
}

/// The three filters above, in the order kube-scheduler runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filter {
    NodeAffinity,
    NodeUnschedulable,
    TaintToleration,
}

/// The first of the three filters that keeps a pod off `node`, if any.
pub fn failing_filter(
    s: &crate::api::PodScheduling,
    node: &crate::api::NodeFacts,
) -> Option<Filter> {
    if !affinity_matches(
        &s.node_selector,
        s.required.as_ref(),
        &node.name,
        &node.labels,
    ) {
        return Some(Filter::NodeAffinity);
    }
    if node.unschedulable && !tolerates_cordon(&s.tolerations) {
        return Some(Filter::NodeUnschedulable);
    }
    untolerated(&s.tolerations, &node.taints).map(|_| Filter::TaintToleration)
}

#[cfg(test)]
mod tests;
