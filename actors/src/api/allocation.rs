//! GPUAllocation: the record of GPUs a claim holds or owes on a node.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The allocation record: created before its claim says Bound, deleted
/// before its claim's finalizer goes. Node capacity and class budgets are
/// counted from records, so a crash between two writes never double-books.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[kube(group = "gpu.cozystack.io", version = "v1alpha1")]
#[kube(kind = "GPUAllocation", plural = "gpuallocations", namespaced)]
#[kube(singular = "gpuallocation")]
#[kube(derive = "PartialEq", derive = "Default")]
#[kube(
    printcolumn = r#"{"name":"Class","type":"string","jsonPath":".spec.className"}"#,
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".spec.nodeName"}"#,
    printcolumn = r#"{"name":"Count","type":"integer","jsonPath":".spec.count"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct GPUAllocationSpec {
    #[serde(rename = "claimUID")]
    pub claim_uid: String,
    pub class_name: String,
    pub resource_name: String,
    pub node_name: String,
    #[schemars(range(min = 1))]
    pub count: u32,
}
