//! G3-G5: placing a VMI's claim set when every launcher pod waits at the
//! gate: which node, which writes, or why the set waits.

mod choice;
mod plan;
mod written;

pub use choice::{Unfit, pod_unfit};
pub use plan::{AllocationWrite, Plan};
pub use written::WrittenAllocations;

use super::template_name;
use crate::api::{ClaimPhase, GPUClaim, LauncherPod, Vmi, is_deleting, vmi_owner};
use crate::world::{World, key};
use std::collections::{BTreeMap, BTreeSet};
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

    /// Waits on nodes: re-evaluated when a node changes.
    pub fn on_nodes(self) -> bool {
        matches!(self, WaitReason::NoCapacity | WaitReason::PinnedElsewhere)
    }

    /// Waits on capacity: re-evaluated when GPUs are freed or added.
    pub fn on_capacity(self) -> bool {
        matches!(
            self,
            WaitReason::NoCapacity | WaitReason::OverBudget | WaitReason::ClassMissing
        )
    }
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
    /// The node of its allocation (the cache's, or one we wrote), if any.
    recorded_on: Option<String>,
    /// Lost, or placed on a node that failed (G6 is about to say Lost):
    /// it holds no node and moves.
    moves: bool,
}

/// A set that waits, and the claims that say why: its own claims, not
/// those being deleted (L8 releases them, and a condition written to one
/// would only race that release) and not another VMI's.
struct Waiting {
    reason: WaitReason,
    message: String,
}

fn wait(reason: WaitReason, message: String) -> Waiting {
    Waiting { reason, message }
}

/// G3: decide for one VMI whose launcher pods all wait at the gate.
pub fn decide_gate(v: &Vmi, w: &World, written: &WrittenAllocations) -> GateStep {
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
    let ours: Vec<Arc<GPUClaim>> = found
        .iter()
        .filter(|c| !is_deleting(&c.metadata) && owned_by_other(c, v).is_none())
        .cloned()
        .collect();
    match place(v, w, written, &names, &found, &pods) {
        Ok(plan) => GateStep::Place(plan),
        Err(Waiting { reason, message }) => GateStep::Wait {
            reason,
            message,
            claims: ours,
        },
    }
}

/// The VMI owner of a claim when it is another VMI than `v` (L2: a later
/// VMI of the same name is not the claim's).
fn owned_by_other<'a>(c: &'a GPUClaim, v: &Vmi) -> Option<&'a str> {
    vmi_owner(&c.metadata)
        .filter(|(_, uid)| *uid != v.uid())
        .map(|(name, _)| name)
}

fn place(
    v: &Vmi,
    w: &World,
    written: &WrittenAllocations,
    names: &[String],
    found: &[Arc<GPUClaim>],
    pods: &[Arc<LauncherPod>],
) -> Result<Plan, Waiting> {
    let ns = v.metadata.namespace.as_deref().unwrap_or_default();
    let name = v.metadata.name.as_deref().unwrap_or_default();
    if let Some(missing) = names.iter().find(|n| w.claim(&key(ns, n)).is_none()) {
        return Err(wait(
            WaitReason::ClaimMissing,
            format!("claim {missing} does not exist"),
        ));
    }
    let members = members(v, w, written, found)?;
    let held = held_node(&members)?;
    let unplaced: Vec<&Member> = members
        .iter()
        .filter(|m| m.moves || (m.claim.phase() == ClaimPhase::Pending && m.recorded_on.is_none()))
        .collect();
    check_budgets(w, written, &unplaced)?;
    let ask = choice::Ask {
        w,
        written,
        pods,
        classes: members
            .iter()
            .filter_map(|m| w.class(&m.claim.spec.class_name))
            .collect(),
        resources: members.iter().map(|m| m.resource.clone()).collect(),
        need: needs(&unplaced),
        own: unplaced
            .iter()
            .filter_map(|m| {
                let node = m.recorded_on.clone()?;
                Some((node, m.resource.clone(), u64::from(m.claim.spec.count)))
            })
            .collect(),
    };
    let node = ask
        .choose(held.as_deref())
        .map_err(|(reason, message)| wait(reason, message))?;
    let pod_keys = pods.iter().map(|p| key(&p.namespace, &p.name)).collect();
    Ok(plan::plan(name, &node, &members, &unplaced, pod_keys))
}

