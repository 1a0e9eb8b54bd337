//! D3-D5 at the gate: the ResourceClaim that holds each DRA member's
//! devices (the one Kubernetes made for the launcher pod from the VMI's
//! template), which devices of a node a set takes, and the allocation
//! gpu-claims writes for them, as kube-scheduler writes one.

mod allocation;
mod backing;
mod choose;
mod named_twice;
mod restore;

pub use allocation::allocation;
pub use backing::{
    BACKING_FINALIZER, BACKING_OWNER_ANNOTATION, BACKING_REQUEST, backing_claim,
    backing_claim_to_let_go, controlled_by, orphaned_backing_claim, owned_by, reserved,
};
pub use choose::{Chosen, DeviceAsk, choose};
pub use named_twice::{DeviceTaken, GiveUp, Taken, device_taken, lost_to_another, taken_device};
pub use restore::{Restore, backing_claim_to_restore};

use super::{WaitReason, Waiting, wait};
use crate::api::{GPUClaim, GPUClass, LauncherPod, Vmi};
use crate::dra::template::{device_class, requests};
use crate::rules::request::{TemplateAsk, template_asks};
pub use crate::world::devices::allocated_devices;
use crate::world::{World, key};
use k8s_openapi::api::resource::v1::{DeviceRequest, ResourceClaim};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

/// A member of a DRA class: the ResourceClaim that holds its devices.
#[derive(Clone, Debug)]
pub struct DraMember {
    pub class: Arc<GPUClass>,
    /// `ns/name` of the ResourceClaim.
    pub claim_key: String,
    pub resource_claim: Arc<ResourceClaim>,
    /// A named claim's backing claim (D4), which gpu-claims makes and
    /// deletes; else the one Kubernetes made for the launcher pod.
    pub backing: bool,
}

impl DraMember {
    /// The requests of its ResourceClaim that name its class's
    /// DeviceClass, in order: the ones gpu-claims fills.
    fn class_requests(&self) -> impl Iterator<Item = &DeviceRequest> {
        let dc = self.class.spec.device_class_name.as_deref();
        requests(self.resource_claim.spec.as_ref())
            .iter()
            .filter(move |r| dc.is_some() && device_class(r) == dc)
    }
}

/// D5: a set holding claims of DRA classes must be what the VMI's spec
/// asks of them: per DRA class, the template claim's GPUs equal what its
/// template asks for; a named claim of a DRA class reaches the VM only
/// where the spec references its backing claim by name (KubeVirt
/// attaches only what `gpus[].claimName` names). The message says what
/// to add.
pub(super) fn dra_mismatch(
    v: &Vmi,
    w: &World,
    claims: &[Arc<GPUClaim>],
    classes: &[Arc<GPUClass>],
) -> Option<String> {
    let asks = template_asks(v, w).unwrap_or_default();
    let named: BTreeSet<&str> = v
        .referenced_resource_claims()
        .into_iter()
        .filter_map(|e| e.resource_claim_name.as_deref())
        .collect();
    let mut differs = String::new();
    let mut say = |m: String| {
        let sep = if differs.is_empty() { "" } else { "; " };
        let _ = write!(differs, "{sep}{m}");
    };
    let mut held: BTreeMap<&str, u64> = BTreeMap::new();
    for (c, k) in claims.iter().zip(classes) {
        let Some(dc) = k.spec.device_class_name.as_deref() else {
            continue;
        };
        let class = c.spec.class_name.as_str();
        let cname = c.metadata.name.as_deref().unwrap_or_default();
        if !c.is_template() {
            if !named.contains(cname) {
                say(format!(
                    "claim {cname} is of DRA class {class} (DeviceClass {dc}), whose GPUs reach a VM only through spec.resourceClaims: add resourceClaims: [{{name: {cname}, resourceClaimName: {cname}}}] and gpus: [{{name: {cname}, claimName: {cname}, requestName: {BACKING_REQUEST}}}]"
                ));
            }
            continue;
        }
        let n = held.entry(class).or_default();
        *n = n.saturating_add(u64::from(c.spec.count));
    }
    let asked: BTreeMap<&str, u64> = asks
        .iter()
        .map(|a: &TemplateAsk| (a.class.as_str(), u64::from(a.count)))
        .collect();
    let names: BTreeSet<&str> = held.keys().chain(asked.keys()).copied().collect();
    for class in names {
        let (a, h) = (
            asked.get(class).copied().unwrap_or(0),
            held.get(class).copied().unwrap_or(0),
        );
        if a != h {
            say(format!(
                "its spec asks GPUClass {class} for {a} GPUs through spec.resourceClaims, its claims hold {h}"
            ));
        }
    }
    (!differs.is_empty()).then(|| format!("the set does not match the VMI's spec: {differs}"))
}

