//! D5: what a ResourceClaim (or the template Kubernetes makes it from)
//! asks for: its requests, as gpu-claims reads them.

use k8s_openapi::api::resource::v1::{DeviceRequest, ResourceClaimSpec, ResourceClaimTemplate};

/// The requests of a claim's spec.
pub fn requests(spec: Option<&ResourceClaimSpec>) -> &[DeviceRequest] {
    spec.and_then(|s| s.devices.as_ref())
        .and_then(|d| d.requests.as_deref())
        .unwrap_or_default()
}

/// The spec a template gives the claims made from it.
pub fn template_spec(t: &ResourceClaimTemplate) -> Option<&ResourceClaimSpec> {
    t.spec.as_ref()?.spec.as_ref()
}

/// How many devices an `exactly` request asks for: `count` (1 when
/// absent) in ExactCount mode; None for `All`, which a GPUClass cannot
/// serve (a number of GPUs is what it allocates).
pub fn exact_count(r: &DeviceRequest) -> Option<u32> {
    let x = r.exactly.as_ref()?;
    match x.allocation_mode.as_deref() {
        None | Some("ExactCount") => u32::try_from(x.count.unwrap_or(1)).ok().filter(|n| *n >= 1),
        _ => None,
    }
}

/// The DeviceClass an `exactly` request names.
pub fn device_class(r: &DeviceRequest) -> Option<&str> {
    r.exactly.as_ref().map(|x| x.device_class_name.as_str())
}
