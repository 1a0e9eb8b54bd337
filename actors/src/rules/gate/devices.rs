//! D3-D5 at the gate: the ResourceClaim that holds each DRA member's
//! devices (the one Kubernetes made for the launcher pod from the VMI's
//! template), which devices of a node a set takes, and the allocation
//! gpu-claims writes for them, as kube-scheduler writes one.

use super::{WaitReason, Waiting, wait};
use crate::api::{GPUClaim, GPUClass, LauncherPod, TEMPLATE_LABEL, Vmi};
use crate::dra::Selector;
use crate::dra::template::{device_class, exact_count, requests};
use crate::rules::request::{TemplateAsk, template_asks};
use crate::world::devices::DeviceId;
pub use crate::world::devices::allocated_devices;
use crate::world::{World, key};
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult, DeviceRequest,
    DeviceRequestAllocationResult, ResourceClaim,
};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

/// A member of a DRA class: the ResourceClaim that holds its devices.
#[derive(Clone, Debug)]
pub struct DraMember {
    pub class: Arc<GPUClass>,
    /// `ns/name` of the ResourceClaim.
    pub claim_key: String,
    pub resource_claim: Arc<ResourceClaim>,
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

/// Whether a claim is a template claim (made by G2 for its VMI).
fn is_template_claim(c: &GPUClaim) -> bool {
    c.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(TEMPLATE_LABEL))
        .is_some_and(|v| v == "true")
}

