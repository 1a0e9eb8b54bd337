//! Placement's writes under way, many at once (kube-scheduler's assume and
//! asynchronous bind): a write is about one VMI's set and its claims, and
//! while it is under way no other write about that VMI or those claims
//! starts; work for them waits here (parked) until it lands. What a set's
//! placement will hold (its allocations, its pods' requests on the node)
//! is assumed before the write starts, so the sets decided meanwhile count
//! it, and let go of when the write ends if it did not land. How many
//! may be under way is `placement.writesInFlight` in the config.

use super::write::{Write, allocation_key};
use super::{LookAt, Placement};
use crate::api::PodUse;
use crate::rules::Assumed;
use crate::world::key;
use std::collections::HashSet;

#[derive(Default)]
pub struct UnderWay {
    vmis: HashSet<String>,
    claims: HashSet<String>,
    /// Work that came for a VMI or an allocation under way (each once).
    parked: Vec<LookAt>,
}

/// What one write is about, and what it assumed.
pub struct WriteUnderWay {
    vmi: Option<String>,
    claims: Vec<String>,
    assumed: Assumed,
}

impl UnderWay {
    /// Whether a write about this VMI, or about one of the claims its set
    /// names, is under way.
    pub fn blocks_vmi(&self, k: &str, claims: &[String]) -> bool {
        self.vmis.contains(k) || claims.iter().any(|c| self.claims.contains(c))
    }

    pub fn blocks_claim(&self, k: &str) -> bool {
        self.claims.contains(k)
    }

    /// Looked at again once the writes in its way land.
    pub fn park(&mut self, work: LookAt) {
        if !self.parked.contains(&work) {
            self.parked.push(work);
        }
    }
}

impl Placement {
    /// A write starts: its VMI and claims are taken, and a placement's
    /// allocations and pins are assumed.
    pub(super) fn assume_write(&mut self, work: &LookAt, write: &Write) -> WriteUnderWay {
        let vmi = match work {
            LookAt::Vmi(k) => Some(k.clone()),
            _ => None,
        };
        let claims = write.claim_keys();
        let under_way = &mut self.under_way;
        under_way.vmis.extend(vmi.clone());
        under_way.claims.extend(claims.iter().cloned());
        let mut assumed = Assumed::default();
        if let (Write::Place(plan), Some(v)) = (write, &vmi) {
            let allocations: Vec<_> = plan
                .allocations
                .iter()
                .map(|a| (allocation_key(a.allocation()), a.allocation().spec.clone()))
                .collect();
            let launchers = self.env.world.launchers(v);
            let pins: Vec<_> = plan
                .pods
                .iter()
                .filter_map(|pk| {
                    let p = launchers
                        .iter()
                        .find(|p| key(&p.namespace, &p.name) == *pk)?;
                    let used = PodUse {
                        node: plan.node.as_str().into(),
                        requests: p.requests.clone(),
                    };
                    Some((pk.clone(), used))
                })
                .collect();
            assumed = self.own.allocations.assume(allocations, pins);
        }
        WriteUnderWay {
            vmi,
            claims,
            assumed,
        }
    }

    /// A write ended (what it wrote is remembered by now): what it assumed
    /// and did not write is let go, and the sets it held back look again
    /// (no watch event will tell them: nothing was written); its VMI and
    /// claims are free, and the work parked behind it is looked at again.
    pub(super) fn write_ended(&mut self, f: WriteUnderWay, ctx: &mut actix::Context<Self>) {
        let released = self.own.allocations.settle_assumed(f.assumed);
        for (k, spec) in released.allocations {
            let namespace = crate::world::split_key(&k).0.to_string();
            self.ask_recheck(
                LookAt::Freed {
                    node: spec.node_name,
                    class: spec.class_name,
                    namespace,
                },
                ctx,
            );
        }
        for node in released.nodes {
            self.ask_recheck(LookAt::Node(node), ctx);
        }
        if let Some(v) = &f.vmi {
            self.under_way.vmis.remove(v);
        }
        for c in &f.claims {
            self.under_way.claims.remove(c);
        }
        let parked = std::mem::take(&mut self.under_way.parked);
        self.push(parked);
    }
}
