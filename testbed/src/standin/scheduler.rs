//! The stand-in's kube-scheduler and the kubelet's device manager: which
//! node an ungated pod runs on, as the scheduler's filters decide
//! (NodeUnschedulable, TaintToleration with the not-ready taint,
//! NodeAffinity, then NodeResourcesFit against every pod bound to the
//! node, the same functions placement uses); when none, the FitError
//! upstream words (`0/3 nodes are available: 1 Insufficient memory, ...`);
//! and, on the node, the device manager's admission of the pod's devices.

use gpu_claims_actors::api::pod::is_terminal;
use gpu_claims_actors::api::resources::{is_extended, pod_requests};
use gpu_claims_actors::api::{NodeFacts, PodScheduling, Resources};
use gpu_claims_actors::rules::scheduling::fit::{NodeRoom, fits_request};
use gpu_claims_actors::rules::scheduling::{affinity_matches, tolerates_cordon, untolerated};
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use serde_json::Value;
use std::collections::BTreeMap;

/// A pod as the scheduler sees it.
struct Sched {
    scheduling: PodScheduling,
    requests: Resources,
}

fn sched(pod: &Value) -> Sched {
    let p: Pod = serde_json::from_value(pod.clone()).unwrap_or_default();
    Sched {
        scheduling: PodScheduling::of(&p),
        requests: p.spec.as_ref().map(pod_requests).unwrap_or_default(),
    }
}

/// What the pods bound to a node use: summed requests and their number.
#[derive(Default)]
pub struct Bound {
    requested: BTreeMap<String, u64>,
    pods: u64,
}

/// The use of every node by its bound pods (not Succeeded or Failed),
/// leaving out `except` (the pod being decided on).
pub fn bound_use(pods: &[Value], except: Option<&str>) -> BTreeMap<String, Bound> {
    let mut out: BTreeMap<String, Bound> = BTreeMap::new();
    for p in pods {
        let Ok(pod) = serde_json::from_value::<Pod>(p.clone()) else {
            continue;
        };
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let (Some(node), false) = (node, is_terminal(&pod)) else {
            continue;
        };
        if except.is_some() && pod.metadata.uid.as_deref() == except {
            continue;
        }
        let e = out.entry(node).or_default();
        e.pods += 1;
        for (r, a) in pod
            .spec
            .as_ref()
            .map(pod_requests)
            .unwrap_or_default()
            .iter()
        {
            let sum = e.requested.entry(r.to_string()).or_default();
            *sum = sum.saturating_add(a);
        }
    }
    out
}

/// The not-ready taint the node lifecycle controller puts on a node whose
/// Ready condition is not True.
fn not_ready_taint() -> Taint {
    Taint {
        key: "node.kubernetes.io/not-ready".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }
}

/// The first filter that keeps the pod off `node`, in the scheduler's
/// words; the fit filter gives every resource it lacks.
fn filter(s: &Sched, n: &NodeFacts, used: Option<&Bound>) -> Vec<String> {
    if n.unschedulable && !tolerates_cordon(&s.scheduling.tolerations) {
        return vec!["node(s) were unschedulable".into()];
    }
    let mut taints = n.taints.clone();
    if !n.ready {
        taints.insert(0, not_ready_taint());
    }
    if let Some(t) = untolerated(&s.scheduling.tolerations, &taints) {
        return vec![format!(
            "node(s) had untolerated taint {{{}: {}}}",
            t.key,
            t.value.as_deref().unwrap_or_default()
        )];
    }
    let sel = &s.scheduling;
    if !affinity_matches(
        &sel.node_selector,
        sel.required.as_ref(),
        &n.name,
        &n.labels,
    ) {
        return vec!["node(s) didn't match Pod's node affinity/selector".into()];
    }
    let empty = Bound::default();
    let used = used.unwrap_or(&empty);
    let requested = |r: &str| used.requested.get(r).copied().unwrap_or(0);
    let room = NodeRoom {
        allocatable: &n.allocatable,
        requested: &requested,
        pods: used.pods,
    };
    fits_request(&s.requests, room, &|_| false)
        .into_iter()
        .map(|i| i.reason())
        .collect()
}

/// What the DynamicResources plugin reads: the slices, DeviceClasses and
/// every ResourceClaim (whose allocations take devices).
#[derive(Default)]
pub struct DraWorld {
    pub slices: Vec<k8s_openapi::api::resource::v1::ResourceSlice>,
    pub classes: Vec<Value>,
    pub claims: Vec<Value>,
    /// DeviceTaintRules, whose taints the allocator honours.
    pub taint_rules: Vec<Value>,
}

