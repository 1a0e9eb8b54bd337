//! L2-L7: claims move into and out of Attached as their VMIs come and go.

use super::{ClaimIntent, RuleId, Step};
use crate::api::{
    CONDITION_LOST, CONDITION_WAITING, ClaimPhase, GPUClaim, is_deleting, remove_condition,
    vmi_owner,
};
use crate::config::Config;
use crate::world::World;
use tokio::time::Instant;

/// L6's memory: when this actor first saw the current attachment (to the
/// VMI named here) with its VMI absent. The seed's `attachedSince`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Grace(Option<(String, Instant)>);

impl Grace {
    /// The grace of the attachment to `vmi`, seen in L6's state at `now`:
    /// this one if it counts for `vmi`, else one starting now. A grace
    /// that is not remembered (`Grace::default()`) starts afresh should
    /// the attachment come back.
    pub fn counting(&self, vmi: &str, now: Instant) -> Grace {
        match &self.0 {
            Some((v, _)) if v == vmi => self.clone(),
            _ => Grace(Some((vmi.to_string(), now))),
        }
    }

    /// Since when the grace counts (None: it does not).
    pub fn since(&self) -> Option<Instant> {
        self.0.as_ref().map(|(_, since)| *since)
    }

    pub fn pending(&self) -> Option<&(String, Instant)> {
        self.0.as_ref()
    }
}

/// L2-L7 for one claim (KubeVirt integration on): the step, and L6's
/// grace to remember (counting only while the claim is in L6's state).
pub fn decide_attachment(
    c: &GPUClaim,
    w: &World,
    cfg: &Config,
    now: Instant,
    grace: &Grace,
) -> (Step<ClaimIntent>, Grace) {
    let Some(vmi_name) = c.attached_vmi_name() else {
        // L3: unattached; a template claim whose owner VMI does not live goes.
        if c.is_template() && !is_deleting(&c.metadata) && !w.owner_lives(c) {
            return (Step::Do(RuleId::L3, ClaimIntent::Delete), Grace::default());
        }
        return (Step::Idle, Grace::default());
    };
    let vmi = w.attached_vmi(c);
    match vmi {
        // L4: the VMI lives.
        Some(v) if !v.is_final() => (attach_live(c, w), Grace::default()),
        // L5: the VMI is final, or absent while the claim says Attached or is VMI-owned.
        _ if vmi.is_some()
            || c.phase() == ClaimPhase::Attached
            || vmi_owner(&c.metadata).is_some() =>
        {
            (detach(c, RuleId::L5), Grace::default())
        }
        // L6: the VMI never appeared; detach once the grace has passed.
        _ => {
            let grace = grace.counting(vmi_name, now);
            let due = grace.since().unwrap_or(now) + cfg.attachment_grace;
            if now >= due {
                (detach(c, RuleId::L6), grace)
            } else {
                (Step::WaitUntil(RuleId::L6, due), grace)
            }
        }
    }
}

/// L4: Bound becomes Attached; Lost becomes Attached only when its node is
/// back (exists, Ready, lost set not covering the resource), and loses its
/// Lost condition on the way.
fn attach_live(c: &GPUClaim, w: &World) -> Step<ClaimIntent> {
    let ok = match c.phase() {
        ClaimPhase::Bound => true,
        ClaimPhase::Lost => w.node_is_back(c),
        ClaimPhase::Pending | ClaimPhase::Attached => false,
    };
    if !ok {
        return Step::Idle;
    }
    let mut status = c.status.clone().unwrap_or_default();
    status.phase = Some(ClaimPhase::Attached);
    // Lost=True is shown only while the phase is Lost.
    remove_condition(&mut status.conditions, CONDITION_LOST);
    Step::Do(RuleId::L4, ClaimIntent::WriteStatus(status))
}

/// L7: detach. A template claim is deleted instead (unless already being
/// deleted); otherwise attachedTo is cleared, Waiting removed unless Lost
/// (a Lost claim keeps why it left its node), Attached becomes Bound.
pub fn detach(c: &GPUClaim, rule: RuleId) -> Step<ClaimIntent> {
    if c.is_template() {
        if is_deleting(&c.metadata) {
            return Step::Idle;
        }
        return Step::Do(rule, ClaimIntent::Delete);
    }
    let mut status = c.status.clone().unwrap_or_default();
    status.attached_to = None;
    if c.phase() != ClaimPhase::Lost {
        remove_condition(&mut status.conditions, CONDITION_WAITING);
    }
    // O2: a set no longer waits, so it leads nothing.
    remove_condition(&mut status.conditions, crate::api::CONDITION_QUEUE_HEAD);
    if c.phase() == ClaimPhase::Attached {
        status.phase = Some(ClaimPhase::Bound);
    }
    Step::Do(rule, ClaimIntent::WriteStatus(status))
}