/// D5: a set holding claims of DRA classes must be what the VMI's spec
/// asks of them: per DRA class, the template claim's GPUs equal what its
/// template asks for; a claim of a DRA class the spec does not ask for
/// cannot reach the VM (KubeVirt attaches only what `gpus[].claimName`
/// names). The message says what to add.
pub(super) fn dra_mismatch(
    v: &Vmi,
    w: &World,
    claims: &[Arc<GPUClaim>],
    classes: &[Arc<GPUClass>],
) -> Option<String> {
    let asks = template_asks(v, w).unwrap_or_default();
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
        if !is_template_claim(c) {
            say(format!(
                "claim {cname} is of DRA class {class}, whose GPUs reach a VM only through spec.resourceClaims: ask for them with a ResourceClaimTemplate of DeviceClass {dc} (resourceClaims: [{{name: gpu, resourceClaimTemplateName: <template>}}], gpus: [{{name: gpu, claimName: gpu}}]); backing claims for named claims come with issue 36"
            ));
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
    for k in classes {
        if k.spec.device_class_name.is_none() {
            out.push(None);
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
        };
        let ask = DeviceAsk::of(&m).map_err(|e| wait(WaitReason::DeviceClaimPending, e))?;
        let asked = ask
            .requests
            .iter()
            .fold(0u64, |n, r| n.saturating_add(u64::from(r.count)));
        let claim = &claims[out.len()];
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

/// One request of a ResourceClaim as placement fills it.
pub struct RequestAsk {
    pub name: String,
    pub count: u32,
    pub selectors: Vec<Selector>,
}

/// D3: what one DRA member asks of a node's devices.
pub struct DeviceAsk {
    pub class: String,
    /// `ns/name` of its ResourceClaim, and of its record.
    pub claim: String,
    pub record: String,
    /// The devices it holds already (its record's, its ResourceClaim's):
    /// open to it again where they still serve and are untainted.
    pub own: Vec<DeviceId>,
    /// Of them, its record's (ours, maybe not seen yet).
    pub recorded: Vec<DeviceId>,
    pub match_attribute: Option<String>,
    /// The requests of its ResourceClaim that name the class's
    /// DeviceClass, in order.
    pub requests: Vec<RequestAsk>,
    /// The ResourceClaim's own `constraints` (from its template): devices
    /// of the requests each names that must share, or must not share, an
    /// attribute's value.
    pub constraints: Vec<Constraint>,
}

/// One of a ResourceClaim's `spec.devices.constraints`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Constraint {
    /// The requests it binds (None: every request of the claim).
    pub requests: Option<Vec<String>>,
    /// The fully qualified attribute.
    pub attribute: String,
    /// `matchAttribute` (one value for all) or `distinctAttribute` (each
    /// device its own).
    pub same: bool,
}

impl Constraint {
    fn binds(&self, request: &str) -> bool {
        self.requests.as_ref().is_none_or(|r| {
            r.iter()
                .any(|n| n == request || n.split_once('/').is_some_and(|(main, _)| main == request))
        })
    }
}

impl DeviceAsk {
    /// The ask of a DRA member; a request selector that does not compile
    /// (the API server compiles them on write: not expected) says why.
    pub(super) fn of(m: &DraMember) -> Result<Self, String> {
        let mut asks = Vec::new();
        for r in m.class_requests() {
            let count = exact_count(r).unwrap_or(0);
            let mut selectors = Vec::new();
            for s in r.exactly.iter().flat_map(|x| x.selectors.iter().flatten()) {
                let Some(cel) = &s.cel else { continue };
                selectors.push(Selector::compile(&cel.expression).map_err(|e| {
                    format!(
                        "ResourceClaim {}: request {}: selector does not compile: {e}",
                        m.claim_key, r.name
                    )
                })?);
            }
            asks.push(RequestAsk {
                name: r.name.clone(),
                count,
                selectors,
            });
        }
        let constraints = m
            .resource_claim
            .spec
            .as_ref()
            .and_then(|s| s.devices.as_ref())
            .and_then(|d| d.constraints.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let (attribute, same) = match (&c.match_attribute, &c.distinct_attribute) {
                    (Some(a), _) => (a.clone(), true),
                    (None, Some(a)) => (a.clone(), false),
                    (None, None) => return None,
                };
                Some(Constraint {
                    requests: c.requests.clone(),
                    attribute,
                    same,
                })
            })
            .collect();
        let own = m
            .resource_claim
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .map(allocated_devices)
            .unwrap_or_default();
        Ok(Self {
            claim: m.claim_key.clone(),
            record: String::new(),
            own,
            recorded: Vec::new(),
            class: m.class.metadata.name.clone().unwrap_or_default(),
            match_attribute: m.class.spec.match_attribute.clone(),
            requests: asks,
            constraints,
        })
    }
}

/// The devices chosen for one member, with the request each fills.
pub type Chosen = Vec<(String, DeviceId)>;

/// D3: devices for every ask on `node`, from the free ones (D2) that no
/// write of ours the cache does not show yet names (`held`), by pool then
/// device name; with `matchAttribute`, the first group of devices sharing
/// its value that has room. None when the node has no room; else the
/// choice and the devices of the asks' classes left free after it.
pub fn choose(
    w: &World,
    node: &str,
    asks: &[DeviceAsk],
    held: &HashSet<DeviceId>,
) -> Option<(Vec<Chosen>, u64)> {
    let mut taken: HashSet<DeviceId> = HashSet::new();
    let mut out = Vec::with_capacity(asks.len());
    for a in asks {
        let free = candidates(w, a, node, held, &taken);
        let chosen = groups(w, &free, a.match_attribute.as_deref())
            .into_iter()
            .find_map(|g| fill(w, node, &g, a, &taken))?;
        taken.extend(chosen.iter().map(|(_, d)| d.clone()));
        out.push(chosen);
    }
    let classes: BTreeSet<&str> = asks.iter().map(|a| a.class.as_str()).collect();
    let left = classes
        .into_iter()
        .map(|c| {
            w.free_devices(c, node)
                .iter()
                .filter(|d| !held.contains(*d) && !taken.contains(*d))
                .count() as u64
        })
        .fold(0u64, u64::saturating_add);
    Some((out, left))
}

/// The devices `a` may take on `node`: its own that are still open to
/// it first (a claim placed again keeps what it holds, and a ResourceClaim
/// allocated already keeps its allocation), then the free ones (D2) by
/// pool and name; less those our unseen writes hold for others and those
/// taken by earlier asks of the set.
fn candidates(
    w: &World,
    a: &DeviceAsk,
    node: &str,
    held: &HashSet<DeviceId>,
    taken: &HashSet<DeviceId>,
) -> Vec<DeviceId> {
    let mut out: Vec<DeviceId> = Vec::new();
    for d in &a.own {
        // One our unseen writes gave another claim is not open to it.
        let ours = !held.contains(d) || a.recorded.contains(d);
        if ours && !out.contains(d) && w.device_open_to(d, &a.class, node, &a.record, &a.claim) {
            out.push(d.clone());
        }
    }
    for d in w.free_devices(&a.class, node) {
        if !out.contains(&d) && !held.contains(&d) {
            out.push(d);
        }
    }
    out.retain(|d| !taken.contains(d));
    out
}

/// The free devices in groups: one group, or with `matchAttribute` one
/// per value of it, in the order their first device comes. A device
/// without the attribute is in no group (the scheduler's rule too).
fn groups(w: &World, free: &[DeviceId], attribute: Option<&str>) -> Vec<Vec<DeviceId>> {
    let Some(attribute) = attribute else {
        return vec![free.to_vec()];
    };
    let mut order: Vec<String> = Vec::new();
    let mut by: BTreeMap<String, Vec<DeviceId>> = BTreeMap::new();
    for d in free {
        let Some(value) = w.device_attribute(d, attribute) else {
            continue;
        };
        if !by.contains_key(&value) {
            order.push(value.clone());
        }
        by.entry(value).or_default().push(d.clone());
    }
    order.into_iter().filter_map(|v| by.remove(&v)).collect()
}

/// How many more devices a search for one ask may try past its first pass:
/// enough for the sets a node serves (8 GPUs, a few requests), bounded so
/// that an ask no node can fill costs a node little (kube-scheduler's
/// allocator bounds its search by time; a count is the same on every run).
const SEARCH_STEPS: u32 = 2048;

/// Each request filled from `group` in order, each device once, by the
/// first devices its selectors take that fit beside those taken before
/// (shared counters, KEP-4815: each device is free alone, not every two
/// together). Where the first pass fails, a bounded search tries other
/// devices for the earlier picks (a whole GPU taken first would leave no
/// room for its halves; a request's pick another request needed).
fn fill(
    w: &World,
    node: &str,
    group: &[DeviceId],
    a: &DeviceAsk,
    taken: &HashSet<DeviceId>,
) -> Option<Chosen> {
    let mut search = Search {
        w,
        node,
        group,
        a,
        // The set's earlier asks' devices consume the same counters.
        used: taken.iter().cloned().collect(),
        chosen: Vec::new(),
        // The first pass (a scan of the group per request) and then
        // SEARCH_STEPS more.
        steps: u32::try_from(group.len().saturating_mul(a.requests.len()))
            .unwrap_or(u32::MAX)
            .saturating_add(SEARCH_STEPS),
    };
    search.from(0, 0, 0).then_some(search.chosen)
}

/// A depth-first search for one ask's devices in one group.
struct Search<'a> {
    w: &'a World,
    node: &'a str,
    group: &'a [DeviceId],
    a: &'a DeviceAsk,
    used: Vec<DeviceId>,
    chosen: Chosen,
    steps: u32,
}

