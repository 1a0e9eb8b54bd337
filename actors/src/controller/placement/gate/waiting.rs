//! Which waiting sets a burst of changes concerns. A set waits for a
//! reason (G5); a change looks again only at the sets whose reason it can
//! change: a node's change at the sets for which that node matters, a
//! class's at its sets, a quota's at its namespace's. One pass for the
//! whole burst, however many changes it holds.

use crate::controller::placement::LookAt;
use crate::rules::queueing::OrderKey;
use crate::rules::{NodesThatMatter, WaitReason};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Why a VMI's set waits, the classes of its claims, and the nodes whose
/// change can change that.
pub(in crate::controller::placement) struct Waits {
    /// O1: its place in the order a recheck decides sets in.
    pub order: OrderKey,
    pub reason: WaitReason,
    pub classes: Vec<String>,
    pub nodes: NodesThatMatter,
    /// What its unplaced claims ask of one device plugin resource, where
    /// that is all they ask (None otherwise): GPUs freed on a node with
    /// fewer free than this change nothing of its decision.
    pub need: Option<(String, u64)>,
    /// G3: no node had the GPUs it needs free (the index said so, no node
    /// was judged): a change of nodes alone leaves it so while it holds.
    pub roomless: Option<crate::rules::Roomless>,
}

/// Every waiting set, and which of those waiting on nodes each node
/// matters to: a node's change finds its sets without looking at the
/// others (at 100k claims, thousands wait over budget or pinned elsewhere).
#[derive(Default)]
pub(in crate::controller::placement) struct WaitingSets {
    /// By VMI key (ordered: a recheck goes in key order).
    sets: BTreeMap<String, Waits>,
    /// Sets waiting on nodes for which only these nodes matter.
    by_node: HashMap<String, BTreeSet<String>>,
    /// Sets waiting on nodes for which any node matters.
    any_node: BTreeSet<String>,
    /// Sets no node had room for (G3's `Roomless`), by resource, by the
    /// largest node of it they were told of, by the GPUs they need: a
    /// node's change concerns one only where that node now has them free,
    /// or where the largest node moved (its message names it).
    roomless: HashMap<String, BTreeMap<u64, BTreeSet<(u64, String)>>>,
}

/// What the index asks of the world about roomless sets: the GPUs of a
/// resource free on a node, and the most any node has.
pub(in crate::controller::placement) trait Room {
    fn free(&self, node: &str, resource: &str) -> u64;
    fn largest(&self, resource: &str) -> u64;
}

impl Room for crate::world::World {
    fn free(&self, node: &str, resource: &str) -> u64 {
        self.free_of(node, resource)
    }
    fn largest(&self, resource: &str) -> u64 {
        self.largest_allocatable(resource)
    }
}

impl WaitingSets {
    pub fn insert(&mut self, vmi: &str, w: Waits) {
        self.remove(vmi);
        if w.reason.on_nodes()
            && let Some(r) = &w.roomless
        {
            let by_largest = self.roomless.entry(r.resource.clone()).or_default();
            let sets = by_largest.entry(r.largest).or_default();
            sets.insert((r.want, vmi.to_string()));
        } else if w.reason.on_nodes() {
            match &w.nodes {
                NodesThatMatter::All => {
                    self.any_node.insert(vmi.to_string());
                }
                NodesThatMatter::Only(nodes) => {
                    for n in nodes {
                        let sets = self.by_node.entry(n.clone()).or_default();
                        sets.insert(vmi.to_string());
                    }
                }
            }
        }
        self.sets.insert(vmi.to_string(), w);
    }

    pub fn remove(&mut self, vmi: &str) {
        let Some(old) = self.sets.remove(vmi) else {
            return;
        };
        self.any_node.remove(vmi);
        if let Some(r) = &old.roomless
            && let Some(by_largest) = self.roomless.get_mut(&r.resource)
        {
            if let Some(sets) = by_largest.get_mut(&r.largest) {
                sets.remove(&(r.want, vmi.to_string()));
                if sets.is_empty() {
                    by_largest.remove(&r.largest);
                }
            }
            if by_largest.is_empty() {
                self.roomless.remove(&r.resource);
            }
        }
        if let NodesThatMatter::Only(nodes) = &old.nodes {
            for n in nodes {
                if let Some(sets) = self.by_node.get_mut(n) {
                    sets.remove(vmi);
                    if sets.is_empty() {
                        self.by_node.remove(n);
                    }
                }
            }
        }
    }

