//! Each actor's recent decisions, for `/debug/claims/<ns>/<name>` and
//! tests: a bounded ring, so an actor's memory does not grow with time.

use crate::rules::RuleId;
use serde::{Serialize, Serializer};
use std::collections::VecDeque;
use std::fmt;

/// What an actor set out to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intent {
    AddFinalizer,
    RemoveFinalizer,
    WriteStatus,
    DeleteClaim,
    /// L8: delete the allocation, then remove the finalizer.
    Release,
    /// L12: delete the unscheduled VMI.
    DeleteVmi,
    /// L9/L10: read pods or the VMI live before releasing.
    ReadLive,
    /// G2: create a template claim.
    CreateClaim,
    /// Delete an allocation whose claim is gone.
    DeleteAllocation,
    /// G4: allocations, statuses, pods.
    Place,
    /// G5: Waiting conditions.
    Wait,
    /// E2: remove the marks of restarts that are over.
    EndRestarts,
    /// D4: a stopped VM's backing claim made or allocated again.
    RestoreBackingClaim,
    /// D4: the backing claim of a GPUClaim that is gone, let go.
    ReleaseBackingClaim,
    /// D7: a managed pool's DeviceTaintRule made, undone or deleted.
    WriteTaintRule,
    /// D8: a record moved off a device another ResourceClaim names.
    GiveUpDevice,
}

impl Intent {
    pub fn as_str(self) -> &'static str {
        match self {
            Intent::AddFinalizer => "add-finalizer",
            Intent::RemoveFinalizer => "remove-finalizer",
            Intent::WriteStatus => "write-status",
            Intent::DeleteClaim => "delete-claim",
            Intent::Release => "release",
            Intent::DeleteVmi => "delete-vmi",
            Intent::ReadLive => "read-live",
            Intent::CreateClaim => "create-claim",
            Intent::DeleteAllocation => "delete-allocation",
            Intent::Place => "place",
            Intent::Wait => "wait",
            Intent::WriteTaintRule => "write-taint-rule",
            Intent::GiveUpDevice => "give-up-device",
            Intent::EndRestarts => "end-restarts",
            Intent::RestoreBackingClaim => "restore-backing-claim",
            Intent::ReleaseBackingClaim => "release-backing-claim",
        }
    }
}

impl fmt::Display for Intent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What came of an intent.
#[derive(Clone, Debug, PartialEq)]
pub enum DecisionResult {
    Ok,
    /// L8: the claim let go of its GPUs.
    Released,
    /// 409: decided again on the live object.
    Conflict,
    /// A live read says a VMI still uses the claim.
    InUse,
    /// Not found: the object is gone.
    Gone,
    /// Failed; retried after the backoff.
    Error(String),
}

impl fmt::Display for DecisionResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecisionResult::Ok => f.write_str("ok"),
            DecisionResult::Released => f.write_str("released"),
            DecisionResult::Conflict => f.write_str("conflict"),
            DecisionResult::InUse => f.write_str("in use"),
            DecisionResult::Gone => f.write_str("not found"),
            DecisionResult::Error(e) => write!(f, "error: {e}"),
        }
    }
}

fn as_display<T: fmt::Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// One decision: when, by which rule, what it meant to do and what came of it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Decision {
    /// Milliseconds since the process (or simulation) started.
    pub at_ms: u64,
    #[serde(serialize_with = "as_display")]
    pub rule: RuleId,
    #[serde(serialize_with = "as_display")]
    pub intent: Intent,
    #[serde(serialize_with = "as_display")]
    pub result: DecisionResult,
}

/// The last few decisions. Allocated on first use: most actors of a
/// converged cluster never decide anything.
#[derive(Default, Debug)]
pub struct DecisionLog(Option<VecDeque<Decision>>);

impl DecisionLog {
    pub const CAPACITY: usize = 16;

    pub fn push(&mut self, d: Decision) {
        let ring = self
            .0
            .get_or_insert_with(|| VecDeque::with_capacity(Self::CAPACITY));
        if ring.len() == Self::CAPACITY {
            ring.pop_front();
        }
        ring.push_back(d);
    }

    pub fn to_vec(&self) -> Vec<Decision> {
        self.0
            .as_ref()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }
}
