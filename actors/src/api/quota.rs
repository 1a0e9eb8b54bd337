//! GPUQuota: how many GPUs a tenant's claims may hold or owe (docs/design.md, "Tenant quotas").

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most classes one GPUQuota names.
pub const MAX_QUOTA_CLASSES: usize = 128;

/// `spec.hard`'s keys are DNS subdomains.
const CLASS_KEYS_RULE: &str = r"self.all(k, size(k) <= 253 && k.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'))";

/// A namespace's GPUs, per class and in all: Q1 places a set only where it
/// leaves room in every GPUQuota of its namespace. Lowering a quota below
/// what is used releases nothing; it stops new placements only (as a
/// ResourceQuota does).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[kube(group = "gpu.cozystack.io", version = "v1alpha1")]
#[kube(kind = "GPUQuota", plural = "gpuquotas", namespaced)]
#[kube(singular = "gpuquota", status = "GPUQuotaStatus")]
#[kube(derive = "PartialEq", derive = "Default")]
#[kube(
    printcolumn = r#"{"name":"Used","type":"integer","jsonPath":".status.usedTotal"}"#,
    printcolumn = r#"{"name":"Total","type":"integer","jsonPath":".spec.total"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GPUQuotaSpec {
    /// Per GPUClass name: the most GPUs claims of that class in this
    /// namespace may hold or owe at once (phases Bound, Attached, Lost).
    /// Keys are GPUClass names (DNS subdomains), at most 128.
    //
    // A CEL rule checks the keys, the one way a CRD can. Kubernetes'
    // estimator costs a map key at length 0: the rule costs about 3,000 of
    // the 10^7 a rule may (maxProperties bounds its loop; without it the
    // CRD would be refused).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend(
        "maxProperties" = MAX_QUOTA_CLASSES,
        "x-kubernetes-validations" = [{
            "rule": CLASS_KEYS_RULE,
            "message": "each key must be a GPUClass name: a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)",
        }],
    ))]
    pub hard: BTreeMap<String, u32>,
    /// The most GPUs of all classes together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GPUQuotaStatus {
    /// Per class the quota names: GPUs this namespace's claims of it hold or owe.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub used: BTreeMap<String, u64>,
    /// GPUs this namespace's claims of every class hold or owe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_total: Option<u64>,
    /// `ClassMissing`: the quota names a class that does not exist (it
    /// applies all the same).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