    /// Why the set of `vmi` waits, if it does.
    pub fn get(&self, vmi: &str) -> Option<&Waits> {
        self.sets.get(vmi)
    }

    /// The sets `asked` concerns, in key order. A burst of node changes
    /// alone (a node's state, a pod's use of it) looks only at the sets
    /// those nodes matter to, and at the roomless sets those nodes now
    /// have room for (or whose largest node moved); anything else goes
    /// over every set.
    pub fn concerned(&self, asked: &RecheckAsked, room: &impl Room) -> Vec<String> {
        if asked.only_nodes() {
            let mut keys: BTreeSet<&String> = self.any_node.iter().collect();
            let touched: Vec<&String> = asked
                .changed_nodes
                .iter()
                .chain(&asked.freed_nodes)
                .collect();
            for n in &touched {
                keys.extend(self.by_node.get(*n).into_iter().flatten());
            }
            for (resource, by_largest) in &self.roomless {
                let largest = room.largest(resource);
                let most = touched
                    .iter()
                    .map(|n| room.free(n, resource))
                    .max()
                    .unwrap_or(0);
                for (told, sets) in by_largest {
                    let moved = *told != largest;
                    let fit = sets.iter().take_while(|(want, _)| moved || *want <= most);
                    keys.extend(fit.map(|(_, k)| k));
                }
            }
            return keys
                .into_iter()
                .filter(|k| self.sets.get(*k).is_some_and(|w| asked.concerns(k, w)))
                .cloned()
                .collect();
        }
        self.sets
            .iter()
            .filter(|(k, w)| asked.concerns(k, w))
            .map(|(k, _)| k.clone())
            .collect()
    }
}

/// The waiting sets a burst of changes asks to look at again.
#[derive(Default)]
pub(in crate::controller::placement) struct RecheckAsked {
    /// Every waiting set (O1: their order moved).
    all: bool,
    /// O2: sets of these classes held back (Queued): their head moved.
    heads: BTreeSet<String>,
    /// O2: every set of these classes: their head, over budget, started
    /// holding the class's budget.
    budget_held: BTreeSet<String>,
    /// Every set waiting on capacity, budget or its class.
    capacity: bool,
    /// Every set waiting on nodes.
    nodes: bool,
    /// Sets waiting on nodes for which one of these matters.
    changed_nodes: BTreeSet<String>,
    /// The same, for nodes whose GPUs only freed (an allocation gone):
    /// nothing else of them changed.
    pub freed_nodes: BTreeSet<String>,
    /// Sets of these classes waiting on nodes.
    budgets: BTreeSet<String>,
    /// Sets of these classes over budget (GPUs of theirs were freed).
    budgets_freed: BTreeSet<String>,
    /// Sets of these namespaces over quota (GPUs of theirs were freed).
    quotas_freed: BTreeSet<String>,
    /// Every set of these namespaces.
    namespaces: BTreeSet<String>,
}

impl RecheckAsked {
    pub fn is_empty(&self) -> bool {
        self.only_nodes() && self.changed_nodes.is_empty() && self.freed_nodes.is_empty()
    }

    /// Only nodes' own changes were asked about.
    fn only_nodes(&self) -> bool {
        !self.all
            && self.heads.is_empty()
            && self.budget_held.is_empty()
            && !self.capacity
            && !self.nodes
            && self.budgets.is_empty()
            && self.budgets_freed.is_empty()
            && self.quotas_freed.is_empty()
            && self.namespaces.is_empty()
    }

