//! The story's last scene: a tenant keeps GPUs for a VM it will start
//! again (an idle reservation), so that the cluster `demo --serve` leaves
//! shows what a platform team's dashboard is for: GPUs held and idle, and
//! vm-small still waiting at the gate for room (the queue scene's end).

use super::{B, Ctx, Step, waiting_for};
use crate::fixtures::{MetaBuilder, claim};
use gpu_claims_actors::api::{Kind, to_json};
use std::time::Duration;

/// The claim tenant B keeps between runs.
pub const SPARE_CLAIM: &str = "spare-h200";
const EVAL_VM: &str = "vm-eval";

pub(super) fn steps() -> Vec<Step> {
    let now = Duration::ZERO;
    vec![
        Step {
            title: "Tenant B makes claim spare-h200 (1 x h200) and starts vm-eval naming it",
            rules: "G2 G3 G4 L1 L4",
            act: |c: &Ctx| {
                // As a tenant writes it: no finalizer (L1 adds it).
                let spare = claim(B, SPARE_CLAIM).class("h200").no_finalizer().obj();
                let _ = c.store.create(Kind::Claim.name(), to_json(&spare));
                c.standin.start_vm_with_claims(B, EVAL_VM, &[SPARE_CLAIM]);
            },
            until: |s| s.phase(B, SPARE_CLAIM) == "Attached",
            hold: now,
        },
        Step {
            title: "vm-eval stops: spare-h200 stays Bound, an idle reservation (the dashboard's Idle), \
                    while vm-small still waits for room on gpu-node-8",
            rules: "L5 L7",
            act: |c: &Ctx| c.standin.stop_vm(B, EVAL_VM),
            until: |s| {
                s.phase(B, SPARE_CLAIM) == "Bound"
                    && s.claim(B, SPARE_CLAIM)
                        .is_some_and(|c| c.attached_vmi_name().is_none())
                    && waiting_for(s, B, "vm-small-gpu", "NoCapacity")
            },
            hold: now,
        },
    ]
}
