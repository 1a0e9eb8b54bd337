//! What a VMI asks for (docs/design.md, "Objects"; G2, D5): the claims and class its
//! annotations name; without them, the GPUs its spec requests of a
//! resource a GPUClass serves, or asks of a DRA class through a
//! ResourceClaimTemplate, as a template claim of that class.

use crate::api::{GpuRequest, RequestError, Vmi};
use crate::dra::template::{CountProblem, device_class, exact_count, requests, template_spec};
use crate::world::{World, key};
use std::collections::BTreeSet;

/// D5: a `spec.resourceClaims[]` entry, referenced by a `gpus[]` or
/// `hostDevices[]` entry, whose ResourceClaimTemplate asks a DRA class
/// for GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateAsk {
    /// The entry's name (the pod's `resourceClaims[].name`).
    pub entry: String,
    pub template: String,
    pub class: String,
    /// The GPUs its requests ask for, together.
    pub count: u32,
}

/// D5: the entries of the VMI's spec that ask DRA classes for GPUs
/// through a template. Where Kubernetes made a launcher pod's
/// ResourceClaim for the entry, its requests are read, not the template's
/// (the claim is a copy of the template as it was; the template may have
/// been edited or deleted since). A template that does not exist yet, or
/// whose requests name no DRA class's DeviceClass, is not gpu-claims'
/// business; one that asks for `All` devices or a count out of range,
/// mixes a class's DeviceClass with others, or names a DeviceClass
/// several classes serve is bad input.
pub fn template_asks(v: &Vmi, w: &World) -> Result<Vec<TemplateAsk>, RequestError> {
    let ns = v.metadata.namespace.as_deref().unwrap_or_default();
    // D5: the class its annotation names picks among several classes of
    // one DeviceClass.
    let annotated = v.gpu_request().ok().and_then(|r| r.class).map(|(c, _)| c);
    let mut out = Vec::new();
    for e in v.referenced_resource_claims() {
        let Some(t) = e.resource_claim_template_name.as_deref() else {
            continue;
        };
        // Kubernetes made the launcher pod's ResourceClaim from the
        // template as it was then: where one exists, it is what the
        // devices go to, whether the template was edited or deleted since.
        let made = made_claim(v, w, &e.name);
        let template = w.resource_claim_template(&key(ns, t));
        let spec = match (&made, &template) {
            (Some(rc), _) => rc.spec.as_ref(),
            (None, Some(template)) => template_spec(template),
            (None, None) => continue,
        };
        let reqs = requests(spec);
        let mut class: Option<String> = None;
        let mut others: Vec<String> = Vec::new();
        let mut count = 0u32;
        for r in reqs {
            let mut classes = device_class(r)
                .map(|dc| w.live_dra_classes_of(dc))
                .unwrap_or_default();
            if let Some(a) = annotated.as_ref().filter(|a| classes.contains(*a)) {
                classes = BTreeSet::from([a.clone()]);
            }
            match classes.len() {
                0 => others.push(r.name.clone()),
                1 => {
                    let c = classes.into_iter().next().unwrap_or_default();
                    if class.as_ref().is_some_and(|k| *k != c) {
                        others.push(r.name.clone());
                        continue;
                    }
                    let device_class = device_class(r).unwrap_or_default().to_string();
                    let n = match exact_count(r) {
                        Ok(n) => n,
                        Err(CountProblem::All) => {
                            return Err(RequestError::AllocationModeAll {
                                template: t.to_string(),
                                device_class,
                            });
                        }
                        Err(CountProblem::OutOfRange(count)) => {
                            return Err(RequestError::DeviceCount {
                                template: t.to_string(),
                                device_class,
                                count,
                            });
                        }
                    };
                    count = count.saturating_add(n);
                    class = Some(c);
                }
                _ => {
                    return Err(RequestError::SeveralClasses {
                        resource: format!("DeviceClass {}", device_class(r).unwrap_or_default()),
                        classes: classes.into_iter().collect(),
                    });
                }
            }
        }
        let Some(class) = class else { continue };
        if !others.is_empty() {
            return Err(RequestError::MixedTemplate {
                template: t.to_string(),
                class,
                others,
            });
        }
        out.push(TemplateAsk {
            entry: e.name.clone(),
            template: t.to_string(),
            class,
            count,
        });
    }
    Ok(out)
}

