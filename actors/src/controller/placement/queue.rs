//! Placement's work queue, with the order between its parts as a type.
//!
//! Work is in one of two lanes ([`Lane`]). The tenants' lane holds the
//! gate's and the devices' work (a VMI, an allocation, a backing claim),
//! fair between tenants: one queue per namespace, served in turn, each
//! work item once however often it is asked for. A tenant that floods
//! placement with changes (a thousand VMIs, claims relabelled in a loop)
//! gets one decision in every round, as every other namespace with work
//! does, so another tenant's VMI waits for at most one decision per busy
//! namespace, not for the flood. The evacuation's lane holds E2's one
//! look across the cluster; it goes once the tenants' work queued before
//! it was asked for is done (a restarted VM's new VMI is decided before E2
//! judges whether it waits). Work asked for after it only takes its fair
//! turns meanwhile: a flood that comes later never holds it back longer
//! than the work before it would.

use super::LookAt;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

/// The lanes of placement's work, and which part's work each holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// The gate's (a VMI) and the devices' (an allocation, a backing
    /// claim): fair between namespaces.
    Tenants,
    /// E2's look across the cluster: after the tenants' work queued
    /// before it.
    Evacuation,
}

impl Lane {
    pub fn of(w: &LookAt) -> Lane {
        match w {
            LookAt::Evacuation => Lane::Evacuation,
            _ => Lane::Tenants,
        }
    }
}

/// The namespace a tenant's work belongs to ("" for cluster-wide work,
/// which reaches the queue only as E2's).
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

#[derive(Default)]
pub struct WorkQueue {
    /// The tenants' lane: per namespace, its work and when each was queued.
    by_namespace: HashMap<String, VecDeque<(u64, LookAt)>>,
    /// Namespaces with work, in the order they are served.
    turns: VecDeque<String>,
    /// When each tenant's work still queued was queued.
    tenant_order: BTreeSet<u64>,
    /// The evacuation's lane: when E2's look was asked for, if it is.
    evacuation: Option<u64>,
    queued: HashSet<LookAt>,
    /// The next work's place in the order of asking.
    next: u64,
}

impl WorkQueue {
    /// Queues `w` in its lane, unless it is queued already.
    pub fn push(&mut self, w: LookAt) {
        if !self.queued.insert(w.clone()) {
            return;
        }
        let at = self.next;
        self.next += 1;
        if Lane::of(&w) == Lane::Evacuation {
            self.evacuation = Some(at);
            return;
        }
        let ns = namespace(&w).to_string();
        let q = self.by_namespace.entry(ns.clone()).or_default();
        if q.is_empty() {
            self.turns.push_back(ns);
        }
        q.push_back((at, w));
        self.tenant_order.insert(at);
    }

    /// The next work: E2's look once no tenant's work queued before it is
    /// left, else the oldest of the namespace whose turn it is.
    pub fn pop(&mut self) -> Option<LookAt> {
        if let Some(asked) = self.evacuation
            && self.tenant_order.first().is_none_or(|first| *first > asked)
        {
            self.evacuation = None;
            self.queued.remove(&LookAt::Evacuation);
            return Some(LookAt::Evacuation);
        }
        let ns = self.turns.pop_front()?;
        let q = self.by_namespace.get_mut(&ns)?;
        let (at, w) = q.pop_front()?;
        if q.is_empty() {
            self.by_namespace.remove(&ns);
        } else {
            self.turns.push_back(ns);
        }
        self.tenant_order.remove(&at);
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
        let mut q = WorkQueue::default();
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

    #[test]
    fn e2_the_evacuation_goes_once_the_sets_queued_before_it_are_decided() {
        let mut q = WorkQueue::default();
        q.push(vmi("a/vm0"));
        q.push(vmi("b/vm0"));
        q.push(vmi("a/vm1"));
        q.push(LookAt::Evacuation);
        q.push(vmi("c/vm0"));
        q.push(LookAt::Evacuation);
        assert_eq!(q.len(), 5, "E2's look is queued once");
        assert_eq!(q.pop(), Some(vmi("a/vm0")));
        assert_eq!(q.pop(), Some(vmi("b/vm0")));
        // c's turn comes before a's second: fairness, not E2's lane.
        assert_eq!(q.pop(), Some(vmi("c/vm0")));
        assert_eq!(q.pop(), Some(vmi("a/vm1")));
        assert_eq!(
            q.pop(),
            Some(LookAt::Evacuation),
            "once every set queued before it is decided"
        );
        assert_eq!(q.pop(), None);
        // Nothing before it: at once, ahead of what comes after.
        q.push(LookAt::Evacuation);
        q.push(vmi("a/vm2"));
        assert_eq!(q.pop(), Some(LookAt::Evacuation));
    }

    #[test]
    fn e2_a_flood_of_tenant_work_after_the_evacuation_does_not_delay_it() {
        let mut q = WorkQueue::default();
        q.push(LookAt::Evacuation);
        for i in 0..1000 {
            q.push(vmi(&format!("flood/vm{i}")));
        }
        assert_eq!(q.pop(), Some(LookAt::Evacuation));
        // Asked for again behind the flood's first two.
        assert_eq!(q.pop(), Some(vmi("flood/vm0")));
        q.push(LookAt::Evacuation);
        assert_eq!(q.pop(), Some(vmi("flood/vm1")));
        assert_eq!(q.pop(), Some(vmi("flood/vm2")));
        assert_eq!(Lane::of(&vmi("flood/vm3")), Lane::Tenants);
        // Everything queued before it (vm1..vm999 were) goes first.
        let before = std::iter::from_fn(|| q.pop())
            .take_while(|w| *w != LookAt::Evacuation)
            .count();
        assert_eq!(before, 997);
        assert!(q.is_empty());
    }
}
