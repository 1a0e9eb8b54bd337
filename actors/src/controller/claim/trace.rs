//! What `/debug/claims/<ns>/<name>` shows of a claim's actor: its phase,
//! whether I/O is under way, L6's grace left and its recent decisions.

use super::ClaimActor;
use crate::api::ClaimPhase;
use crate::controller::journal::Decision;
use actix::prelude::*;
use serde::Serialize;

/// What `/debug/claims/<ns>/<name>` shows.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimTrace {
    pub claim: String,
    pub phase: Option<&'static str>,
    pub busy: bool,
    /// Seconds until L6's grace runs out, when it is counting.
    pub grace_left_s: Option<f64>,
    pub decisions: Vec<Decision>,
}

#[derive(Message)]
#[rtype(result = "ClaimTrace")]
pub struct GetTrace;

impl Handler<GetTrace> for ClaimActor {
    type Result = MessageResult<GetTrace>;
    fn handle(&mut self, _: GetTrace, _: &mut Context<Self>) -> Self::Result {
        let claim = self.env.world.claim(&self.key);
        let now = self.env.clock.now();
        let cfg = self.env.world.config();
        let grace_left_s = self.role.mem.grace.pending().map(|(_, since)| {
            (*since + cfg.attachment_grace)
                .saturating_duration_since(now)
                .as_secs_f64()
        });
        MessageResult(ClaimTrace {
            claim: self.key.clone(),
            phase: claim.map(|c| c.phase()).map(ClaimPhase::as_str),
            busy: self.pacer.busy(),
            grace_left_s,
            decisions: self.pacer.decisions(),
        })
    }
}
