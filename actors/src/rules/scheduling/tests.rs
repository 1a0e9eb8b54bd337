//! The upstream plugins' own cases, as tables: `TestTaintTolerationFilter`
//! (pkg/scheduler/framework/plugins/tainttoleration), `TestNodeUnschedulable`
//! (plugins/nodeunschedulable) and `TestPodMatchesNodeSelectorAndAffinityTerms`
//! and `TestNodeSelectorMatch` (component-helpers/scheduling/corev1/nodeaffinity).

use super::*;
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

fn taint(key: &str, value: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: Some(value.into()),
        effect: effect.into(),
        time_added: None,
    }
}

fn tol(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
    let s = |v: &str| (!v.is_empty()).then(|| v.to_string());
    Toleration {
        key: s(key),
        operator: s(op),
        value: s(value),
        effect: s(effect),
        toleration_seconds: None,
    }
}

#[test]
fn g3_taint_toleration_filter_as_upstream() {
    let ns = "NoSchedule";
    // (case, tolerations, taints, fits)
    let cases: Vec<(&str, Vec<Toleration>, Vec<Taint>, bool)> = vec![
        (
            "no tolerations, a NoSchedule taint",
            vec![],
            vec![taint("dedicated", "user1", ns)],
            false,
        ),
        (
            "Equal by default, same key, value and effect",
            vec![tol("dedicated", "", "user1", ns)],
            vec![taint("dedicated", "user1", ns)],
            true,
        ),
        (
            "Equal, another value",
            vec![tol("dedicated", "Equal", "user2", ns)],
            vec![taint("dedicated", "user1", ns)],
            false,
        ),
        (
            "Exists tolerates any value",
            vec![tol("foo", "Exists", "", ns)],
            vec![taint("foo", "bar", ns)],
            true,
        ),
        (
            "several tolerations, several taints, all tolerated",
            vec![
                tol("dedicated", "Equal", "user2", ns),
                tol("foo", "Exists", "", ns),
            ],
            vec![taint("dedicated", "user2", ns), taint("foo", "bar", ns)],
            true,
        ),
        (
            "key and value match, a non-empty effect does not",
            vec![tol("foo", "Equal", "bar", "PreferNoSchedule")],
            vec![taint("foo", "bar", ns)],
            false,
        ),
        (
            "an empty effect matches every effect",
            vec![tol("foo", "Equal", "bar", "")],
            vec![taint("foo", "bar", ns)],
            true,
        ),
        (
            "PreferNoSchedule is not filtered",
            vec![tol("dedicated", "Equal", "user2", ns)],
            vec![taint("dedicated", "user1", "PreferNoSchedule")],
            true,
        ),
        (
            "no tolerations, only PreferNoSchedule",
            vec![],
            vec![taint("dedicated", "user1", "PreferNoSchedule")],
            true,
        ),
        (
            "NoExecute is filtered too",
            vec![],
            vec![taint("gpu", "", "NoExecute")],
            false,
        ),
        (
            "an empty key with Exists tolerates every taint",
            vec![tol("", "Exists", "", "")],
            vec![taint("a", "1", ns), taint("b", "", "NoExecute")],
            true,
        ),
        (
            "Gt below the threshold",
            vec![tol("priority-level", "Gt", "950", ns)],
            vec![taint("priority-level", "800", ns)],
            false,
        ),
        (
            "Gt above the threshold",
            vec![tol("sla", "Gt", "750", ns)],
            vec![taint("sla", "950", ns)],
            true,
        ),
        (
            "Lt above the threshold",
            vec![tol("priority-level", "Lt", "800", ns)],
            vec![taint("priority-level", "950", ns)],
            false,
        ),
        (
            "Lt with a value that is not a number",
            vec![tol("sla", "Lt", "800", ns)],
            vec![taint("sla", "high", ns)],
            false,
        ),
        (
            "an unknown operator tolerates nothing",
            vec![tol("foo", "Matches", "bar", ns)],
            vec![taint("foo", "bar", ns)],
            false,
        ),
        (
            "the devices-lost taint is a taint like any other",
            vec![],
            vec![taint(crate::api::DEVICES_LOST_TAINT, "", ns)],
            false,
        ),
    ];
    for (case, tols, taints, fits) in cases {
        assert_eq!(untolerated(&tols, &taints).is_none(), fits, "{case}");
    }
}