/// D5, G5's DeviceClaimPending: per claim, for a template claim of a DRA
/// class, the ResourceClaim Kubernetes made for the launcher pod's entry
/// that asks for it; it must exist before the set is placed. A VMI with
/// several launcher pods at the gate waits: one ResourceClaim holds the
/// devices, and each pod has its own.
pub(super) fn resource_claims(
    v: &Vmi,
    w: &World,
    pods: &[Arc<LauncherPod>],
    claims: &[Arc<GPUClaim>],
    classes: &[Arc<GPUClass>],
) -> Result<Vec<Option<DraMember>>, Waiting> {
    let ns = v.metadata.namespace.as_deref().unwrap_or_default();
    let asks = template_asks(v, w).unwrap_or_default();
    let mut out = Vec::with_capacity(claims.len());
    for (c, k) in claims.iter().zip(classes) {
        if k.spec.device_class_name.is_none() {
            out.push(None);
            continue;
        }
        // D4: a named claim's devices are held by its backing claim.
        if !c.is_template() {
            out.push(Some(backing::backing_member(w, c, k)?));
            continue;
        }
        let class = k.metadata.name.as_deref().unwrap_or_default();
        let Some(ask) = asks.iter().find(|a| a.class == class) else {
            // dra_mismatch said why already; not reached.
            out.push(None);
            continue;
        };
        let [pod] = pods else {
            return Err(wait(
                WaitReason::DeviceClaimPending,
                format!(
                    "the VMI has {} launcher pods at the gate, each with its own ResourceClaim for entry {}; the devices go to one",
                    pods.len(),
                    ask.entry
                ),
            ));
        };
        let Some(name) = pod.resource_claim(&ask.entry) else {
            return Err(wait(
                WaitReason::DeviceClaimPending,
                format!(
                    "Kubernetes has not made the ResourceClaim of launcher pod {} for entry {} (template {}) yet",
                    pod.name, ask.entry, ask.template
                ),
            ));
        };
        let claim_key = key(ns, name);
        let Some(rc) = w.resource_claim(&claim_key) else {
            return Err(wait(
                WaitReason::DeviceClaimPending,
                format!(
                    "ResourceClaim {name} of launcher pod {} is not seen yet",
                    pod.name
                ),
            ));
        };
        let m = DraMember {
            class: k.clone(),
            claim_key,
            resource_claim: rc,
            backing: false,
        };
        let ask = DeviceAsk::of(w, &m).map_err(|e| wait(WaitReason::DeviceClaimPending, e))?;
        let asked = ask
            .requests
            .iter()
            .fold(0u64, |n, r| n.saturating_add(u64::from(r.count)));
        let claim = c;
        if asked != u64::from(claim.spec.count) {
            return Err(wait(
                WaitReason::RequestMismatch,
                format!(
                    "ResourceClaim {name} asks for {asked} devices of DeviceClass {}, claim {} holds {}",
                    k.spec.device_class_name.as_deref().unwrap_or_default(),
                    claim.metadata.name.as_deref().unwrap_or_default(),
                    claim.spec.count
                ),
            ));
        }
        out.push(Some(m));
    }
    Ok(out)
}
