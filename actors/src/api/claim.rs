//! GPUClaim: a tenant's request for `count` GPUs of a class.

use super::names::CONDITION_WAITING;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A request for GPUs of a GPUClass. Pending until placed at the gate, then
/// Bound to a node, Attached while its VMI lives, Lost when its node fails.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(group = "gpu.cozystack.io", version = "v1alpha1")]
#[kube(kind = "GPUClaim", plural = "gpuclaims", namespaced)]
#[kube(singular = "gpuclaim", shortname = "gc")]
#[kube(status = "GPUClaimStatus")]
#[kube(derive = "PartialEq", derive = "Default")]
#[kube(
    printcolumn = r#"{"name":"Class","type":"string","jsonPath":".spec.className"}"#,
    printcolumn = r#"{"name":"Count","type":"integer","jsonPath":".spec.count"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","description":"Why the claim waits (its Waiting condition)","jsonPath":".status.conditions[?(@.type=='Waiting')].reason"}"#,
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".status.nodeName"}"#,
    printcolumn = r#"{"name":"VMI","type":"string","jsonPath":".status.attachedTo.vmi"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GPUClaimSpec {
    /// The GPUClass whose GPUs this claim asks for (a DNS subdomain, as
    /// Kubernetes names objects). Immutable.
    #[x_kube(validation = Rule::new("self == oldSelf").message("className is immutable"))]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub class_name: String,
    /// How many GPUs, all on one node. Immutable.
    #[serde(default = "default_count")]
    #[schemars(range(min = 1))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("count is immutable"))]
    pub count: u32,
}

fn default_count() -> u32 {
    1
}

/// Where a claim is in its life. Absent reads as Pending.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema, Hash)]
pub enum ClaimPhase {
    #[default]
    Pending,
    Bound,
    Attached,
    Lost,
}

impl ClaimPhase {
    /// Phases that hold or owe GPUs, counted against the class budget.
    pub fn counts_against_budget(self) -> bool {
        matches!(
            self,
            ClaimPhase::Bound | ClaimPhase::Attached | ClaimPhase::Lost
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ClaimPhase::Pending => "Pending",
            ClaimPhase::Bound => "Bound",
            ClaimPhase::Attached => "Attached",
            ClaimPhase::Lost => "Lost",
        }
    }
}

/// The VMI, in the claim's namespace, that uses the claim.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttachedTo {
    pub vmi: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GPUClaimStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ClaimPhase>,
    /// The node whose GPUs the claim holds (Bound, Attached, Lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_to: Option<AttachedTo>,
    /// `Waiting`: why its VMI's set waits at the gate. `Lost`: why it left its node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

impl GPUClaim {
    /// Being deleted with its finalizer gone: released by L8 (the seed's
    /// `released`). It holds no GPUs, whatever its status still says. A
    /// fact of the object, as its phase is: the world's indexes count it
    /// and the rules decide on it.
    pub fn is_released(&self) -> bool {
        super::is_deleting(&self.metadata)
            && !super::has_finalizer(&self.metadata, super::CLAIM_FINALIZER)
    }

    pub fn phase(&self) -> ClaimPhase {
        self.status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or_default()
    }

    pub fn attached_vmi_name(&self) -> Option<&str> {
        self.status
            .as_ref()?
            .attached_to
            .as_ref()
            .map(|a| a.vmi.as_str())
    }

    pub fn node_name(&self) -> Option<&str> {
        self.status.as_ref()?.node_name.as_deref()
    }

    /// A template claim carries the template label (and lives only with its VMI).
    pub fn is_template(&self) -> bool {
        self.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(super::TEMPLATE_LABEL))
            .is_some_and(|v| v == "true")
    }

    /// What the CRD's schema refuses in the spec (the API server does too,
    /// with a 422): an empty className, a count below 1.
    pub fn spec_problem(&self) -> Option<String> {
        if self.spec.class_name.is_empty() {
            return Some("spec.className: must not be empty".into());
        }
        (self.spec.count < 1)
            .then(|| format!("spec.count: {} is below the minimum 1", self.spec.count))
    }

    pub fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default()
    }

    /// Its Waiting=True condition (G5: why its set waits at the gate).
    pub fn waiting(&self) -> Option<&Condition> {
        self.conditions()
            .iter()
            .find(|c| c.type_ == CONDITION_WAITING && c.status == "True")
    }
}