#[test]
fn g3_node_unschedulable_filter_as_upstream() {
    // (case, tolerations, tolerates the cordon)
    let cases: Vec<(&str, Vec<Toleration>, bool)> = vec![
        ("no tolerations", vec![], false),
        (
            "tolerates the unschedulable taint by key",
            vec![tol(UNSCHEDULABLE_TAINT, "Exists", "", "NoSchedule")],
            true,
        ),
        (
            "tolerates everything",
            vec![tol("", "Exists", "", "")],
            true,
        ),
        (
            "tolerates it for NoExecute only",
            vec![tol(UNSCHEDULABLE_TAINT, "Exists", "", "NoExecute")],
            false,
        ),
        (
            "Equal with the taint's empty value",
            vec![tol(UNSCHEDULABLE_TAINT, "Equal", "", "NoSchedule")],
            true,
        ),
    ];
    for (case, tols, ok) in cases {
        assert_eq!(tolerates_cordon(&tols), ok, "{case}");
    }
}

fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

fn exprs(rs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(rs),
        match_fields: None,
    }
}

fn fields(rs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: None,
        match_fields: Some(rs),
    }
}

fn both(e: Vec<NodeSelectorRequirement>, f: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(e),
        match_fields: Some(f),
    }
}

fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

struct Case {
    name: &'static str,
    selector: &'static [(&'static str, &'static str)],
    terms: Option<Vec<NodeSelectorTerm>>,
    node: &'static str,
    labels: &'static [(&'static str, &'static str)],
    want: bool,
}

