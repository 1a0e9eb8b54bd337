//! Builders for test worlds: `claim("ns", "a").class("h200").bound("n1").attached("vm1")`.
//! Public so the operator's tests, `plan`'s examples and the benchmarks
//! share them.

use crate::api::*;
use crate::ports::Obj;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeCondition, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, NodeSpec, NodeStatus, Pod, PodSchedulingGate, PodSpec, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};
use std::collections::BTreeMap;

fn meta(ns: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: ns.map(str::to_string),
        name: Some(name.to_string()),
        uid: Some(format!(
            "uid-{}{name}",
            ns.map(|n| format!("{n}-")).unwrap_or_default()
        )),
        ..Default::default()
    }
}

fn deleted(m: &mut ObjectMeta) {
    m.deletion_timestamp = Some(Time(crate::memory::sim::sim_epoch()));
}

pub fn vmi_owner_ref(vmi: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: VMI_API_VERSION.into(),
        kind: VMI_KIND.into(),
        name: vmi.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

pub fn condition(type_: &str, reason: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: "True".into(),
        reason: reason.into(),
        message: String::new(),
        last_transition_time: Time(crate::memory::sim::sim_epoch()),
        observed_generation: None,
    }
}

#[derive(Clone)]
pub struct ClaimB(pub GPUClaim);

pub fn claim(ns: &str, name: &str) -> ClaimB {
    ClaimB(GPUClaim {
        metadata: ObjectMeta {
            finalizers: Some(vec![CLAIM_FINALIZER.into()]),
            ..meta(Some(ns), name)
        },
        spec: GPUClaimSpec {
            class_name: "h200".into(),
            count: 1,
        },
        status: None,
    })
}

impl ClaimB {
    fn status(&mut self) -> &mut GPUClaimStatus {
        self.0.status.get_or_insert_default()
    }
    pub fn class(mut self, c: &str) -> Self {
        self.0.spec.class_name = c.into();
        self
    }
    pub fn count(mut self, n: u32) -> Self {
        self.0.spec.count = n;
        self
    }
    pub fn no_finalizer(mut self) -> Self {
        self.0.metadata.finalizers = None;
        self
    }
    pub fn deleting(mut self) -> Self {
        deleted(&mut self.0.metadata);
        self
    }
    fn phase(mut self, p: ClaimPhase, node: &str) -> Self {
        self.status().phase = Some(p);
        self.status().node_name = Some(node.into());
        self
    }
    pub fn bound(self, node: &str) -> Self {
        self.phase(ClaimPhase::Bound, node)
    }
    pub fn attached_phase(self, node: &str) -> Self {
        self.phase(ClaimPhase::Attached, node)
    }
    pub fn lost(self, node: &str) -> Self {
        let mut s = self.phase(ClaimPhase::Lost, node);
        set_condition(
            &mut s.status().conditions,
            condition(CONDITION_LOST, "NodeNotReady"),
        );
        s
    }
    pub fn attached(mut self, vmi: &str) -> Self {
        self.status().attached_to = Some(AttachedTo { vmi: vmi.into() });
        self
    }
    pub fn waiting(mut self, reason: &str) -> Self {
        set_condition(
            &mut self.status().conditions,
            condition(CONDITION_WAITING, reason),
        );
        self
    }
    /// A template claim owned by the VMI `vmi` with UID `uid`.
    pub fn template_of(mut self, vmi: &str, uid: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_default()
            .insert(TEMPLATE_LABEL.into(), "true".into());
        self.owned_by(vmi, uid)
    }
    /// Owned by a VMI, without the template label.
    pub fn owned_by(mut self, vmi: &str, uid: &str) -> Self {
        self.0
            .metadata
            .owner_references
            .get_or_insert_default()
            .push(vmi_owner_ref(vmi, uid));
        self
    }
    pub fn build(self) -> GPUClaim {
        self.0
    }
    pub fn obj(self) -> Obj {
        Obj::Claim(self.0)
    }
    /// The claim and, when it holds GPUs, its record.
    pub fn with_record(self, resource: &str) -> Vec<Obj> {
        let c = self.0;
        let mut v = Vec::new();
        if c.phase().counts_against_budget() {
            v.push(Obj::Record(record_of(&c, resource)));
        }
        v.push(Obj::Claim(c));
        v
    }
}

pub fn record_of(c: &GPUClaim, resource: &str) -> GPUAllocation {
    let name = c.metadata.name.clone().unwrap_or_default();
    GPUAllocation {
        metadata: meta(c.metadata.namespace.as_deref(), &name)
            .clone_with_uid(format!("rec-{name}")),
        spec: GPUAllocationSpec {
            claim_uid: c.metadata.uid.clone().unwrap_or_default(),
            class_name: c.spec.class_name.clone(),
            resource_name: resource.into(),
            node_name: c.node_name().unwrap_or_default().into(),
            count: c.spec.count,
        },
    }
}

trait WithUid {
    fn clone_with_uid(self, uid: String) -> Self;
}
impl WithUid for ObjectMeta {
    fn clone_with_uid(mut self, uid: String) -> Self {
        self.uid = Some(uid);
        self
    }
}

pub struct ClassB(pub GPUClass);

pub fn class(name: &str, resource: &str) -> ClassB {
    ClassB(GPUClass {
        metadata: ObjectMeta {
            finalizers: Some(vec![CLASS_FINALIZER.into()]),
            ..meta(None, name)
        },
        spec: GPUClassSpec {
            resource_name: resource.into(),
            budget: None,
            node_selector: None,
        },
        status: None,
    })
}

