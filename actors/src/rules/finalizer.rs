use crate::api::{GPUClaim, has_finalizer, is_deleting};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// L1: every GPUClass and GPUClaim not being deleted carries its
/// finalizer; a missing one is added.
pub fn needs_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    !is_deleting(meta) && !has_finalizer(meta, finalizer)
}

/// A claim being deleted whose finalizer is gone: released (the seed's
/// `released`). It holds no GPUs, whatever its status still says. The
/// fact is the claim's own (`GPUClaim::is_released`), which the world's
/// indexes count without asking the rules.
pub fn released(c: &GPUClaim) -> bool {
    c.is_released()
}
