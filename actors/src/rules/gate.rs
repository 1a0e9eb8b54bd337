//! G3-G5: placing a VMI's claim set when every launcher pod waits at the
//! gate: which node, which writes, or why the set waits.

use super::template_name;
use crate::api::{
    AttachedTo, CONDITION_LOST, CONDITION_WAITING, ClaimPhase, GPUAllocation, GPUAllocationSpec,
    GPUClaim, GPUClaimStatus, Vmi, is_deleting, remove_condition,
};
use crate::world::{World, key};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Why a claim set waits at the gate (G5), in the order they are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitReason {
    ClaimMissing,
    ClaimDeleting,
    ClassMissing,
    ClaimInUse,
    SplitNodes,
    PinnedElsewhere,
    NoCapacity,
    OverBudget,
}

impl WaitReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitReason::ClaimMissing => "ClaimMissing",
            WaitReason::ClaimDeleting => "ClaimDeleting",
            WaitReason::ClassMissing => "ClassMissing",
            WaitReason::ClaimInUse => "ClaimInUse",
            WaitReason::SplitNodes => "SplitNodes",
            WaitReason::PinnedElsewhere => "PinnedElsewhere",
            WaitReason::NoCapacity => "NoCapacity",
            WaitReason::OverBudget => "OverBudget",
        }
    }

    /// Waits on capacity: re-evaluated when GPUs are freed or added.
    pub fn on_capacity(self) -> bool {
        matches!(
            self,
            WaitReason::NoCapacity | WaitReason::OverBudget | WaitReason::ClassMissing
        )
    }
}

/// Records written by the placement actor that the cache may not show yet:
/// they hold capacity and budget all the same.
#[derive(Default, Debug)]
pub struct Unseen {
    pub records: HashMap<String, GPUAllocationSpec>,
}

impl Unseen {
    fn on(&self, w: &World, node: &str, resource: &str) -> u64 {
        self.fresh(w)
            .filter(|s| s.node_name == node && s.resource_name == resource)
            .map(|s| u64::from(s.count))
            .sum()
    }
    fn of_class(&self, w: &World, class: &str) -> u64 {
        self.fresh(w)
            .filter(|s| s.class_name == class)
            .map(|s| u64::from(s.count))
            .sum()
    }
    /// Only those the cache does not show yet.
    fn fresh<'a>(&'a self, w: &'a World) -> impl Iterator<Item = &'a GPUAllocationSpec> {
        self.records
            .iter()
            .filter(move |(k, s)| w.record(k).is_none_or(|r| r.spec != **s))
            .map(|(_, s)| s)
    }
    /// Forgets records the cache now shows.
    pub fn prune(&mut self, w: &World) {
        self.records
            .retain(|k, s| w.record(k).is_none_or(|r| r.spec != *s));
    }
}

/// A record write of a plan.
#[derive(Clone, Debug, PartialEq)]
pub enum RecordWrite {
    Create(GPUAllocation),
    /// A Lost claim's record moves to the new node.
    Move(GPUAllocation),
}

/// The writes that place a set (G4), in order: records, claim statuses, pods.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub node: String,
    pub records: Vec<RecordWrite>,
    pub statuses: Vec<(Arc<GPUClaim>, GPUClaimStatus)>,
    pub pods: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum GateStep {
    /// Nothing to place: no request, the VMI is final, or a pod left the gate.
    Nothing,
    /// The set waits; these claims (the ones that exist) say why.
    Wait {
        reason: WaitReason,
        message: String,
        claims: Vec<Arc<GPUClaim>>,
    },
    Place(Plan),
}

/// The claim names a VMI's request covers.
pub fn requested_claims(v: &Vmi) -> Vec<String> {
    let Ok(r) = v.gpu_request() else {
        return Vec::new();
    };
    let mut names = r.claims;
    if r.class.is_some() {
        names.push(template_name(
            v.metadata.name.as_deref().unwrap_or_default(),
        ));
    }
    names
}

struct Member {
    claim: Arc<GPUClaim>,
    resource: String,
    /// The node of its record (the cache's, or one we wrote), if any.
    recorded_on: Option<String>,
    /// Lost, or Bound/Attached on a node that failed (G6 is about to say
    /// Lost): it holds no node and moves.
    moves: bool,
}

