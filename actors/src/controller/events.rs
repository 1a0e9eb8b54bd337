//! The Events a claim actor publishes: one per transition it wrote, and
//! one per write the API server refused, each with the rule id in the
//! message (and as the Event's action), so that `kubectl describe
//! gpuclaim` tells the claim's story in docs/design.md's words.

use super::Env;
use super::journal::Intent;
use crate::api::GPUClaim;
use crate::ports::{Event, Kind, ObjRef};
use crate::rules::RuleId;
use crate::world::split_key;

fn event(
    key: &str,
    uid: Option<String>,
    rule: RuleId,
    warning: bool,
    reason: &str,
    message: String,
) -> Event {
    let (ns, name) = split_key(key);
    Event {
        regarding: ObjRef::new(Kind::Claim, Some(ns), name),
        uid,
        warning,
        reason: reason.into(),
        message: format!("{rule}: {message}"),
        rule,
        related: None,
    }
}

/// The Event for a write that landed; None for writes that report
/// themselves (the records report) or change no phase worth telling.
pub fn transition(
    key: &str,
    rule: RuleId,
    intent: Intent,
    before: &GPUClaim,
    after: Option<&GPUClaim>,
) -> Option<Event> {
    let uid = before.metadata.uid.clone();
    let (reason, message) = match intent {
        _ if rule == RuleId::Allocations => return None,
        Intent::AddFinalizer => (
            "FinalizerAdded",
            "protected by the claim finalizer".to_string(),
        ),
        Intent::DeleteClaim => (
            "Deleted",
            "deleted with its VMI, which is gone or done".to_string(),
        ),
        Intent::DeleteVmi => (
            "VmiDeleted",
            "deleted the unscheduled VMI pinned to a lost node".to_string(),
        ),
        Intent::Release | Intent::ReadLive => (
            "Released",
            "nothing holds the GPUs any more; allocation and finalizer removed".to_string(),
        ),
        Intent::WriteStatus => {
            let after = after?;
            let phase = after.phase();
            if phase == before.phase() && after.attached_vmi_name() == before.attached_vmi_name() {
                return None;
            }
            let node = after.node_name().unwrap_or("-");
            let message = match after.attached_vmi_name() {
                Some(vmi) => format!("{} on node {node}, attached to VMI {vmi}", phase.as_str()),
                None => format!("{} on node {node}", phase.as_str()),
            };
            (phase.as_str(), message)
        }
        _ => return None,
    };
    Some(event(key, uid, rule, false, reason, message))
}

/// E1's Event on a claim that moved off a node that cannot take its VM:
/// where from, why, and where to.
pub fn moved(key: &str, c: &GPUClaim, from: &crate::rules::Moved, to: &str) -> Event {
    event(
        key,
        c.metadata.uid.clone(),
        RuleId::E1,
        false,
        "Moved",
        format!("moved from node {} to {to}: {}", from.node, from.why),
    )
}

/// A claim of a class that does not exist, said on the claim (before
/// any VM uses it): the classes there are.
pub fn class_missing(key: &str, c: &GPUClaim, message: String) -> Event {
    event(
        key,
        c.metadata.uid.clone(),
        RuleId::G5,
        true,
        "ClassMissing",
        message,
    )
}

/// D8's Event on a claim whose record moved off a device another
/// ResourceClaim names: which, and the devices it holds now.
pub fn device_taken(
    key: &str,
    c: &GPUClaim,
    taken: &crate::rules::Taken,
    now: &crate::api::GPUAllocation,
) -> Event {
    let devices: Vec<&str> = now.spec.devices.iter().map(|d| d.device.as_str()).collect();
    event(
        key,
        c.metadata.uid.clone(),
        RuleId::D8,
        false,
        "DeviceTaken",
        format!(
            "{taken}, and no VM uses this claim: it holds {} of node {} instead",
            devices.join(", "),
            now.spec.node_name
        ),
    )
}

/// D8's Warning while a VM runs on a device another ResourceClaim names:
/// on the GPUClaim, and (`on_claim` false) on that ResourceClaim.
pub fn device_named_twice(key: &str, c: &GPUClaim, taken: &crate::rules::Taken) -> [Event; 2] {
    let message = format!(
        "{taken}, while a VM runs on GPUClaim {key}: two pods may use one GPU until one of them lets go"
    );
    let on_claim = event(
        key,
        c.metadata.uid.clone(),
        RuleId::D8,
        true,
        "DeviceNamedTwice",
        message.clone(),
    );
    let (ns, name) = split_key(&taken.by);
    let (claim_ns, claim_name) = split_key(key);
    let on_other = Event {
        regarding: ObjRef::new(Kind::ResourceClaim, Some(ns), name),
        uid: None,
        warning: true,
        reason: "DeviceNamedTwice".into(),
        message: format!("{}: {message}", RuleId::D8),
        rule: RuleId::D8,
        related: Some((
            ObjRef::new(Kind::Claim, Some(claim_ns), claim_name),
            c.metadata.uid.clone(),
        )),
    };
    [on_claim, on_other]
}

/// The Event for a write the API server refused as invalid: bad input the
/// controller cannot fix, said where the owner of the claim looks.
pub fn refusal(key: &str, uid: Option<String>, rule: RuleId, intent: Intent, error: &str) -> Event {
    event(
        key,
        uid,
        rule,
        true,
        "WriteRefused",
        format!("the API server refused {intent}: {error}"),
    )
}

/// Publishes an Event, best effort, on a detached task of the runtime:
/// an actor that stops next must not cancel it, and an actor's I/O (which
/// runs off the actors' thread, where there is no actix arbiter) may
/// publish too.
pub fn publish(env: &Env, event: Event) {
    let events = env.events.clone();
    tokio::spawn(async move { events.publish(event).await });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{AttachedTo, ClaimPhase, GPUClaimSpec, GPUClaimStatus};

    /// Claim t/a in `phase` on node n1, attached to `vmi`.
    fn claim(phase: ClaimPhase, vmi: Option<&str>) -> GPUClaim {
        let mut c = GPUClaim::new(
            "a",
            GPUClaimSpec {
                class_name: "h200".into(),
                count: 1,
            },
        );
        c.metadata.namespace = Some("t".into());
        c.status = Some(GPUClaimStatus {
            phase: Some(phase),
            node_name: Some("n1".into()),
            attached_to: vmi.map(|v| AttachedTo { vmi: v.into() }),
            conditions: vec![],
        });
        c
    }

    #[test]
    fn a_phase_change_is_told_with_its_rule_and_a_condition_only_change_is_not() {
        let before = claim(ClaimPhase::Bound, None);
        let after = claim(ClaimPhase::Attached, Some("vm"));
        let n = transition(
            "t/a",
            RuleId::L4,
            Intent::WriteStatus,
            &before,
            Some(&after),
        )
        .unwrap();
        assert_eq!(n.reason, "Attached");
        assert_eq!(n.message, "L4: Attached on node n1, attached to VMI vm");
        assert!(transition("t/a", RuleId::L4, Intent::WriteStatus, &after, Some(&after)).is_none());
        assert!(
            transition(
                "t/a",
                RuleId::Allocations,
                Intent::WriteStatus,
                &before,
                Some(&after)
            )
            .is_none()
        );
        let r = refusal(
            "t/a",
            None,
            RuleId::L1,
            Intent::AddFinalizer,
            "invalid: nope",
        );
        assert!(r.warning && r.message.starts_with("L1: "));
    }
}
