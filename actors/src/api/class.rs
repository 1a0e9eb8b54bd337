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
    printcolumn = r#"{"name":"DeviceClass","type":"string","jsonPath":".spec.deviceClassName"}"#,
    printcolumn = r#"{"name":"Budget","type":"integer","jsonPath":".spec.budget"}"#,
    printcolumn = r#"{"name":"Capacity","type":"integer","jsonPath":".status.capacity"}"#,
    printcolumn = r#"{"name":"Allocated","type":"integer","jsonPath":".status.allocated"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.resourceName) != has(self.deviceClassName)",
        "message": "exactly one of resourceName (a device plugin's resource) and deviceClassName (a DRA DeviceClass) must be set",
    },
    {
        "rule": "has(self.deviceClassName) || !(has(self.selectors) || has(self.config) || has(self.matchAttribute))",
        "message": "selectors, config and matchAttribute apply to devices of a DRA DeviceClass: set deviceClassName",
    },
]))]
pub struct GPUClassSpec {
    /// The extended resource nodes advertise in status.allocatable through
    /// a device plugin, e.g. nvidia.com/GH100_H200. Exactly one of this and
    /// deviceClassName.
    //
    // Empty (absent) for a class that takes its GPUs through DRA: the
    // schema's rule refuses a class with both or neither, and `source()`
    // says which a class has.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1))]
    pub resource_name: String,
    /// A DRA DeviceClass whose devices a DRA driver publishes in
    /// ResourceSlices, e.g. vfio.gpu.nvidia.com: gpu-claims allocates them.
    /// Exactly one of this and resourceName.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub device_class_name: Option<String>,
    /// CEL selectors over the DeviceClass's devices, as a DeviceClass's:
    /// which of them serve this class (e.g. by productName). With
    /// deviceClassName only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub selectors: Vec<DeviceSelector>,
    /// Opaque driver configuration copied into the ResourceClaims that
    /// gpu-claims allocates (e.g. NVIDIA's VfioDeviceConfig). With
    /// deviceClassName only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub config: Vec<DeviceConfig>,
    /// A fully qualified device attribute (e.g. resource.kubernetes.io/pcieRoot)
    /// whose value all devices of one claim share. With deviceClassName only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 96))]
    pub match_attribute: Option<String>,
    /// The most GPUs claims of this class may hold or owe at once, cluster-wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub budget: Option<u32>,
    /// Only nodes with these labels serve this class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
}

/// One CEL selector, as a DeviceClass's: `{cel: {expression}}`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct DeviceSelector {
    pub cel: CelSelector,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct CelSelector {
    /// A CEL expression over `device` that must evaluate to a bool.
    #[schemars(length(min = 1, max = 10240))]
    pub expression: String,
}

/// Opaque configuration for a driver, as a DeviceClass's `config[]`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct DeviceConfig {
    pub opaque: OpaqueConfig,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
pub struct OpaqueConfig {
    /// The driver the parameters are for, e.g. gpu.nvidia.com.
    #[schemars(length(min = 1, max = 63))]
    pub driver: String,
    /// The driver's configuration object (apiVersion and kind included).
    #[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
    pub parameters: serde_json::Value,
}

/// Where a class's GPUs come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source<'a> {
    /// An extended resource that a device plugin advertises on nodes.
    Resource(&'a str),
    /// The devices of a DRA DeviceClass.
    Devices(&'a str),
}

impl GPUClassSpec {
    /// Where the class's GPUs come from; None for a class with both or
    /// neither (the schema refuses it; one written past it serves nothing).
    pub fn source(&self) -> Option<Source<'_>> {
        match (
            self.resource_name.as_str(),
            self.device_class_name.as_deref(),
        ) {
            ("", Some(dc)) if !dc.is_empty() => Some(Source::Devices(dc)),
            (r, None) if !r.is_empty() => Some(Source::Resource(r)),
            _ => None,
        }
    }

    /// The class's DRA DeviceClass, if it takes its GPUs through DRA.
    pub fn device_class(&self) -> Option<&str> {
        match self.source() {
            Some(Source::Devices(dc)) => Some(dc),
            _ => None,
        }
    }

    /// The class's selectors' expressions, in order.
    pub fn selector_expressions(&self) -> Vec<String> {
        self.selectors
            .iter()
            .map(|s| s.cel.expression.clone())
            .collect()
    }
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
