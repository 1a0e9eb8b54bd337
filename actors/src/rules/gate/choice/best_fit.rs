//! G3's best fit: the node with the least room left after the set, found
//! among the nodes its pods name where they name some, through the
//! world's indexes of free GPUs and devices where they answer, by a scan
//! of every node otherwise.

use super::super::{Roomless, WaitReason, Waiting};
use super::*;
use crate::rules::scheduling::candidates::candidate_nodes;
use std::collections::{BTreeMap, BTreeSet};

impl Ask<'_> {
    /// Among the nodes that pass every filter, the one left with the fewest
    /// free GPUs after placement, ties by name. Among the nodes the pods
    /// name where they name some (a VM pinned to its host); else through
    /// the index of nodes by free GPUs where it can answer; a pass over
    /// every node where it cannot, or no node fits (the pass says why).
    /// Test builds check every answer of the names and of the index
    /// against the pass.
    pub(super) fn best_fit(&self) -> Result<String, Waiting> {
        if let Some(r) = self.roomless() {
            debug_assert!(
                self.best_fit_scanned()
                    .is_err_and(|w| w.reason == WaitReason::NoCapacity),
                "roomless, where a pass over every node places the set"
            );
            return Err(Waiting {
                reason: WaitReason::NoCapacity,
                message: r.message(),
                nodes: NodesThatMatter::All,
                roomless: Some(r),
            });
        }
        if let Some(candidates) = self.candidates() {
            let among = self.best_fit_among(&candidates);
            if cfg!(debug_assertions) {
                let scanned = self.best_fit_scanned();
                let said = |r: &Result<String, Waiting>| match r {
                    Ok(n) => Ok(n.clone()),
                    Err(w) => Err((w.reason, w.message.clone(), w.nodes.clone())),
                };
                debug_assert_eq!(
                    said(&among),
                    said(&scanned),
                    "the candidate nodes decided otherwise than a pass over every node"
                );
            }
            return among;
        }
        let indexed = self.best_fit_indexed();
        if let Some(Some(node)) = &indexed
            && !cfg!(debug_assertions)
        {
            return Ok(node.clone());
        }
        let scanned = self.best_fit_scanned();
        if let Some(found) = indexed {
            debug_assert_eq!(
                found.as_deref(),
                scanned.as_deref().ok(),
                "the index of free GPUs chose otherwise than a pass over every node"
            );
        }
        scanned
    }

    /// A set of one device plugin resource for which no node has the GPUs
    /// free, as the index says: nothing to judge node by node. Not where
    /// the set's own records hold GPUs somewhere (a Lost claim's node
    /// takes no more room for it), nor where our writes under way hold
    /// GPUs the index does not count (those nodes are judged in full, as
    /// the walk does).
    fn roomless(&self) -> Option<Roomless> {
        if !self.devices.is_empty() {
            return None;
        }
        let (resource, want, apart) = self.indexed_resource()?;
        if want == 0 || self.own.iter().any(|(_, r, _)| *r == resource) {
            return None;
        }
        if !self.w.nodes_by_free(&resource, want, None, 1).is_empty() {
            return None;
        }
        // A pass says "there are no nodes" where there are none.
        if self.w.node_count() == 0 {
            return None;
        }
        for name in &apart {
            if let Some(n) = self.w.node(name)
                && self.fit(&n, true).is_ok()
            {
                return None;
            }
        }
        let largest = self.w.largest_allocatable(&resource);
        Some(Roomless {
            resource,
            want,
            largest,
        })
    }

    /// Best fit through the world's index, for a set that needs GPUs of
    /// one resource (None for any other: not answered). The nodes where
    /// the index's count is not the set's (placement's writes under way,
    /// the set's own Lost claims' records) are judged in full; the rest
    /// in the index's order, fewest free first, and the first that passes
    /// every filter is the best of them: every node after it is left with
    /// as many free or more. Some(None): no node fits; None also when the
    /// filters turned away `MOST_JUDGED` nodes with room (the pass
    /// answers).
    pub(super) fn best_fit_indexed(&self) -> Option<Option<String>> {
        let (resource, want, apart) = if self.devices.is_empty() {
            self.indexed_resource()?
        } else {
            self.indexed_devices()?
        };
        let resource = &resource;
        if want == 0 {
            return None;
        }
        let better = |left: u64, name: &str, best: &Option<(u64, String)>| {
            best.as_ref()
                .is_none_or(|(l, b)| (left, name) < (*l, b.as_str()))
        };
        let mut best: Option<(u64, String)> = None;
        for name in &apart {
            if let Some(n) = self.w.node(name)
                && let Ok(left) = self.fit(&n, true)
                && better(left, name, &best)
            {
                best = Some((left, name.clone()));
            }
        }
        /// Nodes taken from the index at a time (its lock is not held
        /// while they are judged).
        const BATCH: usize = 64;
        /// Nodes with room judged before the walk gives up for the pass:
        /// where the filters turn away the tightest nodes one after another
        /// (affinity, taints), the walk must not cost a pass and then
        /// another.
        const MOST_JUDGED: usize = 128;
        let mut judged = 0;
        let mut after = None;
        loop {
            let batch = self.w.nodes_by_free(resource, want, after.as_ref(), BATCH);
            let Some(last) = batch.last() else {
                return Some(best.map(|(_, n)| n));
            };
            after = Some(last.clone());
            for (free, name) in batch {
                if !better(free - want, &name, &best) {
                    return Some(best.map(|(_, n)| n));
                }
                if apart.contains(&name) {
                    continue;
                }
                judged += 1;
                if judged > MOST_JUDGED {
                    return None;
                }
                if let Some(n) = self.w.node(&name)
                    && let Ok(left) = self.fit(&n, true)
                {
                    debug_assert_eq!(left, free - want, "the index's count of {name}");
                    return Some(Some(name));
                }
            }
        }
    }

    /// The index's resource for a set that needs GPUs of one device
    /// plugin resource: it, the GPUs, and the nodes the index's count is
    /// not the set's on (our writes under way, the set's own records).
    pub(super) fn indexed_resource(&self) -> Option<(String, u64, BTreeSet<String>)> {
        let mut need = self.need.iter();
        let (Some((resource, &want)), None) = (need.next(), need.next()) else {
            return None;
        };
        let mut apart: BTreeSet<String> = self
            .written
            .nodes_holding(self.w, resource)
            .into_iter()
            .collect();
        apart.extend(
            self.own
                .iter()
                .filter(|(_, r, _)| r == resource)
                .map(|(n, _, _)| n.clone()),
        );
        Some((resource.clone(), want, apart))
    }

    /// The same for a set whose unplaced members ask one DRA class for
    /// devices and nothing of a device plugin (D3): the class's key, the
    /// devices, and the nodes of devices our unseen writes hold or the
    /// members hold already.
    pub(super) fn indexed_devices(&self) -> Option<(String, u64, BTreeSet<String>)> {
        if !self.need.is_empty() {
            return None;
        }
        let mut classes = self.devices.iter().map(|a| a.class.as_str());
        let class = classes.next()?;
        if classes.any(|c| c != class) {
            return None;
        }
        let want = self
            .devices
            .iter()
            .flat_map(|a| a.requests.iter())
            .fold(0u64, |n, r| n.saturating_add(u64::from(r.count)));
        let apart = self
            .held_devices
            .iter()
            .chain(
                self.devices
                    .iter()
                    .flat_map(|a| a.own.iter().chain(&a.allocated)),
            )
            .filter_map(|d| self.w.device(d).map(|f| f.node))
            .collect();
        Some((crate::world::dra_free_key(class), want, apart))
    }

    /// Best fit by a pass over every node, saying why none fits.
    pub(super) fn best_fit_scanned(&self) -> Result<String, Waiting> {
        let mut pass = Pass::default();
        self.w.for_each_node(|n| pass.judge(self, n));
        pass.finish()
    }

    /// G3: the nodes the set's pods name in their node selector or
    /// required affinity (the hostname label, `metadata.name`), where
    /// they name any: every other node fails the affinity filter.
    fn candidates(&self) -> Option<BTreeSet<String>> {
        let hostname = |h: &str| self.w.nodes_with_hostname(h);
        candidate_nodes(self.pods.iter().map(|p| &p.scheduling), &hostname)
    }

    /// Best fit among the candidates alone, saying why none fits as the
    /// pass over every node would: the nodes left out are counted as
    /// failing the affinity filter, which they do. A set pinned to its
    /// host costs one node's judgement, not a pass over thousands.
    fn best_fit_among(&self, candidates: &BTreeSet<String>) -> Result<String, Waiting> {
        let mut pass = Pass::default();
        let mut judged = 0usize;
        for name in candidates {
            if let Some(n) = self.w.node(name) {
                pass.judge(self, &n);
                judged += 1;
            }
        }
        let others = self.w.node_count().saturating_sub(judged);
        if others > 0 {
            *pass.unfit.entry(Unfit::Affinity).or_default() += others;
        }
        pass.finish()
    }
}

