//! GPUClass: a kind of GPU that nodes advertise, with an optional budget.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A kind of GPU: the extended resource nodes advertise, which nodes serve
/// it, and how many GPUs its claims may hold or owe at once.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[kube(group = "gpu.cozystack.io", version = "v1alpha1")]
#[kube(kind = "GPUClass", plural = "gpuclasses")]
#[kube(singular = "gpuclass", status = "GPUClassStatus")]
#[kube(derive = "PartialEq", derive = "Default")]
#[kube(
    printcolumn = r#"{"name":"Resource","type":"string","jsonPath":".spec.resourceName"}"#,
    printcolumn = r#"{"name":"Budget","type":"integer","jsonPath":".spec.budget"}"#,
    printcolumn = r#"{"name":"Capacity","type":"integer","jsonPath":".status.capacity"}"#,
    printcolumn = r#"{"name":"Allocated","type":"integer","jsonPath":".status.allocated"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GPUClassSpec {
    /// The extended resource nodes advertise in status.allocatable, e.g. nvidia.com/GH100_H200.
    #[schemars(length(min = 1))]
    pub resource_name: String,
    /// The most GPUs claims of this class may hold or owe at once, cluster-wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub budget: Option<u32>,
    /// Only nodes with these labels serve this class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GPUClassStatus {
    /// GPUs of this resource on Ready nodes that serve the class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u64>,
    /// GPUs held or owed by claims of this class (Bound, Attached, Lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
