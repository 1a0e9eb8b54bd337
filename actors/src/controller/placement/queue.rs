//! Placement's work queue, with the order between its parts as a type.
//!
//! Work is in one of three lanes ([`Lane`]). The waiting lane holds the
//! sets a recheck looks at again because GPUs freed (a release, a node
//! back, a budget raised): they compete for those GPUs, so they are
//! decided in O1's order, first of all (the one earlier in the order is
//! placed first). The tenants' lane holds the
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
use crate::rules::queueing::OrderKey;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

/// The lanes of placement's work, and which part's work each holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Waiting sets looked at again, in O1's order: before the others.
    Waiting,
    /// The gate's (a VMI) and the devices' (an allocation, a backing
    /// claim): fair between namespaces.
    Tenants,
    /// E2's look across the cluster: after the tenants' work queued
    /// before it.
    Evacuation,
}

impl Lane {
    /// The order a pop serves the lanes in: E2's look first, but only once
    /// the work queued before it is done (else it is passed over); then
    /// the waiting sets; then the tenants.
    pub const ORDER: [Lane; 3] = [Lane::Evacuation, Lane::Waiting, Lane::Tenants];

    /// The lane `push` puts `w` in (the waiting lane is `push_waiting`'s).
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
        | LookAt::Priorities
        | LookAt::Head(_)
        | LookAt::Evacuation => "",
    }
}

#[derive(Default)]
pub struct WorkQueue {
    /// The waiting lane: sets by their place in O1's order, and when each
    /// was queued.
    waiting: std::collections::BTreeMap<OrderKey, (u64, String)>,
    /// The tenants' lane: per namespace, its work and when each was queued.
    by_namespace: HashMap<String, VecDeque<(u64, LookAt)>>,
    /// Namespaces with work, in the order they are served.
    turns: VecDeque<String>,
    /// When each set's or tenant's work still queued was queued.
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

    /// Queues the waiting set of `vmi` (at `order`) in the waiting lane,
    /// unless it is queued already (in any lane: it keeps its place).
    /// Whether it was queued now.
    pub fn push_waiting(&mut self, order: OrderKey, vmi: String) -> bool {
        if !self.queued.insert(LookAt::Vmi(vmi.clone())) {
            return false;
        }
        let at = self.next;
        self.next += 1;
        self.tenant_order.insert(at);
        self.waiting.insert(order, (at, vmi));
        true
    }

    /// The next work, from the first lane of `Lane::ORDER` that has one.
    pub fn pop(&mut self) -> Option<LookAt> {
        Lane::ORDER.into_iter().find_map(|lane| self.pop_from(lane))
    }

    fn pop_from(&mut self, lane: Lane) -> Option<LookAt> {
        match lane {
            // Once no work queued before it is left.
            Lane::Evacuation => {
                let asked = self.evacuation?;
                if self
                    .tenant_order
                    .first()
                    .is_some_and(|first| *first < asked)
                {
                    return None;
                }
                self.evacuation = None;
                self.queued.remove(&LookAt::Evacuation);
                Some(LookAt::Evacuation)
            }
            // The first in O1's order.
            Lane::Waiting => {
                let (_, (at, vmi)) = self.waiting.pop_first()?;
                self.tenant_order.remove(&at);
                let w = LookAt::Vmi(vmi);
                self.queued.remove(&w);
                Some(w)
            }
            // The oldest of the namespace whose turn it is.
            Lane::Tenants => {
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
        }
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

    fn key(vmi: &str, priority: i32, since: i64) -> OrderKey {
        OrderKey {
            priority: std::cmp::Reverse(priority),
            since: k8s_openapi::jiff::Timestamp::from_second(since).unwrap(),
            vmi: vmi.into(),
        }
    }

    #[test]
    fn o1_sets_looked_at_again_go_first_and_in_their_order() {
        let mut q = WorkQueue::default();
        q.push(vmi("a/new"));
        q.push_waiting(key("b/old", 0, 10), "b/old".into());
        q.push_waiting(key("c/urgent", 5, 50), "c/urgent".into());
        q.push_waiting(key("a/older", 0, 5), "a/older".into());
        // Queued already in the tenants' lane: it keeps its place there.
        q.push_waiting(key("a/new", 9, 0), "a/new".into());
        assert_eq!(q.pop(), Some(vmi("c/urgent")), "priority first");
        assert_eq!(q.pop(), Some(vmi("a/older")), "then the longer wait");
        assert_eq!(q.pop(), Some(vmi("b/old")));
        assert_eq!(q.pop(), Some(vmi("a/new")));
        assert!(q.is_empty());
        // E2's look still waits for the sets queued before it.
        q.push_waiting(key("b/old", 0, 10), "b/old".into());
        q.push(LookAt::Evacuation);
        assert_eq!(q.pop(), Some(vmi("b/old")));
        assert_eq!(q.pop(), Some(LookAt::Evacuation));
        assert_eq!(Lane::of(&LookAt::Evacuation), Lane::Evacuation);
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