/// The set waits. A claim being deleted is not marked: L8 releases it,
/// and a condition written to it would only race that release.
fn wait(reason: WaitReason, message: String, members: &[Arc<GPUClaim>]) -> GateStep {
    GateStep::Wait {
        reason,
        message,
        claims: members
            .iter()
            .filter(|c| !is_deleting(&c.metadata))
            .cloned()
            .collect(),
    }
}

/// G3: decide for one VMI whose launcher pods all wait at the gate.
pub fn decide_gate(v: &Vmi, w: &World, unseen: &Unseen) -> GateStep {
    let (Some(ns), Some(name)) = (v.metadata.namespace.as_deref(), v.metadata.name.as_deref())
    else {
        return GateStep::Nothing;
    };
    if v.is_final() || is_deleting(&v.metadata) {
        return GateStep::Nothing;
    }
    let names = requested_claims(v);
    let pods = w.launchers(&key(ns, name));
    if names.is_empty() || pods.is_empty() || pods.iter().any(|p| !p.gated) {
        return GateStep::Nothing;
    }
    let found: Vec<Arc<GPUClaim>> = names.iter().filter_map(|n| w.claim(&key(ns, n))).collect();
    if let Some(missing) = names.iter().find(|n| w.claim(&key(ns, n)).is_none()) {
        return wait(
            WaitReason::ClaimMissing,
            format!("claim {missing} does not exist"),
            &found,
        );
    }
    let mut members = Vec::new();
    for c in &found {
        let cname = c.metadata.name.as_deref().unwrap_or_default();
        if is_deleting(&c.metadata) {
            return wait(
                WaitReason::ClaimDeleting,
                format!("claim {cname} is being deleted"),
                &found,
            );
        }
        let Some(class) = w
            .class(&c.spec.class_name)
            .filter(|k| !is_deleting(&k.metadata))
        else {
            return wait(
                WaitReason::ClassMissing,
                format!("GPUClass {} does not exist", c.spec.class_name),
                &found,
            );
        };
        if let Some(other) = c.attached_vmi_name().filter(|o| *o != name)
            && w.vmi(&key(ns, other)).is_some_and(|o| !o.is_final())
        {
            return wait(
                WaitReason::ClaimInUse,
                format!("claim {cname} is attached to VMI {other}"),
                &found,
            );
        }
        let uid = c.metadata.uid.as_deref().unwrap_or_default();
        let k = key(ns, cname);
        let recorded_on = w
            .record(&k)
            .filter(|r| r.spec.claim_uid == uid)
            .map(|r| r.spec.node_name.clone())
            .or_else(|| {
                unseen
                    .records
                    .get(&k)
                    .filter(|s| s.claim_uid == uid)
                    .map(|s| s.node_name.clone())
            });
        let moves = c.phase() == ClaimPhase::Lost
            || (matches!(c.phase(), ClaimPhase::Bound | ClaimPhase::Attached)
                && super::lost_reason(c, w).is_some());
        members.push(Member {
            claim: c.clone(),
            resource: class.spec.resource_name.clone(),
            recorded_on,
            moves,
        });
    }
    // The node its placed claims hold: Bound/Attached, or Pending with a record (a placement cut short).
    let held: BTreeSet<String> = members
        .iter()
        .filter(|m| !m.moves)
        .filter_map(|m| match m.claim.phase() {
            ClaimPhase::Bound | ClaimPhase::Attached => m.claim.node_name().map(str::to_string),
            ClaimPhase::Pending => m.recorded_on.clone(),
            ClaimPhase::Lost => None,
        })
        .collect();
    if held.len() > 1 {
        return wait(
            WaitReason::SplitNodes,
            format!("its claims hold GPUs on {} nodes", held.len()),
            &found,
        );
    }
    let unplaced: Vec<&Member> = members
        .iter()
        .filter(|m| m.moves || (m.claim.phase() == ClaimPhase::Pending && m.recorded_on.is_none()))
        .collect();
    // Budgets: only claims without a record add to what a class holds.
    let mut new_by_class: BTreeMap<&str, u64> = BTreeMap::new();
    for m in unplaced.iter().filter(|m| m.recorded_on.is_none()) {
        *new_by_class.entry(&m.claim.spec.class_name).or_default() += u64::from(m.claim.spec.count);
    }
    for (class, add) in &new_by_class {
        let budget = w.class(class).and_then(|c| c.spec.budget);
        let held = w.recorded_for_class(class) + unseen.of_class(w, class);
        if budget.is_some_and(|b| held + add > u64::from(b)) {
            return wait(
                WaitReason::OverBudget,
                // Without the class's current usage: a message that changed
                // with every placement elsewhere would be rewritten (a
                // write) each time; the class's status has the numbers.
                format!(
                    "GPUClass {class} has no room in its budget of {} GPUs for {add} more",
                    budget.unwrap_or(0)
                ),
                &found,
            );
        }
    }
    let Some(node) = choose_node(w, unseen, &members, &unplaced, held.into_iter().next()) else {
        return wait(
            WaitReason::NoCapacity,
            "no Ready node that serves every class has room for the set".into(),
            &found,
        );
    };
    if let Some(p) = pods
        .iter()
        .find(|p| p.pinned.as_deref().is_some_and(|n| n != node))
    {
        return wait(
            WaitReason::PinnedElsewhere,
            format!(
                "pod {} is pinned to {}",
                p.name,
                p.pinned.as_deref().unwrap_or_default()
            ),
            &found,
        );
    }
    GateStep::Place(plan(
        name,
        &node,
        &members,
        &unplaced,
        pods.iter().map(|p| key(&p.namespace, &p.name)).collect(),
    ))
}