    /// Adds what to look at when it asks for a recheck (the others are work of their own).
    pub fn ask(&mut self, look_at: LookAt) {
        match look_at {
            LookAt::Priorities => self.all = true,
            LookAt::Head(class) => {
                self.heads.insert(class);
            }
            LookAt::Capacity => self.capacity = true,
            LookAt::NodesChanged => self.nodes = true,
            LookAt::Node(n) => {
                self.changed_nodes.insert(n);
            }
            LookAt::Freed {
                node,
                class,
                namespace,
            } => {
                self.freed_nodes.insert(node);
                self.budgets_freed.insert(class);
                self.quotas_freed.insert(namespace);
            }
            LookAt::BudgetUsed(class) => {
                self.budgets.insert(class);
            }
            LookAt::Namespace(ns) => {
                self.namespaces.insert(ns);
            }
            LookAt::Vmi(_)
            | LookAt::Allocation(_)
            | LookAt::Claim(_)
            | LookAt::BackingClaim(_)
            | LookAt::Evacuation => {}
        }
    }

    /// O2: the head of `class`, over budget, starts holding its budget.
    pub fn budget_held(&mut self, class: &str) {
        self.budget_held.insert(class.to_string());
    }

    pub fn concerns(&self, vmi: &str, w: &Waits) -> bool {
        self.concerns_besides_freed(vmi, w) || self.freed_concerns(w)
    }

    /// Whether only GPUs freed on nodes that matter to it concern the set
    /// (nothing else of the burst does).
    pub fn only_freed(&self, vmi: &str, w: &Waits) -> bool {
        self.freed_concerns(w) && !self.concerns_besides_freed(vmi, w)
    }

    /// Whether only changes of nodes (their state, their use, GPUs freed
    /// there) concern the set: nothing of its class, budget, quota,
    /// namespace or order moved.
    pub fn only_nodes_for(&self, vmi: &str, w: &Waits) -> bool {
        let nodes = w.reason.on_nodes()
            && (self.nodes
                || w.nodes.touched_by(&self.changed_nodes)
                || w.nodes.touched_by(&self.freed_nodes));
        nodes && !self.concerns_besides_nodes(vmi, w)
    }

    fn freed_concerns(&self, w: &Waits) -> bool {
        w.reason.on_nodes() && w.nodes.touched_by(&self.freed_nodes)
    }

    fn concerns_besides_freed(&self, vmi: &str, w: &Waits) -> bool {
        let on_nodes = w.reason.on_nodes();
        self.concerns_besides_nodes(vmi, w)
            || (on_nodes && (self.nodes || w.nodes.touched_by(&self.changed_nodes)))
    }

