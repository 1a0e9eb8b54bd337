//! G3-G5: placing a VMI's claim set when every launcher pod waits at the
//! gate: which node, which writes, or why the set waits.

mod choice;
mod devices;
mod lead;
mod members;
mod plan;
mod quota;
mod written;

pub use choice::{NodesThatMatter, Unfit, pod_unfit};
pub use devices::{
    BACKING_FINALIZER, BACKING_OWNER_ANNOTATION, BACKING_REQUEST, DeviceTaken, GiveUp, Restore,
    Taken, allocated_devices, backing_claim, backing_claim_to_let_go, backing_claim_to_restore,
    controlled_by, device_taken, lost_to_another, orphaned_backing_claim, owned_by, reserved,
    taken_device,
};
pub use lead::Lead;
pub use members::request_mismatch;
pub use plan::{AllocationWrite, DeviceClaimWrite, Moved, Plan};
pub use written::{Assumed, Forgotten, WrittenAllocations};

use super::request::vmi_request;
use super::template_name;
use crate::api::amount::add_to;
use crate::api::{ClaimPhase, GPUClaim, HOSTNAME_LABEL, LauncherPod, Vmi, is_deleting};
use crate::rules::queueing::Held;
use crate::world::{World, key};
use choice::Ask;
use members::Member;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Why a claim set waits at the gate (G5), in the order they are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitReason {
    ClaimMissing,
    /// G2: the claim the VMI's annotations name is the template claim of
    /// an earlier VMI of the same name (L3 deletes it, G2 makes the new
    /// one): a moment's wait, said on the claim as ClaimMissing.
    EarlierVmisClaim,
    ClaimDeleting,
    ClassMissing,
    RequestMismatch,
    /// D5: the launcher pod's ResourceClaim does not exist (yet).
    DeviceClaimPending,
    /// D4: the ResourceClaim that must hold the set's devices is
    /// allocated to others and reserved for a pod.
    DeviceClaimConflict,
    ClaimInUse,
    SplitNodes,
    OverBudget,
    OverQuota,
    /// Q1 fails closed: a GPUQuota of the namespace cannot be read.
    QuotaUnreadable,
    /// O2: the GPUs it could take go first to the set at the head of its
    /// class, which has waited `queueing.headOfLineAfter`.
    Queued,
    PinnedElsewhere,
    NoCapacity,
}

