//! Which claims each VMI's set names, and the reverse: a claim's change
//! reaches the sets that name it, O(claims it names) to keep.

use crate::api::Vmi;
use crate::rules::requested_claims;
use crate::world::{World, key, split_key};
use std::collections::{BTreeSet, HashMap, HashSet};

#[derive(Default)]
pub(super) struct ClaimIndex {
    /// Which VMIs' sets name a claim.
    by_claim: HashMap<String, BTreeSet<String>>,
    /// The reverse: the claims each indexed VMI's set names.
    claims_of: HashMap<String, Vec<String>>,
}

impl ClaimIndex {
    pub fn sets_naming(&self, claim: &str) -> impl Iterator<Item = &String> {
        self.by_claim.get(claim).into_iter().flatten()
    }

    pub fn claims_of(&self, vmi: &str) -> &[String] {
        self.claims_of.get(vmi).map_or(&[][..], Vec::as_slice)
    }

    /// Remembers which claims the VMI's set names; O(claims it names).
    pub fn index(&mut self, k: &str, v: &Vmi, w: &World) {
        let (ns, _) = split_key(k);
        // D5: every name its spec gives a ResourceClaim too, whether or
        // not a GPUClaim of that name is seen yet: the claim's coming
        // must reach this VMI.
        let mut names: Vec<String> = requested_claims(v, w).iter().map(|n| key(ns, n)).collect();
        // A set, not a scan per name: a tenant's spec may list many.
        let mut seen: HashSet<String> = names.iter().cloned().collect();
        for n in v
            .referenced_resource_claims()
            .into_iter()
            .filter_map(|e| e.resource_claim_name.as_deref())
        {
            let k = key(ns, n);
            if seen.insert(k.clone()) {
                names.push(k);
            }
        }
        if self.claims_of.get(k) == Some(&names) {
            return;
        }
        self.unindex(k);
        for c in &names {
            self.by_claim
                .entry(c.clone())
                .or_default()
                .insert(k.to_string());
        }
        self.claims_of.insert(k.to_string(), names);
    }

    pub fn unindex(&mut self, k: &str) {
        for c in self.claims_of.remove(k).unwrap_or_default() {
            if let Some(set) = self.by_claim.get_mut(&c) {
                set.remove(k);
                if set.is_empty() {
                    self.by_claim.remove(&c);
                }
            }
        }
    }
}
