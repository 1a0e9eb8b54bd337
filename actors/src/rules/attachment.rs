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
    /// When the attachment to `vmi` was first seen in L6's state; starts now if not.
    pub fn since(&mut self, vmi: &str, now: Instant) -> Instant {
        match &self.0 {
            Some((v, since)) if v == vmi => *since,
            _ => {
                self.0 = Some((vmi.to_string(), now));
                now
            }
        }
    }

    /// The attachment left L6's state: its grace starts afresh if it comes back.
    pub fn forget(&mut self) {
        self.0 = None;
    }

    pub fn pending(&self) -> Option<&(String, Instant)> {
        self.0.as_ref()
    }
}

/// L2-L7 for one claim (KubeVirt integration on).
pub fn decide_attachment(
    c: &GPUClaim,
    w: &World,
    cfg: &Config,
    now: Instant,
    grace: &mut Grace,
) -> Step {
    let Some(vmi_name) = c.attached_vmi_name() else {
        grace.forget();
        // L3: unattached; a template claim whose owner VMI does not live goes.
        if c.is_template() && !is_deleting(&c.metadata) && !w.owner_lives(c) {
            return Step::Write(RuleId::L3, ClaimIntent::Delete);
        }
        return Step::Idle;
    };
    let vmi = w.attached_vmi(c);
    match vmi {
        // L4: the VMI lives.
        Some(v) if !v.is_final() => {
            grace.forget();
            attach_live(c, w)
        }
        // L5: the VMI is final, or absent while the claim says Attached or is VMI-owned.
        _ if vmi.is_some()
            || c.phase() == ClaimPhase::Attached
            || vmi_owner(&c.metadata).is_some() =>
        {
            grace.forget();
            detach(c, RuleId::L5)
        }
        // L6: the VMI never appeared; detach once the grace has passed.
        _ => {
            let since = grace.since(vmi_name, now);
            let due = since + cfg.attachment_grace;
            if now >= due {
                detach(c, RuleId::L6)
            } else {
                Step::WaitUntil(RuleId::L6, due)
            }
        }
    }
}

/// L4: Bound becomes Attached; Lost becomes Attached only when its node is
/// back (exists, Ready, lost set not covering the resource), and loses its
/// Lost condition on the way.
fn attach_live(c: &GPUClaim, w: &World) -> Step {
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
    Step::Write(RuleId::L4, ClaimIntent::WriteStatus(status))
}

/// L7: detach. A template claim is deleted instead (unless already being
/// deleted); otherwise attachedTo is cleared, Waiting removed unless Lost
/// (a Lost claim keeps why it left its node), Attached becomes Bound.
pub fn detach(c: &GPUClaim, rule: RuleId) -> Step {
    if c.is_template() {
        if is_deleting(&c.metadata) {
            return Step::Idle;
        }
        return Step::Write(rule, ClaimIntent::Delete);
    }
    let mut status = c.status.clone().unwrap_or_default();
    status.attached_to = None;
    if c.phase() != ClaimPhase::Lost {
        remove_condition(&mut status.conditions, CONDITION_WAITING);
    }
    if c.phase() == ClaimPhase::Attached {
        status.phase = Some(ClaimPhase::Bound);
    }
    Step::Write(rule, ClaimIntent::WriteStatus(status))
}
