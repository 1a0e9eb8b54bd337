//! kube-scheduler's NodeResourcesFit filter (`noderesources/fit.go`,
//! `fitsRequest`): whether a node has room for a pod's request next to the
//! pods already bound to it. G3 runs it for each launcher pod of a set
//! before pinning it, so a pinned pod is never one the scheduler refuses
//! for room; the stand-in's scheduler runs it too.

use crate::api::Resources;
use crate::api::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS};
use std::collections::BTreeMap;

/// One resource a node lacks for a pod: upstream's `InsufficientResource`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Insufficient {
    pub resource: String,
    pub requested: u64,
    pub used: u64,
    pub capacity: u64,
}

impl Insufficient {
    /// The scheduler's words: `Too many pods`, `Insufficient memory`.
    pub fn reason(&self) -> String {
        if self.resource == PODS {
            "Too many pods".into()
        } else {
            format!("Insufficient {}", self.resource)
        }
    }
}

/// What a node offers pods: its allocatable (cpu in millicores), what the
/// pods bound to it request, and how many they are.
#[derive(Clone, Copy)]
pub struct NodeRoom<'a> {
    pub allocatable: &'a BTreeMap<String, u64>,
    pub requested: &'a dyn Fn(&str) -> u64,
    pub pods: u64,
}

/// `fitsRequest`: every resource the node lacks for `request`, in
/// upstream's order (pods, cpu, memory, ephemeral-storage, then the rest
/// by name). `skip` leaves resources out, as `ignoredResources` does
/// upstream: G3 counts its GPUs against allocations instead.
///
/// One difference, on purpose: upstream refuses every pod on a node that
/// advertises no `pods` (its allowed number is then 0); a kubelet always
/// advertises it, and a hand-made node without it takes any number.
pub fn fits_request(
    request: &Resources,
    node: NodeRoom<'_>,
    skip: &dyn Fn(&str) -> bool,
) -> Vec<Insufficient> {
    let mut out = Vec::new();
    let free = |r: &str| {
        let cap = node.allocatable.get(r).copied().unwrap_or(0);
        (cap, (node.requested)(r))
    };
    if let Some(&allowed) = node.allocatable.get(PODS)
        && node.pods.saturating_add(1) > allowed
    {
        out.push(Insufficient {
            resource: PODS.into(),
            requested: 1,
            used: node.pods,
            capacity: allowed,
        });
    }
    if request.is_empty() {
        return out;
    }
    let mut check = |r: &str, want: u64| {
        let (capacity, used) = free(r);
        if want > 0 && !skip(r) && want > capacity.saturating_sub(used) {
            out.push(Insufficient {
                resource: r.to_string(),
                requested: want,
                used,
                capacity,
            });
        }
    };
    for r in [CPU, MEMORY, EPHEMERAL_STORAGE] {
        check(r, request.get(r));
    }
    for (r, want) in request.iter() {
        if ![CPU, MEMORY, EPHEMERAL_STORAGE, PODS].contains(&r) {
            check(r, want);
        }
    }
    out
}

#[cfg(test)]
mod tests;
