//! D3: which devices of a node a set takes: each request's candidates
//! (its class's serving devices, free, its own selectors), a `matchAttribute`
//! group with room, and a bounded depth-first search where the devices chosen
//! together must fit their pools' shared counters and the claim's own
//! constraints.

use super::*;
use crate::dra::template::exact_count;
use crate::world::World;
use crate::world::devices::DeviceId;
use crate::world::devices::RememberedSelector;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// One request of a ResourceClaim as placement fills it.
pub struct RequestAsk {
    pub name: String,
    pub count: u32,
    pub selectors: Vec<Arc<RememberedSelector>>,
}

/// D3: what one DRA member asks of a node's devices.
pub struct DeviceAsk {
    pub class: String,
    /// `ns/name` of its ResourceClaim, and of its record.
    pub claim: String,
    pub allocation: String,
    /// The devices it holds already (its record's, its ResourceClaim's):
    /// open to it again where they still serve and are untainted.
    pub own: Vec<DeviceId>,
    /// Of them, its record's (ours, maybe not seen yet).
    pub allocated: Vec<DeviceId>,
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
    pub(in crate::rules::gate) fn of(w: &World, m: &DraMember) -> Result<Self, String> {
        let mut asks = Vec::new();
        for r in m.class_requests() {
            let count = exact_count(r).unwrap_or(0);
            let mut selectors = Vec::new();
            for s in r.exactly.iter().flat_map(|x| x.selectors.iter().flatten()) {
                let Some(cel) = &s.cel else { continue };
                selectors.push(w.request_selector(&cel.expression).map_err(|e| {
                    format!(
                        "ResourceClaim {}: request {}: selector cannot be used: {e}",
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
            allocation: String::new(),
            own,
            allocated: Vec::new(),
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
pub(super) fn candidates(
    w: &World,
    a: &DeviceAsk,
    node: &str,
    held: &HashSet<DeviceId>,
    taken: &HashSet<DeviceId>,
) -> Vec<DeviceId> {
    let mut out: Vec<DeviceId> = Vec::new();
    for d in &a.own {
        // One our unseen writes gave another claim is not open to it.
        let ours = !held.contains(d) || a.allocated.contains(d);
        if ours && !out.contains(d) && w.device_open_to(d, &a.class, node, &a.allocation, &a.claim)
        {
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
pub(super) fn groups(w: &World, free: &[DeviceId], attribute: Option<&str>) -> Vec<Vec<DeviceId>> {
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
pub(super) const SEARCH_STEPS: u32 = 2048;

/// Each request filled from `group` in order, each device once, by the
/// first devices its selectors take that fit beside those taken before
/// (shared counters, KEP-4815: each device is free alone, not every two
/// together). Where the first pass fails, a bounded search tries other
/// devices for the earlier picks (a whole GPU taken first would leave no
/// room for its halves; a request's pick another request needed).
pub(super) fn fill(
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
pub(super) struct Search<'a> {
    pub(super) w: &'a World,
    pub(super) node: &'a str,
    pub(super) group: &'a [DeviceId],
    pub(super) a: &'a DeviceAsk,
    pub(super) used: Vec<DeviceId>,
    pub(super) chosen: Chosen,
    pub(super) steps: u32,
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
