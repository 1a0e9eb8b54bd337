//! The slices of pods that gpu-claims reads: of a virt-launcher pod, what
//! the rules decide on; of any pod bound to a node, what it uses there.
//! The cache keeps only these, not the pods, so that a cluster's pods
//! stay cheap to hold.

use super::resources::{Resources, pod_requests};
use super::{
    HOSTNAME_LABEL, LAUNCHER_LABEL, LAUNCHER_LABEL_VALUE, SCHEDULING_GATE, controller_vmi,
};
use k8s_openapi::api::core::v1::{NodeSelector, Pod, Toleration};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq)]
pub struct LauncherPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    /// The VMI that controls the pod.
    pub vmi: String,
    /// Still waits at our scheduling gate.
    pub gated: bool,
    /// The node the pod is pinned to, if any.
    pub pinned: Option<String>,
    /// Set once the scheduler bound the pod.
    pub node_name: Option<String>,
    /// What the scheduler will hold the pod to (G3's filters).
    pub scheduling: PodScheduling,
    /// What the pod requests, as NodeResourcesFit counts it.
    pub requests: Resources,
    /// The scheduler's message while it reports the pod `Unschedulable`
    /// (`PodScheduled=False`): G7 reads it.
    pub unschedulable: Option<String>,
    /// Succeeded or Failed: it holds nothing any more.
    pub terminal: bool,
    /// D5: the ResourceClaims Kubernetes made for the pod's
    /// `spec.resourceClaims` entries (`status.resourceClaimStatuses`):
    /// entry name, and the claim's name (None: no claim is needed).
    pub resource_claims: Vec<(String, Option<String>)>,
    /// When the pod was made: how long its set has waited at the gate.
    pub created: Option<k8s_openapi::jiff::Timestamp>,
}

/// What a pod bound to a node uses there (docs/design.md, "Objects"): kept for every such
/// pod not Succeeded or Failed, in every namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct PodUse {
    pub node: Arc<str>,
    pub requests: Resources,
}

impl PodUse {
    /// What a pod uses: on the node it is bound to; a launcher pod out of
    /// the gate and pinned, not yet bound, on its pin (the scheduler's
    /// "assume": it will be bound there, and a second set placed meanwhile
    /// must not count on that room).
    pub fn from_pod(pod: &Pod) -> Option<Self> {
        let spec = pod.spec.as_ref()?;
        if is_terminal(pod) {
            return None;
        }
        let bound = spec.node_name.clone().filter(|n| !n.is_empty());
        let node = bound.or_else(|| {
            LauncherPod::from_pod(pod)
                .filter(|l| !l.gated)
                .and_then(|l| l.pinned)
        })?;
        Some(Self {
            node: node.into(),
            requests: pod_requests(spec),
        })
    }

    /// Bytes held beyond the struct (the benchmark's figure per pod).
    pub fn heap_bytes(&self) -> usize {
        self.node.len() + self.requests.heap_bytes()
    }
}

/// Succeeded or Failed.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The scheduler's message while `PodScheduled` is `False` with reason
/// `Unschedulable`.
pub fn unschedulable_message(pod: &Pod) -> Option<String> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .filter(|c| c.reason.as_deref() == Some("Unschedulable"))
        .map(|c| c.message.clone().unwrap_or_default())
}

/// The parts of a pod's spec that kube-scheduler's NodeUnschedulable,
/// TaintToleration and NodeAffinity filters read.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PodScheduling {
    pub node_selector: BTreeMap<String, String>,
    /// `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub required: Option<NodeSelector>,
    pub tolerations: Vec<Toleration>,
}

impl PodScheduling {
    pub fn of(pod: &Pod) -> Self {
        let Some(spec) = pod.spec.as_ref() else {
            return Self::default();
        };
        Self {
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            required: spec
                .affinity
                .as_ref()
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|n| {
                    n.required_during_scheduling_ignored_during_execution
                        .clone()
                }),
            tolerations: spec.tolerations.clone().unwrap_or_default(),
        }
    }
}

impl LauncherPod {
    /// D5: the name of the ResourceClaim made for the pod's entry `entry`.
    pub fn resource_claim(&self, entry: &str) -> Option<&str> {
        self.resource_claims
            .iter()
            .find(|(e, _)| e == entry)
            .and_then(|(_, c)| c.as_deref())
    }

    /// The launcher view of a pod: None unless it is labelled virt-launcher
    /// and controlled by a VMI.
    pub fn from_pod(pod: &Pod) -> Option<Self> {
        let m = &pod.metadata;
        let labelled = m
            .labels
            .as_ref()?
            .get(LAUNCHER_LABEL)
            .is_some_and(|v| v == LAUNCHER_LABEL_VALUE);
        let (vmi, _) = controller_vmi(m)?;
        if !labelled {
            return None;
        }
        Some(Self {
            namespace: m.namespace.clone()?,
            name: m.name.clone()?,
            uid: m.uid.clone().unwrap_or_default(),
            resource_version: m.resource_version.clone().unwrap_or_default(),
            vmi: vmi.to_string(),
            gated: is_gated(pod),
            pinned: pinned_node(pod),
            node_name: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
            scheduling: PodScheduling::of(pod),
            requests: pod.spec.as_ref().map(pod_requests).unwrap_or_default(),
            unschedulable: unschedulable_message(pod),
            terminal: is_terminal(pod),
            created: m.creation_timestamp.as_ref().map(|t| t.0),
            resource_claims: pod
                .status
                .as_ref()
                .and_then(|s| s.resource_claim_statuses.as_ref())
                .into_iter()
                .flatten()
                .map(|c| (c.name.clone(), c.resource_claim_name.clone()))
                .collect(),
        })
    }
}

/// Gated while spec.schedulingGates holds ours.
pub fn is_gated(pod: &Pod) -> bool {
    let gates = pod.spec.as_ref().and_then(|s| s.scheduling_gates.as_ref());
    gates.is_some_and(|g| g.iter().any(|g| g.name == SCHEDULING_GATE))
}

/// Pinned to N when nodeSelector has hostname N, or every required
/// node-affinity term requires hostname In [N].
pub fn pinned_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec
        .node_selector
        .as_ref()
        .and_then(|s| s.get(HOSTNAME_LABEL))
    {
        return Some(n.clone());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    let mut node: Option<&String> = None;
    for term in terms {
        let exprs = term.match_expressions.as_deref().unwrap_or_default();
        let pin = exprs.iter().find_map(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            (e.key == HOSTNAME_LABEL && e.operator == "In" && values.len() == 1).then(|| &values[0])
        })?;
        if node.is_some_and(|n| n != pin) {
            return None;
        }
        node = Some(pin);
    }
    node.cloned()
}
