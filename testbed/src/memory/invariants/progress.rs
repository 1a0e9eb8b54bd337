//! I6 on a settled cluster: no set waits at the gate that a controller
//! started afresh, knowing only the objects, would place now.

use super::*;

/// I6 on a settled cluster: the sets that wait at the gate though a freshly
/// started controller, knowing nothing but the objects, would place them
/// now. Empty when the controller remembers nothing that outlived what it
/// was about.
/// A head of line holds sets back as `config.queueing` says (O2), since
/// what its claims' `QueueHead` condition says.
pub fn progress(c: &MemCluster, config: &gpu_claims_actors::config::Config) -> Vec<String> {
    let fresh = super::fresh::world_of(c);
    let after = config.queueing.head_of_line_after;
    let now = c.store.wall_now();
    let mut v = Vec::new();
    super::records::backing_claims_hold(
        &all(c, Kind::Claim, |o| match o {
            Obj::Claim(x) => Some(x),
            _ => None,
        }),
        &all(c, Kind::Allocation, |o| match o {
            Obj::Allocation(x) => Some(x),
            _ => None,
        }),
        &all(c, Kind::ResourceClaim, |o| match o {
            Obj::ResourceClaim(x) => Some(x),
            _ => None,
        }),
        &mut v,
    );
    let none = gpu_claims_actors::rules::WrittenAllocations::default();
    // D8 once settled: no claim keeps a device another ResourceClaim names
    // while no VM uses it and its node has another (it moves), nor stays
    // placed where it has none (it is Lost).
    fresh.for_each_claim(|c| {
        use gpu_claims_actors::rules::{DeviceTaken, device_taken};
        let k = ns_key(&c.metadata);
        match device_taken(c, &fresh, &none) {
            Some(DeviceTaken::Move(g)) => v.push(format!(
                "D8: claim {k} keeps a device named twice ({}) though no VM uses it and its node has another",
                g.taken
            )),
            Some(DeviceTaken::Lost(t)) => v.push(format!(
                "D8: claim {k} is {} on a device named twice ({t}) with no other on its node, not Lost",
                c.phase().as_str()
            )),
            Some(DeviceTaken::InUse(_)) | None => {}
        }
    });
    fresh.for_each_vmi(|vmi_key, vmi| {
        let held = super::queue::fresh_holding(&fresh, vmi_key, after, now);
        if let gpu_claims_actors::rules::GateStep::Place(plan) =
            gpu_claims_actors::rules::decide_gate_held(vmi, &fresh, &none, &held)
        {
            // What its claims say now, to tell why the controller waits.
            let says: Vec<String> = plan
                .statuses
                .iter()
                .map(|(c, _)| {
                    let waiting = c
                        .conditions()
                        .iter()
                        .find(|x| x.type_ == gpu_claims_actors::api::CONDITION_WAITING)
                        .map(|x| format!("{}: {}", x.reason, x.message));
                    format!(
                        "{} {} {:?}",
                        c.metadata.name.as_deref().unwrap_or_default(),
                        c.phase().as_str(),
                        waiting
                    )
                })
                .collect();
            v.push(format!(
                "I6: VMI {} waits at the gate, though a fresh controller would place it on {} ({})",
                vmi_key,
                plan.node,
                says.join("; ")
            ));
        }
    });
    v.sort();
    v
}