impl ClassB {
    pub fn budget(mut self, n: u32) -> Self {
        self.0.spec.budget = Some(n);
        self
    }
    pub fn no_finalizer(mut self) -> Self {
        self.0.metadata.finalizers = None;
        self
    }
    pub fn deleting(mut self) -> Self {
        deleted(&mut self.0.metadata);
        self
    }
    pub fn selector(mut self, k: &str, v: &str) -> Self {
        self.0
            .spec
            .node_selector
            .get_or_insert_default()
            .insert(k.into(), v.into());
        self
    }
    pub fn status(mut self, capacity: u64, allocated: u64) -> Self {
        self.0.status = Some(GPUClassStatus {
            capacity: Some(capacity),
            allocated: Some(allocated),
            conditions: vec![],
        });
        self
    }
    pub fn obj(self) -> Obj {
        Obj::Class(self.0)
    }
}

pub struct VmiB(pub Vmi);

pub fn vmi(ns: &str, name: &str) -> VmiB {
    VmiB(Vmi {
        metadata: meta(Some(ns), name),
        status: Some(VmiStatus {
            phase: Some("Running".into()),
        }),
    })
}

impl VmiB {
    pub fn uid(mut self, uid: &str) -> Self {
        self.0.metadata.uid = Some(uid.into());
        self
    }
    pub fn phase(mut self, p: &str) -> Self {
        self.0.status = Some(VmiStatus {
            phase: Some(p.into()),
        });
        self
    }
    pub fn annotate(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(k.into(), v.into());
        self
    }
    pub fn deleting(mut self) -> Self {
        deleted(&mut self.0.metadata);
        self.0.metadata.finalizers = Some(vec!["foregroundDeleteVirtualMachine".into()]);
        self
    }
    pub fn obj(self) -> Obj {
        Obj::Vmi(self.0)
    }
}

pub struct PodB(pub Pod);

/// A node selector requirement: `req("zone", "In", &["a", "b"])`.
pub fn req(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: operator.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

/// A virt-launcher pod of the VMI `vmi` (UID `vmi_uid`).
pub fn launcher(ns: &str, name: &str, vmi: &str, vmi_uid: &str) -> PodB {
    let mut m = meta(Some(ns), name);
    m.labels = Some(BTreeMap::from([(
        LAUNCHER_LABEL.to_string(),
        LAUNCHER_LABEL_VALUE.to_string(),
    )]));
    m.owner_references = Some(vec![vmi_owner_ref(vmi, vmi_uid)]);
    PodB(Pod {
        metadata: m,
        spec: Some(PodSpec::default()),
        status: None,
    })
}

impl PodB {
    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.get_or_insert_default()
    }
    pub fn gated(mut self) -> Self {
        self.spec().scheduling_gates = Some(vec![PodSchedulingGate {
            name: SCHEDULING_GATE.into(),
        }]);
        self
    }
    pub fn pinned(mut self, node: &str) -> Self {
        self.spec()
            .node_selector
            .get_or_insert_default()
            .insert(HOSTNAME_LABEL.into(), node.into());
        self
    }
    pub fn scheduled(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.into());
        self
    }
    /// A toleration; empty strings leave a field unset.
    pub fn tolerates(mut self, key: &str, operator: &str, value: &str, effect: &str) -> Self {
        let s = |v: &str| (!v.is_empty()).then(|| v.to_string());
        self.spec()
            .tolerations
            .get_or_insert_default()
            .push(Toleration {
                key: s(key),
                operator: s(operator),
                value: s(value),
                effect: s(effect),
                toleration_seconds: None,
            });
        self
    }
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.spec()
            .node_selector
            .get_or_insert_default()
            .insert(k.into(), v.into());
        self
    }
    /// Required node affinity: one term per entry, its requirements ANDed.
    pub fn required_affinity(mut self, terms: Vec<Vec<NodeSelectorRequirement>>) -> Self {
        let terms = terms
            .into_iter()
            .map(|exprs| NodeSelectorTerm {
                match_expressions: Some(exprs),
                match_fields: None,
            })
            .collect();
        self.spec().affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        self
    }
    pub fn obj(self) -> Obj {
        Obj::Pod(self.0)
    }
}

pub struct NodeB(pub Node);

pub fn node(name: &str) -> NodeB {
    let mut n = Node {
        metadata: meta(None, name),
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus::default()),
    };
    n.metadata.labels = Some(BTreeMap::from([(
        HOSTNAME_LABEL.to_string(),
        name.to_string(),
    )]));
    NodeB(n).ready(true)
}

impl NodeB {
    pub fn ready(mut self, ready: bool) -> Self {
        let st = self.0.status.get_or_insert_default();
        let c = NodeCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            ..Default::default()
        };
        st.conditions = Some(vec![c]);
        self
    }
    pub fn gpus(mut self, resource: &str, n: u64) -> Self {
        let st = self.0.status.get_or_insert_default();
        st.allocatable
            .get_or_insert_default()
            .insert(resource.into(), Quantity(n.to_string()));
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_default()
            .insert(k.into(), v.into());
        self
    }
    /// `kubectl cordon`.
    pub fn cordoned(mut self) -> Self {
        self.0.spec.get_or_insert_default().unschedulable = Some(true);
        self
    }
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let t = Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            time_added: None,
        };
        self.0
            .spec
            .get_or_insert_default()
            .taints
            .get_or_insert_default()
            .push(t);
        self
    }
    pub fn lost_taint(mut self, value: &str) -> Self {
        let t = Taint {
            key: DEVICES_LOST_TAINT.into(),
            value: Some(value.into()),
            effect: "NoSchedule".into(),
            time_added: None,
        };
        self.0
            .spec
            .get_or_insert_default()
            .taints
            .get_or_insert_default()
            .push(t);
        self
    }
    pub fn obj(self) -> Obj {
        Obj::Node(self.0)
    }
}
