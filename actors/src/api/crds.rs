//! The CRDs, generated from the Rust types: what the operator prints
//! (`gpu-claims crd`, deploy/crds/) and what an embedded cluster installs.

use super::{GPUAllocation, GPUClaim, GPUClass, GPUQuota};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;

/// The CRDs with the file names they are committed under.
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    let mut crds = vec![
        ("gpuclasses.yaml", GPUClass::crd()),
        ("gpuclaims.yaml", GPUClaim::crd()),
        ("gpuallocations.yaml", GPUAllocation::crd()),
        ("gpuquotas.yaml", GPUQuota::crd()),
    ];
    for (_, crd) in &mut crds {
        for v in &mut crd.spec.versions {
            if let Some(s) = v
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
            {
                bound_integers(s);
            }
        }
    }
    crds
}

/// The largest value of each integer format the Rust types read. schemars
/// says `format: uint32` and `minimum: 0` but no maximum, and the API
/// server stores any int64 under such a schema: a GPUQuota limit of
/// 4294967296 was stored, could not be read, and was treated as absent.
/// The schema bounds what the controller can read, so the API server
/// refuses the rest (422) and the tenant or platform sees why.
fn maximum_of(format: &str) -> Option<f64> {
    Some(match format {
        "uint8" => u8::MAX.into(),
        "uint16" => u16::MAX.into(),
        "uint32" => u32::MAX.into(),
        "int32" => i32::MAX.into(),
        // 64 bits: Kubernetes stores no integer past an int64 anyway.
        _ => return None,
    })
}

/// Gives every integer with a known format its maximum, where the type
/// does not give a lower one, all the way down the schema.
fn bound_integers(s: &mut JSONSchemaProps) {
    if s.type_.as_deref() == Some("integer")
        && s.maximum.is_none()
        && let Some(max) = s.format.as_deref().and_then(maximum_of)
    {
        s.maximum = Some(max);
    }
    if let Some(props) = s.properties.as_mut() {
        props.values_mut().for_each(bound_integers);
    }
    if let Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrBool::Schema(inner)) =
        s.additional_properties.as_mut()
    {
        bound_integers(inner);
    }
    if let Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(inner)) =
        s.items.as_mut()
    {
        bound_integers(inner);
    }
    for list in [&mut s.all_of, &mut s.any_of, &mut s.one_of]
        .into_iter()
        .flatten()
    {
        list.iter_mut().for_each(bound_integers);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every integer in a schema, as (path, format, maximum).
    fn integers(s: &JSONSchemaProps, path: &str, out: &mut Vec<(String, String, Option<f64>)>) {
        if s.type_.as_deref() == Some("integer") {
            out.push((path.into(), s.format.clone().unwrap_or_default(), s.maximum));
        }
        for (k, p) in s.properties.iter().flatten() {
            integers(p, &format!("{path}.{k}"), out);
        }
        if let Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrBool::Schema(inner)) = &s.additional_properties {
            integers(inner, &format!("{path}.*"), out);
        }
    }

    #[test]
    fn every_integer_in_our_crds_is_bounded_by_what_its_rust_type_reads() {
        let mut found = Vec::new();
        for (file, crd) in all() {
            for v in &crd.spec.versions {
                let s = v
                    .schema
                    .as_ref()
                    .unwrap()
                    .open_api_v3_schema
                    .as_ref()
                    .unwrap();
                integers(s, file, &mut found);
            }
        }
        let quota_limit = found
            .iter()
            .find(|(p, ..)| p == "gpuquotas.yaml.spec.hard.*")
            .expect("a quota's per-class limit");
        assert_eq!(quota_limit.2, Some(4_294_967_295.0));
        for (path, format, max) in &found {
            if !["uint8", "uint16", "uint32", "int32"].contains(&format.as_str()) {
                continue;
            }
            assert!(max.is_some(), "{path} ({format}) has no maximum");
        }
    }
}