impl Search<'_> {
    /// Whether `d`, for request `request`, keeps the claim's constraints
    /// with the devices chosen so far: it has each binding attribute, of
    /// the value the others have (`matchAttribute`), or of a value none
    /// has (`distinctAttribute`), as the scheduler's allocator judges.
    fn constrained_fit(&self, request: &str, d: &DeviceId) -> bool {
        self.a
            .constraints
            .iter()
            .filter(|c| c.binds(request))
            .all(|c| {
                let Some(value) = self.w.device_attribute(d, &c.attribute) else {
                    return false;
                };
                let mut others = self
                    .chosen
                    .iter()
                    .filter(|(r, _)| c.binds(r))
                    .filter_map(|(_, o)| self.w.device_attribute(o, &c.attribute));
                if c.same {
                    others.all(|o| o == value)
                } else {
                    others.all(|o| o != value)
                }
            })
    }

    /// Fills request `req`, which has `got` devices, from position
    /// `start` of the group on (earlier positions were tried for this
    /// pick), then the requests after it.
    fn from(&mut self, req: usize, start: usize, got: u32) -> bool {
        let Some(r) = self.a.requests.get(req) else {
            return true;
        };
        if got == r.count {
            return self.from(req + 1, 0, 0);
        }
        for (i, d) in self.group.iter().enumerate().skip(start) {
            if self.steps == 0 {
                return false;
            }
            self.steps -= 1;
            if self.used.contains(d) || !self.w.device_selected(d, &r.selectors) {
                continue;
            }
            self.used.push(d.clone());
            if self.w.devices_fit_together(self.node, &self.used)
                && self.constrained_fit(&r.name, d)
            {
                self.chosen.push((r.name.clone(), d.clone()));
                if self.from(req, i + 1, got + 1) {
                    return true;
                }
                self.chosen.pop();
            }
            self.used.pop();
        }
        false
    }
}

/// D4: the allocation that names `devices` (in request order: each
/// request takes as many as it counts) on `node`, as kube-scheduler
/// writes one: the results, the DeviceClass's config and the GPUClass's
/// (`FromClass`, for the requests of its DeviceClass), the claim's own
/// (`FromClaim`), and a node selector for the node by `metadata.name`.
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
    let own_config = m.class.spec.config.iter().map(|c| {
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