/// Upstream's cases, and ours for the hostname label.
fn affinity_cases() -> Vec<Case> {
    let name = "metadata.name";
    let host = crate::api::HOSTNAME_LABEL;
    vec![
        Case {
            name: "no selector",
            selector: &[],
            terms: None,
            node: "",
            labels: &[],
            want: true,
        },
        Case {
            name: "missing labels",
            selector: &[("foo", "bar")],
            terms: None,
            node: "",
            labels: &[],
            want: false,
        },
        Case {
            name: "same labels",
            selector: &[("foo", "bar")],
            terms: None,
            node: "",
            labels: &[("foo", "bar")],
            want: true,
        },
        Case {
            name: "node labels are superset",
            selector: &[("foo", "bar")],
            terms: None,
            node: "",
            labels: &[("foo", "bar"), ("baz", "blah")],
            want: true,
        },
        Case {
            name: "node labels are subset",
            selector: &[("foo", "bar"), ("baz", "blah")],
            terms: None,
            node: "",
            labels: &[("foo", "bar")],
            want: false,
        },
        Case {
            name: "In matches",
            selector: &[],
            terms: Some(vec![exprs(vec![req("foo", "In", &["bar", "value2"])])]),
            node: "",
            labels: &[("foo", "bar")],
            want: true,
        },
        Case {
            name: "Gt matches",
            selector: &[],
            terms: Some(vec![exprs(vec![req("kernel-version", "Gt", &["0204"])])]),
            node: "",
            labels: &[("kernel-version", "0206")],
            want: true,
        },
        Case {
            name: "NotIn matches",
            selector: &[],
            terms: Some(vec![exprs(vec![req(
                "mem-type",
                "NotIn",
                &["DDR", "DDR2"],
            )])]),
            node: "",
            labels: &[("mem-type", "DDR3")],
            want: true,
        },
        Case {
            name: "NotIn matches a node without the label",
            selector: &[],
            terms: Some(vec![exprs(vec![req("mem-type", "NotIn", &["DDR"])])]),
            node: "",
            labels: &[],
            want: true,
        },
        Case {
            name: "Exists matches",
            selector: &[],
            terms: Some(vec![exprs(vec![req("GPU", "Exists", &[])])]),
            node: "",
            labels: &[("GPU", "NVIDIA-GRID-K1")],
            want: true,
        },
        Case {
            name: "DoesNotExist on a labelled node",
            selector: &[],
            terms: Some(vec![exprs(vec![req("GPU", "DoesNotExist", &[])])]),
            node: "",
            labels: &[("GPU", "x")],
            want: false,
        },
        Case {
            name: "Lt with a label that is not a number",
            selector: &[],
            terms: Some(vec![exprs(vec![req("cores", "Lt", &["8"])])]),
            node: "",
            labels: &[("cores", "many")],
            want: false,
        },
        Case {
            name: "Gt with two values does not parse",
            selector: &[],
            terms: Some(vec![exprs(vec![req("cores", "Gt", &["1", "2"])])]),
            node: "",
            labels: &[("cores", "4")],
            want: false,
        },
        Case {
            name: "Exists with values does not parse",
            selector: &[],
            terms: Some(vec![exprs(vec![req("foo", "Exists", &["bar", "baz"])])]),
            node: "",
            labels: &[("foo", "bar")],
            want: false,
        },
        Case {
            name: "In with no values does not parse",
            selector: &[],
            terms: Some(vec![exprs(vec![req("foo", "In", &[])])]),
            node: "",
            labels: &[("foo", "bar")],
            want: false,
        },
        Case {
            name: "affinity that does not match the node's labels",
            selector: &[],
            terms: Some(vec![exprs(vec![req("foo", "In", &["value1", "value2"])])]),
            node: "",
            labels: &[("foo", "bar")],
            want: false,
        },
        Case {
            name: "nil terms match nothing",
            selector: &[],
            terms: Some(vec![]),
            node: "",
            labels: &[("foo", "bar")],
            want: false,
        },
        Case {
            name: "an empty term matches nothing",
            selector: &[],
            terms: Some(vec![exprs(vec![])]),
            node: "",
            labels: &[("foo", "bar")],
            want: false,
        },
        Case {
            name: "expressions ANDed, matching",
            selector: &[],
            terms: Some(vec![exprs(vec![
                req("GPU", "Exists", &[]),
                req("GPU", "NotIn", &["AMD", "INTER"]),
            ])]),
            node: "",
            labels: &[("GPU", "NVIDIA-GRID-K1")],
            want: true,
        },
        Case {
            name: "expressions ANDed, not matching",
            selector: &[],
            terms: Some(vec![exprs(vec![
                req("GPU", "Exists", &[]),
                req("GPU", "In", &["AMD", "INTER"]),
            ])]),
            node: "",
            labels: &[("GPU", "NVIDIA-GRID-K1")],
            want: false,
        },
        Case {
            name: "terms ORed",
            selector: &[],
            terms: Some(vec![
                exprs(vec![req("foo", "In", &["bar", "value2"])]),
                exprs(vec![req("diffkey", "In", &["wrong", "value2"])]),
            ]),
            node: "",
            labels: &[("foo", "bar")],
            want: true,
        },
        Case {
            name: "affinity and nodeSelector both satisfied",
            selector: &[("foo", "bar")],
            terms: Some(vec![exprs(vec![req("foo", "Exists", &[])])]),
            node: "",
            labels: &[("foo", "bar")],
            want: true,
        },
        Case {
            name: "affinity satisfied, nodeSelector not",
            selector: &[("foo", "bar")],
            terms: Some(vec![exprs(vec![req("foo", "Exists", &[])])]),
            node: "",
            labels: &[("foo", "barrrrrr")],
            want: false,
        },
        Case {
            name: "an invalid value in a term",
            selector: &[],
            terms: Some(vec![exprs(vec![req(
                "foo",
                "NotIn",
                &["invalid value: ___@#$%^"],
            )])]),
            node: "",
            labels: &[("foo", "bar")],
            want: false,
        },
        Case {
            name: "an invalid key in a term",
            selector: &[],
            terms: Some(vec![exprs(vec![req(
                "invalid key",
                "In",
                &["label_value"],
            )])]),
            node: "",
            labels: &[("invalid key", "label_value")],
            want: false,
        },
        Case {
            name: "matchFields In matches",
            selector: &[],
            terms: Some(vec![fields(vec![req(name, "In", &["node_1"])])]),
            node: "node_1",
            labels: &[],
            want: true,
        },
        Case {
            name: "matchFields In does not match",
            selector: &[],
            terms: Some(vec![fields(vec![req(name, "In", &["node_1"])])]),
            node: "node_2",
            labels: &[],
            want: false,
        },
        Case {
            name: "matchFields NotIn",
            selector: &[],
            terms: Some(vec![fields(vec![req(name, "NotIn", &["node_1"])])]),
            node: "node_2",
            labels: &[],
            want: true,
        },
        Case {
            name: "matchFields with two values does not parse",
            selector: &[],
            terms: Some(vec![fields(vec![req(name, "In", &["host_1", "host_2"])])]),
            node: "host_1",
            labels: &[],
            want: false,
        },
        Case {
            name: "two terms: fields do not match, expressions do",
            selector: &[],
            terms: Some(vec![
                fields(vec![req(name, "In", &["node_1"])]),
                exprs(vec![req("foo", "In", &["bar"])]),
            ]),
            node: "node_2",
            labels: &[("foo", "bar")],
            want: true,
        },
        Case {
            name: "one term: fields do not match, expressions do",
            selector: &[],
            terms: Some(vec![both(
                vec![req("foo", "In", &["bar"])],
                vec![req(name, "In", &["node_1"])],
            )]),
            node: "node_2",
            labels: &[("foo", "bar")],
            want: false,
        },
        Case {
            name: "one term: both match",
            selector: &[],
            terms: Some(vec![both(
                vec![req("foo", "In", &["bar"])],
                vec![req(name, "In", &["node_1"])],
            )]),
            node: "node_1",
            labels: &[("foo", "bar")],
            want: true,
        },
        Case {
            name: "two terms: neither matches",
            selector: &[],
            terms: Some(vec![
                fields(vec![req(name, "In", &["node_1"])]),
                exprs(vec![req("foo", "In", &["not-match-to-bar"])]),
            ]),
            node: "node_2",
            labels: &[("foo", "bar")],
            want: false,
        },
        Case {
            name: "pinned to a host by its hostname label",
            selector: &[(crate::api::HOSTNAME_LABEL, "n1")],
            terms: None,
            node: "n1",
            labels: &[(crate::api::HOSTNAME_LABEL, "n1")],
            want: true,
        },
        Case {
            name: "pinned to another host",
            selector: &[(crate::api::HOSTNAME_LABEL, "n1")],
            terms: None,
            node: "n2",
            labels: &[(crate::api::HOSTNAME_LABEL, "n2")],
            want: false,
        },
        Case {
            name: "hostname In two hosts, one of them this node's",
            selector: &[],
            terms: Some(vec![exprs(vec![req(host, "In", &["n1", "n2"])])]),
            node: "n2",
            labels: &[(crate::api::HOSTNAME_LABEL, "n2")],
            want: true,
        },
        Case {
            name: "hostname In, a node named otherwise than its hostname",
            selector: &[],
            terms: Some(vec![exprs(vec![req(host, "In", &["h1"])])]),
            node: "node-1",
            labels: &[(crate::api::HOSTNAME_LABEL, "h1")],
            want: true,
        },
        Case {
            name: "hostname NotIn another host",
            selector: &[],
            terms: Some(vec![exprs(vec![req(host, "NotIn", &["n2"])])]),
            node: "n1",
            labels: &[(crate::api::HOSTNAME_LABEL, "n1")],
            want: true,
        },
        Case {
            name: "two terms: a hostname that is not this node's, or any node with foo",
            selector: &[],
            terms: Some(vec![
                exprs(vec![req(host, "In", &["n2"])]),
                exprs(vec![req("foo", "Exists", &[])]),
            ]),
            node: "n1",
            labels: &[(crate::api::HOSTNAME_LABEL, "n1"), ("foo", "bar")],
            want: true,
        },
        Case {
            name: "a hostname In with an invalid value beside a valid one",
            selector: &[],
            terms: Some(vec![exprs(vec![req(host, "In", &["n1", "-bad-"])])]),
            node: "n1",
            labels: &[(crate::api::HOSTNAME_LABEL, "n1")],
            want: false,
        },
    ]
}

