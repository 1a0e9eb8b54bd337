//! The slice of a KubeVirt VirtualMachineInstance that gpu-claims reads.
//! Unknown fields are ignored: we never write a VMI, only delete it (L12).

use super::validation::is_dns_subdomain;
use super::{CLAIMS_ANNOTATION, CLASS_ANNOTATION, COUNT_ANNOTATION};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Vmi {
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<VmiSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<VmiStatus>,
}

/// The slice of `spec` that says which devices the VM gets: its GPUs and
/// host devices (`spec.domain.devices`), as Cozystack's vm-instance writes
/// them (`gpus: [{name: gpu1, deviceName: nvidia.com/...}]`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct VmiSpec {
    #[serde(default)]
    pub domain: VmiDomain,
    /// DRA (D5): the ResourceClaims the VM's devices come from, by the
    /// name its `gpus[]`/`hostDevices[]` give as `claimName`.
    #[serde(
        default,
        rename = "resourceClaims",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resource_claims: Vec<VmiResourceClaim>,
    /// O1: the PriorityClass whose value orders the VM's set at the gate
    /// (KubeVirt gives it to the launcher pod too).
    #[serde(
        default,
        rename = "priorityClassName",
        skip_serializing_if = "Option::is_none"
    )]
    pub priority_class_name: Option<String>,
}

/// One `spec.resourceClaims[]` entry, as the pod's: exactly one of a
/// ResourceClaim's name and a ResourceClaimTemplate's.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct VmiResourceClaim {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claim_template_name: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct VmiDomain {
    #[serde(default)]
    pub devices: VmiDevices,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct VmiDevices {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<VmiDevice>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_devices: Vec<VmiDevice>,
}

/// One `gpus[]` or `hostDevices[]` entry. One without `deviceName` (a DRA
/// `claimName` entry) asks no device plugin for anything.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct VmiDevice {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// DRA: the `spec.resourceClaims[]` entry the device comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_name: Option<String>,
}

/// What a VMI's spec requests of each device resource: one per entry of
/// `gpus[]` and `hostDevices[]` naming it (docs/design.md, "Objects"), as virt-controller
/// renders the launcher pod's compute container.
pub type DeviceRequest = BTreeMap<String, u32>;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct VmiStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

impl Vmi {
    /// Final when Succeeded or Failed; Unknown is not final.
    pub fn is_final(&self) -> bool {
        matches!(
            self.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded") | Some("Failed")
        )
    }

    pub fn uid(&self) -> &str {
        self.metadata.uid.as_deref().unwrap_or_default()
    }

    /// D5: the `spec.resourceClaims[]` entries a `gpus[]` or
    /// `hostDevices[]` entry references by `claimName` (KubeVirt gives the
    /// VM only what they reference), each once, in the spec's order.
    pub fn referenced_resource_claims(&self) -> Vec<&VmiResourceClaim> {
        let Some(spec) = &self.spec else {
            return Vec::new();
        };
        let d = &spec.domain.devices;
        let named: HashSet<&str> = d
            .gpus
            .iter()
            .chain(&d.host_devices)
            .filter_map(|e| e.claim_name.as_deref())
            .collect();
        spec.resource_claims
            .iter()
            .filter(|c| named.contains(c.name.as_str()))
            .collect()
    }

    /// What the VMI asks for through its annotations.
    pub fn gpu_request(&self) -> Result<GpuRequest, RequestError> {
        GpuRequest::from_annotations(self.metadata.annotations.as_ref())
    }

    /// What its spec requests, per device resource.
    pub fn device_request(&self) -> DeviceRequest {
        let mut out = DeviceRequest::new();
        let Some(spec) = &self.spec else {
            return out;
        };
        let d = &spec.domain.devices;
        for name in d
            .gpus
            .iter()
            .chain(&d.host_devices)
            .filter_map(|e| e.device_name.as_deref())
        {
            let n = out.entry(name.to_string()).or_default();
            *n = n.saturating_add(1);
        }
        out
    }
}

/// The most claims a VMI may name: more than any node holds GPUs. A list
/// past it is bad input, refused before it costs anything more.
pub const MAX_CLAIMS: usize = 256;

/// The GPUs a VMI asks for: existing claims by name, and/or a class from
/// which a template claim `<vmi>-gpu` of `count` GPUs is made.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GpuRequest {
    pub claims: Vec<String>,
    pub class: Option<(String, u32)>,
}

