//! The stand-in's scheduler and device plugin: which node an ungated
//! launcher pod runs on, given the scheduler's filters (the same functions
//! placement uses) and the GPUs left on each node.

use gpu_claims_actors::api::{NodeFacts, PodScheduling};
use gpu_claims_actors::rules::pod_unfit;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::Value;
use std::collections::BTreeMap;

/// GPUs by resource name.
pub type Needs = BTreeMap<String, u64>;

fn m<'a>(v: &'a Value, f: &str) -> &'a str {
    v["metadata"][f].as_str().unwrap_or_default()
}

/// The GPUs a VMI's pod needs: those of the claims attached to it.
pub fn needs_of(vmi: &Value, claims: &[Value], classes: &[Value]) -> Needs {
    let mut out = Needs::new();
    for c in claims.iter().filter(|c| {
        m(c, "namespace") == m(vmi, "namespace")
            && c["status"]["attachedTo"]["vmi"].as_str() == Some(m(vmi, "name"))
    }) {
        let class = c["spec"]["className"].as_str().unwrap_or_default();
        let Some(resource) = classes
            .iter()
            .find(|k| m(k, "name") == class)
            .and_then(|k| k["spec"]["resourceName"].as_str())
        else {
            continue;
        };
        *out.entry(resource.to_string()).or_default() += c["spec"]["count"].as_u64().unwrap_or(1);
    }
    out
}

/// `res=n,res2=m`: what a bound pod holds, noted on it.
pub fn holds_text(n: &Needs) -> String {
    n.iter()
        .map(|(r, c)| format!("{r}={c}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn holds_of(pod: &Value) -> Needs {
    pod["metadata"]["annotations"][super::HOLDS_ANNOTATION]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .filter_map(|t| {
            let (r, c) = t.split_once('=')?;
            Some((r.to_string(), c.parse().ok()?))
        })
        .collect()
}

/// The node for `pod`: the first by name that kube-scheduler's filters
/// allow (Ready, cordon, taints, nodeSelector and required affinity, the
/// pin among them) with room for `needs` next to the running pods.
pub fn pick_node(pod: &Value, needs: &Needs, pods: &[Value], nodes: &[Value]) -> Option<String> {
    let scheduling = serde_json::from_value::<Pod>(pod.clone())
        .map(|p| PodScheduling::of(&p))
        .unwrap_or_default();
    nodes
        .iter()
        .filter_map(|n| NodeFacts::from_node(&serde_json::from_value::<Node>(n.clone()).ok()?))
        .filter(|n| n.ready && pod_unfit(&scheduling, n).is_none())
        .find(|n| {
            needs.iter().all(|(r, want)| {
                let used: u64 = pods
                    .iter()
                    .filter(|p| {
                        p["spec"]["nodeName"].as_str() == Some(n.name.as_str())
                            && !matches!(
                                p["status"]["phase"].as_str(),
                                Some("Succeeded" | "Failed")
                            )
                    })
                    .filter_map(|p| holds_of(p).get(r).copied())
                    .sum();
                used + want <= n.allocatable(r)
            })
        })
        .map(|n| n.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, gpus: u64, ready: bool) -> Value {
        json!({"metadata": {"name": name}, "status": {
            "allocatable": {"nvidia.com/gpu": gpus.to_string()},
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    fn running(node: &str, gpus: u64) -> Value {
        json!({"metadata": {"annotations": {super::super::HOLDS_ANNOTATION: format!("nvidia.com/gpu={gpus}")}},
               "spec": {"nodeName": node}, "status": {"phase": "Running"}})
    }

    #[test]
    fn a_pod_goes_to_its_pin_only_when_the_pinned_node_has_room() {
        let nodes = [node("a", 4, true), node("b", 4, true)];
        let needs: Needs = [("nvidia.com/gpu".to_string(), 2)].into();
        let pinned = json!({"spec": {"nodeSelector": {"kubernetes.io/hostname": "b"}}});
        assert_eq!(
            pick_node(&pinned, &needs, &[], &nodes).as_deref(),
            Some("b")
        );
        let full = [running("b", 3)];
        assert_eq!(pick_node(&pinned, &needs, &full, &nodes), None);
        let free = json!({"spec": {}});
        assert_eq!(
            pick_node(&free, &needs, &full, &nodes).as_deref(),
            Some("a")
        );
    }

    #[test]
    fn a_cordoned_or_tainted_node_gets_only_pods_that_tolerate_it() {
        let mut cordoned = node("a", 4, true);
        cordoned["spec"] = json!({"unschedulable": true});
        let mut tainted = node("b", 4, true);
        tainted["spec"] = json!({"taints": [{"key": "gpu", "effect": "NoSchedule"}]});
        let nodes = [cordoned, tainted];
        assert_eq!(
            pick_node(&json!({"spec": {}}), &Needs::new(), &[], &nodes),
            None
        );
        let tolerant = json!({"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}});
        assert_eq!(
            pick_node(&tolerant, &Needs::new(), &[], &nodes).as_deref(),
            Some("b")
        );
    }

    #[test]
    fn a_not_ready_node_gets_no_pod() {
        let nodes = [node("a", 4, false)];
        assert_eq!(
            pick_node(&json!({"spec": {}}), &Needs::new(), &[], &nodes),
            None
        );
    }
}
