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
    /// The device plugin's resource of the class; empty for a DRA class.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_name: String,
    /// The DeviceClass of a DRA class (D1-D8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_class_name: Option<String>,
    pub node_name: String,
    #[schemars(range(min = 1))]
    pub count: u32,
    /// D3: for a DRA class, the devices it holds, one per GPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    pub devices: Vec<AllocatedDevice>,
}

/// A device as DRA names it in an allocation's results.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, JsonSchema,
)]
pub struct AllocatedDevice {
    #[schemars(length(min = 1, max = 63))]
    pub driver: String,
    #[schemars(length(min = 1, max = 253))]
    pub pool: String,
    #[schemars(length(min = 1, max = 128))]
    pub device: String,
}

impl GPUAllocationSpec {
    /// Whether it records devices of a DRA class.
    pub fn is_dra(&self) -> bool {
        self.device_class_name.is_some()
    }
}