/// D5: the ResourceClaim Kubernetes made for entry `entry` of a launcher
/// pod of the VMI, where one is made and seen.
fn made_claim(
    v: &Vmi,
    w: &World,
    entry: &str,
) -> Option<std::sync::Arc<k8s_openapi::api::resource::v1::ResourceClaim>> {
    let ns = v.metadata.namespace.as_deref()?;
    let name = v.metadata.name.as_deref()?;
    w.launchers(&key(ns, name))
        .iter()
        .filter(|p| !p.terminal)
        .filter_map(|p| p.resource_claim(entry))
        .find_map(|c| w.resource_claim(&key(ns, c)))
}

/// Whether any class allocates DRA devices: only then can a name in
/// `spec.resourceClaims` be gpu-claims' business.
fn dra_classes_exist(w: &World) -> bool {
    let mut dra = false;
    w.for_each_class(|c| dra |= c.spec.device_class_name.is_some());
    dra
}

/// G1, D5: a template the VMI's spec references that the world has not
/// seen, where DRA classes exist: whether it asks for their devices cannot
/// be told yet (a template made just before its VM, the watch behind).
/// The webhook refuses the launcher pod until it is seen, rather than let
/// a pod that may ask for GPUs slip past the gate.
pub fn unseen_template(v: &Vmi, w: &World) -> Option<String> {
    if !dra_classes_exist(w) {
        return None;
    }
    let ns = v.metadata.namespace.as_deref().unwrap_or_default();
    v.referenced_resource_claims()
        .into_iter()
        .filter_map(|e| e.resource_claim_template_name.as_deref())
        .find(|t| {
            !w.listed(crate::api::Kind::ResourceClaimTemplate)
                || w.resource_claim_template(&key(ns, t)).is_none()
        })
        .map(str::to_string)
}

/// G2, D5: the VMI's request. Its annotations, when they ask for
/// anything; else, where its device request names exactly one resource R
/// that a GPUClass serves and exactly one class not being deleted serves
/// R, a template claim of that class for its request of R; or, where
/// exactly one `resourceClaims` entry asks a DRA class through a
/// template, a template claim of that class for the template's count.
/// Several resources, several classes or only classes being deleted are
/// bad input.
///
/// D5: the GPUClaims of DRA classes its spec names by `resourceClaimName`
/// join the set, as the claims annotation's do.
/// The annotation and `spec.resourceClaims` together name at most
/// `MAX_CLAIMS` claims, as the annotation alone does.
pub fn vmi_request(v: &Vmi, w: &World) -> Result<GpuRequest, RequestError> {
    let mut r = annotated_or_spec_request(v, w)?;
    let mut seen: std::collections::HashSet<String> = r.claims.iter().cloned().collect();
    for n in named_claims(v, w) {
        if seen.insert(n.clone()) {
            if r.claims.len() == crate::api::MAX_CLAIMS {
                return Err(RequestError::TooManyNamedClaims {
                    max: crate::api::MAX_CLAIMS,
                });
            }
            r.claims.push(n);
        }
    }
    Ok(r)
}

/// D5: the `resourceClaimName`s of the VMI's referenced entries that are
/// GPUClaims of DRA classes (or of a class gone, which G5 says waits) in
/// its namespace: their backing claims hold the VM's devices. A name that
/// is no GPUClaim, or one of a device-plugin class, is not gpu-claims'
/// business.
pub fn named_claims(v: &Vmi, w: &World) -> Vec<String> {
    let ns = v.metadata.namespace.as_deref().unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for n in v
        .referenced_resource_claims()
        .into_iter()
        .filter_map(|e| e.resource_claim_name.as_deref())
    {
        let ours = w.claim(&key(ns, n)).is_some_and(|c| {
            w.class(&c.spec.class_name)
                .is_none_or(|k| k.spec.device_class_name.is_some())
        });
        if ours && seen.insert(n) {
            out.push(n.to_string());
        }
    }
    out
}