#[test]
fn g3_node_affinity_filter_as_upstream() {
    for c in affinity_cases() {
        let required = c.terms.map(|t| NodeSelector {
            node_selector_terms: t,
        });
        let got = affinity_matches(
            &labels(c.selector),
            required.as_ref(),
            c.node,
            &labels(c.labels),
        );
        assert_eq!(got, c.want, "{}", c.name);
    }
}

/// G3: the candidates read from names leave out no node the NodeAffinity
/// filter passes, in every case of the filter's table (the node alone in
/// a world whose index of hostnames is its label).
#[test]
fn g3_candidate_nodes_hold_every_node_the_affinity_filter_passes() {
    let mut narrowed = 0;
    for c in affinity_cases() {
        let required = c.terms.map(|t| NodeSelector {
            node_selector_terms: t,
        });
        let node_labels = labels(c.labels);
        let pod = crate::api::PodScheduling {
            node_selector: labels(c.selector),
            required: required.clone(),
            tolerations: Vec::new(),
        };
        let hostname = |h: &str| -> std::collections::BTreeSet<String> {
            match node_labels.get(crate::api::HOSTNAME_LABEL) {
                Some(l) if l == h => [c.node.to_string()].into(),
                _ => Default::default(),
            }
        };
        let candidates = candidates::candidate_nodes([&pod], &hostname);
        let passes = affinity_matches(&pod.node_selector, required.as_ref(), c.node, &node_labels);
        assert_eq!(passes, c.want, "{}", c.name);
        if let Some(nodes) = &candidates {
            narrowed += 1;
            assert!(
                !passes || nodes.contains(c.node),
                "{}: the filter passes {} but the candidates {nodes:?} leave it out",
                c.name,
                c.node
            );
        }
    }
    assert!(narrowed >= 8, "the table narrows in {narrowed} cases only");
}