impl WaitReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitReason::ClaimMissing | WaitReason::EarlierVmisClaim => "ClaimMissing",
            WaitReason::ClaimDeleting => "ClaimDeleting",
            WaitReason::ClassMissing => "ClassMissing",
            WaitReason::RequestMismatch => "RequestMismatch",
            WaitReason::DeviceClaimPending => "DeviceClaimPending",
            WaitReason::DeviceClaimConflict => "DeviceClaimConflict",
            WaitReason::ClaimInUse => "ClaimInUse",
            WaitReason::SplitNodes => "SplitNodes",
            WaitReason::OverBudget => "OverBudget",
            WaitReason::OverQuota => "OverQuota",
            WaitReason::QuotaUnreadable => "QuotaUnreadable",
            WaitReason::Queued => "Queued",
            WaitReason::PinnedElsewhere => "PinnedElsewhere",
            WaitReason::NoCapacity => "NoCapacity",
        }
    }

    /// How the VMI is told of this wait (G5): a Warning Event (true) for
    /// what someone must act on, a Normal one (false) for a turn to come,
    /// none for what the cluster makes in a moment (a new template claim,
    /// a launcher pod's ResourceClaim).
    pub fn told_on_the_vmi(self) -> Option<bool> {
        match self {
            WaitReason::EarlierVmisClaim | WaitReason::DeviceClaimPending => None,
            WaitReason::Queued | WaitReason::PinnedElsewhere => Some(false),
            _ => Some(true),
        }
    }

    /// The reason of the Event the VMI gets (G5).
    pub fn event_reason(self) -> &'static str {
        match self {
            // Its name since before every wait was said on the VMI.
            WaitReason::RequestMismatch => "GPURequestMismatch",
            other => other.as_str(),
        }
    }

    /// What would end the wait, in the words of whoever can act on it:
    /// said after the message in the VMI's Warning Event.
    pub fn what_helps(self) -> &'static str {
        match self {
            WaitReason::ClaimMissing => {
                "create the GPUClaim, or fix the names in the VM's gpu.cozystack.io/claims annotation"
            }
            WaitReason::EarlierVmisClaim => {
                "the VMI's own claim is made once the earlier one is gone"
            }
            WaitReason::ClaimDeleting => {
                "the claim goes once no VM holds it: name another claim, or make it again after"
            }
            WaitReason::ClassMissing => {
                "create the GPUClass, or fix the claim's className (kubectl get gpuclasses lists them)"
            }
            WaitReason::RequestMismatch => {
                "its launcher pods stay at the gate until the VM's spec asks for the GPUs its claims hold"
            }
            WaitReason::DeviceClaimPending => {
                "KubeVirt makes the launcher pod's ResourceClaim from the VM's template; check that the ResourceClaimTemplate exists"
            }
            WaitReason::DeviceClaimConflict => {
                "another pod holds the ResourceClaim: stop it, or give the VM another claim"
            }
            WaitReason::ClaimInUse => {
                "another VM uses the claim: stop it, or give this VM another claim"
            }
            WaitReason::SplitNodes => {
                "a VM runs on one node: release one of the claims, so that they can be placed together"
            }
            WaitReason::OverBudget => {
                "it starts when claims of the class are released; the platform can raise the class's budget"
            }
            WaitReason::OverQuota => {
                "free GPUs in the namespace (stop a VM, delete an idle claim), or ask the platform for a larger GPUQuota"
            }
            WaitReason::QuotaUnreadable => {
                "the controller cannot read a GPUQuota of the namespace: the platform checks its logs and access"
            }
            WaitReason::Queued => {
                "it starts after the set at the head of its class; kubectl gpu-claims status shows the queue"
            }
            WaitReason::PinnedElsewhere => {
                "it starts when the node its claims are on can take it again"
            }
            WaitReason::NoCapacity => {
                "kubectl gpu-claims status shows who holds the GPUs, idle reservations included"
            }
        }
    }

    /// Waits on nodes: re-evaluated when a node changes, or pods leave one.
    pub fn on_nodes(self) -> bool {
        matches!(
            self,
            WaitReason::NoCapacity | WaitReason::PinnedElsewhere | WaitReason::Queued
        )
    }

    /// Waits on capacity or classes: re-evaluated when GPUs are freed or
    /// added, or a class changes (which may serve, or stop serving, what
    /// the VMI's spec requests).
    pub fn on_capacity(self) -> bool {
        matches!(
            self,
            WaitReason::NoCapacity
                | WaitReason::OverBudget
                | WaitReason::OverQuota
                | WaitReason::Queued
                | WaitReason::ClassMissing
                | WaitReason::RequestMismatch
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
        /// The nodes whose change can change this decision (for a set
        /// waiting on nodes): a change elsewhere leaves it as it is.
        nodes: NodesThatMatter,
        /// O2: the classes it could lead, and what it asks of a node.
        lead: Option<Lead>,
        /// G3: no node has the GPUs it needs free, as the index of free
        /// GPUs says (no node was judged): until one has, or the nodes'
        /// largest changes, a change of nodes leaves the decision as it is.
        roomless: Option<Roomless>,
    },
    Place(Plan),
}

/// G3: a set that needs `want` GPUs of the device plugin resource
/// `resource` on one node, where no node has that many free. Its message
/// says only that, and whether the largest node (`largest` GPUs of it)
/// could ever hold the set: it stays true, word for word, until some node
/// frees enough or the largest changes, so that a set that never fits is
/// not judged against every node each time a node changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roomless {
    pub resource: String,
    pub want: u64,
    pub largest: u64,
}

impl Roomless {
    /// Whether the world still leaves the set so, with the same message.
    pub fn holds(&self, w: &World) -> bool {
        w.nodes_by_free(&self.resource, self.want, None, 1)
            .is_empty()
            && w.largest_allocatable(&self.resource) == self.largest
    }

    /// The set's message: "can never" told apart from "not now".
    pub fn message(&self) -> String {
        let Roomless {
            resource,
            want,
            largest,
        } = self;
        if want > largest {
            format!(
                "no node can ever hold the set as the nodes are: it needs {want} {resource} on one node, and the largest node has {largest}; ask for fewer, or add a node with {want}"
            )
        } else {
            format!("no node has {want} {resource} free: the set is placed when a node frees them")
        }
    }
}

