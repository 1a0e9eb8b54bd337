//! The slice of a KubeVirt VirtualMachineInstance that gpu-claims reads.
//! Unknown fields are ignored: we never write a VMI, only delete it (L12).

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
    pub fn gpu_request(&self) -> Result<GpuRequest, String> {
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

impl GpuRequest {
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.class.is_none()
    }

    fn from_annotations(
        a: Option<&std::collections::BTreeMap<String, String>>,
    ) -> Result<Self, String> {
        let Some(a) = a else {
            return Ok(Self::default());
        };
        let mut claims = Vec::new();
        if let Some(list) = a.get(CLAIMS_ANNOTATION) {
            for name in list.split(',').map(str::trim) {
                if name.is_empty() {
                    return Err(format!(
                        "{CLAIMS_ANNOTATION} {list:?} has an empty claim name"
                    ));
                }
                if !claims.iter().any(|c| c == name) {
                    claims.push(name.to_string());
                }
            }
        }
        let class = match a.get(CLASS_ANNOTATION).map(|c| c.trim()) {
            None => None,
            Some("") => return Err(format!("{CLASS_ANNOTATION} is empty")),
            Some(class) => {
                let count: Cow<str> = a
                    .get(COUNT_ANNOTATION)
                    .map_or("1".into(), |c| c.trim().into());
                match count.parse::<u32>() {
                    Ok(n) if n >= 1 => Some((class.to_string(), n)),
                    _ => {
                        return Err(format!(
                            "{COUNT_ANNOTATION} {count:?} is not a whole number >= 1"
                        ));
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