/// G1, D5: a `resourceClaimName` the VMI's spec references that is
/// neither a GPUClaim nor a ResourceClaim the world has seen, where DRA
/// classes exist: it may be a GPUClaim made just before its VM, the
/// watch behind, and a pod that slipped past the gate with it would wait
/// for a backing claim no one makes. The webhook refuses the launcher pod
/// until it is seen (a pod naming a ResourceClaim that does not exist
/// cannot run anyway).
pub fn unseen_claim(v: &Vmi, w: &World) -> Option<String> {
    if !dra_classes_exist(w) {
        return None;
    }
    let ns = v.metadata.namespace.as_deref().unwrap_or_default();
    v.referenced_resource_claims()
        .into_iter()
        .filter_map(|e| e.resource_claim_name.as_deref())
        .find(|n| {
            let k = key(ns, n);
            !w.listed(crate::api::Kind::Claim)
                || !w.listed(crate::api::Kind::ResourceClaim)
                || (w.claim(&k).is_none() && w.resource_claim(&k).is_none())
        })
        .map(str::to_string)
}

/// G2, D5: the request its annotations make or, without them, its spec.
fn annotated_or_spec_request(v: &Vmi, w: &World) -> Result<GpuRequest, RequestError> {
    let mut annotated = v.gpu_request()?;
    if !annotated.is_empty() {
        // D5: the class annotation picks the class of a template's
        // request; without a count annotation, the count is the
        // template's (one that says otherwise is G3's RequestMismatch).
        let counted = v
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(crate::api::COUNT_ANNOTATION));
        if let Some((class, count)) = annotated.class.as_mut()
            && !counted
            && let Some(ask) = template_asks(v, w)?.iter().find(|a| a.class == *class)
        {
            *count = ask.count;
        }
        return Ok(annotated);
    }
    let asks = template_asks(v, w)?;
    let devices = v.device_request();
    let served: Vec<(&String, u32)> = devices
        .iter()
        .filter(|(r, _)| w.serves(r))
        .map(|(r, n)| (r, *n))
        .collect();
    if !asks.is_empty() {
        if !served.is_empty() {
            let mut resources: Vec<String> = served.iter().map(|(r, _)| r.to_string()).collect();
            resources.extend(asks.iter().map(|a| format!("GPUClass {}", a.class)));
            return Err(RequestError::SeveralResources { resources });
        }
        let classes: BTreeSet<&str> = asks.iter().map(|a| a.class.as_str()).collect();
        if classes.len() > 1 {
            return Err(RequestError::SeveralResources {
                resources: classes.iter().map(|c| format!("GPUClass {c}")).collect(),
            });
        }
        if let [a] = asks.as_slice() {
            return Ok(GpuRequest {
                claims: Vec::new(),
                class: Some((a.class.clone(), a.count)),
            });
        }
        return Err(RequestError::SeveralTemplateEntries {
            class: asks[0].class.clone(),
            entries: asks.iter().map(|a| a.entry.clone()).collect(),
        });
    }
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

/// Whether the VMI asks for GPUs (docs/design.md, "Objects"): its annotations do, its
/// device request names a resource a GPUClass serves, or a
/// `resourceClaims` entry asks a DRA class through a template or names a
/// GPUClaim of one (D5). An
/// unusable request still asks: its pods wait at the gate and the VMI is
/// told why.
pub fn asks_for_gpus(v: &Vmi, w: &World) -> bool {
    let named = !matches!(v.gpu_request(), Ok(r) if r.is_empty());
    named
        || v.device_request().keys().any(|r| w.serves(r))
        || !matches!(template_asks(v, w), Ok(a) if a.is_empty())
        || !named_claims(v, w).is_empty()
}
