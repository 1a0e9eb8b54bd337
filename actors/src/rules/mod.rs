//! The lifecycle rules (docs/design.md, L1-L12), as pure decisions: given a claim
//! (or class), the world, the config and the time, what to do next. The
//! actors own timing, ordering and I/O; these own meaning.
//!
//! One write at a time: a claim actor applies the first step that is due,
//! then decides again on the result, so a crash between two writes leaves
//! a state from which the next decision follows.

mod allocations;
mod attachment;
mod class;
mod evacuation;
mod finalizer;
mod gate;
mod lost;
mod managed_pools;
pub mod queueing;
mod quota;
mod release;
mod request;
pub mod scheduling;
mod template;
mod unschedulable;

pub use allocations::{ALLOCATION_GRACE, allocation_missing, decide_allocation_report};
pub use attachment::{Grace, decide_attachment};
pub use class::{ClassIntent, capacity_of, class_missing, class_status, decide_class};
pub use evacuation::{
    EvacuationCounts, EvacuationStep, Evacuee, MarkState, NO_VM_OWNER, Restart, decide_evacuation,
    evacuees, judge_mark, restart_done, restart_waits, timed_out_at, vm_owner,
};
pub use finalizer::{needs_finalizer, released};
pub use gate::{
    AllocationWrite, Assumed, BACKING_FINALIZER, BACKING_OWNER_ANNOTATION, BACKING_REQUEST,
    DeviceClaimWrite, DeviceTaken, Forgotten, GateStep, GiveUp, Lead, Moved, NodesThatMatter, Plan,
    Restore, Roomless, Taken, Unfit, WaitReason, WrittenAllocations, allocated_devices,
    at_the_gate, backing_claim, backing_claim_to_let_go, backing_claim_to_restore, controlled_by,
    could_move_off, decide_gate, decide_gate_held, device_taken, lost_to_another,
    orphaned_backing_claim, owned_by, pod_unfit, request_mismatch, requested_claims, reserved,
    taken_device,
};
pub use lost::{LostReason, decide_lost, lost_reason, node_failed};
pub use managed_pools::{PoolRuleWrite, decide_pool, decide_stray, desired_rule, rule_name};
pub use quota::{decide_quota, quota_status};
pub use release::{LiveVmi, Used, pods_left_gate, used_by_vmi, vmi_holds};
pub use request::{
    TemplateAsk, asks_for_gpus, named_claims, template_asks, unseen_claim, unseen_template,
    vmi_request,
};
pub use template::{TemplateStep, allocation_is_orphan, decide_template, template_name};
pub use unschedulable::{Unplaceable, unplaceable_pod, unschedulable_vmi};

use crate::api::{CLAIM_FINALIZER, GPUClaim, GPUClaimStatus, has_finalizer, is_deleting};
use crate::config::Config;
use crate::world::World;
use std::fmt;
use tokio::time::Instant;

/// The rule that decided a step: carried into logs, traces and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum RuleId {
    L1,
    L3,
    L4,
    L5,
    L6,
    L7,
    L8,
    L9,
    L10,
    L11,
    L12,
    /// G6: a claim on a failed node becomes Lost, and Bound when it is back.
    G6,
    /// G2: a live VMI's template claim is created.
    G2,
    /// G4: a placed set's writes (record, status, pod).
    G4,
    /// G5: a set that cannot be placed waits, and says why.
    G5,
    /// G7: a VMI whose pinned launcher pod the scheduler cannot place is deleted.
    G7,
    /// E1: a held claim moves off a node that cannot take its VM.
    E1,
    /// E2: a VM holding GPUs on an evacuating node is restarted elsewhere.
    E2,
    /// Allocations: an allocation whose claim is gone is deleted, and a
    /// claim whose allocation is gone is reported (docs/design.md, "Objects").
    Allocations,
    /// Class status: capacity and allocated.
    ClassStatus,
    /// D1: a DRA class says why it serves no device (SelectorInvalid,
    /// DRAUnavailable), or stops saying it.
    D1,
    /// D4: a ResourceClaim allocated to a record's devices.
    D4,
    /// D6: a claim of a DRA class whose devices are lost becomes Lost.
    D6,
    /// D7: a managed pool's DeviceTaintRule written, undone or deleted.
    D7,
    /// D8: a record's device another ResourceClaim names is given up.
    D8,
    /// Q2: a GPUQuota's status (used, usedTotal, ClassMissing).
    Q2,
    /// O2: a set leads its class, or starts holding others back.
    O2,
    /// Objects: a VMI's GPU annotations that cannot be used are reported.
    Annotations,
}

