//! D4: the allocation gpu-claims writes on a ResourceClaim for the devices
//! it chose, as kube-scheduler writes one: results, the classes' and the
//! claim's config, and a node selector for the node; never `reservedFor`.

use super::*;
use crate::dra::template::exact_count;
use crate::world::World;
use crate::world::devices::DeviceId;
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult,
    DeviceRequestAllocationResult,
};

/// D4: the allocation that names `devices` (in request order: each
/// request takes as many as it counts) on `node`, as kube-scheduler
/// writes one: the results, the DeviceClass's config and the GPUClass's
/// (`FromClass`, for the requests of its DeviceClass; a backing claim has
/// the GPUClass's as its own), the claim's own (`FromClaim`), and a node selector for the node by `metadata.name`.
/// None when the devices do not fill the claim's requests.
pub fn allocation(
    w: &World,
    m: &DraMember,
    devices: &[DeviceId],
    node: &str,
) -> Option<AllocationResult> {
    let dc = m
        .class
        .spec
        .device_class_name
        .as_deref()
        .unwrap_or_default();
    let mut results = Vec::with_capacity(devices.len());
    let mut next = devices.iter();
    let mut ours: Vec<String> = Vec::new();
    for r in m.class_requests() {
        ours.push(r.name.clone());
        for _ in 0..exact_count(r).unwrap_or(0) {
            let d = next.next()?;
            results.push(DeviceRequestAllocationResult {
                request: r.name.clone(),
                driver: d.driver.to_string(),
                pool: d.pool.to_string(),
                device: d.device.to_string(),
                // The request's tolerations, as the allocator copies them
                // (the eviction controller reads them from the result).
                tolerations: r.exactly.as_ref().and_then(|x| x.tolerations.clone()),
                ..Default::default()
            });
        }
    }
    if next.next().is_some() {
        return None;
    }
    let mut config = Vec::new();
    let class_config = w
        .device_class(dc)
        .and_then(|c| c.spec.as_ref().and_then(|s| s.config.clone()))
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.opaque);
    // A backing claim carries the GPUClass's config as its own (copied
    // `FromClaim` below); a template's claim does not, so it goes in here.
    let class_own = if m.backing {
        &[][..]
    } else {
        &m.class.spec.config[..]
    };
    let own_config = class_own.iter().map(|c| {
        Some(k8s_openapi::api::resource::v1::OpaqueDeviceConfiguration {
            driver: c.opaque.driver.clone(),
            parameters: k8s_openapi::apimachinery::pkg::runtime::RawExtension(
                c.opaque.parameters.clone(),
            ),
        })
    });
    for opaque in class_config.chain(own_config) {
        for r in &ours {
            config.push(DeviceAllocationConfiguration {
                source: "FromClass".into(),
                requests: Some(vec![r.clone()]),
                opaque: opaque.clone(),
            });
        }
    }
    let claim_config = m
        .resource_claim
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.config.clone())
        .unwrap_or_default();
    for c in claim_config {
        config.push(DeviceAllocationConfiguration {
            source: "FromClaim".into(),
            requests: c.requests,
            opaque: c.opaque,
        });
    }
    Some(AllocationResult {
        devices: Some(DeviceAllocationResult {
            results: Some(results),
            config: (!config.is_empty()).then_some(config),
        }),
        node_selector: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_fields: Some(vec![NodeSelectorRequirement {
                    key: "metadata.name".into(),
                    operator: "In".into(),
                    values: Some(vec![node.to_string()]),
                }]),
                ..Default::default()
            }],
        }),
        ..Default::default()
    })
}