/// The set's claims, each checked in G5's order: deleting, class, another
/// VMI's (its owner, or a live VMI it is attached to).
fn members(
    v: &Vmi,
    w: &World,
    written: &WrittenAllocations,
    found: &[Arc<GPUClaim>],
) -> Result<Vec<Member>, Waiting> {
    let ns = v.metadata.namespace.as_deref().unwrap_or_default();
    let name = v.metadata.name.as_deref().unwrap_or_default();
    let mut members = Vec::new();
    for c in found {
        let cname = c.metadata.name.as_deref().unwrap_or_default();
        if is_deleting(&c.metadata) {
            return Err(wait(
                WaitReason::ClaimDeleting,
                format!("claim {cname} is being deleted"),
            ));
        }
        let Some(class) = w
            .class(&c.spec.class_name)
            .filter(|k| !is_deleting(&k.metadata))
        else {
            return Err(wait(
                WaitReason::ClassMissing,
                format!("GPUClass {} does not exist", c.spec.class_name),
            ));
        };
        match owned_by_other(c, v) {
            // G2 makes this VMI's own once L3 deleted the earlier VMI's.
            Some(owner) if owner == name => {
                return Err(wait(
                    WaitReason::ClaimMissing,
                    format!(
                        "claim {cname} belongs to an earlier VMI named {name}; waiting for this VMI's own"
                    ),
                ));
            }
            Some(owner) => {
                return Err(wait(
                    WaitReason::ClaimInUse,
                    format!("claim {cname} belongs to VMI {owner}"),
                ));
            }
            None => {}
        }
        if let Some(other) = c.attached_vmi_name().filter(|o| *o != name)
            && w.vmi(&key(ns, other)).is_some_and(|o| !o.is_final())
        {
            return Err(wait(
                WaitReason::ClaimInUse,
                format!("claim {cname} is attached to VMI {other}"),
            ));
        }
        members.push(member(c, w, written, class.spec.resource_name.clone()));
    }
    Ok(members)
}

fn member(c: &Arc<GPUClaim>, w: &World, written: &WrittenAllocations, resource: String) -> Member {
    let uid = c.metadata.uid.as_deref().unwrap_or_default();
    let k = key(
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.name.as_deref().unwrap_or_default(),
    );
    let recorded_on = w
        .allocation(&k)
        .filter(|r| r.spec.claim_uid == uid)
        .map(|r| r.spec.node_name.clone())
        .or_else(|| {
            written
                .get(w, &k)
                .filter(|s| s.claim_uid == uid)
                .map(|s| s.node_name.clone())
        });
    // Where it holds GPUs: its status for a placed claim, its allocation
    // for a Pending one whose placement was cut short.
    let node = match c.phase() {
        ClaimPhase::Bound | ClaimPhase::Attached => c.node_name().map(str::to_string),
        ClaimPhase::Pending => recorded_on.clone(),
        ClaimPhase::Lost => None,
    };
    let moves = c.phase() == ClaimPhase::Lost
        || node.is_some_and(|n| super::lost::node_failed(w, &n, &resource).is_some());
    Member {
        claim: c.clone(),
        resource,
        recorded_on,
        moves,
    }
}

/// The node the set's placed claims hold (Bound/Attached, or Pending with
/// an allocation: a placement cut short); more than one is SplitNodes.
fn held_node(members: &[Member]) -> Result<Option<String>, Waiting> {
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
        return Err(wait(
            WaitReason::SplitNodes,
            format!("its claims hold GPUs on {} nodes", held.len()),
        ));
    }
    Ok(held.into_iter().next())
}

/// Budgets: only claims without an allocation add to what a class holds.
fn check_budgets(
    w: &World,
    written: &WrittenAllocations,
    unplaced: &[&Member],
) -> Result<(), Waiting> {
    let mut new_by_class: BTreeMap<&str, u64> = BTreeMap::new();
    for m in unplaced.iter().filter(|m| m.recorded_on.is_none()) {
        *new_by_class.entry(&m.claim.spec.class_name).or_default() += u64::from(m.claim.spec.count);
    }
    for (class, add) in &new_by_class {
        let budget = w.class(class).and_then(|c| c.spec.budget);
        let held = w.allocated_to_class(class) + written.of_class(w, class);
        if let Some(b) = budget.filter(|b| held + add > u64::from(*b)) {
            return Err(wait(
                WaitReason::OverBudget,
                // Without the class's current usage: a message that changed
                // with every placement elsewhere would be rewritten (a
                // write) each time; the class's status has the numbers.
                format!("GPUClass {class} has no room in its budget of {b} GPUs for {add} more"),
            ));
        }
    }
    Ok(())
}

/// GPUs needed per resource by the unplaced claims.
fn needs(unplaced: &[&Member]) -> BTreeMap<String, u64> {
    let mut need = BTreeMap::new();
    for m in unplaced {
        *need.entry(m.resource.clone()).or_default() += u64::from(m.claim.spec.count);
    }
    need
}

#[cfg(test)]
mod tests;