/// Where a pod goes, and the allocations the scheduler makes for its
/// claims that had none (claim, `status.allocation`).
#[derive(Debug, PartialEq)]
pub struct Binding {
    pub node: String,
    pub allocations: Vec<(Value, Value)>,
}

/// The DynamicResources plugin's Filter for the pod's claims on `n`: an
/// allocated claim only where its `nodeSelector` selects; an unallocated
/// one where the allocator finds its devices (which it returns).
fn dra_filter(
    claims: &[Value],
    n: &NodeFacts,
    dra: &DraWorld,
    in_use: &std::collections::BTreeSet<super::allocator::DeviceId>,
) -> Result<Vec<(Value, Value)>, &'static str> {
    let mut taken = in_use.clone();
    let mut made = Vec::new();
    for c in claims {
        let allocation = &c["status"]["allocation"];
        if !allocation.is_object() {
            match super::allocator::allocate(
                c,
                &n.name,
                &dra.slices,
                &dra.classes,
                &dra.taint_rules,
                &mut taken,
            ) {
                Some(a) => made.push((c.clone(), a)),
                None => return Err("cannot allocate all claims"),
            }
            continue;
        }
        let selector: Option<k8s_openapi::api::core::v1::NodeSelector> =
            serde_json::from_value(allocation["nodeSelector"].clone()).ok();
        if !affinity_matches(&BTreeMap::new(), selector.as_ref(), &n.name, &n.labels) {
            return Err("resourceclaim not available on the node");
        }
    }
    Ok(made)
}

/// Where the scheduler binds `pod`, with the allocations it makes, or its
/// FitError. `claims`: the pod's ResourceClaims, or why its PreFilter
/// turns it away.
pub fn schedule(
    pod: &Value,
    pods: &[Value],
    nodes: &[Value],
    claims: Result<&[Value], &str>,
    dra: &DraWorld,
) -> Result<Binding, String> {
    let claims = match claims {
        Ok(c) => c,
        Err(why) => {
            // `FitError` with the PreFilter's message; no node helps.
            let n = nodes.len();
            return Err(format!(
                "0/{n} nodes are available: {why}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
            ));
        }
    };
    let s = sched(pod);
    // What other claims hold, read once for every node tried.
    let in_use = super::allocator::in_use(&dra.claims);
    let uid = pod["metadata"]["uid"].as_str();
    let used = bound_use(pods, uid);
    let facts: Vec<NodeFacts> = nodes
        .iter()
        .filter_map(|n| NodeFacts::from_node(&serde_json::from_value::<Node>(n.clone()).ok()?))
        .collect();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut unresolvable = 0;
    for n in &facts {
        let mut why = filter(&s, n, used.get(&n.name));
        if why.is_empty() {
            match dra_filter(claims, n, dra, &in_use) {
                Ok(allocations) => {
                    return Ok(Binding {
                        node: n.name.clone(),
                        allocations,
                    });
                }
                Err(w) => why.push(w.to_string()),
            }
        }
        if !why
            .iter()
            .any(|w| w.starts_with("Insufficient") || w == "Too many pods")
        {
            unresolvable += 1;
        }
        for w in why {
            *reasons.entry(w).or_default() += 1;
        }
    }
    Err(fit_error(facts.len(), &reasons, unresolvable))
}

/// `FitError.Error()` with the default preemption's postfilter message:
/// reasons counted per node, sorted as strings, joined with ", ".
fn fit_error(nodes: usize, reasons: &BTreeMap<String, usize>, unresolvable: usize) -> String {
    let mut list: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    list.sort();
    let mut m = format!("0/{nodes} nodes are available:");
    if !list.is_empty() {
        m.push_str(&format!(" {}.", list.join(", ")));
    }
    let mut post = Vec::new();
    if nodes > unresolvable {
        post.push(format!(
            "{} No preemption victims found for incoming pod",
            nodes - unresolvable
        ));
    }
    if unresolvable > 0 {
        post.push(format!(
            "{unresolvable} Preemption is not helpful for scheduling"
        ));
    }
    post.sort();
    format!(
        "{m} preemption: 0/{nodes} nodes are available: {}.",
        post.join(", ")
    )
}

