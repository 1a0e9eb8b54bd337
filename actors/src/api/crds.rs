//! The CRDs, generated from the Rust types: what the operator prints
//! (`gpu-claims crd`, deploy/crds/) and what an embedded cluster installs.

use super::{GPUAllocation, GPUClaim, GPUClass, GPUQuota};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// The CRDs with the file names they are committed under.
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("gpuclasses.yaml", GPUClass::crd()),
        ("gpuclaims.yaml", GPUClaim::crd()),
        ("gpuallocations.yaml", GPUAllocation::crd()),
        ("gpuquotas.yaml", GPUQuota::crd()),
    ]
}
