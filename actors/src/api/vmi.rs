//! The slice of a KubeVirt VirtualMachineInstance that gpu-claims reads.
//! Unknown fields are ignored: we never write a VMI, only delete it (L12).

use super::validation::is_dns_subdomain;
use super::{CLAIMS_ANNOTATION, CLASS_ANNOTATION, COUNT_ANNOTATION};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Vmi {
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<VmiStatus>,
}

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

    /// What the VMI asks for through its annotations.
    pub fn gpu_request(&self) -> Result<GpuRequest, RequestError> {
        GpuRequest::from_annotations(self.metadata.annotations.as_ref())
    }
}

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
}

impl GpuRequest {
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.class.is_none()
    }

    /// Claim names separated by commas; spaces around a name and empty
    /// entries are ignored, and a name listed twice counts once.
    fn from_annotations(
        a: Option<&std::collections::BTreeMap<String, String>>,
    ) -> Result<Self, RequestError> {
        let Some(a) = a else {
            return Ok(Self::default());
        };
        let mut claims: Vec<String> = Vec::new();
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
            if !claims.iter().any(|c| c == name) {
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

impl kube::Resource for Vmi {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "VirtualMachineInstance".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "kubevirt.io".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "virtualmachineinstances".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
