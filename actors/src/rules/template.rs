//! G2: the template claim a VMI asks for with `gpu.cozystack.io/class`,
//! or with GPUs in its spec alone;
//! and the records without their claim (docs/design.md, "Objects").

use crate::api::{
    CLAIM_FINALIZER, GPUAllocation, GPUClaim, GPUClaimSpec, TEMPLATE_LABEL, Vmi, is_deleting,
    vmi_owner,
};
use crate::world::{World, key};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::BTreeMap;

/// The name of a VMI's template claim.
pub fn template_name(vmi: &str) -> String {
    format!("{vmi}-gpu")
}

/// What G2 decides for one VMI.
#[derive(Clone, Debug, PartialEq)]
pub enum TemplateStep {
    /// Create this claim.
    Create(Box<GPUClaim>),
    /// A claim of that name is there but is an earlier VMI's: L3 deletes it first.
    WaitForOld,
    /// Nothing to do (no class asked, the VMI does not live, or the claim is there).
    Nothing,
    /// The annotations cannot be used.
    BadRequest(crate::api::RequestError),
}

/// G2: while a VMI lives and asks for a class (by its annotations, or by
/// what its spec requests), its template claim exists.
pub fn decide_template(v: &Vmi, w: &World) -> TemplateStep {
    if v.is_final() || is_deleting(&v.metadata) {
        return TemplateStep::Nothing;
    }
    let request = match super::request::vmi_request(v, w) {
        Ok(r) => r,
        Err(e) => return TemplateStep::BadRequest(e),
    };
    let (Some((class, count)), Some(ns), Some(vmi)) = (
        request.class,
        v.metadata.namespace.as_deref(),
        v.metadata.name.as_deref(),
    ) else {
        return TemplateStep::Nothing;
    };
    let name = template_name(vmi);
    if let Some(existing) = w.claim(&key(ns, &name)) {
        let ours = vmi_owner(&existing.metadata).is_some_and(|(_, uid)| uid == v.uid());
        return if ours {
            TemplateStep::Nothing
        } else {
            TemplateStep::WaitForOld
        };
    }
    let owner = OwnerReference {
        api_version: crate::api::VMI_API_VERSION.into(),
        kind: crate::api::VMI_KIND.into(),
        name: vmi.into(),
        uid: v.uid().into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    TemplateStep::Create(Box::new(GPUClaim {
        metadata: ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name),
            labels: Some(BTreeMap::from([(
                TEMPLATE_LABEL.to_string(),
                "true".to_string(),
            )])),
            owner_references: Some(vec![owner]),
            // With its finalizer from the start: L1 needs no second write.
            finalizers: Some(vec![CLAIM_FINALIZER.into()]),
            ..Default::default()
        },
        spec: GPUClaimSpec {
            class_name: class,
            count,
        },
        status: None,
    }))
}

/// A record whose claim is gone, or is another claim of the same name.
pub fn allocation_is_orphan(r: &GPUAllocation, w: &World) -> bool {
    let (Some(ns), Some(name)) = (r.metadata.namespace.as_deref(), r.metadata.name.as_deref())
    else {
        return false;
    };
    w.claim(&key(ns, name))
        .is_none_or(|c| c.metadata.uid.as_deref() != Some(r.spec.claim_uid.as_str()))
}
