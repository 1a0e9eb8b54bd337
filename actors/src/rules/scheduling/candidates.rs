//! G3's candidate nodes: where a pod's node selector or required affinity
//! names its nodes (the `kubernetes.io/hostname` label, or the field
//! `metadata.name`), the nodes it could run on at all, read from the
//! names instead of judging every node. kube-scheduler's NodeAffinity
//! PreFilter does the same for `metadata.name` fields (its
//! `PreFilterResult.NodeNames`); the hostname label is what KubeVirt and
//! tenants pin with, so it is read too, through the world's index of nodes
//! by hostname.
//!
//! The answer is a superset: every node that passes the NodeAffinity
//! filter is in it, and the filter still judges each. A node left out
//! fails the filter for certain, so a pass that skips it loses nothing
//! but the count of such nodes (which the caller adds back).

use crate::api::HOSTNAME_LABEL;
use crate::api::PodScheduling;
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorTerm};
use std::collections::BTreeSet;

/// The nodes the pods of a set could run on, where their selectors or
/// affinity name them; None where some pod could run on any node as far
/// as names go. `hostname` answers the nodes labelled with a hostname.
pub fn candidate_nodes<'a>(
    pods: impl IntoIterator<Item = &'a PodScheduling>,
    hostname: &dyn Fn(&str) -> BTreeSet<String>,
) -> Option<BTreeSet<String>> {
    // Every pod must run on the node: the sets intersect.
    pods.into_iter()
        .filter_map(|p| pod_candidates(p, hostname))
        .reduce(|a, b| a.intersection(&b).cloned().collect())
}

/// One pod: its nodeSelector's hostname and its required affinity, ANDed.
fn pod_candidates(
    p: &PodScheduling,
    hostname: &dyn Fn(&str) -> BTreeSet<String>,
) -> Option<BTreeSet<String>> {
    let selected = p.node_selector.get(HOSTNAME_LABEL).map(|h| hostname(h));
    let required = p.required.as_ref().and_then(|r| required(r, hostname));
    match (selected, required) {
        (Some(a), Some(b)) => Some(a.intersection(&b).cloned().collect()),
        (a, b) => a.or(b),
    }
}

/// The terms are ORed: bounded only where every term is.
fn required(
    r: &NodeSelector,
    hostname: &dyn Fn(&str) -> BTreeSet<String>,
) -> Option<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for t in &r.node_selector_terms {
        all.extend(term(t, hostname)?);
    }
    // No terms: the selector matches no node, and the set is empty.
    Some(all)
}

/// A term's requirements are ANDed: bounded by any one that names nodes.
/// An empty term matches nothing. A requirement that does not parse makes
/// the term match nothing too, so reading its values as names stays a
/// superset of what matches.
fn term(
    t: &NodeSelectorTerm,
    hostname: &dyn Fn(&str) -> BTreeSet<String>,
) -> Option<BTreeSet<String>> {
    let exprs = t.match_expressions.as_deref().unwrap_or_default();
    let fields = t.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return Some(BTreeSet::new());
    }
    let by_hostname = exprs
        .iter()
        .filter(|e| e.key == HOSTNAME_LABEL && e.operator == "In")
        .map(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            values.iter().flat_map(|v| hostname(v)).collect()
        });
    let by_name = fields
        .iter()
        .filter(|f| f.key == "metadata.name" && f.operator == "In")
        .map(|f| f.values.iter().flatten().cloned().collect());
    by_hostname
        .chain(by_name)
        .reduce(|a: BTreeSet<String>, b| a.intersection(&b).cloned().collect())
}

#[cfg(test)]
mod tests;
