//! G3's candidate nodes, against the filter they stand in for: whatever
//! the order of node changes (made, relabelled, deleted, forgotten on a
//! relist), the world's index of nodes by hostname is what a count over
//! every node says, and the candidates read from pods' selectors and
//! affinity hold every node each pod's NodeAffinity filter passes.
use gpu_claims_actors::api::{HOSTNAME_LABEL, PodScheduling};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj};
use gpu_claims_actors::rules::scheduling::affinity_matches;
use gpu_claims_actors::rules::scheduling::candidates::candidate_nodes;
use gpu_claims_actors::world::WorldWriter;
use gpu_claims_testbed::fixtures::node;
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// Hostnames the nodes and pods draw from: a node's own name, or one of
/// a few shared ones (two nodes may carry the same label).
const HOSTS: [&str; 7] = ["n0", "n1", "n2", "n3", "h0", "h1", "-bad-"];

#[derive(Clone, Debug)]
enum Change {
    /// Node `n` made or changed: labelled with HOSTS[h], or without the
    /// label (read as its name), and a zone.
    Node { n: u8, host: Option<u8>, zone: bool },
    /// Deleted by a watch event, or forgotten on a relist.
    Gone { n: u8, relist: bool },
}

/// Node `n` with 8 GPUs, labelled with HOSTS[host] (else read as its
/// name) and, if `zone`, a zone.
fn node_of(n: u8, host: Option<u8>, zone: bool) -> Obj {
    let mut b = node(&format!("n{n}")).gpus("nvidia.com/a", 8);
    if let Some(h) = host {
        b = b.label(HOSTNAME_LABEL, HOSTS[usize::from(h)]);
    }
    if zone {
        b = b.label("zone", "a");
    }
    Obj::Node(b.0)
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => (0..4u8, proptest::option::of(0..6u8), any::<bool>())
            .prop_map(|(n, host, zone)| Change::Node { n, host, zone }),
        1 => (0..4u8, any::<bool>()).prop_map(|(n, relist)| Change::Gone { n, relist }),
    ]
}

fn requirement() -> impl Strategy<Value = NodeSelectorRequirement> {
    let values = prop::collection::vec(0..HOSTS.len(), 0..3).prop_map(|v| {
        v.into_iter()
            .map(|i| HOSTS[i].to_string())
            .collect::<Vec<_>>()
    });
    let key = prop_oneof![
        Just(HOSTNAME_LABEL.to_string()),
        Just("zone".to_string()),
        Just("metadata.name".to_string()),
    ];
    let op = prop_oneof![Just("In"), Just("NotIn"), Just("Exists"), Just("Gt")];
    (key, op, values).prop_map(|(key, op, values)| NodeSelectorRequirement {
        key,
        operator: op.into(),
        values: (!values.is_empty()).then_some(values),
    })
}

fn term() -> impl Strategy<Value = NodeSelectorTerm> {
    (
        prop::collection::vec(requirement(), 0..3),
        prop::collection::vec(requirement(), 0..2),
    )
        .prop_map(|(exprs, fields)| NodeSelectorTerm {
            // Fields only take metadata.name; other keys match nothing.
            match_expressions: (!exprs.is_empty()).then_some(exprs),
            match_fields: (!fields.is_empty()).then_some(fields),
        })
}

fn pod() -> impl Strategy<Value = PodScheduling> {
    (
        proptest::option::of(0..HOSTS.len()),
        any::<bool>(),
        proptest::option::of(prop::collection::vec(term(), 0..3)),
    )
        .prop_map(|(host, zone, terms)| {
            let mut node_selector = BTreeMap::new();
            if let Some(h) = host {
                node_selector.insert(HOSTNAME_LABEL.to_string(), HOSTS[h].to_string());
            }
            if zone {
                node_selector.insert("zone".to_string(), "a".to_string());
            }
            PodScheduling {
                node_selector,
                required: terms.map(|t| NodeSelector {
                    node_selector_terms: t,
                }),
                tolerations: Vec::new(),
            }
        })
}

proptest! {
    #[test]
    fn g3_the_index_of_nodes_by_hostname_is_a_count_over_every_node(
        changes in prop::collection::vec(change(), 1..40)
    ) {
        let w = WorldWriter::new(Config::default());
        for ch in changes {
            match ch {
                Change::Node { n, host, zone } => {
                    w.apply(node_of(n, host, zone), false);
                }
                Change::Gone { n, relist: true } => {
                    w.forget(Kind::Node, &format!("n{n}"));
                }
                Change::Gone { n, relist: false } => {
                    w.apply(Obj::Node(node(&format!("n{n}")).0), true);
                }
            }
            for h in HOSTS {
                let mut counted = BTreeSet::new();
                w.for_each_node(|n| {
                    if n.labels.get(HOSTNAME_LABEL).map(String::as_str) == Some(h) {
                        counted.insert(n.name.clone());
                    }
                });
                prop_assert_eq!(w.nodes_with_hostname(h), counted, "hostname {}", h);
            }
        }
    }

    #[test]
    fn g3_candidates_hold_every_node_each_pods_affinity_filter_passes(
        changes in prop::collection::vec(change(), 1..12),
        pods in prop::collection::vec(pod(), 1..3),
    ) {
        let w = WorldWriter::new(Config::default());
        for ch in changes {
            if let Change::Node { n, host, zone } = ch {
                w.apply(node_of(n, host, zone), false);
            }
        }
        let hostname = |h: &str| w.nodes_with_hostname(h);
        let Some(candidates) = candidate_nodes(&pods, &hostname) else {
            return Ok(());
        };
        w.for_each_node(|n| {
            let passes = pods.iter().all(|p| {
                affinity_matches(&p.node_selector, p.required.as_ref(), &n.name, &n.labels)
            });
            assert!(
                !passes || candidates.contains(&n.name),
                "{} passes every pod's filter but the candidates {candidates:?} leave it out",
                n.name
            );
        });
    }
}