impl RuleId {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleId::L1 => "L1",
            RuleId::L3 => "L3",
            RuleId::L4 => "L4",
            RuleId::L5 => "L5",
            RuleId::L6 => "L6",
            RuleId::L7 => "L7",
            RuleId::L8 => "L8",
            RuleId::L9 => "L9",
            RuleId::L10 => "L10",
            RuleId::L11 => "L11",
            RuleId::L12 => "L12",
            RuleId::G6 => "G6",
            RuleId::G2 => "G2",
            RuleId::G4 => "G4",
            RuleId::G5 => "G5",
            RuleId::G7 => "G7",
            RuleId::E1 => "E1",
            RuleId::E2 => "E2",
            RuleId::Allocations => "allocations",
            RuleId::ClassStatus => "class-status",
            RuleId::D1 => "D1",
            RuleId::D4 => "D4",
            RuleId::D6 => "D6",
            RuleId::D7 => "D7",
            RuleId::D8 => "D8",
            RuleId::Q2 => "Q2",
            RuleId::O2 => "O2",
            RuleId::Annotations => "annotations",
        }
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A write a claim actor makes.
#[derive(Clone, Debug, PartialEq)]
pub enum ClaimIntent {
    /// L1: add the claim finalizer.
    AddFinalizer,
    /// L3 / L7: delete the (template) claim, preconditioned on its UID.
    Delete,
    /// L4 / L7: write this status.
    WriteStatus(GPUClaimStatus),
    /// L8: delete the record (if one of this claim is cached and not yet
    /// deleted: the actor knows), then remove the finalizer.
    Release,
    /// D4: take our finalizer off the claim's backing claim, which someone
    /// deleted and no pod holds any more (so that it goes, and the VM's
    /// next start makes it anew).
    LetGoBackingClaim,
    /// L12: delete the unscheduled VMI, preconditioned on what the cache showed.
    DeleteVmi {
        name: String,
        uid: String,
        resource_version: String,
    },
    /// L9: every launcher pod of the claim is gated in the cache: read
    /// these pods live, and release (L8) unless one runs.
    ReleaseUnlessPodsLeft { names: Vec<String> },
    /// L10: no VMI cache (integration off): read the VMI live, and release
    /// (L8) unless it holds the claim.
    ReleaseUnlessVmiHolds { name: String },
}

/// What the actor of an object (a claim, a class, a quota) does next; `I`
/// is what its kind's actor knows how to carry out.
#[derive(Clone, Debug, PartialEq)]
pub enum Step<I> {
    /// Carry this out (a write, or a live read that decides one), then
    /// decide again.
    Do(RuleId, I),
    /// Nothing now; decide again at this instant (L6's grace timer).
    WaitUntil(RuleId, Instant),
    /// Nothing to do until the world changes.
    Idle,
}

/// L12 deletions this actor has already issued: (VMI uid, resourceVersion).
/// A lagging cache still shows that VMI; deleting it again would change nothing.
pub type IssuedVmiDelete = Option<(String, String)>;

/// The next step for one claim: L1, then the attachment rules L2-L7, then
/// L12, then release L8-L10, as the seed's pass orders them; and what the
/// actor remembers after it.
pub fn decide_claim(
    c: &GPUClaim,
    w: &World,
    cfg: &Config,
    now: Instant,
    wall: k8s_openapi::jiff::Timestamp,
    mem: &ClaimMemory,
) -> (Step<ClaimIntent>, ClaimMemory) {
    let mut next = mem.clone();
    if needs_finalizer(&c.metadata, CLAIM_FINALIZER) {
        return (Step::Do(RuleId::L1, ClaimIntent::AddFinalizer), next);
    }
    let wall = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(wall);
    if cfg.kubevirt.enabled {
        match decide_lost(c, w, wall.clone()) {
            Step::Idle => {}
            step => return (step, next),
        }
        let (step, grace) = decide_attachment(c, w, cfg, now, &mem.grace);
        next.grace = grace;
        if step != Step::Idle {
            return (step, next);
        }
        if let Some(intent) = unschedulable_vmi(c, w, &mem.issued) {
            return (Step::Do(RuleId::L12, intent), next);
        }
    }
    if is_deleting(&c.metadata) && has_finalizer(&c.metadata, CLAIM_FINALIZER) {
        let (used, grace) = used_by_vmi(c, w, cfg, now, &next.grace);
        next.grace = grace;
        let step = match used {
            Used::Yes => Step::Idle,
            Used::No => Step::Do(RuleId::L8, ClaimIntent::Release),
            Used::ReadPods { names, .. } => {
                Step::Do(RuleId::L9, ClaimIntent::ReleaseUnlessPodsLeft { names })
            }
            Used::ReadVmi { name, .. } => {
                Step::Do(RuleId::L10, ClaimIntent::ReleaseUnlessVmiHolds { name })
            }
        };
        return (step, next);
    }
    if backing_claim_to_let_go(c, w) {
        return (Step::Do(RuleId::D4, ClaimIntent::LetGoBackingClaim), next);
    }
    let (step, since) = decide_allocation_report(c, w, now, wall, mem.allocation_missing_since);
    next.allocation_missing_since = since;
    (step, next)
}

/// What a claim actor remembers between decisions (the seed's controller
/// state, per claim).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimMemory {
    /// L6: since when the attachment's VMI has been missing.
    pub grace: Grace,
    /// L12: the VMI deletes already issued.
    pub issued: IssuedVmiDelete,
    /// Allocations: since when the claim's allocation has been missing.
    pub allocation_missing_since: Option<Instant>,
}