/// The device manager's admission on `node` (`devicesToAllocate`): the
/// first device resource of which fewer are free than the pod asks for,
/// as the kubelet rejects the pod (`UnexpectedAdmissionError`).
pub fn admit_devices(pod: &Value, node: &Value, pods: &[Value]) -> Result<(), String> {
    let s = sched(pod);
    let Some(n) = serde_json::from_value::<Node>(node.clone())
        .ok()
        .and_then(|n| NodeFacts::from_node(&n))
    else {
        return Ok(());
    };
    let used = bound_use(pods, pod["metadata"]["uid"].as_str());
    let used = used.get(&n.name);
    for (r, want) in s.requests.iter().filter(|(r, _)| is_extended(r)) {
        let taken = used.and_then(|u| u.requested.get(r)).copied().unwrap_or(0);
        let free = n.allocatable(r).saturating_sub(taken);
        if want > free {
            return Err(format!(
                "Pod was rejected: Allocate failed due to requested number of devices unavailable for {r}. Requested: {want}, Available: {free}, which is unexpected"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GPU: &str = "nvidia.com/gpu";

    fn node(name: &str, gpus: u64, memory: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name}, "status": {
            "allocatable": {GPU: gpus.to_string(), "cpu": "8", "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    fn pod(uid: &str, node: Option<&str>, requests: Value, spec: Value) -> Value {
        let mut p = json!({"metadata": {"uid": uid}, "spec": {"containers": [
            {"name": "c", "resources": {"requests": requests.clone(), "limits": requests}}]}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = n.into();
        }
        for (k, v) in spec.as_object().into_iter().flatten() {
            p["spec"][k] = v.clone();
        }
        p
    }

    #[test]
    fn a_pinned_pod_goes_to_its_pin_only_when_the_node_has_room_for_all_it_requests() {
        let nodes = [node("a", 4, "64Gi", true), node("b", 4, "64Gi", true)];
        let pinned = json!({"nodeSelector": {"kubernetes.io/hostname": "b"}});
        let me = pod(
            "me",
            None,
            json!({GPU: "2", "memory": "8Gi"}),
            pinned.clone(),
        );
        assert_eq!(
            schedule(&me, &[], &nodes, Ok(&[]), &DraWorld::default()).map(|b| b.node),
            Ok("b".into())
        );
        let busy = [pod("x", Some("b"), json!({"memory": "60Gi"}), json!({}))];
        assert_eq!(
            schedule(&me, &busy, &nodes, Ok(&[]), &DraWorld::default()).map(|b| b.node),
            Err("0/2 nodes are available: 1 Insufficient memory, 1 node(s) didn't match Pod's node affinity/selector. \
                 preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, \
                 1 Preemption is not helpful for scheduling."
                .into())
        );
        let gpus_taken = [pod("x", Some("b"), json!({GPU: "3"}), json!({}))];
        let err = schedule(&me, &gpus_taken, &nodes, Ok(&[]), &DraWorld::default())
            .map(|b| b.node)
            .unwrap_err();
        assert!(err.contains("1 Insufficient nvidia.com/gpu"), "{err}");
    }

    #[test]
    fn cordoned_tainted_and_not_ready_nodes_are_refused_in_the_schedulers_words() {
        let mut cordoned = node("a", 4, "64Gi", true);
        cordoned["spec"] = json!({"unschedulable": true});
        let mut tainted = node("b", 4, "64Gi", true);
        tainted["spec"] = json!({"taints": [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]});
        let nodes = [cordoned, tainted, node("c", 4, "64Gi", false)];
        let me = pod("me", None, json!({}), json!({}));
        let err = schedule(&me, &[], &nodes, Ok(&[]), &DraWorld::default())
            .map(|b| b.node)
            .unwrap_err();
        assert_eq!(
            err,
            "0/3 nodes are available: 1 node(s) had untolerated taint {gpu: x}, \
             1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) were unschedulable. \
             preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
        let tolerant = pod(
            "me",
            None,
            json!({}),
            json!({"tolerations": [{"key": "gpu", "operator": "Exists"}]}),
        );
        assert_eq!(
            schedule(&tolerant, &[], &nodes, Ok(&[]), &DraWorld::default()).map(|b| b.node),
            Ok("b".into())
        );
    }

    #[test]
    fn the_device_manager_refuses_a_pod_whose_devices_are_taken() {
        let n = node("a", 2, "64Gi", true);
        let me = pod("me", Some("a"), json!({GPU: "2"}), json!({}));
        assert_eq!(admit_devices(&me, &n, std::slice::from_ref(&me)), Ok(()));
        let other = pod("x", Some("a"), json!({GPU: "1"}), json!({}));
        assert_eq!(
            admit_devices(&me, &n, &[me.clone(), other]),
            Err("Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1, which is unexpected".into())
        );
    }
}
