//! What a VMI asks for (SPEC §1, G2): the claims and class its
//! annotations name; without them, the GPUs its spec requests of a
//! resource a GPUClass serves, as a template claim of that class.

use crate::api::{GpuRequest, RequestError, Vmi};
use crate::world::World;
use std::collections::BTreeSet;

/// G2: the VMI's request. Its annotations, when they ask for anything;
/// else, where its device request names exactly one resource R that a
/// GPUClass serves and exactly one class not being deleted serves R, a
/// template claim of that class for its request of R. Several resources,
/// several classes or only classes being deleted are bad input.
pub fn vmi_request(v: &Vmi, w: &World) -> Result<GpuRequest, RequestError> {
    let annotated = v.gpu_request()?;
    if !annotated.is_empty() {
        return Ok(annotated);
    }
    let devices = v.device_request();
    let served: Vec<(&String, u32)> = devices
        .iter()
        .filter(|(r, _)| w.serves(r))
        .map(|(r, n)| (r, *n))
        .collect();
    let [(resource, count)] = served.as_slice() else {
        if served.is_empty() {
            return Ok(GpuRequest::default());
        }
        return Err(RequestError::SeveralResources {
            resources: served.iter().map(|(r, _)| r.to_string()).collect(),
        });
    };
    let classes: BTreeSet<String> = w.live_classes_serving(resource);
    match classes.len() {
        1 => {
            let class = classes.into_iter().next().unwrap_or_default();
            Ok(GpuRequest {
                claims: Vec::new(),
                class: Some((class, *count)),
            })
        }
        0 => Err(RequestError::NoClass {
            resource: resource.to_string(),
        }),
        _ => Err(RequestError::SeveralClasses {
            resource: resource.to_string(),
            classes: classes.into_iter().collect(),
        }),
    }
}

/// Whether the VMI asks for GPUs (SPEC §1): its annotations do, or its
/// device request names a resource a GPUClass serves. An unusable request
/// still asks: its pods wait at the gate and the VMI is told why.
pub fn asks_for_gpus(v: &Vmi, w: &World) -> bool {
    let named = !matches!(v.gpu_request(), Ok(r) if r.is_empty());
    named || v.device_request().keys().any(|r| w.serves(r))
}
