//! Placement's work queue, fair between tenants: one queue per namespace,
//! served in turn, each work item once however often it is asked for. A
//! tenant that floods placement with changes (a thousand VMIs, claims
//! relabelled in a loop) gets one decision in every round, as every other
//! namespace with work does, so another tenant's VMI waits for at most one
//! decision per busy namespace, not for the flood.

use super::LookAt;
use std::collections::{HashMap, HashSet, VecDeque};

#[derive(Default)]
pub struct FairQueue {
    by_namespace: HashMap<String, VecDeque<LookAt>>,
    /// Namespaces with work, in the order they are served.
    turns: VecDeque<String>,
    queued: HashSet<LookAt>,
}

/// The namespace a work item belongs to ("" for cluster-wide work).
fn namespace(w: &LookAt) -> &str {
    match w {
        LookAt::Vmi(k) | LookAt::Allocation(k) | LookAt::Claim(k) | LookAt::BackingClaim(k) => {
            crate::world::split_key(k).0
        }
        LookAt::Capacity
        | LookAt::Freed { .. }
        | LookAt::NodesChanged
        | LookAt::Node(_)
        | LookAt::BudgetUsed(_)
        | LookAt::Namespace(_)
        | LookAt::Evacuation => "",
    }
}

impl FairQueue {
    /// Queues `w` behind its namespace's work, unless it is queued already.
    pub fn push(&mut self, w: LookAt) {
        if !self.queued.insert(w.clone()) {
            return;
        }
        let ns = namespace(&w).to_string();
        let q = self.by_namespace.entry(ns.clone()).or_default();
        if q.is_empty() {
            self.turns.push_back(ns);
        }
        q.push_back(w);
    }

    /// The next work: the oldest of the namespace whose turn it is.
    pub fn pop(&mut self) -> Option<LookAt> {
        let ns = self.turns.pop_front()?;
        let q = self.by_namespace.get_mut(&ns)?;
        let w = q.pop_front()?;
        if q.is_empty() {
            self.by_namespace.remove(&ns);
        } else {
            self.turns.push_back(ns);
        }
        self.queued.remove(&w);
        Some(w)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.queued.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vmi(k: &str) -> LookAt {
        LookAt::Vmi(k.into())
    }

    #[test]
    fn namespaces_take_turns_and_work_is_queued_once() {
        let mut q = FairQueue::default();
        for i in 0..1000 {
            q.push(vmi(&format!("flood/vm{i}")));
        }
        q.push(vmi("quiet/vm"));
        q.push(vmi("quiet/vm"));
        assert_eq!(q.len(), 1001);
        assert_eq!(q.pop(), Some(vmi("flood/vm0")));
        assert_eq!(
            q.pop(),
            Some(vmi("quiet/vm")),
            "the quiet tenant's turn comes second, not 1001st"
        );
        assert_eq!(q.pop(), Some(vmi("flood/vm1")));
        // Asked for again once taken: queued again.
        q.push(vmi("quiet/vm"));
        assert_eq!(q.pop(), Some(vmi("flood/vm2")));
        assert_eq!(q.pop(), Some(vmi("quiet/vm")));
        let rest = std::iter::from_fn(|| q.pop()).count();
        assert_eq!(rest, 997);
        assert!(q.is_empty());
    }
}