/// Why a VMI's GPU annotations cannot be used: said in a Warning Event on
/// the VMI, whose pods stay at the gate until the annotations are fixed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("{CLAIMS_ANNOTATION} names {name:?}, which is not a valid claim name")]
    ClaimName { name: String },
    #[error("{CLASS_ANNOTATION} {class:?} is not a valid GPUClass name")]
    ClassName { class: String },
    #[error("{COUNT_ANNOTATION} {count:?} is not a positive whole number")]
    Count { count: String },
    #[error("{CLAIMS_ANNOTATION} names more than {max} claims, more than any node holds GPUs")]
    TooManyClaims { max: usize },
    #[error(
        "{CLAIMS_ANNOTATION} and spec.resourceClaims together name more than {max} GPUClaims, more than any node holds GPUs"
    )]
    TooManyNamedClaims { max: usize },
    #[error(
        "ResourceClaimTemplate {template} asks for all devices of DeviceClass {device_class} (allocationMode: All); a GPUClass allocates a number of GPUs: use allocationMode ExactCount with a count"
    )]
    AllocationModeAll {
        template: String,
        device_class: String,
    },
    #[error(
        "ResourceClaimTemplate {template} asks for {count} devices of DeviceClass {device_class}; a count is a whole number from 1 to {}",
        u32::MAX
    )]
    DeviceCount {
        template: String,
        device_class: String,
        count: i64,
    },
    #[error(
        "ResourceClaimTemplate {template} mixes requests for GPUClass {class}'s DeviceClass with others ({}); a template for GPUs asks for them alone",
        others.join(", ")
    )]
    MixedTemplate {
        template: String,
        class: String,
        others: Vec<String>,
    },
    #[error(
        "its spec asks GPUClass {class} for GPUs through several resourceClaims entries ({}); one entry whose template asks for the count it needs does",
        entries.join(", ")
    )]
    SeveralTemplateEntries { class: String, entries: Vec<String> },
    #[error(
        "its spec requests devices of several GPU resources ({}); name its claims with {CLAIMS_ANNOTATION}",
        resources.join(", ")
    )]
    SeveralResources { resources: Vec<String> },
    #[error("its spec requests {resource}, and no GPUClass that is not being deleted serves it")]
    NoClass { resource: String },
    #[error(
        "its spec requests {resource}, which GPUClasses {} all serve; name one with {CLASS_ANNOTATION}",
        classes.join(", ")
    )]
    SeveralClasses {
        resource: String,
        classes: Vec<String>,
    },
}

impl GpuRequest {
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.class.is_none()
    }

    /// Claim names separated by commas; spaces around a name and empty
    /// entries are ignored, and a name listed twice counts once.
    fn from_annotations(a: Option<&BTreeMap<String, String>>) -> Result<Self, RequestError> {
        let Some(a) = a else {
            return Ok(Self::default());
        };
        // Linear in the annotation's length, and bounded: a tenant's list
        // costs what its length costs, once, never its square.
        let mut claims: Vec<String> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for name in a
            .get(CLAIMS_ANNOTATION)
            .into_iter()
            .flat_map(|l| l.split(','))
            .map(str::trim)
            .filter(|n| !n.is_empty())
        {
            if !is_dns_subdomain(name) {
                return Err(RequestError::ClaimName { name: name.into() });
            }
            if seen.insert(name) {
                if claims.len() == MAX_CLAIMS {
                    return Err(RequestError::TooManyClaims { max: MAX_CLAIMS });
                }
                claims.push(name.to_string());
            }
        }
        let count = a.get(COUNT_ANNOTATION).map(|c| c.trim());
        let class = match a.get(CLASS_ANNOTATION).map(|c| c.trim()) {
            None => None,
            Some(class) if !is_dns_subdomain(class) => {
                return Err(RequestError::ClassName {
                    class: class.into(),
                });
            }
            Some(class) => {
                let count: Cow<str> = count.map_or("1".into(), Into::into);
                match count.parse::<u32>() {
                    Ok(n) if n >= 1 => Some((class.to_string(), n)),
                    _ => {
                        return Err(RequestError::Count {
                            count: count.into_owned(),
                        });
                    }
                }
            }
        };
        Ok(Self { claims, class })
    }
}

kubevirt_resource!(Vmi, "VirtualMachineInstance", "virtualmachineinstances");

#[cfg(test)]
mod tests {
    use super::*;

    fn request(claims: &str) -> Result<GpuRequest, RequestError> {
        let a = BTreeMap::from([(CLAIMS_ANNOTATION.to_string(), claims.to_string())]);
        GpuRequest::from_annotations(Some(&a))
    }

    #[test]
    fn claim_names_are_trimmed_deduplicated_and_bounded() {
        assert_eq!(request(" a, b ,,a ").unwrap().claims, ["a", "b"]);
        // 20,000 entries naming 200 claims: linear, and within the bound.
        let repeated: Vec<String> = (0..20_000).map(|i| format!("c{}", i % 200)).collect();
        assert_eq!(request(&repeated.join(",")).unwrap().claims.len(), 200);
        let many: Vec<String> = (0..=MAX_CLAIMS).map(|i| format!("c{i}")).collect();
        assert_eq!(
            request(&many.join(",")),
            Err(RequestError::TooManyClaims { max: MAX_CLAIMS })
        );
        assert!(matches!(
            request("a,Bad_Name"),
            Err(RequestError::ClaimName { .. })
        ));
    }

    #[test]
    fn the_device_request_counts_entries_with_a_device_name() {
        let v: Vmi = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "vm"},
            "spec": {"domain": {"devices": {
                "gpus": [{"name": "gpu1", "deviceName": "nvidia.com/A"},
                         {"name": "gpu2", "deviceName": "nvidia.com/A"},
                         {"name": "dra", "claimName": "x"}],
                "hostDevices": [{"name": "nic", "deviceName": "mellanox.com/cx7"}]}}}
        }))
        .unwrap();
        let r = v.device_request();
        assert_eq!(r.get("nvidia.com/A"), Some(&2));
        assert_eq!(r.get("mellanox.com/cx7"), Some(&1));
        assert_eq!(r.len(), 2);
    }
}