/// The claim names a VMI's request covers (its annotations', or the
/// template claim its spec asks for).
pub fn requested_claims(v: &Vmi, w: &World) -> Vec<String> {
    let Ok(r) = vmi_request(v, w) else {
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

/// A set that waits, and why.
pub(super) struct Waiting {
    reason: WaitReason,
    message: String,
    nodes: NodesThatMatter,
    roomless: Option<Roomless>,
}

impl Waiting {
    /// These nodes matter to the decision as well.
    fn also_on(mut self, nodes: impl IntoIterator<Item = String>) -> Self {
        if let NodesThatMatter::Only(only) = &mut self.nodes {
            only.extend(nodes);
        }
        self
    }
}

/// A wait decided before any node was looked at: any node may matter.
pub(super) fn wait(reason: WaitReason, message: String) -> Waiting {
    Waiting {
        reason,
        message,
        nodes: NodesThatMatter::All,
        roomless: None,
    }
}

/// Whether the VMI's set is at the gate: the VMI is live and every one of
/// its launcher pods (there is one at least) waits there.
pub fn at_the_gate(v: &Vmi, w: &World) -> bool {
    let (Some(ns), Some(name)) = (v.metadata.namespace.as_deref(), v.metadata.name.as_deref())
    else {
        return false;
    };
    if v.is_final() || is_deleting(&v.metadata) {
        return false;
    }
    let pods = w.launchers(&key(ns, name));
    !pods.is_empty() && pods.iter().all(|p| p.gated)
}

/// G3: decide for one VMI whose launcher pods all wait at the gate, no
/// head holding it back.
pub fn decide_gate(v: &Vmi, w: &World, written: &WrittenAllocations) -> GateStep {
    decide_gate_held(v, w, written, &[])
}

/// G3 for one VMI whose launcher pods all wait at the gate, letting the
/// heads in `held` (O2) go first.
pub fn decide_gate_held(
    v: &Vmi,
    w: &World,
    written: &WrittenAllocations,
    held: &[Held],
) -> GateStep {
    let (Some(ns), Some(name)) = (v.metadata.namespace.as_deref(), v.metadata.name.as_deref())
    else {
        return GateStep::Nothing;
    };
    if !at_the_gate(v, w) {
        return GateStep::Nothing;
    }
    let names = requested_claims(v, w);
    let pods = w.launchers(&key(ns, name));
    if names.is_empty() {
        return GateStep::Nothing;
    }
    let found: Vec<Arc<GPUClaim>> = names.iter().filter_map(|n| w.claim(&key(ns, n))).collect();
    // The claims that say why the set waits: its own, not those being
    // deleted (L8 releases them, and a condition written to one would only
    // race that release) and not another VMI's.
    let ours: Vec<Arc<GPUClaim>> = found
        .iter()
        .filter(|c| !is_deleting(&c.metadata) && members::owned_by_other(c, v).is_none())
        .cloned()
        .collect();
    match place(v, w, written, held, &names, &found, &pods) {
        Ok(plan) => GateStep::Place(plan),
        Err(Waiting {
            reason,
            message,
            nodes,
            roomless,
        }) => GateStep::Wait {
            roomless,
            reason,
            message,
            claims: ours,
            nodes,
            lead: lead::lead(v, w, written, &names, &found, &pods, reason),
        },
    }
}

/// E2's stop rule: whether the set of `v`, a live VMI whose claims hold
/// GPUs on the evacuating `node`, could be placed on another node at once
/// (G3 on the cache, its claims moving as E1 moves them; `node` is left
/// out by its evacuate taint). Its launcher pods stand for the ones its
/// VM's next VMI brings, without our pin to `node`. The node it would go
/// to, or why it would wait.
pub fn could_move_off(v: &Vmi, w: &World, node: &str) -> Result<String, String> {
    let (Some(ns), Some(name)) = (v.metadata.namespace.as_deref(), v.metadata.name.as_deref())
    else {
        return Err("the VMI has no name".into());
    };
    let names = requested_claims(v, w);
    let found: Vec<Arc<GPUClaim>> = names.iter().filter_map(|n| w.claim(&key(ns, n))).collect();
    let pods: Vec<Arc<LauncherPod>> = w
        .launchers(&key(ns, name))
        .iter()
        .filter(|p| !p.terminal)
        .map(|p| {
            let mut next = LauncherPod::clone(p);
            if next
                .scheduling
                .node_selector
                .get(HOSTNAME_LABEL)
                .map(String::as_str)
                == Some(node)
            {
                next.scheduling.node_selector.remove(HOSTNAME_LABEL);
            }
            next.pinned = None;
            next.node_name = None;
            next.gated = true;
            Arc::new(next)
        })
        .collect();
    if pods.is_empty() {
        return Err("its launcher pod is gone".into());
    }
    place(
        v,
        w,
        &WrittenAllocations::default(),
        &[],
        &names,
        &found,
        &pods,
    )
    .map(|plan| plan.node)
    .map_err(|w| format!("{}: {}", w.reason.as_str(), w.message))
}

fn place(
    v: &Vmi,
    w: &World,
    written: &WrittenAllocations,
    held: &[Held],
    names: &[String],
    found: &[Arc<GPUClaim>],
    pods: &[Arc<LauncherPod>],
) -> Result<Plan, Waiting> {
    let mut members = members::members(v, w, written, names, found, pods)?;
    let held_node = held_node(&members)?;
    let Some(h) = held_node else {
        return place_on(v, w, written, held, &members, pods, None);
    };
    // The node its claims hold must still take the set; where it cannot
    // (cordoned, a taint, the pods' selector, no room for the pods, not
    // Ready), the claims move (E1). Every claim of the set is this VMI's
    // or attached to no live VMI (else the set waited ClaimInUse), and
    // this VMI's pods all wait at the gate: nothing runs on those GPUs.
    let why = match Ask::new(w, written, pods, &members, held).held(&h) {
        Ok(_) => return place_on(v, w, written, held, &members, pods, Some(h)),
        Err((_, why)) => why,
    };
    for m in members.iter_mut().filter(|m| m.holds_on(&h)) {
        m.moves = true;
        m.moved_from = Some(Moved {
            node: h.clone(),
            why: why.clone(),
        });
    }
    place_on(v, w, written, held, &members, pods, None).map_err(|other| {
        Waiting {
            reason: other.reason,
            message: format!("{why}; no other node can take it: {}", other.message),
            nodes: other.nodes,
            // The held node's state is in the message too.
            roomless: None,
        }
        .also_on([h.clone()])
    })
}

/// The set placed on `held`, or on the best fit where none is held.
fn place_on(
    v: &Vmi,
    w: &World,
    written: &WrittenAllocations,
    heads: &[Held],
    members: &[Member],
    pods: &[Arc<LauncherPod>],
    held: Option<String>,
) -> Result<Plan, Waiting> {
    let name = v.metadata.name.as_deref().unwrap_or_default();
    let unplaced = unplaced(members);
    check_budgets(w, written, &unplaced)?;
    let ns = v.metadata.namespace.as_deref().unwrap_or_default();
    quota::check_quotas(w, written, ns, &unplaced)?;
    budget_held(heads, &unplaced)?;
    let ask = Ask::new(w, written, pods, members, heads);
    // The nodes the members hold or are recorded on matter too: whether
    // a member moves (its node failed) decides which node holds the set.
    let member_nodes = members.iter().flat_map(|m| {
        let on = m.claim.node_name().map(str::to_string);
        on.into_iter().chain(m.allocation_node.clone())
    });
    let node = ask
        .choose(held.as_deref())
        .map_err(|w| w.also_on(member_nodes))?;
    // D3: the devices the unplaced members of DRA classes take there.
    let chosen = match ask.devices.is_empty() {
        true => Vec::new(),
        false => devices::choose(w, &node, &ask.devices, &ask.held_devices)
            .map(|(c, _)| c)
            .ok_or_else(|| {
                wait(
                    WaitReason::NoCapacity,
                    format!("no room for the set's devices on {node}"),
                )
            })?,
    };
    let pod_keys = pods.iter().map(|p| key(&p.namespace, &p.name)).collect();
    plan::plan(w, name, &node, members, &unplaced, chosen, pod_keys)
}

/// O2: a head over the budget of a class whose GPUs the set would take
/// holds that budget.
fn budget_held(heads: &[Held], unplaced: &[&Member]) -> Result<(), Waiting> {
    let takes = |class: &str| {
        unplaced
            .iter()
            .any(|m| m.allocation_node.is_none() && m.claim.spec.class_name == class)
    };
    match heads.iter().find(|h| h.over_budget && takes(&h.class)) {
        Some(h) => Err(wait(
            WaitReason::Queued,
            format!(
                "GPUClass {}'s budget goes first to VMI {}, at the head of the class since {}",
                h.class, h.head, h.since
            ),
        )),
        None => Ok(()),
    }
}

/// The members that take GPUs where the set is placed: those that move,
/// and Pending ones without an allocation.
fn unplaced(members: &[Member]) -> Vec<&Member> {
    members
        .iter()
        .filter(|m| {
            m.moves || (m.claim.phase() == ClaimPhase::Pending && m.allocation_node.is_none())
        })
        .collect()
}

impl<'a> Ask<'a> {
    /// What the node choice asks of a node for these members.
    fn new(
        w: &'a World,
        written: &'a WrittenAllocations,
        pods: &'a [Arc<LauncherPod>],
        members: &[Member],
        heads: &'a [Held],
    ) -> Self {
        let unplaced = unplaced(members);
        let takes = |class: &str| unplaced.iter().any(|m| m.claim.spec.class_name == class);
        Ask {
            held: heads
                .iter()
                .filter(|h| !h.over_budget && takes(&h.class))
                .collect(),
            w,
            written,
            pods,
            classes: classes_of(w, members),
            resources: resources_of(members),
            need: needs(&unplaced),
            // D3: an ask per unplaced member of a DRA class, in order.
            devices: unplaced
                .iter()
                .filter_map(|m| {
                    let mut ask = devices::DeviceAsk::of(w, m.dra.as_ref()?).ok()?;
                    // A claim placed again may keep its own devices.
                    ask.own.splice(0..0, m.devices.iter().cloned());
                    ask.allocated = m.devices.clone();
                    ask.allocation = key(
                        m.claim.metadata.namespace.as_deref().unwrap_or_default(),
                        m.claim.metadata.name.as_deref().unwrap_or_default(),
                    );
                    Some(ask)
                })
                .collect(),
            held_devices: written.devices(w),
            own: unplaced
                .iter()
                .filter(|m| m.dra.is_none())
                .filter_map(|m| {
                    let node = m.allocation_node.clone()?;
                    Some((node, m.resource.clone(), u64::from(m.claim.spec.count)))
                })
                .collect(),
        }
    }
}

/// The node the set's placed claims hold (Bound/Attached, or Pending with
/// an allocation: a placement cut short); more than one is SplitNodes.
fn held_node(members: &[Member]) -> Result<Option<String>, Waiting> {
    let held: BTreeSet<String> = members
        .iter()
        .filter(|m| !m.moves)
        .filter_map(|m| m.held_on().map(str::to_string))
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
    for m in unplaced.iter().filter(|m| m.allocation_node.is_none()) {
        add_to(
            &mut new_by_class,
            &m.claim.spec.class_name,
            u64::from(m.claim.spec.count),
        );
    }
    for (class, add) in &new_by_class {
        let budget = w.class(class).and_then(|c| c.spec.budget);
        let held = w
            .allocated_to_class(class)
            .saturating_add(written.of_class(w, class));
        if let Some(b) = budget.filter(|b| held.saturating_add(*add) > u64::from(*b)) {
            // Without the class's current usage: a message that changed
            // with every placement elsewhere would be rewritten (a write)
            // each time; the class's status has the numbers. More than
            // the budget itself is never, whatever is released.
            let message = if *add > u64::from(b) {
                format!(
                    "the set asks for {add} GPUs of class {class}, more than its budget of {b}: it can never be placed; ask for fewer, or the platform raises the budget"
                )
            } else {
                format!("GPUClass {class} has no room in its budget of {b} GPUs for {add} more")
            };
            return Err(wait(WaitReason::OverBudget, message));
        }
    }
    Ok(())
}

/// GPUs needed per resource by the unplaced claims.
/// The classes of a set's members (what a node must pass: their selectors).
fn classes_of(w: &World, members: &[Member]) -> Vec<Arc<crate::api::GPUClass>> {
    members
        .iter()
        .filter_map(|m| w.class(&m.claim.spec.class_name))
        .collect()
}

/// Every device plugin resource of a set's members: a node that lost any
/// of them is out.
fn resources_of(members: &[Member]) -> Vec<String> {
    members
        .iter()
        .filter(|m| m.dra.is_none())
        .map(|m| m.resource.clone())
        .collect()
}

fn needs(unplaced: &[&Member]) -> BTreeMap<String, u64> {
    let mut need = BTreeMap::new();
    for m in unplaced.iter().filter(|m| m.dra.is_none()) {
        add_to(&mut need, m.resource.clone(), u64::from(m.claim.spec.count));
    }
    need
}