/// A pass over nodes: the best fit so far, how many nodes each filter
/// removed, and the nodes past the affinity filter while they are few.
struct Pass {
    best: Option<(u64, String)>,
    unfit: BTreeMap<Unfit, usize>,
    matter: Option<BTreeSet<String>>,
}

impl Default for Pass {
    fn default() -> Self {
        Self {
            best: None,
            unfit: BTreeMap::new(),
            matter: Some(BTreeSet::new()),
        }
    }
}

impl Pass {
    fn judge(&mut self, ask: &Ask<'_>, n: &NodeFacts) {
        let fit = ask.fit(n, true);
        if fit != Err(Unfit::Affinity)
            && let Some(m) = self.matter.as_mut()
        {
            m.insert(n.name.clone());
            if m.len() > NodesThatMatter::MOST {
                self.matter = None;
            }
        }
        match fit {
            Ok(left) => {
                if self
                    .best
                    .as_ref()
                    .is_none_or(|(l, name)| left < *l || (left == *l && n.name < *name))
                {
                    self.best = Some((left, n.name.clone()));
                }
            }
            Err(u) => *self.unfit.entry(u).or_default() += 1,
        }
    }

    fn finish(self) -> Result<String, Waiting> {
        let Pass {
            best,
            unfit,
            matter,
        } = self;
        // O2: nodes that would fit but are held for a head make the set
        // wait Queued, said without counting nodes: the message stays the
        // same as GPUs free on more of the nodes the head could take (at
        // thousands of Queued sets, a count in it would rewrite each of
        // them at every release); otherwise the nodes' own reasons.
        let held: Vec<&str> = unfit
            .keys()
            .filter_map(|u| match u {
                Unfit::Held(why) => Some(why.as_str()),
                _ => None,
            })
            .collect();
        let (reason, message) = match held.is_empty() {
            true => (WaitReason::NoCapacity, no_node_message(&unfit)),
            false => (
                WaitReason::Queued,
                format!(
                    "the nodes with room for the set are {}: it goes first (O2)",
                    held.join("; ")
                ),
            ),
        };
        best.map(|(_, n)| n).ok_or_else(|| Waiting {
            reason,
            message,
            nodes: matter.map_or(NodesThatMatter::All, NodesThatMatter::Only),
            roomless: None,
        })
    }
}
