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

/// Why an `exactly` request gives no number of devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountProblem {
    /// `allocationMode: All` (or a mode this version does not know): a
    /// GPUClass allocates a number of GPUs.
    All,
    /// A count below 1, or past what a u32 holds (the API server refuses
    /// both; a snapshot or an older server may not).
    OutOfRange(i64),
}

/// How many devices an `exactly` request asks for: `count` (1 when
/// absent) in ExactCount mode.
pub fn exact_count(r: &DeviceRequest) -> Result<u32, CountProblem> {
    let Some(x) = r.exactly.as_ref() else {
        return Err(CountProblem::All);
    };
    match x.allocation_mode.as_deref() {
        None | Some("ExactCount") => {
            let n = x.count.unwrap_or(1);
            u32::try_from(n)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or(CountProblem::OutOfRange(n))
        }
        _ => Err(CountProblem::All),
    }
}

/// The DeviceClass an `exactly` request names.
pub fn device_class(r: &DeviceRequest) -> Option<&str> {
    r.exactly.as_ref().map(|x| x.device_class_name.as_str())
}
