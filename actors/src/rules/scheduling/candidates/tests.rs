//! What the candidates are for each shape of selector and affinity; that
//! they never leave out a node the filter passes is
//! `g3_candidate_nodes_hold_every_node_the_affinity_filter_passes`.

use super::*;
use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use std::collections::BTreeMap;

/// Hostnames h1..h3 label nodes node-1..node-3; "twin" labels two nodes.
fn hostname(h: &str) -> BTreeSet<String> {
    match h {
        "h1" => ["node-1".to_string()].into(),
        "h2" => ["node-2".to_string()].into(),
        "h3" => ["node-3".to_string()].into(),
        "twin" => ["node-4".to_string(), "node-5".to_string()].into(),
        _ => BTreeSet::new(),
    }
}

fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: Some(values.iter().map(|v| v.to_string()).collect()),
    }
}

fn term(
    exprs: Vec<NodeSelectorRequirement>,
    fields: Vec<NodeSelectorRequirement>,
) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(exprs),
        match_fields: Some(fields),
    }
}

fn pod(selector: &[(&str, &str)], terms: Option<Vec<NodeSelectorTerm>>) -> PodScheduling {
    PodScheduling {
        node_selector: selector
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        required: terms.map(|t| NodeSelector {
            node_selector_terms: t,
        }),
        tolerations: Vec::new(),
    }
}

fn nodes(names: &[&str]) -> Option<BTreeSet<String>> {
    Some(names.iter().map(|n| n.to_string()).collect())
}

#[test]
fn g3_candidates_of_a_pod_pinned_by_its_node_selector_are_its_hosts_nodes() {
    let p = pod(&[(HOSTNAME_LABEL, "h2"), ("zone", "a")], None);
    assert_eq!(candidate_nodes([&p], &hostname), nodes(&["node-2"]));
    let twin = pod(&[(HOSTNAME_LABEL, "twin")], None);
    assert_eq!(
        candidate_nodes([&twin], &hostname),
        nodes(&["node-4", "node-5"])
    );
    let gone = pod(&[(HOSTNAME_LABEL, "no-such-host")], None);
    assert_eq!(candidate_nodes([&gone], &hostname), nodes(&[]));
}

#[test]
fn g3_candidates_of_required_affinity_are_its_terms_names_ored() {
    let by_host = term(vec![req(HOSTNAME_LABEL, "In", &["h1", "h3"])], vec![]);
    let by_field = term(vec![], vec![req("metadata.name", "In", &["node-2"])]);
    let p = pod(&[], Some(vec![by_host.clone(), by_field]));
    assert_eq!(
        candidate_nodes([&p], &hostname),
        nodes(&["node-1", "node-2", "node-3"])
    );
    // A term's requirements are ANDed: the names both allow.
    let anded = term(
        vec![
            req(HOSTNAME_LABEL, "In", &["h1", "h3"]),
            req("gpu", "Exists", &[]),
        ],
        vec![req("metadata.name", "In", &["node-3"])],
    );
    let p = pod(&[], Some(vec![anded]));
    assert_eq!(candidate_nodes([&p], &hostname), nodes(&["node-3"]));
    // No terms, or an empty term: the selector matches no node.
    assert_eq!(
        candidate_nodes([&pod(&[], Some(vec![]))], &hostname),
        nodes(&[])
    );
    let empty = NodeSelectorTerm::default();
    assert_eq!(
        candidate_nodes([&pod(&[], Some(vec![empty]))], &hostname),
        nodes(&[])
    );
}

#[test]
fn g3_a_pod_whose_selector_or_a_term_names_no_nodes_leaves_every_node_a_candidate() {
    assert_eq!(candidate_nodes([&pod(&[], None)], &hostname), None);
    assert_eq!(
        candidate_nodes([&pod(&[("zone", "a")], None)], &hostname),
        None
    );
    // One term bounded, one not: any node with the label may match.
    let by_host = term(vec![req(HOSTNAME_LABEL, "In", &["h1"])], vec![]);
    let by_label = term(vec![req("zone", "In", &["a"])], vec![]);
    let p = pod(&[], Some(vec![by_host, by_label]));
    assert_eq!(candidate_nodes([&p], &hostname), None);
    // NotIn and other operators on the hostname name no nodes to keep.
    let not_in = term(vec![req(HOSTNAME_LABEL, "NotIn", &["h1"])], vec![]);
    assert_eq!(
        candidate_nodes([&pod(&[], Some(vec![not_in]))], &hostname),
        None
    );
    // No pods at all: nothing bounds the set.
    assert_eq!(candidate_nodes([], &hostname), None);
}

#[test]
fn g3_candidates_of_a_set_are_what_every_pod_allows() {
    let a = pod(&[(HOSTNAME_LABEL, "h1")], None);
    let b = pod(
        &[],
        Some(vec![term(
            vec![req(HOSTNAME_LABEL, "In", &["h1", "h2"])],
            vec![],
        )]),
    );
    let free = pod(&[], None);
    assert_eq!(
        candidate_nodes([&a, &b, &free], &hostname),
        nodes(&["node-1"])
    );
    let c = pod(&[(HOSTNAME_LABEL, "h3")], None);
    assert_eq!(candidate_nodes([&a, &c], &hostname), nodes(&[]));
    // The selector and the affinity of one pod are ANDed as well.
    let both = pod(
        &[(HOSTNAME_LABEL, "h2")],
        Some(vec![term(
            vec![req(HOSTNAME_LABEL, "In", &["h1", "h2"])],
            vec![],
        )]),
    );
    assert_eq!(candidate_nodes([&both], &hostname), nodes(&["node-2"]));
}