    fn concerns_besides_nodes(&self, vmi: &str, w: &Waits) -> bool {
        let on_nodes = w.reason.on_nodes();
        let ns = crate::world::split_key(vmi).0;
        let of_class = |set: &BTreeSet<String>| w.classes.iter().any(|c| set.contains(c));
        self.all
            || self.namespaces.contains(ns)
            || (self.capacity && w.reason.on_capacity())
            || (w.reason == WaitReason::OverBudget && of_class(&self.budgets_freed))
            || (w.reason == WaitReason::OverQuota && self.quotas_freed.contains(ns))
            || (w.reason == WaitReason::Queued && of_class(&self.heads))
            || of_class(&self.budget_held)
            || (on_nodes && of_class(&self.budgets))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pinned_to(node: &str) -> Waits {
        Waits {
            order: OrderKey {
                priority: std::cmp::Reverse(0),
                since: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                vmi: String::new(),
            },
            reason: WaitReason::NoCapacity,
            classes: vec!["h100".into()],
            nodes: NodesThatMatter::Only(BTreeSet::from([node.to_string()])),
            need: None,
            roomless: None,
        }
    }

    /// A world where no node has a GPU free, and the largest has 8.
    struct NoRoom;
    impl Room for NoRoom {
        fn free(&self, _: &str, _: &str) -> u64 {
            0
        }
        fn largest(&self, _: &str) -> u64 {
            8
        }
    }

    /// Free GPUs per node, and the largest node.
    struct Rooms(&'static [(&'static str, u64)], u64);
    impl Room for Rooms {
        fn free(&self, node: &str, _: &str) -> u64 {
            self.0
                .iter()
                .find(|(n, _)| *n == node)
                .map_or(0, |(_, f)| *f)
        }
        fn largest(&self, _: &str) -> u64 {
            self.1
        }
    }

    fn roomless(want: u64, largest: u64) -> Waits {
        Waits {
            nodes: NodesThatMatter::All,
            roomless: Some(crate::rules::Roomless {
                resource: "nvidia.com/H100".into(),
                want,
                largest,
            }),
            ..pinned_to("n1")
        }
    }

    /// Issue 61, item 5: a set no node had room for is looked at again by
    /// a node's change only where that node now has the GPUs it needs
    /// free, or where the largest node moved (its message names it); any
    /// other change of nodes passes it by, with no node judged.
    #[test]
    fn g3_a_roomless_set_is_concerned_only_by_a_node_with_its_gpus_free_or_a_new_largest() {
        let mut sets = WaitingSets::default();
        sets.insert("t/small", roomless(2, 8));
        sets.insert("t/big", roomless(16, 8));
        let node = |n: &str| asked([LookAt::Node(n.into())]);
        assert!(sets.concerned(&node("n1"), &NoRoom).is_empty());
        let two_free = Rooms(&[("n1", 2)], 8);
        assert_eq!(sets.concerned(&node("n1"), &two_free), ["t/small"]);
        assert!(sets.concerned(&node("n2"), &two_free).is_empty());
        // A node of 16 joined the resource: both are told again.
        assert_eq!(
            sets.concerned(&node("n1"), &Rooms(&[], 16)),
            ["t/big", "t/small"]
        );
        // Anything else goes over every set, as a scan does.
        let a = asked([LookAt::Capacity]);
        assert_eq!(sets.concerned(&a, &NoRoom), by_scan(&sets, &a));
        sets.remove("t/small");
        sets.remove("t/big");
        assert!(sets.roomless.is_empty(), "nothing left of them");
    }

    fn asked(looks: impl IntoIterator<Item = LookAt>) -> RecheckAsked {
        let mut a = RecheckAsked::default();
        for p in looks {
            a.ask(p);
        }
        a
    }

    /// Every set `asked` concerns, found by looking at each one: what the
    /// index must find without looking at each.
    fn by_scan(sets: &WaitingSets, asked: &RecheckAsked) -> Vec<String> {
        let scan = sets.sets.iter().filter(|(k, w)| asked.concerns(k, w));
        scan.map(|(k, _)| k.clone()).collect()
    }

    #[test]
    fn g3_a_node_change_finds_through_the_index_the_sets_a_scan_finds() {
        let mut sets = WaitingSets::default();
        sets.insert("t/a", pinned_to("n1"));
        sets.insert("t/b", pinned_to("n2"));
        let anywhere = || Waits {
            nodes: NodesThatMatter::All,
            need: None,
            ..pinned_to("n1")
        };
        sets.insert("t/c", anywhere());
        let over = Waits {
            reason: WaitReason::OverBudget,
            ..anywhere()
        };
        sets.insert("u/d", over);
        // Decided again: b now waits on n3, not n2.
        sets.insert("t/b", pinned_to("n3"));
        for looks in [
            vec![LookAt::Node("n1".into())],
            vec![LookAt::Node("n2".into())],
            vec![LookAt::Node("n3".into()), LookAt::Node("n9".into())],
            vec![LookAt::NodesChanged],
            vec![LookAt::Capacity],
            vec![LookAt::Namespace("u".into())],
        ] {
            let a = asked(looks.clone());
            assert_eq!(sets.concerned(&a, &NoRoom), by_scan(&sets, &a), "{looks:?}");
        }
        let a = asked([LookAt::Node("n2".into())]);
        assert_eq!(sets.concerned(&a, &NoRoom), vec!["t/c".to_string()]);
        sets.remove("t/c");
        sets.remove("t/b");
        assert!(
            sets.concerned(&asked([LookAt::Node("n3".into())]), &NoRoom)
                .is_empty()
        );
        assert_eq!(sets.sets.len(), 2);
        assert!(!sets.by_node.contains_key("n3") && sets.any_node.is_empty());
    }

    #[test]
    fn g3_gpus_freed_alone_concern_a_set_only_as_freed_and_anything_else_in_full() {
        let anywhere = Waits {
            nodes: NodesThatMatter::All,
            ..pinned_to("n1")
        };
        let freed = || LookAt::Freed {
            node: "n2".into(),
            class: "h100".into(),
            namespace: "t".into(),
        };
        let a = asked([freed()]);
        assert!(a.concerns("t/vm", &anywhere) && a.only_freed("t/vm", &anywhere));
        assert!(
            !a.concerns("t/vm", &pinned_to("n1")),
            "n2 does not matter to it"
        );
        // The node itself changed too (its labels, its pods): in full.
        let a = asked([freed(), LookAt::Node("n2".into())]);
        assert!(a.concerns("t/vm", &anywhere) && !a.only_freed("t/vm", &anywhere));
        let a = asked([freed(), LookAt::Capacity]);
        assert!(!a.only_freed("t/vm", &anywhere));
        // Over budget: freed GPUs of its class are its own concern, in full.
        let over = Waits {
            reason: WaitReason::OverBudget,
            ..pinned_to("n1")
        };
        let a = asked([freed()]);
        assert!(a.concerns("t/vm", &over) && !a.only_freed("t/vm", &over));
        let mut sets = WaitingSets::default();
        sets.insert("t/vm", anywhere);
        assert_eq!(sets.concerned(&a, &NoRoom), by_scan(&sets, &a));
    }

    #[test]
    fn g3_a_change_of_another_node_leaves_a_set_pinned_elsewhere_alone() {
        let a = asked([LookAt::Node("n2".into())]);
        assert!(!a.is_empty());
        assert!(!a.concerns("t/vm", &pinned_to("n1")));
        assert!(a.concerns("t/vm", &pinned_to("n2")));
    }

    #[test]
    fn g3_a_node_made_deleted_or_relabelled_concerns_every_set_waiting_on_nodes() {
        let a = asked([LookAt::NodesChanged]);
        assert!(a.concerns("t/vm", &pinned_to("n1")));
        let over_budget = Waits {
            reason: WaitReason::OverBudget,
            ..pinned_to("n1")
        };
        assert!(!a.concerns("t/vm", &over_budget));
    }

    #[test]
    fn g3_a_set_any_node_may_take_looks_again_at_every_node_change() {
        let anywhere = Waits {
            nodes: NodesThatMatter::All,
            need: None,
            ..pinned_to("n1")
        };
        assert!(asked([LookAt::Node("n9".into())]).concerns("t/vm", &anywhere));
        assert!(!asked([]).concerns("t/vm", &anywhere));
    }

    #[test]
    fn g3_gpus_freed_on_a_node_reach_its_sets_and_those_over_its_class_budget_or_quota() {
        let freed = asked([LookAt::Freed {
            node: "n2".into(),
            class: "h100".into(),
            namespace: "t".into(),
        }]);
        assert!(freed.concerns("t/vm", &pinned_to("n2")));
        assert!(!freed.concerns("t/vm", &pinned_to("n1")));
        let over = |reason| Waits {
            reason,
            ..pinned_to("n1")
        };
        assert!(freed.concerns("t/vm", &over(WaitReason::OverBudget)));
        assert!(freed.concerns("t/vm", &over(WaitReason::OverQuota)));
        assert!(!freed.concerns("u/vm", &over(WaitReason::OverQuota)));
        // Freed GPUs make no class exist, nor a request match.
        assert!(!freed.concerns("t/vm", &over(WaitReason::ClassMissing)));
        let other_class = Waits {
            classes: vec!["a100".into()],
            ..over(WaitReason::OverBudget)
        };
        assert!(!freed.concerns("t/vm", &other_class));
    }

    #[test]
    fn g5_budget_and_namespace_looks_reach_their_sets_whatever_their_nodes() {
        assert!(asked([LookAt::BudgetUsed("h100".into())]).concerns("t/vm", &pinned_to("n1")));
        assert!(!asked([LookAt::BudgetUsed("a100".into())]).concerns("t/vm", &pinned_to("n1")));
        let quota = Waits {
            reason: WaitReason::OverQuota,
            ..pinned_to("n1")
        };
        assert!(asked([LookAt::Namespace("t".into())]).concerns("t/vm", &quota));
        assert!(!asked([LookAt::Namespace("u".into())]).concerns("t/vm", &quota));
    }
}