/// GPUs needed per resource by the unplaced claims.
fn needs(unplaced: &[&Member]) -> BTreeMap<String, u64> {
    let mut need = BTreeMap::new();
    for m in unplaced {
        *need.entry(m.resource.clone()).or_default() += u64::from(m.claim.spec.count);
    }
    need
}

/// The held node if there is one (it must have room), else the best fit:
/// the node left with the fewest free GPUs after placement, ties by name.
fn choose_node(
    w: &World,
    unseen: &Unseen,
    members: &[Member],
    unplaced: &[&Member],
    held: Option<String>,
) -> Option<String> {
    let need = needs(unplaced);
    let classes: Vec<_> = members
        .iter()
        .filter_map(|m| w.class(&m.claim.spec.class_name))
        .collect();
    let left_after = |node: &str| -> Option<u64> {
        let n = w.node(node)?;
        let mut left = 0;
        for (res, want) in &need {
            let used = w.recorded(node, res) + unseen.on(w, node, res);
            let free = n.allocatable(res).checked_sub(used)?;
            left += free.checked_sub(*want)?;
        }
        Some(left)
    };
    if let Some(h) = held {
        return left_after(&h).map(|_| h);
    }
    let mut best: Option<(u64, String)> = None;
    for n in w.nodes.iter() {
        if !n.ready
            || !classes
                .iter()
                .all(|c| n.matches(c.spec.node_selector.as_ref()))
        {
            continue;
        }
        if let Some(left) = left_after(&n.name)
            && best
                .as_ref()
                .is_none_or(|(l, name)| left < *l || (left == *l && n.name < *name))
        {
            best = Some((left, n.name.clone()));
        }
    }
    best.map(|(_, n)| n)
}

fn plan(
    vmi: &str,
    node: &str,
    members: &[Member],
    unplaced: &[&Member],
    pods: Vec<String>,
) -> Plan {
    let mut records = Vec::new();
    for m in unplaced {
        let c = &m.claim;
        let r = GPUAllocation {
            metadata: ObjectMeta {
                namespace: c.metadata.namespace.clone(),
                name: c.metadata.name.clone(),
                ..Default::default()
            },
            spec: GPUAllocationSpec {
                claim_uid: c.metadata.uid.clone().unwrap_or_default(),
                class_name: c.spec.class_name.clone(),
                resource_name: m.resource.clone(),
                node_name: node.to_string(),
                count: c.spec.count,
            },
        };
        records.push(if m.recorded_on.is_some() {
            RecordWrite::Move(r)
        } else {
            RecordWrite::Create(r)
        });
    }
    let statuses = members
        .iter()
        .filter_map(|m| {
            let old = m.claim.status.clone().unwrap_or_default();
            let mut s = old.clone();
            if matches!(m.claim.phase(), ClaimPhase::Pending | ClaimPhase::Lost) {
                s.phase = Some(ClaimPhase::Bound);
            }
            s.node_name = Some(node.to_string());
            s.attached_to = Some(AttachedTo {
                vmi: vmi.to_string(),
            });
            remove_condition(&mut s.conditions, CONDITION_WAITING);
            remove_condition(&mut s.conditions, CONDITION_LOST);
            (s != old).then(|| (m.claim.clone(), s))
        })
        .collect();
    Plan {
        node: node.to_string(),
        records,
        statuses,
        pods,
    }
}
